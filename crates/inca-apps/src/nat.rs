//! Source NAT with an exact-match translation table per direction, for
//! TCP, UDP and ICMP echo (whose identifier plays the port, as in every
//! NAT, so ping works through it).
//!
//! Packets from inside (any port but `outside_port`) look up their 5-tuple in
//! `nat_out`; a hit rewrites the source address and port to the public ones
//! and sends the packet out. A miss is a new flow: the packet goes to the
//! control plane, which allocates a public address and port from the pool,
//! installs both directions (`nat_out`, and `nat_in` keyed by the reply's
//! 5-tuple), and re-injects the packet so the data plane translates it.
//! Packets from outside are translated back through `nat_in`; unsolicited
//! ones (misses) are dropped. Checksums are updated incrementally (RFC 1624),
//! as a switch must: it never sees the payload the L4 checksum covers.
//!
//! Parameters: `flows` (entries per direction, default 65,536),
//! `outside_port` (default 1), `public` (first public address, default
//! 198.51.100.1; each address carries 64,512 ports).

use std::collections::BTreeMap;

use inca_switch::{
    AccessError, ControlEvent, ControlPlane, DataPlane, Declare, DeclareError, Gress, MatchKind,
    MatchSpec, PacketCtx, PacketOutDest, ParseError, PortId, Program, TableDecl, TableHandle,
};

use crate::headers::{parse, parse_ingress_only, rewrite_end, End, Parsed};
use crate::params::{ParamError, Params};

/// Reason code of a punted new flow.
pub const REASON_NEW_FLOW: u16 = 1;
/// Public ports handed out per public address (1024..=65535).
pub const PORTS_PER_ADDRESS: u32 = 65_536 - 1024;

/// A translation: the address and port to write, and where to send the
/// packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Translate {
    /// New address (source on the way out, destination on the way in).
    pub ip: [u8; 4],
    /// New port.
    pub port: u16,
    /// Egress port.
    pub egress: PortId,
}

/// The NAT program. See the module documentation.
#[derive(Debug, Clone)]
pub struct Nat {
    flows: usize,
    outside_port: PortId,
    public_base: [u8; 4],
    nat_out: Option<TableHandle<Translate>>,
    nat_in: Option<TableHandle<Translate>>,
    /// Control-plane state: the public endpoint of every inside 5-tuple.
    allocated: BTreeMap<[u8; 13], ([u8; 4], u16)>,
    /// New flows refused because the pool or the table was full.
    pub refused: u64,
}

impl Nat {
    /// Parameter names.
    pub const PARAMS: &'static [&'static str] = &["flows", "outside_port", "public"];

    /// A NAT for `flows` flows per direction, translating to addresses from
    /// `public_base` upwards, with the outside on `outside_port`.
    pub fn new(flows: usize, outside_port: PortId, public_base: [u8; 4]) -> Self {
        Nat {
            flows,
            outside_port,
            public_base,
            nat_out: None,
            nat_in: None,
            allocated: BTreeMap::new(),
            refused: 0,
        }
    }

    /// A NAT sized from parameters.
    pub fn from_params(p: &Params) -> Result<Self, ParamError> {
        p.check_known("nat", Self::PARAMS)?;
        let flows = p.count("flows", 65_536, 1 << 32)? as usize;
        let outside = p.number("outside_port", 1, 0, 511)? as PortId;
        let public = p.ipv4("public", [198, 51, 100, 1])?;
        Ok(Nat::new(flows, outside, public))
    }

    /// The public endpoint of flow number `n`.
    fn public_endpoint(&self, n: u32) -> ([u8; 4], u16) {
        let base = u32::from_be_bytes(self.public_base);
        let ip = base.wrapping_add(n / PORTS_PER_ADDRESS).to_be_bytes();
        (ip, (1024 + n % PORTS_PER_ADDRESS) as u16)
    }

    /// Allocates a public endpoint for the inside flow `p` arriving on
    /// `port`, remembering it: the two entries to install (the flow's key
    /// and its translation out, the reply's key and its translation back),
    /// or None if the pool or the table is full. A flow already allocated
    /// gets the same entries again.
    fn allocate(
        &mut self,
        p: &Parsed,
        port: PortId,
    ) -> Option<([u8; 13], Translate, [u8; 13], Translate)> {
        let key = p.five_tuple();
        let (ip, public_port) = match self.allocated.get(&key) {
            Some(&e) => e,
            None => {
                let n = self.allocated.len();
                if n >= self.flows || n as u64 >= u64::from(u32::MAX) {
                    self.refused += 1;
                    return None;
                }
                let e = self.public_endpoint(n as u32);
                self.allocated.insert(key, e);
                e
            }
        };
        let out = Translate {
            ip,
            port: public_port,
            egress: self.outside_port,
        };
        // The reply comes from the remote end to the public endpoint.
        let reply = Parsed {
            src: p.dst,
            dst: ip,
            sport: p.dport,
            dport: public_port,
            ..*p
        };
        let back = Translate {
            ip: p.src,
            port: p.sport,
            egress: port,
        };
        Some((key, out, reply.five_tuple(), back))
    }

    /// Number of flows the control plane has allocated.
    pub fn allocated(&self) -> usize {
        self.allocated.len()
    }
}

impl Program for Nat {
    type Meta = Parsed;
    type Digest = ();

    fn name(&self) -> &str {
        "nat"
    }

    fn declare(&mut self, d: &mut Declare) -> Result<(), DeclareError> {
        let direction = d.gateway("direction", Gress::Ingress, &[])?;
        // Action data: address (32) + port (16) + egress port (9).
        let out = TableDecl::new("nat_out", MatchKind::Exact, 13, 57, self.flows)
            .after(&[direction.id()])
            .vliw(4);
        let inn = TableDecl::new("nat_in", MatchKind::Exact, 13, 57, self.flows)
            .after(&[direction.id()])
            .vliw(4);
        self.nat_out = Some(d.table(out)?);
        self.nat_in = Some(d.table(inn)?);
        Ok(())
    }

    fn parse(&self, gress: Gress, header: &[u8], meta: &mut Parsed) -> Result<(), ParseError> {
        parse_ingress_only(gress, header, meta)
    }

    fn ingress(
        &mut self,
        pkt: &mut PacketCtx<Parsed, ()>,
        dp: &mut DataPlane<'_>,
    ) -> Result<(), AccessError> {
        let (Some(nat_out), Some(nat_in)) = (self.nat_out, self.nat_in) else {
            return Ok(());
        };
        // TCP, UDP, and ICMP echo (its identifier as the port).
        let p = pkt.meta.icmp_echo_as_ports();
        if !p.has_ports {
            return Ok(()); // anything else: dropped
        }
        let key = p.five_tuple();
        if pkt.ingress_port() == self.outside_port {
            if let Some(t) = dp.lookup(nat_in, &key)? {
                rewrite_end(pkt.header_mut(), &p, End::Destination, t.ip, t.port);
                pkt.forward(t.egress);
            }
            return Ok(());
        }
        let t = match dp.lookup(nat_out, &key)? {
            Some(t) => t,
            None if dp.can_write_tables() => {
                // A software NAT: allocate and install inline.
                let Some((k, out, reply, back)) = self.allocate(&p, pkt.ingress_port()) else {
                    return Ok(());
                };
                let a = dp.table_insert(nat_out, MatchSpec::Exact(k.to_vec().into()), out)?;
                let b = dp.table_insert(nat_in, MatchSpec::Exact(reply.to_vec().into()), back)?;
                if a.is_err() || b.is_err() {
                    self.refused += 1;
                    return Ok(());
                }
                out
            }
            None => {
                pkt.to_cpu(REASON_NEW_FLOW);
                return Ok(());
            }
        };
        rewrite_end(pkt.header_mut(), &p, End::Source, t.ip, t.port);
        pkt.forward(t.egress);
        Ok(())
    }

    fn control(&mut self, event: ControlEvent<()>, cp: &mut ControlPlane<'_>) {
        let ControlEvent::PacketIn {
            port,
            reason,
            frame,
        } = event
        else {
            return;
        };
        let (Some(nat_out), Some(nat_in)) = (self.nat_out, self.nat_in) else {
            return;
        };
        if reason != REASON_NEW_FLOW || port == self.outside_port {
            return;
        }
        let Ok(p) = parse(&frame) else {
            return;
        };
        let p = p.icmp_echo_as_ports();
        let fresh = !self.allocated.contains_key(&p.five_tuple());
        let Some((key, out, reply, back)) = self.allocate(&p, port) else {
            return;
        };
        if fresh {
            cp.table_add(nat_out, MatchSpec::Exact(key.to_vec().into()), out);
            cp.table_add(nat_in, MatchSpec::Exact(reply.to_vec().into()), back);
        }
        // After the writes (the channel is FIFO), so the data plane
        // translates it.
        cp.packet_out(frame, PacketOutDest::Ingress(port));
    }
}
