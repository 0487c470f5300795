//! RedPlane messages (specs/redplane.md §4): the request/ack header between
//! switches and state-store workers, the chain messages between store
//! replicas, and the store's announcements to switches.
//!
//! API summary (stable; other crates build on it):
//! - constants: [`SWITCH_PORT`] (4000), [`STORE_PORT_BASE`]..=[`STORE_PORT_LAST`]
//!   (8000–8063, match with [`STORE_PORT_MASK`]), [`CHAIN_PORT_OFFSET`] (+1000),
//!   [`NODE_CONTROL_PORT`] (9000, heartbeats), [`FIXED_LEN`] (3), [`MAX_SEQ`];
//!   [`is_store_port`], [`chain_port`], [`worker_of_port`].
//! - type codes: [`ReqType`] (0x00–0x03), [`AckType`] (0x00–0x06, with
//!   [`AckType::carries_value`]), [`ChainType`] (0x10–0x13), [`ANNOUNCE_TYPE`] (0x20).
//! - serial numbers (RFC 1982 on u16, writes 1…65535 then 1): [`seq_next`],
//!   [`serial_lt`], [`serial_le`], [`serial_max`], [`seq_add`].
//! - views over the UDP payload, K and V given by the caller:
//!   [`Request::new_checked`]`(buf, k, v)` and [`Ack::new_checked`]`(buf, k, v)`
//!   (type, seq, key, value, piggyback; setters on `&mut`), [`ChainUpdate`],
//!   [`ChainAck`], [`ChainSnap`], [`Heartbeat`], [`HeadAnnounce`].
//! - reprs with `emit`/`buffer_len`: [`RequestRepr`], [`AckRepr`],
//!   [`ChainUpdateRepr`], [`ChainSnapRepr`], [`HeartbeatRepr`], [`HeadAnnounceRepr`].
//! - whole frames: [`parse_udp_frame`] (Ethernet/IPv4/UDP → [`UdpFrameInfo`],
//!   bounded by the IPv4 and UDP lengths so Ethernet padding is ignored),
//!   [`build_request_frame`], [`build_ack_frame`], [`build_rp_frame`] (any
//!   payload): UDP checksum 0, TTL 64, DSCP 0, Identification = `ep.ident`.
//!
//! Byte layouts are in docs/wire.md, section "RedPlane".

use std::net::Ipv4Addr;

use crate::builder::{build_udp_frame, Endpoints};
use crate::error::{Result, WireError};
use crate::ethernet::MacAddr;

/// UDP port of the switch side: source of requests, destination of acks.
pub const SWITCH_PORT: u16 = 4000;
/// First store worker port (worker w listens on 8000 + w, w ≥ 1).
pub const STORE_PORT_BASE: u16 = 8000;
/// Last store worker port.
pub const STORE_PORT_LAST: u16 = 8063;
/// The switch parser matches store ports with `port & MASK == 8000 & MASK`.
pub const STORE_PORT_MASK: u16 = 0xFFC0;
/// Chain traffic between replicas uses the worker port plus this.
pub const CHAIN_PORT_OFFSET: u16 = 1000;
/// Node-level chain control (heartbeats): 8000 + 1000, which no worker uses
/// because workers start at 8001 [our choice].
pub const NODE_CONTROL_PORT: u16 = STORE_PORT_BASE + CHAIN_PORT_OFFSET;
/// `type` (1) + `seq` (2): the fixed part of requests and acks.
pub const FIXED_LEN: usize = 3;
/// The largest sequence number; the next one is 1 (0 means "no write").
pub const MAX_SEQ: u16 = u16::MAX;
/// Type code of [`HeadAnnounce`] (store → switch, UDP 4000) [our choice].
pub const ANNOUNCE_TYPE: u8 = 0x20;

/// Whether `port` is a store worker port (8000–8063 by mask; 8000 itself
/// matches the mask but no worker uses it).
pub fn is_store_port(port: u16) -> bool {
    port & STORE_PORT_MASK == STORE_PORT_BASE & STORE_PORT_MASK
}

/// The worker index of a store worker port (`None` outside 8001–8063).
pub fn worker_of_port(port: u16) -> Option<u16> {
    (is_store_port(port) && port != STORE_PORT_BASE).then(|| port - STORE_PORT_BASE)
}

/// The chain port of a worker port.
pub fn chain_port(worker_port: u16) -> u16 {
    worker_port.wrapping_add(CHAIN_PORT_OFFSET)
}

// ---------------------------------------------------------------------------
// Serial numbers (RFC 1982, SERIAL_BITS = 16)
// ---------------------------------------------------------------------------

/// The write sequence number after `s`: 1, 2, …, 65535, 1, … (0 is skipped,
/// it means "no write").
pub fn seq_next(s: u16) -> u16 {
    if s == MAX_SEQ {
        1
    } else {
        s + 1
    }
}

/// `s + n` in the write sequence space (skipping 0 on wrap), e.g. a fence
/// `last_seq + FENCE_GAP`.
pub fn seq_add(s: u16, n: u16) -> u16 {
    let v = u32::from(s) + u32::from(n);
    if v > u32::from(MAX_SEQ) {
        // 65535 → 1: one step past MAX lands on 1, so subtract 65535.
        (v - u32::from(MAX_SEQ)) as u16
    } else {
        v as u16
    }
}

/// RFC 1982 "a < b" on 16-bit serial numbers. Undefined pairs (exactly 2^15
/// apart) compare as not-less in both directions.
pub fn serial_lt(a: u16, b: u16) -> bool {
    let d = b.wrapping_sub(a);
    d != 0 && d < 0x8000
}

/// `a <= b` in serial order.
pub fn serial_le(a: u16, b: u16) -> bool {
    a == b || serial_lt(a, b)
}

/// The later of two serial numbers.
pub fn serial_max(a: u16, b: u16) -> u16 {
    if serial_lt(a, b) {
        b
    } else {
        a
    }
}

// ---------------------------------------------------------------------------
// Type codes
// ---------------------------------------------------------------------------

/// Request types (§4.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum ReqType {
    /// Acquire the lease and the state; carries the waiting packet.
    LeaseNew = 0x00,
    /// seq ≥ 1: a write with value and output; seq 0: a bare renewal.
    LeaseRenew = 0x01,
    /// A read issued while writes are outstanding; seq = highest issued write.
    BufRead = 0x02,
    /// A snapshot entry (bounded mode); seq = epoch.
    Snapshot = 0x03,
}

impl ReqType {
    /// Decodes a type byte.
    pub fn from_u8(v: u8) -> Result<Self> {
        Ok(match v {
            0x00 => ReqType::LeaseNew,
            0x01 => ReqType::LeaseRenew,
            0x02 => ReqType::BufRead,
            0x03 => ReqType::Snapshot,
            _ => return Err(WireError::Unsupported("unknown RedPlane request type")),
        })
    }
}

/// Ack types (§4.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum AckType {
    /// The key was new; value from `store_init`; seq = base.
    LeaseNew = 0x00,
    /// A renewal or write acknowledged; seq echoed.
    LeaseRenew = 0x01,
    /// The lease moved (or was re-granted); latest value; seq = base (fence).
    LeaseMigrate = 0x02,
    /// A held read released; seq echoed.
    BufRead = 0x03,
    /// A snapshot entry committed; seq = epoch.
    Snapshot = 0x04,
    /// Not the owner, or a fenced write; no packet returned.
    LeaseReject = 0x05,
    /// One entry of the committed snapshot; seq = epoch.
    SnapshotRestore = 0x06,
}

impl AckType {
    /// Decodes a type byte.
    pub fn from_u8(v: u8) -> Result<Self> {
        Ok(match v {
            0x00 => AckType::LeaseNew,
            0x01 => AckType::LeaseRenew,
            0x02 => AckType::LeaseMigrate,
            0x03 => AckType::BufRead,
            0x04 => AckType::Snapshot,
            0x05 => AckType::LeaseReject,
            0x06 => AckType::SnapshotRestore,
            _ => return Err(WireError::Unsupported("unknown RedPlane ack type")),
        })
    }

    /// Whether the ack carries a V-byte value after the key (§4.3: only
    /// NEW_ACK, MIGRATE_ACK and SNAPSHOT_RESTORE do).
    pub fn carries_value(self) -> bool {
        matches!(
            self,
            AckType::LeaseNew | AckType::LeaseMigrate | AckType::SnapshotRestore
        )
    }
}

/// Messages between store replicas (§4.5) [our choice].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum ChainType {
    /// One ordered mutation of a key, head → successor → … → tail.
    Update = 0x10,
    /// Tail → head (and middles): every update up to `update_id` is committed.
    Ack = 0x11,
    /// Node liveness and membership, every 10 ms, to every chain member.
    Heartbeat = 0x12,
    /// One staged snapshot entry; the entry with `commit = 1` commits its epoch.
    Snap = 0x13,
}

impl ChainType {
    /// Decodes a type byte.
    pub fn from_u8(v: u8) -> Result<Self> {
        Ok(match v {
            0x10 => ChainType::Update,
            0x11 => ChainType::Ack,
            0x12 => ChainType::Heartbeat,
            0x13 => ChainType::Snap,
            _ => return Err(WireError::Unsupported("unknown RedPlane chain type")),
        })
    }
}

fn be16(b: &[u8], i: usize) -> u16 {
    u16::from_be_bytes([b[i], b[i + 1]])
}

fn be32(b: &[u8], i: usize) -> u32 {
    u32::from_be_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]])
}

fn check_len(buf: &[u8], need: usize) -> Result<()> {
    if buf.len() < need {
        Err(WireError::Truncated)
    } else {
        Ok(())
    }
}

// ---------------------------------------------------------------------------
// Request / ack views
// ---------------------------------------------------------------------------

/// A checked view of a request (§4.2) over the UDP payload:
/// `type(1) seq(2) key(K) value(V) piggyback(rest)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request<T: AsRef<[u8]>> {
    buffer: T,
    k: usize,
    v: usize,
}

impl<T: AsRef<[u8]>> Request<T> {
    /// Checks that the fixed part, K key bytes and V value bytes fit. The
    /// type byte is not checked here ([`Request::req_type`] does).
    pub fn new_checked(buffer: T, k: usize, v: usize) -> Result<Self> {
        check_len(buffer.as_ref(), FIXED_LEN + k + v)?;
        Ok(Request { buffer, k, v })
    }

    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }

    /// The raw type byte.
    pub fn type_byte(&self) -> u8 {
        self.b()[0]
    }

    /// The decoded type.
    pub fn req_type(&self) -> Result<ReqType> {
        ReqType::from_u8(self.type_byte())
    }

    /// Sequence number (epoch for snapshots).
    pub fn seq(&self) -> u16 {
        be16(self.b(), 1)
    }

    /// The K key bytes.
    pub fn key(&self) -> &[u8] {
        &self.b()[FIXED_LEN..FIXED_LEN + self.k]
    }

    /// The V value bytes.
    pub fn value(&self) -> &[u8] {
        &self.b()[FIXED_LEN + self.k..self.header_len()]
    }

    /// `3 + K + V`.
    pub fn header_len(&self) -> usize {
        FIXED_LEN + self.k + self.v
    }

    /// The piggybacked packet (from its IPv4 header on); empty if none.
    pub fn piggyback(&self) -> &[u8] {
        &self.b()[self.header_len()..]
    }

    /// Gives the buffer back.
    pub fn into_inner(self) -> T {
        self.buffer
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Request<T> {
    /// Sets the type byte.
    pub fn set_req_type(&mut self, t: ReqType) {
        self.buffer.as_mut()[0] = t as u8;
    }

    /// Sets the sequence number.
    pub fn set_seq(&mut self, s: u16) {
        self.buffer.as_mut()[1..3].copy_from_slice(&s.to_be_bytes());
    }

    /// The key bytes, writable.
    pub fn key_mut(&mut self) -> &mut [u8] {
        let k = self.k;
        &mut self.buffer.as_mut()[FIXED_LEN..FIXED_LEN + k]
    }

    /// The value bytes, writable.
    pub fn value_mut(&mut self) -> &mut [u8] {
        let (k, h) = (self.k, self.header_len());
        &mut self.buffer.as_mut()[FIXED_LEN + k..h]
    }
}

/// A checked view of an ack (§4.3) over the UDP payload:
/// `type(1) seq(2) key(K) [value(V) if the type carries one] piggyback(rest)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ack<T: AsRef<[u8]>> {
    buffer: T,
    k: usize,
    v: usize,
}

impl<T: AsRef<[u8]>> Ack<T> {
    /// Checks the type byte (it decides whether a value is present) and that
    /// the header fits.
    pub fn new_checked(buffer: T, k: usize, v: usize) -> Result<Self> {
        let b = buffer.as_ref();
        check_len(b, FIXED_LEN + k)?;
        let t = AckType::from_u8(b[0])?;
        let v = if t.carries_value() { v } else { 0 };
        check_len(b, FIXED_LEN + k + v)?;
        Ok(Ack { buffer, k, v })
    }

    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }

    /// The type (checked at construction).
    pub fn ack_type(&self) -> AckType {
        // new_checked validated the byte; LeaseReject is never reached.
        AckType::from_u8(self.b()[0]).unwrap_or(AckType::LeaseReject)
    }

    /// Sequence number.
    pub fn seq(&self) -> u16 {
        be16(self.b(), 1)
    }

    /// The K key bytes.
    pub fn key(&self) -> &[u8] {
        &self.b()[FIXED_LEN..FIXED_LEN + self.k]
    }

    /// The value (empty for types that carry none).
    pub fn value(&self) -> &[u8] {
        &self.b()[FIXED_LEN + self.k..self.header_len()]
    }

    /// `3 + K (+ V)`.
    pub fn header_len(&self) -> usize {
        FIXED_LEN + self.k + self.v
    }

    /// The returned packet (from its IPv4 header on); empty if none.
    pub fn piggyback(&self) -> &[u8] {
        &self.b()[self.header_len()..]
    }

    /// Gives the buffer back.
    pub fn into_inner(self) -> T {
        self.buffer
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ack<T> {
    /// Sets the sequence number.
    pub fn set_seq(&mut self, s: u16) {
        self.buffer.as_mut()[1..3].copy_from_slice(&s.to_be_bytes());
    }
}

/// An owned-or-borrowed description of a request, for building.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestRepr<'a> {
    /// Type.
    pub req_type: ReqType,
    /// Sequence number (0 = no write; epoch for snapshots).
    pub seq: u16,
    /// K key bytes.
    pub key: &'a [u8],
    /// V value bytes (zeros unless a write or snapshot).
    pub value: &'a [u8],
    /// Piggybacked packet from its IPv4 header on (may be empty).
    pub piggyback: &'a [u8],
}

impl<'a> RequestRepr<'a> {
    /// Parses a checked view.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(r: &'a Request<&'a T>) -> Result<Self> {
        Ok(RequestRepr {
            req_type: r.req_type()?,
            seq: r.seq(),
            key: r.key(),
            value: r.value(),
            piggyback: r.piggyback(),
        })
    }

    /// Bytes needed.
    pub fn buffer_len(&self) -> usize {
        FIXED_LEN + self.key.len() + self.value.len() + self.piggyback.len()
    }

    /// Writes into `buf` (at least `buffer_len` long).
    pub fn emit(&self, buf: &mut [u8]) -> Result<()> {
        if buf.len() < self.buffer_len() {
            return Err(WireError::BufferTooSmall);
        }
        buf[0] = self.req_type as u8;
        buf[1..3].copy_from_slice(&self.seq.to_be_bytes());
        let mut o = FIXED_LEN;
        for part in [self.key, self.value, self.piggyback] {
            buf[o..o + part.len()].copy_from_slice(part);
            o += part.len();
        }
        Ok(())
    }

    /// The UDP payload as a vector.
    pub fn to_vec(&self) -> Vec<u8> {
        let mut v = vec![0; self.buffer_len()];
        // The buffer is exactly buffer_len long, so emit cannot fail.
        let _ = self.emit(&mut v);
        v
    }
}

/// A description of an ack, for building. `value` must be empty unless the
/// type carries one ([`AckType::carries_value`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AckRepr<'a> {
    /// Type.
    pub ack_type: AckType,
    /// Sequence number.
    pub seq: u16,
    /// K key bytes.
    pub key: &'a [u8],
    /// V value bytes for NEW/MIGRATE/RESTORE, empty otherwise.
    pub value: &'a [u8],
    /// Returned packet (may be empty).
    pub piggyback: &'a [u8],
}

impl<'a> AckRepr<'a> {
    /// Parses a checked view.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(a: &'a Ack<&'a T>) -> Self {
        AckRepr {
            ack_type: a.ack_type(),
            seq: a.seq(),
            key: a.key(),
            value: a.value(),
            piggyback: a.piggyback(),
        }
    }

    /// Bytes needed.
    pub fn buffer_len(&self) -> usize {
        FIXED_LEN + self.key.len() + self.value.len() + self.piggyback.len()
    }

    /// Writes into `buf`.
    pub fn emit(&self, buf: &mut [u8]) -> Result<()> {
        if !self.ack_type.carries_value() && !self.value.is_empty() {
            return Err(WireError::Malformed(
                "this RedPlane ack type carries no value",
            ));
        }
        if buf.len() < self.buffer_len() {
            return Err(WireError::BufferTooSmall);
        }
        buf[0] = self.ack_type as u8;
        buf[1..3].copy_from_slice(&self.seq.to_be_bytes());
        let mut o = FIXED_LEN;
        for part in [self.key, self.value, self.piggyback] {
            buf[o..o + part.len()].copy_from_slice(part);
            o += part.len();
        }
        Ok(())
    }

    /// The UDP payload as a vector.
    pub fn to_vec(&self) -> Result<Vec<u8>> {
        let mut v = vec![0; self.buffer_len()];
        self.emit(&mut v)?;
        Ok(v)
    }
}

// ---------------------------------------------------------------------------
// Chain messages (§4.5)
// ---------------------------------------------------------------------------

/// Length of a CHAIN_UPDATE with key K and value V:
/// type 1, seq 2, key K, value V, fence 2, owner 4, lease_ms 4, update_id 4.
pub fn chain_update_len(k: usize, v: usize) -> usize {
    FIXED_LEN + k + v + 2 + 4 + 4 + 4
}

/// A checked view of CHAIN_UPDATE (0x10).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainUpdate<T: AsRef<[u8]>> {
    buffer: T,
    k: usize,
    v: usize,
}

impl<T: AsRef<[u8]>> ChainUpdate<T> {
    /// Checks the type byte and the length.
    pub fn new_checked(buffer: T, k: usize, v: usize) -> Result<Self> {
        let b = buffer.as_ref();
        check_len(b, chain_update_len(k, v))?;
        if b[0] != ChainType::Update as u8 {
            return Err(WireError::Malformed("not a CHAIN_UPDATE"));
        }
        Ok(ChainUpdate { buffer, k, v })
    }

    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }

    fn tail(&self) -> usize {
        FIXED_LEN + self.k + self.v
    }

    /// The key's last_seq after this update.
    pub fn seq(&self) -> u16 {
        be16(self.b(), 1)
    }

    /// Key.
    pub fn key(&self) -> &[u8] {
        &self.b()[FIXED_LEN..FIXED_LEN + self.k]
    }

    /// Value after this update.
    pub fn value(&self) -> &[u8] {
        &self.b()[FIXED_LEN + self.k..self.tail()]
    }

    /// Fence after this update.
    pub fn fence(&self) -> u16 {
        be16(self.b(), self.tail())
    }

    /// Owner's IPv4 (0.0.0.0 = none).
    pub fn owner(&self) -> Ipv4Addr {
        Ipv4Addr::from(be32(self.b(), self.tail() + 2))
    }

    /// Remaining lease at the head when it ordered the update, in ms.
    pub fn lease_ms_remaining(&self) -> u32 {
        be32(self.b(), self.tail() + 6)
    }

    /// The head's position in the per-worker update order.
    pub fn update_id(&self) -> u32 {
        be32(self.b(), self.tail() + 10)
    }
}

/// A description of CHAIN_UPDATE, for building.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChainUpdateRepr<'a> {
    /// last_seq after the update.
    pub seq: u16,
    /// Key.
    pub key: &'a [u8],
    /// Value after the update.
    pub value: &'a [u8],
    /// Fence after the update.
    pub fence: u16,
    /// Owner (0.0.0.0 = none).
    pub owner: Ipv4Addr,
    /// Remaining lease in ms.
    pub lease_ms_remaining: u32,
    /// Per-worker update order.
    pub update_id: u32,
}

impl<'a> ChainUpdateRepr<'a> {
    /// Parses a checked view.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(u: &'a ChainUpdate<&'a T>) -> Self {
        ChainUpdateRepr {
            seq: u.seq(),
            key: u.key(),
            value: u.value(),
            fence: u.fence(),
            owner: u.owner(),
            lease_ms_remaining: u.lease_ms_remaining(),
            update_id: u.update_id(),
        }
    }

    /// Bytes needed.
    pub fn buffer_len(&self) -> usize {
        chain_update_len(self.key.len(), self.value.len())
    }

    /// The message as a vector.
    pub fn to_vec(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(self.buffer_len());
        b.push(ChainType::Update as u8);
        b.extend_from_slice(&self.seq.to_be_bytes());
        b.extend_from_slice(self.key);
        b.extend_from_slice(self.value);
        b.extend_from_slice(&self.fence.to_be_bytes());
        b.extend_from_slice(&self.owner.octets());
        b.extend_from_slice(&self.lease_ms_remaining.to_be_bytes());
        b.extend_from_slice(&self.update_id.to_be_bytes());
        b
    }
}

/// Length of CHAIN_ACK: type 1, update_id 4.
pub const CHAIN_ACK_LEN: usize = 5;

/// A checked view of CHAIN_ACK (0x11): cumulative, every update with id ≤
/// `update_id` is at the tail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainAck<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> ChainAck<T> {
    /// Checks the type byte and the length.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let b = buffer.as_ref();
        check_len(b, CHAIN_ACK_LEN)?;
        if b[0] != ChainType::Ack as u8 {
            return Err(WireError::Malformed("not a CHAIN_ACK"));
        }
        Ok(ChainAck { buffer })
    }

    /// Highest committed update id.
    pub fn update_id(&self) -> u32 {
        be32(self.buffer.as_ref(), 1)
    }
}

/// Builds a CHAIN_ACK.
pub fn chain_ack_bytes(update_id: u32) -> Vec<u8> {
    let mut b = vec![ChainType::Ack as u8];
    b.extend_from_slice(&update_id.to_be_bytes());
    b
}

/// Length of CHAIN_SNAP with key K and value V:
/// type 1, epoch 2, key K, value V, commit 1, update_id 4.
pub fn chain_snap_len(k: usize, v: usize) -> usize {
    FIXED_LEN + k + v + 1 + 4
}

/// A checked view of CHAIN_SNAP (0x13) [our choice]: one snapshot entry to
/// stage; `commit = 1` on the last entry of an epoch commits it atomically.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainSnap<T: AsRef<[u8]>> {
    buffer: T,
    k: usize,
    v: usize,
}

impl<T: AsRef<[u8]>> ChainSnap<T> {
    /// Checks the type byte and the length.
    pub fn new_checked(buffer: T, k: usize, v: usize) -> Result<Self> {
        let b = buffer.as_ref();
        check_len(b, chain_snap_len(k, v))?;
        if b[0] != ChainType::Snap as u8 {
            return Err(WireError::Malformed("not a CHAIN_SNAP"));
        }
        Ok(ChainSnap { buffer, k, v })
    }

    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }

    /// Snapshot epoch.
    pub fn epoch(&self) -> u16 {
        be16(self.b(), 1)
    }

    /// Entry key (partition, index).
    pub fn key(&self) -> &[u8] {
        &self.b()[FIXED_LEN..FIXED_LEN + self.k]
    }

    /// Entry value.
    pub fn value(&self) -> &[u8] {
        &self.b()[FIXED_LEN + self.k..FIXED_LEN + self.k + self.v]
    }

    /// Whether this entry commits its epoch.
    pub fn commit(&self) -> bool {
        self.b()[FIXED_LEN + self.k + self.v] != 0
    }

    /// Per-worker update order.
    pub fn update_id(&self) -> u32 {
        be32(self.b(), FIXED_LEN + self.k + self.v + 1)
    }
}

/// A description of CHAIN_SNAP, for building.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChainSnapRepr<'a> {
    /// Epoch.
    pub epoch: u16,
    /// Entry key.
    pub key: &'a [u8],
    /// Entry value.
    pub value: &'a [u8],
    /// Last entry: commit the epoch.
    pub commit: bool,
    /// Per-worker update order.
    pub update_id: u32,
}

impl<'a> ChainSnapRepr<'a> {
    /// Parses a checked view.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(s: &'a ChainSnap<&'a T>) -> Self {
        ChainSnapRepr {
            epoch: s.epoch(),
            key: s.key(),
            value: s.value(),
            commit: s.commit(),
            update_id: s.update_id(),
        }
    }

    /// The message as a vector.
    pub fn to_vec(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(chain_snap_len(self.key.len(), self.value.len()));
        b.push(ChainType::Snap as u8);
        b.extend_from_slice(&self.epoch.to_be_bytes());
        b.extend_from_slice(self.key);
        b.extend_from_slice(self.value);
        b.push(u8::from(self.commit));
        b.extend_from_slice(&self.update_id.to_be_bytes());
        b
    }
}

/// Length of HEARTBEAT: type 1, config_version 4, removed 4, flags 1.
pub const HEARTBEAT_LEN: usize = 10;

/// A checked view of HEARTBEAT (0x12) [our choice], sent to
/// [`NODE_CONTROL_PORT`]: the sender's membership view.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Heartbeat<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Heartbeat<T> {
    /// Checks the type byte and the length.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let b = buffer.as_ref();
        check_len(b, HEARTBEAT_LEN)?;
        if b[0] != ChainType::Heartbeat as u8 {
            return Err(WireError::Malformed("not a HEARTBEAT"));
        }
        Ok(Heartbeat { buffer })
    }

    /// How many membership changes the sender has applied.
    pub fn config_version(&self) -> u32 {
        be32(self.buffer.as_ref(), 1)
    }

    /// Bit i set: the member at position i of the static chain order is removed.
    pub fn removed(&self) -> u32 {
        be32(self.buffer.as_ref(), 5)
    }

    /// Bit 0: the sender restarted and holds no state (it must not be re-added
    /// without a state transfer).
    pub fn flags(&self) -> u8 {
        self.buffer.as_ref()[9]
    }
}

/// A description of HEARTBEAT.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeartbeatRepr {
    /// Membership changes applied by the sender.
    pub config_version: u32,
    /// Removed-member bitmap over the static chain order.
    pub removed: u32,
    /// Flags (bit 0: sender restarted empty).
    pub flags: u8,
}

impl HeartbeatRepr {
    /// Parses a checked view.
    pub fn parse<T: AsRef<[u8]>>(h: &Heartbeat<T>) -> Self {
        HeartbeatRepr {
            config_version: h.config_version(),
            removed: h.removed(),
            flags: h.flags(),
        }
    }

    /// The message as a vector.
    pub fn to_vec(&self) -> Vec<u8> {
        let mut b = vec![ChainType::Heartbeat as u8];
        b.extend_from_slice(&self.config_version.to_be_bytes());
        b.extend_from_slice(&self.removed.to_be_bytes());
        b.push(self.flags);
        b
    }
}

/// Length of HEAD_ANNOUNCE: type 1, config_version 4, old head 4, new head 4.
pub const HEAD_ANNOUNCE_LEN: usize = 13;

/// A checked view of HEAD_ANNOUNCE (0x20) [our choice]: store → switch on UDP
/// 4000 (source port 9000). A switch control plane applies it to its
/// `shard_map`: every entry whose store IP is `old_head` now points to
/// `new_head` (same worker port). Announcements with a `config_version` not
/// newer than the last applied one for that chain are ignored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeadAnnounce<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> HeadAnnounce<T> {
    /// Checks the type byte and the length.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let b = buffer.as_ref();
        check_len(b, HEAD_ANNOUNCE_LEN)?;
        if b[0] != ANNOUNCE_TYPE {
            return Err(WireError::Malformed("not a HEAD_ANNOUNCE"));
        }
        Ok(HeadAnnounce { buffer })
    }

    /// The chain's configuration version.
    pub fn config_version(&self) -> u32 {
        be32(self.buffer.as_ref(), 1)
    }

    /// The head being replaced.
    pub fn old_head(&self) -> Ipv4Addr {
        Ipv4Addr::from(be32(self.buffer.as_ref(), 5))
    }

    /// The new head.
    pub fn new_head(&self) -> Ipv4Addr {
        Ipv4Addr::from(be32(self.buffer.as_ref(), 9))
    }
}

/// A description of HEAD_ANNOUNCE.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeadAnnounceRepr {
    /// Configuration version.
    pub config_version: u32,
    /// Head being replaced.
    pub old_head: Ipv4Addr,
    /// New head.
    pub new_head: Ipv4Addr,
}

impl HeadAnnounceRepr {
    /// Parses a checked view.
    pub fn parse<T: AsRef<[u8]>>(h: &HeadAnnounce<T>) -> Self {
        HeadAnnounceRepr {
            config_version: h.config_version(),
            old_head: h.old_head(),
            new_head: h.new_head(),
        }
    }

    /// The message as a vector.
    pub fn to_vec(&self) -> Vec<u8> {
        let mut b = vec![ANNOUNCE_TYPE];
        b.extend_from_slice(&self.config_version.to_be_bytes());
        b.extend_from_slice(&self.old_head.octets());
        b.extend_from_slice(&self.new_head.octets());
        b
    }
}

// ---------------------------------------------------------------------------
// Whole frames
// ---------------------------------------------------------------------------

/// RedPlane frames are read with the one UDP-frame parser
/// ([`crate::udp_frame`]); the names stay here for RedPlane's callers.
pub use crate::udp_frame::{parse_udp_frame, UdpFrame as UdpFrameInfo};

/// Endpoints with RedPlane's IPv4 fields: TTL 64, DSCP 0, DF clear,
/// Identification `ident`.
pub fn rp_endpoints(
    src_mac: MacAddr,
    src_ip: Ipv4Addr,
    dst_mac: MacAddr,
    dst_ip: Ipv4Addr,
    ident: u16,
) -> Endpoints {
    Endpoints {
        ident,
        dont_frag: false,
        ..Endpoints::new(src_mac, src_ip, dst_mac, dst_ip)
    }
}

/// Any RedPlane UDP payload in a whole frame; UDP checksum 0. TTL, DSCP and
/// Identification come from `ep` (see [`rp_endpoints`]).
pub fn build_rp_frame(
    ep: &Endpoints,
    src_port: u16,
    dst_port: u16,
    payload: &[u8],
) -> Result<Vec<u8>> {
    build_udp_frame(ep, src_port, dst_port, payload, false)
}

/// A request frame: UDP 4000 → `worker_port`.
pub fn build_request_frame(
    ep: &Endpoints,
    worker_port: u16,
    req: &RequestRepr<'_>,
) -> Result<Vec<u8>> {
    build_rp_frame(ep, SWITCH_PORT, worker_port, &req.to_vec())
}

/// An ack frame: `worker_port` → UDP 4000.
pub fn build_ack_frame(ep: &Endpoints, worker_port: u16, ack: &AckRepr<'_>) -> Result<Vec<u8>> {
    build_rp_frame(ep, worker_port, SWITCH_PORT, &ack.to_vec()?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const SW: [u8; 6] = [2, 0, 0, 0, 0, 1];
    const ST: [u8; 6] = [2, 0, 0, 0, 0, 2];

    #[test]
    fn constants_and_ports() {
        assert!(is_store_port(8000) && is_store_port(8063));
        assert!(!is_store_port(8064) && !is_store_port(7999) && !is_store_port(4000));
        assert_eq!(worker_of_port(8001), Some(1));
        assert_eq!(worker_of_port(8000), None);
        assert_eq!(chain_port(8003), 9003);
    }

    #[test]
    fn serial_arithmetic() {
        assert_eq!(seq_next(1), 2);
        assert_eq!(seq_next(65535), 1);
        assert_eq!(seq_add(65535, 1), 1);
        assert_eq!(seq_add(65000, 4096), 3561);
        assert_eq!(seq_add(10, 4096), 4106);
        assert!(serial_lt(65535, 1));
        assert!(serial_lt(65000, 3000));
        assert!(!serial_lt(3000, 65000));
        assert!(serial_lt(1, 2) && !serial_lt(2, 1) && !serial_lt(5, 5));
        assert!(serial_le(5, 5));
        assert_eq!(serial_max(65530, 4), 4);
        assert_eq!(serial_max(4, 65530), 4);
        // Exactly 2^15 apart is undefined: neither is less.
        assert!(!serial_lt(0, 0x8000) && !serial_lt(0x8000, 0));
    }

    #[test]
    fn nat_header_sizes_match_spec() {
        // §4.2/§4.3: NAT request header 15 B, bare ack header 9 B.
        let key = [10, 0, 0, 1, 0x1f, 0x90];
        let r = RequestRepr {
            req_type: ReqType::LeaseRenew,
            seq: 7,
            key: &key,
            value: &[0; 6],
            piggyback: &[],
        };
        assert_eq!(r.buffer_len(), 15);
        let a = AckRepr {
            ack_type: AckType::LeaseRenew,
            seq: 7,
            key: &key,
            value: &[],
            piggyback: &[],
        };
        assert_eq!(a.buffer_len(), 9);
        let ep = rp_endpoints(
            ST,
            Ipv4Addr::new(10, 9, 0, 1),
            SW,
            Ipv4Addr::new(10, 1, 0, 1),
            0x1234,
        );
        let f = build_ack_frame(&ep, 8001, &a).unwrap();
        let info = parse_udp_frame(&f).unwrap();
        // IPv4 total length exactly 20 + 8 + 3 + K for a bare RENEW_ACK.
        assert_eq!(f.len(), 14 + 20 + 8 + 9);
        assert_eq!(info.ident, 0x1234);
        assert_eq!(info.src_port, 8001);
        assert_eq!(info.dst_port, SWITCH_PORT);
        assert!(AckRepr {
            value: &[1; 6],
            ..a
        }
        .to_vec()
        .is_err());
    }

    #[test]
    fn padded_frames_parse_without_padding() {
        let ep = rp_endpoints(
            SW,
            Ipv4Addr::new(10, 1, 0, 1),
            ST,
            Ipv4Addr::new(10, 9, 0, 1),
            1,
        );
        let a = AckRepr {
            ack_type: AckType::LeaseReject,
            seq: 3,
            key: &[1, 2],
            value: &[],
            piggyback: &[],
        };
        let mut f = build_ack_frame(&ep, 8001, &a).unwrap();
        f.resize(60, 0); // Ethernet minimum-size padding
        let info = parse_udp_frame(&f).unwrap();
        let ack = Ack::new_checked(info.payload, 2, 4).unwrap();
        assert!(ack.piggyback().is_empty());
        assert_eq!(ack.ack_type(), AckType::LeaseReject);
    }

    fn req_type() -> impl Strategy<Value = ReqType> {
        proptest::sample::select(vec![
            ReqType::LeaseNew,
            ReqType::LeaseRenew,
            ReqType::BufRead,
            ReqType::Snapshot,
        ])
    }

    fn ack_type() -> impl Strategy<Value = AckType> {
        (0u8..7).prop_map(|b| AckType::from_u8(b).unwrap())
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200),
                                    k in 0usize..20, v in 0usize..20) {
            if let Ok(r) = Request::new_checked(&bytes[..], k, v) {
                let _ = (r.req_type(), r.seq(), r.key(), r.value(), r.piggyback());
            }
            if let Ok(a) = Ack::new_checked(&bytes[..], k, v) {
                let _ = (a.ack_type(), a.seq(), a.key(), a.value(), a.piggyback());
            }
            if let Ok(u) = ChainUpdate::new_checked(&bytes[..], k, v) {
                let _ = ChainUpdateRepr::parse(&u);
            }
            if let Ok(s) = ChainSnap::new_checked(&bytes[..], k, v) {
                let _ = ChainSnapRepr::parse(&s);
            }
            if let Ok(a) = ChainAck::new_checked(&bytes[..]) { let _ = a.update_id(); }
            if let Ok(h) = Heartbeat::new_checked(&bytes[..]) { let _ = HeartbeatRepr::parse(&h); }
            if let Ok(h) = HeadAnnounce::new_checked(&bytes[..]) { let _ = HeadAnnounceRepr::parse(&h); }
            let _ = parse_udp_frame(&bytes);
        }

        #[test]
        fn request_roundtrip(t in req_type(), seq in any::<u16>(),
                             key in proptest::collection::vec(any::<u8>(), 0..16),
                             value in proptest::collection::vec(any::<u8>(), 0..16),
                             pig in proptest::collection::vec(any::<u8>(), 0..64),
                             ident in any::<u16>(), w in 1u16..64) {
            let r = RequestRepr { req_type: t, seq, key: &key, value: &value, piggyback: &pig };
            let ep = rp_endpoints(SW, Ipv4Addr::new(10, 1, 0, 1), ST, Ipv4Addr::new(10, 9, 0, 1), ident);
            let f = build_request_frame(&ep, 8000 + w, &r).unwrap();
            let info = parse_udp_frame(&f).unwrap();
            prop_assert_eq!(info.ident, ident);
            prop_assert_eq!(info.dst_port, 8000 + w);
            prop_assert_eq!(info.src_port, SWITCH_PORT);
            let view = Request::new_checked(info.payload, key.len(), value.len()).unwrap();
            prop_assert_eq!(RequestRepr::parse(&view).unwrap(), r);
        }

        #[test]
        fn ack_roundtrip(t in ack_type(), seq in any::<u16>(),
                         key in proptest::collection::vec(any::<u8>(), 0..16),
                         value in proptest::collection::vec(any::<u8>(), 1..16),
                         pig in proptest::collection::vec(any::<u8>(), 0..64)) {
            let v: &[u8] = if t.carries_value() { &value } else { &[] };
            let a = AckRepr { ack_type: t, seq, key: &key, value: v, piggyback: &pig };
            let bytes = a.to_vec().unwrap();
            let view = Ack::new_checked(&bytes[..], key.len(), value.len()).unwrap();
            prop_assert_eq!(AckRepr::parse(&view), a);
        }

        #[test]
        fn chain_roundtrip(seq in any::<u16>(), fence in any::<u16>(), owner in any::<u32>(),
                           ms in any::<u32>(), id in any::<u32>(), commit in any::<bool>(),
                           key in proptest::collection::vec(any::<u8>(), 0..16),
                           value in proptest::collection::vec(any::<u8>(), 0..16)) {
            let u = ChainUpdateRepr { seq, key: &key, value: &value, fence, owner: Ipv4Addr::from(owner),
                                      lease_ms_remaining: ms, update_id: id };
            let b = u.to_vec();
            prop_assert_eq!(b.len(), u.buffer_len());
            let view = ChainUpdate::new_checked(&b[..], key.len(), value.len()).unwrap();
            prop_assert_eq!(ChainUpdateRepr::parse(&view), u);
            let s = ChainSnapRepr { epoch: seq, key: &key, value: &value, commit, update_id: id };
            let b = s.to_vec();
            let view = ChainSnap::new_checked(&b[..], key.len(), value.len()).unwrap();
            prop_assert_eq!(ChainSnapRepr::parse(&view), s);
            prop_assert_eq!(ChainAck::new_checked(chain_ack_bytes(id)).unwrap().update_id(), id);
            let h = HeartbeatRepr { config_version: id, removed: owner, flags: commit as u8 };
            prop_assert_eq!(HeartbeatRepr::parse(&Heartbeat::new_checked(h.to_vec()).unwrap()), h);
            let a = HeadAnnounceRepr { config_version: id, old_head: Ipv4Addr::from(owner),
                                       new_head: Ipv4Addr::from(ms) };
            prop_assert_eq!(HeadAnnounceRepr::parse(&HeadAnnounce::new_checked(a.to_vec()).unwrap()), a);
        }
    }
}
