//! The SwiSh controller as a device (specs/swish.md §2, §4.5): an external
//! server with a control session to the CPU of every SDW replica, speaking
//! the §4.5 RPC ([`inca_wire::swish::ctl`]). A scenario's `[[server]] kind =
//! "swish_controller"`, or an `inca node` server live; sans-IO, so both
//! drivers run the same state machine.
//!
//! What it does: once every replica's session is up it reads each one's
//! window register (READ_REG: the replica is loaded and answers), and when
//! all have answered it INJECTs START into every replica together, so the
//! replicas begin window 0 within one RPC of each other [our choice: the
//! paper's controller starts the collection; the rig did it by a control
//! message at a fixed time]. After START, a session that resets is a
//! replica's fail-stop [our choice: the crash of a peer resets its
//! sessions at once, the simulator's and TCP's behaviour]: `detect` later
//! (T_detect, default 1 ms, spec §5.1) the controller runs §5.6 recovery
//! on the survivors over their sessions — the steps of
//! [`super::recovery_plan::Recovery`], one RPC at a time (the spec's serial
//! controller). A failure during a recovery aborts it (counted; not
//! retried) [our choice]. A replica declared failed whose session comes up
//! again (it restarted, empty) joins (§5.6 "Join"): the same steps with it
//! among the live ones, once no recovery or other join is running; its
//! queries carry not_ready until its first window completes. An RPC not
//! answered within [`super::recovery::RPC_TIMEOUT`] aborts the recovery or
//! join it belongs to (counted) [our choice]; a join is tried again when
//! the replica's session next comes up.

use std::any::Any;

use inca_sim::engine::Node;
use inca_sim::metrics::NodeReport;
use inca_switch::device::{Device, DeviceRng, Input, Nanos, Output, SessionEvent, SessionId};
use inca_switch::register::{Pair, RegisterValue};
use inca_wire::swish::ctl::Rpc;
use serde::Deserialize;

use super::config::Merge;
use super::frames::{internal_frame, T_START};
use super::program::{ARR_WINREG, CFG_FAILED, CFG_PAUSED};
use super::recovery_plan::{Call, Op, Recovery};
use crate::addr::{ReplicaAddr, Rid};

/// The server kind's name in scenarios.
pub const KIND: &str = "swish_controller";
/// Replicas one controller manages at most (the counter filter's N).
pub const MAX_REPLICAS: usize = super::config::COUNTER_MAX_N;

/// One managed replica, as the scenario gives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReplicaSpec {
    /// Its replica id.
    pub rid: Rid,
    /// The control session to its CPU.
    pub session: u32,
}

/// The controller's configuration (`params` of its `[[server]]`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ControllerConfig {
    /// The replicas.
    pub replicas: Vec<ReplicaSpec>,
    /// The collection's SwiSh group id (default 1, as the replicas').
    #[serde(default = "one_u8")]
    pub group_id: u8,
    /// The collection id (default 1).
    #[serde(default = "one_u16")]
    pub coll_id: u16,
    /// The window START begins (default 0).
    #[serde(default)]
    pub start_window: u32,
    /// The collection's rows, for recovery (default 3, as the replicas').
    #[serde(default = "three")]
    pub rows: u8,
    /// Its columns (default 64).
    #[serde(default = "sixty_four")]
    pub cols: u32,
    /// Its merge: `sum` (default), `or` or `max`.
    #[serde(default = "sum")]
    pub merge: String,
    /// Failure detection delay T_detect (default 1 ms, spec §5.1), e.g.
    /// "1ms".
    #[serde(default)]
    pub detect: Option<String>,
}

fn three() -> u8 {
    3
}

fn sixty_four() -> u32 {
    64
}

fn sum() -> String {
    "sum".into()
}

fn one_u8() -> u8 {
    1
}

fn one_u16() -> u16 {
    1
}

impl ControllerConfig {
    /// From a `[[server]]`'s params; errors name the field.
    pub fn from_table(t: &toml::Table) -> Result<Self, String> {
        let c: ControllerConfig = toml::Value::Table(t.clone())
            .try_into()
            .map_err(|e: toml::de::Error| format!("params: {}", e.message()))?;
        if c.replicas.is_empty() || c.replicas.len() > MAX_REPLICAS {
            return Err(format!(
                "params.replicas: {} replicas; 1 to {MAX_REPLICAS}",
                c.replicas.len()
            ));
        }
        let mut rids: Vec<Rid> = c.replicas.iter().map(|r| r.rid).collect();
        rids.sort_unstable();
        let mut sessions: Vec<u32> = c.replicas.iter().map(|r| r.session).collect();
        sessions.sort_unstable();
        if rids.windows(2).any(|w| w[0] == w[1]) {
            return Err("params.replicas: a rid appears twice".into());
        }
        if sessions.windows(2).any(|w| w[0] == w[1]) {
            return Err("params.replicas: a session appears twice".into());
        }
        if rids
            .iter()
            .enumerate()
            .any(|(k, &r)| usize::from(r) != k + 1)
        {
            return Err("params.replicas: rids must be 1 to N, the members' bit order".into());
        }
        if c.rows == 0 || c.rows > 3 || c.cols == 0 {
            return Err("params.rows/cols: 1 to 3 rows, at least one column".into());
        }
        c.merge_fn()?;
        c.detect_ns()?;
        let mut c = c;
        c.replicas.sort_by_key(|r| r.rid);
        Ok(c)
    }

    fn merge_fn(&self) -> Result<Merge, String> {
        match self.merge.as_str() {
            "sum" => Ok(Merge::Sum),
            "or" => Ok(Merge::Or),
            "max" => Ok(Merge::Max),
            other => Err(format!("params.merge: {other:?}: sum, or or max")),
        }
    }

    fn detect_ns(&self) -> Result<Nanos, String> {
        match &self.detect {
            None => Ok(super::recovery::T_DETECT),
            Some(t) => inca_switch::units::parse_time(t)
                .ok_or_else(|| format!("params.detect: {t:?} is not a time (\"1ms\")")),
        }
    }
}

/// A recovery in progress.
#[derive(Debug, Clone)]
struct Running {
    plan: Recovery,
    /// The batch's calls not yet sent.
    queue: std::collections::VecDeque<Call>,
    /// Answers to the batch's calls so far.
    answers: Vec<Vec<u64>>,
    /// The answered call in flight: (tag, replica).
    waiting: Option<(u32, usize)>,
}

/// Timer token: failure detection.
const DETECT: u64 = 1;
/// Timer token: `RPC_DEADLINE | tag`, the deadline of an RPC's answer.
const RPC_DEADLINE: u64 = 1 << 32;

/// Where one replica is.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct State {
    up: bool,
    /// The window READ_REG answered (before START).
    window: Option<u32>,
}

/// Counters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ControllerCounters {
    /// Sessions that came up.
    pub ups: u64,
    /// Session resets.
    pub resets: u64,
    /// Resets after START (a replica lost; recovery not driven).
    pub resets_after_start: u64,
    /// RPCs sent.
    pub rpcs_sent: u64,
    /// VALUES answers received.
    pub values_in: u64,
    /// Messages that were not an answer to an outstanding RPC.
    pub unexpected: u64,
    /// RPCs the session refused.
    pub refused: u64,
    /// STARTs injected.
    pub starts: u64,
    /// Recoveries completed.
    pub recoveries: u64,
    /// Recoveries abandoned (a failure during one, a replica's error).
    pub recoveries_aborted: u64,
    /// Joins completed (§5.6).
    pub joins: u64,
    /// Joins abandoned (counted in `recoveries_aborted` too).
    pub joins_aborted: u64,
    /// RPCs of a recovery or join not answered in time.
    pub rpc_timeouts: u64,
    /// The last recovery's wmax.
    pub recovery_wmax: u64,
    /// When the last recovery began and when its STARTs went out.
    pub recovery_started: Nanos,
    /// See `recovery_started`.
    pub recovery_done: Nanos,
}

/// The controller.
#[derive(Debug, Clone)]
pub struct SdwController {
    cfg: ControllerConfig,
    state: Vec<State>,
    /// Outstanding READ_REGs: (tag, replica index).
    waiting: Vec<(u32, usize)>,
    tag: u32,
    /// When START went out.
    started_at: Option<Nanos>,
    /// Replicas declared failed (indices).
    failed: Vec<usize>,
    /// A detection timer is set.
    detecting: bool,
    recovery: Option<Running>,
    /// Failed replicas whose sessions came up again, to join in order.
    joining: Vec<usize>,
    /// Replicas whose sessions reset since the last recovery (up again or
    /// not: a restarted replica lost its state).
    lost: Vec<usize>,
    /// Counters.
    pub counters: ControllerCounters,
}

impl SdwController {
    /// A controller for `cfg`.
    pub fn new(cfg: ControllerConfig) -> Self {
        let n = cfg.replicas.len();
        SdwController {
            cfg,
            state: vec![State::default(); n],
            waiting: Vec::new(),
            tag: 0,
            started_at: None,
            failed: Vec::new(),
            detecting: false,
            recovery: None,
            joining: Vec::new(),
            lost: Vec::new(),
            counters: ControllerCounters::default(),
        }
    }

    /// When START went out (None: not yet).
    pub fn started_at(&self) -> Option<Nanos> {
        self.started_at
    }

    fn index(&self, s: SessionId) -> Option<usize> {
        self.cfg.replicas.iter().position(|r| r.session == s.0)
    }

    fn send(&mut self, now: Nanos, i: usize, rpc: Rpc, out: &mut Vec<Output>) {
        // Our RPCs are small: READ_REG and a START frame.
        let Ok(body) = rpc.to_vec() else {
            return;
        };
        self.counters.rpcs_sent += 1;
        out.push(Output::Session {
            at: now,
            session: SessionId(self.cfg.replicas[i].session),
            body,
        });
    }

    /// Reads replica `i`'s window register.
    fn probe(&mut self, now: Nanos, i: usize, out: &mut Vec<Output>) {
        self.tag = self.tag.wrapping_add(1);
        let tag = self.tag;
        self.waiting.retain(|w| w.1 != i);
        self.waiting.push((tag, i));
        self.send(
            now,
            i,
            Rpc::ReadReg {
                tag,
                array: ARR_WINREG,
                start: 0,
                count: 1,
            },
            out,
        );
    }

    fn maybe_start(&mut self, now: Nanos, out: &mut Vec<Output>) {
        if self.started_at.is_some() || self.state.iter().any(|s| s.window.is_none()) {
            return;
        }
        self.started_at = Some(now);
        for i in 0..self.state.len() {
            let rid = self.cfg.replicas[i].rid;
            let me = ReplicaAddr::conventional(rid, 0);
            let frame = internal_frame(
                &me,
                self.cfg.group_id,
                T_START,
                self.cfg.start_window,
                self.cfg.coll_id,
            );
            self.tag = self.tag.wrapping_add(1);
            let tag = self.tag;
            self.send(now, i, Rpc::Inject { tag, frame }, out);
            self.counters.starts += 1;
        }
    }

    /// The RPC for a recovery operation.
    fn rpc(&mut self, call: &Call) -> Rpc {
        self.tag = self.tag.wrapping_add(1);
        let tag = self.tag;
        match &call.op {
            Op::Pause => Rpc::SetCfg {
                tag,
                name: CFG_PAUSED,
                value: vec![1],
            },
            Op::Read { arr, first, count } => Rpc::ReadReg {
                tag,
                array: *arr,
                start: *first,
                count: *count,
            },
            Op::Write { arr, first, vals } => Rpc::WriteReg {
                tag,
                array: *arr,
                start: *first,
                values: vals.clone(),
            },
            Op::Failed(rids) => Rpc::SetCfg {
                tag,
                name: CFG_FAILED,
                value: rids.iter().flat_map(|r| r.to_be_bytes()).collect(),
            },
            Op::Start(win) => {
                let me = ReplicaAddr::conventional(self.cfg.replicas[call.replica].rid, 0);
                let frame = internal_frame(&me, self.cfg.group_id, T_START, *win, self.cfg.coll_id);
                Rpc::Inject { tag, frame }
            }
        }
    }

    /// Begins §5.6 recovery of the replicas not declared failed.
    fn recover(&mut self, now: Nanos, out: &mut Vec<Output>) {
        let mut down: Vec<usize> = (0..self.state.len())
            .filter(|&i| !self.state[i].up)
            .collect();
        down.append(&mut self.lost);
        for i in down {
            if !self.failed.contains(&i) {
                self.failed.push(i);
                // Restarted before detection: it joins after the recovery.
                if self.state[i].up && !self.joining.contains(&i) {
                    self.joining.push(i);
                }
            }
        }
        self.failed.sort_unstable();
        let merge = self.cfg.merge_fn().unwrap_or(Merge::Sum);
        let plan = Recovery::new(
            self.state.len(),
            &self.failed,
            self.cfg.rows,
            self.cfg.cols,
            merge,
            false,
        );
        self.run(now, plan, out);
    }

    fn run(&mut self, now: Nanos, plan: Recovery, out: &mut Vec<Output>) {
        self.counters.recovery_started = now;
        self.recovery = Some(Running {
            plan,
            queue: Default::default(),
            answers: Vec::new(),
            waiting: None,
        });
        self.pump(now, out);
    }

    /// Begins the next join, if one waits and nothing else runs.
    fn maybe_join(&mut self, now: Nanos, out: &mut Vec<Output>) {
        if self.recovery.is_some() || self.detecting {
            return;
        }
        self.joining
            .retain(|&i| self.failed.contains(&i) && self.state[i].up);
        let Some(&i) = self.joining.first() else {
            return;
        };
        self.joining.remove(0);
        let merge = self.cfg.merge_fn().unwrap_or(Merge::Sum);
        let plan = Recovery::join(
            self.state.len(),
            &self.failed,
            i,
            self.cfg.rows,
            self.cfg.cols,
            merge,
            false,
        );
        self.run(now, plan, out);
    }

    /// Abandons the running recovery or join.
    fn abort(&mut self) {
        if let Some(r) = self.recovery.take() {
            self.counters.recoveries_aborted += 1;
            if r.plan.joiner().is_some() {
                self.counters.joins_aborted += 1;
            }
        }
    }

    /// Sends the recovery's calls until one awaits its answer; takes the
    /// next batch when one is done.
    fn pump(&mut self, now: Nanos, out: &mut Vec<Output>) {
        loop {
            let Some(run) = self.recovery.as_mut() else {
                return;
            };
            if run.waiting.is_some() {
                return;
            }
            let Some(call) = run.queue.pop_front() else {
                let answers = std::mem::take(&mut run.answers);
                match run.plan.next(&answers) {
                    Ok(Some(batch)) => {
                        if let Some(r) = self.recovery.as_mut() {
                            r.queue = batch.into();
                        }
                        continue;
                    }
                    Ok(None) => {
                        match run.plan.joiner() {
                            Some(j) => {
                                self.counters.joins += 1;
                                self.failed.retain(|&f| f != j);
                            }
                            None => self.counters.recoveries += 1,
                        }
                        self.counters.recovery_wmax = u64::from(run.plan.wmax());
                        self.counters.recovery_done = now;
                        self.recovery = None;
                        self.maybe_join(now, out);
                    }
                    Err(_) => self.abort(),
                }
                return;
            };
            let rpc = self.rpc(&call);
            let tag = rpc.tag();
            let answered = call.op.answered();
            self.send(now, call.replica, rpc, out);
            let Some(run) = self.recovery.as_mut() else {
                return;
            };
            if answered {
                run.waiting = Some((tag, call.replica));
                out.push(Output::Timer {
                    at: now + super::recovery::RPC_TIMEOUT,
                    token: RPC_DEADLINE | u64::from(tag),
                });
            } else {
                run.answers.push(Vec::new());
            }
        }
    }

    /// An answer for the recovery; true if it was one.
    fn recovery_answer(
        &mut self,
        now: Nanos,
        i: usize,
        tag: u32,
        values: Vec<u64>,
        out: &mut Vec<Output>,
    ) -> bool {
        let Some(run) = self.recovery.as_mut() else {
            return false;
        };
        if run.waiting != Some((tag, i)) {
            return false;
        }
        run.waiting = None;
        run.answers.push(values);
        self.counters.values_in += 1;
        self.pump(now, out);
        true
    }

    fn on_session(&mut self, now: Nanos, e: SessionEvent, out: &mut Vec<Output>) {
        let Some(i) = self.index(e.session()) else {
            self.counters.unexpected += 1;
            return;
        };
        match e {
            SessionEvent::Up { .. } => {
                self.counters.ups += 1;
                self.state[i].up = true;
                if self.started_at.is_none() {
                    self.probe(now, i, out);
                } else if self.failed.contains(&i) && !self.joining.contains(&i) {
                    self.joining.push(i);
                    self.maybe_join(now, out);
                }
            }
            SessionEvent::Reset { .. } => {
                self.counters.resets += 1;
                self.state[i].up = false;
                self.waiting.retain(|w| w.1 != i);
                if self.started_at.is_some() {
                    self.counters.resets_after_start += 1;
                    if !self.failed.contains(&i) && !self.lost.contains(&i) {
                        self.lost.push(i);
                    }
                    self.abort();
                    if !self.failed.contains(&i) && !self.detecting {
                        self.detecting = true;
                        let at = now + self.cfg.detect_ns().unwrap_or(super::recovery::T_DETECT);
                        out.push(Output::Timer { at, token: DETECT });
                    }
                } else {
                    self.state[i].window = None;
                }
            }
            SessionEvent::Refused { .. } => self.counters.refused += 1,
            SessionEvent::Message { body, .. } => match Rpc::parse(&body) {
                Ok(Rpc::Values { tag, values }) => {
                    if self.recovery_answer(now, i, tag, values.clone(), out) {
                        return;
                    }
                    let Some(k) = self.waiting.iter().position(|w| w == &(tag, i)) else {
                        self.counters.unexpected += 1;
                        return;
                    };
                    self.waiting.swap_remove(k);
                    self.counters.values_in += 1;
                    let win = values.first().map_or(0, |&v| Pair::from_u64(v).lo);
                    self.state[i].window = Some(win);
                    self.maybe_start(now, out);
                }
                _ => self.counters.unexpected += 1,
            },
        }
    }
}

impl Device for SdwController {
    fn handle(&mut self, now: Nanos, input: Input, _rng: &mut DeviceRng, out: &mut Vec<Output>) {
        match input {
            Input::Session(e) => self.on_session(now, e, out),
            Input::Timer { token: DETECT } => {
                self.detecting = false;
                if self.recovery.is_none() {
                    self.recover(now, out);
                }
            }
            Input::Timer { token } if token & RPC_DEADLINE != 0 => {
                let tag = token as u32;
                if self
                    .recovery
                    .as_ref()
                    .is_some_and(|r| r.waiting.is_some_and(|w| w.0 == tag))
                {
                    self.counters.rpc_timeouts += 1;
                    self.abort();
                    self.maybe_join(now, out);
                }
            }
            _ => {}
        }
    }

    fn restart(&mut self, _now: Nanos, _rng: &mut DeviceRng, _out: &mut Vec<Output>) {
        // A restarted controller starts over: its sessions come up again.
        let cfg = self.cfg.clone();
        let counters = std::mem::take(&mut self.counters);
        *self = SdwController::new(cfg);
        self.counters = counters;
    }
}

impl Node for SdwController {
    fn kind(&self) -> &'static str {
        "server"
    }

    fn report(&self, _now: Nanos) -> NodeReport {
        let c = &self.counters;
        let mut r = NodeReport::default();
        for (k, v) in [
            ("ctl_ups", c.ups),
            ("ctl_resets", c.resets),
            ("ctl_resets_after_start", c.resets_after_start),
            ("ctl_rpcs_sent", c.rpcs_sent),
            ("ctl_values_in", c.values_in),
            ("ctl_unexpected", c.unexpected),
            ("ctl_refused", c.refused),
            ("ctl_starts", c.starts),
            ("ctl_recoveries", c.recoveries),
            ("ctl_recoveries_aborted", c.recoveries_aborted),
            ("ctl_joins", c.joins),
            ("ctl_joins_aborted", c.joins_aborted),
            ("ctl_rpc_timeouts", c.rpc_timeouts),
            ("ctl_recovery_wmax", c.recovery_wmax),
            ("ctl_recovery_started_ns", c.recovery_started),
            ("ctl_recovery_done_ns", c.recovery_done),
            ("ctl_failed", self.failed.len() as u64),
            ("ctl_started_ns", self.started_at.unwrap_or(0)),
            (
                "ctl_replicas_up",
                self.state.iter().filter(|s| s.up).count() as u64,
            ),
        ] {
            r.counters.insert(k.into(), v);
        }
        r
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctl() -> SdwController {
        let t: toml::Table =
            toml::from_str("replicas = [{ rid = 1, session = 1 }, { rid = 2, session = 2 }]")
                .unwrap();
        SdwController::new(ControllerConfig::from_table(&t).unwrap())
    }

    fn step(c: &mut SdwController, e: SessionEvent) -> Vec<Output> {
        let mut out = Vec::new();
        let mut rng = inca_switch::device::device_rng(1, 0);
        c.handle(0, Input::Session(e), &mut rng, &mut out);
        out
    }

    fn rpc(o: &Output) -> Rpc {
        match o {
            Output::Session { body, .. } => Rpc::parse(body).unwrap(),
            other => panic!("not a session message: {other:?}"),
        }
    }

    #[test]
    fn starts_every_replica_once_all_have_answered() {
        let mut c = ctl();
        let up = |s| SessionEvent::Up {
            session: SessionId(s),
        };
        let o1 = step(&mut c, up(1));
        let Rpc::ReadReg { tag: t1, .. } = rpc(&o1[0]) else {
            panic!("a window read first")
        };
        let o2 = step(&mut c, up(2));
        let Rpc::ReadReg { tag: t2, .. } = rpc(&o2[0]) else {
            panic!("a window read first")
        };
        let values = |tag| {
            Rpc::Values {
                tag,
                values: vec![0],
            }
            .to_vec()
            .unwrap()
        };
        // A stray answer (wrong session for the tag) starts nothing.
        let none = step(
            &mut c,
            SessionEvent::Message {
                session: SessionId(1),
                body: values(t2),
            },
        );
        assert!(none.is_empty());
        assert_eq!(c.counters.unexpected, 1);
        assert!(step(
            &mut c,
            SessionEvent::Message {
                session: SessionId(1),
                body: values(t1)
            }
        )
        .is_empty());
        let starts = step(
            &mut c,
            SessionEvent::Message {
                session: SessionId(2),
                body: values(t2),
            },
        );
        assert_eq!(starts.len(), 2);
        for o in &starts {
            let Rpc::Inject { frame, .. } = rpc(o) else {
                panic!("START is injected")
            };
            let u = inca_wire::parse_udp_frame(&frame).unwrap();
            assert_eq!(u.payload[1], T_START);
        }
        assert_eq!(c.counters.starts, 2);
    }

    #[test]
    fn bad_params_name_the_field() {
        let t: toml::Table =
            toml::from_str("replicas = [{ rid = 1, session = 1 }, { rid = 1, session = 2 }]")
                .unwrap();
        assert!(ControllerConfig::from_table(&t)
            .unwrap_err()
            .contains("replicas"));
        let t: toml::Table = toml::from_str("replica = []").unwrap();
        assert!(ControllerConfig::from_table(&t)
            .unwrap_err()
            .contains("replica"));
    }
}
