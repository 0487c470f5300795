//! `request`: a request/response client measuring round-trip times (the
//! `echo` workload is its server). Requests are probes numbered in sending
//! order; the outstanding window is bounded and times out oldest first.

use std::collections::VecDeque;
use std::net::SocketAddrV4;

use inca_switch::device::{DeviceRng, Nanos, MILLIS};

use super::{
    probe_frame, report_missed, report_tx, Arrival, BuildContext, Claim, HostInfo, StepContext,
    Workload,
};
use crate::metrics::NodeReport;
use crate::nodes::host::dist::{resolve_schedule, Clock, Schedule};
use crate::nodes::host::schema::{
    invalid, parse_time_field, HostError, RequestConfig, DEFAULT_MAX_OUTSTANDING, MAX_OUTSTANDING,
};
use crate::nodes::host::WorkloadStats;

/// A `request` workload.
#[derive(Debug)]
pub(crate) struct RequestWorkload {
    server: SocketAddrV4,
    src_port: u16,
    sched: Schedule,
    timeout: Nanos,
    max_outstanding: usize,
    life: Option<Life>,
}

/// A client's volatile state (one life).
#[derive(Debug)]
struct Life {
    clock: Clock,
    outstanding: Outstanding,
}

/// Builds a `request` workload.
pub(crate) fn build_request(
    c: &RequestConfig,
    cx: &mut BuildContext<'_>,
) -> Result<Box<dyn Workload>, HostError> {
    let (field, link_rate, default_port) = (cx.field.as_str(), cx.link_rate, cx.default_port());
    let notes: &mut Vec<String> = cx.notes;
    let server = c
        .server
        .ok_or_else(|| invalid(&format!("{field}.server"), "missing (ip:port)"))?;
    let sched = resolve_schedule(
        field, &c.rate, c.pps, &c.size, &c.start, &c.stop, c.count, link_rate, notes,
    )?;
    let timeout = match &c.timeout {
        Some(q) => parse_time_field(q, &format!("{field}.timeout"))?,
        None => 10 * MILLIS,
    };
    if timeout == 0 {
        return Err(invalid(&format!("{field}.timeout"), "must be > 0"));
    }
    let max_outstanding = c.max_outstanding.unwrap_or(DEFAULT_MAX_OUTSTANDING);
    if max_outstanding == 0 || max_outstanding > MAX_OUTSTANDING {
        return Err(invalid(
            &format!("{field}.max_outstanding"),
            format!("{max_outstanding} is outside 1..={MAX_OUTSTANDING}"),
        ));
    }
    Ok(Box::new(RequestWorkload {
        server,
        src_port: c.src_port.unwrap_or(default_port),
        sched,
        timeout,
        max_outstanding,
        life: None,
    }))
}

impl Workload for RequestWorkload {
    fn begin(&mut self, _host: &HostInfo, anchor: Nanos, _rng: &mut DeviceRng) {
        self.life = Some(Life {
            clock: Clock::at(self.sched.start.max(anchor)),
            outstanding: Outstanding::default(),
        });
    }

    fn end(&mut self) {
        self.life = None;
    }

    fn next_at(&self) -> Option<Nanos> {
        self.life.as_ref()?.clock.next(&self.sched)
    }

    fn step(&mut self, cx: &mut StepContext<'_>) -> Option<Vec<u8>> {
        let Life { clock, outstanding } = self.life.as_mut()?;
        let size = self.sched.size.sample(cx.rng);
        clock.advance(size);
        if !cx.send {
            return None;
        }
        let probe = inca_wire::Probe {
            flow: cx.index as u32,
            seq: outstanding.next_seq(),
            tx_time: cx.now,
        };
        cx.stats.evicted += outstanding.push(cx.now, self.max_outstanding);
        let ep = cx.host.endpoints(cx.host.ip, *self.server.ip());
        probe_frame(
            &ep,
            self.src_port,
            self.server.port(),
            size,
            probe,
            cx.scratch,
        )
    }

    fn deadline(&self) -> Option<Nanos> {
        self.life.as_ref()?.outstanding.deadline(self.timeout)
    }

    fn expire(&mut self, now: Nanos, stats: &mut WorkloadStats) {
        if let Some(life) = &mut self.life {
            stats.lost += life.outstanding.expire(now, self.timeout);
        }
    }

    fn measures_rtt(&self) -> bool {
        true
    }

    fn claim(&mut self, now: Nanos, d: &Arrival<'_>, stats: &mut WorkloadStats) -> Claim {
        let Some(probe) = d.probe else {
            return Claim::NotMine;
        };
        if d.dport != self.src_port || d.src != *self.server.ip() || d.sport != self.server.port() {
            return Claim::NotMine;
        }
        let Some(life) = &mut self.life else {
            // Before this life's first wake-up: nothing was sent yet.
            stats.unknown += 1;
            return Claim::Mine;
        };
        match life.outstanding.answer(probe.seq) {
            Answer::Matched(sent) => {
                let rtt = now.saturating_sub(sent);
                stats.responses += 1;
                stats.rtt.record(rtt);
                return Claim::Answered { rtt };
            }
            Answer::Duplicate => stats.duplicate += 1,
            Answer::Late => stats.late += 1,
            Answer::Unknown => stats.unknown += 1,
        }
        Claim::Mine
    }

    fn report(&self, name: &str, stats: &WorkloadStats, r: &mut NodeReport) {
        report_tx(name, stats, r);
        report_missed(name, stats, r);
        let mut c = |k: &str, v: u64| {
            r.counters.insert(format!("{name}.{k}"), v);
        };
        c("responses", stats.responses);
        c("lost", stats.lost);
        c("late", stats.late);
        c("duplicate", stats.duplicate);
        c("unknown", stats.unknown);
        c("evicted", stats.evicted);
        if let Some(life) = &self.life {
            c(
                "outstanding",
                life.outstanding
                    .slots
                    .iter()
                    .filter(|s| s.is_some())
                    .count() as u64,
            );
        }
    }
}

/// What became of a response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Answer {
    /// Matched the request sent at this time.
    Matched(Nanos),
    /// Its request had already been answered.
    Duplicate,
    /// Its request had already been given up (timed out or evicted), or it
    /// is a duplicate of an answer already forgotten.
    Late,
    /// No such request was ever sent.
    Unknown,
}

/// Requests waiting for a response: slot `k` is sequence number `base + k`,
/// `Some(sent at)` while unanswered. Requests are numbered in sending order,
/// so the front is always the oldest and the one to time out first.
#[derive(Debug, Default)]
pub(crate) struct Outstanding {
    base: u64,
    pub(crate) slots: VecDeque<Option<Nanos>>,
}

impl Outstanding {
    /// Records request `base + len` sent at `at`; returns how many waiting
    /// requests were given up to stay within `limit`.
    pub(crate) fn push(&mut self, at: Nanos, limit: usize) -> u64 {
        self.slots.push_back(Some(at));
        let mut evicted = 0;
        while self.slots.len() > limit {
            if let Some(Some(_)) = self.slots.pop_front() {
                evicted += 1;
            }
            self.base += 1;
        }
        self.prune();
        evicted
    }

    pub(crate) fn next_seq(&self) -> u64 {
        self.base + self.slots.len() as u64
    }

    pub(crate) fn prune(&mut self) {
        while let Some(None) = self.slots.front() {
            self.slots.pop_front();
            self.base += 1;
        }
    }

    pub(crate) fn answer(&mut self, seq: u64) -> Answer {
        if seq < self.base {
            return Answer::Late;
        }
        let Ok(i) = usize::try_from(seq - self.base) else {
            return Answer::Unknown;
        };
        let a = match self.slots.get_mut(i) {
            None => return Answer::Unknown,
            Some(slot) => match slot.take() {
                Some(t) => Answer::Matched(t),
                None => Answer::Duplicate,
            },
        };
        self.prune();
        a
    }

    /// Gives up requests older than `timeout`; returns how many.
    pub(crate) fn expire(&mut self, now: Nanos, timeout: Nanos) -> u64 {
        let mut lost = 0;
        while let Some(&Some(t)) = self.slots.front() {
            if t.saturating_add(timeout) > now {
                break;
            }
            self.slots.pop_front();
            self.base += 1;
            lost += 1;
            self.prune();
        }
        lost
    }

    pub(crate) fn deadline(&self, timeout: Nanos) -> Option<Nanos> {
        self.slots
            .front()
            .copied()
            .flatten()
            .map(|t| t.saturating_add(timeout))
    }
}
