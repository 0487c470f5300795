//! A NIC's model inputs and its per-frame costs on the wire and on PCIe.
//!
//! The receive path of one frame (Neugebauer et al., SIGCOMM 2018, §3,
//! "a simple NIC"): the MAC takes the frame off the wire at the NIC's line
//! rate into its packet buffer; the NIC DMA-writes the payload into the
//! buffer a receive descriptor points to, then writes the descriptor back
//! (both posted writes). Receive descriptors are prefetched in batches
//! ahead of need (a read request and one completion per batch, off the
//! latency path). The driver returns descriptors with an MMIO write of the
//! ring's tail, once per burst.
//!
//! The transmit path: the driver writes a transmit descriptor to host
//! memory and rings the doorbell (an MMIO write); the NIC reads the
//! descriptor, then the payload (DMA reads: a request, the host's round
//! trip, completions), puts the frame on the wire at its line rate, and
//! writes completions back once per batch.
//!
//! The rings are bounded: a frame that finds its receive ring without a free
//! descriptor is dropped (as the 82599 does with SRRCTL.DROP_EN, which DPDK
//! sets), and so is one that finds the packet buffer full; a transmit ring
//! with every descriptor in flight refuses the frame. All drops are counted.

use serde::{Deserialize, Serialize};

use crate::pcie::PcieConfig;

/// A NIC's model inputs. Defaults: Intel 82599 10 GbE on PCIe 2.0 × 8,
/// driven by a DPDK poll-mode driver.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct NicConfig {
    /// Line rate of each port, Gb/s (82599: 10 GbE).
    pub line_rate_gbps: f64,
    /// Receive descriptors per queue (FD.io CSIT's DPDK testpmd set-up:
    /// `--rxd=1024`).
    pub rx_ring: usize,
    /// Transmit descriptors per queue (CSIT testpmd: `--txd=1024`).
    pub tx_ring: usize,
    /// On-chip receive packet buffer, bytes, shared by the ports (82599
    /// datasheet §1.3: 512 KB receive packet buffer).
    pub rx_buffer_bytes: u64,
    /// Bytes per descriptor, both rings and write-backs (82599 datasheet
    /// §7.1.6, §7.2.3: 16-byte advanced descriptors).
    pub descriptor_bytes: u64,
    /// Receive descriptors fetched per prefetch [our choice: 8; the 82599
    /// fetches by threshold, RXDCTL.PTHRESH/HTHRESH].
    pub rx_prefetch: u64,
    /// Frames per driver burst: one receive tail update and one transmit
    /// doorbell per burst cross PCIe (DPDK's usual burst, `MAX_PKT_BURST`
    /// = 32 in l2fwd/l3fwd). Every frame still waits for a doorbell on its
    /// latency path [our choice: a lone frame at low load gets its own].
    pub burst: u64,
    /// Transmit completions written back per batch (DPDK ixgbe's default
    /// `tx_rs_thresh` = 32).
    pub tx_writeback_batch: u64,
    /// The PCIe link.
    pub pcie: PcieConfig,
}

impl Default for NicConfig {
    fn default() -> Self {
        NicConfig {
            line_rate_gbps: 10.0,
            rx_ring: 1024,
            tx_ring: 1024,
            rx_buffer_bytes: 512 * 1024,
            descriptor_bytes: 16,
            rx_prefetch: 8,
            burst: 32,
            tx_writeback_batch: 32,
            pcie: PcieConfig::default(),
        }
    }
}

/// The most descriptors a ring may have [our choice: far above any
/// driver's default; it keeps a configuration error from growing memory].
pub const MAX_RING: usize = 65_536;

impl NicConfig {
    /// Bits per second of each port.
    pub fn line_rate_bps(&self) -> u64 {
        (self.line_rate_gbps * 1e9).round() as u64
    }

    /// Checks the values; the message names the field.
    pub fn check(&self) -> Result<(), String> {
        if !(self.line_rate_gbps > 0.0 && self.line_rate_gbps <= 1600.0) {
            return Err(format!(
                "nic.line_rate_gbps must be in (0, 1600], not {}",
                self.line_rate_gbps
            ));
        }
        for (name, v) in [("rx_ring", self.rx_ring), ("tx_ring", self.tx_ring)] {
            if !(1..=MAX_RING).contains(&v) {
                return Err(format!("nic.{name} must be from 1 to {MAX_RING}, not {v}"));
            }
        }
        for (name, v) in [
            ("rx_prefetch", self.rx_prefetch),
            ("burst", self.burst),
            ("tx_writeback_batch", self.tx_writeback_batch),
            ("descriptor_bytes", self.descriptor_bytes),
        ] {
            if !(1..=4096).contains(&v) {
                return Err(format!("nic.{name} must be from 1 to 4096, not {v}"));
            }
        }
        if self.rx_buffer_bytes < 2048 {
            return Err(format!(
                "nic.rx_buffer_bytes must hold a frame (at least 2048), not {}",
                self.rx_buffer_bytes
            ));
        }
        self.pcie.check()
    }
}
