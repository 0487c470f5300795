//! The TEA switch side (spec §2, §3.1, §3.3, §5): the data-plane blocks as
//! one switch program over a network function, and its control plane.
//!
//! - [`config`] — model inputs and the §5.9 checks.
//! - [`nf_api`] — [`TeaNf`], the developer-facing data-plane API (§5.11).
//! - [`wire`] — request headers, shim, response fields, digests (§4.2, §4.3).
//! - [`dataplane`] — [`TeaSwitch`]: parser extension, LookupHandler,
//!   ServerResolver, flow control, MemResolver, PRE, LookupRequestor,
//!   response pass, NAK handling, port-down packets.
//! - `cp` — the control plane: event dispatch, the plan executor's steps,
//!   epochs, the NF slow path; its state `ControlState` composes owning
//!   parts: `cp_plans` (intents, the running plan), `cp_cache` (cache
//!   slots, hit counts, the sketch clear), `cp_servers` (server records,
//!   setup and recovery, heartbeats, watchdog), `cp_agent` (the agent
//!   link: requests, retransmission).
//! - [`report`] — counters and series for the switch's node report.
//! - `punts` — packets of a key whose slow-path insert is pending.
//! - [`observer`] — the optional correctness hook for tests and campaigns.

pub mod config;
mod cp;
mod cp_agent;
mod cp_cache;
mod cp_plans;
mod cp_servers;
pub mod dataplane;
pub mod nf_api;
pub mod observer;
mod punts;
pub mod report;
pub mod wire;

pub use config::{ServerSpec, TeaConfig};
pub use cp::{
    delete_message, insert_message, update_message, CpStats, MSG_DELETE, MSG_INSERT, MSG_UPDATE,
};
pub use dataplane::{DpStats, TeaMeta, TeaSwitch};
pub use nf_api::{DropReason, LookupMd, PuntAction, TeaNf, Verdict};
pub use observer::{CheckVerdict, CommitRecord, LookupPath, LookupRecord, Observer, Recorder};
pub use punts::{MAX_PER_KEY as MAX_PUNTS_PER_KEY, MAX_WAITING as MAX_PUNTS_WAITING};
pub use wire::TeaDigest;
