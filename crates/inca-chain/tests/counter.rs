//! A second user of the shared chain, without RedPlane: a replicated
//! counter over three nodes. A client adds numbers (each request once,
//! whatever the resends); the head orders them, the chain replicates them,
//! and the client's reply waits for the commit. Messages are lost at
//! random, the head crashes mid-run, and it restarts empty and rejoins as
//! the tail through a state copy. At the end every live member holds the
//! same counter, equal to the sum of every request, each counted once.
//!
//! Everything here but the protocol is the test's own: the messages (Rust
//! values, not bytes, except the chain updates and acks the protocol sees
//! as bytes), the network, the client, the state copy.

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;

use inca_chain::{
    ChainEvent, ChainIo, ChainNode, Commit, Entry, Membership, Replica, Role, Traffic,
};

type Nanos = u64;
const MS: Nanos = 1_000_000;
const HB: Nanos = 10 * MS;
const MISSES: u32 = 3;
const RTO: Nanos = 5 * MS;
const LATENCY: Nanos = 50_000;
const CLIENT_RTO: Nanos = 20 * MS;
const MAX_EARLY: usize = 64;

fn ip(n: u8) -> Ipv4Addr {
    Ipv4Addr::new(10, 0, 0, n)
}

/// One increment: the client's request id and the amount.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Add {
    req: u32,
    amount: u64,
}

#[derive(Debug, Clone)]
enum Msg {
    Heartbeat {
        view: Vec<Entry>,
        removed: u32,
        restarted: bool,
    },
    /// A chain update or ack (the bytes the protocol sends).
    Chain(Vec<u8>),
    Request(Add),
    Reply(u32),
    Join,
    State {
        session: u32,
        sum: u64,
        seen: Vec<u32>,
    },
}

const CLIENT: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 100);

/// Update: 0x01 | id 4 | req 4 | amount 8. Ack: 0x02 | id 4.
fn encode_update(id: u32, a: Add) -> Vec<u8> {
    let mut b = vec![1];
    b.extend_from_slice(&id.to_be_bytes());
    b.extend_from_slice(&a.req.to_be_bytes());
    b.extend_from_slice(&a.amount.to_be_bytes());
    b
}

/// The transport of one call: what the node sends goes to `out`.
struct Io {
    now: Nanos,
    successor: Option<Ipv4Addr>,
    predecessors: Vec<Ipv4Addr>,
    out: Vec<(Ipv4Addr, Msg)>,
    counts: BTreeMap<String, u64>,
}

impl ChainIo for Io {
    fn now(&self) -> Nanos {
        self.now
    }
    fn done(&self) -> Nanos {
        self.now
    }
    fn successor(&self) -> Option<Ipv4Addr> {
        self.successor
    }
    fn predecessors(&self) -> &[Ipv4Addr] {
        &self.predecessors
    }
    fn window(&self) -> usize {
        1024
    }
    fn send(&mut self, to: Ipv4Addr, bytes: &[u8], traffic: Traffic) {
        *self.counts.entry(format!("{traffic:?}")).or_default() += 1;
        self.out.push((to, Msg::Chain(bytes.to_vec())));
    }
    fn count(&mut self, event: ChainEvent) {
        *self.counts.entry(format!("{event:?}")).or_default() += 1;
    }
}

struct Node {
    m: Membership,
    role: Role,
    chain: Replica<Add, u32>,
    sum: u64,
    /// Request id → the update that added it.
    seen: BTreeMap<u32, u32>,
    out_since: Nanos,
}

impl Node {
    fn new(me: Ipv4Addr, members: &[Ipv4Addr], now: Nanos, restarted: bool) -> Node {
        let m = if restarted {
            Membership::restarted(members.to_vec(), me, now)
        } else {
            Membership::new(members.to_vec(), me, now)
        };
        let mut chain = Replica::new(MAX_EARLY);
        if restarted {
            chain.await_state();
        }
        let role = Role::of(&m);
        Node {
            m,
            role,
            chain,
            sum: 0,
            seen: BTreeMap::new(),
            out_since: now,
        }
    }

    fn io(&self, now: Nanos) -> Io {
        Io {
            now,
            successor: self.role.successor,
            predecessors: self.role.predecessors.clone(),
            out: Vec::new(),
            counts: BTreeMap::new(),
        }
    }

    fn add(&mut self, id: u32, a: Add) {
        if !self.seen.contains_key(&a.req) {
            self.sum += a.amount;
        }
        self.seen.entry(a.req).or_insert(id);
    }

    fn on_request(&mut self, io: &mut Io, a: Add) {
        if !self.role.is_head || self.chain.joining() {
            return;
        }
        if let Some(&id) = self.seen.get(&a.req) {
            // Ordered already (maybe by the old head): answer once it commits.
            let wait = self.chain.uncommitted(id);
            if let Some(r) = self.chain.hold(wait, a.req) {
                io.out.push((CLIENT, Msg::Reply(r)));
            }
            return;
        }
        let id = self.chain.next_id();
        self.add(id, a);
        if self.role.is_tail {
            self.commit_alone(io, id, a);
        } else {
            self.append(io, id, a, encode_update(id, a));
        }
        if let Some(r) = self.chain.hold(Some(id), a.req) {
            io.out.push((CLIENT, Msg::Reply(r)));
        }
    }

    fn on_chain(&mut self, io: &mut Io, from: Ipv4Addr, b: &[u8]) {
        if !self.role.in_chain {
            return;
        }
        match b.first() {
            Some(1) if Some(from) == self.role.predecessor => {
                let is_tail = self.role.is_tail;
                self.receive_update(io, b, is_tail);
            }
            Some(2) if b.len() == 5 && Some(from) == self.role.tail => {
                let id = u32::from_be_bytes([b[1], b[2], b[3], b[4]]);
                let is_head = self.role.is_head;
                self.receive_ack(io, id, is_head);
            }
            _ => {}
        }
    }

    fn heartbeats(&self, io: &mut Io) {
        for o in self.m.others() {
            io.out.push((
                o,
                Msg::Heartbeat {
                    view: self.m.entries().to_vec(),
                    removed: self.m.removed(),
                    restarted: self.m.learning(),
                },
            ));
        }
    }

    fn tick(&mut self, io: &mut Io) {
        let now = io.now;
        if now.is_multiple_of(HB) {
            if self.m.tick(now, HB, MISSES) {
                self.view_changed(io);
            }
            self.heartbeats(io);
            // Out of the chain (or admitted but not yet copied): ask the tail.
            let asking = !self.m.in_chain() || self.chain.joining();
            if asking && !self.m.learning() && now >= self.out_since + HB {
                let to = if self.m.in_chain() {
                    self.role.predecessor
                } else {
                    self.m.tail()
                };
                if let Some(t) = to {
                    io.out.push((t, Msg::Join));
                }
            }
        }
        if self.role.is_head && self.chain.resend_at(RTO).is_some_and(|t| now >= t) {
            self.resend(io);
        }
    }

    fn on_heartbeat(&mut self, io: &mut Io, from: Ipv4Addr, view: &[Entry], removed: u32, r: bool) {
        if self.m.on_heartbeat(io.now, from, removed, r, Some(view)) {
            self.view_changed(io);
        }
    }

    fn on_join(&mut self, io: &mut Io, from: Ipv4Addr) {
        if !self.role.is_tail && self.role.successor != Some(from) {
            return;
        }
        if self.role.is_tail {
            if !self.m.quorum_within(io.now, HB + HB / 2) || !self.m.admit(from) {
                return;
            }
            self.view_changed(io);
            self.heartbeats(io);
        }
        if self.role.successor == Some(from) {
            io.out.push((
                from,
                Msg::State {
                    session: self.chain.applied(),
                    sum: self.sum,
                    seen: self.seen.keys().copied().collect(),
                },
            ));
        }
    }

    fn on_state(&mut self, io: &mut Io, from: Ipv4Addr, session: u32, sum: u64, seen: &[u32]) {
        if !self.chain.joining() || Some(from) != self.role.predecessor {
            return;
        }
        self.sum = sum;
        self.seen = seen.iter().map(|&r| (r, session)).collect();
        let is_tail = self.role.is_tail;
        self.install(io, session, is_tail);
    }

    fn view_changed(&mut self, io: &mut Io) {
        let old = std::mem::replace(&mut self.role, Role::of(&self.m));
        io.successor = self.role.successor;
        io.predecessors = self.role.predecessors.clone();
        let new = self.role.clone();
        if !new.in_chain {
            if old.in_chain {
                // Removed while alive: its state may miss updates, so it is
                // dropped and copied again on rejoin.
                self.sum = 0;
                self.seen.clear();
                self.chain = Replica::new(MAX_EARLY);
                self.chain.await_state();
                self.out_since = io.now;
            }
            return;
        }
        if (new.is_head && !old.is_head) || new.successor != old.successor {
            self.resend(io);
        }
        if new.is_tail && !old.is_tail {
            self.take_over_tail(io, new.is_head);
        }
    }
}

impl ChainNode<Io> for Node {
    type Entry = Add;
    type Held = u32;

    fn replica(&mut self) -> &mut Replica<Add, u32> {
        &mut self.chain
    }
    fn replica_ref(&self) -> &Replica<Add, u32> {
        &self.chain
    }
    fn decode(&self, b: &[u8]) -> Option<(u32, Add)> {
        if b.len() != 17 || b[0] != 1 {
            return None;
        }
        let id = u32::from_be_bytes(b[1..5].try_into().ok()?);
        let req = u32::from_be_bytes(b[5..9].try_into().ok()?);
        let amount = u64::from_be_bytes(b[9..17].try_into().ok()?);
        Some((id, Add { req, amount }))
    }
    fn ack_bytes(&self, id: u32) -> Vec<u8> {
        let mut b = vec![2];
        b.extend_from_slice(&id.to_be_bytes());
        b
    }
    fn apply(&mut self, _: &mut Io, id: u32, a: &Add, _: &[u8]) {
        self.add(id, *a);
    }
    fn commit(&mut self, _: &mut Io, _: &Add, _: Commit) {}
    fn release(&mut self, io: &mut Io, req: u32) {
        io.out.push((CLIENT, Msg::Reply(req)));
    }
}

struct Run {
    nodes: Vec<Option<Node>>,
    members: Vec<Ipv4Addr>,
    queue: BTreeMap<(Nanos, u64), (Ipv4Addr, Ipv4Addr, Msg)>,
    next: u64,
    rng: u64,
    counts: BTreeMap<String, u64>,
    acked: BTreeSet<u32>,
}

impl Run {
    fn rand(&mut self) -> u64 {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        self.rng
    }

    fn send(&mut self, now: Nanos, from: Ipv4Addr, to: Ipv4Addr, msg: Msg) {
        // 2% of messages are lost.
        if self.rand() % 100 < 2 {
            *self.counts.entry("lost".into()).or_default() += 1;
            return;
        }
        self.next += 1;
        self.queue
            .insert((now + LATENCY, self.next), (from, to, msg));
    }

    fn flush(&mut self, now: Nanos, from: Ipv4Addr, io: Io) {
        for (k, v) in io.counts {
            *self.counts.entry(k).or_default() += v;
        }
        for (to, msg) in io.out {
            self.send(now, from, to, msg);
        }
    }

    fn deliver(&mut self, now: Nanos, from: Ipv4Addr, to: Ipv4Addr, msg: Msg) {
        if to == CLIENT {
            if let Msg::Reply(r) = msg {
                self.acked.insert(r);
            }
            return;
        }
        let i = self.members.iter().position(|&m| m == to).unwrap();
        let Some(n) = self.nodes[i].as_mut() else {
            return; // crashed
        };
        let mut io = n.io(now);
        match msg {
            Msg::Heartbeat {
                view,
                removed,
                restarted,
            } => n.on_heartbeat(&mut io, from, &view, removed, restarted),
            Msg::Chain(b) => n.on_chain(&mut io, from, &b),
            Msg::Request(a) => n.on_request(&mut io, a),
            Msg::Join => n.on_join(&mut io, from),
            Msg::State { session, sum, seen } => n.on_state(&mut io, from, session, sum, &seen),
            Msg::Reply(_) => {}
        }
        self.flush(now, to, io);
    }
}

fn amount(req: u32) -> u64 {
    u64::from(req % 7 + 1)
}

#[test]
fn a_replicated_counter_survives_a_head_crash_and_rejoin() {
    for seed in 1..=8u64 {
        println!("seed {seed}");
        let members = vec![ip(1), ip(2), ip(3)];
        let mut run = Run {
            nodes: members
                .iter()
                .map(|&m| Some(Node::new(m, &members, 0, false)))
                .collect(),
            members: members.clone(),
            queue: BTreeMap::new(),
            next: 0,
            rng: 0x9e37_79b9_7f4a_7c15 ^ seed.wrapping_mul(0x2545_f491_4f6c_dd1d),
            counts: BTreeMap::new(),
            acked: BTreeSet::new(),
        };
        let requests = 700u32;
        let mut sent_at: BTreeMap<u32, Nanos> = BTreeMap::new();
        let end = 1200 * MS;
        let mut now = 0;
        while now <= end {
            // Messages due before the next millisecond tick.
            while let Some((&(t, k), _)) = run.queue.first_key_value() {
                if t > now {
                    break;
                }
                let (from, to, msg) = run.queue.remove(&(t, k)).unwrap();
                run.deliver(t, from, to, msg);
            }
            if now == 200 * MS {
                run.nodes[0] = None; // the head crashes
            }
            if now == 400 * MS {
                run.nodes[0] = Some(Node::new(ip(1), &members, now, true));
            }
            for (i, &me) in members.iter().enumerate() {
                if let Some(n) = run.nodes[i].as_mut() {
                    let mut io = n.io(now);
                    n.tick(&mut io);
                    run.flush(now, me, io);
                }
            }
            // The client: one new request per millisecond, resends of
            // unanswered ones to every member (only the head takes them).
            let new = (now / MS) as u32 + 1;
            if new <= requests {
                sent_at.insert(new, 0);
            }
            let due: Vec<u32> = sent_at
                .iter()
                .filter(|&(r, &t)| !run.acked.contains(r) && (t == 0 || now >= t + CLIENT_RTO))
                .map(|(&r, _)| r)
                .collect();
            for r in due {
                sent_at.insert(r, now);
                for &m in &members {
                    let a = Add {
                        req: r,
                        amount: amount(r),
                    };
                    run.send(now, CLIENT, m, Msg::Request(a));
                }
            }
            now += MS;
        }
        let want: u64 = (1..=requests).map(amount).sum();
        assert_eq!(
            run.acked.len(),
            requests as usize,
            "seed {seed}: unanswered"
        );
        for (i, n) in run.nodes.iter().enumerate() {
            let n = n.as_ref().unwrap();
            assert!(
                n.role.in_chain && !n.chain.joining(),
                "seed {seed}: node {i} out"
            );
            assert_eq!(
                n.sum, want,
                "seed {seed}: node {i} counts {} of {want}",
                n.sum
            );
            assert_eq!(
                n.chain.committed(),
                n.chain.applied(),
                "seed {seed}: node {i}"
            );
        }
        let chain = run.nodes[1].as_ref().unwrap().m.chain();
        assert_eq!(
            chain,
            vec![ip(2), ip(3), ip(1)],
            "seed {seed}: rejoined as tail"
        );
        // The machinery was exercised, not bypassed.
        let c = |k: &str| run.counts.get(k).copied().unwrap_or(0);
        assert!(
            c("lost") > 0 && c("Resend") > 0 && c("AckSent") > 0,
            "{:?}",
            run.counts
        );
        println!("seed {seed}: {:?}", run.counts);
    }
}
