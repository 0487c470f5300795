//! The daemon's glue to synchronisation (spec §5.6, Algorithm 4): the
//! daemon owns a sync [`Daemon`](crate::sync::Daemon), tells it which
//! register entries the device holds (a WRITE_APPLY or DUMP creates the
//! slot at 0̸, a delete removes it), hands it SYNC_REQs and the device's
//! register reads and MERGE_ACKs, and turns its outputs into the daemon's
//! own: register reads and MERGE injections for the device, SYNC_RESP to
//! the hub, and on REJOIN the register writes `reg = H` as [`DeviceOp`]s
//! acknowledged before REJOIN_DONE goes out.

use super::{Daemon, DaemonOutput, DeviceOp, DeviceOpId};
use crate::hub::app::register_bytes;
use crate::hub::msg::DaemonMsg;
use crate::hub::oplog::EntryKey;
use crate::sync::{DaemonOutput as SyncOut, Merge, Rejoin};

impl Daemon {
    /// The merge of `e`'s object if it is a register of a known app.
    pub(super) fn merge_of(&self, e: &EntryKey) -> Option<Merge> {
        let logic = self.apps.get(&e.app)?;
        let o = logic.objects().iter().find(|o| o.obj == e.obj)?;
        o.kind.merge()
    }

    /// The device got a copy of `e` at a newer version. The hub never
    /// changes a register's version but by DELETE and re-insert, so this is
    /// a new incarnation (a DUMP may skip the delete): its history starts
    /// at 0̸ like its slot.
    pub(super) fn sync_stored(&mut self, e: &EntryKey) {
        if let Some(m) = self.merge_of(e) {
            self.sync.remove_entry(e);
            if self.sync.add_entry(e, m).is_err() {
                self.stats.sync_refused += 1;
            }
        }
    }

    /// The device's copy of `e` is gone.
    pub(super) fn sync_removed(&mut self, e: &EntryKey) {
        if self.merge_of(e).is_some() {
            self.sync.remove_entry(e);
        }
    }

    /// REJOIN arrived: remember which incarnation of each entry it is
    /// about (the version the hub had sent when it sent the REJOIN).
    pub(super) fn rejoin_arrived(&mut self, rejoin: Rejoin) {
        let versions = rejoin
            .items
            .iter()
            .map(|(e, _)| self.table.sent_version(e))
            .collect();
        self.pending_rejoin = Some((rejoin, versions));
        self.table.rejoin_requested = true;
        self.maybe_rejoin_done();
    }

    /// The DUMP is applied and REJOIN arrived: restore the registers.
    /// Entries deleted or re-created since the REJOIN was sent (writes to a
    /// REBUILDING device keep flowing) are skipped: their new incarnation
    /// starts at 0̸ on both sides, and `H` of the old one would corrupt it.
    pub(super) fn start_rejoin(&mut self) {
        let Some((mut rejoin, versions)) = self.pending_rejoin.take() else {
            self.sync.handle_rejoin(&Rejoin::default());
            return;
        };
        let mut keep = Vec::with_capacity(rejoin.items.len());
        for (item, sent) in rejoin.items.drain(..).zip(versions) {
            if sent.is_some() && self.table.sent_version(&item.0) == sent {
                keep.push(item);
            } else {
                self.stats.rejoin_stale += 1;
            }
        }
        rejoin.items = keep;
        self.sync.handle_rejoin(&rejoin);
    }

    /// Turns the sync part's outputs into the daemon's; REJOIN_DONE goes
    /// out once every `reg = H` write was acknowledged.
    pub(super) fn pump_sync(&mut self) {
        while let Some(o) = self.sync.poll_output() {
            match o {
                SyncOut::ReadRegister { entry, round } => self
                    .out
                    .push_back(DaemonOutput::ReadRegister { entry, round }),
                SyncOut::Merge(cmd) => self.out.push_back(DaemonOutput::InjectMerge(cmd)),
                SyncOut::SetRegister { entry, value } => {
                    let Some(m) = self.merge_of(&entry) else {
                        continue;
                    };
                    self.table.next_op += 1;
                    let id = self.table.next_op;
                    self.register_ops.insert(id);
                    self.out.push_back(DaemonOutput::Device {
                        id: DeviceOpId(id),
                        op: DeviceOp::SetRegister {
                            app: entry.app,
                            obj: entry.obj,
                            key: entry.key,
                            value: register_bytes(value, m.width().bits() / 8),
                        },
                    });
                }
                SyncOut::SyncResp(resp) => self.send_hub(0, DaemonMsg::SyncResp(resp)),
                SyncOut::RejoinDone => self.rejoin_done_due = true,
            }
        }
        if self.rejoin_done_due && self.register_ops.is_empty() {
            self.rejoin_done_due = false;
            self.send_hub(0, DaemonMsg::RejoinDone);
        }
    }
}
