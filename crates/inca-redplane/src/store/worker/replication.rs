//! A worker's side of chain replication (specs/redplane.md §5.7): the
//! store's records through the shared protocol of `inca_chain` (ordering,
//! forwarding, cumulative acks, go-back-N resends, replies held until
//! commit). Here is what is RedPlane's: the log entry and its CHAIN_UPDATE /
//! CHAIN_SNAP encoding, what applying and committing an entry does to the
//! records (held reads released, observer reports), and the new head's
//! lease rule.

use super::*;

#[derive(Debug, Clone)]
pub(super) enum LogKind {
    Update { grant: Option<GrantKind> },
    Snap { epoch: u16, commit: bool },
}

#[derive(Debug, Clone)]
pub(super) struct LogEntry {
    pub(super) key: Vec<u8>,
    pub(super) seq: u16,
    pub(super) fence: u16,
    pub(super) owner: Option<Ipv4Addr>,
    pub(super) value: Vec<u8>,
    pub(super) kind: LogKind,
}

/// A worker's [`Env`] seen by the shared chain protocol: its chain port and
/// counters.
pub(super) struct ChainEnv<'e, 'a> {
    pub(super) env: &'e mut Env<'a>,
    port: u16,
}

impl<'e, 'a> ChainEnv<'e, 'a> {
    pub(super) fn new(env: &'e mut Env<'a>, worker_port: u16) -> Self {
        ChainEnv {
            env,
            port: chain_port(worker_port),
        }
    }
}

impl ChainIo for ChainEnv<'_, '_> {
    fn now(&self) -> Nanos {
        self.env.now
    }

    fn done(&self) -> Nanos {
        self.env.done
    }

    fn successor(&self) -> Option<Ipv4Addr> {
        self.env.successor
    }

    fn predecessors(&self) -> &[Ipv4Addr] {
        self.env.predecessors
    }

    fn window(&self) -> usize {
        self.env.chain_window
    }

    fn send(&mut self, to: Ipv4Addr, bytes: &[u8], traffic: Traffic) {
        let (env, port) = (&mut *self.env, self.port);
        match traffic {
            Traffic::Resend => {
                let a = env.addr;
                let ep = rp_endpoints(a.mac, a.ip, a.gateway_mac, to, 0);
                if let Ok(f) = build_rp_frame(&ep, port, port, bytes) {
                    env.tx.push((env.now, f));
                    env.stats.chain_resends += 1;
                }
            }
            Traffic::Update => {
                env.frame(env.done, to, 0, port, port, bytes);
                env.stats.chain_updates_sent += 1;
            }
            Traffic::Forward | Traffic::Ack => env.frame(env.done, to, 0, port, port, bytes),
        }
    }

    fn count(&mut self, event: ChainEvent) {
        let s = &mut *self.env.stats;
        match event {
            ChainEvent::Malformed => s.malformed += 1,
            ChainEvent::WindowFull => s.chain_window_full += 1,
            ChainEvent::Duplicate => s.chain_duplicates += 1,
            ChainEvent::Gap => s.chain_gaps += 1,
            ChainEvent::Applied => s.chain_updates_applied += 1,
            ChainEvent::AckIgnored => s.chain_acks_ignored += 1,
            ChainEvent::AckSent => s.chain_acks_sent += 1,
        }
    }
}

/// The store's records replicated through the shared chain protocol.
impl<'e, 'a> ChainNode<ChainEnv<'e, 'a>> for Worker {
    type Entry = LogEntry;
    /// A reply frame and the earliest time it may leave.
    type Held = (Nanos, Vec<u8>);

    fn replica(&mut self) -> &mut Replica<LogEntry, (Nanos, Vec<u8>)> {
        &mut self.chain
    }

    fn replica_ref(&self) -> &Replica<LogEntry, (Nanos, Vec<u8>)> {
        &self.chain
    }

    fn decode(&self, payload: &[u8]) -> Option<(u32, LogEntry)> {
        parse_chain(payload, self.k, self.v)
    }

    fn ack_bytes(&self, id: u32) -> Vec<u8> {
        chain_ack_bytes(id)
    }

    fn apply(&mut self, x: &mut ChainEnv<'e, 'a>, id: u32, entry: &LogEntry, payload: &[u8]) {
        let env = &mut *x.env;
        match &entry.kind {
            LogKind::Update { .. } => {
                let rec = self.records.entry(entry.key.clone()).or_default();
                // §6.2.4, locally: (fence, last_seq) never decreases and the
                // value changes only when last_seq increases.
                let regress = serial_lt(entry.fence, rec.fence)
                    || (entry.fence == rec.fence && serial_lt(entry.seq, rec.last_seq));
                let silent =
                    rec.last_update != 0 && entry.seq == rec.last_seq && entry.value != rec.value;
                if regress || silent {
                    env.stats.invariant_violations += 1;
                    debug_assert!(false, "chain update would violate §6.2.4");
                }
                rec.value.clone_from(&entry.value);
                rec.last_seq = entry.seq;
                rec.fence = entry.fence;
                rec.owner = entry.owner;
                rec.expiry = env.now + u64::from(parse_lease_ms(payload, self.k, self.v)) * MILLIS;
                rec.last_update = id;
                self.app.on_apply(&entry.key, &entry.value);
            }
            LogKind::Snap { epoch, .. } => {
                if let Some((lk, idx)) = self.app.partition_of(&entry.key) {
                    self.stage_applied(&lk, idx, *epoch, &entry.value);
                }
            }
        }
    }

    fn commit(&mut self, x: &mut ChainEnv<'e, 'a>, entry: &LogEntry, at: Commit) {
        self.commit_entry(x.env, entry, at);
    }

    fn release(&mut self, x: &mut ChainEnv<'e, 'a>, (t, f): (Nanos, Vec<u8>)) {
        x.env.tx.push((t.max(x.env.now), f));
    }
}

impl Worker {
    /// Orders the current state of record `key` as the next update: logs it,
    /// sends it down the chain (or commits at once without one).
    pub(super) fn mutate(
        &mut self,
        env: &mut Env<'_>,
        key: &[u8],
        grant: Option<GrantKind>,
    ) -> u32 {
        let Some(rec) = self.records.get_mut(key) else {
            return self.chain.committed();
        };
        let id = self.chain.next_id();
        rec.last_update = id;
        self.app.on_apply(key, &rec.value);
        let entry = LogEntry {
            key: key.to_vec(),
            seq: rec.last_seq,
            fence: rec.fence,
            owner: rec.owner,
            value: rec.value.clone(),
            kind: LogKind::Update { grant },
        };
        let lease_ms = (rec.expiry.saturating_sub(env.now) / MILLIS) as u32;
        self.order(env, id, entry, |e| {
            ChainUpdateRepr {
                seq: e.seq,
                key,
                value: &e.value,
                fence: e.fence,
                owner: e.owner.unwrap_or(Ipv4Addr::UNSPECIFIED),
                lease_ms_remaining: lease_ms,
                update_id: id,
            }
            .to_vec()
        });
        id
    }

    /// Update `id` goes down the chain (its bytes built only then), or
    /// commits at once without one.
    pub(super) fn order(
        &mut self,
        env: &mut Env<'_>,
        id: u32,
        entry: LogEntry,
        bytes: impl FnOnce(&LogEntry) -> Vec<u8>,
    ) {
        let replicated = env.replicated;
        let mut x = ChainEnv::new(env, self.port);
        if replicated {
            let b = bytes(&entry);
            self.append(&mut x, id, entry, b);
        } else {
            self.commit_alone(&mut x, id, entry);
        }
    }

    /// The effects of an update becoming committed at this node; `at` says
    /// which observer events this node is the one to report.
    ///
    /// A commit is reported by the tail, where it happens (the update is
    /// then on every member): reporting at the head, when the tail's ack
    /// reached it, lost the report whenever the head died before the ack
    /// arrived and the member that took over had processed that ack as a
    /// middle (campaign seeds 173 and 532: a durable write or fence the
    /// checker never saw). A grant's report needs its kind, which only the
    /// head knows, so the head reports grants when the ack reaches it [our
    /// choice: a lost grant report only makes the monitor's 6.2.8 check
    /// less strict, never wrong].
    pub(super) fn commit_entry(&mut self, env: &mut Env<'_>, e: &LogEntry, at: Commit) {
        match e.kind {
            LogKind::Update { grant } => {
                let mut release = Vec::new();
                if let Some(rec) = self.records.get_mut(&e.key) {
                    rec.committed_seq = e.seq;
                    if !rec.held.is_empty() {
                        // Held reads are FIFO, not seq-sorted: release every
                        // one this commit covers. Owner and fence are checked
                        // again, not only on arrival (model checker fix 3): a
                        // grant since then raised last_seq above the read's
                        // seq without write `seq` ever becoming durable, so
                        // such a read is dropped (its output is lost).
                        let (fence, owner) = (rec.fence, rec.owner);
                        let (ok, keep): (Vec<Held>, Vec<Held>) = rec
                            .held
                            .drain(..)
                            .partition(|h| serial_le(h.seq, e.seq) && serial_lt(fence, h.seq));
                        rec.held = keep.into();
                        let (ok, gone): (Vec<Held>, Vec<Held>) =
                            ok.into_iter().partition(|h| Some(h.from) == owner);
                        env.stats.buf_read_dropped += gone.len() as u64;
                        release = ok;
                        // Reads fenced by a newer grant can never be released.
                        let before = rec.held.len();
                        rec.held
                            .retain(|h| serial_lt(fence, h.seq) && Some(h.from) == owner);
                        env.stats.buf_read_dropped += (before - rec.held.len()) as u64;
                    }
                }
                for h in release {
                    let ack = AckRepr {
                        ack_type: AckType::BufRead,
                        seq: h.seq,
                        key: &h.key,
                        value: &[],
                        piggyback: &h.packet,
                    };
                    env.stats.held_released += 1;
                    self.reply(env, h.from, h.ident, ack, None);
                }
                if let Some(obs) = env.observer.as_mut() {
                    if at.at_tail {
                        obs.committed(&CommitEvent {
                            node: env.addr.ip,
                            worker: self.number,
                            key: &e.key,
                            fence: e.fence,
                            seq: e.seq,
                            value: &e.value,
                            owner: e.owner,
                            time: env.now,
                        });
                    }
                    if at.at_head {
                        if let (Some(kind), Some(owner)) = (grant, e.owner) {
                            obs.lease_granted(&GrantEvent {
                                node: env.addr.ip,
                                worker: self.number,
                                key: &e.key,
                                owner,
                                base: e.seq,
                                kind,
                                time: env.now,
                            });
                        }
                    }
                }
                env.stats.commits += 1;
            }
            LogKind::Snap { epoch, commit } => {
                if commit {
                    self.commit_snapshot(env, &e.key, epoch, at.at_tail);
                }
            }
        }
    }

    /// CHAIN_ACK at the head or a middle: everything up to `id` committed.
    pub fn chain_ack(&mut self, env: &mut Env<'_>, id: u32, is_head: bool) {
        let mut x = ChainEnv::new(env, self.port);
        self.receive_ack(&mut x, id, is_head);
    }

    /// A CHAIN_UPDATE or CHAIN_SNAP from the predecessor: applied in id
    /// order, forwarded, and at the tail committed and acknowledged (a
    /// joiner keeps it until its state copy is installed).
    pub fn chain_update(&mut self, env: &mut Env<'_>, payload: &[u8], is_tail: bool) {
        let mut x = ChainEnv::new(env, self.port);
        self.receive_update(&mut x, payload, is_tail);
    }

    /// This node just became the tail: everything it applied is committed.
    pub fn became_tail(&mut self, env: &mut Env<'_>, is_head: bool) {
        let mut x = ChainEnv::new(env, self.port);
        self.take_over_tail(&mut x, is_head);
    }

    /// This node just became head (§5.7): every recorded lease is held for a
    /// full LEASE_PERIOD from now, and the uncommitted log is resent.
    pub fn became_head(&mut self, env: &mut Env<'_>) {
        let until = env.now + env.lease_period;
        for rec in self.records.values_mut() {
            if rec.owner.is_some() {
                rec.expiry = rec.expiry.max(until);
            }
        }
        if env.observer.is_some() {
            let mut owned: Vec<Vec<u8>> = self
                .records
                .iter()
                .filter(|(_, r)| r.owner.is_some())
                .map(|(k, _)| k.clone())
                .collect();
            owned.sort();
            for k in owned {
                self.report_lease(env, &k, None);
            }
        }
        self.resend_log(env);
    }

    /// Resends the whole log to the successor (go-back-N).
    pub fn resend_log(&mut self, env: &mut Env<'_>) {
        let mut x = ChainEnv::new(env, self.port);
        self.resend(&mut x);
    }
}

pub(super) fn parse_chain(payload: &[u8], k: usize, v: usize) -> Option<(u32, LogEntry)> {
    match rp::ChainType::from_u8(*payload.first()?).ok()? {
        rp::ChainType::Update => {
            let u = rp::ChainUpdate::new_checked(payload, k, v).ok()?;
            let owner = u.owner();
            Some((
                u.update_id(),
                LogEntry {
                    key: u.key().to_vec(),
                    seq: u.seq(),
                    fence: u.fence(),
                    owner: (!owner.is_unspecified()).then_some(owner),
                    value: u.value().to_vec(),
                    kind: LogKind::Update { grant: None },
                },
            ))
        }
        rp::ChainType::Snap => {
            let s = rp::ChainSnap::new_checked(payload, k, v).ok()?;
            Some((
                s.update_id(),
                LogEntry {
                    key: s.key().to_vec(),
                    seq: s.epoch(),
                    fence: 0,
                    owner: None,
                    value: s.value().to_vec(),
                    kind: LogKind::Snap {
                        epoch: s.epoch(),
                        commit: s.commit(),
                    },
                },
            ))
        }
        _ => None,
    }
}

pub(super) fn parse_lease_ms(payload: &[u8], k: usize, v: usize) -> u32 {
    rp::ChainUpdate::new_checked(payload, k, v).map_or(0, |u| u.lease_ms_remaining())
}
