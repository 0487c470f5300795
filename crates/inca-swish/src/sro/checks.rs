//! The SRO properties of specs/swish.md §6 over a finished run, judged
//! from what the run recorded ([`crate::sro::facts`]: requests, applies,
//! releases, with times), what the sinks saw, and the NAT tables the live
//! switches' data planes hold — never from the protocol's own state — and
//! the campaign ([`run_seed`]).
//!
//! - S1: per key, the history of writes (an origin's request → the value
//!   its held packets were released with) and reads (a packet sent by an
//!   inside host → the external endpoint the sink saw) is linearizable for
//!   an insert-if-absent map (`inca_verify::linearizability`).
//! - S2: every release follows the apply of the same key and value at the
//!   replica that was the tail then.
//! - S3: every live replica applied seqs 1, 2, … without a gap, and all
//!   live replicas applied the same write at each seq.
//! - S4: no two keys share an external endpoint (commits and sinks); after
//!   quiescence the live replicas' `sro_nat_out` tables are identical.
//! - S5: without failures every request commits; S6: with failures S1–S4
//!   hold and every request of a surviving origin commits.

use std::collections::{BTreeMap, BTreeSet};

use inca_switch::MatchSpec;
use inca_verify::linearizability::{check, Call, Spec, Verdict, BUDGET};
use inca_verify::{Judgement, SeedResult};
use inca_wire::swish::sro::{NatKey, NatValue};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use inca_sim::link::LossModel;
use inca_switch::Nanos;

use crate::addr::Rid;
use crate::sro::controller::T_DETECT;
use crate::sro::facts::{Fact, FactLog};
use crate::sro::program::Broken;
use crate::sro::rig::{Observation, Rig, RigConfig};

/// The insert-if-absent map, for one key.
#[derive(Debug, Clone, Copy)]
pub struct InsertIfAbsent;

/// An operation on one key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// Insert the value unless the key has one; returns the key's value.
    Insert(NatValue),
    /// Read the key.
    Read,
}

impl Spec for InsertIfAbsent {
    type State = Option<NatValue>;
    type Input = Op;
    type Output = Option<NatValue>;
    fn init(&self) -> Self::State {
        None
    }
    fn step(&self, s: &Self::State, op: &Op) -> (Self::Output, Self::State) {
        match op {
            Op::Insert(v) => {
                let now = s.unwrap_or(*v);
                (Some(now), Some(now))
            }
            Op::Read => (*s, *s),
        }
    }
}

/// Everything a run's checks read.
#[derive(Debug, Clone)]
pub struct RunRecord {
    /// Facts.
    pub facts: FactLog,
    /// Sink observations.
    pub observations: Vec<Observation>,
    /// Each live replica's `sro_nat_out` entries (key → external endpoint).
    pub tables: BTreeMap<Rid, BTreeMap<Vec<u8>, NatValue>>,
    /// The chain over time as the controller set it (for reports).
    pub chains: Vec<(Nanos, Vec<Rid>)>,
    /// Replicas that failed.
    pub failed: BTreeSet<Rid>,
}

impl RunRecord {
    /// What `rig` recorded.
    pub fn of(rig: &Rig) -> RunRecord {
        let mut chains = rig.history.clone();
        chains.sort_by_key(|(t, _)| *t);
        let failed = rig.failed.clone();
        let mut tables = BTreeMap::new();
        for &r in &rig.chain {
            let Some(sw) = rig.switch(r) else { continue };
            let Some(o) = sw.program().objects() else {
                continue;
            };
            let Some(t) = sw.objects().table(o.nat_out) else {
                continue;
            };
            let entries = t
                .entries()
                .filter_map(|(spec, a)| match spec {
                    MatchSpec::Exact(k) => Some((
                        k.to_vec(),
                        NatValue {
                            ip: a.ip,
                            port: a.port,
                        },
                    )),
                    _ => None,
                })
                .collect();
            tables.insert(r, entries);
        }
        RunRecord {
            facts: rig.facts.snapshot(),
            observations: rig.observations(),
            tables,
            chains,
            failed: failed.iter().map(|&(r, _)| r).collect(),
        }
    }

    /// Whether `rid` acted as the tail at some time in `[from, to]`, by
    /// its own role changes as recorded.
    fn tail_within(&self, rid: Rid, from: Nanos, to: Nanos) -> bool {
        let roles: Vec<(Nanos, bool)> = self
            .facts
            .facts
            .iter()
            .filter_map(|f| match f {
                Fact::Role { t, rid: r, chain } if *r == rid => {
                    Some((*t, chain.last() == Some(&rid)))
                }
                _ => None,
            })
            .collect();
        roles.iter().enumerate().any(|(i, &(start, tail))| {
            let end = roles.get(i + 1).map_or(Nanos::MAX, |n| n.0);
            tail && start <= to && end > from
        })
    }
}

/// S1: per key linearizability of writes and reads.
pub fn check_s1(r: &RunRecord, j: &mut Judgement) {
    let mut per_key: BTreeMap<NatKey, Vec<Call<Op, Option<NatValue>>>> = BTreeMap::new();
    let mut released = BTreeMap::new();
    for f in &r.facts.facts {
        if let Fact::Release {
            t, rid, req, value, ..
        } = f
        {
            released.insert((*rid, *req), (*t, *value));
        }
    }
    let mut id = 0u64;
    for f in &r.facts.facts {
        if let Fact::Request {
            t,
            rid,
            req,
            key,
            proposed,
        } = f
        {
            id += 1;
            let response = released.get(&(*rid, *req)).map(|&(t, v)| (t, Some(v)));
            per_key.entry(*key).or_default().push(Call {
                id,
                invoked: *t,
                input: Op::Insert(*proposed),
                response,
            });
        }
    }
    for o in &r.observations {
        id += 1;
        per_key.entry(o.key).or_default().push(Call {
            id,
            invoked: o.sent,
            input: Op::Read,
            response: Some((o.received, Some(o.ext))),
        });
    }
    for (key, ops) in &per_key {
        j.count("sro S1: operations", ops.len() as u64);
        j.count("sro S1: keys", 1);
        match check(&InsertIfAbsent, ops, BUDGET) {
            Verdict::Linearizable => {}
            Verdict::Violation { reason, ops: ids } => j.violations.push(format!(
                "S1: key {key:?} not linearizable: {reason} (ops {ids:?})"
            )),
            Verdict::Inconclusive(why) => j
                .violations
                .push(format!("S1: key {key:?} undecided: {why}")),
        }
    }
}

/// S2: a release only after a tail applied that write: some replica
/// applied the key and value no later than the release and acted as the
/// tail at some time between its apply and the release (so a predecessor
/// that took over as tail, or an old tail before it handled a handover,
/// counts).
pub fn check_s2(r: &RunRecord, j: &mut Judgement) {
    let mut applied: BTreeMap<(Rid, NatKey), Vec<(Nanos, NatValue)>> = BTreeMap::new();
    for f in &r.facts.facts {
        if let Fact::Applied {
            t, rid, key, value, ..
        } = f
        {
            applied.entry((*rid, *key)).or_default().push((*t, *value));
        }
    }
    for f in &r.facts.facts {
        let Fact::Release {
            t,
            rid,
            req,
            key,
            value,
            ..
        } = f
        else {
            continue;
        };
        j.count("sro S2: releases", 1);
        let ok = applied.iter().any(|((ra, ka), v)| {
            ka == key
                && v.iter()
                    .any(|(ta, va)| ta <= t && va == value && r.tail_within(*ra, *ta, *t))
        });
        if !ok {
            j.violations.push(format!(
                "S2: replica {rid} released request {req} (key {key:?} → {value:?}) at {t} ns \
                 before any tail applied it"
            ));
        }
    }
}

/// S3: gap-free, agreeing apply sequences at the live replicas.
pub fn check_s3(r: &RunRecord, j: &mut Judgement) {
    let mut seqs: BTreeMap<Rid, Vec<u32>> = BTreeMap::new();
    let mut first: BTreeMap<Rid, u32> = BTreeMap::new();
    let mut at: BTreeMap<u32, (Rid, NatKey, NatValue, bool)> = BTreeMap::new();
    for f in &r.facts.facts {
        if let Fact::Snapshot { rid, seq, .. } = f {
            // A joiner's own sequence starts after its state copy.
            first.insert(*rid, seq + 1);
        }
        let Fact::Applied {
            rid,
            seq,
            key,
            value,
            noop,
            ..
        } = f
        else {
            continue;
        };
        if r.failed.contains(rid) {
            continue;
        }
        j.count("sro S3: applies", 1);
        seqs.entry(*rid).or_default().push(*seq);
        match at.get(seq) {
            Some(&(o, k, v, n)) if (k, v, n) != (*key, *value, *noop) => {
                j.violations.push(format!(
                    "S3: seq {seq} is {key:?} → {value:?} (noop {noop}) at replica {rid} \
                     but {k:?} → {v:?} (noop {n}) at replica {o}"
                ))
            }
            Some(_) => {}
            None => {
                at.insert(*seq, (*rid, *key, *value, *noop));
            }
        }
    }
    for (rid, s) in &seqs {
        let base = first.get(rid).copied().unwrap_or(1);
        for (i, &q) in s.iter().enumerate() {
            if q != base + i as u32 {
                j.violations.push(format!(
                    "S3: replica {rid}'s apply #{} is seq {q}, not {}",
                    i + 1,
                    base + i as u32
                ));
                break;
            }
        }
    }
}

/// S4: unique external endpoints; identical tables after quiescence.
pub fn check_s4(r: &RunRecord, quiesced: bool, j: &mut Judgement) {
    let mut owner: BTreeMap<NatValue, NatKey> = BTreeMap::new();
    let mut claim = |v: NatValue, k: NatKey, what: &str, j: &mut Judgement| {
        j.count("sro S4: endpoint claims", 1);
        match owner.get(&v) {
            Some(o) if *o != k => j.violations.push(format!(
                "S4: external {v:?} is {o:?}'s and {k:?}'s ({what})"
            )),
            Some(_) => {}
            None => {
                owner.insert(v, k);
            }
        }
    };
    for f in &r.facts.facts {
        if let Fact::Applied {
            rid,
            key,
            value,
            noop: false,
            ..
        } = f
        {
            if !r.failed.contains(rid) {
                claim(*value, *key, "applied", j);
            }
        }
    }
    for o in &r.observations {
        claim(o.ext, o.key, "seen at a sink", j);
    }
    if !quiesced {
        return;
    }
    let mut tables = r.tables.iter();
    if let Some((first, t0)) = tables.next() {
        for (rid, t) in tables {
            j.count("sro S4: table entries compared", t.len() as u64);
            if t != t0 {
                let only: Vec<_> = t0
                    .iter()
                    .filter(|(k, v)| t.get(*k) != Some(v))
                    .chain(t.iter().filter(|(k, v)| t0.get(*k) != Some(v)))
                    .take(3)
                    .collect();
                j.violations.push(format!(
                    "S4: replica {rid}'s table ({} entries) differs from replica {first}'s \
                     ({} entries) after quiescence, e.g. {only:?}",
                    t.len(),
                    t0.len()
                ));
            }
        }
    }
}

/// S5/S6: every request of a surviving origin commits (released).
pub fn check_commits(r: &RunRecord, j: &mut Judgement) {
    let released: BTreeSet<(Rid, u32)> = r
        .facts
        .facts
        .iter()
        .filter_map(|f| match f {
            Fact::Release { rid, req, .. } => Some((*rid, *req)),
            _ => None,
        })
        .collect();
    for f in &r.facts.facts {
        if let Fact::Request { rid, req, key, .. } = f {
            if r.failed.contains(rid) {
                continue;
            }
            j.count("sro S5: requests", 1);
            if !released.contains(&(*rid, *req)) {
                j.violations.push(format!(
                    "S5: request {req} of replica {rid} (key {key:?}) never committed"
                ));
            }
        }
    }
}

/// Every property over a run.
pub fn check_run(r: &RunRecord, quiesced: bool) -> Judgement {
    let mut j = Judgement::default();
    check_s1(r, &mut j);
    check_s2(r, &mut j);
    check_s3(r, &mut j);
    check_s4(r, quiesced, &mut j);
    check_commits(r, &mut j);
    if r.facts.lost > 0 {
        j.violations
            .push(format!("{} facts lost over the bound", r.facts.lost));
    }
    j
}

/// A campaign run's shape, drawn from its seed.
#[derive(Debug, Clone)]
pub struct SeedPlan {
    /// The rig.
    pub rig: RigConfig,
    /// Fail-stops: (replica, time).
    pub failures: Vec<(Rid, Nanos)>,
    /// A spare joining at the tail, and when.
    pub join: Option<(Rid, Nanos)>,
    /// When the run ends (traffic, then quiescence).
    pub end: Nanos,
}

/// The random faulty run of `seed` [our choice of ranges, spec §6]: 2 or 3
/// replicas; every link drops 0–20 %, duplicates 0–10 %, reorders (up to
/// 50 µs of jitter); in 40 % of the runs up to N − 1 replicas (head,
/// middle or tail) fail during the traffic, in 30 % a spare joins at the
/// tail.
pub fn plan(seed: u64, broken: Broken) -> SeedPlan {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x5352_4f63);
    let mut rig = RigConfig {
        seed,
        replicas: rng.gen_range(2..=3),
        broken,
        ..RigConfig::default()
    };
    let loss = rng.gen_range(0.0..0.20);
    let dup = rng.gen_range(0.0..0.10);
    let jitter = rng.gen_range(0..=50_000);
    for l in [&mut rig.chain_link, &mut rig.host_link] {
        l.loss = if loss > 0.0 {
            LossModel::Bernoulli { p: loss }
        } else {
            LossModel::None
        };
        l.duplicate = dup;
        l.jitter = jitter;
        l.reorder = rng.gen_range(0.0..0.1);
        l.reorder_delay = rng.gen_range(0..=50_000);
    }
    let mut failures = Vec::new();
    let mut join = None;
    let what = rng.gen_range(0.0..1.0);
    let at = rig.start + rng.gen_range(0..rig.traffic);
    if what < 0.4 {
        // Up to N − 1 fail-stops (spec §6), at distinct times.
        let mut alive: Vec<Rid> = (1..=rig.replicas as Rid).collect();
        let n = rng.gen_range(1..rig.replicas.max(2));
        let mut t = at;
        for _ in 0..n {
            let victim = alive.remove(rng.gen_range(0..alive.len()));
            failures.push((victim, t));
            t += rng.gen_range(0..5_000_000);
        }
    } else if what < 0.7 {
        rig.spares = 1;
        join = Some((rig.replicas as Rid + 1, at));
    }
    // Quiescence: 200 ms after the traffic. At 20 % loss on every link a
    // write round over four replicas succeeds with p ≈ 0.3, and a backlog
    // of retransmissions keeps the CPUs' queues long for a while.
    let end = rig.start + rig.traffic + 200_000_000;
    SeedPlan {
        rig,
        failures,
        join,
        end,
    }
}

/// Runs `plan` and judges it.
pub fn run_plan(seed: u64, p: &SeedPlan) -> Result<SeedResult, String> {
    let mut rig = Rig::new(&p.rig)?;
    let mut faults = Vec::new();
    for &(rid, at) in &p.failures {
        rig.fail_stop(rid, at, T_DETECT)?;
        faults.push((at, format!("fail-stop replica {rid}")));
    }
    if let Some((rid, at)) = p.join {
        rig.start_join(rid, at)?;
        faults.push((at, format!("replica {rid} joins at the tail")));
    }
    rig.run_with_controller(p.end);
    let r = RunRecord::of(&rig);
    if let Some((rid, _)) = p.join {
        if !rig.chain.contains(&rid) {
            return Ok(SeedResult {
                seed,
                faults,
                kinds: BTreeMap::new(),
                violations: vec![format!("S6: replica {rid} never finished joining")],
                judged: BTreeMap::new(),
                notes: Vec::new(),
                events: rig.sim.stats().events,
            });
        }
    }
    let quiesced = rig
        .chain
        .iter()
        .filter_map(|&x| rig.switch(x))
        .all(|s| s.program().cpu().held() == 0);
    let mut j = check_run(&r, quiesced);
    if !quiesced {
        j.violations
            .push("the run did not quiesce: writes still held at the end".into());
    }
    let mut kinds = BTreeMap::new();
    if !p.failures.is_empty() {
        kinds.insert("crash".to_string(), p.failures.len() as u64);
    }
    if p.join.is_some() {
        kinds.insert("join".to_string(), 1);
    }
    Ok(SeedResult {
        seed,
        faults,
        kinds,
        violations: j.violations,
        judged: j.judged,
        notes: vec![format!(
            "{} replicas, {} packets scripted, {} seen at sinks",
            p.rig.replicas,
            rig.scripted,
            r.observations.len()
        )],
        events: rig.sim.stats().events,
    })
}

/// The campaign run of `seed`: a random faulty run, every SRO property
/// judged.
pub fn run_seed(seed: u64) -> Result<SeedResult, String> {
    run_plan(seed, &plan(seed, Broken::None))
}
