//! The TEA agent protocol (spec §4.3): the messages between the switch
//! control plane and a DRAM server's agent, encoded and decoded in one place
//! so that both ends share the same code.
//!
//! One message is `len u32 | type u8 | req_id u32 | body`, all big-endian,
//! where `len` counts the bytes after itself (`5 + body`) [our choice: the
//! spec does not say what `len` covers]. A reply has the request's type with
//! bit 7 set and echoes its `req_id`; a request that fails gets an
//! [`Reply::Error`] (type 0xFF) instead [our choice].
//!
//! Carriage [lead's choice, docs/wire.md]: one message per UDP datagram,
//! destination port [`AGENT_UDP_PORT`] at the server; replies go back to the
//! request's source address and port. Requests are idempotent by `req_id`:
//! a retransmitted request gets the first reply again. HELLO is the one
//! request the agent originates (at boot and after a restart), sent to the
//! control plane's [`AGENT_UDP_PORT`]; every other request comes from the
//! control plane.
//!
//! Body layouts (request → reply), field widths in bits where not bytes:
//!
//! | type | request body | reply body |
//! |---|---|---|
//! | 0x01 HELLO | server_id u16, dram_offered u64, mac[6], ip u32, max_rd_atomic u8, pmtu u16 | 0x81: empty |
//! | 0x02 ALLOC_REGION | region_id u16, bytes u64 | 0x82: base_va u64, rkey u32 |
//! | 0x03 CREATE_QP | qp_idx u16, remote_qpn u24, remote_mac[6], remote_ip u32, init_psn u24, pmtu u16, max_rd_atomic u8 | 0x83: qpn u24, state u8 |
//! | 0x04 WRITE_BATCH | count u16, count × (region u16, offset u64, len u16, bytes[len]) | 0x84: status u8 |
//! | 0x05 READ_MEM | region u16, offset u64, len u16 | 0x85: bytes[len] |
//! | 0x06 RESET_QP | qp_idx u16, init_psn u24, remote_qpn u24 | 0x86: qpn u24, state u8 |
//! | 0x07 QP_STATUS | qp_idx u16 | 0x87: state u8, epsn u24, rd_inflight u8 |
//! | 0x08 HEARTBEAT | empty | 0x88: empty |
//! | — | — | 0xFF ERROR: code u8 |
//!
//! RESET_QP carries `remote_qpn` [our choice]: the spec's body is only
//! `qp_idx, init_psn`, but a reset QP gets a new incarnation and so a new
//! switch pseudo QPN (§4.2), which the NIC must put in its responses.
//! QP states use the `ibv_qp_state` numbering (RESET 0, INIT 1, RTR 2,
//! RTS 3, ERROR 6).

use std::net::Ipv4Addr;

use inca_wire::MacAddr;

/// The UDP port the agent listens on (and the control plane receives HELLO on).
pub const AGENT_UDP_PORT: u16 = 7470;
/// Bytes before the body: len u32, type u8, req_id u32.
pub const HEADER_LEN: usize = 9;
/// The largest encoded message [our choice]: it must fit one frame on the
/// server link (MTU 9000, spec §5.9) with IPv4 and UDP headers.
pub const MAX_MESSAGE_LEN: usize = 8192;
/// Bytes of one WRITE_BATCH entry before its data.
pub const WRITE_ENTRY_HEADER_LEN: usize = 12;
/// The largest READ_MEM length that fits in a reply.
pub const MAX_READ_LEN: usize = MAX_MESSAGE_LEN - HEADER_LEN;

/// Message type bytes.
pub mod msg_type {
    /// HELLO.
    pub const HELLO: u8 = 0x01;
    /// ALLOC_REGION.
    pub const ALLOC_REGION: u8 = 0x02;
    /// CREATE_QP.
    pub const CREATE_QP: u8 = 0x03;
    /// WRITE_BATCH.
    pub const WRITE_BATCH: u8 = 0x04;
    /// READ_MEM.
    pub const READ_MEM: u8 = 0x05;
    /// RESET_QP.
    pub const RESET_QP: u8 = 0x06;
    /// QP_STATUS.
    pub const QP_STATUS: u8 = 0x07;
    /// HEARTBEAT.
    pub const HEARTBEAT: u8 = 0x08;
    /// Bit set in every reply type.
    pub const REPLY_BIT: u8 = 0x80;
    /// ERROR reply.
    pub const ERROR: u8 = 0xFF;
}

/// Why a request failed: the code in a [`Reply::Error`] or a WRITE_BATCH status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(u8)]
pub enum ErrorCode {
    /// The request was not understood.
    BadRequest = 1,
    /// No region with that id.
    UnknownRegion = 2,
    /// Offset + length outside the region.
    OutOfBounds = 3,
    /// Not enough offered DRAM left for the region (or a region id reused
    /// with another size).
    NoMemory = 4,
    /// No QP with that index.
    UnknownQp = 5,
    /// A parameter the NIC cannot honour (PMTU, max_rd_atomic, too many QPs).
    BadParameter = 6,
}

impl ErrorCode {
    /// The code for a byte, if defined.
    pub fn from_u8(v: u8) -> Option<ErrorCode> {
        Some(match v {
            1 => ErrorCode::BadRequest,
            2 => ErrorCode::UnknownRegion,
            3 => ErrorCode::OutOfBounds,
            4 => ErrorCode::NoMemory,
            5 => ErrorCode::UnknownQp,
            6 => ErrorCode::BadParameter,
            _ => return None,
        })
    }
}

/// A queue pair's state, numbered as `ibv_qp_state`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(u8)]
pub enum QpState {
    /// Freshly created or reset.
    Reset = 0,
    /// Initialised.
    Init = 1,
    /// Ready to receive.
    Rtr = 2,
    /// Ready to send.
    Rts = 3,
    /// Broken; only a reset revives it.
    Error = 6,
}

impl QpState {
    /// The state for a byte, if defined.
    pub fn from_u8(v: u8) -> Option<QpState> {
        Some(match v {
            0 => QpState::Reset,
            1 => QpState::Init,
            2 => QpState::Rtr,
            3 => QpState::Rts,
            6 => QpState::Error,
            _ => return None,
        })
    }
}

/// HELLO: a server announcing itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hello {
    /// The server's id.
    pub server_id: u16,
    /// DRAM offered to TEA, bytes.
    pub dram_offered: u64,
    /// The NIC's MAC.
    pub mac: MacAddr,
    /// The NIC's IPv4 address.
    pub ip: Ipv4Addr,
    /// The NIC's max_dest_rd_atomic.
    pub max_rd_atomic: u8,
    /// The NIC's path MTU for RoCE.
    pub pmtu: u16,
}

/// CREATE_QP: an RC QP connected to the switch's pseudo QP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CreateQp {
    /// The control plane's index for this QP.
    pub qp_idx: u16,
    /// The switch's pseudo QPN (24 bits), the DestQP of responses.
    pub remote_qpn: u32,
    /// The switch's RDMA MAC.
    pub remote_mac: MacAddr,
    /// The switch's RDMA IP.
    pub remote_ip: Ipv4Addr,
    /// The first expected PSN (24 bits).
    pub init_psn: u32,
    /// Path MTU.
    pub pmtu: u16,
    /// max_dest_rd_atomic.
    pub max_rd_atomic: u8,
}

/// One write of a WRITE_BATCH.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteEntry {
    /// Region id.
    pub region: u16,
    /// Offset in the region.
    pub offset: u64,
    /// The bytes; the first is a cell's flags byte (§4.3 write order).
    pub data: Vec<u8>,
}

/// A request (control plane → agent, or HELLO agent → control plane).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// 0x01.
    Hello(Hello),
    /// 0x02.
    AllocRegion {
        /// Region id.
        region_id: u16,
        /// Size in bytes.
        bytes: u64,
    },
    /// 0x03.
    CreateQp(CreateQp),
    /// 0x04.
    WriteBatch(Vec<WriteEntry>),
    /// 0x05.
    ReadMem {
        /// Region id.
        region: u16,
        /// Offset in the region.
        offset: u64,
        /// Length, at most [`MAX_READ_LEN`].
        len: u16,
    },
    /// 0x06.
    ResetQp {
        /// QP index.
        qp_idx: u16,
        /// New first expected PSN (24 bits).
        init_psn: u32,
        /// New switch pseudo QPN (24 bits).
        remote_qpn: u32,
    },
    /// 0x07.
    QpStatus {
        /// QP index.
        qp_idx: u16,
    },
    /// 0x08.
    Heartbeat,
}

/// A reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// 0x81.
    HelloOk,
    /// 0x82.
    Region {
        /// Base virtual address.
        base_va: u64,
        /// Remote key.
        rkey: u32,
    },
    /// 0x83.
    QpCreated {
        /// The NIC's QPN (24 bits), the DestQP of requests.
        qpn: u32,
        /// Its state.
        state: QpState,
    },
    /// 0x84: `None` once every write is visible to the NIC, else why none was
    /// applied (a batch is applied whole or not at all [our choice]).
    WriteDone(Option<ErrorCode>),
    /// 0x85.
    Mem(Vec<u8>),
    /// 0x86.
    QpReset {
        /// The NIC's QPN.
        qpn: u32,
        /// Its state.
        state: QpState,
    },
    /// 0x87.
    QpStatus {
        /// State.
        state: QpState,
        /// Expected PSN.
        epsn: u32,
        /// READs not yet fully answered.
        rd_inflight: u8,
    },
    /// 0x88.
    HeartbeatOk,
    /// 0xFF.
    Error(ErrorCode),
}

/// The body of a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Body {
    /// A request.
    Request(Request),
    /// A reply.
    Reply(Reply),
}

/// One framed message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// Request id; a reply echoes its request's.
    pub req_id: u32,
    /// What it says.
    pub body: Body,
}

/// Why bytes are not a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ProtoError {
    /// Fewer bytes than the header or the declared length.
    #[error("agent message truncated")]
    Truncated,
    /// Bytes after the declared length, or a length over the maximum.
    #[error("agent message length field does not match")]
    BadLength,
    /// An unknown type byte.
    #[error("unknown agent message type {0:#04x}")]
    UnknownType(u8),
    /// A field holds a value the protocol does not allow.
    #[error("malformed agent message: {0}")]
    Malformed(&'static str),
    /// The message would exceed [`MAX_MESSAGE_LEN`] or a field's width.
    #[error("agent message too large: {0}")]
    TooLarge(&'static str),
}

impl Request {
    /// Its type byte.
    pub fn msg_type(&self) -> u8 {
        use msg_type::*;
        match self {
            Request::Hello(_) => HELLO,
            Request::AllocRegion { .. } => ALLOC_REGION,
            Request::CreateQp(_) => CREATE_QP,
            Request::WriteBatch(_) => WRITE_BATCH,
            Request::ReadMem { .. } => READ_MEM,
            Request::ResetQp { .. } => RESET_QP,
            Request::QpStatus { .. } => QP_STATUS,
            Request::Heartbeat => HEARTBEAT,
        }
    }
}

impl Reply {
    /// Its type byte.
    pub fn msg_type(&self) -> u8 {
        use msg_type::*;
        match self {
            Reply::HelloOk => HELLO | REPLY_BIT,
            Reply::Region { .. } => ALLOC_REGION | REPLY_BIT,
            Reply::QpCreated { .. } => CREATE_QP | REPLY_BIT,
            Reply::WriteDone(_) => WRITE_BATCH | REPLY_BIT,
            Reply::Mem(_) => READ_MEM | REPLY_BIT,
            Reply::QpReset { .. } => RESET_QP | REPLY_BIT,
            Reply::QpStatus { .. } => QP_STATUS | REPLY_BIT,
            Reply::HeartbeatOk => HEARTBEAT | REPLY_BIT,
            Reply::Error(_) => ERROR,
        }
    }
}

// ------------------------------------------------------------- encoding

struct Writer(Vec<u8>);

impl Writer {
    fn u8(&mut self, v: u8) {
        self.0.push(v);
    }
    fn u16(&mut self, v: u16) {
        self.0.extend_from_slice(&v.to_be_bytes());
    }
    fn u24(&mut self, v: u32) -> Result<(), ProtoError> {
        if v > 0xFF_FFFF {
            return Err(ProtoError::TooLarge("24-bit field"));
        }
        self.0.extend_from_slice(&v.to_be_bytes()[1..]);
        Ok(())
    }
    fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_be_bytes());
    }
    fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_be_bytes());
    }
    fn bytes(&mut self, b: &[u8]) {
        self.0.extend_from_slice(b);
    }
}

impl Message {
    /// A request message.
    pub fn request(req_id: u32, r: Request) -> Message {
        Message {
            req_id,
            body: Body::Request(r),
        }
    }

    /// A reply message.
    pub fn reply(req_id: u32, r: Reply) -> Message {
        Message {
            req_id,
            body: Body::Reply(r),
        }
    }

    /// The type byte.
    pub fn msg_type(&self) -> u8 {
        match &self.body {
            Body::Request(r) => r.msg_type(),
            Body::Reply(r) => r.msg_type(),
        }
    }

    /// The bytes on the wire. Fails only when a field does not fit its width
    /// or the message exceeds [`MAX_MESSAGE_LEN`].
    pub fn encode(&self) -> Result<Vec<u8>, ProtoError> {
        let mut w = Writer(Vec::with_capacity(64));
        w.u32(0); // len, patched below
        w.u8(self.msg_type());
        w.u32(self.req_id);
        match &self.body {
            Body::Request(r) => encode_request(&mut w, r)?,
            Body::Reply(r) => encode_reply(&mut w, r)?,
        }
        if w.0.len() > MAX_MESSAGE_LEN {
            return Err(ProtoError::TooLarge("message over MAX_MESSAGE_LEN"));
        }
        let len = (w.0.len() - 4) as u32;
        w.0[..4].copy_from_slice(&len.to_be_bytes());
        Ok(w.0)
    }

    /// Parses exactly one message occupying all of `b` (one UDP datagram).
    pub fn decode(b: &[u8]) -> Result<Message, ProtoError> {
        let n = message_len(b)?.ok_or(ProtoError::Truncated)?;
        if n != b.len() {
            return Err(ProtoError::BadLength);
        }
        let ty = b[4];
        let req_id = u32::from_be_bytes([b[5], b[6], b[7], b[8]]);
        let mut r = Reader {
            b: &b[HEADER_LEN..],
        };
        let body = if ty & msg_type::REPLY_BIT == 0 {
            Body::Request(decode_request(ty, &mut r)?)
        } else {
            Body::Reply(decode_reply(ty, &mut r)?)
        };
        if !r.b.is_empty() {
            return Err(ProtoError::BadLength);
        }
        Ok(Message { req_id, body })
    }
}

/// For a byte stream (TCP in live mode): the length of the message at the
/// start of `b`, `Ok(None)` when its header is not all there yet, an error
/// when the length field is impossible.
pub fn message_len(b: &[u8]) -> Result<Option<usize>, ProtoError> {
    if b.len() < 4 {
        return Ok(None);
    }
    let len = u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as usize;
    if len < HEADER_LEN - 4 || len + 4 > MAX_MESSAGE_LEN {
        return Err(ProtoError::BadLength);
    }
    if b.len() < HEADER_LEN {
        return Ok(None);
    }
    Ok(Some(len + 4))
}

fn encode_request(w: &mut Writer, r: &Request) -> Result<(), ProtoError> {
    match r {
        Request::Hello(h) => {
            w.u16(h.server_id);
            w.u64(h.dram_offered);
            w.bytes(&h.mac);
            w.u32(u32::from(h.ip));
            w.u8(h.max_rd_atomic);
            w.u16(h.pmtu);
        }
        Request::AllocRegion { region_id, bytes } => {
            w.u16(*region_id);
            w.u64(*bytes);
        }
        Request::CreateQp(c) => {
            w.u16(c.qp_idx);
            w.u24(c.remote_qpn)?;
            w.bytes(&c.remote_mac);
            w.u32(u32::from(c.remote_ip));
            w.u24(c.init_psn)?;
            w.u16(c.pmtu);
            w.u8(c.max_rd_atomic);
        }
        Request::WriteBatch(entries) => {
            let count =
                u16::try_from(entries.len()).map_err(|_| ProtoError::TooLarge("batch count"))?;
            w.u16(count);
            for e in entries {
                let len =
                    u16::try_from(e.data.len()).map_err(|_| ProtoError::TooLarge("entry len"))?;
                w.u16(e.region);
                w.u64(e.offset);
                w.u16(len);
                w.bytes(&e.data);
            }
        }
        Request::ReadMem {
            region,
            offset,
            len,
        } => {
            if usize::from(*len) > MAX_READ_LEN {
                return Err(ProtoError::TooLarge("READ_MEM len"));
            }
            w.u16(*region);
            w.u64(*offset);
            w.u16(*len);
        }
        Request::ResetQp {
            qp_idx,
            init_psn,
            remote_qpn,
        } => {
            w.u16(*qp_idx);
            w.u24(*init_psn)?;
            w.u24(*remote_qpn)?;
        }
        Request::QpStatus { qp_idx } => w.u16(*qp_idx),
        Request::Heartbeat => {}
    }
    Ok(())
}

fn encode_reply(w: &mut Writer, r: &Reply) -> Result<(), ProtoError> {
    match r {
        Reply::HelloOk | Reply::HeartbeatOk => {}
        Reply::Region { base_va, rkey } => {
            w.u64(*base_va);
            w.u32(*rkey);
        }
        Reply::QpCreated { qpn, state } | Reply::QpReset { qpn, state } => {
            w.u24(*qpn)?;
            w.u8(*state as u8);
        }
        Reply::WriteDone(status) => w.u8(status.map_or(0, |c| c as u8)),
        Reply::Mem(bytes) => w.bytes(bytes),
        Reply::QpStatus {
            state,
            epsn,
            rd_inflight,
        } => {
            w.u8(*state as u8);
            w.u24(*epsn)?;
            w.u8(*rd_inflight);
        }
        Reply::Error(code) => w.u8(*code as u8),
    }
    Ok(())
}

// ------------------------------------------------------------- decoding

struct Reader<'a> {
    b: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], ProtoError> {
        if self.b.len() < n {
            return Err(ProtoError::Truncated);
        }
        let (h, t) = self.b.split_at(n);
        self.b = t;
        Ok(h)
    }
    fn u8(&mut self) -> Result<u8, ProtoError> {
        Ok(self.take(1)?[0])
    }
    fn u16(&mut self) -> Result<u16, ProtoError> {
        let b = self.take(2)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }
    fn u24(&mut self) -> Result<u32, ProtoError> {
        let b = self.take(3)?;
        Ok(u32::from_be_bytes([0, b[0], b[1], b[2]]))
    }
    fn u32(&mut self) -> Result<u32, ProtoError> {
        let b = self.take(4)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn u64(&mut self) -> Result<u64, ProtoError> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_be_bytes(a))
    }
    fn mac(&mut self) -> Result<MacAddr, ProtoError> {
        let b = self.take(6)?;
        let mut a = [0u8; 6];
        a.copy_from_slice(b);
        Ok(a)
    }
    fn state(&mut self) -> Result<QpState, ProtoError> {
        QpState::from_u8(self.u8()?).ok_or(ProtoError::Malformed("QP state"))
    }
}

fn decode_request(ty: u8, r: &mut Reader<'_>) -> Result<Request, ProtoError> {
    use msg_type::*;
    Ok(match ty {
        HELLO => Request::Hello(Hello {
            server_id: r.u16()?,
            dram_offered: r.u64()?,
            mac: r.mac()?,
            ip: Ipv4Addr::from(r.u32()?),
            max_rd_atomic: r.u8()?,
            pmtu: r.u16()?,
        }),
        ALLOC_REGION => Request::AllocRegion {
            region_id: r.u16()?,
            bytes: r.u64()?,
        },
        CREATE_QP => Request::CreateQp(CreateQp {
            qp_idx: r.u16()?,
            remote_qpn: r.u24()?,
            remote_mac: r.mac()?,
            remote_ip: Ipv4Addr::from(r.u32()?),
            init_psn: r.u24()?,
            pmtu: r.u16()?,
            max_rd_atomic: r.u8()?,
        }),
        WRITE_BATCH => {
            let count = r.u16()?;
            // Every entry needs its header, so a count larger than the bytes
            // present cannot be honest; this also bounds the allocation.
            if usize::from(count) * WRITE_ENTRY_HEADER_LEN > r.b.len() {
                return Err(ProtoError::Truncated);
            }
            let mut entries = Vec::with_capacity(usize::from(count));
            for _ in 0..count {
                let region = r.u16()?;
                let offset = r.u64()?;
                let len = r.u16()?;
                let data = r.take(usize::from(len))?.to_vec();
                entries.push(WriteEntry {
                    region,
                    offset,
                    data,
                });
            }
            Request::WriteBatch(entries)
        }
        READ_MEM => {
            let region = r.u16()?;
            let offset = r.u64()?;
            let len = r.u16()?;
            if usize::from(len) > MAX_READ_LEN {
                return Err(ProtoError::Malformed("READ_MEM len over MAX_READ_LEN"));
            }
            Request::ReadMem {
                region,
                offset,
                len,
            }
        }
        RESET_QP => Request::ResetQp {
            qp_idx: r.u16()?,
            init_psn: r.u24()?,
            remote_qpn: r.u24()?,
        },
        QP_STATUS => Request::QpStatus { qp_idx: r.u16()? },
        HEARTBEAT => Request::Heartbeat,
        other => return Err(ProtoError::UnknownType(other)),
    })
}

fn decode_reply(ty: u8, r: &mut Reader<'_>) -> Result<Reply, ProtoError> {
    use msg_type::*;
    const R_HELLO: u8 = HELLO | REPLY_BIT;
    const R_ALLOC: u8 = ALLOC_REGION | REPLY_BIT;
    const R_CREATE: u8 = CREATE_QP | REPLY_BIT;
    const R_WRITE: u8 = WRITE_BATCH | REPLY_BIT;
    const R_READ: u8 = READ_MEM | REPLY_BIT;
    const R_RESET: u8 = RESET_QP | REPLY_BIT;
    const R_STATUS: u8 = QP_STATUS | REPLY_BIT;
    const R_HB: u8 = HEARTBEAT | REPLY_BIT;
    Ok(match ty {
        R_HELLO => Reply::HelloOk,
        R_ALLOC => Reply::Region {
            base_va: r.u64()?,
            rkey: r.u32()?,
        },
        R_CREATE => Reply::QpCreated {
            qpn: r.u24()?,
            state: r.state()?,
        },
        R_WRITE => Reply::WriteDone(match r.u8()? {
            0 => None,
            c => Some(ErrorCode::from_u8(c).ok_or(ProtoError::Malformed("status code"))?),
        }),
        R_READ => Reply::Mem(r.take(r.b.len())?.to_vec()),
        R_RESET => Reply::QpReset {
            qpn: r.u24()?,
            state: r.state()?,
        },
        R_STATUS => Reply::QpStatus {
            state: r.state()?,
            epsn: r.u24()?,
            rd_inflight: r.u8()?,
        },
        R_HB => Reply::HeartbeatOk,
        ERROR => {
            Reply::Error(ErrorCode::from_u8(r.u8()?).ok_or(ProtoError::Malformed("error code"))?)
        }
        other => return Err(ProtoError::UnknownType(other)),
    })
}

// ------------------------------------------------------------- UDP carriage

/// Where a UDP datagram came from and went to, and its payload: the one
/// UDP-frame view of [`inca_wire::udp_frame`].
pub type UdpMeta<'a> = inca_wire::UdpFrame<'a>;

/// Parses an Ethernet/IPv4/UDP frame (tagged or not, IP options skipped)
/// with [`inca_wire::parse_udp_frame`]; `None` for anything else, including
/// IPv4 fragments and a bad IPv4 header checksum.
pub fn parse_udp(frame: &[u8]) -> Option<UdpMeta<'_>> {
    inca_wire::parse_udp_frame(frame).ok()
}

/// An Ethernet/IPv4/UDP frame carrying one encoded message.
pub fn build_datagram(
    endpoints: &inca_wire::Endpoints,
    src_port: u16,
    dst_port: u16,
    msg: &Message,
) -> Result<Vec<u8>, ProtoError> {
    let bytes = msg.encode()?;
    inca_wire::build_udp_frame(endpoints, src_port, dst_port, &bytes, true)
        .map_err(|_| ProtoError::TooLarge("UDP frame"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn samples() -> Vec<Message> {
        let ip = Ipv4Addr::new(10, 0, 0, 1);
        vec![
            Message::request(
                1,
                Request::Hello(Hello {
                    server_id: 3,
                    dram_offered: 64 << 30,
                    mac: [2, 0, 0, 0, 10, 1],
                    ip,
                    max_rd_atomic: 16,
                    pmtu: 4096,
                }),
            ),
            Message::request(
                2,
                Request::AllocRegion {
                    region_id: 7,
                    bytes: 1 << 33,
                },
            ),
            Message::request(
                3,
                Request::CreateQp(CreateQp {
                    qp_idx: 1,
                    remote_qpn: 0x0101,
                    remote_mac: [2, 0, 0, 0, 10, 0xfe],
                    remote_ip: Ipv4Addr::new(10, 0, 0, 254),
                    init_psn: 0xABCDEF,
                    pmtu: 4096,
                    max_rd_atomic: 16,
                }),
            ),
            Message::request(
                4,
                Request::WriteBatch(vec![
                    WriteEntry {
                        region: 7,
                        offset: 40,
                        data: vec![0x80, 1, 2, 3],
                    },
                    WriteEntry {
                        region: 7,
                        offset: 2088,
                        data: vec![],
                    },
                ]),
            ),
            Message::request(
                5,
                Request::ReadMem {
                    region: 7,
                    offset: 0,
                    len: 80,
                },
            ),
            Message::request(
                6,
                Request::ResetQp {
                    qp_idx: 1,
                    init_psn: 5,
                    remote_qpn: 0x0102,
                },
            ),
            Message::request(7, Request::QpStatus { qp_idx: 1 }),
            Message::request(8, Request::Heartbeat),
            Message::reply(1, Reply::HelloOk),
            Message::reply(
                2,
                Reply::Region {
                    base_va: 0x7f00_0000_0000,
                    rkey: 0x1234,
                },
            ),
            Message::reply(
                3,
                Reply::QpCreated {
                    qpn: 0x123,
                    state: QpState::Rts,
                },
            ),
            Message::reply(4, Reply::WriteDone(None)),
            Message::reply(4, Reply::WriteDone(Some(ErrorCode::OutOfBounds))),
            Message::reply(5, Reply::Mem(vec![9; 80])),
            Message::reply(
                6,
                Reply::QpReset {
                    qpn: 0x123,
                    state: QpState::Rts,
                },
            ),
            Message::reply(
                7,
                Reply::QpStatus {
                    state: QpState::Error,
                    epsn: 0xFFFFFF,
                    rd_inflight: 16,
                },
            ),
            Message::reply(8, Reply::HeartbeatOk),
            Message::reply(9, Reply::Error(ErrorCode::UnknownQp)),
        ]
    }

    #[test]
    fn every_message_round_trips() {
        for m in samples() {
            let b = m.encode().unwrap();
            assert_eq!(message_len(&b).unwrap(), Some(b.len()));
            assert_eq!(Message::decode(&b).unwrap(), m, "{m:?}");
        }
    }

    #[test]
    fn heartbeat_bytes_are_exact() {
        let b = Message::request(0x01020304, Request::Heartbeat)
            .encode()
            .unwrap();
        assert_eq!(b, [0, 0, 0, 5, 0x08, 1, 2, 3, 4]);
        let b = Message::reply(
            0x0A,
            Reply::Region {
                base_va: 0x7f00_0000_0000,
                rkey: 0x1234,
            },
        )
        .encode()
        .unwrap();
        assert_eq!(
            b,
            [0, 0, 0, 17, 0x82, 0, 0, 0, 0x0A, 0, 0, 0x7f, 0, 0, 0, 0, 0, 0, 0, 0x12, 0x34]
        );
    }

    #[test]
    fn every_truncation_and_extension_is_rejected() {
        for m in samples() {
            let b = m.encode().unwrap();
            for cut in 0..b.len() {
                assert!(Message::decode(&b[..cut]).is_err(), "{m:?} cut {cut}");
            }
            let mut longer = b.clone();
            longer.push(0);
            assert!(Message::decode(&longer).is_err());
            // A consistent length field with a trailing byte is still wrong
            // for fixed-size bodies; READ_MEM replies absorb it by design.
            let n = (longer.len() - 4) as u32;
            longer[..4].copy_from_slice(&n.to_be_bytes());
            if !matches!(m.body, Body::Reply(Reply::Mem(_))) {
                assert!(Message::decode(&longer).is_err(), "{m:?}");
            }
        }
    }

    #[test]
    fn oversized_fields_are_refused_at_encode() {
        let m = Message::request(
            1,
            Request::ResetQp {
                qp_idx: 0,
                init_psn: 1 << 24,
                remote_qpn: 0,
            },
        );
        assert!(m.encode().is_err());
        let m = Message::request(
            1,
            Request::WriteBatch(vec![WriteEntry {
                region: 0,
                offset: 0,
                data: vec![0; MAX_MESSAGE_LEN],
            }]),
        );
        assert!(m.encode().is_err());
    }

    #[test]
    fn lying_batch_count_is_rejected_without_allocating() {
        let mut b = Message::request(1, Request::WriteBatch(vec![]))
            .encode()
            .unwrap();
        b[9..11].copy_from_slice(&u16::MAX.to_be_bytes());
        assert_eq!(Message::decode(&b), Err(ProtoError::Truncated));
    }

    #[test]
    fn random_bytes_never_panic_the_decoder() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(4);
        let mut decoded = 0;
        for _ in 0..20_000 {
            let body_len = rng.gen_range(0..64usize);
            let mut b = ((5 + body_len) as u32).to_be_bytes().to_vec();
            b.push(
                [
                    0x01u8, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x83, 0x87, 0xFF,
                ][rng.gen_range(0..11)],
            );
            b.extend((0..4 + body_len).map(|_| rng.gen::<u8>()));
            if let Ok(m) = Message::decode(&b) {
                decoded += 1;
                // Whatever decodes re-encodes to the same bytes.
                assert_eq!(m.encode().unwrap(), b);
            }
        }
        assert!(decoded > 100);
    }
}
