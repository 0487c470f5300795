//! SwiSh (specs/swish.md; Zeno et al., NSDI'23): data-plane programs on
//! several switch pipes share variables, replicated by the switches
//! themselves, with one of three consistency classes:
//!
//! - **SRO** (strong, read-optimised): linearizable; reads are local unless
//!   a write to the key is in flight, writes go through chain replication
//!   on the switch CPUs (§5.2);
//! - **EWO** (eventual, write-optimised): local reads and writes, replicas
//!   converge through idempotent CRDT merges (§5.3);
//! - **SDW** (strong delayed writes): updates batched into windows, reads
//!   see a snapshot every replica agrees on (§5.4–§5.6).
//!
//! A replica is one **pipe** of a switch (§2). [our choice] inca models
//! each pipe as its own switch device running a SwiSh program, with its
//! own registers, generator streams and CPU; two pipes of one switch are
//! two devices joined by an internal link of tens of nanoseconds (the
//! issue's correction to the spec's 0.5 µs loopback).
//!
//! - [`addr`] — how replicas name and reach each other: rid, IPv4, MAC,
//!   the local port toward each peer, and the UDP frames between them.
//! - [`bench`] — its `inca bench` row: the SRO write path against the
//!   same NAT without replication.
//! - [`detector`] — the §7 super-spreader / DDoS detector's sketch
//!   arithmetic (sampling, hashes, popcount, estimates, traffic frames).
//! - [`ddos`] — the detector's pull and push baselines (local sketches and
//!   a controller) and the rig of experiment 8.
//! - [`experiments`] — the §8.2 experiments as built-in experiments for
//!   `inca sweep` (`experiment = "..."` in experiments/swish/).
//! - [`limiter`] — the rate limiter's shared pieces (bucket, estimate,
//!   log2/exp2 division), its pull baseline and E9's traffic hosts; the
//!   EWO and SDW variants build on it.
//! - [`readout`] — experiment 1 (§8.2): a sketch read through the control
//!   plane against a generator walk in the data plane.
//! - [`topology`] — the named topologies and the link model between
//!   replicas, shared by the rigs.
//! - [`system`] — SwiSh as an inca system: its programs in `inca check` and
//!   scenarios.
//! - [`sro`] — SRO with the NAT (§5.2, §7): the switch program, its CPU
//!   side on `inca_chain`, fail-stop reconfiguration, a rig and the S1–S6
//!   checks.
//! - [`sdw`] — strong delayed writes: the reference model of Algorithm 1,
//!   the data-plane program (§5.5), its rig and campaign.
//! - [`ewo`] — EWO: merges, the replica program and its control plane, a
//!   simulated rig and the E2–E4 campaign.
//!
//! The wire formats are in `inca_wire::swish`.

pub mod addr;
pub mod bench;
pub mod ddos;
pub mod detector;
pub mod ewo;
pub mod experiments;
pub mod limiter;
pub mod readout;
pub mod sdw;
pub mod sro;
pub mod system;
pub mod topology;
