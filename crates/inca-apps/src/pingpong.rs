//! `session_pingpong`: a control-plane-only program that exercises control
//! sessions end to end (the simulator's modelled sessions, live TCP between
//! `inca node` processes), through the switch's CPU and
//! [`ControlPlane::session_send`].
//!
//! The `ping` end sends `ping <seq>` when the session comes up and the next
//! one whenever the pong for the last arrives, until `count` pongs are in;
//! after a reset it sends the unanswered ping again once the session is back.
//! The `pong` end answers every ping with `pong <seq>` (same padding). Both
//! check the order: a ping or pong other than the one expected is counted
//! (`out_of_order`; a ping sent again after a reset is `resent`, not out
//! of order). The data plane drops every packet.
//!
//! Message body: `ping` or `pong`, the sequence number (u32, big-endian),
//! then zero padding up to `size` bytes.

use inca_switch::device::{SessionEvent, SessionId};
use inca_switch::objects::{AccessError, DataPlane, Declare, DeclareError};
use inca_switch::placement::Gress;
use inca_switch::program::{PacketCtx, ParseError, Program, ProgramReport};
use inca_switch::{ControlEvent, ControlPlane};

use crate::params::{ParamError, Params};

/// The two ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Sends pings.
    Ping,
    /// Answers them.
    Pong,
}

/// What one end counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PingPongStats {
    /// Pings sent (including resends).
    pub pings_sent: u64,
    /// Pongs received in order.
    pub pongs_received: u64,
    /// Pings received.
    pub pings_received: u64,
    /// Pongs sent.
    pub pongs_sent: u64,
    /// Messages other than the one expected.
    pub out_of_order: u64,
    /// Pings received again after a reset (their pong was lost).
    pub resent: u64,
    /// Messages that were neither a ping nor a pong.
    pub malformed: u64,
    /// Session up events.
    pub ups: u64,
    /// Session resets.
    pub resets: u64,
    /// Messages refused by the session.
    pub refused: u64,
}

/// The program. See the module documentation.
#[derive(Debug, Clone)]
pub struct PingPong {
    session: SessionId,
    role: Role,
    count: u64,
    size: usize,
    /// Ping end: the sequence number of the ping awaiting its pong.
    next: u32,
    /// Pong end: the sequence number of the next ping expected.
    expected: u32,
    /// Whether a reset happened since the last message (a resend is fine).
    after_reset: bool,
    up: bool,
    stats: PingPongStats,
}

impl PingPong {
    /// Parameter names.
    pub const PARAMS: &'static [&'static str] = &["session", "role", "count", "size"];

    /// From parameters `session` (default 1), `role` (`ping` or `pong`,
    /// default `pong`), `count` (pings, default 100) and `size` (message
    /// bytes, default 64, at least 8).
    pub fn from_params(p: &Params) -> Result<Self, ParamError> {
        p.check_known("session_pingpong", Self::PARAMS)?;
        let role = match p.text("role").unwrap_or("pong") {
            "ping" => Role::Ping,
            "pong" => Role::Pong,
            other => {
                return Err(ParamError::Value {
                    name: "role".into(),
                    reason: format!("{other:?}: give ping or pong"),
                })
            }
        };
        Ok(PingPong::new(
            SessionId(p.number("session", 1, 0, u64::from(u32::MAX))? as u32),
            role,
            p.number("count", 100, 1, u64::from(u32::MAX))?,
            p.number("size", 64, 8, 1 << 20)? as usize,
        ))
    }

    /// An end of session `session`.
    pub fn new(session: SessionId, role: Role, count: u64, size: usize) -> Self {
        PingPong {
            session,
            role,
            count,
            size: size.max(8),
            next: 0,
            expected: 0,
            after_reset: false,
            up: false,
            stats: PingPongStats::default(),
        }
    }

    /// Its counters.
    pub fn stats(&self) -> PingPongStats {
        self.stats
    }

    fn message(&self, kind: &[u8; 4], seq: u32) -> Vec<u8> {
        let mut body = vec![0; self.size];
        body[..4].copy_from_slice(kind);
        body[4..8].copy_from_slice(&seq.to_be_bytes());
        body
    }

    fn ping(&mut self, cp: &mut ControlPlane<'_>) {
        if self.up && u64::from(self.next) < self.count {
            cp.session_send(self.session, self.message(b"ping", self.next));
            self.stats.pings_sent += 1;
        }
    }

    fn on_message(&mut self, body: &[u8], cp: &mut ControlPlane<'_>) {
        let Some(seq) = body
            .get(4..8)
            .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
        else {
            self.stats.malformed += 1;
            return;
        };
        match (&body[..4], self.role) {
            (b"ping", Role::Pong) => {
                self.stats.pings_received += 1;
                if seq == self.expected {
                    self.expected += 1;
                } else if self.after_reset && seq.wrapping_add(1) == self.expected {
                    self.stats.resent += 1;
                } else {
                    self.stats.out_of_order += 1;
                }
                self.after_reset = false;
                cp.session_send(self.session, self.message(b"pong", seq));
                self.stats.pongs_sent += 1;
            }
            (b"pong", Role::Ping) => {
                if seq == self.next {
                    self.stats.pongs_received += 1;
                    self.next += 1;
                    self.ping(cp);
                } else {
                    self.stats.out_of_order += 1;
                }
            }
            _ => self.stats.malformed += 1,
        }
    }
}

impl Program for PingPong {
    type Meta = ();
    type Digest = ();

    fn name(&self) -> &str {
        "session_pingpong"
    }

    fn declare(&mut self, _decl: &mut Declare) -> Result<(), DeclareError> {
        Ok(())
    }

    fn parse(&self, _: Gress, _: &[u8], _: &mut ()) -> Result<(), ParseError> {
        Ok(())
    }

    fn ingress(
        &mut self,
        pkt: &mut PacketCtx<(), ()>,
        _dp: &mut DataPlane<'_>,
    ) -> Result<(), AccessError> {
        pkt.drop_packet();
        Ok(())
    }

    fn control(&mut self, event: ControlEvent<()>, cp: &mut ControlPlane<'_>) {
        let ControlEvent::Session(e) = event else {
            return;
        };
        if e.session() != self.session {
            return;
        }
        match e {
            SessionEvent::Up { .. } => {
                self.stats.ups += 1;
                self.up = true;
                if self.role == Role::Ping {
                    self.ping(cp);
                }
            }
            SessionEvent::Message { body, .. } => self.on_message(&body, cp),
            SessionEvent::Reset { .. } => {
                self.stats.resets += 1;
                self.up = false;
                self.after_reset = true;
            }
            SessionEvent::Refused { .. } => self.stats.refused += 1,
        }
    }

    fn report(&self) -> ProgramReport {
        let s = &self.stats;
        let mut r = ProgramReport::default();
        for (k, v) in [
            ("pings_sent", s.pings_sent),
            ("pongs_received", s.pongs_received),
            ("pings_received", s.pings_received),
            ("pongs_sent", s.pongs_sent),
            ("out_of_order", s.out_of_order),
            ("resent", s.resent),
            ("malformed", s.malformed),
            ("ups", s.ups),
            ("resets", s.resets),
            ("refused", s.refused),
            ("done", u64::from(s.pongs_received >= self.count)),
        ] {
            r.counters.push((format!("pingpong/{k}"), v));
        }
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use inca_switch::harness::Harness;
    use inca_switch::{Profile, Switch};

    #[test]
    fn the_ping_end_pings_on_up_and_on_each_pong_and_stops_at_count() {
        let sw = Switch::new(
            Profile::tofino(),
            PingPong::new(SessionId(2), Role::Ping, 2, 16),
        )
        .unwrap();
        let mut h = Harness::new(sw, 1);
        let s = SessionId(2);
        h.session(1_000, SessionEvent::Up { session: s });
        h.advance_to(1_000_000);
        assert_eq!(h.session_sent.len(), 1);
        let (at, id, body) = &h.session_sent[0];
        assert!(*at > 1_000, "sent after the CPU's handling time");
        assert_eq!((*id, &body[..8]), (s, &b"ping\0\0\0\0"[..]));
        let pong = |seq: u32| {
            let mut b = vec![0; 16];
            b[..4].copy_from_slice(b"pong");
            b[4..8].copy_from_slice(&seq.to_be_bytes());
            b
        };
        h.session(
            2_000_000,
            SessionEvent::Message {
                session: s,
                body: pong(0),
            },
        );
        h.session(
            3_000_000,
            SessionEvent::Message {
                session: s,
                body: pong(5),
            },
        );
        h.session(
            4_000_000,
            SessionEvent::Message {
                session: s,
                body: pong(1),
            },
        );
        h.advance_to(5_000_000);
        assert_eq!(h.session_sent.len(), 2, "ping 1, and none after count");
        let st = h.device.program().stats();
        assert_eq!((st.pongs_received, st.out_of_order), (2, 1));
    }

    #[test]
    fn a_composite_routes_a_session_to_the_block_that_sent_on_it() {
        use inca_switch::{Block, Composite};
        // Both blocks listen on session 1; the ping block claims it by
        // pinging when it comes up.
        let s = SessionId(1);
        let c = Composite::pipeline(
            "c",
            vec![
                Block::new("a", PingPong::new(s, Role::Ping, 5, 8)),
                Block::new("b", PingPong::new(s, Role::Pong, 5, 8)),
            ],
        )
        .unwrap();
        let mut h = Harness::new(Switch::new(Profile::tofino(), c).unwrap(), 1);
        h.session(1_000, SessionEvent::Up { session: s });
        let msg = |kind: &[u8; 4]| {
            let mut b = vec![0; 8];
            b[..4].copy_from_slice(kind);
            SessionEvent::Message {
                session: s,
                body: b,
            }
        };
        h.session(2_000_000, msg(b"pong"));
        h.session(3_000_000, msg(b"ping"));
        h.advance_to(4_000_000);
        let (a, b) = {
            let c = h.device.program();
            let a = c.block::<PingPong>("a").unwrap().stats();
            let b = c.block::<PingPong>("b").unwrap().stats();
            (a, b)
        };
        // Up reached both; the messages only the owner.
        assert_eq!((a.ups, b.ups), (1, 1));
        assert_eq!((a.pongs_received, a.malformed), (1, 1));
        assert_eq!((b.pings_received, b.malformed), (0, 0));
    }
}
