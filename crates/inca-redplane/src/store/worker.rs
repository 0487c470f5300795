//! One store worker (a shard: this server's UDP port 8000 + w, one app):
//! the per-key records and the request rules of specs/redplane.md §5.6
//! (here), the worker's side of chain replication (§5.7, `worker/replication.rs`:
//! ordering, the log, commit, replies released in commit order) and the
//! store side of snapshots (§5.9, `worker/snapshot.rs`).
//!
//! Sans-IO: every method gets an [`Env`] (time, addresses, role in the chain,
//! the outbox) and queues frames with the time they may leave.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::net::Ipv4Addr;

use inca_chain::{ChainEvent, ChainIo, ChainNode, Commit, Replica, Traffic};
use inca_server::ServerAddr;
use inca_switch::device::{Nanos, MILLIS};
use inca_wire::redplane::{
    self as rp, build_rp_frame, chain_ack_bytes, chain_port, rp_endpoints, serial_le, serial_lt,
    AckRepr, AckType, ChainSnapRepr, ChainUpdateRepr, ReqType, RequestRepr,
};

use super::apps::StoreApp;
use super::config::WorkerConfig;
use super::observer::{CommitEvent, GrantEvent, GrantKind, LeaseEvent, StoreObserver};
use super::stats::Stats;

mod replication;
mod snapshot;
mod sync;

use inca_chain::transfer::Transfer;
use replication::{ChainEnv, LogEntry, LogKind};
use snapshot::Partition;
use sync::SyncIn;
pub use sync::{SYNC_ACK_TYPE, SYNC_TYPE, SYNC_WINDOW};

/// Deferred LEASE_NEW requests per key (§3.4).
pub const MAX_DEFERRED: usize = 32;
/// Held BUF_READs per key (§3.4).
pub const MAX_HELD: usize = 64;
/// Chain updates a replica keeps ahead of a gap [our choice].
pub const MAX_EARLY: usize = 4096;
/// Snapshot epochs staged per partition at once [our choice].
pub const MAX_STAGED_EPOCHS: usize = 4;

/// What a worker needs from its server for one call.
pub struct Env<'a> {
    /// Current time.
    pub now: Nanos,
    /// When the worker finishes this request (outputs leave then).
    pub done: Nanos,
    /// This server's addresses.
    pub addr: ServerAddr,
    /// LEASE_PERIOD.
    pub lease_period: Nanos,
    /// FENCE_GAP.
    pub fence_gap: u16,
    /// HOLD_TIMEOUT.
    pub hold_timeout: Nanos,
    /// Chain window (log bound).
    pub chain_window: usize,
    /// Max records.
    pub max_records: usize,
    /// Replicating through a chain of more than one node.
    pub replicated: bool,
    /// This node's successor in the chain.
    pub successor: Option<Ipv4Addr>,
    /// The current head (chain acks go there).
    pub head: Option<Ipv4Addr>,
    /// Live members before this node (chain acks go there too, to trim logs).
    pub predecessors: &'a [Ipv4Addr],
    /// The observer, if any.
    pub observer: &'a mut Option<Box<dyn StoreObserver>>,
    /// Counters.
    pub stats: &'a mut Stats,
    /// Frames to send, with the earliest time they may leave.
    pub tx: &'a mut Vec<(Nanos, Vec<u8>)>,
}

impl Env<'_> {
    fn frame(
        &mut self,
        at: Nanos,
        dst: Ipv4Addr,
        ident: u16,
        sport: u16,
        dport: u16,
        payload: &[u8],
    ) {
        let a = self.addr;
        let ep = rp_endpoints(a.mac, a.ip, a.gateway_mac, dst, ident);
        if let Ok(f) = build_rp_frame(&ep, sport, dport, payload) {
            self.tx.push((at, f));
        }
    }
}

#[derive(Debug, Clone)]
struct Deferred {
    from: Ipv4Addr,
    ident: u16,
    key: Vec<u8>,
    packet: Vec<u8>,
}

#[derive(Debug, Clone)]
struct Held {
    from: Ipv4Addr,
    ident: u16,
    seq: u16,
    key: Vec<u8>,
    packet: Vec<u8>,
    deadline: Nanos,
}

/// One key's record (§3.4).
#[derive(Debug, Clone, Default)]
pub struct Record {
    /// Value (V bytes).
    pub value: Vec<u8>,
    /// Last applied write seq (or fence after a grant).
    pub last_seq: u16,
    /// Writes with seq ≤ fence are rejected.
    pub fence: u16,
    /// The lease owner.
    pub owner: Option<Ipv4Addr>,
    /// Lease expiry, local time.
    pub expiry: Nanos,
    /// last_seq as of the last committed update of this key.
    pub committed_seq: u16,
    /// When the current owner was granted the lease (local time).
    pub granted_at: Nanos,
    /// The last update id that touched this key (0 = none).
    last_update: u32,
    deferred: VecDeque<Deferred>,
    held: VecDeque<Held>,
}

/// A store worker.
pub struct Worker {
    /// Worker number.
    pub number: u16,
    /// UDP port.
    pub port: u16,
    cfg: WorkerConfig,
    app: Box<dyn StoreApp>,
    k: usize,
    v: usize,
    /// Records by key.
    records: HashMap<Vec<u8>, Record>,
    partitions: BTreeMap<Vec<u8>, Partition>,
    /// The chain protocol's state: update ids, the log, updates ahead of
    /// a gap, replies waiting for a commit (ready time, frame).
    chain: Replica<LogEntry, (Nanos, Vec<u8>)>,
    /// (time, lease key) at which to look at a key again (deferred, held).
    wakeups: BTreeSet<(Nanos, Vec<u8>)>,
    /// A state transfer this worker is waiting for or receiving (rejoin).
    sync_in: Option<SyncIn>,
    /// A state transfer this worker is sending to a joiner.
    sync_out: Option<Transfer>,
    /// The session of the last transfer installed here.
    synced_session: Option<u32>,
}

impl Worker {
    /// A worker from its configuration.
    pub fn new(cfg: WorkerConfig) -> Self {
        let app = cfg.app.build();
        let (k, v) = (app.key_len(), app.value_len());
        Worker {
            number: cfg.worker,
            port: rp::STORE_PORT_BASE + cfg.worker,
            cfg,
            app,
            k,
            v,
            records: HashMap::new(),
            partitions: BTreeMap::new(),
            chain: Replica::new(MAX_EARLY),
            wakeups: BTreeSet::new(),
            sync_in: None,
            sync_out: None,
            synced_session: None,
        }
    }

    /// Forgets every volatile thing (a crash).
    pub fn reset(&mut self) {
        *self = Worker::new(self.cfg.clone());
    }

    /// K and V.
    pub fn widths(&self) -> (usize, usize) {
        (self.k, self.v)
    }

    /// The app's name.
    pub fn app_name(&self) -> &'static str {
        self.app.name()
    }

    /// A record, for tests and checks.
    pub fn record(&self, key: &[u8]) -> Option<&Record> {
        self.records.get(key)
    }

    /// Number of records.
    pub fn record_count(&self) -> usize {
        self.records.len()
    }

    /// The committed snapshot of a partition: (epoch, values).
    pub fn committed_snapshot(&self, lease_key: &[u8]) -> Option<(u16, &[Vec<u8>])> {
        let p = self.partitions.get(lease_key)?;
        Some((p.committed_epoch?, &p.committed))
    }

    /// (applied, committed) update ids.
    pub fn update_ids(&self) -> (u32, u32) {
        (self.chain.applied(), self.chain.committed())
    }

    /// Every (key, fence, last_seq, value) in key order, for comparing replicas.
    pub fn dump(&self) -> Vec<(Vec<u8>, u16, u16, Vec<u8>)> {
        let mut v: Vec<_> = self
            .records
            .iter()
            .map(|(k, r)| (k.clone(), r.fence, r.last_seq, r.value.clone()))
            .collect();
        v.sort();
        v
    }

    /// When this worker next needs a timer: a key wakeup, a chain resend or
    /// a state-transfer resend.
    pub fn next_deadline(&self, chain_rto: Nanos, is_head: bool) -> Option<Nanos> {
        let w = self.wakeups.first().map(|(t, _)| *t);
        let c = self.chain.resend_at(chain_rto).filter(|_| is_head);
        let s = self.sync_deadline(chain_rto);
        [w, c, s].into_iter().flatten().min()
    }

    fn reply(
        &mut self,
        env: &mut Env<'_>,
        to: Ipv4Addr,
        ident: u16,
        ack: AckRepr<'_>,
        wait: Option<u32>,
    ) {
        let Ok(payload) = ack.to_vec() else { return };
        let ep = rp_endpoints(env.addr.mac, env.addr.ip, env.addr.gateway_mac, to, ident);
        let Ok(frame) = build_rp_frame(&ep, self.port, rp::SWITCH_PORT, &payload) else {
            return;
        };
        match ack.ack_type {
            AckType::LeaseReject => env.stats.tx_reject += 1,
            AckType::LeaseNew => env.stats.tx_new_ack += 1,
            AckType::LeaseMigrate => env.stats.tx_migrate_ack += 1,
            AckType::LeaseRenew => env.stats.tx_renew_ack += 1,
            AckType::BufRead => env.stats.tx_buf_read_ack += 1,
            AckType::Snapshot => env.stats.tx_snapshot_ack += 1,
            AckType::SnapshotRestore => env.stats.tx_snapshot_restore += 1,
        }
        if let Some(now) = self.chain.hold(wait, (env.done, frame)) {
            env.tx.push(now);
        }
    }

    fn wait_for(&self, key: &[u8]) -> Option<u32> {
        self.records
            .get(key)
            .and_then(|r| self.chain.uncommitted(r.last_update))
    }

    /// Handles one request from switch `from` (already admitted).
    pub fn request(&mut self, env: &mut Env<'_>, from: Ipv4Addr, ident: u16, payload: &[u8]) {
        let Ok(view) = rp::Request::new_checked(payload, self.k, self.v) else {
            env.stats.malformed += 1;
            return;
        };
        let Ok(req) = RequestRepr::parse(&view) else {
            env.stats.malformed += 1;
            return;
        };
        // The head's lease record before, for the observer (§6.2.1).
        let watched = env
            .observer
            .is_some()
            .then(|| self.lease_key(req.key).map(|(lk, _)| lk))
            .flatten()
            .map(|lk| {
                let before = self.records.get(&lk).map(|r| (r.owner, r.expiry));
                (lk, before)
            });
        self.handle_request(env, from, ident, &req);
        if let Some((lk, before)) = watched {
            self.report_lease(env, &lk, before);
        }
    }

    /// Tells the observer the lease record of `lk` if it differs from
    /// `before` (head only).
    fn report_lease(
        &self,
        env: &mut Env<'_>,
        lk: &[u8],
        before: Option<(Option<Ipv4Addr>, Nanos)>,
    ) {
        let (Some(obs), Some(rec)) = (env.observer.as_mut(), self.records.get(lk)) else {
            return;
        };
        if before != Some((rec.owner, rec.expiry)) {
            obs.lease_changed(&LeaseEvent {
                node: env.addr.ip,
                worker: self.number,
                key: lk,
                owner: rec.owner,
                expiry: rec.expiry,
                time: env.now,
            });
        }
    }

    fn handle_request(
        &mut self,
        env: &mut Env<'_>,
        from: Ipv4Addr,
        ident: u16,
        req: &RequestRepr<'_>,
    ) {
        match req.req_type {
            ReqType::LeaseNew => {
                env.stats.rx_lease_new += 1;
                self.lease_new(env, from, ident, req)
            }
            ReqType::LeaseRenew if req.seq == 0 => {
                env.stats.rx_renew += 1;
                self.renew(env, from, ident, req)
            }
            ReqType::LeaseRenew => {
                env.stats.rx_write += 1;
                self.write(env, from, ident, req)
            }
            ReqType::BufRead => {
                env.stats.rx_buf_read += 1;
                self.buf_read(env, from, ident, req)
            }
            ReqType::Snapshot => {
                env.stats.rx_snapshot += 1;
                self.snapshot(env, from, ident, req)
            }
        }
    }

    fn lease_key(&self, key: &[u8]) -> Option<(Vec<u8>, Option<usize>)> {
        if self.app.snapshot_layout().is_some() {
            self.app.partition_of(key).map(|(lk, i)| (lk, Some(i)))
        } else {
            Some((key.to_vec(), None))
        }
    }

    fn reject(&mut self, env: &mut Env<'_>, from: Ipv4Addr, ident: u16, req: &RequestRepr<'_>) {
        let ack = AckRepr {
            ack_type: AckType::LeaseReject,
            seq: req.seq,
            key: req.key,
            value: &[],
            piggyback: &[],
        };
        self.reply(env, from, ident, ack, None);
    }

    fn lease_new(&mut self, env: &mut Env<'_>, from: Ipv4Addr, ident: u16, req: &RequestRepr<'_>) {
        let Some((lk, _)) = self.lease_key(req.key) else {
            env.stats.malformed += 1;
            return;
        };
        let now = env.now;
        match self.records.get_mut(&lk) {
            None => {
                if self.records.len() >= env.max_records {
                    env.stats.record_overflow += 1;
                    return;
                }
                let init = self.app.init(&lk, self.cfg.shard_ctx());
                for (xk, xv) in init.extra {
                    if xk.len() == self.k && xv.len() == self.v && !self.records.contains_key(&xk) {
                        self.records.insert(
                            xk.clone(),
                            Record {
                                value: xv,
                                ..Record::default()
                            },
                        );
                        self.mutate(env, &xk, None);
                    }
                }
                let mut value = init.value;
                value.resize(self.v, 0);
                self.records.insert(
                    lk.clone(),
                    Record {
                        value,
                        owner: Some(from),
                        expiry: now + env.lease_period,
                        granted_at: now,
                        ..Record::default()
                    },
                );
                let id = self.mutate(env, &lk, Some(GrantKind::New));
                self.grant_reply(
                    env,
                    from,
                    ident,
                    req.key,
                    &lk,
                    AckType::LeaseNew,
                    req.piggyback,
                    id,
                );
            }
            Some(rec) => {
                let free = rec.owner.is_none() || rec.expiry <= now || rec.owner == Some(from);
                // [our choice] A repeated LEASE_NEW from the owner that has
                // not written under its grant (last_seq == fence) joins the
                // grant: same fence, lease extended. Spec §5.6 applies a new
                // fence every time, but every packet without a lease sends
                // LEASE_NEW, and a fence per request (or per millisecond, the
                // earlier join window) outran a switch whose control plane
                // was busy installing the previous grant: each grant was
                // stale on arrival, its writes were rejected, the switch
                // asked again, and 8 fences later (8 × FENCE_GAP = 2^15) the
                // 16-bit serial order wrapped, so writes of long-gone grants
                // ranked above the fence (campaign seeds 32, 107, 131, 189).
                // Safe: a fence only has to invalidate writes issued under
                // an earlier grant, and with last_seq == fence none reached
                // this head. The same switch's writes still in flight are
                // ones its current incarnation remembers (values are full, so
                // applying them later is fine); an earlier incarnation's
                // cannot outlive the boot quiet period
                // (`crate::switch::config::BOOT_QUIET`, longer than any
                // packet stays in the network), during which the switch
                // accepts no grant.
                let join = rec.owner == Some(from) && rec.expiry > now && rec.last_seq == rec.fence;
                if join {
                    env.stats.grants_joined += 1;
                    rec.expiry = now + env.lease_period;
                    let wait = rec.last_update;
                    let t = if rec.fence == 0 && rec.committed_seq == 0 {
                        AckType::LeaseNew
                    } else {
                        AckType::LeaseMigrate
                    };
                    self.grant_reply(env, from, ident, req.key, &lk, t, req.piggyback, wait);
                } else if free {
                    self.grant(env, &lk, from, ident, req.key, req.piggyback);
                } else if rec.deferred.len() < MAX_DEFERRED {
                    rec.deferred.push_back(Deferred {
                        from,
                        ident,
                        key: req.key.to_vec(),
                        packet: req.piggyback.to_vec(),
                    });
                    let at = rec.expiry;
                    env.stats.deferred += 1;
                    self.wakeups.insert((at, lk));
                } else {
                    env.stats.deferred_overflow += 1;
                }
            }
        }
    }

    /// Grants an existing key to `from` with a new fence (§5.6, MIGRATE).
    fn grant(
        &mut self,
        env: &mut Env<'_>,
        lk: &[u8],
        from: Ipv4Addr,
        ident: u16,
        key: &[u8],
        packet: &[u8],
    ) {
        let Some(rec) = self.records.get_mut(lk) else {
            return;
        };
        let fence = rp::seq_add(rec.last_seq, env.fence_gap);
        rec.fence = fence;
        rec.last_seq = fence;
        rec.owner = Some(from);
        rec.expiry = env.now + env.lease_period;
        rec.granted_at = env.now;
        let id = self.mutate(env, lk, Some(GrantKind::Migrate));
        self.grant_reply(env, from, ident, key, lk, AckType::LeaseMigrate, packet, id);
    }

    /// NEW/MIGRATE_ACK, or for a partition its SNAPSHOT_RESTORE entries
    /// (the last one returns the packet) [our choice].
    #[allow(clippy::too_many_arguments)]
    fn grant_reply(
        &mut self,
        env: &mut Env<'_>,
        to: Ipv4Addr,
        ident: u16,
        key: &[u8],
        lk: &[u8],
        t: AckType,
        packet: &[u8],
        wait: u32,
    ) {
        let Some(rec) = self.records.get(lk) else {
            return;
        };
        let base = rec.last_seq;
        if let Some(layout) = self.app.snapshot_layout() {
            let p = self.partitions.get(lk);
            let epoch = p.and_then(|p| p.committed_epoch).unwrap_or(0);
            let committed: Vec<Vec<u8>> = match p {
                Some(p) if p.committed_epoch.is_some() => p.committed.clone(),
                _ => Vec::new(),
            };
            for i in 0..layout.entries {
                let value = committed
                    .get(i)
                    .cloned()
                    .unwrap_or_else(|| vec![0u8; self.v]);
                let ek = self.app.entry_key(lk, i);
                let last = i + 1 == layout.entries;
                let ack = AckRepr {
                    ack_type: AckType::SnapshotRestore,
                    seq: epoch,
                    key: &ek,
                    value: &value,
                    piggyback: if last { packet } else { &[] },
                };
                self.reply(env, to, ident, ack, Some(wait));
            }
            return;
        }
        let value = rec.value.clone();
        let ack = AckRepr {
            ack_type: t,
            seq: base,
            key,
            value: &value,
            piggyback: packet,
        };
        self.reply(env, to, ident, ack, Some(wait));
    }

    fn renew(&mut self, env: &mut Env<'_>, from: Ipv4Addr, ident: u16, req: &RequestRepr<'_>) {
        let Some((lk, _)) = self.lease_key(req.key) else {
            env.stats.malformed += 1;
            return;
        };
        match self.records.get_mut(&lk) {
            Some(rec) if rec.owner == Some(from) => {
                rec.expiry = env.now + env.lease_period;
                let wait = self.wait_for(&lk);
                let ack = AckRepr {
                    ack_type: AckType::LeaseRenew,
                    seq: 0,
                    key: req.key,
                    value: &[],
                    piggyback: req.piggyback,
                };
                self.reply(env, from, ident, ack, wait);
            }
            _ => self.reject(env, from, ident, req),
        }
    }

    fn write(&mut self, env: &mut Env<'_>, from: Ipv4Addr, ident: u16, req: &RequestRepr<'_>) {
        let s = req.seq;
        let Some(rec) = self.records.get_mut(req.key) else {
            return self.reject(env, from, ident, req);
        };
        if rec.owner != Some(from) || serial_le(s, rec.fence) {
            env.stats.fenced_or_not_owner += 1;
            return self.reject(env, from, ident, req);
        }
        rec.expiry = env.now + env.lease_period;
        let wait = if serial_lt(rec.last_seq, s) {
            rec.value.clear();
            rec.value.extend_from_slice(req.value);
            rec.last_seq = s;
            drag_fence(rec);
            Some(self.mutate(env, req.key, None))
        } else {
            // fence < s ≤ last_seq: a duplicate or superseded write; the
            // newer full value includes its effect. Ack after last_seq commits.
            env.stats.duplicate_writes += 1;
            self.wait_for(req.key)
        };
        let ack = AckRepr {
            ack_type: AckType::LeaseRenew,
            seq: s,
            key: req.key,
            value: &[],
            piggyback: req.piggyback,
        };
        self.reply(env, from, ident, ack, wait);
    }

    fn buf_read(&mut self, env: &mut Env<'_>, from: Ipv4Addr, ident: u16, req: &RequestRepr<'_>) {
        let s = req.seq;
        let now = env.now;
        let hold = env.hold_timeout;
        let Some(rec) = self.records.get_mut(req.key) else {
            env.stats.buf_read_dropped += 1;
            return;
        };
        if rec.owner != Some(from) || serial_le(s, rec.fence) {
            env.stats.buf_read_dropped += 1;
            return;
        }
        rec.expiry = now + env.lease_period;
        if serial_le(s, rec.committed_seq) {
            let ack = AckRepr {
                ack_type: AckType::BufRead,
                seq: s,
                key: req.key,
                value: &[],
                piggyback: req.piggyback,
            };
            return self.reply(env, from, ident, ack, None);
        }
        if rec.held.len() >= MAX_HELD {
            env.stats.held_overflow += 1;
            return;
        }
        rec.held.push_back(Held {
            from,
            ident,
            seq: s,
            key: req.key.to_vec(),
            packet: req.piggyback.to_vec(),
            deadline: now + hold,
        });
        env.stats.held += 1;
        self.wakeups.insert((now + hold, req.key.to_vec()));
    }

    /// Timer work: expired holds, deferred grants, chain resends.
    pub fn wake(&mut self, env: &mut Env<'_>, chain_rto: Nanos, is_head: bool, serving: bool) {
        let now = env.now;
        let mut later = Vec::new();
        while let Some((t, _)) = self.wakeups.first() {
            if *t > now {
                break;
            }
            let Some((_, lk)) = self.wakeups.pop_first() else {
                break;
            };
            if !serving {
                // No deferred grant from a node that is not (or may no
                // longer be) head: a demoted head drops them (the switches
                // resend to the new head); a head without its quorum looks
                // again later.
                if let Some(rec) = self.records.get_mut(&lk) {
                    while rec.held.front().is_some_and(|h| h.deadline <= now) {
                        rec.held.pop_front();
                        env.stats.hold_timeouts += 1;
                    }
                    if !is_head {
                        env.stats.deferred_dropped += rec.deferred.len() as u64;
                        rec.deferred.clear();
                    } else if !rec.deferred.is_empty() {
                        later.push(lk);
                    }
                }
                continue;
            }
            self.wake_key(env, &lk);
        }
        for lk in later {
            self.wakeups.insert((now + chain_rto.max(1), lk));
        }
        if is_head && self.chain.resend_at(chain_rto).is_some_and(|t| now >= t) {
            self.resend_log(env);
        }
        self.sync_out_wake(env, chain_rto);
    }

    fn wake_key(&mut self, env: &mut Env<'_>, lk: &[u8]) {
        let now = env.now;
        let Some(rec) = self.records.get_mut(lk) else {
            return;
        };
        while rec.held.front().is_some_and(|h| h.deadline <= now) {
            rec.held.pop_front();
            env.stats.hold_timeouts += 1;
        }
        if !rec.deferred.is_empty() && rec.expiry <= now {
            let first = rec.deferred.pop_front();
            if let Some(d) = first {
                self.grant(env, lk, d.from, d.ident, &d.key, &d.packet);
                self.report_lease(env, lk, None);
            }
            // The new owner's other deferred requests: MIGRATE_ACK without a
            // new fence; other switches keep waiting.
            let owner = self.records.get(lk).and_then(|r| r.owner);
            let mut mine = Vec::new();
            if let Some(rec) = self.records.get_mut(lk) {
                let (m, rest): (Vec<Deferred>, Vec<Deferred>) =
                    rec.deferred.drain(..).partition(|d| Some(d.from) == owner);
                rec.deferred = rest.into();
                mine = m;
            }
            let wait = self.wait_for(lk).unwrap_or(0);
            for d in mine {
                self.grant_reply(
                    env,
                    d.from,
                    d.ident,
                    &d.key,
                    lk,
                    AckType::LeaseMigrate,
                    &d.packet,
                    wait,
                );
            }
        }
        let Some(rec) = self.records.get(lk) else {
            return;
        };
        let mut next = rec.held.front().map(|h| h.deadline);
        if !rec.deferred.is_empty() {
            next = Some(next.map_or(rec.expiry, |n| n.min(rec.expiry)));
        }
        if let Some(t) = next {
            self.wakeups.insert((t.max(now + 1), lk.to_vec()));
        }
    }
}

/// Keeps the fence within 2^14 of last_seq [our choice]. RFC 1982 compares
/// only numbers less than 2^15 apart, so an owner that writes more than 2^15
/// times under one grant would otherwise see its own writes fall "before"
/// the fence. No legitimate write is that old: at most MAX_INFLIGHT (1024)
/// are outstanding and packets live at most 1 s.
fn drag_fence(rec: &mut Record) {
    const DRAG: u16 = 1 << 14;
    if rec.last_seq.wrapping_sub(rec.fence) > DRAG {
        rec.fence = rec.last_seq.wrapping_sub(DRAG);
    }
}
