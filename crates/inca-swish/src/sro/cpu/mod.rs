//! The SRO control plane on one replica's switch CPU (specs/swish.md
//! §5.2): the origin of writes (NAT misses), the head's sequencing, and
//! every member's in-order apply, which is `inca_chain`'s [`ChainNode`]
//! driven from here ([`Node`]).
//!
//! Choices where the spec is silent, all [our choice]:
//! - The origin learns its write's seq and committed value when the WRITE
//!   reaches it in the chain (it is upstream of the tail, or the tail), and
//!   releases the held packets once the cumulative WRITE_ACK covers that
//!   seq; so a lost WRITE_ACK is repaired by any later one.
//! - Deduplication remembers (origin, req_id) → seq for the last
//!   `max_dedup` writes at every member (an origin may have many writes
//!   out, so one req_id per origin is not enough). A request forgotten and
//!   sequenced again is harmless: insert-if-absent makes it a NOOP.
//! - A head asked again for a write already committed relays the tail's
//!   cumulative ack (WRITE_ACK(committed)) to the origin: it acknowledges
//!   only what the tail acknowledged.
//! - An origin that is the head sequences its own writes without a
//!   WRITE_REQ frame.
//! - Gaps are dropped (`max_early` = 0 in the chain): strict in-order apply
//!   as the spec asks; retransmission fills them.
//! - Joining at the tail (§5.2) is in [`join`].
//! - Besides the origins' retransmissions, the head resends its whole
//!   unacked log (go-back-N, `inca_chain`'s resend) when no ack has come
//!   for T_sro: a write whose origin failed after the head sequenced it has
//!   nobody else to retransmit it, and the replicas after a gap would wait
//!   for it forever. The resend timeout doubles (up to 4·T_sro) while
//!   nothing commits, so a chain slowed by its CPUs is not flooded.

use std::collections::{BTreeMap, VecDeque};
use std::net::Ipv4Addr;

use inca_apps::core::nat::{self as core, Direction};
use inca_apps::core::Endpoint;
use inca_apps::headers::parse;
use inca_apps::nat::Translate;
use inca_chain::{ChainEvent, ChainIo, ChainNode, Commit, Replica, Traffic};
use inca_switch::device::ControlMessage;
use inca_switch::hash::crc32;
use inca_switch::{ControlEvent, ControlPlane, MatchSpec, Nanos, PacketOutDest};
use inca_wire::parse_udp_frame;
use inca_wire::swish::sro::{self, BodyRepr, MsgType, NatKey, NatValue};
use inca_wire::swish::{flags, HeaderRepr, Proto, GROUP_RID, HEADER_LEN};

use crate::addr::{udp_frame, ReplicaAddr, Rid};
use crate::sro::facts::Fact;

mod join;

use crate::sro::program::{
    key_of, reverse_key, translate_out, Broken, Objects, RoleEntry, SroConfig, REASON_NEW_FLOW,
    REASON_SRO,
};
pub use join::SHADOW;

/// Timer token of the head's log resend (request ids are below 2^32).
const RESEND_TOKEN: u64 = 1 << 40;

/// Control message kind: the controller's new chain (body: rids, u16 BE,
/// head first). A replica not in it stops (fenced, §5.1).
pub const SET_CHAIN: u32 = 0x5352_4F01;

/// One replicated write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The origin replica.
    pub origin: Rid,
    /// Its request id.
    pub req: u32,
    /// The key.
    pub key: NatKey,
    /// The value (the existing one for a NOOP).
    pub value: NatValue,
    /// Insert-if-absent found the key: nothing to install.
    pub noop: bool,
}

/// Counters of the control plane.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CpuCounters {
    /// Writes originated.
    pub requests: u64,
    /// WRITE_REQ retransmissions.
    pub retransmits: u64,
    /// Writes committed and released here as origin.
    pub released: u64,
    /// NOOP writes whose proposed port went back to the pool.
    pub ports_returned: u64,
    /// Misses dropped: `held` full.
    pub held_full: u64,
    /// Packets dropped: a write's held packets at their bound.
    pub held_packets_full: u64,
    /// Misses dropped: no port left in this replica's range.
    pub pool_empty: u64,
    /// Requests refused at the head: log or table full.
    pub refused: u64,
    /// Writes sequenced at this replica as head.
    pub sequenced: u64,
    /// Duplicate requests (re-forwarded or re-acked).
    pub dup_requests: u64,
    /// Frames the CPU could not parse, or got in the wrong role.
    pub malformed: u64,
    /// Chain events (inca-chain's), by kind.
    pub chain_gaps: u64,
    /// Chain duplicates.
    pub chain_dups: u64,
}

/// A write an origin holds packets for.
#[derive(Debug, Clone)]
struct Held {
    key: NatKey,
    proposed: NatValue,
    packets: Vec<(Vec<u8>, inca_switch::PortId)>,
}

/// The chain member: the replicated table's mirror and `inca_chain` state.
#[derive(Debug, Clone)]
pub struct Node {
    replica: Replica<Entry, ()>,
    /// Applied entries (installed, or being installed): key → value.
    table: BTreeMap<NatKey, NatValue>,
    dedup: BTreeMap<(Rid, u32), u32>,
    dedup_order: VecDeque<(Rid, u32)>,
    max_dedup: usize,
    /// The last applied write (its value goes in WRITE_ACK).
    last: Option<(u32, Entry)>,
    /// This origin's writes seen applied: req → (seq, value).
    mine: BTreeMap<u32, (u32, NatValue)>,
    /// The apply sequence (seq order) is recorded as facts.
    me: Rid,
    /// A shadowing tail: writes applied are kept for the joiner.
    capture: bool,
    captured: Vec<(u32, Vec<u8>)>,
}

/// The CPU's side of one `inca_chain` call.
pub struct Io<'a, 'b> {
    cp: &'a mut ControlPlane<'b>,
    cfg: &'a SroConfig,
    objs: &'a Objects,
    successor: Option<Ipv4Addr>,
    predecessors: Vec<Ipv4Addr>,
    is_tail: bool,
    counters: &'a mut CpuCounters,
}

impl Io<'_, '_> {
    fn peer_by_ip(&self, ip: Ipv4Addr) -> Option<ReplicaAddr> {
        self.cfg.peers.iter().copied().find(|p| p.ip == ip)
    }

    fn peer(&self, rid: Rid) -> Option<ReplicaAddr> {
        self.cfg.peers.iter().copied().find(|p| p.rid == rid)
    }

    /// Sends SwiSh payload `bytes` (header and body) to `to`, with the
    /// header's src/dst rid set for this hop.
    fn send_to(&mut self, to: ReplicaAddr, bytes: &[u8]) {
        let mut b = bytes.to_vec();
        if let Ok(mut h) = inca_wire::swish::Header::new_checked(&mut b[..]) {
            h.set_src_rid(self.cfg.me.rid);
            h.set_dst_rid(to.rid);
        }
        if let Ok(f) = udp_frame(&self.cfg.me, &to, &b) {
            self.cp.packet_out(f, PacketOutDest::Port(to.port));
        }
    }
}

impl ChainIo for Io<'_, '_> {
    fn now(&self) -> Nanos {
        self.cp.now()
    }
    fn done(&self) -> Nanos {
        self.cp.now()
    }
    fn successor(&self) -> Option<Ipv4Addr> {
        self.successor
    }
    fn predecessors(&self) -> &[Ipv4Addr] {
        &self.predecessors
    }
    fn window(&self) -> usize {
        self.cfg.max_log
    }
    fn send(&mut self, to: Ipv4Addr, bytes: &[u8], _traffic: Traffic) {
        if let Some(p) = self.peer_by_ip(to) {
            self.send_to(p, bytes);
        }
    }
    fn count(&mut self, event: ChainEvent) {
        match event {
            ChainEvent::Gap => self.counters.chain_gaps += 1,
            ChainEvent::Duplicate => self.counters.chain_dups += 1,
            ChainEvent::Malformed => self.counters.malformed += 1,
            _ => {}
        }
    }
}

/// The SwiSh payload of an SRO message.
pub fn message(cfg: &SroConfig, t: MsgType, fl: u8, seq: u32, e: &Entry) -> Vec<u8> {
    let h = HeaderRepr {
        proto: Proto::Sro,
        msg_type: t as u8,
        flags: fl | if e.noop { flags::NOOP } else { 0 },
        group_id: cfg.group,
        src_rid: cfg.me.rid,
        dst_rid: GROUP_RID,
    };
    let body = BodyRepr {
        seq,
        origin_rid: e.origin,
        var_id: cfg.var_id,
        req_id: e.req,
        key: e.key.to_bytes().to_vec(),
        value: e.value.to_bytes().to_vec(),
    };
    let mut out = h.to_bytes().to_vec();
    out.extend(body.to_vec().unwrap_or_default());
    out
}

/// Parses a SwiSh SRO payload: header, seq and entry.
pub fn decode(payload: &[u8]) -> Option<(HeaderRepr, u32, Entry)> {
    let h = HeaderRepr::parse(payload).ok()?;
    if h.proto != Proto::Sro {
        return None;
    }
    let b = sro::Body::new_checked(payload.get(HEADER_LEN..)?).ok()?;
    let key = NatKey::parse(b.key()).ok();
    let value = NatValue::parse(b.value()).ok();
    let zero = NatKey {
        ip: [0; 4],
        port: 0,
        proto: 0,
    };
    let e = Entry {
        origin: b.origin_rid(),
        req: b.req_id(),
        key: key.unwrap_or(zero),
        value: value.unwrap_or(NatValue {
            ip: [0; 4],
            port: 0,
        }),
        noop: h.flags & flags::NOOP != 0,
    };
    // Writes and requests carry a key and value; acks and the snapshot's
    // end marker need none.
    let needs = matches!(
        MsgType::from_u8(h.msg_type),
        Ok(MsgType::WriteReq | MsgType::Write)
    ) || (h.msg_type == MsgType::SnapWrite as u8 && h.flags & flags::LAST == 0);
    if needs && (key.is_none() || value.is_none()) {
        return None;
    }
    Some((h, b.seq(), e))
}

impl Node {
    fn new(cfg: &SroConfig) -> Self {
        Node {
            replica: Replica::new(0),
            table: BTreeMap::new(),
            dedup: BTreeMap::new(),
            dedup_order: VecDeque::new(),
            max_dedup: cfg.max_dedup,
            last: None,
            mine: BTreeMap::new(),
            me: cfg.me.rid,
            capture: false,
            captured: Vec::new(),
        }
    }

    /// Applied entries: key → value.
    pub fn table(&self) -> &BTreeMap<NatKey, NatValue> {
        &self.table
    }

    /// The last seq applied here.
    pub fn applied(&self) -> u32 {
        self.replica.applied()
    }

    /// The last seq known committed here.
    pub fn committed(&self) -> u32 {
        self.replica.committed()
    }

    fn remember(&mut self, origin: Rid, req: u32, seq: u32) {
        if self.dedup.insert((origin, req), seq).is_none() {
            self.dedup_order.push_back((origin, req));
        }
        while self.dedup_order.len() > self.max_dedup {
            if let Some(k) = self.dedup_order.pop_front() {
                self.dedup.remove(&k);
            }
        }
    }

    /// Applies write `seq` here: `pending_seq` is already raised (by the
    /// data plane, or the head's register write); installs both table
    /// entries unless a NOOP, remembers it, records the fact.
    fn apply_entry(&mut self, x: &mut Io<'_, '_>, seq: u32, e: &Entry) {
        if !e.noop && !self.table.contains_key(&e.key) {
            let out = translate_out(Endpoint::new(e.value.ip, e.value.port), x.cfg.outside_port);
            let back = Translate {
                ip: e.key.ip,
                port: e.key.port,
                egress: x.cfg.inside_port,
            };
            let rk = reverse_key(e.value.ip, e.value.port, e.key.proto);
            x.cp.table_add(
                x.objs.nat_out,
                MatchSpec::Exact(e.key.to_bytes().to_vec().into()),
                out,
            );
            x.cp.table_add(
                x.objs.nat_in,
                MatchSpec::Exact(rk.to_bytes().to_vec().into()),
                back,
            );
            self.table.insert(e.key, e.value);
        }
        self.remember(e.origin, e.req, seq);
        self.last = Some((seq, e.clone()));
        if e.origin == self.me {
            self.mine.insert(e.req, (seq, e.value));
        }
        if self.capture {
            self.captured
                .push((seq, message(x.cfg, MsgType::Write, 0, seq, e)));
        }
        x.cfg.facts.record(Fact::Applied {
            t: x.cp.now(),
            rid: self.me,
            at_tail: x.is_tail,
            seq,
            key: e.key,
            value: e.value,
            noop: e.noop,
        });
    }
}

impl<'a, 'b> ChainNode<Io<'a, 'b>> for Node {
    type Entry = Entry;
    type Held = ();

    fn replica(&mut self) -> &mut Replica<Entry, ()> {
        &mut self.replica
    }
    fn replica_ref(&self) -> &Replica<Entry, ()> {
        &self.replica
    }
    fn decode(&self, payload: &[u8]) -> Option<(u32, Entry)> {
        decode(payload)
            .filter(|(h, _, _)| h.msg_type == MsgType::Write as u8)
            .map(|(_, s, e)| (s, e))
    }
    fn ack_bytes(&self, id: u32) -> Vec<u8> {
        // The cumulative ack carries the committed value of `id` when this
        // node still has it (always, for the write just applied).
        let e = match &self.last {
            Some((s, e)) if *s == id => e.clone(),
            _ => Entry {
                origin: 0,
                req: 0,
                key: NatKey {
                    ip: [0; 4],
                    port: 0,
                    proto: 0,
                },
                value: NatValue {
                    ip: [0; 4],
                    port: 0,
                },
                noop: false,
            },
        };
        // The tail's config is not at hand here: the header fields other
        // than type and flags are rewritten per hop by `Io::send_to`.
        let h = HeaderRepr {
            proto: Proto::Sro,
            msg_type: MsgType::WriteAck as u8,
            flags: flags::ACK,
            group_id: 0,
            src_rid: self.me,
            dst_rid: GROUP_RID,
        };
        let body = BodyRepr {
            seq: id,
            origin_rid: e.origin,
            var_id: 0,
            req_id: e.req,
            key: e.key.to_bytes().to_vec(),
            value: e.value.to_bytes().to_vec(),
        };
        let mut out = h.to_bytes().to_vec();
        out.extend(body.to_vec().unwrap_or_default());
        out
    }
    fn apply(&mut self, x: &mut Io<'a, 'b>, id: u32, entry: &Entry, _payload: &[u8]) {
        self.apply_entry(x, id, entry);
    }
    fn commit(&mut self, _x: &mut Io<'a, 'b>, _entry: &Entry, _at: Commit) {}
    fn release(&mut self, _x: &mut Io<'a, 'b>, _held: ()) {}
}

/// A replica's external ports: its range, with NOOP returns reused first.
#[derive(Debug, Clone)]
struct PortPool {
    next: u32,
    end: u32,
    free: Vec<u16>,
}

impl PortPool {
    fn take(&mut self) -> Option<u16> {
        if let Some(p) = self.free.pop() {
            return Some(p);
        }
        (self.next < self.end).then(|| {
            self.next += 1;
            (self.next - 1) as u16
        })
    }
}

/// The control plane. See the module documentation.
#[derive(Debug, Clone)]
pub struct Cpu {
    chain: Vec<Rid>,
    stopped: bool,
    node: Node,
    held: BTreeMap<u32, Held>,
    by_key: BTreeMap<NatKey, u32>,
    next_req: u32,
    pool: PortPool,
    acked: u32,
    /// The head's log resend: the committed seq it last saw, and its RTO.
    resend: (u32, Nanos),
    /// As the tail: the joiner being shadowed.
    shadow: Option<join::Shadow>,
    /// As a joiner (not yet in the chain): its progress.
    joiner: Option<join::Joiner>,
    /// Counters.
    pub counters: CpuCounters,
}

impl Cpu {
    /// The control plane of replica `cfg.me`.
    pub fn new(cfg: &SroConfig) -> Self {
        let r = cfg.port_range();
        Cpu {
            chain: cfg.chain.clone(),
            stopped: false,
            node: Node::new(cfg),
            held: BTreeMap::new(),
            by_key: BTreeMap::new(),
            next_req: 1,
            pool: PortPool {
                next: r.start,
                end: r.end,
                free: Vec::new(),
            },
            acked: 0,
            resend: (0, cfg.t_sro),
            shadow: None,
            joiner: None,
            counters: CpuCounters::default(),
        }
    }

    /// The chain member's state.
    pub fn node(&self) -> &Node {
        &self.node
    }

    /// Writes held at this origin.
    pub fn held(&self) -> usize {
        self.held.len()
    }

    /// The current chain as this replica knows it.
    pub fn chain(&self) -> &[Rid] {
        &self.chain
    }

    /// As the tail shadowing a joiner: whether the joiner has acknowledged
    /// every snapshot entry and every write this replica applied (the
    /// controller then hands the tail over).
    pub fn shadow_done(&self) -> bool {
        self.shadow
            .as_ref()
            .is_some_and(|s| s.done(self.node.applied()))
    }

    /// Whether this replica is a spare waiting to join.
    pub fn joining(&self) -> bool {
        self.joiner.is_some()
    }

    /// Whether the controller stopped (fenced) this replica.
    pub fn stopped(&self) -> bool {
        self.stopped
    }

    fn position(&self, me: Rid) -> Option<usize> {
        self.chain.iter().position(|&r| r == me)
    }

    fn is_head(&self, me: Rid) -> bool {
        self.chain.first() == Some(&me)
    }

    fn is_tail(&self, me: Rid) -> bool {
        self.chain.last() == Some(&me)
    }

    fn io<'a, 'b>(
        &'a mut self,
        cfg: &'a SroConfig,
        objs: &'a Objects,
        cp: &'a mut ControlPlane<'b>,
    ) -> (Io<'a, 'b>, &'a mut Node) {
        let me = cfg.me.rid;
        let pos = self.position(me);
        let addr = |r: Rid| cfg.peers.iter().find(|p| p.rid == r).map(|p| p.ip);
        let successor = pos
            .and_then(|i| self.chain.get(i + 1))
            .and_then(|&r| addr(r));
        let predecessors = pos
            .map(|i| self.chain[..i].iter().filter_map(|&r| addr(r)).collect())
            .unwrap_or_default();
        let is_tail = self.chain.last() == Some(&me);
        let io = Io {
            cp,
            cfg,
            objs,
            successor,
            predecessors,
            is_tail,
            counters: &mut self.counters,
        };
        (io, &mut self.node)
    }

    fn role_entry(&self, cfg: &SroConfig) -> RoleEntry {
        let tail = self.chain.last().copied().unwrap_or(cfg.me.rid);
        let peer = cfg.peers.iter().find(|p| p.rid == tail);
        RoleEntry {
            is_tail: tail == cfg.me.rid,
            tunnel_all: self.position(cfg.me.rid).is_none(),
            tail_ip: peer.map(|p| p.ip).unwrap_or(cfg.me.ip),
            tail_port: peer.map(|p| p.port).unwrap_or(cfg.outside_port),
        }
    }

    /// Handles one control-plane event.
    pub fn handle(
        &mut self,
        cfg: &SroConfig,
        objs: &Objects,
        event: ControlEvent<()>,
        cp: &mut ControlPlane<'_>,
    ) {
        if self.stopped {
            return;
        }
        match event {
            ControlEvent::Start => {
                cp.set_timer(cp.now() + cfg.t_sro, RESEND_TOKEN);
                cfg.facts.record(Fact::Role {
                    t: cp.now(),
                    rid: cfg.me.rid,
                    chain: self.chain.clone(),
                });
                if self.position(cfg.me.rid).is_none() {
                    // A spare: it joins at the tail when the controller
                    // attaches it, and tunnels every read meanwhile.
                    self.joiner = Some(join::Joiner::default());
                }
                cp.table_add(
                    objs.role,
                    MatchSpec::Exact(vec![0u8].into()),
                    self.role_entry(cfg),
                );
            }
            ControlEvent::PacketIn {
                port,
                reason,
                frame,
            } => match reason {
                REASON_NEW_FLOW => self.new_flow(cfg, objs, port, frame, cp),
                REASON_SRO => self.sro_frame(cfg, objs, &frame, cp),
                _ => {}
            },
            ControlEvent::Timer {
                token: RESEND_TOKEN,
            } => {
                cp.set_timer(cp.now() + cfg.t_sro, RESEND_TOKEN);
                let now = cp.now();
                self.shadow_retransmit(cfg, objs, cp);
                if self.node.committed() != self.resend.0 {
                    self.resend = (self.node.committed(), cfg.t_sro);
                }
                let rto = self.resend.1;
                if self.is_head(cfg.me.rid) {
                    let (mut io, node) = self.io(cfg, objs, cp);
                    if node.replica.resend_at(rto).is_some_and(|t| t <= now) {
                        node.resend(&mut io);
                        // Back off while nothing commits: a chain that is
                        // slow, not lossy, must not be flooded with resends.
                        self.resend.1 = (rto * 2).min(cfg.t_sro * 4);
                    }
                }
            }
            ControlEvent::Timer { token } => self.retransmit(cfg, objs, token as u32, cp),
            ControlEvent::Message(m) if m.kind == SET_CHAIN => self.set_chain(cfg, objs, &m, cp),
            ControlEvent::Message(m) if m.kind == join::SHADOW => {
                self.start_shadow(cfg, objs, &m, cp)
            }
            _ => {}
        }
        self.shadow_forward(cfg, objs, cp);
        self.release_ready(cfg, cp);
    }

    /// Origin: a NAT miss.
    fn new_flow(
        &mut self,
        cfg: &SroConfig,
        objs: &Objects,
        port: inca_switch::PortId,
        frame: Vec<u8>,
        cp: &mut ControlPlane<'_>,
    ) {
        let Some(p) = parse(&frame).ok().and_then(|p| core::flow(&p)) else {
            self.counters.malformed += 1;
            return;
        };
        let key = key_of(&p);
        if let Some(req) = self.by_key.get(&key) {
            if let Some(h) = self.held.get_mut(req) {
                if h.packets.len() < cfg.max_held_packets {
                    h.packets.push((frame, port));
                } else {
                    self.counters.held_packets_full += 1;
                }
                return;
            }
        }
        if self.held.len() >= cfg.max_held {
            self.counters.held_full += 1;
            return;
        }
        let Some(ext) = self.pool.take() else {
            self.counters.pool_empty += 1;
            return;
        };
        let proposed = NatValue {
            ip: cfg.public_ip,
            port: ext,
        };
        let req = self.next_req;
        self.next_req = self.next_req.wrapping_add(1).max(1);
        self.held.insert(
            req,
            Held {
                key,
                proposed,
                packets: vec![(frame, port)],
            },
        );
        self.by_key.insert(key, req);
        self.counters.requests += 1;
        cfg.facts.record(Fact::Request {
            t: cp.now(),
            rid: cfg.me.rid,
            req,
            key,
            proposed,
        });
        let e = Entry {
            origin: cfg.me.rid,
            req,
            key,
            value: proposed,
            noop: false,
        };
        self.send_request(cfg, objs, &e, 0, cp);
        cp.set_timer(cp.now() + cfg.t_sro, u64::from(req));
    }

    /// WRITE_REQ to the head (sequenced here if this replica is it).
    fn send_request(
        &mut self,
        cfg: &SroConfig,
        objs: &Objects,
        e: &Entry,
        fl: u8,
        cp: &mut ControlPlane<'_>,
    ) {
        let me = cfg.me.rid;
        if self.is_head(me) {
            self.head_request(cfg, objs, e.clone(), cp);
            return;
        }
        let Some(&head) = self.chain.first() else {
            return;
        };
        let bytes = message(cfg, MsgType::WriteReq, fl, 0, e);
        let (mut io, _) = self.io(cfg, objs, cp);
        if let Some(p) = io.peer(head) {
            io.send_to(p, &bytes);
        }
    }

    fn retransmit(&mut self, cfg: &SroConfig, objs: &Objects, req: u32, cp: &mut ControlPlane<'_>) {
        let Some(h) = self.held.get(&req) else { return };
        let e = Entry {
            origin: cfg.me.rid,
            req,
            key: h.key,
            value: h.proposed,
            noop: false,
        };
        self.counters.retransmits += 1;
        self.send_request(cfg, objs, &e, flags::RETX, cp);
        cp.set_timer(cp.now() + cfg.t_sro, u64::from(req));
    }

    /// Head: sequences a write (or answers a duplicate request).
    fn head_request(
        &mut self,
        cfg: &SroConfig,
        objs: &Objects,
        req: Entry,
        cp: &mut ControlPlane<'_>,
    ) {
        let me = cfg.me.rid;
        if let Some(&seq) = self.node.dedup.get(&(req.origin, req.req)) {
            self.counters.dup_requests += 1;
            let committed = self.node.committed();
            let (mut io, node) = self.io(cfg, objs, cp);
            if seq > committed {
                // Still in the log: re-forward it with its original seq.
                let bytes = node
                    .replica
                    .log()
                    .find(|l| l.id == seq)
                    .map(|l| l.bytes.clone());
                if let (Some(b), Some(s)) = (bytes, io.successor) {
                    ChainIo::send(&mut io, s, &b, Traffic::Forward);
                }
            } else if req.origin != me {
                // Committed: relay the tail's cumulative ack.
                let ack = node.ack_bytes(committed);
                if let Some(p) = io.peer(req.origin) {
                    io.send_to(p, &ack);
                }
            }
            return;
        }
        if self.node.replica.log().count() >= cfg.max_log {
            self.counters.refused += 1;
            return;
        }
        let existing = self.node.table.get(&req.key).copied();
        if existing.is_none() && self.node.table.len() >= cfg.flows {
            self.counters.refused += 1;
            return;
        }
        let e = Entry {
            value: existing.unwrap_or(req.value),
            noop: existing.is_some(),
            ..req
        };
        let seq = self.node.replica.next_id();
        self.counters.sequenced += 1;
        // pending_seq before the table write: the channel applies them in
        // issue order, so no read sees the entry before its pending mark.
        let idx = u64::from(crc32(&e.key.to_bytes())) % cfg.pending_slots as u64;
        cp.register_write(objs.pending, idx, seq);
        let bytes = message(cfg, MsgType::Write, 0, seq, &e);
        let (mut io, node) = self.io(cfg, objs, cp);
        node.apply_entry(&mut io, seq, &e);
        if io.successor.is_some() {
            node.append(&mut io, seq, e.clone(), bytes);
            if cfg.broken == Broken::HeadAcksEarly {
                // Broken on purpose: acknowledge before the tail applied.
                let ack = message(cfg, MsgType::WriteAck, flags::ACK, seq, &e);
                let all: Vec<ReplicaAddr> = cfg.peers.clone();
                for p in all {
                    io.send_to(p, &ack);
                }
                drop(io);
                self.acked = self.acked.max(seq);
            }
        } else {
            node.commit_alone(&mut io, seq, e);
        }
    }

    /// An SRO frame the data plane punted.
    fn sro_frame(
        &mut self,
        cfg: &SroConfig,
        objs: &Objects,
        frame: &[u8],
        cp: &mut ControlPlane<'_>,
    ) {
        let me = cfg.me.rid;
        let Some(payload) = parse_udp_frame(frame).ok().map(|u| u.payload) else {
            self.counters.malformed += 1;
            return;
        };
        let Some((h, seq, e)) = decode(payload) else {
            self.counters.malformed += 1;
            return;
        };
        let (is_head, is_tail) = (self.is_head(me), self.is_tail(me));
        match MsgType::from_u8(h.msg_type) {
            Ok(MsgType::WriteReq) if is_head => self.head_request(cfg, objs, e, cp),
            Ok(MsgType::Write) if !is_head && self.position(me).is_some() => {
                let (mut io, node) = self.io(cfg, objs, cp);
                node.receive_update(&mut io, payload, is_tail);
            }
            Ok(MsgType::Write) if self.joiner.is_some() => {
                self.joiner_write(cfg, objs, h.src_rid, payload, cp)
            }
            Ok(MsgType::SnapWrite) if self.joiner.is_some() => {
                self.joiner_snapshot(cfg, objs, &h, seq, &e, cp)
            }
            Ok(MsgType::SnapAck | MsgType::ShadowAck) if self.shadow.is_some() => {
                self.shadow_ack(&h, seq, &e)
            }
            Ok(MsgType::WriteAck) => {
                if serial_after(seq, self.acked) {
                    self.acked = seq;
                }
                if !is_tail {
                    let (mut io, node) = self.io(cfg, objs, cp);
                    node.receive_ack(&mut io, seq, is_head);
                }
            }
            _ => self.counters.malformed += 1,
        }
    }

    /// The controller's new chain (§5.2 failures): head take-over, a new
    /// successor gets the whole unacked log, a new tail commits what it
    /// applied and acknowledges it.
    fn set_chain(
        &mut self,
        cfg: &SroConfig,
        objs: &Objects,
        m: &ControlMessage,
        cp: &mut ControlPlane<'_>,
    ) {
        let chain: Vec<Rid> = m
            .body
            .chunks_exact(2)
            .map(|c| u16::from_be_bytes([c[0], c[1]]))
            .collect();
        let me = cfg.me.rid;
        if !chain.contains(&me) {
            if self.joiner.is_none() {
                self.stopped = true;
            }
            return;
        }
        let joined = self.joiner.take().is_some();
        cfg.facts.record(Fact::Role {
            t: cp.now(),
            rid: me,
            chain: chain.clone(),
        });
        let old_succ = self.io(cfg, objs, cp).0.successor;
        let was_tail = self.is_tail(me);
        let old_tail = self.chain.last().copied();
        self.chain = chain;
        let is_head = self.is_head(me);
        let is_tail = self.is_tail(me);
        if self.chain.last().copied() != old_tail || joined {
            let role = self.role_entry(cfg);
            cp.table_modify(objs.role, MatchSpec::Exact(vec![0u8].into()), role);
        }
        if was_tail && !is_tail {
            self.hand_over(cfg, objs, cp);
        }
        let (mut io, node) = self.io(cfg, objs, cp);
        if io.successor.is_some() && io.successor != old_succ {
            node.resend(&mut io);
        }
        if is_tail && !was_tail {
            node.take_over_tail(&mut io, is_head);
        }
    }

    /// Origin: releases every held write whose seq the tail's cumulative
    /// ack covers (or this replica, as the tail, applied), translated with
    /// the committed value; a NOOP's proposed port goes back to the pool.
    fn release_ready(&mut self, cfg: &SroConfig, cp: &mut ControlPlane<'_>) {
        let me = cfg.me.rid;
        let tail_applied = self.is_tail(me).then(|| self.node.applied());
        let ready: Vec<(u32, u32, NatValue)> = self
            .node
            .mine
            .iter()
            .filter(|(_, &(seq, _))| {
                !serial_after(seq, self.acked) || tail_applied.is_some_and(|a| seq <= a)
            })
            .map(|(&r, &(s, v))| (r, s, v))
            .collect();
        for (req, _seq, value) in ready {
            self.node.mine.remove(&req);
            let Some(h) = self.held.remove(&req) else {
                continue;
            };
            self.by_key.remove(&h.key);
            let n = h.packets.len() as u32;
            for (mut frame, _port) in h.packets {
                if let Ok(p) = parse(&frame) {
                    if let Some(p) = core::flow(&p) {
                        core::translate(
                            &mut frame,
                            &p,
                            Direction::Outbound,
                            Endpoint::new(value.ip, value.port),
                        );
                        cp.packet_out(frame, PacketOutDest::Port(cfg.outside_port));
                    }
                }
            }
            if value != h.proposed {
                self.pool.free.push(h.proposed.port);
                self.counters.ports_returned += 1;
            }
            self.counters.released += 1;
            cfg.facts.record(Fact::Release {
                t: cp.now(),
                rid: me,
                req,
                key: h.key,
                value,
                packets: n,
            });
        }
        let held = &self.held;
        self.node.mine.retain(|r, _| held.contains_key(r));
    }
}

/// `a` is after `b` in 32-bit serial arithmetic.
fn serial_after(a: u32, b: u32) -> bool {
    crate::sro::program::serial_gt(a, b)
}
