//! What the hub and daemons need from the rest of ExoPlane to run in a
//! switch and smart NICs: each app as [`crate::hub::app::FlowKeys`] and
//! [`crate::daemon::ControlLogic`] ([`logic`]), and the frame a control
//! event travels in to the daemon that handles it ([`event`], EVENT_FWD).
//! The drivers themselves are the switch program's hub glue and the device
//! program's daemon glue, which share [`pop_merge`] and [`barrier`]
//! (operation acknowledgements, the wakeup timer).

pub(crate) mod barrier;
pub mod event;
pub mod logic;

use std::collections::{HashMap, VecDeque};

use inca_switch::{ControlPlane, PacketOutDest};
use inca_wire::exoplane::MergeRepr;

use crate::sync::MergeCmd;

/// The MERGE body of `cmd` for the counter cell at `index`.
pub(crate) fn merge_body(cmd: &MergeCmd, index: u64) -> MergeRepr {
    MergeRepr {
        obj_id: cmd.entry.obj.0,
        op: cmd.merge.op(),
        width: cmd.merge.width().bits(),
        slot: index as u32,
        round: cmd.round,
        delta: cmd.delta,
    }
}

/// Injects MERGE `m` of app `app` into the pipeline on port 0 (which sees
/// it as FromCpu, §5.6 step M); the cell its MERGE_ACK will name, None if
/// the body does not emit.
pub(crate) fn inject_merge(cp: &mut ControlPlane<'_>, app: u8, m: &MergeRepr) -> Option<Cell> {
    let frame = crate::merge_frame(app, m)?;
    cp.packet_out(frame, PacketOutDest::Ingress(0));
    Some((app, m.obj_id, m.slot))
}

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
