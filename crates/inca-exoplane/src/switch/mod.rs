//! The ExoPlane switch program (specs/exoplane.md §5.2, §5.6 step M, §5.8
//! data-plane part): the runtime around the apps' switch instances, as
//! one inca-switch [`Program`].
//!
//! Per packet, in ingress:
//!
//! 1. A packet-generator port-down packet: `port_pdev[port]` →
//!    `pdev_alive[pdev] = 0` (one register write) and a copy to the CPU
//!    (the hub marks the device DOWN and re-arms the trigger).
//! 2. A shim frame: FROM_DEV from a device port (`port_pdev` hit) → pop
//!    the shim, send it out of `out_port`, run no app (P2). MERGE from the CPU → `reg[slot] ⊕= delta` (one
//!    access), rewrite to MERGE_ACK, back to the CPU. Anything else with a
//!    shim is dropped and counted.
//! 3. `classify` → (app, affinity); a miss goes to the default port.
//! 4. HIGH → the app's switch instance. LOW → step 6. MEDIUM → `fm_<app>`
//!    keyed by the union key.
//! 5. FM hit: count in the entry's direct counter, check Invariant 1 (every
//!    entry the packet will look up is present; an `invariant!`), run the
//!    app to completion.
//! 6. FM miss: `h = CRC-32(app_id ‖ UK)`, `l = shard[h & 0x3FF]`,
//!    `(prim, repl) = dev_map[l]`, `pdev_alive[prim]` (the replica's
//!    liveness is never read: one access per register per pass), push the
//!    shim TO_DEV (FAILOVER if the replica), out of `pdev_port[pdev]`.
//!
//! The apps are an inca-switch composite of their programs with the
//! choice made here ([`Composite::selected`]). A HIGH app's punts,
//! digests and aging go to its own control handler through the composite;
//! a MEDIUM app's are queued for the hub ([`AppEvent`]), which forwards
//! them to the flow's daemon (§5.4): acting on them here would change a
//! switch copy behind the hub's back and break Invariant 1. [our choice] Start-up entries
//! the hub would write (classifier, shard map `h mod N_L`, `dev_map[l] =
//! (l, l+1 mod N)`, every device alive, the port maps, one port-down
//! generator stream per device port) are installed from the configuration
//! at start; flow-manager and app entries come by hand ([`crate::manual`])
//! until the hub lands.

pub mod config;
mod hub_glue;
mod served;

use std::collections::VecDeque;

use inca_apps::headers::{self, Parsed};
use inca_switch::composite::{classifier, BlockDigest, CompositeMeta};
use inca_switch::hash::HashAlgorithm;
use inca_switch::objects::ObjectId;
use inca_switch::pktgen::{StreamConfig, Trigger};
use inca_switch::{
    AccessError, ArrayDecl, CheckHints, Composite, ControlEvent, ControlPlane, DataPlane, Declare,
    DeclareError, Destination, Gress, Handle, MatchKind, MatchSpec, PacketCtx, PacketKind,
    ParseError, PortId, Program, ProgramReport, RegisterHandle, TableDecl, TableHandle,
};
use inca_wire::exoplane::{shim, MergeRepr, ShimRepr, ShimType, SHIM_LEN};
use inca_wire::pktgen::{PortDownHeaderRepr, PORT_DOWN_HEADER_LEN};

use crate::app::{key_of, Affinity};
use crate::manual;
use crate::step_m::{self, Merged};
pub use config::{ConfigError, SwitchApp, SwitchConfig};
use config::{MAX_PDEVS, SHARD_BITS, SHARD_ENTRIES};
pub use hub_glue::{HubSetup, HUB_TIMER};

/// Punt reason: a port-down packet's copy for the hub.
pub const REASON_PORT_DOWN: u16 = 1;
/// Punt reason: a MERGE_ACK for the hub.
pub const REASON_MERGE_ACK: u16 = 2;
/// App punts arrive at the CPU as `APP_REASON_BASE + composite code`.
pub const APP_REASON_BASE: u16 = 16;
/// First packet-generator stream used for device ports [our choice; §4.4
/// names one application id, but Tofino watches one port per stream]:
/// devices 0..7 get streams 1..=7; more devices rely on the hub's PING.
pub const FIRST_PKTGEN_STREAM: u8 = 1;
/// Bounded queues of events kept for the hub (port-down copies, MERGE_ACKs,
/// aging callbacks) [our choice]; overflow is counted.
pub const EVENT_QUEUE: usize = 4096;

/// What the switch program counts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SwitchCounters {
    /// Packets no rule classified (sent to the default port or dropped).
    pub unclassified: u64,
    /// Packets run by a HIGH app.
    pub high: u64,
    /// Flow-manager hits.
    pub fm_hits: u64,
    /// Flow-manager misses (sent to a device).
    pub fm_misses: u64,
    /// Packets of LOW apps (sent to a device).
    pub low: u64,
    /// Of those, packets of app-pinned apps (sent to their one device).
    pub pinned: u64,
    /// Packets sent to a device with the FAILOVER flag.
    pub failover: u64,
    /// TO_DEV packets sent.
    pub to_dev: u64,
    /// FROM_DEV packets popped and forwarded (no app ran).
    pub from_dev: u64,
    /// Misses dropped: shard, device map or device port not installed.
    pub no_device: u64,
    /// Shim frames of a type the switch does not take from where they came.
    pub shim_refused: u64,
    /// MERGEs applied.
    pub merges: u64,
    /// MERGEs refused (unknown app or object, bad body).
    pub merge_refused: u64,
    /// Port-down packets handled.
    pub port_down: u64,
    /// Packets an app's parser refused.
    pub app_parse_drops: u64,
    /// Manual or hub writes that could not be applied.
    pub write_refused: u64,
    /// Events dropped because a hub queue was full.
    pub event_overflow: u64,
    /// Control events of MEDIUM apps queued for the hub.
    pub app_events: u64,
    /// Flow-manager hits that missed an entry they need (§6 P1).
    pub p1_violations: u64,
}

/// P1 failures described in full (the rest only counted).
const P1_NOTES: usize = 8;

/// Digests of the switch program.
#[derive(Debug, Clone)]
pub enum SwitchDigest {
    /// An app's digest, for its own control handler.
    App(BlockDigest),
    /// A MEDIUM app's digest as an event frame for the hub to forward
    /// ([`crate::runtime::event`]): (app, frame).
    Event(u8, Vec<u8>),
}

/// Per-packet metadata.
#[derive(Clone, Default)]
pub struct SwitchMeta {
    apps: CompositeMeta,
    parsed: Parsed,
    shim: Option<(usize, ShimRepr)>,
}

/// The classifier's result: the app's index, its affinity and, for an
/// app-pinned app, its device.
#[derive(Debug, Clone, Copy)]
struct Class {
    app: u16,
    affinity: Affinity,
    pinned: Option<u8>,
}

/// Action-data bits of `classify`: app index 8 and affinity 2, plus a
/// valid bit and a 6-bit device when some app is pinned.
fn class_bits(cfg: &SwitchConfig) -> u32 {
    if cfg.pinned.is_empty() {
        10
    } else {
        17
    }
}

#[derive(Debug, Clone, Copy)]
struct Objects {
    classify: TableHandle<Class>,
    shard_hash: Handle,
    shard: TableHandle<u8>,
    dev_map: RegisterHandle<u32>,
    pdev_alive: RegisterHandle<u8>,
    pdev_port: TableHandle<PortId>,
    port_pdev: TableHandle<u16>,
}

/// One app's runtime objects.
#[derive(Debug, Clone, Default)]
struct AppObjects {
    /// Its union key's fields, computed once.
    uk_fields: Vec<crate::app::KeyField>,
    fm: Option<(TableHandle<u32>, Handle)>,
    /// The app's objects by object id, resolved in the composite.
    objects: Vec<(u16, ObjectId)>,
}

/// The ExoPlane switch program. See the module documentation.
#[derive(Clone)]
pub struct ExoSwitch {
    cfg: SwitchConfig,
    /// The switch instances: every app but the LOW ones.
    apps: Composite,
    /// Each app's block in `apps` (None: LOW).
    block_of: Vec<Option<u16>>,
    /// The app of each block.
    on_switch: Vec<usize>,
    objs: Option<Objects>,
    per_app: Vec<AppObjects>,
    counters: SwitchCounters,
    /// MEDIUM packets served by the switch and by devices per time bin.
    served: served::Served,
    /// Ports whose port-down packet reached the CPU, for the hub.
    pub port_down_events: VecDeque<PortId>,
    /// MERGE_ACKs that reached the CPU, for the hub's sync: (app, body).
    pub merge_acks: VecDeque<(u8, MergeRepr)>,
    /// Flow-manager entries that aged out: (app index, union key).
    pub aged: VecDeque<(u16, Vec<u8>)>,
    /// Control events of switch-served MEDIUM apps, for the hub to forward
    /// (EVENT_FWD, §5.4).
    pub app_events: VecDeque<AppEvent>,
    /// The hub, when this switch runs one ([`ExoSwitch::with_hub`]).
    hub: hub_glue::HubSlot,
    /// The first P1 failures.
    p1_notes: Vec<String>,
}

/// A control event a MEDIUM app raised on the switch. Its control logic
/// lives in the daemons, and its switch copies change only through the
/// hub, so the switch does not act on it: the hub forwards it to the
/// daemon of the flow's primary (§5.4). HIGH apps' events go to their own
/// control handler here.
#[derive(Debug, Clone)]
pub enum AppEvent {
    /// A digest of a switch-served packet as an event frame
    /// ([`crate::runtime::event`]), for EVENT_FWD.
    Forward {
        /// The app.
        app_id: u8,
        /// The event frame.
        frame: Vec<u8>,
    },
    /// A packet the app punted, with its own reason code.
    Punt {
        /// The app.
        app_id: u8,
        /// The port the packet arrived on.
        port: PortId,
        /// The app program's reason code.
        reason: u16,
        /// The frame.
        frame: Vec<u8>,
    },
    /// A digest the app sent.
    Digest {
        /// The app.
        app_id: u8,
        /// The app's digest (tagged with its block).
        digest: BlockDigest,
    },
    /// An entry of one of the app's tables went idle on the switch.
    IdleTimeout {
        /// The app.
        app_id: u8,
        /// The table.
        table: ObjectId,
        /// The entry.
        spec: MatchSpec,
    },
}

fn exact(key: &[u8]) -> MatchSpec {
    MatchSpec::Exact(key.to_vec().into())
}

fn push_bounded<T>(q: &mut VecDeque<T>, v: T, overflow: &mut u64) {
    if q.len() >= EVENT_QUEUE {
        *overflow += 1;
    } else {
        q.push_back(v);
    }
}

impl ExoSwitch {
    /// The program for `cfg`.
    pub fn new(cfg: SwitchConfig) -> Result<Self, ConfigError> {
        cfg.validate()?;
        // LOW apps never run here [our choice]: no switch instance, so
        // they cost the switch nothing but their classifier rules.
        let on_switch: Vec<usize> = (0..cfg.apps.len())
            .filter(|&i| cfg.apps[i].spec.affinity != Affinity::Low)
            .collect();
        let blocks = on_switch
            .iter()
            .map(|&i| cfg.apps[i].spec.block())
            .collect();
        let apps = Composite::selected("exoplane-apps", blocks)
            .map_err(|e| ConfigError::Invalid(e.to_string()))?;
        let mut block_of = vec![None; cfg.apps.len()];
        for (b, &i) in on_switch.iter().enumerate() {
            block_of[i] = Some(b as u16);
        }
        Ok(ExoSwitch {
            per_app: vec![AppObjects::default(); cfg.apps.len()],
            block_of,
            on_switch,
            cfg,
            apps,
            objs: None,
            counters: SwitchCounters::default(),
            served: served::Served::default(),
            port_down_events: VecDeque::new(),
            merge_acks: VecDeque::new(),
            aged: VecDeque::new(),
            app_events: VecDeque::new(),
            hub: hub_glue::HubSlot::default(),
            p1_notes: Vec::new(),
        })
    }

    /// What the program counted.
    pub fn counters(&self) -> &SwitchCounters {
        &self.counters
    }

    /// The apps' composite (each app's program by name, its counters).
    pub fn apps(&self) -> &Composite {
        &self.apps
    }

    /// The configuration.
    pub fn config(&self) -> &SwitchConfig {
        &self.cfg
    }

    /// The first P1 failures, described.
    pub fn p1_notes(&self) -> &[String] {
        &self.p1_notes
    }

    fn app_index(&self, app_id: u8) -> Option<usize> {
        self.cfg.apps.iter().position(|a| a.spec.id.0 == app_id)
    }

    fn object_of(&self, app: usize, obj: u16) -> Option<ObjectId> {
        self.per_app
            .get(app)?
            .objects
            .iter()
            .find(|(o, _)| *o == obj)
            .map(|(_, id)| *id)
    }

    /// Inserts (`slot` Some) or deletes flow `uk` of app `app_id` in its
    /// flow manager; `slot` indexes the entry's direct counter. False if
    /// the app has no flow manager or the slot is out of range.
    pub fn fm_write(
        &mut self,
        cp: &mut ControlPlane<'_>,
        app_id: u8,
        slot: Option<u32>,
        uk: &[u8],
    ) -> bool {
        self.fm_request(cp, app_id, slot, uk).is_some()
    }

    /// [`ExoSwitch::fm_write`], returning the control request id.
    pub(crate) fn fm_request(
        &mut self,
        cp: &mut ControlPlane<'_>,
        app_id: u8,
        slot: Option<u32>,
        uk: &[u8],
    ) -> Option<u64> {
        let i = self.app_index(app_id)?;
        let (fm, _) = self.per_app[i].fm?;
        match slot {
            Some(s) if (s as usize) < self.cfg.apps[i].fm_entries => {
                Some(cp.table_add(fm, exact(uk), s))
            }
            Some(_) => None,
            None => Some(cp.table_delete(fm, exact(uk))),
        }
    }

    /// Writes (value Some) or deletes entry `key` of table `obj` of app
    /// `app_id`'s switch instance (the WRITE_APPLY path). False if refused.
    pub fn entry_write(
        &mut self,
        cp: &mut ControlPlane<'_>,
        app_id: u8,
        obj: u16,
        key: &[u8],
        value: Option<&[u8]>,
    ) -> bool {
        self.entry_request(cp, app_id, obj, key, value).is_some()
    }

    /// [`ExoSwitch::entry_write`], returning the control request id.
    pub(crate) fn entry_request(
        &mut self,
        cp: &mut ControlPlane<'_>,
        app_id: u8,
        obj: u16,
        key: &[u8],
        value: Option<&[u8]>,
    ) -> Option<u64> {
        let i = self.app_index(app_id)?;
        let objects = self.per_app[i].objects.clone();
        let spec = &self.cfg.apps[i].spec;
        let resolve = |name: &str| {
            let o = spec.objects.iter().find(|o| o.name == name)?;
            objects
                .iter()
                .find(|(id, _)| *id == o.id.0)
                .map(|(_, id)| *id)
        };
        spec.install(cp, &resolve, crate::ids::ObjId(obj), key, value)
            .ok()
    }

    /// The app id of block `block` if its control logic runs elsewhere
    /// (MEDIUM: in the daemons, through the hub), None if here (HIGH).
    fn remote_app(&self, block: u16) -> Option<u8> {
        let i = *self.on_switch.get(usize::from(block))?;
        let spec = &self.cfg.apps[i].spec;
        (spec.affinity != Affinity::High).then_some(spec.id.0)
    }

    fn app_event(&mut self, e: AppEvent) {
        self.counters.app_events += 1;
        push_bounded(&mut self.app_events, e, &mut self.counters.event_overflow);
    }

    fn install_static(&mut self, cp: &mut ControlPlane<'_>) {
        let Some(o) = self.objs else { return };
        let n_rules = self.cfg.rules.len() as u32;
        for (i, r) in self.cfg.rules.iter().enumerate() {
            if let Some(app) = self.cfg.apps.iter().position(|a| a.spec.name == r.app) {
                let pinned = self
                    .cfg
                    .pinned
                    .iter()
                    .find(|(name, _)| *name == r.app)
                    .map(|&(_, d)| d);
                let class = Class {
                    app: app as u16,
                    affinity: self.cfg.apps[app].spec.affinity,
                    pinned,
                };
                cp.table_add(o.classify, r.spec(n_rules - i as u32), class);
            }
        }
        let n = self.cfg.devices.len();
        let nl = self.cfg.logical_devices();
        if n == 0 {
            return;
        }
        for h in 0..SHARD_ENTRIES {
            cp.table_add(o.shard, exact(&(h as u16).to_be_bytes()), (h % nl) as u8);
        }
        for l in 0..nl {
            let prim = (l % n) as u32;
            let repl = ((l + 1) % n) as u32;
            cp.register_write(o.dev_map, l as u64, (prim << 16) | repl);
        }
        for (pdev, &port) in self.cfg.devices.iter().enumerate() {
            cp.register_write(o.pdev_alive, pdev as u64, 1u8);
            cp.table_add(o.pdev_port, exact(&(pdev as u16).to_be_bytes()), port);
            cp.table_add(o.port_pdev, exact(&port.to_be_bytes()), pdev as u16);
            let stream = FIRST_PKTGEN_STREAM as usize + pdev;
            if stream < 8 && self.failover_enabled() {
                cp.packet_generator(
                    stream as u8,
                    Some(StreamConfig {
                        trigger: Trigger::PortDown { port },
                        template: port_down_template(port),
                        batch_size: 1,
                    }),
                );
            }
        }
    }

    /// Step 1: a generated port-down packet.
    fn port_down(
        &mut self,
        pkt: &mut PacketCtx<SwitchMeta, SwitchDigest>,
        dp: &mut DataPlane<'_>,
        o: &Objects,
    ) -> Result<(), AccessError> {
        pkt.drop_packet();
        let Some(port) = port_down_port(pkt.header()) else {
            return Ok(());
        };
        let Some(pdev) = dp.lookup(o.port_pdev, &port.to_be_bytes())? else {
            return Ok(());
        };
        if usize::from(pdev) < MAX_PDEVS {
            dp.register(o.pdev_alive, u64::from(pdev), |v| *v = 0)?;
            self.counters.port_down += 1;
            pkt.to_cpu(REASON_PORT_DOWN);
        }
        Ok(())
    }

    /// Step 2: a frame with a shim.
    fn shim_frame(
        &mut self,
        pkt: &mut PacketCtx<SwitchMeta, SwitchDigest>,
        dp: &mut DataPlane<'_>,
        o: &Objects,
        at: usize,
        s: ShimRepr,
    ) -> Result<(), AccessError> {
        match (s.shim_type, pkt.kind()) {
            (ShimType::FromDev, PacketKind::Normal) => {
                // Only from a device port [our choice]: a host cannot send
                // traffic past the apps with a forged shim.
                let port = pkt.ingress_port();
                if dp.lookup(o.port_pdev, &port.to_be_bytes())?.is_none() {
                    self.counters.shim_refused += 1;
                    pkt.drop_packet();
                    return Ok(());
                }
                // P2: a device served it; no app runs here.
                let popped = shim::pop_in_place(pkt.header_mut())
                    .ok()
                    .is_some_and(|(_, start)| pkt.remove_header(start, SHIM_LEN));
                if popped {
                    self.counters.from_dev += 1;
                    pkt.forward(s.out_port);
                } else {
                    self.counters.shim_refused += 1;
                    pkt.drop_packet();
                }
            }
            (ShimType::Merge, PacketKind::FromCpu) => {
                let per_app = &self.per_app;
                let apps = &self.cfg.apps;
                let object_of = |app_id: u8, obj: u16| {
                    let i = apps.iter().position(|a| a.spec.id.0 == app_id)?;
                    per_app[i]
                        .objects
                        .iter()
                        .find(|(o, _)| *o == obj)
                        .map(|(_, id)| *id)
                };
                match step_m::merge(pkt, dp, at, s, REASON_MERGE_ACK, object_of)? {
                    Merged::Applied => self.counters.merges += 1,
                    Merged::Refused => self.counters.merge_refused += 1,
                }
            }
            _ => {
                self.counters.shim_refused += 1;
                pkt.drop_packet();
            }
        }
        Ok(())
    }

    /// Step 5: run app `app` to completion on this switch.
    fn run_app(
        &mut self,
        pkt: &mut PacketCtx<SwitchMeta, SwitchDigest>,
        dp: &mut DataPlane<'_>,
        app: usize,
    ) -> Result<(), AccessError> {
        let Some(block) = self.block_of.get(app).copied().flatten() else {
            pkt.drop_packet();
            return Ok(());
        };
        let mut m = std::mem::take(&mut pkt.meta.apps);
        if self.apps.select(&mut m, block, pkt.header()).is_err() {
            self.counters.app_parse_drops += 1;
            pkt.meta.apps = m;
            pkt.drop_packet();
            return Ok(());
        }
        let before = pkt.destination();
        let apps = &mut self.apps;
        let (r, digest) = pkt.nest(&mut m, None, |inner| apps.ingress(inner, dp));
        pkt.meta.apps = m;
        if let Some(d) = digest {
            let d = self.remote_digest(app, block, pkt.ingress_port(), pkt.header(), d);
            pkt.digest(d);
        }
        if let Destination::Cpu(code) = pkt.destination() {
            if pkt.destination() != before {
                match code.checked_add(APP_REASON_BASE) {
                    Some(c) => pkt.to_cpu(c),
                    None => pkt.drop_packet(),
                }
            }
        }
        r
    }

    /// A digest of app `app` (block `block`): a MEDIUM app's becomes an
    /// event frame for the hub to forward to the flow's daemon (§5.4), the
    /// packet that raised it going on as the app decided (a firewall's
    /// RST is forwarded); a HIGH app's, or one the runtime cannot carry,
    /// stays the app's.
    fn remote_digest(
        &self,
        app: usize,
        block: u16,
        port: PortId,
        header: &[u8],
        d: BlockDigest,
    ) -> SwitchDigest {
        let Some(app_id) = self.remote_app(block) else {
            return SwitchDigest::App(d);
        };
        let event = self.cfg.apps[app]
            .spec
            .program
            .digest_bytes(&d)
            .and_then(|b| {
                let kind = crate::runtime::event::EventKind::Digest(b);
                // An FM hit looks no shard up: ldev 0, the hub places it.
                crate::runtime::event::encode(app_id, 0, port, header, &kind)
            });
        match event {
            Some(f) => SwitchDigest::Event(app_id, f),
            None => SwitchDigest::App(d),
        }
    }

    /// Step 6: send the packet to its shard's live device, or an
    /// app-pinned app's packet to its device (`pinned`: the classifier's
    /// action data names it; no hash, no shard lookup).
    fn send_to_device(
        &mut self,
        pkt: &mut PacketCtx<SwitchMeta, SwitchDigest>,
        dp: &mut DataPlane<'_>,
        o: &Objects,
        app: usize,
        uk: &[u8],
        pinned: Option<u8>,
    ) -> Result<(), AccessError> {
        pkt.drop_packet();
        let app_id = self.cfg.apps[app].spec.id.0;
        let l = match pinned {
            Some(d) => d,
            None => {
                let mut input = Vec::with_capacity(1 + uk.len());
                input.push(app_id);
                input.extend_from_slice(uk);
                let h = dp.hash(o.shard_hash, &input)? as u16;
                let Some(l) = dp.lookup(o.shard, &h.to_be_bytes())? else {
                    self.counters.no_device += 1;
                    return Ok(());
                };
                l
            }
        };
        if usize::from(l) >= self.cfg.logical_devices() {
            self.counters.no_device += 1;
            return Ok(());
        }
        let map = dp.register(o.dev_map, u64::from(l), |v| *v)?;
        let (prim, repl) = ((map >> 16) as u16, map as u16);
        if usize::from(prim) >= MAX_PDEVS {
            self.counters.no_device += 1;
            return Ok(());
        }
        let alive = dp.register(o.pdev_alive, u64::from(prim), |v| *v)? != 0;
        let (pdev, failover) = if alive { (prim, false) } else { (repl, true) };
        let Some(port) = dp.lookup(o.pdev_port, &pdev.to_be_bytes())? else {
            self.counters.no_device += 1;
            return Ok(());
        };
        let repr = ShimRepr {
            shim_type: ShimType::ToDev,
            failover,
            app_id,
            ldev: l,
            in_port: pkt.ingress_port(),
            out_port: 0,
            next_type: 0,
        };
        let pushed = match shim::push_in_place(pkt.header_mut(), repr) {
            Ok((at, bytes)) => pkt.insert_header(at, &bytes),
            Err(_) => false,
        };
        if !pushed {
            self.counters.shim_refused += 1;
            return Ok(());
        }
        self.counters.to_dev += 1;
        self.counters.failover += u64::from(failover);
        pkt.forward(port);
        Ok(())
    }
}

/// The port-down template (§4.4, [our choice] 64 bytes): Ethernet with
/// the shim EtherType and a PUNT shim naming the port as `in_port`.
pub fn port_down_template(port: PortId) -> Vec<u8> {
    let mut f = vec![0u8; 12];
    f.extend_from_slice(&inca_wire::exoplane::ETHERTYPE.to_be_bytes());
    let s = ShimRepr {
        shim_type: ShimType::Punt,
        failover: false,
        app_id: 0,
        ldev: 0,
        in_port: port,
        out_port: 0,
        next_type: 0,
    };
    f.extend_from_slice(&s.to_bytes());
    f.resize(64, 0);
    f
}

/// The port a generated port-down packet names: Tofino's header, then
/// ExoPlane's template naming the same port (so no other frame is taken
/// for one).
pub fn port_down_port(frame: &[u8]) -> Option<PortId> {
    let h = PortDownHeaderRepr::parse(frame).ok()?;
    let (_, s) = shim::shim_of(frame.get(PORT_DOWN_HEADER_LEN..)?).ok()??;
    (s.shim_type == ShimType::Punt && s.in_port == h.port).then_some(h.port)
}

impl Program for ExoSwitch {
    type Meta = SwitchMeta;
    type Digest = SwitchDigest;

    fn name(&self) -> &str {
        "exoplane-switch"
    }

    fn declare(&mut self, d: &mut Declare) -> Result<(), DeclareError> {
        let (objs, fms) = d.in_block("exo", &[], |d| {
            let classify = d.table::<Class>(TableDecl::new(
                "classify",
                MatchKind::Ternary,
                classifier::CLASSIFY_KEY_BYTES,
                class_bits(&self.cfg),
                classifier::CLASSIFY_ENTRIES,
            ))?;
            let mut fms = Vec::new();
            for a in &self.cfg.apps {
                if a.spec.affinity != Affinity::Medium {
                    fms.push(None);
                    continue;
                }
                let uk_bytes: usize = a.spec.union_fields().iter().map(|f| f.bytes()).sum();
                let fm = d.table::<u32>(
                    TableDecl::new(
                        &format!("fm_{}", a.spec.name),
                        MatchKind::Exact,
                        uk_bytes.max(1),
                        32,
                        a.fm_entries,
                    )
                    .after(&[classify.id()])
                    .idle_timeout(self.cfg.idle_timeout),
                )?;
                let hits = d.counter(
                    ArrayDecl::new(&format!("fm_{}_hits", a.spec.name), a.fm_entries)
                        .after(&[fm.id()]),
                )?;
                fms.push(Some((fm, hits)));
            }
            let fm_ids: Vec<ObjectId> = fms.iter().flatten().map(|(f, _)| f.id()).collect();
            let mut after_fm = vec![classify.id()];
            after_fm.extend(&fm_ids);
            let shard_hash = d.hash(
                "shard_hash",
                HashAlgorithm::Crc32,
                SHARD_BITS,
                Gress::Ingress,
                // Its input (app_id ‖ UK) is chosen by the classifier.
                &[classify.id()],
            )?;
            after_fm.push(shard_hash.id());
            let shard = d.table::<u8>(
                TableDecl::new("shard", MatchKind::Exact, 2, 8, SHARD_ENTRIES).after(&after_fm),
            )?;
            let nl = self.cfg.logical_devices().max(1);
            let dev_map = d.register::<u32>(ArrayDecl::new("dev_map", nl).after(&[shard.id()]))?;
            let port_pdev = d.table::<u16>(TableDecl::new(
                "port_pdev",
                MatchKind::Exact,
                2,
                16,
                MAX_PDEVS,
            ))?;
            let pdev_alive = d.register::<u8>(
                ArrayDecl::new("pdev_alive", MAX_PDEVS).after(&[dev_map.id(), port_pdev.id()]),
            )?;
            let pdev_port = d.table::<PortId>(
                TableDecl::new("pdev_port", MatchKind::Exact, 2, 9, MAX_PDEVS)
                    .after(&[pdev_alive.id()]),
            )?;
            let objs = Objects {
                classify,
                shard_hash,
                shard,
                dev_map,
                pdev_alive,
                pdev_port,
                port_pdev,
            };
            Ok((objs, fms))
        })?;
        // Each app after the classifier and its own flow manager.
        let classify = objs.classify.id();
        let on_switch = &self.on_switch;
        self.apps.declare_after(d, |b| {
            let mut after = vec![classify];
            let fm = on_switch
                .get(b)
                .and_then(|&i| fms.get(i).copied().flatten());
            after.extend(fm.map(|(f, _)| f.id()));
            after
        })?;
        for (i, a) in self.cfg.apps.iter().enumerate() {
            let objects = a
                .spec
                .objects
                .iter()
                .filter_map(|o| {
                    d.id_of(&format!("{}/{}", a.spec.name, o.name))
                        .map(|id| (o.id.0, id))
                })
                .collect();
            self.per_app[i] = AppObjects {
                uk_fields: a.spec.union_fields(),
                fm: fms[i],
                objects,
            };
        }
        self.objs = Some(objs);
        Ok(())
    }

    fn parse(&self, gress: Gress, header: &[u8], meta: &mut SwitchMeta) -> Result<(), ParseError> {
        if gress == Gress::Ingress && meta.apps.app().is_none() {
            // A frame too short for Ethernet parses as nothing; the
            // classifier then decides (port rules still match).
            meta.parsed = headers::parse(header).unwrap_or_default();
            meta.shim = shim::shim_of(header).map_err(|_| ParseError("malformed EXO shim"))?;
        }
        self.apps.parse(gress, header, &mut meta.apps)
    }

    fn ingress(
        &mut self,
        pkt: &mut PacketCtx<SwitchMeta, SwitchDigest>,
        dp: &mut DataPlane<'_>,
    ) -> Result<(), AccessError> {
        let Some(o) = self.objs else {
            return Ok(());
        };
        if matches!(pkt.kind(), PacketKind::Generated { .. }) {
            return self.port_down(pkt, dp, &o);
        }
        if let Some((at, s)) = pkt.meta.shim {
            return self.shim_frame(pkt, dp, &o, at, s);
        }
        let key = classifier::classify_key(pkt.ingress_port(), pkt.header());
        let Some(class) = dp.lookup(o.classify, &key)? else {
            self.counters.unclassified += 1;
            match self.cfg.default_port {
                Some(p) => pkt.forward(p),
                None => pkt.drop_packet(),
            }
            return Ok(());
        };
        let i = usize::from(class.app);
        let spec = &self.cfg.apps[i].spec;
        match class.affinity {
            Affinity::High => {
                self.counters.high += 1;
                self.run_app(pkt, dp, i)
            }
            Affinity::Low => {
                self.counters.low += 1;
                self.counters.pinned += u64::from(class.pinned.is_some());
                let uk = key_of(&self.per_app[i].uk_fields, &pkt.meta.parsed, pkt.header());
                self.send_to_device(pkt, dp, &o, i, &uk.0, class.pinned)
            }
            Affinity::Medium => {
                let uk = key_of(&self.per_app[i].uk_fields, &pkt.meta.parsed, pkt.header());
                let Some((fm, hits)) = self.per_app[i].fm else {
                    return self.send_to_device(pkt, dp, &o, i, &uk.0, None);
                };
                let Some(slot) = dp.lookup(fm, &uk.0)? else {
                    self.counters.fm_misses += 1;
                    self.served.miss(dp.now());
                    return self.send_to_device(pkt, dp, &o, i, &uk.0, None);
                };
                self.counters.fm_hits += 1;
                self.served.hit(dp.now());
                // A slot beyond the counter is the writer's error: counted
                // by the switch as an index violation, the packet dropped.
                dp.count(hits, u64::from(slot), pkt.len() as u64)?;
                // P1 (Invariant 1): every entry this packet looks up is here.
                // Counted, not asserted: a campaign reports it per seed
                // ([`crate::checks`]).
                for (obj, k) in spec.needs(&pkt.meta.parsed, pkt.header(), pkt.ingress_port()) {
                    let present = self
                        .object_of(i, obj.0)
                        .and_then(|id| dp.oracle_contains(id, &k));
                    if present != Some(true) {
                        self.counters.p1_violations += 1;
                        if self.p1_notes.len() < P1_NOTES {
                            self.p1_notes.push(format!(
                                "P1: at {} ns a flow-manager hit for app {} misses object {} key {:02x?}",
                                dp.now(),
                                spec.name,
                                obj.0,
                                k
                            ));
                        }
                    }
                }
                self.run_app(pkt, dp, i)
            }
        }
    }

    fn egress(
        &mut self,
        pkt: &mut PacketCtx<SwitchMeta, SwitchDigest>,
        dp: &mut DataPlane<'_>,
    ) -> Result<(), AccessError> {
        crate::nested::apps_egress(&mut self.apps, pkt, dp, |m| &mut m.apps, SwitchDigest::App)
    }

    fn control(&mut self, event: ControlEvent<SwitchDigest>, cp: &mut ControlPlane<'_>) {
        self.control_event(event, cp);
        self.hub_pump(cp);
    }

    /// A FROM_DEV frame on each device port (the shim branch the check's
    /// generic packets never reach), and the apps' own samples.
    fn check_hints(&self) -> CheckHints {
        self.hints()
    }

    fn report(&self) -> ProgramReport {
        let mut r = self.report_counters();
        r.series.extend(self.served.series());
        if let Some(run) = self.hub.run.as_deref() {
            hub_glue::report(run, &mut r.counters);
        }
        r
    }
}

impl ExoSwitch {
    fn control_event(&mut self, event: ControlEvent<SwitchDigest>, cp: &mut ControlPlane<'_>) {
        let event = match event.split_digest::<BlockDigest>() {
            Ok(e) => e,
            Err(SwitchDigest::App(d)) => {
                return match self.remote_app(d.block) {
                    None => self.apps.control(ControlEvent::Digest(d), cp),
                    Some(app_id) => self.app_event(AppEvent::Digest { app_id, digest: d }),
                };
            }
            Err(SwitchDigest::Event(app_id, frame)) => {
                return self.app_event(AppEvent::Forward { app_id, frame });
            }
        };
        let Some(event) = self.hub_event(event, cp) else {
            return;
        };
        match event {
            ControlEvent::Start => {
                self.install_static(cp);
                self.apps.control(ControlEvent::Start, cp);
                self.hub_start(cp);
            }
            ControlEvent::PacketIn {
                port,
                reason,
                frame,
            } => match reason {
                REASON_PORT_DOWN => {
                    let p = port_down_port(&frame).unwrap_or(port);
                    push_bounded(
                        &mut self.port_down_events,
                        p,
                        &mut self.counters.event_overflow,
                    );
                }
                REASON_MERGE_ACK => {
                    if let Some(m) = step_m::body_of(&frame) {
                        push_bounded(&mut self.merge_acks, m, &mut self.counters.event_overflow);
                    }
                }
                r if r >= APP_REASON_BASE => {
                    let code = r - APP_REASON_BASE;
                    let Some((block, own)) = self.apps.punt_origin(code) else {
                        return;
                    };
                    match self.remote_app(block) {
                        None => {
                            let e = ControlEvent::PacketIn {
                                port,
                                reason: code,
                                frame,
                            };
                            self.apps.control(e, cp);
                        }
                        Some(app_id) => self.app_event(AppEvent::Punt {
                            app_id,
                            port,
                            reason: own,
                            frame,
                        }),
                    }
                }
                _ => {}
            },
            ControlEvent::IdleTimeout { table, spec } => {
                let fm = self
                    .per_app
                    .iter()
                    .position(|a| a.fm.is_some_and(|(f, _)| f.id() == table));
                match (fm, spec) {
                    (Some(i), MatchSpec::Exact(k)) => push_bounded(
                        &mut self.aged,
                        (i as u16, k.to_vec()),
                        &mut self.counters.event_overflow,
                    ),
                    (Some(_), _) => {}
                    (None, spec) => {
                        let block = self.apps.block_of_object(table);
                        match block.and_then(|b| self.remote_app(b)) {
                            Some(app_id) => self.app_event(AppEvent::IdleTimeout {
                                app_id,
                                table,
                                spec,
                            }),
                            None => self
                                .apps
                                .control(ControlEvent::IdleTimeout { table, spec }, cp),
                        }
                    }
                }
            }
            ControlEvent::Message(m) if m.kind == manual::MSG_FM => {
                let ok = manual::parse_fm(&m.body)
                    .is_some_and(|w| self.fm_write(cp, w.app, w.slot, &w.uk));
                self.counters.write_refused += u64::from(!ok);
            }
            ControlEvent::Message(m) if m.kind == manual::MSG_MERGE => {
                let ok = manual::parse_merge(&m.body)
                    .and_then(|(app, body)| crate::runtime::inject_merge(cp, app, &body));
                self.counters.write_refused += u64::from(ok.is_none());
            }
            ControlEvent::Message(m) if m.kind == manual::MSG_WRITE => {
                let ok = manual::parse_write(&m.body).is_some_and(|w| {
                    self.entry_write(cp, w.app, w.obj, &w.key, w.value.as_deref())
                });
                self.counters.write_refused += u64::from(!ok);
            }
            e => self.apps.control(e, cp),
        }
    }

    fn hints(&self) -> CheckHints {
        let mut h = self.apps.check_hints();
        for &port in &self.cfg.devices {
            let s = ShimRepr {
                shim_type: ShimType::FromDev,
                failover: false,
                app_id: self.cfg.apps.first().map_or(0, |a| a.spec.id.0),
                ldev: 0,
                in_port: 0,
                out_port: 1,
                next_type: 0,
            };
            if let Some(f) = step_m::sample(s) {
                h.samples.push((port, f));
            }
        }
        h
    }

    fn report_counters(&self) -> ProgramReport {
        let mut r = self.apps.report();
        let c = &self.counters;
        for (name, v) in [
            ("unclassified", c.unclassified),
            ("high", c.high),
            ("fm_hits", c.fm_hits),
            ("fm_misses", c.fm_misses),
            ("low", c.low),
            ("pinned", c.pinned),
            ("to_dev", c.to_dev),
            ("failover", c.failover),
            ("from_dev", c.from_dev),
            ("no_device", c.no_device),
            ("shim_refused", c.shim_refused),
            ("merges", c.merges),
            ("merge_refused", c.merge_refused),
            ("port_down", c.port_down),
            ("app_parse_drops", c.app_parse_drops),
            ("write_refused", c.write_refused),
            ("event_overflow", c.event_overflow),
            ("app_events", c.app_events),
            ("p1_violations", c.p1_violations),
        ] {
            r.counters.push((format!("exo/{name}"), v));
        }
        r
    }
}
