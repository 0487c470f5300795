//! The hub (spec §2, §3.2, §5.4, §5.5, §5.8): ExoPlane's authority on the
//! switch control plane, as a sans-IO state machine. Inputs (daemon
//! messages, switch acknowledgements, counter reads, aging callbacks,
//! port-down) arrive with `now`; the hub answers with outputs (messages to
//! daemons, switch operations, events) and a next timer deadline. It does
//! no I/O and reads no clock, so the simulator and the live runtime drive
//! the same code and a seed replays a run.
//!
//! Parts:
//! - [`msg`] — the control-protocol messages as Rust values;
//! - [`app`] — what the hub knows of an app (objects, key projection,
//!   sharding);
//! - [`entries`] — the entry directory and switch slot pools;
//! - `writes` — the per-key FIFO write sequencer (strong consistency);
//! - `flows` — the flow directory, promotion and two-phase insert/evict;
//! - `devices` — device status UP/DOWN/REBUILDING, DUMP and REJOIN;
//! - `events` — control events of switch-served packets forwarded
//!   (EVENT_FWD) to the daemon of the flow's primary, or its replica;
//! - `syncing` — the glue to the synchronisation part ([`crate::sync`]):
//!   the hub owns a [`SyncHub`] and drives it from these handlers (entry
//!   lifecycle, device status, SYNC_RESP, switch reads and MERGE_ACKs), so
//!   one hub runs both the write path and the sync rounds;
//! - [`oplog`] — the append-only log the P3/P4 checkers read;
//! - [`check`] — those checkers.
//!
//! Switch-side actions are [`SwitchOp`] outputs whose acknowledgements come
//! back as [`HubInput::SwitchAck`]; a driver executes them on the switch's
//! control plane in issue order (as one BfRt session does) [our choice].

pub mod app;
pub mod check;
mod devices;
pub mod entries;
mod events;
mod flows;
pub mod msg;
pub mod oplog;
pub mod overhead;
mod syncing;
mod timers;
mod writes;

use std::collections::{BTreeMap, HashMap, VecDeque};

use inca_switch::device::Nanos;

use crate::ids::{AppId, ObjId, Pdev, UnionKey, MAX_PDEVS};
use crate::sync::{MergeCmd, SyncHub};
use app::{FlowKeys, ObjectKind};
use entries::{Directory, SlotPool};
use msg::{DaemonMsg, ToDaemon};
use oplog::{EntryKey, OpLog};
use timers::{Timer, Timers};

/// One millisecond in [`Nanos`].
const MS: Nanos = 1_000_000;

/// A holder that has not answered a WRITE_APPLY for this long is declared
/// dead (spec §5.4 step 3: 2 s [our choice]).
pub const HOLDER_TIMEOUT: Nanos = 2_000 * MS;
/// Wait after an FM delete is acknowledged before object entries are
/// removed (spec §5.5: `T_flush` = 5 ms [our choice; exceeds the switch
/// model's pipeline plus queue residency]).
pub const T_FLUSH: Nanos = 5 * MS;
/// FM direct-counter poll period (spec §5.5: 1 s [our choice]).
pub const COUNTER_POLL: Nanos = 1_000 * MS;
/// Minimum spacing of promotions: at most 1,000 per second per hub (spec
/// §5.5 [our choice]).
pub const PROMOTION_INTERVAL: Nanos = MS;
/// A report must beat the victim's rate by this factor, in percent (spec
/// §5.5: 10 % hysteresis [our choice]).
pub const HYSTERESIS_PERCENT: u64 = 110;
/// Reports waiting for a promotion slot [our choice: 1 s of promotions].
pub const PROMOTION_QUEUE: usize = 1_000;
/// Writes waiting in all per-key FIFOs together [our choice].
pub const MAX_QUEUED_WRITES: usize = 65_536;
/// Entries in the directory [our choice: 2 GB device DRAM holds millions;
/// the hub bound is the ExoPlane evaluation's scale ×10].
pub const MAX_ENTRIES: usize = 10_000_000;
/// PING period (spec §4.6: every 250 ms [our choice]).
pub const PING_INTERVAL: Nanos = 250 * MS;
/// PINGs a daemon may leave unanswered (no message at all from it) before
/// the hub declares it dead and writes `pdev_alive` = 0 itself (spec §4.6,
/// §5.8: 3 misses [our choice]).
pub const PING_MISSES: u64 = 3;
/// Entries per DUMP message [our choice].
pub const DUMP_BATCH: usize = 256;

/// A deliberate fault, for showing the checkers catch it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Breakage {
    /// Add the FM entry in the same step as the object installs, without
    /// waiting for their acknowledgements (violates P3/P1).
    FmInsertBeforeObjectAcks,
    /// Complete a write as soon as its WRITE_APPLYs are sent, without
    /// waiting for the holders (violates P4).
    AckBeforeHoldersApplied,
}

/// Hub parameters; [`HubConfig::new`] fills the spec's values.
#[derive(Clone, Debug)]
pub struct HubConfig {
    /// External devices `N` (= logical ids `N_L`), at most [`MAX_PDEVS`].
    pub n_devices: u8,
    /// See [`HOLDER_TIMEOUT`].
    pub holder_timeout: Nanos,
    /// See [`T_FLUSH`].
    pub t_flush: Nanos,
    /// See [`COUNTER_POLL`].
    pub counter_poll: Nanos,
    /// See [`PROMOTION_INTERVAL`].
    pub promotion_interval: Nanos,
    /// See [`PROMOTION_QUEUE`].
    pub promotion_queue: usize,
    /// See [`MAX_QUEUED_WRITES`].
    pub max_queued_writes: usize,
    /// See [`MAX_ENTRIES`].
    pub max_entries: usize,
    /// See [`DUMP_BATCH`].
    pub dump_batch: usize,
    /// See [`PING_INTERVAL`].
    pub ping_interval: Nanos,
    /// See [`PING_MISSES`].
    pub ping_misses: u64,
    /// Op-log ring size.
    pub op_log_capacity: usize,
    /// A deliberate fault (tests only); `None` in every real run.
    pub breakage: Option<Breakage>,
    /// The synchronisation part's parameters (`T_c`, `T_rt`, limits).
    pub sync: crate::sync::hub::HubConfig,
    /// Apps pinned whole to one device (§5.1 app-pinning, §8 E6's
    /// baseline): every flow's entries live on that device alone, whatever
    /// its shard (no replica) [our choice]. Empty in ExoPlane's own runs.
    pub pinned: BTreeMap<AppId, Pdev>,
}

impl HubConfig {
    /// The spec's values for `n_devices` devices.
    pub fn new(n_devices: u8) -> Self {
        HubConfig {
            n_devices,
            holder_timeout: HOLDER_TIMEOUT,
            t_flush: T_FLUSH,
            counter_poll: COUNTER_POLL,
            promotion_interval: PROMOTION_INTERVAL,
            promotion_queue: PROMOTION_QUEUE,
            max_queued_writes: MAX_QUEUED_WRITES,
            max_entries: MAX_ENTRIES,
            dump_batch: DUMP_BATCH,
            ping_interval: PING_INTERVAL,
            ping_misses: PING_MISSES,
            op_log_capacity: oplog::OP_LOG_CAPACITY,
            breakage: None,
            sync: crate::sync::hub::HubConfig::default(),
            pinned: BTreeMap::new(),
        }
    }
}

/// One app as the hub runs it.
pub struct HubApp {
    /// Objects and key projection.
    pub keys: Box<dyn FlowKeys>,
    /// FM capacity `n_p·Q_p` from the plan.
    pub fm_capacity: u32,
}

/// The hub could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HubError {
    /// `n_devices` is 0 or over [`MAX_PDEVS`].
    #[error("n_devices = {0}: must be 1..={MAX_PDEVS}")]
    Devices(u8),
    /// Two apps share an id.
    #[error("app {0} is declared twice")]
    DuplicateApp(u8),
    /// A register width is not 1, 2, 4 or 8 bytes.
    #[error("app {app} object {obj}: register width {width} is not 1, 2, 4 or 8")]
    Width {
        /// The app.
        app: u8,
        /// The object.
        obj: u16,
        /// The width given.
        width: u8,
    },
}

/// An identifier the hub gives each switch operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SwitchOpId(pub u64);

/// Something for the switch control plane to do; each is acknowledged by
/// [`HubInput::SwitchAck`] (except counter reads, answered by
/// [`HubInput::FmCounters`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SwitchOp {
    /// Install an object entry (table entry or register index + initial
    /// value) in `slot`.
    InstallEntry {
        /// The entry.
        entry: EntryKey,
        /// The slot.
        slot: u32,
        /// The value.
        value: Vec<u8>,
    },
    /// Change an installed entry's value (a strong write).
    ModifyEntry {
        /// The entry.
        entry: EntryKey,
        /// The slot.
        slot: u32,
        /// The value.
        value: Vec<u8>,
    },
    /// Remove an object entry.
    RemoveEntry {
        /// The entry.
        entry: EntryKey,
        /// The slot.
        slot: u32,
    },
    /// Add `fm_p[uk]`.
    FmAdd {
        /// The app.
        app: AppId,
        /// The flow.
        uk: UnionKey,
    },
    /// Delete `fm_p[uk]`.
    FmDelete {
        /// The app.
        app: AppId,
        /// The flow.
        uk: UnionKey,
    },
    /// Read every `fm_p` direct counter.
    ReadFmCounters {
        /// The app.
        app: AppId,
    },
    /// Read a register entry (a sync snapshot or an eviction's final
    /// read, §5.6); answered by [`HubInput::RegisterRead`].
    ReadRegister {
        /// The entry.
        entry: EntryKey,
        /// The slot.
        slot: u32,
    },
    /// Inject a MERGE packet on the CPU port (§4.3, §5.6 step M):
    /// `reg[slot] ⊕= delta`; answered by [`HubInput::MergeAck`].
    InjectMerge {
        /// The slot.
        slot: u32,
        /// The entry, operator, round and delta.
        cmd: MergeCmd,
    },
    /// Write `pdev_alive[pdev]`.
    SetPdevAlive {
        /// The device.
        pdev: Pdev,
        /// Alive or not.
        alive: bool,
    },
    /// Re-arm the packet generator's port-down trigger of `pdev`'s port
    /// (Tofino fires once per port until cleared, spec §5.8).
    RearmPortDown {
        /// The device.
        pdev: Pdev,
    },
}

/// What the hub is told.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HubInput {
    /// A message from `pdev`'s daemon.
    Daemon {
        /// The sender.
        pdev: Pdev,
        /// The frame header's request id.
        req_id: u64,
        /// The message.
        msg: DaemonMsg,
    },
    /// The control session to `pdev` broke; nothing more is sent on it
    /// until the daemon's next HELLO.
    SessionReset {
        /// The device.
        pdev: Pdev,
    },
    /// The switch finished an operation.
    SwitchAck {
        /// Which.
        id: SwitchOpId,
        /// False when the switch refused it (table full, …).
        ok: bool,
    },
    /// The answer to [`SwitchOp::ReadFmCounters`].
    FmCounters {
        /// The app.
        app: AppId,
        /// `(uk, packets)` per FM entry.
        counters: Vec<(UnionKey, u32)>,
    },
    /// An FM entry was idle for `T_idle` (aging callback).
    FmIdle {
        /// The app.
        app: AppId,
        /// The flow.
        uk: UnionKey,
    },
    /// The packet generator reported `pdev`'s port down (the data plane
    /// already cleared `pdev_alive`).
    PortDown {
        /// The device.
        pdev: Pdev,
    },
    /// The answer to [`SwitchOp::ReadRegister`].
    RegisterRead {
        /// The entry.
        entry: EntryKey,
        /// The register's value.
        value: u64,
    },
    /// The MERGE_ACK of a [`SwitchOp::InjectMerge`].
    MergeAck {
        /// The entry.
        entry: EntryKey,
    },
    /// A switch-served packet of flow `uk` raised a control event of
    /// `app` (§5.4): forward it to the daemon of the flow's primary.
    Event {
        /// The app.
        app: AppId,
        /// The flow.
        uk: UnionKey,
        /// The event frame ([`crate::runtime::event`]).
        frame: Vec<u8>,
    },
}

/// Something the hub reports to its driver.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HubEvent {
    /// A holder was declared dead (silence or port down).
    HolderDead(Pdev),
    /// A rebuilt device rejoined and serves again.
    DeviceUp(Pdev),
}

/// What the hub asks its driver to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HubOutput {
    /// Send a message to a daemon.
    ToDaemon(ToDaemon),
    /// Run a switch operation.
    Switch {
        /// Its id, echoed in the acknowledgement.
        id: SwitchOpId,
        /// The operation.
        op: SwitchOp,
    },
    /// Report an event.
    Event(HubEvent),
    /// Send EVENT_FWD (§4.6, 0x21) to `pdev`'s daemon.
    EventFwd {
        /// The device.
        pdev: Pdev,
        /// The app.
        app: AppId,
        /// The event frame.
        frame: Vec<u8>,
    },
}

/// Counters of everything the hub refused or dropped.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HubStats {
    /// Writes started (versions assigned).
    pub writes: u64,
    /// Writes answered FAILED.
    pub writes_failed: u64,
    /// WRITE_REQs refused because the per-key FIFOs were full.
    pub writes_queue_full: u64,
    /// WRITE_APPLYs resent after a reconnect.
    pub applies_resent: u64,
    /// Messages not sent because the daemon's session was down.
    pub unsent: u64,
    /// Messages naming an unknown request, app or device.
    pub unknown: u64,
    /// Promotion reports dropped (flow not ABSENT, queue full, not
    /// promotable, or not beating the victim).
    pub reports_dropped: u64,
    /// Flows promoted (FM add issued).
    pub promotions: u64,
    /// Flows evicted (FM delete issued).
    pub evictions: u64,
    /// Switch operations that failed.
    pub switch_errors: u64,
    /// Holders declared dead.
    pub holders_dead: u64,
    /// Register entries the sync part refused (a limit or a mismatch);
    /// they stay unsynchronised.
    pub sync_refused: u64,
    /// Control events forwarded to a daemon (EVENT_FWD).
    pub events_fwd: u64,
    /// Control events dropped: unknown app, or neither the flow's primary
    /// nor its replica up with a session.
    pub events_dropped: u64,
}

/// Status of an external device (spec §3.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeviceStatus {
    /// Serving and receiving writes.
    Up,
    /// Declared dead; skipped by writes, routed around by the data plane.
    Down,
    /// Receiving its DUMP; receives writes, serves no packets.
    Rebuilding,
}

/// What a pending switch operation was for.
#[derive(Clone, Debug)]
enum SwitchPending {
    Install(EntryKey),
    Modify(EntryKey),
    Remove(EntryKey),
    FmAdd(AppId, UnionKey),
    FmDelete(AppId, UnionKey),
    Other,
}

struct AppState {
    keys: Box<dyn FlowKeys>,
    fm_capacity: u32,
    flows: flows::FlowDir,
    slots: BTreeMap<ObjId, SlotPool>,
    kinds: BTreeMap<ObjId, ObjectKind>,
}

/// The hub.
pub struct Hub {
    config: HubConfig,
    apps: BTreeMap<AppId, AppState>,
    dir: Directory,
    seq: writes::Sequencer,
    devices: devices::Devices,
    promo: flows::PromotionQueue,
    switch_pending: HashMap<u64, SwitchPending>,
    next_switch_op: u64,
    timers: Timers,
    out: VecDeque<HubOutput>,
    log: OpLog,
    stats: HubStats,
    /// Algorithm 3: rounds, `H`, `S_cp`, the switch copies' sync state.
    sync: SyncHub,
}

impl Hub {
    /// A hub for `apps` that starts at `now`; every device starts UP with
    /// its session down until the daemon's HELLO.
    pub fn new(config: HubConfig, apps: Vec<HubApp>, now: Nanos) -> Result<Hub, HubError> {
        if config.n_devices == 0 || usize::from(config.n_devices) > MAX_PDEVS {
            return Err(HubError::Devices(config.n_devices));
        }
        let mut map = BTreeMap::new();
        for a in apps {
            let id = a.keys.app();
            let mut slots = BTreeMap::new();
            let mut kinds = BTreeMap::new();
            for o in a.keys.objects() {
                if let ObjectKind::Register { width, .. } = o.kind {
                    if o.kind.merge().is_none() {
                        return Err(HubError::Width {
                            app: id.0,
                            obj: o.obj.0,
                            width,
                        });
                    }
                }
                slots.insert(o.obj, SlotPool::new(o.switch_capacity));
                kinds.insert(o.obj, o.kind);
            }
            let state = AppState {
                keys: a.keys,
                fm_capacity: a.fm_capacity,
                flows: flows::FlowDir::default(),
                slots,
                kinds,
            };
            if map.insert(id, state).is_some() {
                return Err(HubError::DuplicateApp(id.0));
            }
        }
        let mut timers = Timers::default();
        timers.set(now + config.counter_poll, Timer::CounterPoll);
        timers.set(now + config.ping_interval, Timer::Ping);
        Ok(Hub {
            devices: devices::Devices::new(config.n_devices),
            promo: flows::PromotionQueue::default(),
            log: OpLog::new(config.op_log_capacity),
            apps: map,
            dir: Directory::default(),
            seq: writes::Sequencer::default(),
            switch_pending: HashMap::new(),
            next_switch_op: 0,
            timers,
            out: VecDeque::new(),
            stats: HubStats::default(),
            sync: SyncHub::new(now, config.sync),
            config,
        })
    }

    /// Handles one input at `now`.
    pub fn handle(&mut self, now: Nanos, input: HubInput) {
        match input {
            HubInput::Daemon { pdev, req_id, msg } => self.on_daemon(now, pdev, req_id, msg),
            HubInput::SessionReset { pdev } => self.devices.session_reset(pdev),
            HubInput::SwitchAck { id, ok } => self.on_switch_ack(now, id, ok),
            HubInput::FmCounters { app, counters } => self.on_counters(now, app, counters),
            HubInput::FmIdle { app, uk } => self.on_idle(now, app, uk),
            HubInput::PortDown { pdev } => {
                self.switch_op(SwitchOp::RearmPortDown { pdev });
                self.declare_dead(now, pdev);
            }
            HubInput::RegisterRead { entry, value } => {
                self.sync.handle_switch_read(now, &entry, value)
            }
            HubInput::MergeAck { entry } => self.sync.handle_merge_ack(now, &entry),
            HubInput::Event { app, uk, frame } => self.on_event(app, uk, frame),
        }
        self.pump_sync(now);
    }

    /// The earliest time [`Hub::handle_timeout`] must be called.
    pub fn poll_timeout(&self) -> Option<Nanos> {
        let sync = self.sync.poll_timeout();
        Some(self.timers.next().map_or(sync, |t| t.min(sync)))
    }

    /// Runs every timer due at or before `now`.
    pub fn handle_timeout(&mut self, now: Nanos) {
        if self.sync.poll_timeout() <= now {
            self.sync.handle_timeout(now);
        }
        while let Some(timer) = self.timers.pop_due(now) {
            match timer {
                Timer::CounterPoll => {
                    let apps: Vec<AppId> = self.apps.keys().copied().collect();
                    for app in apps {
                        self.switch_op(SwitchOp::ReadFmCounters { app });
                    }
                    self.timers
                        .set(now + self.config.counter_poll, Timer::CounterPoll);
                }
                Timer::ApplyDeadline(id) => self.apply_deadline(now, id),
                Timer::Flush(app, uk) => self.flush_done(now, app, uk),
                Timer::Promote => self.drain_promotions(now),
                Timer::Ping => {
                    self.ping_all(now);
                    self.timers
                        .set(now + self.config.ping_interval, Timer::Ping);
                }
            }
        }
        self.pump_sync(now);
    }

    /// The next output, if any.
    pub fn poll_output(&mut self) -> Option<HubOutput> {
        self.out.pop_front()
    }

    /// The op log.
    pub fn op_log(&self) -> &OpLog {
        &self.log
    }

    /// Counters.
    pub fn stats(&self) -> &HubStats {
        &self.stats
    }

    /// The current sync round (HELLO_ACK carries it).
    pub fn round(&self) -> u64 {
        self.sync.round()
    }

    /// The synchronisation state (`H`, `S_cp`, rounds, its counters).
    pub fn sync(&self) -> &SyncHub {
        &self.sync
    }

    /// A device's status.
    pub fn device_status(&self, pdev: Pdev) -> Option<DeviceStatus> {
        self.devices.status(pdev)
    }

    /// The directory entry of `entry`: (value, version, holders, refcount).
    pub fn entry(&self, entry: &EntryKey) -> Option<&entries::Entry> {
        self.dir.map.get(entry)
    }

    /// Every directory entry, in key order.
    pub fn entries(&self) -> impl Iterator<Item = (&EntryKey, &entries::Entry)> {
        self.dir.map.iter()
    }

    /// Flows of `app` whose FM entry is PRESENT.
    pub fn present_flows(&self, app: AppId) -> Vec<UnionKey> {
        self.apps
            .get(&app)
            .map(|a| a.flows.present())
            .unwrap_or_default()
    }

    /// FM occupancy (INSERTING + PRESENT flows) of `app`.
    pub fn fm_occupancy(&self, app: AppId) -> u32 {
        self.apps.get(&app).map_or(0, |a| a.flows.occupancy())
    }

    fn on_daemon(&mut self, now: Nanos, pdev: Pdev, req_id: u64, msg: DaemonMsg) {
        if !self.devices.known(pdev) {
            self.stats.unknown += 1;
            return;
        }
        self.devices.heard(pdev, now);
        match msg {
            DaemonMsg::Hello {
                pdev: said,
                lost_state,
                ..
            } => {
                if said != pdev {
                    self.stats.unknown += 1;
                    return;
                }
                self.on_hello(now, pdev, req_id, lost_state);
            }
            DaemonMsg::WriteReq { app, uk, writes } => {
                self.on_write_req(now, pdev, req_id, app, uk, writes)
            }
            DaemonMsg::WriteApplied { ok } => self.on_applied(now, pdev, req_id, ok),
            DaemonMsg::PromoteReport {
                app,
                uk,
                estimate,
                elapsed_us,
            } => self.on_report(now, app, uk, estimate, elapsed_us),
            DaemonMsg::RejoinDone => self.on_rejoin_done(now, pdev),
            DaemonMsg::SyncResp(resp) => self.sync.handle_sync_resp(now, pdev, &resp),
            DaemonMsg::Ping { ts } => self.send(pdev, req_id, msg::HubMsg::Pong { ts }),
            DaemonMsg::Pong { .. } => {}
        }
    }

    fn switch_op(&mut self, op: SwitchOp) -> SwitchOpId {
        let id = SwitchOpId(self.next_switch_op);
        self.next_switch_op += 1;
        let pending = match &op {
            SwitchOp::InstallEntry { entry, .. } => SwitchPending::Install(entry.clone()),
            SwitchOp::ModifyEntry { entry, .. } => SwitchPending::Modify(entry.clone()),
            SwitchOp::RemoveEntry { entry, .. } => SwitchPending::Remove(entry.clone()),
            SwitchOp::FmAdd { app, uk } => SwitchPending::FmAdd(*app, uk.clone()),
            SwitchOp::FmDelete { app, uk } => SwitchPending::FmDelete(*app, uk.clone()),
            SwitchOp::ReadFmCounters { .. }
            | SwitchOp::ReadRegister { .. }
            | SwitchOp::InjectMerge { .. } => {
                self.out.push_back(HubOutput::Switch { id, op });
                return id;
            }
            _ => SwitchPending::Other,
        };
        self.switch_pending.insert(id.0, pending);
        self.out.push_back(HubOutput::Switch { id, op });
        id
    }

    fn on_switch_ack(&mut self, now: Nanos, id: SwitchOpId, ok: bool) {
        let Some(pending) = self.switch_pending.remove(&id.0) else {
            self.stats.unknown += 1;
            return;
        };
        if !ok {
            self.stats.switch_errors += 1;
        }
        match pending {
            SwitchPending::Install(e) => self.install_acked(now, e, ok),
            SwitchPending::Modify(e) => self.switch_applied(now, e, ok),
            SwitchPending::Remove(e) => self.remove_acked(now, e),
            SwitchPending::FmAdd(app, uk) => self.fm_add_acked(now, app, uk, ok),
            SwitchPending::FmDelete(app, uk) => self.fm_delete_acked(now, app, uk),
            SwitchPending::Other => {}
        }
    }

    fn send(&mut self, pdev: Pdev, req_id: u64, msg: msg::HubMsg) {
        if self.devices.session_up(pdev) {
            self.out
                .push_back(HubOutput::ToDaemon(ToDaemon { pdev, req_id, msg }));
        } else {
            self.stats.unsent += 1;
        }
    }
}
