//! inca-sim: a deterministic discrete-event network simulator that drives
//! inca's sans-IO devices.
//!
//! What lives where:
//! - [`engine`] — the simulation: nodes, links, the event agenda, faults,
//!   captures.
//! - [`factory`] — what a scenario needs from whoever runs it (switch
//!   programs, servers, system workloads).
//! - [`lanes`] — the event agenda (a FIFO lane per source).
//! - [`link`] — the link model: rate, propagation, queue, loss
//!   (Bernoulli, Gilbert–Elliott), duplication, reordering, jitter.
//! - [`metrics`] — counters, HDR latency histograms, time series, reports and
//!   the results folder.
//! - [`nodes`] — the devices: programmable switches, routers, hosts.
//! - [`partition`] — which side of a partition every node is on.
//! - [`quantity`] — times, rates and sizes as scenario files write them.
//! - [`random_faults`] — fault schedules drawn from a seed, for campaigns.
//! - [`session`] — control sessions between nodes (a reliable, ordered
//!   message stream over a management network: rate, latency, loss with
//!   retransmission, cut and reset).
//! - [`scenario`] — scenario files (TOML) and how they become a simulation;
//!   [`run`] — running one and writing its results.
//! - [`tcp`] — TCP endpoints (smoltcp) for hosts.
//! - [`workload_control`] — changes to a running host workload (popularity
//!   shifts, storms), as random faults deliver them.
pub mod engine;
pub mod factory;
pub mod lanes;
pub mod link;
pub mod metrics;
pub mod nodes;
pub mod partition;
pub mod quantity;
pub mod random_faults;
pub mod run;
pub mod scenario;
pub mod session;
pub mod smartnic;
pub mod tcp;
pub mod workload_control;

pub use engine::{Fault, LinkId, Node, NodeId, Simulation};
pub use link::{ChannelConfig, LossModel};
