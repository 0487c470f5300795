//! The EWO campaign (specs/swish.md §6, E2–E4): one random faulty run per
//! seed, judged from what the run recorded — the answers the application
//! hosts received and the replicas' registers read back after the run —
//! never from the algorithm's own bookkeeping. (E1 is the merge property
//! tests in [`crate::ewo::merge`].)
//!
//! A run: local-2 or symmetric-4; five variables (G-counter, LWW,
//! PN-counter, G-set, max); every host sends random operations to its
//! replica until [`T_WRITES`]; replication links drop 0–20 %, duplicate
//! 0–10 % and jitter 0–50 µs; the first two variables propagate per write
//! or every 1 ms; in symmetric-4, a third of the runs fail one replica
//! (fail-stop) and a third join the fourth replica while writes go on.
//!
//! - **E2**: at `T_WRITES + 3·T_ae` every live replica's arrays are
//!   bit-identical; without failures the merged cells are exactly what the
//!   acknowledged writes make (counter sums, OR, max, the LWW winner).
//! - **E3**: a G-counter read at a replica never decreases; the converged
//!   value is the total of acknowledged increments (with a failure:
//!   between the increments acknowledged by survivors and all of them).
//! - **E4**: a replica's answers reflect its own earlier writes (counter ≥
//!   own increments, LWW version ≥ own last write's, G-set ⊇ own bits,
//!   max ≥ own writes).

use std::collections::BTreeMap;

use inca_sim::link::{ChannelConfig, LossModel};
use inca_switch::Nanos;
use inca_verify::{Judgement, SeedResult};
use inca_wire::swish::ewo::MergeKind;
use rand::{Rng, SeedableRng};

use crate::ewo::app::{status, AppOp, Op};
use crate::ewo::config::{Broken, Propagation, VarSpec, T_AE};
use crate::ewo::merge;
use crate::ewo::rig::{Rig, RigConfig, Topology};

/// Writes stop at this time.
pub const T_WRITES: Nanos = 30_000_000;
/// E2 is judged this many anti-entropy periods after writes stop [our
/// choice]: the spec's 3·T_ae is a likely bound, not a sure one (see
/// docs/architecture.md, "SwiSh EWO"); convergence within 3·T_ae is
/// counted and noted per run.
pub const E2_ROUNDS: u64 = 10;
/// Operations each host sends.
pub const OPS_PER_HOST: usize = 150;
/// Batched propagation period when a run picks it (§5.3, the rate
/// limiter's 1 ms).
pub const BATCH_PERIOD: Nanos = 1_000_000;

/// What one seed runs.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The rig.
    pub rig: RigConfig,
    /// A replica that fails, and when.
    pub fail: Option<(usize, Nanos)>,
    /// When the spare joins (the last replica), copying from replica 0.
    pub join: Option<Nanos>,
    /// Per host, its operations.
    pub scripts: Vec<Vec<(Nanos, AppOp)>>,
}

/// The variables every run shares.
pub fn variables(p0: Propagation, p1: Propagation) -> Vec<VarSpec> {
    let v = |var_id, kind, entries, propagation| VarSpec {
        var_id,
        kind,
        entries,
        propagation,
    };
    vec![
        v(1, MergeKind::Gcnt, 8, p0),
        v(2, MergeKind::Lww, 8, p1),
        v(3, MergeKind::Pncnt, 4, Propagation::PerWrite),
        v(4, MergeKind::Gset, 4, Propagation::PerWrite),
        v(5, MergeKind::Max, 4, Propagation::PerWrite),
    ]
}

/// The random run of `seed`.
pub fn plan(seed: u64, broken: Broken) -> Plan {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let topology = if rng.gen_bool(0.5) {
        Topology::Local2
    } else {
        Topology::Symmetric4
    };
    let mut prop = || {
        if rng.gen_bool(0.5) {
            Propagation::PerWrite
        } else {
            Propagation::Periodic(BATCH_PERIOD)
        }
    };
    let (p0, p1) = (prop(), prop());
    let link = ChannelConfig {
        loss: LossModel::Bernoulli {
            p: rng.gen_range(0.0..=0.2),
        },
        duplicate: rng.gen_range(0.0..=0.1),
        jitter: rng.gen_range(0..=50_000),
        ..ChannelConfig::default()
    };
    let n = topology.replicas();
    let mode = if n == 4 { rng.gen_range(0..3) } else { 0 };
    let fail = (mode == 1).then(|| (rng.gen_range(0..n), rng.gen_range(5_000_000..25_000_000)));
    let join = (mode == 2).then(|| rng.gen_range(5_000_000..20_000_000));
    let vars = variables(p0, p1);
    let mut req = 0u32;
    let scripts = (0..n)
        .map(|_| {
            let mut times: Vec<Nanos> = (0..OPS_PER_HOST)
                .map(|_| rng.gen_range(1_000_000..T_WRITES))
                .collect();
            times.sort_unstable();
            times
                .into_iter()
                .map(|t| {
                    let v = vars[rng.gen_range(0..vars.len())];
                    let index = rng.gen_range(0..v.entries);
                    let read = rng.gen_bool(0.4);
                    let (op, arg) = match v.kind {
                        _ if read => (Op::Read, 0),
                        MergeKind::Gcnt => (Op::Inc, rng.gen_range(1..=3)),
                        MergeKind::Pncnt if rng.gen_bool(0.5) => (Op::Dec, rng.gen_range(1..=3)),
                        MergeKind::Pncnt => (Op::Inc, rng.gen_range(1..=3)),
                        MergeKind::Lww => (Op::Write, rng.gen()),
                        MergeKind::Gset => (Op::Write, 1 << rng.gen_range(0..32)),
                        MergeKind::Max => (Op::Write, rng.gen_range(0..1 << 20)),
                    };
                    req += 1;
                    (t, AppOp::request(op, v.var_id, index, arg, req))
                })
                .collect()
        })
        .collect();
    Plan {
        rig: RigConfig {
            topology,
            vars,
            link,
            t_ae: T_AE,
            spare: join.is_some(),
            broken,
            limiter: None,
            seed,
        },
        fail,
        join,
        scripts,
    }
}

/// Runs seed `seed` of the campaign and judges it.
pub fn run_seed(seed: u64) -> Result<SeedResult, String> {
    run_plan(&plan(seed, Broken::None))
}

/// Runs a plan and judges it.
pub fn run_plan(p: &Plan) -> Result<SeedResult, String> {
    let mut rig = Rig::new(&p.rig, &p.scripts)?;
    let mut faults = Vec::new();
    let mut kinds = BTreeMap::new();
    let mut notes = vec![format!(
        "{:?}, link {}, propagation {:?}",
        p.rig.topology,
        describe(&p.rig.link),
        p.rig.vars.iter().map(|v| v.propagation).collect::<Vec<_>>()
    )];
    if let Some((i, at)) = p.fail {
        rig.fail(i, at);
        faults.push((at, format!("replica {i} fails")));
        *kinds.entry("crash".to_string()).or_default() += 1;
    }
    if let Some(at) = p.join {
        rig.run_until(at);
        let i = rig.members.len() - 1;
        let serving = rig.join(i, 0)?;
        faults.push((at, format!("replica {i} joins (serving at {serving} ns)")));
        *kinds.entry("join".to_string()).or_default() += 1;
    }
    rig.run_until(T_WRITES);
    let deadline = T_WRITES + E2_ROUNDS * p.rig.t_ae;
    let mut converged = None;
    let mut t = T_WRITES;
    while t < deadline {
        if converged.is_none() && identical(&rig) {
            converged = Some(t - T_WRITES);
        }
        t += 1_000_000;
        rig.run_until(t);
    }
    rig.run_until(deadline);
    notes.push(match converged {
        Some(c) => format!(
            "live replicas identical {} ms after writes stopped",
            c / 1_000_000
        ),
        None => "live replicas not identical before the E2 deadline".to_string(),
    });
    let ok: Vec<usize> = (0..p.scripts.len())
        .map(|i| {
            rig.answers(i)
                .iter()
                .filter(|(_, a)| a.status == status::OK)
                .count()
        })
        .collect();
    notes.push(format!("answered OK per replica: {ok:?}"));
    let mut j = Judgement::default();
    j.count("ewo: E2 runs", 1);
    if converged.is_some_and(|c| c <= 3 * p.rig.t_ae) {
        j.count("ewo: E2 runs identical within 3·T_ae", 1);
    } else {
        j.count("ewo: E2 runs identical only after 3·T_ae", 1);
    }
    check(&rig, p, &mut j);
    Ok(SeedResult {
        seed: p.rig.seed,
        faults,
        kinds,
        violations: j.violations,
        judged: j.judged,
        notes,
        events: rig.sim.stats().events,
    })
}

fn describe(l: &ChannelConfig) -> String {
    let loss = match l.loss {
        LossModel::Bernoulli { p } => p,
        _ => 0.0,
    };
    format!(
        "drop {:.1}% dup {:.1}% jitter {} µs",
        loss * 100.0,
        l.duplicate * 100.0,
        l.jitter / 1000
    )
}

fn identical(rig: &Rig) -> bool {
    let live = rig.live();
    let first = live.first().and_then(|&i| rig.state(i));
    live.iter().all(|&i| rig.state(i) == first)
}

/// What the hosts' answers say was acknowledged, per variable and entry.
#[derive(Default)]
struct Acked {
    /// All hosts, then survivors only: Σ increments, Σ decrements, OR of
    /// G-set writes, max of max writes, LWW winner of writes.
    all: BTreeMap<(u16, u32), Facts>,
    live: BTreeMap<(u16, u32), Facts>,
}

#[derive(Default, Clone, Copy)]
struct Facts {
    inc: u32,
    dec: u32,
    or: u32,
    max: u32,
    lww: (u32, u32),
}

fn add(f: &mut Facts, kind: MergeKind, a: &AppOp) {
    match (kind, a.op) {
        (MergeKind::Gcnt | MergeKind::Pncnt, Op::Inc) => f.inc = f.inc.wrapping_add(a.arg),
        (MergeKind::Pncnt, Op::Dec) => f.dec = f.dec.wrapping_add(a.arg),
        (MergeKind::Gset, Op::Write) => f.or |= a.arg,
        (MergeKind::Max, Op::Write) => f.max = f.max.max(a.arg),
        (MergeKind::Lww, Op::Write) => f.lww = merge::lww(f.lww, (a.result, a.result2)),
        _ => {}
    }
}

/// Judges E2–E4 on a finished run.
fn check(rig: &Rig, p: &Plan, j: &mut Judgement) {
    let kinds: BTreeMap<u16, MergeKind> = p.rig.vars.iter().map(|v| (v.var_id, v.kind)).collect();
    let live = rig.live();
    let mut acked = Acked::default();
    for (i, _) in p.scripts.iter().enumerate() {
        let mut own: BTreeMap<(u16, u32), Facts> = BTreeMap::new();
        let mut last_read: BTreeMap<u32, u32> = BTreeMap::new();
        for (at, a) in rig.answers(i) {
            if a.status != status::OK {
                continue;
            }
            let Some(&kind) = kinds.get(&a.var_id) else {
                j.violations.push(format!(
                    "host {i}: answer for unknown variable {}",
                    a.var_id
                ));
                continue;
            };
            let key = (a.var_id, a.index);
            add(acked.all.entry(key).or_default(), kind, a);
            if live.contains(&i) {
                add(acked.live.entry(key).or_default(), kind, a);
            }
            let mine = own.entry(key).or_default();
            add(mine, kind, a);
            // E3: G-counter reads at one replica never decrease.
            if kind == MergeKind::Gcnt {
                j.count("ewo: E3 counter reads", 1);
                let prev = last_read.insert(a.index, a.result).unwrap_or(0);
                if a.result < prev {
                    j.violations.push(format!(
                        "E3: replica {i} entry {} read {} after {prev} at {at} ns",
                        a.index, a.result
                    ));
                }
            }
            // E4: read your writes.
            let ok = match kind {
                MergeKind::Gcnt => a.result >= mine.inc,
                MergeKind::Lww => !merge::version_newer(mine.lww.1, a.result2),
                MergeKind::Gset => a.result & mine.or == mine.or,
                MergeKind::Max => a.result >= mine.max,
                MergeKind::Pncnt => true,
            };
            if kind != MergeKind::Pncnt {
                j.count("ewo: E4 answers after own writes", 1);
            }
            if !ok {
                j.violations.push(format!(
                    "E4: replica {i} var {} entry {} answered {}/{:#x} at {at} ns, missing its own writes",
                    a.var_id, a.index, a.result, a.result2
                ));
            }
        }
    }
    // E2: live replicas bit-identical at the deadline.
    let states: Vec<(usize, Vec<Vec<u64>>)> = live
        .iter()
        .filter_map(|&i| rig.state(i).map(|s| (i, s)))
        .collect();
    let Some((first, s0)) = states.first() else {
        j.violations.push("E2: no live replica to read".into());
        return;
    };
    for (i, s) in &states[1..] {
        j.count(
            "ewo: E2 cells compared",
            s.iter().map(|a| a.len() as u64).sum(),
        );
        if s != s0 {
            j.violations.push(format!(
                "E2: replica {i} differs from replica {first} {} ms after writes stopped",
                E2_ROUNDS * p.rig.t_ae / 1_000_000
            ));
        }
    }
    // The converged values against what was acknowledged.
    let Some(sw) = rig.replica(*first) else {
        return;
    };
    let o = sw.objects();
    let exact = p.fail.is_none();
    for v in &p.rig.vars {
        let Some(a) = sw.program().arrays(v.var_id) else {
            continue;
        };
        for k in 0..v.entries {
            let key = (v.var_id, k);
            let all = acked.all.get(&key).copied().unwrap_or_default();
            let lv = acked.live.get(&key).copied().unwrap_or_default();
            let word = |h| o.register_peek(h, u64::from(k)).unwrap_or(0);
            let sum = |hs: &[inca_switch::RegisterHandle<u32>]| {
                merge::counter_value(&hs.iter().map(|&h| word(h)).collect::<Vec<_>>())
            };
            let (got, lo, hi, what) = match v.kind {
                MergeKind::Gcnt => (sum(&a.words), lv.inc, all.inc, "E3"),
                MergeKind::Pncnt => {
                    let n = a.words.len() / 2;
                    let val = sum(&a.words[..n]).wrapping_sub(sum(&a.words[n..]));
                    let (l, h) = (lv.inc.wrapping_sub(lv.dec), all.inc.wrapping_sub(all.dec));
                    if !exact {
                        continue;
                    }
                    (val, l, h, "E2")
                }
                MergeKind::Gset => (word(a.words[0]), lv.or, all.or, "E2"),
                MergeKind::Max => (word(a.words[0]), lv.max, all.max, "E2"),
                MergeKind::Lww => {
                    let Some(h) = a.lww else { continue };
                    let c = o.register_peek(h, u64::from(k)).unwrap_or_default();
                    if !exact {
                        continue;
                    }
                    j.count("ewo: E2 converged values", 1);
                    if (c.lo, c.hi) != all.lww {
                        j.violations.push(format!(
                            "E2: LWW var {} entry {k} converged to {:?}, the last acknowledged write is {:?}",
                            v.var_id,
                            (c.lo, c.hi),
                            all.lww
                        ));
                    }
                    continue;
                }
            };
            let ok = if exact {
                got == hi
            } else {
                match v.kind {
                    MergeKind::Gset => got & lo == lo && got & !hi == 0,
                    _ => lo <= got && got <= hi,
                }
            };
            j.count(&format!("ewo: {what} converged values"), 1);
            if !ok {
                j.violations.push(format!(
                    "{what}: var {} ({:?}) entry {k} converged to {got}, acknowledged writes make {}",
                    v.var_id,
                    v.kind,
                    if exact {
                        format!("{hi}")
                    } else {
                        format!("{lo}..={hi}")
                    }
                ));
            }
        }
    }
    let bad: u64 = live
        .iter()
        .filter_map(|&i| rig.replica(i))
        .map(|s| s.violations().len() as u64)
        .sum();
    if bad > 0 {
        j.violations
            .push(format!("model: {bad} data-plane access-rule violations"));
    }
}
