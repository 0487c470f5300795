//! The state copy to a member joining as the new tail, as a go-back-N
//! transfer of opaque chunks [our choice for the mechanism]: the member
//! that admitted the joiner cuts its state, as of one update id (the
//! session), into chunks (the system's encoding) and sends a window of
//! them; the joiner takes chunks in order and acknowledges each with the
//! next one it needs; the sender goes back to the last acknowledged chunk
//! after `rto` without progress. When the last chunk is in, the system
//! installs the copy and calls [`crate::ChainNode::install`].
//!
//! - [`Transfer`] — the sender's side.
//! - [`Intake`] — the joiner's side: which chunk it needs next.

use std::net::Ipv4Addr;

use inca_switch::device::Nanos;

/// A transfer in progress at the member that admitted a joiner.
#[derive(Debug, Clone)]
pub struct Transfer {
    to: Ipv4Addr,
    session: u32,
    chunks: Vec<Vec<u8>>,
    acked: u32,
    sent: u32,
    last_progress: Nanos,
    window: u32,
}

/// What an acknowledgement did to a [`Transfer`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Acked {
    /// Not for this transfer, or no progress.
    Ignored,
    /// Progress; more chunks are due ([`Transfer::due`]).
    More,
    /// Every chunk is acknowledged: the transfer is over.
    Done,
}

impl Transfer {
    /// A transfer of `chunks` (the copy as of update `session`) to `to`,
    /// with at most `window` chunks unacknowledged.
    pub fn new(to: Ipv4Addr, session: u32, chunks: Vec<Vec<u8>>, now: Nanos, window: u32) -> Self {
        Transfer {
            to,
            session,
            chunks,
            acked: 0,
            sent: 0,
            last_progress: now,
            window,
        }
    }

    /// The joiner.
    pub fn to(&self) -> Ipv4Addr {
        self.to
    }

    /// The update id the copy is as of.
    pub fn session(&self) -> u32 {
        self.session
    }

    /// The chunks to send now (the window beyond those sent), marked sent.
    pub fn due(&mut self) -> &[Vec<u8>] {
        let start = self.sent as usize;
        let end = (self.acked + self.window).min(self.chunks.len() as u32);
        self.sent = self.sent.max(end);
        &self.chunks[start.min(self.sent as usize)..self.sent as usize]
    }

    /// An acknowledgement from `from` for `session`: the joiner needs chunk
    /// `next`.
    pub fn on_ack(&mut self, from: Ipv4Addr, session: u32, next: u32, now: Nanos) -> Acked {
        if from != self.to || session != self.session || next <= self.acked {
            return Acked::Ignored;
        }
        self.acked = next.min(self.chunks.len() as u32);
        self.sent = self.sent.max(self.acked);
        self.last_progress = now;
        if self.acked as usize == self.chunks.len() {
            Acked::Done
        } else {
            Acked::More
        }
    }

    /// When to look again (`rto` after the last progress).
    pub fn deadline(&self, rto: Nanos) -> Nanos {
        self.last_progress + rto
    }

    /// The timer: without progress for `rto`, go back to the last
    /// acknowledged chunk. Returns how many sent chunks are given up for
    /// resending (then [`Transfer::due`] has them again), or `None`.
    pub fn wake(&mut self, now: Nanos, rto: Nanos) -> Option<u32> {
        if now < self.last_progress + rto || self.acked >= self.chunks.len() as u32 {
            return None;
        }
        let back = self.sent - self.acked;
        self.sent = self.acked;
        self.last_progress = now;
        Some(back)
    }
}

/// The joiner's side of a transfer: the session it is receiving and the
/// chunk it needs next.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Intake {
    session: Option<u32>,
    next: u32,
}

/// What to do with an offered chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Offer {
    /// A chunk of an unknown session other than its first: drop it.
    Drop,
    /// Out of order: drop it and acknowledge `next` again.
    Resend {
        /// The chunk needed.
        next: u32,
    },
    /// The chunk needed: take its items (and if `restart`, forget the items
    /// of an earlier session first), then call [`Intake::took`].
    Take {
        /// A new session starts with this chunk.
        restart: bool,
    },
}

impl Intake {
    /// The session being received, if any.
    pub fn session(&self) -> Option<u32> {
        self.session
    }

    /// Chunk `chunk` of `session` arrives.
    pub fn offer(&mut self, session: u32, chunk: u32) -> Offer {
        let mut restart = false;
        if self.session != Some(session) {
            if chunk != 0 {
                return Offer::Drop;
            }
            *self = Intake {
                session: Some(session),
                next: 0,
            };
            restart = true;
        }
        if chunk != self.next {
            return Offer::Resend { next: self.next };
        }
        Offer::Take { restart }
    }

    /// The offered chunk was taken; returns the next chunk needed (to
    /// acknowledge).
    pub fn took(&mut self) -> u32 {
        self.next += 1;
        self.next
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_goes_back_after_a_loss_and_the_intake_asks_in_order() {
        let j = Ipv4Addr::new(10, 0, 0, 3);
        let chunks: Vec<Vec<u8>> = (0..5u8).map(|i| vec![i]).collect();
        let mut t = Transfer::new(j, 7, chunks, 0, 2);
        assert_eq!(t.due(), &[vec![0], vec![1]]);
        assert!(t.due().is_empty(), "window full");
        let mut i = Intake::default();
        // Chunk 0 arrives, chunk 1 is lost.
        assert_eq!(i.offer(7, 0), Offer::Take { restart: true });
        assert_eq!(i.took(), 1);
        assert_eq!(t.on_ack(j, 7, 1, 10), Acked::More);
        assert_eq!(t.due(), &[vec![2]]);
        assert_eq!(i.offer(7, 2), Offer::Resend { next: 1 });
        assert_eq!(t.on_ack(j, 7, 1, 11), Acked::Ignored);
        assert_eq!(
            t.on_ack(Ipv4Addr::new(1, 1, 1, 1), 7, 3, 11),
            Acked::Ignored
        );
        assert_eq!(t.wake(12, 5), None);
        assert_eq!(t.wake(15, 5), Some(2));
        assert_eq!(t.due(), &[vec![1], vec![2]]);
        for c in 1..5 {
            assert_eq!(i.offer(7, c), Offer::Take { restart: false });
            let next = i.took();
            let want = if c == 4 { Acked::Done } else { Acked::More };
            assert_eq!(t.on_ack(j, 7, next, 20), want);
            let _ = t.due();
        }
        // A chunk of another session restarts the intake only at chunk 0.
        assert_eq!(i.offer(8, 3), Offer::Drop);
        assert_eq!(i.offer(8, 0), Offer::Take { restart: true });
    }
}
