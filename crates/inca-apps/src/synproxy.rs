//! SYN proxy: the switch-based SYN-flood defence, with SYN cookies and
//! per-flow sequence-number translation.
//!
//! Clients are on `outside_port`, the protected servers behind
//! `server_port`; the proxy is a bump in the wire (anything that is not TCP
//! over IPv4 passes straight across). A connection goes like this:
//!
//! 1. **Client SYN** (seq x). The switch answers it itself, keeping no
//!    state: the SYN becomes a SYN-ACK back to the client (addresses and
//!    ports swapped, seq = *cookie*, ack = x + 1, options rewritten to one
//!    MSS 1460 option padded with NOPs). The cookie is a CRC-32 of the
//!    5-tuple and a secret, from a hash unit. A SYN carrying data is dropped
//!    (a switch cannot strip the payload).
//! 2. **Client ACK** (seq x + 1, ack = cookie + 1, no data). The flow is
//!    validated: the flow's slot in `syn_flow` (indexed by a hash of the
//!    5-tuple, holding a 29-bit signature from another hash unit and state
//!    bits) is claimed, and the ACK itself becomes the SYN to the server
//!    (seq x, ack 0, flags SYN). An ACK with the wrong ack number, or for a
//!    slot held by another live flow, is dropped and creates nothing; so a
//!    SYN flood (many SYNs, no ACKs) creates no per-flow state at all.
//! 3. **Server SYN-ACK** (seq y, ack x + 1). The slot is marked established
//!    and the offset `cookie − y` is written to `syn_offset`; the SYN-ACK
//!    becomes the ACK that completes the server's handshake (seq x + 1,
//!    ack y + 1, options replaced by NOPs), sent back to the server.
//! 4. **Every later packet** of an established flow is translated: from the
//!    client, ack −= offset; from the server, seq += offset. Both with
//!    incremental TCP checksum updates (RFC 1624).
//!
//! # One pass per packet, one access per object
//!
//! Every packet makes one ingress pass and touches each object at most once:
//! the three hash units (index, signature, cookie) feed `syn_flow`, a 32-bit
//! register whose single register action checks the signature and, under a
//! predicate computed before it (the cookie check), claims the slot, sets
//! the established or FIN bits, or clears it on RST, returning the old value;
//! `syn_offset` (after `syn_flow`) is then read (data) or written (server
//! SYN-ACK) once; `syn_events` counts the packet's outcome once. No
//! recirculation or control-plane help is needed.
//!
//! # Simplifications (documented, deliberate)
//!
//! - The cookie does not encode a time slot or the MSS; the secret is a
//!   constant (`secret` parameter). CRC-32 is linear, so the secret is weak
//!   against an attacker who can observe many cookies.
//! - No window scaling, SACK or timestamps are negotiated with the client
//!   (the SYN-ACK offers only MSS); the SYN sent to the server carries the
//!   options of the client's ACK. SACK blocks are not translated.
//! - Data the client sends after its ACK but before the server's SYN-ACK
//!   has reached the switch is dropped (the client retransmits it).
//! - A slot is freed by an RST from either side, or reused by a newly
//!   validated flow once both sides have sent FIN. There is no aging: a
//!   validated flow whose server never answers holds its slot. A validated
//!   flow whose slot is held by another live flow is refused (dropped).
//! - Window and TTL fields of the packets the switch turns around are kept.
//!
//! Parameters: `flows` (register entries, default 65,536), `outside_port`
//! (default 0), `server_port` (default 1), `secret` (default 0x5EC2E7A1).

use inca_switch::hash::HashAlgorithm;
use inca_switch::objects::Handle;
use inca_switch::{
    AccessError, ArrayDecl, DataPlane, Declare, DeclareError, Gress, PacketCtx, ParseError, PortId,
    Program, RegisterHandle,
};
use inca_wire::checksum;

use crate::headers::{parse, Parsed, PROTO_TCP};
use crate::params::{ParamError, Params};

/// TCP flag bits.
const FIN: u8 = 0x01;
const SYN: u8 = 0x02;
const RST: u8 = 0x04;
const ACK: u8 = 0x10;

/// `syn_flow` entry bits: the server's SYN-ACK has been seen.
pub const ESTABLISHED: u32 = 1 << 31;
/// `syn_flow` entry bits: the client has sent FIN.
pub const FIN_CLIENT: u32 = 1 << 30;
/// `syn_flow` entry bits: the server has sent FIN.
pub const FIN_SERVER: u32 = 1 << 29;
/// `syn_flow` entry bits: the flow's signature (never 0 in a used slot).
pub const SIG_MASK: u32 = (1 << 29) - 1;

/// `syn_events` indices: SYN-ACKs with a cookie sent to clients.
pub const EV_COOKIE_SENT: u64 = 0;
/// Client ACKs validated (a SYN went to the server).
pub const EV_VALIDATED: u64 = 1;
/// Server SYN-ACKs answered (flow established).
pub const EV_ESTABLISHED: u64 = 2;
/// Packets translated from client to server.
pub const EV_TO_SERVER: u64 = 3;
/// Packets translated from server to client.
pub const EV_TO_CLIENT: u64 = 4;
/// TCP packets dropped (no state, wrong cookie, slot taken, pending flow).
pub const EV_DROPPED: u64 = 5;
/// Non-TCP packets passed across.
pub const EV_PASSED: u64 = 6;
/// Number of `syn_events` entries.
pub const EVENTS: usize = 7;

/// What the parser extracts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SynMeta {
    /// Ethernet, IPv4, ports and flags.
    pub p: Parsed,
    /// TCP header length (valid when `p.proto` is TCP and `p.has_ports`).
    pub tcp_len: u8,
    /// TCP payload length, from the IPv4 total length.
    pub payload_len: u16,
    /// Sequence number.
    pub seq: u32,
    /// Acknowledgement number.
    pub ack: u32,
}

/// Parses Ethernet, IPv4 and the whole TCP header from the header window.
/// A TCP header whose data offset is below 5, whose options are cut short,
/// or which claims more than the IPv4 total length is an error.
pub fn parse_syn(header: &[u8]) -> Result<SynMeta, ParseError> {
    let p = parse(header)?;
    let mut m = SynMeta {
        p,
        ..SynMeta::default()
    };
    if !(p.has_ports && p.proto == PROTO_TCP) {
        return Ok(m);
    }
    let (l3, l4) = (usize::from(p.l3), usize::from(p.l4));
    let bad = ParseError("malformed TCP header");
    let fixed = header.get(l4..l4 + 20).ok_or(bad)?;
    let tcp_len = usize::from(fixed[12] >> 4) * 4;
    if tcp_len < 20 || header.get(l4..l4 + tcp_len).is_none() {
        return Err(bad);
    }
    let ip = header.get(l3..l4).ok_or(bad)?;
    let total = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
    let payload = total.checked_sub(l4 - l3 + tcp_len).ok_or(bad)?;
    m.tcp_len = tcp_len as u8;
    m.payload_len = payload as u16; // below the 16-bit total length
    m.seq = u32::from_be_bytes([fixed[4], fixed[5], fixed[6], fixed[7]]);
    m.ack = u32::from_be_bytes([fixed[8], fixed[9], fixed[10], fixed[11]]);
    Ok(m)
}

/// The result of the `syn_flow` register action.
enum Slot {
    /// The flow's own entry, as it was before this packet.
    Existing(u32),
    /// Claimed for this flow now.
    Claimed,
    /// Neither.
    Miss,
}

/// The SYN proxy program. See the module documentation.
#[derive(Debug, Clone)]
pub struct SynProxy {
    flows: usize,
    outside_port: PortId,
    server_port: PortId,
    secret: u32,
    index: Option<Handle>,
    signature: Option<Handle>,
    cookie: Option<Handle>,
    flow: Option<RegisterHandle<u32>>,
    offset: Option<RegisterHandle<u32>>,
    events: Option<Handle>,
}

impl SynProxy {
    /// Parameter names.
    pub const PARAMS: &'static [&'static str] = &["flows", "outside_port", "server_port", "secret"];

    /// A proxy with `flows` flow slots, clients on `outside_port`, servers
    /// behind `server_port`, cookies keyed by `secret`.
    pub fn new(flows: usize, outside_port: PortId, server_port: PortId, secret: u32) -> Self {
        SynProxy {
            flows,
            outside_port,
            server_port,
            secret,
            index: None,
            signature: None,
            cookie: None,
            flow: None,
            offset: None,
            events: None,
        }
    }

    /// A proxy sized from parameters.
    pub fn from_params(p: &Params) -> Result<Self, ParamError> {
        p.check_known("synproxy", Self::PARAMS)?;
        Ok(SynProxy::new(
            p.count("flows", 65_536, 1 << 32)? as usize,
            p.number("outside_port", 0, 0, 511)? as PortId,
            p.number("server_port", 1, 0, 511)? as PortId,
            p.number("secret", 0x5EC2_E7A1, 0, u64::from(u32::MAX))? as u32,
        ))
    }

    /// The flow-state register (for tests and reports).
    pub fn flow_register(&self) -> Option<RegisterHandle<u32>> {
        self.flow
    }

    /// The offset register.
    pub fn offset_register(&self) -> Option<RegisterHandle<u32>> {
        self.offset
    }

    /// The outcome counters (indices `EV_*`).
    pub fn events(&self) -> Option<Handle> {
        self.events
    }

    /// Number of flow slots.
    pub fn flows(&self) -> usize {
        self.flows
    }
}

/// A TCP header being rewritten, with its checksum kept up to date.
struct Rewrite<'a> {
    h: &'a mut [u8],
    l4: usize,
    sum: u16,
}

impl<'a> Rewrite<'a> {
    fn new(h: &'a mut [u8], l4: usize) -> Self {
        let sum = u16::from_be_bytes([h[l4 + 16], h[l4 + 17]]);
        Rewrite { h, l4, sum }
    }

    fn put16(&mut self, off: usize, v: u16) {
        let o = self.l4 + off;
        let old = u16::from_be_bytes([self.h[o], self.h[o + 1]]);
        self.h[o..o + 2].copy_from_slice(&v.to_be_bytes());
        self.sum = checksum::update_u16(self.sum, old, v);
    }

    fn put32(&mut self, off: usize, v: u32) {
        self.put16(off, (v >> 16) as u16);
        self.put16(off + 2, v as u16);
    }

    /// Sets the flags byte (offset 13; the word at 12 holds the data offset).
    fn flags(&mut self, flags: u8) {
        let hi = self.h[self.l4 + 12];
        self.put16(12, u16::from_be_bytes([hi, flags]));
    }

    /// Rewrites the options (`len` bytes after the fixed header): an MSS
    /// option if asked and there is room, then NOPs.
    fn options(&mut self, len: usize, mss: Option<u16>) {
        let mut opts = [1u8; 40];
        if let (Some(mss), true) = (mss, len >= 4) {
            opts[..4].copy_from_slice(&[2, 4, (mss >> 8) as u8, mss as u8]);
        }
        for w in (0..len.min(40)).step_by(2) {
            self.put16(20 + w, u16::from_be_bytes([opts[w], opts[w + 1]]));
        }
    }

    fn finish(self) {
        let o = self.l4 + 16;
        self.h[o..o + 2].copy_from_slice(&self.sum.to_be_bytes());
    }
}

/// Swaps MACs, IPv4 addresses and TCP ports: the packet turns around. Both
/// checksums are unchanged (the sums are commutative).
fn turn_around(h: &mut [u8], l3: usize, l4: usize) {
    for i in 0..6 {
        h.swap(i, 6 + i);
    }
    for i in 0..4 {
        h.swap(l3 + 12 + i, l3 + 16 + i);
    }
    for i in 0..2 {
        h.swap(l4 + i, l4 + 2 + i);
    }
}

/// The client-to-server 5-tuple of a packet from the server side.
fn reversed(p: &Parsed) -> [u8; 13] {
    Parsed {
        src: p.dst,
        dst: p.src,
        sport: p.dport,
        dport: p.sport,
        ..*p
    }
    .five_tuple()
}

impl Program for SynProxy {
    type Meta = SynMeta;
    type Digest = ();

    fn name(&self) -> &str {
        "synproxy"
    }

    fn declare(&mut self, d: &mut Declare) -> Result<(), DeclareError> {
        let is_tcp = d.gateway("is_tcp", Gress::Ingress, &[])?;
        let deps = [is_tcp.id()];
        let index = d.hash(
            "flow_index",
            HashAlgorithm::Crc32,
            32,
            Gress::Ingress,
            &deps,
        )?;
        let sig = d.hash("flow_sig", HashAlgorithm::Crc64, 32, Gress::Ingress, &deps)?;
        let cookie = d.hash("cookie", HashAlgorithm::Crc32, 32, Gress::Ingress, &deps)?;
        // The cookie check (ack − 1 == cookie) is a gateway feeding the
        // register action's predicate.
        let cookie_ok = d.gateway("cookie_ok", Gress::Ingress, &[cookie.id()])?;
        let flow = d.register::<u32>(ArrayDecl::new("syn_flow", self.flows).after(&[
            index.id(),
            sig.id(),
            cookie_ok.id(),
        ]))?;
        let offset =
            d.register::<u32>(ArrayDecl::new("syn_offset", self.flows).after(&[flow.id()]))?;
        let events = d.counter(ArrayDecl::new("syn_events", EVENTS).after(&[offset.id()]))?;
        self.index = Some(index);
        self.signature = Some(sig);
        self.cookie = Some(cookie);
        self.flow = Some(flow);
        self.offset = Some(offset);
        self.events = Some(events);
        Ok(())
    }

    fn parse(&self, gress: Gress, header: &[u8], meta: &mut SynMeta) -> Result<(), ParseError> {
        if gress == Gress::Ingress {
            *meta = parse_syn(header)?;
        }
        Ok(())
    }

    fn ingress(
        &mut self,
        pkt: &mut PacketCtx<SynMeta, ()>,
        dp: &mut DataPlane<'_>,
    ) -> Result<(), AccessError> {
        let (Some(index), Some(sig_unit), Some(cookie_unit)) =
            (self.index, self.signature, self.cookie)
        else {
            return Ok(());
        };
        let (Some(flow), Some(offset), Some(events)) = (self.flow, self.offset, self.events) else {
            return Ok(());
        };
        let m = pkt.meta;
        let p = m.p;
        let bytes = pkt.len() as u64;
        let from_outside = pkt.ingress_port() == self.outside_port;
        let across = if from_outside {
            self.server_port
        } else {
            self.outside_port
        };
        if !(p.ipv4 && p.proto == PROTO_TCP) {
            // Not TCP over IPv4: a bump in the wire passes it across.
            dp.count(events, EV_PASSED, bytes)?;
            pkt.forward(across);
            return Ok(());
        }
        if !p.has_ports {
            // A later fragment, or a TCP header cut short: dropped.
            return dp.count(events, EV_DROPPED, bytes);
        }
        let (l3, l4) = (usize::from(p.l3), usize::from(p.l4));
        let options_len = usize::from(m.tcp_len) - 20;
        let flags = p.tcp_flags;
        let tuple = if from_outside {
            p.five_tuple()
        } else {
            reversed(&p)
        };
        let mut salted = [0u8; 17];
        salted[..13].copy_from_slice(&tuple);
        salted[13..].copy_from_slice(&self.secret.to_be_bytes());
        let cookie = dp.hash(cookie_unit, &salted)? as u32;
        let idx = dp.hash(index, &tuple)? % self.flows.max(1) as u64;
        let sig = (dp.hash(sig_unit, &tuple)? as u32 & SIG_MASK).max(1);
        let control = flags & (SYN | RST | FIN | ACK);

        if from_outside && control == SYN {
            // 1. Answer with a cookie; no state.
            if m.payload_len != 0 {
                return dp.count(events, EV_DROPPED, bytes);
            }
            let h = pkt.header_mut();
            turn_around(h, l3, l4);
            let mut t = Rewrite::new(h, l4);
            t.put32(4, cookie);
            t.put32(8, m.seq.wrapping_add(1));
            t.flags(SYN | ACK);
            t.put16(18, 0);
            t.options(options_len, Some(1460));
            t.finish();
            pkt.forward(self.outside_port);
            return dp.count(events, EV_COOKIE_SENT, bytes);
        }
        if from_outside && flags & SYN != 0 {
            return dp.count(events, EV_DROPPED, bytes); // SYN with other flags
        }
        if from_outside {
            let cookie_ok = control == ACK && m.ack == cookie.wrapping_add(1) && m.payload_len == 0;
            let slot = dp.register(flow, idx, |v| {
                let stored = *v;
                let closed = stored & (FIN_CLIENT | FIN_SERVER) == FIN_CLIENT | FIN_SERVER;
                if cookie_ok && (stored == 0 || closed) {
                    // A free slot, or one whose flow has closed (even this
                    // 5-tuple's previous connection: after the server's
                    // FIN a client of that connection acks beyond
                    // cookie + 1, so a valid cookie ACK is a new one).
                    *v = sig;
                    Slot::Claimed
                } else if stored != 0 && stored & SIG_MASK == sig {
                    if flags & RST != 0 {
                        *v = 0;
                    } else if flags & FIN != 0 {
                        *v |= FIN_CLIENT;
                    }
                    Slot::Existing(stored)
                } else {
                    Slot::Miss
                }
            })?;
            return match slot {
                Slot::Claimed => {
                    // 2. Validated: this ACK becomes the SYN to the server.
                    let mut t = Rewrite::new(pkt.header_mut(), l4);
                    t.put32(4, m.seq.wrapping_sub(1));
                    t.put32(8, 0);
                    t.flags(SYN);
                    t.finish();
                    pkt.forward(self.server_port);
                    dp.count(events, EV_VALIDATED, bytes)
                }
                Slot::Existing(s) if s & ESTABLISHED != 0 => {
                    // 4. Translate the client's ack into the server's space.
                    let off = dp.register(offset, idx, |o| *o)?;
                    if flags & ACK != 0 {
                        let mut t = Rewrite::new(pkt.header_mut(), l4);
                        t.put32(8, m.ack.wrapping_sub(off));
                        t.finish();
                    }
                    pkt.forward(self.server_port);
                    dp.count(events, EV_TO_SERVER, bytes)
                }
                // Pending (the server has not answered yet), or nothing.
                Slot::Existing(_) | Slot::Miss => dp.count(events, EV_DROPPED, bytes),
            };
        }

        // From the server side.
        if control == SYN | ACK {
            let slot = dp.register(flow, idx, |v| {
                let stored = *v;
                if stored != 0 && stored & SIG_MASK == sig {
                    *v |= ESTABLISHED;
                    Slot::Existing(stored)
                } else {
                    Slot::Miss
                }
            })?;
            let Slot::Existing(s) = slot else {
                return dp.count(events, EV_DROPPED, bytes);
            };
            if s & ESTABLISHED == 0 {
                let off = cookie.wrapping_sub(m.seq);
                dp.register(offset, idx, |o| *o = off)?;
            }
            // 3. Complete the server's handshake: the SYN-ACK becomes our ACK.
            let h = pkt.header_mut();
            turn_around(h, l3, l4);
            let mut t = Rewrite::new(h, l4);
            t.put32(4, m.ack);
            t.put32(8, m.seq.wrapping_add(1));
            t.flags(ACK);
            t.put16(18, 0);
            t.options(options_len, None);
            t.finish();
            pkt.forward(pkt.ingress_port());
            return dp.count(events, EV_ESTABLISHED, bytes);
        }
        if flags & SYN != 0 {
            // Connections are accepted from the outside only.
            return dp.count(events, EV_DROPPED, bytes);
        }
        let slot = dp.register(flow, idx, |v| {
            let stored = *v;
            if stored != 0 && stored & SIG_MASK == sig && stored & ESTABLISHED != 0 {
                if flags & RST != 0 {
                    *v = 0;
                } else if flags & FIN != 0 {
                    *v |= FIN_SERVER;
                }
                Slot::Existing(stored)
            } else {
                Slot::Miss
            }
        })?;
        if let Slot::Existing(_) = slot {
            // 4. Translate the server's seq into the client's space.
            let off = dp.register(offset, idx, |o| *o)?;
            let mut t = Rewrite::new(pkt.header_mut(), l4);
            t.put32(4, m.seq.wrapping_add(off));
            t.finish();
            pkt.forward(self.outside_port);
            dp.count(events, EV_TO_CLIENT, bytes)
        } else {
            dp.count(events, EV_DROPPED, bytes)
        }
    }
}
