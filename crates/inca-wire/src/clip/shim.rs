//! The CLIP common header (spec §4.2), 16 bytes after the Ethernet header
//! (and its 802.1Q tag), followed by the params region (`hdr_words * 4 -
//! 16` bytes) and the original L3 header.
//!
//! ```text
//! byte 0: version 4 | kind 4    byte 1: flags (b7 CMS_VALID, b6 HINTED, b5 REC)
//! bytes 2-3: load_type          byte 4: app_id      byte 5: hdr_words
//! bytes 6-7: parsed_len         byte 8: server_id
//! byte 9: sel 3 | status 2 | 0  bytes 10-11: grp_ver  bytes 12-15: cms_est
//! ```

use crate::error::{Result, WireError};
use crate::ethernet::{EthernetFrame, HEADER_LEN, VLAN_TAG_LEN};

/// Length of the common header.
pub const COMMON_LEN: usize = 16;
/// The only version.
pub const VERSION: u8 = 1;
/// `flags`: `cms_est` is valid.
pub const FLAG_CMS_VALID: u8 = 0x80;
/// `flags`: the server was chosen by the app's hint.
pub const FLAG_HINTED: u8 = 0x40;
/// `flags`: record mode was on at selection.
pub const FLAG_REC: u8 = 0x20;
/// Longest header plus params (`hdr_words` is one byte of 4-byte words).
pub const MAX_HEADER: usize = 255 * 4;

/// Request or response.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Kind {
    /// Switch → server.
    Request = 1,
    /// Server → switch.
    Response = 2,
}

impl Kind {
    /// Decodes a 4-bit kind.
    pub fn from_u8(v: u8) -> Result<Self> {
        match v {
            1 => Ok(Kind::Request),
            2 => Ok(Kind::Response),
            _ => Err(WireError::Unsupported("unknown CLIP kind")),
        }
    }
}

/// How the switch chose the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Sel {
    /// The exact pin table.
    PinTable = 0,
    /// The data-plane pin cache.
    PinCache = 1,
    /// The previous group (a Bloom hit).
    Prev = 2,
    /// The current group.
    Cur = 3,
    /// The app's hint.
    Hint = 4,
}

impl Sel {
    /// Decodes a 3-bit selector.
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

    /// Whether the server came from a group slot (`grp_ver` is set).
    pub fn is_group(self) -> bool {
        matches!(self, Sel::Prev | Sel::Cur)
    }
}

/// A response's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Status {
    /// The result is in the params region.
    Ok = 0,
    /// Drop the packet.
    Drop = 1,
    /// No result.
    NoResult = 2,
}

impl Status {
    /// Decodes a 2-bit status.
    pub fn from_u8(v: u8) -> Result<Self> {
        Ok(match v {
            0 => Status::Ok,
            1 => Status::Drop,
            2 => Status::NoResult,
            _ => return Err(WireError::Unsupported("unknown CLIP status")),
        })
    }
}

/// The fields of a common header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ClipRepr {
    /// Request or response.
    pub kind: Kind,
    /// Flag bits ([`FLAG_CMS_VALID`], [`FLAG_HINTED`], [`FLAG_REC`]).
    pub flags: u8,
    /// The original EtherType.
    pub load_type: u16,
    /// The app.
    pub app_id: u8,
    /// (16 + P) / 4.
    pub hdr_words: u8,
    /// Bytes of the original L3 payload the switch parsed.
    pub parsed_len: u16,
    /// The server the switch chose.
    pub server_id: u8,
    /// How it chose it.
    pub sel: Sel,
    /// The response's verdict (Ok in requests).
    pub status: Status,
    /// The group slot's version (0 unless `sel` is Prev or Cur).
    pub grp_ver: u16,
    /// The count-min estimate at send time.
    pub cms_est: u32,
}

impl ClipRepr {
    /// Reads a common header at the start of `buf`.
    pub fn parse(buf: &[u8]) -> Result<Self> {
        let b = buf.get(..COMMON_LEN).ok_or(WireError::Truncated)?;
        if b[0] >> 4 != VERSION {
            return Err(WireError::Unsupported("CLIP version"));
        }
        Ok(ClipRepr {
            kind: Kind::from_u8(b[0] & 0x0F)?,
            flags: b[1] & (FLAG_CMS_VALID | FLAG_HINTED | FLAG_REC),
            load_type: u16::from_be_bytes([b[2], b[3]]),
            app_id: b[4],
            hdr_words: b[5],
            parsed_len: u16::from_be_bytes([b[6], b[7]]),
            server_id: b[8],
            sel: Sel::from_u8(b[9] >> 5)?,
            status: Status::from_u8((b[9] >> 3) & 0x03)?,
            grp_ver: u16::from_be_bytes([b[10], b[11]]),
            cms_est: u32::from_be_bytes([b[12], b[13], b[14], b[15]]),
        })
    }

    /// The 16 bytes.
    pub fn to_bytes(&self) -> [u8; COMMON_LEN] {
        let mut b = [0u8; COMMON_LEN];
        b[0] = (VERSION << 4) | self.kind as u8;
        b[1] = self.flags & (FLAG_CMS_VALID | FLAG_HINTED | FLAG_REC);
        b[2..4].copy_from_slice(&self.load_type.to_be_bytes());
        b[4] = self.app_id;
        b[5] = self.hdr_words;
        b[6..8].copy_from_slice(&self.parsed_len.to_be_bytes());
        b[8] = self.server_id;
        b[9] = ((self.sel as u8) << 5) | ((self.status as u8) << 3);
        b[10..12].copy_from_slice(&self.grp_ver.to_be_bytes());
        b[12..16].copy_from_slice(&self.cms_est.to_be_bytes());
        b
    }

    /// Writes the header to the start of `buf`.
    pub fn emit(&self, buf: &mut [u8]) -> Result<()> {
        let b = buf.get_mut(..COMMON_LEN).ok_or(WireError::BufferTooSmall)?;
        b.copy_from_slice(&self.to_bytes());
        Ok(())
    }

    /// Bytes needed to emit the header.
    pub const fn buffer_len(&self) -> usize {
        COMMON_LEN
    }

    /// Length of the params region `hdr_words` gives (0 if it is short).
    pub fn params_len(&self) -> usize {
        (usize::from(self.hdr_words) * 4).saturating_sub(COMMON_LEN)
    }
}

/// Offset of the EtherType field: 12, or 16 behind an 802.1Q tag.
pub fn ethertype_offset(frame: &[u8]) -> Result<usize> {
    let f = EthernetFrame::new_checked(frame)?;
    Ok(if f.is_tagged() {
        HEADER_LEN - 2 + VLAN_TAG_LEN
    } else {
        HEADER_LEN - 2
    })
}

/// The common header of a frame that carries one, with the offset of its
/// 16 bytes; `Ok(None)` for a frame of another EtherType.
pub fn shim_of(frame: &[u8]) -> Result<Option<(usize, ClipRepr)>> {
    let at = ethertype_offset(frame)?;
    if u16::from_be_bytes([frame[at], frame[at + 1]]) != super::ETHERTYPE {
        return Ok(None);
    }
    let start = at + 2;
    Ok(Some((start, ClipRepr::parse(&frame[start..])?)))
}

/// Where the params region of a shimmed frame is. Refused if the frame has
/// no header, `hdr_words` is below 4 or the region is cut short.
pub fn params_range(frame: &[u8]) -> Result<std::ops::Range<usize>> {
    let (start, repr) = shim_of(frame)?.ok_or(WireError::Malformed("no CLIP header"))?;
    if usize::from(repr.hdr_words) * 4 < COMMON_LEN {
        return Err(WireError::Malformed(
            "CLIP hdr_words below the common header",
        ));
    }
    let r = start + COMMON_LEN..start + usize::from(repr.hdr_words) * 4;
    if r.end > frame.len() {
        return Err(WireError::Truncated);
    }
    Ok(r)
}

/// Inserts the header and `params` after the Ethernet header (and tag):
/// `load_type` becomes the frame's EtherType and the EtherType
/// [`super::ETHERTYPE`]; `hdr_words` is set from `params`. Refused, frame
/// unchanged, if `params` is not a whole number of words, too long, or the
/// frame already carries a header.
pub fn push(frame: &mut Vec<u8>, repr: ClipRepr, params: &[u8]) -> Result<()> {
    if !params.len().is_multiple_of(4) || COMMON_LEN + params.len() > MAX_HEADER {
        return Err(WireError::Malformed("CLIP params length"));
    }
    let at = ethertype_offset(frame)?;
    let old = u16::from_be_bytes([frame[at], frame[at + 1]]);
    if old == super::ETHERTYPE {
        return Err(WireError::Malformed("frame already carries a CLIP header"));
    }
    let repr = ClipRepr {
        load_type: old,
        hdr_words: ((COMMON_LEN + params.len()) / 4) as u8,
        ..repr
    };
    frame[at..at + 2].copy_from_slice(&super::ETHERTYPE.to_be_bytes());
    let mut bytes = Vec::with_capacity(COMMON_LEN + params.len());
    bytes.extend_from_slice(&repr.to_bytes());
    bytes.extend_from_slice(params);
    frame.splice(at + 2..at + 2, bytes);
    Ok(())
}

/// Removes the header and params, restoring the EtherType; returns them.
/// Refused, frame unchanged, if there is none or it is malformed.
pub fn pop(frame: &mut Vec<u8>) -> Result<(ClipRepr, Vec<u8>)> {
    let range = params_range(frame)?;
    let (start, repr) = shim_of(frame)?.ok_or(WireError::Malformed("no CLIP header"))?;
    let params = frame[range.clone()].to_vec();
    frame[start - 2..start].copy_from_slice(&repr.load_type.to_be_bytes());
    frame.drain(start..range.end);
    Ok((repr, params))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(tagged: bool) -> Vec<u8> {
        let mut f = vec![0xAA; 12];
        if tagged {
            f.extend_from_slice(&[0x81, 0x00, 0x00, 0x07]);
        }
        f.extend_from_slice(&[0x08, 0x00]);
        f.extend_from_slice(&[1, 2, 3, 4, 5, 6, 7, 8]);
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
            server_id: 2,
            sel: Sel::Prev,
            status: Status::Ok,
            grp_ver: 0x0102,
            cms_est: 0x0A0B0C0D,
        }
    }

    #[test]
    fn layout_is_the_spec_s() {
        let r = ClipRepr {
            load_type: 0x0800,
            hdr_words: 8,
            status: Status::NoResult,
            ..request()
        };
        assert_eq!(
            r.to_bytes(),
            [0x11, 0xA0, 0x08, 0x00, 3, 8, 0, 40, 2, 0x50, 0x01, 0x02, 0x0A, 0x0B, 0x0C, 0x0D]
        );
        assert_eq!(ClipRepr::parse(&r.to_bytes()).unwrap(), r);
        assert_eq!(r.params_len(), 16);
    }

    #[test]
    fn push_then_pop_restores_the_frame() {
        for tagged in [false, true] {
            for p in [0usize, 16, 28] {
                let orig = frame(tagged);
                let params: Vec<u8> = (0..p as u8).collect();
                let mut f = orig.clone();
                push(&mut f, request(), &params).unwrap();
                assert_eq!(f.len(), orig.len() + COMMON_LEN + p);
                let (_, s) = shim_of(&f).unwrap().unwrap();
                assert_eq!(s.load_type, 0x0800);
                assert_eq!(usize::from(s.hdr_words) * 4, COMMON_LEN + p);
                assert_eq!(&f[params_range(&f).unwrap()], &params[..]);
                assert!(push(&mut f.clone(), request(), &[]).is_err());
                let (r, back) = pop(&mut f).unwrap();
                assert_eq!(back, params);
                assert_eq!(r.app_id, 3);
                assert_eq!(f, orig);
                assert!(pop(&mut f).is_err());
                assert_eq!(f, orig);
            }
        }
    }

    #[test]
    fn bad_fields_are_refused() {
        let mut b = request().to_bytes();
        assert_eq!(ClipRepr::parse(&b[..15]), Err(WireError::Truncated));
        b[0] = 0x21;
        assert!(ClipRepr::parse(&b).is_err());
        b[0] = 0x13;
        assert!(ClipRepr::parse(&b).is_err());
        let mut b = request().to_bytes();
        b[9] = 5 << 5;
        assert!(ClipRepr::parse(&b).is_err());
        b[9] = 3 << 3;
        assert!(ClipRepr::parse(&b).is_err());
        let mut f = frame(false);
        assert!(push(&mut f, request(), &[1, 2, 3]).is_err());
        assert_eq!(f, frame(false));
        // A header whose hdr_words claims more than the frame holds.
        push(&mut f, request(), &[0; 4]).unwrap();
        f.truncate(14 + COMMON_LEN + 2);
        let before = f.clone();
        assert!(pop(&mut f).is_err());
        assert_eq!(f, before);
    }
}
