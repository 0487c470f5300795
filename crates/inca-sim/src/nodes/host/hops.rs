//! Per-hop latency: what a receiving host makes of a probe's telemetry
//! stack ([`inca_wire::telemetry`]).
//!
//! The probe's transmit time, the stamps in order and the arrival time form
//! a chain; each consecutive pair is one hop with its own histogram: the
//! sender to the first device's ingress, each device's residence (ingress
//! to egress), each link (one device's egress to the next one's ingress,
//! queueing and serialisation included) and the last egress to this host.
//! The hops of one probe therefore add up to its one-way latency. Hops are
//! named `hop:<from>><to>` with ends `src`, `dst` and `<device>.in|out`
//! (device names when the scenario gave them, else `n<index>`). At most
//! [`MAX_HOP_HISTOGRAMS`] distinct hops are kept; samples of others are
//! counted as `telemetry.untracked`.

use std::collections::BTreeMap;
use std::sync::Arc;

use inca_switch::device::Nanos;
use inca_wire::telemetry::{StampPoint, TelemetryStack};

use crate::metrics::{LatencyHistogram, NodeReport};

/// Most distinct hops one host keeps a histogram for.
pub const MAX_HOP_HISTOGRAMS: usize = 256;

/// One end of a hop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum End {
    Sender,
    Device(u32, StampPoint),
    Receiver,
}

/// The per-hop histograms of one host.
#[derive(Debug, Default)]
pub(crate) struct Hops {
    /// Node names by index, for the hop names.
    names: Option<Arc<[String]>>,
    hists: BTreeMap<(End, End), LatencyHistogram>,
    /// Probes that carried a stack.
    probes: u64,
    /// Of those, probes whose stack had missed stamps (it was full).
    overflowed: u64,
    /// Hop samples not kept: more than [`MAX_HOP_HISTOGRAMS`] hops.
    untracked: u64,
    /// Hops whose later end had an earlier time (not in one simulation's
    /// global clock; counted, not recorded).
    backwards: u64,
}

impl Hops {
    pub(crate) fn set_names(&mut self, names: Arc<[String]>) {
        self.names = Some(names);
    }

    /// Records the hops of a probe sent at `tx_time`, received `now`, with
    /// `stack`.
    pub(crate) fn record(&mut self, tx_time: Nanos, now: Nanos, stack: &TelemetryStack<&[u8]>) {
        self.probes += 1;
        if stack.overflow() > 0 {
            self.overflowed += 1;
        }
        let mut prev = (End::Sender, tx_time);
        let chain = stack
            .stamps()
            .map(|s| (End::Device(s.device, s.point), s.time))
            .chain(std::iter::once((End::Receiver, now)));
        for next in chain {
            match next.1.checked_sub(prev.1) {
                None => self.backwards += 1,
                Some(d) => {
                    let full = self.hists.len() >= MAX_HOP_HISTOGRAMS;
                    match self.hists.get_mut(&(prev.0, next.0)) {
                        Some(h) => h.record(d),
                        None if full => self.untracked += 1,
                        None => {
                            let mut h = LatencyHistogram::default();
                            h.record(d);
                            self.hists.insert((prev.0, next.0), h);
                        }
                    }
                }
            }
            prev = next;
        }
    }

    fn name(&self, e: End) -> String {
        match e {
            End::Sender => "src".into(),
            End::Receiver => "dst".into(),
            End::Device(d, p) => {
                let node = self
                    .names
                    .as_ref()
                    .and_then(|n| n.get(d as usize))
                    .cloned()
                    .unwrap_or_else(|| format!("n{d}"));
                format!("{node}.{}", p.as_str())
            }
        }
    }

    /// The hop histograms under their names, as `(name, histogram)`.
    pub(crate) fn named(&self) -> impl Iterator<Item = (String, &LatencyHistogram)> + '_ {
        self.hists
            .iter()
            .map(|(&(a, b), h)| (format!("hop:{}>{}", self.name(a), self.name(b)), h))
    }

    /// Adds the histograms and counters to a host's report (nothing when
    /// no probe carried a stack).
    pub(crate) fn report(&self, r: &mut NodeReport) {
        if self.probes == 0 {
            return;
        }
        for (name, h) in self.named() {
            r.histograms.insert(name, h.clone());
        }
        for (k, v) in [
            ("telemetry.probes", self.probes),
            ("telemetry.overflowed", self.overflowed),
            ("telemetry.untracked", self.untracked),
            ("telemetry.backwards", self.backwards),
        ] {
            r.counters.insert(k.into(), v);
        }
    }
}
