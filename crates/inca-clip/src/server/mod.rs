//! The CLIP server runtime (spec §5.3, §3.2): what runs on each commodity
//! server, around an app's [`RemoteHandler`](crate::app::RemoteHandler).
//!
//! [`ClipRuntime`] is a [`SoftwareNf`](inca_server::SoftwareNf) for
//! [`inca_server::MultiCoreServer`], which gives it the NIC, PCIe, RSS and
//! per-core run-to-completion. Per request, on the core RSS chose:
//!
//! 1. RSS hashes the flow key of the original headers behind the shim
//!    (the handler's `flow_key`), so a flow stays on one core.
//! 2. Validate: CLIP EtherType, version 1, kind REQUEST, the app's id,
//!    `hdr_words * 4 == 16 + P`, `parsed_len` within the frame; a request
//!    for another server is counted `misdelivered` and served anyway.
//! 3. Flow record (per core): created with the group version it came with;
//!    a later group selection with another version is a `ver_mismatch`.
//! 4. With `CMS_VALID`, the flow's top-N candidate estimate.
//! 5. The handler reads the request from the params region and writes the
//!    result over it.
//! 6. Kind RESPONSE and the status are set; no other byte changes, so the
//!    response is exactly as long as the request; it leaves on the port it
//!    came in on.
//!
//! Housekeeping (the server calls it every 10 ms): close the batch of
//! entries handlers created; every 100 ms, expire records idle for T_exp
//! that are not offloaded. The controller's messages are typed methods
//! ([`control`]); encoding CLIP-CTL is the glue's job.
//!
//! - [`config`] — [`RuntimeConfig`]: server id, T_exp, bounds.
//! - [`request`] — validation and the offsets of a request's parts.
//! - [`flows`] — per-core flow records, expiry, queries.
//! - [`topn`] — per-core top-N candidates and the report's merge.
//! - [`pool`] — a pool slice (SNAT ports, TRD indices) for handlers.
//! - [`stats`] — the counters.
//! - [`runtime`] — [`ClipRuntime`]: the data path and housekeeping.
//! - [`control`] — the control API.
//! - [`endpoint`] — [`ClipServer`]: the runtime with its CLIP-CTL endpoint.

pub mod config;
pub mod control;
pub mod endpoint;
pub mod flows;
pub mod pool;
pub mod request;
pub mod runtime;
pub mod stats;
pub mod topn;

#[cfg(test)]
mod tests;

pub use config::RuntimeConfig;
pub use endpoint::ClipServer;
pub use flows::{FlowInfo, FlowRecord};
pub use pool::SlicePool;
pub use request::Invalid;
pub use runtime::{ClipRuntime, RuntimeError};
pub use stats::RuntimeStats;
