//! TRD, overlay TCP retransmission detection (spec §7.2, §4.3, app 4).
//!
//! A connection (VNI + inner 5-tuple, per direction; plain TCP has VNI 0)
//! gets a register index from the server that sees its first packet; the
//! controller installs `conn_idx[key] = idx` in the switch on CONN_NEW.
//! From then on the switch judges its data segments at line rate against
//! `max_end[idx]` (serial-number compare): a segment ending at or below
//! the highest end seen is a retransmission, counted in `retx_cnt[idx]`.
//! Until then, and for SYN/FIN/RST always, the server judges them against
//! its shadow `end` and its response tells the switch what to do to the
//! registers. The index is the server's so that distinct connections
//! never share a register cell, which hashing cannot promise.
//!
//! Handover rule: slow-path packets are judged by the server, fast-path
//! packets by the switch; the switch absorbs slow-path updates by max
//! only, so an in-flight slow-path packet never makes a later fast-path
//! packet look like a retransmission.
//!
//! Params (P = 28): see [`wire`]. Reading packets: see [`segment`].
//!
//! Per connection, what is reported is `retx_cnt[idx]` (switch and
//! server judgements with an index both land there) plus
//! [`ConnInfo::software`] (judged by the server without an index: indices
//! exhausted, or the connection releasing). [our choice] INIT also sets
//! `retx_cnt[idx]` (to the response's `retx`): a reused index starts its
//! new connection at zero, in the same single access.
//!
//! The controller glue (CLIP-CTL: the server endpoint and
//! `switch::controller::conns`) calls:
//!
//! | Message | Here |
//! |---|---|
//! | POOL_ASSIGN kind 2 (controller → server at start) | [`RemoteHandler::pool_assign`] (`ClipRuntime::pool_assign`) |
//! | CONN_NEW (server → controller, which installs `conn_idx`) | the handler's created entries (`ClipRuntime::take_created`): table [`TABLE_CONN_IDX`], key the FlowKey, data the idx; [`TrdHandler::conn_new_of`] reads one |
//! | CONN_RELEASE (server → controller, which deletes the entry) | [`TrdHandler::take_conn_release`]: connections whose T_release has passed |
//! | its reply (sent once the switch's delete is done) | [`TrdHandler::release_acked`] (`ClipRuntime::conn_released`, which also drops the runtime's flow record) |
//! | ENTRY_OFFLOADED (after the install) | `ClipRuntime::mark_offloaded` (§7.2: these entries count as offloaded, so only switch aging ends them) |
//! | ENTRY_EXPIRED (the entry aged out, idle ≥ T_exp, and was deleted) | `ClipRuntime::entry_expired`: the index is freed |

pub mod segment;
pub mod wire;

#[cfg(test)]
mod tests;

// ---------------------------------------------------------------------------
// Server half
// ---------------------------------------------------------------------------

use std::collections::BTreeSet;

use hashbrown::HashMap;
use inca_switch::device::Nanos;

use self::segment::{serial_le, serial_max, FIN, RST, SYN};
pub use self::wire::{Op, TrdReq, TrdRes, NO_IDX, PARAMS_LEN};
use crate::app::{Entry, HandlerCtx, HandlerStatus, RemoteHandler};
use crate::flow::{FlowKey, FLOW_KEY_LEN};
use crate::server::SlicePool;

/// TRD's `app_id`.
pub const APP_ID: u8 = 4;
/// `conn_idx`'s table id.
pub const TABLE_CONN_IDX: u8 = 0;
/// The action of its entries, `set_idx(idx)`; data is the 2-byte idx.
pub const ACTION_SET_IDX: u8 = 1;
/// POOL_ASSIGN's kind for TRD indices.
pub const POOL_INDICES: u8 = 2;
/// Connections a server tracks at most (§3.2's mirrored-table size).
pub const DEFAULT_CAPACITY: usize = 1_048_576;
/// T_release: a closed connection keeps its index this long (§5.7: 2 s).
pub const T_RELEASE_NS: Nanos = 2_000_000_000;
/// R: `conn_idx` entries and register cells (§7.2: 65,536).
pub const CONNS: u32 = 65_536;

/// Where a connection is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConnState {
    /// Open.
    Open,
    /// FIN or RST seen; its index is released at `due` (T_release later).
    Closing {
        /// When CONN_RELEASE is due.
        due: Nanos,
    },
    /// CONN_RELEASE sent; the index is freed when the switch's delete is
    /// acked. Its packets are judged in software meanwhile.
    Releasing,
}

/// A connection as the server holds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnInfo {
    /// Its register index (None: software-only detection).
    pub idx: Option<u16>,
    /// The shadow `end`: the highest `seq_end` the server saw.
    pub end: u32,
    /// Its state.
    pub state: ConnState,
    /// Segments the server judged retransmissions.
    pub flagged: u64,
    /// Of those, the ones no register counted (no index given in the
    /// response): reported by the server only.
    pub software: u64,
}

/// One connection: [`ConnInfo`] and the ISN of its SYN (if seen), which
/// tells a duplicate SYN from a new incarnation of the same key.
#[derive(Debug, Clone, Copy)]
struct Conn {
    info: ConnInfo,
    isn: Option<u32>,
}

/// What the TRD handler did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TrdStats {
    /// Connections opened (tracked).
    pub opened: u64,
    /// Indices handed out (each a CONN_NEW).
    pub allocated: u64,
    /// Indices given back to the slice.
    pub freed: u64,
    /// New connections without an index: no slice assigned.
    pub no_pool: u64,
    /// New connections without an index: the slice exhausted.
    pub exhausted: u64,
    /// New connections not tracked: the table full.
    pub table_full: u64,
    /// RSTs of unknown connections (nothing to track).
    pub untracked: u64,
    /// Segments the server judged retransmissions.
    pub retx_flagged: u64,
    /// Of those, reported by the server only (no index in the response).
    pub retx_software: u64,
    /// Duplicate SYNs (counted in `retx_flagged`).
    pub dup_syn: u64,
    /// SYNs with a new ISN on a known key: the index is re-initialised.
    pub reopened: u64,
    /// Connections closed (FIN/RST, or idle in the runtime).
    pub closing: u64,
    /// CONN_RELEASEs handed to the glue.
    pub release_sent: u64,
    /// Indices freed on a delete ack.
    pub released: u64,
    /// Acks for an index not releasing here.
    pub ack_unknown: u64,
    /// Connections ended by the switch entry's expiry.
    pub expired: u64,
    /// Software-only connections forgotten after T_release or idleness.
    pub forgotten: u64,
    /// Requests whose params are not TRD's (answered DROP).
    pub malformed: u64,
    /// Pool slices taken.
    pub pool_assigned: u64,
    /// Pool assignments refused.
    pub pool_refused: u64,
}

/// TRD's remote handler. See the module documentation.
#[derive(Debug, Clone)]
pub struct TrdHandler {
    conns: HashMap<FlowKey, Conn>,
    /// idx → its connection (a map, not a scan: acks name the index).
    by_idx: HashMap<u16, FlowKey>,
    /// Closing connections by due time (ties by key): one entry each.
    closing: BTreeSet<(Nanos, FlowKey)>,
    capacity: usize,
    t_release: Nanos,
    slice: Option<SlicePool>,
    stats: TrdStats,
}

impl Default for TrdHandler {
    fn default() -> Self {
        TrdHandler::new(DEFAULT_CAPACITY)
    }
}

impl TrdHandler {
    /// A handler tracking at most `capacity` connections, T_release 2 s.
    pub fn new(capacity: usize) -> Self {
        TrdHandler {
            conns: HashMap::new(),
            by_idx: HashMap::new(),
            closing: BTreeSet::new(),
            capacity,
            t_release: T_RELEASE_NS,
            slice: None,
            stats: TrdStats::default(),
        }
    }

    /// With T_release `t`.
    pub fn with_t_release(mut self, t: Nanos) -> Self {
        self.t_release = t;
        self
    }

    /// The `conn_idx` entry giving `flow` index `idx` (CONN_NEW; the
    /// switch driver's `AppInstall`).
    pub fn entry(flow: FlowKey, idx: u16) -> Entry {
        Entry {
            table: TABLE_CONN_IDX,
            key: flow.0.to_vec(),
            action: ACTION_SET_IDX,
            data: idx.to_be_bytes().to_vec(),
        }
    }

    /// The CONN_NEW fields of a created entry; None if it is not a
    /// `conn_idx` entry.
    pub fn conn_new_of(e: &Entry) -> Option<(FlowKey, u16)> {
        let key: [u8; FLOW_KEY_LEN] = e.key.as_slice().try_into().ok()?;
        let idx: [u8; 2] = e.data.as_slice().try_into().ok()?;
        (e.table == TABLE_CONN_IDX).then_some((FlowKey(key), u16::from_be_bytes(idx)))
    }

    /// The connection of `flow`, if tracked.
    pub fn conn(&self, flow: &FlowKey) -> Option<ConnInfo> {
        self.conns.get(flow).map(|c| c.info)
    }

    /// Connections tracked.
    pub fn len(&self) -> usize {
        self.conns.len()
    }

    /// None tracked.
    pub fn is_empty(&self) -> bool {
        self.conns.is_empty()
    }

    /// The indices held and their connections, by index.
    pub fn indices(&self) -> Vec<(u16, FlowKey)> {
        let mut v: Vec<(u16, FlowKey)> = self.by_idx.iter().map(|(i, f)| (*i, *f)).collect();
        v.sort_unstable();
        v
    }

    /// The counters.
    pub fn stats(&self) -> &TrdStats {
        &self.stats
    }

    /// CONN_RELEASE at `now`: the connections whose T_release has passed,
    /// with their indices, in due order. They are now releasing: the index
    /// stays theirs until [`TrdHandler::release_acked`]. Software-only
    /// connections due are simply forgotten.
    pub fn take_conn_release(&mut self, now: Nanos) -> Vec<(FlowKey, u16)> {
        let mut out = Vec::new();
        while let Some(&(due, flow)) = self.closing.first() {
            if due > now {
                break;
            }
            self.closing.pop_first();
            let Some(c) = self.conns.get_mut(&flow) else {
                continue;
            };
            if c.info.state != (ConnState::Closing { due }) {
                continue;
            }
            match c.info.idx {
                Some(idx) => {
                    c.info.state = ConnState::Releasing;
                    self.stats.release_sent += 1;
                    out.push((flow, idx));
                }
                None => {
                    self.drop_conn(&flow);
                    self.stats.forgotten += 1;
                }
            }
        }
        out
    }

    /// The switch acked the delete of `idx`'s `conn_idx` entry (the
    /// CONN_RELEASE reply): the connection is forgotten and the index
    /// freed. False, and nothing changes, if `idx` is not releasing here.
    pub fn release_acked(&mut self, idx: u16) -> bool {
        let flow = self.by_idx.get(&idx).copied();
        let releasing = flow
            .and_then(|f| self.conns.get(&f))
            .is_some_and(|c| c.info.state == ConnState::Releasing && c.info.idx == Some(idx));
        match flow {
            Some(f) if releasing => {
                self.drop_conn(&f);
                self.stats.released += 1;
                true
            }
            _ => {
                self.stats.ack_unknown += 1;
                false
            }
        }
    }

    /// Forgets `flow`, giving its index back.
    fn drop_conn(&mut self, flow: &FlowKey) {
        let Some(c) = self.conns.remove(flow) else {
            return;
        };
        if let ConnState::Closing { due } = c.info.state {
            self.closing.remove(&(due, *flow));
        }
        if let Some(idx) = c.info.idx {
            if self.by_idx.get(&idx) == Some(flow) {
                self.by_idx.remove(&idx);
            }
            if let Some(s) = self.slice.as_mut() {
                if s.release(u32::from(idx)) {
                    self.stats.freed += 1;
                }
            }
        }
    }

    /// `flow` closes: its release is due at `due`.
    fn close(&mut self, flow: FlowKey, due: Nanos) {
        let Some(c) = self.conns.get_mut(&flow) else {
            return;
        };
        if let ConnState::Closing { due: old } = c.info.state {
            self.closing.remove(&(old, flow));
        }
        c.info.state = ConnState::Closing { due };
        self.closing.insert((due, flow));
        self.stats.closing += 1;
    }

    /// An index of this server's slice, if one is free.
    fn allocate(&mut self) -> Option<u16> {
        let Some(s) = self.slice.as_mut() else {
            self.stats.no_pool += 1;
            return None;
        };
        // Slices are ≤ 0xFFFE: pool_assign refuses wider ones.
        match s.allocate().and_then(|i| u16::try_from(i).ok()) {
            Some(i) => Some(i),
            None => {
                self.stats.exhausted += 1;
                None
            }
        }
    }

    /// The first request of a new key.
    fn open(&mut self, now: Nanos, req: &TrdReq, created: &mut Vec<Entry>) -> TrdRes {
        let none = TrdRes {
            idx: NO_IDX,
            op: Op::None,
            retx: false,
            init_end: req.seq_end,
            seq_end: req.seq_end,
        };
        if req.tcp_flags & RST != 0 {
            // A reset of a connection never seen: nothing to judge later.
            self.stats.untracked += 1;
            return none;
        }
        if self.conns.len() >= self.capacity {
            self.stats.table_full += 1;
            return none;
        }
        let idx = self.allocate();
        // With SYN the shadow end is seq + 1 (+ data); without, the first
        // packet's own end [our choice, §7.2]: nothing before it is known.
        let info = ConnInfo {
            idx,
            end: req.seq_end,
            state: ConnState::Open,
            flagged: 0,
            software: 0,
        };
        let isn = (req.tcp_flags & SYN != 0).then_some(req.seq);
        self.conns.insert(req.flow, Conn { info, isn });
        self.stats.opened += 1;
        if let Some(i) = idx {
            self.by_idx.insert(i, req.flow);
            self.stats.allocated += 1;
            created.push(TrdHandler::entry(req.flow, i));
        }
        if req.tcp_flags & FIN != 0 {
            self.close(req.flow, now.saturating_add(self.t_release));
        }
        match idx {
            Some(i) => TrdRes {
                idx: i,
                op: Op::Init,
                ..none
            },
            None => none,
        }
    }

    /// Judges a request of a known key (§7.2 remote_handler).
    fn judge(&mut self, req: &TrdReq, c: &mut Conn) -> (TrdRes, bool) {
        let syn = req.tcp_flags & SYN != 0;
        let releasing = c.info.state == ConnState::Releasing;
        let mut op = Op::MaxUpdate;
        let mut retx = false;
        let mut reopened = false;
        if syn && !releasing {
            let dup = match c.isn {
                Some(isn) => isn == req.seq,
                None => serial_le(req.seq_end, c.info.end),
            };
            if dup {
                retx = true;
                op = Op::None;
                self.stats.dup_syn += 1;
            } else {
                // The key is reused by a new connection: the index starts
                // over (INIT overwrites, so lower numbers are not flagged).
                c.isn = Some(req.seq);
                c.info.end = req.seq_end;
                c.info.flagged = 0;
                c.info.software = 0;
                op = Op::Init;
                reopened = true;
                self.stats.reopened += 1;
            }
        } else {
            retx = req.seq_end != req.seq && serial_le(req.seq_end, c.info.end);
            c.info.end = serial_max(c.info.end, req.seq_end);
        }
        // A releasing connection's index is on its way out: no register.
        let idx = if releasing { None } else { c.info.idx };
        if retx {
            c.info.flagged += 1;
            self.stats.retx_flagged += 1;
            if idx.is_none() {
                c.info.software += 1;
                self.stats.retx_software += 1;
            }
        }
        let res = TrdRes {
            idx: idx.unwrap_or(NO_IDX),
            op: if idx.is_some() { op } else { Op::None },
            retx,
            init_end: req.seq_end,
            seq_end: req.seq_end,
        };
        (res, reopened)
    }
}

impl RemoteHandler for TrdHandler {
    fn app_id(&self) -> u8 {
        APP_ID
    }

    fn params_len(&self) -> usize {
        PARAMS_LEN
    }

    /// The inner headers' key (VNI + inner 5-tuple) of a TCP segment, as
    /// the switch half computes it; anything else the default key.
    fn flow_key(&self, load_type: u16, l3: &[u8]) -> FlowKey {
        let seg = (load_type == 0x0800).then(|| segment::of_l3(l3)).flatten();
        match seg {
            Some(s) => s.flow,
            None => FlowKey::of_l3(load_type, l3),
        }
    }

    /// Judges the segment and answers what the switch does to the
    /// registers. A new key gets an index (CONN_NEW as a created entry);
    /// without one (none free, no slice) it is judged here only. Always OK:
    /// TRD observes, it never drops.
    fn handle(&mut self, ctx: &mut HandlerCtx<'_>, params: &mut [u8]) -> HandlerStatus {
        let Some(req) = TrdReq::read(params) else {
            self.stats.malformed += 1;
            return HandlerStatus::Drop;
        };
        let now = ctx.now;
        let res = match self.conns.get(&req.flow).copied() {
            None => self.open(now, &req, ctx.created),
            Some(mut c) => {
                let before = c.info.state;
                let (res, reopened) = self.judge(&req, &mut c);
                if reopened {
                    if let ConnState::Closing { due } = before {
                        self.closing.remove(&(due, req.flow));
                    }
                    c.info.state = ConnState::Open;
                }
                let closes = req.tcp_flags & (FIN | RST) != 0;
                let open = c.info.state == ConnState::Open;
                self.conns.insert(req.flow, c);
                if closes && open {
                    self.close(req.flow, now.saturating_add(self.t_release));
                }
                res
            }
        };
        // The region is PARAMS_LEN bytes (read checked it): this fits.
        res.write(params);
        HandlerStatus::Ok
    }

    /// The switch's `conn_idx` entry is gone (aged out at T_exp, or
    /// deleted after CONN_RELEASE): the connection ends, its index is
    /// freed.
    fn expire(&mut self, table: u8, key: &[u8]) {
        let Ok(k) = <[u8; FLOW_KEY_LEN]>::try_from(key) else {
            return;
        };
        if table == TABLE_CONN_IDX && self.conns.contains_key(&FlowKey(k)) {
            self.drop_conn(&FlowKey(k));
            self.stats.expired += 1;
        }
    }

    /// Kind 2 only: indices `lo..=hi` (hi ≤ 0xFFFE: 0xFFFF means none;
    /// the controller keeps slices below R). The same slice again changes
    /// nothing; a new one replaces it, indices held by live connections
    /// staying in use.
    fn pool_assign(&mut self, kind: u8, _base_ip: [u8; 4], lo: u32, hi: u32) {
        if kind != POOL_INDICES || hi >= u32::from(NO_IDX) {
            self.stats.pool_refused += 1;
            return;
        }
        let Some(mut pool) = SlicePool::new(lo, hi) else {
            self.stats.pool_refused += 1;
            return;
        };
        if self.slice.as_ref().is_some_and(|s| s.bounds() == (lo, hi)) {
            return;
        }
        for idx in self.by_idx.keys() {
            pool.mark_used(u32::from(*idx));
        }
        self.slice = Some(pool);
        self.stats.pool_assigned += 1;
    }

    /// The runtime's record of `flow` idled out without being offloaded: a
    /// software-only connection is forgotten; one with an index (whose
    /// `conn_idx` entry was never confirmed offloaded) is released at once
    /// through CONN_RELEASE, so its index is freed only after the delete.
    fn flow_expired(&mut self, flow: &FlowKey) {
        let Some(c) = self.conns.get(flow) else {
            return;
        };
        match (c.info.idx, c.info.state) {
            (None, _) => {
                self.drop_conn(flow);
                self.stats.forgotten += 1;
            }
            (Some(_), ConnState::Releasing) => {}
            (Some(_), _) => self.close(*flow, 0),
        }
    }

    fn conn_new_of(&self, entry: &Entry) -> Option<(FlowKey, u16)> {
        TrdHandler::conn_new_of(entry)
    }

    fn take_conn_release(&mut self, now: Nanos) -> Vec<(FlowKey, u16)> {
        TrdHandler::take_conn_release(self, now)
    }

    fn release_acked(&mut self, idx: u16) -> bool {
        TrdHandler::release_acked(self, idx)
    }

    /// A crash loses every connection and the slice (the controller
    /// assigns one again; switch entries of lost connections age out).
    fn reset(&mut self) {
        self.conns.clear();
        self.by_idx.clear();
        self.closing.clear();
        self.slice = None;
    }

    fn counters(&self) -> Vec<(String, u64)> {
        let s = self.stats;
        vec![
            ("opened".into(), s.opened),
            ("allocated".into(), s.allocated),
            ("freed".into(), s.freed),
            ("no_pool".into(), s.no_pool),
            ("exhausted".into(), s.exhausted),
            ("table_full".into(), s.table_full),
            ("untracked".into(), s.untracked),
            ("retx_flagged".into(), s.retx_flagged),
            ("retx_software".into(), s.retx_software),
            ("dup_syn".into(), s.dup_syn),
            ("reopened".into(), s.reopened),
            ("closing".into(), s.closing),
            ("release_sent".into(), s.release_sent),
            ("released".into(), s.released),
            ("ack_unknown".into(), s.ack_unknown),
            ("expired".into(), s.expired),
            ("forgotten".into(), s.forgotten),
            ("malformed".into(), s.malformed),
            ("pool_assigned".into(), s.pool_assigned),
            ("pool_refused".into(), s.pool_refused),
            ("conns".into(), self.conns.len() as u64),
            ("indices_in_use".into(), self.by_idx.len() as u64),
        ]
    }
}

// ---------------------------------------------------------------------------
// Switch half
// ---------------------------------------------------------------------------

pub use switch_half::*;

mod switch_half {
    //! The switch half: `conn_idx`, `max_end`, `retx_cnt`,
    //! `pre_processing`, `post_processing`.
    //!
    //! Register accesses per pass (§5.8): the ORIGINAL pass touches
    //! `max_end` once (CHECK) and `retx_cnt` at most once (`++`), both in
    //! `pre_processing`; the RESPONSE pass touches `max_end` at most once
    //! (INIT or MAX_UPDATE) and `retx_cnt` at most once, both in
    //! `post_processing`. `post_processing` on the FAST path touches
    //! nothing. The two passes are exclusive branches of one program, so
    //! each array is one stage reachable by both (declared after
    //! `conn_idx`, whose result indexes it on the ORIGINAL pass).

    use super::*;
    use inca_apps::headers::Parsed;
    use inca_switch::{
        AccessError, ArrayDecl, ControlPlane, DataPlane, Declare, DeclareError, ObjectId,
        RegisterHandle,
    };

    use super::segment::Segment;
    use crate::app::{Entry, PostPath, PreOutcome, SwitchApp};
    use crate::apps::table::FlowTable;

    /// The switch half.
    #[derive(Debug, Clone)]
    pub struct TrdSwitch {
        conns: u32,
        table: FlowTable<2>,
        max_end: Option<RegisterHandle<u32>>,
        retx_cnt: Option<RegisterHandle<u32>>,
        /// This pass's segment's `parsed_len` (0: none), as parser
        /// metadata: `pre` sets it, the request's shim reads it.
        parsed: u16,
    }

    impl TrdSwitch {
        /// With R = `conns` (1..=65,536): `conn_idx` entries and register
        /// cells.
        pub fn new(conns: u32) -> Self {
            let conns = conns.clamp(1, CONNS);
            TrdSwitch {
                conns,
                table: FlowTable::new("conn_idx", conns as usize),
                max_end: None,
                retx_cnt: None,
                parsed: 0,
            }
        }

        /// R.
        pub fn conns(&self) -> u32 {
            self.conns
        }

        /// The registers `max_end` and `retx_cnt` (after declaration), for
        /// reading them (tests, the controller's reports).
        pub fn registers(&self) -> Option<(RegisterHandle<u32>, RegisterHandle<u32>)> {
            Some((self.max_end?, self.retx_cnt?))
        }

        /// `conn_idx` (after declaration), for reading its entries
        /// (checks).
        pub fn conn_table(&self) -> Option<inca_switch::TableHandle<[u8; 2]>> {
            self.table.handle()
        }

        fn segment(p: &Parsed, header: &[u8]) -> Option<Segment> {
            segment::of_frame(p.ipv4, usize::from(p.l3), header)
        }

        /// The index an entry or a response names, if it is a cell.
        fn cell(&self, idx: u16) -> Option<u64> {
            (u32::from(idx) < self.conns && idx != NO_IDX).then_some(u64::from(idx))
        }
    }

    impl Default for TrdSwitch {
        fn default() -> Self {
            TrdSwitch::new(CONNS)
        }
    }

    impl SwitchApp for TrdSwitch {
        fn app_id(&self) -> u8 {
            APP_ID
        }

        fn name(&self) -> &'static str {
            "trd"
        }

        fn params_len(&self) -> usize {
            PARAMS_LEN
        }

        /// CHECK and `++` never turn a fast-path packet into a flight:
        /// only `conn_idx`'s hit or miss does.
        fn flight_deciders(&self) -> Option<Vec<ObjectId>> {
            Some(self.table.id().into_iter().collect())
        }

        fn declare(&mut self, d: &mut Declare) -> Result<(), DeclareError> {
            self.table.declare(d)?;
            let after: Vec<_> = self.table.id().into_iter().collect();
            let max_end =
                d.register::<u32>(ArrayDecl::new("max_end", self.conns as usize).after(&after))?;
            // `++` only when CHECK flagged: after max_end.
            let retx_cnt = d.register::<u32>(
                ArrayDecl::new("retx_cnt", self.conns as usize).after(&[max_end.id()]),
            )?;
            self.max_end = Some(max_end);
            self.retx_cnt = Some(retx_cnt);
            Ok(())
        }

        /// The inner key of a TCP segment (VXLAN: VNI + inner 5-tuple);
        /// anything else the default key (it never flies).
        fn flow_key(&self, p: &Parsed, header: &[u8]) -> FlowKey {
            match TrdSwitch::segment(p, header) {
                Some(s) => s.flow,
                None => FlowKey::of_parsed(p, 0),
            }
        }

        /// Through the TCP header (inner, for VXLAN): 90 for VXLAN, 40
        /// for plain TCP without options. `pre` read the segment from the
        /// header window this pass (it runs first); this is its length.
        /// (A packet without a segment never flies: 0.)
        fn parsed_len(&self, _p: &Parsed) -> u16 {
            self.parsed
        }

        fn pre(
            &mut self,
            p: &Parsed,
            header: &[u8],
            dp: &mut DataPlane<'_>,
            req: &mut [u8],
            _res: &mut [u8],
        ) -> Result<PreOutcome, AccessError> {
            let seg = TrdSwitch::segment(p, header);
            self.parsed = seg.map_or(0, |s| s.parsed_len);
            let Some(seg) = seg else {
                return Ok(PreOutcome::default());
            };
            let flight = PreOutcome {
                flight: true,
                ..PreOutcome::default()
            };
            if seg.is_control() {
                TrdReq::of(&seg).write(req);
                return Ok(flight);
            }
            let Some(idx) = self.table.lookup(dp, &seg.flow.0)? else {
                TrdReq::of(&seg).write(req);
                return Ok(flight);
            };
            let (Some(cell), Some(max_end), Some(retx_cnt), true) = (
                self.cell(u16::from_be_bytes(idx)),
                self.max_end,
                self.retx_cnt,
                seg.payload_len > 0,
            ) else {
                return Ok(PreOutcome::default());
            };
            // CHECK: at or below the highest end seen is a retransmission;
            // otherwise the new end is stored.
            let end = seg.seq_end;
            let flagged = dp.register(max_end, cell, |m| {
                if serial_le(end, *m) {
                    true
                } else {
                    *m = end;
                    false
                }
            })?;
            if flagged {
                dp.register(retx_cnt, cell, |c| *c = c.saturating_add(1))?;
            }
            Ok(PreOutcome::default())
        }

        fn post(
            &mut self,
            _p: &Parsed,
            _header: &mut [u8],
            res: Option<&[u8]>,
            path: PostPath,
            dp: &mut DataPlane<'_>,
        ) -> Result<(), AccessError> {
            if path != PostPath::Response {
                return Ok(());
            }
            let Some(r) = res.and_then(TrdRes::read) else {
                return Ok(());
            };
            let (Some(cell), Some(max_end), Some(retx_cnt)) =
                (self.cell(r.idx), self.max_end, self.retx_cnt)
            else {
                return Ok(());
            };
            match r.op {
                Op::Init => dp.register(max_end, cell, |m| *m = r.init_end)?,
                Op::MaxUpdate => dp.register(max_end, cell, |m| *m = serial_max(*m, r.seq_end))?,
                Op::None => {}
            }
            let retx = u32::from(r.retx);
            if r.op == Op::Init {
                dp.register(retx_cnt, cell, |c| *c = retx)?;
            } else if r.retx {
                dp.register(retx_cnt, cell, |c| *c = c.saturating_add(1))?;
            }
            Ok(())
        }

        fn install(&self, cp: &mut ControlPlane<'_>, e: &Entry) -> Option<u64> {
            let (_, idx) = TrdHandler::conn_new_of(e)?;
            self.cell(idx)?;
            self.table.install(cp, e)
        }

        fn uninstall(&self, cp: &mut ControlPlane<'_>, table: u8, key: &[u8]) -> Option<u64> {
            (table == TABLE_CONN_IDX)
                .then(|| self.table.uninstall(cp, key))
                .flatten()
        }

        fn poll(&self, cp: &mut ControlPlane<'_>, table: u8, key: &[u8]) -> Option<u64> {
            (table == TABLE_CONN_IDX)
                .then(|| self.table.poll(cp, key))
                .flatten()
        }
    }
}
