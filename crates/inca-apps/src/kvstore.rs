//! An in-switch key-value store: reads are answered by the switch, updates
//! are written into register arrays and acknowledged by the switch.
//!
//! # Header (shared with [`crate::netcache`])
//!
//! A request is a UDP datagram to port [`KV_PORT`] (7777) whose payload
//! starts with this 28-byte header (big-endian); replies come back from
//! port 7777 with the same header, so a reply is exactly as long as its
//! request:
//!
//! | bytes | field | meaning |
//! |---|---|---|
//! | 0 | `op` | 1 = READ, 2 = UPDATE, 3 = REPLY (to a READ), 4 = ACK (to an UPDATE) |
//! | 1 | `status` | in replies: 0 = OK, 1 = MISS (no such key), 2 = FULL (no room for a new key); 0 in requests |
//! | 2–3 | `id` | request id chosen by the client, echoed in the reply |
//! | 4–11 | `key` | the key, a u64 |
//! | 12–27 | `value` | 16 bytes: four 32-bit words; ignored in a READ |
//!
//! # Data plane
//!
//! The exact table `kv_index` maps a key to a slot; the value of slot `s`
//! is word `i` of register array `kv_value{i}` (four arrays of 32-bit
//! entries, `flows` each: a 128-bit value is wider than one stateful ALU
//! reaches, so it is split as NetCache does on Tofino). Each array is
//! accessed once per packet.
//!
//! - READ of a stored key: the four words are read and the switch answers
//!   (REPLY, OK, value). READ of an unknown key: the switch answers REPLY
//!   with status MISS and a zero value (this store has no backing server).
//! - UPDATE of a stored key: the four words are written and the switch
//!   answers ACK, OK, with the value echoed.
//! - UPDATE of an unknown key goes to the control plane (punt, reason
//!   [`REASON_NEW_KEY`]), which picks a free slot, writes the value into
//!   the four arrays, then installs `key → slot` (so a read never sees a
//!   slot before its value), and sends the ACK itself (packet-out). A full
//!   store answers ACK with status FULL. Later updates of a key whose entry
//!   is still being installed are re-injected into ingress behind the
//!   installation (the operation channel is FIFO), so they apply in order.
//!   An update racing an installation on the fast path (arriving after the
//!   entry is visible but before a re-injected earlier update) may be
//!   applied before it; a client that needs strict order waits for its ACK,
//!   as over any UDP protocol.
//! - A reply is the request turned around: MACs, addresses and ports
//!   swapped (which leaves both checksums unchanged), `op`, `status` and
//!   `value` rewritten with an incremental UDP checksum update (RFC 1624;
//!   a zero UDP checksum stays zero), sent back out of the arrival port.
//!
//! Requests from one client are handled in arrival order: each is a single
//! pipeline pass, so a READ after an UPDATE sees the update.
//!
//! Packets that are not KV requests (not UDP to port 7777, or a REPLY/ACK
//! sent to the store) are dropped and counted as program drops. A UDP
//! datagram to port 7777 whose header does not fit the parse window or
//! whose `op` is unknown is a parse error (counted, dropped).
//!
//! On a CPU data path (`server` profile) an UPDATE of an unknown key is
//! installed inline, without the control plane.
//!
//! # Control plane
//!
//! Besides punted updates it takes two messages ([`ControlEvent::Message`]):
//! [`MSG_INSERT`] (body: key u64 + value 16 bytes) stores a key, as a
//! punted update would, without a reply; [`MSG_DELETE`] (body: key u64)
//! removes the table entry and frees the slot.
//!
//! Parameters: `flows` (keys, default 65,536).

use std::collections::BTreeMap;

use crate::core::kv::{self, Op, Status};
use crate::headers::{parse, Parsed, PROTO_UDP};
use crate::params::{ParamError, Params};
use inca_switch::{
    AccessError, ArrayDecl, ControlEvent, ControlPlane, DataPlane, Declare, DeclareError, Gress,
    MatchKind, MatchSpec, PacketCtx, PacketOutDest, ParseError, Program, RegisterHandle, TableDecl,
    TableHandle,
};

/// UDP port of the KV protocol.
pub const KV_PORT: u16 = 7777;
/// Length of the KV header in bytes.
pub const KV_LEN: usize = 28;
/// op: read a key.
pub const OP_READ: u8 = 1;
/// op: write a key.
pub const OP_UPDATE: u8 = 2;
/// op: answer to a READ.
pub const OP_REPLY: u8 = 3;
/// op: answer to an UPDATE.
pub const OP_ACK: u8 = 4;
/// status: done.
pub const STATUS_OK: u8 = 0;
/// status: the key is not stored.
pub const STATUS_MISS: u8 = 1;
/// status: no room for a new key.
pub const STATUS_FULL: u8 = 2;
/// Words of a value (32 bits each).
pub const VALUE_WORDS: usize = 4;

/// Reason code of an UPDATE of an unknown key punted to the control plane.
pub const REASON_NEW_KEY: u16 = 1;
/// Control message: insert a key (body: key u64 BE, value 16 bytes).
pub const MSG_INSERT: u32 = 1;
/// Control message: delete a key (body: key u64 BE).
pub const MSG_DELETE: u32 = 2;

/// A value: four 32-bit words (bytes 12–27 of the header, big-endian).
pub type Value = [u32; VALUE_WORDS];

/// Metadata of a packet: the shared parse plus the KV header.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct KvMeta {
    /// Ethernet, IPv4 and ports.
    pub p: Parsed,
    /// Offset of the KV header in the frame (0: not a KV packet).
    pub kv: u16,
    /// The op.
    pub op: u8,
    /// The status.
    pub status: u8,
    /// The request id.
    pub id: u16,
    /// The key.
    pub key: u64,
    /// The value.
    pub value: Value,
}

impl KvMeta {
    /// True if the packet carries a KV header.
    pub fn is_kv(&self) -> bool {
        self.kv != 0
    }
}

/// Parses Ethernet/IPv4/UDP and, for UDP with destination port 7777 (and,
/// with `replies`, source port 7777), the KV header. Non-KV packets parse
/// with `kv == 0`; a KV packet whose header is cut by the window or whose
/// op is unknown is an error.
pub fn parse_kv(header: &[u8], replies: bool) -> Result<KvMeta, ParseError> {
    let p = parse(header)?;
    let mut m = KvMeta {
        p,
        ..KvMeta::default()
    };
    let is_kv = p.has_ports
        && p.proto == PROTO_UDP
        && (p.dport == KV_PORT || (replies && p.sport == KV_PORT));
    if !is_kv {
        return Ok(m);
    }
    let off = usize::from(p.l4) + 8;
    let h = header
        .get(off..off + KV_LEN)
        .ok_or(ParseError("KV header cut short"))?;
    if !(OP_READ..=OP_ACK).contains(&h[0]) {
        return Err(ParseError("unknown KV op"));
    }
    m.kv = off as u16; // within the parse window
    m.op = h[0];
    m.status = h[1];
    m.id = u16::from_be_bytes([h[2], h[3]]);
    m.key = u64::from_be_bytes(h[4..12].try_into().expect("8 bytes"));
    for (i, w) in m.value.iter_mut().enumerate() {
        let o = 12 + 4 * i;
        *w = u32::from_be_bytes(h[o..o + 4].try_into().expect("4 bytes"));
    }
    Ok(m)
}

/// The KV header as bytes (for clients and tests).
pub fn encode_kv(op: u8, status: u8, id: u16, key: u64, value: &Value) -> [u8; KV_LEN] {
    let mut h = [0u8; KV_LEN];
    h[0] = op;
    h[1] = status;
    h[2..4].copy_from_slice(&id.to_be_bytes());
    h[4..12].copy_from_slice(&key.to_be_bytes());
    for (i, w) in value.iter().enumerate() {
        h[12 + 4 * i..16 + 4 * i].copy_from_slice(&w.to_be_bytes());
    }
    h
}

/// Turns a request around in place ([`kv::answer`]): swaps the MACs, the
/// IPv4 addresses and the UDP ports (checksums unchanged: the sums are
/// order-independent), then writes `op`, `status` and the value with an
/// incremental UDP checksum update (a zero checksum stays zero).
pub fn turn_around(h: &mut [u8], m: &KvMeta, op: u8, status: u8, value: &Value) {
    let (l3, l4, at) = (usize::from(m.p.l3), usize::from(m.p.l4), usize::from(m.kv));
    if h.len() < at + KV_LEN || l3 < 12 {
        return; // cannot happen for a parsed KV packet
    }
    for i in 0..6 {
        h.swap(i, 6 + i);
    }
    let mut v = [0u8; 4 * VALUE_WORDS];
    for (i, w) in value.iter().enumerate() {
        v[4 * i..4 * i + 4].copy_from_slice(&w.to_be_bytes());
    }
    kv::answer(h, l3, l4, &[(at, &[op, status]), (at + 12, &v)]);
}

/// The core's op of a request's op code (a READ or an UPDATE).
fn core_op(op: u8) -> Op {
    if op == OP_READ {
        Op::Read
    } else {
        Op::Update
    }
}

/// The key as a table key.
fn key_bytes(key: u64) -> [u8; 8] {
    key.to_be_bytes()
}

/// ⌈log2(n)⌉ bits to hold an index below `n` (at least 1).
pub(crate) fn index_bits(n: usize) -> u32 {
    (usize::BITS - n.saturating_sub(1).leading_zeros()).max(1)
}

/// The key-value store. See the module documentation.
#[derive(Debug, Clone)]
pub struct KvStore {
    flows: usize,
    index: Option<TableHandle<u32>>,
    values: Vec<RegisterHandle<u32>>,
    /// Control-plane state: the slot of every stored key.
    slots: BTreeMap<u64, u32>,
    /// Freed slots, reused first.
    free: Vec<u32>,
    /// Slots never used yet start here.
    next_slot: u32,
    /// New keys refused because the store was full.
    pub refused: u64,
    /// Frames the control plane sent (acks and re-injected updates).
    pub packet_outs: u64,
}

impl KvStore {
    /// Parameter names.
    pub const PARAMS: &'static [&'static str] = &["flows"];

    /// A store for `flows` keys.
    pub fn new(flows: usize) -> Self {
        KvStore {
            flows,
            index: None,
            values: Vec::new(),
            slots: BTreeMap::new(),
            free: Vec::new(),
            next_slot: 0,
            refused: 0,
            packet_outs: 0,
        }
    }

    /// A store sized from parameters.
    pub fn from_params(p: &Params) -> Result<Self, ParamError> {
        p.check_known("kvstore", Self::PARAMS)?;
        let flows = p.count("flows", 65_536, 1 << 32)? as usize;
        Ok(KvStore::new(flows))
    }

    /// Number of keys the control plane has stored.
    pub fn stored(&self) -> usize {
        self.slots.len()
    }

    /// The slot of `key`, if stored.
    pub fn slot_of(&self, key: u64) -> Option<u32> {
        self.slots.get(&key).copied()
    }

    /// The value register arrays (word 0 first), for inspection.
    pub fn value_registers(&self) -> &[RegisterHandle<u32>] {
        &self.values
    }

    /// A slot for a new key, or None when full.
    fn allocate(&mut self, key: u64) -> Option<u32> {
        if let Some(s) = self.free.pop() {
            self.slots.insert(key, s);
            return Some(s);
        }
        if (self.next_slot as usize) < self.flows && self.next_slot < u32::MAX {
            let s = self.next_slot;
            self.next_slot += 1;
            self.slots.insert(key, s);
            return Some(s);
        }
        self.refused += 1;
        None
    }

    /// Stores a new key through the control plane: value first, then the
    /// entry. Returns false when full.
    fn install(&mut self, cp: &mut ControlPlane<'_>, key: u64, value: &Value) -> bool {
        let Some(index) = self.index else {
            return false;
        };
        let Some(slot) = self.allocate(key) else {
            return false;
        };
        for (reg, &w) in self.values.iter().zip(value) {
            cp.register_write(*reg, u64::from(slot), w);
        }
        cp.table_add(
            index,
            MatchSpec::Exact(key_bytes(key).to_vec().into()),
            slot,
        );
        true
    }
}

impl Program for KvStore {
    type Meta = KvMeta;
    type Digest = ();

    fn name(&self) -> &str {
        "kvstore"
    }

    fn declare(&mut self, d: &mut Declare) -> Result<(), DeclareError> {
        let bits = index_bits(self.flows);
        // Action data: the slot.
        let index = d.table::<u32>(
            TableDecl::new("kv_index", MatchKind::Exact, 8, bits, self.flows).vliw(2),
        )?;
        self.values = (0..VALUE_WORDS)
            .map(|i| {
                d.register::<u32>(
                    ArrayDecl::new(&format!("kv_value{i}"), self.flows).after(&[index.id()]),
                )
            })
            .collect::<Result<_, _>>()?;
        self.index = Some(index);
        Ok(())
    }

    fn parse(&self, gress: Gress, header: &[u8], meta: &mut KvMeta) -> Result<(), ParseError> {
        if gress == Gress::Ingress {
            *meta = parse_kv(header, false)?;
        }
        Ok(())
    }

    fn ingress(
        &mut self,
        pkt: &mut PacketCtx<KvMeta, ()>,
        dp: &mut DataPlane<'_>,
    ) -> Result<(), AccessError> {
        let Some(index) = self.index else {
            return Ok(());
        };
        let m = pkt.meta;
        if !m.is_kv() || (m.op != OP_READ && m.op != OP_UPDATE) {
            return Ok(()); // not a request: dropped
        }
        let mut slot = dp.lookup(index, &key_bytes(m.key))?;
        if slot.is_none() && m.op == OP_UPDATE && dp.can_write_tables() {
            // A software store installs new keys inline.
            match self.allocate(m.key) {
                Some(s) => {
                    let spec = MatchSpec::Exact(key_bytes(m.key).to_vec().into());
                    if dp.table_insert(index, spec, s)?.is_ok() {
                        slot = Some(s);
                    }
                }
                None => {
                    turn_around(pkt.header_mut(), &m, OP_ACK, STATUS_FULL, &m.value);
                    pkt.forward(pkt.ingress_port());
                    return Ok(());
                }
            }
        }
        let op = core_op(m.op);
        let (status, value) = match slot {
            // One register action per value word: the core's transition.
            Some(s) => {
                let mut v = [0u32; VALUE_WORDS];
                for (i, reg) in self.values.iter().enumerate() {
                    v[i] = dp.register(*reg, u64::from(s), |x| kv::apply(op, x, m.value[i]))?;
                }
                (STATUS_OK, v)
            }
            None if op == Op::Read => {
                let served = kv::serve(op, None, m.value);
                debug_assert_eq!(served.status, Status::Miss);
                (STATUS_MISS, served.value)
            }
            None => {
                pkt.to_cpu(REASON_NEW_KEY);
                return Ok(());
            }
        };
        let op = if op == Op::Read { OP_REPLY } else { OP_ACK };
        turn_around(pkt.header_mut(), &m, op, status, &value);
        pkt.forward(pkt.ingress_port());
        Ok(())
    }

    fn check_hints(&self) -> inca_switch::CheckHints {
        inca_switch::CheckHints {
            samples: check_samples(&[0, 1, 2, 3]),
            known: Vec::new(),
        }
    }

    fn control(&mut self, event: ControlEvent<()>, cp: &mut ControlPlane<'_>) {
        match event {
            ControlEvent::PacketIn {
                port,
                reason: REASON_NEW_KEY,
                mut frame,
            } => {
                let Ok(m) = parse_kv(&frame, false) else {
                    return;
                };
                if !m.is_kv() || m.op != OP_UPDATE {
                    return;
                }
                if self.slots.contains_key(&m.key) {
                    // Installed (or being installed): behind it in the FIFO.
                    self.packet_outs += 1;
                    cp.packet_out(frame, PacketOutDest::Ingress(port));
                    return;
                }
                let status = if self.install(cp, m.key, &m.value) {
                    STATUS_OK
                } else {
                    STATUS_FULL
                };
                turn_around(&mut frame, &m, OP_ACK, status, &m.value);
                self.packet_outs += 1;
                cp.packet_out(frame, PacketOutDest::Port(port));
            }
            ControlEvent::Message(msg) => match (msg.kind, msg.body.len()) {
                (MSG_INSERT, 24) => {
                    let key = u64::from_be_bytes(msg.body[0..8].try_into().expect("8 bytes"));
                    let mut value = [0u32; VALUE_WORDS];
                    for (i, w) in value.iter_mut().enumerate() {
                        let o = 8 + 4 * i;
                        *w = u32::from_be_bytes(msg.body[o..o + 4].try_into().expect("4 bytes"));
                    }
                    match self.slots.get(&key) {
                        Some(&slot) => {
                            for (reg, &w) in self.values.iter().zip(&value) {
                                cp.register_write(*reg, u64::from(slot), w);
                            }
                        }
                        None => {
                            self.install(cp, key, &value);
                        }
                    }
                }
                (MSG_DELETE, 8) => {
                    let key = u64::from_be_bytes(msg.body[0..8].try_into().expect("8 bytes"));
                    if let (Some(slot), Some(index)) = (self.slots.remove(&key), self.index) {
                        cp.table_delete(index, MatchSpec::Exact(key_bytes(key).to_vec().into()));
                        self.free.push(slot);
                    }
                }
                _ => {}
            },
            _ => {}
        }
    }
}

/// Body of a [`MSG_INSERT`] message.
pub fn insert_message(key: u64, value: &Value) -> Vec<u8> {
    let mut b = key.to_be_bytes().to_vec();
    for w in value {
        b.extend_from_slice(&w.to_be_bytes());
    }
    b
}

/// KV frames for the load-time check ([`inca_switch::loadcheck`]): a read,
/// an update, a reply and an ack for keys 1-3, on each of `ports`, toward
/// [`KV_PORT`] (replies and acks from it).
pub fn check_samples(ports: &[inca_switch::PortId]) -> Vec<(inca_switch::PortId, Vec<u8>)> {
    use inca_wire::{build_udp_frame, Endpoints};
    use std::net::Ipv4Addr;
    let ep = Endpoints::new(
        [2, 0, 0, 0, 0, 1],
        Ipv4Addr::new(10, 0, 0, 1),
        [2, 0, 0, 0, 0, 2],
        Ipv4Addr::new(10, 0, 1, 1),
    );
    let mut out = Vec::new();
    for &port in ports {
        for key in 1..=3u64 {
            for op in [OP_READ, OP_UPDATE, OP_REPLY, OP_ACK] {
                let body = encode_kv(op, 0, key as u16, key, &[key as u32; VALUE_WORDS]);
                let (sport, dport) = match op {
                    OP_REPLY | OP_ACK => (KV_PORT, 40_000),
                    _ => (40_000, KV_PORT),
                };
                if let Ok(f) = build_udp_frame(&ep, sport, dport, &body, true) {
                    out.push((port, f));
                }
            }
        }
    }
    out
}
