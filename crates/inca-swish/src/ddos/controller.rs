//! The baselines' controller (specs/swish.md §7): a sans-IO device that
//! learns suspicious sources from both switches, sums their estimates and,
//! once the sum reaches 1,000, blocks the source on both switches.
//!
//! - **Pull:** every `t_pull` (100 ms, [our choice] in the spec) it reads
//!   each switch's ring head and the ring entries added since its last
//!   read, one switch after the other.
//! - **Push:** digests arrive as frames on its port into a receive buffer
//!   of `rx_buffer` bytes (25 MB, model input; a digest that does not fit
//!   is dropped and counted); its CPU serves them one at a time,
//!   `cpu_per_digest` (20 µs, [our choice] in the spec) each.
//!
//! RPCs to the switches ([`super::rpc`]) go over the management sessions
//! strictly one at a time, reads and block writes alike (§5.6: serial
//! across switches); the switch charges each its control-plane cost.
//! [our choice] A digest's receive-buffer charge is its frame length.

use std::any::Any;
use std::collections::{BTreeMap, BTreeSet, VecDeque};

use inca_sim::engine::Node;
use inca_sim::metrics::NodeReport;
use inca_switch::device::{Device, DeviceRng, Input, Nanos, Output, SessionEvent, SessionId};
use inca_wire::swish::ddos::{DigestRepr, DIGEST_PORT};

use super::local::{Report, RING};
use super::rpc::{Reply, Request};
use crate::detector;

/// T_pull (spec §7, [our choice] there).
pub const T_PULL: Nanos = 100_000_000;
/// The controller's socket receive buffer (spec §7, model input).
pub const RX_BUFFER: u64 = 25_000_000;
/// CPU time per digest (spec §7, [our choice] there).
pub const CPU_PER_DIGEST: Nanos = 20_000;
/// Sources the controller tracks at most (more are counted, not kept).
pub const TRACK_MAX: usize = 1 << 20;
/// RPCs queued at most (more are counted, not queued).
pub const QUEUE_MAX: usize = 1 << 20;

const TOKEN_PULL: u64 = 1;
const TOKEN_CPU: u64 = 2;

/// The controller's configuration.
#[derive(Debug, Clone)]
pub struct ControllerConfig {
    /// Pull or push.
    pub report: Report,
    /// The session to each switch, in switch order.
    pub sessions: Vec<SessionId>,
    /// Poll period (pull).
    pub t_pull: Nanos,
    /// First poll.
    pub first_poll: Nanos,
    /// Receive buffer (push).
    pub rx_buffer: u64,
    /// CPU per digest (push).
    pub cpu_per_digest: Nanos,
}

impl ControllerConfig {
    /// The spec's values for `report` with `sessions`.
    pub fn new(report: Report, sessions: Vec<SessionId>) -> Self {
        ControllerConfig {
            report,
            sessions,
            t_pull: T_PULL,
            first_poll: T_PULL,
            rx_buffer: RX_BUFFER,
            cpu_per_digest: CPU_PER_DIGEST,
        }
    }
}

/// What the controller counted.
#[derive(Debug, Clone, Default)]
pub struct ControllerCounters {
    /// Digests received into the buffer.
    pub digests: u64,
    /// Digests dropped: buffer full.
    pub digests_dropped: u64,
    /// Frames that were not digests.
    pub malformed: u64,
    /// Ring entries read.
    pub entries_read: u64,
    /// Ring entries overwritten before they were read.
    pub ring_lost: u64,
    /// Polls started.
    pub polls: u64,
    /// Polls skipped because the previous one was still running.
    pub polls_skipped: u64,
    /// Sources blocked (both switches written).
    pub blocked: u64,
    /// RPCs sent.
    pub rpcs: u64,
    /// Answers that matched nothing or did not parse.
    pub stray: u64,
    /// Sources or RPCs not kept (over the bounds).
    pub overflow: u64,
}

#[derive(Debug, Clone, Copy)]
enum Pending {
    Head(usize),
    Ring(usize),
    Block(usize, u32),
}

/// The controller.
#[derive(Debug, Clone)]
pub struct DdosController {
    cfg: ControllerConfig,
    up: Vec<bool>,
    /// Per switch: ring entries read so far (the next to read).
    read_to: Vec<u32>,
    est: BTreeMap<u32, Vec<u32>>,
    blocking: BTreeSet<u32>,
    /// When each blocked source's last entry went in.
    pub blocked_at: BTreeMap<u32, Nanos>,
    queue: VecDeque<(usize, Request, Pending)>,
    in_flight: Option<(u32, Pending)>,
    next_tag: u32,
    polling: bool,
    rx: VecDeque<(u64, DigestRepr)>,
    rx_bytes: u64,
    cpu_busy: bool,
    /// Counters.
    pub counters: ControllerCounters,
}

impl DdosController {
    /// A controller.
    pub fn new(cfg: ControllerConfig) -> Self {
        let n = cfg.sessions.len();
        DdosController {
            cfg,
            up: vec![false; n],
            read_to: vec![0; n],
            est: BTreeMap::new(),
            blocking: BTreeSet::new(),
            blocked_at: BTreeMap::new(),
            queue: VecDeque::new(),
            in_flight: None,
            next_tag: 1,
            polling: false,
            rx: VecDeque::new(),
            rx_bytes: 0,
            cpu_busy: false,
            counters: ControllerCounters::default(),
        }
    }

    fn enqueue(&mut self, sw: usize, req: Request, p: Pending) {
        if self.queue.len() >= QUEUE_MAX {
            self.counters.overflow += 1;
            return;
        }
        self.queue.push_back((sw, req, p));
    }

    /// Sends the next RPC if none is in flight and its session is up.
    fn pump(&mut self, now: Nanos, out: &mut Vec<Output>) {
        if self.in_flight.is_some() {
            return;
        }
        let Some(&(sw, _, _)) = self.queue.front() else {
            return;
        };
        if !self.up.get(sw).copied().unwrap_or(false) {
            return;
        }
        let Some((sw, req, p)) = self.queue.pop_front() else {
            return;
        };
        let tag = self.next_tag;
        self.next_tag = self.next_tag.wrapping_add(1);
        let req = match req {
            Request::ReadHead { .. } => Request::ReadHead { tag },
            Request::ReadRing { first, count, .. } => Request::ReadRing { tag, first, count },
            Request::Block { src, .. } => Request::Block { tag, src },
        };
        self.in_flight = Some((tag, p));
        self.counters.rpcs += 1;
        out.push(Output::Session {
            at: now,
            session: self.cfg.sessions[sw],
            body: req.encode(),
        });
    }

    /// A report of `est` for `src` from switch `sw`: block once the
    /// switches' estimates sum to the threshold.
    fn learn(&mut self, now: Nanos, sw: usize, src: u32, est: u32) {
        let n = self.cfg.sessions.len();
        if !self.est.contains_key(&src) && self.est.len() >= TRACK_MAX {
            self.counters.overflow += 1;
            return;
        }
        let e = self.est.entry(src).or_insert_with(|| vec![0; n]);
        if let Some(x) = e.get_mut(sw) {
            *x = (*x).max(est);
        }
        let sum: u64 = e.iter().map(|&x| u64::from(x)).sum();
        if sum >= u64::from(detector::BLOCK_EST) && self.blocking.insert(src) {
            let _ = now;
            for k in 0..n {
                self.enqueue(k, Request::Block { tag: 0, src }, Pending::Block(k, src));
            }
        }
    }

    fn poll(&mut self) {
        if self.polling {
            self.counters.polls_skipped += 1;
            return;
        }
        self.polling = true;
        self.counters.polls += 1;
        self.enqueue(0, Request::ReadHead { tag: 0 }, Pending::Head(0));
    }

    fn answer(&mut self, now: Nanos, body: &[u8]) {
        let Some(r) = Reply::decode(body) else {
            self.counters.stray += 1;
            return;
        };
        let Some((tag, p)) = self.in_flight else {
            self.counters.stray += 1;
            return;
        };
        if tag != r.tag {
            self.counters.stray += 1;
            return;
        }
        self.in_flight = None;
        let n = self.cfg.sessions.len();
        match p {
            Pending::Head(sw) => {
                let head = r.values.first().copied().unwrap_or(0) as u32;
                let from = self.read_to[sw];
                let mut new = head.wrapping_sub(from);
                if u64::from(new) > RING {
                    self.counters.ring_lost += u64::from(new) - RING;
                    new = RING as u32;
                }
                if new > 0 {
                    let first = head.wrapping_sub(new);
                    // A read stays inside the ring: split at the wrap.
                    let at = (u64::from(first) % RING) as u32;
                    let part = new.min((RING - u64::from(at)) as u32);
                    self.enqueue(
                        sw,
                        Request::ReadRing {
                            tag: 0,
                            first: at,
                            count: part,
                        },
                        Pending::Ring(sw),
                    );
                    if part < new {
                        self.enqueue(
                            sw,
                            Request::ReadRing {
                                tag: 0,
                                first: 0,
                                count: new - part,
                            },
                            Pending::Ring(sw),
                        );
                    }
                }
                self.read_to[sw] = head;
                if sw + 1 < n {
                    self.enqueue(sw + 1, Request::ReadHead { tag: 0 }, Pending::Head(sw + 1));
                } else {
                    self.polling = false;
                }
            }
            Pending::Ring(sw) => {
                for v in r.values {
                    self.counters.entries_read += 1;
                    let (src, est) = (v as u32, (v >> 32) as u32);
                    self.learn(now, sw, src, est);
                }
            }
            Pending::Block(sw, src) => {
                if sw + 1 == n {
                    self.counters.blocked += 1;
                    self.blocked_at.insert(src, now);
                }
            }
        }
    }

    fn serve(&mut self, now: Nanos, out: &mut Vec<Output>) {
        if self.cpu_busy || self.rx.is_empty() {
            return;
        }
        self.cpu_busy = true;
        out.push(Output::Timer {
            at: now + self.cfg.cpu_per_digest,
            token: TOKEN_CPU,
        });
    }
}

impl Device for DdosController {
    fn start(&mut self, now: Nanos, _rng: &mut DeviceRng, out: &mut Vec<Output>) {
        if self.cfg.report == Report::Pull {
            out.push(Output::Timer {
                at: now.max(self.cfg.first_poll),
                token: TOKEN_PULL,
            });
        }
    }

    fn handle(&mut self, now: Nanos, input: Input, _rng: &mut DeviceRng, out: &mut Vec<Output>) {
        match input {
            Input::Frame { frame, .. } => {
                let d = inca_wire::parse_udp_frame(&frame)
                    .ok()
                    .filter(|u| u.dst_port == DIGEST_PORT)
                    .and_then(|u| DigestRepr::parse(u.payload).ok());
                match d {
                    Some(d) => {
                        let len = frame.len() as u64;
                        if self.rx_bytes + len > self.cfg.rx_buffer {
                            self.counters.digests_dropped += 1;
                        } else {
                            self.counters.digests += 1;
                            self.rx_bytes += len;
                            self.rx.push_back((len, d));
                            self.serve(now, out);
                        }
                    }
                    None => self.counters.malformed += 1,
                }
            }
            Input::Timer { token, .. } => {
                if token == TOKEN_PULL {
                    self.poll();
                    out.push(Output::Timer {
                        at: now + self.cfg.t_pull,
                        token: TOKEN_PULL,
                    });
                } else if token == TOKEN_CPU {
                    self.cpu_busy = false;
                    if let Some((len, d)) = self.rx.pop_front() {
                        self.rx_bytes -= len;
                        let sw = usize::from(d.rid.wrapping_sub(1));
                        if sw < self.cfg.sessions.len() {
                            self.learn(now, sw, d.src_ip, d.local_est);
                        } else {
                            self.counters.malformed += 1;
                        }
                    }
                    self.serve(now, out);
                }
            }
            Input::Session(ev) => match ev {
                SessionEvent::Up { session } => {
                    if let Some(k) = self.cfg.sessions.iter().position(|s| *s == session) {
                        self.up[k] = true;
                    }
                }
                SessionEvent::Message { body, .. } => self.answer(now, &body),
                SessionEvent::Reset { session, .. } => {
                    if let Some(k) = self.cfg.sessions.iter().position(|s| *s == session) {
                        self.up[k] = false;
                    }
                    // What was in flight is lost; the poll starts over.
                    self.in_flight = None;
                    self.polling = false;
                }
                _ => {}
            },
            Input::Control(_) | Input::LinkState { .. } => {}
        }
        self.pump(now, out);
    }

    fn restart(&mut self, now: Nanos, rng: &mut DeviceRng, out: &mut Vec<Output>) {
        // A crash loses everything the controller knew.
        *self = DdosController::new(self.cfg.clone());
        self.start(now, rng, out);
    }
}

impl Node for DdosController {
    fn kind(&self) -> &'static str {
        "controller"
    }

    fn report(&self, _now: Nanos) -> NodeReport {
        let c = &self.counters;
        let mut r = NodeReport::default();
        for (k, v) in [
            ("digests", c.digests),
            ("digests_dropped", c.digests_dropped),
            ("malformed", c.malformed),
            ("entries_read", c.entries_read),
            ("ring_lost", c.ring_lost),
            ("polls", c.polls),
            ("polls_skipped", c.polls_skipped),
            ("blocked", c.blocked),
            ("rpcs", c.rpcs),
            ("stray", c.stray),
            ("overflow", c.overflow),
        ] {
            r.counters.insert(k.into(), v);
        }
        r
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
