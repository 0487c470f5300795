//! The hub on the switch's control plane (§2, §3.2): the sans-IO
//! [`Hub`] driven by the switch program's control events, its messages on
//! the control sessions to the device daemons, its switch operations on
//! this program's objects.
//!
//! - Sessions: a daemon says HELLO first; the session it came on is then
//!   that device's. Messages are §4.6 frames ([`HubSession`]), one per
//!   session message.
//! - Switch operations are acknowledged at a register-read barrier
//!   ([`crate::runtime::barrier`]).
//! - Counter cells are the hub's register entries (their key is the cell
//!   index, [`crate::runtime::logic`]); reads and MERGEs name that cell.
//! - FM direct-counter slots are allocated here, per app.
//! - Port-down copies, MERGE_ACKs and aged FM entries queued by the data
//!   plane path are fed to the hub on every control event.
//! - Control events of switch-served MEDIUM apps (§5.4: a digest as an
//!   event frame, or a punt) are given to the hub with their flow's union
//!   key; the hub names the daemon (primary, or replica while the primary
//!   is down) and the event goes out as EVENT_FWD (§4.6, 0x21). The
//!   events wait in the program's bounded queue ([`super::EVENT_QUEUE`])
//!   until the next pump. [our choice] A digest the runtime cannot carry
//!   and an app table's own aging notice on the switch are dropped and
//!   counted: the switch copy of an entry changes only through the hub,
//!   and the devices' copies age by their own traffic.

use std::collections::{BTreeMap, HashMap, VecDeque};

use inca_switch::device::{Nanos, SessionEvent, SessionId};
use inca_switch::{ControlEvent, ControlPlane, Handle};

use super::ExoSwitch;
use crate::app::Affinity;
use crate::codec::{DaemonToHub, HubSession, HubToDaemon};
use crate::hub::oplog::EntryKey;
use crate::hub::{Hub, HubApp, HubConfig, HubInput, HubOutput, HubStats, SwitchOp, SwitchOpId};
use crate::ids::{AppId, Pdev, UnionKey};
use crate::runtime::barrier::{Ack, OpBarrier, Wakeup};
use crate::runtime::logic::{cell_index, AppLogic};
use crate::runtime::{inject_merge, merge_body, pop_merge};

/// The control-plane timer token of the hub (apart from the apps').
pub const HUB_TIMER: u64 = 0x4558_4855_4200_0001;

/// What the hub is built from; kept by the program, the hub itself built
/// at every start (a restarted switch's control plane starts afresh).
#[derive(Clone, Debug)]
pub struct HubSetup {
    /// The hub's parameters (device count among them).
    pub config: HubConfig,
    /// Whether a checked run may require every synchronised copy to agree
    /// at its end ([`crate::checks`], P6).
    pub converged: bool,
    /// Whether a lost device's traffic moves to its replicas (§5.8). False
    /// is §8 E10's "failure without failover" baseline: no port-down
    /// trigger is armed and `pdev_alive` is never cleared, so the switch
    /// keeps sending a dead device its shards (the hub still stops writing
    /// to it).
    pub failover: bool,
}

/// What a pending read is for.
enum Read {
    Fm(AppId),
    Register(EntryKey),
}

/// An app's flow-manager slots.
#[derive(Default)]
struct FmSlots {
    by_uk: HashMap<UnionKey, u32>,
    by_slot: HashMap<u32, UnionKey>,
    free: Vec<u32>,
}

/// A running hub with its driver state.
pub(crate) struct HubRun {
    hub: Hub,
    session_of: BTreeMap<Pdev, SessionId>,
    pdev_of: HashMap<SessionId, Pdev>,
    codecs: HashMap<SessionId, HubSession>,
    reads: HashMap<u64, Read>,
    barrier: OpBarrier<SwitchOpId>,
    slots: HashMap<AppId, FmSlots>,
    /// MERGEs in flight per cell, oldest first (acks come back in order).
    merges: HashMap<(u8, u16, u32), VecDeque<EntryKey>>,
    wakeup: Wakeup,
    /// Messages the codec refused, sessions unknown, reads unmatched.
    pub dropped: u64,
    /// EVENT_FWDs sent.
    events_sent: u64,
    /// Control events not forwarded by the driver: not carried (see the
    /// module documentation), not parseable, or no session to send on.
    events_dropped: u64,
}

impl HubRun {
    /// The hub.
    pub fn hub(&self) -> &Hub {
        &self.hub
    }
}

/// The hub's slot in the program: its setup and, once started, the hub.
#[derive(Default)]
pub(crate) struct HubSlot {
    pub setup: Option<HubSetup>,
    pub run: Option<Box<HubRun>>,
}

impl Clone for HubSlot {
    /// A clone has the setup, not the running hub (a program is cloned
    /// before it starts: checks, benchmarks).
    fn clone(&self) -> Self {
        HubSlot {
            setup: self.setup.clone(),
            run: None,
        }
    }
}

fn new_run(sw: &ExoSwitch, setup: &HubSetup, now: Nanos) -> Option<Box<HubRun>> {
    let n = setup.config.n_devices;
    let mut apps = Vec::new();
    let mut slots = HashMap::new();
    for a in &sw.cfg.apps {
        if a.spec.affinity == Affinity::High {
            continue;
        }
        let logic = AppLogic::new(&a.spec, table_capacity(a.fm_entries), 0, n, 0).ok()?;
        apps.push(HubApp {
            keys: Box::new(logic),
            fm_capacity: a.fm_entries as u32,
        });
        slots.insert(
            a.spec.id,
            FmSlots {
                free: (0..a.fm_entries as u32).rev().collect(),
                ..FmSlots::default()
            },
        );
    }
    let hub = Hub::new(setup.config.clone(), apps, now).ok()?;
    Some(Box::new(HubRun {
        hub,
        session_of: BTreeMap::new(),
        pdev_of: HashMap::new(),
        codecs: HashMap::new(),
        reads: HashMap::new(),
        barrier: OpBarrier::default(),
        slots,
        merges: HashMap::new(),
        wakeup: Wakeup::default(),
        dropped: 0,
        events_sent: 0,
        events_dropped: 0,
    }))
}

/// Switch slots the hub may fill in each of a MEDIUM app's tables [our
/// choice: two per flow-manager entry — a promoted flow needs one entry per
/// table it looks up (a NAT's one direction, a firewall's connection),
/// and a flow being evicted holds its entries for `T_flush` while its
/// successor's go in].
fn table_capacity(fm: usize) -> u32 {
    u32::try_from(fm.max(1) * 2).unwrap_or(u32::MAX)
}

impl ExoSwitch {
    /// Runs the hub here: the program then answers daemons on its control
    /// sessions and installs flows itself.
    pub fn with_hub(mut self, setup: HubSetup) -> Self {
        self.hub.setup = Some(setup);
        self
    }

    /// The hub's `T_flush` (0 without a hub).
    pub fn t_flush(&self) -> Nanos {
        self.hub.setup.as_ref().map_or(0, |s| s.config.t_flush)
    }

    /// Whether device loss fails traffic over (always, without a hub: the
    /// port-down trigger still clears `pdev_alive`).
    pub fn failover_enabled(&self) -> bool {
        self.hub.setup.as_ref().is_none_or(|s| s.failover)
    }

    /// Whether the run's end must find synchronised copies in agreement.
    pub fn converged_check(&self) -> bool {
        self.hub.setup.as_ref().is_some_and(|s| s.converged)
    }

    /// The running hub, if this program has one and has started.
    pub fn hub(&self) -> Option<&Hub> {
        self.hub.run.as_deref().map(HubRun::hub)
    }

    /// The hub's counters (None without a running hub).
    pub fn hub_stats(&self) -> Option<&HubStats> {
        self.hub().map(Hub::stats)
    }

    pub(super) fn hub_start(&mut self, cp: &mut ControlPlane<'_>) {
        let Some(setup) = self.hub.setup.clone() else {
            return;
        };
        self.hub.run = new_run(self, &setup, cp.now());
        self.hub_pump(cp);
    }

    /// Takes `event` if it is the hub's; gives it back otherwise.
    pub(super) fn hub_event(
        &mut self,
        event: ControlEvent<inca_switch::composite::BlockDigest>,
        cp: &mut ControlPlane<'_>,
    ) -> Option<ControlEvent<inca_switch::composite::BlockDigest>> {
        let Some(run) = self.hub.run.as_deref_mut() else {
            return Some(event);
        };
        let now = cp.now();
        match event {
            ControlEvent::Timer { token } if token == HUB_TIMER => {
                run.wakeup.fired();
                run.hub.handle_timeout(now);
            }
            ControlEvent::Session(e) => on_session(run, now, e),
            ControlEvent::OpFailed { request, error } => {
                if !run.barrier.op_failed(request) {
                    return Some(ControlEvent::OpFailed { request, error });
                }
            }
            ControlEvent::RegisterValues { request, values } => match run.barrier.answered(request)
            {
                Some(ops) => {
                    for (id, ok) in ops {
                        run.hub.handle(now, HubInput::SwitchAck { id, ok });
                    }
                }
                None => return Some(ControlEvent::RegisterValues { request, values }),
            },
            ControlEvent::CounterValues {
                request,
                first,
                values,
            } => match run.reads.remove(&request) {
                Some(Read::Fm(app)) => {
                    let counters = run
                        .slots
                        .get(&app)
                        .map(|s| {
                            values
                                .iter()
                                .enumerate()
                                .filter_map(|(i, &(p, _))| {
                                    let slot = first as u32 + i as u32;
                                    Some((s.by_slot.get(&slot)?.clone(), p as u32))
                                })
                                .collect()
                        })
                        .unwrap_or_default();
                    run.hub.handle(now, HubInput::FmCounters { app, counters });
                }
                Some(Read::Register(entry)) => {
                    let value = values.first().map_or(0, |&(p, _)| p & 0xFFFF_FFFF);
                    run.hub.handle(now, HubInput::RegisterRead { entry, value });
                }
                None => {
                    return Some(ControlEvent::CounterValues {
                        request,
                        first,
                        values,
                    })
                }
            },
            other => return Some(other),
        }
        self.hub_pump(cp);
        None
    }

    /// Feeds the data plane's queued events to the hub, carries out its
    /// outputs and re-arms its timer. Call after every control event.
    pub(super) fn hub_pump(&mut self, cp: &mut ControlPlane<'_>) {
        if self.hub.run.is_none() {
            return;
        }
        let now = cp.now();
        // Disjoint borrows: the data plane's queues feed the hub in place.
        let ExoSwitch {
            cfg,
            hub,
            port_down_events,
            merge_acks,
            aged,
            app_events,
            per_app,
            ..
        } = self;
        let run = hub.run.as_deref_mut().expect("checked above");
        for e in app_events.drain(..) {
            match event_input(cfg, per_app, e) {
                Some(input) => run.hub.handle(now, input),
                None => run.events_dropped += 1,
            }
        }
        for port in port_down_events.drain(..) {
            if let Some(pdev) = cfg.devices.iter().position(|&p| p == port) {
                run.hub.handle(
                    now,
                    HubInput::PortDown {
                        pdev: Pdev(pdev as u16),
                    },
                );
            }
        }
        for (app, m) in merge_acks.drain(..) {
            match pop_merge(&mut run.merges, (app, m.obj_id, m.slot)) {
                Some(entry) => run.hub.handle(now, HubInput::MergeAck { entry }),
                None => run.dropped += 1,
            }
        }
        for (i, uk) in aged.drain(..) {
            if let Some(a) = cfg.apps.get(usize::from(i)) {
                run.hub.handle(
                    now,
                    HubInput::FmIdle {
                        app: a.spec.id,
                        uk: UnionKey(uk),
                    },
                );
            }
        }
        if run.hub.poll_timeout().is_some_and(|t| t <= now) {
            run.hub.handle_timeout(now);
        }
        loop {
            let run = self.hub.run.as_deref_mut().expect("checked above");
            let Some(out) = run.hub.poll_output() else {
                break;
            };
            match out {
                HubOutput::ToDaemon(m) => {
                    let run = self.hub.run.as_deref_mut().expect("checked above");
                    send(run, cp, m.pdev, m.req_id, HubToDaemon::Hub(m.msg));
                }
                HubOutput::Switch { id, op } => self.switch_op(cp, id, op),
                HubOutput::Event(_) => {}
                HubOutput::EventFwd { pdev, app, frame } => {
                    let run = self.hub.run.as_deref_mut().expect("checked above");
                    if send(run, cp, pdev, 0, HubToDaemon::EventFwd { app, frame }) {
                        run.events_sent += 1;
                    } else {
                        run.events_dropped += 1;
                    }
                }
            }
        }
        let objs = self.objs;
        let run = self.hub.run.as_deref_mut().expect("checked above");
        let refused = run
            .barrier
            .close(|| objs.map(|o| cp.register_read(o.pdev_alive, 0, 1)));
        for (id, ok) in refused {
            run.hub.handle(now, HubInput::SwitchAck { id, ok });
        }
        run.wakeup.arm(cp, run.hub.poll_timeout(), HUB_TIMER);
    }

    /// Carries out one switch operation of the hub.
    fn switch_op(&mut self, cp: &mut ControlPlane<'_>, id: SwitchOpId, op: SwitchOp) {
        let Some(o) = self.objs else { return };
        let acked = |sw: &mut ExoSwitch, ack: Ack| {
            let run = sw.hub.run.as_deref_mut().expect("hub running");
            run.barrier.push(id, ack);
        };
        match op {
            SwitchOp::InstallEntry { entry, value, .. }
            | SwitchOp::ModifyEntry { entry, value, .. } => {
                let r = self.hub_write(cp, &entry, Some(&value));
                acked(self, r);
            }
            SwitchOp::RemoveEntry { entry, .. } => {
                let r = self.hub_write(cp, &entry, None);
                acked(self, r);
            }
            SwitchOp::FmAdd { app, uk } => {
                let run = self.hub.run.as_deref_mut().expect("hub running");
                let slot = run.slots.get_mut(&app).and_then(|s| {
                    if let Some(&slot) = s.by_uk.get(&uk) {
                        return Some(slot);
                    }
                    let slot = s.free.pop()?;
                    s.by_uk.insert(uk.clone(), slot);
                    s.by_slot.insert(slot, uk.clone());
                    Some(slot)
                });
                let r = slot.and_then(|slot| self.fm_request(cp, app.0, Some(slot), &uk.0));
                acked(self, r.map_or(Ack::Refused, Ack::Request));
            }
            SwitchOp::FmDelete { app, uk } => {
                let run = self.hub.run.as_deref_mut().expect("hub running");
                if let Some(s) = run.slots.get_mut(&app) {
                    if let Some(slot) = s.by_uk.remove(&uk) {
                        s.by_slot.remove(&slot);
                        s.free.push(slot);
                    }
                }
                let r = self.fm_request(cp, app.0, None, &uk.0);
                acked(self, r.map_or(Ack::Refused, Ack::Request));
            }
            SwitchOp::ReadFmCounters { app } => {
                let Some(i) = self.app_index(app.0) else {
                    return;
                };
                let Some((_, hits)) = self.per_app[i].fm else {
                    return;
                };
                let n = self.cfg.apps[i].fm_entries as u64;
                let r = cp.counter_read(hits, 0, n);
                let run = self.hub.run.as_deref_mut().expect("hub running");
                run.reads.insert(r, Read::Fm(app));
            }
            SwitchOp::ReadRegister { entry, .. } => {
                let cell = self.cell_of(&entry);
                let run = self.hub.run.as_deref_mut().expect("hub running");
                match cell {
                    Some((h, index)) => {
                        let r = cp.counter_read(h, index, 1);
                        run.reads.insert(r, Read::Register(entry));
                    }
                    None => run.dropped += 1,
                }
            }
            SwitchOp::InjectMerge { cmd, .. } => {
                let Some((_, index)) = self.cell_of(&cmd.entry) else {
                    self.hub.run.as_deref_mut().expect("hub running").dropped += 1;
                    return;
                };
                let m = merge_body(&cmd, index);
                let cell = inject_merge(cp, cmd.entry.app.0, &m);
                let run = self.hub.run.as_deref_mut().expect("hub running");
                match cell {
                    Some(c) => run.merges.entry(c).or_default().push_back(cmd.entry),
                    None => run.dropped += 1,
                }
            }
            SwitchOp::SetPdevAlive { alive: false, .. } if !self.failover_enabled() => {
                acked(self, Ack::Done);
            }
            SwitchOp::SetPdevAlive { pdev, alive } => {
                let r = cp.register_write(o.pdev_alive, u64::from(pdev.0), u8::from(alive));
                acked(self, Ack::Request(r));
            }
            SwitchOp::RearmPortDown { pdev } => {
                if let Some(&port) = self.cfg.devices.get(usize::from(pdev.0)) {
                    cp.pktgen_clear_port_down(port);
                }
                acked(self, Ack::Done);
            }
        }
    }

    /// An app table write the hub asked for.
    fn hub_write(
        &mut self,
        cp: &mut ControlPlane<'_>,
        entry: &EntryKey,
        value: Option<&[u8]>,
    ) -> Ack {
        if self.cell_of(entry).is_some() {
            // A counter cell exists in the data plane from the start, at
            // the merge identity (0) like the hub's new entry.
            return Ack::Done;
        }
        self.entry_request(cp, entry.app.0, entry.obj.0, &entry.key, value)
            .map_or(Ack::Refused, Ack::Request)
    }

    /// The packets counted in the cell of register entry `entry` of this
    /// switch (its `objects`), low 32 bits as the hub merges them.
    pub fn cell_value(
        &self,
        objects: &inca_switch::objects::Objects,
        entry: &EntryKey,
    ) -> Option<u64> {
        let (h, i) = self.cell_of(entry)?;
        objects
            .counter_read(h, i)
            .ok()
            .map(|(p, _)| p & 0xFFFF_FFFF)
    }

    /// The counter and index of a hub register entry (a counter cell).
    fn cell_of(&self, entry: &EntryKey) -> Option<(Handle, u64)> {
        let i = self.app_index(entry.app.0)?;
        let spec = &self.cfg.apps[i].spec;
        let o = spec.object(entry.obj)?;
        if o.kind == crate::app::ObjectKind::Table {
            return None;
        }
        let id = self.object_of(i, entry.obj.0)?;
        Some((Handle::of_object(id), u64::from(cell_index(&entry.key)?)))
    }
}
fn on_session(run: &mut HubRun, now: Nanos, e: SessionEvent) {
    match e {
        SessionEvent::Up { .. } | SessionEvent::Refused { .. } => {}
        SessionEvent::Reset { session, .. } => {
            run.codecs.remove(&session);
            if let Some(pdev) = run.pdev_of.get(&session).copied() {
                run.hub.handle(now, HubInput::SessionReset { pdev });
            }
        }
        SessionEvent::Message { session, body } => {
            let codec = run.codecs.entry(session).or_default();
            let mut msgs = Vec::new();
            if codec.feed(&body, &mut msgs).is_err() {
                run.dropped += 1;
                run.codecs.remove(&session);
            }
            for (req_id, m) in msgs {
                let DaemonToHub::Daemon(msg) = m;
                if let crate::hub::msg::DaemonMsg::Hello { pdev, .. } = &msg {
                    if let Some(old) = run.session_of.insert(*pdev, session) {
                        if old != session {
                            run.pdev_of.remove(&old);
                        }
                    }
                    run.pdev_of.insert(session, *pdev);
                }
                match run.pdev_of.get(&session).copied() {
                    Some(pdev) => run.hub.handle(now, HubInput::Daemon { pdev, req_id, msg }),
                    None => run.dropped += 1,
                }
            }
        }
    }
}

/// Sends `msg` on `pdev`'s session; false (counted) if there is none or
/// the codec refuses it.
fn send(
    run: &mut HubRun,
    cp: &mut ControlPlane<'_>,
    pdev: Pdev,
    req_id: u64,
    msg: HubToDaemon,
) -> bool {
    let Some(&session) = run.session_of.get(&pdev) else {
        run.dropped += 1;
        return false;
    };
    let codec = run.codecs.entry(session).or_default();
    match codec.encode(req_id, &msg) {
        Ok(bytes) => {
            cp.session_send(session, bytes);
            true
        }
        Err(_) => {
            run.dropped += 1;
            false
        }
    }
}

/// The hub's input for a MEDIUM app's switch event: its event frame and
/// flow; None if the runtime does not carry it (see the module
/// documentation) or the frame has no union key for the app.
fn event_input(
    cfg: &super::SwitchConfig,
    per_app: &[super::AppObjects],
    e: super::AppEvent,
) -> Option<HubInput> {
    use crate::runtime::event::{self, EventKind};
    let (app_id, frame) = match e {
        super::AppEvent::Forward { app_id, frame } => (app_id, frame),
        super::AppEvent::Punt {
            app_id,
            port,
            reason,
            frame,
        } => {
            let f = event::encode(app_id, 0, port, &frame, &EventKind::Punt(reason))?;
            (app_id, f)
        }
        super::AppEvent::Digest { .. } | super::AppEvent::IdleTimeout { .. } => return None,
    };
    let ev = event::decode(&frame)?;
    let i = cfg.apps.iter().position(|a| a.spec.id.0 == app_id)?;
    let p = inca_apps::headers::parse(&ev.frame).unwrap_or_default();
    let uk = crate::app::key_of(&per_app.get(i)?.uk_fields, &p, &ev.frame);
    Some(HubInput::Event {
        app: AppId(app_id),
        uk,
        frame,
    })
}

/// What the hub's switch side shows in the program's report.
pub(super) fn report(run: &HubRun, out: &mut Vec<(String, u64)>) {
    let s = run.hub.stats();
    for (name, v) in [
        ("writes", s.writes),
        ("writes_failed", s.writes_failed),
        ("promotions", s.promotions),
        ("evictions", s.evictions),
        ("holders_dead", s.holders_dead),
        ("switch_errors", s.switch_errors),
        ("unsent", s.unsent),
        ("unknown", s.unknown),
        ("reports_dropped", s.reports_dropped),
        ("sync_refused", s.sync_refused),
        ("events_fwd", run.events_sent),
        ("events_dropped", s.events_dropped + run.events_dropped),
        ("driver_dropped", run.dropped),
    ] {
        out.push((format!("hub/{name}"), v));
    }
    // Each device's status as the hub sees it (1: UP), so a live run can
    // tell a failed-over device from one that rejoined.
    for i in 0..crate::switch::config::MAX_PDEVS as u16 {
        let Some(status) = run.hub.device_status(Pdev(i)) else {
            break;
        };
        out.push((
            format!("hub/pdev{i}_up"),
            u64::from(status == crate::hub::DeviceStatus::Up),
        ));
    }
}
