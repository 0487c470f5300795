//! Time-ordered transmission: the device contract wants the frames of one
//! port in non-decreasing time, but a server's handlers finish out of order
//! (one worker's reply is due at 5 µs, another's, produced later, at 3 µs).
//!
//! - [`TxPort`] hands a frame to the port at its time or, if an earlier-sent
//!   frame is later, right behind it. Enough for a device whose frames are
//!   produced nearly in order (a NIC pipeline).
//! - [`TxQueue`] holds frames due later than a slack (one service time, say)
//!   in a bounded time-ordered queue and releases them when the device is
//!   next woken at or after their time (it arms a timer for
//!   [`TxQueue::next_due`]). Frames due within the slack go out at once, so
//!   a frame slips behind an earlier-released one by at most the slack,
//!   without a timer per frame.

use std::collections::BTreeMap;

use inca_switch::device::{Nanos, Output, PortId};

/// One port's transmit side: frames leave in non-decreasing time.
#[derive(Debug, Clone)]
pub struct TxPort {
    port: PortId,
    last_tx: Nanos,
}

impl TxPort {
    /// A port that has sent nothing yet.
    pub fn new(port: PortId) -> Self {
        TxPort { port, last_tx: 0 }
    }

    /// Sends `frame` at `at`, or at the previous frame's time if that is
    /// later; returns the time it leaves.
    pub fn send(&mut self, at: Nanos, frame: Vec<u8>, out: &mut Vec<Output>) -> Nanos {
        let at = at.max(self.last_tx);
        self.last_tx = at;
        out.push(Output::Transmit {
            at,
            port: self.port,
            frame,
        });
        at
    }

    /// The time of the last frame sent.
    pub fn last_tx(&self) -> Nanos {
        self.last_tx
    }

    /// The port.
    pub fn port(&self) -> PortId {
        self.port
    }
}

/// What a [`TxQueue`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TxQueueStats {
    /// Frames that waited in the queue.
    pub queued: u64,
    /// Frames dropped because the queue was at its limit.
    pub dropped: u64,
}

/// A port with a bounded queue of frames due later. See the module
/// documentation.
#[derive(Debug, Clone)]
pub struct TxQueue {
    port: TxPort,
    slack: Nanos,
    limit: usize,
    /// By (due time, arrival number): FIFO among frames due together.
    pending: BTreeMap<(Nanos, u64), Vec<u8>>,
    seq: u64,
    stats: TxQueueStats,
}

impl TxQueue {
    /// A queue for `port` sending at once what is due within `slack` and
    /// holding at most `limit` frames.
    pub fn new(port: PortId, slack: Nanos, limit: usize) -> Self {
        TxQueue {
            port: TxPort::new(port),
            slack,
            limit,
            pending: BTreeMap::new(),
            seq: 0,
            stats: TxQueueStats::default(),
        }
    }

    /// Takes frames, each with the earliest time it may leave, and sends
    /// what is due: new frames due within the slack while nothing waits,
    /// then every queued frame due by `now`.
    pub fn release(
        &mut self,
        now: Nanos,
        frames: impl IntoIterator<Item = (Nanos, Vec<u8>)>,
        out: &mut Vec<Output>,
    ) {
        let horizon = now + self.slack;
        for (at, frame) in frames {
            let at = at.max(now);
            if at <= horizon && self.pending.is_empty() {
                self.port.send(at, frame, out);
            } else if self.pending.len() >= self.limit {
                self.stats.dropped += 1;
            } else {
                self.seq += 1;
                self.stats.queued += 1;
                self.pending.insert((at, self.seq), frame);
            }
        }
        while let Some(e) = self.pending.first_entry() {
            if e.key().0 > now {
                break;
            }
            self.port.send(now, e.remove(), out);
        }
    }

    /// When the first queued frame is due (the device wakes then).
    pub fn next_due(&self) -> Option<Nanos> {
        self.pending.first_key_value().map(|(&(at, _), _)| at)
    }

    /// Frames waiting.
    pub fn len(&self) -> usize {
        self.pending.len()
    }

    /// Whether no frame waits.
    pub fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }

    /// Drops every waiting frame (a crash); the port keeps its last time,
    /// so later frames still do not go back in time.
    pub fn clear(&mut self) {
        self.pending.clear();
    }

    /// Counters.
    pub fn stats(&self) -> &TxQueueStats {
        &self.stats
    }

    /// The port side.
    pub fn port(&self) -> &TxPort {
        &self.port
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sent(out: &[Output]) -> Vec<(Nanos, u8)> {
        out.iter()
            .map(|o| match o {
                Output::Transmit { at, frame, .. } => (*at, frame[0]),
                other => panic!("not a transmission: {other:?}"),
            })
            .collect()
    }

    #[test]
    fn port_never_goes_back_in_time() {
        let mut p = TxPort::new(3);
        let mut out = Vec::new();
        assert_eq!(p.send(50, vec![1], &mut out), 50);
        assert_eq!(p.send(20, vec![2], &mut out), 50);
        assert_eq!(p.send(70, vec![3], &mut out), 70);
        assert_eq!(sent(&out), vec![(50, 1), (50, 2), (70, 3)]);
        assert!(matches!(out[0], Output::Transmit { port: 3, .. }));
    }

    #[test]
    fn frames_within_the_slack_go_at_once_later_ones_wait() {
        let mut q = TxQueue::new(0, 10, 16);
        let mut out = Vec::new();
        q.release(
            100,
            [(105, vec![1]), (300, vec![2]), (200, vec![3])],
            &mut out,
        );
        assert_eq!(sent(&out), vec![(105, 1)]);
        assert_eq!(q.next_due(), Some(200));
        // While frames wait, a new one goes through the queue too, so the
        // port's order follows due times.
        out.clear();
        q.release(150, [(150, vec![4]), (160, vec![5])], &mut out);
        assert_eq!(sent(&out), vec![(150, 4)]);
        assert_eq!(q.next_due(), Some(160));
        out.clear();
        q.release(250, [], &mut out);
        assert_eq!(sent(&out), vec![(250, 5), (250, 3)]);
        out.clear();
        q.release(300, [], &mut out);
        assert_eq!(sent(&out), vec![(300, 2)]);
        assert!(q.is_empty());
        assert_eq!(q.stats().queued, 4);
    }

    #[test]
    fn out_of_order_producers_give_non_decreasing_times() {
        let mut q = TxQueue::new(0, 5, 1024);
        let mut out = Vec::new();
        // Workers finishing out of order, as a store's do.
        let due = [40u64, 12, 33, 7, 90, 61, 12, 5];
        for (i, &d) in due.iter().enumerate() {
            let now = i as u64 * 3;
            q.release(now, [(d, vec![i as u8])], &mut out);
        }
        let mut now = 30;
        while let Some(t) = q.next_due() {
            now = t.max(now);
            q.release(now, [], &mut out);
        }
        let times: Vec<Nanos> = sent(&out).iter().map(|s| s.0).collect();
        assert_eq!(times.len(), due.len());
        assert!(times.windows(2).all(|w| w[0] <= w[1]), "{times:?}");
    }

    #[test]
    fn queue_limit_drops_and_counts() {
        let mut q = TxQueue::new(0, 0, 2);
        let mut out = Vec::new();
        q.release(0, [(10, vec![1]), (20, vec![2]), (30, vec![3])], &mut out);
        assert_eq!(q.len(), 2);
        assert_eq!(q.stats().dropped, 1);
        q.clear();
        assert!(q.is_empty());
        q.release(1, [(1, vec![4])], &mut out);
        assert_eq!(sent(&out), vec![(1, 4)]);
    }
}
