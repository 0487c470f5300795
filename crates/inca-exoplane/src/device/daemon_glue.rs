//! The daemon on the smart NIC's control plane (§2, §3.3): the sans-IO
//! [`Daemon`] driven by the device program's control events, its messages
//! on the control session to the hub, its device operations on this
//! program's objects.
//!
//! - The session: the first control session that comes up is the hub's
//!   (a device has one). Messages are §4.6 frames ([`DaemonSession`]).
//! - MISSes queued by the data plane become setups (the app's own control
//!   logic, [`crate::runtime::logic`]); REPORTs promotion reports; the
//!   data-plane sketch's bank flips every `T_win`.
//! - Control events — EVENT_FWD from the hub (a switch-served packet's)
//!   and the apps' digests on this device (a device-served packet's) —
//!   go to the app's control logic alike ([`DaemonInput::Event`]); EVENT_FWDs
//!   wait in a bounded queue until the next pump, overflow counted.
//! - Device operations are acknowledged at a register-read barrier
//!   ([`crate::runtime::barrier`]).
//! - [our choice] Restoring a counter cell to `H` on REJOIN (`reg = H`)
//!   is a MERGE of `H` into the cell, which is at the identity: a
//!   rebuilding device is sent no packets and its counters restarted at 0.
//! - A restart of the device (its control plane sees `Start` again) makes
//!   the daemon say `lost_state` in its HELLO.

use std::collections::{HashMap, VecDeque};

use inca_switch::device::{Nanos, SessionEvent, SessionId};
use inca_switch::{ControlEvent, ControlPlane, Handle};
use inca_wire::exoplane::{shim, MergeOp, MergeRepr};

use super::{ExoDevice, Miss};
use crate::app::{key_of, ObjectKind as AppKind};
use crate::codec::{DaemonSession, DaemonToHub, HubToDaemon};
use crate::daemon::{
    ControlLogic, Daemon, DaemonConfig, DaemonInput, DaemonOutput, DaemonStats, DeviceOp,
    DeviceOpId,
};
use crate::hub::oplog::EntryKey;
use crate::ids::{AppId, UnionKey};
use crate::runtime::barrier::{Ack, OpBarrier, Wakeup};
use crate::runtime::logic::{cell_index, AppLogic, NatReserved};
use crate::runtime::{inject_merge, merge_body, pop_merge};

/// The control-plane timer token of the daemon.
pub const DAEMON_TIMER: u64 = 0x4558_4441_454d_0001;
/// The control-plane timer token of the sketch's bank flip.
pub const BANK_TIMER: u64 = 0x4558_4441_454d_0002;

/// What the daemon is built from.
#[derive(Clone, Debug)]
pub struct DaemonSetup {
    /// The daemon's parameters (its pdev among them).
    pub config: DaemonConfig,
    /// External devices in the deployment (NAT pools are split over them).
    pub n_devices: u8,
    /// Seed of the apps' control logic (a NAT's allocations).
    pub seed: u64,
}

/// A pending register read: the entry and round it is for.
struct Read(EntryKey, crate::ids::Round);

enum MergeFor {
    Sync(EntryKey),
    Restore(DeviceOpId),
}

pub(crate) struct DaemonRun {
    daemon: Daemon,
    session: Option<SessionId>,
    codec: DaemonSession,
    reads: HashMap<u64, Read>,
    barrier: OpBarrier<DeviceOpId>,
    /// MERGEs in flight per cell, oldest first: a cell's MERGE_ACKs come
    /// back in the order its MERGEs went in (one pipeline, FIFO).
    merges: HashMap<(u8, u16, u32), VecDeque<MergeFor>>,
    wakeup: Wakeup,
    dropped: u64,
    /// NAT endpoints in use, fed with every entry the device is given (a
    /// rebuilt daemon must not hand them out again).
    reserved: Vec<(AppId, std::sync::Arc<NatReserved>)>,
    /// EVENT_FWDs received, waiting for the pump: (app, event frame).
    forwarded: VecDeque<(AppId, Vec<u8>)>,
    /// EVENT_FWDs received from the hub.
    events_fwd: u64,
    /// Events not handed to the daemon: queue full, not an event frame,
    /// an app not here, a digest or aging notice it cannot carry.
    events_dropped: u64,
    /// When the data plane began counting in each sketch bank, for rating
    /// reports (§5.5): the daemon's `T_win` tick issues the switch-over,
    /// which the control channel may carry out much later.
    bank_since: [Nanos; 2],
    /// The read behind the last switch-over and the bank it started.
    flip_probe: Option<(u64, u8)>,
    /// REPORT digests read after their bank was left.
    stale_reports: u64,
}

/// EVENT_FWDs waiting for the pump [our choice; the device queues' size].
pub const FORWARDED_QUEUE: usize = super::QUEUE;

/// The daemon's slot in the program.
#[derive(Default)]
pub(crate) struct DaemonSlot {
    pub setup: Option<DaemonSetup>,
    pub run: Option<Box<DaemonRun>>,
}

impl Clone for DaemonSlot {
    fn clone(&self) -> Self {
        DaemonSlot {
            setup: self.setup.clone(),
            run: None,
        }
    }
}

impl ExoDevice {
    /// Runs a daemon on this device's control plane.
    pub fn with_daemon(mut self, setup: DaemonSetup) -> Self {
        self.daemon.setup = Some(setup);
        self
    }

    /// The running daemon.
    pub fn daemon(&self) -> Option<&Daemon> {
        self.daemon.run.as_deref().map(|r| &r.daemon)
    }

    /// The daemon's counters.
    pub fn daemon_stats(&self) -> Option<&DaemonStats> {
        self.daemon().map(Daemon::stats)
    }

    pub(super) fn daemon_start(&mut self, cp: &mut ControlPlane<'_>) {
        let Some(setup) = self.daemon.setup.clone() else {
            return;
        };
        // A daemon that starts finds its device's tables empty (a
        // restarted device's program restarts from scratch too), so its
        // HELLO always says `lost_state`; at first start the DUMP is empty.
        let lost_state = true;
        let mut apps: Vec<Box<dyn ControlLogic>> = Vec::new();
        let mut reserved = Vec::new();
        for a in &self.cfg.apps {
            match AppLogic::new(
                a,
                u32::MAX,
                setup.config.pdev.0 as u8,
                setup.n_devices,
                setup.seed,
            ) {
                Ok(l) => {
                    if let Some(r) = l.reserved() {
                        reserved.push((a.id, r));
                    }
                    apps.push(Box::new(l));
                }
                Err(_) => return,
            }
        }
        let now = cp.now();
        let mut daemon = Daemon::new(setup.config.clone(), apps, now, lost_state);
        // A session already up (the control plane restarted without the
        // device losing it) gets the new daemon's HELLO at once.
        let session = self.daemon.run.as_ref().and_then(|r| r.session);
        if session.is_some() {
            daemon.handle(now, DaemonInput::SessionUp);
        }
        self.daemon.run = Some(Box::new(DaemonRun {
            daemon,
            session,
            codec: DaemonSession::new(),
            reads: HashMap::new(),
            barrier: OpBarrier::default(),
            merges: HashMap::new(),
            wakeup: Wakeup::default(),
            dropped: 0,
            reserved,
            forwarded: VecDeque::new(),
            events_fwd: 0,
            events_dropped: 0,
            bank_since: [now; 2],
            flip_probe: None,
            stale_reports: 0,
        }));
        cp.set_timer(now + setup.config.t_win, BANK_TIMER);
    }

    /// Takes `event` if it is the daemon's; gives it back otherwise.
    pub(super) fn daemon_event(
        &mut self,
        event: ControlEvent<inca_switch::composite::BlockDigest>,
        cp: &mut ControlPlane<'_>,
    ) -> Option<ControlEvent<inca_switch::composite::BlockDigest>> {
        let t_win = self.daemon.setup.as_ref().map(|s| s.config.t_win);
        let Some(run) = self.daemon.run.as_deref_mut() else {
            return Some(event);
        };
        let now = cp.now();
        match event {
            ControlEvent::Timer { token } if token == DAEMON_TIMER => {
                run.wakeup.fired();
                run.daemon.handle_timeout(now);
            }
            ControlEvent::Timer { token } if token == BANK_TIMER => {
                let (bank, probe) = self.flip_bank(cp);
                let run = self.daemon.run.as_deref_mut().expect("checked above");
                // Until the probe answers, the issue time (a lower bound:
                // reports read before then must not be rated against this
                // bank's previous window).
                run.bank_since[usize::from(bank & 1)] = now;
                run.flip_probe = probe.map(|r| (r, bank));
                if let Some(t) = t_win {
                    cp.set_timer(now + t, BANK_TIMER);
                }
            }
            ControlEvent::Session(e) => on_session(run, now, e),
            // The NIC's one link is to the switch.
            ControlEvent::PortStatus { up, .. } => {
                run.daemon.handle(now, DaemonInput::Link { up });
            }
            ControlEvent::OpFailed { request, error } => {
                if !run.barrier.op_failed(request) {
                    return Some(ControlEvent::OpFailed { request, error });
                }
            }
            ControlEvent::RegisterValues { request, .. }
                if run.flip_probe.is_some_and(|(r, _)| r == request) =>
            {
                if let Some((_, bank)) = run.flip_probe.take() {
                    run.bank_since[usize::from(bank & 1)] = now;
                }
            }
            ControlEvent::RegisterValues { request, values } => match run.barrier.answered(request)
            {
                Some(ops) => {
                    for (id, ok) in ops {
                        run.daemon.handle(now, DaemonInput::DeviceAck { id, ok });
                    }
                }
                None => return Some(ControlEvent::RegisterValues { request, values }),
            },
            ControlEvent::CounterValues {
                request,
                first,
                values,
            } => match run.reads.remove(&request) {
                Some(Read(entry, round)) => {
                    let value = values.first().map_or(0, |&(p, _)| p & 0xFFFF_FFFF);
                    run.daemon.handle(
                        now,
                        DaemonInput::RegisterRead {
                            entry,
                            round,
                            value,
                        },
                    );
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
        None
    }

    /// Feeds the data plane's queues to the daemon and carries out its
    /// outputs. Call after every control event.
    pub(super) fn daemon_pump(&mut self, cp: &mut ControlPlane<'_>) {
        if self.daemon.run.is_none() {
            return;
        }
        let now = cp.now();
        let misses: Vec<Miss> = self.misses.drain(..).collect();
        let reports: Vec<_> = self.reports.drain(..).collect();
        let current_bank = self.current_bank;
        let acks: Vec<_> = self.merge_acks.drain(..).collect();
        let events = self.pending_events();
        let uks: Vec<_> = misses
            .iter()
            .map(|m| {
                let app = self.app_index(m.app_id)?;
                let mut f = m.frame.clone();
                shim::pop(&mut f).ok()?;
                let p = inca_apps::headers::parse(&f).unwrap_or_default();
                Some(key_of(&self.uk_fields[app], &p, &f))
            })
            .collect();
        let run = self.daemon.run.as_deref_mut().expect("checked above");
        for (m, uk) in misses.into_iter().zip(uks) {
            match uk {
                Some(uk) => run.daemon.handle(
                    now,
                    DaemonInput::Miss {
                        app: AppId(m.app_id),
                        uk,
                        frame: m.frame,
                    },
                ),
                None => run.dropped += 1,
            }
        }
        for (app, uk, frame) in events {
            run.daemon
                .handle(now, DaemonInput::Event { app, uk, frame });
        }
        for r in reports {
            // Counted in the bank just left (read after the switch-over):
            // the previous window's, rated against that window's start.
            let previous_window = r.bank != current_bank;
            run.stale_reports += u64::from(previous_window);
            run.daemon.handle(
                now,
                DaemonInput::Report {
                    app: AppId(r.app_id),
                    uk: UnionKey(r.uk),
                    estimate: r.estimate,
                    at: r.at,
                    since: Some(run.bank_since[usize::from(r.bank & 1)]),
                    previous_window,
                },
            );
        }
        for (app, m) in acks {
            match pop_merge(&mut run.merges, (app, m.obj_id, m.slot)) {
                Some(MergeFor::Sync(entry)) => {
                    run.daemon.handle(now, DaemonInput::MergeAck { entry })
                }
                Some(MergeFor::Restore(id)) => run
                    .daemon
                    .handle(now, DaemonInput::DeviceAck { id, ok: true }),
                None => run.dropped += 1,
            }
        }
        if run.daemon.poll_timeout().is_some_and(|t| t <= now) {
            run.daemon.handle_timeout(now);
        }
        loop {
            let run = self.daemon.run.as_deref_mut().expect("checked above");
            let Some(out) = run.daemon.poll_output() else {
                break;
            };
            self.daemon_output(cp, out);
        }
        // The barrier: a one-entry read of the first sketch row.
        let row = self
            .sketches
            .first()
            .and_then(|s| s.rows.first())
            .map(|&(_, reg)| reg);
        let run = self.daemon.run.as_deref_mut().expect("checked above");
        let refused = run
            .barrier
            .close(|| row.map(|reg| cp.register_read(reg, 0, 1)));
        for (id, ok) in refused {
            run.daemon.handle(now, DaemonInput::DeviceAck { id, ok });
        }
        run.wakeup.arm(cp, run.daemon.poll_timeout(), DAEMON_TIMER);
    }

    /// The control events waiting for the daemon, with their flows: EVENT_FWDs
    /// from the hub, then this device's own; the rest counted as dropped.
    fn pending_events(&mut self) -> Vec<(AppId, UnionKey, Vec<u8>)> {
        let Some(run) = self.daemon.run.as_deref_mut() else {
            return Vec::new();
        };
        let mut raw: Vec<(AppId, Vec<u8>)> = run.forwarded.drain(..).collect();
        let mut dropped = 0;
        for e in self.app_events.drain(..) {
            match e {
                super::AppEvent::Raised { app_id, frame } => raw.push((AppId(app_id), frame)),
                super::AppEvent::Digest(_) | super::AppEvent::IdleTimeout { .. } => dropped += 1,
            }
        }
        let mut out = Vec::with_capacity(raw.len());
        for (app, frame) in raw {
            let uk = crate::runtime::event::decode(&frame).and_then(|ev| {
                let i = self.app_index(app.0).filter(|_| ev.app_id == app.0)?;
                let p = inca_apps::headers::parse(&ev.frame).unwrap_or_default();
                Some(key_of(&self.uk_fields[i], &p, &ev.frame))
            });
            match uk {
                Some(uk) => out.push((app, uk, frame)),
                None => dropped += 1,
            }
        }
        if let Some(run) = self.daemon.run.as_deref_mut() {
            run.events_dropped += dropped;
        }
        out
    }

    fn daemon_output(&mut self, cp: &mut ControlPlane<'_>, out: DaemonOutput) {
        match out {
            DaemonOutput::ToHub { req_id, msg } => {
                let run = self.daemon.run.as_deref_mut().expect("daemon running");
                let Some(session) = run.session else {
                    run.dropped += 1;
                    return;
                };
                match run.codec.encode(req_id, &DaemonToHub::Daemon(msg)) {
                    Ok(bytes) => cp.session_send(session, bytes),
                    Err(_) => run.dropped += 1,
                }
            }
            DaemonOutput::Device { id, op } => {
                let ack = match op {
                    DeviceOp::Store {
                        app,
                        obj,
                        key,
                        value,
                        ..
                    } => {
                        let run = self.daemon.run.as_deref_mut().expect("daemon running");
                        for (a, r) in &run.reserved {
                            if *a == app {
                                r.observe(obj, &key);
                            }
                        }
                        self.device_write(cp, app, obj.0, &key, Some(&value))
                    }
                    DeviceOp::Remove { app, obj, key, .. } => {
                        self.device_write(cp, app, obj.0, &key, None)
                    }
                    DeviceOp::SetRegister {
                        app,
                        obj,
                        key,
                        value,
                    } => {
                        let v = crate::hub::app::register_value(&value);
                        match self.inject_merge(cp, app, obj.0, &key, MergeOp::Add, v) {
                            Some(k) => {
                                let run = self.daemon.run.as_deref_mut().expect("daemon running");
                                run.merges
                                    .entry(k)
                                    .or_default()
                                    .push_back(MergeFor::Restore(id));
                                return;
                            }
                            None => Ack::Refused,
                        }
                    }
                };
                let run = self.daemon.run.as_deref_mut().expect("daemon running");
                run.barrier.push(id, ack);
            }
            DaemonOutput::ReadRegister { entry, round } => {
                let cell = self.cell_of(entry.app, entry.obj.0, &entry.key);
                let run = self.daemon.run.as_deref_mut().expect("daemon running");
                match cell {
                    Some((h, i)) => {
                        let r = cp.counter_read(h, i, 1);
                        run.reads.insert(r, Read(entry, round));
                    }
                    None => run.dropped += 1,
                }
            }
            DaemonOutput::InjectMerge(cmd) => {
                let k = self.inject_merge_cmd(cp, &cmd);
                let run = self.daemon.run.as_deref_mut().expect("daemon running");
                match k {
                    Some(k) => {
                        run.merges
                            .entry(k)
                            .or_default()
                            .push_back(MergeFor::Sync(cmd.entry));
                    }
                    None => run.dropped += 1,
                }
            }
            DaemonOutput::Reinject { app, frame, .. } => {
                let ok = self.reinject(
                    cp,
                    Miss {
                        app_id: app.0,
                        reason: 0,
                        frame,
                    },
                );
                if !ok {
                    self.daemon
                        .run
                        .as_deref_mut()
                        .expect("daemon running")
                        .dropped += 1;
                }
            }
        }
    }

    fn device_write(
        &mut self,
        cp: &mut ControlPlane<'_>,
        app: AppId,
        obj: u16,
        key: &[u8],
        value: Option<&[u8]>,
    ) -> Ack {
        if self.cell_of(app, obj, key).is_some() {
            return Ack::Done;
        }
        self.entry_request(cp, app.0, obj, key, value)
            .map_or(Ack::Refused, Ack::Request)
    }

    fn inject_merge_cmd(
        &mut self,
        cp: &mut ControlPlane<'_>,
        cmd: &crate::sync::MergeCmd,
    ) -> Option<(u8, u16, u32)> {
        let (_, index) = self.cell_of(cmd.entry.app, cmd.entry.obj.0, &cmd.entry.key)?;
        inject_merge(cp, cmd.entry.app.0, &merge_body(cmd, index))
    }

    fn inject_merge(
        &mut self,
        cp: &mut ControlPlane<'_>,
        app: AppId,
        obj: u16,
        key: &[u8],
        op: MergeOp,
        delta: u64,
    ) -> Option<(u8, u16, u32)> {
        let (_, index) = self.cell_of(app, obj, key)?;
        let m = MergeRepr {
            obj_id: obj,
            op,
            width: 32,
            slot: index as u32,
            round: 0,
            delta: delta & 0xFFFF_FFFF,
        };
        inject_merge(cp, app.0, &m)
    }

    /// The packets counted in the cell of register entry `entry` of this
    /// device (its `objects`), low 32 bits as the hub merges them.
    pub fn cell_value(
        &self,
        objects: &inca_switch::objects::Objects,
        entry: &EntryKey,
    ) -> Option<u64> {
        let (h, i) = self.cell_of(entry.app, entry.obj.0, &entry.key)?;
        objects
            .counter_read(h, i)
            .ok()
            .map(|(p, _)| p & 0xFFFF_FFFF)
    }

    /// The pdev its daemon runs as.
    pub fn pdev(&self) -> Option<crate::ids::Pdev> {
        self.daemon.setup.as_ref().map(|s| s.config.pdev)
    }

    /// The counter and index of a register entry (a counter cell).
    fn cell_of(&self, app: AppId, obj: u16, key: &[u8]) -> Option<(Handle, u64)> {
        let i = self.app_index(app.0)?;
        let o = self.cfg.apps[i].object(crate::ids::ObjId(obj))?;
        if o.kind == AppKind::Table {
            return None;
        }
        let id = self.objects[i]
            .iter()
            .find(|(o, _)| *o == obj)
            .map(|(_, id)| *id)?;
        Some((Handle::of_object(id), u64::from(cell_index(key)?)))
    }
}

fn on_session(run: &mut DaemonRun, now: Nanos, e: SessionEvent) {
    match e {
        SessionEvent::Up { session } if run.session.is_none() || run.session == Some(session) => {
            run.session = Some(session);
            run.codec = DaemonSession::new();
            run.daemon.handle(now, DaemonInput::SessionUp);
        }
        SessionEvent::Reset { session, .. } if run.session == Some(session) => {
            run.codec = DaemonSession::new();
            run.daemon.handle(now, DaemonInput::SessionReset);
        }
        SessionEvent::Message { session, body } if run.session == Some(session) => {
            let mut msgs = Vec::new();
            if run.codec.feed(&body, &mut msgs).is_err() {
                run.dropped += 1;
                run.codec = DaemonSession::new();
            }
            for (req_id, m) in msgs {
                match m {
                    HubToDaemon::Hub(msg) => {
                        run.daemon.handle(now, DaemonInput::FromHub { req_id, msg })
                    }
                    HubToDaemon::EventFwd { app, frame } => {
                        run.events_fwd += 1;
                        if run.forwarded.len() < FORWARDED_QUEUE {
                            run.forwarded.push_back((app, frame));
                        } else {
                            run.events_dropped += 1;
                        }
                    }
                }
            }
        }
        _ => {}
    }
}

/// What the daemon shows in the program's report.
pub(super) fn report(run: &DaemonRun, out: &mut Vec<(String, u64)>) {
    let s = run.daemon.stats();
    for (name, v) in [
        ("setups", s.setups),
        ("setups_ok", s.setups_ok),
        ("setups_failed", s.setups_failed),
        ("setups_timed_out", s.setups_timed_out),
        ("frames_dropped", s.frames_dropped),
        ("frames_reinjected", s.frames_reinjected),
        ("events_fwd_received", run.events_fwd),
        ("events", s.events),
        ("event_writes", s.event_writes),
        ("event_writes_ok", s.event_writes_ok),
        ("event_writes_failed", s.event_writes_failed),
        ("events_dropped", s.events_dropped + run.events_dropped),
        ("reports", s.reports),
        ("rehellos", s.rehellos),
        ("unsent", s.unsent),
        ("unknown", s.unknown),
        ("driver_dropped", run.dropped),
        ("stale_reports", run.stale_reports),
    ] {
        out.push((format!("daemon/{name}"), v));
    }
}
