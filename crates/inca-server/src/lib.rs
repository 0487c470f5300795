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
//! On top of them, a whole device: [`multicore::MultiCoreServer`], a
//! multi-core server with a NIC ([`nic`]) on PCIe ([`pcie`]), RSS over its
//! cores ([`rss`]), running a software NF ([`nf`]) to completion per core.
//!
//! Each piece is a plain value the device owns and drives from its
//! [`Device`](inca_switch::device::Device) methods; nothing here sets timers
//! or reads clocks. A multi-core server is a `Vec<ServiceQueue>` with a
//! choice of core per request (RSS: a hash of the flow picks the index), all
//! feeding one [`TxQueue`] per port.

pub mod addr;
pub mod demux;
pub mod multicore;
pub mod nf;
pub mod nic;
pub mod pcie;
pub mod rss;
pub mod service;
pub mod transmit;

pub use addr::ServerAddr;
pub use demux::{DemuxError, DemuxStats, PortDemux, Undeliverable, MAX_BOUND_PORTS};
pub use multicore::{CoreCosts, CoreStats, MultiCoreServer, NicStats, PortMacs, ServerConfig};
pub use nf::{NfOutput, SoftwareNf};
pub use nic::NicConfig;
pub use pcie::{Pcie, PcieConfig};
pub use rss::{Rss, RssConfig};
pub use service::{Admitted, QueueBound, QueueFull, ServiceQueue, ServiceStats};
pub use transmit::{TxPort, TxQueue, TxQueueStats};
