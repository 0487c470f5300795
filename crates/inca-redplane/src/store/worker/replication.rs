//! A worker's side of chain replication (specs/redplane.md §5.7): ordering
//! mutations into the log, go-back-N resends, applying at replicas, commit
//! and the replies and held reads it releases, role changes.

use super::*;

#[derive(Debug, Clone)]
pub(super) enum LogKind {
    Update { grant: Option<GrantKind> },
    Snap { epoch: u16, commit: bool },
}

#[derive(Debug, Clone)]
pub(super) struct LogEntry {
    pub(super) id: u32,
    pub(super) key: Vec<u8>,
    pub(super) seq: u16,
    pub(super) fence: u16,
    pub(super) owner: Option<Ipv4Addr>,
    pub(super) value: Vec<u8>,
    pub(super) kind: LogKind,
    pub(super) bytes: Vec<u8>,
}

/// Which observer events a node reports when an update commits there.
///
/// A commit is reported by the tail, where it happens (the update is then
/// on every member): reporting at the head, when the tail's ack reached it,
/// lost the report whenever the head died before the ack arrived and the
/// member that took over had processed that ack as a middle (campaign
/// seeds 173 and 532: a durable write or fence the checker never saw). A
/// grant's report needs its kind, which only the head knows, so the head
/// reports grants when the ack reaches it [our choice: a lost grant report
/// only makes the monitor's 6.2.8 check less strict, never wrong].
#[derive(Debug, Clone, Copy)]
pub(super) struct Report {
    /// Report the commit (and a snapshot epoch's commit).
    pub(super) commit: bool,
    /// Report a lease grant.
    pub(super) grant: bool,
}

impl Report {
    /// A chain of one: head and tail.
    pub(super) const BOTH: Report = Report {
        commit: true,
        grant: true,
    };
    /// The tail applying an update.
    pub(super) const COMMIT: Report = Report {
        commit: true,
        grant: false,
    };

    /// The tail's ack reaching a head (or a middle: nothing).
    pub(super) fn grant_if(is_head: bool) -> Report {
        Report {
            commit: false,
            grant: is_head,
        }
    }

    /// A member that just became tail commits its log.
    pub(super) fn commit_and_grant_if(is_head: bool) -> Report {
        Report {
            commit: true,
            grant: is_head,
        }
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
            return self.committed_id;
        };
        self.applied_id += 1;
        let id = self.applied_id;
        rec.last_update = id;
        self.app.on_apply(key, &rec.value);
        let entry = LogEntry {
            id,
            key: key.to_vec(),
            seq: rec.last_seq,
            fence: rec.fence,
            owner: rec.owner,
            value: rec.value.clone(),
            kind: LogKind::Update { grant },
            bytes: Vec::new(),
        };
        if !env.replicated {
            self.commit_entry(env, &entry, Report::BOTH);
            self.committed_id = id;
            self.release(env);
            return id;
        }
        let lease_ms = (rec.expiry.saturating_sub(env.now) / MILLIS) as u32;
        let bytes = ChainUpdateRepr {
            seq: entry.seq,
            key,
            value: &entry.value,
            fence: entry.fence,
            owner: entry.owner.unwrap_or(Ipv4Addr::UNSPECIFIED),
            lease_ms_remaining: lease_ms,
            update_id: id,
        }
        .to_vec();
        self.push_log(env, LogEntry { bytes, ..entry });
        id
    }

    pub(super) fn push_log(&mut self, env: &mut Env<'_>, entry: LogEntry) {
        if self.log.len() >= env.chain_window {
            // The window is full: the chain is not keeping up. The update is
            // applied at the head but its reply will wait; count it.
            env.stats.chain_window_full += 1;
        }
        if let Some(succ) = env.successor {
            let port = chain_port(self.port);
            env.frame(env.done, succ, 0, port, port, &entry.bytes);
            env.stats.chain_updates_sent += 1;
        }
        if self.log.is_empty() {
            self.log_sent_at = env.done;
        }
        self.log.push_back(entry);
    }

    /// The effects of an update becoming committed at this node; `report`
    /// says which observer events this node is the one to report.
    pub(super) fn commit_entry(&mut self, env: &mut Env<'_>, e: &LogEntry, report: Report) {
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
                    if report.commit {
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
                    if report.grant {
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
                    self.commit_snapshot(env, &e.key, epoch, report.commit);
                }
            }
        }
    }

    /// Sends every pending reply whose update has committed.
    pub(super) fn release(&mut self, env: &mut Env<'_>) {
        while let Some(entry) = self.pending.first_entry() {
            if *entry.key() > self.committed_id {
                break;
            }
            for (t, f) in entry.remove() {
                env.tx.push((t.max(env.now), f));
            }
        }
    }

    /// CHAIN_ACK at the head or a middle: everything up to `id` committed.
    pub fn chain_ack(&mut self, env: &mut Env<'_>, id: u32, is_head: bool) {
        if id <= self.committed_id || id > self.applied_id {
            env.stats.chain_acks_ignored += 1;
            return;
        }
        self.committed_id = id;
        while self.log.front().is_some_and(|e| e.id <= id) {
            if let Some(e) = self.log.pop_front() {
                self.commit_entry(env, &e, Report::grant_if(is_head));
            }
        }
        self.log_sent_at = env.now;
        if is_head {
            self.release(env);
        }
    }

    /// A CHAIN_UPDATE or CHAIN_SNAP from the predecessor: applies it in id
    /// order (go-back-N: a gap is dropped and resent by the head), forwards
    /// it, and at the tail commits and acknowledges.
    pub fn chain_update(&mut self, env: &mut Env<'_>, payload: &[u8], is_tail: bool) {
        let parsed = parse_chain(payload, self.k, self.v);
        let Some((id, entry)) = parsed else {
            env.stats.malformed += 1;
            return;
        };
        if self.sync_in.is_some() {
            // Rejoining: kept until the state transfer is installed.
            return self.stash_during_sync(env, id, payload);
        }
        let port = chain_port(self.port);
        if id <= self.applied_id {
            // A resend: pass it on (the tail may have missed it) or re-ack.
            env.stats.chain_duplicates += 1;
            if is_tail {
                self.ack_up(env);
            } else if let Some(succ) = env.successor {
                env.frame(env.done, succ, 0, port, port, payload);
            }
            return;
        }
        if id != self.applied_id + 1 {
            // Ahead of a gap: keep it (bounded) until the gap is filled by
            // the head's resend, so one resend round repairs every hole.
            env.stats.chain_gaps += 1;
            if self.early.len() < MAX_EARLY && id - self.applied_id <= MAX_EARLY as u32 {
                self.early.entry(id).or_insert_with(|| payload.to_vec());
            }
            return;
        }
        self.apply_chain(env, id, entry, payload, is_tail);
        while let Some(next) = self.early.remove(&(self.applied_id + 1)) {
            if let Some((nid, e)) = parse_chain(&next, self.k, self.v) {
                self.apply_chain(env, nid, e, &next, is_tail);
            }
        }
        self.early.retain(|&k, _| k > self.applied_id);
    }

    pub(super) fn apply_chain(
        &mut self,
        env: &mut Env<'_>,
        id: u32,
        entry: LogEntry,
        payload: &[u8],
        is_tail: bool,
    ) {
        let port = chain_port(self.port);
        self.applied_id = id;
        env.stats.chain_updates_applied += 1;
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
        if is_tail {
            self.committed_id = id;
            self.commit_entry(env, &entry, Report::COMMIT);
            self.ack_up(env);
        } else {
            if let Some(succ) = env.successor {
                env.frame(env.done, succ, 0, port, port, payload);
            }
            self.log.push_back(LogEntry {
                bytes: payload.to_vec(),
                ..entry
            });
        }
    }

    pub(super) fn ack_up(&mut self, env: &mut Env<'_>) {
        let port = chain_port(self.port);
        let ack = chain_ack_bytes(self.applied_id);
        let preds: Vec<Ipv4Addr> = env.predecessors.to_vec();
        for p in preds {
            env.frame(env.done, p, 0, port, port, &ack);
        }
        env.stats.chain_acks_sent += 1;
    }

    /// This node just became the tail: everything it applied is committed.
    pub fn became_tail(&mut self, env: &mut Env<'_>, is_head: bool) {
        if self.sync_in.is_some() {
            // A joiner acknowledges once its copy is installed.
            return;
        }
        let id = self.applied_id;
        if id > self.committed_id {
            self.committed_id = id;
            while let Some(e) = self.log.pop_front() {
                self.commit_entry(env, &e, Report::commit_and_grant_if(is_head));
            }
            if is_head {
                self.release(env);
            }
        }
        if !is_head {
            self.ack_up(env);
        }
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
        self.log_sent_at = env.now;
        let Some(succ) = env.successor else { return };
        let port = chain_port(self.port);
        for e in &self.log {
            let ep = rp_endpoints(env.addr.mac, env.addr.ip, env.addr.gateway_mac, succ, 0);
            if let Ok(f) = build_rp_frame(&ep, port, port, &e.bytes) {
                env.tx.push((env.now, f));
                env.stats.chain_resends += 1;
            }
        }
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
                    id: u.update_id(),
                    key: u.key().to_vec(),
                    seq: u.seq(),
                    fence: u.fence(),
                    owner: (!owner.is_unspecified()).then_some(owner),
                    value: u.value().to_vec(),
                    kind: LogKind::Update { grant: None },
                    bytes: Vec::new(),
                },
            ))
        }
        rp::ChainType::Snap => {
            let s = rp::ChainSnap::new_checked(payload, k, v).ok()?;
            Some((
                s.update_id(),
                LogEntry {
                    id: s.update_id(),
                    key: s.key().to_vec(),
                    seq: s.epoch(),
                    fence: 0,
                    owner: None,
                    value: s.value().to_vec(),
                    kind: LogKind::Snap {
                        epoch: s.epoch(),
                        commit: s.commit(),
                    },
                    bytes: Vec::new(),
                },
            ))
        }
        _ => None,
    }
}

pub(super) fn parse_lease_ms(payload: &[u8], k: usize, v: usize) -> u32 {
    rp::ChainUpdate::new_checked(payload, k, v).map_or(0, |u| u.lease_ms_remaining())
}
