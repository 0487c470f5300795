//! The hub's timers: a min-heap of deadlines. Timers are never cancelled;
//! the handler checks whether the state that set one still holds, so a
//! stale timer is a no-op. Ties fire in the order they were set.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::ids::{AppId, UnionKey};
use inca_switch::device::Nanos;

/// What a timer is for.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Timer {
    /// Poll every app's FM counters.
    CounterPoll,
    /// The outstanding WRITE_APPLY with this id is due.
    ApplyDeadline(u64),
    /// `T_flush` after the FM delete of this flow was acknowledged.
    Flush(AppId, UnionKey),
    /// The promotion rate limit allows the next promotion.
    Promote,
    /// PING every daemon; declare silent ones dead.
    Ping,
}

/// The heap.
#[derive(Debug, Default)]
pub struct Timers {
    heap: BinaryHeap<Reverse<(Nanos, u64, Timer)>>,
    seq: u64,
}

impl Timers {
    /// Arms `timer` at `at`.
    pub fn set(&mut self, at: Nanos, timer: Timer) {
        self.seq += 1;
        self.heap.push(Reverse((at, self.seq, timer)));
    }

    /// The earliest deadline.
    pub fn next(&self) -> Option<Nanos> {
        self.heap.peek().map(|Reverse((at, _, _))| *at)
    }

    /// Removes and returns a timer due at or before `now`.
    pub fn pop_due(&mut self, now: Nanos) -> Option<Timer> {
        if self.next()? <= now {
            self.heap.pop().map(|Reverse((_, _, t))| t)
        } else {
            None
        }
    }
}
