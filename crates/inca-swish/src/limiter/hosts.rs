//! The traffic ends of the rate-limiter experiment (§8.2 E9): a source
//! that offers every user's packets to one switch at a rate that changes
//! by phase, and a sink that counts what each user got through, per
//! sample interval.

use std::any::Any;
use std::net::Ipv4Addr;

use inca_sim::engine::Node;
use inca_sim::metrics::{NodeReport, Series};
use inca_switch::device::{Device, DeviceRng, Input, Output};
use inca_switch::{Nanos, PortId};
use inca_wire::builder::{build_udp_frame, Endpoints};

/// UDP destination port of the users' packets (discard, RFC 863) [our
/// choice].
pub const DATA_PORT: u16 = 9;

/// Offers one packet of every user every `1 / rate` from `start`, where
/// the rate per user is that of the current phase; the frames leave on
/// port 0.
#[derive(Debug, Clone)]
pub struct UserSource {
    frames: Vec<Vec<u8>>,
    start: Nanos,
    /// (phase length, per-user packets per second of each phase).
    phase: Nanos,
    rates: Vec<u64>,
    next: Nanos,
    /// Sends so far in the current phase.
    n: u64,
    /// Packets sent.
    pub sent: u64,
}

impl UserSource {
    /// Users `first .. first + users` toward a switch at `dst`; phase k
    /// (of length `phase`, from `start`) offers `rates[k]` packets per
    /// second per user, nothing after the last.
    pub fn new(
        first: Ipv4Addr,
        users: u32,
        dst: Ipv4Addr,
        start: Nanos,
        phase: Nanos,
        rates: Vec<u64>,
    ) -> Result<Self, String> {
        let frames = (0..users)
            .map(|u| {
                let ip = Ipv4Addr::from(u32::from(first).wrapping_add(u));
                let ep = Endpoints::new([2, 0x4a, 0, 0, 0, 1], ip, [2, 0x4a, 0, 0, 0, 2], dst);
                build_udp_frame(&ep, 5000, DATA_PORT, &[0; 18], false).map_err(|e| e.to_string())
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(UserSource {
            frames,
            start,
            phase: phase.max(1),
            rates,
            next: start,
            n: 0,
            sent: 0,
        })
    }

    /// The phase holding `t`, if any.
    fn phase_at(&self, t: Nanos) -> Option<usize> {
        let k = (t.checked_sub(self.start)? / self.phase) as usize;
        (k < self.rates.len()).then_some(k)
    }

    /// The next send time after the `n`-th send (from 0) of the phase
    /// holding `t`: the (n+1)-th time of its rate from the phase start (no
    /// drift from a rounded gap), or the start of the next phase with
    /// traffic, or never.
    fn after(&self, t: Nanos, n: u64) -> Option<(Nanos, u64)> {
        let k = self.phase_at(t)?;
        let rate = self.rates[k];
        let begin = self.start + k as u64 * self.phase;
        let end = begin + self.phase;
        if let Some(gap) = (n + 1).saturating_mul(1_000_000_000).checked_div(rate) {
            if begin + gap < end {
                return Some((begin + gap, n + 1));
            }
        }
        (k + 1..self.rates.len())
            .find(|&j| self.rates[j] > 0)
            .map(|j| (self.start + j as u64 * self.phase, 0))
    }
}

impl Device for UserSource {
    fn start(&mut self, _now: Nanos, _rng: &mut DeviceRng, out: &mut Vec<Output>) {
        let first = (0..self.rates.len()).find(|&j| self.rates[j] > 0);
        if let Some(j) = first {
            self.next = self.start + j as u64 * self.phase;
            self.n = 0;
            out.push(Output::Timer {
                at: self.next,
                token: 0,
            });
        }
    }

    fn handle(&mut self, now: Nanos, input: Input, _rng: &mut DeviceRng, out: &mut Vec<Output>) {
        if !matches!(input, Input::Timer { .. }) || now < self.next {
            return;
        }
        for f in &self.frames {
            out.push(Output::Transmit {
                at: now,
                port: 0,
                frame: f.clone(),
            });
        }
        self.sent += self.frames.len() as u64;
        if let Some((at, n)) = self.after(now, self.n) {
            self.next = at;
            self.n = n;
            out.push(Output::Timer { at, token: 0 });
        }
    }

    fn restart(&mut self, now: Nanos, _rng: &mut DeviceRng, out: &mut Vec<Output>) {
        // Resume the schedule where it stands now.
        // Resume at the start of the next phase with traffic [our choice:
        // a crash is not part of E9; this keeps the schedule exact].
        let k = match self.phase_at(now) {
            Some(k) => k + 1,
            None if now < self.start => 0,
            None => self.rates.len(),
        };
        let at = (k..self.rates.len())
            .find(|&j| self.rates[j] > 0)
            .map(|j| (self.start + j as u64 * self.phase, 0));
        if let Some((at, n)) = at {
            self.next = at;
            self.n = n;
            out.push(Output::Timer { at, token: 0 });
        }
    }
}

impl Node for UserSource {
    fn kind(&self) -> &'static str {
        "host"
    }
    fn report(&self, _now: Nanos) -> NodeReport {
        let mut r = NodeReport::default();
        r.counters.insert("sent".into(), self.sent);
        r
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// Counts each user's received packets per `bin`.
#[derive(Debug, Clone)]
pub struct RateSink {
    first: Ipv4Addr,
    /// Per user: packets received per bin.
    pub per_user: Vec<Series>,
    /// Frames from no user.
    pub other: u64,
}

impl RateSink {
    /// A sink for users `first .. first + users`, bins of `bin`.
    pub fn new(first: Ipv4Addr, users: u32, bin: Nanos) -> Self {
        RateSink {
            first,
            per_user: (0..users).map(|_| Series::new(bin)).collect(),
            other: 0,
        }
    }
}

impl Device for RateSink {
    fn handle(&mut self, now: Nanos, input: Input, _rng: &mut DeviceRng, _out: &mut Vec<Output>) {
        let Input::Frame { frame, .. } = input else {
            return;
        };
        let user = inca_wire::parse_udp_frame(&frame)
            .ok()
            .map(|u| u32::from(u.src_ip).wrapping_sub(u32::from(self.first)) as usize);
        match user.and_then(|u| self.per_user.get_mut(u)) {
            Some(s) => s.add_at(now, 1),
            None => self.other += 1,
        }
    }

    fn restart(&mut self, _now: Nanos, _rng: &mut DeviceRng, _out: &mut Vec<Output>) {}
}

impl Node for RateSink {
    fn kind(&self) -> &'static str {
        "host"
    }
    fn report(&self, _now: Nanos) -> NodeReport {
        let mut r = NodeReport::default();
        let total: u64 = self.per_user.iter().flat_map(|s| s.values.iter()).sum();
        r.counters.insert("received".into(), total);
        r.counters.insert("other".into(), self.other);
        r
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// The port a switch receives users' traffic on, in the experiment.
pub const SOURCE_PORT: PortId = 10;
/// The port a switch sends admitted packets out of, to the sink.
pub const SINK_PORT: PortId = 11;
