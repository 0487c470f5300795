//! Checkers over the hub's op log (spec §6):
//!
//! - [`check_p3`] — two-phase order: a flow's FM insert follows the
//!   acknowledgements of all its object installs (and no removal since);
//!   an object removal comes ≥ `T_flush` after the FM delete
//!   acknowledgement of every flow that used it, while no FM entry uses
//!   it, and with refcount 0.
//! - [`check_p4_log`] — strong writes: a write completes only after every
//!   holder it was sent to applied it or was declared dead.
//!
//! Device-side truth (holders apply in version order, released packets
//! find their entries) needs the devices' own records; the randomized
//! tests check those beside these.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use inca_switch::device::Nanos;

use super::entries::pdev_bit;
use super::oplog::{EntryKey, Op, OpLog};
use crate::ids::{AppId, UnionKey, Version};

/// A property violation: when and what.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// Time of the offending record.
    pub at: Nanos,
    /// What is wrong.
    pub what: String,
}

/// Checks P3 over `log`; `t_flush` is the hub's flush wait.
pub fn check_p3(log: &OpLog, t_flush: Nanos) -> Result<(), Violation> {
    if log.evicted() > 0 {
        return Err(Violation {
            at: 0,
            what: format!(
                "{} op-log records were evicted; cannot check",
                log.evicted()
            ),
        });
    }
    // Entries whose install was acknowledged and not removed since.
    let mut installed: BTreeSet<EntryKey> = BTreeSet::new();
    // Flows with an FM entry (insert issued, delete not yet acknowledged).
    let mut fm: BTreeMap<(AppId, UnionKey), Vec<EntryKey>> = BTreeMap::new();
    // Latest FM-delete acknowledgement of any flow using the entry.
    let mut last_gone: HashMap<EntryKey, Nanos> = HashMap::new();
    for r in log.records() {
        let fail = |what: String| Err(Violation { at: r.at, what });
        match &r.op {
            Op::ObjectInstallAcked { entry } => {
                installed.insert(entry.clone());
            }
            Op::FmInsert { app, uk, entries } => {
                if let Some(e) = entries.iter().find(|e| !installed.contains(*e)) {
                    return fail(format!(
                        "FM insert of {uk:?} (app {}) before the install ack of {e:?}",
                        app.0
                    ));
                }
                fm.insert((*app, uk.clone()), entries.clone());
            }
            Op::FmDeleteAcked { app, uk } => {
                if let Some(entries) = fm.remove(&(*app, uk.clone())) {
                    for e in entries {
                        last_gone.insert(e, r.at);
                    }
                }
            }
            Op::ObjectRemove { entry, refcount } => {
                if *refcount != 0 {
                    return fail(format!("{entry:?} removed with refcount {refcount}"));
                }
                if let Some(((_, uk), _)) = fm.iter().find(|(_, es)| es.contains(entry)) {
                    return fail(format!("{entry:?} removed while FM entry {uk:?} uses it"));
                }
                if let Some(&gone) = last_gone.get(entry) {
                    if r.at < gone + t_flush {
                        return fail(format!(
                            "{entry:?} removed {} ns after an FM delete ack (< T_flush {t_flush})",
                            r.at - gone
                        ));
                    }
                }
                installed.remove(entry);
            }
            _ => {}
        }
    }
    Ok(())
}

/// Checks the hub side of P4 over `log`: every completed write heard
/// WRITE_APPLIED (or a death) from each holder it targeted, and the
/// switch's apply when it targeted the switch.
pub fn check_p4_log(log: &OpLog) -> Result<(), Violation> {
    // (entry, version) → holder bits still owed.
    let mut owed: HashMap<(EntryKey, Version), u64> = HashMap::new();
    for r in log.records() {
        match &r.op {
            Op::WriteStarted {
                entry,
                version,
                targets,
                ..
            } => {
                owed.insert((entry.clone(), *version), *targets);
            }
            Op::WriteApplied {
                holder,
                entry,
                version,
            } => {
                if let Some(bits) = owed.get_mut(&(entry.clone(), *version)) {
                    *bits &= !holder.map_or(1, pdev_bit);
                }
            }
            Op::HolderDead { pdev } => {
                for bits in owed.values_mut() {
                    *bits &= !pdev_bit(*pdev);
                }
            }
            Op::WriteDone { entry, version } => {
                if let Some(bits) = owed.remove(&(entry.clone(), *version)) {
                    if bits != 0 {
                        return Err(Violation {
                            at: r.at,
                            what: format!(
                                "write {version} of {entry:?} done while holders {bits:#x} had not applied"
                            ),
                        });
                    }
                }
            }
            _ => {}
        }
    }
    Ok(())
}
