//! The super-spreader / DDoS detector's baselines and experiment 8's rig
//! (specs/swish.md §7, §8.2 E8). The detector on SDW itself is the SDW
//! replica's application ([`crate::sdw::ddos`]); its arithmetic is
//! [`crate::detector`].
//!
//! - [`local`] — a baseline switch: a local sketch, the already-reported
//!   array, the pull ring or push digests, the block table;
//! - [`rpc`] — the controller's READ_REG / TABLE_ADD messages (§4.5
//!   framing);
//! - [`controller`] — the controller device: polls or takes digests, sums
//!   the switches' estimates, blocks on both;
//! - [`rig`] — attackers, two spines (SDW, pull or push), the sink.

pub mod controller;
pub mod local;
pub mod rig;
pub mod rpc;
