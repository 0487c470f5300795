//! A random faulty SDW run per seed, judged on spec §6's D1–D8 from what
//! the run recorded: the replies the app hosts received (every accepted or
//! rejected update with its replica and window, every query with its
//! window and result), window samples taken during the run, each
//! replica's log of advances and its counters. Nothing is judged from the
//! protocol's own bookkeeping of what it merged.
//!
//! A seed picks the topology (local-2 or symmetric-4), the duplicate
//! filter, B (finite or not), and per-link faults: i.i.d. drop 0–20 %,
//! duplication 0–10 %, reordering by jitter up to 50 µs (bitmap filter
//! only: the counter filter discards reordered windows by design, §9) —
//! or none at all, for D7; and the ready phase on (80 %) or off.

use std::collections::BTreeMap;

use inca_sim::link::{ChannelConfig, LossModel};
use inca_switch::Nanos;
use inca_verify::{Judgement, SeedResult};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::app::{hash_col, AppReply, AppRequest, OP_QUERY, OP_UPDATE, ST_OK, ST_REJECTED};
use super::config::{Dedup, UNBOUNDED};
use super::recovery::{join, recover_with, RecoveryReport};
use super::rig::{Rig, RigConfig, Topology};
use inca_sim::engine::Fault;
use inca_wire::swish::sdw::win_lt;

/// What a seed chose.
#[derive(Debug, Clone)]
pub struct RunPlan {
    /// Rig configuration.
    pub rig: RigConfig,
    /// Scripts per app host.
    pub scripts: Vec<Vec<(Nanos, AppRequest)>>,
    /// When requests stop (replies in flight land before `end`).
    pub quiet_at: Nanos,
    /// End of the run.
    pub end: Nanos,
    /// Interval between D1 samples.
    pub sample_every: Nanos,
    /// Whether the links are perfect (D7 applies).
    pub lossless: bool,
    /// Fail-stop of these replicas (0-based) at this time, then recovery
    /// by the controller T_detect later (D9).
    pub failure: Option<(Nanos, Vec<usize>)>,
    /// The broken recovery ([`super::recovery::recover_with`]).
    pub broken_recovery: bool,
    /// Failed replicas restarted (empty) at these times, each joining
    /// (§5.6 "Join") [`JOIN_AFTER`] after its restart, in this order.
    pub rejoin: Vec<(Nanos, usize)>,
    /// The broken join ([`super::recovery::join`]): the joiner without M.
    pub broken_join: bool,
}

/// How long after a replica's restart the controller joins it (its
/// session is up again; [our choice]).
pub const JOIN_AFTER: Nanos = 200_000;

/// Distinct keys the workload touches (few, so cells collide and sums
/// mean something) [our choice].
const KEYS: u32 = 24;

/// Draws a run from `seed`; `broken` turns the duplicate filter off and
/// forces duplication on (the broken variant).
pub fn plan(seed: u64, broken: bool) -> RunPlan {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x5344_5721);
    let topology = if rng.gen_bool(0.5) {
        Topology::Local2
    } else {
        Topology::Symmetric4
    };
    let mut rig = RigConfig {
        topology,
        seed,
        ..RigConfig::default()
    };
    let b = &mut rig.base;
    b.rows = rng.gen_range(1..=3);
    b.cols = [1, 4, 16, 64][rng.gen_range(0..4)];
    b.b = if rng.gen_bool(0.5) {
        rng.gen_range(2..8)
    } else {
        UNBOUNDED
    };
    b.dedup = if rng.gen_bool(0.5) {
        Dedup::BitmapPerColumn
    } else {
        Dedup::CounterPerSwitch
    };
    b.break_dedup = broken;
    // The ablation's mode must be correct too (early DATA dropped and
    // retransmitted); D7 applies only with the ready phase on.
    b.ready_phase = rng.gen_bool(0.8);
    let lossless = !broken && rng.gen_bool(0.25);
    if !lossless {
        let p = rng.gen_range(0.0..0.2);
        let dup = if broken {
            rng.gen_range(0.05..0.1)
        } else {
            rng.gen_range(0.0..0.1)
        };
        let jitter = if b.dedup == Dedup::BitmapPerColumn && rng.gen_bool(0.5) {
            rng.gen_range(0..=50_000)
        } else {
            0
        };
        rig.impair = ChannelConfig {
            loss: LossModel::Bernoulli { p },
            duplicate: dup,
            jitter,
            ..ChannelConfig::default()
        };
    }
    let n = topology.replicas();
    let quiet_at = rig.start_at + 400_000;
    let mut scripts = vec![Vec::new(); n];
    let mut req_id = 0;
    for (i, s) in scripts.iter_mut().enumerate() {
        let mut t = rig.start_at + rng.gen_range(0..2_000);
        while t < quiet_at {
            req_id += 1;
            let op = match rng.gen_range(0..10) {
                0..=4 => OP_UPDATE,
                5..=7 => OP_QUERY,
                _ => OP_UPDATE | OP_QUERY,
            };
            s.push((
                t,
                AppRequest {
                    op,
                    req_id: (i as u32) << 24 | req_id,
                    key: rng.gen_range(0..KEYS),
                    value: rng.gen_range(1..1_000),
                },
            ));
            t += rng.gen_range(200..3_000);
        }
    }
    RunPlan {
        rig,
        scripts,
        quiet_at,
        end: quiet_at + 100_000,
        sample_every: 1_000,
        lossless,
        failure: None,
        broken_recovery: false,
        rejoin: Vec::new(),
        broken_join: false,
    }
}

/// Draws a recovery run from `seed` (D9): symmetric-4, 1 to 3 replicas
/// fail-stop mid-run, the controller recovers the rest; light link faults.
pub fn plan_recovery(seed: u64) -> RunPlan {
    let mut p = plan(seed, false);
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x5245_4356);
    p.rig.topology = Topology::Symmetric4;
    p.rig.base.b = UNBOUNDED;
    p.rig.base.cols = [1, 4, 16][rng.gen_range(0..3)];
    p.rig.base.ready_phase = true;
    p.lossless = false;
    p.rig.impair = ChannelConfig {
        loss: LossModel::Bernoulli {
            p: rng.gen_range(0.0..0.05),
        },
        duplicate: rng.gen_range(0.0..0.05),
        ..ChannelConfig::default()
    };
    let f = rng.gen_range(1..=3);
    let mut failed: Vec<usize> = (0..4).collect();
    while failed.len() > f {
        failed.swap_remove(rng.gen_range(0..failed.len()));
    }
    failed.sort_unstable();
    let t_fail = p.rig.start_at + rng.gen_range(50_000..200_000);
    // Requests go on through the recovery and stop well after it.
    let t_detect = p.rig.t_detect;
    p.quiet_at = t_fail + t_detect + 20_000_000;
    p.end = p.quiet_at + 100_000;
    // Dense around the failure and the recovery, sparse later.
    let dense_until = t_fail + t_detect + 2_000_000;
    p.scripts = mixed_scripts(&mut rng, 4, p.rig.start_at, p.quiet_at, |t| t < dense_until);
    p.failure = Some((t_fail, failed));
    p
}

/// Request scripts for `n` app hosts from `start` to `quiet`: updates,
/// queries or both on [`KEYS`] keys, every 0.5–4 µs while `dense(t)` and
/// every 50–200 µs otherwise.
fn mixed_scripts(
    rng: &mut ChaCha8Rng,
    n: usize,
    start: Nanos,
    quiet: Nanos,
    dense: impl Fn(Nanos) -> bool,
) -> Vec<Vec<(Nanos, AppRequest)>> {
    let mut scripts = vec![Vec::new(); n];
    let mut req_id = 0;
    for (i, s) in scripts.iter_mut().enumerate() {
        let mut t = start + rng.gen_range(0..2_000);
        while t < quiet {
            req_id += 1;
            let op = [OP_UPDATE, OP_QUERY, OP_UPDATE | OP_QUERY][rng.gen_range(0..3)];
            s.push((
                t,
                AppRequest {
                    op,
                    req_id: (i as u32) << 24 | req_id,
                    key: rng.gen_range(0..KEYS),
                    value: rng.gen_range(1..1_000),
                },
            ));
            t += if dense(t) {
                rng.gen_range(500..4_000)
            } else {
                rng.gen_range(50_000..200_000)
            };
        }
    }
    scripts
}

/// Draws a join run from `seed` (§5.6 "Join"): a recovery run
/// ([`plan_recovery`]) in which 1 to all of the failed replicas restart
/// empty, a few ms apart after the recovery, and join again, their hosts
/// sending all along; dense requests around each join.
pub fn plan_join(seed: u64) -> RunPlan {
    let mut p = plan_recovery(seed);
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x4A4F_494E);
    let Some((t_fail, failed)) = p.failure.clone() else {
        return p;
    };
    let k = rng.gen_range(1..=failed.len());
    let mut who = failed.clone();
    while who.len() > k {
        who.swap_remove(rng.gen_range(0..who.len()));
    }
    // A recovery or a join of four replicas takes about 10 ms of serial
    // RPCs (each register operation 50 µs + 2.58 µs per entry, §8.1, and
    // the 100 µs RTT); restarts come after the one before is done [our
    // choice: 12–16 ms apart].
    let mut t = t_fail + p.rig.t_detect;
    for i in who {
        t += rng.gen_range(12_000_000..16_000_000);
        p.rejoin.push((t, i));
    }
    let last = p.rejoin.last().map_or(t, |r| r.0);
    p.quiet_at = p.quiet_at.max(last + 20_000_000);
    p.end = p.quiet_at + 100_000;
    let t_detect = p.rig.t_detect;
    let joins: Vec<Nanos> = p.rejoin.iter().map(|r| r.0).collect();
    p.scripts = mixed_scripts(&mut rng, 4, p.rig.start_at, p.quiet_at, |t| {
        t < t_fail + t_detect + 2_000_000
            || joins
                .iter()
                .any(|&j| t + 500_000 >= j && t < j + JOIN_AFTER + 3_000_000)
    });
    p
}

/// What a run recorded.
#[derive(Debug, Clone, Default)]
pub struct Facts {
    /// Replies per replica, in arrival order.
    pub replies: Vec<Vec<(Nanos, AppReply)>>,
    /// Send time of every request, by id.
    pub sent: BTreeMap<u32, Nanos>,
    /// Window samples: (time, window per replica).
    pub samples: Vec<(Nanos, Vec<u32>)>,
    /// Advance log per replica.
    pub advances: Vec<Vec<(u32, Nanos)>>,
    /// (early, retx) per replica.
    pub early_retx: Vec<(u64, u64)>,
    /// Final windows.
    pub final_win: Vec<u32>,
    /// Where two replicas end in the same window: whether their whole R_r
    /// agrees ((i, j, equal)).
    pub final_snapshots: Vec<(usize, usize, bool)>,
    /// Requests sent and replies received.
    pub requests: u64,
    /// Windows each replica advanced after the load stopped (D6).
    pub moved_after_end: Vec<u32>,
    /// Replicas that failed (0-based).
    pub failed: Vec<usize>,
    /// What the controller's recovery did.
    pub recovery: Option<RecoveryReport>,
    /// Joins: (replica, its restart time, what the join did).
    pub joins: Vec<(usize, Nanos, RecoveryReport)>,
    /// Every live replica's whole R_r at the end (rows × cols), with its
    /// window.
    pub final_cells: Vec<Option<(u32, Vec<Vec<u32>>)>>,
}

/// How long a run waits after its end for every replica to advance two
/// more windows (D6) [our choice: far above a window's time under 20 %
/// loss].
pub const LIVENESS_WAIT: Nanos = 10_000_000;

/// Which life of replica `i` a reply at time `t` in window `win` is from:
/// up to its restart (or it never restarted), after its restart but before
/// its join (the replica runs from empty state, then is closed while it is
/// installed), or after its join (window wmax + 1 on: an update accepted
/// once its window is written is kept, even before the START).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Life {
    First,
    Down,
    Joined,
}

impl Facts {
    fn life(&self, i: usize, t: Nanos, win: u32) -> Life {
        // Replies in flight when a replica crashes arrive after the crash:
        // its first life ends at its restart.
        match self.joins.iter().find(|j| j.0 == i) {
            Some(j) if t >= j.1 && win_lt(j.2.wmax, win) => Life::Joined,
            Some(j) if t >= j.1 => Life::Down,
            _ => Life::First,
        }
    }

    /// Whether replica `i` is a member at the end.
    fn live_at_end(&self, i: usize) -> bool {
        !self.failed.contains(&i) || self.joins.iter().any(|j| j.0 == i)
    }

    /// The join of replica `i`, if it joined.
    fn join_of(&self, i: usize) -> Option<&RecoveryReport> {
        self.joins.iter().find(|j| j.0 == i).map(|j| &j.2)
    }
}

/// Runs `plan` and collects the facts.
pub fn run(plan: &RunPlan) -> Result<Facts, String> {
    let mut rig = Rig::build(&plan.rig, &plan.scripts)?;
    let n = rig.replicas.len();
    let mut f = Facts::default();
    // Replicas declared failed now (the controller's view).
    let mut down: Vec<usize> = Vec::new();
    if let Some((at, failed)) = &plan.failure {
        for &i in failed {
            rig.sim.schedule(*at, Fault::Crash(rig.replicas[i]));
        }
        f.failed = failed.clone();
    }
    for &(at, i) in &plan.rejoin {
        rig.sim.schedule(at, Fault::Restart(rig.replicas[i]));
    }
    let mut rejoin = plan.rejoin.iter().copied().peekable();
    let mut t = plan.rig.start_at;
    let mut at_end: Option<Vec<Option<u32>>> = None;
    let mut last: Vec<Option<u32>> = vec![None; n];
    // The controller's work may outlast the plan: liveness is judged from
    // 1 ms after its last step at the earliest.
    let mut end = plan.end;
    while t < end + LIVENESS_WAIT {
        t += plan.sample_every;
        rig.sim.run_until(t, |_| {});
        if let Some((at, failed)) = &plan.failure {
            if t >= at + plan.rig.t_detect && f.recovery.is_none() {
                f.recovery = Some(recover_with(&mut rig, failed, plan.broken_recovery)?);
                down = failed.clone();
                t = rig.sim.now();
                end = end.max(t + 1_000_000);
                continue;
            }
            if t >= *at && f.recovery.is_none() {
                // Between the failure and the recovery: D1 does not apply.
                continue;
            }
        }
        if let Some(&(at, i)) = rejoin.peek() {
            if t >= at + JOIN_AFTER {
                if f.recovery.is_none() {
                    return Err(format!("replica {} restarts before the recovery", i + 1));
                }
                rejoin.next();
                let r = join(&mut rig, &down, i, plan.broken_join)?;
                f.joins.push((i, at, r));
                down.retain(|&d| d != i);
                t = rig.sim.now();
                end = end.max(t + 1_000_000);
                continue;
            }
        }
        let all: Vec<Option<u32>> = (0..n)
            .map(|i| {
                if down.contains(&i)
                    || (f.recovery.is_none()
                        && f.failed.contains(&i)
                        && plan.failure.as_ref().is_some_and(|x| t >= x.0))
                {
                    None
                } else {
                    rig.window(i)
                }
            })
            .collect();
        let w: Vec<u32> = all.iter().flatten().copied().collect();
        last = all.clone();
        if t >= end {
            // D6's liveness: after the load, every replica must still
            // advance; wait (bounded) until each has moved two windows.
            let base = at_end.get_or_insert_with(|| all.clone());
            let done = all.iter().zip(base.iter()).all(|(a, b)| match (a, b) {
                (Some(a), Some(b)) => a.wrapping_sub(*b) >= 2,
                _ => true,
            });
            f.samples.push((t, w));
            if done {
                break;
            }
            continue;
        }
        f.samples.push((t, w));
    }
    f.moved_after_end = match at_end {
        Some(b) => last
            .iter()
            .zip(&b)
            .map(|(a, b)| match (a, b) {
                (Some(a), Some(b)) => a.wrapping_sub(*b),
                _ => 0,
            })
            .collect(),
        None => vec![0; n],
    };
    for i in 0..n {
        let h = rig.host(i).ok_or("no host")?;
        f.replies.push(h.replies.clone());
        f.requests += h.sent.len() as u64;
        f.sent.extend(h.sent.iter().copied());
        let s = rig.switch(i).ok_or("no replica")?;
        let p = s.program();
        f.advances.push(p.advances.clone());
        f.early_retx.push((p.counters.early, p.counters.retx));
        f.final_win.push(p.peek_window(s.objects()).unwrap_or(0));
        let v = s.violations();
        if !v.is_empty() {
            return Err(format!("replica {}: access violation {:?}", i + 1, v[0]));
        }
    }
    let base = &plan.rig.base;
    for i in 0..n {
        if !f.live_at_end(i) {
            f.final_cells.push(None);
            continue;
        }
        let s = rig.switch(i).ok_or("no replica")?;
        let w = f.final_win[i];
        let cells = (0..usize::from(base.rows))
            .map(|r| {
                (0..base.cols)
                    .map(|c| s.program().peek_query(s.objects(), r, c, w).unwrap_or(0))
                    .collect()
            })
            .collect();
        f.final_cells.push(Some((w, cells)));
    }
    for i in 0..n {
        for j in i + 1..n {
            if !f.live_at_end(i) || !f.live_at_end(j) {
                continue;
            }
            if f.final_win[i] != f.final_win[j] {
                continue;
            }
            let (a, b) = (rig.switch(i).ok_or("x")?, rig.switch(j).ok_or("x")?);
            let w = f.final_win[i];
            let same = (0..usize::from(base.rows)).all(|r| {
                (0..base.cols).all(|c| {
                    a.program().peek_query(a.objects(), r, c, w)
                        == b.program().peek_query(b.objects(), r, c, w)
                })
            });
            f.final_snapshots.push((i, j, same));
        }
    }
    Ok(f)
}

/// Judges D1–D8 on the facts of `plan`'s run.
pub fn judge(plan: &RunPlan, f: &Facts) -> Judgement {
    let mut j = Judgement::default();
    let n = f.replies.len();
    let base = &plan.rig.base;
    let (rows, cols, b) = (usize::from(base.rows), base.cols, base.b);
    let v = |j: &mut Judgement, s: String| {
        if j.violations.len() < 50 {
            j.violations.push(s);
        }
    };
    // D1: sampled windows within one of each other.
    for (t, w) in &f.samples {
        let (lo, hi) = (w.iter().min(), w.iter().max());
        if let (Some(lo), Some(hi)) = (lo, hi) {
            if hi - lo > 1 {
                v(&mut j, format!("D1: at {t} ns windows {w:?}"));
            }
        }
    }
    j.count("sdw: D1 window samples", f.samples.len() as u64);
    // Accepted updates: (window, key, value, reply time).
    let mut updates: Vec<(u32, u32, u32, Nanos)> = Vec::new();
    for (i, rs) in f.replies.iter().enumerate() {
        // D8, per window at this replica, in processing order (the app
        // link is FIFO and lossless).
        let mut ok_in: BTreeMap<(bool, u32), u32> = BTreeMap::new();
        for (t, r) in rs {
            if r.op & OP_UPDATE == 0 {
                continue;
            }
            let life = f.life(i, *t, r.win);
            // A restarted replica before its join runs from empty state,
            // then rejects while it is installed: nothing it says then
            // counts (§5.6 join: its R_u starts empty).
            if life == Life::Down {
                j.count(
                    "sdw: join: updates at a replica before its join (not judged)",
                    1,
                );
                continue;
            }
            let k = ok_in.entry((life == Life::Joined, r.win)).or_default();
            match r.status {
                ST_OK => {
                    if *k >= b {
                        v(
                            &mut j,
                            format!(
                                "D8: replica {} accepted update {} beyond B={b} in window {}",
                                i + 1,
                                r.req_id,
                                r.win
                            ),
                        );
                    }
                    *k += 1;
                    // D9: a failed replica's windows ≥ wmax − 1 were dropped
                    // by the recovery, on purpose (§5.6 step 5).
                    let dropped = life == Life::First
                        && f.failed.contains(&i)
                        && f.recovery
                            .as_ref()
                            .is_some_and(|rc| r.win.wrapping_add(1) >= rc.wmax);
                    if !dropped {
                        updates.push((r.win, r.key, r.value, *t));
                    }
                }
                ST_REJECTED => {
                    if *k != b {
                        v(&mut j, format!("D8: replica {} rejected update {} with count {k} < B={b} in window {}", i + 1, r.req_id, r.win));
                    }
                }
                s => v(&mut j, format!("replica {} answered status {s}", i + 1)),
            }
            j.count("sdw: D8 updates", 1);
        }
    }
    if !f.failed.is_empty() && f.recovery.is_none() {
        v(&mut j, "D9: replicas failed and no recovery ran".into());
    }
    // Per cell: accepted updates as (window, running sum), by window.
    let mut cells: BTreeMap<(usize, u32), Vec<(u32, u32)>> = BTreeMap::new();
    let mut by_win: Vec<(u32, u32, u32)> = updates.iter().map(|u| (u.0, u.1, u.2)).collect();
    by_win.sort_unstable();
    for &(w, k, val) in &by_win {
        for r in 0..rows {
            let e = cells.entry((r, hash_col(r, k, cols))).or_default();
            let sum = e.last().map(|x| x.1).unwrap_or(0).wrapping_add(val);
            e.push((w, sum));
        }
    }
    // ⊕ of the updates to cell (r, c) in windows ≤ w − 2.
    let visible = |r: usize, c: u32, w: u32| -> u32 {
        if w < 2 {
            return 0;
        }
        let Some(e) = cells.get(&(r, c)) else {
            return 0;
        };
        let k = e.partition_point(|x| x.0 <= w - 2);
        if k == 0 {
            0
        } else {
            e[k - 1].1
        }
    };
    // D2, D3, D4 over every query.
    let mut seen: BTreeMap<(u32, u32), (usize, [u32; 3])> = BTreeMap::new();
    let bound = 2 * n as u64 * u64::from(b);
    for (i, rs) in f.replies.iter().enumerate() {
        for (t, q) in rs.iter().filter(|(_, r)| r.op & OP_QUERY != 0) {
            let life = f.life(i, *t, q.win);
            let joined_wmax = f.join_of(i).map(|jr| jr.wmax);
            if life == Life::Down {
                j.count(
                    "sdw: join: queries at a replica before its join (not judged)",
                    1,
                );
                continue;
            }
            // not_ready exactly until a joined replica completes its first
            // window (wmax + 1).
            let unready = life == Life::Joined
                && joined_wmax.is_some_and(|m| win_lt(q.win, m.wrapping_add(2)));
            if q.not_ready != unready {
                v(
                    &mut j,
                    format!(
                        "join: replica {} query {} in window {} not_ready={} (joined at wmax {joined_wmax:?})",
                        i + 1,
                        q.req_id,
                        q.win,
                        q.not_ready
                    ),
                );
            }
            if q.not_ready {
                j.count("sdw: join: queries not ready", 1);
                continue;
            }
            // A replica that failed one window ahead of every survivor
            // (in wmax + 1) had already shown its own window wmax − 1,
            // which §5.6 drops, and window number wmax + 1 is reused by
            // the survivors with other contents: §5.6 cannot keep D2/D3
            // for such queries (a spec finding, docs/architecture.md).
            // They are counted, not judged.
            if life == Life::First
                && f.failed.contains(&i)
                && f.recovery.as_ref().is_some_and(|rc| win_lt(rc.wmax, q.win))
            {
                j.count(
                    "sdw: D9 spec finding: queries of a failed replica ahead of wmax",
                    1,
                );
                continue;
            }
            let mut want = [0u32; 3];
            for (r, w) in want.iter_mut().enumerate().take(rows) {
                *w = visible(r, hash_col(r, q.key, cols), q.win);
            }
            if want != q.res {
                v(&mut j, format!("D2: replica {} query {} (key {}) in window {} read {:?}, exact visibility wants {want:?}", i + 1, q.req_id, q.key, q.win, q.res));
            }
            j.count("sdw: D2 queries", 1);
            match seen.get(&(q.win, q.key)) {
                Some(&(k, res)) if res != q.res => v(
                    &mut j,
                    format!(
                        "D3: window {} key {}: replica {} read {:?}, replica {} read {:?}",
                        q.win,
                        q.key,
                        k + 1,
                        res,
                        i + 1,
                        q.res
                    ),
                ),
                Some(&(k, _)) if k != i => j.count("sdw: D3 same-window pairs", 1),
                Some(_) => {}
                None => {
                    seen.insert((q.win, q.key), (i, q.res));
                }
            }
            if b != UNBOUNDED && f.failed.is_empty() {
                let sent = f.sent.get(&q.req_id).copied().unwrap_or(0);
                let mut by_win: BTreeMap<i64, u64> = BTreeMap::new();
                for u in updates
                    .iter()
                    .filter(|u| u.3 < sent && u.0.wrapping_add(2) > q.win)
                {
                    *by_win.entry(i64::from(u.0) - i64::from(q.win)).or_default() += 1;
                }
                // The spec's 2NB counts the windows up to the query's own;
                // a replica already one window ahead adds at most B more
                // each (see docs/architecture.md, SDW: D4), so the whole
                // bound is (3N − 1)·B.
                let own: u64 = by_win.range(..=0).map(|(_, c)| c).sum();
                let missed: u64 = by_win.values().sum();
                let whole = (3 * n as u64 - 1) * u64::from(b);
                if own > bound || missed > whole || by_win.keys().any(|&o| o > 1) {
                    v(&mut j, format!("D4: query {} in window {} misses {missed} preceding updates ({own} of windows up to its own, bound 2NB = {bound}; all, bound (3N-1)B = {whole}; by window offset: {by_win:?})", q.req_id, q.win));
                }
                j.count("sdw: D4 queries", 1);
            }
        }
    }
    for &(a, bb, same) in &f.final_snapshots {
        if !same {
            v(
                &mut j,
                format!(
                    "D3: replicas {} and {} end in window {} with different R_r",
                    a + 1,
                    bb + 1,
                    f.final_win[a]
                ),
            );
        }
        j.count("sdw: D3 final snapshots", 1);
    }
    // D6: every window advanced exactly once, in order, and windows moved.
    let moves: Vec<u32> = f
        .recovery
        .iter()
        .chain(f.joins.iter().map(|j| &j.2))
        .map(|r| r.wmax)
        .collect();
    for (i, log) in f.advances.iter().enumerate() {
        if !f.live_at_end(i) {
            continue;
        }
        let mut expect = 1u32;
        for (k, &(w, _)) in log.iter().enumerate() {
            // The controller moves the members to wmax + 1 without
            // ADVANCE (recovery and each join; a joiner's log begins at
            // its restart).
            for &m in &moves {
                if w == m.wrapping_add(2) && expect <= m.wrapping_add(1) {
                    expect = w;
                }
            }
            let ok = w == expect;
            expect = w.wrapping_add(1);
            if !ok {
                v(
                    &mut j,
                    format!(
                        "D6: replica {}'s advance #{} went to window {w}",
                        i + 1,
                        k + 1
                    ),
                );
                break;
            }
        }
        let moved = f.moved_after_end.get(i).copied().unwrap_or(0);
        if moved < 2 {
            v(
                &mut j,
                format!(
                    "D6: replica {} advanced {moved} windows in the {} ms after the load stopped",
                    i + 1,
                    LIVENESS_WAIT / 1_000_000
                ),
            );
        }
        j.count("sdw: D6 advances", log.len() as u64);
    }
    // D7: ready phase on and perfect links: no early DATA, no retransmission.
    if plan.lossless && base.ready_phase {
        for (i, &(early, retx)) in f.early_retx.iter().enumerate() {
            if early != 0 || retx != 0 {
                v(
                    &mut j,
                    format!(
                        "D7: replica {} counted early={early} retx={retx} without loss",
                        i + 1
                    ),
                );
            }
        }
        j.count("sdw: D7 lossless replicas", n as u64);
    }
    // The whole collection at the end (D2 on every cell; with failures,
    // D9's final state: survivors' updates and the failed replicas'
    // windows ≤ wmax − 2).
    for (i, fc) in f.final_cells.iter().enumerate() {
        let Some((w, rows_v)) = fc else {
            continue;
        };
        let bad = rows_v.iter().enumerate().find_map(|(r, row)| {
            row.iter()
                .enumerate()
                .find(|&(c, &got)| got != visible(r, c as u32, *w))
                .map(|(c, &got)| (r, c, got))
        });
        if let Some((r, c, got)) = bad {
            let what = if f.failed.is_empty() { "D2" } else { "D9" };
            v(
                &mut j,
                format!(
                    "{what}: replica {} ends in window {w} with cell ({r}, {c}) = {got}, the accepted updates of windows ≤ w−2 sum to {}",
                    i + 1,
                    visible(r, c as u32, *w)
                ),
            );
        }
        j.count("sdw: D2 final collections", 1);
    }
    if let Some(rc) = &f.recovery {
        j.count("sdw: D9 recoveries", 1);
        if f.moved_after_end
            .iter()
            .enumerate()
            .any(|(i, &m)| f.live_at_end(i) && m < 2)
        {
            v(
                &mut j,
                format!(
                    "D9: windows did not advance after the recovery at wmax {}",
                    rc.wmax
                ),
            );
        }
    }
    for (i, _, jr) in &f.joins {
        j.count("sdw: joins", 1);
        if f.moved_after_end.get(*i).copied().unwrap_or(0) < 2 {
            v(
                &mut j,
                format!(
                    "join: windows did not advance after replica {} joined at wmax {}",
                    i + 1,
                    jr.wmax
                ),
            );
        }
    }
    let sent: BTreeMap<u32, Nanos> = f.sent.clone();
    for (i, rs) in f.replies.iter().enumerate() {
        if f.failed.contains(&i) {
            continue;
        }
        let asked = sent.keys().filter(|&&id| (id >> 24) as usize == i).count();
        if asked != rs.len() {
            v(
                &mut j,
                format!("replica {}: {asked} requests, {} replies", i + 1, rs.len()),
            );
        }
    }
    j
}

/// One campaign seed: plan, run, judge (`broken`: the broken variant).
pub fn run_seed_with(seed: u64, broken: bool) -> Result<SeedResult, String> {
    let p = plan(seed, broken);
    let f = run(&p)?;
    let j = judge(&p, &f);
    let imp = &p.rig.impair;
    let notes = vec![format!(
        "{:?} rows={} cols={} B={} {:?} ready={} loss={:?} dup={:.3} jitter={} ns; windows {:?}",
        p.rig.topology,
        p.rig.base.rows,
        p.rig.base.cols,
        p.rig.base.b,
        p.rig.base.dedup,
        p.rig.base.ready_phase,
        imp.loss,
        imp.duplicate,
        imp.jitter,
        f.final_win
    )];
    Ok(SeedResult {
        seed,
        faults: Vec::new(),
        kinds: BTreeMap::new(),
        violations: j.violations,
        judged: j.judged,
        notes,
        events: 0,
    })
}

/// One recovery seed (D9, and D1–D3, D6, D8 around it).
pub fn run_recovery_seed(seed: u64) -> Result<SeedResult, String> {
    run_recovery_seed_with(seed, false)
}

/// [`run_recovery_seed`], or with the broken recovery.
pub fn run_recovery_seed_with(seed: u64, broken: bool) -> Result<SeedResult, String> {
    let mut p = plan_recovery(seed);
    p.broken_recovery = broken;
    let f = run(&p)?;
    let j = judge(&p, &f);
    let notes = vec![format!(
        "recovery: rows={} cols={} {:?} loss={:?} dup={:.3}; failed {:?}; {:?}; windows {:?}",
        p.rig.base.rows,
        p.rig.base.cols,
        p.rig.base.dedup,
        p.rig.impair.loss,
        p.rig.impair.duplicate,
        f.failed,
        f.recovery,
        f.final_win
    )];
    Ok(SeedResult {
        seed,
        faults: Vec::new(),
        kinds: BTreeMap::new(),
        violations: j.violations,
        judged: j.judged,
        notes,
        events: 0,
    })
}

/// One join seed (§5.6 "Join", and D1–D3, D6, D8, D9 around it).
pub fn run_join_seed(seed: u64) -> Result<SeedResult, String> {
    run_join_seed_with(seed, false)
}

/// [`run_join_seed`], or with the broken join (the joiner without M).
pub fn run_join_seed_with(seed: u64, broken: bool) -> Result<SeedResult, String> {
    let mut p = plan_join(seed);
    p.broken_join = broken;
    let f = run(&p)?;
    let j = judge(&p, &f);
    let joins: Vec<(usize, u32)> = f.joins.iter().map(|j| (j.0 + 1, j.2.wmax)).collect();
    let notes = vec![format!(
        "join: rows={} cols={} {:?} loss={:?} dup={:.3}; failed {:?} at wmax {:?}; joined (replica, wmax) {joins:?}; windows {:?}",
        p.rig.base.rows,
        p.rig.base.cols,
        p.rig.base.dedup,
        p.rig.impair.loss,
        p.rig.impair.duplicate,
        f.failed.iter().map(|i| i + 1).collect::<Vec<_>>(),
        f.recovery.as_ref().map(|r| r.wmax),
        f.final_win
    )];
    Ok(SeedResult {
        seed,
        faults: Vec::new(),
        kinds: BTreeMap::new(),
        violations: j.violations,
        judged: j.judged,
        notes,
        events: 0,
    })
}

/// One campaign seed of the protocol as specified.
pub fn run_seed(seed: u64) -> Result<SeedResult, String> {
    run_seed_with(seed, false)
}
