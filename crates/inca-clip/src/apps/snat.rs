//! SNAT, state-heavy source NAT (spec §7.1, §4.3, app 3): `nat_table`,
//! FlowKey → (`pub_ip`, `pub_port`), `mirrored` and `promotable`.
//! Translations are created on the slow path by the server that sees the
//! flow's first packet, from the pool slice the controller assigned it,
//! then cached in the switch by promotion.
//!
//! Params (P = 16): request `flow: FlowKey` (128 bits); response
//! `pub_ip: 32, pub_port: 16`, then `dir: 8` [our choice].
//!
//! Inbound (§7.1, "not in the paper" [our choice there]): a packet to an
//! address and port of a server's pool slice is a reply to a translated
//! flow. The switch's range table `snat_owner` (`pool_ip ‖ port` →
//! server, one entry per slice) names the server as the app hint, the
//! request's flow carries `ctx` = [`INBOUND_CTX`], and the server answers
//! from its reverse map (reply 5-tuple → inside endpoint) with `dir` = 1:
//! `post_processing` rewrites the destination instead of the source. An
//! inbound miss is answered DROP. Inbound replies are never promoted (the
//! switch table holds outbound translations only), so they always take
//! the slow path to the slice's owner, whatever the group.

// ---------------------------------------------------------------------------
// Server half
// ---------------------------------------------------------------------------
//
// Allocation uses this crate's [`SlicePool`], not
// `inca_apps::core::nat::Allocator`: that allocator never frees and hands
// out ports 1024..=65535 of consecutive addresses, while a CLIP server owns
// one address's ports `lo..=hi` (POOL_ASSIGN) and must free a port when its
// flow expires (§7.1, §9 item 8). The public endpoint is
// `inca_apps::core::Endpoint`.

use hashbrown::HashMap;
use inca_apps::core::Endpoint;

use super::{request_flow, write_response};
use crate::app::{Entry, HandlerCtx, HandlerStatus, RemoteHandler};
use crate::flow::{FlowKey, FLOW_KEY_LEN};
use crate::server::SlicePool;

/// SNAT's `app_id`.
pub const APP_ID: u8 = 3;
/// SNAT's params region: max(128, 32 + 16) bits, rounded up to words.
pub const PARAMS_LEN: usize = crate::app::params_len(128, 32 + 16);
/// `nat_table`'s id.
pub const TABLE_NAT: u8 = 0;
/// The action of its entries, `set_res(pub_ip, pub_port)`; data is
/// `pub_ip ‖ pub_port` (6 bytes).
pub const ACTION_SET_RES: u8 = 1;
/// POOL_ASSIGN's kind for SNAT ports.
pub const POOL_PORTS: u8 = 1;
/// The mirrored table's default capacity (§3.2: 1,048,576 entries).
pub const DEFAULT_CAPACITY: usize = 1_048_576;
/// The request flow's `ctx` on an inbound request [our choice: SNAT keys
/// have `ctx` 0 otherwise].
pub const INBOUND_CTX: u32 = 1;
/// The response's `dir` for an inbound result (rewrite the destination).
pub const DIR_INBOUND: u8 = 1;

/// What the SNAT handler did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SnatStats {
    /// Requests answered from the table.
    pub hits: u64,
    /// Translations allocated (each reported as a created entry).
    pub allocated: u64,
    /// Ports given back (flow expired, entry expired or deleted).
    pub freed: u64,
    /// Misses dropped: no pool slice assigned.
    pub no_pool: u64,
    /// Misses dropped: the slice has no free port.
    pub exhausted: u64,
    /// Misses dropped: the table is full.
    pub table_full: u64,
    /// Requests whose params are not SNAT's (answered DROP).
    pub malformed: u64,
    /// Entries installed by the controller.
    pub installed: u64,
    /// Entries refused: malformed, another table, the table full, or a
    /// port of this server's slice already in use.
    pub refused: u64,
    /// Pool slices taken.
    pub pool_assigned: u64,
    /// Pool assignments refused (another kind, or not a port range).
    pub pool_refused: u64,
    /// Inbound requests answered from the reverse map.
    pub inbound_hits: u64,
    /// Inbound requests for no known translation (answered DROP).
    pub inbound_misses: u64,
}

/// One translation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Mapping {
    public: Endpoint,
    /// The port is from this server's slice: free it when the flow goes.
    owned: bool,
}

/// This server's slice: one public address, ports `lo..=hi`.
#[derive(Debug, Clone)]
struct PortSlice {
    ip: [u8; 4],
    ports: SlicePool,
}

impl PortSlice {
    fn owns(&self, e: Endpoint) -> bool {
        e.ip == self.ip && self.ports.contains(u32::from(e.port))
    }
}

/// SNAT's remote handler. See the module documentation.
#[derive(Debug, Clone)]
pub struct SnatHandler {
    table: HashMap<FlowKey, Mapping>,
    /// Reply 5-tuple → inside endpoint, for every translation held.
    reverse: HashMap<FlowKey, Endpoint>,
    capacity: usize,
    slice: Option<PortSlice>,
    stats: SnatStats,
}

impl Default for SnatHandler {
    fn default() -> Self {
        SnatHandler::new(DEFAULT_CAPACITY)
    }
}

impl SnatHandler {
    /// A handler whose `nat_table` holds at most `capacity` translations.
    pub fn new(capacity: usize) -> Self {
        SnatHandler {
            table: HashMap::new(),
            reverse: HashMap::new(),
            capacity,
            slice: None,
            stats: SnatStats::default(),
        }
    }

    /// The `nat_table` entry translating `flow` to `public` (what
    /// ENTRY_CREATED and MIRROR_INSERT carry).
    pub fn entry(flow: FlowKey, public: Endpoint) -> Entry {
        Entry {
            table: TABLE_NAT,
            key: flow.0.to_vec(),
            action: ACTION_SET_RES,
            data: public.to_bytes().to_vec(),
        }
    }

    /// The key of the replies to `flow` translated to `public`: from its
    /// remote end to the public endpoint.
    pub fn reply_key(flow: &FlowKey, public: Endpoint) -> FlowKey {
        FlowKey::new(
            0,
            flow.proto(),
            flow.dst(),
            public.ip,
            flow.dport(),
            public.port,
        )
    }

    /// The inside endpoint replies with key `reply` go to, if any.
    pub fn inside_of(&self, reply: &FlowKey) -> Option<Endpoint> {
        self.reverse.get(reply).copied()
    }

    /// Holds `flow` → `m` and its reply mapping.
    fn hold(&mut self, flow: FlowKey, m: Mapping) {
        self.reverse.insert(
            SnatHandler::reply_key(&flow, m.public),
            Endpoint::new(flow.src(), flow.sport()),
        );
        self.table.insert(flow, m);
    }

    /// The translation of `flow`, if any.
    pub fn lookup(&self, flow: &FlowKey) -> Option<Endpoint> {
        self.table.get(flow).map(|m| m.public)
    }

    /// Translations held.
    pub fn len(&self) -> usize {
        self.table.len()
    }

    /// No translation held.
    pub fn is_empty(&self) -> bool {
        self.table.is_empty()
    }

    /// Ports of this server's slice in use.
    pub fn ports_in_use(&self) -> usize {
        self.slice.as_ref().map_or(0, |s| s.ports.in_use())
    }

    /// The counters.
    pub fn stats(&self) -> &SnatStats {
        &self.stats
    }

    /// Removes the translation of `flow`, giving its port back if it is
    /// this server's.
    fn remove(&mut self, flow: &FlowKey) {
        let Some(m) = self.table.remove(flow) else {
            return;
        };
        self.reverse.remove(&SnatHandler::reply_key(flow, m.public));
        self.give_back(m);
    }

    fn give_back(&mut self, m: Mapping) {
        if let (true, Some(s)) = (m.owned, self.slice.as_mut()) {
            if s.owns(m.public) && s.ports.release(u32::from(m.public.port)) {
                self.stats.freed += 1;
            }
        }
    }
}

/// The response: `pub_ip` then `pub_port` (`dir` 0: outbound).
fn respond(params: &mut [u8], e: Endpoint) {
    write_response(params, &[&e.ip, &e.port.to_be_bytes()]);
}

/// The inbound response: the inside endpoint, `dir` = [`DIR_INBOUND`].
fn respond_inbound(params: &mut [u8], e: Endpoint) {
    write_response(params, &[&e.ip, &e.port.to_be_bytes(), &[DIR_INBOUND]]);
}

impl RemoteHandler for SnatHandler {
    fn app_id(&self) -> u8 {
        APP_ID
    }

    fn params_len(&self) -> usize {
        PARAMS_LEN
    }

    /// A known flow gets its translation; a new one a port of this
    /// server's slice, reported as a created entry. No slice, no free
    /// port or a full table: DROP (the flow cannot be translated).
    fn handle(&mut self, ctx: &mut HandlerCtx<'_>, params: &mut [u8]) -> HandlerStatus {
        let Some(flow) = request_flow(params, PARAMS_LEN) else {
            self.stats.malformed += 1;
            return HandlerStatus::Drop;
        };
        if flow.ctx() == INBOUND_CTX {
            let reply = FlowKey::new(
                0,
                flow.proto(),
                flow.src(),
                flow.dst(),
                flow.sport(),
                flow.dport(),
            );
            return match self.reverse.get(&reply) {
                Some(&inside) => {
                    self.stats.inbound_hits += 1;
                    respond_inbound(params, inside);
                    HandlerStatus::Ok
                }
                None => {
                    self.stats.inbound_misses += 1;
                    HandlerStatus::Drop
                }
            };
        }
        if let Some(m) = self.table.get(&flow) {
            self.stats.hits += 1;
            respond(params, m.public);
            return HandlerStatus::Ok;
        }
        let Some(slice) = self.slice.as_mut() else {
            self.stats.no_pool += 1;
            return HandlerStatus::Drop;
        };
        if self.table.len() >= self.capacity {
            self.stats.table_full += 1;
            return HandlerStatus::Drop;
        }
        // Ports are ≤ 65535: pool_assign refuses wider slices.
        let Some(port) = slice.ports.allocate().and_then(|p| u16::try_from(p).ok()) else {
            self.stats.exhausted += 1;
            return HandlerStatus::Drop;
        };
        let public = Endpoint::new(slice.ip, port);
        self.hold(
            flow,
            Mapping {
                public,
                owned: true,
            },
        );
        ctx.created.push(SnatHandler::entry(flow, public));
        self.stats.allocated += 1;
        respond(params, public);
        HandlerStatus::Ok
    }

    /// A controller-installed translation. One whose port is in this
    /// server's slice is this server's (marked in use, freed when the
    /// flow goes); one that would reuse a port in use is refused.
    fn mirror_insert(&mut self, entry: Entry) {
        let key: Option<[u8; FLOW_KEY_LEN]> = entry.key.as_slice().try_into().ok();
        let public = Endpoint::from_bytes(&entry.data).filter(|_| entry.data.len() == 6);
        let (Some(key), Some(public), TABLE_NAT) = (key, public, entry.table) else {
            self.stats.refused += 1;
            return;
        };
        let flow = FlowKey(key);
        if self.table.get(&flow).is_some_and(|m| m.public == public) {
            return;
        }
        if !self.table.contains_key(&flow) && self.table.len() >= self.capacity {
            self.stats.refused += 1;
            return;
        }
        self.remove(&flow);
        let owned = match self.slice.as_mut() {
            Some(s) if s.owns(public) => {
                if !s.ports.mark_used(u32::from(public.port)) {
                    self.stats.refused += 1;
                    return;
                }
                true
            }
            _ => false,
        };
        self.hold(flow, Mapping { public, owned });
        self.stats.installed += 1;
    }

    fn mirror_delete(&mut self, table: u8, key: &[u8]) {
        if let (TABLE_NAT, Ok(k)) = (table, <[u8; FLOW_KEY_LEN]>::try_from(key)) {
            self.remove(&FlowKey(k));
        }
    }

    /// The switch copy aged out (the flow is dead, T_age = T_exp): the
    /// server's copy goes and its port is freed.
    fn expire(&mut self, table: u8, key: &[u8]) {
        self.mirror_delete(table, key);
    }

    /// Kind 1 only: `base_ip`, ports `lo..=hi` (1 ≤ lo ≤ hi ≤ 65535). The
    /// same slice again changes nothing; a new one replaces it, its ports
    /// held by live translations staying in use.
    fn pool_assign(&mut self, kind: u8, base_ip: [u8; 4], lo: u32, hi: u32) {
        if kind != POOL_PORTS || lo == 0 || hi > u32::from(u16::MAX) {
            self.stats.pool_refused += 1;
            return;
        }
        let Some(mut ports) = SlicePool::new(lo, hi) else {
            self.stats.pool_refused += 1;
            return;
        };
        if self
            .slice
            .as_ref()
            .is_some_and(|s| s.ip == base_ip && s.ports.bounds() == (lo, hi))
        {
            return;
        }
        // Marking is a set insert per live port: the map's order does not
        // matter.
        for m in self.table.values_mut() {
            m.owned = m.public.ip == base_ip && ports.mark_used(u32::from(m.public.port));
        }
        self.slice = Some(PortSlice { ip: base_ip, ports });
        self.stats.pool_assigned += 1;
    }

    /// The flow's server state expired: a translation this server made is
    /// removed and its port freed. One the controller installed from
    /// another server's slice stays until the controller deletes it.
    fn flow_expired(&mut self, flow: &FlowKey) {
        if self.table.get(flow).is_some_and(|m| m.owned) {
            self.remove(flow);
        }
    }

    /// A crash loses the table and the slice (the controller assigns one
    /// again when the server registers).
    fn reset(&mut self) {
        self.table.clear();
        self.reverse.clear();
        self.slice = None;
    }

    fn counters(&self) -> Vec<(String, u64)> {
        let s = self.stats;
        vec![
            ("hits".into(), s.hits),
            ("allocated".into(), s.allocated),
            ("freed".into(), s.freed),
            ("no_pool".into(), s.no_pool),
            ("exhausted".into(), s.exhausted),
            ("table_full".into(), s.table_full),
            ("malformed".into(), s.malformed),
            ("installed".into(), s.installed),
            ("refused".into(), s.refused),
            ("pool_assigned".into(), s.pool_assigned),
            ("pool_refused".into(), s.pool_refused),
            ("inbound_hits".into(), s.inbound_hits),
            ("inbound_misses".into(), s.inbound_misses),
            ("mappings".into(), self.table.len() as u64),
            ("ports_in_use".into(), self.ports_in_use() as u64),
        ]
    }
}

#[cfg(test)]
mod server_tests {
    use super::*;

    const IP: [u8; 4] = [198, 51, 100, 7];

    fn key(n: u16) -> FlowKey {
        FlowKey::new(0, 6, [10, 0, 0, 1], [10, 9, 9, 9], n, 443)
    }

    /// Calls the handler for `flow`; the status, the response and the
    /// entries created.
    fn call(h: &mut SnatHandler, flow: FlowKey) -> (HandlerStatus, [u8; 16], Vec<Entry>) {
        let mut created = Vec::new();
        let mut ctx = HandlerCtx {
            now: 0,
            server_id: 1,
            core: 0,
            flow,
            payload: &[],
            created: &mut created,
        };
        let mut p = flow.0;
        let s = h.handle(&mut ctx, &mut p);
        (s, p, created)
    }

    fn res(port: u16) -> [u8; 16] {
        let mut r = [0u8; 16];
        r[..4].copy_from_slice(&IP);
        r[4..6].copy_from_slice(&port.to_be_bytes());
        r
    }

    #[test]
    fn a_miss_allocates_reports_and_then_hits() {
        assert_eq!(PARAMS_LEN, 16);
        let mut h = SnatHandler::default();
        h.pool_assign(POOL_PORTS, IP, 5000, 5009);
        let (s, p, created) = call(&mut h, key(1));
        assert_eq!((s, p), (HandlerStatus::Ok, res(5000)));
        assert_eq!(
            created,
            vec![Entry {
                table: TABLE_NAT,
                key: key(1).0.to_vec(),
                action: ACTION_SET_RES,
                data: vec![198, 51, 100, 7, 0x13, 0x88],
            }]
        );
        let (s, p, created) = call(&mut h, key(1));
        assert_eq!((s, p), (HandlerStatus::Ok, res(5000)));
        assert!(created.is_empty(), "a hit creates nothing");
        assert_eq!(call(&mut h, key(2)).1, res(5001));
        assert_eq!((h.stats().allocated, h.stats().hits), (2, 1));
        assert_eq!(h.ports_in_use(), 2);
    }

    #[test]
    fn an_inbound_request_is_answered_from_the_reverse_map() {
        let mut h = SnatHandler::default();
        h.pool_assign(POOL_PORTS, IP, 5000, 5009);
        call(&mut h, key(1));
        let reply = SnatHandler::reply_key(&key(1), Endpoint::new(IP, 5000));
        assert_eq!(reply, FlowKey::new(0, 6, [10, 9, 9, 9], IP, 443, 5000));
        let inbound = |k: FlowKey| {
            let mut k = k;
            k.0[..3].copy_from_slice(&INBOUND_CTX.to_be_bytes()[1..]);
            k
        };
        let (s, p, created) = call(&mut h, inbound(reply));
        let mut want = [0u8; 16];
        want[..4].copy_from_slice(&[10, 0, 0, 1]);
        want[4..6].copy_from_slice(&1u16.to_be_bytes());
        want[6] = DIR_INBOUND;
        assert_eq!((s, p), (HandlerStatus::Ok, want));
        assert!(created.is_empty(), "an inbound request allocates nothing");
        // An unknown reply is dropped, and allocates nothing either.
        let stray = FlowKey::new(0, 6, [10, 9, 9, 9], IP, 443, 5001);
        assert_eq!(call(&mut h, inbound(stray)).0, HandlerStatus::Drop);
        assert_eq!((h.stats().inbound_hits, h.stats().inbound_misses), (1, 1));
        assert_eq!(h.ports_in_use(), 1);
        // The reverse entry goes with the translation.
        h.flow_expired(&key(1));
        assert_eq!(h.inside_of(&reply), None);
        assert_eq!(call(&mut h, inbound(reply)).0, HandlerStatus::Drop);
    }

    #[test]
    fn no_slice_exhaustion_and_a_full_table_drop() {
        let mut h = SnatHandler::new(3);
        let (s, p, _) = call(&mut h, key(1));
        assert_eq!((s, p), (HandlerStatus::Drop, key(1).0));
        assert_eq!(h.stats().no_pool, 1);
        h.pool_assign(POOL_PORTS, IP, 7, 8);
        assert_eq!(call(&mut h, key(1)).0, HandlerStatus::Ok);
        assert_eq!(call(&mut h, key(2)).0, HandlerStatus::Ok);
        assert_eq!(call(&mut h, key(3)).0, HandlerStatus::Drop);
        assert_eq!(h.stats().exhausted, 1);
        h.pool_assign(POOL_PORTS, IP, 7, 20);
        assert_eq!(call(&mut h, key(3)).1, res(9), "7 and 8 stay in use");
        assert_eq!(call(&mut h, key(4)).0, HandlerStatus::Drop);
        assert_eq!(h.stats().table_full, 1);
    }

    #[test]
    fn expiry_frees_ports_for_reuse_oldest_first() {
        let mut h = SnatHandler::default();
        h.pool_assign(POOL_PORTS, IP, 100, 102);
        for n in 1..=3 {
            call(&mut h, key(n));
        }
        h.flow_expired(&key(2));
        h.expire(TABLE_NAT, &key(1).0);
        assert_eq!(h.stats().freed, 2);
        assert_eq!(h.lookup(&key(2)), None);
        // Port 101 was freed first.
        assert_eq!(call(&mut h, key(9)).1, res(101));
        assert_eq!(call(&mut h, key(8)).1, res(100));
        assert_eq!(h.ports_in_use(), 3);
        // Unknown flows and malformed keys change nothing.
        h.flow_expired(&key(77));
        h.expire(TABLE_NAT, &[1, 2, 3]);
        h.expire(5, &key(9).0);
        assert_eq!(h.len(), 3);
    }

    #[test]
    fn controller_entries_own_their_ports_only_in_this_slice() {
        let mut h = SnatHandler::default();
        h.pool_assign(POOL_PORTS, IP, 100, 101);
        // Another server's translation: kept on flow expiry.
        let other = Endpoint::new([198, 51, 100, 8], 100);
        h.mirror_insert(SnatHandler::entry(key(1), other));
        h.flow_expired(&key(1));
        assert_eq!(h.lookup(&key(1)), Some(other));
        // One of this slice: the port is in use, then freed.
        h.mirror_insert(SnatHandler::entry(key(2), Endpoint::new(IP, 100)));
        assert_eq!(call(&mut h, key(3)).1, res(101));
        assert_eq!(call(&mut h, key(4)).0, HandlerStatus::Drop);
        // A second flow on a port in use is refused.
        h.mirror_insert(SnatHandler::entry(key(5), Endpoint::new(IP, 101)));
        assert_eq!(h.lookup(&key(5)), None);
        h.mirror_delete(TABLE_NAT, &key(2).0);
        assert_eq!(call(&mut h, key(4)).1, res(100));
        assert_eq!(h.stats().refused, 1);
    }

    #[test]
    fn malformed_input_is_refused_without_panics() {
        let mut h = SnatHandler::default();
        for (kind, lo, hi) in [(2, 1, 10), (1, 0, 10), (1, 10, 9), (1, 1, 65_536)] {
            h.pool_assign(kind, IP, lo, hi);
        }
        assert_eq!(h.stats().pool_refused, 4);
        h.pool_assign(POOL_PORTS, IP, 65_535, 65_535);
        assert_eq!(h.stats().pool_assigned, 1);
        h.pool_assign(POOL_PORTS, IP, 65_535, 65_535);
        assert_eq!(
            h.stats().pool_assigned,
            1,
            "the same slice again is a no-op"
        );
        for len in [0usize, 6, 15, 17] {
            let mut created = Vec::new();
            let mut ctx = HandlerCtx {
                now: 0,
                server_id: 1,
                core: 0,
                flow: key(0),
                payload: &[],
                created: &mut created,
            };
            let mut p = vec![0xEE; len];
            assert_eq!(h.handle(&mut ctx, &mut p), HandlerStatus::Drop);
            assert_eq!(p, vec![0xEE; len]);
        }
        assert_eq!(h.stats().malformed, 4);
        for bad in [
            Entry {
                data: vec![1, 2, 3],
                ..SnatHandler::entry(key(1), Endpoint::new(IP, 1))
            },
            Entry {
                key: vec![1],
                ..SnatHandler::entry(key(1), Endpoint::new(IP, 1))
            },
            Entry {
                table: 1,
                ..SnatHandler::entry(key(1), Endpoint::new(IP, 1))
            },
        ] {
            h.mirror_insert(bad);
        }
        assert_eq!((h.stats().refused, h.len()), (3, 0));
        assert_eq!(call(&mut h, key(1)).1, res(65_535));
        h.reset();
        assert_eq!((h.len(), h.ports_in_use()), (0, 0));
        assert_eq!(call(&mut h, key(1)).0, HandlerStatus::Drop);
    }
}

// ---------------------------------------------------------------------------
// Switch half
// ---------------------------------------------------------------------------

pub use switch_half::*;

mod switch_half {
    //! The switch half: tables, `pre_processing`, `post_processing`.

    use super::*;
    use inca_apps::core::nat::{self as core, Direction};
    use inca_apps::core::Endpoint;
    use inca_apps::headers::Parsed;
    use inca_switch::{
        AccessError, ControlPlane, DataPlane, Declare, DeclareError, MatchKind, MatchSpec,
        TableDecl, TableHandle,
    };

    use crate::app::{Entry, PostPath, PreOutcome, SwitchApp};
    use crate::apps::table::FlowTable;

    /// Default switch-table capacity (1,024 [our choice, §7.1]).
    pub const SWITCH_ENTRIES: usize = 1024;

    /// Most pool slices the `snat_owner` range table holds (one per
    /// server, §2: up to 127 servers).
    pub const MAX_OWNERS: usize = 128;

    /// A server's pool slice, as the switch's `snat_owner` table maps it:
    /// replies to `ip` and a port in `lo..=hi` go to `server`.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct PoolOwner {
        /// The server.
        pub server: u8,
        /// The slice's public address.
        pub ip: [u8; 4],
        /// First port.
        pub lo: u16,
        /// Last port.
        pub hi: u16,
    }

    /// The switch half.
    #[derive(Debug, Clone)]
    pub struct SnatSwitch {
        table: FlowTable<6>,
        owners: Vec<PoolOwner>,
        owner_table: Option<TableHandle<u8>>,
    }

    impl SnatSwitch {
        /// With a switch table of `capacity` entries, outbound only.
        pub fn new(capacity: usize) -> Self {
            SnatSwitch {
                table: FlowTable::new("nat_table", capacity),
                owners: Vec::new(),
                owner_table: None,
            }
        }

        /// The same with the servers' pool slices, so replies to them are
        /// translated back (the inbound direction; at most
        /// [`MAX_OWNERS`], the rest ignored).
        pub fn with_owners(mut self, mut owners: Vec<PoolOwner>) -> Self {
            owners.truncate(MAX_OWNERS);
            self.owners = owners;
            self
        }

        /// `ip ‖ port`, the `snat_owner` key.
        fn owner_key(ip: [u8; 4], port: u16) -> [u8; 6] {
            let mut k = [0u8; 6];
            k[..4].copy_from_slice(&ip);
            k[4..].copy_from_slice(&port.to_be_bytes());
            k
        }
    }

    impl SwitchApp for SnatSwitch {
        fn app_id(&self) -> u8 {
            APP_ID
        }

        fn name(&self) -> &'static str {
            "snat"
        }

        fn params_len(&self) -> usize {
            PARAMS_LEN
        }

        fn declare(&mut self, d: &mut Declare) -> Result<(), DeclareError> {
            self.table.declare(d)?;
            // Only when slices are configured, so the outbound-only
            // program's resources stay as they were.
            if let (false, Some(after)) = (self.owners.is_empty(), self.table.id()) {
                let t = TableDecl::new("snat_owner", MatchKind::Range, 6, 8, MAX_OWNERS)
                    .after(&[after]);
                self.owner_table = Some(d.table(t)?);
            }
            Ok(())
        }

        fn start(&self, cp: &mut ControlPlane<'_>) {
            let Some(h) = self.owner_table else {
                return;
            };
            for o in &self.owners {
                let spec = MatchSpec::Range {
                    lo: SnatSwitch::owner_key(o.ip, o.lo).to_vec().into(),
                    hi: SnatSwitch::owner_key(o.ip, o.hi).to_vec().into(),
                    priority: 0,
                };
                cp.table_add(h, spec, o.server);
            }
        }

        fn pre(
            &mut self,
            p: &Parsed,
            header: &[u8],
            dp: &mut DataPlane<'_>,
            req: &mut [u8],
            res: &mut [u8],
        ) -> Result<PreOutcome, AccessError> {
            // TCP and UDP only; anything else is forwarded untouched.
            if core::flow(p).is_none() || p.icmp_echo.is_some() {
                return Ok(PreOutcome::default());
            }
            let key = self.flow_key(p, header);
            if let Some(t) = self.table.lookup(dp, &key.0)? {
                res[..6].copy_from_slice(&t);
                return Ok(PreOutcome {
                    res_set: true,
                    ..PreOutcome::default()
                });
            }
            req[..16].copy_from_slice(&key.0);
            // A reply to a pool slice: to the slice's owner, marked inbound.
            let owner = match self.owner_table {
                Some(h) => dp.lookup(h, &SnatSwitch::owner_key(p.dst, p.dport))?,
                None => None,
            };
            if let Some(server) = owner {
                req[..3].copy_from_slice(&INBOUND_CTX.to_be_bytes()[1..]);
                return Ok(PreOutcome {
                    flight: true,
                    hint: Some(server),
                    ..PreOutcome::default()
                });
            }
            Ok(PreOutcome {
                flight: true,
                ..PreOutcome::default()
            })
        }

        fn post(
            &mut self,
            p: &Parsed,
            header: &mut [u8],
            res: Option<&[u8]>,
            _path: PostPath,
            _dp: &mut DataPlane<'_>,
        ) -> Result<(), AccessError> {
            let Some(r) = res.filter(|r| r.len() >= 6) else {
                return Ok(());
            };
            if !p.has_ports {
                return Ok(());
            }
            let to = Endpoint::new([r[0], r[1], r[2], r[3]], u16::from_be_bytes([r[4], r[5]]));
            let dir = match r.get(6) {
                Some(&DIR_INBOUND) => Direction::Inbound,
                _ => Direction::Outbound,
            };
            core::translate(header, p, dir, to);
            Ok(())
        }

        fn promotable(&self) -> bool {
            true
        }

        fn switch_capacity(&self) -> usize {
            self.table.capacity()
        }

        fn install(&self, cp: &mut ControlPlane<'_>, e: &Entry) -> Option<u64> {
            (e.table == 0).then(|| self.table.install(cp, e)).flatten()
        }

        fn uninstall(&self, cp: &mut ControlPlane<'_>, table: u8, key: &[u8]) -> Option<u64> {
            (table == 0)
                .then(|| self.table.uninstall(cp, key))
                .flatten()
        }

        fn poll(&self, cp: &mut ControlPlane<'_>, table: u8, key: &[u8]) -> Option<u64> {
            (table == 0).then(|| self.table.poll(cp, key)).flatten()
        }
    }
}
