//! A zero-latency driver of one real [`Hub`] and `n` real [`Daemon`]s,
//! for measuring the hub's state and the synchronisation traffic (E11).
//!
//! Messages between hub and daemons are delivered in the order sent, with
//! no delay, and every SYNC_REQ and SYNC_RESP is encoded by the control
//! protocol's codec ([`HubSession`], [`DaemonSession`]) so its size is the
//! frame's. The switch and the devices are stand-ins that acknowledge
//! every operation (as the tests' rig does): registers read as 0, FM
//! counters grow by [`COUNTER_STEP`] per poll, MERGEs are acknowledged.
//! Time moves from one timer deadline to the next. Unlike
//! `tests/hub_rig` this rig injects no faults and checks no property: it
//! exists to reach a steady state and count.
//!
//! Apps are the runtime's [`AppLogic`]: the catalog's declarations with
//! the app program's own control logic, so a new flow's MISS (a UDP frame
//! behind a PUNT shim with the app's new-flow reason) becomes the writes
//! the program itself issues (a NAT's both directions, a firewall's
//! connection and counter cells).

use std::collections::{BTreeMap, VecDeque};

use inca_switch::device::Nanos;

use inca_wire::exoplane::{shim, ShimRepr, ShimType};

use crate::app::AppSpec;
use crate::codec::{DaemonSession, DaemonToHub, HubSession, HubToDaemon};
use crate::daemon::{ControlLogic, Daemon, DaemonConfig, DaemonInput, DaemonOutput};
use crate::hub::app::{placement, shard};
use crate::hub::msg::{DaemonMsg, HubMsg};
use crate::hub::{Hub, HubApp, HubConfig, HubInput, HubOutput, SwitchOp};
use crate::ids::{AppId, Pdev, UnionKey};
use crate::runtime::logic::AppLogic;
use crate::sync::SyncItem;

/// FM counter growth per poll, packets (any positive rate keeps flows
/// from looking idle; no eviction happens below capacity).
pub const COUNTER_STEP: u32 = 1_000;

/// The switch port new flows arrive on (an inside port; the apps'
/// outside port is 1, as `programs` sets it).
pub const INSIDE_PORT: u16 = 3;

/// Sync traffic counted on the wire.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct SyncTraffic {
    /// SYNC_REQ frames and their bytes.
    pub req_frames: u64,
    /// …
    pub req_bytes: u64,
    /// SYNC_RESP frames and their bytes.
    pub resp_frames: u64,
    /// …
    pub resp_bytes: u64,
    /// The spec's formula (§5.10) over the same messages: 28 + Σ(19 + key)
    /// per message.
    pub formula_bytes: u64,
    /// Items carried, both directions.
    pub items: u64,
}

impl SyncTraffic {
    fn count(&mut self, items: &[SyncItem], frame: usize, req: bool) {
        let formula: usize = 28 + items.iter().map(|i| 19 + i.entry.key.len()).sum::<usize>();
        self.formula_bytes += formula as u64;
        self.items += items.len() as u64;
        if req {
            self.req_frames += 1;
            self.req_bytes += frame as u64;
        } else {
            self.resp_frames += 1;
            self.resp_bytes += frame as u64;
        }
    }

    /// Both directions' frame bytes.
    pub fn bytes(&self) -> u64 {
        self.req_bytes + self.resp_bytes
    }
}

enum Ev {
    Hub(HubInput),
    Daemon(Pdev, DaemonInput),
}

/// The rig.
pub struct Rig {
    /// Now.
    pub now: Nanos,
    /// The hub.
    pub hub: Hub,
    daemons: Vec<Daemon>,
    n: u8,
    fm: BTreeMap<(AppId, UnionKey), u32>,
    queue: VecDeque<Ev>,
    hub_session: HubSession,
    daemon_session: DaemonSession,
    /// Sync traffic since the last [`Rig::take_traffic`].
    pub traffic: SyncTraffic,
    /// Messages the codec refused (must stay 0).
    pub encode_errors: u64,
}

impl Rig {
    /// A hub with `apps` (FM capacity each, tables of that many switch
    /// entries) and `n` daemons, sessions up, sync period `t_c`; the apps'
    /// random choices (a NAT's ports) drawn from `seed`.
    pub fn new(apps: &[(AppSpec, u32)], n: u8, t_c: Nanos, seed: u64) -> anyhow::Result<Rig> {
        let logic = |spec: &AppSpec, cap: u32, p: u8| {
            AppLogic::new(spec, cap, p, n, seed).map_err(|e| anyhow::anyhow!("{}: {e}", spec.name))
        };
        let mut config = HubConfig::new(n);
        config.sync.t_c = t_c;
        config.sync.t_rt = config.sync.t_rt.min(t_c / 2);
        let mut hub_apps = Vec::new();
        for (spec, cap) in apps {
            hub_apps.push(HubApp {
                keys: Box::new(logic(spec, *cap, 0)?),
                fm_capacity: *cap,
            });
        }
        let hub = Hub::new(config, hub_apps, 0)?;
        let mut daemons = Vec::new();
        for p in 0..n {
            let mut l: Vec<Box<dyn ControlLogic>> = Vec::new();
            for (spec, cap) in apps {
                l.push(Box::new(logic(spec, *cap, p)?));
            }
            daemons.push(Daemon::new(
                DaemonConfig::new(Pdev(u16::from(p))),
                l,
                0,
                false,
            ));
        }
        let mut rig = Rig {
            now: 0,
            hub,
            daemons,
            n,
            fm: BTreeMap::new(),
            queue: VecDeque::new(),
            hub_session: HubSession::new(),
            daemon_session: DaemonSession::new(),
            traffic: SyncTraffic::default(),
            encode_errors: 0,
        };
        for p in 0..n {
            rig.queue
                .push_back(Ev::Daemon(Pdev(u16::from(p)), DaemonInput::SessionUp));
        }
        rig.pump();
        Ok(rig)
    }

    /// The primary device of flow `uk` of `app`.
    pub fn primary(&self, app: AppId, uk: &UnionKey) -> Pdev {
        placement(shard(app, uk, self.n), self.n).0
    }

    /// A new flow's first packet `frame` (key `uk`) misses on its primary
    /// device, which punts it with the app's `reason`.
    pub fn miss(&mut self, app: AppId, uk: UnionKey, mut frame: Vec<u8>, reason: u16) {
        let p = self.primary(app, &uk);
        let s = ShimRepr {
            shim_type: ShimType::Punt,
            failover: false,
            app_id: app.0,
            ldev: 0,
            in_port: INSIDE_PORT,
            out_port: reason,
            next_type: 0,
        };
        if shim::push(&mut frame, s).is_err() {
            return;
        }
        self.queue
            .push_back(Ev::Daemon(p, DaemonInput::Miss { app, uk, frame }));
        self.pump();
    }

    /// The primary's sketch reports the flow popular.
    pub fn report(&mut self, app: AppId, uk: UnionKey, estimate: u32) {
        let p = self.primary(app, &uk);
        self.queue.push_back(Ev::Daemon(
            p,
            DaemonInput::Report {
                app,
                uk,
                estimate,
                at: self.now,
                since: None,
                previous_window: false,
            },
        ));
        self.pump();
    }

    /// Runs every timer up to `t`, then sets the clock to `t`.
    pub fn run_until(&mut self, t: Nanos) {
        loop {
            self.pump();
            let next = self
                .daemons
                .iter()
                .filter_map(|d| d.poll_timeout())
                .chain(self.hub.poll_timeout())
                .min();
            match next {
                Some(at) if at <= t => {
                    self.now = self.now.max(at);
                    if self.hub.poll_timeout().is_some_and(|h| h <= self.now) {
                        self.hub.handle_timeout(self.now);
                    }
                    for d in &mut self.daemons {
                        if d.poll_timeout().is_some_and(|x| x <= self.now) {
                            d.handle_timeout(self.now);
                        }
                    }
                }
                _ => break,
            }
        }
        self.now = self.now.max(t);
    }

    /// The traffic counted so far, reset.
    pub fn take_traffic(&mut self) -> SyncTraffic {
        std::mem::take(&mut self.traffic)
    }

    fn pump(&mut self) {
        loop {
            while let Some(o) = self.hub.poll_output() {
                self.route_hub(o);
            }
            for i in 0..self.daemons.len() {
                while let Some(o) = self.daemons[i].poll_output() {
                    self.route_daemon(Pdev(i as u16), o);
                }
            }
            let Some(ev) = self.queue.pop_front() else {
                return;
            };
            match ev {
                Ev::Hub(input) => self.hub.handle(self.now, input),
                Ev::Daemon(p, input) => {
                    if let Some(d) = self.daemons.get_mut(usize::from(p.0)) {
                        d.handle(self.now, input);
                    }
                }
            }
        }
    }

    fn route_hub(&mut self, o: HubOutput) {
        match o {
            HubOutput::ToDaemon(m) => {
                if let HubMsg::SyncReq(req) = &m.msg {
                    match self
                        .hub_session
                        .encode(m.req_id, &HubToDaemon::Hub(m.msg.clone()))
                    {
                        Ok(f) => self.traffic.count(&req.items, f.len(), true),
                        Err(_) => self.encode_errors += 1,
                    }
                }
                self.queue.push_back(Ev::Daemon(
                    m.pdev,
                    DaemonInput::FromHub {
                        req_id: m.req_id,
                        msg: m.msg,
                    },
                ));
            }
            HubOutput::Switch { id, op } => {
                let input = match op {
                    SwitchOp::ReadFmCounters { app } => {
                        let counters = self
                            .fm
                            .iter_mut()
                            .filter(|((a, _), _)| *a == app)
                            .map(|((_, uk), c)| {
                                *c = c.wrapping_add(COUNTER_STEP);
                                (uk.clone(), *c)
                            })
                            .collect();
                        HubInput::FmCounters { app, counters }
                    }
                    SwitchOp::ReadRegister { entry, .. } => {
                        HubInput::RegisterRead { entry, value: 0 }
                    }
                    SwitchOp::InjectMerge { cmd, .. } => HubInput::MergeAck { entry: cmd.entry },
                    op => {
                        match op {
                            SwitchOp::FmAdd { app, uk } => {
                                self.fm.insert((app, uk), 0);
                            }
                            SwitchOp::FmDelete { app, uk } => {
                                self.fm.remove(&(app, uk));
                            }
                            _ => {}
                        }
                        HubInput::SwitchAck { id, ok: true }
                    }
                };
                self.queue.push_back(Ev::Hub(input));
            }
            // The experiments' rigs raise no control events.
            HubOutput::Event(_) | HubOutput::EventFwd { .. } => {}
        }
    }

    fn route_daemon(&mut self, p: Pdev, o: DaemonOutput) {
        let input = match o {
            DaemonOutput::ToHub { req_id, msg } => {
                if let DaemonMsg::SyncResp(resp) = &msg {
                    match self
                        .daemon_session
                        .encode(req_id, &DaemonToHub::Daemon(msg.clone()))
                    {
                        Ok(f) => self.traffic.count(&resp.items, f.len(), false),
                        Err(_) => self.encode_errors += 1,
                    }
                }
                self.queue.push_back(Ev::Hub(HubInput::Daemon {
                    pdev: p,
                    req_id,
                    msg,
                }));
                return;
            }
            DaemonOutput::Device { id, .. } => DaemonInput::DeviceAck { id, ok: true },
            DaemonOutput::ReadRegister { entry, round } => DaemonInput::RegisterRead {
                entry,
                round,
                value: 0,
            },
            DaemonOutput::InjectMerge(cmd) => DaemonInput::MergeAck { entry: cmd.entry },
            DaemonOutput::Reinject { .. } => return,
        };
        self.queue.push_back(Ev::Daemon(p, input));
    }
}
