//! EWO — eventual, write-optimised shared variables (specs/swish.md §3.2,
//! §4.3, §5.3): reads and writes are local, replicas converge through
//! idempotent CRDT merges carried by mirrored updates and anti-entropy.
//!
//! - [`merge`] — the merge functions (LWW, G-counter, PN-counter, G-set,
//!   max) and E1 as property tests;
//! - [`app`] — the application operation a replica answers;
//! - [`config`] — a replica's configuration and its validation;
//! - [`program`] — the replica as a switch program (data plane);
//! - [`control`] — its control plane and the controller's messages;
//! - [`limiter`] — the rate limiter on an EWO G-counter (§7);
//! - [`params`] — the program from `name=value` parameters ([`PARAMS`]);
//! - [`rig`] — a simulated group of replicas with app hosts and a
//!   controller (fail-stop, join);
//! - [`campaign`] — a random faulty run per seed, judged on E2–E4.

pub mod app;
pub mod campaign;
pub mod config;
pub mod control;
pub mod limiter;
pub mod merge;
pub mod params;
pub mod program;
pub mod rig;

pub use config::{Broken, EwoConfig, Propagation, VarSpec};
pub use params::{from_params, PARAMS};
pub use program::{EwoProgram, EwoStats};
