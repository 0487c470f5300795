//! A deterministic test rig for the hub and daemons: one hub, N daemons,
//! a fake switch and fake devices that execute operations in issue order
//! after random delays, and control sessions with random latency that can
//! be reset. Everything runs on one event queue seeded from a printed
//! seed. The rig checks device-side properties as they happen (P1 at the
//! fake switch, P4 at devices and at every WRITE_ACK and re-injection) and
//! collects violations.
//!
//! Synchronisation runs alongside: the tenant register (ADD, 32 b) is a
//! packet counter; data packets increment the switch copy (FM hit) or the
//! serving device's copy, and the hub's rounds, register reads and MERGEs
//! go through the fake switch and devices. The rig keeps the true total per
//! entry incarnation (key, version) and what each device contributed, and
//! computes `Lost` itself from the SYNC_RESPs the hub processed (§6 P5):
//! no read may exceed the total (P5 upper bound), and after quiescence
//! every copy equals total − Lost (P6) — see [`Rig::check_sync_converged`].

#![allow(dead_code)]

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap, HashMap};

use inca_exoplane::daemon::{
    ControlLogic, Daemon, DaemonConfig, DaemonInput, DaemonOutput, DeviceOp, DeviceOpId,
};
use inca_exoplane::hub::app::register_value;
use inca_exoplane::hub::app::{placement, shard, FlowKeys, ObjectDecl, ObjectKind};
use inca_exoplane::hub::msg::{DaemonMsg, HubMsg, Write, WriteOp, WriteStatus};
use inca_exoplane::hub::oplog::EntryKey;
use inca_exoplane::hub::{
    DeviceStatus, Hub, HubApp, HubConfig, HubEvent, HubInput, HubOutput, SwitchOp, SwitchOpId,
};
use inca_exoplane::ids::{AppId, ObjId, Pdev, Round, UnionKey, Version};
use inca_exoplane::sync::{MergeCmd, MergeOp};
use inca_switch::device::Nanos;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

pub const US: Nanos = 1_000;
pub const MS: Nanos = 1_000_000;
pub const S: Nanos = 1_000_000_000;

/// The test app: app 1 has a per-flow table (key = UK) and a per-tenant
/// register (key = UK[0], shared by many flows); app 2 only a per-flow
/// table. Frames say what the control logic writes: byte 0 = 0 setup,
/// 1 upsert the flow entry, 2 delete it, 3 delete the tenant register.
pub struct TestApp {
    pub id: AppId,
    pub objects: Vec<ObjectDecl>,
}

pub const FLOW_OBJ: ObjId = ObjId(1);
pub const TENANT_OBJ: ObjId = ObjId(2);

impl TestApp {
    pub fn new(id: u8, flow_slots: u32, tenant_slots: u32) -> Self {
        let mut objects = vec![ObjectDecl {
            obj: FLOW_OBJ,
            kind: ObjectKind::Table,
            switch_capacity: flow_slots,
        }];
        if tenant_slots > 0 {
            objects.push(ObjectDecl {
                obj: TENANT_OBJ,
                kind: ObjectKind::Register {
                    width: 4,
                    op: MergeOp::Add,
                },
                switch_capacity: tenant_slots,
            });
        }
        TestApp {
            id: AppId(id),
            objects,
        }
    }
}

impl FlowKeys for TestApp {
    fn app(&self) -> AppId {
        self.id
    }
    fn objects(&self) -> &[ObjectDecl] {
        &self.objects
    }
    fn object_key(&self, obj: ObjId, uk: &UnionKey) -> Option<Vec<u8>> {
        match obj {
            FLOW_OBJ => Some(uk.0.clone()),
            TENANT_OBJ if self.objects.len() > 1 => Some(vec![uk.0[0]]),
            _ => None,
        }
    }
}

impl ControlLogic for TestApp {
    fn writes_for(&self, uk: &UnionKey, frame: &[u8]) -> Vec<Write> {
        let w = |op, obj, key: Vec<u8>, value: Vec<u8>| Write {
            op,
            obj,
            key,
            value,
        };
        let v = vec![frame.get(1).copied().unwrap_or(0)];
        match frame.first().copied().unwrap_or(0) {
            0 => {
                let mut ws = vec![w(WriteOp::InsertIfAbsent, FLOW_OBJ, uk.0.clone(), v)];
                if self.objects.len() > 1 {
                    ws.push(w(
                        WriteOp::InsertIfAbsent,
                        TENANT_OBJ,
                        vec![uk.0[0]],
                        vec![],
                    ));
                }
                ws
            }
            1 => vec![w(WriteOp::Upsert, FLOW_OBJ, uk.0.clone(), v)],
            2 => vec![w(WriteOp::Delete, FLOW_OBJ, uk.0.clone(), vec![])],
            _ if self.objects.len() > 1 => {
                vec![w(WriteOp::Delete, TENANT_OBJ, vec![uk.0[0]], vec![])]
            }
            _ => vec![],
        }
    }

    /// A control event's frame says what to write as a MISS's does
    /// ([`Rig::switch_event`] raises `[2, 0] ‖ uk`: delete the flow entry).
    fn writes_for_event(&self, uk: &UnionKey, frame: &[u8]) -> Vec<Write> {
        self.writes_for(uk, frame)
    }
}

/// The fake switch: entries, FM entries with counters, pdev_alive.
#[derive(Default)]
pub struct FakeSwitch {
    pub entries: HashMap<EntryKey, Vec<u8>>,
    /// Register values (tenant entries), changed by packets and MERGEs.
    pub registers: HashMap<EntryKey, u64>,
    pub fm: BTreeMap<(AppId, UnionKey), u32>,
    pub alive: HashMap<Pdev, bool>,
    last_done: Nanos,
}

/// A fake device: per key the last version applied and the value.
#[derive(Default)]
pub struct FakeDevice {
    pub gen: u64,
    pub version: HashMap<EntryKey, Version>,
    pub present: HashMap<EntryKey, Vec<u8>>,
    /// Register values (tenant entries), changed by packets and MERGEs.
    pub registers: HashMap<EntryKey, u64>,
    last_done: Nanos,
}

/// A sync action on a device, run in the device's operation order.
enum DevSync {
    Read { entry: EntryKey, round: Round },
    Merge(MergeCmd),
}

/// The rig's own bookkeeping of register contributions (for P5/P6).
#[derive(Default)]
pub struct Truth {
    /// Increments per entry incarnation (key, version), everywhere.
    pub total: HashMap<(EntryKey, Version), u64>,
    /// Increments lost with failed devices (computed by the rig).
    pub lost: HashMap<(EntryKey, Version), u64>,
    /// Each device's own increments held in its copy, per incarnation.
    own: HashMap<(Pdev, EntryKey, Version), u64>,
    /// Own increments as of a register read for a round: (version, own).
    read_own: HashMap<(Pdev, Round, EntryKey), (Version, u64)>,
    /// Own increments the hub has processed (its `H`): (version, own).
    processed: HashMap<(Pdev, EntryKey), (Version, u64)>,
    /// Own increments of a crashed device, until its REJOIN settles them.
    crashed: HashMap<(Pdev, EntryKey, Version), u64>,
    /// Data packets counted.
    pub packets: u64,
    /// Register reads checked against the total.
    pub reads_checked: u64,
    /// REJOIN register writes seen.
    pub rejoin_writes: u64,
    /// The total after each increment, per incarnation: (time, total).
    history: HashMap<(EntryKey, Version), Vec<(Nanos, u64)>>,
    /// When each copy was created (`None` = the switch's).
    born: HashMap<(Option<Pdev>, EntryKey), Nanos>,
    /// Check P5's lower bound `A(t − B) ≤ V(t)` with this `B` on copies
    /// older than `B` (runs without failures: Lost = 0).
    pub lag_bound: Option<Nanos>,
    /// Register reads checked against the lower bound.
    pub lower_checked: u64,
}

struct Session {
    epoch: u64,
    up: bool,
    last_to_hub: Nanos,
    last_to_daemon: Nanos,
}

enum Ev {
    ToHub {
        pdev: Pdev,
        epoch: u64,
        req_id: u64,
        msg: DaemonMsg,
    },
    ToDaemon {
        pdev: Pdev,
        epoch: u64,
        req_id: u64,
        msg: HubMsg,
    },
    SwitchDone {
        id: SwitchOpId,
        op: SwitchOp,
    },
    DeviceDone {
        pdev: Pdev,
        gen: u64,
        id: DeviceOpId,
        op: DeviceOp,
    },
    DeviceSync {
        pdev: Pdev,
        gen: u64,
        work: DevSync,
    },
    Reconnect {
        pdev: Pdev,
    },
    EventFwd {
        pdev: Pdev,
        epoch: u64,
        app: AppId,
        frame: Vec<u8>,
    },
    Restart {
        pdev: Pdev,
    },
    Tick,
}

/// Knobs of a chaos run.
#[derive(Clone, Debug)]
pub struct Chaos {
    /// Per 1 ms tick: new-flow/update/delete packets.
    pub misses_per_tick: u32,
    /// Flows per app.
    pub flows: u32,
    /// Per tick: probability of a session reset.
    pub p_reset: f64,
    /// Per tick: probability of a device crash.
    pub p_crash: f64,
    /// Per tick: probability of a promotion storm (reports for 200 flows).
    pub p_storm: f64,
    /// Per tick: probability of an aging callback for a random FM flow.
    pub p_idle: f64,
    /// Per tick: probability that a daemon pauses (link up, no progress)
    /// for 100 ms–1.5 s: longer than three PINGs gets it declared dead.
    pub p_pause: f64,
    /// Per tick: data packets of random flows (counted in the tenant
    /// register at the switch or the serving device).
    pub packets_per_tick: u32,
    /// Share of the register-delete packets (1 % of misses) kept; the
    /// rest become setups, so counters live long enough to synchronise.
    pub register_delete_share: f64,
    /// Per tick: probability that a switch-resident flow raises a control
    /// event (EVENT_FWD) whose logic deletes the flow's entry.
    pub p_event: f64,
}

impl Default for Chaos {
    fn default() -> Self {
        Chaos {
            misses_per_tick: 2,
            flows: 400,
            p_reset: 0.002,
            p_crash: 0.0003,
            p_storm: 0.002,
            p_idle: 0.01,
            p_pause: 0.0005,
            packets_per_tick: 4,
            register_delete_share: 1.0,
            p_event: 0.0,
        }
    }
}

/// A WRITE_REQ as sent: app, flow, writes, time.
type SentReq = (AppId, UnionKey, Vec<Write>, Nanos);
/// The writes of an acknowledged WRITE_REQ and their results.
type AckedReq = (Vec<Write>, Vec<(WriteStatus, Version)>);

pub struct Rig {
    pub now: Nanos,
    pub rng: ChaCha8Rng,
    pub hub: Hub,
    pub daemons: Vec<Option<Daemon>>,
    pub devices: Vec<FakeDevice>,
    pub switch: FakeSwitch,
    pub n: u8,
    pub apps: Vec<AppId>,
    pub violations: Vec<String>,
    pub chaos: Option<Chaos>,
    pub app_set: fn() -> Vec<TestApp>,
    pub fm_caps: Vec<u32>,
    pub reinjected: u64,
    pub acks_checked: u64,
    /// Control events raised at the switch / delivered to a daemon.
    pub events_raised: u64,
    pub events_delivered: u64,
    events: BinaryHeap<Reverse<(Nanos, u64)>>,
    pending: HashMap<u64, Ev>,
    seq: u64,
    sessions: Vec<Session>,
    requests: HashMap<(Pdev, u64), SentReq>,
    acks: HashMap<(Pdev, AppId, UnionKey), AckedReq>,
    up_since: Vec<Option<Nanos>>,
    paused_until: Vec<Nanos>,
    pub pauses: u64,
    pub truth: Truth,
}

pub fn test_apps() -> Vec<TestApp> {
    vec![TestApp::new(1, 64, 8), TestApp::new(2, 64, 0)]
}

pub fn fm_caps() -> Vec<u32> {
    vec![48, 32]
}

impl Rig {
    pub fn new(
        seed: u64,
        n: u8,
        config: HubConfig,
        apps: fn() -> Vec<TestApp>,
        caps: Vec<u32>,
    ) -> Rig {
        let caps_kept = caps.clone();
        let hub_apps = apps()
            .into_iter()
            .zip(caps)
            .map(|(a, cap)| HubApp {
                keys: Box::new(a),
                fm_capacity: cap,
            })
            .collect();
        let hub = Hub::new(config, hub_apps, 0).expect("valid hub");
        let daemons = (0..n)
            .map(|p| {
                let logic: Vec<Box<dyn ControlLogic>> =
                    apps().into_iter().map(|a| Box::new(a) as _).collect();
                Some(Daemon::new(
                    DaemonConfig::new(Pdev(u16::from(p))),
                    logic,
                    0,
                    false,
                ))
            })
            .collect();
        let mut rig = Rig {
            now: 0,
            rng: ChaCha8Rng::seed_from_u64(seed),
            hub,
            daemons,
            devices: (0..n).map(|_| FakeDevice::default()).collect(),
            switch: FakeSwitch::default(),
            n,
            apps: apps().iter().map(|a| a.id).collect(),
            violations: Vec::new(),
            chaos: None,
            app_set: apps,
            fm_caps: caps_kept,
            reinjected: 0,
            acks_checked: 0,
            events_raised: 0,
            events_delivered: 0,
            events: BinaryHeap::new(),
            pending: HashMap::new(),
            seq: 0,
            sessions: (0..n)
                .map(|_| Session {
                    epoch: 0,
                    up: false,
                    last_to_hub: 0,
                    last_to_daemon: 0,
                })
                .collect(),
            requests: HashMap::new(),
            acks: HashMap::new(),
            up_since: vec![Some(0); usize::from(n)],
            paused_until: vec![0; usize::from(n)],
            pauses: 0,
            truth: Truth::default(),
        };
        for p in 0..n {
            rig.at(
                0,
                Ev::Reconnect {
                    pdev: Pdev(u16::from(p)),
                },
            );
        }
        rig
    }

    fn at(&mut self, t: Nanos, ev: Ev) {
        self.seq += 1;
        self.events.push(Reverse((t, self.seq)));
        self.pending.insert(self.seq, ev);
    }

    /// Runs until `end`.
    pub fn run_until(&mut self, end: Nanos) {
        if self.chaos.is_some() && !self.pending.values().any(|e| matches!(e, Ev::Tick)) {
            self.at(self.now + MS, Ev::Tick);
        }
        loop {
            let ev_t = self.events.peek().map(|Reverse((t, _))| *t);
            let hub_t = self.hub.poll_timeout();
            let d_t = self
                .daemons
                .iter()
                .zip(&self.paused_until)
                .filter_map(|(d, until)| d.as_ref()?.poll_timeout().map(|t| t.max(*until)))
                .min();
            let Some(t) = [ev_t, hub_t, d_t].into_iter().flatten().min() else {
                break;
            };
            if t > end {
                break;
            }
            self.now = t;
            if hub_t == Some(t) {
                self.hub.handle_timeout(t);
                self.drain_hub();
                continue;
            }
            if d_t == Some(t) {
                for p in 0..self.n {
                    let until = self.paused_until[usize::from(p)];
                    let due = self.daemons[usize::from(p)]
                        .as_ref()
                        .and_then(|d| d.poll_timeout())
                        .map(|d| d.max(until))
                        == Some(t);
                    if due {
                        self.daemons[usize::from(p)]
                            .as_mut()
                            .unwrap()
                            .handle_timeout(t);
                        self.drain_daemon(Pdev(u16::from(p)));
                    }
                }
                continue;
            }
            let Reverse((_, seq)) = self.events.pop().unwrap();
            let ev = self.pending.remove(&seq).unwrap();
            self.process(ev);
        }
        self.now = end;
    }

    fn process(&mut self, ev: Ev) {
        // A paused daemon takes no input: what is addressed to it waits
        // (TCP and the device's completion queue buffer it), in order.
        let target = match &ev {
            Ev::ToDaemon { pdev, .. }
            | Ev::EventFwd { pdev, .. }
            | Ev::DeviceDone { pdev, .. }
            | Ev::DeviceSync { pdev, .. }
            | Ev::Reconnect { pdev } => Some(*pdev),
            _ => None,
        };
        if let Some(p) = target {
            let until = self.paused_until[usize::from(p.0)];
            if until > self.now {
                self.at(until, ev);
                return;
            }
        }
        match ev {
            Ev::ToHub {
                pdev,
                epoch,
                req_id,
                msg,
            } => {
                if self.session_ok(pdev, epoch) {
                    let resp = match &msg {
                        DaemonMsg::SyncResp(r) => Some(r.clone()),
                        DaemonMsg::RejoinDone => {
                            self.settle_crashed(pdev);
                            None
                        }
                        _ => None,
                    };
                    let before = self.hub.sync().last_processed_round(pdev);
                    self.hub
                        .handle(self.now, HubInput::Daemon { pdev, req_id, msg });
                    if let Some(r) = resp {
                        let after = self.hub.sync().last_processed_round(pdev);
                        if after == Some(r.round) && before != after {
                            self.processed(pdev, &r);
                        }
                    }
                    self.drain_hub();
                }
            }
            Ev::ToDaemon {
                pdev,
                epoch,
                req_id,
                msg,
            } => {
                if !self.session_ok(pdev, epoch) {
                    return;
                }
                if let HubMsg::WriteAck { results } = &msg {
                    if let Some((app, uk, writes, _)) = self.requests.remove(&(pdev, req_id)) {
                        self.acks.insert((pdev, app, uk), (writes, results.clone()));
                    }
                }
                if let Some(d) = self.daemons[usize::from(pdev.0)].as_mut() {
                    d.handle(self.now, DaemonInput::FromHub { req_id, msg });
                    self.drain_daemon(pdev);
                }
            }
            Ev::SwitchDone { id, op } => self.switch_done(id, op),
            Ev::EventFwd {
                pdev,
                epoch,
                app,
                frame,
            } => {
                if !self.session_ok(pdev, epoch) {
                    return;
                }
                let uk = UnionKey(frame.get(2..).unwrap_or_default().to_vec());
                if let Some(d) = self.daemons[usize::from(pdev.0)].as_mut() {
                    self.events_delivered += 1;
                    d.handle(self.now, DaemonInput::Event { app, uk, frame });
                    self.drain_daemon(pdev);
                }
            }
            Ev::DeviceSync { pdev, gen, work } => {
                if self.devices[usize::from(pdev.0)].gen != gen {
                    return;
                }
                self.device_sync(pdev, work);
            }
            Ev::DeviceDone { pdev, gen, id, op } => {
                let dev = &mut self.devices[usize::from(pdev.0)];
                if dev.gen != gen {
                    return;
                }
                let (key, version, value) = match op {
                    DeviceOp::SetRegister {
                        app,
                        obj,
                        key,
                        value,
                    } => {
                        let key = EntryKey { app, obj, key };
                        self.rejoin_register(pdev, key, register_value(&value));
                        if let Some(d) = self.daemons[usize::from(pdev.0)].as_mut() {
                            d.handle(self.now, DaemonInput::DeviceAck { id, ok: true });
                            self.drain_daemon(pdev);
                        }
                        return;
                    }
                    DeviceOp::Store {
                        app,
                        obj,
                        key,
                        value,
                        version,
                    } => (EntryKey { app, obj, key }, version, Some(value)),
                    DeviceOp::Remove {
                        app,
                        obj,
                        key,
                        version,
                    } => (EntryKey { app, obj, key }, version, None),
                };
                let last = dev.version.get(&key).copied().unwrap_or(0);
                let in_order = if value.is_some() {
                    version > last
                } else {
                    version >= last
                };
                if !in_order {
                    self.violations.push(format!(
                        "P4 t={}: pdev {} applied {key:?} version {version} after {last}",
                        self.now, pdev.0
                    ));
                }
                dev.version.insert(key.clone(), version);
                match value {
                    Some(v) => {
                        if key.obj == TENANT_OBJ {
                            dev.registers.insert(key.clone(), register_value(&v));
                            self.truth.born.insert((Some(pdev), key.clone()), self.now);
                        }
                        dev.present.insert(key, v);
                    }
                    None => {
                        dev.registers.remove(&key);
                        dev.present.remove(&key);
                    }
                }
                if let Some(d) = self.daemons[usize::from(pdev.0)].as_mut() {
                    d.handle(self.now, DaemonInput::DeviceAck { id, ok: true });
                    self.drain_daemon(pdev);
                }
            }
            Ev::Reconnect { pdev } => {
                let i = usize::from(pdev.0);
                if self.daemons[i].is_none() || self.sessions[i].up {
                    return;
                }
                self.sessions[i].up = true;
                self.daemons[i]
                    .as_mut()
                    .unwrap()
                    .handle(self.now, DaemonInput::SessionUp);
                self.drain_daemon(pdev);
            }
            Ev::Restart { pdev } => {
                let i = usize::from(pdev.0);
                let logic: Vec<Box<dyn ControlLogic>> = (self.app_set)()
                    .into_iter()
                    .map(|a| Box::new(a) as _)
                    .collect();
                self.daemons[i] = Some(Daemon::new(DaemonConfig::new(pdev), logic, self.now, true));
                let t = self.now + self.rng.gen_range(MS..20 * MS);
                self.at(t, Ev::Reconnect { pdev });
            }
            Ev::Tick => {
                self.chaos_tick();
                self.at(self.now + MS, Ev::Tick);
            }
        }
    }

    fn session_ok(&self, pdev: Pdev, epoch: u64) -> bool {
        let s = &self.sessions[usize::from(pdev.0)];
        s.up && s.epoch == epoch
    }

    /// Breaks `pdev`'s session at both ends; it comes back after a while
    /// if the daemon is running.
    pub fn reset_session(&mut self, pdev: Pdev, reconnect_after: Nanos) {
        let i = usize::from(pdev.0);
        self.sessions[i].epoch += 1;
        self.sessions[i].up = false;
        self.hub.handle(self.now, HubInput::SessionReset { pdev });
        self.drain_hub();
        if let Some(d) = self.daemons[i].as_mut() {
            d.handle(self.now, DaemonInput::SessionReset);
            self.drain_daemon(pdev);
            self.at(self.now + reconnect_after, Ev::Reconnect { pdev });
        }
    }

    /// Crashes `pdev` (daemon and device state lost); it restarts with
    /// `lost_state` after `restart_after`. With `port_down` the switch's
    /// packet generator tells the hub at once; otherwise the hub notices
    /// by silence.
    pub fn crash(&mut self, pdev: Pdev, port_down: bool, restart_after: Nanos) {
        let i = usize::from(pdev.0);
        if self.daemons[i].is_none() {
            return;
        }
        self.daemons[i] = None;
        self.devices[i].gen += 1;
        self.devices[i].version.clear();
        self.devices[i].present.clear();
        self.devices[i].registers.clear();
        // Its own increments are gone with it; its REJOIN settles how many
        // the hub had processed (restored as H) and how many are lost.
        let mine: Vec<(Pdev, EntryKey, Version)> = self
            .truth
            .own
            .keys()
            .filter(|(p, _, _)| *p == pdev)
            .cloned()
            .collect();
        for k in mine {
            let own = self.truth.own.remove(&k).unwrap_or(0);
            // A crash during the rebuild keeps the first crash's count
            // (what REJOIN restored since is part of it).
            self.truth.crashed.entry(k).or_insert(own);
        }
        self.sessions[i].epoch += 1;
        self.sessions[i].up = false;
        if port_down {
            self.hub.handle(self.now, HubInput::PortDown { pdev });
            self.drain_hub();
        }
        self.at(self.now + restart_after, Ev::Restart { pdev });
    }

    fn delay(&mut self, lo: Nanos, hi: Nanos) -> Nanos {
        self.rng.gen_range(lo..hi)
    }

    pub fn drain_hub(&mut self) {
        while let Some(o) = self.hub.poll_output() {
            match o {
                HubOutput::ToDaemon(td) => {
                    if let HubMsg::WriteAck { results } = &td.msg {
                        self.check_ack(td.pdev, td.req_id, results);
                    }
                    let i = usize::from(td.pdev.0);
                    if !self.sessions[i].up {
                        continue;
                    }
                    let lat = self.delay(20 * US, 300 * US);
                    let t = (self.now + lat).max(self.sessions[i].last_to_daemon);
                    self.sessions[i].last_to_daemon = t;
                    let epoch = self.sessions[i].epoch;
                    self.at(
                        t,
                        Ev::ToDaemon {
                            pdev: td.pdev,
                            epoch,
                            req_id: td.req_id,
                            msg: td.msg,
                        },
                    );
                }
                HubOutput::EventFwd { pdev, app, frame } => {
                    let i = usize::from(pdev.0);
                    if !self.sessions[i].up {
                        continue;
                    }
                    let lat = self.delay(20 * US, 300 * US);
                    let t = (self.now + lat).max(self.sessions[i].last_to_daemon);
                    self.sessions[i].last_to_daemon = t;
                    let epoch = self.sessions[i].epoch;
                    self.at(
                        t,
                        Ev::EventFwd {
                            pdev,
                            epoch,
                            app,
                            frame,
                        },
                    );
                }
                HubOutput::Switch { id, op } => {
                    let d = self.delay(20 * US, 2 * MS);
                    let t = (self.now + d).max(self.switch.last_done);
                    self.switch.last_done = t;
                    self.at(t, Ev::SwitchDone { id, op });
                }
                HubOutput::Event(HubEvent::HolderDead(pdev)) => {
                    self.up_since[usize::from(pdev.0)] = None;
                    // The driver resets the dead holder's session.
                    let i = usize::from(pdev.0);
                    if self.sessions[i].up {
                        self.sessions[i].epoch += 1;
                        self.sessions[i].up = false;
                        if let Some(d) = self.daemons[i].as_mut() {
                            d.handle(self.now, DaemonInput::SessionReset);
                            self.drain_daemon(pdev);
                            let t = self.now + 10 * MS;
                            self.at(t, Ev::Reconnect { pdev });
                        }
                    }
                }
                HubOutput::Event(HubEvent::DeviceUp(pdev)) => {
                    self.up_since[usize::from(pdev.0)] = Some(self.now);
                }
            }
        }
    }

    pub fn drain_daemon(&mut self, pdev: Pdev) {
        let i = usize::from(pdev.0);
        loop {
            let Some(o) = self.daemons[i].as_mut().and_then(|d| d.poll_output()) else {
                return;
            };
            match o {
                DaemonOutput::ToHub { req_id, msg } => {
                    if let DaemonMsg::WriteReq { app, uk, writes } = &msg {
                        self.requests
                            .insert((pdev, req_id), (*app, uk.clone(), writes.clone(), self.now));
                    }
                    if !self.sessions[i].up {
                        continue;
                    }
                    let lat = self.delay(20 * US, 300 * US);
                    let t = (self.now + lat).max(self.sessions[i].last_to_hub);
                    self.sessions[i].last_to_hub = t;
                    let epoch = self.sessions[i].epoch;
                    self.at(
                        t,
                        Ev::ToHub {
                            pdev,
                            epoch,
                            req_id,
                            msg,
                        },
                    );
                }
                DaemonOutput::Device { id, op } => {
                    let d = self.delay(100 * US, 20 * MS);
                    let t = (self.now + d).max(self.devices[i].last_done);
                    self.devices[i].last_done = t;
                    let gen = self.devices[i].gen;
                    self.at(t, Ev::DeviceDone { pdev, gen, id, op });
                }
                DaemonOutput::Reinject { app, uk, .. } => self.check_release(pdev, app, uk),
                DaemonOutput::ReadRegister { entry, round } => {
                    self.device_queue(pdev, DevSync::Read { entry, round })
                }
                DaemonOutput::InjectMerge(cmd) => self.device_queue(pdev, DevSync::Merge(cmd)),
            }
        }
    }

    /// P4: the hub acknowledges only after every live holder applied.
    fn check_ack(&mut self, requester: Pdev, req_id: u64, results: &[(WriteStatus, Version)]) {
        let Some((app, uk, writes, sent)) = self.requests.get(&(requester, req_id)).cloned() else {
            return;
        };
        self.acks_checked += 1;
        let (prim, repl) = placement(shard(app, &uk, self.n), self.n);
        for (w, (status, v)) in writes.iter().zip(results) {
            if *status == WriteStatus::Failed || *v == 0 {
                continue;
            }
            let key = EntryKey {
                app,
                obj: w.obj,
                key: w.key.clone(),
            };
            for p in [requester, prim, repl] {
                let i = usize::from(p.0);
                let steady = self.hub.device_status(p) == Some(DeviceStatus::Up)
                    && self.up_since[i].is_some_and(|t| t <= sent)
                    && self.daemons[i].is_some();
                let have = self.devices[i].version.get(&key).copied().unwrap_or(0);
                // A delete reaches the holders of the key; a device that
                // never held it must just not serve an older copy.
                let stale = if w.op == WriteOp::Delete {
                    self.devices[i].present.contains_key(&key) && have < *v
                } else {
                    have < *v
                };
                if steady && stale {
                    self.violations.push(format!(
                        "P4 t={}: WRITE_ACK of {key:?} v{v} while pdev {} has v{have}",
                        self.now, p.0
                    ));
                }
            }
        }
    }

    /// P4: a buffered frame is released only after its setup's ack, and
    /// finds its entries on the device.
    fn check_release(&mut self, pdev: Pdev, app: AppId, uk: UnionKey) {
        self.reinjected += 1;
        let Some((writes, results)) = self.acks.get(&(pdev, app, uk.clone())) else {
            self.violations.push(format!(
                "P4 t={}: frame of {uk:?} released without an ack",
                self.now
            ));
            return;
        };
        for (w, (status, v)) in writes.iter().zip(results) {
            if !matches!(status, WriteStatus::Ok | WriteStatus::Exists) {
                self.violations.push(format!(
                    "P4 t={}: frame of {uk:?} released after {status:?}",
                    self.now
                ));
            }
            if w.op == WriteOp::Delete {
                continue;
            }
            let key = EntryKey {
                app,
                obj: w.obj,
                key: w.key.clone(),
            };
            let dev = &self.devices[usize::from(pdev.0)];
            let have = dev.version.get(&key).copied().unwrap_or(0);
            // A later write (a delete by another flow) may already have
            // replaced the version acknowledged; older is the violation.
            if have < *v {
                self.violations.push(format!(
                    "P4 t={}: frame of {uk:?} released at pdev {} without {key:?} v{v} (has v{have})",
                    self.now, pdev.0
                ));
            }
        }
    }

    fn switch_done(&mut self, id: SwitchOpId, op: SwitchOp) {
        let apps = (self.app_set)();
        let keys_of = |app: AppId, uk: &UnionKey| -> Vec<EntryKey> {
            let a = apps.iter().find(|a| a.id == app).unwrap();
            a.objects
                .iter()
                .filter_map(|o| {
                    a.object_key(o.obj, uk).map(|key| EntryKey {
                        app,
                        obj: o.obj,
                        key,
                    })
                })
                .collect()
        };
        match op {
            SwitchOp::InstallEntry { entry, value, .. }
            | SwitchOp::ModifyEntry { entry, value, .. } => {
                if entry.obj == TENANT_OBJ {
                    self.switch
                        .registers
                        .insert(entry.clone(), register_value(&value));
                    self.truth.born.insert((None, entry.clone()), self.now);
                }
                self.switch.entries.insert(entry, value);
            }
            SwitchOp::ReadRegister { entry, .. } => {
                let value = self.switch.registers.get(&entry).copied().unwrap_or(0);
                let version = self.hub.entry(&entry).map_or(0, |e| e.version);
                self.check_read(None, &entry, version, value);
                self.hub
                    .handle(self.now, HubInput::RegisterRead { entry, value });
                self.drain_hub();
                return;
            }
            SwitchOp::InjectMerge { cmd, .. } => {
                if let Some(v) = self.switch.registers.get_mut(&cmd.entry) {
                    *v = cmd.merge.combine(*v, cmd.delta);
                }
                self.hub
                    .handle(self.now, HubInput::MergeAck { entry: cmd.entry });
                self.drain_hub();
                return;
            }
            SwitchOp::RemoveEntry { entry, .. } => {
                let users: Vec<&UnionKey> = self
                    .switch
                    .fm
                    .keys()
                    .filter(|(app, uk)| *app == entry.app && keys_of(*app, uk).contains(&entry))
                    .map(|(_, uk)| uk)
                    .collect();
                if !users.is_empty() {
                    self.violations.push(format!(
                        "P1 t={}: switch entry {entry:?} removed while FM flows {users:?} use it",
                        self.now
                    ));
                }
                self.switch.entries.remove(&entry);
                self.switch.registers.remove(&entry);
            }
            SwitchOp::FmAdd { app, uk } => {
                for e in keys_of(app, &uk) {
                    if !self.switch.entries.contains_key(&e) {
                        self.violations.push(format!(
                            "P1 t={}: FM entry {uk:?} added before its entry {e:?}",
                            self.now
                        ));
                    }
                }
                self.switch.fm.insert((app, uk), 0);
                let used = self.switch.fm.keys().filter(|(a, _)| *a == app).count();
                let cap = self.fm_caps[self.apps.iter().position(|a| *a == app).unwrap()];
                if used > cap as usize {
                    self.violations.push(format!(
                        "FM t={}: app {} holds {used} FM entries, capacity {cap}",
                        self.now, app.0
                    ));
                }
            }
            SwitchOp::FmDelete { app, uk } => {
                self.switch.fm.remove(&(app, uk));
            }
            SwitchOp::ReadFmCounters { app } => {
                let counters: Vec<(UnionKey, u32)> = self
                    .switch
                    .fm
                    .iter()
                    .filter(|((a, _), _)| *a == app)
                    .map(|((_, uk), c)| (uk.clone(), *c))
                    .collect();
                self.hub
                    .handle(self.now, HubInput::FmCounters { app, counters });
                self.drain_hub();
                return;
            }
            SwitchOp::SetPdevAlive { pdev, alive } => {
                self.switch.alive.insert(pdev, alive);
            }
            SwitchOp::RearmPortDown { .. } => {}
        }
        self.hub
            .handle(self.now, HubInput::SwitchAck { id, ok: true });
        self.drain_hub();
    }

    /// Where the switch's data plane sends a miss of `uk`: the primary if
    /// alive, else the replica; `None` if neither serves.
    pub fn route(&self, app: AppId, uk: &UnionKey) -> Option<Pdev> {
        let (prim, repl) = placement(shard(app, uk, self.n), self.n);
        let alive = |p: Pdev| {
            self.switch.alive.get(&p).copied().unwrap_or(true)
                && self.daemons[usize::from(p.0)].is_some()
                && self.hub.device_status(p) == Some(DeviceStatus::Up)
        };
        [prim, repl].into_iter().find(|p| alive(*p))
    }

    pub fn miss(&mut self, app: AppId, uk: UnionKey, frame: Vec<u8>) {
        if let Some(p) = self.route(app, &uk) {
            if self.paused_until[usize::from(p.0)] > self.now {
                return; // lost at the paused device
            }
            self.daemons[usize::from(p.0)]
                .as_mut()
                .unwrap()
                .handle(self.now, DaemonInput::Miss { app, uk, frame });
            self.drain_daemon(p);
        }
    }

    /// A switch-served packet of `uk` raises a control event whose logic
    /// deletes the flow's entry (a firewall's RST): the switch punts it to
    /// the hub, which forwards it (EVENT_FWD).
    pub fn switch_event(&mut self, app: AppId, uk: &UnionKey) {
        self.events_raised += 1;
        let mut frame = vec![2, 0];
        frame.extend_from_slice(&uk.0);
        self.hub.handle(
            self.now,
            HubInput::Event {
                app,
                uk: uk.clone(),
                frame,
            },
        );
        self.drain_hub();
    }

    pub fn uk(flow: u32) -> UnionKey {
        UnionKey(vec![
            (flow % 8) as u8,
            (flow >> 16) as u8,
            (flow >> 8) as u8,
            flow as u8,
        ])
    }

    fn chaos_tick(&mut self) {
        let Some(c) = self.chaos.clone() else { return };
        for _ in 0..c.misses_per_tick {
            let app = self.apps[self.rng.gen_range(0..self.apps.len())];
            let uk = Self::uk(self.rng.gen_range(0..c.flows));
            let mut kind: u8 = match self.rng.gen_range(0..100) {
                0..=84 => 0,
                85..=93 => 1,
                94..=98 => 2,
                _ => 3,
            };
            if kind == 3
                && c.register_delete_share < 1.0
                && !self.rng.gen_bool(c.register_delete_share)
            {
                kind = 0;
            }
            let frame = vec![kind, self.rng.gen()];
            self.miss(app, uk, frame);
        }
        if self.rng.gen_bool(c.p_reset) {
            let p = Pdev(self.rng.gen_range(0..u16::from(self.n)));
            let after = self.delay(MS, 300 * MS);
            self.reset_session(p, after);
        }
        if self.rng.gen_bool(c.p_crash) {
            let p = Pdev(self.rng.gen_range(0..u16::from(self.n)));
            let alive = self.daemons.iter().filter(|d| d.is_some()).count();
            if alive == usize::from(self.n) {
                let port_down = self.rng.gen_bool(0.5);
                let after = self.delay(2500 * MS, 5 * S);
                self.crash(p, port_down, after);
            }
        }
        if self.rng.gen_bool(c.p_pause) {
            let p = self.rng.gen_range(0..usize::from(self.n));
            if self.daemons[p].is_some() && self.paused_until[p] <= self.now {
                self.pauses += 1;
                self.paused_until[p] = self.now + self.delay(100 * MS, 1500 * MS);
            }
        }
        if self.rng.gen_bool(c.p_storm) {
            for _ in 0..200 {
                let app = self.apps[self.rng.gen_range(0..self.apps.len())];
                let uk = Self::uk(self.rng.gen_range(0..c.flows));
                let estimate = self.rng.gen_range(64..5000);
                let p = self.route(app, &uk);
                if let Some(p) = p.filter(|p| self.paused_until[usize::from(p.0)] <= self.now) {
                    self.daemons[usize::from(p.0)].as_mut().unwrap().handle(
                        self.now,
                        DaemonInput::Report {
                            app,
                            uk,
                            estimate,
                            at: self.now,
                            since: None,
                            previous_window: false,
                        },
                    );
                    self.drain_daemon(p);
                }
            }
        }
        for _ in 0..c.packets_per_tick {
            let app = self.apps[self.rng.gen_range(0..self.apps.len())];
            let uk = Self::uk(self.rng.gen_range(0..c.flows));
            self.data_packet(app, uk);
        }
        // Switch-served traffic moves the FM counters.
        let keys: Vec<(AppId, UnionKey)> = self.switch.fm.keys().cloned().collect();
        for k in &keys {
            let add = self.rng.gen_range(0..20);
            *self.switch.fm.get_mut(k).unwrap() += add;
        }
        if !keys.is_empty() && c.p_event > 0.0 && self.rng.gen_bool(c.p_event) {
            let (app, uk) = keys[self.rng.gen_range(0..keys.len())].clone();
            self.switch_event(app, &uk);
        }
        if !keys.is_empty() && self.rng.gen_bool(c.p_idle) {
            let (app, uk) = keys[self.rng.gen_range(0..keys.len())].clone();
            self.hub.handle(self.now, HubInput::FmIdle { app, uk });
            self.drain_hub();
        }
    }

    /// After quiescence: every UP holder's device has the hub's version of
    /// every entry it holds, and nothing the hub deleted.
    pub fn check_converged(&mut self) {
        for p in 0..self.n {
            let pdev = Pdev(u16::from(p));
            if self.hub.device_status(pdev) != Some(DeviceStatus::Up) {
                continue;
            }
            let dev = &self.devices[usize::from(p)];
            let mut expected = BTreeSet::new();
            for (key, version) in self.hub_entries_of(pdev) {
                expected.insert(key.clone());
                let have = dev.version.get(&key).copied().unwrap_or(0);
                if have != version || !dev.present.contains_key(&key) {
                    self.violations.push(format!(
                        "converge: pdev {p} has {key:?} v{have}, hub v{version}"
                    ));
                }
            }
            for key in dev.present.keys() {
                if !expected.contains(key) {
                    self.violations
                        .push(format!("converge: pdev {p} holds {key:?} the hub does not"));
                }
            }
        }
    }

    fn hub_entries_of(&self, pdev: Pdev) -> Vec<(EntryKey, Version)> {
        let bit = 1u64 << (u32::from(pdev.0) + 1);
        self.hub
            .entries()
            .filter(|(_, e)| e.holders & bit != 0)
            .map(|(k, e)| (k.clone(), e.version))
            .collect()
    }

    /// A data packet of `uk`: an FM hit counts in the switch's tenant
    /// register, otherwise the serving device's (if it holds the key; a
    /// miss is the setup path's business and not counted).
    pub fn data_packet(&mut self, app: AppId, uk: UnionKey) {
        let entry = EntryKey {
            app,
            obj: TENANT_OBJ,
            key: vec![uk.0[0]],
        };
        if self.switch.fm.contains_key(&(app, uk.clone())) {
            let Some(v) = self.switch.registers.get_mut(&entry) else {
                return;
            };
            *v = v.wrapping_add(1) & 0xFFFF_FFFF;
            let version = self.hub.entry(&entry).map_or(0, |e| e.version);
            self.count(entry, version);
            return;
        }
        let Some(p) = self.route(app, &uk) else {
            return;
        };
        let dev = &mut self.devices[usize::from(p.0)];
        let Some(v) = dev.registers.get_mut(&entry) else {
            return;
        };
        *v = v.wrapping_add(1) & 0xFFFF_FFFF;
        let version = dev.version.get(&entry).copied().unwrap_or(0);
        *self
            .truth
            .own
            .entry((p, entry.clone(), version))
            .or_default() += 1;
        self.count(entry, version);
    }

    fn count(&mut self, entry: EntryKey, version: Version) {
        let key = (entry, version);
        let total = self.truth.total.entry(key.clone()).or_default();
        *total += 1;
        let total = *total;
        if self.truth.lag_bound.is_some() {
            self.truth
                .history
                .entry(key)
                .or_default()
                .push((self.now, total));
        }
        self.truth.packets += 1;
    }

    fn device_queue(&mut self, pdev: Pdev, work: DevSync) {
        let i = usize::from(pdev.0);
        let d = self.delay(50 * US, 5 * MS);
        let t = (self.now + d).max(self.devices[i].last_done);
        self.devices[i].last_done = t;
        let gen = self.devices[i].gen;
        self.at(t, Ev::DeviceSync { pdev, gen, work });
    }

    fn device_sync(&mut self, pdev: Pdev, work: DevSync) {
        let i = usize::from(pdev.0);
        let input = match work {
            DevSync::Read { entry, round } => {
                let value = self.devices[i].registers.get(&entry).copied().unwrap_or(0);
                let version = self.devices[i].version.get(&entry).copied().unwrap_or(0);
                self.check_read(Some(pdev), &entry, version, value);
                let own = self
                    .truth
                    .own
                    .get(&(pdev, entry.clone(), version))
                    .copied()
                    .unwrap_or(0);
                self.truth
                    .read_own
                    .insert((pdev, round, entry.clone()), (version, own));
                DaemonInput::RegisterRead {
                    entry,
                    round,
                    value,
                }
            }
            DevSync::Merge(cmd) => {
                if let Some(v) = self.devices[i].registers.get_mut(&cmd.entry) {
                    *v = cmd.merge.combine(*v, cmd.delta);
                }
                DaemonInput::MergeAck { entry: cmd.entry }
            }
        };
        if let Some(d) = self.daemons[i].as_mut() {
            d.handle(self.now, input);
            self.drain_daemon(pdev);
        }
    }

    /// P5: no copy ever holds more than the true total; with `lag_bound`
    /// B, a copy older than B holds at least the total of B ago.
    fn check_read(&mut self, at: Option<Pdev>, entry: &EntryKey, version: Version, value: u64) {
        let who = at.map_or("switch".to_string(), |p| format!("pdev {}", p.0));
        self.truth.reads_checked += 1;
        if let Some(b) = self.truth.lag_bound {
            let old = self
                .truth
                .born
                .get(&(at, entry.clone()))
                .is_some_and(|t| *t + b <= self.now);
            if old {
                let h = self
                    .truth
                    .history
                    .get(&(entry.clone(), version))
                    .map(Vec::as_slice)
                    .unwrap_or(&[]);
                let i = h.partition_point(|(t, _)| *t + b <= self.now);
                let lagged = if i == 0 { 0 } else { h[i - 1].1 };
                self.truth.lower_checked += 1;
                if value < lagged {
                    self.violations.push(format!(
                        "P5 t={}: {who} copy of {entry:?} v{version} reads {value} < total {lagged} of B = {b} ns ago",
                        self.now
                    ));
                }
            }
        }
        let total = self
            .truth
            .total
            .get(&(entry.clone(), version))
            .copied()
            .unwrap_or(0);
        if value > total {
            self.violations.push(format!(
                "P5 t={}: {who} copy of {entry:?} v{version} reads {value} > total {total}",
                self.now
            ));
        }
    }

    /// The hub processed `resp`: its `H` of `pdev` is now the own
    /// increments each item's read saw.
    fn processed(&mut self, pdev: Pdev, resp: &inca_exoplane::sync::SyncResp) {
        for item in &resp.items {
            if let Some(x) = self
                .truth
                .read_own
                .remove(&(pdev, resp.round, item.entry.clone()))
            {
                self.truth.processed.insert((pdev, item.entry.clone()), x);
            }
        }
        self.truth
            .read_own
            .retain(|(p, r, _), _| *p != pdev || *r > resp.round);
    }

    /// REJOIN restored `entry` at `pdev` to `value`: it must be what the
    /// hub processed of the device's own increments; the rest is Lost.
    fn rejoin_register(&mut self, pdev: Pdev, entry: EntryKey, value: u64) {
        let i = usize::from(pdev.0);
        let version = self.devices[i].version.get(&entry).copied().unwrap_or(0);
        self.devices[i].registers.insert(entry.clone(), value);
        self.truth.rejoin_writes += 1;
        let base = match self.truth.crashed.remove(&(pdev, entry.clone(), version)) {
            Some(own) => own,
            None => self
                .truth
                .own
                .get(&(pdev, entry.clone(), version))
                .copied()
                .unwrap_or(0),
        };
        let processed = match self.truth.processed.get(&(pdev, entry.clone())) {
            Some((v, own)) if *v == version => *own,
            _ => 0,
        };
        if value != processed || base < processed {
            self.violations.push(format!(
                "P8 t={}: pdev {} rejoined {entry:?} v{version} at {value}; hub processed {processed} of its {base}",
                self.now, pdev.0
            ));
        }
        *self.truth.lost.entry((entry.clone(), version)).or_default() +=
            base.saturating_sub(processed);
        self.truth.own.insert((pdev, entry, version), processed);
    }

    /// REJOIN_DONE: crashed copies REJOIN did not restore are lost whole.
    fn settle_crashed(&mut self, pdev: Pdev) {
        let left: Vec<(Pdev, EntryKey, Version)> = self
            .truth
            .crashed
            .keys()
            .filter(|(p, _, _)| *p == pdev)
            .cloned()
            .collect();
        for k in left {
            let own = self.truth.crashed.remove(&k).unwrap();
            *self.truth.lost.entry((k.1, k.2)).or_default() += own;
        }
    }

    /// P6 after quiescence: every copy of every register entry (the switch
    /// or the hub's `S_cp`, and each UP holder with the hub's version)
    /// equals its total − Lost.
    pub fn check_sync_converged(&mut self) {
        let entries: Vec<(EntryKey, Version)> = self
            .hub
            .entries()
            .filter(|(k, _)| k.obj == TENANT_OBJ)
            .map(|(k, e)| (k.clone(), e.version))
            .collect();
        for (entry, version) in entries {
            let key = (entry.clone(), version);
            let total = self.truth.total.get(&key).copied().unwrap_or(0);
            let lost = self.truth.lost.get(&key).copied().unwrap_or(0);
            let expected = total - lost.min(total);
            let mut copies = Vec::new();
            let sync = self.hub.sync();
            if sync.switch_holds(&entry) {
                copies.push((
                    "switch".to_string(),
                    self.switch.registers.get(&entry).copied(),
                ));
            } else if sync.is_shared(&entry) {
                copies.push(("S_cp".to_string(), sync.s_cp(&entry)));
            }
            for p in 0..self.n {
                let pdev = Pdev(u16::from(p));
                let dev = &self.devices[usize::from(p)];
                if self.hub.device_status(pdev) != Some(DeviceStatus::Up)
                    || dev.version.get(&entry) != Some(&version)
                {
                    continue;
                }
                copies.push((format!("pdev {p}"), dev.registers.get(&entry).copied()));
            }
            for (who, value) in copies {
                if value != Some(expected) {
                    self.violations.push(format!(
                        "P6: {who} holds {value:?} of {entry:?} v{version}; total {total} − lost {lost} = {expected}"
                    ));
                }
            }
        }
    }

    /// (total, lost) over the register entries the hub still has.
    pub fn live_totals(&self) -> (u64, u64) {
        let mut t = (0, 0);
        for (k, e) in self.hub.entries().filter(|(k, _)| k.obj == TENANT_OBJ) {
            let key = (k.clone(), e.version);
            t.0 += self.truth.total.get(&key).copied().unwrap_or(0);
            t.1 += self.truth.lost.get(&key).copied().unwrap_or(0);
        }
        t
    }
}
