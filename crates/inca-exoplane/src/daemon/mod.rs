//! The device daemon (spec §2, §3.3, §5.4, §5.5, §5.8) as a sans-IO state
//! machine: it runs on an external device's control plane, talks to the hub
//! over one control session and to its device's data plane through
//! [`DeviceOp`]s acknowledged by [`DaemonInput::DeviceAck`].
//!
//! - New flows (`setup`): a MISS creates a pending setup holding up to
//!   [`MAX_BUFFERED`] frames, asks the app's [`ControlLogic`] for writes
//!   and sends WRITE_REQ; WRITE_ACK OK/EXISTS re-injects the frames,
//!   FAILED or [`SETUP_TIMEOUT`] drops them.
//! - Control events (`events`): an event the app raised on a packet —
//!   forwarded by the hub (EVENT_FWD) for a switch-served packet, or
//!   raised on this device — goes to the app's [`ControlLogic`], whose
//!   writes (a firewall's DELETE on a RST) go to the hub as a WRITE_REQ;
//!   no packet waits for it.
//! - Table copies (`table`): WRITE_APPLY and DUMP entries are written to
//!   the device per key in arrival order, versions ≤ the applied one
//!   ignored; WRITE_APPLIED goes back once the device acknowledged.
//! - Popularity ([`cms`]): a count-min sketch per app; a flow whose
//!   estimate reaches θ in a window is reported once per window, if it has
//!   an entry in every object it touches.
//! - Synchronisation (`syncing`): the daemon owns a sync
//!   [`Daemon`](crate::sync::Daemon) (Algorithm 4) and drives it from
//!   these handlers: SYNC_REQ → register reads and MERGE injections on the
//!   device → SYNC_RESP; REJOIN → `reg = H`, `I = 0̸` → REJOIN_DONE.

pub mod cms;
mod events;
mod setup;
mod syncing;
mod table;

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashSet, VecDeque};

use inca_switch::device::Nanos;

use crate::hub::app::FlowKeys;
use crate::hub::msg::{DaemonMsg, HubMsg, Write};
use crate::ids::{AppId, EntryKey, ObjId, Pdev, Round, UnionKey, Version};
use crate::sync::{Limits, MergeCmd, Rejoin};
use cms::CountMin;

const MS: Nanos = 1_000_000;

/// A pending setup with no WRITE_ACK after this long drops its frames
/// (spec §5.4: 1 s [our choice]).
pub const SETUP_TIMEOUT: Nanos = 1_000 * MS;
/// Frames buffered per pending setup (spec §3.3: 16).
pub const MAX_BUFFERED: usize = 16;
/// Pending setups at once [our choice: a second of new flows at the
/// device's control-plane rate, ≤ 64 RPCs of 20 ms batches].
pub const MAX_PENDING: usize = 4_096;
/// Popularity window `T_win` (spec §3.3: 1 s [our choice]).
pub const T_WIN: Nanos = 1_000 * MS;
/// Silence from the hub after which a daemon says HELLO again [our
/// choice: four of the hub's PING intervals, 1 s, longer than the 750 ms
/// after which the hub declares a silent daemon dead]. A hub that declared
/// this device dead (a port-down, a pause, PINGs unanswered) stops
/// talking to it; the spec's recovery starts from a HELLO (§5.8), and a
/// device whose link flapped or whose daemon was paused neither restarts
/// nor loses its session, so without this it would stay DOWN for good.
pub const HUB_SILENCE: Nanos = 4 * crate::hub::PING_INTERVAL;
/// Report threshold θ in packets per window (spec §3.3: 64 [our choice]).
pub const THETA: u32 = 64;
/// Distinct flows reported per window [our choice: θ = 64 at the device's
/// 40 Gbps of 64 B packets is < 1.2 M per second; the hub's queue admits
/// 1,000 anyway].
pub const MAX_REPORTED: usize = 65_536;

/// An app's control logic: the writes a new flow needs.
pub trait ControlLogic: FlowKeys {
    /// The writes that set up flow `uk`, whose first packet is `frame`.
    /// Empty means the app installs nothing (the frame is dropped).
    fn writes_for(&self, uk: &UnionKey, frame: &[u8]) -> Vec<Write>;

    /// The writes the app's control logic issues for control event
    /// `event` ([`crate::runtime::event`]) raised by a packet of flow
    /// `uk`. Empty: nothing to write.
    fn writes_for_event(&self, _uk: &UnionKey, _event: &[u8]) -> Vec<Write> {
        Vec::new()
    }

    /// The device was given entry `key` of `obj` (`value` Some) or lost it
    /// (None): an app whose control logic remembers what it installed
    /// learns what another daemon's logic did (a firewall's connections).
    fn observe(&self, _obj: ObjId, _key: &[u8], _value: Option<&[u8]>) {}
}

/// Daemon parameters; [`DaemonConfig::new`] fills the spec's values.
#[derive(Clone, Debug)]
pub struct DaemonConfig {
    /// The device this daemon runs.
    pub pdev: Pdev,
    /// See [`SETUP_TIMEOUT`].
    pub setup_timeout: Nanos,
    /// See [`MAX_BUFFERED`].
    pub max_buffered: usize,
    /// See [`MAX_PENDING`].
    pub max_pending: usize,
    /// See [`T_WIN`].
    pub t_win: Nanos,
    /// See [`THETA`].
    pub theta: u32,
    /// See [`MAX_REPORTED`].
    pub max_reported: usize,
    /// See [`HUB_SILENCE`].
    pub hub_silence: Nanos,
}

impl DaemonConfig {
    /// The spec's values for device `pdev`.
    pub fn new(pdev: Pdev) -> Self {
        DaemonConfig {
            pdev,
            setup_timeout: SETUP_TIMEOUT,
            max_buffered: MAX_BUFFERED,
            max_pending: MAX_PENDING,
            t_win: T_WIN,
            theta: THETA,
            max_reported: MAX_REPORTED,
            hub_silence: HUB_SILENCE,
        }
    }
}

/// An identifier the daemon gives each device operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DeviceOpId(pub u64);

/// A write to the device's data-plane tables, acknowledged by
/// [`DaemonInput::DeviceAck`]; the device applies them in issue order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DeviceOp {
    /// Store `value` for `key` of `obj`.
    Store {
        /// The app.
        app: AppId,
        /// The object.
        obj: ObjId,
        /// The key.
        key: Vec<u8>,
        /// The value.
        value: Vec<u8>,
        /// The hub's version (for checks).
        version: Version,
    },
    /// Write a register entry's value through the control plane (REJOIN
    /// restores `reg = H`, §5.6).
    SetRegister {
        /// The app.
        app: AppId,
        /// The object.
        obj: ObjId,
        /// The key.
        key: Vec<u8>,
        /// The value (big-endian, the register's width).
        value: Vec<u8>,
    },
    /// Remove `key` of `obj`.
    Remove {
        /// The app.
        app: AppId,
        /// The object.
        obj: ObjId,
        /// The key.
        key: Vec<u8>,
        /// The hub's version (for checks).
        version: Version,
    },
}

/// What the daemon is told.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DaemonInput {
    /// The session to the hub is up (the daemon says HELLO).
    SessionUp,
    /// The session broke.
    SessionReset,
    /// The device's link to the switch went down or came back up (a HELLO
    /// after the hub's silence waits for the link: the hub would route
    /// packets to the device once it is rebuilt).
    Link {
        /// Whether it is up.
        up: bool,
    },
    /// A message from the hub.
    FromHub {
        /// The frame header's request id.
        req_id: u64,
        /// The message.
        msg: HubMsg,
    },
    /// A MISS digest: the device's app sent a packet of `uk` to its
    /// control plane.
    Miss {
        /// The app.
        app: AppId,
        /// The flow.
        uk: UnionKey,
        /// The whole frame.
        frame: Vec<u8>,
    },
    /// A control event raised by a packet of `uk`: forwarded by the hub
    /// (EVENT_FWD) or raised on this device.
    Event {
        /// The app.
        app: AppId,
        /// The flow.
        uk: UnionKey,
        /// The event frame ([`crate::runtime::event`]).
        frame: Vec<u8>,
    },
    /// A tail packet of `uk` passed the device: count it in the app's
    /// sketch (the daemon hosts the sketch model the data plane runs).
    TailPacket {
        /// The app.
        app: AppId,
        /// The flow.
        uk: UnionKey,
    },
    /// A REPORT digest from a data plane that runs the sketch itself.
    Report {
        /// The app.
        app: AppId,
        /// The flow.
        uk: UnionKey,
        /// The estimate.
        estimate: u32,
        /// When the data plane counted the flow to `estimate` (the
        /// report's rate is `estimate` over the time from the window's
        /// start to this, however late the digest reaches the daemon).
        at: Nanos,
        /// When the data plane began counting in the bank it counted the
        /// flow in (None: this daemon's window start, for data planes
        /// whose switch-over time is not known).
        since: Option<Nanos>,
        /// Counted in the window before the current one (read after the
        /// switch-over): the flow counts afresh now and may report again,
        /// so this report does not count as the current window's.
        previous_window: bool,
    },
    /// The device finished an operation.
    DeviceAck {
        /// Which.
        id: DeviceOpId,
        /// False when the device could not store it.
        ok: bool,
    },
    /// The answer to [`DaemonOutput::ReadRegister`].
    RegisterRead {
        /// The entry.
        entry: EntryKey,
        /// The round it was read for.
        round: Round,
        /// The register's value.
        value: u64,
    },
    /// The MERGE_ACK of a [`DaemonOutput::InjectMerge`].
    MergeAck {
        /// The entry.
        entry: EntryKey,
    },
}

/// What the daemon asks its driver to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DaemonOutput {
    /// Send a message to the hub.
    ToHub {
        /// The frame header's request id.
        req_id: u64,
        /// The message.
        msg: DaemonMsg,
    },
    /// Run a device operation.
    Device {
        /// Its id, echoed in the acknowledgement.
        id: DeviceOpId,
        /// The operation.
        op: DeviceOp,
    },
    /// Read the device register of `entry` for `round`'s SYNC_RESP; answer
    /// with [`DaemonInput::RegisterRead`].
    ReadRegister {
        /// The entry.
        entry: EntryKey,
        /// The round.
        round: Round,
    },
    /// Inject a MERGE packet into the device pipeline (§4.3); answer with
    /// [`DaemonInput::MergeAck`].
    InjectMerge(MergeCmd),
    /// Inject a buffered frame back into the device pipeline (its setup
    /// was acknowledged).
    Reinject {
        /// The app.
        app: AppId,
        /// The flow.
        uk: UnionKey,
        /// The frame.
        frame: Vec<u8>,
    },
}

/// Counters of everything the daemon dropped or refused.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DaemonStats {
    /// Setups started (WRITE_REQ sent).
    pub setups: u64,
    /// Setups acknowledged OK/EXISTS.
    pub setups_ok: u64,
    /// Setups answered FAILED.
    pub setups_failed: u64,
    /// Setups that timed out.
    pub setups_timed_out: u64,
    /// Frames dropped: buffer full, pending table full, failed or timed
    /// out setup, or no writes.
    pub frames_dropped: u64,
    /// Frames re-injected after an ack.
    pub frames_reinjected: u64,
    /// Control events handed to the app's control logic.
    pub events: u64,
    /// Control events whose writes went to the hub (WRITE_REQ).
    pub event_writes: u64,
    /// Those answered OK/EXISTS.
    pub event_writes_ok: u64,
    /// Those answered FAILED (or never, within the setup timeout).
    pub event_writes_failed: u64,
    /// Control events dropped: unknown app, too many event writes pending.
    pub events_dropped: u64,
    /// WRITE_APPLY entries ignored as not newer than the applied version.
    pub stale_applies: u64,
    /// PROMOTE_REPORTs sent.
    pub reports: u64,
    /// Reports suppressed (already reported this window, not promotable,
    /// or the per-window set full).
    pub reports_suppressed: u64,
    /// Messages not sent because the session was down.
    pub unsent: u64,
    /// Messages or inputs naming an unknown app, request or operation.
    pub unknown: u64,
    /// Register entries the sync part refused (a limit); unsynchronised.
    pub sync_refused: u64,
    /// REJOIN items skipped: the entry was deleted or re-created after
    /// the REJOIN was sent.
    pub rejoin_stale: u64,
    /// HELLOs said again after [`HUB_SILENCE`] without a word from the
    /// hub.
    pub rehellos: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Timer {
    Setup(u64),
    Event(u64),
    Window,
    HubSilence,
}

/// The daemon.
pub struct Daemon {
    config: DaemonConfig,
    apps: BTreeMap<AppId, Box<dyn ControlLogic>>,
    sketches: BTreeMap<AppId, CountMin>,
    reported: HashSet<(AppId, UnionKey)>,
    window_start: Nanos,
    /// The window before (for reports counted in it and read after the flip).
    prev_window_start: Nanos,
    session: bool,
    lost_state: bool,
    /// When the hub last said anything.
    last_heard: Nanos,
    /// Whether a [`Timer::HubSilence`] is pending.
    silence_armed: bool,
    /// The device's link to the switch.
    link_up: bool,
    next_req: u64,
    setups: setup::Setups,
    /// Event WRITE_REQs waiting for their WRITE_ACK.
    events: std::collections::HashSet<u64>,
    table: table::Table,
    timers: BinaryHeap<Reverse<(Nanos, u64, Timer)>>,
    timer_seq: u64,
    out: VecDeque<DaemonOutput>,
    stats: DaemonStats,
    /// Algorithm 4: `last_round`, `I_e`, pending merges.
    sync: crate::sync::Daemon,
    /// REJOIN received, applied once the DUMP is, with the version of
    /// each item's entry when it arrived.
    pending_rejoin: Option<(Rejoin, Vec<Option<Version>>)>,
    /// `reg = H` writes not yet acknowledged by the device.
    register_ops: HashSet<u64>,
    /// REJOIN_DONE goes out once `register_ops` is empty.
    rejoin_done_due: bool,
}

impl Daemon {
    /// A daemon for `apps` starting at `now`; `lost_state` is what its
    /// first HELLO says (a restarted device with empty tables).
    pub fn new(
        config: DaemonConfig,
        apps: Vec<Box<dyn ControlLogic>>,
        now: Nanos,
        lost_state: bool,
    ) -> Daemon {
        let mut map = BTreeMap::new();
        let mut sketches = BTreeMap::new();
        for a in apps {
            sketches.insert(a.app(), CountMin::standard());
            map.insert(a.app(), a);
        }
        let pdev = config.pdev;
        let mut d = Daemon {
            config,
            apps: map,
            sketches,
            reported: HashSet::new(),
            window_start: now,
            prev_window_start: now,
            session: false,
            lost_state,
            last_heard: now,
            silence_armed: false,
            link_up: true,
            next_req: 0,
            setups: setup::Setups::default(),
            events: HashSet::new(),
            table: table::Table::default(),
            timers: BinaryHeap::new(),
            timer_seq: 0,
            out: VecDeque::new(),
            stats: DaemonStats::default(),
            sync: crate::sync::Daemon::new(pdev, 0, Limits::default()),
            pending_rejoin: None,
            register_ops: HashSet::new(),
            rejoin_done_due: false,
        };
        d.set_timer(now + d.config.t_win, Timer::Window);
        d
    }

    /// Handles one input at `now`.
    pub fn handle(&mut self, now: Nanos, input: DaemonInput) {
        match input {
            DaemonInput::SessionUp => {
                self.session = true;
                self.hello(now);
            }
            DaemonInput::SessionReset => self.session = false,
            DaemonInput::Link { up } => self.link_up = up,
            DaemonInput::FromHub { req_id, msg } => {
                self.last_heard = now;
                self.on_hub(now, req_id, msg)
            }
            DaemonInput::Miss { app, uk, frame } => self.on_miss(now, app, uk, frame),
            DaemonInput::Event { app, uk, frame } => self.on_event(now, app, uk, frame),
            DaemonInput::TailPacket { app, uk } => {
                let Some(cms) = self.sketches.get_mut(&app) else {
                    self.stats.unknown += 1;
                    return;
                };
                if cms.add(&uk.0) == self.config.theta {
                    self.on_report(now, None, false, app, uk, self.config.theta);
                }
            }
            DaemonInput::Report {
                app,
                uk,
                estimate,
                at,
                since,
                previous_window,
            } => self.on_report(at.min(now), since, previous_window, app, uk, estimate),
            DaemonInput::DeviceAck { id, ok } => self.on_device_ack(id, ok),
            DaemonInput::RegisterRead {
                entry,
                round,
                value,
            } => self.sync.handle_register_read(&entry, round, value),
            DaemonInput::MergeAck { entry } => self.sync.handle_merge_ack(&entry),
        }
        self.pump_sync();
    }

    /// The earliest time [`Daemon::handle_timeout`] must be called.
    pub fn poll_timeout(&self) -> Option<Nanos> {
        self.timers.peek().map(|Reverse((at, _, _))| *at)
    }

    /// Runs every timer due at or before `now`.
    pub fn handle_timeout(&mut self, now: Nanos) {
        while self.poll_timeout().is_some_and(|at| at <= now) {
            let Reverse((_, _, timer)) = self.timers.pop().expect("peeked");
            match timer {
                Timer::Setup(req_id) => self.setup_deadline(req_id),
                Timer::Event(req_id) => self.event_deadline(req_id),
                Timer::Window => {
                    for cms in self.sketches.values_mut() {
                        cms.flip();
                    }
                    self.reported.clear();
                    self.prev_window_start = self.window_start;
                    self.window_start = now;
                    self.set_timer(now + self.config.t_win, Timer::Window);
                }
                Timer::HubSilence => {
                    self.silence_armed = false;
                    if !self.session {
                        continue;
                    }
                    let silent = now.saturating_sub(self.last_heard) >= self.config.hub_silence;
                    if silent && self.link_up {
                        self.stats.rehellos += 1;
                        self.hello(now);
                    } else if silent {
                        // The link is down: look again later.
                        self.arm_silence(now);
                    } else {
                        self.arm_silence(self.last_heard);
                    }
                }
            }
        }
    }

    /// Says HELLO (at session up, and again after the hub's silence) and
    /// starts waiting for the hub to speak.
    fn hello(&mut self, now: Nanos) {
        let msg = DaemonMsg::Hello {
            pdev: self.config.pdev,
            caps: 0,
            lost_state: self.lost_state,
        };
        self.send_hub(0, msg);
        self.last_heard = now;
        self.arm_silence(now);
    }

    /// A [`Timer::HubSilence`] `hub_silence` after `from`, unless one is
    /// pending.
    fn arm_silence(&mut self, from: Nanos) {
        if !self.silence_armed {
            self.silence_armed = true;
            self.set_timer(from + self.config.hub_silence, Timer::HubSilence);
        }
    }

    /// The next output, if any.
    pub fn poll_output(&mut self) -> Option<DaemonOutput> {
        self.out.pop_front()
    }

    /// Counters.
    pub fn stats(&self) -> &DaemonStats {
        &self.stats
    }

    /// The version of `key` of `obj` the device acknowledged, if it holds
    /// the key.
    pub fn applied_version(&self, app: AppId, obj: ObjId, key: &[u8]) -> Option<Version> {
        self.table.acked(app, obj, key)
    }

    /// The synchronisation state (`I_e`, `last_round`, its counters).
    pub fn sync(&self) -> &crate::sync::Daemon {
        &self.sync
    }

    /// Setups waiting for their WRITE_ACK.
    pub fn pending_setups(&self) -> usize {
        self.setups.len()
    }

    fn set_timer(&mut self, at: Nanos, timer: Timer) {
        self.timer_seq += 1;
        self.timers.push(Reverse((at, self.timer_seq, timer)));
    }

    fn send_hub(&mut self, req_id: u64, msg: DaemonMsg) {
        if self.session {
            self.out.push_back(DaemonOutput::ToHub { req_id, msg });
        } else {
            self.stats.unsent += 1;
        }
    }

    fn on_hub(&mut self, now: Nanos, req_id: u64, msg: HubMsg) {
        match msg {
            HubMsg::HelloAck { round, .. } => {
                if self.lost_state {
                    // A restarted daemon: requests of rounds up to the
                    // hub's current one belong to its earlier life. (Its
                    // sync state is kept: a re-HELLO during the DUMP must
                    // not forget entries the first DUMP stored.)
                    self.sync.seen_round(round);
                }
                self.table.start_dump_window();
            }
            HubMsg::SyncReq(req) => self.sync.handle_sync_req(&req),
            HubMsg::WriteApply { app, entries } => self.on_apply(req_id, app, entries),
            HubMsg::WriteAck { results } if self.events.contains(&req_id) => {
                self.on_event_ack(req_id, &results)
            }
            HubMsg::WriteAck { results } => self.on_ack(now, req_id, results),
            HubMsg::Dump { app, entries, last } => self.on_dump(app, entries, last),
            HubMsg::Ping { ts } => self.send_hub(req_id, DaemonMsg::Pong { ts }),
            HubMsg::Pong { .. } => {}
            // §5.6 recovery: once the DUMP is applied, each shared
            // register is restored to H and I = 0̸, then REJOIN_DONE.
            HubMsg::Rejoin(rejoin) => self.rejoin_arrived(rejoin),
        }
    }

    /// PROMOTE_REPORT for `uk` unless already reported this window or not
    /// promotable (an object the flow touches has no entry here).
    /// The flow was counted to `estimate` at `counted_at` (data-plane
    /// time); its rate is `estimate` over the time since the start of the
    /// window it was counted in (`since`, when the data plane says).
    fn on_report(
        &mut self,
        counted_at: Nanos,
        since: Option<Nanos>,
        previous_window: bool,
        app: AppId,
        uk: UnionKey,
        estimate: u32,
    ) {
        let Some(logic) = self.apps.get(&app) else {
            self.stats.unknown += 1;
            return;
        };
        let promotable = logic.objects().iter().all(|o| {
            logic
                .object_key(o.obj, &uk)
                .is_none_or(|k| self.table.acked(app, o.obj, &k).is_some())
        });
        if !promotable
            || (!previous_window
                && (self.reported.len() >= self.config.max_reported
                    || !self.reported.insert((app, uk.clone()))))
        {
            self.stats.reports_suppressed += 1;
            return;
        }
        // A digest the control plane got to only after the next flip was
        // counted in the window before.
        let start = if let Some(since) = since.filter(|&s| s <= counted_at) {
            since
        } else if counted_at >= self.window_start {
            self.window_start
        } else {
            self.prev_window_start
        };
        let elapsed_us = (counted_at.saturating_sub(start) / 1_000).min(u64::from(u32::MAX)) as u32;
        self.stats.reports += 1;
        self.next_req += 1;
        let req_id = self.next_req;
        self.send_hub(
            req_id,
            DaemonMsg::PromoteReport {
                app,
                uk,
                estimate,
                elapsed_us,
            },
        );
    }
}
