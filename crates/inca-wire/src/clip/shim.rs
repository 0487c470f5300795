//! The CLIP data-plane shim (specs/clip.md §4.2): a 16-byte common header
//! and a params region of `P` bytes, inserted after the Ethernet header
//! (and its 802.1Q tag, if any) of the original frame. The frame's
//! EtherType becomes [`super::ETHERTYPE`]; the original one moves into
//! `load_type`. Requests and responses have the same layout and length.
//!
//! ```text
//! byte 0: version 4 | kind 4      byte 1: flags (b7 CMS_VALID, b6 HINTED, b5 REC)
//! bytes 2-3: load_type            byte 4: app_id
//! byte 5: hdr_words               bytes 6-7: parsed_len
//! byte 8: server_id               byte 9: sel 3 | status 2 | reserved 3
//! bytes 10-11: grp_ver            bytes 12-15: cms_est
//! bytes 16..hdr_words*4: params (P bytes)
//! ```
//!
//! [`ClipHeader`] is the checked view (version 1, a known kind, `sel` ≤ 4,
//! `status` ≤ 2; the reserved flag bits 4..0 and byte 9's bits 2..0 are
//! ignored when read and written as 0); [`ClipRepr`] parses and emits the
//! 16 bytes; [`push`] / [`pop`] insert and remove header and params in a
//! whole frame, and [`push_in_place`] / [`pop_in_place`] do the byte work
//! for a pipeline that inserts and removes header bytes itself.
//!
//! The params region holds the app's request (then, overwritten from
//! offset 0, its response) bit-packed in declaration order, MSB first
//! ([`pack`], [`unpack`]); its length is [`params_len`] of the two lists'
//! bit counts, the per-app values being in [`params`].

use core::ops::Range;

use crate::error::{Result, WireError};
use crate::ethernet::{EthernetFrame, HEADER_LEN, VLAN_TAG_LEN};

/// Length of the common header.
pub const COMMON_LEN: usize = 16;
/// The only version.
pub const VERSION: u8 = 1;
/// `flags` b7: `cms_est` holds a count-min estimate (the flow went through
/// the selection module).
pub const FLAG_CMS_VALID: u8 = 0x80;
/// `flags` b6: the server was chosen by the app's hint.
pub const FLAG_HINTED: u8 = 0x40;
/// `flags` b5: record mode (`rec`) was on when the server was selected.
pub const FLAG_REC: u8 = 0x20;
/// The defined flag bits; bits 4..0 are reserved (0).
pub const FLAGS_MASK: u8 = FLAG_CMS_VALID | FLAG_HINTED | FLAG_REC;
/// The largest `hdr_words` (one byte).
pub const MAX_HDR_WORDS: u8 = u8::MAX;
/// The longest params region: `MAX_HDR_WORDS * 4 - COMMON_LEN` = 1004 bytes.
pub const MAX_PARAMS_LEN: usize = MAX_HDR_WORDS as usize * 4 - COMMON_LEN;

/// `kind`: request or response.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum Kind {
    /// Switch → server: the original packet and the request params.
    Request = 1,
    /// Server → switch: the same frame with the response params.
    Response = 2,
}

impl Kind {
    /// Every kind, in code order.
    pub const ALL: [Kind; 2] = [Kind::Request, Kind::Response];

    /// Decodes a 4-bit kind; anything but 1 and 2 is refused.
    pub fn from_u8(v: u8) -> Result<Self> {
        Ok(match v {
            1 => Kind::Request,
            2 => Kind::Response,
            _ => return Err(WireError::Unsupported("unknown CLIP kind")),
        })
    }
}

/// `sel`: how the switch chose the server (§5.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum Sel {
    /// The flow is pinned in `pin_table`.
    PinTable = 0,
    /// The flow matched a `pin_cache` cell.
    PinCache = 1,
    /// The previous epoch's Bloom filter held the flow: the previous group.
    Prev = 2,
    /// The current group.
    Cur = 3,
    /// The app's server hint.
    Hint = 4,
}

impl Sel {
    /// Every value, in code order.
    pub const ALL: [Sel; 5] = [Sel::PinTable, Sel::PinCache, Sel::Prev, Sel::Cur, Sel::Hint];

    /// Whether the server came from a group slot (`grp_ver` is set).
    pub fn is_group(self) -> bool {
        matches!(self, Sel::Prev | Sel::Cur)
    }

    /// Decodes a 3-bit `sel`; 5..7 are refused.
    pub fn from_u8(v: u8) -> Result<Self> {
        Ok(match v {
            0 => Sel::PinTable,
            1 => Sel::PinCache,
            2 => Sel::Prev,
            3 => Sel::Cur,
            4 => Sel::Hint,
            _ => return Err(WireError::Unsupported("unknown CLIP sel")),
        })
    }
}

/// `status` of a response (0 in requests).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum Status {
    /// The handler filled the response params.
    Ok = 0,
    /// Drop the packet.
    Drop = 1,
    /// Forward the packet; the handler produced no result.
    NoResult = 2,
}

impl Status {
    /// Every value, in code order.
    pub const ALL: [Status; 3] = [Status::Ok, Status::Drop, Status::NoResult];

    /// Decodes a 2-bit `status`; 3 is refused.
    pub fn from_u8(v: u8) -> Result<Self> {
        Ok(match v {
            0 => Status::Ok,
            1 => Status::Drop,
            2 => Status::NoResult,
            _ => return Err(WireError::Unsupported("unknown CLIP status")),
        })
    }
}

mod field {
    pub const VER_KIND: usize = 0;
    pub const FLAGS: usize = 1;
    pub const LOAD_TYPE: usize = 2;
    pub const APP_ID: usize = 4;
    pub const HDR_WORDS: usize = 5;
    pub const PARSED_LEN: usize = 6;
    pub const SERVER_ID: usize = 8;
    pub const SEL_STATUS: usize = 9;
    pub const GRP_VER: usize = 10;
    pub const CMS_EST: usize = 12;
}

/// A checked view of the common header at the start of `buffer`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClipHeader<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> ClipHeader<T> {
    /// Wraps `buffer` after checking its length (≥ 16), version (1), kind
    /// (1 or 2), `sel` (≤ 4) and `status` (≤ 2), so no accessor can fail.
    /// `hdr_words` is not checked against the buffer: the params region
    /// may lie outside the view (see [`params_range`]).
    pub fn new_checked(buffer: T) -> Result<Self> {
        let b = buffer.as_ref();
        if b.len() < COMMON_LEN {
            return Err(WireError::Truncated);
        }
        if b[field::VER_KIND] >> 4 != VERSION {
            return Err(WireError::Unsupported("CLIP version"));
        }
        Kind::from_u8(b[field::VER_KIND] & 0x0F)?;
        Sel::from_u8(b[field::SEL_STATUS] >> 5)?;
        Status::from_u8((b[field::SEL_STATUS] >> 3) & 0x03)?;
        Ok(ClipHeader { buffer })
    }

    /// The bytes under the view.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }

    fn be16(&self, at: usize) -> u16 {
        u16::from_be_bytes([self.b()[at], self.b()[at + 1]])
    }

    /// The version (always [`VERSION`] in a checked view).
    pub fn version(&self) -> u8 {
        self.b()[field::VER_KIND] >> 4
    }

    /// Request or response.
    pub fn kind(&self) -> Kind {
        // Checked in `new_checked`; the fallback is never reached.
        Kind::from_u8(self.b()[field::VER_KIND] & 0x0F).unwrap_or(Kind::Request)
    }

    /// The defined flag bits ([`FLAG_CMS_VALID`], [`FLAG_HINTED`],
    /// [`FLAG_REC`]); reserved bits read as 0.
    pub fn flags(&self) -> u8 {
        self.b()[field::FLAGS] & FLAGS_MASK
    }

    /// Whether `cms_est` is meaningful.
    pub fn cms_valid(&self) -> bool {
        self.flags() & FLAG_CMS_VALID != 0
    }

    /// Whether the server was chosen by the app's hint.
    pub fn hinted(&self) -> bool {
        self.flags() & FLAG_HINTED != 0
    }

    /// Whether record mode was on at selection.
    pub fn rec(&self) -> bool {
        self.flags() & FLAG_REC != 0
    }

    /// The original EtherType, restored when the shim is removed.
    pub fn load_type(&self) -> u16 {
        self.be16(field::LOAD_TYPE)
    }

    /// The application id.
    pub fn app_id(&self) -> u8 {
        self.b()[field::APP_ID]
    }

    /// `(16 + P) / 4`: common header plus params, in 4-byte words.
    pub fn hdr_words(&self) -> u8 {
        self.b()[field::HDR_WORDS]
    }

    /// Bytes of the original L3 packet the switch parser already extracted
    /// (counted from the first byte after the params region).
    pub fn parsed_len(&self) -> u16 {
        self.be16(field::PARSED_LEN)
    }

    /// The server the switch sent the request to.
    pub fn server_id(&self) -> u8 {
        self.b()[field::SERVER_ID]
    }

    /// How the server was selected.
    pub fn sel(&self) -> Sel {
        // Checked in `new_checked`.
        Sel::from_u8(self.b()[field::SEL_STATUS] >> 5).unwrap_or(Sel::PinTable)
    }

    /// The handler's verdict (responses; [`Status::Ok`] in requests).
    pub fn status(&self) -> Status {
        // Checked in `new_checked`.
        Status::from_u8((self.b()[field::SEL_STATUS] >> 3) & 0x03).unwrap_or(Status::Ok)
    }

    /// Version of the group slot used (0 for a pin or a hint).
    pub fn grp_ver(&self) -> u16 {
        self.be16(field::GRP_VER)
    }

    /// The flow's count-min estimate when the request was sent.
    pub fn cms_est(&self) -> u32 {
        let b = self.b();
        let at = field::CMS_EST;
        u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
    }

    /// `hdr_words * 4`: bytes of common header plus params.
    pub fn header_len(&self) -> usize {
        usize::from(self.hdr_words()) * 4
    }

    /// Bytes of the params region: `hdr_words * 4 - 16`, 0 if `hdr_words` < 4.
    pub fn params_len(&self) -> usize {
        self.header_len().saturating_sub(COMMON_LEN)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> ClipHeader<T> {
    fn set_be16(&mut self, at: usize, v: u16) {
        self.buffer.as_mut()[at..at + 2].copy_from_slice(&v.to_be_bytes());
    }

    /// Sets the kind (the version stays 1).
    pub fn set_kind(&mut self, kind: Kind) {
        self.buffer.as_mut()[field::VER_KIND] = (VERSION << 4) | kind as u8;
    }

    /// Sets the status; `sel` is kept, the reserved bits are cleared.
    pub fn set_status(&mut self, status: Status) {
        let b = &mut self.buffer.as_mut()[field::SEL_STATUS];
        *b = (*b & 0xE0) | ((status as u8) << 3);
    }

    /// Sets `sel`; `status` is kept, the reserved bits are cleared.
    pub fn set_sel(&mut self, sel: Sel) {
        let b = &mut self.buffer.as_mut()[field::SEL_STATUS];
        *b = ((sel as u8) << 5) | (*b & 0x18);
    }

    /// Sets the flags (reserved bits are cleared).
    pub fn set_flags(&mut self, flags: u8) {
        self.buffer.as_mut()[field::FLAGS] = flags & FLAGS_MASK;
    }

    /// Sets the original EtherType.
    pub fn set_load_type(&mut self, load_type: u16) {
        self.set_be16(field::LOAD_TYPE, load_type)
    }

    /// Sets the application id.
    pub fn set_app_id(&mut self, app_id: u8) {
        self.buffer.as_mut()[field::APP_ID] = app_id;
    }

    /// Sets the parsed length.
    pub fn set_parsed_len(&mut self, parsed_len: u16) {
        self.set_be16(field::PARSED_LEN, parsed_len)
    }

    /// Sets the target server.
    pub fn set_server_id(&mut self, server_id: u8) {
        self.buffer.as_mut()[field::SERVER_ID] = server_id;
    }

    /// Sets the group version.
    pub fn set_grp_ver(&mut self, grp_ver: u16) {
        self.set_be16(field::GRP_VER, grp_ver)
    }

    /// Sets the count-min estimate.
    pub fn set_cms_est(&mut self, cms_est: u32) {
        let at = field::CMS_EST;
        self.buffer.as_mut()[at..at + 4].copy_from_slice(&cms_est.to_be_bytes());
    }
}

/// The fields of the common header (see [`ClipHeader`] for each).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ClipRepr {
    /// Request or response.
    pub kind: Kind,
    /// [`FLAG_CMS_VALID`] | [`FLAG_HINTED`] | [`FLAG_REC`]; other bits are
    /// written as 0.
    pub flags: u8,
    /// The original EtherType.
    pub load_type: u16,
    /// The application id.
    pub app_id: u8,
    /// `(16 + P) / 4`.
    pub hdr_words: u8,
    /// Bytes of the original L3 packet already parsed by the switch.
    pub parsed_len: u16,
    /// The target server.
    pub server_id: u8,
    /// How the server was selected.
    pub sel: Sel,
    /// The handler's verdict (responses).
    pub status: Status,
    /// Version of the group slot used.
    pub grp_ver: u16,
    /// Count-min estimate at send time.
    pub cms_est: u32,
}

impl ClipRepr {
    /// Reads the common header at the start of `buf` (as
    /// [`ClipHeader::new_checked`] checks it).
    pub fn parse(buf: &[u8]) -> Result<Self> {
        let h = ClipHeader::new_checked(buf)?;
        Ok(ClipRepr {
            kind: h.kind(),
            flags: h.flags(),
            load_type: h.load_type(),
            app_id: h.app_id(),
            hdr_words: h.hdr_words(),
            parsed_len: h.parsed_len(),
            server_id: h.server_id(),
            sel: h.sel(),
            status: h.status(),
            grp_ver: h.grp_ver(),
            cms_est: h.cms_est(),
        })
    }

    /// The 16 bytes of the common header.
    pub fn to_bytes(&self) -> [u8; COMMON_LEN] {
        let mut b = [0u8; COMMON_LEN];
        b[field::VER_KIND] = (VERSION << 4) | self.kind as u8;
        b[field::FLAGS] = self.flags & FLAGS_MASK;
        b[field::LOAD_TYPE..field::LOAD_TYPE + 2].copy_from_slice(&self.load_type.to_be_bytes());
        b[field::APP_ID] = self.app_id;
        b[field::HDR_WORDS] = self.hdr_words;
        b[field::PARSED_LEN..field::PARSED_LEN + 2].copy_from_slice(&self.parsed_len.to_be_bytes());
        b[field::SERVER_ID] = self.server_id;
        b[field::SEL_STATUS] = ((self.sel as u8) << 5) | ((self.status as u8) << 3);
        b[field::GRP_VER..field::GRP_VER + 2].copy_from_slice(&self.grp_ver.to_be_bytes());
        b[field::CMS_EST..field::CMS_EST + 4].copy_from_slice(&self.cms_est.to_be_bytes());
        b
    }

    /// Writes the common header to the start of `buf`.
    pub fn emit(&self, buf: &mut [u8]) -> Result<()> {
        let b = buf.get_mut(..COMMON_LEN).ok_or(WireError::BufferTooSmall)?;
        b.copy_from_slice(&self.to_bytes());
        Ok(())
    }

    /// The bytes [`emit`](Self::emit) writes: the common header only.
    pub const fn buffer_len(&self) -> usize {
        COMMON_LEN
    }

    /// Bytes of the params region this header declares:
    /// `hdr_words * 4 - 16`, 0 if `hdr_words` < 4.
    pub fn params_len(&self) -> usize {
        (usize::from(self.hdr_words) * 4).saturating_sub(COMMON_LEN)
    }
}

/// Offset of the EtherType field the shim takes over: 12, or 16 behind one
/// 802.1Q tag (the tag stays in front of the shim).
pub fn ethertype_offset(frame: &[u8]) -> Result<usize> {
    let f = EthernetFrame::new_checked(frame)?;
    Ok(if f.is_tagged() {
        HEADER_LEN - 2 + VLAN_TAG_LEN
    } else {
        HEADER_LEN - 2
    })
}

/// The shim of a frame, if its EtherType is [`super::ETHERTYPE`]: the
/// offset of the 16 header bytes and the header. `Ok(None)` for any other
/// frame; an error for a frame that is not Ethernet, or a CLIP EtherType
/// over bad header bytes.
pub fn shim_of(frame: &[u8]) -> Result<Option<(usize, ClipRepr)>> {
    let at = ethertype_offset(frame)?;
    if u16::from_be_bytes([frame[at], frame[at + 1]]) != super::ETHERTYPE {
        return Ok(None);
    }
    let start = at + 2;
    Ok(Some((start, ClipRepr::parse(&frame[start..])?)))
}

/// The shim of a frame that must carry one, with its whole header and
/// params region present: the header's offset and the header.
fn located(frame: &[u8]) -> Result<(usize, ClipRepr)> {
    let (start, repr) = shim_of(frame)?.ok_or(WireError::Malformed("no CLIP shim"))?;
    let len = usize::from(repr.hdr_words) * 4;
    if len < COMMON_LEN {
        return Err(WireError::Malformed("CLIP hdr_words below 4"));
    }
    if frame.len() < start + len {
        return Err(WireError::Truncated);
    }
    Ok((start, repr))
}

/// Where the params region of a shimmed frame is: `hdr_words * 4 - 16`
/// bytes after the common header. Refused if the frame carries no shim,
/// a malformed one, `hdr_words` < 4, or ends inside the region.
pub fn params_range(frame: &[u8]) -> Result<Range<usize>> {
    let (start, repr) = located(frame)?;
    Ok(start + COMMON_LEN..start + usize::from(repr.hdr_words) * 4)
}

/// Prepares a push in `header` (at least the Ethernet header and tag):
/// checks that `params_len` bytes of params fit, writes [`super::ETHERTYPE`]
/// over the frame's EtherType and returns where the shim goes and its 16
/// bytes, with `load_type` set to the EtherType it replaced and
/// `hdr_words` to `(16 + params_len) / 4` (the repr's are ignored). The
/// caller inserts the 16 bytes and then the params there. Refused,
/// `header` unchanged, if `params_len` is not a multiple of 4 or over
/// [`MAX_PARAMS_LEN`], if `header` is not Ethernet, or if it already
/// carries a shim (shims do not nest).
pub fn push_in_place(
    header: &mut [u8],
    repr: ClipRepr,
    params_len: usize,
) -> Result<(usize, [u8; COMMON_LEN])> {
    if !params_len.is_multiple_of(4) {
        return Err(WireError::Malformed(
            "CLIP params length not a multiple of 4",
        ));
    }
    if params_len > MAX_PARAMS_LEN {
        return Err(WireError::OutOfRange("CLIP params over 1004 bytes"));
    }
    let at = ethertype_offset(header)?;
    let old = u16::from_be_bytes([header[at], header[at + 1]]);
    if old == super::ETHERTYPE {
        return Err(WireError::Malformed("frame already carries a CLIP shim"));
    }
    header[at..at + 2].copy_from_slice(&super::ETHERTYPE.to_be_bytes());
    let repr = ClipRepr {
        load_type: old,
        // ≤ 1020 / 4 = 255, checked above.
        hdr_words: ((COMMON_LEN + params_len) / 4) as u8,
        ..repr
    };
    Ok((at + 2, repr.to_bytes()))
}

/// Prepares a pop in `frame` (at least the Ethernet header, the shim and
/// its params): writes `load_type` back as the EtherType and returns the
/// header and the range of header plus params, which the caller removes.
/// Refused, `frame` unchanged, if there is no shim, it is malformed,
/// `hdr_words` < 4, or the params region is cut short.
pub fn pop_in_place(frame: &mut [u8]) -> Result<(ClipRepr, Range<usize>)> {
    let (start, repr) = located(frame)?;
    frame[start - 2..start].copy_from_slice(&repr.load_type.to_be_bytes());
    Ok((repr, start..start + usize::from(repr.hdr_words) * 4))
}

/// Inserts the shim and `params` into `frame` after its Ethernet header
/// (and tag): `load_type` := the frame's EtherType, EtherType :=
/// [`super::ETHERTYPE`], `hdr_words` := `(16 + params.len()) / 4` (the
/// repr's `load_type` and `hdr_words` are ignored). Refused, frame
/// unchanged, as [`push_in_place`] refuses.
pub fn push(frame: &mut Vec<u8>, repr: ClipRepr, params: &[u8]) -> Result<()> {
    let (at, bytes) = push_in_place(frame, repr, params.len())?;
    frame.splice(at..at, bytes.iter().chain(params).copied());
    Ok(())
}

/// Removes the shim and its params (`hdr_words * 4` bytes) from `frame`,
/// restoring `load_type` as the EtherType; returns the header and the
/// params. Refused, frame unchanged, as [`pop_in_place`] refuses.
pub fn pop(frame: &mut Vec<u8>) -> Result<(ClipRepr, Vec<u8>)> {
    let (repr, range) = pop_in_place(frame)?;
    let params = frame[range.start + COMMON_LEN..range.end].to_vec();
    frame.drain(range);
    Ok((repr, params))
}

/// Bit-packs `fields` (value, width in bits) into `out` in order, MSB
/// first (P4 header packing, §4.2); every bit of `out` after the last
/// field is zeroed (the region's padding). A width is at most 64 (a
/// 128-bit FlowKey goes as two 64-bit halves, high half first). Refused,
/// `out` unchanged, if a width is over 64 (`OutOfRange`), a value does
/// not fit its width (`OutOfRange`), or the fields need more than
/// `out.len() * 8` bits (`BufferTooSmall`).
pub fn pack(fields: &[(u64, u8)], out: &mut [u8]) -> Result<()> {
    let mut bits = 0usize;
    for &(v, w) in fields {
        if w > 64 {
            return Err(WireError::OutOfRange("bit field wider than 64"));
        }
        if w < 64 && v >> w != 0 {
            return Err(WireError::OutOfRange("value wider than its bit field"));
        }
        bits += usize::from(w);
    }
    if bits > out.len().saturating_mul(8) {
        return Err(WireError::BufferTooSmall);
    }
    out.fill(0);
    let mut pos = 0usize;
    for &(v, w) in fields {
        for i in (0..w).rev() {
            if (v >> i) & 1 == 1 {
                out[pos / 8] |= 0x80 >> (pos % 8);
            }
            pos += 1;
        }
    }
    Ok(())
}

/// Reads fields of the given widths (each at most 64 bits) from `buf` in
/// order, MSB first: the inverse of [`pack`]. Bits after the last field
/// are ignored. Refused if a width is over 64 (`OutOfRange`) or the
/// widths add up to more than `buf.len() * 8` bits (`Truncated`).
pub fn unpack(buf: &[u8], widths: &[u8]) -> Result<Vec<u64>> {
    let mut bits = 0usize;
    for &w in widths {
        if w > 64 {
            return Err(WireError::OutOfRange("bit field wider than 64"));
        }
        bits += usize::from(w);
    }
    if bits > buf.len().saturating_mul(8) {
        return Err(WireError::Truncated);
    }
    let mut pos = 0usize;
    Ok(widths
        .iter()
        .map(|&w| {
            let mut v = 0u64;
            for _ in 0..w {
                let bit = (buf[pos / 8] >> (7 - pos % 8)) & 1;
                v = (v << 1) | u64::from(bit);
                pos += 1;
            }
            v
        })
        .collect())
}

/// The params region length `P` for a request list of `req_bits` and a
/// response list of `res_bits` (§4.2): `roundup4(max(ceil(req/8),
/// ceil(res/8)))`.
pub fn params_len(req_bits: usize, res_bits: usize) -> usize {
    req_bits
        .div_ceil(8)
        .max(res_bits.div_ceil(8))
        .next_multiple_of(4)
}

/// The §4.3 apps: ids, field widths in declaration order (a 128-bit
/// FlowKey as two 64-bit halves) and params lengths `P`.
pub mod params {
    pub use super::params_len;

    /// NULL (microbenchmarks): no params.
    pub const NULL_APP: u8 = 1;
    /// MFWD (mirrored forwarding).
    pub const MFWD_APP: u8 = 2;
    /// SNAT.
    pub const SNAT_APP: u8 = 3;
    /// TRD (overlay TCP retransmission detection).
    pub const TRD_APP: u8 = 4;

    /// NULL's `P`.
    pub const NULL_P: usize = 0;
    /// MFWD's `P`: request 128 bits, response 24.
    pub const MFWD_P: usize = 16;
    /// SNAT's `P`: request 128 bits, response 48.
    pub const SNAT_P: usize = 16;
    /// TRD's `P`: request 216 bits (27 bytes), response 96.
    pub const TRD_P: usize = 28;

    /// A FlowKey: two 64-bit halves, high half (`ctx`, `proto`, `src_ip`)
    /// first.
    pub const FLOW_KEY: [u8; 2] = [64, 64];
    /// MFWD request: `flow`.
    pub const MFWD_REQ: &[u8] = &[64, 64];
    /// MFWD response: `nexthop_id` 16, `hit` 8.
    pub const MFWD_RES: &[u8] = &[16, 8];
    /// SNAT request: `flow`.
    pub const SNAT_REQ: &[u8] = &[64, 64];
    /// SNAT response: `pub_ip` 32, `pub_port` 16.
    pub const SNAT_RES: &[u8] = &[32, 16];
    /// TRD request: `flow`, `tcp_flags` 8, `seq` 32, `seq_end` 32,
    /// `payload_len` 16.
    pub const TRD_REQ: &[u8] = &[64, 64, 8, 32, 32, 16];
    /// TRD response: `idx` 16, `op` 8, `retx` 8, `init_end` 32, `seq_end` 32.
    pub const TRD_RES: &[u8] = &[16, 8, 8, 32, 32];

    /// `P` of a §4.3 app, `None` for an unknown id.
    pub fn for_app(app_id: u8) -> Option<usize> {
        Some(match app_id {
            NULL_APP => NULL_P,
            MFWD_APP => MFWD_P,
            SNAT_APP => SNAT_P,
            TRD_APP => TRD_P,
            _ => return None,
        })
    }

    /// A FlowKey as the two halves [`super::pack`] takes.
    pub fn flow_halves(flow: &crate::clip::FlowKey) -> [(u64, u8); 2] {
        let mut hi = [0u8; 8];
        let mut lo = [0u8; 8];
        hi.copy_from_slice(&flow[..8]);
        lo.copy_from_slice(&flow[8..]);
        [(u64::from_be_bytes(hi), 64), (u64::from_be_bytes(lo), 64)]
    }

    /// The FlowKey of two unpacked halves.
    pub fn flow_of_halves(hi: u64, lo: u64) -> crate::clip::FlowKey {
        let mut f = [0u8; 16];
        f[..8].copy_from_slice(&hi.to_be_bytes());
        f[8..].copy_from_slice(&lo.to_be_bytes());
        f
    }
}

#[cfg(test)]
mod tests {
    use super::params::*;
    use super::*;
    use crate::clip::ETHERTYPE;

    fn frame(tagged: bool, ethertype: u16) -> Vec<u8> {
        let mut f = vec![0xAA; 6];
        f.extend_from_slice(&[0xBB; 6]);
        if tagged {
            f.extend_from_slice(&[0x81, 0x00, 0x00, 0x07]);
        }
        f.extend_from_slice(&ethertype.to_be_bytes());
        f.extend_from_slice(&[0x45, 0, 0, 20, 1, 2, 3, 4, 5, 6, 7, 8]);
        f
    }

    fn request() -> ClipRepr {
        ClipRepr {
            kind: Kind::Request,
            flags: FLAG_CMS_VALID | FLAG_REC,
            load_type: 0,
            app_id: 3,
            hdr_words: 0,
            parsed_len: 40,
            server_id: 5,
            sel: Sel::Prev,
            status: Status::Ok,
            grp_ver: 0x0102,
            cms_est: 0x0A0B_0C0D,
        }
    }

    #[test]
    fn layout_is_the_spec_s() {
        let r = ClipRepr {
            kind: Kind::Response,
            flags: FLAG_CMS_VALID | FLAG_HINTED,
            load_type: 0x0800,
            app_id: 4,
            hdr_words: 11,
            parsed_len: 90,
            server_id: 0x7F,
            sel: Sel::Hint,
            status: Status::NoResult,
            grp_ver: 0xBEEF,
            cms_est: 0x1234_5678,
        };
        assert_eq!(
            r.to_bytes(),
            [
                0x12, 0xC0, 0x08, 0x00, 4, 11, 0, 90, 0x7F, 0x90, 0xBE, 0xEF, 0x12, 0x34, 0x56,
                0x78
            ]
        );
        assert_eq!(ClipRepr::parse(&r.to_bytes()), Ok(r));
        assert_eq!(r.params_len(), 28);
        assert_eq!(r.buffer_len(), 16);
        let h = ClipHeader::new_checked(r.to_bytes()).unwrap();
        assert_eq!(
            (h.version(), h.kind(), h.cms_valid(), h.hinted(), h.rec()),
            (1, Kind::Response, true, true, false)
        );
        assert_eq!(
            (h.sel(), h.status(), h.header_len()),
            (Sel::Hint, Status::NoResult, 44)
        );
        // Every sel/status pair lands in byte 9's bits 7..3.
        for sel in Sel::ALL {
            for status in Status::ALL {
                let b = ClipRepr { sel, status, ..r }.to_bytes();
                assert_eq!(b[9], (sel as u8) << 5 | (status as u8) << 3);
                assert_eq!(
                    ClipRepr::parse(&b).map(|p| (p.sel, p.status)),
                    Ok((sel, status))
                );
            }
        }
        let mut e = [0u8; 15];
        assert_eq!(r.emit(&mut e), Err(WireError::BufferTooSmall));
    }

    #[test]
    fn bad_version_kind_sel_status_and_length_are_refused() {
        let b = request().to_bytes();
        assert_eq!(ClipRepr::parse(&b[..15]), Err(WireError::Truncated));
        for v in [0x01u8, 0x21, 0xF1] {
            let mut x = b;
            x[0] = v;
            assert!(ClipRepr::parse(&x).is_err(), "version/kind byte {v:#x}");
        }
        for kind in [0u8, 3, 15] {
            let mut x = b;
            x[0] = 0x10 | kind;
            assert!(ClipRepr::parse(&x).is_err(), "kind {kind}");
        }
        for sel in 5u8..8 {
            let mut x = b;
            x[9] = sel << 5;
            assert!(ClipRepr::parse(&x).is_err(), "sel {sel}");
        }
        let mut x = b;
        x[9] = 3 << 3;
        assert!(ClipRepr::parse(&x).is_err(), "status 3");
        // Reserved bits are ignored on read and cleared on write.
        let mut x = b;
        x[1] |= 0x1F;
        x[9] |= 0x07;
        let p = ClipRepr::parse(&x).unwrap();
        assert_eq!(p, ClipRepr::parse(&b).unwrap());
        assert_eq!(p.to_bytes(), b);
    }

    #[test]
    fn setters_write_what_getters_read() {
        let mut b = request().to_bytes();
        b[9] |= 0x07;
        let mut h = ClipHeader::new_checked(&mut b[..]).unwrap();
        h.set_kind(Kind::Response);
        h.set_status(Status::Drop);
        h.set_load_type(0x86DD);
        h.set_server_id(9);
        h.set_cms_est(77);
        assert_eq!(h.sel(), Sel::Prev, "set_status keeps sel");
        h.set_sel(Sel::Cur);
        assert_eq!(h.status(), Status::Drop, "set_sel keeps status");
        h.set_flags(0xFF);
        h.set_app_id(2);
        h.set_parsed_len(54);
        h.set_grp_ver(3);
        assert_eq!(
            ClipRepr::parse(&b).unwrap(),
            ClipRepr {
                kind: Kind::Response,
                flags: FLAGS_MASK,
                load_type: 0x86DD,
                app_id: 2,
                hdr_words: 0,
                parsed_len: 54,
                server_id: 9,
                sel: Sel::Cur,
                status: Status::Drop,
                grp_ver: 3,
                cms_est: 77,
            }
        );
        assert_eq!(b[9] & 0x07, 0, "reserved bits cleared");
    }

    #[test]
    fn push_then_pop_restores_the_frame() {
        for tagged in [false, true] {
            for plen in [0usize, 16, 28] {
                let orig = frame(tagged, 0x0800);
                let params: Vec<u8> = (0..plen as u8).map(|i| i ^ 0x5A).collect();
                let mut f = orig.clone();
                push(&mut f, request(), &params).unwrap();
                assert_eq!(f.len(), orig.len() + 16 + plen);
                let et = if tagged { 16 } else { 12 };
                assert_eq!(ethertype_offset(&f), Ok(et));
                assert_eq!(f[et..et + 2], ETHERTYPE.to_be_bytes());
                let (start, s) = shim_of(&f).unwrap().unwrap();
                assert_eq!(start, et + 2);
                assert_eq!(s.load_type, 0x0800);
                assert_eq!(usize::from(s.hdr_words) * 4, 16 + plen);
                assert_eq!(
                    s,
                    ClipRepr {
                        load_type: 0x0800,
                        hdr_words: s.hdr_words,
                        ..request()
                    }
                );
                let range = params_range(&f).unwrap();
                assert_eq!(range, start + 16..start + 16 + plen);
                assert_eq!(f[range], params[..]);
                assert_eq!(
                    f[start + 16 + plen..],
                    orig[et + 2..],
                    "the L3 packet follows"
                );
                // Shims do not nest.
                let before = f.clone();
                assert!(push(&mut f, request(), &[]).is_err());
                assert_eq!(f, before);
                let (r, p) = pop(&mut f).unwrap();
                assert_eq!(r, s);
                assert_eq!(p, params);
                assert_eq!(f, orig);
                assert!(pop(&mut f).is_err(), "no shim left");
                assert_eq!(f, orig, "a refused pop leaves the frame alone");
                assert_eq!(shim_of(&f), Ok(None));
                assert!(params_range(&f).is_err());
            }
        }
    }

    #[test]
    fn refused_pushes_leave_the_frame_unchanged() {
        let orig = frame(false, 0x0800);
        for params in [vec![0u8; 3], vec![0; 17], vec![0; 1008], vec![0; 2000]] {
            let mut f = orig.clone();
            assert!(
                push(&mut f, request(), &params).is_err(),
                "{}",
                params.len()
            );
            assert_eq!(f, orig);
        }
        // The largest region fits: hdr_words 255.
        let mut f = orig.clone();
        push(&mut f, request(), &[0; MAX_PARAMS_LEN]).unwrap();
        assert_eq!(shim_of(&f).unwrap().unwrap().1.hdr_words, 255);
        // Not Ethernet: too short, or a tag cut off.
        for short in [vec![0u8; 13], {
            let mut t = vec![0u8; 12];
            t.extend_from_slice(&[0x81, 0x00, 0, 1]);
            t
        }] {
            let mut f = short.clone();
            assert!(push(&mut f, request(), &[]).is_err());
            assert_eq!(f, short);
        }
    }

    #[test]
    fn refused_pops_leave_the_frame_unchanged() {
        let mut good = frame(true, 0x0800);
        push(&mut good, request(), &[7; 16]).unwrap();
        let start = shim_of(&good).unwrap().unwrap().0;
        let mut cases = Vec::new();
        // Truncated: the params region is cut short.
        cases.push(good[..start + 16 + 15].to_vec());
        // hdr_words below 4.
        for hw in [0u8, 3] {
            let mut b = good.clone();
            b[start + 5] = hw;
            cases.push(b);
        }
        // Malformed header: bad version, kind, sel, status.
        for (at, v) in [(0usize, 0x21u8), (0, 0x13), (9, 0xE0), (9, 0x18)] {
            let mut b = good.clone();
            b[start + at] = v;
            cases.push(b);
        }
        // The common header itself cut short.
        cases.push(good[..start + 10].to_vec());
        // No shim at all.
        cases.push(frame(false, 0x86DD));
        for c in cases {
            let mut f = c.clone();
            assert!(pop(&mut f).is_err(), "{c:02x?}");
            assert_eq!(f, c);
            let mut g = c.clone();
            assert!(pop_in_place(&mut g).is_err());
            assert_eq!(g, c);
            assert!(params_range(&c).is_err());
        }
        // A frame longer than header + params pops fine.
        let mut f = good.clone();
        assert!(pop(&mut f).is_ok());
    }

    #[test]
    fn pack_and_unpack_are_msb_first() {
        let mut out = [0xFFu8; 4];
        pack(&[(0b101, 3), (0xABC, 12), (1, 1)], &mut out).unwrap();
        // 101 1010 1011 1100 1 then zero padding.
        assert_eq!(out, [0b1011_0101, 0b0111_1001, 0, 0]);
        assert_eq!(unpack(&out, &[3, 12, 1]), Ok(vec![0b101, 0xABC, 1]));
        let mut full = [0u8; 16];
        pack(&[(u64::MAX, 64), (0x0102_0304_0506_0708, 64)], &mut full).unwrap();
        assert_eq!(full[..8], [0xFF; 8]);
        assert_eq!(full[8..], [1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(
            unpack(&full, &[64, 64]),
            Ok(vec![u64::MAX, 0x0102_0304_0506_0708])
        );
        // Refusals.
        let mut small = [0x11u8; 2];
        assert_eq!(pack(&[(0, 17)], &mut small), Err(WireError::BufferTooSmall));
        assert!(pack(&[(4, 2)], &mut small).is_err(), "4 needs 3 bits");
        assert!(pack(&[(1, 0)], &mut small).is_err());
        assert!(pack(&[(0, 65)], &mut small).is_err());
        assert_eq!(small, [0x11; 2], "a refused pack writes nothing");
        assert_eq!(unpack(&small, &[17]), Err(WireError::Truncated));
        assert!(unpack(&small, &[65]).is_err());
        assert_eq!(unpack(&small, &[0, 0]), Ok(vec![0, 0]));
    }

    #[test]
    fn params_lengths_are_the_spec_s() {
        let bits = |w: &[u8]| w.iter().map(|&b| usize::from(b)).sum::<usize>();
        assert_eq!(bits(TRD_REQ), 216);
        assert_eq!(bits(TRD_REQ).div_ceil(8), 27);
        assert_eq!(bits(TRD_RES), 96);
        assert_eq!(params_len(216, 96), 28);
        assert_eq!(params_len(bits(TRD_REQ), bits(TRD_RES)), TRD_P);
        assert_eq!(params_len(bits(MFWD_REQ), bits(MFWD_RES)), MFWD_P);
        assert_eq!(params_len(bits(SNAT_REQ), bits(SNAT_RES)), SNAT_P);
        assert_eq!(params_len(0, 0), NULL_P);
        assert_eq!(params_len(1, 0), 4);
        assert_eq!(params::params_len(33, 8), 8);
        assert_eq!(
            [1, 2, 3, 4, 5].map(for_app),
            [Some(0), Some(16), Some(16), Some(28), None]
        );
        // A TRD request packs into its region and reads back.
        let flow: crate::clip::FlowKey = core::array::from_fn(|i| i as u8 + 1);
        let [hi, lo] = flow_halves(&flow);
        let mut region = [0u8; TRD_P];
        pack(
            &[hi, lo, (0x18, 8), (1000, 32), (1100, 32), (100, 16)],
            &mut region,
        )
        .unwrap();
        assert_eq!(region[..16], flow);
        assert_eq!(region[16], 0x18);
        assert_eq!(region[27], 0, "the padding byte");
        let v = unpack(&region, TRD_REQ).unwrap();
        assert_eq!(flow_of_halves(v[0], v[1]), flow);
        assert_eq!(v[2..], [0x18, 1000, 1100, 100]);
    }
}
