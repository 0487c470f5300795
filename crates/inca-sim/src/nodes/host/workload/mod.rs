//! Workloads: what a host runs, behind one open trait.
//!
//! A [`Workload`] is a traffic source or responder on a host: it is built
//! once from its `[[host.workload]]` table, then lives through the host's
//! lives — [`Workload::begin`] at boot and after each restart (drawing from
//! the device RNG, in workload order), [`Workload::end`] when the host
//! crashes. The host owns the schedule (one agenda of every workload's
//! [`Workload::next_at`]), the receive path, the TCP stack and the
//! measurements; a workload answers the few questions those ask.
//!
//! Built-in kinds: `udp`, `new_flows`, `tuples` ([`udp`]), `pcap`,
//! `request`, `echo`, `tcp`, `tcp_sink`. Any other `kind` is looked up in a
//! [`WorkloadRegistry`] given to [`crate::nodes::host::Host::with_registry`]:
//! scenario loading passes its [`crate::scenario::SwitchFactory`], whose
//! [`crate::scenario::SwitchFactory::workload`] is where a system registers
//! its clients (a new system's client never means editing the host).

mod echo;
mod pcap;
mod request;
mod tcp;
mod udp;

use std::fmt;
use std::net::Ipv4Addr;

use inca_switch::device::{DeviceRng, Nanos};
use inca_wire::{build_udp_frame, Endpoints, MacAddr, Probe, PROBE_LEN};

use super::schema::{
    invalid, HostError, WorkloadConfig, BUILTIN_KINDS, DEFAULT_UDP_PORT_BASE, UDP_FRAME_HEADERS,
};
use super::WorkloadStats;
use crate::metrics::NodeReport;
use crate::tcp::{FlowId, TcpStack};
use crate::workload_control::WorkloadChange;

#[cfg(test)]
pub(crate) use request::{Answer, Outstanding};

/// What a workload knows of the host it runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostInfo {
    /// The host's address.
    pub ip: Ipv4Addr,
    /// The host's MAC.
    pub mac: MacAddr,
    /// The MAC at the other end of its link (every frame goes there).
    pub gateway_mac: MacAddr,
}

impl HostInfo {
    /// Endpoints of a frame from the host (`src` may be another address the
    /// host sends as) to `dst`.
    pub fn endpoints(&self, src: Ipv4Addr, dst: Ipv4Addr) -> Endpoints {
        Endpoints::new(self.mac, src, self.gateway_mac, dst)
    }
}

/// What building a workload needs: where it sits and what it may note.
#[derive(Debug)]
pub struct BuildContext<'a> {
    /// Its index among the host's workloads.
    pub index: usize,
    /// Its name (given, or kind + index).
    pub name: String,
    /// How errors name it: `workload[1] "bg" (udp)`; append `.field`.
    pub field: String,
    /// The host's address.
    pub host_ip: Ipv4Addr,
    /// The host's link rate, bits/s (what `rate = "line"` means).
    pub link_rate: u64,
    /// Notes for the host's report (sizes raised, files replayed).
    pub notes: &'a mut Vec<String>,
}

impl BuildContext<'_> {
    /// The source port a workload uses when none is configured.
    pub fn default_port(&self) -> u16 {
        DEFAULT_UDP_PORT_BASE.saturating_add(self.index as u16)
    }

    /// An error about its field `sub` (`""` for the workload itself).
    pub fn invalid(&self, sub: &str, reason: impl Into<String>) -> HostError {
        if sub.is_empty() {
            invalid(&self.field, reason)
        } else {
            invalid(&format!("{}.{sub}", self.field), reason)
        }
    }
}

/// What advancing a generator by one packet gets.
#[derive(Debug)]
pub struct StepContext<'a> {
    /// The host.
    pub host: &'a HostInfo,
    /// The workload's index (request clients put it in their probes).
    pub index: usize,
    /// Whether to build the packet (false: it is a late one beyond
    /// [`super::schema::MAX_LATE_PER_WAKE`], skipped and counted as missed;
    /// the generator still advances and draws as if it had sent it).
    pub send: bool,
    /// Now.
    pub now: Nanos,
    /// The device RNG.
    pub rng: &'a mut DeviceRng,
    /// A reusable payload buffer.
    pub scratch: &'a mut Vec<u8>,
    /// The workload's counters.
    pub stats: &'a mut WorkloadStats,
}

/// A datagram (or a generated TCP segment) that reached the host, as its
/// receive path read it.
#[derive(Debug, Clone, Copy)]
pub struct Arrival<'a> {
    /// IPv4 source.
    pub src: Ipv4Addr,
    /// IPv4 destination.
    pub dst: Ipv4Addr,
    /// Source port.
    pub sport: u16,
    /// Destination port.
    pub dport: u16,
    /// The payload.
    pub payload: &'a [u8],
    /// Its probe header, if it starts with one.
    pub probe: Option<Probe>,
}

/// What a workload made of a datagram offered by [`Workload::claim`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Claim {
    /// Not its traffic: the host goes on (latency, then replies).
    NotMine,
    /// Its traffic, counted by the workload; the host stops there.
    Mine,
    /// A response it matched, with its round-trip time (the host adds it
    /// to its RTT histogram); the host stops there.
    Answered {
        /// Round-trip time, ns.
        rtt: Nanos,
    },
}

/// A host's workload. Every method has a default that does nothing, so a
/// workload implements what it takes part in: generating (`begin`,
/// `next_at`, `step`), receiving (`claim`, `reply_udp`, `reply_tcp`),
/// timeouts (`deadline`, `expire`), TCP (`uses_tcp`, `open_tcp`), its report.
///
/// The host calls `step` exactly at `next_at` (or later, after a stall),
/// so a generator's timing and its RNG draws are its own: two runs with one
/// seed send the same packets at the same times.
pub trait Workload: fmt::Debug + Send {
    /// Starts a life at `anchor` (0 at boot, the restart time after a
    /// crash): sets up its volatile state, drawing from `rng` if it needs
    /// to. Nothing is due before `anchor`.
    fn begin(&mut self, host: &HostInfo, anchor: Nanos, rng: &mut DeviceRng) {
        let _ = (host, anchor, rng);
    }

    /// Forgets the current life (the host crashed).
    fn end(&mut self) {}

    /// Applies a change at `now` ([`super::control`]); false if this
    /// workload has no such change (the host counts it as ignored). The
    /// host asks [`Workload::next_at`] again afterwards.
    fn change(&mut self, now: Nanos, change: WorkloadChange) -> bool {
        let _ = (now, change);
        false
    }

    /// When it next sends, if it does.
    fn next_at(&self) -> Option<Nanos> {
        None
    }

    /// Advances by the packet due at [`Workload::next_at`]; returns the
    /// frame when `cx.send` (the host transmits and counts it).
    fn step(&mut self, cx: &mut StepContext<'_>) -> Option<Vec<u8>> {
        let _ = cx;
        None
    }

    /// The earliest time it must be woken for something other than sending
    /// (a request's timeout).
    fn deadline(&self) -> Option<Nanos> {
        None
    }

    /// Gives up what has waited too long at `now` (counted in `stats`).
    fn expire(&mut self, now: Nanos, stats: &mut WorkloadStats) {
        let _ = (now, stats);
    }

    /// Whether it measures round-trip times (the host reports an `rtt`
    /// histogram, and one per workload when several do).
    fn measures_rtt(&self) -> bool {
        false
    }

    /// Offered every UDP datagram that reaches the host, before anything
    /// else looks at it (request clients match responses here).
    fn claim(&mut self, now: Nanos, d: &Arrival<'_>, stats: &mut WorkloadStats) -> Claim {
        let _ = (now, d, stats);
        Claim::NotMine
    }

    /// A reply to a probe datagram nobody claimed (the first workload that
    /// answers sends it).
    fn reply_udp(&mut self, host: &HostInfo, now: Nanos, d: &Arrival<'_>) -> Option<Vec<u8>> {
        let _ = (host, now, d);
        None
    }

    /// A reply to a generated TCP segment carrying a probe (not the host's
    /// TCP stack's traffic).
    fn reply_tcp(&mut self, host: &HostInfo, now: Nanos, d: &Arrival<'_>) -> Option<Vec<u8>> {
        let _ = (host, now, d);
        None
    }

    /// Whether it needs the host's TCP stack.
    fn uses_tcp(&self) -> bool {
        false
    }

    /// Opens its connections in this life's TCP stack.
    fn open_tcp(&mut self, stack: &mut TcpStack, anchor: Nanos) -> Vec<FlowId> {
        let _ = (stack, anchor);
        Vec::new()
    }

    /// Adds its counters to the host's report under `name.` (default: a
    /// generator's `tx_packets`, `tx_bytes` and `missed`).
    fn report(&self, name: &str, stats: &WorkloadStats, r: &mut NodeReport) {
        report_tx(name, stats, r);
        report_missed(name, stats, r);
    }
}

/// Builds workloads of kinds the simulator does not know.
pub trait WorkloadRegistry {
    /// A workload of `kind` from its table (as written, without `kind`);
    /// `None` if this registry does not know the kind.
    fn workload(
        &self,
        kind: &str,
        table: &toml::Table,
        cx: &mut BuildContext<'_>,
    ) -> Option<Result<Box<dyn Workload>, HostError>>;
}

/// The registry that knows no kind beyond the built-in ones.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoRegistry;

impl WorkloadRegistry for NoRegistry {
    fn workload(
        &self,
        _kind: &str,
        _table: &toml::Table,
        _cx: &mut BuildContext<'_>,
    ) -> Option<Result<Box<dyn Workload>, HostError>> {
        None
    }
}

/// Builds one workload: a built-in kind, else whatever `registry` makes of
/// it.
pub(crate) fn build(
    config: &WorkloadConfig,
    cx: &mut BuildContext<'_>,
    registry: &dyn WorkloadRegistry,
) -> Result<Box<dyn Workload>, HostError> {
    match config {
        WorkloadConfig::Udp(c) => udp::build_udp(c, cx),
        WorkloadConfig::NewFlows(c) => udp::build_new_flows(c, cx),
        WorkloadConfig::Tuples(c) => udp::build_tuples(c, cx),
        WorkloadConfig::Pcap(c) => pcap::build_pcap(c, cx),
        WorkloadConfig::Request(c) => request::build_request(c, cx),
        WorkloadConfig::Echo(c) => Ok(echo::build_echo(c)),
        WorkloadConfig::Tcp(c) => tcp::build_tcp(c, cx),
        WorkloadConfig::TcpSink(c) => tcp::build_tcp_sink(c, cx),
        WorkloadConfig::Registered { kind, table } => {
            registry.workload(kind, table, cx).unwrap_or_else(|| {
                Err(cx.invalid(
                    "kind",
                    format!(
                        "unknown workload kind {kind:?} (built in: {}; no system here registers it)",
                        BUILTIN_KINDS.join(", ")
                    ),
                ))
            })
        }
    }
}

/// Reports `name.tx_packets` and `name.tx_bytes`.
pub fn report_tx(name: &str, stats: &WorkloadStats, r: &mut NodeReport) {
    r.counters
        .insert(format!("{name}.tx_packets"), stats.tx_packets);
    r.counters
        .insert(format!("{name}.tx_bytes"), stats.tx_bytes);
}

/// Reports `name.missed`.
pub fn report_missed(name: &str, stats: &WorkloadStats, r: &mut NodeReport) {
    r.counters.insert(format!("{name}.missed"), stats.missed);
}

/// A UDP frame of `size` bytes whose payload starts with `probe` and is
/// zero-padded.
pub fn probe_frame(
    ep: &Endpoints,
    sport: u16,
    dport: u16,
    size: usize,
    probe: Probe,
    scratch: &mut Vec<u8>,
) -> Option<Vec<u8>> {
    let payload_len = size.saturating_sub(UDP_FRAME_HEADERS).max(PROBE_LEN);
    scratch.clear();
    scratch.resize(payload_len, 0);
    probe.write(scratch);
    build_udp_frame(ep, sport, dport, scratch, true).ok()
}
