//! inca-report: what happens to a run's results after the simulator wrote
//! them, and experiment sweeps (`inca report`, `inca sweep`).
//!
//! - [`results`] — a results folder read back ([`results::Run::load`]).
//! - [`plot`] — the plotting plumbing every picture shares (formats, fonts,
//!   palette, legends, `render!`, CDFs, bar axes).
//! - [`report`] — `inca report DIR`: the text summary and the run plots.
//! - [`sweep`] — `inca sweep`: a descriptor's configurations run (through
//!   the scenario factory the caller gives), then its plots drawn;
//!   [`sweep::descriptor`] is the descriptor format, [`sweep::plots`] draws
//!   the descriptor's `[[plot]]`s over a sweep folder.
//! - [`figures`] — line and bar figures for commands with their own rows.
//!
//! Module dependencies point one way: `results` ← `plot` ← `sweep` ←
//! `figures`, `report` (no cycle: `crates/inca/tests/layout.rs` checks).

pub mod figures;
pub mod plot;
pub mod report;
pub mod results;
pub mod sweep;
