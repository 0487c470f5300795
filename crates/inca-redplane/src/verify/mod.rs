//! Verification for RedPlane (spec §6): the lease-protocol models, the
//! history recorder, the linearizability checkers and the cross-device
//! runtime invariant monitor. The system-independent engines (model
//! checking, the Wing–Gong search, `RunCheck`, the campaign loop) are
//! `inca_verify`'s; what is here is RedPlane's on top of them.
//!
//! - [`model`] — Rust models of the lease protocol (§6.1), explored by
//!   `inca_verify::model`: the base TLA+ machine with safety invariants and a
//!   fairness-constrained liveness search, and the extended model with loss,
//!   duplication, reordering, fencing and owner-checked renewal, plus the
//!   mutants of §9 items 4 and 5 that must produce counterexamples.
//! - [`history`] — the per-flow history recorder (§6.3 Recording): inputs,
//!   released outputs with their observed version, the store's committed
//!   log and lease grants, with bounded memory.
//! - [`linearizability`] — Checker A (`inca_verify`'s Wing–Gong search over
//!   RedPlane's per-flow ops) and Checker B (the O(n log n) witness checker
//!   over the store's committed log), generic over a
//!   [`linearizability::Spec`], plus the app oracles of §6.3.
//! - [`invariants`] — the [`invariants::Monitor`] of the global-view runtime
//!   invariants of §6.2 (1, 2, 3, 8, 9, 10, 11), fed with timestamped events.
//! - [`run_check`] — the per-run check of a fault campaign: records a
//!   simulated run through the observer hooks and judges every flow.

pub mod history;
pub mod invariants;
pub mod linearizability;
pub mod model;
pub mod run_check;
