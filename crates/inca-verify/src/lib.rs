//! System-independent verification, below the systems: what RedPlane uses
//! today and SwiSh's strong mode needs next.
//!
//! - [`linearizability`] — is a recorded history of operations (inputs,
//!   invocation and response times, outputs) linearizable against a
//!   sequential specification? Wing–Gong search with memoisation.
//! - [`windowed`] — the same question window by window, cut where the
//!   history is quiescent, carrying every state a window can end in: long
//!   histories at the cost of their windows.
//! - [`history`] — per-key histories of calls recorded across devices,
//!   checked key by key (what a linearizable key-value service reports).
//! - [`model`] — explicit-state model checking: breadth-first exploration
//!   of a model's state space within bounds, shortest counterexample traces
//!   to a bad state.
//! - [`run_check`] — checks over a finished simulated run: the devices'
//!   counted invariant violations and [`RunCheck`]s over recorded state.
//! - [`campaign`] — the campaign loop: many seeds on threads, each run
//!   checked, summarised in seed order; [`campaign_results`] is what it
//!   finds.
//!
//! Module dependencies point one way: `campaign_results` ← `run_check`,
//! `campaign`; `linearizability` ← `history`, `windowed`; `model` stands alone.

pub mod campaign;
pub mod campaign_results;
pub mod history;
pub mod linearizability;
pub mod model;
pub mod run_check;
pub mod windowed;

pub use campaign::{run_campaign, SeedFailure};
pub use campaign_results::{CampaignSummary, KindTally, SeedResult};
pub use run_check::{Judgement, RunCheck};
