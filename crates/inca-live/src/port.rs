//! A device port bound to something real.

use std::io;
use std::os::fd::RawFd;

/// Most frames a port hands over or takes in one call (the batch size of
/// `recvmmsg`/`sendmmsg`).
pub const BATCH: usize = 64;

/// Largest frame a port carries (a jumbo frame).
pub const MAX_FRAME: usize = 9216;

/// Counters of one port.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PortStats {
    /// Frames received and handed to the device.
    pub rx_frames: u64,
    /// Frames sent.
    pub tx_frames: u64,
    /// Frames the operating system refused to take (queue full); dropped.
    pub tx_dropped: u64,
    /// Datagrams or packets that were not acceptable frames (too short,
    /// too long, from an unexpected peer); counted and dropped.
    pub rx_malformed: u64,
}

/// One device port bound to a real transport. Implementations never block:
/// the runner polls their file descriptors.
pub trait Port: Send {
    /// Appends up to `max` received frames to `out`; returns how many (0
    /// when nothing is waiting).
    fn recv_batch(&mut self, out: &mut Vec<Vec<u8>>, max: usize) -> io::Result<usize>;
    /// Sends `frames` (draining it); frames the OS will not take now are
    /// dropped and counted, as a NIC queue overflow would.
    fn send_batch(&mut self, frames: &mut Vec<Vec<u8>>) -> io::Result<()>;
    /// The file descriptor to poll for readability.
    fn fd(&self) -> RawFd;
    /// Counters.
    fn stats(&self) -> PortStats;
    /// What it is bound to, for logs.
    fn describe(&self) -> String;
    /// Whether the link is up now (carrier present), for transports that
    /// can tell; `None` when they cannot (a UDP link has no carrier). The
    /// runner polls it and hands changes to the device as
    /// `Input::LinkState`.
    fn link_up(&self) -> Option<bool> {
        None
    }
}
