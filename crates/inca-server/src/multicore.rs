//! A multi-core server with a NIC, hosting a software NF: the device.
//!
//! A frame's life (each step a model input or a bounded resource; see
//! [`crate::nic`] and [`crate::pcie`] for the sources):
//!
//! 1. **Receive.** The frame arrives on a port. RSS ([`crate::rss`]) picks
//!    the receive queue, one per core. The frame needs room in the NIC's
//!    packet buffer and a free descriptor in its queue's ring, or it is
//!    dropped (counted per reason, per core). The MAC takes it off the wire
//!    at the NIC's line rate (a faster link backs up in the buffer).
//! 2. **RX DMA.** The NIC writes the payload and then the descriptor over
//!    PCIe (posted writes: serialised on the device → host direction, then
//!    the one-way latency). Descriptor prefetches and the driver's tail
//!    updates cost PCIe bytes once per batch.
//! 3. **Queue and CPU.** The frame waits in its core's queue; the core runs
//!    to completion, one frame at a time, taking `fixed_ns + len ×
//!    per_byte_ps` ([`CoreCosts`]) plus whatever extra CPU time the NF
//!    reports for that frame ([`SoftwareNf::take_extra_cpu_ns`]). The
//!    descriptor is returned when the core takes the frame (a DPDK driver
//!    refills at `rx_burst`). The NF's state changes when the core takes
//!    the frame; what it sends leaves the core when the CPU time is over.
//! 4. **TX DMA.** Each frame the NF sends takes a transmit descriptor (or
//!    is dropped, counted), rings the doorbell (an MMIO write), and the NIC
//!    reads the descriptor and then the payload (DMA reads: request, round
//!    trip, completions).
//! 5. **Wire.** The frame leaves at the port's line rate; completions are
//!    written back once per batch.
//!
//! So CPU time is on every frame's latency path, not only a spacing between
//! frames. Internal steps run from one time-ordered agenda (one device
//! timer), so PCIe transfers are reserved in time order.
//!
//! The NF sees time: the core passes the time it takes a frame
//! ([`SoftwareNf::process_at`]). An NF with a
//! [`SoftwareNf::housekeeping_interval`] gets
//! [`SoftwareNf::housekeeping`] on the agenda every interval, the first one
//! an interval after the server starts (and again after each restart);
//! what it sends goes out through core 0's transmit path (step 4 on),
//! without CPU time.

use std::collections::{BTreeMap, VecDeque};

use inca_switch::device::{Device, DeviceRng, Input, Nanos, Output, PortId};
use inca_switch::line::LineClock;
use inca_switch::tm::WIRE_OVERHEAD_BYTES;
use inca_wire::MacAddr;
use serde::{Deserialize, Serialize};

use crate::nf::{NfOutput, SoftwareNf};
use crate::nic::NicConfig;
use crate::pcie::{Dir, Engine, Pcie, Transfer};
use crate::rss::{Rss, RssConfig};
use crate::service::{QueueBound, ServiceQueue};
use crate::transmit::TxPort;

/// The one timer token the server uses.
pub const WAKE: u64 = 1;
/// The most cores a server has [our choice: a two-socket server's cores,
/// with room].
pub const MAX_CORES: usize = 256;

/// What one frame costs a core.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CoreCosts {
    /// Per frame, ns.
    pub fixed_ns: Nanos,
    /// Per byte of the received frame, picoseconds.
    pub per_byte_ps: u64,
}

impl Default for CoreCosts {
    fn default() -> Self {
        // The NF's own cost is the caller's to give; this default is the
        // CLIP spec's DPDK I/O cost per packet (400 ns), the part every NF
        // pays.
        CoreCosts {
            fixed_ns: 400,
            per_byte_ps: 0,
        }
    }
}

impl CoreCosts {
    /// CPU time for a frame of `len` bytes.
    pub fn of(&self, len: usize) -> Nanos {
        self.fixed_ns + (len as u64 * self.per_byte_ps).div_ceil(1000)
    }
}

/// The server's configuration (the NF's own is the NF's).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServerConfig {
    /// Cores running the NF, one receive queue each per port.
    pub cores: usize,
    /// How frames spread over the cores.
    pub rss: RssConfig,
    /// What a frame costs a core.
    pub costs: CoreCosts,
    /// The NIC.
    pub nic: NicConfig,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            cores: 1,
            rss: RssConfig::default(),
            costs: CoreCosts::default(),
            nic: NicConfig::default(),
        }
    }
}

/// One port's addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortMacs {
    /// The port's own MAC.
    pub mac: MacAddr,
    /// The MAC at the other end of its link.
    pub neighbour: MacAddr,
}

/// What one core did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CoreStats {
    /// Frames processed.
    pub packets: u64,
    /// CPU time spent on them, ns.
    pub busy_ns: u64,
    /// Frames dropped because the core's receive ring had no free
    /// descriptor.
    pub rx_ring_drops: u64,
    /// Frames the NF sent that found the core's transmit ring full.
    pub tx_ring_drops: u64,
    /// Most frames waiting in the core's receive ring at once.
    pub max_ring: u64,
}

/// What the NIC did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NicStats {
    /// Frames received.
    pub rx_frames: u64,
    /// Frames dropped because the packet buffer was full.
    pub rx_buffer_drops: u64,
    /// Frames transmitted.
    pub tx_frames: u64,
    /// Frames the NF sent to a port the server does not have, or too short
    /// to carry an Ethernet header.
    pub bad_output_drops: u64,
    /// Frames that arrived on a port with no link in the configuration.
    pub rx_unknown_port: u64,
    /// Link changes seen.
    pub link_changes: u64,
}

/// Why a server cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ServerError(pub String);

/// One step of a frame's life, due at an agenda time.
#[derive(Debug)]
enum Step {
    /// The MAC has the frame; DMA it to the host.
    RxDma {
        port: PortId,
        core: usize,
        frame: Vec<u8>,
    },
    /// The frame is in host memory, in its core's queue.
    RxReady {
        port: PortId,
        core: usize,
        frame: Vec<u8>,
    },
    /// A core's CPU time for its current frame is over.
    CpuDone { core: usize, outputs: Vec<NfOutput> },
    /// The doorbell reached the NIC: request the descriptor.
    TxDescriptor {
        port: PortId,
        core: usize,
        frame: Vec<u8>,
    },
    /// The host answers the descriptor read.
    TxDescriptorBack {
        port: PortId,
        core: usize,
        frame: Vec<u8>,
    },
    /// The descriptor is in the NIC: request the payload.
    TxPayload {
        port: PortId,
        core: usize,
        frame: Vec<u8>,
    },
    /// The host answers the payload read.
    TxPayloadBack {
        port: PortId,
        core: usize,
        frame: Vec<u8>,
    },
    /// The payload is in the NIC: put it on the wire.
    TxWire {
        port: PortId,
        core: usize,
        frame: Vec<u8>,
    },
    /// A direction of the PCIe link is free again: start what waits.
    PciePump { dir: Dir },
    /// The NF's periodic work is due.
    Housekeeping,
}

#[derive(Debug)]
struct Core {
    /// Frames in host memory waiting for the core, with their port.
    queue: VecDeque<(PortId, Vec<u8>)>,
    busy: bool,
    /// The core as a FIFO server: it admits a frame only when idle (run to
    /// completion), so it never queues there; it counts frames and CPU time.
    cpu: ServiceQueue,
    stats: CoreStats,
}

/// A multi-core server with a NIC, running NF `N`. See the module
/// documentation.
#[derive(Debug)]
pub struct MultiCoreServer<N: SoftwareNf> {
    config: ServerConfig,
    ports: Vec<PortMacs>,
    nf: N,
    rss: Rss,
    pcie: Pcie<Step>,
    /// When each PCIe direction's pump is scheduled (up, down).
    pcie_wake: [Option<Nanos>; 2],
    rx_mac: Vec<LineClock>,
    tx_mac: Vec<LineClock>,
    tx_port: Vec<TxPort>,
    /// Bytes in the packet buffer: frames from arrival until their data
    /// is in host memory.
    buffer_used: u64,
    /// Receive descriptors taken, per (port, core).
    rx_taken: Vec<usize>,
    /// Transmit descriptors in flight, per (port, core).
    tx_taken: Vec<usize>,
    /// Frames per (port, core) since the last batched PCIe transfer:
    /// descriptor prefetch, tail update, doorbell, write-back.
    prefetch_count: Vec<u64>,
    tail_count: Vec<u64>,
    doorbell_count: Vec<u64>,
    writeback_count: Vec<u64>,
    cores: Vec<Core>,
    agenda: BTreeMap<(Nanos, u64), Step>,
    seq: u64,
    armed: Option<Nanos>,
    stats: NicStats,
}

impl<N: SoftwareNf> MultiCoreServer<N> {
    /// A server with `ports` (index = port number) running `nf`.
    pub fn new(config: ServerConfig, ports: Vec<PortMacs>, nf: N) -> Result<Self, ServerError> {
        if !(1..=MAX_CORES).contains(&config.cores) {
            return Err(ServerError(format!(
                "cores must be from 1 to {MAX_CORES}, not {}",
                config.cores
            )));
        }
        if ports.is_empty() || ports.len() > usize::from(PortId::MAX) {
            return Err(ServerError(format!(
                "a server needs 1 to {} linked ports, not {}",
                PortId::MAX,
                ports.len()
            )));
        }
        config.nic.check().map_err(ServerError)?;
        if nf.housekeeping_interval() == Some(0) {
            return Err(ServerError(format!(
                "NF {} asks for housekeeping every 0 ns",
                nf.name()
            )));
        }
        let rss = Rss::new(&config.rss, config.cores).map_err(|e| ServerError(e.to_string()))?;
        let rate = config.nic.line_rate_bps();
        let queues = ports.len() * config.cores;
        let cores = (0..config.cores)
            .map(|_| Core {
                queue: VecDeque::new(),
                busy: false,
                cpu: ServiceQueue::new(QueueBound::Backlog(0)),
                stats: CoreStats::default(),
            })
            .collect();
        Ok(MultiCoreServer {
            pcie: Pcie::new(config.nic.pcie.clone()),
            pcie_wake: [None, None],
            rx_mac: vec![LineClock::new(rate); ports.len()],
            tx_mac: vec![LineClock::new(rate); ports.len()],
            tx_port: (0..ports.len()).map(|p| TxPort::new(p as PortId)).collect(),
            buffer_used: 0,
            rx_taken: vec![0; queues],
            tx_taken: vec![0; queues],
            prefetch_count: vec![0; queues],
            tail_count: vec![0; queues],
            doorbell_count: vec![0; queues],
            writeback_count: vec![0; queues],
            cores,
            agenda: BTreeMap::new(),
            seq: 0,
            armed: None,
            stats: NicStats::default(),
            config,
            ports,
            nf,
            rss,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &ServerConfig {
        &self.config
    }

    /// The NF.
    pub fn nf(&self) -> &N {
        &self.nf
    }

    /// The NF, to change (a control channel's glue calls its methods).
    pub fn nf_mut(&mut self) -> &mut N {
        &mut self.nf
    }

    /// Each core's counters.
    pub fn core_stats(&self) -> Vec<CoreStats> {
        self.cores
            .iter()
            .map(|c| CoreStats {
                packets: c.cpu.stats().admitted,
                busy_ns: c.cpu.stats().busy_ns,
                ..c.stats
            })
            .collect()
    }

    /// The NIC's counters.
    pub fn nic_stats(&self) -> &NicStats {
        &self.stats
    }

    /// The PCIe link's counters.
    pub fn pcie_stats(&self) -> &crate::pcie::PcieStats {
        self.pcie.stats()
    }

    /// Every counter by name, for a node report: the NIC's, PCIe's, each
    /// core's (`core3_packets`, ...) and the NF's (`nf_...`).
    pub fn counters(&self) -> BTreeMap<String, u64> {
        let mut m = BTreeMap::new();
        let s = &self.stats;
        m.insert("cores".into(), self.cores.len() as u64);
        m.insert("rx_frames".into(), s.rx_frames);
        m.insert("rx_buffer_drops".into(), s.rx_buffer_drops);
        m.insert("tx_frames".into(), s.tx_frames);
        m.insert("bad_output_drops".into(), s.bad_output_drops);
        m.insert("rx_unknown_port".into(), s.rx_unknown_port);
        m.insert("link_changes".into(), s.link_changes);
        let p = self.pcie.stats();
        m.insert("pcie_up_bytes".into(), p.up_bytes);
        m.insert("pcie_down_bytes".into(), p.down_bytes);
        m.insert("pcie_overhead_bytes".into(), p.overhead_bytes);
        let (mut rx_drops, mut tx_drops) = (0, 0);
        for (i, c) in self.core_stats().into_iter().enumerate() {
            m.insert(format!("core{i}_packets"), c.packets);
            m.insert(format!("core{i}_busy_ns"), c.busy_ns);
            m.insert(format!("core{i}_rx_ring_drops"), c.rx_ring_drops);
            m.insert(format!("core{i}_tx_ring_drops"), c.tx_ring_drops);
            m.insert(format!("core{i}_max_ring"), c.max_ring);
            rx_drops += c.rx_ring_drops;
            tx_drops += c.tx_ring_drops;
        }
        m.insert("rx_ring_drops".into(), rx_drops);
        m.insert("tx_ring_drops".into(), tx_drops);
        for (k, v) in self.nf.counters() {
            m.insert(format!("nf_{k}"), v);
        }
        m
    }

    fn queue_index(&self, port: PortId, core: usize) -> usize {
        usize::from(port) * self.cores.len() + core
    }

    fn schedule(&mut self, at: Nanos, step: Step) {
        self.seq += 1;
        self.agenda.insert((at, self.seq), step);
    }

    /// Counts one frame towards a batched transfer; true on the batch's
    /// first frame (the one that pays for it).
    fn batch(counts: &mut [u64], q: usize, every: u64) -> bool {
        let first = counts[q].is_multiple_of(every);
        counts[q] += 1;
        first
    }

    fn receive(&mut self, now: Nanos, port: PortId, frame: Vec<u8>) {
        self.stats.rx_frames += 1;
        if usize::from(port) >= self.ports.len() {
            // A driver bug or a scenario mismatch: counted, dropped.
            self.stats.rx_unknown_port += 1;
            return;
        }
        let core = match self.nf.rss_input(&frame) {
            Some(input) => self.rss.queue_of_input(&input),
            None => self.rss.queue(&frame),
        };
        let q = self.queue_index(port, core);
        let len = frame.len() as u64;
        if self.buffer_used + len > self.config.nic.rx_buffer_bytes {
            self.stats.rx_buffer_drops += 1;
            return;
        }
        if self.rx_taken[q] >= self.config.nic.rx_ring {
            self.cores[core].stats.rx_ring_drops += 1;
            return;
        }
        self.rx_taken[q] += 1;
        // The frame ended arriving at `now`; it started a wire time before.
        // The MAC takes it at its own line rate: with the link at the NIC's
        // rate this adds nothing, a faster link backs up here.
        let wire = len + WIRE_OVERHEAD_BYTES as u64;
        let mac = &mut self.rx_mac[usize::from(port)];
        let wire_ns = (wire * 8 * 1_000_000_000).div_ceil(mac.rate_bps());
        let (_, in_nic) = mac.send(now.saturating_sub(wire_ns), wire);
        let in_nic = in_nic.max(now);
        self.buffer_used += len;
        self.schedule(in_nic, Step::RxDma { port, core, frame });
    }

    /// Queues a PCIe transfer and schedules what it completes.
    fn pcie(&mut self, now: Nanos, engine: Engine, transfer: (Dir, Transfer<Step>)) {
        let dir = transfer.0;
        let mut done = Vec::new();
        let wake = self.pcie.submit(transfer, engine, now, &mut done);
        self.after_pcie(dir, wake, done);
    }

    fn after_pcie(&mut self, dir: Dir, wake: Option<Nanos>, done: Vec<(Nanos, Step)>) {
        for (at, step) in done {
            self.schedule(at, step);
        }
        let slot = &mut self.pcie_wake[usize::from(dir == Dir::Down)];
        if let (Some(at), None) = (wake, *slot) {
            *slot = Some(at);
            self.schedule(at, Step::PciePump { dir });
        }
    }

    fn pcie_pump(&mut self, now: Nanos, dir: Dir) {
        self.pcie_wake[usize::from(dir == Dir::Down)] = None;
        let mut done = Vec::new();
        let wake = self.pcie.pump(dir, now, &mut done);
        self.after_pcie(dir, wake, done);
    }

    fn rx_dma(&mut self, now: Nanos, port: PortId, core: usize, frame: Vec<u8>) {
        let q = self.queue_index(port, core);
        let nic = &self.config.nic;
        let (desc, prefetch, burst) = (nic.descriptor_bytes, nic.rx_prefetch, nic.burst);
        if Self::batch(&mut self.prefetch_count, q, prefetch) {
            // Descriptors for the next batch, off the latency path (the
            // completion is charged at once: only its bytes matter).
            self.pcie(
                now,
                Engine::Rx,
                self.pcie.read_request(desc * prefetch, None),
            );
            self.pcie(
                now,
                Engine::Rx,
                self.pcie.read_completion(desc * prefetch, None),
            );
        }
        if Self::batch(&mut self.tail_count, q, burst) {
            // The driver's tail update for the burst (MMIO write).
            self.pcie(now, Engine::Rx, self.pcie.mmio_write(4, None));
        }
        // Payload, then the descriptor write-back; the frame is the core's
        // when the descriptor is in host memory.
        self.pcie(
            now,
            Engine::Rx,
            self.pcie.dma_write(frame.len() as u64, None),
        );
        let ready = Step::RxReady { port, core, frame };
        self.pcie(now, Engine::Rx, self.pcie.dma_write(desc, Some(ready)));
    }

    fn rx_ready(&mut self, now: Nanos, port: PortId, core: usize, frame: Vec<u8>) {
        self.buffer_used -= frame.len() as u64;
        let c = &mut self.cores[core];
        c.queue.push_back((port, frame));
        c.stats.max_ring = c.stats.max_ring.max(c.queue.len() as u64);
        if !c.busy {
            self.start_next(now, core);
        }
    }

    /// The core takes its next frame, if any.
    fn start_next(&mut self, now: Nanos, core: usize) {
        let Some((port, frame)) = self.cores[core].queue.pop_front() else {
            self.cores[core].busy = false;
            return;
        };
        let q = self.queue_index(port, core);
        self.rx_taken[q] -= 1;
        let len = frame.len();
        let mut outputs = Vec::new();
        self.nf.process_at(now, core, port, frame, &mut outputs);
        // The frame's CPU time: the per-frame cost plus what the NF says
        // this frame's work took beyond it (known only once it ran).
        let cost = self
            .config
            .costs
            .of(len)
            .saturating_add(self.nf.take_extra_cpu_ns());
        let c = &mut self.cores[core];
        c.busy = true;
        let done = match c.cpu.admit(now, cost) {
            Ok(a) => a.done,
            Err(_) => now + cost, // cannot happen: the core is idle
        };
        self.schedule(done, Step::CpuDone { core, outputs });
    }

    fn cpu_done(&mut self, now: Nanos, core: usize, outputs: Vec<NfOutput>) {
        self.transmit(now, core, outputs);
        self.start_next(now, core);
    }

    /// Schedules the NF's next housekeeping, an interval after `now`, if
    /// it wants one.
    fn schedule_housekeeping(&mut self, now: Nanos) {
        if let Some(every) = self.nf.housekeeping_interval() {
            // `new` refused 0; an NF changing its mind later still must
            // not stall time.
            self.schedule(now.saturating_add(every.max(1)), Step::Housekeeping);
        }
    }

    fn housekeeping(&mut self, now: Nanos) {
        let mut outputs = Vec::new();
        self.nf.housekeeping(now, &mut outputs);
        self.transmit(now, 0, outputs);
        self.schedule_housekeeping(now);
    }

    /// Hands what core `core` sent at `now` to the NIC's transmit path.
    fn transmit(&mut self, now: Nanos, core: usize, outputs: Vec<NfOutput>) {
        for (port, mut frame) in outputs {
            let Some(macs) = self.ports.get(usize::from(port)) else {
                self.stats.bad_output_drops += 1;
                continue;
            };
            if frame.len() < 14 {
                self.stats.bad_output_drops += 1;
                continue;
            }
            frame[0..6].copy_from_slice(&macs.neighbour);
            frame[6..12].copy_from_slice(&macs.mac);
            let q = self.queue_index(port, core);
            if self.tx_taken[q] >= self.config.nic.tx_ring {
                self.cores[core].stats.tx_ring_drops += 1;
                continue;
            }
            self.tx_taken[q] += 1;
            // The doorbell: every frame waits for one, the link carries
            // one per burst.
            let next = Step::TxDescriptor { port, core, frame };
            if Self::batch(&mut self.doorbell_count, q, self.config.nic.burst) {
                self.pcie(now, Engine::Tx, self.pcie.mmio_write(4, Some(next)));
            } else {
                self.schedule(now + self.config.nic.pcie.write_latency_ns, next);
            }
        }
    }

    /// The frame leaves the NIC: `now` is the step's time, `present` the
    /// time the device was called at. [our choice] In the simulator a
    /// wake is on time and the two are equal; live, a wake can come late
    /// and steps run at their scheduled times, but a frame cannot be sent
    /// in the past (the device contract), so it leaves at `present` then.
    fn tx_wire(
        &mut self,
        now: Nanos,
        present: Nanos,
        port: PortId,
        core: usize,
        frame: Vec<u8>,
        out: &mut Vec<Output>,
    ) {
        let q = self.queue_index(port, core);
        let p = usize::from(port);
        let wire = frame.len() as u64 + WIRE_OVERHEAD_BYTES as u64;
        let (start, _) = self.tx_mac[p].send(now, wire);
        self.tx_taken[q] -= 1;
        let batch = self.config.nic.tx_writeback_batch;
        if Self::batch(&mut self.writeback_count, q, batch) {
            let desc = self.config.nic.descriptor_bytes;
            self.pcie(now, Engine::Tx, self.pcie.dma_write(desc, None));
        }
        self.stats.tx_frames += 1;
        self.tx_port[p].send(start.max(present), frame, out);
    }

    /// Runs every step due by `now`, in time order.
    fn run_agenda(&mut self, now: Nanos, out: &mut Vec<Output>) {
        while let Some(entry) = self.agenda.first_entry() {
            if entry.key().0 > now {
                break;
            }
            let t = entry.key().0;
            match entry.remove() {
                Step::RxDma { port, core, frame } => self.rx_dma(t, port, core, frame),
                Step::RxReady { port, core, frame } => self.rx_ready(t, port, core, frame),
                Step::CpuDone { core, outputs } => self.cpu_done(t, core, outputs),
                Step::TxDescriptor { port, core, frame } => {
                    let desc = self.config.nic.descriptor_bytes;
                    let next = Step::TxDescriptorBack { port, core, frame };
                    self.pcie(t, Engine::Tx, self.pcie.read_request(desc, Some(next)));
                }
                Step::TxDescriptorBack { port, core, frame } => {
                    let desc = self.config.nic.descriptor_bytes;
                    let next = Step::TxPayload { port, core, frame };
                    self.pcie(t, Engine::Tx, self.pcie.read_completion(desc, Some(next)));
                }
                Step::TxPayload { port, core, frame } => {
                    let len = frame.len() as u64;
                    let next = Step::TxPayloadBack { port, core, frame };
                    self.pcie(t, Engine::Tx, self.pcie.read_request(len, Some(next)));
                }
                Step::TxPayloadBack { port, core, frame } => {
                    let len = frame.len() as u64;
                    let next = Step::TxWire { port, core, frame };
                    self.pcie(t, Engine::Tx, self.pcie.read_completion(len, Some(next)));
                }
                Step::TxWire { port, core, frame } => self.tx_wire(t, now, port, core, frame, out),
                Step::PciePump { dir } => self.pcie_pump(t, dir),
                Step::Housekeeping => self.housekeeping(t),
            }
        }
        if let Some((&(next, _), _)) = self.agenda.first_key_value() {
            if self.armed.is_none_or(|a| next < a || a <= now) {
                self.armed = Some(next);
                out.push(Output::Timer {
                    at: next,
                    token: WAKE,
                });
            }
        }
    }
}

impl<N: SoftwareNf> Device for MultiCoreServer<N> {
    fn start(&mut self, now: Nanos, _rng: &mut DeviceRng, out: &mut Vec<Output>) {
        self.schedule_housekeeping(now);
        self.run_agenda(now, out);
    }

    fn handle(&mut self, now: Nanos, input: Input, _rng: &mut DeviceRng, out: &mut Vec<Output>) {
        match input {
            Input::Frame { port, frame } => {
                // Steps due now run first: they happened before this arrival.
                self.run_agenda(now, out);
                self.receive(now, port, frame);
            }
            Input::Timer { token: WAKE } => {
                if self.armed.is_some_and(|a| a <= now) {
                    self.armed = None;
                }
            }
            Input::LinkState { .. } => self.stats.link_changes += 1,
            Input::Timer { .. } | Input::Control(_) | Input::Session(_) => {}
        }
        self.run_agenda(now, out);
    }

    fn restart(&mut self, now: Nanos, _rng: &mut DeviceRng, out: &mut Vec<Output>) {
        // Everything in flight is lost: frames in the NIC, the rings, the
        // cores; the NF loses its state. Counters survive.
        self.agenda.clear();
        self.armed = None;
        self.pcie_wake = [None, None];
        self.buffer_used = 0;
        self.rx_taken.iter_mut().for_each(|n| *n = 0);
        self.tx_taken.iter_mut().for_each(|n| *n = 0);
        for c in &mut self.cores {
            c.queue.clear();
            c.busy = false;
            c.cpu.reset();
        }
        let rate = self.config.nic.line_rate_bps();
        self.rx_mac
            .iter_mut()
            .for_each(|m| *m = LineClock::new(rate));
        // The transmit side keeps its clock so frames never go back in
        // time on a port.
        self.pcie.reset();
        self.nf.reset();
        // The NF's timers restart with it.
        self.schedule_housekeeping(now);
        self.run_agenda(now, out);
    }
}
