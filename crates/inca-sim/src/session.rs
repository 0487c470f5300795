//! Control sessions: reliable, ordered, message-oriented streams between
//! two nodes over a management network, as TCP gives daemons that talk to
//! each other (ExoPlane's hub and devices, SwiSh's controller).
//!
//! A session is modelled as TCP is at the level its users see it, not
//! packet by packet through the data network:
//!
//! - each message is framed with a 4-byte length (as live mode frames it)
//!   and appended to the sender's byte stream; the stream is cut into
//!   segments of at most `mss` bytes;
//! - a segment occupies the sender's wire for its bytes plus per-segment
//!   overhead at `rate`, then arrives `latency` later, unless it is lost
//!   (each transmission independently, with probability `loss`) or the
//!   session is cut when it would arrive;
//! - a segment not acknowledged `rto` after it was sent is sent again, the
//!   timeout doubling on each retry up to `rto_max` (RFC 6298 §5.5); the
//!   receiver hands messages over only in stream order, so a lost segment
//!   holds back everything after it (head-of-line blocking);
//! - the receiver acknowledges cumulatively; an acknowledgement takes
//!   `latency` back and is lost while the session is cut;
//! - the sender's unacknowledged bytes are bounded by `send_buffer`; a
//!   message that does not fit is refused (an event back to the sender,
//!   counted), never dropped silently;
//! - a cut (fault) stops everything from arriving; a cut that lasts
//!   `reset_after` resets the session. A reset (fault, cut too long, an end
//!   crashing) tells both running ends, with how many of each end's
//!   messages were lost, forgets everything in flight, and re-establishes
//!   the session `reconnect` later with a handshake of one round trip.
//!
//! [our choice] There is no congestion window, fast retransmit or delayed
//! acknowledgement: control traffic is small messages on an otherwise idle
//! management network, where a lost segment is recovered by the
//! retransmission timeout (too few segments follow it for three duplicate
//! acknowledgements). The model's inputs and their sources are in
//! [`SessionConfig`] and docs/calibration.md.
//!
//! The model is sans-IO: the engine hands it the current time and gets back
//! [`Effects`] (events to schedule, session events for the ends). It is
//! generic over how the engine names nodes, so it depends on nothing else
//! of the simulator.

use std::collections::{BTreeMap, VecDeque};

use inca_switch::device::{
    Nanos, Refusal, SessionEvent, SessionId, MILLIS, SECONDS, SESSION_MESSAGE_LIMIT,
};
use rand::{Rng, SeedableRng};
use serde::Deserialize;
use toml::Spanned;

use crate::quantity::{de_opt_rate, de_opt_size, de_opt_time};

/// Bytes of framing before each message in the stream (its length,
/// big-endian u32), as live mode writes it on TCP.
pub const FRAME_HEADER: u64 = 4;

/// A session's model inputs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SessionConfig {
    /// Management-network rate, bits/s. Default 1 Gbps: ExoPlane's hub and
    /// device daemons talk TCP over a 1 Gbps management network (ExoPlane
    /// spec §2 table, "Management network", from the thesis §4.5).
    pub rate_bps: u64,
    /// One-way latency (propagation, switching, both hosts' stacks).
    /// Default 20 µs: the ExoPlane spec's management-network latency
    /// (§2 model inputs, "1 Gbps, 20 µs one-way").
    pub latency: Nanos,
    /// Probability that one segment transmission is lost.
    pub loss: f64,
    /// Retransmission timeout of a first retry. Default 200 ms: Linux's
    /// `TCP_RTO_MIN` (HZ/5, include/net/tcp.h), the timeout a LAN's
    /// microsecond round trips leave Linux with (RFC 6298 §2 computes
    /// SRTT + 4·RTTVAR, far below it).
    pub rto: Nanos,
    /// Largest retransmission timeout after doubling. Default 120 s: Linux
    /// `TCP_RTO_MAX` (include/net/tcp.h).
    pub rto_max: Nanos,
    /// Payload bytes per segment. Default 1448: a 1500-byte Ethernet MTU
    /// less 20 bytes of IPv4, 20 of TCP and 12 of the timestamp option
    /// (RFC 7323 §3) Linux sends by default.
    pub mss: u64,
    /// Bytes each segment adds on the wire. Default 90: Ethernet header
    /// 14, FCS 4, preamble 8, inter-frame gap 12 (IEEE 802.3), IPv4 20,
    /// TCP with timestamps 32.
    pub overhead: u64,
    /// Bound on a sender's unacknowledged bytes. Default 4 MiB: the maximum
    /// of Linux's `net.ipv4.tcp_wmem` (Documentation/networking/
    /// ip-sysctl.rst, "max: 4MB").
    pub send_buffer: u64,
    /// A cut lasting this long resets the session. Default 924.6 s: Linux's
    /// `tcp_retries2` = 15 ("a hypothetical timeout of 924.6 seconds",
    /// ip-sysctl.rst); scenarios about fail-over set something shorter (a
    /// daemon's keepalive).
    pub reset_after: Nanos,
    /// Time from a reset to the next connection attempt. Default 100 ms
    /// [our choice]: live mode's first reconnect backoff.
    pub reconnect: Nanos,
}

impl Default for SessionConfig {
    fn default() -> Self {
        SessionConfig {
            rate_bps: 1_000_000_000,
            latency: 20_000,
            loss: 0.0,
            rto: 200 * MILLIS,
            rto_max: 120 * SECONDS,
            mss: 1448,
            overhead: 90,
            send_buffer: 4 << 20,
            reset_after: 924_600 * MILLIS,
            reconnect: 100 * MILLIS,
        }
    }
}

/// `[[session]]` as a scenario writes it. See the module documentation;
/// every field but the ends is optional ([`SessionConfig::default`]).
///
/// ```toml
/// [[session]]
/// name = "hub-dev1"          # for faults and reports (default "a-b")
/// id = 1                     # what the devices call it (default: 1, 2, … in order)
/// a = "hub"
/// b = "dev1"
/// rate = "1Gbps"
/// latency = "20us"
/// loss = 0.001
/// rto = "200ms"
/// send_buffer = "4MiB"
/// reset_after = "1s"
/// reconnect = "100ms"
/// ```
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SessionSpec {
    /// Name (default `a-b`).
    #[serde(default)]
    pub name: Option<Spanned<String>>,
    /// The id both ends' devices use (default: its position, from 1).
    #[serde(default)]
    pub id: Option<Spanned<u32>>,
    /// One end (a node name).
    pub a: Spanned<String>,
    /// The other end.
    pub b: Spanned<String>,
    /// Rate.
    #[serde(default, deserialize_with = "de_opt_rate")]
    pub rate: Option<u64>,
    /// One-way latency.
    #[serde(default, deserialize_with = "de_opt_time")]
    pub latency: Option<Nanos>,
    /// Per-segment loss probability.
    #[serde(default)]
    pub loss: Option<Spanned<f64>>,
    /// First retransmission timeout.
    #[serde(default, deserialize_with = "de_opt_time")]
    pub rto: Option<Nanos>,
    /// Largest retransmission timeout.
    #[serde(default, deserialize_with = "de_opt_time")]
    pub rto_max: Option<Nanos>,
    /// Send buffer.
    #[serde(default, deserialize_with = "de_opt_size")]
    pub send_buffer: Option<u64>,
    /// Cut length that resets the session.
    #[serde(default, deserialize_with = "de_opt_time")]
    pub reset_after: Option<Nanos>,
    /// Delay before reconnecting after a reset.
    #[serde(default, deserialize_with = "de_opt_time")]
    pub reconnect: Option<Nanos>,
}

impl SessionSpec {
    /// The configuration it gives, or the first wrong field: (field, why).
    pub fn config(&self) -> Result<SessionConfig, (&'static str, String)> {
        let d = SessionConfig::default();
        let c = SessionConfig {
            rate_bps: self.rate.unwrap_or(d.rate_bps),
            latency: self.latency.unwrap_or(d.latency),
            loss: self.loss.as_ref().map_or(d.loss, |l| *l.get_ref()),
            rto: self.rto.unwrap_or(d.rto),
            rto_max: self.rto_max.unwrap_or(d.rto_max),
            send_buffer: self.send_buffer.unwrap_or(d.send_buffer),
            reset_after: self.reset_after.unwrap_or(d.reset_after),
            reconnect: self.reconnect.unwrap_or(d.reconnect),
            ..d
        };
        c.check().map(|()| c)
    }
}

impl SessionConfig {
    /// The first wrong value: (field, why).
    pub fn check(&self) -> Result<(), (&'static str, String)> {
        if self.rate_bps == 0 {
            return Err(("rate", "must be above zero".into()));
        }
        if !(0.0..1.0).contains(&self.loss) {
            return Err((
                "loss",
                format!(
                    "must be within 0..1 (a session that loses everything never delivers), got {}",
                    self.loss
                ),
            ));
        }
        if self.rto == 0 {
            return Err(("rto", "must be above zero".into()));
        }
        if self.rto_max < self.rto {
            return Err(("rto_max", "must be at least rto".into()));
        }
        if self.send_buffer <= FRAME_HEADER {
            return Err(("send_buffer", "must hold more than a frame header".into()));
        }
        if self.reset_after == 0 {
            return Err(("reset_after", "must be above zero".into()));
        }
        if self.mss == 0 {
            return Err(("mss", "must be above zero".into()));
        }
        Ok(())
    }
}

/// A `[[session]]` resolved against the scenario's node names.
#[derive(Debug, Clone)]
pub struct Declared<N> {
    /// Its name.
    pub name: String,
    /// Its id.
    pub id: SessionId,
    /// Its ends.
    pub ends: [N; 2],
    /// Its inputs.
    pub config: SessionConfig,
}

/// A scenario problem with a session: where, which field, what.
pub type SpecError = (std::ops::Range<usize>, String, String);

/// Resolves `specs` (in order) against `names`: the ends, the ids (default
/// its position from 1), the names (default `a-b`) and the inputs.
pub fn resolve<N: Copy>(
    specs: &[SessionSpec],
    names: &BTreeMap<String, N>,
) -> Result<Vec<Declared<N>>, SpecError> {
    let mut out: Vec<Declared<N>> = Vec::new();
    for (i, spec) in specs.iter().enumerate() {
        let end = |s: &Spanned<String>, field: &str| {
            names.get(s.get_ref()).copied().ok_or_else(|| {
                (
                    s.span(),
                    field.to_string(),
                    format!("no node named {:?}", s.get_ref()),
                )
            })
        };
        let ends = [end(&spec.a, "a")?, end(&spec.b, "b")?];
        let name = spec.name.as_ref().map_or_else(
            || format!("{}-{}", spec.a.get_ref(), spec.b.get_ref()),
            |n| n.get_ref().clone(),
        );
        if out.iter().any(|d| d.name == name) {
            let span = spec.name.as_ref().map_or(spec.a.span(), |n| n.span());
            return Err((
                span,
                "name".into(),
                format!("two sessions are named {name:?}: give one a name"),
            ));
        }
        let id = spec.id.as_ref().map_or(i as u32 + 1, |id| *id.get_ref());
        let config = spec.config().map_err(|(f, e)| {
            let span = match f {
                "loss" => spec.loss.as_ref().map_or(spec.a.span(), |l| l.span()),
                _ => spec.a.span(),
            };
            (span, f.to_string(), e)
        })?;
        out.push(Declared {
            name,
            id: SessionId(id),
            ends,
            config,
        });
    }
    Ok(out)
}

/// A session's index in the simulation (its declaration order).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub struct SessionIdx(pub u32);

/// Something a session asks the engine to do at a time: the only events a
/// session schedules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Timer {
    /// Segment `start` of direction `dir` reaches the receiver.
    Arrive { dir: usize, start: u64, gen: u64 },
    /// The retransmission timer of attempt `attempt` of segment `start`.
    Rto {
        dir: usize,
        start: u64,
        attempt: u32,
        gen: u64,
    },
    /// The receiver's cumulative acknowledgement `upto` reaches the sender.
    Ack { dir: usize, upto: u64, gen: u64 },
    /// A connection attempt.
    Connect { gen: u64 },
    /// The handshake completes.
    Established { gen: u64 },
    /// The cut that started with `epoch` has lasted `reset_after`.
    CutExpired { epoch: u64 },
}

/// What a session call asks of the engine.
#[derive(Debug)]
pub struct Effects<N> {
    /// Timers to schedule: (time, timer).
    pub schedule: Vec<(Nanos, Timer)>,
    /// Session events for nodes, in order.
    pub deliver: Vec<(N, SessionEvent)>,
}

impl<N> Default for Effects<N> {
    fn default() -> Self {
        Effects {
            schedule: Vec::new(),
            deliver: Vec::new(),
        }
    }
}

/// What one end of a session counted (as a sender, and as a receiver).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct EndStats {
    /// Messages this end sent that were accepted.
    pub messages_sent: u64,
    /// Their bytes (bodies).
    pub bytes_sent: u64,
    /// Messages this end received (delivered to it, in order).
    pub messages_received: u64,
    /// Messages this end sent that were refused (see [`Refusal`]).
    pub refused: u64,
    /// Segment transmissions, first sends and retries.
    pub segments: u64,
    /// Retransmissions.
    pub retransmits: u64,
    /// Segment transmissions lost to `loss`.
    pub segments_lost: u64,
    /// Segments and acknowledgements lost to a cut.
    pub cut_drops: u64,
    /// Messages this end had sent that a reset lost.
    pub messages_lost: u64,
    /// Times the session came up (at this end).
    pub ups: u64,
    /// Resets this end was told of (or would have been, had it been up).
    pub resets: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Handshake under way.
    Connecting,
    Up,
    /// Reset; a connection attempt is scheduled or waits for the cut to
    /// heal or an end to restart.
    Down,
}

#[derive(Debug, Clone, Copy)]
struct Segment {
    len: u64,
    attempts: u32,
}

/// One direction's stream: the sender's and the receiver's state.
#[derive(Debug, Default)]
struct Stream {
    /// Stream bytes written (frame headers and bodies).
    written: u64,
    /// Bytes acknowledged.
    acked: u64,
    /// Messages not yet delivered: (stream offset of their end, body).
    messages: VecDeque<(u64, Vec<u8>)>,
    /// Segments not yet acknowledged, by start offset.
    segments: BTreeMap<u64, Segment>,
    /// Receiver: bytes received in order.
    rcv_next: u64,
    /// Receiver: segments received beyond a gap, start → end.
    out_of_order: BTreeMap<u64, u64>,
}

/// One session. See the module documentation.
pub struct Session<N> {
    /// What the devices call it.
    pub id: SessionId,
    /// Its name, for faults and reports.
    pub name: String,
    /// Its ends: stream `d` carries what `ends[d]` sends.
    pub ends: [N; 2],
    /// Its inputs.
    pub config: SessionConfig,
    state: State,
    /// Bumped by every reset: events of an older generation are stale.
    gen: u64,
    /// Cuts in force.
    cuts: u32,
    /// Bumped when a cut starts and when the last one ends.
    cut_epoch: u64,
    /// Whether each end is running (not crashed).
    end_up: [bool; 2],
    streams: [Stream; 2],
    /// When each direction's wire is free.
    wire_free: [Nanos; 2],
    rng: rand_chacha::ChaCha8Rng,
    /// Per-end counters.
    pub stats: [EndStats; 2],
    /// Resets, whatever their cause.
    pub resets: u64,
}

impl<N: Copy + PartialEq> Session<N> {
    /// Session `id` between `ends`, drawing losses from `seed` (stream
    /// `index`, so sessions draw independently).
    pub fn new(
        id: SessionId,
        name: &str,
        ends: [N; 2],
        config: SessionConfig,
        seed: u64,
        index: u64,
    ) -> Self {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed ^ 0x0073_6573_7369_6f6e);
        rng.set_stream(index);
        Session {
            id,
            name: name.to_string(),
            ends,
            config,
            state: State::Down,
            gen: 0,
            cuts: 0,
            cut_epoch: 0,
            end_up: [true; 2],
            streams: Default::default(),
            wire_free: [0; 2],
            rng,
            stats: [EndStats::default(); 2],
            resets: 0,
        }
    }

    /// Which end `node` is, if either.
    pub fn end_of(&self, node: N) -> Option<usize> {
        self.ends.iter().position(|&e| e == node)
    }

    /// Whether the session is up.
    pub fn is_up(&self) -> bool {
        self.state == State::Up
    }

    /// Whether a cut is in force.
    pub fn is_cut(&self) -> bool {
        self.cuts > 0
    }

    /// Starts the first handshake at `now`.
    pub fn start(&mut self, now: Nanos, fx: &mut Effects<N>) {
        self.connect(now, fx);
    }

    /// End `end` sends `body` at `now`.
    pub fn send(&mut self, now: Nanos, end: usize, body: Vec<u8>, fx: &mut Effects<N>) {
        let len = body.len();
        let refusal = if self.state != State::Up {
            Some(Refusal::Down)
        } else if len > SESSION_MESSAGE_LIMIT {
            Some(Refusal::TooLarge)
        } else {
            let s = &self.streams[end];
            let unacked = s.written - s.acked;
            (unacked + FRAME_HEADER + len as u64 > self.config.send_buffer)
                .then_some(Refusal::BufferFull)
        };
        if let Some(reason) = refusal {
            self.stats[end].refused += 1;
            fx.deliver.push((
                self.ends[end],
                SessionEvent::Refused {
                    session: self.id,
                    len,
                    reason,
                },
            ));
            return;
        }
        self.stats[end].messages_sent += 1;
        self.stats[end].bytes_sent += len as u64;
        let s = &mut self.streams[end];
        let from = s.written;
        s.written += FRAME_HEADER + len as u64;
        s.messages.push_back((s.written, body));
        let (to, mss) = (s.written, self.config.mss);
        let mut start = from;
        while start < to {
            let len = mss.min(to - start);
            self.streams[end]
                .segments
                .insert(start, Segment { len, attempts: 0 });
            self.transmit(now, end, start, len, 0, fx);
            start += len;
        }
    }

    /// Puts one transmission of a segment on the wire.
    fn transmit(
        &mut self,
        now: Nanos,
        dir: usize,
        start: u64,
        len: u64,
        attempt: u32,
        fx: &mut Effects<N>,
    ) {
        let c = &self.config;
        let begin = now.max(self.wire_free[dir]);
        let done =
            begin + inca_switch::control::serialisation((len + c.overhead) as usize, c.rate_bps);
        self.wire_free[dir] = done;
        let st = &mut self.stats[dir];
        st.segments += 1;
        if attempt > 0 {
            st.retransmits += 1;
        }
        let gen = self.gen;
        if c.loss > 0.0 && self.rng.gen_bool(c.loss) {
            st.segments_lost += 1;
        } else {
            fx.schedule
                .push((done + c.latency, Timer::Arrive { dir, start, gen }));
        }
        let backoff = c.rto.saturating_mul(1u64 << attempt.min(40)).min(c.rto_max);
        fx.schedule.push((
            done + backoff,
            Timer::Rto {
                dir,
                start,
                attempt,
                gen,
            },
        ));
    }

    /// A timer this session scheduled is due.
    pub fn on_timer(&mut self, now: Nanos, timer: Timer, fx: &mut Effects<N>) {
        match timer {
            Timer::Arrive { dir, start, gen } if gen == self.gen => {
                self.arrive(now, dir, start, fx)
            }
            Timer::Rto {
                dir,
                start,
                attempt,
                gen,
            } if gen == self.gen => {
                let Some(seg) = self.streams[dir].segments.get_mut(&start) else {
                    return; // acknowledged
                };
                if seg.attempts != attempt {
                    return;
                }
                seg.attempts += 1;
                let len = seg.len;
                self.transmit(now, dir, start, len, attempt + 1, fx);
            }
            Timer::Ack { dir, upto, gen } if gen == self.gen => {
                if self.cuts > 0 {
                    self.stats[1 - dir].cut_drops += 1;
                    return;
                }
                let s = &mut self.streams[dir];
                s.acked = s.acked.max(upto);
                let acked = s.acked;
                s.segments.retain(|&start, seg| start + seg.len > acked);
            }
            Timer::Connect { gen } if gen == self.gen => self.connect(now, fx),
            Timer::Established { gen } if gen == self.gen => {
                if self.state != State::Connecting {
                    return;
                }
                if self.cuts > 0 || !self.end_up.iter().all(|&u| u) {
                    // The handshake did not get through: try again.
                    self.state = State::Down;
                    fx.schedule.push((
                        now + self.config.reconnect,
                        Timer::Connect { gen: self.gen },
                    ));
                    return;
                }
                self.state = State::Up;
                for end in 0..2 {
                    self.stats[end].ups += 1;
                    fx.deliver
                        .push((self.ends[end], SessionEvent::Up { session: self.id }));
                }
            }
            Timer::CutExpired { epoch } if epoch == self.cut_epoch && self.cuts > 0 => {
                self.reset(now, fx);
            }
            _ => {} // stale
        }
    }

    /// A segment reaches the receiver of direction `dir`.
    fn arrive(&mut self, now: Nanos, dir: usize, start: u64, fx: &mut Effects<N>) {
        if self.cuts > 0 {
            self.stats[dir].cut_drops += 1;
            return;
        }
        let s = &mut self.streams[dir];
        // The segment's length: it is unacknowledged, so the sender still
        // has it (an acknowledged one is a duplicate, re-acknowledged).
        if let Some(seg) = s.segments.get(&start) {
            let end = start + seg.len;
            if start <= s.rcv_next {
                s.rcv_next = s.rcv_next.max(end);
                // Close the gaps the new bytes fill.
                while let Some((&b, &e)) = s.out_of_order.first_key_value() {
                    if b > s.rcv_next {
                        break;
                    }
                    s.rcv_next = s.rcv_next.max(e);
                    s.out_of_order.pop_first();
                }
            } else {
                s.out_of_order.insert(start, end);
            }
        }
        let receiver = self.ends[1 - dir];
        while s
            .messages
            .front()
            .is_some_and(|(end, _)| *end <= s.rcv_next)
        {
            let Some((_, body)) = s.messages.pop_front() else {
                break;
            };
            self.stats[1 - dir].messages_received += 1;
            fx.deliver.push((
                receiver,
                SessionEvent::Message {
                    session: self.id,
                    body,
                },
            ));
        }
        let upto = s.rcv_next;
        fx.schedule.push((
            now + self.config.latency,
            Timer::Ack {
                dir,
                upto,
                gen: self.gen,
            },
        ));
    }

    /// Starts a handshake, or waits if it cannot get through (a cut, an end
    /// crashed): a heal or a restart tries again.
    fn connect(&mut self, now: Nanos, fx: &mut Effects<N>) {
        if self.state != State::Down {
            return;
        }
        if self.cuts > 0 || !self.end_up.iter().all(|&u| u) {
            return;
        }
        self.state = State::Connecting;
        fx.schedule.push((
            now + 2 * self.config.latency,
            Timer::Established { gen: self.gen },
        ));
    }

    /// Resets the session: both running ends hear it (with how many of
    /// their messages were lost), everything in flight is forgotten, and a
    /// connection attempt follows `reconnect` later.
    pub fn reset(&mut self, now: Nanos, fx: &mut Effects<N>) {
        let was_up = self.state == State::Up;
        self.resets += 1;
        for end in 0..2 {
            let lost = self.streams[end].messages.len() as u64;
            self.stats[end].messages_lost += lost;
            if was_up {
                self.stats[end].resets += 1;
                if self.end_up[end] {
                    fx.deliver.push((
                        self.ends[end],
                        SessionEvent::Reset {
                            session: self.id,
                            lost,
                        },
                    ));
                }
            }
        }
        self.gen += 1;
        self.streams = Default::default();
        self.state = State::Down;
        fx.schedule.push((
            now + self.config.reconnect,
            Timer::Connect { gen: self.gen },
        ));
    }

    /// A cut starts (faults compose: the session is cut while any is in
    /// force).
    pub fn cut(&mut self, now: Nanos, fx: &mut Effects<N>) {
        self.cuts = self.cuts.saturating_add(1);
        if self.cuts == 1 {
            self.cut_epoch += 1;
            fx.schedule.push((
                now + self.config.reset_after,
                Timer::CutExpired {
                    epoch: self.cut_epoch,
                },
            ));
        }
    }

    /// A cut ends. Segments lost meanwhile come back with their
    /// retransmission timers; a reset session reconnects.
    pub fn heal(&mut self, now: Nanos, fx: &mut Effects<N>) {
        if self.cuts == 0 {
            return;
        }
        self.cuts -= 1;
        if self.cuts == 0 {
            self.cut_epoch += 1;
            self.connect(now, fx);
        }
    }

    /// End `end` crashed (`up == false`) or restarted. A crash resets the
    /// session (the peer's stack sees the connection drop); a restart lets
    /// it reconnect.
    pub fn end_state(&mut self, now: Nanos, end: usize, up: bool, fx: &mut Effects<N>) {
        self.end_up[end] = up;
        if up {
            self.connect(now, fx);
        } else if self.state != State::Down {
            self.reset(now, fx);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs a session alone (no engine): timers in time order.
    fn run(
        s: &mut Session<u8>,
        mut fx: Effects<u8>,
        until: Nanos,
    ) -> Vec<(Nanos, u8, SessionEvent)> {
        let mut agenda: Vec<(Nanos, u64, Timer)> = Vec::new();
        let mut seq = 0;
        let mut got = Vec::new();
        let mut now = 0;
        loop {
            for (at, t) in fx.schedule.drain(..) {
                seq += 1;
                agenda.push((at, seq, t));
            }
            for (n, e) in fx.deliver.drain(..) {
                got.push((now, n, e));
            }
            agenda.sort_by_key(|&(at, seq, _)| std::cmp::Reverse((at, seq)));
            match agenda.pop() {
                Some((at, _, t)) if at <= until => {
                    now = at;
                    s.on_timer(now, t, &mut fx);
                }
                _ => return got,
            }
        }
    }

    #[test]
    fn a_message_takes_the_handshake_serialisation_and_latency() {
        let mut s = Session::new(SessionId(1), "s", [0u8, 1], SessionConfig::default(), 1, 0);
        let mut fx = Effects::default();
        s.start(0, &mut fx);
        let got = run(&mut s, fx, SECONDS);
        // Up at both ends after one round trip (2 × 20 µs).
        assert_eq!(got.len(), 2);
        assert!(got
            .iter()
            .all(|(t, _, e)| *t == 40_000 && matches!(e, SessionEvent::Up { .. })));
        let mut fx = Effects::default();
        s.send(40_000, 0, vec![7; 100], &mut fx);
        let got = run(&mut s, fx, SECONDS);
        // (100 + 4 + 90) bytes at 1 Gbps = 1552 ns, then 20 µs.
        assert_eq!(
            got,
            vec![(
                40_000 + 1552 + 20_000,
                1,
                SessionEvent::Message {
                    session: SessionId(1),
                    body: vec![7; 100]
                }
            )]
        );
    }
}
