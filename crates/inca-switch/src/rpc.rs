//! Reliable request/response from the switch CPU to a server: request ids,
//! the map of requests waiting for their reply, and retransmission timers
//! with exponential backoff and a bounded retry count.
//!
//! Sans-IO: [`Requests`] never sees a clock or a socket. It sends frames and
//! arms timers through a [`Transport`] (implemented for [`ControlPlane`]),
//! and its owner hands it back the timer tokens it armed and the ids of the
//! replies that arrived. What a request and its reply mean stays with the
//! owner: each request carries a tag `T` (TEA: the server and the purpose),
//! returned when the request completes, times out for good or is abandoned.
//!
//! The receiver must be idempotent by request id: a retransmission repeats
//! the request byte for byte, and a reply to any copy completes it (later
//! replies find no request and are the owner's to ignore).

use std::collections::BTreeMap;

use crate::control::{ControlPlane, PacketOutDest};
use crate::device::Nanos;

/// What [`Requests`] needs from its environment.
pub trait Transport {
    /// The current time.
    fn now(&self) -> Nanos;
    /// Sends `frame` towards `dest`.
    fn send(&mut self, frame: Vec<u8>, dest: PacketOutDest);
    /// Asks for a timer event with `token` at `at`.
    fn set_timer(&mut self, at: Nanos, token: u64);
}

impl Transport for ControlPlane<'_> {
    fn now(&self) -> Nanos {
        ControlPlane::now(self)
    }

    fn send(&mut self, frame: Vec<u8>, dest: PacketOutDest) {
        self.packet_out(frame, dest);
    }

    fn set_timer(&mut self, at: Nanos, token: u64) {
        ControlPlane::set_timer(self, at, token);
    }
}

/// When to retransmit and when to give up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retransmit {
    /// Wait before the first retransmission.
    pub first: Nanos,
    /// The wait doubles per retransmission up to `first << max_doublings`.
    pub max_doublings: u32,
    /// Retransmissions before the request is given up.
    pub max_retries: u32,
}

impl Retransmit {
    /// The wait after retransmission number `attempt` (1-based).
    pub fn backoff(&self, attempt: u32) -> Nanos {
        1u64.checked_shl(attempt.min(self.max_doublings))
            .map_or(Nanos::MAX, |m| self.first.saturating_mul(m))
    }
}

/// One request waiting for its reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outstanding<T> {
    /// The owner's tag.
    pub tag: T,
    /// The request as sent (resent as is).
    pub frame: Vec<u8>,
    /// Where it went.
    pub dest: PacketOutDest,
    /// Retransmissions so far.
    pub retries: u32,
}

/// What a retransmission timer led to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Timeout<T> {
    /// The request had completed or was abandoned: nothing to do.
    Stale,
    /// Sent again (retransmission number `attempt`); the timer is re-armed.
    Resent {
        /// Retransmissions so far, this one included.
        attempt: u32,
    },
    /// Given up: out of retries, or the owner said so. Its tag.
    GaveUp(T),
}

/// Requests waiting for replies. Invariant: every request in the map with
/// retransmission on has exactly one timer armed, at token
/// `token_base + id`.
#[derive(Debug, Clone)]
pub struct Requests<T> {
    token_base: u64,
    policy: Retransmit,
    last_id: u32,
    pending: BTreeMap<u32, Outstanding<T>>,
}

impl<T> Requests<T> {
    /// No requests yet. Timer tokens are `token_base + id` for 32-bit ids:
    /// the owner keeps that range of tokens for them.
    pub fn new(token_base: u64, policy: Retransmit) -> Self {
        Requests {
            token_base,
            policy,
            last_id: 0,
            pending: BTreeMap::new(),
        }
    }

    /// The retransmission policy.
    pub fn policy(&self) -> Retransmit {
        self.policy
    }

    /// Requests waiting for their reply.
    pub fn len(&self) -> usize {
        self.pending.len()
    }

    /// Whether none waits.
    pub fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }

    /// The request with id `id`, if it waits.
    pub fn get(&self, id: u32) -> Option<&Outstanding<T>> {
        self.pending.get(&id)
    }

    /// The request id a timer token stands for, if the token is one of ours.
    pub fn id_of_token(&self, token: u64) -> Option<u32> {
        token
            .checked_sub(self.token_base)
            .and_then(|d| u32::try_from(d).ok())
    }

    fn token(&self, id: u32) -> u64 {
        self.token_base.wrapping_add(u64::from(id))
    }

    /// Sends a new request: `build` makes its frame from its id (`None`: it
    /// cannot be encoded, nothing is sent, the id is used up). With
    /// `retransmit` off the request is only tracked (a missing reply is
    /// itself the signal, as for heartbeats). Returns the id.
    pub fn send(
        &mut self,
        io: &mut impl Transport,
        dest: PacketOutDest,
        tag: T,
        retransmit: bool,
        build: impl FnOnce(u32) -> Option<Vec<u8>>,
    ) -> Option<u32> {
        self.last_id = self.last_id.wrapping_add(1);
        let id = self.last_id;
        let frame = build(id)?;
        io.send(frame.clone(), dest);
        if retransmit {
            io.set_timer(io.now().saturating_add(self.policy.first), self.token(id));
        }
        self.pending.insert(
            id,
            Outstanding {
                tag,
                frame,
                dest,
                retries: 0,
            },
        );
        Some(id)
    }

    /// The reply to `id` arrived: the request, or `None` for a reply to a
    /// request already completed or abandoned (a duplicate).
    pub fn complete(&mut self, id: u32) -> Option<Outstanding<T>> {
        self.pending.remove(&id)
    }

    /// Request `id`'s retransmission timer fired. It is sent again and the
    /// timer re-armed with backoff, unless it is out of retries or
    /// `give_up` says so from its tag.
    pub fn on_timer(
        &mut self,
        io: &mut impl Transport,
        id: u32,
        give_up: impl FnOnce(&T) -> bool,
    ) -> Timeout<T> {
        let Some(p) = self.pending.get_mut(&id) else {
            return Timeout::Stale;
        };
        if p.retries >= self.policy.max_retries || give_up(&p.tag) {
            return match self.pending.remove(&id) {
                Some(p) => Timeout::GaveUp(p.tag),
                None => Timeout::Stale,
            };
        }
        p.retries += 1;
        let attempt = p.retries;
        io.send(p.frame.clone(), p.dest);
        let at = io.now().saturating_add(self.policy.backoff(attempt));
        io.set_timer(at, self.token(id));
        Timeout::Resent { attempt }
    }

    /// Drops every request whose tag matches (their timers go stale): the
    /// ids and tags, in id order.
    pub fn abandon(&mut self, matches: impl Fn(&T) -> bool) -> Vec<(u32, T)> {
        let ids: Vec<u32> = self
            .pending
            .iter()
            .filter(|(_, p)| matches(&p.tag))
            .map(|(&id, _)| id)
            .collect();
        ids.into_iter()
            .filter_map(|id| self.pending.remove(&id).map(|p| (id, p.tag)))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A transport that records what it was asked to do.
    #[derive(Default)]
    struct Fake {
        now: Nanos,
        sent: Vec<(Vec<u8>, PacketOutDest)>,
        timers: Vec<(Nanos, u64)>,
    }

    impl Transport for Fake {
        fn now(&self) -> Nanos {
            self.now
        }
        fn send(&mut self, frame: Vec<u8>, dest: PacketOutDest) {
            self.sent.push((frame, dest));
        }
        fn set_timer(&mut self, at: Nanos, token: u64) {
            self.timers.push((at, token));
        }
    }

    const BASE: u64 = 1 << 40;
    const POLICY: Retransmit = Retransmit {
        first: 100,
        max_doublings: 2,
        max_retries: 3,
    };

    fn frame(id: u32) -> Option<Vec<u8>> {
        Some(id.to_be_bytes().to_vec())
    }

    #[test]
    fn send_tracks_sends_and_arms_a_timer() {
        let (mut r, mut io) = (Requests::new(BASE, POLICY), Fake::default());
        io.now = 1_000;
        let id = r.send(&mut io, PacketOutDest::Port(3), 'a', true, frame);
        assert_eq!(id, Some(1));
        assert_eq!(io.sent, vec![(vec![0, 0, 0, 1], PacketOutDest::Port(3))]);
        assert_eq!(io.timers, vec![(1_100, BASE + 1)]);
        assert_eq!(r.id_of_token(BASE + 1), Some(1));
        assert_eq!(r.id_of_token(BASE - 1), None);
        assert_eq!(r.len(), 1);
        assert_eq!(r.complete(1).map(|p| p.tag), Some('a'));
        assert!(r.complete(1).is_none(), "a duplicate reply finds nothing");
        assert!(r.is_empty());
    }

    #[test]
    fn untimed_requests_arm_no_timer_and_unencodable_ones_use_up_an_id() {
        let (mut r, mut io) = (Requests::new(BASE, POLICY), Fake::default());
        assert_eq!(
            r.send(&mut io, PacketOutDest::Port(0), 1, false, frame),
            Some(1)
        );
        assert!(io.timers.is_empty());
        assert_eq!(
            r.send(&mut io, PacketOutDest::Port(0), 2, true, |_| None),
            None
        );
        assert_eq!(
            r.send(&mut io, PacketOutDest::Port(0), 3, true, frame),
            Some(3)
        );
        assert_eq!(io.sent.len(), 2);
        assert_eq!(r.len(), 2);
    }

    #[test]
    fn retransmits_with_capped_backoff_then_gives_up() {
        let (mut r, mut io) = (Requests::new(BASE, POLICY), Fake::default());
        let id = r
            .send(&mut io, PacketOutDest::Port(1), 'w', true, frame)
            .unwrap();
        for (attempt, wait) in [(1, 200), (2, 400), (3, 400)] {
            io.now += 1_000;
            assert_eq!(
                r.on_timer(&mut io, id, |_| false),
                Timeout::Resent { attempt }
            );
            assert_eq!(io.timers.last(), Some(&(io.now + wait, BASE + 1)));
            assert_eq!(io.sent.last().map(|s| &s.0), Some(&vec![0, 0, 0, 1]));
        }
        assert_eq!(r.on_timer(&mut io, id, |_| false), Timeout::GaveUp('w'));
        assert_eq!(io.sent.len(), 4, "the original and three retransmissions");
        assert_eq!(r.on_timer(&mut io, id, |_| false), Timeout::Stale);
        assert!(r.is_empty());
    }

    #[test]
    fn the_owner_may_give_up_early_and_abandon_by_tag() {
        let (mut r, mut io) = (Requests::new(BASE, POLICY), Fake::default());
        let a = r
            .send(&mut io, PacketOutDest::Port(1), (0, 'w'), true, frame)
            .unwrap();
        let b = r
            .send(&mut io, PacketOutDest::Port(2), (1, 'w'), true, frame)
            .unwrap();
        let c = r
            .send(&mut io, PacketOutDest::Port(1), (0, 'h'), false, frame)
            .unwrap();
        assert_eq!(
            r.on_timer(&mut io, b, |t| t.0 == 1),
            Timeout::GaveUp((1, 'w'))
        );
        assert_eq!(r.abandon(|t| t.0 == 0), vec![(a, (0, 'w')), (c, (0, 'h'))]);
        assert!(r.is_empty());
        assert_eq!(r.on_timer(&mut io, a, |_| false), Timeout::Stale);
    }

    #[test]
    fn ids_wrap_without_panicking() {
        let (mut r, mut io) = (Requests::<()>::new(BASE, POLICY), Fake::default());
        r.last_id = u32::MAX;
        assert_eq!(
            r.send(&mut io, PacketOutDest::Port(0), (), true, frame),
            Some(0)
        );
        assert_eq!(io.timers, vec![(100, BASE)]);
        let huge = Retransmit {
            first: Nanos::MAX / 2,
            max_doublings: 8,
            max_retries: 1,
        };
        assert_eq!(huge.backoff(4), Nanos::MAX);
    }
}
