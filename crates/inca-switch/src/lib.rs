//! inca-switch: a software model of a Tofino-class programmable switch.
//!
//! What lives where:
//! - [`device`] — the sans-IO device contract every inca device implements
//!   (frames, timers and control messages in; transmissions and timers out).
//! - [`program`] — the switch program API: parser, ingress, egress and
//!   control-plane handlers over a [`PacketCtx`]; [`intrinsic`] — what the
//!   switch tells a program about a packet (where it came from).
//! - [`objects`] — declaring objects and the data-plane access rules (one
//!   access per object per pass, tables read-only from the data plane).
//! - Stateful objects: [`table`] (exact, ternary, LPM, range; idle timeout),
//!   [`register`] (register arrays and actions), [`counter`], [`meter`]
//!   (RFC 2698), [`hash`] (catalogue CRC-16/32/64 units, independent
//!   sketch rows).
//! - [`line`] — exact serialisation of frames onto a line.
//! - [`tm`] — traffic manager: egress queues, shared buffer, multicast
//!   groups, mirror sessions. [`pktgen`] — the packet generator.
//! - [`control`] — the control-plane agent: latency and operation-rate model,
//!   and the events a program's control plane receives.
//! - [`profile`], [`resources`], [`placement`] — device profiles, resource
//!   kinds, and the stage allocator that places a program or explains why it
//!   does not fit.
//! - [`composite`] — several programs as blocks of one program: namespaced
//!   declarations, per-block metadata and digests, control events routed to
//!   their block, and a classifier for several apps on one switch;
//!   [`block_report`] attributes the resource report to blocks, and
//!   [`capture`] runs control logic and collects its writes.
//! - [`switch`] — the [`Switch`] device that runs a program on a profile.
//! - [`loadcheck`] — the load-time check `inca check` runs: the program
//!   exercised on synthesized packets, every pass traced ([`trace`]) and
//!   re-run with perturbed results ([`probe`]) to find double accesses and
//!   declared dependencies that contradict the data flow.
//! - [`agenda`] — the time-ordered event agenda devices and drivers use.
//! - [`fabric`] — the multi-device test fabric: devices, wires with
//!   latency and loss, one time-ordered agenda, taps, control capture and a
//!   template feed for benchmarks; [`harness`] is its one-device form for
//!   tests.
//! - [`rpc`] — reliable switch-CPU-to-server requests: ids, the pending
//!   map, retransmission with backoff and a bounded retry count.
//! - [`invariant`] — the [`invariant!`] macro: panics with the seed in tests
//!   and simulation, counts in live mode.
//! - [`units`] — times, sizes and rates as people write them.
pub mod agenda;
pub mod block_report;
pub mod capture;
pub mod composite;
pub mod control;
pub mod counter;
pub mod device;
pub mod fabric;
pub mod harness;
pub mod hash;
pub mod intrinsic;
pub mod invariant;
pub mod line;
pub mod loadcheck;
pub mod meter;
pub mod objects;
pub mod pktgen;
pub mod placement;
pub mod probe;
pub mod profile;
pub mod program;
pub mod register;
pub mod resources;
pub mod rpc;
pub mod switch;
pub mod table;
pub mod tm;
pub mod trace;
pub mod units;

pub use composite::{Block, Composite, CompositeError};
pub use control::{ControlPlane, PacketOutDest};
pub use device::{Device, DeviceRng, Input, Nanos, Output, PortId};
pub use objects::{
    AccessError, ArrayDecl, BlockSpan, DataPlane, Declare, DeclareError, Handle, ObjectId,
    RegisterHandle, TableDecl, TableHandle,
};
pub use placement::Gress;
pub use profile::Profile;
pub use program::{
    CheckHints, ControlEvent, Destination, KnownViolation, PacketCtx, PacketKind, ParseError,
    Program, ProgramReport, ProgramSeries,
};
pub use switch::{check, LoadError, Switch, SwitchStats};
pub use table::{MatchKind, MatchSpec};
