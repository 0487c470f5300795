//! The CLIP switch program (spec §5.2, §5.4–§5.6), built from blocks:
//!
//! - [`forwarding`] — regular L2/L3 forwarding (inca-apps' program) and
//!   the two server slots, members and server links; FH_A.
//! - [`selection`] — the count-min sketch of flight packets.
//! - [`scalability`] — `select_server`: pin table, `cur`, `rec`, the two
//!   Bloom filters and the pin cache.
//! - [`program`] — the generated control flow over an app's
//!   `pre_processing` and `post_processing`.
//! - [`driver`] — the switch control plane: static set-up, the
//!   controller's commands, reports up.
//! - [`stats`] — per-packet-type counters.
//! - [`controller`] — the CLIP controller on the switch CPU (§5.5–§5.6),
//!   driving the data plane through [`driver`]'s commands.

pub mod controller;
pub mod driver;
pub mod forwarding;
pub mod program;
pub mod scalability;
pub mod selection;
pub mod stats;

pub use driver::{Command, Driver, DriverConfig, Report, ServerLink};
pub use program::{ClipMeta, ClipSwitch, PinOverflow};
