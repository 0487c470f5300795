//! The ExoPlane device program (specs/exoplane.md §5.3, §5.6 step M) for
//! the `smartnic` profile: the full-state instance of every app with tail
//! traffic, behind the shim.
//!
//! Per packet from the switch (port [`DeviceConfig::switch_port`]):
//!
//! 1. Expect a TO_DEV shim; pop it and dispatch on `app_id`.
//! 2. Popularity: each of the app's four count-min rows adds 1 at
//!    `hash_j(UK)` in the current bank (read from the one-entry
//!    `cms_bank` table the daemon flips every `T_win`); `m` = the minimum
//!    of the new values. Every row grows by exactly one, so `m` passes
//!    `θ` exactly once per window: at `m == θ` a REPORT digest goes to the
//!    daemon.
//! 3. Run the app as if the packet had arrived on the switch port the shim
//!    names (apps name switch ports). A punt to its control plane is a
//!    MISS: the frame goes to the CPU behind a PUNT shim (queued for the
//!    daemon, [`ExoDevice::misses`]). A drop drops. Otherwise the shim goes
//!    back on as FROM_DEV with `out_port` = the app's egress port, out
//!    toward the switch.
//!
//! A MERGE from the CPU folds a delta into a register as on the switch.
//! The apps' digests and aging notices are queued for the daemon
//! ([`ExoDevice::app_events`]) rather than handled by the app's own control
//! plane: a write to this copy alone would break strong consistency.
//! [our choice] The daemon (flipping banks, handling MISSes and REPORTs)
//! is another component: this program keeps MISSes and REPORTs in bounded
//! queues for it, and takes entry writes by control message
//! ([`crate::manual`]) until the daemon writes them.

mod daemon_glue;

use std::collections::VecDeque;

use inca_switch::composite::{BlockDigest, CompositeMeta};
use inca_switch::hash::HashAlgorithm;
use inca_switch::objects::ObjectId;
use inca_switch::{
    AccessError, ArrayDecl, CheckHints, Composite, ControlEvent, ControlPlane, DataPlane, Declare,
    DeclareError, Destination, Gress, Handle, MatchKind, MatchSpec, PacketCtx, PacketKind,
    PacketOutDest, ParseError, PortId, Program, ProgramReport, RegisterHandle, TableDecl,
    TableHandle,
};
use inca_wire::exoplane::{shim, ShimRepr, ShimType};

use crate::app::AppSpec;
use crate::manual;
use crate::step_m::{self, Merged};
use crate::switch::config::ConfigError;
pub use daemon_glue::{DaemonSetup, BANK_TIMER, DAEMON_TIMER};

/// Count-min rows per app (§3.3).
pub const CMS_ROWS: usize = 4;
/// Counters per row and bank (§3.3: 65,536).
pub const CMS_WIDTH: usize = 65_536;
/// Report threshold `θ_p` in packets per window (§3.3).
pub const THETA: u32 = 64;
/// Punt reason: a MERGE_ACK for the daemon.
pub const REASON_MERGE_ACK: u16 = 2;
/// App punts (MISSes) arrive as `MISS_REASON_BASE + composite code`.
pub const MISS_REASON_BASE: u16 = 16;
/// Bound of the MISS and REPORT queues kept for the daemon [our choice].
pub const QUEUE: usize = 4096;

/// The device program's configuration.
#[derive(Debug, Clone)]
pub struct DeviceConfig {
    /// The apps with tail traffic, their instances sized for the full
    /// population of their shards ×2 (primary and replica roles).
    pub apps: Vec<AppSpec>,
    /// Counters per count-min row and bank (a power of two).
    pub cms_width: usize,
    /// Report threshold.
    pub theta: u32,
    /// The port facing the switch.
    pub switch_port: PortId,
}

impl DeviceConfig {
    /// The spec's sketch and threshold, the switch on port 0.
    pub fn new(apps: Vec<AppSpec>) -> Self {
        DeviceConfig {
            apps,
            cms_width: CMS_WIDTH,
            theta: THETA,
            switch_port: 0,
        }
    }
}

/// A popular flow: the REPORT digest of §4.5.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// The app.
    pub app_id: u8,
    /// The flow's union key.
    pub uk: Vec<u8>,
    /// Its count-min estimate (θ when reported).
    pub estimate: u32,
    /// The bank it was counted in.
    pub bank: u8,
    /// When the data plane counted it to θ: the daemon rates the flow from
    /// this, not from when its control plane got to the digest (a busy
    /// control plane would make every late report look slow).
    pub at: inca_switch::device::Nanos,
}

/// A MISS for the daemon: the app, the reason its program gave, and the
/// frame behind a PUNT shim (§4.5).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Miss {
    /// The app.
    pub app_id: u8,
    /// The app program's own punt reason.
    pub reason: u16,
    /// PUNT shim + the original frame.
    pub frame: Vec<u8>,
}

/// An app's control event on a device, for the daemon (whose control
/// logic turns it into writes through the hub).
#[derive(Debug, Clone)]
pub enum AppEvent {
    /// A digest the app sent (tagged with its block) that the runtime
    /// cannot carry to the app's control logic.
    Digest(BlockDigest),
    /// A control event of a served packet ([`crate::runtime::event`]):
    /// the daemon runs the app's control logic on it, as it would on an
    /// event the hub forwards from the switch.
    Raised {
        /// The app.
        app_id: u8,
        /// The event frame.
        frame: Vec<u8>,
    },
    /// An entry of one of the app's tables went idle.
    IdleTimeout {
        /// The table.
        table: ObjectId,
        /// The entry.
        spec: MatchSpec,
    },
}

/// Digests of the device program.
#[derive(Debug, Clone)]
pub enum DeviceDigest {
    /// A flow reached θ.
    Report(Report),
    /// An app's digest, for its own control handler.
    App(BlockDigest),
    /// An app's digest as an event frame for the daemon
    /// ([`crate::runtime::event`]): (app, frame).
    Event(u8, Vec<u8>),
}

/// What the device program counts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeviceCounters {
    /// TO_DEV packets served (the app ran).
    pub served: u64,
    /// FROM_DEV packets sent back to the switch.
    pub from_dev: u64,
    /// Served packets that had the FAILOVER flag.
    pub failover: u64,
    /// MISSes punted.
    pub misses: u64,
    /// Packets the app dropped.
    pub app_drops: u64,
    /// REPORTs raised.
    pub reports: u64,
    /// Frames without a TO_DEV shim, or for an app not here.
    pub refused: u64,
    /// MERGEs applied / refused.
    pub merges: u64,
    /// MERGEs refused.
    pub merge_refused: u64,
    /// An app digest and a REPORT in one pass (the app's wins).
    pub digest_collisions: u64,
    /// App digests raised as control events for the daemon.
    pub events: u64,
    /// Queue entries dropped because a queue was full.
    pub queue_overflow: u64,
    /// Entry writes refused.
    pub write_refused: u64,
}

#[derive(Debug, Clone)]
struct Sketch {
    rows: Vec<(Handle, RegisterHandle<u32>)>,
}

/// Per-packet metadata.
#[derive(Clone, Default)]
pub struct DeviceMeta {
    apps: CompositeMeta,
    shim: Option<(usize, ShimRepr)>,
}

/// The ExoPlane device program. See the module documentation.
#[derive(Clone)]
pub struct ExoDevice {
    cfg: DeviceConfig,
    apps: Composite,
    bank: Option<TableHandle<u8>>,
    /// Each app's union key fields, computed once.
    uk_fields: Vec<Vec<crate::app::KeyField>>,
    /// The bank the control plane last installed.
    current_bank: u8,
    sketches: Vec<Sketch>,
    objects: Vec<Vec<(u16, ObjectId)>>,
    counters: DeviceCounters,
    /// MISSes for the daemon, oldest first.
    pub misses: VecDeque<Miss>,
    /// REPORTs for the daemon, oldest first.
    pub reports: VecDeque<Report>,
    /// The apps' digests and aging notices, for the daemon.
    pub app_events: VecDeque<AppEvent>,
    /// MERGE_ACK bodies for the daemon.
    pub merge_acks: VecDeque<(u8, inca_wire::exoplane::MergeRepr)>,
    /// The daemon, when this device runs one ([`ExoDevice::with_daemon`]).
    daemon: daemon_glue::DaemonSlot,
}

fn push_bounded<T>(q: &mut VecDeque<T>, v: T, overflow: &mut u64) {
    if q.len() >= QUEUE {
        *overflow += 1;
    } else {
        q.push_back(v);
    }
}

impl ExoDevice {
    /// The program for `cfg`.
    pub fn new(cfg: DeviceConfig) -> Result<Self, ConfigError> {
        for (i, a) in cfg.apps.iter().enumerate() {
            a.validate()?;
            if cfg.apps[..i]
                .iter()
                .any(|b| b.id == a.id || b.name == a.name)
            {
                return Err(ConfigError::DuplicateApp(a.name.clone()));
            }
        }
        if cfg.apps.is_empty() || !cfg.cms_width.is_power_of_two() || cfg.cms_width > 1 << 24 {
            return Err(ConfigError::Invalid(format!(
                "a device needs at least one app and a power-of-two cms_width up to 2^24 (got {} apps, width {})",
                cfg.apps.len(),
                cfg.cms_width
            )));
        }
        let blocks = cfg.apps.iter().map(AppSpec::block).collect();
        let apps = Composite::selected("exoplane-device-apps", blocks)
            .map_err(|e| ConfigError::Invalid(e.to_string()))?;
        Ok(ExoDevice {
            objects: vec![Vec::new(); cfg.apps.len()],
            uk_fields: cfg.apps.iter().map(AppSpec::union_fields).collect(),
            cfg,
            apps,
            bank: None,
            current_bank: 0,
            sketches: Vec::new(),
            counters: DeviceCounters::default(),
            misses: VecDeque::new(),
            reports: VecDeque::new(),
            app_events: VecDeque::new(),
            merge_acks: VecDeque::new(),
            daemon: daemon_glue::DaemonSlot::default(),
        })
    }

    /// What the program counted.
    pub fn counters(&self) -> &DeviceCounters {
        &self.counters
    }

    /// The apps' composite.
    pub fn apps(&self) -> &Composite {
        &self.apps
    }

    fn app_index(&self, app_id: u8) -> Option<usize> {
        self.cfg.apps.iter().position(|a| a.id.0 == app_id)
    }

    /// Writes (value Some) or deletes entry `key` of table `obj` of app
    /// `app_id` (the WRITE_APPLY path). False if refused.
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

    /// [`ExoDevice::entry_write`], returning the control request id.
    pub(crate) fn entry_request(
        &mut self,
        cp: &mut ControlPlane<'_>,
        app_id: u8,
        obj: u16,
        key: &[u8],
        value: Option<&[u8]>,
    ) -> Option<u64> {
        let i = self.app_index(app_id)?;
        let objects = &self.objects[i];
        let spec = &self.cfg.apps[i];
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

    /// Sends a MISS back into the pipeline as the TO_DEV it was (the
    /// daemon, once the flow's writes are acknowledged, §5.4): it is served
    /// against the new entries. False if the frame carries no PUNT shim.
    pub fn reinject(&mut self, cp: &mut ControlPlane<'_>, miss: Miss) -> bool {
        let mut frame = miss.frame;
        let Ok(Some((at, s))) = shim::shim_of(&frame) else {
            return false;
        };
        if s.shim_type != ShimType::Punt {
            return false;
        }
        let to_dev = ShimRepr {
            shim_type: ShimType::ToDev,
            out_port: 0,
            ..s
        };
        frame[at..at + shim::SHIM_LEN].copy_from_slice(&to_dev.to_bytes());
        cp.packet_out(frame, PacketOutDest::Ingress(self.cfg.switch_port));
        true
    }

    /// Starts a new popularity window (the daemon's `T_win` tick, §5.5):
    /// the sketch switches to the other bank and the bank just left is
    /// zeroed for the window after, row by row at 1 µs per counter (the
    /// spec's register batch cost, §2.1, [our choice] there). Returns the
    /// new bank and, with a sketch, the request of a one-entry read issued
    /// right behind the switch-over: its answer says when the data plane
    /// began counting in the new bank (operations run in issue order),
    /// before the clears that follow it occupy the control channel.
    pub fn flip_bank(&mut self, cp: &mut ControlPlane<'_>) -> (u8, Option<u64>) {
        let old = self.current_bank;
        self.current_bank ^= 1;
        let mut probe = None;
        if let Some(b) = self.bank {
            cp.table_modify(b, MatchSpec::Exact(vec![0].into()), self.current_bank);
            let row = self.sketches.first().and_then(|s| s.rows.first());
            probe = row.map(|&(_, reg)| cp.register_read(reg, 0, 1));
        }
        let w = self.cfg.cms_width as u64;
        for s in &self.sketches {
            for &(_, reg) in &s.rows {
                cp.register_clear_range_timed(reg, u64::from(old) * w, w, w * 1_000);
            }
        }
        (self.current_bank, probe)
    }

    /// Step 2: count the flow; true when it just reached θ.
    fn popularity(
        &mut self,
        dp: &mut DataPlane<'_>,
        app: usize,
        uk: &[u8],
    ) -> Result<Option<(u32, u8)>, AccessError> {
        let Some(bank_t) = self.bank else {
            return Ok(None);
        };
        let bank = dp.lookup(bank_t, &[0])?.unwrap_or(0) & 1;
        let w = self.cfg.cms_width as u64;
        let mut m = u32::MAX;
        for &(h, reg) in &self.sketches[app].rows {
            let i = u64::from(bank) * w + (dp.hash(h, uk)? & (w - 1));
            let v = dp.register(reg, i, |v| {
                *v = v.saturating_add(1);
                *v
            })?;
            m = m.min(v);
        }
        Ok((m == self.cfg.theta).then_some((m, bank)))
    }

    fn serve(
        &mut self,
        pkt: &mut PacketCtx<DeviceMeta, DeviceDigest>,
        dp: &mut DataPlane<'_>,
        s: ShimRepr,
        count: bool,
    ) -> Result<(), AccessError> {
        pkt.drop_packet();
        let Some(app) = self.app_index(s.app_id) else {
            self.counters.refused += 1;
            return Ok(());
        };
        // Pop the shim: the app sees the frame as the switch got it.
        let popped = shim::pop_in_place(pkt.header_mut())
            .ok()
            .is_some_and(|(_, at)| pkt.remove_header(at, shim::SHIM_LEN));
        if !popped {
            self.counters.refused += 1;
            return Ok(());
        }
        let parsed = inca_apps::headers::parse(pkt.header()).unwrap_or_default();
        let uk = crate::app::key_of(&self.uk_fields[app], &parsed, pkt.header());
        let report = if count {
            self.popularity(dp, app, &uk.0)?
        } else {
            None
        };
        let mut m = std::mem::take(&mut pkt.meta.apps);
        if self.apps.select(&mut m, app as u16, pkt.header()).is_err() {
            self.counters.refused += 1;
            pkt.meta.apps = m;
            return Ok(());
        }
        self.counters.served += 1;
        self.counters.failover += u64::from(s.failover);
        let apps = &mut self.apps;
        let at = dp.now();
        let (r, digest) = pkt.nest(&mut m, Some(s.in_port), |inner| apps.ingress(inner, dp));
        pkt.meta.apps = m;
        if let Some((estimate, bank)) = report {
            self.counters.reports += 1;
            pkt.digest(DeviceDigest::Report(Report {
                app_id: s.app_id,
                uk: uk.0,
                estimate,
                bank,
                at,
            }));
            self.counters.digest_collisions += u64::from(digest.is_some());
        }
        if let Some(d) = digest {
            // The app's control logic is the daemon's: the digest goes to
            // it with the packet that raised it (as an event the hub
            // forwards from the switch would).
            let spec = &self.cfg.apps[app];
            let event = spec.program.digest_bytes(&d).and_then(|b| {
                let kind = crate::runtime::event::EventKind::Digest(b);
                crate::runtime::event::encode(s.app_id, s.ldev, s.in_port, pkt.header(), &kind)
            });
            match event {
                Some(f) => {
                    self.counters.events += 1;
                    pkt.digest(DeviceDigest::Event(s.app_id, f));
                }
                None => pkt.digest(DeviceDigest::App(d)),
            }
        }
        r?;
        let back = |shim_type, out_port| ShimRepr {
            shim_type,
            out_port,
            ..s
        };
        match pkt.destination() {
            Destination::Port(p) => {
                if push(pkt, back(ShimType::FromDev, p)) {
                    self.counters.from_dev += 1;
                    pkt.forward(self.cfg.switch_port);
                } else {
                    pkt.drop_packet();
                }
            }
            // The PUNT shim carries the app's own punt reason in
            // `out_port` [our choice], for the daemon's control logic.
            Destination::Cpu(code) => match code.checked_add(MISS_REASON_BASE) {
                Some(c)
                    if push(
                        pkt,
                        back(
                            ShimType::Punt,
                            self.apps.punt_origin(code).map_or(0, |(_, own)| own),
                        ),
                    ) =>
                {
                    self.counters.misses += 1;
                    pkt.to_cpu(c);
                }
                _ => pkt.drop_packet(),
            },
            _ => {
                self.counters.app_drops += 1;
                pkt.drop_packet();
            }
        }
        Ok(())
    }
}

/// Pushes `repr` onto the packet; false if the frame takes no shim.
fn push<M, D>(pkt: &mut PacketCtx<M, D>, repr: ShimRepr) -> bool {
    match shim::push_in_place(pkt.header_mut(), repr) {
        Ok((at, bytes)) => pkt.insert_header(at, &bytes),
        Err(_) => false,
    }
}

impl Program for ExoDevice {
    type Meta = DeviceMeta;
    type Digest = DeviceDigest;

    fn name(&self) -> &str {
        "exoplane-device"
    }

    fn declare(&mut self, d: &mut Declare) -> Result<(), DeclareError> {
        let w = self.cfg.cms_width;
        let bits = w.trailing_zeros() as u8;
        let apps = self.cfg.apps.clone();
        let (bank, sketches) = d.in_block("exo", &[], |d| {
            let bank = d.table::<u8>(TableDecl::new("cms_bank", MatchKind::Exact, 1, 8, 1))?;
            let mut sketches = Vec::new();
            for a in &apps {
                let mut rows = Vec::new();
                for j in 0..CMS_ROWS {
                    let alg =
                        HashAlgorithm::independent_row(j).map_err(|e| DeclareError::Invalid {
                            name: format!("cms_{}_h{j}", a.name),
                            reason: e.to_string(),
                        })?;
                    let h = d.hash(
                        &format!("cms_{}_h{j}", a.name),
                        alg,
                        bits,
                        Gress::Ingress,
                        &[],
                    )?;
                    let r = d.register::<u32>(
                        ArrayDecl::new(&format!("cms_{}_r{j}", a.name), 2 * w)
                            .after(&[bank.id(), h.id()]),
                    )?;
                    rows.push((h, r));
                }
                sketches.push(Sketch { rows });
            }
            Ok((bank, sketches))
        })?;
        let bank_id = bank.id();
        self.apps.declare_after(d, |_| vec![bank_id])?;
        for (i, a) in self.cfg.apps.iter().enumerate() {
            self.objects[i] = a
                .objects
                .iter()
                .filter_map(|o| {
                    d.id_of(&format!("{}/{}", a.name, o.name))
                        .map(|id| (o.id.0, id))
                })
                .collect();
        }
        self.bank = Some(bank);
        self.sketches = sketches;
        Ok(())
    }

    fn parse(&self, gress: Gress, header: &[u8], meta: &mut DeviceMeta) -> Result<(), ParseError> {
        if gress == Gress::Ingress && meta.apps.app().is_none() {
            meta.shim = shim::shim_of(header).map_err(|_| ParseError("malformed EXO shim"))?;
        }
        self.apps.parse(gress, header, &mut meta.apps)
    }

    fn ingress(
        &mut self,
        pkt: &mut PacketCtx<DeviceMeta, DeviceDigest>,
        dp: &mut DataPlane<'_>,
    ) -> Result<(), AccessError> {
        let Some((at, s)) = pkt.meta.shim else {
            self.counters.refused += 1;
            pkt.drop_packet();
            return Ok(());
        };
        match (s.shim_type, pkt.kind()) {
            (ShimType::ToDev, PacketKind::Normal) if pkt.ingress_port() == self.cfg.switch_port => {
                self.serve(pkt, dp, s, true)
            }
            // A MISS the daemon sends back once its writes are acknowledged
            // (§5.4): served again, not counted again for popularity.
            (ShimType::ToDev, PacketKind::FromCpu) => self.serve(pkt, dp, s, false),
            (ShimType::Merge, PacketKind::FromCpu) => {
                let objects = &self.objects;
                let apps = &self.cfg.apps;
                let object_of = |app_id: u8, obj: u16| {
                    let i = apps.iter().position(|a| a.id.0 == app_id)?;
                    objects[i]
                        .iter()
                        .find(|(o, _)| *o == obj)
                        .map(|(_, id)| *id)
                };
                match step_m::merge(pkt, dp, at, s, REASON_MERGE_ACK, object_of)? {
                    Merged::Applied => self.counters.merges += 1,
                    Merged::Refused => self.counters.merge_refused += 1,
                }
                Ok(())
            }
            _ => {
                self.counters.refused += 1;
                pkt.drop_packet();
                Ok(())
            }
        }
    }

    fn egress(
        &mut self,
        pkt: &mut PacketCtx<DeviceMeta, DeviceDigest>,
        dp: &mut DataPlane<'_>,
    ) -> Result<(), AccessError> {
        crate::nested::apps_egress(&mut self.apps, pkt, dp, |m| &mut m.apps, DeviceDigest::App)
    }

    fn control(&mut self, event: ControlEvent<DeviceDigest>, cp: &mut ControlPlane<'_>) {
        self.control_event(event, cp);
        self.daemon_pump(cp);
    }

    /// TO_DEV samples for every app, so the check reaches the sketch and
    /// the apps.
    fn check_hints(&self) -> CheckHints {
        self.hints()
    }

    fn report(&self) -> ProgramReport {
        let mut r = self.report_counters();
        if let Some(run) = self.daemon.run.as_deref() {
            daemon_glue::report(run, &mut r.counters);
        }
        r
    }
}

impl ExoDevice {
    fn control_event(&mut self, event: ControlEvent<DeviceDigest>, cp: &mut ControlPlane<'_>) {
        let event = match event.split_digest::<BlockDigest>() {
            Ok(e) => e,
            // The app's control logic is the daemon's (§5.4): its writes go
            // through the hub to every holder, never straight to this copy.
            Err(DeviceDigest::App(d)) => {
                return push_bounded(
                    &mut self.app_events,
                    AppEvent::Digest(d),
                    &mut self.counters.queue_overflow,
                );
            }
            Err(DeviceDigest::Event(app_id, frame)) => {
                return push_bounded(
                    &mut self.app_events,
                    AppEvent::Raised { app_id, frame },
                    &mut self.counters.queue_overflow,
                );
            }
            Err(DeviceDigest::Report(r)) => {
                return push_bounded(&mut self.reports, r, &mut self.counters.queue_overflow);
            }
        };
        let Some(event) = self.daemon_event(event, cp) else {
            return;
        };
        match event {
            ControlEvent::Start => {
                self.current_bank = 0;
                if let Some(b) = self.bank {
                    cp.table_add(b, MatchSpec::Exact(vec![0].into()), 0);
                }
                self.apps.control(ControlEvent::Start, cp);
                self.daemon_start(cp);
            }
            ControlEvent::PacketIn { reason, frame, .. } if reason == REASON_MERGE_ACK => {
                if let Some(m) = step_m::body_of(&frame) {
                    push_bounded(&mut self.merge_acks, m, &mut self.counters.queue_overflow);
                }
            }
            ControlEvent::PacketIn { reason, frame, .. } if reason >= MISS_REASON_BASE => {
                let app_id = shim::shim_of(&frame)
                    .ok()
                    .flatten()
                    .map_or(0, |(_, s)| s.app_id);
                let miss = Miss {
                    app_id,
                    reason: reason - MISS_REASON_BASE,
                    frame,
                };
                push_bounded(&mut self.misses, miss, &mut self.counters.queue_overflow);
            }
            ControlEvent::Message(m) if m.kind == manual::MSG_MERGE => {
                let ok = manual::parse_merge(&m.body)
                    .and_then(|(app, body)| crate::runtime::inject_merge(cp, app, &body));
                self.counters.write_refused += u64::from(ok.is_none());
            }
            ControlEvent::Message(m) if m.kind == manual::MSG_REINJECT => {
                while let Some(miss) = self.misses.pop_front() {
                    let ok = self.reinject(cp, miss);
                    self.counters.write_refused += u64::from(!ok);
                }
            }
            ControlEvent::Message(m) if m.kind == manual::MSG_BANK => {
                let _ = self.flip_bank(cp);
            }
            ControlEvent::Message(m) if m.kind == manual::MSG_WRITE => {
                let ok = manual::parse_write(&m.body).is_some_and(|w| {
                    self.entry_write(cp, w.app, w.obj, &w.key, w.value.as_deref())
                });
                self.counters.write_refused += u64::from(!ok);
            }
            ControlEvent::IdleTimeout { table, spec } => push_bounded(
                &mut self.app_events,
                AppEvent::IdleTimeout { table, spec },
                &mut self.counters.queue_overflow,
            ),
            e => self.apps.control(e, cp),
        }
    }

    fn hints(&self) -> CheckHints {
        let mut h = self.apps.check_hints();
        for a in &self.cfg.apps {
            for (failover, in_port) in [(false, 0), (true, 1)] {
                let s = ShimRepr {
                    shim_type: ShimType::ToDev,
                    failover,
                    app_id: a.id.0,
                    ldev: 0,
                    in_port,
                    out_port: 0,
                    next_type: 0,
                };
                if let Some(f) = step_m::sample(s) {
                    h.samples.push((self.cfg.switch_port, f));
                }
            }
        }
        h
    }

    fn report_counters(&self) -> ProgramReport {
        let mut r = self.apps.report();
        let c = &self.counters;
        for (name, v) in [
            ("served", c.served),
            ("from_dev", c.from_dev),
            ("failover", c.failover),
            ("misses", c.misses),
            ("app_drops", c.app_drops),
            ("reports", c.reports),
            ("refused", c.refused),
            ("merges", c.merges),
            ("merge_refused", c.merge_refused),
            ("digest_collisions", c.digest_collisions),
            ("events", c.events),
            ("queue_overflow", c.queue_overflow),
            ("write_refused", c.write_refused),
        ] {
            r.counters.push((format!("exo/{name}"), v));
        }
        r
    }
}
