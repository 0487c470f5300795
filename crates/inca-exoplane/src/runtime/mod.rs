//! What the hub and daemons need from the rest of ExoPlane to run in a
//! switch and smart NICs: each app as [`crate::hub::app::FlowKeys`] and
//! [`crate::daemon::ControlLogic`] ([`logic`]). The drivers themselves are
//! the switch program's hub glue and the device program's daemon glue,
//! which share [`pop_merge`].

pub mod logic;

use std::collections::{HashMap, VecDeque};

/// A counter cell as MERGE and MERGE_ACK name it: (app, object, index).
pub(crate) type Cell = (u8, u16, u32);

/// The oldest MERGE in flight on cell `k` (a cell's MERGE_ACKs come back
/// in the order its MERGEs went into the one pipeline), for the hub's and
/// daemons' drivers.
pub(crate) fn pop_merge<T>(merges: &mut HashMap<Cell, VecDeque<T>>, k: Cell) -> Option<T> {
    let q = merges.get_mut(&k)?;
    let m = q.pop_front();
    if q.is_empty() {
        merges.remove(&k);
    }
    m
}
