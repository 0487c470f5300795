//! The `inca` command's shared pieces (the binary is `src/main.rs`).
//!
//! - [`factory`] — builds the apps of `inca-apps` as simulator switches, so
//!   `inca run` and the benchmarks load scenarios the same way.
//! - [`bench`] — the benchmarks `inca bench` runs, with their baselines.

pub mod bench;
pub mod factory;
