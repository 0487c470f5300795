//! Server and NIC device building blocks, sans-IO.
//!
//! Every server device in inca (the RedPlane state store, the TEA DRAM
//! server, and the systems that follow) needs the same four things around
//! its own logic; they live here once:
//!
//! - [`addr`] — [`ServerAddr`]: the server's MAC/IPv4 and its next hop.
//! - [`demux`] — [`PortDemux`]: which UDP destination port goes to which
//!   handler; malformed frames, frames for another IP and unknown ports are
//!   counted and dropped.
//! - [`service`] — [`ServiceQueue`]: one FIFO server (a worker, a core, a
//!   NIC engine) busy until some time, with a bounded backlog whose overflow
//!   is counted.
//! - [`transmit`] — [`TxPort`] and [`TxQueue`]: frames handed to a port in
//!   non-decreasing time, as the device contract requires, although the
//!   handlers that produced them finish out of order.
//!
//! Each piece is a plain value the device owns and drives from its
//! [`Device`](inca_switch::device::Device) methods; nothing here sets timers
//! or reads clocks. A multi-core server is a `Vec<ServiceQueue>` with a
//! choice of core per request (RSS: a hash of the flow picks the index), all
//! feeding one [`TxQueue`] per port.

pub mod addr;
pub mod demux;
pub mod service;
pub mod transmit;

pub use addr::ServerAddr;
pub use demux::{DemuxError, DemuxStats, PortDemux, Undeliverable, MAX_BOUND_PORTS};
pub use service::{Admitted, QueueBound, QueueFull, ServiceQueue, ServiceStats};
pub use transmit::{TxPort, TxQueue, TxQueueStats};
