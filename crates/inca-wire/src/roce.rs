//! RoCEv2 transport headers (InfiniBand Architecture Spec Vol. 1, ch. 9, and
//! Annex A17): the BTH, the RETH and AETH extension headers, and a view of a
//! whole UDP payload on port 4791.
//!
//! ```text
//! UDP payload: BTH(12) | RETH(16) or AETH(4) or nothing, per opcode | payload | pad(PadCnt) | ICRC(4)
//! ```
//! The ICRC itself is computed in [`crate::icrc`] because it covers the IPv4
//! and UDP headers too.

use crate::error::{Result, WireError};

/// The UDP destination port that identifies RoCEv2.
pub const ROCEV2_UDP_PORT: u16 = 4791;
/// BTH length.
pub const BTH_LEN: usize = 12;
/// RETH length.
pub const RETH_LEN: usize = 16;
/// AETH length.
pub const AETH_LEN: usize = 4;
/// ICRC length.
pub const ICRC_LEN: usize = 4;
/// The default partition key (full membership, default partition).
pub const DEFAULT_PKEY: u16 = 0xFFFF;

// The payload is padded to a multiple of 4 (pad count: 2 bits, 0..=3) and
// the ICRC follows it: the headers before the payload must keep it aligned,
// and the ICRC is one 32-bit CRC.
const _: () =
    assert!(BTH_LEN.is_multiple_of(4) && RETH_LEN.is_multiple_of(4) && AETH_LEN.is_multiple_of(4));
const _: () = assert!(ICRC_LEN == core::mem::size_of::<u32>());

/// BTH opcodes this crate models: the RC transport (prefix 000) plus the
/// RoCEv2 congestion notification packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Opcode {
    /// RC RDMA WRITE First (RETH).
    RdmaWriteFirst = 0x06,
    /// RC RDMA WRITE Middle.
    RdmaWriteMiddle = 0x07,
    /// RC RDMA WRITE Last.
    RdmaWriteLast = 0x08,
    /// RC RDMA WRITE Only (RETH).
    RdmaWriteOnly = 0x0A,
    /// RC RDMA READ Request (RETH).
    RdmaReadRequest = 0x0C,
    /// RC RDMA READ Response First (AETH).
    RdmaReadResponseFirst = 0x0D,
    /// RC RDMA READ Response Middle.
    RdmaReadResponseMiddle = 0x0E,
    /// RC RDMA READ Response Last (AETH).
    RdmaReadResponseLast = 0x0F,
    /// RC RDMA READ Response Only (AETH).
    RdmaReadResponseOnly = 0x10,
    /// RC Acknowledge (AETH).
    Acknowledge = 0x11,
    /// RoCEv2 Congestion Notification Packet (16 reserved bytes of payload).
    Cnp = 0x81,
}

/// Which extension header follows the BTH.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ExtHeader {
    /// Nothing between the BTH and the payload.
    None,
    /// A 16-byte RETH.
    Reth,
    /// A 4-byte AETH.
    Aeth,
}

impl ExtHeader {
    /// Its length in bytes.
    pub fn len(self) -> usize {
        match self {
            ExtHeader::None => 0,
            ExtHeader::Reth => RETH_LEN,
            ExtHeader::Aeth => AETH_LEN,
        }
    }

    /// True for [`ExtHeader::None`].
    pub fn is_empty(self) -> bool {
        self == ExtHeader::None
    }
}

impl Opcode {
    /// The opcode for a BTH byte, if modelled.
    pub fn from_u8(v: u8) -> Option<Opcode> {
        use Opcode::*;
        Some(match v {
            0x06 => RdmaWriteFirst,
            0x07 => RdmaWriteMiddle,
            0x08 => RdmaWriteLast,
            0x0A => RdmaWriteOnly,
            0x0C => RdmaReadRequest,
            0x0D => RdmaReadResponseFirst,
            0x0E => RdmaReadResponseMiddle,
            0x0F => RdmaReadResponseLast,
            0x10 => RdmaReadResponseOnly,
            0x11 => Acknowledge,
            0x81 => Cnp,
            _ => return None,
        })
    }

    /// The BTH byte.
    pub fn as_u8(self) -> u8 {
        self as u8
    }

    /// The extension header this opcode carries (IBA Table 38).
    pub fn ext_header(self) -> ExtHeader {
        use Opcode::*;
        match self {
            RdmaWriteFirst | RdmaWriteOnly | RdmaReadRequest => ExtHeader::Reth,
            RdmaReadResponseFirst | RdmaReadResponseLast | RdmaReadResponseOnly | Acknowledge => {
                ExtHeader::Aeth
            }
            RdmaWriteMiddle | RdmaWriteLast | RdmaReadResponseMiddle | Cnp => ExtHeader::None,
        }
    }

    /// Every modelled opcode, for tests and tables.
    pub const ALL: [Opcode; 11] = [
        Opcode::RdmaWriteFirst,
        Opcode::RdmaWriteMiddle,
        Opcode::RdmaWriteLast,
        Opcode::RdmaWriteOnly,
        Opcode::RdmaReadRequest,
        Opcode::RdmaReadResponseFirst,
        Opcode::RdmaReadResponseMiddle,
        Opcode::RdmaReadResponseLast,
        Opcode::RdmaReadResponseOnly,
        Opcode::Acknowledge,
        Opcode::Cnp,
    ];
}

fn u24(b: &[u8]) -> u32 {
    u32::from_be_bytes([0, b[0], b[1], b[2]])
}

fn check_u24(v: u32, what: &'static str) -> Result<()> {
    if v > 0x00FF_FFFF {
        Err(WireError::OutOfRange(what))
    } else {
        Ok(())
    }
}

// ---------------------------------------------------------------- BTH

mod bth {
    /// OpCode.
    pub const OPCODE: usize = 0;
    /// SE(bit 7) | M(bit 6) | PadCnt(bits 5..4) | TVer(bits 3..0).
    pub const FLAGS: usize = 1;
    /// P_Key, bytes 2..4.
    pub const PKEY: usize = 2;
    /// Resv8a; in IBA bits 7 and 6 are FECN and BECN, reserved in RoCEv2.
    pub const RESV8A: usize = 4;
    /// DestQP, bytes 5..8.
    pub const DEST_QP: usize = 5;
    /// A(bit 7) | Resv7.
    pub const ACK_REQ: usize = 8;
    /// PSN, bytes 9..12.
    pub const PSN: usize = 9;
}

/// A zero-copy view of a Base Transport Header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bth<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Bth<T> {
    /// Wraps without checks; accessors may panic on a short buffer.
    pub fn new_unchecked(buffer: T) -> Self {
        Bth { buffer }
    }

    /// Wraps after checking that 12 bytes are present.
    pub fn new_checked(buffer: T) -> Result<Self> {
        if buffer.as_ref().len() < BTH_LEN {
            return Err(WireError::Truncated);
        }
        Ok(Bth { buffer })
    }

    /// Gives the buffer back.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }

    /// The raw opcode byte.
    pub fn opcode_raw(&self) -> u8 {
        self.b()[bth::OPCODE]
    }

    /// The opcode, if modelled.
    pub fn opcode(&self) -> Option<Opcode> {
        Opcode::from_u8(self.opcode_raw())
    }

    /// Solicited event.
    pub fn solicited(&self) -> bool {
        self.b()[bth::FLAGS] & 0x80 != 0
    }

    /// Migration state (MigReq).
    pub fn migreq(&self) -> bool {
        self.b()[bth::FLAGS] & 0x40 != 0
    }

    /// Number of pad bytes (0..=3) before the ICRC.
    pub fn pad_count(&self) -> u8 {
        (self.b()[bth::FLAGS] >> 4) & 0x03
    }

    /// Transport header version (0).
    pub fn tver(&self) -> u8 {
        self.b()[bth::FLAGS] & 0x0F
    }

    /// Partition key.
    pub fn pkey(&self) -> u16 {
        u16::from_be_bytes([self.b()[bth::PKEY], self.b()[bth::PKEY + 1]])
    }

    /// The whole Resv8a byte (masked to 0xFF for the ICRC).
    pub fn resv8a(&self) -> u8 {
        self.b()[bth::RESV8A]
    }

    /// FECN, Resv8a bit 7 (IBA); reserved in RoCEv2, which marks ECN in IP.
    pub fn fecn(&self) -> bool {
        self.resv8a() & 0x80 != 0
    }

    /// BECN, Resv8a bit 6 (IBA); reserved in RoCEv2.
    pub fn becn(&self) -> bool {
        self.resv8a() & 0x40 != 0
    }

    /// Destination queue pair, 24 bits.
    pub fn dest_qp(&self) -> u32 {
        u24(&self.b()[bth::DEST_QP..])
    }

    /// Acknowledge request.
    pub fn ack_req(&self) -> bool {
        self.b()[bth::ACK_REQ] & 0x80 != 0
    }

    /// The 7 reserved bits after A.
    pub fn resv7(&self) -> u8 {
        self.b()[bth::ACK_REQ] & 0x7F
    }

    /// Packet sequence number, 24 bits.
    pub fn psn(&self) -> u32 {
        u24(&self.b()[bth::PSN..])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Bth<T> {
    fn bm(&mut self) -> &mut [u8] {
        self.buffer.as_mut()
    }

    /// Sets the opcode byte.
    pub fn set_opcode_raw(&mut self, v: u8) {
        self.bm()[bth::OPCODE] = v;
    }

    /// Sets byte 1 from its four fields.
    pub fn set_flags(
        &mut self,
        solicited: bool,
        migreq: bool,
        pad_count: u8,
        tver: u8,
    ) -> Result<()> {
        if pad_count > 3 {
            return Err(WireError::OutOfRange("BTH PadCnt > 3"));
        }
        if tver > 15 {
            return Err(WireError::OutOfRange("BTH TVer > 15"));
        }
        self.bm()[bth::FLAGS] =
            u8::from(solicited) << 7 | u8::from(migreq) << 6 | pad_count << 4 | tver;
        Ok(())
    }

    /// Sets the partition key.
    pub fn set_pkey(&mut self, v: u16) {
        self.bm()[bth::PKEY..bth::PKEY + 2].copy_from_slice(&v.to_be_bytes());
    }

    /// Sets the whole Resv8a byte.
    pub fn set_resv8a(&mut self, v: u8) {
        self.bm()[bth::RESV8A] = v;
    }

    /// Sets the destination QP (24 bits).
    pub fn set_dest_qp(&mut self, v: u32) -> Result<()> {
        check_u24(v, "BTH DestQP > 24 bits")?;
        self.bm()[bth::DEST_QP..bth::DEST_QP + 3].copy_from_slice(&v.to_be_bytes()[1..]);
        Ok(())
    }

    /// Sets A and the 7 reserved bits after it.
    pub fn set_ack_req(&mut self, ack_req: bool, resv7: u8) {
        self.bm()[bth::ACK_REQ] = u8::from(ack_req) << 7 | (resv7 & 0x7F);
    }

    /// Sets the PSN (24 bits).
    pub fn set_psn(&mut self, v: u32) -> Result<()> {
        check_u24(v, "BTH PSN > 24 bits")?;
        self.bm()[bth::PSN..bth::PSN + 3].copy_from_slice(&v.to_be_bytes()[1..]);
        Ok(())
    }
}

/// The fields of a BTH.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BthRepr {
    /// Opcode.
    pub opcode: Opcode,
    /// Solicited event.
    pub solicited: bool,
    /// MigReq.
    pub migreq: bool,
    /// Pad count, 0..=3.
    pub pad_count: u8,
    /// Transport header version, 0..=15 (0 today).
    pub tver: u8,
    /// Partition key.
    pub pkey: u16,
    /// Resv8a byte (FECN/BECN bits in IBA); 0 on RoCEv2 senders.
    pub resv8a: u8,
    /// Destination QP, 24 bits.
    pub dest_qp: u32,
    /// Acknowledge request.
    pub ack_req: bool,
    /// Packet sequence number, 24 bits.
    pub psn: u32,
}

impl BthRepr {
    /// A BTH with P_Key 0xFFFF and every flag clear.
    pub fn new(opcode: Opcode, dest_qp: u32, psn: u32) -> Self {
        BthRepr {
            opcode,
            solicited: false,
            migreq: false,
            pad_count: 0,
            tver: 0,
            pkey: DEFAULT_PKEY,
            resv8a: 0,
            dest_qp,
            ack_req: false,
            psn,
        }
    }

    /// Reads a checked view; an unmodelled opcode is `Unsupported`.
    pub fn parse<T: AsRef<[u8]>>(b: &Bth<T>) -> Result<Self> {
        let opcode = b.opcode().ok_or(WireError::Unsupported("BTH opcode"))?;
        Ok(BthRepr {
            opcode,
            solicited: b.solicited(),
            migreq: b.migreq(),
            pad_count: b.pad_count(),
            tver: b.tver(),
            pkey: b.pkey(),
            resv8a: b.resv8a(),
            dest_qp: b.dest_qp(),
            ack_req: b.ack_req(),
            psn: b.psn(),
        })
    }

    /// 12.
    pub fn buffer_len(&self) -> usize {
        BTH_LEN
    }

    /// Writes the BTH at the start of `buf` (Resv7 = 0).
    pub fn emit(&self, buf: &mut [u8]) -> Result<()> {
        if buf.len() < BTH_LEN {
            return Err(WireError::BufferTooSmall);
        }
        let mut b = Bth::new_unchecked(&mut buf[..BTH_LEN]);
        b.set_opcode_raw(self.opcode.as_u8());
        b.set_flags(self.solicited, self.migreq, self.pad_count, self.tver)?;
        b.set_pkey(self.pkey);
        b.set_resv8a(self.resv8a);
        b.set_dest_qp(self.dest_qp)?;
        b.set_ack_req(self.ack_req, 0);
        b.set_psn(self.psn)
    }
}

// ---------------------------------------------------------------- RETH

/// A zero-copy view of an RDMA Extended Transport Header.
///
/// ```text
/// 0..8 virtual address   8..12 R_Key   12..16 DMA length
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reth<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Reth<T> {
    /// Wraps without checks; accessors may panic on a short buffer.
    pub fn new_unchecked(buffer: T) -> Self {
        Reth { buffer }
    }

    /// Wraps after checking that 16 bytes are present.
    pub fn new_checked(buffer: T) -> Result<Self> {
        if buffer.as_ref().len() < RETH_LEN {
            return Err(WireError::Truncated);
        }
        Ok(Reth { buffer })
    }

    /// Gives the buffer back.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Remote virtual address.
    pub fn virtual_addr(&self) -> u64 {
        let mut a = [0; 8];
        a.copy_from_slice(&self.buffer.as_ref()[0..8]);
        u64::from_be_bytes(a)
    }

    /// Remote key of the memory region.
    pub fn rkey(&self) -> u32 {
        let b = self.buffer.as_ref();
        u32::from_be_bytes([b[8], b[9], b[10], b[11]])
    }

    /// Length of the whole RDMA operation in bytes.
    pub fn dma_len(&self) -> u32 {
        let b = self.buffer.as_ref();
        u32::from_be_bytes([b[12], b[13], b[14], b[15]])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Reth<T> {
    /// Sets the virtual address.
    pub fn set_virtual_addr(&mut self, v: u64) {
        self.buffer.as_mut()[0..8].copy_from_slice(&v.to_be_bytes());
    }

    /// Sets the R_Key.
    pub fn set_rkey(&mut self, v: u32) {
        self.buffer.as_mut()[8..12].copy_from_slice(&v.to_be_bytes());
    }

    /// Sets the DMA length.
    pub fn set_dma_len(&mut self, v: u32) {
        self.buffer.as_mut()[12..16].copy_from_slice(&v.to_be_bytes());
    }
}

/// The fields of a RETH.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct RethRepr {
    /// Remote virtual address.
    pub virtual_addr: u64,
    /// Remote key.
    pub rkey: u32,
    /// DMA length.
    pub dma_len: u32,
}

impl RethRepr {
    /// Reads a checked view.
    pub fn parse<T: AsRef<[u8]>>(r: &Reth<T>) -> Result<Self> {
        Ok(RethRepr {
            virtual_addr: r.virtual_addr(),
            rkey: r.rkey(),
            dma_len: r.dma_len(),
        })
    }

    /// 16.
    pub fn buffer_len(&self) -> usize {
        RETH_LEN
    }

    /// Writes the RETH at the start of `buf`.
    pub fn emit(&self, buf: &mut [u8]) -> Result<()> {
        if buf.len() < RETH_LEN {
            return Err(WireError::BufferTooSmall);
        }
        let mut r = Reth::new_unchecked(&mut buf[..RETH_LEN]);
        r.set_virtual_addr(self.virtual_addr);
        r.set_rkey(self.rkey);
        r.set_dma_len(self.dma_len);
        Ok(())
    }
}

// ---------------------------------------------------------------- AETH

/// AETH syndrome values used by the RC responder model.
pub mod syndrome {
    /// ACK with "credits invalid" (credit code 0x1F).
    pub const ACK_CREDITS_INVALID: u8 = 0x1F;
    /// NAK: PSN sequence error.
    pub const NAK_PSN_SEQ_ERROR: u8 = 0x60;
    /// NAK: invalid request.
    pub const NAK_INVALID_REQUEST: u8 = 0x61;
    /// NAK: remote access error.
    pub const NAK_REMOTE_ACCESS: u8 = 0x62;
    /// NAK: remote operational error.
    pub const NAK_REMOTE_OP: u8 = 0x63;
}

/// What an AETH syndrome says (bits 6..5 select, bits 4..0 qualify).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SyndromeKind {
    /// ACK with a credit code.
    Ack {
        /// Credit count code, 5 bits.
        credits: u8,
    },
    /// Receiver-not-ready NAK with a timer code.
    RnrNak {
        /// RNR timer code, 5 bits.
        timer: u8,
    },
    /// NAK with an error code.
    Nak {
        /// NAK code, 5 bits.
        code: u8,
    },
    /// Type 10 or bit 7 set: reserved.
    Reserved,
}

/// Decodes an AETH syndrome byte.
pub fn syndrome_kind(s: u8) -> SyndromeKind {
    if s & 0x80 != 0 {
        return SyndromeKind::Reserved;
    }
    let low = s & 0x1F;
    match (s >> 5) & 0x03 {
        0b00 => SyndromeKind::Ack { credits: low },
        0b01 => SyndromeKind::RnrNak { timer: low },
        0b11 => SyndromeKind::Nak { code: low },
        _ => SyndromeKind::Reserved,
    }
}

/// A zero-copy view of an ACK Extended Transport Header.
///
/// ```text
/// 0 syndrome   1..4 MSN (24 bits)
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Aeth<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Aeth<T> {
    /// Wraps without checks; accessors may panic on a short buffer.
    pub fn new_unchecked(buffer: T) -> Self {
        Aeth { buffer }
    }

    /// Wraps after checking that 4 bytes are present.
    pub fn new_checked(buffer: T) -> Result<Self> {
        if buffer.as_ref().len() < AETH_LEN {
            return Err(WireError::Truncated);
        }
        Ok(Aeth { buffer })
    }

    /// Gives the buffer back.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Syndrome byte.
    pub fn syndrome(&self) -> u8 {
        self.buffer.as_ref()[0]
    }

    /// Message sequence number, 24 bits.
    pub fn msn(&self) -> u32 {
        u24(&self.buffer.as_ref()[1..])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Aeth<T> {
    /// Sets the syndrome.
    pub fn set_syndrome(&mut self, v: u8) {
        self.buffer.as_mut()[0] = v;
    }

    /// Sets the MSN (24 bits).
    pub fn set_msn(&mut self, v: u32) -> Result<()> {
        check_u24(v, "AETH MSN > 24 bits")?;
        self.buffer.as_mut()[1..4].copy_from_slice(&v.to_be_bytes()[1..]);
        Ok(())
    }
}

/// The fields of an AETH.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AethRepr {
    /// Syndrome.
    pub syndrome: u8,
    /// Message sequence number, 24 bits.
    pub msn: u32,
}

impl AethRepr {
    /// Reads a checked view.
    pub fn parse<T: AsRef<[u8]>>(a: &Aeth<T>) -> Result<Self> {
        Ok(AethRepr {
            syndrome: a.syndrome(),
            msn: a.msn(),
        })
    }

    /// 4.
    pub fn buffer_len(&self) -> usize {
        AETH_LEN
    }

    /// Writes the AETH at the start of `buf`.
    pub fn emit(&self, buf: &mut [u8]) -> Result<()> {
        if buf.len() < AETH_LEN {
            return Err(WireError::BufferTooSmall);
        }
        let mut a = Aeth::new_unchecked(&mut buf[..AETH_LEN]);
        a.set_syndrome(self.syndrome);
        a.set_msn(self.msn)
    }
}

// ---------------------------------------------------------------- packet

/// A zero-copy view of a whole RoCEv2 UDP payload: BTH, the extension
/// header its opcode calls for, payload, pad and ICRC.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RocePacket<T: AsRef<[u8]>> {
    buffer: T,
    ext: ExtHeader,
}

impl<T: AsRef<[u8]>> RocePacket<T> {
    /// Wraps after checking that the opcode is modelled, that BTH, extension
    /// header and ICRC fit, and that the pad count does not exceed the bytes
    /// between the headers and the ICRC.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let b = buffer.as_ref();
        let bth = Bth::new_checked(b)?;
        let op = bth.opcode().ok_or(WireError::Unsupported("BTH opcode"))?;
        let ext = op.ext_header();
        let fixed = BTH_LEN + ext.len() + ICRC_LEN;
        if b.len() < fixed {
            return Err(WireError::Truncated);
        }
        if usize::from(bth.pad_count()) > b.len() - fixed {
            return Err(WireError::Malformed("BTH PadCnt exceeds payload"));
        }
        Ok(RocePacket { buffer, ext })
    }

    /// Gives the buffer back.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }

    /// The BTH.
    pub fn bth(&self) -> Bth<&[u8]> {
        Bth::new_unchecked(&self.b()[..BTH_LEN])
    }

    /// The opcode (always modelled once checked).
    pub fn opcode(&self) -> Opcode {
        // new_checked guarantees Some; the fallback keeps this panic-free.
        self.bth().opcode().unwrap_or(Opcode::Cnp)
    }

    /// Which extension header the opcode carries.
    pub fn ext_header(&self) -> ExtHeader {
        self.ext
    }

    /// The RETH, when the opcode carries one.
    pub fn reth(&self) -> Option<Reth<&[u8]>> {
        (self.ext == ExtHeader::Reth)
            .then(|| Reth::new_unchecked(&self.b()[BTH_LEN..BTH_LEN + RETH_LEN]))
    }

    /// The AETH, when the opcode carries one.
    pub fn aeth(&self) -> Option<Aeth<&[u8]>> {
        (self.ext == ExtHeader::Aeth)
            .then(|| Aeth::new_unchecked(&self.b()[BTH_LEN..BTH_LEN + AETH_LEN]))
    }

    /// Offset of the payload within the UDP payload.
    pub fn payload_offset(&self) -> usize {
        BTH_LEN + self.ext.len()
    }

    /// Payload without pad and ICRC.
    pub fn payload(&self) -> &[u8] {
        let end = self.b().len() - ICRC_LEN - usize::from(self.bth().pad_count());
        &self.b()[self.payload_offset()..end]
    }

    /// The pad bytes.
    pub fn pad(&self) -> &[u8] {
        let end = self.b().len() - ICRC_LEN;
        &self.b()[end - usize::from(self.bth().pad_count())..end]
    }

    /// The ICRC as stored: the last 4 bytes read least-significant first,
    /// which yields the CRC register value (see [`crate::icrc`]).
    pub fn icrc(&self) -> u32 {
        let b = self.b();
        let n = b.len();
        u32::from_le_bytes([b[n - 4], b[n - 3], b[n - 2], b[n - 1]])
    }
}

/// A parsed RoCEv2 packet, borrowing its payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RoceRepr<'a> {
    /// Base transport header.
    pub bth: BthRepr,
    /// RETH, present for WRITE FIRST/ONLY and READ REQUEST.
    pub reth: Option<RethRepr>,
    /// AETH, present for READ RESPONSE FIRST/LAST/ONLY and ACK.
    pub aeth: Option<AethRepr>,
    /// Payload without pad.
    pub payload: &'a [u8],
    /// ICRC as stored.
    pub icrc: u32,
}

impl<'a> RoceRepr<'a> {
    /// Reads a checked view. The ICRC is not verified here, because it
    /// needs the IP and UDP headers: use [`crate::icrc::verify_icrc`].
    pub fn parse(p: &RocePacket<&'a [u8]>) -> Result<Self> {
        let b: &'a [u8] = p.buffer;
        let bth = BthRepr::parse(&Bth::new_unchecked(b))?;
        let reth = match p.ext {
            ExtHeader::Reth => Some(RethRepr::parse(&Reth::new_unchecked(&b[BTH_LEN..]))?),
            _ => None,
        };
        let aeth = match p.ext {
            ExtHeader::Aeth => Some(AethRepr::parse(&Aeth::new_unchecked(&b[BTH_LEN..]))?),
            _ => None,
        };
        let end = b.len() - ICRC_LEN - usize::from(bth.pad_count);
        Ok(RoceRepr {
            bth,
            reth,
            aeth,
            payload: &b[p.payload_offset()..end],
            icrc: p.icrc(),
        })
    }

    /// Pad bytes needed after `payload_len` bytes so that the payload ends on
    /// a 4-byte boundary.
    pub fn pad_for(payload_len: usize) -> u8 {
        ((4 - payload_len % 4) % 4) as u8
    }

    /// UDP payload length: headers, payload, `bth.pad_count` pad bytes, ICRC.
    pub fn buffer_len(&self) -> usize {
        BTH_LEN
            + self.bth.opcode.ext_header().len()
            + self.payload.len()
            + usize::from(self.bth.pad_count)
            + ICRC_LEN
    }

    /// Writes BTH, extension header, payload, zero pad and the stored `icrc`
    /// (usually 0, then filled by [`crate::icrc::fill_icrc`] once the IP and
    /// UDP headers exist). The extension headers given must match the opcode.
    pub fn emit(&self, buf: &mut [u8]) -> Result<()> {
        let ext = self.bth.opcode.ext_header();
        match (ext, self.reth.is_some(), self.aeth.is_some()) {
            (ExtHeader::None, false, false)
            | (ExtHeader::Reth, true, false)
            | (ExtHeader::Aeth, false, true) => {}
            _ => {
                return Err(WireError::Malformed(
                    "extension headers do not match the opcode",
                ))
            }
        }
        let total = self.buffer_len();
        if buf.len() < total {
            return Err(WireError::BufferTooSmall);
        }
        let buf = &mut buf[..total];
        self.bth.emit(buf)?;
        let mut off = BTH_LEN;
        if let Some(r) = self.reth {
            r.emit(&mut buf[off..])?;
            off += RETH_LEN;
        }
        if let Some(a) = self.aeth {
            a.emit(&mut buf[off..])?;
            off += AETH_LEN;
        }
        buf[off..off + self.payload.len()].copy_from_slice(self.payload);
        off += self.payload.len();
        let pad = usize::from(self.bth.pad_count);
        buf[off..off + pad].fill(0);
        off += pad;
        buf[off..off + ICRC_LEN].copy_from_slice(&self.icrc.to_le_bytes());
        Ok(())
    }
}
