//! A NetCache-style in-network cache (Jin et al., SOSP 2017): the switch
//! serves reads of hot keys from a value store in register arrays; misses
//! and writes go to the storage server; the control plane caches the keys
//! the data plane reports as hot.
//!
//! The header is the KV header of [`crate::kvstore`] (UDP port 7777, op,
//! status, id, u64 key, 16-byte value), or with `format=exo` ExoPlane's
//! NetCache header (UDP port 50000, op, seq, 128-bit key, a value of
//! `value_bytes`, 16 to 128 in steps of 16, default 128: 8 × 16 B as in
//! NetCache's Tofino prototype); see [`format`]. With the ExoPlane header
//! only requests and answers whose value field is exactly `value_bytes`
//! long use the cache (a READ carries room for the value: a switch turns
//! the request around and cannot grow it [our choice]); the rest pass
//! between clients and server untouched. The storage server sits on
//! `server_port`; clients are reached through `client_port` (the uplink of
//! a top-of-rack switch). The server answers a READ with a REPLY carrying
//! the value and an UPDATE with an ACK carrying the value written, both
//! from UDP port 7777.
//!
//! # Data plane
//!
//! Objects: `nc_cache` (exact table, key → slot, `flows` entries, written by
//! the control plane); per slot a 16-bit `nc_state` register (bit 15 =
//! valid, bits 0–14 = writes sent to the server and not yet acknowledged),
//! the value split over register arrays `nc_value0..` (four 32-bit arrays
//! per 16 bytes with the KV header, two arrays of word pairs with
//! ExoPlane's; see `values`), and a
//! 32-bit hit counter `nc_hits`; for uncached keys a count-min sketch of
//! three rows `nc_cms0..2` (32-bit entries, `sketch_width` each, indexed
//! by three hash units: CRC-32 of the key, CRC-64 of the key and CRC-32 of
//! the key's bytes reversed, so that two keys colliding in one row rarely
//! collide in another) and a
//! three-array Bloom filter `nc_bloom0..2` (8-bit entries, same indexes)
//! that reports each hot key once.
//!
//! Statistics live in epochs of `epoch_us`: a sketch entry holds an 8-bit
//! epoch tag in its top byte and a 24-bit count below; an entry whose tag
//! is not the current epoch's counts as zero (the register action resets
//! it). The Bloom filter's entries hold the tag of the epoch they were set
//! in. So the statistics reset themselves every epoch in the data plane,
//! without a slow bulk clear from the control plane.
//!
//! From a client (any port but `server_port`):
//!
//! - READ of a cached key whose slot is valid: the value words are read,
//!   the hit counter incremented, and the switch replies (REPLY, OK) out of
//!   the arrival port: no server round trip. A cached but invalid slot: the
//!   READ goes to the server.
//! - UPDATE of a cached key: the slot is invalidated and its pending-write
//!   count incremented (one register action), and the UPDATE goes to the
//!   server.
//! - READ of an uncached key: the three sketch rows are incremented; if the
//!   smallest count reaches `threshold` and the Bloom filter had not all
//!   three bits of the key set this epoch, a [`HotKey`] digest reports it.
//!   The READ goes to the server. UPDATE of an uncached key: to the server.
//!
//! From the server (`server_port`), to `client_port`:
//!
//! - ACK of a cached key: the pending count is decremented; when it reaches
//!   zero the slot becomes valid and the value in the ACK is written (the
//!   server's reply refreshes the cache).
//! - REPLY (status OK) of a cached key whose slot is invalid with no writes
//!   pending (a key just inserted by the control plane): the value is
//!   written and the slot becomes valid.
//!
//! Writes already past the switch when a key is inserted are not counted
//! as pending; the protocol is exact for writes issued after the insertion
//! (a lost UPDATE or ACK leaves the slot invalid, so its reads go to the
//! server: slower, never stale).
//!
//! Other traffic is forwarded (to the server from clients, to the clients
//! from the server). A KV datagram cut by the parse window, or with an
//! unknown op, is a parse error (counted, dropped); a REPLY or ACK sent by a
//! client is dropped.
//!
//! # Control plane
//!
//! On a [`HotKey`] digest for a key not cached it takes a free slot or,
//! when the cache is full, evicts the slot with the fewest hits in the
//! last measured epoch (slots inserted since then are not evicted; when
//! every slot is that new the key is refused). Eviction deletes the old
//! entry; then the slot's state is reset (invalid, nothing pending) and
//! the new entry added — in that order, through the FIFO operation
//! channel. The first READ of the key then goes to the server, whose REPLY
//! fills the slot. Every epoch the control plane reads the hit counters of
//! the used slots (`register_read`, paid per entry) and keeps the hits per
//! slot since the previous read.
//!
//! With `index=external` (ExoPlane, where the key index is a
//! control-plane object written only through the hub) the control plane
//! never writes the index: hot-key digests are kept in a bounded queue
//! ([`NetCache::hot_keys`]) for whoever owns it, which installs `key → slot`
//! after resetting the slot's state ([`NetCache::state_register`]).
//!
//! Parameters: `flows` (cache slots, default 65,536), `server_port`
//! (default 1), `client_port` (default 0), `sketch_width` (entries per
//! sketch row, rounded up to a power of two, at most 2³², default 65,536), `threshold` (default 128),
//! `epoch_us` (default 1,000,000), `format` (`kv` or `exo`, default `kv`),
//! `value_bytes` (`exo` only, default 128), `index` (`own` or `external`,
//! default `own`).

pub mod format;
mod values;

use std::collections::{BTreeMap, VecDeque};

use inca_switch::{
    AccessError, ArrayDecl, ControlEvent, ControlPlane, DataPlane, Declare, DeclareError, Gress,
    Handle, MatchKind, MatchSpec, Nanos, PacketCtx, ParseError, PortId, Program, RegisterHandle,
    TableDecl, TableHandle,
};

use crate::core::sketch::RowHashes;
use crate::kvstore::{index_bits, OP_ACK, OP_READ, OP_REPLY, OP_UPDATE, VALUE_WORDS};
use crate::params::{ParamError, Params};
pub use format::{CacheMeta, Format, MAX_KEY, MAX_WORDS};
use values::Values;

/// The sketch's row hashes: CRC-32, CRC-64, CRC-32 of the key reversed.
const ROW_HASHES: RowHashes = RowHashes::Reversed;
/// Rows of the count-min sketch (and hashes of the Bloom filter).
pub const SKETCH_ROWS: usize = 3;
/// Bit 15 of a slot's state: the cached value is valid.
pub const VALID: u16 = 0x8000;
/// Largest count a sketch entry holds (24 bits).
pub const COUNT_MAX: u32 = 0x00ff_ffff;
/// Timer token of the per-epoch statistics read.
const STATS_TIMER: u64 = 1;
/// Hot keys kept for an external index owner [our choice: a few epochs of
/// reports at the default threshold]; overflow is counted.
pub const HOT_QUEUE: usize = 4096;

/// A digest: an uncached key whose estimated reads this epoch reached the
/// threshold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HotKey {
    /// The key, in its first `len` bytes.
    pub key: [u8; MAX_KEY],
    /// Key bytes.
    pub len: u8,
    /// Its count-min estimate.
    pub count: u32,
}

impl HotKey {
    /// The key's bytes (as the index holds them).
    pub fn key(&self) -> &[u8] {
        &self.key[..usize::from(self.len).min(MAX_KEY)]
    }
}

/// The cache. See the module documentation.
#[derive(Debug, Clone)]
pub struct NetCache {
    flows: usize,
    server_port: PortId,
    client_port: PortId,
    sketch_width: usize,
    threshold: u32,
    epoch: Nanos,
    format: Format,
    words: usize,
    external_index: bool,
    cache: Option<TableHandle<u32>>,
    state: Option<RegisterHandle<u16>>,
    values: Values,
    hits: Option<RegisterHandle<u32>>,
    hashes: Vec<Handle>,
    cms: Vec<RegisterHandle<u32>>,
    bloom: Vec<RegisterHandle<u8>>,
    /// Control plane: the slot of every cached key.
    cached: BTreeMap<Vec<u8>, u32>,
    /// Control plane: the key in each used slot.
    slot_keys: Vec<Vec<u8>>,
    /// Hot keys for an external index owner (`index=external`).
    hot: VecDeque<HotKey>,
    /// Hit counters at the last read.
    last_hits: Vec<u32>,
    /// Hits per slot in the last measured epoch (`None`: inserted since).
    recent: Vec<Option<u32>>,
    /// Slots inserted since the last statistics read was issued.
    fresh: Vec<bool>,
    /// Request id of the statistics read in flight.
    stats_request: Option<u64>,
    /// Hot-key reports received.
    pub reports: u64,
    /// Keys inserted into the cache.
    pub insertions: u64,
    /// Keys evicted.
    pub evictions: u64,
    /// Hot keys refused (every slot too new to evict), or dropped because
    /// the external owner's queue was full.
    pub refused: u64,
}

impl NetCache {
    /// Parameter names.
    pub const PARAMS: &'static [&'static str] = &[
        "flows",
        "server_port",
        "client_port",
        "sketch_width",
        "threshold",
        "epoch_us",
        "format",
        "value_bytes",
        "index",
    ];

    /// A cache of `flows` slots, the server on `server_port`, clients on
    /// `client_port`, with default statistics (65,536-wide sketch, threshold
    /// 128, 1 s epochs).
    pub fn new(flows: usize, server_port: PortId, client_port: PortId) -> Self {
        NetCache {
            flows,
            server_port,
            client_port,
            sketch_width: 65_536,
            threshold: 128,
            epoch: 1_000_000_000,
            format: Format::Kv,
            words: VALUE_WORDS,
            external_index: false,
            cache: None,
            state: None,
            values: Values::None,
            hits: None,
            hashes: Vec::new(),
            cms: Vec::new(),
            bloom: Vec::new(),
            cached: BTreeMap::new(),
            slot_keys: Vec::new(),
            hot: VecDeque::new(),
            last_hits: Vec::new(),
            recent: Vec::new(),
            fresh: Vec::new(),
            stats_request: None,
            reports: 0,
            insertions: 0,
            evictions: 0,
            refused: 0,
        }
    }

    /// Sets the sketch width (rounded up to a power of two), the hot-key
    /// threshold and the statistics epoch.
    pub fn with_stats(mut self, sketch_width: usize, threshold: u32, epoch: Nanos) -> Self {
        self.sketch_width = sketch_width.max(2).next_power_of_two();
        self.threshold = threshold.clamp(1, COUNT_MAX);
        self.epoch = epoch.max(1);
        self
    }

    /// The cache speaking ExoPlane's NetCache header with values of
    /// `value_bytes` (rounded to 16..=128 in steps of 16).
    pub fn with_exo_header(mut self, value_bytes: usize) -> Self {
        self.format = Format::Exo;
        self.words = (value_bytes.clamp(16, 4 * MAX_WORDS) / 16) * 4;
        self
    }

    /// The cache whose key index another control plane writes (see the
    /// module documentation).
    pub fn with_external_index(mut self) -> Self {
        self.external_index = true;
        self
    }

    /// Cache slots.
    pub fn slots(&self) -> usize {
        self.flows
    }

    /// The value's register arrays (`nc_value0..`) and their entry width
    /// in bits (after loading): 32-bit words with the KV header, pairs of
    /// words with ExoPlane's.
    pub fn value_arrays(&self) -> (usize, u32) {
        match self.format {
            Format::Kv => (self.words, 32),
            Format::Exo => (self.words.div_ceil(2), 64),
        }
    }

    /// The header it speaks.
    pub fn format(&self) -> Format {
        self.format
    }

    /// Value words (32-bit) per slot.
    pub fn value_words(&self) -> usize {
        self.words
    }

    /// Hot keys reported and not yet taken (`index=external`).
    pub fn hot_keys(&self) -> &VecDeque<HotKey> {
        &self.hot
    }

    /// Takes the hot keys reported so far (`index=external`).
    pub fn take_hot_keys(&mut self) -> VecDeque<HotKey> {
        std::mem::take(&mut self.hot)
    }

    /// A cache sized from parameters.
    pub fn from_params(p: &Params) -> Result<Self, ParamError> {
        p.check_known("netcache", Self::PARAMS)?;
        let flows = p.count("flows", 65_536, 1 << 32)? as usize;
        let server = p.number("server_port", 1, 0, 511)? as PortId;
        let client = p.number("client_port", 0, 0, 511)? as PortId;
        if client == server {
            return Err(ParamError::Value {
                name: "client_port".into(),
                reason: format!("{client} is also the server port"),
            });
        }
        let width = p.count("sketch_width", 65_536, 1 << 32)? as usize;
        let threshold = p.count("threshold", 128, u64::from(COUNT_MAX))? as u32;
        let epoch_us = p.count("epoch_us", 1_000_000, 1 << 40)?;
        let mut nc =
            NetCache::new(flows, server, client).with_stats(width, threshold, epoch_us * 1_000);
        let bad = |name: &str, reason: String| ParamError::Value {
            name: name.into(),
            reason,
        };
        match p.text("format").unwrap_or("kv") {
            "kv" => {
                if p.text("value_bytes").is_some() {
                    return Err(bad("value_bytes", "only with format=exo".into()));
                }
            }
            "exo" => {
                let v = p.number("value_bytes", 128, 16, 128)?;
                if v % 16 != 0 {
                    return Err(bad("value_bytes", format!("{v} is not a multiple of 16")));
                }
                nc = nc.with_exo_header(v as usize);
            }
            f => return Err(bad("format", format!("{f:?} is not kv or exo"))),
        }
        match p.text("index").unwrap_or("own") {
            "own" => {}
            "external" => nc = nc.with_external_index(),
            i => return Err(bad("index", format!("{i:?} is not own or external"))),
        }
        Ok(nc)
    }

    /// The slot of a cached u64 key (control-plane view, KV header).
    pub fn slot_of(&self, key: u64) -> Option<u32> {
        self.slot_of_key(&key.to_be_bytes())
    }

    /// The slot of a cached key given as its bytes.
    pub fn slot_of_key(&self, key: &[u8]) -> Option<u32> {
        self.cached.get(key).copied()
    }

    /// Number of cached keys.
    pub fn cached(&self) -> usize {
        self.cached.len()
    }

    /// Hits of `key`'s slot in the last measured epoch.
    pub fn recent_hits(&self, key: u64) -> Option<u32> {
        let s = self.slot_of(key)? as usize;
        self.recent.get(s).copied().flatten()
    }

    /// The per-slot hit counter array, for inspection.
    pub fn hits_register(&self) -> Option<RegisterHandle<u32>> {
        self.hits
    }

    /// The per-slot state array (bit 15 valid, low bits pending writes).
    pub fn state_register(&self) -> Option<RegisterHandle<u16>> {
        self.state
    }

    /// The epoch tag (1..=255) of time `now`.
    fn tag(&self, now: Nanos) -> u32 {
        ((now / self.epoch) % 255) as u32 + 1
    }

    /// Caches `key`: a free slot, or the coldest measured one.
    fn insert(&mut self, cp: &mut ControlPlane<'_>, key: &[u8]) {
        let (Some(cache), Some(state)) = (self.cache, self.state) else {
            return;
        };
        if self.cached.contains_key(key) {
            return;
        }
        let slot = if self.slot_keys.len() < self.flows {
            let s = self.slot_keys.len();
            self.slot_keys.push(key.to_vec());
            self.last_hits.push(0);
            self.recent.push(None);
            self.fresh.push(true);
            s
        } else {
            let victim = self
                .recent
                .iter()
                .enumerate()
                .filter(|(i, r)| r.is_some() && !self.fresh[*i])
                .min_by_key(|(i, r)| (r.unwrap_or(u32::MAX), *i))
                .map(|(i, _)| i);
            let Some(s) = victim else {
                self.refused += 1;
                return;
            };
            let old = std::mem::replace(&mut self.slot_keys[s], key.to_vec());
            self.cached.remove(&old);
            cp.table_delete(cache, MatchSpec::Exact(old.into()));
            self.evictions += 1;
            self.recent[s] = None;
            self.fresh[s] = true;
            s
        };
        self.cached.insert(key.to_vec(), slot as u32);
        self.insertions += 1;
        cp.register_write(state, slot as u64, 0u16);
        cp.table_add(cache, MatchSpec::Exact(key.to_vec().into()), slot as u32);
    }

    /// Ingress for a packet from a client.
    fn client_request(
        &mut self,
        pkt: &mut PacketCtx<CacheMeta, HotKey>,
        dp: &mut DataPlane<'_>,
        cache: TableHandle<u32>,
        state: RegisterHandle<u16>,
        hits: RegisterHandle<u32>,
    ) -> Result<(), AccessError> {
        let m = pkt.meta;
        if !m.is_cache() {
            pkt.forward(self.server_port);
            return Ok(());
        }
        if !format::is_request(m.op) {
            return Ok(()); // a reply from a client: dropped
        }
        let key = &m.key[..self.format.key_len()];
        match dp.lookup(cache, key)? {
            Some(slot) => {
                let slot = u64::from(slot);
                if m.op == OP_UPDATE {
                    dp.register(state, slot, |s| {
                        let pending = (*s & !VALID).saturating_add(1).min(!VALID);
                        *s = pending;
                    })?;
                    pkt.forward(self.server_port);
                    return Ok(());
                }
                let valid = dp.register(state, slot, |s| *s & VALID != 0)?;
                // A READ without room for the value goes to the server.
                if !valid || !self.fits(&m) {
                    pkt.forward(self.server_port);
                    return Ok(());
                }
                let mut v = [0u32; MAX_WORDS];
                self.values.read(dp, slot, &mut v[..self.words])?;
                dp.register(hits, slot, |h| *h = h.wrapping_add(1))?;
                let words = self.words;
                self.format
                    .answer(pkt.header_mut(), &m, OP_REPLY, &v[..words]);
                pkt.forward(pkt.ingress_port());
            }
            None => {
                if m.op == OP_READ {
                    self.count(pkt, dp, key)?;
                }
                pkt.forward(self.server_port);
            }
        }
        Ok(())
    }

    /// Whether a packet's value field is the cache's value width (always
    /// with the KV header).
    fn fits(&self, m: &CacheMeta) -> bool {
        usize::from(m.value_len) == 4 * self.words
    }

    /// Counts a read of an uncached key; reports it once per epoch when hot.
    fn count(
        &mut self,
        pkt: &mut PacketCtx<CacheMeta, HotKey>,
        dp: &mut DataPlane<'_>,
        key: &[u8],
    ) -> Result<(), AccessError> {
        let tag = self.tag(dp.now());
        let mut idx = [0u64; SKETCH_ROWS];
        let mut est = COUNT_MAX;
        for (row, (&h, &reg)) in self.hashes.iter().zip(&self.cms).enumerate() {
            // Row 2 hashes the key's bytes reversed: a different function of
            // the key than row 0's, though both are CRC-32.
            let i = ROW_HASHES.with_input(row, key, |input| dp.hash(h, input))?;
            idx[row] = i;
            let c = dp.register(reg, i, |e| {
                let count = if *e >> 24 == tag {
                    ((*e & COUNT_MAX) + 1).min(COUNT_MAX)
                } else {
                    1
                };
                *e = (tag << 24) | count;
                count
            })?;
            est = est.min(c);
        }
        if est < self.threshold {
            return Ok(());
        }
        let tag8 = tag as u8;
        let mut all_set = true;
        for (&reg, &i) in self.bloom.iter().zip(&idx) {
            let was = dp.register(reg, i, |b| {
                let was = *b == tag8;
                *b = tag8;
                was
            })?;
            all_set &= was;
        }
        if !all_set {
            let mut k = [0u8; MAX_KEY];
            let len = key.len().min(MAX_KEY);
            k[..len].copy_from_slice(&key[..len]);
            pkt.digest(HotKey {
                key: k,
                len: len as u8,
                count: est,
            });
        }
        Ok(())
    }

    /// Ingress for a packet from the server.
    fn server_reply(
        &mut self,
        pkt: &mut PacketCtx<CacheMeta, HotKey>,
        dp: &mut DataPlane<'_>,
        cache: TableHandle<u32>,
        state: RegisterHandle<u16>,
    ) -> Result<(), AccessError> {
        let m = pkt.meta;
        pkt.forward(self.client_port);
        let refreshing = m.is_cache()
            && m.ok
            && format::is_answer(m.op)
            && m.p.sport == self.format.port()
            && self.fits(&m);
        if !refreshing {
            return Ok(());
        }
        let Some(slot) = dp.lookup(cache, &m.key[..self.format.key_len()])? else {
            return Ok(());
        };
        let slot = u64::from(slot);
        let write = dp.register(state, slot, |s| {
            let pending = *s & !VALID;
            if m.op == OP_ACK {
                let left = pending.saturating_sub(1);
                *s = if left == 0 { VALID } else { left };
                left == 0
            } else if *s == 0 {
                *s = VALID;
                true
            } else {
                false
            }
        })?;
        if write {
            self.values.write(dp, slot, &m.value[..self.words])?;
        }
        Ok(())
    }
}

impl Program for NetCache {
    type Meta = CacheMeta;
    type Digest = HotKey;

    fn name(&self) -> &str {
        "netcache"
    }

    fn declare(&mut self, d: &mut Declare) -> Result<(), DeclareError> {
        let slot_bits = index_bits(self.flows);
        let direction = d.gateway("nc_direction", Gress::Ingress, &[])?;
        let cache = d.table::<u32>(
            TableDecl::new(
                "nc_cache",
                MatchKind::Exact,
                self.format.key_len(),
                slot_bits,
                self.flows,
            )
            .after(&[direction.id()])
            .vliw(2),
        )?;
        let state =
            d.register::<u16>(ArrayDecl::new("nc_state", self.flows).after(&[cache.id()]))?;
        let pairs = self.format == Format::Exo;
        self.values = Values::declare(d, self.words, pairs, self.flows, &[state.id()])?;
        let hits = d.register::<u32>(ArrayDecl::new("nc_hits", self.flows).after(&[state.id()]))?;
        let width_bits = index_bits(self.sketch_width) as u8;
        self.hashes = (0..SKETCH_ROWS)
            .map(|i| {
                let a = ROW_HASHES.algorithm(i);
                d.hash(&format!("nc_hash{i}"), a, width_bits, Gress::Ingress, &[])
            })
            .collect::<Result<_, _>>()?;
        self.cms = (0..SKETCH_ROWS)
            .map(|i| {
                d.register::<u32>(
                    ArrayDecl::new(&format!("nc_cms{i}"), self.sketch_width)
                        .after(&[cache.id(), self.hashes[i].id()]),
                )
            })
            .collect::<Result<_, _>>()?;
        let cms_ids: Vec<_> = self.cms.iter().map(|r| r.id()).collect();
        self.bloom = (0..SKETCH_ROWS)
            .map(|i| {
                d.register::<u8>(
                    ArrayDecl::new(&format!("nc_bloom{i}"), self.sketch_width).after(&cms_ids),
                )
            })
            .collect::<Result<_, _>>()?;
        self.cache = Some(cache);
        self.state = Some(state);
        self.hits = Some(hits);
        Ok(())
    }

    fn parse(&self, gress: Gress, header: &[u8], meta: &mut CacheMeta) -> Result<(), ParseError> {
        if gress == Gress::Ingress {
            *meta = self.format.parse(header, true)?;
        }
        Ok(())
    }

    fn ingress(
        &mut self,
        pkt: &mut PacketCtx<CacheMeta, HotKey>,
        dp: &mut DataPlane<'_>,
    ) -> Result<(), AccessError> {
        let (Some(cache), Some(state), Some(hits)) = (self.cache, self.state, self.hits) else {
            return Ok(());
        };
        if pkt.ingress_port() == self.server_port {
            self.server_reply(pkt, dp, cache, state)
        } else {
            self.client_request(pkt, dp, cache, state, hits)
        }
    }

    /// KV requests from the client side and replies from the server.
    fn check_hints(&self) -> inca_switch::CheckHints {
        let ports = [self.client_port, self.server_port];
        inca_switch::CheckHints {
            samples: self.format.samples(&ports, self.words),
            known: Vec::new(),
        }
    }

    fn control(&mut self, event: ControlEvent<HotKey>, cp: &mut ControlPlane<'_>) {
        match event {
            ControlEvent::Start => cp.set_timer(cp.now() + self.epoch, STATS_TIMER),
            ControlEvent::Digest(hot) if self.external_index => {
                self.reports += 1;
                if self.hot.len() < HOT_QUEUE {
                    self.hot.push_back(hot);
                } else {
                    self.refused += 1;
                }
            }
            ControlEvent::Digest(hot) => {
                self.reports += 1;
                self.insert(cp, hot.key());
            }
            ControlEvent::Timer { token: STATS_TIMER } => {
                if let (Some(hits), None) = (self.hits, self.stats_request) {
                    if !self.slot_keys.is_empty() {
                        let n = self.slot_keys.len() as u64;
                        self.stats_request = Some(cp.register_read(hits, 0, n));
                        self.fresh.iter_mut().for_each(|f| *f = false);
                    }
                }
                cp.set_timer(cp.now() + self.epoch, STATS_TIMER);
            }
            ControlEvent::RegisterValues { request, values } => {
                if self.stats_request != Some(request) {
                    return;
                }
                self.stats_request = None;
                for (s, &v) in values.iter().enumerate().take(self.last_hits.len()) {
                    let v = v as u32;
                    if !self.fresh[s] {
                        self.recent[s] = Some(v.wrapping_sub(self.last_hits[s]));
                    }
                    self.last_hits[s] = v;
                }
            }
            ControlEvent::OpFailed { request, .. } if self.stats_request == Some(request) => {
                self.stats_request = None;
            }
            _ => {}
        }
    }
}
