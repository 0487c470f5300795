//! SDW — strong delayed writes (specs/swish.md §3.3, §4.4, §5.4, §5.5):
//! updates batch into windows; a query in window w reads exactly the
//! updates of windows ≤ w − 2 from every replica, the same snapshot at
//! every replica.
//!
//! - [`model`] — Algorithm 1 with the §9 errata fixed, a plain type the
//!   property tests drive;
//! - [`config`] — a replica's configuration, its validation and named
//!   parameters;
//! - [`program`] — the replica as a switch program: registers, parser,
//!   egress, control plane; [`handlers`] — its ingress handlers;
//! - [`frames`] — byte positions and in-place rewrites of SDW frames;
//! - [`limiter`] — the rate limiter on a 1-row Sum collection (§7);
//! - [`app`] — the test application's update/query packets;
//! - [`ddos`] — the §7 super-spreader / DDoS detector as the replica's
//!   application (`SdwConfig::app`);
//! - [`recovery`] — the controller's §5.6 recovery after fail-stop;
//! - [`controller`] — the controller as a device with a control session
//!   to every replica (§4.5 RPC): loads and STARTs the collection;
//! - [`workload`] — a scenario host's app client (update/query packets);
//! - [`recovery_plan`] — the controller's §5.6 recovery after fail-stop
//!   as transport-neutral batches of register operations; [`recovery`] —
//!   its driver in the rig (control messages);
//! - [`rig`] — topologies local-2 and symmetric-4 in the simulator;
//! - [`campaign`] — a random faulty run per seed, judged on D1–D8.

pub mod app;
pub mod campaign;
pub mod config;
pub mod controller;
pub mod ddos;
pub mod frames;
pub mod handlers;
pub mod limiter;
pub mod model;
pub mod program;
pub mod recovery;
pub mod recovery_plan;
pub mod rig;
pub mod workload;
