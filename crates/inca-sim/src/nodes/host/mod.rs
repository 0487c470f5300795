//! Hosts: the traffic sources and sinks at the edge of a simulated network.
//!
//! A [`Host`] is a sans-IO device with one port (port 0), an IPv4 address and
//! its own MAC. Everything it sends goes to `gateway_mac`, the MAC of
//! whatever sits at the other end of its link; everything it receives is
//! accepted whatever its destination MAC, because links are point to point.
//!
//! It runs any number of workloads ([`workload::Workload`], configured by
//! [`WorkloadConfig`]); the built-in ones:
//! - `udp` — a constant-rate UDP generator (bit rate, `"line"` or packets per
//!   second), packet sizes fixed, uniform or a weighted mix, one 5-tuple or
//!   `flows = N` random ones picked uniformly or by Zipf;
//! - `pcap` — replays a capture with its original timing, sped up, looped;
//! - `request` — a request/response client measuring round-trip times, with
//!   `echo` as the matching responder;
//! - `tcp` / `tcp_sink` — bulk TCP transfers through [`crate::tcp::TcpStack`];
//! - `backbone` — a `udp` preset, the ExoPlane evaluation's backbone-like
//!   trace ([`traces`]);
//! - `udp` frames shaped for particular NFs (TCP with `tcp_flags`, VXLAN with
//!   `vxlan_vni`, flows varying the destination): [`super::encap`];
//! - `new_flows` / `tuples` — adversarial traffic (a new-flow flood, keys
//!   crafted to collide in a switch's hash units): [`super::attack`];
//! - any other `kind` a system registers ([`workload::WorkloadRegistry`]).
//!
//! Where things are: [`schema`] (the configuration as written), [`dist`]
//! (schedules and distributions), [`workload`] (the trait, the registry and
//! the built-in kinds); this module is the device: receive path, agenda,
//! TCP stack, measurements.
//!
//! And, whatever its workloads, it measures what it receives: counters, a
//! one-way latency histogram from the [`Probe`] header ([`inca_wire::probe`]) every generated UDP
//! payload starts with, received-bytes and received-frames series, and each TCP flow's goodput
//! and outcome; with per-hop histograms when probes carry a telemetry stack
//! (see [`hops`](self::hops)); and each flow's arrival order, probes that
//! came after a later one of their flow (see [`order`](self::order)).
//!
//! # Timing
//! Generated packets are sent at exact times computed from the packet's index
//! (never by adding up rounded gaps, which drifts): at a bit rate, packet `i`
//! leaves at `start + floor(B_i * 1e9 / rate)` where `B_i` is the wire bits
//! (frame + [`WIRE_OVERHEAD_BYTES`]) of the packets before it; at a packet
//! rate, at `start + floor(i * 1e9 / pps)`. Rates count wire bits, the way the
//! link model does, so `rate = "line"` fills the link exactly. A frame's
//! `size` is its length without FCS (what a capture and the link count);
//! generated frames are at least [`MIN_PROBE_FRAME`] bytes so the probe
//! header fits.
//!
//! All timers share one token ([`WAKE_TOKEN`]): the host keeps its own agenda
//! (the next packet of each generator, the oldest outstanding request's
//! timeout, the TCP stack's `poll_at`) and asks the driver to wake it at the
//! earliest.
//!
//! # Determinism, robustness, bounds
//! All randomness (packet sizes, flow choice, random 5-tuples, the TCP
//! stack's seed) comes from the [`DeviceRng`] the driver hands to
//! [`Device::handle`]; the host initialises its workloads lazily at the first
//! input (the driver wakes it at time 0 for that), in workload order, then
//! the TCP stack's seed. Malformed frames are counted and dropped, never a panic.
//! Everything that grows with traffic is bounded: outstanding requests
//! ([`schema::RequestConfig::max_outstanding`]), archived TCP flows
//! ([`MAX_ARCHIVED_FLOWS`]), packets caught up after a stall
//! ([`MAX_LATE_PER_WAKE`]), series bins ([`crate::metrics::MAX_BINS`]).
//!
//! # Restart
//! [`Device::restart`] loses all volatile state — generator progress and
//! sequence numbers, random 5-tuples, outstanding requests, the TCP stack and
//! its connections — as a crashed machine does; workloads start again from
//! the restart time (or their configured start, if later). Measurements
//! (counters, histograms, series, the final state of old TCP flows) belong to
//! the experiment, not to the machine, and are kept.

pub use crate::workload_control as control;
pub mod dist;
mod hops;
mod order;
pub mod schema;
#[cfg(test)]
mod tests;
pub mod traces;
pub mod workload;

use std::any::Any;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashSet};
use std::net::Ipv4Addr;

use inca_switch::device::{ControlMessage, Device, DeviceRng, Input, Nanos, Output, MILLIS};
use inca_switch::units;
use inca_wire::{EthernetFrame, Ipv4Packet, MacAddr, UdpDatagram};
use rand::Rng;
use serde::Serialize;

use crate::engine::Node;
use crate::metrics::{LatencyHistogram, NodeReport, Series};
use crate::tcp::{FlowId, FlowStats, Outcome, Role, TcpConfig, TcpStack};

use super::encap;
use workload::{
    Arrival, BuildContext, Claim, HostInfo, NoRegistry, StepContext, Workload, WorkloadRegistry,
};

pub use dist::{SizeDist, Zipf};
pub use inca_wire::probe::{Probe, PROBE_LEN, PROBE_MAGIC};
pub use schema::*;

/// The one timer token a host uses (see the module documentation, Timing).
pub const WAKE_TOKEN: u64 = 1;

// ---------------------------------------------------------------------------
// Configuration kept across restarts.

/// Everything a restart keeps but the workloads.
#[derive(Debug)]
struct Plan {
    info: HostInfo,
    prefix_len: u8,
    gateway: Ipv4Addr,
    bin: Nanos,
    tcp: TcpConfig,
    /// Indices of workloads that measure round-trip times.
    requests: Vec<usize>,
    has_tcp: bool,
    notes: Vec<String>,
}

/// A workload and its name.
#[derive(Debug)]
struct Named {
    name: String,
    workload: Box<dyn Workload>,
}

fn resolve(
    config: HostConfig,
    link_rate: u64,
    mac: MacAddr,
    gateway_mac: MacAddr,
    registry: &dyn WorkloadRegistry,
) -> Result<(Plan, Vec<Named>), HostError> {
    if config.prefix_len > 32 {
        return Err(invalid("prefix_len", format!("{} > 32", config.prefix_len)));
    }
    let gateway = config.gateway.unwrap_or_else(|| {
        let net = u32::from(config.ip) & dist::prefix_mask(config.prefix_len);
        let first = net.wrapping_add(1);
        Ipv4Addr::from(if first == u32::from(config.ip) {
            first.wrapping_add(1)
        } else {
            first
        })
    });
    let bin = match &config.bin {
        Some(q) => parse_time_field(q, "bin")?,
        None => MILLIS,
    };
    if bin == 0 {
        return Err(invalid("bin", "must be > 0"));
    }
    let mut notes = Vec::new();
    let mut workloads = Vec::with_capacity(config.workloads.len());
    let mut names = HashSet::new();
    for (i, w) in config.workloads.iter().enumerate() {
        let name = w
            .name()
            .map_or_else(|| format!("{}{i}", w.kind()), str::to_string);
        let field = format!("workload[{i}] {name:?} ({})", w.kind());
        if !names.insert(name.clone()) {
            return Err(invalid(&field, "two workloads have this name"));
        }
        let mut cx = BuildContext {
            index: i,
            name: name.clone(),
            field,
            host_ip: config.ip,
            link_rate,
            notes: &mut notes,
        };
        let workload = workload::build(w, &mut cx, registry)?;
        workloads.push(Named { name, workload });
    }
    let requests = (0..workloads.len())
        .filter(|&i| workloads[i].workload.measures_rtt())
        .collect();
    let has_tcp = workloads.iter().any(|w| w.workload.uses_tcp());
    let plan = Plan {
        info: HostInfo {
            ip: config.ip,
            mac,
            gateway_mac,
        },
        prefix_len: config.prefix_len,
        gateway,
        bin,
        tcp: config.tcp,
        requests,
        has_tcp,
        notes,
    };
    Ok((plan, workloads))
}

// ---------------------------------------------------------------------------
// Volatile state.

/// Everything a restart loses but the workloads' own state.
#[derive(Debug)]
struct State {
    /// Boot (0) or restart time: workloads start no earlier.
    anchor: Nanos,
    initialized: bool,
    /// (next send time, workload) of every active generator.
    agenda: BinaryHeap<Reverse<(Nanos, usize)>>,
    tcp: Option<TcpStack>,
    /// (workload, flow) of every TCP flow.
    tcp_flows: Vec<(usize, FlowId)>,
    tcp_due: Option<Nanos>,
    /// When the pending [`WAKE_TOKEN`] timer fires, if one is pending.
    wake_pending: Option<Nanos>,
    scratch: Vec<u8>,
    packets: Vec<Vec<u8>>,
}

impl State {
    fn new(anchor: Nanos) -> State {
        State {
            anchor,
            initialized: false,
            agenda: BinaryHeap::new(),
            tcp: None,
            tcp_flows: Vec::new(),
            tcp_due: None,
            wake_pending: None,
            scratch: Vec::new(),
            packets: Vec::new(),
        }
    }
}

// ---------------------------------------------------------------------------
/// Host-wide counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct HostStats {
    /// Frames received.
    pub rx_packets: u64,
    /// Bytes of frames received (without FCS).
    pub rx_bytes: u64,
    /// Frames dropped as malformed (truncated or inconsistent headers, bad
    /// IPv4 header checksum).
    pub rx_malformed: u64,
    /// Well-formed frames nothing here handles (not IPv4, fragments, other
    /// protocols, TCP without a stack or for another address).
    pub rx_other: u64,
    /// UDP packets that carry a probe header.
    pub rx_probes: u64,
    /// UDP packets without one.
    pub rx_udp_plain: u64,
    /// Probes whose transmit time is later than their arrival (corrupt or
    /// forged; not put into the latency histogram).
    pub rx_probe_future: u64,
    /// TCP packets handed to the TCP stack.
    pub rx_tcp: u64,
    /// Frames sent, all workloads and TCP.
    pub tx_packets: u64,
    /// Bytes of frames sent.
    pub tx_bytes: u64,
    /// Frames the TCP stack sent.
    pub tcp_tx_packets: u64,
    /// Bytes of those.
    pub tcp_tx_bytes: u64,
    /// Times the host was restarted.
    pub restarts: u64,
    /// Link-down notifications.
    pub link_down: u64,
    /// Link-up notifications.
    pub link_up: u64,
    /// Workload changes applied ([`control`]).
    pub workload_controls: u64,
    /// Control messages ignored: anything but a workload change, and
    /// changes no workload here could apply.
    pub control_ignored: u64,
}

/// Counters of one workload.
#[derive(Debug, Clone, Default, Serialize)]
pub struct WorkloadStats {
    /// Frames it sent.
    pub tx_packets: u64,
    /// Bytes of frames it sent.
    pub tx_bytes: u64,
    /// Packets not sent because the host could not run at their time
    /// (beyond [`MAX_LATE_PER_WAKE`] after a stall).
    pub missed: u64,
    /// Request client: responses matched to a request.
    pub responses: u64,
    /// Request client: requests given up after the timeout.
    pub lost: u64,
    /// Request client: responses to requests already given up.
    pub late: u64,
    /// Request client: second responses to one request.
    pub duplicate: u64,
    /// Request client: responses with a sequence number never sent.
    pub unknown: u64,
    /// Request client: requests given up because `max_outstanding` were
    /// waiting.
    pub evicted: u64,
    /// Request client: round-trip times.
    #[serde(skip)]
    pub rtt: LatencyHistogram,
}

#[derive(Debug)]
struct Metrics {
    stats: HostStats,
    workloads: Vec<WorkloadStats>,
    latency: LatencyHistogram,
    rtt: LatencyHistogram,
    rx_series: Series,
    /// Frames received per bin (a packet rate whatever the frame sizes).
    rx_packet_series: Series,
    /// Exact (smallest, largest) one-way latency and RTT: the histograms
    /// keep three significant digits, tests and summaries want exact values.
    latency_range: Option<(Nanos, Nanos)>,
    rtt_range: Option<(Nanos, Nanos)>,
    /// Final state of TCP flows of earlier lives, with the restart count
    /// they belong to.
    archived_flows: Vec<(u64, String, FlowStats)>,
    archived_dropped: u64,
    tcp_malformed_before: u64,
    /// Per-hop latency from probes' telemetry stacks.
    hops: hops::Hops,
    /// Per-flow arrival order of probes.
    order: order::Order,
}

// ---------------------------------------------------------------------------
// The host.

/// A simulated host. See the module documentation.
#[derive(Debug)]
pub struct Host {
    plan: Plan,
    workloads: Vec<Named>,
    state: State,
    metrics: Metrics,
}

impl Host {
    /// Builds a host from its configuration, its own MAC, the MAC at the
    /// other end of its link, and its link's rate in bits/s (what
    /// `rate = "line"` means). Fails with an error naming the field; a
    /// workload of a kind that is not built in is an error (see
    /// [`Host::with_registry`]).
    pub fn new(
        config: HostConfig,
        mac: MacAddr,
        gateway_mac: MacAddr,
        link_rate: u64,
    ) -> Result<Host, HostError> {
        Host::with_registry(config, mac, gateway_mac, link_rate, &NoRegistry)
    }

    /// As [`Host::new`], with workload kinds beyond the built-in ones built
    /// by `registry`.
    pub fn with_registry(
        config: HostConfig,
        mac: MacAddr,
        gateway_mac: MacAddr,
        link_rate: u64,
        registry: &dyn WorkloadRegistry,
    ) -> Result<Host, HostError> {
        let (plan, workloads) = resolve(config, link_rate, mac, gateway_mac, registry)?;
        let metrics = Metrics {
            stats: HostStats::default(),
            workloads: vec![WorkloadStats::default(); workloads.len()],
            latency: LatencyHistogram::default(),
            rtt: LatencyHistogram::default(),
            rx_series: Series::new(plan.bin),
            rx_packet_series: Series::new(plan.bin),
            latency_range: None,
            rtt_range: None,
            archived_flows: Vec::new(),
            archived_dropped: 0,
            tcp_malformed_before: 0,
            hops: hops::Hops::default(),
            order: order::Order::default(),
        };
        Ok(Host {
            plan,
            workloads,
            state: State::new(0),
            metrics,
        })
    }

    /// Names of the simulation's nodes by index, so per-hop latency
    /// histograms name the devices that stamped probes (see
    /// [`hops`](self::hops)); without them devices are `n<index>`.
    pub fn set_node_names(&mut self, names: std::sync::Arc<[String]>) {
        self.metrics.hops.set_names(names);
    }

    /// Per-hop one-way latency histograms from the telemetry stacks of
    /// received probes, by hop name (`hop:src>sw1.in`, ...).
    pub fn hop_latencies(&self) -> impl Iterator<Item = (String, &LatencyHistogram)> + '_ {
        self.metrics.hops.named()
    }

    /// The host's address.
    pub fn ip(&self) -> Ipv4Addr {
        self.plan.info.ip
    }

    /// The host's MAC.
    pub fn mac(&self) -> MacAddr {
        self.plan.info.mac
    }

    /// Host-wide counters.
    pub fn stats(&self) -> &HostStats {
        &self.metrics.stats
    }

    /// Counters of the workload named `name` ("udp0" for the first workload
    /// when it is an unnamed `udp`).
    pub fn workload_stats(&self, name: &str) -> Option<&WorkloadStats> {
        let i = self.workloads.iter().position(|w| w.name == name)?;
        self.metrics.workloads.get(i)
    }

    /// Names of the workloads, in configuration order.
    pub fn workload_names(&self) -> impl Iterator<Item = &str> {
        self.workloads.iter().map(|w| w.name.as_str())
    }

    /// One-way latency of received probes (arrival − transmit time).
    pub fn latency(&self) -> &LatencyHistogram {
        &self.metrics.latency
    }

    /// Round-trip times of all request clients.
    pub fn rtt(&self) -> &LatencyHistogram {
        &self.metrics.rtt
    }

    /// Exact smallest and largest one-way latency recorded.
    pub fn latency_range(&self) -> Option<(Nanos, Nanos)> {
        self.metrics.latency_range
    }

    /// Exact smallest and largest round-trip time recorded.
    pub fn rtt_range(&self) -> Option<(Nanos, Nanos)> {
        self.metrics.rtt_range
    }

    /// Bytes received per bin.
    pub fn rx_series(&self) -> &Series {
        &self.metrics.rx_series
    }

    /// The TCP flows of the current life (empty without TCP workloads or
    /// before the host first ran).
    pub fn tcp_flows(&self) -> &[FlowStats] {
        self.state.tcp.as_ref().map_or(&[], |s| s.flows())
    }

    /// TCP flows of earlier lives: (restart count, workload, final stats).
    pub fn archived_tcp_flows(&self) -> &[(u64, String, FlowStats)] {
        &self.metrics.archived_flows
    }

    /// The TCP stack, if the host has one.
    pub fn tcp(&self) -> Option<&TcpStack> {
        self.state.tcp.as_ref()
    }

    /// Sets up the workloads of this life (lazily, because only `handle`
    /// gets the RNG): each workload in order, then the TCP stack.
    fn ensure_init(&mut self, now: Nanos, rng: &mut DeviceRng) {
        if self.state.initialized {
            return;
        }
        let Host {
            plan,
            workloads,
            state,
            ..
        } = self;
        state.initialized = true;
        let anchor = state.anchor;
        for (i, w) in workloads.iter_mut().enumerate() {
            w.workload.begin(&plan.info, anchor, rng);
            if let Some(t) = w.workload.next_at() {
                state.agenda.push(Reverse((t, i)));
            }
        }
        if plan.has_tcp {
            let mut cfg = plan.tcp.clone();
            // Mixed with the configured seed so two runs with different run
            // seeds get different initial sequence numbers.
            cfg.seed ^= rng.gen::<u64>();
            let mut stack = TcpStack::new(plan.info.ip, plan.prefix_len, plan.gateway, cfg);
            for (i, w) in workloads.iter_mut().enumerate() {
                for id in w.workload.open_tcp(&mut stack, anchor) {
                    state.tcp_flows.push((i, id));
                }
            }
            state.tcp_due = Some(now);
            state.tcp = Some(stack);
        }
    }

    fn on_frame(&mut self, now: Nanos, frame: &[u8], out: &mut Vec<Output>) -> bool {
        let m = &mut self.metrics;
        m.stats.rx_packets += 1;
        m.stats.rx_bytes += frame.len() as u64;
        m.rx_series.add_at(now, frame.len() as u64);
        m.rx_packet_series.add_at(now, 1);
        let Ok(eth) = EthernetFrame::new_checked(frame) else {
            m.stats.rx_malformed += 1;
            return false;
        };
        if eth.ethertype() != inca_wire::ethernet::ethertype::IPV4 {
            m.stats.rx_other += 1;
            return false;
        }
        let Ok(ip) = Ipv4Packet::new_checked(eth.payload()) else {
            m.stats.rx_malformed += 1;
            return false;
        };
        if !ip.verify_checksum() {
            m.stats.rx_malformed += 1;
            return false;
        }
        if ip.more_frags() || ip.frag_offset() != 0 {
            m.stats.rx_other += 1;
            return false;
        }
        match ip.protocol() {
            inca_wire::ipv4::protocol::TCP => {
                // Only the host's own address goes to the stack: anything
                // else would make smoltcp answer for someone else.
                match &mut self.state.tcp {
                    Some(stack) if ip.dst_addr() == self.plan.info.ip => {
                        m.stats.rx_tcp += 1;
                        let len = usize::from(ip.total_len()).min(eth.payload().len());
                        stack.receive(now, &eth.payload()[..len]);
                        true
                    }
                    _ => {
                        // Generated TCP segments (`tcp_flags`) carry a probe.
                        match encap::tcp_payload(ip.payload()).and_then(Probe::parse) {
                            Some(probe) => {
                                record_one_way(m, now, &probe);
                                self.echo_tcp(now, &ip, out);
                            }
                            None => m.stats.rx_other += 1,
                        }
                        false
                    }
                }
            }
            inca_wire::ipv4::protocol::UDP => {
                let Ok(udp) = UdpDatagram::new_checked(ip.payload()) else {
                    m.stats.rx_malformed += 1;
                    return false;
                };
                let payload = udp.payload();
                if udp.dst_port() == encap::VXLAN_PORT && Probe::parse(payload).is_none() {
                    if let Some(probe) = encap::vxlan_inner_payload(payload).and_then(Probe::parse)
                    {
                        record_one_way(m, now, &probe);
                        return false;
                    }
                }
                if udp.dst_port() == encap::GTPU_PORT && Probe::parse(payload).is_none() {
                    if let Some(probe) = encap::gtpu_inner_payload(payload).and_then(Probe::parse) {
                        record_one_way(m, now, &probe);
                        return false;
                    }
                }
                self.on_udp(
                    now,
                    ip.src_addr(),
                    ip.dst_addr(),
                    udp.src_port(),
                    udp.dst_port(),
                    payload,
                    out,
                );
                false
            }
            _ => {
                m.stats.rx_other += 1;
                false
            }
        }
    }

    /// Offers a generated TCP segment carrying a probe to the workloads;
    /// the first that answers (an `echo` with `tcp`) sends its reply.
    fn echo_tcp(&mut self, now: Nanos, ip: &Ipv4Packet<&[u8]>, out: &mut Vec<Output>) {
        let Ok(seg) = inca_wire::TcpSegment::new_checked(ip.payload()) else {
            return;
        };
        let Some(payload) = encap::tcp_payload(ip.payload()) else {
            return;
        };
        let arrival = Arrival {
            src: ip.src_addr(),
            dst: ip.dst_addr(),
            sport: seg.src_port(),
            dport: seg.dst_port(),
            payload,
            probe: Probe::parse(payload),
        };
        let Host {
            plan,
            workloads,
            metrics,
            ..
        } = self;
        for (w, named) in workloads.iter_mut().enumerate() {
            if let Some(frame) = named.workload.reply_tcp(&plan.info, now, &arrival) {
                count_tx(metrics, w, &frame);
                out.push(Output::Transmit {
                    at: now,
                    port: 0,
                    frame,
                });
                return;
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn on_udp(
        &mut self,
        now: Nanos,
        src: Ipv4Addr,
        dst: Ipv4Addr,
        sport: u16,
        dport: u16,
        payload: &[u8],
        out: &mut Vec<Output>,
    ) {
        let Host {
            plan,
            workloads,
            metrics,
            ..
        } = self;
        let arrival = Arrival {
            src,
            dst,
            sport,
            dport,
            payload,
            probe: Probe::parse(payload),
        };
        let Some(probe) = arrival.probe else {
            // A system's client may speak its own format (SwiSh's SDW app
            // replies carry no probe header).
            if !offer(workloads, metrics, now, &arrival) {
                metrics.stats.rx_udp_plain += 1;
            }
            return;
        };
        metrics.stats.rx_probes += 1;
        // A response to one of our request clients?
        if offer(workloads, metrics, now, &arrival) {
            return;
        }
        record_latency(metrics, now, &probe);
        metrics
            .order
            .record(src, sport, dport, probe.flow, probe.seq);
        if let Some(stack) = inca_wire::telemetry::stack_of(payload) {
            metrics.hops.record(probe.tx_time, now, &stack);
        }
        for (w, named) in workloads.iter_mut().enumerate() {
            if let Some(frame) = named.workload.reply_udp(&plan.info, now, &arrival) {
                count_tx(metrics, w, &frame);
                out.push(Output::Transmit {
                    at: now,
                    port: 0,
                    frame,
                });
                return;
            }
        }
    }

    /// Does everything due at `now`: request timeouts, generator packets,
    /// the TCP stack.
    fn run_due(
        &mut self,
        now: Nanos,
        tcp_touched: bool,
        rng: &mut DeviceRng,
        out: &mut Vec<Output>,
    ) {
        let Host {
            plan,
            workloads,
            state,
            metrics,
        } = self;
        for &w in &plan.requests {
            workloads[w].workload.expire(now, &mut metrics.workloads[w]);
        }
        let mut late = 0usize;
        while let Some(&Reverse((t, w))) = state.agenda.peek() {
            if t > now {
                break;
            }
            state.agenda.pop();
            let send = t >= now || {
                late += 1;
                late <= MAX_LATE_PER_WAKE
            };
            let Some(named) = workloads.get_mut(w) else {
                continue;
            };
            let mut cx = StepContext {
                host: &plan.info,
                index: w,
                send,
                now,
                rng,
                scratch: &mut state.scratch,
                stats: &mut metrics.workloads[w],
            };
            let frame = named.workload.step(&mut cx);
            if let Some(frame) = frame {
                count_tx(metrics, w, &frame);
                out.push(Output::Transmit {
                    at: now,
                    port: 0,
                    frame,
                });
            } else if !send {
                metrics.workloads[w].missed += 1;
            }
            if let Some(next) = named.workload.next_at() {
                state.agenda.push(Reverse((next, w)));
            }
        }
        if let Some(stack) = &mut state.tcp {
            if tcp_touched || state.tcp_due.is_some_and(|d| d <= now) {
                stack.poll(now, &mut state.packets);
                for p in state.packets.drain(..) {
                    let mut frame = Vec::with_capacity(14 + p.len());
                    frame.extend_from_slice(&plan.info.gateway_mac);
                    frame.extend_from_slice(&plan.info.mac);
                    frame.extend_from_slice(&inca_wire::ethernet::ethertype::IPV4.to_be_bytes());
                    frame.extend_from_slice(&p);
                    metrics.stats.tcp_tx_packets += 1;
                    metrics.stats.tcp_tx_bytes += frame.len() as u64;
                    metrics.stats.tx_packets += 1;
                    metrics.stats.tx_bytes += frame.len() as u64;
                    out.push(Output::Transmit {
                        at: now,
                        port: 0,
                        frame,
                    });
                }
                state.tcp_due = stack.poll_at(now);
            }
        }
    }

    /// Applies a workload change ([`control`]) and moves the workload's
    /// place in the agenda to its new next send time.
    fn change_workload(&mut self, now: Nanos, m: &ControlMessage) {
        let Host {
            workloads,
            state,
            metrics,
            ..
        } = self;
        let Some((change, name)) = control::WorkloadChange::parse(m) else {
            metrics.stats.control_ignored += 1;
            return;
        };
        let Some(w) = workloads.iter().position(|w| w.name == name) else {
            metrics.stats.control_ignored += 1;
            return;
        };
        if !workloads[w].workload.change(now, change) {
            metrics.stats.control_ignored += 1;
            return;
        }
        metrics.stats.workload_controls += 1;
        state.agenda.retain(|r| r.0 .1 != w);
        if let Some(t) = workloads[w].workload.next_at() {
            state.agenda.push(Reverse((t, w)));
        }
    }

    /// Asks to be woken at the earliest thing the host waits for, unless an
    /// earlier wake-up is already pending (an early wake-up is harmless: it
    /// finds nothing due and asks again).
    fn arm(&mut self, now: Nanos, out: &mut Vec<Output>) {
        let Host {
            plan,
            workloads,
            state,
            ..
        } = self;
        let mut next = state.agenda.peek().map(|r| r.0 .0);
        let mut consider = |t: Option<Nanos>| {
            if let Some(t) = t {
                next = Some(next.map_or(t, |n| n.min(t)));
            }
        };
        consider(state.tcp_due);
        for &w in &plan.requests {
            consider(workloads[w].workload.deadline());
        }
        if let Some(t) = next {
            let t = t.max(now);
            if state.wake_pending.is_none_or(|p| t < p) {
                state.wake_pending = Some(t);
                out.push(Output::Timer {
                    at: t,
                    token: WAKE_TOKEN,
                });
            }
        }
    }

    fn archive_flows(&mut self) {
        let Some(stack) = self.state.tcp.take() else {
            return;
        };
        self.metrics.tcp_malformed_before += stack.malformed();
        let life = self.metrics.stats.restarts;
        for &(w, id) in &self.state.tcp_flows {
            let Some(f) = stack.flows().get(id) else {
                continue;
            };
            if self.metrics.archived_flows.len() >= MAX_ARCHIVED_FLOWS {
                self.metrics.archived_dropped += 1;
                continue;
            }
            let name = self
                .workloads
                .get(w)
                .map_or_else(String::new, |w| w.name.clone());
            self.metrics.archived_flows.push((life, name, f.clone()));
        }
    }
}

/// Counts a frame workload `w` sent.
fn count_tx(m: &mut Metrics, w: usize, frame: &[u8]) {
    let ws = &mut m.workloads[w];
    ws.tx_packets += 1;
    ws.tx_bytes += frame.len() as u64;
    m.stats.tx_packets += 1;
    m.stats.tx_bytes += frame.len() as u64;
}

/// A probe that is no request's response: counted, and its one-way latency
/// recorded.
fn record_one_way(m: &mut Metrics, now: Nanos, probe: &Probe) {
    m.stats.rx_probes += 1;
    record_latency(m, now, probe);
}

/// Offers a datagram to every workload's [`Workload::claim`] in order;
/// true if one took it (an answer's RTT is recorded).
fn offer(workloads: &mut [Named], metrics: &mut Metrics, now: Nanos, d: &Arrival<'_>) -> bool {
    for (w, named) in workloads.iter_mut().enumerate() {
        match named.workload.claim(now, d, &mut metrics.workloads[w]) {
            Claim::NotMine => continue,
            Claim::Mine => return true,
            Claim::Answered { rtt } => {
                metrics.rtt.record(rtt);
                widen(&mut metrics.rtt_range, rtt);
                return true;
            }
        }
    }
    false
}

fn record_latency(m: &mut Metrics, now: Nanos, probe: &Probe) {
    if probe.tx_time <= now {
        m.latency.record(now - probe.tx_time);
        widen(&mut m.latency_range, now - probe.tx_time);
    } else {
        m.stats.rx_probe_future += 1;
    }
}

fn widen(range: &mut Option<(Nanos, Nanos)>, v: Nanos) {
    *range = Some(range.map_or((v, v), |(lo, hi)| (lo.min(v), hi.max(v))));
}

impl Device for Host {
    fn start(&mut self, now: Nanos, _rng: &mut DeviceRng, out: &mut Vec<Output>) {
        // Wake at once: workloads are set up at the first input (which has
        // the RNG), and this is it.
        self.state.wake_pending = Some(now);
        out.push(Output::Timer {
            at: now,
            token: WAKE_TOKEN,
        });
    }

    fn handle(&mut self, now: Nanos, input: Input, rng: &mut DeviceRng, out: &mut Vec<Output>) {
        let fresh = !self.state.initialized;
        self.ensure_init(now, rng);
        let mut tcp_touched = fresh && self.state.tcp.is_some();
        match input {
            Input::Frame { frame, .. } => tcp_touched |= self.on_frame(now, &frame, out),
            Input::Timer { token } => {
                if token == WAKE_TOKEN {
                    self.state.wake_pending = None;
                }
            }
            Input::Control(m) => self.change_workload(now, &m),
            Input::Session(_) => self.metrics.stats.control_ignored += 1,
            Input::LinkState { up, .. } => {
                if up {
                    self.metrics.stats.link_up += 1;
                } else {
                    self.metrics.stats.link_down += 1;
                }
            }
        }
        self.run_due(now, tcp_touched, rng, out);
        self.arm(now, out);
    }

    fn restart(&mut self, now: Nanos, rng: &mut DeviceRng, out: &mut Vec<Output>) {
        self.archive_flows();
        self.metrics.stats.restarts += 1;
        for w in &mut self.workloads {
            w.workload.end();
        }
        self.state = State::new(now);
        self.start(now, rng, out);
    }
}

fn secs(t: Nanos) -> String {
    format!("{:.3} s", t as f64 / 1e9)
}

/// One line about a TCP flow, e.g.
/// `flow 3 10.0.0.1:40000 → 10.0.1.1:5001: reset at 0.512 s after 1.2 GB`.
fn flow_note(f: &FlowStats, now: Nanos) -> String {
    let local = format!("{}:{}", f.local.0, f.local.1);
    let remote = f
        .remote
        .map_or_else(|| "?".to_string(), |(a, p)| format!("{a}:{p}"));
    let (from, to, bytes) = match f.role {
        Role::Sender => (local, remote, f.bytes_sent_acked),
        Role::Receiver => (remote, local, f.bytes_received),
    };
    let what = match (f.outcome, f.ended_at) {
        (Outcome::Open, _) => match f.established_at {
            Some(t) => format!("open (established at {})", secs(t)),
            None if f.role == Role::Receiver => "listening".to_string(),
            None => "not established".to_string(),
        },
        (Outcome::Completed, t) => format!("completed at {}", secs(t.unwrap_or(now))),
        (Outcome::Reset, t) => format!("reset at {}", secs(t.unwrap_or(now))),
        (Outcome::TimedOut, t) => format!("timed out at {}", secs(t.unwrap_or(now))),
        (Outcome::Failed, t) => format!("failed at {}", secs(t.unwrap_or(now))),
    };
    let mut s = format!(
        "flow {} {from} → {to}: {what} after {}",
        f.id,
        units::format_bytes(bytes)
    );
    if let Some(est) = f.established_at {
        let end = f.ended_at.unwrap_or(now);
        if end > est && bytes > 0 {
            let bps = (u128::from(bytes) * 8 * 1_000_000_000 / u128::from(end - est)) as u64;
            s.push_str(&format!(" ({})", units::format_rate(bps)));
        }
    }
    if f.payload_errors > 0 {
        s.push_str(&format!(", {} corrupt bytes", f.payload_errors));
    }
    s
}

impl Node for Host {
    fn kind(&self) -> &'static str {
        "host"
    }

    fn report(&self, now: Nanos) -> NodeReport {
        let mut r = NodeReport::default();
        let s = &self.metrics.stats;
        let mut c = |k: &str, v: u64| {
            r.counters.insert(k.to_string(), v);
        };
        c("rx_packets", s.rx_packets);
        c("rx_bytes", s.rx_bytes);
        c("rx_malformed", s.rx_malformed);
        c("rx_other", s.rx_other);
        c("rx_probes", s.rx_probes);
        c("rx_udp_plain", s.rx_udp_plain);
        c("rx_probe_future", s.rx_probe_future);
        c("rx_tcp", s.rx_tcp);
        c("tx_packets", s.tx_packets);
        c("tx_bytes", s.tx_bytes);
        c("restarts", s.restarts);
        c("link_down", s.link_down);
        c("link_up", s.link_up);
        c("workload_controls", s.workload_controls);
        c("control_ignored", s.control_ignored);
        let requests = self.plan.requests.len();
        for (w, ws) in self.workloads.iter().zip(&self.metrics.workloads) {
            w.workload.report(&w.name, ws, &mut r);
            if requests > 1 && w.workload.measures_rtt() {
                r.histograms
                    .insert(format!("rtt.{}", w.name), ws.rtt.clone());
            }
        }
        if self.plan.has_tcp {
            let mut c = |k: &str, v: u64| {
                r.counters.insert(k.to_string(), v);
            };
            c("tcp.tx_packets", s.tcp_tx_packets);
            c("tcp.tx_bytes", s.tcp_tx_bytes);
            let (malformed, ignored) = self
                .state
                .tcp
                .as_ref()
                .map_or((0, 0), |t| (t.malformed(), t.ignored()));
            c(
                "tcp.malformed",
                malformed + self.metrics.tcp_malformed_before,
            );
            c("tcp.ignored", ignored);
        }
        r.histograms
            .insert("latency".into(), self.metrics.latency.clone());
        self.metrics.hops.report(&mut r);
        self.metrics.order.report(&mut r);
        if requests > 0 {
            r.histograms.insert("rtt".into(), self.metrics.rtt.clone());
        }
        r.series
            .insert("rx_bytes".into(), self.metrics.rx_series.clone());
        r.series
            .insert("rx_packets".into(), self.metrics.rx_packet_series.clone());
        r.notes.extend(self.plan.notes.iter().cloned());
        let bin = self
            .state
            .tcp
            .as_ref()
            .map_or(self.plan.tcp.goodput_bin, |t| t.config().goodput_bin);
        for (life, name, f) in &self.metrics.archived_flows {
            r.notes.push(format!(
                "{name} (life {life}, lost in restart): {}",
                flow_note(f, now)
            ));
        }
        if self.metrics.archived_dropped > 0 {
            r.notes.push(format!(
                "{} more flows of earlier lives not kept",
                self.metrics.archived_dropped
            ));
        }
        if let Some(stack) = &self.state.tcp {
            let mut bytes = vec![0u64; self.workloads.len()];
            for &(w, id) in &self.state.tcp_flows {
                let Some(f) = stack.flows().get(id) else {
                    continue;
                };
                // A listening socket that never got a connection says little.
                if f.role == Role::Receiver && f.remote.is_none() && f.outcome == Outcome::Open {
                    continue;
                }
                let name = &self.workloads[w].name;
                let b = match f.role {
                    Role::Sender => f.bytes_sent_acked,
                    Role::Receiver => f.bytes_received,
                };
                bytes[w] += b;
                r.notes.push(format!("{name}: {}", flow_note(f, now)));
                r.series.insert(
                    format!("tcp.{name}.flow{}.goodput", f.id),
                    Series {
                        bin,
                        values: f.goodput.clone(),
                    },
                );
            }
            for (w, wl) in self.workloads.iter().enumerate() {
                if wl.workload.uses_tcp() {
                    r.counters.insert(format!("{}.bytes", wl.name), bytes[w]);
                }
            }
        }
        r
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
