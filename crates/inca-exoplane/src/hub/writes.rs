//! The per-key FIFO write sequencer (spec §5.4). Writes to one
//! (app, obj, key) run one at a time in arrival order; different keys run
//! concurrently. A write takes a version from one hub-wide counter (so a
//! key's versions grow even across a delete and re-insert [our choice]),
//! stores the value, sends WRITE_APPLY to every live holder of
//! holders ∪ {primary, replica, requester} and to the switch if it holds
//! the key, and completes when all of them applied. A WRITE_REQ is
//! acknowledged when all its writes completed.

use std::collections::{BTreeMap, HashMap, VecDeque};

use inca_switch::device::Nanos;

use super::app::ObjectKind;
use super::entries::{pdev_bit, Entry, SwitchCopy, SWITCH_BIT};
use super::msg::{EntryRec, HubMsg, Write, WriteOp, WriteStatus};
use super::oplog::{EntryKey, Op};
use super::timers::Timer;
use super::{Hub, SwitchOp};
use crate::hub::app::{placement, shard};
use crate::ids::{AppId, Pdev, UnionKey, Version, MAX_KEY_LEN};

/// A write waiting in its key's FIFO.
struct Queued {
    request: u64,
    index: usize,
    write: Write,
    /// Holders the write must reach besides the current ones: primary and
    /// replica of the flow's shard, and the requester.
    extra: u64,
}

/// The write of a key now in progress.
struct Active {
    request: u64,
    index: usize,
    version: Version,
    status: WriteStatus,
    /// Holder bits still to apply (bit 0 = switch).
    awaiting: u64,
    delete: bool,
    /// A delete waiting for the switch copy's two-phase eviction.
    blocked: bool,
}

struct Request {
    requester: Pdev,
    req_id: u64,
    results: Vec<(WriteStatus, Version)>,
    remaining: usize,
}

/// A WRITE_APPLY not yet answered.
pub(super) struct Outstanding {
    pub pdev: Pdev,
    pub entry: EntryKey,
    rec: EntryRec,
}

/// The sequencer's state.
#[derive(Default)]
pub(super) struct Sequencer {
    queues: HashMap<EntryKey, VecDeque<Queued>>,
    queued: usize,
    active: HashMap<EntryKey, Active>,
    requests: HashMap<u64, Request>,
    next_request: u64,
    pub outstanding: BTreeMap<u64, Outstanding>,
    next_apply: u64,
    next_version: Version,
}

impl Hub {
    /// Primary and replica holding flow `uk` of `app`: its shard's, or the
    /// one device an app-pinned app lives on (both roles).
    fn holders_of(&self, app: AppId, uk: &UnionKey) -> (Pdev, Pdev) {
        if let Some(&d) = self.config.pinned.get(&app) {
            return (d, d);
        }
        placement(shard(app, uk, self.config.n_devices), self.config.n_devices)
    }

    pub(super) fn on_write_req(
        &mut self,
        now: Nanos,
        requester: Pdev,
        req_id: u64,
        app: AppId,
        uk: UnionKey,
        writes: Vec<Write>,
    ) {
        let n = writes.len();
        let mut request = Request {
            requester,
            req_id,
            results: vec![(WriteStatus::Failed, 0); n],
            remaining: 0,
        };
        let Some(state) = self.apps.get(&app) else {
            self.stats.unknown += 1;
            self.stats.writes_failed += n as u64;
            self.send_ack(now, request);
            return;
        };
        if self.seq.queued + n > self.config.max_queued_writes {
            self.stats.writes_queue_full += 1;
            self.stats.writes_failed += n as u64;
            self.send_ack(now, request);
            return;
        }
        let (primary, replica) = self.holders_of(app, &uk);
        let extra = pdev_bit(primary) | pdev_bit(replica) | pdev_bit(requester);
        let mut valid = Vec::new();
        for (index, write) in writes.into_iter().enumerate() {
            let ok = state.kinds.contains_key(&write.obj)
                && write.key.len() <= MAX_KEY_LEN
                && write.value.len() <= MAX_KEY_LEN;
            if ok {
                valid.push((index, write));
            } else {
                self.stats.writes_failed += 1;
            }
        }
        request.remaining = valid.len();
        let id = self.seq.next_request;
        self.seq.next_request += 1;
        if valid.is_empty() {
            self.send_ack(now, request);
            return;
        }
        self.seq.requests.insert(id, request);
        for (index, write) in valid {
            let key = EntryKey {
                app,
                obj: write.obj,
                key: write.key.clone(),
            };
            // The shards of other flows that look the entry up hold it too
            // (a NAT's reply direction, a firewall's inbound packets).
            let mut extra = extra;
            if let Some(state) = self.apps.get(&app) {
                for other in state.keys.entry_flows(write.obj, &write.key) {
                    let (p, r) = self.holders_of(app, &other);
                    extra |= pdev_bit(p) | pdev_bit(r);
                }
            }
            self.seq.queued += 1;
            self.seq
                .queues
                .entry(key.clone())
                .or_default()
                .push_back(Queued {
                    request: id,
                    index,
                    write,
                    extra,
                });
            if !self.seq.active.contains_key(&key) {
                self.start_next(now, key);
            }
        }
    }

    /// Starts queued writes of `key` until one has to wait.
    fn start_next(&mut self, now: Nanos, key: EntryKey) {
        loop {
            let Some(q) = self.seq.queues.get_mut(&key).and_then(|q| q.pop_front()) else {
                self.seq.queues.remove(&key);
                return;
            };
            self.seq.queued -= 1;
            let mut active = self.begin(now, &key, &q);
            if self.config.breakage == Some(super::Breakage::AckBeforeHoldersApplied) {
                active.awaiting = 0;
            }
            if active.awaiting != 0 || active.blocked {
                self.seq.active.insert(key, active);
                return;
            }
            self.finish(now, &key, active);
        }
    }

    fn begin(&mut self, now: Nanos, key: &EntryKey, q: &Queued) -> Active {
        let mut active = Active {
            request: q.request,
            index: q.index,
            version: 0,
            status: WriteStatus::Ok,
            awaiting: 0,
            delete: false,
            blocked: false,
        };
        let kind = self.apps[&key.app].kinds[&key.obj];
        let exists = self.dir.map.contains_key(key);
        match q.write.op {
            WriteOp::Delete => {
                if !exists {
                    return active;
                }
                active.delete = true;
                let entry = self.dir.map.get_mut(key).expect("exists");
                entry.deleting = true;
                if entry.refcount() > 0 || entry.switch != SwitchCopy::Absent {
                    // Two-phase eviction of every switch-resident flow that
                    // uses the entry first (§5.4 step 2).
                    active.blocked = true;
                    let users: Vec<UnionKey> = entry.users.iter().cloned().collect();
                    for uk in users {
                        self.evict_for_delete(now, key.app, uk);
                    }
                    return active;
                }
                self.start_delete(now, key, &mut active);
            }
            WriteOp::InsertIfAbsent | WriteOp::Upsert => {
                let is_register = matches!(kind, ObjectKind::Register { .. });
                if exists && (q.write.op == WriteOp::InsertIfAbsent || is_register) {
                    // The stored value stands; bring new holders up to date.
                    if q.write.op == WriteOp::InsertIfAbsent {
                        active.status = WriteStatus::Exists;
                    }
                    let entry = self.dir.map.get_mut(key).expect("exists");
                    active.version = entry.version;
                    let new = q.extra & !entry.holders;
                    entry.holders |= new;
                    self.sync_add_holders(key, new & !SWITCH_BIT);
                    let entry = self.dir.map.get_mut(key).expect("exists");
                    let rec = EntryRec {
                        op: WriteOp::Upsert,
                        obj: key.obj,
                        key: key.key.clone(),
                        value: entry.value.clone(),
                        version: entry.version,
                    };
                    active.awaiting = self.apply_to(now, key, new, &rec);
                    return active;
                }
                if !exists && self.dir.map.len() >= self.config.max_entries {
                    active.status = WriteStatus::Failed;
                    return active;
                }
                let value = match kind {
                    ObjectKind::Table => q.write.value.clone(),
                    ObjectKind::Register { width, .. } => vec![0; usize::from(width)],
                };
                self.seq.next_version += 1;
                let version = self.seq.next_version;
                active.version = version;
                self.stats.writes += 1;
                let entry = self
                    .dir
                    .map
                    .entry(key.clone())
                    .or_insert_with(|| Entry::new(Vec::new(), 0));
                entry.value = value.clone();
                entry.version = version;
                let new = q.extra & !entry.holders;
                entry.holders |= q.extra;
                let holders = entry.holders;
                let on_switch =
                    matches!(entry.switch, SwitchCopy::Installing | SwitchCopy::Installed);
                let slot = entry.slot;
                self.sync_add_holders(key, new & !SWITCH_BIT);
                let rec = EntryRec {
                    op: WriteOp::Upsert,
                    obj: key.obj,
                    key: key.key.clone(),
                    value: value.clone(),
                    version,
                };
                active.awaiting = self.apply_to(now, key, holders & !SWITCH_BIT, &rec);
                if on_switch {
                    if let Some(slot) = slot {
                        self.switch_op(SwitchOp::ModifyEntry {
                            entry: key.clone(),
                            slot,
                            value,
                        });
                        active.awaiting |= SWITCH_BIT;
                    }
                }
                self.log.push(
                    now,
                    Op::WriteStarted {
                        entry: key.clone(),
                        version,
                        delete: false,
                        targets: active.awaiting,
                    },
                );
            }
        }
        active
    }

    fn start_delete(&mut self, now: Nanos, key: &EntryKey, active: &mut Active) {
        self.seq.next_version += 1;
        let version = self.seq.next_version;
        self.stats.writes += 1;
        active.version = version;
        active.blocked = false;
        let holders = self.dir.map[key].holders;
        let rec = EntryRec {
            op: WriteOp::Delete,
            obj: key.obj,
            key: key.key.clone(),
            value: Vec::new(),
            version,
        };
        active.awaiting = self.apply_to(now, key, holders & !SWITCH_BIT, &rec);
        self.log.push(
            now,
            Op::WriteStarted {
                entry: key.clone(),
                version,
                delete: true,
                targets: active.awaiting,
            },
        );
    }

    /// The switch copy of a deleting entry is gone: run the delete.
    pub(super) fn unblock_delete(&mut self, now: Nanos, key: &EntryKey) {
        let Some(mut active) = self.seq.active.remove(key) else {
            return;
        };
        if !active.blocked {
            self.seq.active.insert(key.clone(), active);
            return;
        }
        self.start_delete(now, key, &mut active);
        if active.awaiting == 0 {
            self.finish(now, key, active);
            self.start_next(now, key.clone());
        } else {
            self.seq.active.insert(key.clone(), active);
        }
    }

    /// Sends `rec` to the live devices among `bits`; returns the bits
    /// waited for. Dead holders are skipped (a DUMP covers them later).
    fn apply_to(&mut self, now: Nanos, key: &EntryKey, bits: u64, rec: &EntryRec) -> u64 {
        let mut awaiting = 0;
        for p in 0..u16::from(self.config.n_devices) {
            let pdev = Pdev(p);
            if bits & pdev_bit(pdev) == 0 || !self.devices.live(pdev) {
                continue;
            }
            awaiting |= pdev_bit(pdev);
            self.seq.next_apply += 1;
            let id = self.seq.next_apply;
            self.send(
                pdev,
                id,
                HubMsg::WriteApply {
                    app: key.app,
                    entries: vec![rec.clone()],
                },
            );
            self.seq.outstanding.insert(
                id,
                Outstanding {
                    pdev,
                    entry: key.clone(),
                    rec: rec.clone(),
                },
            );
            self.timers
                .set(now + self.config.holder_timeout, Timer::ApplyDeadline(id));
        }
        awaiting
    }

    pub(super) fn on_applied(&mut self, now: Nanos, pdev: Pdev, id: u64, ok: bool) {
        match self.seq.outstanding.get(&id) {
            Some(o) if o.pdev == pdev => {}
            _ => {
                self.stats.unknown += 1;
                return;
            }
        }
        let o = self.seq.outstanding.remove(&id).expect("checked");
        self.log.push(
            now,
            Op::WriteApplied {
                holder: Some(pdev),
                entry: o.entry.clone(),
                version: o.rec.version,
            },
        );
        self.clear_awaiting(now, &o.entry, pdev_bit(pdev), ok);
    }

    /// The switch applied a ModifyEntry.
    pub(super) fn switch_applied(&mut self, now: Nanos, key: EntryKey, ok: bool) {
        if let Some(a) = self.seq.active.get(&key) {
            let version = a.version;
            self.log.push(
                now,
                Op::WriteApplied {
                    holder: None,
                    entry: key.clone(),
                    version,
                },
            );
        }
        self.clear_awaiting(now, &key, SWITCH_BIT, ok);
    }

    fn clear_awaiting(&mut self, now: Nanos, key: &EntryKey, bit: u64, ok: bool) {
        let Some(active) = self.seq.active.get_mut(key) else {
            return;
        };
        active.awaiting &= !bit;
        if !ok {
            active.status = WriteStatus::Failed;
        }
        if active.awaiting == 0 && !active.blocked {
            let active = self.seq.active.remove(key).expect("present");
            self.finish(now, key, active);
            self.start_next(now, key.clone());
        }
    }

    fn finish(&mut self, now: Nanos, key: &EntryKey, active: Active) {
        if active.version != 0 && active.status != WriteStatus::Exists {
            self.log.push(
                now,
                Op::WriteDone {
                    entry: key.clone(),
                    version: active.version,
                },
            );
        }
        if active.delete {
            self.dir.map.remove(key);
            self.sync.delete(now, key);
        }
        if active.status == WriteStatus::Failed {
            self.stats.writes_failed += 1;
        }
        let Some(req) = self.seq.requests.get_mut(&active.request) else {
            return;
        };
        req.results[active.index] = (active.status, active.version);
        req.remaining -= 1;
        if req.remaining == 0 {
            let req = self.seq.requests.remove(&active.request).expect("present");
            self.send_ack(now, req);
        }
    }

    fn send_ack(&mut self, now: Nanos, req: Request) {
        self.log.push(
            now,
            Op::WriteAcked {
                requester: req.requester,
                req_id: req.req_id,
            },
        );
        self.send(
            req.requester,
            req.req_id,
            HubMsg::WriteAck {
                results: req.results,
            },
        );
    }

    /// An outstanding WRITE_APPLY hit the holder timeout.
    pub(super) fn apply_deadline(&mut self, now: Nanos, id: u64) {
        if let Some(o) = self.seq.outstanding.get(&id) {
            let pdev = o.pdev;
            self.declare_dead(now, pdev);
        }
    }

    /// Removes a dead holder from every pending quorum.
    pub(super) fn drop_holder(&mut self, now: Nanos, pdev: Pdev) {
        let ids: Vec<u64> = self
            .seq
            .outstanding
            .iter()
            .filter(|(_, o)| o.pdev == pdev)
            .map(|(id, _)| *id)
            .collect();
        for id in ids {
            let o = self.seq.outstanding.remove(&id).expect("listed");
            self.clear_awaiting(now, &o.entry, pdev_bit(pdev), true);
        }
    }

    /// Resends every unanswered WRITE_APPLY to `pdev`, oldest first (so a
    /// key's versions arrive in order).
    pub(super) fn resend_applies(&mut self, pdev: Pdev) {
        let resend: Vec<(u64, AppId, EntryRec)> = self
            .seq
            .outstanding
            .iter()
            .filter(|(_, o)| o.pdev == pdev)
            .map(|(id, o)| (*id, o.entry.app, o.rec.clone()))
            .collect();
        for (id, app, rec) in resend {
            self.stats.applies_resent += 1;
            self.send(
                pdev,
                id,
                HubMsg::WriteApply {
                    app,
                    entries: vec![rec],
                },
            );
        }
    }
}
