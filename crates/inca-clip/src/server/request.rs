//! Validating a request frame (spec §5.3 step 2) and locating its parts:
//! the common header, the params region, the original L3 header and the
//! payload the switch did not parse.

use std::ops::Range;

use inca_wire::clip::shim::{self, ClipRepr, Kind, COMMON_LEN, VERSION};
use inca_wire::clip::ETHERTYPE;

/// Why a frame is not a request this runtime serves. Each is a counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Invalid {
    /// Not a CLIP frame (another EtherType, or too short for Ethernet).
    Ethertype,
    /// A CLIP version other than 1.
    Version,
    /// Not a REQUEST (a response, or an unknown kind).
    Kind,
    /// The common header is cut short or has an undefined field value.
    Header,
    /// An `app_id` this server does not run.
    App,
    /// `hdr_words * 4 != 16 + P`, or the params region is cut short.
    Length,
    /// `parsed_len` points past the end of the frame.
    ParsedLen,
}

impl Invalid {
    /// Every reason, in counter order.
    pub const ALL: [Invalid; 7] = [
        Invalid::Ethertype,
        Invalid::Version,
        Invalid::Kind,
        Invalid::Header,
        Invalid::App,
        Invalid::Length,
        Invalid::ParsedLen,
    ];

    /// The counter's name.
    pub fn counter(self) -> &'static str {
        match self {
            Invalid::Ethertype => "invalid_ethertype",
            Invalid::Version => "invalid_version",
            Invalid::Kind => "invalid_kind",
            Invalid::Header => "invalid_header",
            Invalid::App => "invalid_app",
            Invalid::Length => "invalid_length",
            Invalid::ParsedLen => "invalid_parsed_len",
        }
    }
}

/// A valid request's parts, as offsets into its frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// The common header's fields.
    pub repr: ClipRepr,
    /// Offset of the common header.
    pub shim: usize,
    /// The params region.
    pub params: Range<usize>,
    /// Offset of the original L3 header (the end of the params region).
    pub l3: usize,
    /// Offset of the first byte the switch did not parse (`l3 +
    /// parsed_len`).
    pub payload: usize,
}

/// Checks `frame` is a request for app `app_id` with a params region of
/// `params_len` bytes, in the order of §5.3 step 2. The server id is not
/// checked here: a misdelivered request is still served.
pub fn parse(frame: &[u8], app_id: u8, params_len: usize) -> Result<Request, Invalid> {
    let at = shim::ethertype_offset(frame).map_err(|_| Invalid::Ethertype)?;
    if u16::from_be_bytes([frame[at], frame[at + 1]]) != ETHERTYPE {
        return Err(Invalid::Ethertype);
    }
    let start = at + 2;
    let common = frame
        .get(start..start + COMMON_LEN)
        .ok_or(Invalid::Header)?;
    // Version and kind first, from the raw byte, so each has its counter.
    if common[0] >> 4 != VERSION {
        return Err(Invalid::Version);
    }
    if common[0] & 0x0F != Kind::Request as u8 {
        return Err(Invalid::Kind);
    }
    let repr = ClipRepr::parse(common).map_err(|_| Invalid::Header)?;
    if repr.app_id != app_id {
        return Err(Invalid::App);
    }
    if usize::from(repr.hdr_words) * 4 != COMMON_LEN + params_len {
        return Err(Invalid::Length);
    }
    let params = start + COMMON_LEN..start + COMMON_LEN + params_len;
    if params.end > frame.len() {
        return Err(Invalid::Length);
    }
    let l3 = params.end;
    let payload = l3 + usize::from(repr.parsed_len);
    if payload > frame.len() {
        return Err(Invalid::ParsedLen);
    }
    Ok(Request {
        repr,
        shim: start,
        params,
        l3,
        payload,
    })
}

/// The EtherType and the L3 bytes behind the shim of a CLIP frame, for
/// keying (RSS runs before validation); None if the frame has no
/// well-formed shim.
pub fn original_l3(frame: &[u8]) -> Option<(u16, &[u8])> {
    let (_, repr) = shim::shim_of(frame).ok()??;
    let range = shim::params_range(frame).ok()?;
    Some((repr.load_type, &frame[range.end..]))
}

/// Turns the request at `req` into its response in place: kind RESPONSE
/// and `status`; every other byte stays as it is.
pub fn respond(frame: &mut [u8], req: &Request, status: shim::Status) {
    // Byte 0: version | kind. Byte 9: sel (7..5) | status (4..3) | 0.
    frame[req.shim] = (VERSION << 4) | Kind::Response as u8;
    let b = &mut frame[req.shim + 9];
    *b = (*b & !0x18) | ((status as u8) << 3);
}

#[cfg(test)]
mod tests {
    use super::*;
    use inca_wire::clip::shim::{Sel, Status};

    fn repr(app_id: u8) -> ClipRepr {
        ClipRepr {
            kind: Kind::Request,
            flags: 0,
            load_type: 0,
            app_id,
            hdr_words: 0,
            parsed_len: 4,
            server_id: 1,
            sel: Sel::Cur,
            status: Status::Ok,
            grp_ver: 1,
            cms_est: 0,
        }
    }

    fn frame(params: usize) -> Vec<u8> {
        let mut f = vec![0xAA; 12];
        f.extend_from_slice(&[0x08, 0x00]);
        f.extend_from_slice(&[9; 20]);
        shim::push(&mut f, repr(2), &vec![0x55; params]).unwrap();
        f
    }

    #[test]
    fn a_request_s_parts_are_found() {
        let f = frame(16);
        let r = parse(&f, 2, 16).unwrap();
        assert_eq!(r.shim, 14);
        assert_eq!(r.params, 30..46);
        assert_eq!((r.l3, r.payload), (46, 50));
        assert_eq!(original_l3(&f), Some((0x0800, &f[46..])));
        let mut g = f.clone();
        respond(&mut g, &r, Status::NoResult);
        assert_eq!(g[14], 0x12);
        assert_eq!(g[23], (Sel::Cur as u8) << 5 | 2 << 3);
        assert_eq!(g.len(), f.len());
        let diff: Vec<usize> = (0..f.len()).filter(|&i| f[i] != g[i]).collect();
        assert_eq!(diff, vec![14, 23]);
    }

    #[test]
    fn each_fault_has_its_reason() {
        let f = frame(16);
        let with = |i: usize, v: u8| {
            let mut g = f.clone();
            g[i] = v;
            g
        };
        assert_eq!(parse(&[0; 10], 2, 16), Err(Invalid::Ethertype));
        assert_eq!(parse(&with(12, 0x08), 2, 16), Err(Invalid::Ethertype));
        assert_eq!(parse(&with(14, 0x21), 2, 16), Err(Invalid::Version));
        assert_eq!(parse(&with(14, 0x12), 2, 16), Err(Invalid::Kind));
        assert_eq!(parse(&f[..20], 2, 16), Err(Invalid::Header));
        assert_eq!(parse(&with(23, 7 << 5), 2, 16), Err(Invalid::Header));
        assert_eq!(parse(&f, 3, 16), Err(Invalid::App));
        assert_eq!(parse(&f, 2, 12), Err(Invalid::Length));
        assert_eq!(parse(&f[..40], 2, 16), Err(Invalid::Length));
        assert_eq!(parse(&with(21, 200), 2, 16), Err(Invalid::ParsedLen));
        assert_eq!(original_l3(&with(12, 0x08)), None);
        assert_eq!(original_l3(&f[..40]), None);
    }
}
