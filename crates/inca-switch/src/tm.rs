//! The traffic manager: per-port egress queues, the shared packet buffer,
//! multicast groups and mirror sessions.
//!
//! Each egress port has one FIFO queue drained at the port's line rate. A
//! packet's dequeue time is fixed when it is enqueued (the later of its
//! arrival and the moment the port finishes the packet ahead of it). Every
//! queue draws on one shared buffer; a packet that does not fit is dropped
//! (tail drop), and counted.
//!
//! Packets live in a packet buffer (a slab of cells) from the moment ingress
//! hands them over; queues hold small descriptors, as a real traffic manager
//! does, so a packet is written once and read once however long its path.
//!
//! Contract with the switch: a packet is enqueued at its arrival time, after
//! every dequeue due at or before that time, so the occupancy the traffic
//! manager sees — for admission and for the queue depth egress reads — is
//! the occupancy at that instant.

use std::collections::{BTreeMap, VecDeque};

use crate::device::{Nanos, PortId};
use crate::intrinsic::PacketKind;
use crate::line::LineClock;

/// Bytes a frame occupies on the wire beyond its own length: FCS (4) and
/// preamble, start delimiter and inter-frame gap (20).
pub const WIRE_OVERHEAD_BYTES: usize = 24;

/// A mirror session: where mirror copies go and how much of them is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MirrorSession {
    /// The egress port copies are queued for; the switch's
    /// `RECIRCULATION_PORT` sends them back to ingress instead, with their
    /// metadata (a loopback mirror session).
    pub port: PortId,
    /// Copies are cut to at most this many bytes (`None`: whole packet).
    pub truncate: Option<usize>,
}

/// A packet waiting in an egress queue.
/// Why the traffic manager dropped a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Drop {
    /// The shared buffer was full.
    BufferFull,
    /// No such port.
    NoPort,
    /// No packet in that cell (a bug in the caller; nothing to drop).
    NoPacket,
}

#[derive(Debug)]
pub(crate) struct QueuedPacket<M> {
    pub frame: Vec<u8>,
    pub meta: M,
    pub kind: PacketKind,
    pub ingress_port: PortId,
    pub ingress_time: Nanos,
    /// When it reached the traffic manager.
    pub arrival: Nanos,
    /// Queue occupancy ahead of it at arrival, bytes.
    pub queue_bytes_ahead: u64,
    /// Multicast replica id.
    pub rid: u16,
}

/// Counters of one port.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PortCounters {
    /// Frames received.
    pub rx_packets: u64,
    /// Bytes received.
    pub rx_bytes: u64,
    /// Frames transmitted.
    pub tx_packets: u64,
    /// Bytes transmitted.
    pub tx_bytes: u64,
    /// Frames dropped because the buffer was full.
    pub tm_drops: u64,
}

/// Where a held packet sits in the packet buffer.
pub(crate) type Cell = u32;

/// A queue entry: the packet's cell and length.
#[derive(Debug, Clone, Copy)]
struct Descriptor {
    cell: Cell,
    len: u32,
}

#[derive(Debug)]
struct PortQueue {
    queue: VecDeque<Descriptor>,
    bytes: u64,
    /// The port's transmitter (when it finishes the last packet queued).
    line: LineClock,
}

/// The traffic manager. See the module documentation.
#[derive(Debug)]
pub(crate) struct TrafficManager<M> {
    ports: Vec<PortQueue>,
    /// The packet buffer: held packets by cell, and the free cells.
    cells: Vec<Option<QueuedPacket<M>>>,
    free_cells: Vec<Cell>,
    pub counters: Vec<PortCounters>,
    buffer_used: u64,
    buffer_bytes: u64,
    pub multicast: BTreeMap<u16, Vec<(PortId, u16)>>,
    pub mirror: BTreeMap<u16, MirrorSession>,
}

impl<M> TrafficManager<M> {
    pub fn new(ports: u16, port_rate_bps: u64, buffer_bytes: u64) -> Self {
        TrafficManager {
            ports: (0..ports)
                .map(|_| PortQueue {
                    queue: VecDeque::new(),
                    bytes: 0,
                    line: LineClock::new(port_rate_bps),
                })
                .collect(),
            counters: vec![PortCounters::default(); usize::from(ports)],
            cells: Vec::new(),
            free_cells: Vec::new(),
            buffer_used: 0,
            buffer_bytes,
            multicast: BTreeMap::new(),
            mirror: BTreeMap::new(),
        }
    }

    /// Takes a packet into the packet buffer (it is on its way to a queue:
    /// it does not count against the shared buffer until it is enqueued).
    pub fn hold(&mut self, pkt: QueuedPacket<M>) -> Cell {
        match self.free_cells.pop() {
            Some(c) => {
                self.cells[c as usize] = Some(pkt);
                c
            }
            None => {
                self.cells.push(Some(pkt));
                (self.cells.len() - 1) as Cell
            }
        }
    }

    /// The held packet in `cell`.
    #[cfg(test)]
    pub fn held(&self, cell: Cell) -> Option<&QueuedPacket<M>> {
        self.cells.get(cell as usize)?.as_ref()
    }

    fn release(&mut self, cell: Cell) -> Option<QueuedPacket<M>> {
        let pkt = self.cells.get_mut(cell as usize)?.take()?;
        self.free_cells.push(cell);
        Some(pkt)
    }

    /// Queues the held packet in `cell` for `port`, at its arrival time.
    /// Returns its dequeue time; if the port does not exist or the buffer is
    /// full the packet is dropped (a full buffer is counted on the port).
    pub fn enqueue(&mut self, port: PortId, cell: Cell) -> Result<Nanos, Drop> {
        let Some(pkt) = self.cells.get_mut(cell as usize).and_then(Option::as_mut) else {
            return Err(Drop::NoPacket);
        };
        let Some(q) = self.ports.get_mut(usize::from(port)) else {
            self.release(cell);
            return Err(Drop::NoPort);
        };
        let len = pkt.frame.len() as u64;
        if self.buffer_used + len > self.buffer_bytes {
            self.counters[usize::from(port)].tm_drops += 1;
            self.release(cell);
            return Err(Drop::BufferFull);
        }
        pkt.queue_bytes_ahead = q.bytes;
        let (start, _) = q
            .line
            .send(pkt.arrival, (pkt.frame.len() + WIRE_OVERHEAD_BYTES) as u64);
        q.bytes += len;
        self.buffer_used += len;
        q.queue.push_back(Descriptor {
            cell,
            len: len as u32,
        });
        Ok(start)
    }

    /// Takes the packet at the head of `port`'s queue (its dequeue time has
    /// come) out of the buffer.
    pub fn dequeue(&mut self, port: PortId) -> Option<QueuedPacket<M>> {
        let q = self.ports.get_mut(usize::from(port))?;
        let d = q.queue.pop_front()?;
        let len = u64::from(d.len);
        // Every queued byte was added to both counts at enqueue.
        crate::invariant!(
            q.bytes >= len && self.buffer_used >= len,
            "port {port}: dequeuing {len} B with {} B queued, {} B of buffer in use",
            q.bytes,
            self.buffer_used
        );
        q.bytes = q.bytes.saturating_sub(len);
        self.buffer_used = self.buffer_used.saturating_sub(len);
        self.release(d.cell)
    }

    /// Bytes queued for `port` now.
    pub fn queue_bytes(&self, port: PortId) -> u64 {
        self.ports.get(usize::from(port)).map_or(0, |q| q.bytes)
    }

    /// Bytes of the shared buffer in use.
    pub fn buffer_used(&self) -> u64 {
        self.buffer_used
    }

    /// Empties every queue (crash). Groups and sessions are configuration
    /// the control plane installs, so they go too.
    pub fn clear(&mut self) {
        for q in &mut self.ports {
            q.queue.clear();
            q.bytes = 0;
            q.line.reset(0);
        }
        self.cells.clear();
        self.free_cells.clear();
        self.buffer_used = 0;
        self.multicast.clear();
        self.mirror.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pkt(len: usize, arrival: Nanos) -> QueuedPacket<()> {
        QueuedPacket {
            frame: vec![0; len],
            meta: (),
            kind: PacketKind::Normal,
            ingress_port: 0,
            ingress_time: arrival,
            arrival,
            queue_bytes_ahead: 0,
            rid: 0,
        }
    }

    #[test]
    fn queue_drains_at_line_rate_and_counts_occupancy() {
        // 100 Gbps: a 1476 B frame + 24 B overhead = 1500 B = 120 ns.
        let mut tm = TrafficManager::new(2, 100_000_000_000, 10_000);
        let put = |tm: &mut TrafficManager<()>, len, at| {
            let c = tm.hold(pkt(len, at));
            tm.enqueue(1, c)
        };
        assert_eq!(put(&mut tm, 1476, 0).ok(), Some(0));
        assert_eq!(put(&mut tm, 1476, 0).ok(), Some(120));
        assert_eq!(put(&mut tm, 1476, 10).ok(), Some(240));
        // By 130 the first two have left the queue (at 0 and 120): one frame
        // is ahead of a new one.
        tm.dequeue(1);
        tm.dequeue(1);
        let d = put(&mut tm, 1476, 130).unwrap();
        assert_eq!(d, 360);
        let last = tm.ports[1].queue.back().unwrap().cell;
        assert_eq!(tm.held(last).unwrap().queue_bytes_ahead, 1476);
        assert_eq!(tm.queue_bytes(1), 2 * 1476);
    }

    #[test]
    fn full_buffer_drops_and_counts() {
        let mut tm = TrafficManager::new(1, 100_000_000_000, 3000);
        let put = |tm: &mut TrafficManager<()>, port, len| {
            let c = tm.hold(pkt(len, 0));
            tm.enqueue(port, c)
        };
        assert!(put(&mut tm, 0, 1500).is_ok());
        assert!(put(&mut tm, 0, 1500).is_ok());
        assert_eq!(put(&mut tm, 0, 64), Err(Drop::BufferFull));
        assert_eq!(tm.counters[0].tm_drops, 1);
        assert!(tm.dequeue(0).is_some());
        assert!(put(&mut tm, 0, 64).is_ok());
        assert_eq!(put(&mut tm, 5, 64), Err(Drop::NoPort));
        assert_eq!(
            tm.cells.iter().filter(|c| c.is_some()).count(),
            2,
            "dropped cells are freed"
        );
    }
}
