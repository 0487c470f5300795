//! The daemon's copy of the hub-managed entries (spec §5.4, §5.8): what it
//! sent to the device and what the device acknowledged, per key. Entries
//! of WRITE_APPLY and DUMP go to the device in arrival order; a version not
//! newer than the one already sent is ignored. WRITE_APPLIED is answered
//! only when the device acknowledged every entry of the apply at its
//! version or later, so the hub's ack means the device serves the value.
//! A DUMP stream replaces the table: keys it does not mention are removed
//! [our choice: a device declared dead may hold keys deleted meanwhile].

use std::collections::{BTreeMap, HashMap, HashSet};

use super::{Daemon, DaemonOutput, DeviceOp, DeviceOpId};
use crate::hub::msg::{DaemonMsg, EntryRec, WriteOp};
use crate::hub::oplog::EntryKey;
use crate::ids::{AppId, ObjId, Version};

struct Slot {
    sent: Version,
    acked: Version,
    /// The last op sent removes the key.
    removed: bool,
}

/// A WRITE_APPLIED to send once the device acknowledged `keys` at
/// their versions.
struct Reply {
    req_id: u64,
    ok: bool,
    keys: Vec<(EntryKey, Version)>,
}

/// The table and the replies waiting for device acknowledgements.
#[derive(Default)]
pub(super) struct Table {
    slots: BTreeMap<EntryKey, Slot>,
    in_flight: HashMap<u64, (EntryKey, Version)>,
    pub next_op: u64,
    /// WRITE_APPLIED replies waiting for device acknowledgements, by
    /// arrival.
    replies: BTreeMap<u64, Reply>,
    next_reply: u64,
    /// The replies each unacknowledged key holds back (so an ack looks at
    /// those alone, not at every waiting reply).
    waiting_on: HashMap<EntryKey, Vec<u64>>,
    dump_seen: Option<HashSet<EntryKey>>,
    dump_done: bool,
    pub rejoin_requested: bool,
}

impl Table {
    /// The acknowledged version of a key the device holds.
    pub fn acked(&self, app: AppId, obj: ObjId, key: &[u8]) -> Option<Version> {
        let k = EntryKey {
            app,
            obj,
            key: key.to_vec(),
        };
        self.slots
            .get(&k)
            .filter(|s| !s.removed && s.acked > 0 && s.acked >= s.sent)
            .map(|s| s.acked)
    }

    /// The version last sent to the device for a key it holds (not
    /// removed).
    pub fn sent_version(&self, key: &EntryKey) -> Option<Version> {
        self.slots.get(key).filter(|s| !s.removed).map(|s| s.sent)
    }

    /// A HELLO_ACK starts a possible DUMP stream.
    pub fn start_dump_window(&mut self) {
        self.dump_seen = Some(HashSet::new());
        self.dump_done = false;
        self.rejoin_requested = false;
    }

    fn satisfied(&self, key: &EntryKey, version: Version) -> bool {
        self.slots.get(key).is_none_or(|s| s.acked >= version)
    }
}

impl Daemon {
    /// Sends `rec` to the device unless not newer; returns whether it did.
    fn store(&mut self, app: AppId, rec: EntryRec) -> bool {
        let key = EntryKey {
            app,
            obj: rec.obj,
            key: rec.key.clone(),
        };
        if let Some(seen) = self.table.dump_seen.as_mut() {
            seen.insert(key.clone());
        }
        let slot = self.table.slots.entry(key.clone()).or_insert(Slot {
            sent: 0,
            acked: 0,
            removed: true,
        });
        if rec.version <= slot.sent {
            self.stats.stale_applies += 1;
            return false;
        }
        slot.sent = rec.version;
        let delete = rec.op == WriteOp::Delete;
        slot.removed = delete;
        if let Some(logic) = self.apps.get(&app) {
            logic.observe(rec.obj, &rec.key, (!delete).then_some(&rec.value[..]));
        }
        if delete {
            self.sync_removed(&key);
        } else {
            self.sync_stored(&key);
        }
        self.table.next_op += 1;
        let id = self.table.next_op;
        self.table.in_flight.insert(id, (key, rec.version));
        let op = if delete {
            DeviceOp::Remove {
                app,
                obj: rec.obj,
                key: rec.key,
                version: rec.version,
            }
        } else {
            DeviceOp::Store {
                app,
                obj: rec.obj,
                key: rec.key,
                value: rec.value,
                version: rec.version,
            }
        };
        self.out.push_back(DaemonOutput::Device {
            id: DeviceOpId(id),
            op,
        });
        true
    }

    /// Removes a key the hub's DUMP did not mention, keeping its version
    /// (the hub did not assign one to this removal).
    fn remove_local(&mut self, key: EntryKey) {
        let Some(slot) = self.table.slots.get_mut(&key) else {
            return;
        };
        slot.removed = true;
        let version = slot.sent;
        if let Some(logic) = self.apps.get(&key.app) {
            logic.observe(key.obj, &key.key, None);
        }
        self.sync_removed(&key);
        self.table.next_op += 1;
        let id = self.table.next_op;
        self.table.in_flight.insert(id, (key.clone(), version));
        self.out.push_back(DaemonOutput::Device {
            id: DeviceOpId(id),
            op: DeviceOp::Remove {
                app: key.app,
                obj: key.obj,
                key: key.key,
                version,
            },
        });
    }

    pub(super) fn on_apply(&mut self, req_id: u64, app: AppId, entries: Vec<EntryRec>) {
        let mut keys = Vec::new();
        for rec in entries {
            let key = EntryKey {
                app,
                obj: rec.obj,
                key: rec.key.clone(),
            };
            keys.push((key, rec.version));
            self.store(app, rec);
        }
        let seq = self.table.next_reply;
        self.table.next_reply += 1;
        for (k, v) in &keys {
            if !self.table.satisfied(k, *v) {
                self.table
                    .waiting_on
                    .entry(k.clone())
                    .or_default()
                    .push(seq);
            }
        }
        self.table.replies.insert(
            seq,
            Reply {
                req_id,
                ok: true,
                keys,
            },
        );
        self.flush_replies(vec![seq]);
    }

    pub(super) fn on_dump(&mut self, app: AppId, entries: Vec<EntryRec>, last: bool) {
        for rec in entries {
            self.store(app, rec);
        }
        if last {
            if let Some(seen) = self.table.dump_seen.take() {
                let stale: Vec<EntryKey> = self
                    .table
                    .slots
                    .iter()
                    .filter(|(k, s)| !s.removed && !seen.contains(*k))
                    .map(|(k, _)| k.clone())
                    .collect();
                for k in stale {
                    self.remove_local(k);
                }
            }
            self.table.dump_done = true;
            self.lost_state = false;
            self.maybe_rejoin_done();
        }
    }

    pub(super) fn on_device_ack(&mut self, id: DeviceOpId, ok: bool) {
        let Some((key, version)) = self.table.in_flight.remove(&id.0) else {
            if !self.register_ops.remove(&id.0) {
                self.stats.unknown += 1;
            }
            return;
        };
        if let Some(slot) = self.table.slots.get_mut(&key) {
            slot.acked = slot.acked.max(version);
            if slot.removed && slot.acked >= slot.sent {
                self.table.slots.remove(&key);
            }
        }
        let waiting = self.table.waiting_on.remove(&key).unwrap_or_default();
        if !ok {
            for seq in &waiting {
                if let Some(r) = self.table.replies.get_mut(seq) {
                    if r.keys.iter().any(|(k, v)| *k == key && *v == version) {
                        r.ok = false;
                    }
                }
            }
        }
        // Replies still waiting for a newer version of this key wait on.
        for &seq in &waiting {
            let still = self.table.replies.get(&seq).is_some_and(|r| {
                r.keys
                    .iter()
                    .any(|(k, v)| *k == key && !self.table.satisfied(k, *v))
            });
            if still {
                self.table
                    .waiting_on
                    .entry(key.clone())
                    .or_default()
                    .push(seq);
            }
        }
        self.flush_replies(waiting);
        self.maybe_rejoin_done();
    }

    /// Sends the WRITE_APPLIED of each of `candidates` whose entries the
    /// device has all acknowledged, in request order.
    fn flush_replies(&mut self, mut candidates: Vec<u64>) {
        candidates.sort_unstable();
        candidates.dedup();
        for seq in candidates {
            let done = self
                .table
                .replies
                .get(&seq)
                .is_some_and(|r| r.keys.iter().all(|(k, v)| self.table.satisfied(k, *v)));
            if done {
                let r = self.table.replies.remove(&seq).expect("checked");
                self.send_hub(r.req_id, DaemonMsg::WriteApplied { ok: r.ok });
            }
        }
    }

    /// REJOIN_DONE once the DUMP is complete, REJOIN arrived and the
    /// device acknowledged everything.
    pub(super) fn maybe_rejoin_done(&mut self) {
        if self.table.rejoin_requested && self.table.dump_done && self.table.in_flight.is_empty() {
            self.table.rejoin_requested = false;
            self.start_rejoin();
        }
    }
}
