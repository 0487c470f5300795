//! RedPlane bounded-inconsistency mode (spec §5.9): switch state that is
//! snapshotted periodically and replicated asynchronously, so that after a
//! failure the restored state is an exact past state at most ε old.
//!
//! What lives where:
//! - [`lazy`] — the lazy two-copy snapshot of one register array and its
//!   reference model.
//! - [`config`] — parameters (§5.11), lease-time arithmetic (§5.4), the
//!   packet-generator validator (§9 item 15).
//! - [`apps`] — the snapshotted apps: heavy-hitter sketches per VLAN and the
//!   Async-Counter (§7).
//! - [`program`] — [`BoundedSwitch`]: the app plus replication, ack counting,
//!   the retransmission loop, per-partition leases and restore, and the ε
//!   monitor, as one switch program; its data-plane paths are in
//!   `datapath.rs` and its control plane in `control.rs`.
//! - [`observer`] — the verification recorder and the checker of §6.2 items
//!   10 and 11.
//! - [`experiments`] — the snapshot-bandwidth sweep of §8 item 4.
//! - [`campaign`] — crash-and-restore runs with random faults, checked
//!   against §6.2 items 10 and 11.
//! - [`catalog`] — the programs by name (`redplane_hh`,
//!   `redplane_async_counter`).

pub mod apps;
pub mod campaign;
pub mod catalog;
pub mod config;
mod control;
mod datapath;
pub mod experiments;
pub mod lazy;
pub mod observer;
pub mod program;

pub use apps::{AsyncCounter, BoundedApp, HeavyHitterSketch, HeavyReport};
pub use config::{EpsilonAction, SnapshotConfig};
pub use lazy::{LazyArray, LazyReference};
pub use observer::{check_snapshots, SnapEvent, SnapshotCheck, SnapshotRecorder};
pub use program::{
    BoundedSwitch, SnapDigest, SnapMeta, SnapStats, MSG_EPSILON, MSG_REINSTATE, MSG_WITHDRAW,
};
