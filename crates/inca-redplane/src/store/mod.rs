//! The RedPlane state store server (specs/redplane.md §3.4, §5.6, §5.7,
//! §5.9 "Store side") as a sans-IO device, kind "redplane-store".
//!
//! - [`config`] — [`StoreConfig`] / [`WorkerConfig`] (serde, snake_case).
//! - [`apps`] — [`StoreApp`]: K, V, `store_init`, shard mapping, partitions,
//!   for every app of §7.
//! - [`worker`] — one shard (a worker port): records, the §5.6 rules, the
//!   replication log, commit, snapshot staging.
//! - [`membership`] — chain membership from heartbeats (`inca_chain`'s,
//!   re-exported); the chain protocol itself is `inca_chain`'s too, driven
//!   by the workers.
//! - [`observer`] — the hook reporting commits and grants to a verifier.
//! - [`stats`] — counters.
//!
//! The server has one port (0) towards its gateway. Requests on UDP
//! 8000 + w go to worker w; chain traffic uses the worker port + 1000;
//! heartbeats use UDP 9000 (the port map is an [`inca_server::PortDemux`]).
//! Capacity model: each worker is a FIFO server taking `service_time` per
//! request (and per chain update it applies), with at most `worker_queue`
//! requests admitted and unfinished (an [`inca_server::ServiceQueue`]); its
//! replies leave when it finishes. [our choice] The state transition happens when the request
//! arrives (in arrival order, which is the order the worker would serve it
//! in); only its outputs are delayed by the queueing and service time.
//! Frames are released in time order by an [`inca_server::TxQueue`] with
//! one service time of slack (directly when due within it, otherwise
//! through its queue of at most [`TX_QUEUE_LIMIT`] frames), so one port's
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
//! - A replica that restarts (state lost), or finds itself removed from
//!   the view while alive, drops its state and rejoins as the new tail
//!   (chain recovery, §5.7): once the others count it as out, it sends JOIN
//!   (UDP 9000 → 9000: type 0x16 | view version 4) to the tail of its view
//!   every heartbeat; the tail admits it behind itself (see [`membership`])
//!   and copies every worker's state to it (`worker/sync.rs`). Until the
//!   copy is installed the joiner commits nothing, so the chain's commits
//!   pause for the length of the transfer; a joiner whose source leaves the
//!   chain, or whose transfer stalls for `heartbeat_misses` heartbeats,
//!   leaves and asks again. A chain whose members all lost their state does
//!   not re-form (its data is gone; serving empty records would silently
//!   hand out fresh state for live flows). A server without a chain just
//!   restarts empty.
//! - Requests from a source not in `allowed_switches` (when the list is
//!   non-empty) are dropped without an answer and counted
//!   (`from_unknown_switch`): answering would make the store a reflector.
//!   An empty list admits any source, for stand-alone use; scenarios get
//!   their RedPlane switches' addresses filled in by the scenario factory.
//! - Snapshot entries from a switch that does not own the partition's lease
//!   are rejected (LEASE_REJECT), never staged. A LEASE_NEW on a partition
//!   is answered with one SNAPSHOT_RESTORE per entry, the last carrying the
//!   packet.
//! - A fence more than 2^14 behind last_seq is dragged up behind it, so
//!   RFC 1982 comparisons stay defined for long-lived owners.

pub mod apps;
pub mod config;
pub mod observer;
pub mod stats;
pub mod worker;

use std::any::Any;
use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;

use inca_chain::Role;
use inca_server::{
    DemuxError, PortDemux, QueueBound, ServerAddr, ServiceQueue, TxQueue, Undeliverable,
};
use inca_sim::engine::Node;
use inca_sim::metrics::NodeReport;
use inca_switch::device::{Device, DeviceRng, Input, Nanos, Output};
use inca_wire::redplane::{
    self as rp, build_rp_frame, chain_port, rp_endpoints, HeadAnnounceRepr, HeartbeatRepr,
};

pub use apps::{AppConfig, InitResult, ShardCtx, SnapshotLayout, StoreApp};
pub use config::{StoreConfig, StoreConfigError, WorkerConfig};
pub use inca_chain::membership;
pub use inca_chain::Membership;
pub use observer::{CommitEvent, GrantEvent, GrantKind, StoreObserver};
pub use stats::Stats;
pub use worker::{Env, Record, Worker};

/// Why a store server cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// The configuration is refused (the message names the field).
    #[error(transparent)]
    Config(#[from] StoreConfigError),
    /// The heartbeat port cannot be bound.
    #[error("{0}")]
    ControlPort(DemuxError),
    /// A worker's request or chain port cannot be bound.
    #[error("workers: {source}")]
    WorkerPort {
        /// The worker.
        worker: u16,
        /// Why.
        source: DemuxError,
    },
}

/// JOIN: a member out of its chain asks the tail to admit it (UDP 9000 →
/// 9000): type 1 | the sender's view version 4.
pub const JOIN_TYPE: u8 = 0x16;

/// Frames the transmit queue holds [our choice: far above what
/// `worker_queue` requests of 63 workers produce; beyond it frames are
/// dropped and counted as `tx_queue_drops`].
pub const TX_QUEUE_LIMIT: usize = 1 << 20;

const TOKEN_TX: u64 = 1;
const TOKEN_HEARTBEAT: u64 = 2;
const TOKEN_WORKER: u64 = 100;

/// Which handler a UDP port leads to.
#[derive(Debug, Clone, Copy)]
enum Route {
    /// A worker's request port (8000 + w): worker index.
    Request(usize),
    /// A worker's chain port (the request port + 1000): worker index.
    Chain(usize),
    /// Heartbeats and JOINs (UDP 9000).
    Control,
}

/// A state-store server. See the module documentation.
pub struct StoreServer {
    cfg: StoreConfig,
    workers: Vec<Worker>,
    /// One per worker, by index: the worker's CPU.
    queues: Vec<ServiceQueue>,
    demux: PortDemux<Route>,
    membership: Option<Membership>,
    role: Role,
    restarted: bool,
    stats: Stats,
    observer: Option<Box<dyn StoreObserver>>,
    tx: TxQueue,
    /// Frames produced by this input, with the time each may leave.
    scratch: Vec<(Nanos, Vec<u8>)>,
    armed: BTreeMap<u64, Nanos>,
    forced: Vec<(u64, Nanos)>,
    seen_switches: BTreeSet<Ipv4Addr>,
    /// When this node last left its chain (JOINs wait a heartbeat after it,
    /// so heartbeats it sent before are no longer in flight).
    out_since: Nanos,
    /// While a state transfer is being received: the member sending it.
    join_source: Option<Ipv4Addr>,
    /// When the transfer last made progress.
    sync_progress: Nanos,
}

impl StoreServer {
    /// A server from a validated configuration.
    pub fn new(cfg: StoreConfig) -> Result<Self, StoreError> {
        cfg.validate()?;
        let workers: Vec<Worker> = cfg.workers.iter().cloned().map(Worker::new).collect();
        let mut demux = PortDemux::new(cfg.ip);
        demux
            .bind(rp::NODE_CONTROL_PORT, Route::Control)
            .map_err(StoreError::ControlPort)?;
        for (i, w) in workers.iter().enumerate() {
            demux
                .bind(w.port, Route::Request(i))
                .and_then(|()| demux.bind(chain_port(w.port), Route::Chain(i)))
                .map_err(|source| StoreError::WorkerPort {
                    worker: w.number,
                    source,
                })?;
        }
        let queue = QueueBound::Requests(cfg.worker_queue);
        let queues = vec![ServiceQueue::new(queue); workers.len()];
        let tx = TxQueue::new(0, cfg.service_time, TX_QUEUE_LIMIT);
        let mut s = StoreServer {
            cfg,
            workers,
            queues,
            demux,
            membership: None,
            role: Role::default(),
            restarted: false,
            stats: Stats::default(),
            observer: None,
            tx,
            scratch: Vec::new(),
            armed: BTreeMap::new(),
            forced: Vec::new(),
            seen_switches: BTreeSet::new(),
            out_since: 0,
            join_source: None,
            sync_progress: 0,
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
        match self.demux.handler(rp::STORE_PORT_BASE.checked_add(w)?)? {
            Route::Request(i) => self.workers.get(i),
            Route::Chain(_) | Route::Control => None,
        }
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
            let m = if self.restarted {
                // It lost its state (and its view): out until it rejoins.
                for w in &mut self.workers {
                    w.await_sync();
                }
                self.out_since = now;
                Membership::restarted(self.cfg.chain.clone(), self.cfg.ip, now)
            } else {
                Membership::new(self.cfg.chain.clone(), self.cfg.ip, now)
            };
            self.membership = Some(m);
        }
        self.join_source = None;
        self.role = self.compute_role();
    }

    fn compute_role(&self) -> Role {
        match &self.membership {
            None => Role::alone(self.cfg.ip),
            Some(m) => Role::of(m),
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
            addr: self.cfg.addr(),
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
        match self.queues[i].admit(now, self.cfg.service_time) {
            Ok(a) => Some(a.done),
            Err(_full) => {
                self.stats.queue_drops += 1;
                None
            }
        }
    }

    fn send_now(&mut self, now: Nanos, dst: Ipv4Addr, sport: u16, dport: u16, payload: &[u8]) {
        let ServerAddr {
            ip,
            mac,
            gateway_mac,
        } = self.cfg.addr();
        let ep = rp_endpoints(mac, ip, gateway_mac, dst, 0);
        if let Ok(f) = build_rp_frame(&ep, sport, dport, payload) {
            self.scratch.push((now, f));
        }
    }

    fn on_frame(&mut self, now: Nanos, frame: &[u8]) {
        self.stats.rx_frames += 1;
        let (route, info) = match self.demux.dispatch(frame) {
            Ok(d) => d,
            Err(Undeliverable::Malformed(_)) => {
                self.stats.malformed += 1;
                return;
            }
            Err(Undeliverable::NotForMe(_)) => {
                self.stats.not_for_me += 1;
                return;
            }
            Err(Undeliverable::UnknownPort(_)) => {
                self.stats.unknown_port += 1;
                return;
            }
        };
        match route {
            Route::Request(i) => self.on_request(now, i, &info),
            Route::Control => match info.payload.first().copied() {
                Some(JOIN_TYPE) => self.on_join(now, &info),
                _ => self.on_heartbeat(now, &info),
            },
            Route::Chain(i) => match info.payload.first().copied() {
                Some(worker::SYNC_TYPE) => self.on_sync(now, i, &info),
                Some(worker::SYNC_ACK_TYPE) => self.on_sync_ack(now, i, &info),
                _ => self.on_chain(now, i, &info),
            },
        }
    }

    /// Whether this node may act as head now: it is head and has heard a
    /// quorum of its chain (see [`Membership::quorum_within`]) within the
    /// detection limit less half an interval (a leader lease [our choice]).
    /// The others remove a head only after hearing nothing from it for the
    /// full limit, and a new head holds every lease a full period from
    /// then; a head cut off from them stops granting and renewing before
    /// that, so no lease it gives outlives the ones its successor honours.
    fn serving(&self, now: Nanos) -> bool {
        let interval = self.cfg.heartbeat_interval;
        let limit = interval.saturating_mul(u64::from(self.cfg.heartbeat_misses));
        self.role.is_head
            && self
                .membership
                .as_ref()
                .is_none_or(|m| m.quorum_within(now, limit.saturating_sub(interval / 2)))
    }

    fn on_request(&mut self, now: Nanos, i: usize, info: &rp::UdpFrameInfo<'_>) {
        let from = info.src_ip;
        if !self.cfg.allowed_switches.is_empty() && !self.cfg.allowed_switches.contains(&from) {
            self.stats.from_unknown_switch += 1;
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
        if !self.serving(now) {
            // Cut off from its chain's quorum: it may have been replaced,
            // so it grants, renews and writes nothing (the switch resends).
            self.stats.no_quorum += 1;
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
        // The sender's whole view follows the fixed header [our choice];
        // a heartbeat without it carries only its removals.
        let ext = &info.payload[rp::HEARTBEAT_LEN..];
        let view = if ext.is_empty() {
            None
        } else {
            let Some(v) = m.decode_entries(ext) else {
                self.stats.malformed += 1;
                return;
            };
            Some(v)
        };
        if m.on_heartbeat(
            now,
            info.src_ip,
            hb.removed(),
            hb.flags() & 1 != 0,
            view.as_deref(),
        ) {
            self.view_changed(now);
        }
    }

    /// Sends this node's view to every other member.
    fn send_heartbeats(&mut self, now: Nanos) {
        let Some(m) = &self.membership else {
            return;
        };
        let mut hb = HeartbeatRepr {
            config_version: m.version(),
            removed: m.removed(),
            flags: u8::from(m.learning()),
        }
        .to_vec();
        hb.extend_from_slice(&m.encode_entries());
        for o in m.others() {
            self.send_now(now, o, rp::NODE_CONTROL_PORT, rp::NODE_CONTROL_PORT, &hb);
            self.stats.heartbeats_sent += 1;
        }
    }

    fn heartbeat(&mut self, now: Nanos) {
        let Some(m) = &mut self.membership else {
            return;
        };
        let changed = m.tick(now, self.cfg.heartbeat_interval, self.cfg.heartbeat_misses);
        self.send_heartbeats(now);
        if changed {
            self.view_changed(now);
        }
        self.rejoin_step(now);
        self.scratch_timer(TOKEN_HEARTBEAT, now + self.cfg.heartbeat_interval);
    }

    /// Once per heartbeat: a node out of its chain asks the tail to admit
    /// it; a joiner whose transfer stalled gives up (and asks again later).
    fn rejoin_step(&mut self, now: Nanos) {
        let interval = self.cfg.heartbeat_interval;
        let stall = interval.saturating_mul(u64::from(self.cfg.heartbeat_misses));
        let Some(m) = &mut self.membership else {
            return;
        };
        if m.in_chain() {
            if self.join_source.is_some() && now > self.sync_progress + stall {
                self.stats.syncs_abandoned += 1;
                m.leave();
                self.view_changed(now);
            }
            return;
        }
        if m.learning() || now < self.out_since + interval {
            return;
        }
        let Some(tail) = m.tail() else {
            // Nobody is left to copy the state from.
            return;
        };
        let mut b = vec![JOIN_TYPE];
        b.extend_from_slice(&m.version().to_be_bytes());
        self.send_now(now, tail, rp::NODE_CONTROL_PORT, rp::NODE_CONTROL_PORT, &b);
        self.stats.join_requests += 1;
    }

    /// JOIN from a member out of the chain: the tail admits it behind itself
    /// and starts copying its state, if it is not copying to another one.
    fn on_join(&mut self, now: Nanos, info: &rp::UdpFrameInfo<'_>) {
        let from = info.src_ip;
        if info.payload.len() < 5 {
            self.stats.malformed += 1;
            return;
        }
        let Some(m) = &mut self.membership else {
            self.stats.not_member += 1;
            return;
        };
        if !m.is_member(from) || from == self.cfg.ip {
            self.stats.not_member += 1;
            return;
        }
        let busy = self.join_source.is_some()
            || self.workers.iter().any(|w| w.syncing() || w.sending_sync());
        if !self.role.in_chain || !self.role.is_tail || busy || m.is_live(from) {
            return;
        }
        // Only a tail that hears a quorum of the configuration (the joiner
        // counts: it is heard) changes the view by admitting.
        let interval = self.cfg.heartbeat_interval;
        if !m.quorum_within(now, interval + interval / 2) {
            self.stats.no_quorum += 1;
            return;
        }
        if !m.admit(from) {
            return;
        }
        self.stats.joins_admitted += 1;
        self.view_changed(now);
        if self.role.successor != Some(from) {
            return;
        }
        // Spread the new view at once, ahead of the copy: the head must
        // take acks from the new tail, which must know where its copy
        // comes from before the first chunk arrives.
        self.send_heartbeats(now);
        for i in 0..self.workers.len() {
            self.with_worker(i, now, now, |w, env| w.start_sync_out(env, from));
        }
    }

    /// A SYNC chunk from the member copying its state to this joiner.
    fn on_sync(&mut self, now: Nanos, i: usize, info: &rp::UdpFrameInfo<'_>) {
        let from = info.src_ip;
        // While a copy is received its source is the predecessor (else the
        // join was abandoned); a late resend of an installed copy is
        // answered by the worker.
        if !self.role.in_chain || Some(from) != self.role.predecessor {
            self.stats.not_member += 1;
            return;
        }
        let Some(done) = self.admit(i, now) else {
            return;
        };
        let is_tail = self.role.is_tail;
        let payload = info.payload;
        self.with_worker(i, now, done, |w, env| {
            w.sync_chunk(env, from, payload, is_tail)
        });
        self.sync_progress = now;
        if self.join_source.is_some() && self.workers.iter().all(|w| !w.syncing()) {
            self.join_source = None;
            self.stats.rejoins += 1;
        }
    }

    /// SYNC_ACK from the joiner this node is copying to.
    fn on_sync_ack(&mut self, now: Nanos, i: usize, info: &rp::UdpFrameInfo<'_>) {
        let from = info.src_ip;
        if !self.role.in_chain || Some(from) != self.role.successor {
            self.stats.not_member += 1;
            return;
        }
        let payload = info.payload;
        self.with_worker(i, now, now, |w, env| w.sync_ack(env, from, payload));
    }

    /// Applies a membership change: new head, new tail, new successor.
    fn view_changed(&mut self, now: Nanos) {
        self.stats.reconfigurations += 1;
        let role = self.compute_role();
        let old = std::mem::replace(&mut self.role, role);
        let new = self.role.clone();
        let n = self.workers.len();
        if !new.in_chain {
            if old.in_chain || self.join_source.is_some() {
                // Removed while alive (or gave up a transfer): its state may
                // miss updates, so it is dropped and copied again on rejoin.
                for w in &mut self.workers {
                    w.await_sync();
                }
                self.stats.left_chain += 1;
                self.out_since = now;
                self.join_source = None;
            }
            return;
        }
        if !old.in_chain {
            // Just admitted: the predecessor copies the state to it.
            self.join_source = new.predecessor;
            self.sync_progress = now;
            if new.predecessor.is_none() {
                self.abandon_join(now);
                return;
            }
        } else if self.join_source.is_some() && new.predecessor != self.join_source {
            // The copy's source left: nobody will finish it.
            self.abandon_join(now);
            return;
        }
        if new.successor != old.successor {
            for w in &mut self.workers {
                w.cancel_sync_out();
            }
        }
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

    fn abandon_join(&mut self, now: Nanos) {
        self.stats.syncs_abandoned += 1;
        if let Some(m) = &mut self.membership {
            m.leave();
        }
        self.view_changed(now);
        // Tell the others at once, so they stop waiting for this node.
        self.send_heartbeats(now);
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
        // the queue (see the module documentation).
        self.tx.release(now, self.scratch.drain(..), out);
        for (token, at) in self.forced.drain(..) {
            self.armed.insert(token, at);
            out.push(Output::Timer { at, token });
        }
        if let Some(at) = self.tx.next_due() {
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
                    let serving = self.serving(now);
                    self.with_worker(i, now, now, |w, env| w.wake(env, rto, is_head, serving));
                }
            }
            _ => {}
        }
    }
}

impl Device for StoreServer {
    fn start(&mut self, now: Nanos, _rng: &mut DeviceRng, out: &mut Vec<Output>) {
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
            Input::Control(_) | Input::LinkState { .. } | Input::Session(_) => {}
        }
        self.flush(now, out);
    }

    fn restart(&mut self, now: Nanos, rng: &mut DeviceRng, out: &mut Vec<Output>) {
        for w in &mut self.workers {
            w.reset();
        }
        for q in &mut self.queues {
            q.reset();
        }
        self.tx.clear();
        self.scratch.clear();
        self.armed.clear();
        self.forced.clear();
        self.seen_switches.clear();
        // A replica that lost its state must not rejoin as if it had it (it
        // rejoins with a copy); a lone server just starts empty.
        self.restarted = self.cfg.replicated();
        self.start(now, rng, out);
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
            .insert("tx_queue_drops".into(), self.tx.stats().dropped);
        r.counters
            .insert("is_head".into(), u64::from(self.role.is_head));
        r.counters
            .insert("chain_length".into(), self.chain_view().len() as u64);
        r.counters.insert(
            "in_chain".into(),
            u64::from(self.role.in_chain && self.join_source.is_none()),
        );
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
