//! CLIP (specs/clip.md; Xu et al., "CLIP: Accelerating Features Deployment
//! for Programmable Switch"): one network function written as a switch
//! `pre_processing`, a `remote_handler` on a cluster of commodity servers
//! and a switch `post_processing`. The switch invokes the handler like an
//! RPC through its data plane: it wraps the packet and a typed request in a
//! shim, sends it to one server of a group, and finishes the packet when
//! the response comes back. Heavy flows are promoted into switch tables;
//! servers join and leave without moving state.
//!
//! - [`flow`] — the flow key and the four switch hashes over it (§4.1).
//! - [`app`] — the programming abstraction (§5.1): an app's switch half
//!   and its remote handler.
//! - [`campaign`] — the membership campaign (properties 4 and 6).
//! - [`controller`] — transitions, pins, failures, promotion (§5.5–§5.6);
//!   it runs on the switch CPU, so it lives in [`switch`] and the switch
//!   program embeds it (re-exported here).
//! - [`ctl`] — CLIP-CTL datagrams and reliable delivery, both ends.
//! - [`switch`] — the generated switch program and its driver.
//! - [`modules`] — E7: each module's share of the switch (Table II).
//! - [`params`] — the programs built from named parameters.
//! - [`system`] — CLIP as an inca system (`inca check`, scenarios).
//! - [`server`] — the server runtime (§5.3): [`server::ClipRuntime`], a
//!   software NF for `inca_server::MultiCoreServer` around a remote
//!   handler, with its sans-IO control API.
//! - [`apps`] — the apps of §7 (NULL, MFWD, SNAT, TRD).
//! - [`bench`] — CLIP's rows of `inca bench`.
//! - [`experiments`] — the §8.2 experiments built in for `inca sweep`.
//! - [`scenario`] — `[[server]] kind = "clip_server"`: the runtime on a
//!   multi-core server in scenarios, priced per request (§8.1).

pub mod app;
pub mod apps;
pub mod bench;
pub mod campaign;
pub mod ctl;
pub mod experiments;
pub mod flow;
pub mod modules;
pub mod params;
pub mod scenario;
pub mod server;
pub mod switch;
pub mod system;

pub use switch::controller;

pub use app::{Entry, HandlerCtx, HandlerStatus, PostPath, PreOutcome, RemoteHandler, SwitchApp};
pub use flow::{FlowHashes, FlowKey, FLOW_KEY_LEN};
