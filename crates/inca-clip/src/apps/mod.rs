//! The apps of spec §7: each file one app, its switch half and its remote
//! handler.
//!
//! - [`null`] — NULL, for microbenchmarks.
//! - [`mfwd`] — MFWD, memory-only forwarding (mirrored, promotable).
//! - [`snat`] — state-heavy source NAT.
//! - [`table`] — a promotable switch table keyed by flow key.

pub mod mfwd;
pub mod null;
pub mod snat;
pub mod table;
