//! inca-live: the same sans-IO devices the simulator drives, run as ordinary
//! processes exchanging real Ethernet frames.
//!
//! What lives where:
//! - [`port`] — the `Port` trait: a device port bound to something real.
//!   [`udp`] carries one frame per UDP datagram (unprivileged, loopback or
//!   across machines); [`packet`] attaches to a Linux interface with
//!   AF_PACKET (root), so a switch process can sit between namespaces.
//! - [`capture`] — a pcap of every frame a port carries.
//! - [`link`] — a scenario link's model (rate, delay, loss…) on a port's
//!   egress.
//! - [`config`] — what `inca node --config FILE` reads.
//! - [`session`] — control sessions between nodes over real TCP.
//! - [`runner`] — the live driver: wall-clock time, timers, batched frame
//!   I/O, one device per thread.
//! - [`testbed`] — a scenario's topology built live (namespaces, veth pairs,
//!   `inca node` processes), recorded and torn down exactly.

pub mod capture;
pub mod config;
pub mod link;
pub mod packet;
pub mod port;
pub mod runner;
pub mod session;
pub mod testbed;
pub mod udp;
