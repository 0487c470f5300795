//! The software network function a multi-core server runs: frames in,
//! frames out, on one core at a time.
//!
//! A DPDK-style NF runs to completion: a core takes a frame from its receive
//! queue, runs the NF on it, and hands what the NF sends to the NIC before
//! taking the next. The server tells the NF which core runs it, so an NF
//! keeps per-core state (a core's own allocation range, its own counters)
//! without locks, and shares what it must (a flow table reached by any core
//! that sees the flow's reply).
//!
//! Time: the server hands the NF the time a core takes a frame
//! ([`SoftwareNf::process_at`]), and an NF that keeps timers (flow expiry,
//! batched reports) names an interval ([`SoftwareNf::housekeeping_interval`])
//! at which the server calls [`SoftwareNf::housekeeping`] from its agenda.
//! NFs without either keep the defaults and see no change.
//!
//! CPU time: every frame costs its core the server's
//! [`CoreCosts`](crate::CoreCosts) (per frame and per byte); an NF whose
//! work differs by request (a lookup on every frame, an allocation only on
//! a miss) reports the rest per frame ([`SoftwareNf::take_extra_cpu_ns`]).

use inca_switch::device::{Nanos, PortId};

/// A frame an NF sends: the port and the frame. The server sets its
/// Ethernet addresses (source: the port's MAC, destination: the neighbour's)
/// [our choice: the driver layer's job, so NFs stay L3].
pub type NfOutput = (PortId, Vec<u8>);

/// A software NF hosted on a multi-core server. See the module
/// documentation.
pub trait SoftwareNf {
    /// Its name, for reports.
    fn name(&self) -> &str;

    /// Processes `frame`, received on `port`, on core `core`, pushing the
    /// frames to send onto `out` (none: the frame is dropped). A malformed
    /// frame is the NF's to count and drop, never a panic.
    fn process(&mut self, core: usize, port: PortId, frame: Vec<u8>, out: &mut Vec<NfOutput>);

    /// [`SoftwareNf::process`] at time `now`, the time the core takes the
    /// frame (its state changes then; what it sends leaves when the CPU
    /// time is over). The server calls this one; the default forgets the
    /// time, so an NF that needs no clock implements only `process`.
    fn process_at(
        &mut self,
        now: Nanos,
        core: usize,
        port: PortId,
        frame: Vec<u8>,
        out: &mut Vec<NfOutput>,
    ) {
        let _ = now;
        self.process(core, port, frame, out)
    }

    /// CPU time the frame just processed took beyond the server's
    /// per-frame [`CoreCosts`](crate::CoreCosts), in ns: work that depends
    /// on what the frame asked for (a table miss that allocates, say),
    /// which one cost per frame cannot express. The server asks right after
    /// each [`SoftwareNf::process_at`] and adds the answer to that frame's
    /// CPU time (so it delays what the frame sends and the frames queued
    /// behind it); the NF forgets it once asked. Default 0.
    fn take_extra_cpu_ns(&mut self) -> Nanos {
        0
    }

    /// How often the server runs [`SoftwareNf::housekeeping`]: None (the
    /// default) never. Read when the server starts and restarts and after
    /// each run, so an NF may change it. A zero interval is refused when
    /// the server is built (it would never let time advance).
    fn housekeeping_interval(&self) -> Option<Nanos> {
        None
    }

    /// Periodic work at time `now` (expiry, batching reports), pushing the
    /// frames to send onto `out`. The server sends them through core 0's
    /// transmit path (descriptor, doorbell, DMA) as if core 0 had sent
    /// them at `now`, without charging core 0 CPU time [our choice: a
    /// DPDK app runs its timers on a control thread, or between bursts at a
    /// cost that is small next to the per-packet work].
    fn housekeeping(&mut self, now: Nanos, out: &mut Vec<NfOutput>) {
        let _ = (now, out);
    }

    /// The bytes the NIC's RSS hashes for `frame`, when the NF defines them
    /// (a CLIP server hashes the flow key behind its shim: real NICs cannot
    /// hash past an unknown EtherType, so this models flexible-parser RSS
    /// or a dispatcher core). None (the default): the NIC's own IPv4
    /// 4-tuple hash ([`crate::rss`]).
    fn rss_input(&self, frame: &[u8]) -> Option<Vec<u8>> {
        let _ = frame;
        None
    }

    /// Its counters, for the node report (names without a prefix; the
    /// server adds `nf_`).
    fn counters(&self) -> Vec<(String, u64)>;

    /// The server crashed: the NF loses its volatile state (counters
    /// survive, they belong to the experiment).
    fn reset(&mut self);
}
