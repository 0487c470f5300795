//! The per-run check of a RedPlane fault campaign (spec §6.3, §9 item 16):
//! one [`RunChecker`] per simulated run records what every RedPlane switch
//! and store server of the run did (a [`SharedRecorder`] behind their
//! observer hooks) and, after the run, judges every flow:
//!
//! - Checker B on every complete flow, and Checker A (the independent
//!   search) on every complete flow too, window by window (cut where the
//!   flow is quiescent, [`check_a_windowed`]) with [`A_CAMPAIGN_BUDGET`]
//!   nodes per window; a flow whose window exceeds it is counted
//!   inconclusive, and only flows it decided count as judged by A;
//! - the app oracles: Sync-Counter counts, and mapping stability for NAT,
//!   firewall and LB (a released translation or decision never changes);
//! - the runtime invariants of the [`Monitor`] that the recorded events
//!   feed: durability before release (item 3) and no stale read (item 8).
//!
//! Lost outputs are counted, never violations (§9 item 16): an input
//! without an output is free for the checkers. Each violation is one string
//! naming the flow, the time and a short history excerpt.
//!
//! [our choice] One linearizable app per run: the checker judges flows with
//! the app of the first RedPlane switch it was told about and reports a
//! run that mixes apps as a configuration error rather than guess which
//! app a key belongs to. The store's record-creation commit (the first
//! commit of the key) is the flow's initial state (`store_init`), so a
//! NAT's allocated port is part of the reference.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};

use inca_apps::headers::parse;
use inca_apps::params::Params;

use super::history::{FlowHistory, Recorder, SharedRecorder};
use super::invariants::Monitor;
use super::linearizability::oracles::{mapping_stable, sync_counter};
use super::linearizability::{check_a_windowed, check_b, AppSpec, Kind, Op, Verdict, A_BUDGET};
use crate::apps::SpecModel;
use crate::catalog::{with_program, RpVisitor};
use crate::store::observer::StoreObserver;
use crate::switch::{Access, Observer, RedPlane, RedPlaneApp};

/// Checker A's node budget per window in a campaign (Inconclusive beyond
/// it).
pub const A_CAMPAIGN_BUDGET: usize = A_BUDGET / 4;
/// Events of a flow quoted in a violation.
pub const EXCERPT_EVENTS: usize = 8;

/// What the checker knows about the run's switches.
#[derive(Default)]
struct Switches {
    /// The app's program name and parameters (the first switch's).
    program: Option<(String, Params)>,
    /// Programs that differ from the first (a configuration error).
    mixed: Vec<String>,
    /// Switch id → its RedPlane IPv4 address (the store's owner id).
    ips: BTreeMap<u32, u32>,
}

/// Records one run and checks it afterwards. Cheap to clone (shared).
#[derive(Clone, Default)]
pub struct RunChecker {
    recorder: SharedRecorder,
    switches: Arc<Mutex<Switches>>,
}

/// What [`RunChecker::check`] found.
#[derive(Clone, Debug, Default)]
pub struct RunReport {
    /// Violations, one message each.
    pub violations: Vec<String>,
    /// Flows checked.
    pub flows: usize,
    /// Operations over all flows.
    pub ops: usize,
    /// Inputs whose output was lost (counted, not violations).
    pub lost_outputs: usize,
    /// Flows Checker A judged.
    pub checker_a_flows: usize,
    /// Operations of the flows Checker A judged.
    pub checker_a_ops: usize,
    /// Flows Checker B judged (every complete one).
    pub checker_b_flows: usize,
    /// Flows a checker could not decide (over the recorder's cap, budget).
    pub inconclusive: usize,
    /// Monitor events fed.
    pub monitor_events: u64,
}

impl RunChecker {
    /// A checker with an empty default recorder.
    pub fn new() -> Self {
        RunChecker::default()
    }

    /// The recorder shared by the observers.
    pub fn recorder(&self) -> &SharedRecorder {
        &self.recorder
    }

    /// Registers a RedPlane switch running `program` with `params` and
    /// returns the observer to build it with.
    pub fn switch_observer(&self, program: &str, params: &Params) -> Arc<dyn Observer> {
        if let Ok(cfg) = crate::switch::RedPlaneConfig::from_params(params) {
            let mut s = self.switches.lock().unwrap_or_else(|e| e.into_inner());
            s.ips.insert(cfg.switch_id, u32::from_be_bytes(cfg.ip));
            match &s.program {
                None => s.program = Some((program.to_string(), params.clone())),
                Some((p, _)) if p != program => s.mixed.push(program.to_string()),
                Some(_) => {}
            }
        }
        Arc::new(self.recorder.clone())
    }

    /// The observer for a store server of the run.
    pub fn store_observer(&self) -> Box<dyn StoreObserver> {
        Box::new(self.recorder.clone())
    }

    /// Checks the recorded run (`seed` is the run's; the checks do not
    /// depend on it).
    pub fn check(&self, seed: u64) -> RunReport {
        let _ = seed;
        let s = self.switches.lock().unwrap_or_else(|e| e.into_inner());
        let mut report = RunReport::default();
        if !s.mixed.is_empty() {
            report.violations.push(format!(
                "configuration: one linearizable RedPlane app per checked run, found {:?} and {:?}",
                s.program.as_ref().map(|p| p.0.as_str()),
                s.mixed
            ));
            return report;
        }
        let Some((program, params)) = s.program.clone() else {
            return report;
        };
        let ips = s.ips.clone();
        drop(s);
        let judge = Judge {
            report: &mut report,
            ips: &ips,
        };
        let recorder = &self.recorder;
        let run =
            recorder.with(|rec| with_program(&program, &params, None, JudgeVisit(judge, rec)));
        if let Err(e) = run {
            report
                .violations
                .push(format!("configuration: cannot rebuild {program}: {e}"));
        }
        report
    }
}

struct Judge<'a> {
    report: &'a mut RunReport,
    ips: &'a BTreeMap<u32, u32>,
}

struct JudgeVisit<'a, 'r>(Judge<'a>, &'r mut Recorder);

impl RpVisitor for JudgeVisit<'_, '_> {
    type Output = ();

    fn visit<A: RedPlaneApp + SpecModel>(self, program: RedPlane<A>) {
        let JudgeVisit(mut judge, rec) = self;
        let app = program.app;
        let name = app.name().to_string();
        let oracle = Oracle::of(&name);
        let classify = |b: &[u8]| match parse(b) {
            Ok(p) if app.classify(&p, b) == Access::Read => Kind::Read,
            _ => Kind::Write,
        };
        let from_l3 = |b: &[u8]| b.get(14..).unwrap_or(&[]).to_vec();
        let mut monitor = Monitor::new();
        let lost = rec.leases_lost_all().to_vec();
        for (key, flow) in rec.flows_mut().iter_mut() {
            judge.report.flows += 1;
            if !flow.complete() {
                judge.report.inconclusive += 1;
                continue;
            }
            let ops = flow.ops(classify, from_l3);
            judge.report.ops += ops.len();
            judge.report.lost_outputs += ops.iter().filter(|o| o.output.is_none()).count();
            let initial = flow
                .commits
                .first()
                .map(|c| c.value.clone())
                .unwrap_or_else(|| vec![0; app.value_bytes()]);
            let spec = AppSpec { app: &app, initial };
            let b = check_b(&spec, &ops, &flow.commits);
            judge.report.checker_b_flows += 1;
            judge.verdict("Checker B", key, flow, &ops, &b);
            let a = check_a_windowed(&spec, &ops, A_CAMPAIGN_BUDGET);
            if !matches!(a.verdict, Verdict::Inconclusive(_)) {
                judge.report.checker_a_flows += 1;
                judge.report.checker_a_ops += ops.len();
            }
            judge.verdict("Checker A", key, flow, &ops, &a.verdict);
            if let Err(v) = oracle.check(&ops) {
                judge.violation(
                    key,
                    flow,
                    v.ops.iter().filter_map(|id| time_of(&ops, *id)).min(),
                    format!("{name} oracle: {} (packets {:?})", v.reason, v.ops),
                );
            }
            let ips = judge.ips;
            for e in flow.monitor_events_with(key, &lost, |sw| ips.get(&sw).copied().unwrap_or(sw))
            {
                monitor.observe(e);
            }
        }
        judge.report.monitor_events = monitor.events();
        for v in monitor.violations() {
            let mut msg = format!(
                "flow {}: invariant 6.2.{} at {} ns: {}",
                hex(&v.key),
                v.invariant,
                v.time,
                v.detail
            );
            for line in &v.excerpt {
                let _ = write!(msg, "\n  {line}");
            }
            judge.report.violations.push(msg);
        }
        if monitor.dropped_violations() > 0 {
            judge.report.violations.push(format!(
                "{} more invariant violations not kept",
                monitor.dropped_violations()
            ));
        }
    }
}

type FlowOp = Op<Vec<u8>, Vec<Vec<u8>>>;

impl Judge<'_> {
    fn verdict(
        &mut self,
        checker: &str,
        key: &[u8],
        flow: &FlowHistory,
        ops: &[FlowOp],
        v: &Verdict,
    ) {
        match v {
            Verdict::Linearizable => {}
            Verdict::Inconclusive(_) => self.report.inconclusive += 1,
            Verdict::Violation { reason, ops: ids } => {
                let at = ids.iter().filter_map(|id| time_of(ops, *id)).min();
                self.violation(
                    key,
                    flow,
                    at,
                    format!("{checker}: not linearizable: {reason} (packets {ids:?})"),
                );
            }
        }
    }

    fn violation(&mut self, key: &[u8], flow: &FlowHistory, at: Option<u64>, what: String) {
        let at = at.unwrap_or(0);
        let mut msg = format!("flow {} at {at} ns: {what}", hex(key));
        for line in excerpt(flow, at) {
            let _ = write!(msg, "\n  {line}");
        }
        self.report.violations.push(msg);
    }
}

/// The time of the first event of packet `id` (its input).
fn time_of(ops: &[FlowOp], id: u64) -> Option<u64> {
    ops.iter().find(|o| o.id == id).map(|o| o.t_in)
}

/// The flow's events around `at`: the last [`EXCERPT_EVENTS`] inputs,
/// outputs, commits and grants at or before `at` plus a few after, in time
/// order.
fn excerpt(flow: &FlowHistory, at: u64) -> Vec<String> {
    let mut ev: Vec<(u64, String)> = Vec::new();
    for i in &flow.inputs {
        ev.push((
            i.time,
            format!("{:>12} in   sw{} id {:?}", i.time, i.switch, i.id),
        ));
    }
    for o in &flow.outputs {
        ev.push((
            o.time,
            format!(
                "{:>12} out  sw{} id {:?} version {:?}",
                o.time, o.switch, o.id, o.version
            ),
        ));
    }
    for c in &flow.commits {
        ev.push((
            c.time,
            format!(
                "{:>12} {} version {:?} value {}",
                c.time,
                if c.grant { "fence" } else { "write" },
                c.version,
                hex(&c.value)
            ),
        ));
    }
    for g in &flow.grants {
        ev.push((
            g.time,
            format!(
                "{:>12} grant owner {} base {}",
                g.time,
                std::net::Ipv4Addr::from(g.owner),
                g.base
            ),
        ));
    }
    ev.sort();
    let split = ev.partition_point(|e| e.0 <= at);
    let from = split.saturating_sub(EXCERPT_EVENTS);
    let to = (split + EXCERPT_EVENTS / 2).min(ev.len());
    ev[from..to].iter().map(|e| e.1.clone()).collect()
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// The app oracle for a program.
enum Oracle {
    /// Sync-Counter: the stamped counts.
    Counter,
    /// NAT, firewall, LB: the released packet (from IPv4 on, with its
    /// payload) identifies the mapping; a connection's translation or
    /// decision never changes once released.
    Mapping,
    /// No oracle (KV, EPC: Checkers A/B judge them).
    None,
}

impl Oracle {
    fn of(app: &str) -> Self {
        if app.contains("sync_counter") || app.contains("counter") {
            Oracle::Counter
        } else if app.contains("nat") || app.contains("firewall") || app.contains("lb") {
            Oracle::Mapping
        } else {
            Oracle::None
        }
    }

    fn check(
        &self,
        ops: &[FlowOp],
    ) -> Result<(), super::linearizability::oracles::OracleViolation> {
        match self {
            Oracle::Counter => {
                let inputs: Vec<u64> = ops.iter().map(|o| o.t_in).collect();
                let outs: Vec<_> = ops
                    .iter()
                    .filter_map(|o| {
                        let (t_out, bytes, _) = o.output.as_ref()?;
                        let count = stamped_count(bytes.first()?)?;
                        Some((o.id, o.t_in, *t_out, count))
                    })
                    .collect();
                sync_counter(&inputs, &outs)
            }
            Oracle::Mapping => {
                // The translated addresses and ports: IPv4 source and
                // destination and the L4 ports of the first output.
                let outs: Vec<_> = ops
                    .iter()
                    .filter_map(|o| {
                        let (t_out, bytes, _) = o.output.as_ref()?;
                        let m = bytes.first().and_then(|b| mapping_of(b));
                        Some((o.id, *t_out, m))
                    })
                    .collect();
                mapping_stable(&outs)
            }
            Oracle::None => Ok(()),
        }
    }
}

/// The Sync-Counter stamp of an output (from its IPv4 header on).
fn stamped_count(l3: &[u8]) -> Option<u32> {
    let ihl = usize::from(l3.first()? & 0x0f) * 4;
    let at = ihl + 8 + crate::apps::sync_counter::STAMP_OFFSET;
    let b = l3.get(at..at + 4)?;
    Some(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
}

/// Addresses and ports of an output (from its IPv4 header on).
fn mapping_of(l3: &[u8]) -> Option<[u8; 12]> {
    let ihl = usize::from(l3.first()? & 0x0f) * 4;
    let mut m = [0u8; 12];
    m[..8].copy_from_slice(l3.get(12..20)?);
    m[8..].copy_from_slice(l3.get(ihl..ihl + 4)?);
    Some(m)
}
