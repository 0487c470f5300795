//! A scenario link's model on a live port's egress.
//!
//! Live, a port's frames cross a real transport (a UDP socket, a veth pair)
//! that is as fast and loss-free as the machine. A port given a `link`
//! ([`crate::config::PortSpec::link`]) instead sends through the
//! simulator's own channel ([`inca_sim::link::Channel`], the same decision
//! code the simulator runs): each frame is offered at the runner's clock,
//! the channel says whether the queue (tail drop) or the loss model takes it
//! and when it arrives (serialisation at the rate behind the frames before
//! it, propagation delay, jitter, reordering, a duplicate), and the frame is
//! held here until then. Each direction of a scenario link is the channel on
//! its sender's egress, as in the simulator; a direction whose sender is
//! not a runner (a Linux host of the testbed) is the same channel on the
//! receiving port's ingress, between the socket and the device.
//!
//! The channel is user-space because this is what every transport shares
//! and because the kernels inca runs on need not have the `netem`/`tbf`
//! qdiscs (the development VM has neither). Its limit is the runner's
//! timing: a frame leaves when the runner next looks, which is within the
//! runner's `slack` when it is spinning and up to a scheduling quantum late
//! when the machine is busy; a frame due within `slack` of now goes at once.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use inca_sim::link::{Channel, ChannelConfig, ChannelStats, Fate};
use inca_switch::device::{device_rng, DeviceRng, Nanos};

/// Bound on frames in flight on one link (delivered by the channel but not
/// yet due); more are dropped and counted (`held_drops`). [our choice]
/// 2^16: 10 Gbit/s of 1500-byte frames for 78 ms, far beyond the delays
/// scenarios give links, and at most ~600 MB of jumbo frames.
pub const HELD_LIMIT: usize = 1 << 16;

/// RNG stream of port `port`'s link in one direction: after the device's
/// own (0), so that the device's draws are the same with or without link
/// models.
fn stream(port: usize, ingress: bool) -> u64 {
    1 + 2 * port as u64 + u64::from(ingress)
}

/// Counters of one live link: the channel's, and what the holding did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LinkStats {
    /// The channel's counters (offered, lost, queue drops, duplicates…).
    pub channel: ChannelStats,
    /// Frames dropped because [`HELD_LIMIT`] were already in flight.
    pub held_drops: u64,
    /// Frames that left later than due by more than the runner's slack
    /// (the runner was busy or asleep): a measure of the model's fidelity.
    pub late: u64,
}

/// The model of one port's egress. See the module documentation.
pub struct LiveLink {
    channel: Channel,
    rng: DeviceRng,
    /// Frames in flight: (due, order, frame).
    held: BinaryHeap<Reverse<(Nanos, u64, Vec<u8>)>>,
    seq: u64,
    held_drops: u64,
    late: u64,
}

impl LiveLink {
    /// The model of what port `port` sends, with `config`, its RNG from
    /// the node's `seed`.
    pub fn egress(config: ChannelConfig, seed: u64, port: usize) -> LiveLink {
        LiveLink::new(config, device_rng(seed, stream(port, false)))
    }

    /// The model of what port `port`'s peer sends, applied as its frames
    /// arrive: for a peer that is not a runner (a Linux host).
    pub fn ingress(config: ChannelConfig, seed: u64, port: usize) -> LiveLink {
        LiveLink::new(config, device_rng(seed, stream(port, true)))
    }

    fn new(config: ChannelConfig, rng: DeviceRng) -> LiveLink {
        LiveLink {
            channel: Channel::new(config),
            rng,
            held: BinaryHeap::new(),
            seq: 0,
            held_drops: 0,
            late: 0,
        }
    }

    /// The channel's configuration.
    pub fn config(&self) -> &ChannelConfig {
        &self.channel.config
    }

    /// Counters.
    pub fn stats(&self) -> LinkStats {
        LinkStats {
            channel: self.channel.stats,
            held_drops: self.held_drops,
            late: self.late,
        }
    }

    /// Offers `frame`, sent by the device at `now`: dropped (counted),
    /// appended to `out` if it is due within `slack` and nothing is held
    /// before it, or held until due.
    pub fn offer(&mut self, now: Nanos, frame: Vec<u8>, slack: Nanos, out: &mut Vec<Vec<u8>>) {
        match self.channel.offer(now, frame.len(), &mut self.rng) {
            Fate::Dropped => {}
            Fate::Deliver { first, duplicate } => {
                if let Some(d) = duplicate {
                    self.hold(d, frame.clone());
                }
                if first <= now + slack && self.held.is_empty() {
                    out.push(frame);
                } else {
                    self.hold(first, frame);
                }
            }
        }
    }

    fn hold(&mut self, due: Nanos, frame: Vec<u8>) {
        if self.held.len() >= HELD_LIMIT {
            self.held_drops += 1;
            return;
        }
        self.seq += 1;
        self.held.push(Reverse((due, self.seq, frame)));
    }

    /// Appends to `out` every held frame due by `now` (in due order).
    pub fn release(&mut self, now: Nanos, slack: Nanos, out: &mut Vec<Vec<u8>>) {
        while let Some(Reverse((due, ..))) = self.held.peek() {
            if *due > now {
                break;
            }
            if now - *due > slack {
                self.late += 1;
            }
            if let Some(Reverse((_, _, frame))) = self.held.pop() {
                out.push(frame);
            }
        }
    }

    /// When the next held frame is due, if any.
    pub fn next_due(&self) -> Option<Nanos> {
        self.held.peek().map(|Reverse((due, ..))| *due)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use inca_sim::link::LossModel;

    fn link(config: ChannelConfig) -> LiveLink {
        LiveLink::egress(config, 7, 0)
    }

    #[test]
    fn a_delayed_frame_is_held_until_due_then_released() {
        let mut l = link(ChannelConfig {
            rate_bps: 1_000_000_000,
            delay: 2_000_000,
            ..ChannelConfig::default()
        });
        let mut out = Vec::new();
        l.offer(1_000, vec![0; 101], 0, &mut out);
        assert!(out.is_empty());
        // 101 + 24 bytes at 1 Gbit/s: 1 µs on the wire, then 2 ms.
        let due = 1_000 + 1_000 + 2_000_000;
        assert_eq!(l.next_due(), Some(due));
        l.release(due - 1, 0, &mut out);
        assert!(out.is_empty());
        l.release(due, 0, &mut out);
        assert_eq!(out.len(), 1);
        assert_eq!(l.next_due(), None);
        assert_eq!(l.stats().late, 0);
    }

    #[test]
    fn a_fast_link_sends_at_once_and_a_slow_one_paces() {
        let mut fast = link(ChannelConfig::default());
        let mut out = Vec::new();
        fast.offer(0, vec![0; 1000], 100_000, &mut out);
        assert_eq!(out.len(), 1, "100 Gbit/s and 1 µs are within the slack");
        // 10 Mbit/s: 1000 + 24 bytes take 819.2 µs; the third of three
        // frames sent together is due after 2.46 ms.
        let mut slow = link(ChannelConfig {
            rate_bps: 10_000_000,
            delay: 0,
            queue_bytes: 1 << 20,
            ..ChannelConfig::default()
        });
        let mut out = Vec::new();
        for _ in 0..3 {
            slow.offer(0, vec![0; 1000], 0, &mut out);
        }
        assert!(out.is_empty());
        slow.release(2_457_599, 0, &mut out);
        assert_eq!(out.len(), 2);
        slow.release(2_457_600, 0, &mut out);
        assert_eq!(out.len(), 3);
    }

    #[test]
    fn losses_duplicates_and_tail_drops_are_the_channels() {
        let mut l = link(ChannelConfig {
            loss: LossModel::Bernoulli { p: 0.5 },
            duplicate: 0.5,
            rate_bps: 1_000_000,
            queue_bytes: 10_000,
            ..ChannelConfig::default()
        });
        let mut out = Vec::new();
        for _ in 0..1000 {
            l.offer(0, vec![0; 100], 0, &mut out);
        }
        l.release(u64::MAX, u64::MAX, &mut out);
        let s = l.stats();
        let c = s.channel;
        assert_eq!(c.offered, 1000);
        // One on the wire and 100 waiting fill the 10 000-byte queue.
        assert_eq!(c.queue_drops, 899);
        assert_eq!(c.lost + c.delivered - c.duplicated, 101);
        assert_eq!(out.len() as u64, c.delivered);
        assert!(c.lost > 20 && c.duplicated > 10, "{c:?}");
    }

    #[test]
    fn in_flight_frames_are_bounded() {
        let mut l = link(ChannelConfig {
            delay: 1_000_000_000,
            queue_bytes: u64::MAX,
            ..ChannelConfig::default()
        });
        let mut out = Vec::new();
        for _ in 0..HELD_LIMIT + 5 {
            l.offer(0, vec![0; 64], 0, &mut out);
        }
        assert_eq!(l.stats().held_drops, 5);
    }
}
