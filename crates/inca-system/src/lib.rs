//! The System plug-in interface: how a system (RedPlane, TEA, the plain
//! apps of `inca-apps`, and the ones still to come) tells inca's commands
//! what it offers, without the commands knowing it by name.
//!
//! - [`system`] — the [`System`] trait (programs, resource checks, server
//!   kinds, built-in campaigns, benchmarks, workloads) and [`SystemRun`],
//!   one run's builder with its run checks.
//! - [`registry`] — [`Registry`], the registered systems, and
//!   [`SystemFactory`], the scenario factory (`inca_sim::scenario::
//!   SwitchFactory`) that builds every device through them.
//! - [`campaign`] — the campaign runner: one scenario (or a built-in
//!   campaign) under many seeds, every run checked, on the loop of
//!   `inca_verify::campaign`; [`campaign_results`] (re-exported from
//!   `inca_verify`) is what it finds.
//! - [`bench`] — what a benchmark row is, so systems can offer theirs.
//! - [`experiment`] — built-in experiments: a system's rig that `inca
//!   sweep` runs like a scenario (`experiment = "NAME"` in a descriptor).
//! - [`apps`] — the plain apps of `inca-apps` served as a system.
//! - [`server`] — helpers for systems that build `[[server]]` devices, and
//!   the multi-core server as a simulator node.
//! - [`software_nat`] — the software NAT baseline on a multi-core server
//!   (`[[server]] kind = "sw_nat"`, served by [`apps`]).
//! - [`largest`] — the largest size of a program that fits a profile.
//! - [`error`] — the typed errors at these seams.
//!
//! A system crate depends on this one and implements [`System`]; the binary
//! lists the systems once (`inca::registry`) and every command iterates
//! over them. docs/architecture.md, "How to add a system", walks through a
//! toy example (crates/inca/tests/toy_system.rs).
//!
//! Module dependencies point one way: `error`, `bench`, `experiment` ← `system` ← `registry` ← `campaign`, `largest`, `apps`; `server` ← `software_nat` ← `apps`.

pub mod apps;
pub mod bench;
pub mod campaign;
pub mod error;
pub mod experiment;
pub mod largest;
pub mod registry;
pub mod server;
pub mod software_nat;
pub mod system;

/// What a campaign found (the results schema), from `inca_verify`.
pub use inca_verify::campaign_results;

pub use error::{CampaignError, CheckError, SystemError};
pub use experiment::{BuiltinExperiment, ExperimentRun};
pub use registry::{Registry, SystemFactory};
pub use system::{
    BuiltinCampaign, Judgement, ProgramInfo, RunCheck, RunMode, ServerKindInfo, System, SystemRun,
    WorkloadRegistration,
};
