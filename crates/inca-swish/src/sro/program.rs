//! [`SroNat`]: the NAT on an SRO variable as a switch program
//! (specs/swish.md §5.2, §7). The data plane is the single-switch NAT
//! (inca-apps' NAT core: flow view, keys, incremental rewrite) plus the
//! pending check, the IP-in-IP tunnel to the tail, and the SRO frames'
//! register updates; the control plane is [`crate::sro::cpu`].
//!
//! Objects: `sro_role` (1 entry: is the replica the tail, the tail's
//! address and port), the key hash (CRC-32), `acked_seq` (1 × u32),
//! `pending_seq` (H × u32), `sro_nat_out` and `sro_nat_in` (65,536 each
//! [our choice, spec §3.1]). Every array is touched at most once a pass.

use std::net::Ipv4Addr;

use inca_apps::core::nat::{self as core, Direction};
use inca_apps::core::Endpoint;
use inca_apps::headers::{parse, parse_ingress_only, Parsed};
use inca_apps::nat::Translate;
use inca_apps::params::{ParamError, Params};
use inca_switch::hash::HashAlgorithm;
use inca_switch::{
    AccessError, ArrayDecl, CheckHints, ControlEvent, ControlPlane, DataPlane, Declare,
    DeclareError, Gress, Handle, MatchKind, Nanos, PacketCtx, ParseError, PortId, Program,
    ProgramReport, RegisterHandle, TableDecl, TableHandle,
};
use inca_wire::swish::sro::{self, MsgType, NatKey};
use inca_wire::swish::{Header, Proto, HEADER_LEN, UDP_PORT};

use crate::addr::{ReplicaAddr, Rid};
use crate::sro::cpu::Cpu;
use crate::sro::facts::Facts;

/// Punt reason: a NAT miss (a write to originate).
pub const REASON_NEW_FLOW: u16 = 1;
/// Punt reason: an SRO frame for the CPU.
pub const REASON_SRO: u16 = 2;
/// UDP protocol number.
const PROTO_UDP: u8 = 17;

/// A deliberately broken protocol, for showing the checks catch it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Broken {
    /// The protocol as specified.
    #[default]
    None,
    /// The head acknowledges a write as soon as it has sequenced it, before
    /// the tail applied it (breaks S2).
    HeadAcksEarly,
    /// Non-tail replicas serve reads locally without the pending check
    /// (breaks S1 when a replica fails with an uncommitted write).
    NoPendingCheck,
}

/// One replica's configuration.
#[derive(Debug, Clone)]
pub struct SroConfig {
    /// This replica.
    pub me: ReplicaAddr,
    /// Every other member, with the local port toward it.
    pub peers: Vec<ReplicaAddr>,
    /// The initial chain, head first.
    pub chain: Vec<Rid>,
    /// The chain's group id.
    pub group: u8,
    /// The variable id.
    pub var_id: u16,
    /// This replica's index k among the P replicas (its port range).
    pub index: u16,
    /// P, the number of replicas sharing the port space.
    pub replicas: u16,
    /// The external address.
    pub public_ip: [u8; 4],
    /// The outside port.
    pub outside_port: PortId,
    /// Where replies to inside hosts go.
    pub inside_port: PortId,
    /// Origin retransmission period T_sro (1 ms, [our choice], spec §5.2).
    pub t_sro: Nanos,
    /// H, the `pending_seq` slots (65,536, [our choice], spec §3.1).
    pub pending_slots: usize,
    /// Entries of each NAT table (65,536, [our choice], spec §3.1).
    pub flows: usize,
    /// Outstanding held writes at an origin (1,024, [our choice]).
    pub max_held: usize,
    /// Packets held per write (a flow's packets while its write is out).
    pub max_held_packets: usize,
    /// `unacked_log` bound (4,096, [our choice]).
    pub max_log: usize,
    /// Remembered (origin, req_id) → seq for deduplication.
    pub max_dedup: usize,
    /// A broken variant, for the checks' own test.
    pub broken: Broken,
    /// Where facts go.
    pub facts: Facts,
}

impl SroConfig {
    /// A replica `me` of `chain` with defaults from the spec.
    pub fn new(me: ReplicaAddr, peers: Vec<ReplicaAddr>, chain: Vec<Rid>) -> Self {
        let index = chain.iter().position(|&r| r == me.rid).unwrap_or(0) as u16;
        let replicas = chain.len().max(1) as u16;
        SroConfig {
            me,
            peers,
            chain,
            group: 1,
            var_id: 1,
            index,
            replicas,
            public_ip: [198, 51, 100, 1],
            outside_port: 1,
            inside_port: 0,
            t_sro: 1_000_000,
            pending_slots: 65_536,
            flows: 65_536,
            max_held: 1_024,
            max_held_packets: 64,
            max_log: 4_096,
            max_dedup: 4_096,
            broken: Broken::None,
            facts: Facts::default(),
        }
    }

    /// This replica's external ports: [1024 + k·⌊64512/P⌋, 1024 +
    /// (k+1)·⌊64512/P⌋) (spec §7, [our choice]).
    pub fn port_range(&self) -> std::ops::Range<u32> {
        let per = 64_512 / u32::from(self.replicas.max(1));
        let lo = 1024 + u32::from(self.index) * per;
        lo..lo + per
    }
}

/// What the data plane reads from `sro_role`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RoleEntry {
    /// This replica is the tail (serves every read locally).
    pub is_tail: bool,
    /// Tunnel every read to the tail (a replica joining, §5.2).
    pub tunnel_all: bool,
    /// The tail's address (outer destination of tunnelled reads).
    pub tail_ip: Ipv4Addr,
    /// The port toward the tail.
    pub tail_port: PortId,
}

/// The objects the program declared.
#[derive(Debug, Clone, Copy)]
pub struct Objects {
    /// The role entry.
    pub role: TableHandle<RoleEntry>,
    /// CRC-32 of the key.
    pub hash: Handle,
    /// The cumulative ack.
    pub acked: RegisterHandle<u32>,
    /// Pending writes per key hash.
    pub pending: RegisterHandle<u32>,
    /// Inside key → external endpoint.
    pub nat_out: TableHandle<Translate>,
    /// External key → inside endpoint.
    pub nat_in: TableHandle<Translate>,
}

/// Whether `a` is after `b` in 32-bit serial arithmetic.
pub fn serial_gt(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) > 0
}

/// The NAT key of an inside flow packet.
pub fn key_of(p: &Parsed) -> NatKey {
    NatKey {
        ip: p.src,
        port: p.sport,
        proto: p.proto,
    }
}

/// The reverse-table key of external endpoint `v` for protocol `proto`.
pub fn reverse_key(ip: [u8; 4], port: u16, proto: u8) -> NatKey {
    NatKey { ip, port, proto }
}

/// The NAT on SRO. See the module documentation.
#[derive(Debug, Clone)]
pub struct SroNat {
    pub(crate) cfg: SroConfig,
    pub(crate) objs: Option<Objects>,
    pub(crate) cpu: Cpu,
    /// Data-plane drops: malformed SRO frames and tunnels.
    pub malformed: u64,
    /// Reads tunnelled to the tail.
    pub tunnelled: u64,
    /// WRITE_ACKs that raised nothing, dropped in the data plane.
    pub acks_absorbed: u64,
}

impl SroNat {
    /// Parameter names ([`SroNat::from_params`]).
    pub const PARAMS: &'static [&'static str] = &[
        "rid",
        "chain",
        "flows",
        "pending_slots",
        "t_sro_us",
        "outside_port",
        "inside_port",
        "public",
    ];

    /// A replica with configuration `cfg`.
    pub fn new(cfg: SroConfig) -> Self {
        let cpu = Cpu::new(&cfg);
        SroNat {
            cfg,
            objs: None,
            cpu,
            malformed: 0,
            tunnelled: 0,
            acks_absorbed: 0,
        }
    }

    /// A replica from parameters: `rid` (default 1), `chain` (the replicas'
    /// rids head first, e.g. "1,2,3"; default "1,2"), peers at conventional
    /// addresses on ports 2, 3, … in chain order skipping itself.
    pub fn from_params(p: &Params) -> Result<Self, ParamError> {
        p.check_known("swish_sro_nat", Self::PARAMS)?;
        let rid = p.number("rid", 1, 0, 0xFFFE)? as Rid;
        let chain_s = p.text("chain").unwrap_or("1,2");
        let mut chain = Vec::new();
        for part in chain_s.split(',') {
            let r: Rid = part.trim().parse().map_err(|_| ParamError::Value {
                name: "chain".into(),
                reason: format!("{part:?} is not a replica id"),
            })?;
            chain.push(r);
        }
        if !chain.contains(&rid) {
            return Err(ParamError::Value {
                name: "chain".into(),
                reason: format!("rid {rid} is not in the chain {chain_s}"),
            });
        }
        let peers = chain
            .iter()
            .filter(|&&r| r != rid)
            .enumerate()
            .map(|(i, &r)| ReplicaAddr::conventional(r, 2 + i as PortId))
            .collect();
        let mut cfg = SroConfig::new(ReplicaAddr::conventional(rid, 0), peers, chain);
        cfg.flows = p.count("flows", 65_536, 1 << 24)? as usize;
        cfg.pending_slots = p.count("pending_slots", 65_536, 1 << 24)? as usize;
        cfg.t_sro = p.number("t_sro_us", 1_000, 1, 10_000_000)? * 1_000;
        cfg.outside_port = p.number("outside_port", 1, 0, 511)? as PortId;
        cfg.inside_port = p.number("inside_port", 0, 0, 511)? as PortId;
        cfg.public_ip = p.ipv4("public", [198, 51, 100, 1])?;
        Ok(SroNat::new(cfg))
    }

    /// The configuration.
    pub fn config(&self) -> &SroConfig {
        &self.cfg
    }

    /// The declared objects (after load).
    pub fn objects(&self) -> Option<Objects> {
        self.objs
    }

    /// The control plane's state.
    pub fn cpu(&self) -> &Cpu {
        &self.cpu
    }

    /// An SRO frame addressed to this replica: the data plane's register
    /// update, then the CPU.
    fn sro_frame(
        &mut self,
        o: &Objects,
        pkt: &mut PacketCtx<Parsed, ()>,
        dp: &mut DataPlane<'_>,
    ) -> Result<(), AccessError> {
        let at = usize::from(pkt.meta.l4) + 8;
        let h = pkt.header();
        let Some(payload) = h.get(at..) else {
            self.malformed += 1;
            pkt.drop_packet();
            return Ok(());
        };
        let (Ok(hdr), Ok(body)) = (
            Header::new_checked(payload),
            sro::Body::new_checked(payload.get(HEADER_LEN..).unwrap_or(&[])),
        ) else {
            self.malformed += 1;
            pkt.drop_packet();
            return Ok(());
        };
        if hdr.proto() != Proto::Sro {
            self.malformed += 1;
            pkt.drop_packet();
            return Ok(());
        }
        let seq = body.seq();
        match MsgType::from_u8(hdr.msg_type()) {
            Ok(MsgType::Write) => {
                let idx = dp.hash(o.hash, body.key())? % self.cfg.pending_slots as u64;
                dp.register(o.pending, idx, |v| {
                    if serial_gt(seq, *v) {
                        *v = seq;
                    }
                })?;
            }
            Ok(MsgType::WriteAck) => {
                let advanced = dp.register(o.acked, 0, |v| {
                    let up = serial_gt(seq, *v);
                    if up {
                        *v = seq;
                    }
                    up
                })?;
                if !advanced {
                    // Nothing new for the CPU (it saw the ack that raised
                    // `acked_seq`): absorbed here [our choice], so the
                    // tail's re-acks of duplicates cost no CPU time.
                    self.acks_absorbed += 1;
                    pkt.drop_packet();
                    return Ok(());
                }
            }
            Ok(_) => {}
            Err(_) => {
                self.malformed += 1;
                pkt.drop_packet();
                return Ok(());
            }
        }
        pkt.to_cpu(REASON_SRO);
        Ok(())
    }
}

impl Program for SroNat {
    type Meta = Parsed;
    type Digest = ();

    fn name(&self) -> &str {
        "swish_sro_nat"
    }

    fn declare(&mut self, d: &mut Declare) -> Result<(), DeclareError> {
        // Action data: is_tail (1) + tunnel_all (1) + tail address (32) + port (9).
        let role = d.table(TableDecl::new("sro_role", MatchKind::Exact, 1, 43, 1))?;
        let hash = d.hash(
            "sro_key_hash",
            HashAlgorithm::Crc32,
            32,
            Gress::Ingress,
            &[],
        )?;
        let acked = d.register(ArrayDecl::new("acked_seq", 1).after(&[role.id()]))?;
        let pending = d.register(
            ArrayDecl::new("pending_seq", self.cfg.pending_slots).after(&[hash.id(), acked.id()]),
        )?;
        // Action data: address (32) + port (16) + egress port (9).
        let nat_out = d.table(
            TableDecl::new("sro_nat_out", MatchKind::Exact, 7, 57, self.cfg.flows)
                .after(&[pending.id()])
                .vliw(4),
        )?;
        let nat_in = d.table(
            TableDecl::new("sro_nat_in", MatchKind::Exact, 7, 57, self.cfg.flows)
                .after(&[role.id()])
                .vliw(4),
        )?;
        self.objs = Some(Objects {
            role,
            hash,
            acked,
            pending,
            nat_out,
            nat_in,
        });
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
        let Some(o) = self.objs else { return Ok(()) };
        let Some(role) = dp.lookup(o.role, &[0])? else {
            return Ok(()); // not configured yet: dropped
        };
        let me = self.cfg.me.ip.octets();
        let m = pkt.meta;
        if m.ipv4 && m.dst == me && m.proto == PROTO_UDP && m.has_ports && m.dport == UDP_PORT {
            return self.sro_frame(&o, pkt, dp);
        }
        if m.ipv4 && m.dst == me && m.proto == sro::IPPROTO_IPIP {
            // A read tunnelled to this replica as the tail: unwrap it and
            // serve it like any packet.
            let l3 = usize::from(m.l3);
            let ihl = pkt
                .header()
                .get(l3)
                .map_or(0, |b| usize::from(b & 0x0F) * 4);
            if ihl < 20 || !pkt.remove_header(l3, ihl) {
                self.malformed += 1;
                pkt.drop_packet();
                return Ok(());
            }
            match parse(pkt.header()) {
                Ok(p) => pkt.meta = p,
                Err(_) => {
                    self.malformed += 1;
                    pkt.drop_packet();
                    return Ok(());
                }
            }
        }
        let Some(p) = core::flow(&pkt.meta) else {
            return Ok(()); // not a flow: dropped
        };
        if pkt.ingress_port() == self.cfg.outside_port {
            let k = reverse_key(p.dst, p.dport, p.proto).to_bytes();
            if let Some(t) = dp.lookup(o.nat_in, &k)? {
                core::translate(pkt.header_mut(), &p, Direction::Inbound, t.endpoint());
                pkt.forward(t.egress);
            }
            return Ok(()); // an unsolicited inbound packet is dropped
        }
        let key = key_of(&p).to_bytes();
        if !role.is_tail {
            let idx = dp.hash(o.hash, &key)? % self.cfg.pending_slots as u64;
            let acked = dp.register(o.acked, 0, |v| *v)?;
            let pending = dp.register(o.pending, idx, |v| *v)?;
            let pending = serial_gt(pending, acked) && self.cfg.broken != Broken::NoPendingCheck;
            if pending || role.tunnel_all {
                let l3 = usize::from(p.l3);
                let inner = &pkt.header()[l3..];
                let (len, tos) = match inner {
                    [_, tos, hi, lo, ..] => (usize::from(u16::from_be_bytes([*hi, *lo])), *tos),
                    _ => {
                        self.malformed += 1;
                        pkt.drop_packet();
                        return Ok(());
                    }
                };
                let Ok(outer) = sro::outer_header(len, tos, self.cfg.me.ip, role.tail_ip) else {
                    self.malformed += 1;
                    pkt.drop_packet();
                    return Ok(());
                };
                if pkt.insert_header(l3, &outer) {
                    self.tunnelled += 1;
                    pkt.forward(role.tail_port);
                } else {
                    pkt.drop_packet();
                }
                return Ok(());
            }
        }
        match dp.lookup(o.nat_out, &key)? {
            Some(t) => {
                core::translate(pkt.header_mut(), &p, Direction::Outbound, t.endpoint());
                pkt.forward(t.egress);
            }
            None => pkt.to_cpu(REASON_NEW_FLOW),
        }
        Ok(())
    }

    fn control(&mut self, event: ControlEvent<()>, cp: &mut ControlPlane<'_>) {
        let Some(o) = self.objs else { return };
        self.cpu.handle(&self.cfg, &o, event, cp);
    }

    fn report(&self) -> ProgramReport {
        let c = &self.cpu.counters;
        let n = self.cpu.node();
        let counters = [
            ("sro.tunnelled", self.tunnelled),
            ("sro.dp_malformed", self.malformed),
            ("sro.acks_absorbed", self.acks_absorbed),
            ("sro.requests", c.requests),
            ("sro.retransmits", c.retransmits),
            ("sro.released", c.released),
            ("sro.ports_returned", c.ports_returned),
            ("sro.held_full", c.held_full),
            ("sro.held_packets_full", c.held_packets_full),
            ("sro.pool_empty", c.pool_empty),
            ("sro.refused", c.refused),
            ("sro.sequenced", c.sequenced),
            ("sro.dup_requests", c.dup_requests),
            ("sro.cpu_malformed", c.malformed),
            ("sro.chain_gaps", c.chain_gaps),
            ("sro.chain_dups", c.chain_dups),
            ("sro.applied", u64::from(n.applied())),
            ("sro.committed", u64::from(n.committed())),
        ];
        ProgramReport {
            counters: counters
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect(),
            series: Vec::new(),
        }
    }

    fn check_hints(&self) -> CheckHints {
        // Frames that reach the SRO branches: a WRITE and a WRITE_ACK to
        // this replica, and a read tunnelled to it.
        let peer = self.cfg.peers.first().copied().unwrap_or(self.cfg.me);
        let e = crate::sro::cpu::Entry {
            origin: peer.rid,
            req: 1,
            key: NatKey {
                ip: [10, 1, 0, 1],
                port: 5000,
                proto: PROTO_UDP,
            },
            value: sro::NatValue {
                ip: self.cfg.public_ip,
                port: 1024,
            },
            noop: false,
        };
        let mut samples = Vec::new();
        for t in [MsgType::Write, MsgType::WriteAck] {
            let m = crate::sro::cpu::message(&self.cfg, t, 0, 1, &e);
            if let Ok(f) = crate::addr::udp_frame(&peer, &self.cfg.me, &m) {
                samples.push((peer.port, f));
            }
        }
        let inner = crate::sro::rig::flow_packet(1, 0, 0);
        if let Ok(f) = sro::encapsulate(&inner, peer.ip, self.cfg.me.ip) {
            samples.push((peer.port, f));
        }
        samples.push((self.cfg.inside_port, inner));
        CheckHints {
            samples,
            known: Vec::new(),
        }
    }
}

/// The translation an inside flow's packets get for external endpoint
/// `ext`: out of the outside port.
pub fn translate_out(ext: Endpoint, outside_port: PortId) -> Translate {
    Translate {
        ip: ext.ip,
        port: ext.port,
        egress: outside_port,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use inca_switch::hash::{crc32, HashUnit};
    use inca_switch::{Profile, Switch};

    #[test]
    fn the_cpu_and_the_data_plane_hash_keys_alike() {
        let unit = HashUnit::new(HashAlgorithm::Crc32, 32).unwrap();
        for f in 0..100u32 {
            let k = NatKey {
                ip: f.to_be_bytes(),
                port: f as u16,
                proto: 17,
            }
            .to_bytes();
            assert_eq!(unit.hash(&k), u64::from(crc32(&k)));
        }
    }

    #[test]
    fn it_loads_on_a_tofino_and_its_parameters_are_checked() {
        let p = Params::parse(["rid=2", "chain=1,2,3"]).unwrap();
        let nat = SroNat::from_params(&p).unwrap();
        assert_eq!(nat.config().port_range(), 1024 + 21_504..1024 + 2 * 21_504);
        assert_eq!(nat.config().peers.len(), 2);
        Switch::new(Profile::tofino(), nat).unwrap();
        let bad = Params::parse(["rid=4", "chain=1,2,3"]).unwrap();
        let e = SroNat::from_params(&bad).unwrap_err().to_string();
        assert!(e.contains("chain"), "{e}");
        let bad = Params::parse(["chain=1,x"]).unwrap();
        assert!(SroNat::from_params(&bad).is_err());
        assert!(serial_gt(1, u32::MAX) && !serial_gt(u32::MAX, 1));
    }

    #[test]
    fn the_load_time_check_finds_no_object_reached_twice() {
        use inca_switch::loadcheck::{load_check, LoadCheckOptions};
        let p = Params::parse(["rid=2", "chain=1,2,3"]).unwrap();
        let nat = SroNat::from_params(&p).unwrap();
        let r = load_check(&Profile::tofino(), nat, LoadCheckOptions::default()).unwrap();
        println!("{r}");
        assert!(r.passed(), "{r}");
        assert!(r.packets > 0);
    }
}
