//! SRO, SwiSh's strong read-optimised variables (specs/swish.md §3.1,
//! §5.2), with the NAT of §7 as its application.
//!
//! Reads are local in the data plane unless a write to the key is in
//! flight (`pending_seq[crc32(key) mod H]` ahead of `acked_seq`, serial
//! compare); then the packet is tunnelled (IP-in-IP) to the tail, which
//! serves it. Writes (a NAT miss: a new flow) go through chain replication
//! on the switch CPUs: the origin allocates an external port from its own
//! range, holds the packet and sends WRITE_REQ to the head (retransmitted
//! every `t_sro`); the head sequences it (insert-if-absent: a key that
//! exists becomes a NOOP carrying its value), writes `pending_seq` before
//! the table, and sends WRITE down the chain; each replica applies in
//! strict seq order; the tail sends the cumulative WRITE_ACK to every
//! member, whose data plane raises `acked_seq`; the origin then releases
//! the held packet translated with the committed value.
//!
//! The chain logic (in-order apply, forwarding, duplicate re-forward and
//! re-ack, the log, cumulative acks to every predecessor, take-over as
//! tail, go-back-N resend to a new successor) is `inca_chain`'s
//! [`inca_chain::ChainNode`], driven from the switch CPU ([`cpu`]).
//!
//! - [`program`] — [`SroNat`], the `inca_switch::Program`: data plane and
//!   control-plane dispatch; [`SroConfig`].
//! - [`cpu`] — the control plane: origin, head, chain member.
//! - [`facts`] — what a run records for the checks.
//! - [`rig`] — a simulated chain of NAT switches with hosts and faults.
//! - [`checks`] — the §6 properties S1–S6 over a run, and the campaign.
//! - [`controller`] — fail-stop reconfiguration (head, middle, tail).
//! - [`trace`] — the experiments' traffic: the CAIDA-like trace, new
//!   connections at a rate, a line-rate blast (spec §8.1, §8.2 exp. 2–4).
//! - [`latency`] — per-packet NAT latency, read vs update packets (spec
//!   §8.2 exp. 2), single switch vs a chain.

pub mod checks;
pub mod controller;
pub mod cpu;
pub mod facts;
pub mod latency;
pub mod program;
pub mod rig;
pub mod trace;

pub use facts::{Fact, Facts};
pub use program::{Broken, SroConfig, SroNat};
