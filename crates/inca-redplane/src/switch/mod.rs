//! RedPlane's switch side in linearizable mode (spec §2, §3.1, §3.3, §5.1–5.5,
//! §5.8, §5.10): [`RedPlane`] composes a [`RedPlaneApp`] with the RedPlane
//! ingress block, the store-port egress block (ack bookkeeping and the
//! retransmission loop) and the grant-handling control plane, as one
//! `inca_switch::Program`.
//!
//! Where things are: [`app`] — the developer API; [`config`] — parameters;
//! [`proto`] — message layouts as the pipeline edits them; `ingress`,
//! `egress`, `grant` — the three blocks.
//!
//! **Recording hook.** [`RedPlane::with_observer`] installs an [`Observer`]
//! (none by default). It is called, synchronously and in simulation time,
//! (1) when a data packet with a RedPlane key enters the ingress block
//! ([`Observer::input`]: time, switch id, key bytes, the frame's header
//! window — at most the parser depth; a packet re-injected after a grant is
//! not reported again), and (2) when an output is released
//! ([`Observer::output`]: time, switch id, key, the released frame's header
//! window, and the version `(fence, seq)` it observed: `fence` is the base
//! sequence number of the grant the switch holds, `seq` the write the output
//! belongs to, or for a read the last acknowledged write). Release happens
//! in ingress: a read forwarded at once, or a packet taken out of a
//! RENEW_ACK / BUF_READ_ACK; (3) when the app runs on a packet
//! ([`Observer::ran`], at its arrival or when it is re-injected after a
//! grant) and when a write is issued ([`Observer::issued`]). The observer
//! sees sim-only metadata; nothing it does affects the switch.

pub mod app;
pub mod config;
mod egress;
mod grant;
mod ingress;
pub mod occupancy;
pub mod proto;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;

use inca_apps::headers::Parsed;
use inca_switch::hash::HashAlgorithm;
use inca_switch::{
    AccessError, ArrayDecl, ControlEvent, ControlPlane, DataPlane, Declare, DeclareError, Gress,
    Handle, MatchKind, Nanos, PacketCtx, ParseError, Program, ProgramReport, RegisterHandle,
    TableDecl, TableHandle,
};

pub use app::{Access, Bytes, Mode, Out, RedPlaneApp, Verdict};
pub use config::{RedPlaneConfig, Route, Shard};

/// Sees what enters and leaves RedPlane, for the history recorder. See the
/// module documentation.
pub trait Observer: Send + Sync {
    /// A data packet with key `key` entered the RedPlane ingress block.
    fn input(&self, at: Nanos, switch: u32, key: &[u8], frame: &[u8]);
    /// An output for `key` was released, having observed `version`
    /// = (fence, seq).
    fn output(&self, at: Nanos, switch: u32, key: &[u8], frame: &[u8], version: (u16, u16));
    /// A write for `key` was issued at `version` = (fence, seq); `frame` is
    /// the input packet as it entered (before the app ran). Default: ignored.
    fn issued(&self, _at: Nanos, _switch: u32, _key: &[u8], _frame: &[u8], _version: (u16, u16)) {}
    /// The app ran on a data packet for `key` under a lease valid until
    /// `lease_until` (ns): at its arrival (`reinjected` false, right after
    /// [`Observer::input`]) or when the control plane re-injected it after a
    /// grant. A packet the network duplicated between switch and store (its
    /// LEASE_NEW or the grant ack carrying it) is re-injected, and runs, once
    /// per copy. Default: ignored.
    fn ran(&self, _at: Nanos, _run: &Run<'_>) {}
    /// The switch stopped holding the lease of `key` (a reject, a give-up),
    /// or of every key (`None`: the control plane (re)started). Default:
    /// ignored.
    fn lease_lost(&self, _at: Nanos, _switch: u32, _key: Option<&[u8]>) {}
}

/// One run of the app, for [`Observer::ran`].
#[derive(Debug, Clone, Copy)]
pub struct Run<'a> {
    /// Switch id.
    pub switch: u32,
    /// The flow key.
    pub key: &'a [u8],
    /// The packet as it entered (header window).
    pub frame: &'a [u8],
    /// Re-injected after a grant (not at its arrival).
    pub reinjected: bool,
    /// The end of the lease it ran under, ns.
    pub lease_until: Nanos,
}

/// Punt reason: a NEW/MIGRATE ack for the grant handler.
pub const REASON_GRANT: u16 = 0x5201;
/// Punt reason: a head announcement from the store.
pub const REASON_ANNOUNCE: u16 = 0x5202;
/// Mirror sessions: the retransmission loop of store port `p` is
/// `LOOP_SESSION + p`.
pub const LOOP_SESSION: u16 = 0x1000;
/// Mirror sessions: ack bookkeeping copy 2 toward store port `p`.
pub const BOOK_SESSION: u16 = 0x2000;
/// Mirror sessions: renewal clones toward store port `p`.
pub const RENEW_SESSION: u16 = 0x3000;
/// Grant bases remembered per slot for tagging outputs (sim-only).
pub const FENCE_HISTORY: usize = 8;
/// Bytes kept of bookkeeping and renewal copies (their egress needs only the
/// metadata; a renewal clone is rebuilt there).
pub const SMALL_COPY: usize = 64;

/// What a packet is to RedPlane (spec §5.1).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Class {
    /// Anything RedPlane does not handle: routed.
    #[default]
    Other,
    /// A data packet.
    Data,
    /// An ack from the store (UDP dst 4000 from a store worker port).
    Ack,
    /// A head announcement from the store.
    Announce,
    /// A packet re-injected by the control plane after a grant.
    Reinject,
}

/// What the store-port egress does with a packet.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Role {
    /// Nothing.
    #[default]
    None,
    /// The first pass of a write request: send it and start its loop.
    Write,
}

/// What a renewal clone needs in egress to become a bare LEASE_RENEW.
#[derive(Debug, Clone, Copy, Default)]
pub struct RenewInfo {
    /// The flow key.
    pub key: Bytes,
    /// The store shard.
    pub shard: Shard,
}

/// Per-packet metadata (parsed headers plus the bridged and egress-mirror
/// metadata of spec §4.6).
#[derive(Debug, Clone, Default)]
pub struct RpMeta {
    /// The app-visible headers.
    pub p: Parsed,
    /// What the packet is.
    pub class: Class,
    /// Egress role.
    pub role: Role,
    /// The flow's slot.
    pub slot: u32,
    /// Sequence number (write, or acked write for bookkeeping copies).
    pub seq: u16,
    /// Renewal clones only [our choice: boxed, so the metadata every
    /// packet carries through the traffic manager stays small].
    pub renew: Option<Box<RenewInfo>>,
    /// Loop copies: when the copy was last transmitted.
    pub tx_ts: Nanos,
    /// Loop copies: retransmissions so far.
    pub retx: u8,
    /// Loop copies: the request's IPv4 Identification (kept on resends).
    pub ip_id: u16,
}

/// What the data plane tells the control plane.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RpDigest {
    /// Write `seq` of `slot` reached MAX_RETX without an ack.
    GaveUp {
        /// The slot.
        slot: u32,
        /// The write.
        seq: u16,
    },
}

/// Counters of the RedPlane blocks, for reports and tests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RpStats {
    /// LEASE_NEW requests sent.
    pub lease_new: u64,
    /// Writes (LEASE_RENEW with seq ≥ 1) sent.
    pub writes: u64,
    /// Reads forwarded at once.
    pub reads_forwarded: u64,
    /// Reads sent as BUF_READ.
    pub buf_reads: u64,
    /// Bare renewals cloned.
    pub renewals: u64,
    /// Outputs released from acks.
    pub released: u64,
    /// Retransmissions sent by the loop.
    pub retransmits: u64,
    /// Writes given up after MAX_RETX.
    pub gave_up: u64,
    /// Write requests dropped by the emulated request loss
    /// (`request_drop_permille`).
    pub requests_dropped: u64,
    /// LEASE_REJECTs received.
    pub rejects: u64,
    /// LEASE_REJECTs of writes of an older grant (the lease is kept).
    pub stale_rejects: u64,
    /// Writes dropped because MAX_INFLIGHT were outstanding.
    pub inflight_overflow: u64,
    /// Keys whose hash no shard covers.
    pub no_shard: u64,
    /// Malformed RedPlane messages dropped.
    pub malformed: u64,
    /// Acks too old to extend a lease (MAX_ACK_AGE).
    pub stale_acks: u64,
    /// Re-injected packets dropped because the lease was invalid again.
    pub reinject_drops: u64,
    /// Grants installed by the control plane.
    pub grants: u64,
    /// Grant acks that only re-injected their packet (base not newer than
    /// the installed grant's).
    pub grants_joined: u64,
    /// Grant acks for requests sent before the switch (re)booted, ignored.
    pub pre_boot_acks: u64,
    /// Grants refused: no free slot.
    pub slots_exhausted: u64,
    /// Slots freed by the idle reaper.
    pub reaped: u64,
    /// Local invariant violations (spec §6.2.7); always 0 unless a bug.
    pub invariant_violations: u64,
}

/// Handles of the RedPlane objects.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Objects {
    pub hash: Handle,
    pub shard_map: TableHandle<Shard>,
    pub lease_tbl: TableHandle<u32>,
    pub lease_expiry: RegisterHandle<u32>,
    pub seq_acked: RegisterHandle<u16>,
    pub seq_issued: RegisterHandle<u16>,
    pub renew_sent: RegisterHandle<u32>,
    pub route: TableHandle<u16>,
    pub last_acked: RegisterHandle<u16>,
}

/// Control-plane state of one key (spec §3.3).
#[derive(Debug, Clone, Copy)]
pub(crate) struct KeyState {
    pub slot: u32,
    pub base: u16,
}

/// An app with RedPlane. See the module documentation.
#[derive(Clone)]
pub struct RedPlane<A: RedPlaneApp> {
    /// The app.
    pub app: A,
    pub(crate) cfg: RedPlaneConfig,
    pub(crate) obj: Option<Objects>,
    pub(crate) observer: Option<Arc<dyn Observer>>,
    pub(crate) stats: RpStats,
    // Control plane (spec §3.3): key → slot, the slot free-list.
    pub(crate) keys: BTreeMap<Bytes, KeyState>,
    pub(crate) slot_keys: BTreeMap<u32, Bytes>,
    pub(crate) free_slots: Vec<u32>,
    pub(crate) next_slot: u32,
    pub(crate) announce_version: u32,
    // When the control plane last started: acks of older requests are
    // from a previous incarnation.
    pub(crate) boot: Nanos,
    // Sim-only: the last few grant bases of each slot, newest last, to tag
    // a released output with the grant its write was issued under (an ack
    // of an older grant's write may arrive after a newer grant).
    pub(crate) fences: BTreeMap<u32, VecDeque<u16>>,
    // Sim-only shadow for spec §6.2.7: the live loop copies by (slot, seq).
    pub(crate) loop_live: BTreeSet<(u32, u16)>,
    // Sim-only: queue depth seen by requests on the store port (§8 item 8).
    pub(crate) occupancy: occupancy::LoopOccupancy,
}

impl<A: RedPlaneApp> RedPlane<A> {
    /// `app` with RedPlane configured by `cfg`.
    pub fn new(app: A, cfg: RedPlaneConfig) -> Self {
        let occupancy = occupancy::LoopOccupancy::new(cfg.occupancy_bin);
        RedPlane {
            app,
            cfg,
            obj: None,
            observer: None,
            stats: RpStats::default(),
            keys: BTreeMap::new(),
            slot_keys: BTreeMap::new(),
            free_slots: Vec::new(),
            next_slot: 0,
            announce_version: 0,
            boot: 0,
            fences: BTreeMap::new(),
            loop_live: BTreeSet::new(),
            occupancy,
        }
    }

    /// Installs the recording hook.
    pub fn with_observer(mut self, observer: Arc<dyn Observer>) -> Self {
        self.observer = Some(observer);
        self
    }

    /// The configuration.
    pub fn config(&self) -> &RedPlaneConfig {
        &self.cfg
    }

    /// The RedPlane counters.
    pub fn stats(&self) -> RpStats {
        self.stats
    }

    /// Keys holding a slot (control-plane view).
    pub fn keys(&self) -> usize {
        self.keys.len()
    }

    /// Queue depth requests met on the store port (spec §8 item 8).
    pub fn loop_occupancy(&self) -> &occupancy::LoopOccupancy {
        &self.occupancy
    }

    /// Loop copies alive now (spec §6.2.7 bookkeeping).
    pub fn loop_copies(&self) -> usize {
        self.loop_live.len()
    }

    /// Bytes of a request or ack header: Ethernet + IPv4 + UDP + type, seq,
    /// key and value.
    pub fn request_header_len(&self) -> usize {
        proto::OUTER_LEN + proto::RP_FIXED + self.app.key_bytes() + self.app.value_bytes()
    }
}

impl<A: RedPlaneApp> Program for RedPlane<A> {
    type Meta = RpMeta;
    type Digest = RpDigest;

    fn name(&self) -> &str {
        self.app.name()
    }

    fn declare(&mut self, d: &mut Declare) -> Result<(), DeclareError> {
        let slots = self.cfg.slots;
        let k = self.app.key_bytes();
        let class = d.gateway("rp_class", Gress::Ingress, &[])?;
        let hash = d.hash("rp_key_hash", HashAlgorithm::Crc32, 16, Gress::Ingress, &[])?;
        // Action data: store IP 32 + UDP port 16 + egress port 9.
        let shard_map = d.table(
            TableDecl::new("rp_shard_map", MatchKind::Range, 2, 57, 64).after(&[hash.id()]),
        )?;
        let lease_tbl = d.table(
            TableDecl::new("rp_lease_tbl", MatchKind::Exact, k, 17, slots)
                .after(&[class.id()])
                .idle_timeout(self.cfg.idle_timeout),
        )?;
        let lease_expiry =
            d.register::<u32>(ArrayDecl::new("rp_lease_expiry", slots).after(&[lease_tbl.id()]))?;
        // After `lease_expiry` too: a packet reaches `seq_acked` only with a
        // valid lease (found by the load-time check).
        let seq_acked = d.register::<u16>(
            ArrayDecl::new("rp_seq_acked", slots).after(&[lease_tbl.id(), lease_expiry.id()]),
        )?;
        let seq_issued =
            d.register::<u16>(ArrayDecl::new("rp_seq_issued", slots).after(&[seq_acked.id()]))?;
        let renew_sent =
            d.register::<u32>(ArrayDecl::new("rp_renew_sent", slots).after(&[lease_expiry.id()]))?;
        let after = [seq_issued.id(), renew_sent.id(), shard_map.id()];
        self.app.declare(d, &after, slots)?;
        let route = d.table(TableDecl::new("rp_route", MatchKind::Lpm, 4, 9, 64).after(&after))?;
        let last_acked = d.register::<u16>(ArrayDecl::new("rp_last_acked", slots).egress())?;
        // [PROTO] compares the 48-bit timestamps with range tables on 16-bit
        // halves; inca subtracts in one stage but charges the TCAM (§5.5).
        d.table::<u8>(
            TableDecl::new("rp_timeout", MatchKind::Range, 6, 2, 4)
                .egress()
                .after(&[last_acked.id()]),
        )?;
        self.obj = Some(Objects {
            hash,
            shard_map,
            lease_tbl,
            lease_expiry,
            seq_acked,
            seq_issued,
            renew_sent,
            route,
            last_acked,
        });
        Ok(())
    }

    fn parse(&self, gress: Gress, header: &[u8], meta: &mut RpMeta) -> Result<(), ParseError> {
        if gress == Gress::Egress {
            // Egress works from the bridged / mirror metadata.
            return Ok(());
        }
        ingress::classify(header, meta)
    }

    fn ingress(
        &mut self,
        pkt: &mut PacketCtx<RpMeta, RpDigest>,
        dp: &mut DataPlane<'_>,
    ) -> Result<(), AccessError> {
        self.ingress_block(pkt, dp)
    }

    fn egress(
        &mut self,
        pkt: &mut PacketCtx<RpMeta, RpDigest>,
        dp: &mut DataPlane<'_>,
    ) -> Result<(), AccessError> {
        self.egress_block(pkt, dp)
    }

    fn control(&mut self, event: ControlEvent<RpDigest>, cp: &mut ControlPlane<'_>) {
        self.control_block(event, cp)
    }

    fn check_hints(&self) -> inca_switch::CheckHints {
        inca_switch::CheckHints {
            samples: Vec::new(),
            known: vec![inca_switch::KnownViolation::new(
                "rp_shard_map",
                "RedPlane looks `rp_shard_map` up last, only for what goes to the store, \
                 after the lease stages and `rp_route` decided; spec §5.10 and its \
                 declaration put it first (after the key hash). Moving the lookup before \
                 the lease stages is the stage-order work of issue 24 item 1",
            )],
        }
    }

    fn report(&self) -> ProgramReport {
        let o = &self.occupancy;
        let s = &self.stats;
        ProgramReport {
            counters: vec![
                ("loop_queue_max_bytes".into(), o.max()),
                ("loop_queue_samples".into(), o.samples()),
                ("rp_writes".into(), s.writes),
                ("rp_retransmits".into(), s.retransmits),
                ("rp_requests_dropped".into(), s.requests_dropped),
                ("rp_gave_up".into(), s.gave_up),
                ("rp_inflight_overflow".into(), s.inflight_overflow),
            ],
            series: vec![("loop_queue_max_bytes".into(), o.series())],
        }
    }
}
