//! EPC serving gateway: per-user GTP-U tunnels, set up by signalling.
//!
//! Each user (a UE, by its IP address) has one bearer: a tunnel endpoint id
//! (TEID) and the address of the base station (eNB) serving it. The gateway
//! sits between the core (`core_port`, toward the packet data network) and
//! the access network (`access_port`, toward the eNBs).
//!
//! - **Signalling** (standing in for GTP-C): a UDP packet to port
//!   [`SIGNAL_PORT`] (2123), from any port, carrying a [`Signal`]. The data
//!   plane punts it to the control plane, which installs, modifies or
//!   deletes the user's entries (after the control-plane latency) and
//!   consumes the packet. On a CPU data path (`server` profile,
//!   `dp.can_write_tables()`) the data path applies it inline with
//!   `dp.table_insert` / `dp.table_delete` instead.
//! - **Downlink** (any IPv4 packet arriving elsewhere than `access_port`,
//!   other than signalling): `epc_downlink` is looked up with the destination
//!   address. A hit encapsulates the IP packet in GTP-U toward the eNB: 36
//!   bytes are inserted after the Ethernet header (outer IPv4 from `local`
//!   to the eNB, TTL 64, DF, checksum computed by the deparser; UDP 2152 →
//!   2152 with checksum 0; GTP-U flags 0x30, message type 0xFF (G-PDU),
//!   length = the inner packet's IPv4 total length, the TEID) and the packet
//!   goes to the entry's port. A miss (unknown user) is dropped.
//! - **Uplink** (UDP to port 2152 arriving on `access_port`): the GTP-U
//!   header is checked (version 1, PT set, G-PDU), `epc_uplink` is looked up
//!   with the TEID, and the packet is accepted only if the TEID is known and
//!   the inner source address is the user's (no spoofing through another
//!   user's tunnel). The outer IPv4, UDP and GTP-U headers are removed and
//!   the inner packet goes to `core_port`. Anything else from the access
//!   side is dropped. GTP-U headers with the optional sequence/N-PDU fields
//!   (12 bytes) are accepted; a chain of extension headers is not (dropped).
//!
//! MAC addresses are left as they are (next-hop MAC rewriting is L2/L3
//! forwarding's job, [`crate::l2l3`]).
//!
//! # The signalling message (UDP payload, 16 bytes)
//!
//! | offset | bytes | field |
//! |---|---|---|
//! | 0 | 1 | version, 1 |
//! | 1 | 1 | type: 1 = create or modify the user's bearer, 2 = delete it |
//! | 2 | 2 | reserved, 0 |
//! | 4 | 4 | user (UE) IPv4 address |
//! | 8 | 4 | TEID (used in both directions) |
//! | 12 | 4 | eNB IPv4 address |
//!
//! # GTP-U encapsulation (downlink, untagged frame)
//!
//! | offset | bytes | field |
//! |---|---|---|
//! | 0 | 14 | Ethernet (unchanged) |
//! | 14 | 20 | outer IPv4: 0x45, TOS 0, total length, id 0, DF, TTL 64, protocol 17, checksum, `local`, eNB |
//! | 34 | 8 | UDP: 2152, 2152, length, checksum 0 |
//! | 42 | 8 | GTP-U: flags 0x30, type 0xFF, length (2), TEID (4) |
//! | 50 | … | the original IPv4 packet |
//!
//! Parameters: `flows` (users; entries in each table, default 65,536),
//! `core_port` (default 0), `access_port` (default 1), `local` (the
//! gateway's S1-U address, default 192.0.2.2).
//!
//! The GTP-U encapsulation is [`crate::core::epc`]'s; this program keeps the
//! bearers in its two tables.

use std::collections::BTreeMap;

use inca_switch::{
    AccessError, ControlEvent, ControlPlane, DataPlane, Declare, DeclareError, Gress, MatchKind,
    MatchSpec, PacketCtx, ParseError, PortId, Program, TableDecl, TableHandle,
};
use inca_wire::Ipv4Packet;

use crate::core::epc::Encap;
use crate::headers::{parse, Parsed, PROTO_UDP};
use crate::params::{ParamError, Params};

/// UDP port of the signalling messages (the GTP-C port).
pub const SIGNAL_PORT: u16 = crate::core::epc::GTPC_PORT;
pub use crate::core::epc::{ENCAP_LEN, GTPU_FLAGS, GTPU_GPDU, GTPU_PORT};
/// Reason code of a punted signalling packet.
pub const REASON_SIGNAL: u16 = 1;
/// Length of a signalling message.
pub const SIGNAL_LEN: usize = 16;

/// A signalling message. See the module documentation for its bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Signal {
    /// Create/modify (true) or delete (false).
    pub create: bool,
    /// The user's address.
    pub user: [u8; 4],
    /// The tunnel endpoint id.
    pub teid: u32,
    /// The eNB serving the user.
    pub enb: [u8; 4],
}

impl Signal {
    /// The 16-byte message.
    pub fn encode(&self) -> [u8; SIGNAL_LEN] {
        let mut b = [0u8; SIGNAL_LEN];
        b[0] = 1;
        b[1] = if self.create { 1 } else { 2 };
        b[4..8].copy_from_slice(&self.user);
        b[8..12].copy_from_slice(&self.teid.to_be_bytes());
        b[12..16].copy_from_slice(&self.enb);
        b
    }

    /// Decodes a message (the first 16 bytes of `b`); None if short or of
    /// an unknown version or type.
    pub fn decode(b: &[u8]) -> Option<Signal> {
        let b = b.get(..SIGNAL_LEN)?;
        let create = match (b[0], b[1]) {
            (1, 1) => true,
            (1, 2) => false,
            _ => return None,
        };
        Some(Signal {
            create,
            user: [b[4], b[5], b[6], b[7]],
            teid: u32::from_be_bytes([b[8], b[9], b[10], b[11]]),
            enb: [b[12], b[13], b[14], b[15]],
        })
    }
}

/// A user's downlink entry: where to tunnel its packets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bearer {
    /// The TEID to write.
    pub teid: u32,
    /// The eNB (outer destination).
    pub enb: [u8; 4],
    /// Egress port.
    pub port: PortId,
}

/// An uplink entry: whose tunnel a TEID is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Uplink {
    /// The user's address (the only inner source accepted).
    pub user: [u8; 4],
    /// Egress port.
    pub port: PortId,
}

/// How the parser classified a packet.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Class {
    /// Not IPv4: dropped.
    #[default]
    Other,
    /// IPv4, neither signalling nor GTP-U.
    Ip,
    /// A signalling message (UDP to port 2123).
    Signal,
    /// A well-formed GTP-U G-PDU.
    GtpU,
    /// UDP to port 2152 that is not a G-PDU the gateway handles.
    BadGtpU,
}

/// What the parser extracts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EpcMeta {
    /// Outer headers.
    pub outer: Parsed,
    /// The classification.
    pub class: Class,
    /// IPv4 total length of the (outer) packet.
    pub ip_total: u16,
    /// GTP-U TEID.
    pub teid: u32,
    /// Bytes from the outer IPv4 header to the inner packet (GTP-U only).
    pub outer_len: u16,
    /// Inner source address (GTP-U only).
    pub inner_src: [u8; 4],
}

/// Parses Ethernet, IPv4, UDP and, for GTP-U, the GTP-U header and the
/// inner IPv4 source from the header window.
pub fn parse_epc(header: &[u8]) -> Result<EpcMeta, ParseError> {
    let outer = parse(header)?;
    let mut m = EpcMeta {
        outer,
        ..EpcMeta::default()
    };
    if !outer.ipv4 {
        return Ok(m);
    }
    let l3 = usize::from(outer.l3);
    // The IPv4 header is whole in the window (the parse checked it).
    m.ip_total = header
        .get(l3 + 2..l3 + 4)
        .map_or(0, |b| u16::from_be_bytes([b[0], b[1]]));
    m.class = Class::Ip;
    if !(outer.has_ports && outer.proto == PROTO_UDP) {
        return Ok(m);
    }
    if outer.dport == SIGNAL_PORT {
        m.class = Class::Signal;
        return Ok(m);
    }
    if outer.dport != GTPU_PORT {
        return Ok(m);
    }
    m.class = Class::BadGtpU;
    let g_off = usize::from(outer.l4) + 8;
    let g = header
        .get(g_off..g_off + 8)
        .ok_or(ParseError("GTP-U header beyond the window"))?;
    let flags = g[0];
    if flags & 0xF0 != GTPU_FLAGS || g[1] != GTPU_GPDU {
        return Ok(m); // another version, GTP', or a signalling message
    }
    let mut g_len = 8;
    if flags & 0x07 != 0 {
        let opt = header
            .get(g_off + 8..g_off + 12)
            .ok_or(ParseError("GTP-U options beyond the window"))?;
        if flags & 0x04 != 0 && opt[3] != 0 {
            return Ok(m); // extension headers: not handled
        }
        g_len = 12;
    }
    let inner = g_off + g_len;
    let ip = Ipv4Packet::new_checked_header(header.get(inner..).unwrap_or(&[]))
        .map_err(|_| ParseError("malformed inner IPv4 header"))?;
    m.class = Class::GtpU;
    m.teid = u32::from_be_bytes([g[4], g[5], g[6], g[7]]);
    m.outer_len = (inner - l3) as u16; // within the window
    m.inner_src = ip.src_addr().octets();
    Ok(m)
}

/// A change to the tables that one signalling message makes.
#[derive(Debug, Clone, Copy)]
enum Change {
    AddDown([u8; 4], Bearer),
    ModDown([u8; 4], Bearer),
    DelDown([u8; 4]),
    AddUp(u32, Uplink),
    DelUp(u32),
}

/// A user's session as the control plane remembers it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Session {
    teid: u32,
    enb: [u8; 4],
}

/// The serving gateway program. See the module documentation.
#[derive(Debug, Clone)]
pub struct ServingGateway {
    flows: usize,
    core_port: PortId,
    access_port: PortId,
    local: [u8; 4],
    downlink: Option<TableHandle<Bearer>>,
    uplink: Option<TableHandle<Uplink>>,
    /// Control-plane state: every user's session.
    sessions: BTreeMap<[u8; 4], Session>,
    /// Control-plane state: the user of every TEID in use.
    teids: BTreeMap<u32, [u8; 4]>,
    /// Signalling messages refused (malformed, table full, TEID taken by
    /// another user, delete of an unknown user).
    pub refused: u64,
    /// Signalling messages applied.
    pub signals: u64,
}

impl ServingGateway {
    /// Parameter names.
    pub const PARAMS: &'static [&'static str] = &["flows", "core_port", "access_port", "local"];

    /// A gateway for `flows` users between `core_port` and `access_port`,
    /// with S1-U address `local`.
    pub fn new(flows: usize, core_port: PortId, access_port: PortId, local: [u8; 4]) -> Self {
        ServingGateway {
            flows,
            core_port,
            access_port,
            local,
            downlink: None,
            uplink: None,
            sessions: BTreeMap::new(),
            teids: BTreeMap::new(),
            refused: 0,
            signals: 0,
        }
    }

    /// A gateway sized from parameters.
    pub fn from_params(p: &Params) -> Result<Self, ParamError> {
        p.check_known("epc", Self::PARAMS)?;
        Ok(ServingGateway::new(
            p.count("flows", 65_536, 1 << 32)? as usize,
            p.number("core_port", 0, 0, 511)? as PortId,
            p.number("access_port", 1, 0, 511)? as PortId,
            p.ipv4("local", [192, 0, 2, 2])?,
        ))
    }

    /// Number of users with a session.
    pub fn users(&self) -> usize {
        self.sessions.len()
    }

    /// The TEID of `user`'s session, as the control plane knows it.
    pub fn teid_of(&self, user: [u8; 4]) -> Option<u32> {
        self.sessions.get(&user).map(|s| s.teid)
    }

    /// What a signalling message changes, updating the control plane's own
    /// state; empty if refused.
    fn plan(&mut self, s: Signal) -> Vec<Change> {
        let (core, access) = (self.core_port, self.access_port);
        let bearer = Bearer {
            teid: s.teid,
            enb: s.enb,
            port: access,
        };
        let up = Uplink {
            user: s.user,
            port: core,
        };
        let old = self.sessions.get(&s.user).copied();
        let changes = match (s.create, old) {
            (false, None) => Vec::new(),
            (false, Some(o)) => {
                self.sessions.remove(&s.user);
                self.teids.remove(&o.teid);
                vec![Change::DelDown(s.user), Change::DelUp(o.teid)]
            }
            (true, _) if self.teids.get(&s.teid).is_some_and(|u| *u != s.user) => Vec::new(),
            (true, None) if self.sessions.len() >= self.flows => Vec::new(),
            (true, None) => vec![Change::AddDown(s.user, bearer), Change::AddUp(s.teid, up)],
            (true, Some(o)) if o.teid == s.teid => vec![Change::ModDown(s.user, bearer)],
            (true, Some(o)) => {
                self.teids.remove(&o.teid);
                vec![
                    Change::ModDown(s.user, bearer),
                    Change::DelUp(o.teid),
                    Change::AddUp(s.teid, up),
                ]
            }
        };
        if changes.is_empty() {
            self.refused += 1;
        } else {
            self.signals += 1;
            if s.create {
                self.sessions.insert(
                    s.user,
                    Session {
                        teid: s.teid,
                        enb: s.enb,
                    },
                );
                self.teids.insert(s.teid, s.user);
            }
        }
        changes
    }

    /// Applies changes through the control plane (with its latency).
    fn apply_cp(&self, changes: &[Change], cp: &mut ControlPlane<'_>) {
        let (Some(down), Some(up)) = (self.downlink, self.uplink) else {
            return;
        };
        for c in changes {
            match *c {
                Change::AddDown(u, b) => {
                    cp.table_add(down, exact(&u), b);
                }
                Change::ModDown(u, b) => {
                    cp.table_modify(down, exact(&u), b);
                }
                Change::DelDown(u) => {
                    cp.table_delete(down, exact(&u));
                }
                Change::AddUp(t, e) => {
                    cp.table_add(up, exact(&t.to_be_bytes()), e);
                }
                Change::DelUp(t) => {
                    cp.table_delete(up, exact(&t.to_be_bytes()));
                }
            }
        }
    }

    /// Applies changes from a CPU data path, at once.
    fn apply_dp(&mut self, changes: &[Change], dp: &mut DataPlane<'_>) -> Result<(), AccessError> {
        let (Some(down), Some(up)) = (self.downlink, self.uplink) else {
            return Ok(());
        };
        let mut failed = false;
        for c in changes {
            let r = match *c {
                Change::AddDown(u, b) => dp.table_insert(down, exact(&u), b)?,
                Change::ModDown(u, b) => {
                    // A software table: replace the entry.
                    let _ = dp.table_delete(down, &exact(&u))?;
                    dp.table_insert(down, exact(&u), b)?
                }
                Change::DelDown(u) => dp.table_delete(down, &exact(&u))?,
                Change::AddUp(t, e) => dp.table_insert(up, exact(&t.to_be_bytes()), e)?,
                Change::DelUp(t) => dp.table_delete(up, &exact(&t.to_be_bytes()))?,
            };
            failed |= r.is_err();
        }
        if failed {
            self.refused += 1;
        }
        Ok(())
    }

    /// The signalling message in a frame (the UDP payload).
    fn signal_of(frame: &[u8], p: &Parsed) -> Option<Signal> {
        Signal::decode(frame.get(usize::from(p.l4) + 8..)?)
    }
}

fn exact(k: &[u8]) -> MatchSpec {
    MatchSpec::Exact(k.to_vec().into())
}

/// The 36 bytes of outer IPv4 (with DF), UDP and GTP-U for an inner packet
/// of `inner_len` bytes.
fn gtpu_encap(local: [u8; 4], b: &Bearer, inner_len: u16) -> [u8; ENCAP_LEN] {
    Encap {
        src: local,
        enb: b.enb,
        teid: b.teid,
        dont_fragment: true,
    }
    .header(usize::from(inner_len))
}

impl Program for ServingGateway {
    type Meta = EpcMeta;
    type Digest = ();

    fn name(&self) -> &str {
        "epc"
    }

    fn declare(&mut self, d: &mut Declare) -> Result<(), DeclareError> {
        let class = d.gateway("classify", Gress::Ingress, &[])?;
        // Downlink action data: TEID (32) + eNB (32) + port (9); the action
        // fills the outer headers (addresses, lengths, TEID) and the port.
        let down = TableDecl::new("epc_downlink", MatchKind::Exact, 4, 73, self.flows)
            .after(&[class.id()])
            .vliw(6);
        // Uplink action data: user address (32) + port (9).
        let up = TableDecl::new("epc_uplink", MatchKind::Exact, 4, 41, self.flows)
            .after(&[class.id()])
            .vliw(2);
        self.downlink = Some(d.table(down)?);
        self.uplink = Some(d.table(up)?);
        Ok(())
    }

    fn parse(&self, gress: Gress, header: &[u8], meta: &mut EpcMeta) -> Result<(), ParseError> {
        if gress == Gress::Ingress {
            *meta = parse_epc(header)?;
        }
        Ok(())
    }

    fn ingress(
        &mut self,
        pkt: &mut PacketCtx<EpcMeta, ()>,
        dp: &mut DataPlane<'_>,
    ) -> Result<(), AccessError> {
        let (Some(down), Some(up)) = (self.downlink, self.uplink) else {
            return Ok(());
        };
        let m = pkt.meta;
        let from_access = pkt.ingress_port() == self.access_port;
        match m.class {
            Class::Other | Class::BadGtpU => {}
            Class::Signal if dp.can_write_tables() => {
                // A software gateway applies signalling inline and consumes it.
                if let Some(s) = Self::signal_of(pkt.header(), &m.outer) {
                    let changes = self.plan(s);
                    self.apply_dp(&changes, dp)?;
                } else {
                    self.refused += 1;
                }
            }
            Class::Signal => pkt.to_cpu(REASON_SIGNAL),
            Class::GtpU if from_access => {
                let Some(e) = dp.lookup(up, &m.teid.to_be_bytes())? else {
                    return Ok(()); // unknown TEID
                };
                if e.user != m.inner_src {
                    return Ok(()); // spoofed inner source
                }
                if pkt.remove_header(usize::from(m.outer.l3), usize::from(m.outer_len)) {
                    pkt.forward(e.port);
                }
            }
            Class::Ip | Class::GtpU if from_access => {}
            Class::Ip | Class::GtpU => {
                let Some(b) = dp.lookup(down, &m.outer.dst)? else {
                    return Ok(()); // unknown user
                };
                if usize::from(m.ip_total) + ENCAP_LEN > usize::from(u16::MAX) {
                    return Ok(());
                }
                let encap = gtpu_encap(self.local, &b, m.ip_total);
                if pkt.insert_header(usize::from(m.outer.l3), &encap) {
                    pkt.forward(b.port);
                }
            }
        }
        Ok(())
    }

    fn control(&mut self, event: ControlEvent<()>, cp: &mut ControlPlane<'_>) {
        let ControlEvent::PacketIn { reason, frame, .. } = event else {
            return;
        };
        if reason != REASON_SIGNAL {
            return;
        }
        let signal = parse(&frame).ok().and_then(|p| Self::signal_of(&frame, &p));
        match signal {
            Some(s) => {
                let changes = self.plan(s);
                self.apply_cp(&changes, cp);
            }
            None => self.refused += 1,
        }
    }
}
