//! Serialising frames onto a line at a fixed rate, exactly.
//!
//! A frame's time on the wire is rarely a whole number of nanoseconds (a
//! 64-byte frame plus overhead at 100 Gbps takes 7.04 ns). Rounding each
//! frame up would make a busy line slower than its rate; rounding down,
//! faster. A [`LineClock`] keeps the fraction: while frames follow each other
//! back to back, the remainder carries over, so the long-run rate is the
//! nominal rate exactly and each frame starts within 1 ns of its exact
//! time. When the line goes idle the remainder is dropped (an idle line has
//! no phase to keep).

use crate::device::Nanos;

/// One line's transmitter. See the module documentation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LineClock {
    rate_bps: u64,
    /// When the line finishes the last frame (whole ns, rounded down).
    free_at: Nanos,
    /// The part of a nanosecond past `free_at`, in units of 1/rate_bps ns.
    carry: u64,
}

impl LineClock {
    /// An idle line of `rate_bps` bits per second.
    pub fn new(rate_bps: u64) -> Self {
        LineClock {
            rate_bps: rate_bps.max(1),
            free_at: 0,
            carry: 0,
        }
    }

    /// The line's rate.
    pub fn rate_bps(&self) -> u64 {
        self.rate_bps
    }

    /// When the line is free (the last frame's last bit has left).
    pub fn free_at(&self) -> Nanos {
        if self.carry > 0 {
            self.free_at + 1
        } else {
            self.free_at
        }
    }

    /// Sends `wire_bytes` (frame and overhead) as soon as possible at or
    /// after `now`: returns (start, end) of its serialisation.
    pub fn send(&mut self, now: Nanos, wire_bytes: u64) -> (Nanos, Nanos) {
        let (start, carry) = if now > self.free_at || (now == self.free_at && self.carry == 0) {
            (now, 0)
        } else {
            (self.free_at, self.carry)
        };
        // Time in units of 1/rate ns: bits × 1e9 + what was left over.
        let total = u128::from(wire_bytes) * 8 * 1_000_000_000 + u128::from(carry);
        let rate = u128::from(self.rate_bps);
        let whole = (total / rate) as Nanos;
        self.carry = (total % rate) as u64;
        self.free_at = start + whole;
        let end = self.free_at();
        // A frame that starts in the middle of a nanosecond is reported at
        // the next whole one.
        let start = if carry > 0 { start + 1 } else { start };
        (start, end.max(start))
    }

    /// Forgets the line's state (idle from `now`).
    pub fn reset(&mut self, now: Nanos) {
        self.free_at = self.free_at.min(now);
        self.carry = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn back_to_back_frames_keep_the_exact_rate() {
        // 88 wire bytes at 100 Gbps = 7.04 ns each.
        let mut l = LineClock::new(100_000_000_000);
        let mut last = (0, 0);
        for _ in 0..1_000_000 {
            last = l.send(0, 88);
        }
        // 1e6 frames take exactly 7.04 ms.
        assert_eq!(last.1, 7_040_000);
    }

    #[test]
    fn whole_nanosecond_frames_are_exact_and_idle_resets() {
        let mut l = LineClock::new(100_000_000_000);
        assert_eq!(l.send(1_000, 1500), (1_000, 1_120));
        assert_eq!(l.send(1_000, 1500), (1_120, 1_240));
        assert_eq!(l.send(5_000, 1500), (5_000, 5_120), "idle: starts at once");
        assert_eq!(l.free_at(), 5_120);
    }

    #[test]
    fn a_fractional_frame_ends_on_the_next_whole_ns() {
        let mut l = LineClock::new(100_000_000_000);
        assert_eq!(l.send(0, 88), (0, 8)); // 7.04 ns
        assert_eq!(l.send(0, 88), (8, 15)); // starts at 7.04, ends 14.08
        assert_eq!(l.free_at(), 15);
    }
}
