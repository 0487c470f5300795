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
use crate::sync::{DaemonOutput as SyncOut, Merge};

impl Daemon {
    /// The merge of `e`'s object if it is a register of a known app.
    pub(super) fn merge_of(&self, e: &EntryKey) -> Option<Merge> {
        let logic = self.apps.get(&e.app)?;
        let o = logic.objects().iter().find(|o| o.obj == e.obj)?;
        o.kind.merge()
    }

    /// The device got (or re-got) a copy of `e`.
    pub(super) fn sync_stored(&mut self, e: &EntryKey) {
        if let Some(m) = self.merge_of(e) {
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

    /// The DUMP is applied and REJOIN arrived: restore the registers.
    pub(super) fn start_rejoin(&mut self) {
        let rejoin = self.pending_rejoin.take().unwrap_or_default();
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
