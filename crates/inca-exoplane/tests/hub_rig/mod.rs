//! A deterministic test rig for the hub and daemons: one hub, N daemons,
//! a fake switch and fake devices that execute operations in issue order
//! after random delays, and control sessions with random latency that can
//! be reset. Everything runs on one event queue seeded from a printed
//! seed. The rig checks device-side properties as they happen (P1 at the
//! fake switch, P4 at devices and at every WRITE_ACK and re-injection) and
//! collects violations.

#![allow(dead_code)]

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap, HashMap};

use inca_exoplane::daemon::{
    ControlLogic, Daemon, DaemonConfig, DaemonInput, DaemonOutput, DeviceOp, DeviceOpId,
};
use inca_exoplane::hub::app::{placement, shard, FlowKeys, ObjectDecl, ObjectKind};
use inca_exoplane::hub::msg::{DaemonMsg, HubMsg, Write, WriteOp, WriteStatus};
use inca_exoplane::hub::oplog::EntryKey;
use inca_exoplane::hub::{
    DeviceStatus, Hub, HubApp, HubConfig, HubEvent, HubInput, HubOutput, SwitchOp, SwitchOpId,
};
use inca_exoplane::ids::{AppId, ObjId, Pdev, UnionKey, Version};
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
                kind: ObjectKind::Register { width: 4 },
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
}

/// The fake switch: entries, FM entries with counters, pdev_alive.
#[derive(Default)]
pub struct FakeSwitch {
    pub entries: HashMap<EntryKey, Vec<u8>>,
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
    last_done: Nanos,
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
    Reconnect {
        pdev: Pdev,
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
    events: BinaryHeap<Reverse<(Nanos, u64)>>,
    pending: HashMap<u64, Ev>,
    seq: u64,
    sessions: Vec<Session>,
    requests: HashMap<(Pdev, u64), SentReq>,
    acks: HashMap<(Pdev, AppId, UnionKey), AckedReq>,
    up_since: Vec<Option<Nanos>>,
    paused_until: Vec<Nanos>,
    pub pauses: u64,
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
            Ev::ToDaemon { pdev, .. } | Ev::DeviceDone { pdev, .. } | Ev::Reconnect { pdev } => {
                Some(*pdev)
            }
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
                    self.hub
                        .handle(self.now, HubInput::Daemon { pdev, req_id, msg });
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
            Ev::DeviceDone { pdev, gen, id, op } => {
                let dev = &mut self.devices[usize::from(pdev.0)];
                if dev.gen != gen {
                    return;
                }
                let (key, version, value) = match op {
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
                        dev.present.insert(key, v);
                    }
                    None => {
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
                self.switch.entries.insert(entry, value);
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
            let kind: u8 = match self.rng.gen_range(0..100) {
                0..=84 => 0,
                85..=93 => 1,
                94..=98 => 2,
                _ => 3,
            };
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
                    self.daemons[usize::from(p.0)]
                        .as_mut()
                        .unwrap()
                        .handle(self.now, DaemonInput::Report { app, uk, estimate });
                    self.drain_daemon(p);
                }
            }
        }
        // Switch-served traffic moves the FM counters.
        let keys: Vec<(AppId, UnionKey)> = self.switch.fm.keys().cloned().collect();
        for k in &keys {
            let add = self.rng.gen_range(0..20);
            *self.switch.fm.get_mut(k).unwrap() += add;
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
}
