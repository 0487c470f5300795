//! The RedPlane state store server (specs/redplane.md §3.4, §5.6, §5.7,
//! §5.9 "Store side") as a sans-IO device, kind "redplane-store".
//!
//! - [`config`] — [`StoreConfig`] / [`WorkerConfig`] (serde, snake_case).
//! - [`apps`] — [`StoreApp`]: K, V, `store_init`, shard mapping, partitions,
//!   for every app of §7.
//! - [`worker`] — one shard (a worker port): records, the §5.6 rules, the
//!   replication log, commit, snapshot staging.
//! - [`membership`] — chain membership from heartbeats; head/tail roles.
//! - [`observer`] — the hook reporting commits and grants to a verifier.
//! - [`stats`] — counters.
//!
//! The server has one port (0) towards its gateway. Requests on UDP
//! 8000 + w go to worker w; chain traffic uses the worker port + 1000;
//! heartbeats use UDP 9000. Capacity model: each worker is a FIFO server
//! taking `service_time` per request (and per chain update it applies), with
//! at most `worker_queue` requests waiting; its replies leave when it
//! finishes. [our choice] The state transition happens when the request
//! arrives (in arrival order, which is the order the worker would serve it
//! in); only its outputs are delayed by the queueing and service time.
//! Frames are released in time order (directly when due within one service
//! time, otherwise through an internal transmit queue), so one port's
//! transmissions never go back in time although workers finish out of
//! order; a frame may slip behind an earlier-released one by at most one
//! service time.
//!
//! Choices where the spec is silent, all [our choice]:
//! - Lease extensions by bare renewals, reads and duplicate writes are not
//!   replicated (they are not mutations of value/seq/fence/owner); this is
//!   safe because a new head treats every lease as held for a full
//!   LEASE_PERIOD (§5.7). Their acks still wait for the key's last update
//!   to commit, so acks for a key leave in commit order.
//! - Chain replication is go-back-N with a per-worker `update_id`: the head
//!   resends its uncommitted log every `chain_rto`; replicas apply in id
//!   order, keep up to 4,096 updates that arrive ahead of a gap, forward
//!   duplicates (the tail may have missed them) and the tail acknowledges
//!   cumulatively to every predecessor, so middles can trim their logs and
//!   take over as head or tail with exactly the committed prefix known.
//! - A request reaching a live chain member that is not the head is answered
//!   with a HEAD_ANNOUNCE naming the head, and dropped.
//! - A replica that restarts (state lost) leaves the chain for good; rejoin
//!   with a state transfer is not modelled. A server without a chain just
//!   restarts empty.
//! - Snapshot entries from a switch that does not own the partition's lease
//!   are rejected (LEASE_REJECT), never staged. A LEASE_NEW on a partition
//!   is answered with one SNAPSHOT_RESTORE per entry, the last carrying the
//!   packet.
//! - A fence more than 2^14 behind last_seq is dragged up behind it, so
//!   RFC 1982 comparisons stay defined for long-lived owners.

pub mod apps;
pub mod config;
pub mod membership;
pub mod observer;
pub mod stats;
pub mod worker;

use std::any::Any;
use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;

use inca_sim::engine::Node;
use inca_sim::metrics::NodeReport;
use inca_switch::device::{Device, DeviceRng, Input, Nanos, Output};
use inca_wire::redplane::{
    self as rp, build_rp_frame, parse_udp_frame, rp_endpoints, HeadAnnounceRepr, HeartbeatRepr,
};

pub use apps::{AppConfig, InitResult, ShardCtx, SnapshotLayout, StoreApp};
pub use config::{StoreConfig, WorkerConfig};
pub use membership::Membership;
pub use observer::{CommitEvent, GrantEvent, GrantKind, StoreObserver};
pub use stats::Stats;
pub use worker::{Env, Record, Worker};

const TOKEN_TX: u64 = 1;
const TOKEN_HEARTBEAT: u64 = 2;
const TOKEN_WORKER: u64 = 100;

/// This node's place in its chain, recomputed on every view change.
#[derive(Debug, Clone, Default)]
struct Role {
    in_chain: bool,
    is_head: bool,
    is_tail: bool,
    head: Option<Ipv4Addr>,
    tail: Option<Ipv4Addr>,
    successor: Option<Ipv4Addr>,
    predecessor: Option<Ipv4Addr>,
    predecessors: Vec<Ipv4Addr>,
}

/// A state-store server. See the module documentation.
pub struct StoreServer {
    cfg: StoreConfig,
    workers: Vec<Worker>,
    by_number: [Option<u8>; 64],
    membership: Option<Membership>,
    role: Role,
    restarted: bool,
    stats: Stats,
    observer: Option<Box<dyn StoreObserver>>,
    tx: BTreeMap<(Nanos, u64), Vec<u8>>,
    tx_seq: u64,
    /// Time of the last frame handed to the port.
    last_tx: Nanos,
    scratch: Vec<(Nanos, Vec<u8>)>,
    armed: BTreeMap<u64, Nanos>,
    forced: Vec<(u64, Nanos)>,
    seen_switches: BTreeSet<Ipv4Addr>,
}

impl StoreServer {
    /// A server from a validated configuration.
    pub fn new(cfg: StoreConfig) -> Result<Self, String> {
        cfg.validate()?;
        let workers: Vec<Worker> = cfg.workers.iter().cloned().map(Worker::new).collect();
        let mut by_number = [None; 64];
        for (i, w) in workers.iter().enumerate() {
            by_number[usize::from(w.number)] = Some(i as u8);
        }
        let mut s = StoreServer {
            cfg,
            workers,
            by_number,
            membership: None,
            role: Role::default(),
            restarted: false,
            stats: Stats::default(),
            observer: None,
            tx: BTreeMap::new(),
            tx_seq: 0,
            last_tx: 0,
            scratch: Vec::new(),
            armed: BTreeMap::new(),
            forced: Vec::new(),
            seen_switches: BTreeSet::new(),
        };
        s.boot(0);
        Ok(s)
    }

    /// Sets the observer (see [`observer`]).
    pub fn with_observer(mut self, observer: Box<dyn StoreObserver>) -> Self {
        self.observer = Some(observer);
        self
    }

    /// Replaces the observer.
    pub fn set_observer(&mut self, observer: Option<Box<dyn StoreObserver>>) {
        self.observer = observer;
    }

    /// The configuration.
    pub fn config(&self) -> &StoreConfig {
        &self.cfg
    }

    /// Counters.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// Worker number `w` (port 8000 + w).
    pub fn worker(&self, w: u16) -> Option<&Worker> {
        let i = self.by_number.get(usize::from(w)).copied().flatten()?;
        self.workers.get(usize::from(i))
    }

    /// Whether this node currently acts as its chain's head.
    pub fn is_head(&self) -> bool {
        self.role.is_head
    }

    /// The live chain as this node sees it (just itself without a chain).
    pub fn chain_view(&self) -> Vec<Ipv4Addr> {
        match &self.membership {
            Some(m) => m.chain(),
            None => vec![self.cfg.ip],
        }
    }

    fn boot(&mut self, now: Nanos) {
        if self.cfg.replicated() {
            let mut m = Membership::new(self.cfg.chain.clone(), self.cfg.ip, now);
            if self.restarted {
                // It lost its state: it cannot serve as a replica any more.
                m.leave();
            }
            self.membership = Some(m);
        }
        self.role = self.compute_role();
    }

    fn compute_role(&self) -> Role {
        match &self.membership {
            None => Role {
                in_chain: true,
                is_head: true,
                is_tail: true,
                head: Some(self.cfg.ip),
                tail: Some(self.cfg.ip),
                ..Role::default()
            },
            Some(m) => {
                let (head, tail) = (m.head(), m.tail());
                Role {
                    in_chain: m.in_chain(),
                    is_head: m.in_chain() && head == Some(self.cfg.ip),
                    is_tail: m.in_chain() && tail == Some(self.cfg.ip),
                    head,
                    tail,
                    successor: m.successor(),
                    predecessor: m.predecessor(),
                    predecessors: m.predecessors(),
                }
            }
        }
    }

    /// Runs `f` on worker `i` with an [`Env`] built from split borrows.
    fn with_worker<R>(
        &mut self,
        i: usize,
        now: Nanos,
        done: Nanos,
        f: impl FnOnce(&mut Worker, &mut Env<'_>) -> R,
    ) -> R {
        let mut env = Env {
            now,
            done,
            ip: self.cfg.ip,
            mac: self.cfg.mac,
            gateway_mac: self.cfg.gateway_mac,
            lease_period: self.cfg.lease_period,
            fence_gap: self.cfg.fence_gap,
            hold_timeout: self.cfg.hold_timeout,
            chain_window: self.cfg.chain_window,
            max_records: self.cfg.max_records,
            replicated: self.membership.is_some() && !(self.role.is_head && self.role.is_tail),
            successor: self.role.successor,
            head: self.role.head,
            predecessors: &self.role.predecessors,
            observer: &mut self.observer,
            stats: &mut self.stats,
            tx: &mut self.scratch,
        };
        f(&mut self.workers[i], &mut env)
    }

    /// FIFO admission to worker `i`: when it will have served this input,
    /// or `None` if its queue is full.
    fn admit(&mut self, i: usize, now: Nanos) -> Option<Nanos> {
        let service = self.cfg.service_time;
        let w = &mut self.workers[i];
        let start = w.busy_until.max(now);
        let waiting = (start - now).checked_div(service).unwrap_or(0);
        if waiting >= self.cfg.worker_queue as u64 {
            self.stats.queue_drops += 1;
            return None;
        }
        w.busy_until = start + service;
        Some(w.busy_until)
    }

    fn send_now(&mut self, now: Nanos, dst: Ipv4Addr, sport: u16, dport: u16, payload: &[u8]) {
        let ep = rp_endpoints(self.cfg.mac, self.cfg.ip, self.cfg.gateway_mac, dst, 0);
        if let Ok(f) = build_rp_frame(&ep, sport, dport, payload) {
            self.scratch.push((now, f));
        }
    }

    fn on_frame(&mut self, now: Nanos, frame: &[u8]) {
        self.stats.rx_frames += 1;
        let Ok(info) = parse_udp_frame(frame) else {
            self.stats.malformed += 1;
            return;
        };
        if info.dst_ip != self.cfg.ip {
            self.stats.not_for_me += 1;
            return;
        }
        let port = info.dst_port;
        if let Some(w) = rp::worker_of_port(port) {
            let Some(i) = self.by_number[usize::from(w)] else {
                self.stats.unknown_port += 1;
                return;
            };
            self.on_request(now, usize::from(i), &info);
        } else if port == rp::NODE_CONTROL_PORT {
            self.on_heartbeat(now, &info);
        } else if let Some(w) = rp::worker_of_port(port.wrapping_sub(rp::CHAIN_PORT_OFFSET)) {
            let Some(i) = self.by_number[usize::from(w)] else {
                self.stats.unknown_port += 1;
                return;
            };
            self.on_chain(now, usize::from(i), &info);
        } else {
            self.stats.unknown_port += 1;
        }
    }

    fn on_request(&mut self, now: Nanos, i: usize, info: &rp::UdpFrameInfo<'_>) {
        let from = info.src_ip;
        if !self.cfg.allowed_switches.is_empty() && !self.cfg.allowed_switches.contains(&from) {
            self.stats.not_allowed += 1;
            return;
        }
        if info.src_port != rp::SWITCH_PORT {
            self.stats.malformed += 1;
            return;
        }
        if self.seen_switches.len() < 4096 {
            self.seen_switches.insert(from);
        }
        if !self.role.is_head {
            // Point the switch at the head we know of [our choice].
            self.stats.not_head += 1;
            if let (Some(head), Some(m)) = (self.role.head, &self.membership) {
                if self.role.in_chain {
                    let a = HeadAnnounceRepr {
                        config_version: m.version(),
                        old_head: self.cfg.ip,
                        new_head: head,
                    };
                    self.send_now(
                        now,
                        from,
                        rp::NODE_CONTROL_PORT,
                        rp::SWITCH_PORT,
                        &a.to_vec(),
                    );
                    self.stats.announces_sent += 1;
                }
            }
            return;
        }
        let Some(done) = self.admit(i, now) else {
            return;
        };
        let (ident, payload) = (info.ident, info.payload);
        self.with_worker(i, now, done, |w, env| w.request(env, from, ident, payload));
    }

    fn on_chain(&mut self, now: Nanos, i: usize, info: &rp::UdpFrameInfo<'_>) {
        let from = info.src_ip;
        let Some(m) = &self.membership else {
            self.stats.not_member += 1;
            return;
        };
        if !m.is_member(from) || !self.role.in_chain {
            self.stats.not_member += 1;
            return;
        }
        match info.payload.first().copied().map(rp::ChainType::from_u8) {
            Some(Ok(rp::ChainType::Ack)) => {
                let Ok(ack) = rp::ChainAck::new_checked(info.payload) else {
                    self.stats.malformed += 1;
                    return;
                };
                if Some(from) != self.role.tail {
                    self.stats.not_member += 1;
                    return;
                }
                let is_head = self.role.is_head;
                self.with_worker(i, now, now, |w, env| {
                    w.chain_ack(env, ack.update_id(), is_head)
                });
            }
            Some(Ok(rp::ChainType::Update | rp::ChainType::Snap)) => {
                if Some(from) != self.role.predecessor {
                    self.stats.not_member += 1;
                    return;
                }
                let Some(done) = self.admit(i, now) else {
                    return;
                };
                let is_tail = self.role.is_tail;
                let payload = info.payload;
                self.with_worker(i, now, done, |w, env| w.chain_update(env, payload, is_tail));
            }
            _ => self.stats.malformed += 1,
        }
    }

    fn on_heartbeat(&mut self, now: Nanos, info: &rp::UdpFrameInfo<'_>) {
        let Ok(hb) = rp::Heartbeat::new_checked(info.payload) else {
            self.stats.malformed += 1;
            return;
        };
        let Some(m) = &mut self.membership else {
            self.stats.not_member += 1;
            return;
        };
        if !m.is_member(info.src_ip) {
            self.stats.not_member += 1;
            return;
        }
        if m.on_heartbeat(now, info.src_ip, hb.removed(), hb.flags() & 1 != 0) {
            self.view_changed(now);
        }
    }

    fn heartbeat(&mut self, now: Nanos) {
        let Some(m) = &mut self.membership else {
            return;
        };
        let changed = m.tick(now, self.cfg.heartbeat_interval, self.cfg.heartbeat_misses);
        let hb = HeartbeatRepr {
            config_version: m.version(),
            removed: m.removed(),
            flags: u8::from(self.restarted),
        }
        .to_vec();
        let others = m.others();
        for o in others {
            self.send_now(now, o, rp::NODE_CONTROL_PORT, rp::NODE_CONTROL_PORT, &hb);
            self.stats.heartbeats_sent += 1;
        }
        if changed {
            self.view_changed(now);
        }
        self.scratch_timer(TOKEN_HEARTBEAT, now + self.cfg.heartbeat_interval);
    }

    /// Applies a membership change: new head, new tail, new successor.
    fn view_changed(&mut self, now: Nanos) {
        self.stats.reconfigurations += 1;
        let role = self.compute_role();
        let old = std::mem::replace(&mut self.role, role);
        let new = self.role.clone();
        if !new.in_chain {
            return;
        }
        let n = self.workers.len();
        if new.is_head && !old.is_head {
            self.stats.became_head += 1;
            for i in 0..n {
                self.with_worker(i, now, now, |w, env| w.became_head(env));
            }
            self.announce(now, old.head.unwrap_or(self.cfg.ip));
        } else if new.successor != old.successor {
            for i in 0..n {
                self.with_worker(i, now, now, |w, env| w.resend_log(env));
            }
        }
        if new.is_tail && !old.is_tail {
            let is_head = new.is_head;
            for i in 0..n {
                self.with_worker(i, now, now, |w, env| w.became_tail(env, is_head));
            }
        }
    }

    /// HEAD_ANNOUNCE to every configured and every seen switch.
    fn announce(&mut self, now: Nanos, old_head: Ipv4Addr) {
        let version = self.membership.as_ref().map_or(0, |m| m.version());
        let a = HeadAnnounceRepr {
            config_version: version,
            old_head,
            new_head: self.cfg.ip,
        }
        .to_vec();
        let to: BTreeSet<Ipv4Addr> = self
            .cfg
            .allowed_switches
            .iter()
            .chain(self.seen_switches.iter())
            .copied()
            .collect();
        for s in to {
            self.send_now(now, s, rp::NODE_CONTROL_PORT, rp::SWITCH_PORT, &a);
            self.stats.announces_sent += 1;
        }
    }

    /// A timer that must be set whatever is armed (periodic ones).
    fn scratch_timer(&mut self, token: u64, at: Nanos) {
        self.forced.push((token, at));
    }

    /// Moves queued frames to the transmit queue, sends the due ones, and
    /// (re)arms timers.
    fn flush(&mut self, now: Nanos, out: &mut Vec<Output>) {
        // A frame due within one service time goes out at once (no other
        // worker can produce an earlier one any more); later ones wait in
        // the queue. Either way a frame may slip behind one already on the
        // port by at most `service_time`, which keeps the port's times
        // non-decreasing without a timer per frame.
        let horizon = now + self.cfg.service_time;
        for (at, f) in self.scratch.drain(..) {
            let at = at.max(now);
            if at <= horizon && self.tx.is_empty() {
                let at = at.max(self.last_tx);
                self.last_tx = at;
                out.push(Output::Transmit {
                    at,
                    port: 0,
                    frame: f,
                });
            } else {
                self.tx_seq += 1;
                self.tx.insert((at, self.tx_seq), f);
            }
        }
        while let Some(e) = self.tx.first_entry() {
            if e.key().0 > now {
                break;
            }
            let at = now.max(self.last_tx);
            self.last_tx = at;
            out.push(Output::Transmit {
                at,
                port: 0,
                frame: e.remove(),
            });
        }
        for (token, at) in self.forced.drain(..) {
            self.armed.insert(token, at);
            out.push(Output::Timer { at, token });
        }
        if let Some((&(at, _), _)) = self.tx.first_key_value() {
            self.arm(TOKEN_TX, at, out);
        }
        let is_head = self.role.is_head;
        for i in 0..self.workers.len() {
            if let Some(at) = self.workers[i].next_deadline(self.cfg.chain_rto, is_head) {
                self.arm(TOKEN_WORKER + i as u64, at.max(now), out);
            }
        }
    }

    fn arm(&mut self, token: u64, at: Nanos, out: &mut Vec<Output>) {
        if self.armed.get(&token) != Some(&at) {
            // A later `at` than the armed one leaves a harmless early fire.
            match self.armed.get(&token) {
                Some(&cur) if cur <= at => {}
                _ => {
                    self.armed.insert(token, at);
                    out.push(Output::Timer { at, token });
                }
            }
        }
    }

    fn on_timer(&mut self, now: Nanos, token: u64) {
        self.armed.remove(&token);
        match token {
            TOKEN_TX => {}
            TOKEN_HEARTBEAT => self.heartbeat(now),
            t if t >= TOKEN_WORKER => {
                let i = (t - TOKEN_WORKER) as usize;
                if i < self.workers.len() {
                    let (rto, is_head) = (self.cfg.chain_rto, self.role.is_head);
                    self.with_worker(i, now, now, |w, env| w.wake(env, rto, is_head));
                }
            }
            _ => {}
        }
    }
}

impl Device for StoreServer {
    fn start(&mut self, now: Nanos, out: &mut Vec<Output>) {
        self.boot(now);
        if self.membership.is_some() {
            self.scratch_timer(TOKEN_HEARTBEAT, now);
        }
        self.flush(now, out);
    }

    fn handle(&mut self, now: Nanos, input: Input, _rng: &mut DeviceRng, out: &mut Vec<Output>) {
        match input {
            Input::Frame { frame, .. } => self.on_frame(now, &frame),
            Input::Timer { token } => self.on_timer(now, token),
            Input::Control(_) | Input::LinkState { .. } => {}
        }
        self.flush(now, out);
    }

    fn restart(&mut self, now: Nanos, out: &mut Vec<Output>) {
        for w in &mut self.workers {
            w.reset();
        }
        self.tx.clear();
        self.scratch.clear();
        self.armed.clear();
        self.forced.clear();
        self.seen_switches.clear();
        // A replica that lost its state must not rejoin as if it had it; a
        // lone server just starts empty.
        self.restarted = self.cfg.replicated();
        self.start(now, out);
    }
}

impl Node for StoreServer {
    fn kind(&self) -> &'static str {
        "redplane-store"
    }

    fn report(&self, _now: Nanos) -> NodeReport {
        let mut r = NodeReport {
            counters: self.stats.to_map(),
            ..NodeReport::default()
        };
        let records: usize = self.workers.iter().map(|w| w.record_count()).sum();
        r.counters.insert("records".into(), records as u64);
        r.counters
            .insert("is_head".into(), u64::from(self.role.is_head));
        r.counters
            .insert("chain_length".into(), self.chain_view().len() as u64);
        for w in &self.workers {
            let (a, c) = w.update_ids();
            r.counters
                .insert(format!("worker{}_applied_id", w.number), u64::from(a));
            r.counters
                .insert(format!("worker{}_committed_id", w.number), u64::from(c));
        }
        r.notes.push(format!(
            "chain {:?}, head {:?}, workers {}",
            self.chain_view(),
            self.role.head,
            self.workers
                .iter()
                .map(|w| format!("{}:{}", w.number, w.app_name()))
                .collect::<Vec<_>>()
                .join(",")
        ));
        r
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
