//! The TEA data plane as a switch [`Program`] (spec §5.1, §5.2, §5.10):
//! parser extension, LookupHandler, ServerResolver with flow control,
//! MemResolver and the PRE replication in ingress, the LookupRequestor and
//! the PSN-resync marker in egress. Every register array is touched at most
//! once per pass (the switch model enforces it); tables are only read here.
//!
//! The control plane (`cp.rs`) shares the [`TeaSwitch`] value: the program
//! trait gives one object both roles, as a P4 program and its driver ship
//! together.

use std::net::Ipv4Addr;
use std::sync::Arc;

use inca_apps::core::sketch::{self, RowHashes};
use inca_apps::headers::{self, Parsed};
use inca_switch::hash::HashAlgorithm;
use inca_switch::meter::{Color, Meter, MeterConfig};
use inca_switch::objects::Objects;
use inca_switch::register::Pair;
use inca_switch::{
    AccessError, ArrayDecl, ControlEvent, ControlPlane, DataPlane, Declare, DeclareError, Gress,
    Handle, MatchKind, MatchSpec, Nanos, PacketCtx, PacketKind, ParseError, PortId, Program,
    ProgramReport, RegisterHandle, TableDecl, TableHandle,
};
use inca_wire::MacAddr;

use super::config::{TeaConfig, RESPONSE_HEADERS, SHIM_BYTES};
use super::cp::ControlState;
use super::nf_api::{DropReason, LookupMd, TeaNf, Verdict, DROP_REASONS};
use super::observer::{CheckVerdict, CommitRecord, LookupPath, LookupRecord, Observer};
use super::report::ReplicaSeries;
use super::wire::{
    port_down_port, psn_newer, RdmaIn, Request, Shim, TeaDigest, AGENT_PORT, OP_ACK,
    OP_READ_REQUEST, OP_READ_RESPONSE_ONLY, OP_WRITE_ONLY, SHIM_REDO, SHIM_REPLICA, SHIM_TRAILER,
};
use crate::table::layout::Layout;

/// Punt reason: an agent-protocol datagram for the control plane.
pub const REASON_AGENT: u16 = 0x7E01;
/// Punt reason: the NF asked for its slow path (frame carries a 4-byte CPU
/// header `orig_port u16 | nf_reason u16`).
pub const REASON_NF: u16 = 0x7E02;
/// Bytes of the CPU header in front of an NF punt.
pub const CPU_HEADER: usize = 4;
/// Sketch rows (spec §5.1).
pub const CMS_ROWS: usize = 4;
/// Sketch columns.
pub const CMS_COLS: usize = 65_536;
/// First byte hashed before the key for sketch row r (`r` itself).
pub const CMS_SEED: u8 = 0;
/// First byte hashed before the key for Bloom-filter array j (`0x10 + j`).
pub const BF_SEED: u8 = 0x10;
/// The sketch's row hashes (spec §5.1 step 2): CRC-32 of `[r] ‖ key`.
pub const CMS_HASHES: RowHashes = RowHashes::Seeded { first: CMS_SEED };
/// The report filter's hashes (step 4): CRC-32 of `[0x10 + j] ‖ key`.
pub const BF_HASHES: RowHashes = RowHashes::Seeded { first: BF_SEED };
/// Digest de-duplication Bloom filter: arrays and bits per array.
pub const BF_ARRAYS: usize = 2;
/// Bits per Bloom-filter array (2^18).
pub const BF_BITS: usize = 262_144;

/// A cache entry's action data: the value and its hit-counter slot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheEntry {
    /// The value.
    pub value: Box<[u8]>,
    /// Index into the cache hit counter.
    pub slot: u16,
}

/// A `range_tbl` entry (spec §3.1): the range and its replicas' ports and
/// first QP indexes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RangeEntry {
    /// Range id.
    pub range: u16,
    /// Primary server's switch port.
    pub port_p: PortId,
    /// Primary QP base.
    pub qp_p: u16,
    /// Secondary's port and QP base (R = 2).
    pub secondary: Option<(PortId, u16)>,
}

/// A `mem_tbl` entry: where range r lives on one replica.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemEntry {
    /// Region base address.
    pub base_va: u64,
    /// First bucket of the range.
    pub lo: u32,
    /// Region R_Key.
    pub rkey: u32,
}

/// A `qp_tbl` entry: everything egress needs to address a QP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QpEntry {
    /// Server MAC.
    pub mac: MacAddr,
    /// Server IP.
    pub ip: Ipv4Addr,
    /// Server QPN.
    pub qpn: u32,
    /// UDP source port.
    pub sport: u16,
    /// Egress port.
    pub port: PortId,
    /// Multicast group of 2 replicas to that port.
    pub group: u16,
}

/// What a packet is, as the parser extension classifies it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Class {
    /// NF traffic (or anything not addressed to the switch).
    #[default]
    Normal,
    /// An RDMA packet addressed to the switch's RDMA identity.
    Rdma,
    /// An agent-protocol datagram addressed to the switch.
    Agent,
    /// A packet-generator port-down packet.
    PortDown,
    /// A TEA lookup on its way to egress (bridged header set).
    Request,
    /// A PSN resync marker on its way to the server's egress.
    Resync,
}

/// Bridged metadata of a lookup (spec §5.1 step 7).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Bridge {
    /// QP index.
    pub qp: u16,
    /// Row VA.
    pub va: u64,
    /// R_Key.
    pub rkey: u32,
    /// Ingress timestamp, ns mod 2^32.
    pub ts: u32,
    /// Original ingress port.
    pub orig_port: PortId,
    /// Replica used.
    pub replica: u8,
    /// Server MAC.
    pub mac: MacAddr,
    /// Server IP.
    pub ip: [u8; 4],
    /// Server QPN.
    pub qpn: u32,
    /// UDP source port.
    pub sport: u16,
    /// Resync: the new PSN.
    pub new_psn: u32,
    /// The lookup is a redo (sets [`SHIM_REDO`]).
    pub redo: bool,
}

/// Per-packet metadata of the TEA program.
#[derive(Debug, Clone, Copy, Default)]
pub struct TeaMeta {
    /// Classification.
    pub class: Class,
    /// The NF's headers: of the frame, or on a response of the parked frame
    /// (offsets relative to the parked frame's start).
    pub parsed: Parsed,
    /// RoCE fields of an RDMA packet.
    pub rdma: RdmaIn,
    /// Bridged lookup state.
    pub bridge: Bridge,
    /// Set on a restored frame recirculated to redo its lookup: the port it
    /// first arrived on (the recirculation pass sees the recirculation
    /// port).
    pub redo_port: Option<PortId>,
}

/// Handles of the declared objects.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Handles {
    pub stash: TableHandle<Box<[u8]>>,
    pub cache: TableHandle<CacheEntry>,
    pub cache_hits: RegisterHandle<u32>,
    pub cms: [RegisterHandle<u16>; CMS_ROWS],
    pub cms_hash: [Handle; CMS_ROWS],
    pub bf: [RegisterHandle<u8>; BF_ARRAYS],
    pub bf_hash: [Handle; BF_ARRAYS],
    pub bucket_hash: Handle,
    pub range_tbl: TableHandle<RangeEntry>,
    pub port_up_a: RegisterHandle<u8>,
    pub port_up_b: RegisterHandle<u8>,
    pub qp_ok_a: RegisterHandle<u8>,
    pub qp_ok_b: RegisterHandle<u8>,
    pub active_replica: RegisterHandle<u8>,
    pub outstanding: RegisterHandle<Pair>,
    pub mem_tbl: TableHandle<MemEntry>,
    pub qp_tbl: TableHandle<QpEntry>,
    pub rsp_qp_tbl: TableHandle<u16>,
    pub last_rsp_psn: RegisterHandle<u32>,
    pub next_psn: RegisterHandle<u32>,
    pub drops: Handle,
    pub qp_req: Handle,
    pub qp_rsp: Handle,
    /// A one-entry register the control plane reads as a completion barrier
    /// (the operation channel is FIFO).
    pub barrier: RegisterHandle<u8>,
}

/// The per-port trTCM meters, read as a traffic-manager status signal
/// (spec §5.7 [our choice]): marked with the offered bytes of every packet
/// ingress sends toward a server port, colour readable for any port
/// without a register access.
///
/// [our choice] The colour read is that of the port's latest packet
/// re-marked at the reading time on a copy of the meter (no tokens taken).
/// A port that stops receiving traffic — typically because lookups failed
/// over away from it — thus recovers once its buckets refill, instead of
/// staying RED until the next packet toward it.
#[derive(Debug, Clone)]
pub(crate) struct PortMeters {
    meters: Vec<Option<Meter>>,
    /// Bytes of the latest packet marked per port (0: none yet).
    last_bytes: Vec<u64>,
}

impl PortMeters {
    fn new(cfg: &TeaConfig) -> Self {
        let ports = cfg
            .servers
            .iter()
            .map(|s| usize::from(s.port) + 1)
            .max()
            .unwrap_or(0);
        let bytes = cfg.server_link_bps / 8;
        let mc = MeterConfig {
            cir: bytes / 10 * 9,
            cbs: 128 * 1024,
            pir: bytes,
            pbs: 128 * 1024,
        };
        let mut meters = vec![None; ports];
        for s in &cfg.servers {
            meters[usize::from(s.port)] = Meter::new(mc, 0).ok();
        }
        PortMeters {
            meters,
            last_bytes: vec![0; ports],
        }
    }

    fn mark(&mut self, port: PortId, now: Nanos, bytes: u64) -> Color {
        let p = usize::from(port);
        match self.meters.get_mut(p) {
            Some(Some(m)) => {
                self.last_bytes[p] = bytes;
                m.mark(now, bytes, None)
            }
            _ => Color::Green,
        }
    }

    /// The port's colour at `now` (Green for a port without a meter).
    pub(crate) fn color(&self, port: PortId, now: Nanos) -> Color {
        let p = usize::from(port);
        match (self.meters.get(p), self.last_bytes.get(p)) {
            (Some(Some(m)), Some(&b)) if b > 0 => m.clone().mark(now, b, None),
            _ => Color::Green,
        }
    }
}

/// Software counters of the data plane, for tests and reports (the
/// data-plane counters proper are `drops`, `qp_req`, `qp_rsp`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DpStats {
    /// SRAM hits (stash or cache).
    pub sram_hits: u64,
    /// Cache hits.
    pub cache_hits: u64,
    /// DRAM lookups issued (WRITE+READ pairs).
    pub dram_lookups: u64,
    /// Responses matched to a lookup.
    pub responses: u64,
    /// Remote misses.
    pub remote_misses: u64,
    /// Drops by reason.
    pub drops: [u64; DROP_REASONS],
    /// NAKs seen.
    pub naks: u64,
    /// Hot-key digests sent.
    pub hot_digests: u64,
    /// Times a range's active replica changed (overload or failure).
    pub failovers: u64,
    /// READ responses discarded because they came `T_GRACE` or more after
    /// their lookup's SRAM check.
    pub late_responses: u64,
    /// Of those, lookups redone from the SRAM check (the rest dropped).
    pub redone: u64,
}

/// The TEA switch program over network function `N`.
#[derive(Clone)]
pub struct TeaSwitch<N: TeaNf> {
    pub(crate) cfg: TeaConfig,
    pub(crate) geo: Layout,
    pub(crate) nf: N,
    pub(crate) h: Option<Handles>,
    pub(crate) meters: PortMeters,
    pub(crate) cp: ControlState,
    /// Shared across clones, like the log it usually writes to.
    pub(crate) observer: Option<Arc<dyn Observer>>,
    pub(crate) stats: DpStats,
    pub(crate) series: ReplicaSeries,
    name: String,
}

impl<N: TeaNf> TeaSwitch<N> {
    /// A TEA switch running `nf` with `cfg` (key and value widths are taken
    /// from the NF). Fails on a configuration spec §5.9 rejects.
    pub fn new(nf: N, mut cfg: TeaConfig) -> Result<Self, String> {
        cfg.key_len = nf.key_len();
        cfg.value_len = nf.value_len();
        cfg.validate(nf.header_depth())?;
        let geo = cfg.layout()?;
        Ok(TeaSwitch {
            name: format!("tea_{}", nf.name()),
            meters: PortMeters::new(&cfg),
            cp: ControlState::new(&cfg),
            geo,
            cfg,
            nf,
            h: None,
            observer: None,
            stats: DpStats::default(),
            series: ReplicaSeries::default(),
        })
    }

    /// Reports every lookup result and completed operation to `observer`.
    /// Checked mode ([`TeaSwitch::checked`]) is an observer that judges
    /// each lookup against that history.
    pub fn with_observer(mut self, observer: impl Observer + 'static) -> Self {
        self.observer = Some(Arc::new(observer));
        self
    }

    /// The observer's verdict for the report, if it judges.
    pub(crate) fn check_verdict(&self) -> Option<CheckVerdict> {
        // The operation still running when the report is made has shown
        // its value (its stash entry) without committing: it overlaps every
        // later lookup.
        let in_flight = self
            .cp
            .exec
            .running
            .as_ref()
            .filter(|r| r.commits)
            .map(|r| CommitRecord {
                at: Nanos::MAX,
                started: r.started,
                key: r.plan.key.clone(),
                value: r.result.clone(),
            });
        self.observer.as_ref()?.verdict(in_flight, self.cfg.t_grace)
    }

    /// The configuration.
    pub fn config(&self) -> &TeaConfig {
        &self.cfg
    }

    /// The table layout.
    pub fn layout(&self) -> Layout {
        self.geo
    }

    /// The NF.
    pub fn nf(&self) -> &N {
        &self.nf
    }

    /// Data-plane software counters.
    pub fn dp_stats(&self) -> &DpStats {
        &self.stats
    }

    /// The `outstanding` register handle (tests read it with
    /// `Objects::register_peek`).
    pub fn outstanding_handle(&self) -> Option<RegisterHandle<Pair>> {
        self.h.map(|h| h.outstanding)
    }

    /// The data-plane stash entries (key, value), in key order.
    pub fn stash_entries(&self, o: &Objects) -> Vec<(Vec<u8>, Vec<u8>)> {
        let Some(t) = self.h.and_then(|h| o.table(h.stash)) else {
            return Vec::new();
        };
        let mut v: Vec<_> = t
            .entries()
            .filter_map(|(s, a)| match s {
                MatchSpec::Exact(k) => Some((k.to_vec(), a.to_vec())),
                _ => None,
            })
            .collect();
        v.sort();
        v
    }

    /// The data-plane cache entries (key, value), in key order.
    pub fn cache_entries(&self, o: &Objects) -> Vec<(Vec<u8>, Vec<u8>)> {
        let Some(t) = self.h.and_then(|h| o.table(h.cache)) else {
            return Vec::new();
        };
        let mut v: Vec<_> = t
            .entries()
            .filter_map(|(s, a)| match s {
                MatchSpec::Exact(k) => Some((k.to_vec(), a.value.to_vec())),
                _ => None,
            })
            .collect();
        v.sort();
        v
    }

    /// Spec §6 item 12 (call when no operation is pending): every stash and
    /// cache entry equals the master value, and the cache holds at most its
    /// capacity.
    pub fn check_coherence(&self, o: &Objects) -> Result<(), String> {
        let Some(t) = &self.cp.table else {
            return Ok(());
        };
        let cache = self.cache_entries(o);
        if cache.len() > self.cfg.cache_cap {
            return Err(format!(
                "cache holds {} > {}",
                cache.len(),
                self.cfg.cache_cap
            ));
        }
        for (k, v) in self.stash_entries(o).iter().chain(&cache) {
            if t.get(k) != Some(v.as_slice()) {
                return Err(format!(
                    "SRAM entry {k:02x?} = {v:02x?}, master {:02x?}",
                    t.get(k)
                ));
            }
        }
        Ok(())
    }

    /// The sketch estimate of `key` (min over the rows), read without
    /// touching the data plane.
    pub fn sketch_estimate(&self, o: &Objects, key: &[u8]) -> u16 {
        let Some(h) = self.h else {
            return 0;
        };
        let bits = CMS_COLS.trailing_zeros() as u8;
        sketch::min((0..CMS_ROWS).map(|r| {
            let idx = CMS_HASHES.hash(r, bits, key);
            o.register_peek(h.cms[r], idx).unwrap_or(0)
        }))
        .unwrap_or(0)
    }

    /// The active replica of range `r`.
    pub fn active_replica(&self, o: &Objects, r: u16) -> u8 {
        self.h
            .and_then(|h| o.register_peek(h.active_replica, u64::from(r)).ok())
            .unwrap_or(0)
    }

    /// `outstanding[q]` as (count, last response time mod 2^32).
    pub fn outstanding(&self, o: &Objects, q: u16) -> (u32, u32) {
        self.h
            .and_then(|h| o.register_peek(h.outstanding, u64::from(q)).ok())
            .map_or((0, 0), |p| (p.lo, p.hi))
    }

    fn drop_with(
        &mut self,
        pkt: &mut PacketCtx<TeaMeta, TeaDigest>,
        dp: &mut DataPlane<'_>,
        h: &Handles,
        reason: DropReason,
    ) -> Result<(), AccessError> {
        self.stats.drops[reason as usize] += 1;
        dp.count(h.drops, reason as u64, pkt.len() as u64)?;
        pkt.drop_packet();
        Ok(())
    }

    /// Applies an NF verdict; marks the port meter for server-facing ports.
    fn apply(
        &mut self,
        pkt: &mut PacketCtx<TeaMeta, TeaDigest>,
        dp: &mut DataPlane<'_>,
        h: &Handles,
        verdict: Verdict,
        md: &LookupMd,
    ) -> Result<(), AccessError> {
        match verdict {
            Verdict::Forward(port) => {
                self.meters.mark(port, dp.now(), pkt.len() as u64 + 24);
                pkt.forward(port);
                Ok(())
            }
            Verdict::Drop => self.drop_with(pkt, dp, h, DropReason::Nf),
            Verdict::ToCpu(reason) => {
                let mut hdr = [0u8; CPU_HEADER];
                hdr[0..2].copy_from_slice(&md.ingress_port.to_be_bytes());
                hdr[2..4].copy_from_slice(&reason.to_be_bytes());
                pkt.insert_header(0, &hdr);
                pkt.to_cpu(REASON_NF);
                Ok(())
            }
        }
    }

    /// Reports a lookup; the record is only built when someone listens.
    fn observe(&self, r: impl FnOnce() -> LookupRecord) {
        if let Some(o) = &self.observer {
            o.lookup(r());
        }
    }

    /// Ingress of NF traffic (spec §5.1).
    fn ingress_normal(
        &mut self,
        pkt: &mut PacketCtx<TeaMeta, TeaDigest>,
        dp: &mut DataPlane<'_>,
        h: &Handles,
    ) -> Result<(), AccessError> {
        let redo = pkt.meta.redo_port;
        let port = redo.unwrap_or_else(|| pkt.ingress_port());
        let parsed = pkt.meta.parsed;
        let mut md = LookupMd {
            ingress_port: port,
            ..LookupMd::default()
        };
        // [our choice] Ordinary traffic addressed to a DRAM server goes to
        // its port, as the servers' top-of-rack would send it (the servers
        // are hosts too): it shares, and meters, the server's link (spec
        // §5.7; the E5 background). The configured server list acts as a
        // fixed forwarding rule per server, not a TEA table.
        if let Some(s) = self
            .cfg
            .servers
            .iter()
            .find(|s| s.ip.octets() == parsed.dst)
        {
            let v = Verdict::Forward(s.port);
            return self.apply(pkt, dp, h, v, &md);
        }
        let Some(key) = self.nf.key(pkt.header(), &parsed, port) else {
            if let Some((key, value)) = self.nf.learn(&parsed, port) {
                pkt.digest(TeaDigest::Learn { key, value });
            }
            let v = self.nf.on_bypass(pkt.header_mut(), &parsed, &md);
            return self.apply(pkt, dp, h, v, &md);
        };
        if key.len() != self.geo.key_len() {
            return self.drop_with(pkt, dp, h, DropReason::Malformed);
        }
        let now = dp.now();
        // Sketch: one access per row. [our choice] A redo was counted on
        // its first pass: it skips the sketch (est 0: no hot-key report).
        let mut est = if redo.is_some() { 0 } else { u16::MAX };
        for r in 0..CMS_ROWS * usize::from(redo.is_none()) {
            let idx = CMS_HASHES.with_input(r, &key, |input| dp.hash(h.cms_hash[r], input))?;
            est = est.min(dp.register(h.cms[r], idx, sketch::count)?);
        }
        // SRAM match: the stash wins over the cache.
        let stashed = dp.lookup(h.stash, &key)?;
        let cached = if self.cfg.cache_cap > 0 {
            dp.lookup(h.cache, &key)?
        } else {
            None
        };
        let hit = match (stashed, cached) {
            (Some(v), _) => Some(v),
            (None, Some(c)) => {
                dp.register(h.cache_hits, u64::from(c.slot), |n| {
                    *n = n.saturating_add(1)
                })?;
                self.stats.cache_hits += 1;
                Some(c.value)
            }
            (None, None) => None,
        };
        if let Some(value) = hit {
            self.stats.sram_hits += 1;
            md.found = true;
            md.value = value.to_vec();
            self.observe(|| LookupRecord {
                at: now,
                checked_at: now,
                key: key.clone(),
                value: Some(md.value.clone()),
                path: LookupPath::Sram,
                qp: 0,
            });
            let v = self.nf.on_found(pkt.header_mut(), &parsed, &value, &md);
            return self.apply(pkt, dp, h, v, &md);
        }
        // Loop freedom: a packet the CPU re-injected gets no DRAM lookup;
        // a redo gets its one replacement lookup.
        let redo_pass = redo.is_some() && matches!(pkt.kind(), PacketKind::Recirculated { .. });
        if pkt.kind() != PacketKind::Normal && !redo_pass {
            return self.drop_with(pkt, dp, h, DropReason::ReinjectMiss);
        }
        // Hot-key report, de-duplicated by a 2-array Bloom filter.
        if est >= self.cfg.t_hot {
            let mut fresh = false;
            for j in 0..BF_ARRAYS {
                let idx = BF_HASHES.with_input(j, &key, |input| dp.hash(h.bf_hash[j], input))?;
                let was = dp.register(h.bf[j], idx, |b| std::mem::replace(b, 1))?;
                fresh |= was == 0;
            }
            if fresh {
                self.stats.hot_digests += 1;
                let bucket =
                    (dp.hash(h.bucket_hash, &key)? & u64::from(self.geo.bucket_mask())) as u32;
                pkt.digest(TeaDigest::HotKey {
                    key: key.clone(),
                    est,
                    bucket,
                });
            }
        }
        // ServerResolver.
        let bucket = (dp.hash(h.bucket_hash, &key)? & u64::from(self.geo.bucket_mask())) as u32;
        md.bucket = bucket;
        let Some(range) = dp.lookup(h.range_tbl, &bucket.to_be_bytes())? else {
            return self.drop_with(pkt, dp, h, DropReason::NoRoute);
        };
        md.range = range.range;
        let q_off = (bucket & u32::from(self.cfg.qps_per_server - 1)) as u16;
        let qp_p = range.qp_p + q_off;
        let ok_p = dp.register(h.port_up_a, u64::from(range.port_p), |v| *v)? == 1
            && self.meters.color(range.port_p, now) != Color::Red
            && dp.register(h.qp_ok_a, u64::from(qp_p), |v| *v)? == 1;
        let (ok_s, qp_s) = match range.secondary {
            Some((port_s, base_s)) => {
                let qp_s = base_s + q_off;
                let ok = dp.register(h.port_up_b, u64::from(port_s), |v| *v)? == 1
                    && self.meters.color(port_s, now) != Color::Red
                    && dp.register(h.qp_ok_b, u64::from(qp_s), |v| *v)? == 1;
                (ok, qp_s)
            }
            None => (false, 0),
        };
        // One RegisterAction: keep the active replica if usable, else flip.
        let mut flipped = false;
        let replica = dp.register(h.active_replica, u64::from(range.range), |a| {
            let ok = |r: u8| if r == 0 { ok_p } else { ok_s };
            if ok(*a) {
                Some(*a)
            } else if ok(1 - (*a & 1)) {
                *a = 1 - (*a & 1);
                flipped = true;
                Some(*a)
            } else {
                None
            }
        })?;
        self.stats.failovers += u64::from(flipped);
        let Some(replica) = replica else {
            return self.drop_with(pkt, dp, h, DropReason::NoServer);
        };
        let (q, port_q) = match (replica, range.secondary) {
            (0, _) | (_, None) => (qp_p, range.port_p),
            (_, Some((port_s, _))) => (qp_s, port_s),
        };
        md.replica = replica;
        md.qp = q;
        // Offered load toward the server: the WRITE and the READ. Metered
        // before flow control (spec §9 item 10): the 16-lookup window caps
        // what is admitted near the link rate, so a meter of admitted
        // lookups alone would never turn RED under overload.
        let l = pkt.len() as u64;
        let read_payload = if self.cfg.read_req_trailer { l + 8 } else { 0 };
        self.meters.mark(
            port_q,
            now,
            (82 + l + 4 + 24) + (74 + read_payload + 4 + 24),
        );
        // Flow control on outstanding[q].
        let now32 = now as u32;
        let (max_out, stale) = (u32::from(self.cfg.max_out), self.cfg.t_stale);
        // [our choice] `hi` also restarts when the count leaves 0: it is the
        // time of the last progress, so a burst after an idle period is not
        // taken for a leak (the spec's "last response" alone would be).
        let admit = dp.register(h.outstanding, u64::from(q), |p| {
            if p.lo < max_out {
                if p.lo == 0 {
                    p.hi = now32;
                }
                p.lo += 1;
                true
            } else if u64::from(now32.wrapping_sub(p.hi)) > stale {
                p.lo = 1;
                p.hi = now32;
                true
            } else {
                false
            }
        })?;
        if !admit {
            return self.drop_with(pkt, dp, h, DropReason::FcReject);
        }
        // MemResolver.
        let mut mk = [0u8; 3];
        mk[0..2].copy_from_slice(&range.range.to_be_bytes());
        mk[2] = replica;
        let (Some(mem), Some(qpe)) = (
            dp.lookup(h.mem_tbl, &mk)?,
            dp.lookup(h.qp_tbl, &q.to_be_bytes())?,
        ) else {
            return self.drop_with(pkt, dp, h, DropReason::NoRoute);
        };
        let va = mem
            .base_va
            .wrapping_add(u64::from(bucket.wrapping_sub(mem.lo)) << self.geo.log2_row_bytes());
        dp.count(h.qp_req, u64::from(q), pkt.len() as u64)?;
        pkt.meta.class = Class::Request;
        pkt.meta.bridge = Bridge {
            qp: q,
            va,
            rkey: mem.rkey,
            ts: now32,
            orig_port: port,
            replica,
            mac: qpe.mac,
            ip: qpe.ip.octets(),
            qpn: qpe.qpn,
            sport: qpe.sport,
            new_psn: 0,
            redo: redo_pass,
        };
        self.stats.dram_lookups += 1;
        self.series.record(now, replica);
        pkt.multicast(qpe.group);
        Ok(())
    }

    /// Ingress of an RDMA packet addressed to the switch (spec §5.2).
    fn ingress_rdma(
        &mut self,
        pkt: &mut PacketCtx<TeaMeta, TeaDigest>,
        dp: &mut DataPlane<'_>,
        h: &Handles,
    ) -> Result<(), AccessError> {
        let r = pkt.meta.rdma;
        let qpn = r.dest_qp.to_be_bytes();
        let Some(q) = dp.lookup(h.rsp_qp_tbl, &qpn[1..])? else {
            return self.drop_with(pkt, dp, h, DropReason::StaleQp);
        };
        let now = dp.now();
        match r.opcode {
            OP_READ_RESPONSE_ONLY => self.response(pkt, dp, h, q, r, now),
            OP_ACK => {
                let kind = inca_wire::roce::syndrome_kind(r.syndrome);
                use inca_wire::roce::SyndromeKind;
                match kind {
                    SyndromeKind::Ack { .. } => self.drop_with(pkt, dp, h, DropReason::Ack),
                    _ if r.syndrome == inca_wire::roce::syndrome::NAK_PSN_SEQ_ERROR => {
                        self.stats.naks += 1;
                        dp.register(h.outstanding, u64::from(q), |p| p.lo = 0)?;
                        let Some(qpe) = dp.lookup(h.qp_tbl, &q.to_be_bytes())? else {
                            return self.drop_with(pkt, dp, h, DropReason::NoRoute);
                        };
                        pkt.digest(TeaDigest::Nak {
                            qp: q,
                            syndrome: r.syndrome,
                            psn: r.psn,
                            ts: now as u32,
                        });
                        pkt.meta.class = Class::Resync;
                        pkt.meta.bridge.qp = q;
                        pkt.meta.bridge.new_psn = r.psn;
                        pkt.forward(qpe.port);
                        Ok(())
                    }
                    _ => {
                        self.stats.naks += 1;
                        dp.register(h.qp_ok_a, u64::from(q), |v| *v = 0)?;
                        dp.register(h.qp_ok_b, u64::from(q), |v| *v = 0)?;
                        pkt.digest(TeaDigest::Nak {
                            qp: q,
                            syndrome: r.syndrome,
                            psn: r.psn,
                            ts: now as u32,
                        });
                        self.drop_with(pkt, dp, h, DropReason::Nak)
                    }
                }
            }
            op => {
                if (0x0D..=0x0F).contains(&op) {
                    pkt.digest(TeaDigest::BadOpcode { qp: q, opcode: op });
                }
                self.drop_with(pkt, dp, h, DropReason::Malformed)
            }
        }
    }

    /// The response pass of a DRAM lookup (spec §5.2 step 2).
    fn response(
        &mut self,
        pkt: &mut PacketCtx<TeaMeta, TeaDigest>,
        dp: &mut DataPlane<'_>,
        h: &Handles,
        q: u16,
        r: RdmaIn,
        now: Nanos,
    ) -> Result<(), AccessError> {
        let newer = dp.register(h.last_rsp_psn, u64::from(q), |last| {
            if psn_newer(r.psn, *last) {
                *last = r.psn;
                true
            } else {
                false
            }
        })?;
        if !newer {
            return self.drop_with(pkt, dp, h, DropReason::DupResponse);
        }
        let now32 = now as u32;
        dp.register(h.outstanding, u64::from(q), |p| {
            p.lo = p.lo.saturating_sub(1);
            p.hi = now32;
        })?;
        dp.count(h.qp_rsp, u64::from(q), pkt.len() as u64)?;
        self.stats.responses += 1;
        let kv = self.geo.kv_len();
        let front = RESPONSE_HEADERS + kv + SHIM_BYTES;
        // L = UDP_len − 8 − 12 − 4 − PadCnt − 4 − KV_LEN − 8.
        let l = usize::from(r.udp_len)
            .checked_sub(8 + 12 + 4 + 4 + usize::from(r.pad) + kv + SHIM_BYTES);
        let shim = pkt
            .header()
            .get(RESPONSE_HEADERS + kv..)
            .and_then(Shim::parse);
        let (Some(l), Some(shim)) = (l, shim) else {
            return self.drop_with(pkt, dp, h, DropReason::Malformed);
        };
        if front + l > pkt.len() || l < 14 {
            return self.drop_with(pkt, dp, h, DropReason::Malformed);
        }
        let elapsed = now32.wrapping_sub(shim.issue_ts);
        if u64::from(elapsed) >= self.cfg.t_grace {
            return self.late_response(pkt, dp, h, front, l, shim);
        }
        let cells = pkt.header()[RESPONSE_HEADERS..RESPONSE_HEADERS + kv].to_vec();
        let parsed = pkt.meta.parsed;
        let mut md = LookupMd {
            from_response: true,
            ingress_port: shim.orig_port,
            qp: q,
            replica: shim.flags & SHIM_REPLICA,
            ..LookupMd::default()
        };
        let inner = &pkt.header()[front.min(pkt.header().len())..];
        let Some(key) = self.nf.key(inner, &parsed, shim.orig_port) else {
            return self.drop_with(pkt, dp, h, DropReason::Malformed);
        };
        md.bucket = self.geo.bucket_of(&key);
        let value = self.geo.match_row(&cells, &key).map(<[u8]>::to_vec);
        // Restore the original frame: strip RoCE, cells and shim; cut the
        // pad and ICRC.
        pkt.remove_header(0, front);
        pkt.truncate(l);
        self.observe(|| LookupRecord {
            at: now,
            checked_at: now.saturating_sub(u64::from(elapsed)),
            key,
            value: value.clone(),
            path: LookupPath::Dram,
            qp: q,
        });
        let v = match value {
            Some(v) => {
                md.found = true;
                md.value = v;
                let value = std::mem::take(&mut md.value);
                let verdict = self.nf.on_found(pkt.header_mut(), &parsed, &value, &md);
                md.value = value;
                verdict
            }
            None => {
                md.remote_miss = true;
                self.stats.remote_misses += 1;
                self.nf.on_remote_miss(pkt.header_mut(), &parsed, &md)
            }
        };
        self.apply(pkt, dp, h, v, &md)
    }

    /// A READ response that came `T_GRACE` or more after its lookup's SRAM
    /// check. The mutation shield (spec §5.4) only covers lookups whose
    /// DRAM read falls within `T_GRACE` of their SRAM check, and the read
    /// happened somewhere before now: its cells may hold a key moved away
    /// (or a value replaced) after the check, so they must not be used.
    /// Outages make such replies: a paused server or a link down holds the
    /// READ, a retransmitted or duplicated READ is answered late, a READ
    /// re-executed after a PSN resync returns a frame parked long ago.
    ///
    /// [our choice] (the spec assumes this never happens) The cells are
    /// discarded; the parked frame is restored and recirculated to redo the
    /// lookup from the SRAM check, with a fresh issue time, as if it had just
    /// arrived on its original port. A redo whose reply is late again is
    /// dropped ([`DropReason::LateResponse`]), so a packet makes at most two
    /// DRAM lookups and uses at most one reply. `issue_ts` is ns mod 2^32,
    /// so a reply more than 4.29 s old could pass for a fresh one; replies
    /// in the future (clock wrap) count as late.
    fn late_response(
        &mut self,
        pkt: &mut PacketCtx<TeaMeta, TeaDigest>,
        dp: &mut DataPlane<'_>,
        h: &Handles,
        front: usize,
        l: usize,
        shim: Shim,
    ) -> Result<(), AccessError> {
        self.stats.late_responses += 1;
        if shim.flags & SHIM_REDO != 0 {
            return self.drop_with(pkt, dp, h, DropReason::LateResponse);
        }
        self.stats.redone += 1;
        pkt.remove_header(0, front);
        pkt.truncate(l);
        pkt.meta.redo_port = Some(shim.orig_port);
        pkt.recirculate();
        Ok(())
    }

    /// Egress: the LookupRequestor (spec §5.1 steps 8–9) and resync markers.
    fn egress_tea(
        &mut self,
        pkt: &mut PacketCtx<TeaMeta, TeaDigest>,
        dp: &mut DataPlane<'_>,
        h: &Handles,
    ) -> Result<(), AccessError> {
        let b = pkt.meta.bridge;
        match pkt.meta.class {
            Class::Resync => {
                let psn = b.new_psn & 0xFF_FFFF;
                dp.register(h.next_psn, u64::from(b.qp), |p| *p = psn)?;
                pkt.drop_packet();
                Ok(())
            }
            Class::Request => {
                let rid = pkt.egress_meta().rid;
                let psn = dp.register(h.next_psn, u64::from(b.qp), |p| {
                    let v = *p;
                    *p = (v + 1) & 0xFF_FFFF;
                    v
                })?;
                let l = pkt.len();
                let p = SHIM_BYTES + l;
                let pad = (4 - p % 4) % 4;
                let trailer = self.cfg.read_req_trailer;
                let shim = Shim {
                    flags: b.replica
                        | if trailer { SHIM_TRAILER } else { 0 }
                        | if b.redo { SHIM_REDO } else { 0 },
                    orig_port: b.orig_port,
                    issue_ts: b.ts,
                };
                let base = Request {
                    src_mac: self.cfg.switch_mac,
                    src_ip: self.cfg.switch_ip,
                    dst_mac: b.mac,
                    dst_ip: Ipv4Addr::from(b.ip),
                    sport: b.sport,
                    dest_qp: b.qpn,
                    opcode: OP_WRITE_ONLY,
                    ack_req: false,
                    psn,
                    pad: pad as u8,
                    va: b.va + self.geo.kv_len() as u64,
                    rkey: b.rkey,
                    dma_len: p as u32,
                    payload_len: p + pad,
                };
                let req = match rid {
                    1 => base,
                    2 if trailer => Request {
                        opcode: OP_READ_REQUEST,
                        ack_req: true,
                        va: b.va,
                        dma_len: (self.geo.kv_len() + p) as u32,
                        ..base
                    },
                    2 => Request {
                        opcode: OP_READ_REQUEST,
                        ack_req: true,
                        va: b.va,
                        dma_len: (self.geo.kv_len() + p) as u32,
                        pad: 0,
                        payload_len: 0,
                        ..base
                    },
                    _ => {
                        pkt.drop_packet();
                        return Ok(());
                    }
                };
                if req.payload_len == 0 {
                    pkt.truncate(0);
                    pkt.insert_header(0, &req.headers());
                    pkt.append_roce_icrc(0);
                } else {
                    let mut hdr = [0u8; super::config::REQUEST_HEADERS + SHIM_BYTES];
                    hdr[..super::config::REQUEST_HEADERS].copy_from_slice(&req.headers());
                    hdr[super::config::REQUEST_HEADERS..].copy_from_slice(&shim.bytes());
                    pkt.insert_header(0, &hdr);
                    pkt.append_roce_icrc(pad);
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }
}

impl<N: TeaNf> Program for TeaSwitch<N> {
    type Meta = TeaMeta;
    type Digest = TeaDigest;

    fn name(&self) -> &str {
        &self.name
    }

    fn declare(&mut self, d: &mut Declare) -> Result<(), DeclareError> {
        let cfg = &self.cfg;
        let k = cfg.key_len;
        let v_bits = (cfg.value_len * 8) as u32;
        let ports = cfg
            .servers
            .iter()
            .map(|s| usize::from(s.port) + 1)
            .max()
            .unwrap_or(1);
        let qps = cfg.qp_count().max(1);
        let n_srv = cfg.servers.len().max(1);
        let cms_hash: [Handle; CMS_ROWS] = [
            d.hash(
                "tea_cms_hash0",
                HashAlgorithm::Crc32,
                16,
                Gress::Ingress,
                &[],
            )?,
            d.hash(
                "tea_cms_hash1",
                HashAlgorithm::Crc32,
                16,
                Gress::Ingress,
                &[],
            )?,
            d.hash(
                "tea_cms_hash2",
                HashAlgorithm::Crc32,
                16,
                Gress::Ingress,
                &[],
            )?,
            d.hash(
                "tea_cms_hash3",
                HashAlgorithm::Crc32,
                16,
                Gress::Ingress,
                &[],
            )?,
        ];
        let mut cms = Vec::with_capacity(CMS_ROWS);
        for (r, hh) in cms_hash.iter().enumerate() {
            cms.push(d.register::<u16>(
                ArrayDecl::new(&format!("tea_cms{r}"), CMS_COLS).after(&[hh.id()]),
            )?);
        }
        let cms: [RegisterHandle<u16>; CMS_ROWS] = [cms[0], cms[1], cms[2], cms[3]];
        let stash = d.table::<Box<[u8]>>(
            TableDecl::new("tea_stash", MatchKind::Exact, k, v_bits, cfg.stash_cap).vliw(2),
        )?;
        let cache = d.table::<CacheEntry>(
            TableDecl::new(
                "tea_cache",
                MatchKind::Exact,
                k,
                v_bits + 16,
                cfg.cache_cap.max(1),
            )
            .vliw(2),
        )?;
        let cache_hits = d.register::<u32>(
            ArrayDecl::new("tea_cache_hits", cfg.cache_cap.max(1)).after(&[cache.id()]),
        )?;
        let bf_hash = [
            d.hash(
                "tea_bf_hash0",
                HashAlgorithm::Crc32,
                18,
                Gress::Ingress,
                &[],
            )?,
            d.hash(
                "tea_bf_hash1",
                HashAlgorithm::Crc32,
                18,
                Gress::Ingress,
                &[],
            )?,
        ];
        let cms_ids: Vec<_> = cms.iter().map(|c| c.id()).collect();
        let bf0 = d.register::<u8>(
            ArrayDecl::new("tea_dedup_bf0", BF_BITS)
                .after(&[&cms_ids[..], &[bf_hash[0].id()]].concat()),
        )?;
        let bf1 = d.register::<u8>(
            ArrayDecl::new("tea_dedup_bf1", BF_BITS)
                .after(&[&cms_ids[..], &[bf_hash[1].id()]].concat()),
        )?;
        let bucket_hash = d.hash(
            "tea_bucket_hash",
            HashAlgorithm::Crc64,
            cfg.log2_buckets as u8,
            Gress::Ingress,
            &[],
        )?;
        let range_tbl = d.table::<RangeEntry>(
            TableDecl::new("tea_range_tbl", MatchKind::Range, 4, 80, n_srv)
                .after(&[bucket_hash.id()]),
        )?;
        let after_range = [range_tbl.id()];
        let port_up_a =
            d.register::<u8>(ArrayDecl::new("tea_port_up_a", ports).after(&after_range))?;
        let port_up_b =
            d.register::<u8>(ArrayDecl::new("tea_port_up_b", ports).after(&after_range))?;
        let qp_ok_a = d.register::<u8>(ArrayDecl::new("tea_qp_ok_a", qps).after(&after_range))?;
        let qp_ok_b = d.register::<u8>(ArrayDecl::new("tea_qp_ok_b", qps).after(&after_range))?;
        let active_replica =
            d.register::<u8>(ArrayDecl::new("tea_active_replica", n_srv).after(&[
                port_up_a.id(),
                port_up_b.id(),
                qp_ok_a.id(),
                qp_ok_b.id(),
            ]))?;
        let rsp_qp_tbl = d.table::<u16>(TableDecl::new(
            "tea_rsp_qp_tbl",
            MatchKind::Exact,
            3,
            16,
            qps,
        ))?;
        let last_rsp_psn =
            d.register::<u32>(ArrayDecl::new("tea_last_rsp_psn", qps).after(&[rsp_qp_tbl.id()]))?;
        let outstanding = d.register::<Pair>(
            ArrayDecl::new("tea_outstanding", qps).after(&[active_replica.id(), last_rsp_psn.id()]),
        )?;
        let mem_tbl = d.table::<MemEntry>(
            TableDecl::new("tea_mem_tbl", MatchKind::Exact, 3, 128, 2 * n_srv)
                .after(&[active_replica.id()]),
        )?;
        let qp_tbl = d.table::<QpEntry>(
            TableDecl::new(
                "tea_qp_tbl",
                MatchKind::Exact,
                2,
                48 + 32 + 24 + 16 + 9 + 16,
                qps,
            )
            .after(&[outstanding.id()])
            .vliw(4),
        )?;
        let next_psn = d.register::<u32>(ArrayDecl::new("tea_next_psn", qps).egress())?;
        let drops = d.counter(ArrayDecl::new("tea_drops", DROP_REASONS))?;
        let qp_req =
            d.counter(ArrayDecl::new("tea_qp_requests", qps).after(&[outstanding.id()]))?;
        let qp_rsp =
            d.counter(ArrayDecl::new("tea_qp_responses", qps).after(&[rsp_qp_tbl.id()]))?;
        let barrier = d.register::<u8>(ArrayDecl::new("tea_cp_barrier", 1))?;
        self.h = Some(Handles {
            stash,
            cache,
            cache_hits,
            cms,
            cms_hash,
            bf: [bf0, bf1],
            bf_hash,
            bucket_hash,
            range_tbl,
            port_up_a,
            port_up_b,
            qp_ok_a,
            qp_ok_b,
            active_replica,
            outstanding,
            mem_tbl,
            qp_tbl,
            rsp_qp_tbl,
            last_rsp_psn,
            next_psn,
            drops,
            qp_req,
            qp_rsp,
            barrier,
        });
        Ok(())
    }

    fn parse(&self, gress: Gress, header: &[u8], meta: &mut TeaMeta) -> Result<(), ParseError> {
        if gress == Gress::Egress {
            return Ok(());
        }
        // A recirculated redo carries the response pass's metadata.
        meta.class = Class::Normal;
        if port_down_port(header).is_some() {
            meta.class = Class::PortDown;
            return Ok(());
        }
        let p = headers::parse(header)?;
        meta.parsed = p;
        if !(p.ipv4 && p.proto == headers::PROTO_UDP && p.has_ports)
            || p.dst != self.cfg.switch_ip.octets()
        {
            return Ok(());
        }
        let l4 = usize::from(p.l4);
        if p.dport == inca_wire::roce::ROCEV2_UDP_PORT {
            let Some(r) = RdmaIn::parse(header, l4) else {
                return Err(ParseError("short RoCE header"));
            };
            meta.class = Class::Rdma;
            meta.rdma = r;
            if r.opcode == OP_READ_RESPONSE_ONLY {
                // The parked frame's headers, for the NF's key.
                let at = l4 + 8 + 12 + 4 + self.geo.kv_len() + SHIM_BYTES;
                meta.parsed = header
                    .get(at..)
                    .and_then(|h| headers::parse(h).ok())
                    .unwrap_or_default();
            }
        } else if p.dport == AGENT_PORT || p.sport == AGENT_PORT {
            meta.class = Class::Agent;
        }
        Ok(())
    }

    fn ingress(
        &mut self,
        pkt: &mut PacketCtx<TeaMeta, TeaDigest>,
        dp: &mut DataPlane<'_>,
    ) -> Result<(), AccessError> {
        let Some(h) = self.h else {
            return Ok(());
        };
        match pkt.meta.class {
            Class::PortDown => {
                if let (PacketKind::Generated { .. }, Some(p)) =
                    (pkt.kind(), port_down_port(pkt.header()))
                {
                    dp.register(h.port_up_a, u64::from(p), |v| *v = 0)?;
                    dp.register(h.port_up_b, u64::from(p), |v| *v = 0)?;
                }
                pkt.drop_packet();
                Ok(())
            }
            Class::Agent => {
                pkt.to_cpu(REASON_AGENT);
                Ok(())
            }
            Class::Rdma => self.ingress_rdma(pkt, dp, &h),
            Class::Normal => self.ingress_normal(pkt, dp, &h),
            Class::Request | Class::Resync => {
                pkt.drop_packet();
                Ok(())
            }
        }
    }

    fn egress(
        &mut self,
        pkt: &mut PacketCtx<TeaMeta, TeaDigest>,
        dp: &mut DataPlane<'_>,
    ) -> Result<(), AccessError> {
        let Some(h) = self.h else {
            return Ok(());
        };
        self.egress_tea(pkt, dp, &h)
    }

    fn control(&mut self, event: ControlEvent<TeaDigest>, cp: &mut ControlPlane<'_>) {
        self.control_event(event, cp);
    }

    fn report(&self) -> ProgramReport {
        let t = self.cp.table.as_ref();
        let g = super::report::Gauges {
            table_entries: t.map_or(0, |t| t.stats().entries),
            stash_entries: t.map_or(0, |t| t.stash_len() as u64),
            cache_entries: self.cp.cache.len() as u64,
            intents_max: self.cp.stats.intents_max,
            punts_waiting_max: self.cp.punts.waiting_max,
            hopeless_chains: t.map_or(0, |t| t.stats().hopeless),
            check: self.check_verdict(),
        };
        super::report::build(&self.stats, self.cp_stats(), &self.series, &g)
    }
}
