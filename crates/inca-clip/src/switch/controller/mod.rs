//! The CLIP controller (spec §2, §5.5, §5.6): server liveness, pins and
//! their aging, serialised membership transitions, failure replacement
//! and heavy-flow promotion.
//!
//! [our choice] It runs on the switch's control-plane CPU, as a sans-IO
//! state machine the switch program feeds: the driver's reports
//! ([`crate::switch::Report`]: barriers, digests, idle pins, entry
//! activity, CLIP-CTL datagrams from servers), its own timers and the
//! experimenter's commands in; driver [`Command`]s and timers out. CLIP-CTL
//! to servers leaves as packet-out frames on their links. The same code
//! runs in the simulator and in a live switch node.
//!
//! - [`transition`] — `Transition(G_new)`, steps 1–11 of §5.6.
//! - [`promotion`] — the top-N rounds and the switch-table cache (§5.5).
//! - [`conns`] — TRD's index slices, CONN_NEW / CONN_RELEASE and the idle
//!   aging of `conn_idx` (§7.2).

pub mod conns;
pub mod promotion;
pub mod transition;

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use inca_switch::device::{Nanos, PortId};
use inca_wire::clip::ctl::{CtlBody, CtlMessage, CONTROLLER_PORT};

use crate::ctl::{self, Reliable};
use crate::flow::FlowKey;
use crate::switch::forwarding::MAX_MEMBERS;
use crate::switch::{Command, DriverConfig, Report};

pub use conns::{ConnStats, Conns};
pub use promotion::{Policy, Promotion};
pub use transition::{Mutation, Transition};

/// Timer token: a transition's Δ_g wait is over.
pub const TOKEN_DELTA: u64 = 1;
/// Timer token: the periodic tick (liveness, retransmissions, 100 ms).
pub const TOKEN_TICK: u64 = 2;
/// Timer token: a promotion round is due.
pub const TOKEN_REPORT: u64 = 3;
/// Timer token of the first scheduled transition (`schedule[i]` is
/// `TOKEN_SCHEDULE + i`).
pub const TOKEN_SCHEDULE: u64 = 0x100;
/// Most scheduled transitions.
pub const MAX_SCHEDULE: usize = 64;
/// The tick period.
pub const TICK_NS: Nanos = 100_000_000;
/// Missed heartbeats before a server is declared failed (§5.7).
pub const MISSED_HEARTBEATS: u64 = 3;

/// What the controller asks of the switch program.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Out {
    /// A driver command.
    Cmd(Command),
    /// A control-plane timer.
    Timer(Nanos, u64),
}

/// The controller's parameters.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ControllerConfig {
    /// Run the controller at all (off: the driver alone, commands from
    /// outside).
    pub enabled: bool,
    /// Δ_g, the in-flight bound a transition waits (§5.6, 10 ms).
    pub delta_g_ns: Nanos,
    /// Pin-table capacity the controller may fill.
    pub pin_capacity: usize,
    /// Heavy-flow promotion.
    pub promotion: Promotion,
    /// A transition pushes the previous group's live flows whose entry is
    /// promotable and known into the switch table while it admits them,
    /// pinning the rest (§5.6 step 5, the paper's push-to-switch); off:
    /// it pins them all. Independent of the periodic promotion policy.
    pub push: bool,
    /// A deliberate bug, for showing the campaign catches it.
    pub mutation: Mutation,
    /// Transitions asked at set times (since the switch started: the
    /// simulation's clock, or a live node's), in time order. One whose time
    /// has passed when the switch (re)starts is skipped.
    pub schedule: Vec<(Nanos, Vec<u8>)>,
    /// A server silent this long is declared failed (§5.7: 3 missed
    /// heartbeats of 100 ms).
    pub fail_after_ns: Nanos,
    /// TRD's connections: R and the index slices (R = 0: none).
    pub conns: Conns,
}

impl Default for ControllerConfig {
    fn default() -> Self {
        ControllerConfig {
            enabled: true,
            delta_g_ns: 10_000_000,
            pin_capacity: crate::switch::scalability::PIN_TABLE_ENTRIES,
            promotion: Promotion::default(),
            push: true,
            mutation: Mutation::None,
            schedule: Vec::new(),
            fail_after_ns: MISSED_HEARTBEATS * crate::server::endpoint::HEARTBEAT_NS,
            conns: Conns::default(),
        }
    }
}

/// A server as the controller knows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerState {
    /// Its switch port.
    pub port: PortId,
    /// Last heartbeat (or start).
    pub last_heard: Nanos,
    /// Declared failed.
    pub failed: bool,
    /// Retired: in neither slot and no pin refers to it (§5.6 scale-in);
    /// when. A server put into a group again leaves retirement.
    pub retired: Option<Nanos>,
}

/// A group slot as the controller last wrote it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Slot {
    /// Version (0: empty).
    pub ver: u16,
    /// Members in index order.
    pub members: Vec<u8>,
}

/// What the controller did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ControllerStats {
    /// Transitions completed.
    pub transitions: u64,
    /// Transitions refused (bad group, unknown or failed member).
    pub refused: u64,
    /// Transitions aborted: the pin table would overflow.
    pub pin_full: u64,
    /// Pins installed.
    pub pins: u64,
    /// Pins aged out and deleted.
    pub pins_aged: u64,
    /// Flows two servers both claimed in one query (an affinity break
    /// already happened).
    pub query_conflicts: u64,
    /// Servers declared failed.
    pub failures: u64,
    /// Members replaced in place after a failure.
    pub replaced: u64,
    /// Driver operations that failed.
    pub driver_failures: u64,
    /// CLIP-CTL datagrams refused.
    pub ctl_bad: u64,
    /// Overflow digests received.
    pub overflow_digests: u64,
    /// Servers retired after draining.
    pub retired: u64,
    /// Scheduled transitions asked (`schedule`).
    pub scheduled: u64,
}

/// An entry of the controller's history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A flip took effect: the two slots' members from now on.
    Slots([Vec<u8>; 2]),
    /// A member was replaced in place (failure).
    Replaced {
        /// Slot.
        slot: u8,
        /// The failed server.
        old: u8,
        /// Its replacement.
        new: u8,
    },
    /// A server retired.
    Retired(u8),
}

/// The controller. See the module documentation.
#[derive(Debug, Clone)]
pub struct Controller {
    config: ControllerConfig,
    t_exp_ns: Nanos,
    servers: BTreeMap<u8, ServerState>,
    slots: [Slot; 2],
    cur: u8,
    /// Pins installed: flow → server.
    pins: BTreeMap<FlowKey, u8>,
    /// Overflow digests not yet pinned.
    overflow: Vec<(FlowKey, u8)>,
    reliable: Reliable,
    queued: VecDeque<Vec<u8>>,
    transition: Option<Transition>,
    promotion: promotion::State,
    conns: conns::State,
    next_barrier: u64,
    history: Vec<(Nanos, Event)>,
    /// Counters.
    pub stats: ControllerStats,
}

impl Controller {
    /// A controller for the set-up in `driver`.
    pub fn new(config: ControllerConfig, driver: &DriverConfig) -> Self {
        let mut c = Controller {
            config,
            t_exp_ns: driver.t_exp_ns,
            servers: BTreeMap::new(),
            slots: [Slot::default(), Slot::default()],
            cur: 0,
            pins: BTreeMap::new(),
            overflow: Vec::new(),
            reliable: Reliable::default(),
            queued: VecDeque::new(),
            transition: None,
            promotion: promotion::State::default(),
            conns: conns::State::default(),
            next_barrier: 0,
            history: Vec::new(),
            stats: ControllerStats::default(),
        };
        c.reset(driver, 0);
        c
    }

    /// Its configuration.
    pub fn config(&self) -> &ControllerConfig {
        &self.config
    }

    /// The slots as last written and the current one.
    pub fn slots(&self) -> (&[Slot; 2], u8) {
        (&self.slots, self.cur)
    }

    /// The pins installed.
    pub fn pins(&self) -> &BTreeMap<FlowKey, u8> {
        &self.pins
    }

    /// The servers.
    pub fn servers(&self) -> &BTreeMap<u8, ServerState> {
        &self.servers
    }

    /// Named counters for reports.
    pub fn counters(&self) -> Vec<(String, u64)> {
        let s = &self.stats;
        let p = self.promotion_stats();
        [
            ("ctl_transitions", s.transitions),
            ("ctl_scheduled", s.scheduled),
            ("ctl_refused", s.refused),
            ("ctl_pin_full", s.pin_full),
            ("ctl_pins", s.pins),
            ("ctl_pins_aged", s.pins_aged),
            ("ctl_pins_live", self.pins.len() as u64),
            ("ctl_query_conflicts", s.query_conflicts),
            ("ctl_failures", s.failures),
            ("ctl_replaced", s.replaced),
            ("ctl_driver_failures", s.driver_failures),
            ("ctl_bad", s.ctl_bad),
            ("ctl_overflow_digests", s.overflow_digests),
            ("ctl_retired", s.retired),
            ("ctl_gave_up", self.reliable.gave_up),
            ("promo_rounds", p.rounds),
            ("promo_promoted", p.promoted),
            ("promo_pushed", p.pushed),
            ("promo_evicted", p.evicted),
            ("promo_installed", p.installed),
        ]
        .into_iter()
        .chain(self.conn_counters())
        .map(|(n, v)| (n.to_string(), v))
        .chain(self.group_counters())
        .collect()
    }

    /// The current slot's version, and per server whether it is in the
    /// current group and whether it retired.
    fn group_counters(&self) -> Vec<(String, u64)> {
        let cur = &self.slots[usize::from(self.cur & 1)];
        let mut out = vec![("ctl_cur_ver".to_string(), u64::from(cur.ver))];
        for (id, s) in &self.servers {
            out.push((
                format!("ctl_s{id}_in_group"),
                u64::from(cur.members.contains(id)),
            ));
            out.push((format!("ctl_s{id}_retired"), u64::from(s.retired.is_some())));
        }
        out
    }

    /// Whether a transition runs or waits.
    pub fn busy(&self) -> bool {
        self.transition.is_some() || !self.queued.is_empty()
    }

    fn reset(&mut self, driver: &DriverConfig, now: Nanos) {
        self.servers = driver
            .servers
            .iter()
            .map(|s| {
                (
                    s.id,
                    ServerState {
                        port: s.port,
                        last_heard: now,
                        failed: false,
                        retired: None,
                    },
                )
            })
            .collect();
        let g = &driver.initial_group;
        self.slots = [
            Slot {
                ver: if g.is_empty() { 0 } else { 1 },
                members: g.clone(),
            },
            Slot::default(),
        ];
        self.cur = 0;
        self.pins.clear();
        self.overflow.clear();
        self.reliable.clear();
        self.queued.clear();
        self.transition = None;
        self.promotion = promotion::State::default();
        self.history = vec![(
            now,
            Event::Slots([self.slots[0].members.clone(), self.slots[1].members.clone()]),
        )];
    }

    /// The switch (re)started: the driver installed the static set-up.
    pub fn start(&mut self, now: Nanos, driver: &DriverConfig) -> Vec<Out> {
        self.reset(driver, now);
        let mut out = vec![Out::Timer(now + TICK_NS, TOKEN_TICK)];
        out.extend(self.promotion_start(now));
        self.conns_start(now, driver, &mut out);
        for (i, (at, _)) in self.config.schedule.iter().enumerate().take(MAX_SCHEDULE) {
            if *at >= now {
                out.push(Out::Timer(*at, TOKEN_SCHEDULE + i as u64));
            }
        }
        out
    }

    /// A barrier token for the driver.
    fn barrier(&mut self) -> (u64, Out) {
        self.next_barrier += 1;
        (
            self.next_barrier,
            Out::Cmd(Command::Barrier(self.next_barrier)),
        )
    }

    /// Sends `body` to server `to` reliably (split into parts as needed).
    fn request(&mut self, now: Nanos, to: u8, body: CtlBody, out: &mut Vec<Out>) -> Vec<u32> {
        let Some(port) = self.servers.get(&to).map(|s| s.port) else {
            return Vec::new();
        };
        let parts = inca_wire::clip::ctl::split(body, inca_wire::clip::ctl::MAX_DATAGRAM);
        let n = parts.len();
        let mut txns = Vec::new();
        for (i, part) in parts.into_iter().enumerate() {
            if let Some(m) = self.reliable.request(now, 0, to, part, i + 1 < n) {
                txns.push(m.txn_id);
                out.push(Out::Cmd(Command::PacketOut {
                    port,
                    frame: ctl::frame(&m, 0, to),
                }));
            }
        }
        txns
    }

    fn send(&self, to: u8, msg: &CtlMessage, out: &mut Vec<Out>) {
        if let Some(s) = self.servers.get(&to) {
            out.push(Out::Cmd(Command::PacketOut {
                port: s.port,
                frame: ctl::frame(msg, 0, to),
            }));
        }
    }

    /// Live servers, in id order.
    pub fn live(&self) -> Vec<u8> {
        self.servers
            .iter()
            .filter(|(_, s)| !s.failed)
            .map(|(id, _)| *id)
            .collect()
    }

    /// Asks for `Transition(members)` (§5.6); transitions run one at a
    /// time, in the order asked.
    pub fn transition(&mut self, now: Nanos, members: Vec<u8>) -> Vec<Out> {
        let ok = !members.is_empty()
            && members.len() <= MAX_MEMBERS
            && members
                .iter()
                .all(|m| self.servers.get(m).is_some_and(|s| !s.failed))
            && members.iter().collect::<BTreeSet<_>>().len() == members.len();
        if !ok {
            self.stats.refused += 1;
            return Vec::new();
        }
        self.queued.push_back(members);
        self.next_transition(now)
    }

    fn next_transition(&mut self, now: Nanos) -> Vec<Out> {
        if self.transition.is_some() {
            return Vec::new();
        }
        let Some(members) = self.queued.pop_front() else {
            return Vec::new();
        };
        let mut out = Vec::new();
        let t = Transition::begin(self, now, members, &mut out);
        self.transition = Some(t);
        out
    }

    /// A driver report.
    pub fn on_report(&mut self, now: Nanos, r: Report) -> Vec<Out> {
        let mut out = Vec::new();
        match r {
            Report::Barrier(token) => {
                if let Some(mut t) = self.transition.take() {
                    let done = t.on_barrier(self, now, token, &mut out);
                    self.finish(t, done, now, &mut out);
                }
                out.extend(self.promotion_barrier(now, token));
                self.conns_barrier(now, token, &mut out);
            }
            Report::Overflow(d) => {
                self.stats.overflow_digests += 1;
                self.overflow.push((d.flow, d.server));
            }
            Report::PinIdle(f) => {
                if self.pins.remove(&f).is_some() {
                    self.stats.pins_aged += 1;
                    out.push(Out::Cmd(Command::PinDelete(f)));
                }
            }
            Report::Activity { key, idle } => {
                self.conns_activity(&key, idle, &mut out);
                self.promotion_activity(now, key, idle);
            }
            Report::Failed(_) => self.stats.driver_failures += 1,
            Report::Ctl { port, frame } => self.on_ctl(now, port, &frame, &mut out),
        }
        out
    }

    fn finish(&mut self, t: Transition, done: bool, now: Nanos, out: &mut Vec<Out>) {
        if done {
            out.extend(self.next_transition(now));
        } else {
            self.transition = Some(t);
        }
    }

    fn on_ctl(&mut self, now: Nanos, port: PortId, frame: &[u8], out: &mut Vec<Out>) {
        let Some(msg) = ctl::parse(frame, CONTROLLER_PORT) else {
            self.stats.ctl_bad += 1;
            return;
        };
        let Some(s) = self.servers.get_mut(&msg.sender).filter(|s| s.port == port) else {
            self.stats.ctl_bad += 1;
            return;
        };
        s.last_heard = now;
        if msg.reply {
            if !msg.more {
                self.reliable.replied(msg.txn_id);
            }
            if let Some(mut t) = self.transition.take() {
                let done = t.on_reply(self, now, &msg, out);
                self.finish(t, done, now, out);
            }
            self.promotion_reply(now, &msg, out);
            return;
        }
        match &msg.body {
            CtlBody::Heartbeat { .. } => return,
            CtlBody::EntryCreated { table_id, entries } => {
                self.promotion_created(msg.sender, *table_id, entries);
            }
            CtlBody::FlowExpired { .. } => {}
            CtlBody::ConnNew { flow, idx } => {
                self.conn_new(now, msg.sender, FlowKey(*flow), *idx, out);
            }
            CtlBody::ConnRelease { flow, idx } => {
                let (sender, flow, idx) = (msg.sender, FlowKey(*flow), *idx);
                if !self.conn_release(sender, &msg, flow, idx, out) {
                    return;
                }
            }
            _ => {
                self.stats.ctl_bad += 1;
                return;
            }
        }
        let ack = ctl::reply(&msg, 0, None);
        self.send(msg.sender, &ack, out);
    }

    /// A timer fired.
    pub fn on_timer(&mut self, now: Nanos, token: u64) -> Vec<Out> {
        let mut out = Vec::new();
        match token {
            TOKEN_DELTA => {
                if let Some(mut t) = self.transition.take() {
                    let done = t.on_delta(self, now, &mut out);
                    self.finish(t, done, now, &mut out);
                }
            }
            TOKEN_TICK => {
                out.push(Out::Timer(now + TICK_NS, TOKEN_TICK));
                let (resend, lost) = self.reliable.due(now);
                for (to, m) in resend {
                    self.send(to, &m, &mut out);
                }
                for (to, m) in lost {
                    if let Some(mut t) = self.transition.take() {
                        let done = t.on_lost(self, now, to, &m, &mut out);
                        self.finish(t, done, now, &mut out);
                    }
                    self.promotion_lost(now, to, &m, &mut out);
                    self.conns_lost(now, to, &m, &mut out);
                }
                self.conns_tick(now, &mut out);
                self.promotion_tick(now, &mut out);
                self.check_liveness(now, &mut out);
                self.check_retirement(now);
            }
            TOKEN_REPORT => out.extend(self.promotion_round(now)),
            t if (TOKEN_SCHEDULE..TOKEN_SCHEDULE + MAX_SCHEDULE as u64).contains(&t) => {
                let i = (t - TOKEN_SCHEDULE) as usize;
                if let Some((_, members)) = self.config.schedule.get(i) {
                    self.stats.scheduled += 1;
                    out.extend(self.transition(now, members.clone()));
                }
            }
            _ => {}
        }
        out
    }

    /// Retires the servers in neither slot that no pin refers to (they
    /// drained: their flows were pinned at the transition that removed
    /// them, and pins age out T_pin_idle after their last packet), and
    /// un-retires those back in a slot.
    fn check_retirement(&mut self, now: Nanos) {
        let in_slot: BTreeSet<u8> = self
            .slots
            .iter()
            .flat_map(|s| s.members.iter().copied())
            .collect();
        let pinned: BTreeSet<u8> = self.pins.values().copied().collect();
        let busy = self.transition.is_some();
        for (id, s) in self.servers.iter_mut() {
            if in_slot.contains(id) {
                s.retired = None;
            } else if s.retired.is_none() && !s.failed && !pinned.contains(id) && !busy {
                s.retired = Some(now);
                self.stats.retired += 1;
                self.history.push((now, Event::Retired(*id)));
            }
        }
    }

    /// What the controller did to the groups, in time order: slots as
    /// they stood once a flip took effect, and retirements (for checks).
    pub fn history(&self) -> &[(Nanos, Event)] {
        &self.history
    }

    /// Declares servers silent for 3 heartbeats failed and replaces them
    /// in place (§5.6 "Server failure").
    fn check_liveness(&mut self, now: Nanos, out: &mut Vec<Out>) {
        let limit = self.config.fail_after_ns;
        let dead: Vec<u8> = self
            .servers
            .iter()
            .filter(|(_, s)| !s.failed && now.saturating_sub(s.last_heard) > limit)
            .map(|(id, _)| *id)
            .collect();
        for id in dead {
            self.fail(now, id, out);
        }
    }

    fn fail(&mut self, now: Nanos, id: u8, out: &mut Vec<Out>) {
        if let Some(s) = self.servers.get_mut(&id) {
            s.failed = true;
        }
        self.stats.failures += 1;
        self.reliable.forget(id);
        // Pins pointing at it go: its flows lost their state anyway.
        let gone: Vec<FlowKey> = self
            .pins
            .iter()
            .filter(|(_, s)| **s == id)
            .map(|(f, _)| *f)
            .collect();
        for f in gone {
            self.pins.remove(&f);
            out.push(Out::Cmd(Command::PinDelete(f)));
        }
        // Replace it in place in every slot that has it (same n, so no
        // other flow remaps): by a live server not in that slot, the one
        // in the fewest slots, lowest id first.
        for slot in 0..2u8 {
            let members = self.slots[usize::from(slot)].members.clone();
            for (idx, m) in members.iter().enumerate() {
                if *m != id {
                    continue;
                }
                let in_slots = |s: u8| {
                    self.slots
                        .iter()
                        .filter(|sl| sl.members.contains(&s))
                        .count()
                };
                let replacement = self
                    .live()
                    .into_iter()
                    .filter(|s| !self.slots[usize::from(slot)].members.contains(s))
                    .min_by_key(|s| (in_slots(*s), *s));
                if let Some(r) = replacement {
                    self.slots[usize::from(slot)].members[idx] = r;
                    if let Some(st) = self.servers.get_mut(&r) {
                        st.retired = None;
                    }
                    self.stats.replaced += 1;
                    self.history.push((
                        now,
                        Event::Replaced {
                            slot,
                            old: id,
                            new: r,
                        },
                    ));
                    out.push(Out::Cmd(Command::SetMember {
                        slot,
                        idx: idx as u8,
                        server: r,
                    }));
                }
            }
        }
        if let Some(mut t) = self.transition.take() {
            let done = t.on_failure(self, now, id, out);
            self.finish(t, done, now, out);
        }
    }
}
