//! ExoPlane (specs/exoplane.md; Kim, CMU-CS-21-143, ch. 4): many stateful
//! apps share one switch and spill their long tail of flows to smart NICs.
//! Popular flows are served entirely in the switch pipeline, the rest
//! entirely on one external device ("packet pinning"); a hub on the switch
//! control plane keeps table entries strongly consistent across copies and
//! data-plane counters consistent within a bound.
//!
//! The crate is built up in parts, each a sans-IO component that the
//! simulator and the live runtime drive:
//!
//! - [`ids`] — the small identifiers every part shares (app, object,
//!   logical and physical device, union key, version, sync round).
//! - [`sync`] — bounded-inconsistency synchronisation of shared registers
//!   (§5.6, Algorithms 3–4): merge operators, the hub's rounds and the
//!   daemon's replies, as sans-IO state machines.
//! - [`hub`] — the hub on the switch control plane: entry directory and
//!   per-key write sequencer, flow directory with two-phase promotion and
//!   eviction, device status with DUMP/REJOIN, and an op log for checks;
//!   it owns a [`sync::SyncHub`] and drives the rounds and the register
//!   lifecycle from its handlers.
//! - [`daemon`] — the daemon on each external device: new-flow setup with
//!   buffered packets, ordered WRITE_APPLY/DUMP application, the
//!   count-min popularity reporter, and its side of the rounds and REJOIN
//!   through an owned [`sync::Daemon`].
//! - [`app`] — the application model (§5.1): objects, consistency, union
//!   key, affinity, over inca-apps programs.
//! - [`switch`] — the switch program (§5.2): classifier, flow managers,
//!   shard map, device liveness, shim, MERGE, port-down failover.
//! - [`device`] — the device program (§5.3): dispatch, count-min
//!   popularity, the app, MISS punts, MERGE.
//! - [`manual`] — flow-manager and entry writes by control message, for
//!   tests and scenarios that run the data planes without a hub.
//! - [`runtime`] — each app as the hub and daemons see it (its objects,
//!   keys and its own control logic, captured); the switch program runs
//!   the hub (`hub = 1`) and a device program a daemon (`pdev = N`), their
//!   drivers in `switch` and `device`.
//! - [`checks`] — the §6 checks of a checked run (P1, P3, P4, P6), what
//!   `inca campaign` asks of every seed.
//! - [`props`] — P11 (promotion quality) and P12 (load balance) checks.
//! - [`programs`] — both programs sized from named parameters (`inca
//!   check`-style).
//! - [`bench`] — its `inca bench` row: the flow manager's cost in front
//!   of four apps, against the same apps without ExoPlane.
//! - [`system`] — ExoPlane as an inca system: its programs in `inca
//!   check` and scenarios.
//! - [`props`] — checks of the quantitative properties P11 (promotion
//!   quality) and P12 (load balance), with the workload scaling rule they
//!   run under.
//! - [`experiments`] — spec §8's E2 (union-key skew of the backbone-like
//!   trace) and E11 (hub memory, sync bandwidth, switch share), which need
//!   no full-scenario simulation.
//! - [`codec`] — the hub's, daemons' and sync messages on the wire: both
//!   directions to and from inca-wire's control protocol (§4.6), DUMP/SYNC
//!   batch splitting, and a sans-IO session framing them over TCP.

pub mod app;
pub mod bench;
pub mod checks;
pub mod codec;
pub mod daemon;
pub mod device;
pub mod experiments;
pub mod hub;
pub mod ids;
pub mod manual;
mod nested;
pub mod pinning;
pub mod programs;
pub mod props;
pub mod runtime;
mod step_m;
pub mod switch;
pub mod sync;
pub mod system;
pub use step_m::merge_frame;
