//! The hub's glue to synchronisation (spec §5.6, Algorithm 3): the hub owns
//! a [`SyncHub`](crate::sync::SyncHub) and calls it where the entry
//! lifecycle and the device status change, and turns its outputs into the
//! hub's own (switch register reads and MERGE injections as [`SwitchOp`]s,
//! SYNC_REQ and REJOIN as messages, an evicted register's slot removal as
//! the usual `RemoveEntry`). So a driver sees one stream of outputs.
//!
//! Where the lifecycle calls sit:
//! - a device becomes a holder of a register entry (a write adds it to the
//!   entry's holders) → `add_holder`; the entry is shared from its second
//!   copy;
//! - the switch installs a register (phase 1 of a promotion) → its value
//!   is `switch_install`'s (`S_cp`, or 0̸ untracked);
//! - refcount 0 after `T_flush` → `switch_evict`: the final read (after
//!   any pending MERGE) folds the switch's value into `S_cp`, then the slot
//!   is removed;
//! - DELETE completes → `delete`; holder dead → `device_down`; REJOIN →
//!   `begin_rejoin`; REJOIN_DONE → `rejoin_done`.

use inca_switch::device::Nanos;

use super::entries::pdev_bit;
use super::msg::HubMsg;
use super::oplog::EntryKey;
use super::{Hub, SwitchOp};
use crate::ids::Pdev;
use crate::sync::{HubOutput as SyncOut, Merge};

impl Hub {
    /// The merge of `e`'s object if it is a register.
    pub(super) fn merge_of(&self, e: &EntryKey) -> Option<Merge> {
        self.apps.get(&e.app)?.kinds.get(&e.obj)?.merge()
    }

    /// Devices in `bits` became holders of `key`: track them if it is a
    /// register (a refusal leaves the entry unsynchronised and is counted).
    pub(super) fn sync_add_holders(&mut self, key: &EntryKey, bits: u64) {
        let Some(m) = self.merge_of(key) else {
            return;
        };
        for p in 0..u16::from(self.config.n_devices) {
            if bits & pdev_bit(Pdev(p)) != 0 && self.sync.add_holder(key, m, Pdev(p)).is_err() {
                self.stats.sync_refused += 1;
            }
        }
    }

    /// Turns every pending output of the sync part into hub outputs.
    pub(super) fn pump_sync(&mut self, now: Nanos) {
        while let Some(o) = self.sync.poll_output() {
            match o {
                SyncOut::ReadSwitch { entry } => match self.slot_of(&entry) {
                    Some(slot) => {
                        self.switch_op(SwitchOp::ReadRegister { entry, slot });
                    }
                    None => {
                        // The sync part believes the switch holds an entry
                        // the directory has no slot for: answer 0̸ rather
                        // than stall the round; counted.
                        self.stats.sync_refused += 1;
                        let zero = self.merge_of(&entry).map_or(0, |m| m.identity());
                        self.sync.handle_switch_read(now, &entry, zero);
                    }
                },
                SyncOut::Merge(cmd) => match self.slot_of(&cmd.entry) {
                    Some(slot) => {
                        self.switch_op(SwitchOp::InjectMerge { slot, cmd });
                    }
                    None => {
                        self.stats.sync_refused += 1;
                        self.sync.handle_merge_ack(now, &cmd.entry);
                    }
                },
                SyncOut::RemoveSwitchSlot { entry } => self.remove_switch_copy(&entry),
                SyncOut::SyncReq { pdev, req } => self.send(pdev, 0, HubMsg::SyncReq(req)),
            }
        }
    }

    fn slot_of(&self, e: &EntryKey) -> Option<u32> {
        self.dir.map.get(e)?.slot
    }
}
