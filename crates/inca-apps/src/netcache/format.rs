//! The two request headers the cache speaks, behind one metadata type
//! ([`CacheMeta`]) so the cache logic is written once:
//!
//! - [`Format::Kv`] — the KV header of [`crate::kvstore`] (UDP 7777; op,
//!   status, id, u64 key, 16-byte value).
//! - [`Format::Exo`] — ExoPlane's NetCache header
//!   ([`inca_wire::exoplane::netcache`], UDP 50000 at both ends; op, seq,
//!   128-bit key, value up to 128 bytes, no status). The value field runs
//!   to the end of the datagram, so the whole datagram must be inside the
//!   parse window.
//!
//! Op codes are the KV header's in both (the ExoPlane header's are the
//! same numbers [our choice]).

use inca_switch::{ParseError, PortId};
use inca_wire::exoplane::netcache::{self as exo, NetCacheHeader};

use crate::core::kv;
use crate::headers::{parse, PROTO_UDP};
use crate::kvstore::{self, parse_kv, KV_PORT, OP_ACK, OP_READ, OP_REPLY, OP_UPDATE};

/// Most key bytes (ExoPlane's 128-bit keys).
pub const MAX_KEY: usize = exo::KEY_LEN;
/// Most value words (ExoPlane's 128-byte values: 8 × 16 B).
pub const MAX_WORDS: usize = exo::MAX_VALUE / 4;

/// Which header the cache speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// [`crate::kvstore`]'s: u64 keys, 16-byte values, UDP 7777.
    Kv,
    /// ExoPlane's NetCache header: 128-bit keys, values up to 128 bytes,
    /// UDP 50000.
    Exo,
}

/// A packet's metadata: the shared parse and the cache header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheMeta {
    /// Ethernet, IPv4 and ports.
    pub p: crate::headers::Parsed,
    /// Offset of the cache header in the frame (0: not a cache packet).
    pub at: u16,
    /// The op (the KV header's codes).
    pub op: u8,
    /// The answer succeeded (KV status OK; always in the ExoPlane header).
    pub ok: bool,
    /// The key, in its first [`Format::key_len`] bytes.
    pub key: [u8; MAX_KEY],
    /// The value words carried (big-endian words of the value field).
    pub value: [u32; MAX_WORDS],
    /// Bytes of the value field.
    pub value_len: u8,
}

impl Default for CacheMeta {
    fn default() -> Self {
        CacheMeta {
            p: Default::default(),
            at: 0,
            op: 0,
            ok: false,
            key: [0; MAX_KEY],
            value: [0; MAX_WORDS],
            value_len: 0,
        }
    }
}

impl CacheMeta {
    /// True if the packet carries a cache header.
    pub fn is_cache(&self) -> bool {
        self.at != 0
    }
}

impl Format {
    /// The protocol's UDP port.
    pub fn port(self) -> u16 {
        match self {
            Format::Kv => KV_PORT,
            Format::Exo => exo::PORT,
        }
    }

    /// Key bytes.
    pub fn key_len(self) -> usize {
        match self {
            Format::Kv => 8,
            Format::Exo => exo::KEY_LEN,
        }
    }

    /// Offset of the value field within the header.
    fn value_at(self) -> usize {
        match self {
            Format::Kv => 12,
            Format::Exo => exo::HEADER_LEN,
        }
    }

    /// Parses Ethernet/IPv4/UDP and, for UDP to the protocol's port (and,
    /// with `replies`, from it), the cache header. Other packets parse with
    /// `at == 0`; a cache datagram cut by the window, with an unknown op or
    /// (ExoPlane) a value over 128 bytes is an error.
    pub fn parse(self, header: &[u8], replies: bool) -> Result<CacheMeta, ParseError> {
        match self {
            Format::Kv => {
                let k = parse_kv(header, replies)?;
                let mut m = CacheMeta {
                    p: k.p,
                    at: k.kv,
                    op: k.op,
                    ok: k.status == kvstore::STATUS_OK,
                    value_len: 16,
                    ..CacheMeta::default()
                };
                m.key[..8].copy_from_slice(&k.key.to_be_bytes());
                m.value[..k.value.len()].copy_from_slice(&k.value);
                Ok(m)
            }
            Format::Exo => {
                let p = parse(header)?;
                let mut m = CacheMeta {
                    p,
                    ..CacheMeta::default()
                };
                let is_cache = p.has_ports
                    && p.proto == PROTO_UDP
                    && (p.dport == exo::PORT || (replies && p.sport == exo::PORT));
                if !is_cache {
                    return Ok(m);
                }
                let l4 = usize::from(p.l4);
                let udp_len = header
                    .get(l4 + 4..l4 + 6)
                    .map(|b| usize::from(u16::from_be_bytes([b[0], b[1]])))
                    .ok_or(ParseError("NetCache datagram cut short"))?;
                let payload = udp_len
                    .checked_sub(8)
                    .and_then(|n| header.get(l4 + 8..l4 + 8 + n))
                    .ok_or(ParseError("NetCache datagram cut short"))?;
                let h = NetCacheHeader::new_checked(payload)
                    .map_err(|_| ParseError("malformed NetCache header"))?;
                m.at = (l4 + 8) as u16; // within the parse window
                m.op = h.op() as u8;
                m.ok = true;
                m.key = h.key();
                let v = h.value();
                m.value_len = v.len() as u8;
                for (w, c) in m.value.iter_mut().zip(v.chunks_exact(4)) {
                    *w = u32::from_be_bytes([c[0], c[1], c[2], c[3]]);
                }
                Ok(m)
            }
        }
    }

    /// Turns request `m` in header window `h` around to its sender as
    /// answer `op` (REPLY or ACK, OK) carrying `value`: MACs, addresses and
    /// ports swapped, the fields written with an incremental UDP checksum
    /// update ([`kv::answer`]).
    pub fn answer(self, h: &mut [u8], m: &CacheMeta, op: u8, value: &[u32]) {
        let (l3, l4, at) = (usize::from(m.p.l3), usize::from(m.p.l4), usize::from(m.at));
        let mut v = [0u8; 4 * MAX_WORDS];
        for (i, w) in value.iter().enumerate().take(MAX_WORDS) {
            v[4 * i..4 * i + 4].copy_from_slice(&w.to_be_bytes());
        }
        let v = &v[..4 * value.len().min(MAX_WORDS)];
        let end = at + self.value_at() + v.len();
        if h.len() < end || l3 < 12 {
            return; // cannot happen for a parsed request of the cache's width
        }
        for i in 0..6 {
            h.swap(i, 6 + i);
        }
        let status = [op, kvstore::STATUS_OK];
        let head: &[u8] = match self {
            Format::Kv => &status,
            Format::Exo => &status[..1],
        };
        kv::answer(h, l3, l4, &[(at, head), (at + self.value_at(), v)]);
    }

    /// Frames for the load-time check: a read, a write, a reply and an ack
    /// for keys 1-3 with `words`-word values, on each of `ports`.
    pub fn samples(self, ports: &[PortId], words: usize) -> Vec<(PortId, Vec<u8>)> {
        if self == Format::Kv {
            return kvstore::check_samples(ports);
        }
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
            for key in 1..=3u8 {
                for op in exo::Op::ALL {
                    let r = exo::NetCacheRepr {
                        op,
                        seq: u32::from(key),
                        key: [key; exo::KEY_LEN],
                        value: vec![key; 4 * words.min(MAX_WORDS)],
                    };
                    let frame = r
                        .to_bytes()
                        .ok()
                        .and_then(|b| build_udp_frame(&ep, exo::PORT, exo::PORT, &b, true).ok());
                    out.extend(frame.map(|f| (port, f)));
                }
            }
        }
        out
    }
}

/// Whether `op` is a client request (READ or UPDATE/WRITE).
pub fn is_request(op: u8) -> bool {
    op == OP_READ || op == OP_UPDATE
}

/// Whether `op` is an answer (REPLY or ACK).
pub fn is_answer(op: u8) -> bool {
    op == OP_REPLY || op == OP_ACK
}
