//! The PCIe link between a NIC and its host: two directions, each a line
//! that carries transaction-layer packets (TLPs) one after another.
//!
//! Model (Neugebauer et al., "Understanding PCIe performance for end host
//! networking", SIGCOMM 2018, §2): a link of `lanes` lanes at `gt_per_s`
//! transfers per second and line code `encoding` carries, per direction,
//! `lanes × rate × encoding` bits per second (Gen 3 × 8: 62.96 Gb/s). A DMA
//! write (device → host) is split into TLPs of at most MPS payload bytes; a
//! DMA read is one request TLP per MRRS bytes towards the host, and
//! completions of at most MPS bytes back. Every TLP carries a fixed overhead
//! (header, sequence number, LCRC, framing). Writes are posted: the data is
//! in host memory a one-way latency after it left the link; a read returns
//! its first byte a round-trip latency after the request left. Flow-control
//! and ACK DLLPs are not modelled [our choice: the paper counts them as a
//! few percent; leaving them out makes the bound slightly optimistic].
//!
//! Each direction carries one transfer at a time. The NIC's receive and
//! transmit DMA engines each keep their transfers in order and take turns
//! on a direction (round robin) [our choice: two engines arbitrating for
//! the link; one FIFO for both would park the transmit path's read
//! requests behind a whole packet buffer of receive writes].

use std::collections::VecDeque;

use inca_switch::device::Nanos;
use serde::{Deserialize, Serialize};

/// The link's parameters. Defaults: PCIe 2.0 × 8, the Intel 82599's link
/// (82599 10 GbE Controller Datasheet, §1: "PCIe v2.0 (5GT/s) x8").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PcieConfig {
    /// Lanes (PCIe spec: ×1, ×2, ×4, ×8, ×16).
    pub lanes: u32,
    /// Transfers per second per lane, in GT/s (Gen 1: 2.5, Gen 2: 5, Gen 3:
    /// 8, Gen 4: 16; PCI-SIG base specifications).
    pub gt_per_s: f64,
    /// Payload bits per line bit (8b/10b for Gen 1–2: 0.8; 128b/130b for
    /// Gen 3–5: 128/130).
    pub encoding: f64,
    /// Bytes each TLP adds to its payload: 2 framing + 6 data link
    /// (sequence number, LCRC) + 16 header with 64-bit addresses
    /// (Neugebauer et al. §2.1: 24 B).
    pub tlp_overhead_bytes: u64,
    /// Maximum payload size, bytes (Neugebauer et al. §2.1: 256 B is
    /// typical of current hosts).
    pub mps: u64,
    /// Maximum read request size, bytes (Neugebauer et al. §2.1: 512 B
    /// typical).
    pub mrrs: u64,
    /// A DMA read's round trip to host memory beyond serialisation, ns
    /// (pcie-bench, Neugebauer et al. §6: small DMA reads take about
    /// 500 ns on Xeon E5 hosts).
    pub read_latency_ns: Nanos,
    /// A posted write's (DMA write, MMIO doorbell) one-way latency beyond
    /// serialisation, ns: half the read round trip (Intel, "Data Streams
    /// Optimizer" guide, TCC tools 2021.3: the PCIe-to-memory write latency
    /// "is estimated to be equivalent to half of the PCIe-from-memory
    /// stream latency").
    pub write_latency_ns: Nanos,
}

impl Default for PcieConfig {
    fn default() -> Self {
        PcieConfig {
            lanes: 8,
            gt_per_s: 5.0,
            encoding: 0.8,
            tlp_overhead_bytes: 24,
            mps: 256,
            mrrs: 512,
            read_latency_ns: 500,
            write_latency_ns: 250,
        }
    }
}

impl PcieConfig {
    /// Bits per second each direction carries.
    pub fn rate_bps(&self) -> u64 {
        (f64::from(self.lanes) * self.gt_per_s * 1e9 * self.encoding).round() as u64
    }

    /// Checks the values; the message names the field.
    pub fn check(&self) -> Result<(), String> {
        if !matches!(self.lanes, 1 | 2 | 4 | 8 | 12 | 16 | 32) {
            return Err(format!(
                "nic.pcie.lanes must be 1, 2, 4, 8, 12, 16 or 32, not {}",
                self.lanes
            ));
        }
        if !(self.gt_per_s > 0.0 && self.gt_per_s <= 128.0) {
            return Err(format!(
                "nic.pcie.gt_per_s must be in (0, 128], not {}",
                self.gt_per_s
            ));
        }
        if !(self.encoding > 0.0 && self.encoding <= 1.0) {
            return Err(format!(
                "nic.pcie.encoding must be in (0, 1], not {}",
                self.encoding
            ));
        }
        for (name, v) in [("mps", self.mps), ("mrrs", self.mrrs)] {
            if !(128..=4096).contains(&v) || !v.is_power_of_two() {
                return Err(format!(
                    "nic.pcie.{name} must be a power of two from 128 to 4096, not {v}"
                ));
            }
        }
        if self.tlp_overhead_bytes > 64 {
            return Err(format!(
                "nic.pcie.tlp_overhead_bytes must be at most 64, not {}",
                self.tlp_overhead_bytes
            ));
        }
        Ok(())
    }

    /// Bytes on the link for a write (or read completions) of `payload`
    /// bytes: the payload plus one TLP overhead per MPS.
    pub fn data_bytes(&self, payload: u64) -> u64 {
        payload + payload.div_ceil(self.mps).max(1) * self.tlp_overhead_bytes
    }

    /// Bytes on the link for the requests of a read of `payload` bytes:
    /// one header-only TLP per MRRS.
    pub fn request_bytes(&self, payload: u64) -> u64 {
        payload.div_ceil(self.mrrs).max(1) * self.tlp_overhead_bytes
    }
}

/// Which way a transfer crosses the link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dir {
    /// Device to host: DMA writes, read requests.
    Up,
    /// Host to device: MMIO writes (doorbells), read completions.
    Down,
}

impl Dir {
    fn index(self) -> usize {
        match self {
            Dir::Up => 0,
            Dir::Down => 1,
        }
    }
}

/// What crossed the link.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PcieStats {
    /// Bytes device → host, TLP overhead included.
    pub up_bytes: u64,
    /// Bytes host → device, TLP overhead included.
    pub down_bytes: u64,
    /// TLP bytes that were overhead (headers, framing), both directions.
    pub overhead_bytes: u64,
}

/// One transfer waiting for its direction of the link: `bytes` on the
/// wire (`payload` of them data), then `then` is due `latency` after its
/// last byte crossed (None: nothing waits for it).
#[derive(Debug)]
pub struct Transfer<T> {
    /// Bytes on the link, overhead included.
    pub bytes: u64,
    /// Data bytes among them.
    pub payload: u64,
    /// From the last byte to `then`.
    pub latency: Nanos,
    /// What the transfer completes.
    pub then: Option<T>,
}

/// Which DMA engine a transfer belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Engine {
    /// The receive path: payload and descriptor writes, prefetches, tail
    /// updates.
    Rx,
    /// The transmit path: doorbells, descriptor and payload reads,
    /// write-backs.
    Tx,
}

/// One direction: a line in picoseconds (TLPs are a few ns long; whole
/// ns would round the rate by percents) and each engine's transfers
/// waiting for it, in order, served in turns.
#[derive(Debug)]
struct Lane<T> {
    free_ps: u64,
    waiting: [VecDeque<Transfer<T>>; 2],
    turn: usize,
}

impl<T> Lane<T> {
    fn new() -> Self {
        Lane {
            free_ps: 0,
            waiting: [VecDeque::new(), VecDeque::new()],
            turn: 0,
        }
    }

    fn len(&self) -> usize {
        self.waiting[0].len() + self.waiting[1].len()
    }

    /// The next transfer: the engine whose turn it is, else the other.
    fn next(&mut self) -> Option<Transfer<T>> {
        let first = self.turn;
        for e in [first, 1 - first] {
            if let Some(t) = self.waiting[e].pop_front() {
                self.turn = 1 - e;
                return Some(t);
            }
        }
        None
    }
}

/// The link's two directions, each a FIFO of transfers. See the module
/// documentation.
#[derive(Debug)]
pub struct Pcie<T> {
    config: PcieConfig,
    rate_bps: u64,
    lanes: [Lane<T>; 2],
    stats: PcieStats,
}

impl<T> Pcie<T> {
    /// An idle link.
    pub fn new(config: PcieConfig) -> Self {
        Pcie {
            rate_bps: config.rate_bps().max(1),
            config,
            lanes: [Lane::new(), Lane::new()],
            stats: PcieStats::default(),
        }
    }

    /// The parameters.
    pub fn config(&self) -> &PcieConfig {
        &self.config
    }

    /// Counters.
    pub fn stats(&self) -> &PcieStats {
        &self.stats
    }

    /// Transfers waiting, both directions.
    pub fn waiting(&self) -> usize {
        self.lanes[0].len() + self.lanes[1].len()
    }

    /// Queues `engine`'s `transfer` on `dir` at `now` and starts what can
    /// start (see [`Pcie::pump`]).
    pub fn submit(
        &mut self,
        (dir, transfer): (Dir, Transfer<T>),
        engine: Engine,
        now: Nanos,
        done: &mut Vec<(Nanos, T)>,
    ) -> Option<Nanos> {
        let e = usize::from(engine == Engine::Tx);
        self.lanes[dir.index()].waiting[e].push_back(transfer);
        self.pump(dir, now, done)
    }

    /// Starts waiting transfers on `dir` while it is free at `now`, pushing
    /// what each completes, with its time, onto `done`; returns when the
    /// direction frees up with transfers still waiting (call again then).
    pub fn pump(&mut self, dir: Dir, now: Nanos, done: &mut Vec<(Nanos, T)>) -> Option<Nanos> {
        let now_ps = now.saturating_mul(1000);
        let lane = &mut self.lanes[dir.index()];
        while lane.len() > 0 {
            if lane.free_ps > now_ps {
                return Some(lane.free_ps.div_ceil(1000));
            }
            let Some(t) = lane.next() else { break };
            let ps = (u128::from(t.bytes) * 8_000_000_000_000 / u128::from(self.rate_bps)) as u64;
            // Woken at the whole ns after the lane freed: carry on from the
            // exact time, or back-to-back transfers would lose the fraction.
            let start = if lane.free_ps + 1000 > now_ps {
                lane.free_ps
            } else {
                now_ps
            };
            lane.free_ps = start + ps;
            self.stats.overhead_bytes += t.bytes.saturating_sub(t.payload);
            match dir {
                Dir::Up => self.stats.up_bytes += t.bytes,
                Dir::Down => self.stats.down_bytes += t.bytes,
            }
            if let Some(then) = t.then {
                done.push((lane.free_ps.div_ceil(1000) + t.latency, then));
            }
        }
        None
    }

    /// A DMA write of `payload` bytes, device → host: `then` when the
    /// data is in host memory.
    pub fn dma_write(&self, payload: u64, then: Option<T>) -> (Dir, Transfer<T>) {
        let bytes = self.config.data_bytes(payload);
        (
            Dir::Up,
            Transfer {
                bytes,
                payload,
                latency: self.config.write_latency_ns,
                then,
            },
        )
    }

    /// An MMIO write of `payload` bytes, host → device (a doorbell):
    /// `then` when it reaches the device.
    pub fn mmio_write(&self, payload: u64, then: Option<T>) -> (Dir, Transfer<T>) {
        let bytes = payload + self.config.tlp_overhead_bytes;
        (
            Dir::Down,
            Transfer {
                bytes,
                payload,
                latency: self.config.write_latency_ns,
                then,
            },
        )
    }

    /// The requests of a DMA read of `payload` bytes: `then` when the
    /// completions start back (after the host's round trip).
    pub fn read_request(&self, payload: u64, then: Option<T>) -> (Dir, Transfer<T>) {
        let bytes = self.config.request_bytes(payload);
        (
            Dir::Up,
            Transfer {
                bytes,
                payload: 0,
                latency: self.config.read_latency_ns,
                then,
            },
        )
    }

    /// The completions of a DMA read of `payload` bytes: `then` when the
    /// last byte reached the device.
    pub fn read_completion(&self, payload: u64, then: Option<T>) -> (Dir, Transfer<T>) {
        let bytes = self.config.data_bytes(payload);
        (
            Dir::Down,
            Transfer {
                bytes,
                payload,
                latency: 0,
                then,
            },
        )
    }

    /// A crash of the host: the link is idle and nothing waits; counters
    /// kept.
    pub fn reset(&mut self) {
        for lane in &mut self.lanes {
            *lane = Lane::new();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_and_tlp_counts_follow_the_spec_values() {
        let gen2x8 = PcieConfig::default();
        assert_eq!(gen2x8.rate_bps(), 32_000_000_000);
        let gen3x8 = PcieConfig {
            gt_per_s: 8.0,
            encoding: 128.0 / 130.0,
            ..PcieConfig::default()
        };
        // Neugebauer et al. §2: 62.96 Gb/s for Gen 3 x8.
        assert_eq!(gen3x8.rate_bps() / 10_000_000, 6_301);
        // 1500 B: 6 TLPs of at most 256 B, 3 requests of at most 512 B.
        assert_eq!(gen2x8.data_bytes(1500), 1500 + 6 * 24);
        assert_eq!(gen2x8.request_bytes(1500), 3 * 24);
        assert_eq!(gen2x8.data_bytes(64), 64 + 24);
        assert!(gen2x8.check().is_ok());
        let bad = PcieConfig {
            mps: 300,
            ..PcieConfig::default()
        };
        assert!(bad.check().unwrap_err().contains("nic.pcie.mps"));
    }

    #[test]
    fn transfers_serialise_per_direction_first_come_first_served() {
        let mut p: Pcie<&str> = Pcie::new(PcieConfig::default()); // 4 bytes per ns
        let mut done = Vec::new();
        fn go<'a>(
            p: &mut Pcie<&'a str>,
            now: Nanos,
            t: (Dir, Transfer<&'a str>),
            done: &mut Vec<(Nanos, &'a str)>,
        ) -> Option<Nanos> {
            p.submit(t, Engine::Rx, now, done)
        }
        // 232 B of payload + 24 B overhead = 256 B = 64 ns, + 250 ns.
        let t = p.dma_write(232, Some("a"));
        assert_eq!(go(&mut p, 0, t, &mut done), None);
        // The next write waits for the first on the same direction...
        let t = p.dma_write(232, Some("b"));
        assert_eq!(go(&mut p, 0, t, &mut done), Some(64));
        // ...while the other direction is free.
        let t = p.mmio_write(4, Some("c"));
        assert_eq!(go(&mut p, 0, t, &mut done), None);
        // A read request queues behind "b".
        let t = p.read_request(16, Some("d"));
        assert_eq!(go(&mut p, 10, t, &mut done), Some(64));
        assert_eq!(p.waiting(), 2);
        assert_eq!(p.pump(Dir::Up, 64, &mut done), Some(128));
        assert_eq!(p.pump(Dir::Up, 128, &mut done), None);
        // "d": 24 B request from 128 (6 ns), then the 500 ns round trip.
        assert_eq!(
            done,
            vec![
                (314, "a"),
                (7 + 250, "c"),
                (128 + 250, "b"),
                (134 + 500, "d")
            ]
        );
        let s = *p.stats();
        assert_eq!(s.up_bytes, 256 + 256 + 24);
        assert_eq!(s.down_bytes, 28);
        assert_eq!(s.overhead_bytes, 24 * 4);
    }

    #[test]
    fn engines_take_turns_on_a_direction() {
        let mut p: Pcie<(Engine, u32)> = Pcie::new(PcieConfig::default());
        let mut done = Vec::new();
        for i in 0..3 {
            let t = p.dma_write(40, Some((Engine::Rx, i)));
            p.submit(t, Engine::Rx, 0, &mut done);
        }
        for i in 0..2 {
            let t = p.read_request(64, Some((Engine::Tx, i)));
            p.submit(t, Engine::Tx, 0, &mut done);
        }
        let mut now = 0;
        while let Some(t) = p.pump(Dir::Up, now, &mut done) {
            now = t;
        }
        let order: Vec<_> = done.iter().map(|d| d.1).collect();
        use Engine::{Rx, Tx};
        assert_eq!(order, vec![(Rx, 0), (Tx, 0), (Rx, 1), (Tx, 1), (Rx, 2)]);
    }

    #[test]
    fn fractional_nanoseconds_are_kept() {
        // Gen 3 x8: 24 B take 3.0469 ns (3046 ps, truncated); 1000 of them
        // 3046 ns, not the 4000 whole nanoseconds would give.
        let mut p: Pcie<u32> = Pcie::new(PcieConfig {
            gt_per_s: 8.0,
            encoding: 128.0 / 130.0,
            ..PcieConfig::default()
        });
        let mut done = Vec::new();
        for i in 0..1000 {
            let t = p.read_request(8, Some(i));
            p.submit(t, Engine::Tx, 0, &mut done);
        }
        let mut now = 0;
        while let Some(t) = p.pump(Dir::Up, now, &mut done) {
            now = t;
        }
        assert_eq!(done.last(), Some(&(3046 + 500, 999)));
    }
}
