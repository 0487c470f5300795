//! inca-redplane: RedPlane (specs/redplane.md) — switch applications whose
//! per-flow state survives switch failure and rerouting, because every
//! update is replicated from the data plane to an external chain-replicated
//! state store.
//!
//! What lives where:
//! - [`store`] — the state store server as a sans-IO device: shards, leases,
//!   fences, sequence checks, chain replication, snapshots.
//! - [`switch`] — the switch side in linearizable mode: the RedPlane ingress,
//!   egress and control-plane blocks composed with an app as one program.
//! - [`apps`] — RedPlane versions of the NAT, firewall, load balancer,
//!   EPC-SGW, Sync-Counter and KV store, each with its `spec_step` model.
//! - [`catalog`] — the RedPlane switch programs by name, as simulator nodes.
//! - [`system`] — RedPlane as an inca system (`inca_system::System`).
//! - [`bench`] — its rows of `inca bench`: the read path, the store in
//!   process and over UDP; [`fixtures`] — the set-ups they share with the
//!   criterion benches.
//! - [`snapshot`] — bounded-inconsistency mode: lazy snapshots, snapshot replication, ε monitor, HH and Async-Counter.
//! - [`verify`] — model checker, history recorder, linearizability checkers, invariant monitor (§6).

pub mod apps;
pub mod bench;
pub mod catalog;
pub mod fixtures;
pub mod snapshot;
pub mod store;
pub mod switch;
pub mod system;
pub mod verify;
