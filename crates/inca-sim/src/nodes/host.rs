//! Hosts: the traffic sources and sinks at the edge of a simulated network.
//!
//! A [`Host`] is a sans-IO device with one port (port 0), an IPv4 address and
//! its own MAC. Everything it sends goes to `gateway_mac`, the MAC of
//! whatever sits at the other end of its link; everything it receives is
//! accepted whatever its destination MAC, because links are point to point.
//!
//! It runs any number of workloads ([`WorkloadConfig`]):
//! - `udp` — a constant-rate UDP generator (bit rate, `"line"` or packets per
//!   second), packet sizes fixed, uniform or a weighted mix, one 5-tuple or
//!   `flows = N` random ones picked uniformly or by Zipf;
//! - `pcap` — replays a capture with its original timing, sped up, looped;
//! - `request` — a request/response client measuring round-trip times, with
//!   `echo` as the matching responder;
//! - `tcp` / `tcp_sink` — bulk TCP transfers through [`crate::tcp::TcpStack`];
//! - `udp` frames shaped for particular NFs (TCP with `tcp_flags`, VXLAN with
//!   `vxlan_vni`, flows varying the destination): [`super::encap`];
//! - `new_flows` / `tuples` — adversarial traffic (a new-flow flood, keys
//!   crafted to collide in a switch's hash units): [`super::attack`].
//!
//! And, whatever its workloads, it measures what it receives: counters, a
//! one-way latency histogram from the [`Probe`] header every generated UDP
//! payload starts with, received-bytes and received-frames series, and each TCP flow's goodput
//! and outcome.
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
//! input (the driver wakes it at time 0 for that) because [`Device::start`]
//! has no RNG. Malformed frames are counted and dropped, never a panic.
//! Everything that grows with traffic is bounded: outstanding requests
//! ([`RequestConfig::max_outstanding`]), archived TCP flows
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

use std::any::Any;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashSet, VecDeque};
use std::fmt;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::path::PathBuf;
use std::sync::Arc;

use inca_switch::device::{Device, DeviceRng, Input, Nanos, Output, MILLIS};
use inca_switch::units;
use inca_wire::ethernet::VLAN_TAG_LEN;
use inca_wire::{
    build_udp_frame, Endpoints, EthernetFrame, Ipv4Packet, MacAddr, UdpDatagram, VlanTag,
};
use rand::Rng;
use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::{Deserialize, Serialize};

use crate::engine::Node;
use crate::link::WIRE_OVERHEAD_BYTES;
use crate::metrics::{LatencyHistogram, NodeReport, Series};
use crate::tcp::{FlowId, FlowStats, Outcome, Role, TcpConfig, TcpStack};

use super::attack::{nth_source, NewFlowsConfig, TuplesConfig};
use super::encap::{self, Shape, L4};

// ---------------------------------------------------------------------------
// Constants.

/// The one timer token a host uses (see the module documentation, Timing).
pub const WAKE_TOKEN: u64 = 1;

/// First four bytes of a [`Probe`] ("INCA").
pub const PROBE_MAGIC: u32 = 0x494e_4341;

/// Length of a [`Probe`] header.
pub const PROBE_LEN: usize = 24;

/// Ethernet (14) + IPv4 (20) + UDP (8) header bytes of a generated frame.
pub const UDP_FRAME_HEADERS: usize = 42;

/// The smallest generated frame: headers plus the probe. Smaller configured
/// sizes are raised to this (and a report note says so).
pub const MIN_PROBE_FRAME: usize = UDP_FRAME_HEADERS + PROBE_LEN;

/// The largest frame a host generates (a 9200-byte jumbo MTU plus the
/// Ethernet header).
pub const MAX_FRAME: usize = 9214;

/// Most random 5-tuples one `udp` workload may draw (each costs 6 bytes, and
/// a Zipf CDF 8 more).
pub const MAX_FLOWS: u64 = 1_000_000;

/// Largest `max_outstanding` a request client accepts.
pub const MAX_OUTSTANDING: usize = 1 << 20;

/// Default bound on outstanding requests per client.
pub const DEFAULT_MAX_OUTSTANDING: usize = 1 << 16;

/// TCP flows of earlier lives (before a restart) kept for the report.
pub const MAX_ARCHIVED_FLOWS: usize = 4096;

/// Largest packet rate a generator accepts (one per 0.1 ns): beyond that a
/// configuration is a mistake, and a zero gap would never let time advance.
pub const MAX_PPS: u64 = 10_000_000_000;

/// Largest bit rate a generator accepts (10 Tbps).
pub const MAX_RATE_BPS: u64 = 10_000_000_000_000;

/// Packets a generator may send late in one wake-up (after the host was
/// paused, say); the rest of a backlog is skipped and counted as `missed`,
/// so a long stall cannot turn into an unbounded burst.
pub const MAX_LATE_PER_WAKE: usize = 1024;

/// Default UDP source port of workload `i` when none is configured.
const DEFAULT_UDP_PORT_BASE: u16 = 10_000;

/// Largest TCP sink backlog (smoltcp has one socket per expected connection).
const MAX_BACKLOG: usize = 4096;

// ---------------------------------------------------------------------------
// Configuration.

/// A quantity as written in a scenario file: a plain integer, or a string
/// with a unit (`"10Gbps"`, `"1ms"`, `"1500B"`, `"line"`), parsed by
/// [`inca_switch::units`] when the host is built so that errors name the
/// field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Quantity {
    /// A bare number (ns, bytes, bits/s, depending on the field).
    Int(u64),
    /// A number with a unit, or a keyword.
    Text(String),
}

impl From<u64> for Quantity {
    fn from(v: u64) -> Self {
        Quantity::Int(v)
    }
}

impl From<&str> for Quantity {
    fn from(v: &str) -> Self {
        Quantity::Text(v.to_string())
    }
}

impl fmt::Display for Quantity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Quantity::Int(v) => write!(f, "{v}"),
            Quantity::Text(s) => write!(f, "{s:?}"),
        }
    }
}

impl Quantity {
    fn parse(&self, parse: fn(&str) -> Option<u64>) -> Option<u64> {
        match self {
            Quantity::Int(v) => Some(*v),
            Quantity::Text(s) => parse(s),
        }
    }
}

struct QuantityVisitor;

impl<'de> Visitor<'de> for QuantityVisitor {
    type Value = Quantity;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a non-negative integer or a string with a unit")
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Quantity, E> {
        Ok(Quantity::Int(v))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Quantity, E> {
        u64::try_from(v)
            .map(Quantity::Int)
            .map_err(|_| E::custom(format!("{v} is negative")))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Quantity, E> {
        Ok(Quantity::Text(v.to_string()))
    }
}

impl<'de> Deserialize<'de> for Quantity {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(QuantityVisitor)
    }
}

/// Packet sizes (frame bytes without FCS): `size = 1000`, `size = "1500B"`,
/// `size = {uniform = [64, 1518]}` (inclusive) or
/// `size = {mix = [[64, 7], [570, 4], [1518, 1]]}` (size, weight).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SizeSpec {
    /// Every frame this size.
    Fixed(Quantity),
    /// Uniform between the two sizes, inclusive.
    Uniform(Quantity, Quantity),
    /// Each size with probability weight / total weight.
    Mix(Vec<(Quantity, u64)>),
}

impl From<u64> for SizeSpec {
    fn from(v: u64) -> Self {
        SizeSpec::Fixed(Quantity::Int(v))
    }
}

struct SizeVisitor;

impl<'de> Visitor<'de> for SizeVisitor {
    type Value = SizeSpec;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(
            "a size (1000, \"1500B\"), {uniform = [lo, hi]} or {mix = [[size, weight], ...]}",
        )
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<SizeSpec, E> {
        QuantityVisitor.visit_u64(v).map(SizeSpec::Fixed)
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<SizeSpec, E> {
        QuantityVisitor.visit_i64(v).map(SizeSpec::Fixed)
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<SizeSpec, E> {
        QuantityVisitor.visit_str(v).map(SizeSpec::Fixed)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<SizeSpec, A::Error> {
        let Some(key) = map.next_key::<String>()? else {
            return Err(de::Error::custom(
                "empty table: write {uniform = [lo, hi]} or {mix = [[size, weight], ...]}",
            ));
        };
        let spec = match key.as_str() {
            "uniform" => {
                let v: Vec<Quantity> = map.next_value()?;
                match <[Quantity; 2]>::try_from(v) {
                    Ok([lo, hi]) => SizeSpec::Uniform(lo, hi),
                    Err(v) => {
                        return Err(de::Error::custom(format!(
                            "uniform takes [lo, hi], got {} values",
                            v.len()
                        )))
                    }
                }
            }
            "mix" => SizeSpec::Mix(map.next_value()?),
            other => return Err(de::Error::unknown_field(other, &["uniform", "mix"])),
        };
        if let Some(extra) = map.next_key::<String>()? {
            return Err(de::Error::custom(format!(
                "a size table has one key (uniform or mix), found also {extra:?}"
            )));
        }
        Ok(spec)
    }
}

impl<'de> Deserialize<'de> for SizeSpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(SizeVisitor)
    }
}

/// A host. In a scenario file this is the `[[host]]` table (its `name` is the
/// scenario's); the MAC addresses and the link rate come from the topology.
///
/// ```toml
/// ip = "10.0.0.1"
/// prefix_len = 24          # default 24
/// gateway = "10.0.0.254"   # TCP's default route; default: first address of the subnet
/// bin = "1ms"              # received-bytes series bin, default 1 ms
/// tcp = { send_buffer = 4194304 }   # crate::tcp::TcpConfig, optional
/// [[workload]]             # [[host.workload]] in a scenario
/// kind = "udp"
/// dst = "10.0.1.1:5000"
/// rate = "1Gbps"
/// ```
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostConfig {
    /// The host's name in a scenario file (where it is required; a host
    /// built in code need not have one).
    #[serde(default)]
    pub name: Option<toml::Spanned<String>>,
    /// The host's IPv4 address.
    pub ip: Ipv4Addr,
    /// Prefix length of its subnet (for the TCP stack). Default 24.
    #[serde(default = "default_prefix_len")]
    pub prefix_len: u8,
    /// Next hop for the TCP stack's default route (it only needs to be in
    /// the subnet: the host sends everything to `gateway_mac` anyway).
    /// Default: the first address of the subnet that is not the host's.
    #[serde(default)]
    pub gateway: Option<Ipv4Addr>,
    /// Bin of the received-bytes series (time). Default 1 ms.
    #[serde(default)]
    pub bin: Option<Quantity>,
    /// TCP stack configuration (only used with `tcp`/`tcp_sink` workloads).
    #[serde(default)]
    pub tcp: TcpConfig,
    /// Workloads, any number (`[[workload]]`).
    #[serde(default, rename = "workload")]
    pub workloads: Vec<WorkloadConfig>,
}

fn default_prefix_len() -> u8 {
    24
}

impl HostConfig {
    /// A host at `ip` with no workloads (it still receives and measures).
    pub fn new(ip: Ipv4Addr) -> Self {
        HostConfig {
            name: None,
            ip,
            prefix_len: default_prefix_len(),
            gateway: None,
            bin: None,
            tcp: TcpConfig::default(),
            workloads: Vec::new(),
        }
    }

    /// Parses a host table written in TOML (the form documented on
    /// [`HostConfig`]; workloads under `[[workload]]`).
    pub fn from_toml(text: &str) -> Result<Self, HostError> {
        toml::from_str(text).map_err(|e| HostError::Parse(e.to_string()))
    }
}

/// One workload of a host, tagged by `kind`.
#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum WorkloadConfig {
    /// `kind = "udp"`: a UDP traffic generator.
    Udp(UdpConfig),
    /// `kind = "pcap"`: replay of a capture file.
    Pcap(PcapConfig),
    /// `kind = "request"`: a request/response client.
    Request(RequestConfig),
    /// `kind = "echo"`: answers probes on a port.
    Echo(EchoConfig),
    /// `kind = "tcp"`: a bulk TCP sender.
    Tcp(TcpSendConfig),
    /// `kind = "tcp_sink"`: accepts TCP connections and discards the data.
    TcpSink(TcpSinkConfig),
    /// `kind = "new_flows"`: a new-flow flood ([`super::attack`]).
    NewFlows(NewFlowsConfig),
    /// `kind = "tuples"`: traffic over a list of (crafted) sources.
    Tuples(TuplesConfig),
}

impl WorkloadConfig {
    fn kind(&self) -> &'static str {
        match self {
            WorkloadConfig::Udp(_) => "udp",
            WorkloadConfig::Pcap(_) => "pcap",
            WorkloadConfig::Request(_) => "request",
            WorkloadConfig::Echo(_) => "echo",
            WorkloadConfig::Tcp(_) => "tcp",
            WorkloadConfig::TcpSink(_) => "tcp_sink",
            WorkloadConfig::NewFlows(_) => "new_flows",
            WorkloadConfig::Tuples(_) => "tuples",
        }
    }

    fn name(&self) -> Option<&str> {
        match self {
            WorkloadConfig::Udp(c) => c.name.as_deref(),
            WorkloadConfig::Pcap(c) => c.name.as_deref(),
            WorkloadConfig::Request(c) => c.name.as_deref(),
            WorkloadConfig::Echo(c) => c.name.as_deref(),
            WorkloadConfig::Tcp(c) => c.name.as_deref(),
            WorkloadConfig::TcpSink(c) => c.name.as_deref(),
            WorkloadConfig::NewFlows(c) => c.name.as_deref(),
            WorkloadConfig::Tuples(c) => c.name.as_deref(),
        }
    }
}

/// A UDP generator. Exactly one of `rate` and `pps`.
///
/// ```toml
/// kind = "udp"
/// name = "bg"                      # default "udp<index>"
/// dst = "10.0.1.1:5000"
/// rate = "1Gbps"                   # wire bits/s, or "line"; or pps = 100000
/// size = {mix = [[64, 7], [570, 4], [1518, 1]]}   # default 1000
/// start = "1ms"                    # default 0
/// stop = "11ms"                    # and/or count = 1000; default: forever
/// flows = 10000                    # random 5-tuples; default one flow
/// src_ports = [1024, 65535]        # range for random flows (the default)
/// src_prefix = "10.0.0.0/24"       # random source addresses; default the host's
/// zipf = 0.99                      # flow popularity skew; default uniform
/// vlan = 7                         # 802.1Q tag with this VID; default untagged
/// tcp_flags = 2                    # send TCP segments with these flags (here SYN)
/// flows_at = "dst"                 # random flows vary the destination, not the source
/// vxlan_vni = 1                    # wrap every frame in VXLAN with this VNI
/// gtpu_teid = 1000                 # send every packet in GTP-U, TEID 1000 + UE index
/// gtpu_sgw = "10.255.0.1"          # the tunnel's outer destination (default dst's)
/// gtpc_every = 18                  # session signalling: each UE's first packet, then every 18th
/// gtpc_format = "redplane"         # its body: "inca" (inca-apps epc, default) or "redplane"
/// gtpc_attach = false              # no session message before each UE's first packet
/// ```
///
/// `tcp_flags`, `flows_at` and `vxlan_vni` shape frames for NFs that need
/// them ([`super::encap`]): a firewall learning connections from inside SYNs,
/// a VPN gateway looking up ⟨VNI, inner destination⟩. With `flows_at =
/// "dst"`, `src_prefix`/`src_ports` describe the destinations drawn, the
/// source is the host's address and `src_port`, and `dst` gives only the
/// destination of VXLAN's outer header (its port is then unused). With
/// `vxlan_vni` the generated 5-tuple is the inner frame's; the outer header
/// goes from the host to `dst`'s address, port 4789. `size` counts the
/// whole frame; it is raised to fit the headers and the probe.
///
/// `gtpu_teid` makes the host an eNodeB: each generated IPv4 packet (from a
/// UE, the flow's source, usually drawn from `src_prefix`, to `dst`) is sent
/// in GTP-U to `gtpu_sgw` (default `dst`'s address), UDP 2152, with the TEID
/// `gtpu_teid` + the UE's index in `src_prefix` (its host bits; one bearer
/// per UE, both directions [our choice]). Received GTP-U G-PDUs (downlink) are unwrapped to find the
/// probe. `gtpc_every` adds the session signalling a gateway needs (a
/// stand-in for GTP-C, UDP 2123, from the host's port 2123 to `dst`'s
/// address, 16-byte body then zeros to `size`): the first packet of each UE
/// is its session message instead of data, and so is every `gtpc_every`-th
/// packet after (0: only the first) [our choice: [RP] §7.1 has one
/// signalling message per 17 data packets, `gtpc_every = 18`].
/// `gtpc_attach = false` leaves out the first-packet messages (a workload
/// after another that attached the same UEs). The body is
/// inca-apps' `epc` [`Signal`](inca-apps) (version 1, create, UE, TEID, eNB)
/// or, with `gtpc_format = "redplane"`, the RedPlane EPC's (UE, uplink
/// TEID, downlink TEID, eNB); the eNB is the host's address.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UdpConfig {
    /// Name in counters and notes.
    pub name: Option<String>,
    /// Destination address and port.
    pub dst: Option<SocketAddrV4>,
    /// Bits per second on the wire (frame + 24 B), or `"line"` for the
    /// host's link rate.
    pub rate: Option<Quantity>,
    /// Packets per second.
    pub pps: Option<u64>,
    /// Frame sizes. Default 1000 bytes.
    pub size: Option<SizeSpec>,
    /// When the first packet leaves (time). Default 0.
    pub start: Option<Quantity>,
    /// No packet leaves at or after this time.
    pub stop: Option<Quantity>,
    /// At most this many packets.
    pub count: Option<u64>,
    /// Source port of the single flow. Default 10000 + workload index.
    pub src_port: Option<u16>,
    /// Number of random 5-tuples (1..=1,000,000).
    pub flows: Option<u64>,
    /// Inclusive source-port range of random flows. Default [1024, 65535].
    pub src_ports: Option<[u16; 2]>,
    /// Random flows draw source addresses from this prefix ("a.b.c.d/len").
    pub src_prefix: Option<String>,
    /// Zipf skew of flow popularity (flow 0 most popular); absent: uniform.
    pub zipf: Option<f64>,
    /// Tag every frame with this 802.1Q VLAN id (1..=4094, PCP 0)
    /// [our choice: the tag's 4 bytes count in `size`, so frames keep the
    /// size asked for]. Absent: untagged.
    pub vlan: Option<u16>,
    /// Send TCP segments with these flags instead of UDP datagrams.
    pub tcp_flags: Option<u8>,
    /// Which end of the flow the random flows vary. Default the source.
    pub flows_at: Option<FlowsAt>,
    /// Wrap every frame in VXLAN with this VNI (0..=16,777,215).
    pub vxlan_vni: Option<u32>,
    /// Send every packet in GTP-U with TEID this + the UE's index in
    /// `src_prefix`.
    pub gtpu_teid: Option<u32>,
    /// GTP-U's outer destination (the serving gateway). Default `dst`'s
    /// address.
    pub gtpu_sgw: Option<Ipv4Addr>,
    /// Session signalling: each UE's first packet, and every this-th packet
    /// (0: only the first). Only with `gtpu_teid`.
    pub gtpc_every: Option<u64>,
    /// The signalling body's layout. Default `inca`.
    pub gtpc_format: Option<GtpcFormat>,
    /// Whether each UE's first packet is its session message (default
    /// true; false when an earlier workload attached the UEs).
    pub gtpc_attach: Option<bool>,
}

/// The body of a generated session signalling message (see [`UdpConfig`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GtpcFormat {
    /// inca-apps `epc`: version 1, type 1 (create), 2 reserved, UE, TEID,
    /// eNB.
    #[default]
    Inca,
    /// The RedPlane EPC-SGW: UE, uplink TEID, downlink TEID, eNB.
    Redplane,
}

/// The signalling (GTP-C stand-in) UDP port.
pub const GTPC_PORT: u16 = 2123;

/// Length of a signalling body.
pub const GTPC_BODY_LEN: usize = 16;

/// Which end of a generated flow `flows = N` varies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FlowsAt {
    /// The source address and port (the default).
    #[default]
    Src,
    /// The destination address and port.
    Dst,
}

/// Replay of a pcap or pcapng file. Source and destination MACs are
/// rewritten to the host's and `gateway_mac`; the rest of each frame is sent
/// as captured (no probe header).
///
/// ```toml
/// kind = "pcap"
/// file = "traces/small.pcap"
/// speedup = 2.0        # default 1: original timing
/// loop = true          # default false
/// start = "0"          # stop = .., count = .. (frames) as for udp
/// ```
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PcapConfig {
    /// Name in counters and notes.
    pub name: Option<String>,
    /// The capture file.
    pub file: PathBuf,
    /// Inter-frame times are divided by this (> 0). Default 1.
    pub speedup: Option<f64>,
    /// Start over after the last frame (one average gap later).
    #[serde(rename = "loop", default)]
    pub looped: bool,
    /// When the first frame leaves (time). Default 0.
    pub start: Option<Quantity>,
    /// No frame leaves at or after this time.
    pub stop: Option<Quantity>,
    /// At most this many frames in all (over every loop).
    pub count: Option<u64>,
}

/// A request/response client: UDP requests (probe header, padded to `size`)
/// to `server`, round-trip time of each response into the `rtt` histogram,
/// requests without a response after `timeout` counted as lost.
///
/// ```toml
/// kind = "request"
/// server = "10.0.1.1:7"
/// pps = 100000             # or rate = "1Gbps"
/// size = 128               # default 1000
/// timeout = "1ms"          # default 10 ms
/// src_port = 50000         # default 10000 + workload index
/// max_outstanding = 65536  # the oldest beyond this is given up (counted)
/// ```
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RequestConfig {
    /// Name in counters and notes.
    pub name: Option<String>,
    /// The server (an `echo` workload).
    pub server: Option<SocketAddrV4>,
    /// Bits per second on the wire, or `"line"`.
    pub rate: Option<Quantity>,
    /// Requests per second.
    pub pps: Option<u64>,
    /// Request frame sizes. Default 1000 bytes.
    pub size: Option<SizeSpec>,
    /// First request (time). Default 0.
    pub start: Option<Quantity>,
    /// No request at or after this time.
    pub stop: Option<Quantity>,
    /// At most this many requests.
    pub count: Option<u64>,
    /// A request unanswered this long is lost (time). Default 10 ms.
    pub timeout: Option<Quantity>,
    /// Local port responses come back to.
    pub src_port: Option<u16>,
    /// Bound on requests waiting for a response; when full, the oldest is
    /// given up (counted as `evicted`). Default 65536, at most 1 Mi.
    pub max_outstanding: Option<usize>,
}

/// Answers every UDP packet to `port` that carries a probe header, swapping
/// addresses and ports and keeping the payload (so the probe's transmit time
/// is the request's).
///
/// ```toml
/// kind = "echo"
/// port = 7
/// tcp = true     # also answer TCP segments with a probe (flags PSH+ACK)
/// ```
///
/// [our choice] With `tcp`, a TCP segment to `port` that carries a probe
/// (a generator's `tcp_flags` segments, not the host's TCP stack) is
/// answered by a segment with the probe, swapped ends and flags PSH+ACK, so
/// a stateful firewall's reverse direction can be timed like UDP.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EchoConfig {
    /// Name in counters and notes.
    pub name: Option<String>,
    /// UDP port to answer on.
    pub port: u16,
    /// Also answer TCP segments to `port` that carry a probe.
    #[serde(default)]
    pub tcp: bool,
}

/// A bulk TCP transfer (iperf-style) through the host's TCP stack.
///
/// ```toml
/// kind = "tcp"
/// dst = "10.0.1.1:5001"
/// bytes = "1GB"            # default: until the run ends
/// start = "1ms"            # default 0
/// src_port = 40000         # default: ephemeral (49152 up)
/// ```
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TcpSendConfig {
    /// Name in counters and notes.
    pub name: Option<String>,
    /// The receiver.
    pub dst: Option<SocketAddrV4>,
    /// Bytes to send (size); absent: send until the run ends.
    pub bytes: Option<Quantity>,
    /// When to connect (time). Default 0.
    pub start: Option<Quantity>,
    /// Local port (0 or absent: ephemeral).
    pub src_port: Option<u16>,
}

/// Accepts TCP connections on `port` and discards (and checks) the data.
///
/// ```toml
/// kind = "tcp_sink"
/// port = 5001
/// backlog = 4              # connections it can accept; default 1
/// ```
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TcpSinkConfig {
    /// Name in counters and notes.
    pub name: Option<String>,
    /// Port to listen on.
    pub port: u16,
    /// How many connections it accepts (one listening socket each).
    pub backlog: Option<usize>,
}

/// Why a host could not be built.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    /// The TOML did not parse (the message has the line).
    #[error("{0}")]
    Parse(String),
    /// A field has a bad value.
    #[error("{field}: {reason}")]
    Invalid {
        /// The field, e.g. `workload[1] "bg" (udp).rate`.
        field: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A capture file could not be read.
    #[error("{field}: cannot read capture {path:?}: {source}")]
    Capture {
        /// The field.
        field: String,
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: inca_wire::PcapError,
    },
}

/// A workload's `src_ports = [lo, hi]` (default 1024–65535), checked.
fn src_port_range(field: &str, ports: Option<[u16; 2]>) -> Result<(u16, u16), HostError> {
    match ports {
        Some([lo, hi]) if lo > hi || lo == 0 => Err(invalid(
            &format!("{field}.src_ports"),
            format!("[{lo}, {hi}] is not a range of non-zero ports"),
        )),
        Some([lo, hi]) => Ok((lo, hi)),
        None => Ok((1024, 65535)),
    }
}

fn invalid(field: &str, reason: impl Into<String>) -> HostError {
    HostError::Invalid {
        field: field.to_string(),
        reason: reason.into(),
    }
}

// ---------------------------------------------------------------------------
// Probe header.

/// The header at the start of every generated UDP payload (24 bytes, big
/// endian): magic `"INCA"` (4), flow index (4), sequence number (8), transmit
/// time in ns (8). A receiver computes one-way latency as its time minus the
/// transmit time (virtual time is global in the simulator).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Probe {
    /// Flow index within the generator (the workload index for requests).
    pub flow: u32,
    /// Sequence number within the generator.
    pub seq: u64,
    /// When the packet left the host, ns.
    pub tx_time: Nanos,
}

impl Probe {
    /// Writes the header into the first [`PROBE_LEN`] bytes of `buf`;
    /// `false` (and nothing written) if `buf` is shorter.
    pub fn write(&self, buf: &mut [u8]) -> bool {
        let Some(b) = buf.get_mut(..PROBE_LEN) else {
            return false;
        };
        b[0..4].copy_from_slice(&PROBE_MAGIC.to_be_bytes());
        b[4..8].copy_from_slice(&self.flow.to_be_bytes());
        b[8..16].copy_from_slice(&self.seq.to_be_bytes());
        b[16..24].copy_from_slice(&self.tx_time.to_be_bytes());
        true
    }

    /// Reads the header at the start of a UDP payload, if it is one.
    pub fn parse(payload: &[u8]) -> Option<Probe> {
        let b = payload.get(..PROBE_LEN)?;
        let u32_at = |i: usize| u32::from_be_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let u64_at = |i: usize| (u64::from(u32_at(i)) << 32) | u64::from(u32_at(i + 4));
        (u32_at(0) == PROBE_MAGIC).then(|| Probe {
            flow: u32_at(4),
            seq: u64_at(8),
            tx_time: u64_at(16),
        })
    }
}

// ---------------------------------------------------------------------------
// Distributions.

/// Zipf-distributed ranks `0..n` (rank `k` has probability
/// `(k+1)^-alpha / H(n, alpha)`), sampled in O(log n) by binary search in a
/// CDF computed once. `alpha = 0` is uniform.
#[derive(Debug, Clone)]
pub struct Zipf {
    cdf: Vec<f64>,
    alpha: f64,
}

impl Zipf {
    /// The distribution over `n` ranks (`n >= 1`) with skew `alpha`
    /// (finite, `>= 0`); `None` otherwise.
    pub fn new(n: usize, alpha: f64) -> Option<Zipf> {
        if n == 0 || !alpha.is_finite() || alpha < 0.0 {
            return None;
        }
        let mut cdf = Vec::with_capacity(n);
        let mut sum = 0.0f64;
        for k in 1..=n {
            sum += (k as f64).powf(-alpha);
            cdf.push(sum);
        }
        for c in &mut cdf {
            *c /= sum;
        }
        // Rounding may leave the last entry a hair under 1; a sample of
        // 0.9999999 must still land on a rank.
        if let Some(last) = cdf.last_mut() {
            *last = 1.0;
        }
        Some(Zipf { cdf, alpha })
    }

    /// Number of ranks.
    pub fn len(&self) -> usize {
        self.cdf.len()
    }

    /// Always false (a Zipf has at least one rank).
    pub fn is_empty(&self) -> bool {
        self.cdf.is_empty()
    }

    /// The skew.
    pub fn alpha(&self) -> f64 {
        self.alpha
    }

    /// Probability of rank `k` (0-based); 0 outside the range.
    pub fn probability(&self, k: usize) -> f64 {
        match k {
            0 => self.cdf.first().copied().unwrap_or(0.0),
            _ if k < self.cdf.len() => self.cdf[k] - self.cdf[k - 1],
            _ => 0.0,
        }
    }

    /// One rank.
    pub fn sample(&self, rng: &mut impl Rng) -> usize {
        let u: f64 = rng.gen();
        self.cdf
            .partition_point(|&c| c <= u)
            .min(self.cdf.len() - 1)
    }
}

/// A resolved packet-size distribution (frame bytes without FCS).
#[derive(Debug, Clone, PartialEq)]
pub enum SizeDist {
    /// Always this size.
    Fixed(usize),
    /// Uniform in `lo..=hi`.
    Uniform(usize, usize),
    /// `sizes[i]` with probability `weights[i] / total`; `cum` holds the
    /// running sums.
    Mix {
        /// The sizes.
        sizes: Vec<usize>,
        /// Running sums of the weights.
        cum: Vec<u64>,
    },
}

impl SizeDist {
    /// One size.
    pub fn sample(&self, rng: &mut impl Rng) -> usize {
        match self {
            SizeDist::Fixed(s) => *s,
            SizeDist::Uniform(lo, hi) => rng.gen_range(*lo..=*hi),
            SizeDist::Mix { sizes, cum } => {
                let total = cum.last().copied().unwrap_or(0);
                if total == 0 {
                    return sizes.first().copied().unwrap_or(MIN_PROBE_FRAME);
                }
                let x = rng.gen_range(0..total);
                let i = cum.partition_point(|&c| c <= x);
                sizes.get(i).copied().unwrap_or(MIN_PROBE_FRAME)
            }
        }
    }

    /// Smallest size.
    pub fn min(&self) -> usize {
        match self {
            SizeDist::Fixed(s) | SizeDist::Uniform(s, _) => *s,
            SizeDist::Mix { sizes, .. } => sizes.iter().copied().min().unwrap_or(MIN_PROBE_FRAME),
        }
    }

    /// Mean size.
    pub fn mean(&self) -> f64 {
        match self {
            SizeDist::Fixed(s) => *s as f64,
            SizeDist::Uniform(lo, hi) => (*lo + *hi) as f64 / 2.0,
            SizeDist::Mix { sizes, cum } => {
                let total = cum.last().copied().unwrap_or(0).max(1) as f64;
                let mut prev = 0;
                let mut m = 0.0;
                for (s, &c) in sizes.iter().zip(cum) {
                    m += *s as f64 * (c - prev) as f64 / total;
                    prev = c;
                }
                m
            }
        }
    }

    /// Resolves a configured distribution; sizes below [`MIN_PROBE_FRAME`]
    /// are raised to it (the returned flag says whether any was).
    fn resolve(spec: &SizeSpec, field: &str) -> Result<(SizeDist, bool), HostError> {
        let mut raised = false;
        let mut one = |q: &Quantity| -> Result<usize, HostError> {
            let v = q.parse(units::parse_size).ok_or_else(|| {
                invalid(
                    field,
                    format!("invalid size {q}: write e.g. 1000, 1500B, 9KiB"),
                )
            })?;
            if v == 0 || v > MAX_FRAME as u64 {
                return Err(invalid(
                    field,
                    format!("size {v} B is outside 1..={MAX_FRAME} B"),
                ));
            }
            let v = v as usize;
            if v < MIN_PROBE_FRAME {
                raised = true;
            }
            Ok(v.max(MIN_PROBE_FRAME))
        };
        let dist = match spec {
            SizeSpec::Fixed(q) => SizeDist::Fixed(one(q)?),
            SizeSpec::Uniform(lo, hi) => {
                let (lo, hi) = (one(lo)?, one(hi)?);
                if lo > hi {
                    return Err(invalid(field, format!("uniform [{lo}, {hi}]: lo > hi")));
                }
                SizeDist::Uniform(lo, hi)
            }
            SizeSpec::Mix(entries) => {
                if entries.is_empty() {
                    return Err(invalid(field, "mix is empty"));
                }
                let mut sizes = Vec::with_capacity(entries.len());
                let mut cum = Vec::with_capacity(entries.len());
                let mut total = 0u64;
                for (q, w) in entries {
                    sizes.push(one(q)?);
                    total = total
                        .checked_add(*w)
                        .ok_or_else(|| invalid(field, "mix weights overflow"))?;
                    cum.push(total);
                }
                if total == 0 {
                    return Err(invalid(field, "mix weights are all 0"));
                }
                SizeDist::Mix { sizes, cum }
            }
        };
        Ok((dist, raised))
    }
}

// ---------------------------------------------------------------------------
// Resolved (persistent) configuration.

/// How a generator spaces its packets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pace {
    /// Wire bits per second.
    Bits(u64),
    /// Packets per second.
    Pps(u64),
}

impl Pace {
    /// Offset from the generator's origin of packet `i`, the packets before
    /// it having `bits_before` wire bits: exact, from `i`, never accumulated.
    fn offset(self, i: u64, bits_before: u128) -> Nanos {
        let v = match self {
            Pace::Bits(bps) => bits_before * 1_000_000_000 / u128::from(bps.max(1)),
            Pace::Pps(pps) => u128::from(i) * 1_000_000_000 / u128::from(pps.max(1)),
        };
        u64::try_from(v).unwrap_or(Nanos::MAX)
    }
}

/// Wire bits of a frame of `len` bytes.
fn wire_bits(len: usize) -> u128 {
    (len as u128 + u128::from(WIRE_OVERHEAD_BYTES)) * 8
}

/// When, how fast and how many: the schedule shared by `udp` and `request`.
#[derive(Debug, Clone)]
struct Schedule {
    pace: Pace,
    size: SizeDist,
    start: Nanos,
    stop: Option<Nanos>,
    count: Option<u64>,
}

#[derive(Debug, Clone)]
enum FlowPlan {
    Single {
        src_port: u16,
    },
    Random {
        n: usize,
        ports: (u16, u16),
        /// (network, prefix length) of random source addresses.
        prefix: Option<(u32, u8)>,
        zipf: Option<Arc<Zipf>>,
    },
    /// A new 5-tuple per packet: packet i uses source i of the space.
    Fresh {
        prefix: (Ipv4Addr, u8),
        ports: (u16, u16),
    },
    /// Round robin over fixed sources.
    List {
        sources: Arc<Vec<(Ipv4Addr, u16)>>,
    },
}

#[derive(Debug, Clone)]
struct UdpPlan {
    /// Whether payloads start with a probe (attack workloads send none).
    probe: bool,
    /// TCP or UDP, VXLAN or not.
    shape: Shape,
    /// With `flows_at = "dst"`: the source port; the flows are destinations.
    dst_flows: Option<u16>,
    dst: SocketAddrV4,
    sched: Schedule,
    flows: FlowPlan,
    vlan: Option<u16>,
    /// GTP-U's outer destination (with `shape.gtpu`).
    gtpu_sgw: Option<Ipv4Addr>,
    /// Session signalling.
    gtpc: Option<Gtpc>,
}

/// A `udp` workload's session signalling (see [`UdpConfig`]).
#[derive(Debug, Clone, Copy)]
struct Gtpc {
    /// Every this-th packet is signalling (0: none but the first).
    every: u64,
    format: GtpcFormat,
    /// Each UE's first packet is its session message.
    attach: bool,
}

#[derive(Debug, Clone)]
struct PcapPlan {
    frames: Arc<Vec<Vec<u8>>>,
    /// Send offset of each frame within a pass, already divided by speedup.
    offsets: Arc<Vec<Nanos>>,
    /// Length of one pass (scaled), > the last offset.
    period: Nanos,
    looped: bool,
    start: Nanos,
    stop: Option<Nanos>,
    count: Option<u64>,
}

#[derive(Debug, Clone)]
struct RequestPlan {
    server: SocketAddrV4,
    src_port: u16,
    sched: Schedule,
    timeout: Nanos,
    max_outstanding: usize,
}

#[derive(Debug, Clone)]
enum Kind {
    Udp(UdpPlan),
    Pcap(PcapPlan),
    Request(RequestPlan),
    Echo {
        port: u16,
        /// Also answer TCP segments carrying a probe.
        tcp: bool,
    },
    TcpSend {
        dst: SocketAddrV4,
        bytes: Option<u64>,
        start: Nanos,
        src_port: u16,
    },
    TcpSink {
        port: u16,
        backlog: usize,
    },
}

#[derive(Debug, Clone)]
struct Workload {
    name: String,
    kind: Kind,
}

/// Everything a restart keeps.
#[derive(Debug, Clone)]
struct Plan {
    ip: Ipv4Addr,
    prefix_len: u8,
    gateway: Ipv4Addr,
    mac: MacAddr,
    gateway_mac: MacAddr,
    bin: Nanos,
    tcp: TcpConfig,
    workloads: Vec<Workload>,
    /// Indices of request workloads and echo workloads, for the receive path.
    requests: Vec<usize>,
    echoes: Vec<(u16, usize)>,
    has_tcp: bool,
    notes: Vec<String>,
}

fn parse_time_field(q: &Quantity, field: &str) -> Result<Nanos, HostError> {
    q.parse(units::parse_time).ok_or_else(|| {
        invalid(
            field,
            format!("invalid time {q}: write e.g. 1500, 20us, 1.5ms, 2s"),
        )
    })
}

fn parse_prefix(s: &str) -> Option<(u32, u8)> {
    let (ip, len) = s.split_once('/')?;
    let ip: Ipv4Addr = ip.trim().parse().ok()?;
    let len: u8 = len.trim().parse().ok()?;
    if len > 32 {
        return None;
    }
    let mask = prefix_mask(len);
    Some((u32::from(ip) & mask, len))
}

fn prefix_mask(len: u8) -> u32 {
    if len == 0 {
        0
    } else {
        u32::MAX << (32 - u32::from(len.min(32)))
    }
}

#[allow(clippy::too_many_arguments)]
fn resolve_schedule(
    field: &str,
    rate: &Option<Quantity>,
    pps: Option<u64>,
    size: &Option<SizeSpec>,
    start: &Option<Quantity>,
    stop: &Option<Quantity>,
    count: Option<u64>,
    link_rate: u64,
    notes: &mut Vec<String>,
) -> Result<Schedule, HostError> {
    let pace = match (rate, pps) {
        (Some(_), Some(_)) => return Err(invalid(field, "give rate or pps, not both")),
        (None, None) => return Err(invalid(field, "needs rate (\"10Gbps\", \"line\") or pps")),
        (Some(q), None) => {
            let f = format!("{field}.rate");
            let bps = match q {
                Quantity::Text(s) if s.trim() == "line" => {
                    if link_rate == 0 {
                        return Err(invalid(&f, "\"line\" but the host's link rate is 0"));
                    }
                    link_rate
                }
                _ => q.parse(units::parse_rate).ok_or_else(|| {
                    invalid(
                        &f,
                        format!("invalid rate {q}: write e.g. 10Gbps, 400M, \"line\""),
                    )
                })?,
            };
            if bps == 0 || bps > MAX_RATE_BPS {
                return Err(invalid(
                    &f,
                    format!("rate {bps} bps is outside 1..={MAX_RATE_BPS}"),
                ));
            }
            Pace::Bits(bps)
        }
        (None, Some(p)) => {
            if p == 0 || p > MAX_PPS {
                return Err(invalid(
                    &format!("{field}.pps"),
                    format!("{p} is outside 1..={MAX_PPS}"),
                ));
            }
            Pace::Pps(p)
        }
    };
    let (size, raised) = match size {
        Some(s) => SizeDist::resolve(s, &format!("{field}.size"))?,
        None => (SizeDist::Fixed(1000), false),
    };
    if raised {
        notes.push(format!(
            "{field}: sizes below {MIN_PROBE_FRAME} B raised to {MIN_PROBE_FRAME} B (headers + probe)"
        ));
    }
    let start = match start {
        Some(q) => parse_time_field(q, &format!("{field}.start"))?,
        None => 0,
    };
    let stop = match stop {
        Some(q) => Some(parse_time_field(q, &format!("{field}.stop"))?),
        None => None,
    };
    Ok(Schedule {
        pace,
        size,
        start,
        stop,
        count,
    })
}

impl Plan {
    fn new(
        config: HostConfig,
        mac: MacAddr,
        gateway_mac: MacAddr,
        link_rate: u64,
    ) -> Result<Plan, HostError> {
        if config.prefix_len > 32 {
            return Err(invalid("prefix_len", format!("{} > 32", config.prefix_len)));
        }
        let gateway = config.gateway.unwrap_or_else(|| {
            let net = u32::from(config.ip) & prefix_mask(config.prefix_len);
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
            let default_port = DEFAULT_UDP_PORT_BASE.saturating_add(i as u16);
            let kind = match w {
                WorkloadConfig::Udp(c) => {
                    let dst = c
                        .dst
                        .ok_or_else(|| invalid(&format!("{field}.dst"), "missing (ip:port)"))?;
                    let sched = resolve_schedule(
                        &field, &c.rate, c.pps, &c.size, &c.start, &c.stop, c.count, link_rate,
                        &mut notes,
                    )?;
                    let flows = match c.flows {
                        None => {
                            for (set, f) in [
                                (c.zipf.is_some(), "zipf"),
                                (c.src_ports.is_some(), "src_ports"),
                                (c.src_prefix.is_some(), "src_prefix"),
                            ] {
                                if set {
                                    return Err(invalid(
                                        &format!("{field}.{f}"),
                                        "only with flows = N",
                                    ));
                                }
                            }
                            FlowPlan::Single {
                                src_port: c.src_port.unwrap_or(default_port),
                            }
                        }
                        Some(n) => {
                            let ff = format!("{field}.flows");
                            if n == 0 || n > MAX_FLOWS {
                                return Err(invalid(
                                    &ff,
                                    format!("{n} is outside 1..={MAX_FLOWS}"),
                                ));
                            }
                            if c.src_port.is_some() && c.flows_at != Some(FlowsAt::Dst) {
                                return Err(invalid(
                                    &format!("{field}.src_port"),
                                    "with flows = N use src_ports (or flows_at = \"dst\")",
                                ));
                            }
                            let ports = src_port_range(&field, c.src_ports)?;
                            let prefix = match &c.src_prefix {
                                Some(s) => Some(parse_prefix(s).ok_or_else(|| {
                                    invalid(
                                        &format!("{field}.src_prefix"),
                                        format!("{s:?} is not a.b.c.d/len"),
                                    )
                                })?),
                                None => None,
                            };
                            let space = u64::from(ports.1 - ports.0 + 1)
                                * prefix.map_or(1, |(_, len)| 1u64 << (32 - u32::from(len)));
                            if n > space {
                                return Err(invalid(
                                    &ff,
                                    format!("{n} distinct 5-tuples do not fit in {space} (widen src_ports or src_prefix)"),
                                ));
                            }
                            let zipf = match c.zipf {
                                Some(a) => {
                                    Some(Arc::new(Zipf::new(n as usize, a).ok_or_else(|| {
                                        invalid(
                                            &format!("{field}.zipf"),
                                            format!("{a} is not a finite skew >= 0"),
                                        )
                                    })?))
                                }
                                None => None,
                            };
                            FlowPlan::Random {
                                n: n as usize,
                                ports,
                                prefix,
                                zipf,
                            }
                        }
                    };
                    let vlan = match c.vlan {
                        Some(v) if !(1..=4094).contains(&v) => {
                            return Err(invalid(
                                &format!("{field}.vlan"),
                                format!("{v} is outside 1..=4094"),
                            ))
                        }
                        v => v,
                    };
                    let dst_flows = match c.flows_at.unwrap_or_default() {
                        FlowsAt::Src => None,
                        FlowsAt::Dst if c.flows.is_none() => {
                            return Err(invalid(
                                &format!("{field}.flows_at"),
                                "\"dst\" only with flows = N",
                            ))
                        }
                        FlowsAt::Dst => Some(c.src_port.unwrap_or(default_port)),
                    };
                    let vxlan = match c.vxlan_vni {
                        Some(v) if v > 0x00ff_ffff => {
                            return Err(invalid(
                                &format!("{field}.vxlan_vni"),
                                format!("{v} does not fit in 24 bits"),
                            ))
                        }
                        v => v,
                    };
                    if c.gtpu_teid.is_some() && vxlan.is_some() {
                        return Err(invalid(
                            &format!("{field}.gtpu_teid"),
                            "not with vxlan_vni (one tunnel at a time)",
                        ));
                    }
                    for (set, f) in [
                        (c.gtpu_sgw.is_some(), "gtpu_sgw"),
                        (c.gtpc_every.is_some(), "gtpc_every"),
                        (c.gtpc_format.is_some(), "gtpc_format"),
                        (c.gtpc_attach.is_some(), "gtpc_attach"),
                    ] {
                        if set && c.gtpu_teid.is_none() {
                            return Err(invalid(&format!("{field}.{f}"), "only with gtpu_teid"));
                        }
                    }
                    let gtpu_sgw = c.gtpu_sgw;
                    let gtpc = c.gtpc_every.map(|every| Gtpc {
                        every,
                        format: c.gtpc_format.unwrap_or_default(),
                        attach: c.gtpc_attach.unwrap_or(true),
                    });
                    let shape = Shape {
                        l4: c.tcp_flags.map_or(L4::Udp, L4::Tcp),
                        vxlan,
                        gtpu: c.gtpu_teid,
                    };
                    let least = shape.headers() + PROBE_LEN;
                    if !shape.is_plain() && sched.size.min() < least {
                        notes.push(format!(
                            "{name}: frames smaller than {least} B are raised to {least} B (headers and probe)"
                        ));
                    }
                    Kind::Udp(UdpPlan {
                        probe: true,
                        shape,
                        dst_flows,
                        dst,
                        sched,
                        flows,
                        vlan,
                        gtpu_sgw,
                        gtpc,
                    })
                }
                WorkloadConfig::NewFlows(c) => {
                    let dst = c
                        .dst
                        .ok_or_else(|| invalid(&format!("{field}.dst"), "missing (ip:port)"))?;
                    let sched = resolve_schedule(
                        &field, &c.rate, c.pps, &c.size, &c.start, &c.stop, c.count, link_rate,
                        &mut notes,
                    )?;
                    let pf = format!("{field}.src_prefix");
                    let prefix = c
                        .src_prefix
                        .as_deref()
                        .ok_or_else(|| invalid(&pf, "missing (a.b.c.d/len)"))
                        .and_then(|s| {
                            super::attack::parse_prefix(s)
                                .ok_or_else(|| invalid(&pf, format!("{s:?} is not a.b.c.d/len")))
                        })?;
                    let ports = src_port_range(&field, c.src_ports)?;
                    notes.push(format!(
                        "{name}: new-flow flood over {} sources; later packets reuse them",
                        super::attack::space(prefix, ports)
                    ));
                    Kind::Udp(UdpPlan {
                        probe: false,
                        shape: Shape::default(),
                        dst_flows: None,
                        dst,
                        sched,
                        flows: FlowPlan::Fresh { prefix, ports },
                        vlan: None,
                        gtpu_sgw: None,
                        gtpc: None,
                    })
                }
                WorkloadConfig::Tuples(c) => {
                    let dst = c
                        .dst
                        .ok_or_else(|| invalid(&format!("{field}.dst"), "missing (ip:port)"))?;
                    let sched = resolve_schedule(
                        &field, &c.rate, c.pps, &c.size, &c.start, &c.stop, c.count, link_rate,
                        &mut notes,
                    )?;
                    if c.craft.is_some() {
                        return Err(invalid(
                            &format!("{field}.craft"),
                            "crafted sources are computed by a scenario (its factory knows the target switch)",
                        ));
                    }
                    if c.sources.is_empty() || c.sources.len() > super::attack::MAX_SOURCES {
                        return Err(invalid(
                            &format!("{field}.sources"),
                            format!(
                                "{} sources; give 1..={}",
                                c.sources.len(),
                                super::attack::MAX_SOURCES
                            ),
                        ));
                    }
                    Kind::Udp(UdpPlan {
                        probe: false,
                        shape: Shape::default(),
                        dst_flows: None,
                        dst,
                        sched,
                        flows: FlowPlan::List {
                            sources: Arc::new(
                                c.sources.iter().map(|s| (*s.ip(), s.port())).collect(),
                            ),
                        },
                        vlan: None,
                        gtpu_sgw: None,
                        gtpc: None,
                    })
                }
                WorkloadConfig::Pcap(c) => {
                    let frames =
                        inca_wire::read_capture(&c.file).map_err(|source| HostError::Capture {
                            field: format!("{field}.file"),
                            path: c.file.clone(),
                            source,
                        })?;
                    if frames.is_empty() {
                        return Err(invalid(
                            &format!("{field}.file"),
                            format!("{:?} holds no frames", c.file),
                        ));
                    }
                    let speedup = c.speedup.unwrap_or(1.0);
                    if !(speedup.is_finite() && speedup > 0.0) {
                        return Err(invalid(
                            &format!("{field}.speedup"),
                            format!("{speedup} is not > 0"),
                        ));
                    }
                    let first = frames.iter().map(|f| f.0).min().unwrap_or(0);
                    // Captures are normally in time order; one that is not is
                    // replayed in file order with each frame no earlier than
                    // the one before (times on a port never go backwards).
                    let mut raw = Vec::with_capacity(frames.len());
                    let mut last = 0;
                    for (t, _) in &frames {
                        last = last.max(t - first);
                        raw.push(last);
                    }
                    let span = last;
                    let n = frames.len() as u64;
                    let gap = if n > 1 { span / (n - 1) } else { 0 }.max(1);
                    let scale = |v: Nanos| (v as f64 / speedup) as Nanos;
                    let offsets: Vec<Nanos> = raw.iter().map(|&v| scale(v)).collect();
                    let last_off = offsets.last().copied().unwrap_or(0);
                    let period = scale(span.saturating_add(gap)).max(last_off.saturating_add(1));
                    let start = match &c.start {
                        Some(q) => parse_time_field(q, &format!("{field}.start"))?,
                        None => 0,
                    };
                    let stop = match &c.stop {
                        Some(q) => Some(parse_time_field(q, &format!("{field}.stop"))?),
                        None => None,
                    };
                    notes.push(format!(
                        "{name}: replaying {} frames from {} at speedup {speedup}{}",
                        frames.len(),
                        c.file.display(),
                        if c.looped { ", looped" } else { "" }
                    ));
                    Kind::Pcap(PcapPlan {
                        frames: Arc::new(frames.into_iter().map(|f| f.1).collect()),
                        offsets: Arc::new(offsets),
                        period,
                        looped: c.looped,
                        start,
                        stop,
                        count: c.count,
                    })
                }
                WorkloadConfig::Request(c) => {
                    let server = c
                        .server
                        .ok_or_else(|| invalid(&format!("{field}.server"), "missing (ip:port)"))?;
                    let sched = resolve_schedule(
                        &field, &c.rate, c.pps, &c.size, &c.start, &c.stop, c.count, link_rate,
                        &mut notes,
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
                    Kind::Request(RequestPlan {
                        server,
                        src_port: c.src_port.unwrap_or(default_port),
                        sched,
                        timeout,
                        max_outstanding,
                    })
                }
                WorkloadConfig::Echo(c) => Kind::Echo {
                    port: c.port,
                    tcp: c.tcp,
                },
                WorkloadConfig::Tcp(c) => {
                    let dst = c
                        .dst
                        .ok_or_else(|| invalid(&format!("{field}.dst"), "missing (ip:port)"))?;
                    let bytes = match &c.bytes {
                        Some(q) => Some(q.parse(units::parse_size).ok_or_else(|| {
                            invalid(
                                &format!("{field}.bytes"),
                                format!("invalid size {q}: write e.g. 1GB, 64MiB"),
                            )
                        })?),
                        None => None,
                    };
                    let start = match &c.start {
                        Some(q) => parse_time_field(q, &format!("{field}.start"))?,
                        None => 0,
                    };
                    Kind::TcpSend {
                        dst,
                        bytes,
                        start,
                        src_port: c.src_port.unwrap_or(0),
                    }
                }
                WorkloadConfig::TcpSink(c) => {
                    let backlog = c.backlog.unwrap_or(1);
                    if backlog == 0 || backlog > MAX_BACKLOG {
                        return Err(invalid(
                            &format!("{field}.backlog"),
                            format!("{backlog} is outside 1..={MAX_BACKLOG}"),
                        ));
                    }
                    if c.port == 0 {
                        return Err(invalid(&format!("{field}.port"), "must be > 0"));
                    }
                    Kind::TcpSink {
                        port: c.port,
                        backlog,
                    }
                }
            };
            workloads.push(Workload { name, kind });
        }
        let requests = (0..workloads.len())
            .filter(|&i| matches!(workloads[i].kind, Kind::Request(_)))
            .collect();
        let echoes = (0..workloads.len())
            .filter_map(|i| match workloads[i].kind {
                Kind::Echo { port, .. } => Some((port, i)),
                _ => None,
            })
            .collect();
        let has_tcp = workloads
            .iter()
            .any(|w| matches!(w.kind, Kind::TcpSend { .. } | Kind::TcpSink { .. }));
        Ok(Plan {
            ip: config.ip,
            prefix_len: config.prefix_len,
            gateway,
            mac,
            gateway_mac,
            bin,
            tcp: config.tcp,
            workloads,
            requests,
            echoes,
            has_tcp,
            notes,
        })
    }

    fn endpoints(&self, src: Ipv4Addr, dst: Ipv4Addr) -> Endpoints {
        Endpoints::new(self.mac, src, self.gateway_mac, dst)
    }
}

// ---------------------------------------------------------------------------
// Volatile state.

/// Progress of a paced generator: packets sent and their wire bits, from
/// which the next send time is computed exactly.
#[derive(Debug, Clone, Copy)]
struct Clock {
    origin: Nanos,
    sent: u64,
    bits: u128,
}

impl Clock {
    fn next(&self, s: &Schedule) -> Option<Nanos> {
        if s.count.is_some_and(|c| self.sent >= c) {
            return None;
        }
        let t = self
            .origin
            .saturating_add(s.pace.offset(self.sent, self.bits));
        (s.stop.is_none_or(|stop| t < stop) && t != Nanos::MAX).then_some(t)
    }

    fn advance(&mut self, len: usize) {
        self.sent += 1;
        self.bits += wire_bits(len);
    }
}

/// What became of a response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Answer {
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
struct Outstanding {
    base: u64,
    slots: VecDeque<Option<Nanos>>,
}

impl Outstanding {
    /// Records request `base + len` sent at `at`; returns how many waiting
    /// requests were given up to stay within `limit`.
    fn push(&mut self, at: Nanos, limit: usize) -> u64 {
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

    fn next_seq(&self) -> u64 {
        self.base + self.slots.len() as u64
    }

    fn prune(&mut self) {
        while let Some(None) = self.slots.front() {
            self.slots.pop_front();
            self.base += 1;
        }
    }

    fn answer(&mut self, seq: u64) -> Answer {
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
    fn expire(&mut self, now: Nanos, timeout: Nanos) -> u64 {
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

    fn deadline(&self, timeout: Nanos) -> Option<Nanos> {
        self.slots
            .front()
            .copied()
            .flatten()
            .map(|t| t.saturating_add(timeout))
    }
}

#[derive(Debug)]
enum Gen {
    /// Not a generator (echo, TCP), or finished setting up nothing.
    Idle,
    Udp {
        clock: Clock,
        /// Random 5-tuples' (source address, source port); empty for a
        /// single flow.
        flows: Vec<(Ipv4Addr, u16)>,
        /// With session signalling: which flows (UEs) have had theirs
        /// (one entry per flow, at most `MAX_FLOWS`).
        signalled: Vec<bool>,
    },
    Pcap {
        origin: Nanos,
        pass: u64,
        idx: usize,
        sent: u64,
    },
    Request {
        clock: Clock,
        outstanding: Outstanding,
    },
}

/// Everything a restart loses.
#[derive(Debug)]
struct State {
    /// Boot (0) or restart time: workloads start no earlier.
    anchor: Nanos,
    initialized: bool,
    gens: Vec<Gen>,
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
            gens: Vec::new(),
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
// Measurements.

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
    /// Control messages (a host has none, so they are counted and ignored).
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
}

// ---------------------------------------------------------------------------
// The host.

/// A simulated host. See the module documentation.
#[derive(Debug)]
pub struct Host {
    plan: Plan,
    state: State,
    metrics: Metrics,
}

impl Host {
    /// Builds a host from its configuration, its own MAC, the MAC at the
    /// other end of its link, and its link's rate in bits/s (what
    /// `rate = "line"` means). Fails with an error naming the field.
    pub fn new(
        config: HostConfig,
        mac: MacAddr,
        gateway_mac: MacAddr,
        link_rate: u64,
    ) -> Result<Host, HostError> {
        let plan = Plan::new(config, mac, gateway_mac, link_rate)?;
        let metrics = Metrics {
            stats: HostStats::default(),
            workloads: vec![WorkloadStats::default(); plan.workloads.len()],
            latency: LatencyHistogram::default(),
            rtt: LatencyHistogram::default(),
            rx_series: Series::new(plan.bin),
            rx_packet_series: Series::new(plan.bin),
            latency_range: None,
            rtt_range: None,
            archived_flows: Vec::new(),
            archived_dropped: 0,
            tcp_malformed_before: 0,
        };
        Ok(Host {
            plan,
            state: State::new(0),
            metrics,
        })
    }

    /// The host's address.
    pub fn ip(&self) -> Ipv4Addr {
        self.plan.ip
    }

    /// The host's MAC.
    pub fn mac(&self) -> MacAddr {
        self.plan.mac
    }

    /// Host-wide counters.
    pub fn stats(&self) -> &HostStats {
        &self.metrics.stats
    }

    /// Counters of the workload named `name` ("udp0" for the first workload
    /// when it is an unnamed `udp`).
    pub fn workload_stats(&self, name: &str) -> Option<&WorkloadStats> {
        let i = self.plan.workloads.iter().position(|w| w.name == name)?;
        self.metrics.workloads.get(i)
    }

    /// Names of the workloads, in configuration order.
    pub fn workload_names(&self) -> impl Iterator<Item = &str> {
        self.plan.workloads.iter().map(|w| w.name.as_str())
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
    /// gets the RNG).
    fn ensure_init(&mut self, now: Nanos, rng: &mut DeviceRng) {
        if self.state.initialized {
            return;
        }
        let Host { plan, state, .. } = self;
        state.initialized = true;
        let anchor = state.anchor;
        state.gens.clear();
        for (i, w) in plan.workloads.iter().enumerate() {
            let gen = match &w.kind {
                Kind::Udp(p) => {
                    let flows = match &p.flows {
                        FlowPlan::Single { .. }
                        | FlowPlan::Fresh { .. }
                        | FlowPlan::List { .. } => Vec::new(),
                        FlowPlan::Random {
                            n, ports, prefix, ..
                        } => draw_flows(*n, *ports, *prefix, plan.ip, rng),
                    };
                    let signalled = match p.gtpc {
                        Some(_) => vec![false; flows.len().max(1)],
                        None => Vec::new(),
                    };
                    Gen::Udp {
                        clock: Clock {
                            origin: p.sched.start.max(anchor),
                            sent: 0,
                            bits: 0,
                        },
                        flows,
                        signalled,
                    }
                }
                Kind::Pcap(p) => Gen::Pcap {
                    origin: p.start.max(anchor),
                    pass: 0,
                    idx: 0,
                    sent: 0,
                },
                Kind::Request(p) => Gen::Request {
                    clock: Clock {
                        origin: p.sched.start.max(anchor),
                        sent: 0,
                        bits: 0,
                    },
                    outstanding: Outstanding::default(),
                },
                _ => Gen::Idle,
            };
            if let Some(t) = next_time(&w.kind, &gen) {
                state.agenda.push(Reverse((t, i)));
            }
            state.gens.push(gen);
        }
        if plan.has_tcp {
            let mut cfg = plan.tcp.clone();
            // Mixed with the configured seed so two runs with different run
            // seeds get different initial sequence numbers.
            cfg.seed ^= rng.gen::<u64>();
            let mut stack = TcpStack::new(plan.ip, plan.prefix_len, plan.gateway, cfg);
            for (i, w) in plan.workloads.iter().enumerate() {
                match w.kind {
                    Kind::TcpSend {
                        dst,
                        bytes,
                        start,
                        src_port,
                    } => {
                        let id = stack.bulk_send(
                            start.max(anchor),
                            src_port,
                            (*dst.ip(), dst.port()),
                            bytes,
                        );
                        state.tcp_flows.push((i, id));
                    }
                    Kind::TcpSink { port, backlog } => {
                        for id in stack.sink(port, backlog) {
                            state.tcp_flows.push((i, id));
                        }
                    }
                    _ => {}
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
                    Some(stack) if ip.dst_addr() == self.plan.ip => {
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

    /// Answers a generated TCP segment carrying a probe if an echo with
    /// `tcp` listens on its destination port (see [`EchoConfig`]).
    fn echo_tcp(&mut self, now: Nanos, ip: &Ipv4Packet<&[u8]>, out: &mut Vec<Output>) {
        let Ok(seg) = inca_wire::TcpSegment::new_checked(ip.payload()) else {
            return;
        };
        let dport = seg.dst_port();
        let Some(&(_, w)) = self.plan.echoes.iter().find(|(port, w)| {
            *port == dport && matches!(self.plan.workloads[*w].kind, Kind::Echo { tcp: true, .. })
        }) else {
            return;
        };
        let Some(payload) = encap::tcp_payload(ip.payload()) else {
            return;
        };
        let shape = Shape {
            l4: L4::Tcp(0x18),
            ..Shape::default()
        };
        let ep = self.plan.endpoints(ip.dst_addr(), ip.src_addr());
        let Some(frame) = shape.build(
            &ep,
            ip.dst_addr(),
            dport,
            ip.src_addr(),
            seg.src_port(),
            payload,
        ) else {
            return;
        };
        let m = &mut self.metrics;
        let ws = &mut m.workloads[w];
        ws.tx_packets += 1;
        ws.tx_bytes += frame.len() as u64;
        m.stats.tx_packets += 1;
        m.stats.tx_bytes += frame.len() as u64;
        out.push(Output::Transmit {
            at: now,
            port: 0,
            frame,
        });
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
            state,
            metrics,
        } = self;
        let Some(probe) = Probe::parse(payload) else {
            metrics.stats.rx_udp_plain += 1;
            return;
        };
        metrics.stats.rx_probes += 1;
        // A response to one of our request clients?
        for &w in &plan.requests {
            let Kind::Request(p) = &plan.workloads[w].kind else {
                continue;
            };
            if dport != p.src_port || src != *p.server.ip() || sport != p.server.port() {
                continue;
            }
            let ws = &mut metrics.workloads[w];
            let Some(Gen::Request { outstanding, .. }) = state.gens.get_mut(w) else {
                // Before this life's first wake-up: nothing was sent yet.
                ws.unknown += 1;
                return;
            };
            match outstanding.answer(probe.seq) {
                Answer::Matched(sent) => {
                    let rtt = now.saturating_sub(sent);
                    ws.responses += 1;
                    ws.rtt.record(rtt);
                    metrics.rtt.record(rtt);
                    widen(&mut metrics.rtt_range, rtt);
                }
                Answer::Duplicate => ws.duplicate += 1,
                Answer::Late => ws.late += 1,
                Answer::Unknown => ws.unknown += 1,
            }
            return;
        }
        record_latency(metrics, now, &probe);
        if let Some(&(_, w)) = plan.echoes.iter().find(|(port, _)| *port == dport) {
            // Any destination address is answered: links are point to point,
            // and a load balancer may have delivered a virtual address.
            let ep = plan.endpoints(dst, src);
            if let Ok(frame) = build_udp_frame(&ep, dport, sport, payload, true) {
                let ws = &mut metrics.workloads[w];
                ws.tx_packets += 1;
                ws.tx_bytes += frame.len() as u64;
                metrics.stats.tx_packets += 1;
                metrics.stats.tx_bytes += frame.len() as u64;
                out.push(Output::Transmit {
                    at: now,
                    port: 0,
                    frame,
                });
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
            state,
            metrics,
        } = self;
        for &w in &plan.requests {
            if let (Kind::Request(p), Some(Gen::Request { outstanding, .. })) =
                (&plan.workloads[w].kind, state.gens.get_mut(w))
            {
                metrics.workloads[w].lost += outstanding.expire(now, p.timeout);
            }
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
            let (Some(wl), Some(gen)) = (plan.workloads.get(w), state.gens.get_mut(w)) else {
                continue;
            };
            let ws = &mut metrics.workloads[w];
            let frame = step(plan, wl, gen, w, send, now, rng, &mut state.scratch, ws);
            if let Some(frame) = frame {
                ws.tx_packets += 1;
                ws.tx_bytes += frame.len() as u64;
                metrics.stats.tx_packets += 1;
                metrics.stats.tx_bytes += frame.len() as u64;
                out.push(Output::Transmit {
                    at: now,
                    port: 0,
                    frame,
                });
            } else if !send {
                ws.missed += 1;
            }
            if let Some(next) = next_time(&wl.kind, gen) {
                state.agenda.push(Reverse((next, w)));
            }
        }
        if let Some(stack) = &mut state.tcp {
            if tcp_touched || state.tcp_due.is_some_and(|d| d <= now) {
                stack.poll(now, &mut state.packets);
                for p in state.packets.drain(..) {
                    let mut frame = Vec::with_capacity(14 + p.len());
                    frame.extend_from_slice(&plan.gateway_mac);
                    frame.extend_from_slice(&plan.mac);
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

    /// Asks to be woken at the earliest thing the host waits for, unless an
    /// earlier wake-up is already pending (an early wake-up is harmless: it
    /// finds nothing due and asks again).
    fn arm(&mut self, now: Nanos, out: &mut Vec<Output>) {
        let Host { plan, state, .. } = self;
        let mut next = state.agenda.peek().map(|r| r.0 .0);
        let mut consider = |t: Option<Nanos>| {
            if let Some(t) = t {
                next = Some(next.map_or(t, |n| n.min(t)));
            }
        };
        consider(state.tcp_due);
        for &w in &plan.requests {
            if let (Kind::Request(p), Some(Gen::Request { outstanding, .. })) =
                (&plan.workloads[w].kind, state.gens.get(w))
            {
                consider(outstanding.deadline(p.timeout));
            }
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
                .plan
                .workloads
                .get(w)
                .map_or_else(String::new, |w| w.name.clone());
            self.metrics.archived_flows.push((life, name, f.clone()));
        }
    }
}

/// A probe that is no request's response: counted, and its one-way latency
/// recorded.
fn record_one_way(m: &mut Metrics, now: Nanos, probe: &Probe) {
    m.stats.rx_probes += 1;
    record_latency(m, now, probe);
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

/// Draws `n` distinct random (source address, source port) pairs.
fn draw_flows(
    n: usize,
    ports: (u16, u16),
    prefix: Option<(u32, u8)>,
    ip: Ipv4Addr,
    rng: &mut DeviceRng,
) -> Vec<(Ipv4Addr, u16)> {
    let mut seen = HashSet::with_capacity(n);
    let mut flows = Vec::with_capacity(n);
    let space = u64::from(ports.1 - ports.0 + 1)
        * prefix.map_or(1, |(_, len)| 1u64 << (32 - u32::from(len)));
    // Rejection sampling terminates quickly unless n is close to the space
    // (validated <= space); the cap is a guard, and the (rare) remainder is
    // filled by walking the space in order.
    let cap = (n as u64).saturating_mul(64).saturating_add(1 << 16);
    let mut tries = 0u64;
    let pick = |k: u64| -> (Ipv4Addr, u16) {
        let nports = u64::from(ports.1 - ports.0 + 1);
        let port = ports.0 + (k % nports) as u16;
        let addr = match prefix {
            Some((net, len)) => Ipv4Addr::from(net | ((k / nports) as u32 & !prefix_mask(len))),
            None => ip,
        };
        (addr, port)
    };
    while flows.len() < n && tries < cap {
        tries += 1;
        let k = rng.gen_range(0..space);
        if seen.insert(k) {
            flows.push(pick(k));
        }
    }
    let mut k = 0;
    while flows.len() < n && k < space {
        if seen.insert(k) {
            flows.push(pick(k));
        }
        k += 1;
    }
    flows
}

/// When a generator sends next, if it still does.
fn next_time(kind: &Kind, gen: &Gen) -> Option<Nanos> {
    match (kind, gen) {
        (Kind::Udp(p), Gen::Udp { clock, .. }) => clock.next(&p.sched),
        (Kind::Request(p), Gen::Request { clock, .. }) => clock.next(&p.sched),
        (
            Kind::Pcap(p),
            Gen::Pcap {
                origin,
                pass,
                idx,
                sent,
            },
        ) => {
            if p.count.is_some_and(|c| *sent >= c) || (*pass > 0 && !p.looped) {
                return None;
            }
            let off = p.offsets.get(*idx)?;
            let t = origin
                .saturating_add(pass.saturating_mul(p.period))
                .saturating_add(*off);
            (p.stop.is_none_or(|s| t < s) && t != Nanos::MAX).then_some(t)
        }
        _ => None,
    }
}

/// Advances generator `gen` of workload `wl` (index `w`) by one packet;
/// builds the frame when `send`.
#[allow(clippy::too_many_arguments)]
fn step(
    plan: &Plan,
    wl: &Workload,
    gen: &mut Gen,
    w: usize,
    send: bool,
    now: Nanos,
    rng: &mut DeviceRng,
    scratch: &mut Vec<u8>,
    ws: &mut WorkloadStats,
) -> Option<Vec<u8>> {
    match (&wl.kind, gen) {
        (
            Kind::Udp(p),
            Gen::Udp {
                clock,
                flows,
                signalled,
            },
        ) => {
            let mut size = p.sched.size.sample(rng);
            if !p.shape.is_plain() {
                // Pace by the frame actually sent.
                size = size.max(p.shape.headers() + PROBE_LEN + p.vlan.map_or(0, |_| VLAN_TAG_LEN));
            }
            let seq = clock.sent;
            clock.advance(size);
            if !send {
                return None;
            }
            let (flow, (src, sport)) = match &p.flows {
                FlowPlan::Single { src_port } => (0, (plan.ip, *src_port)),
                FlowPlan::Fresh { prefix, ports } => (0, nth_source(*prefix, *ports, seq)),
                FlowPlan::List { sources } => {
                    let i = (seq % sources.len().max(1) as u64) as usize;
                    (
                        i,
                        sources
                            .get(i)
                            .copied()
                            .unwrap_or((plan.ip, DEFAULT_UDP_PORT_BASE)),
                    )
                }
                FlowPlan::Random { n, zipf, .. } => {
                    let f = match zipf {
                        Some(z) => z.sample(rng),
                        None => rng.gen_range(0..*n),
                    };
                    (
                        f,
                        flows
                            .get(f)
                            .copied()
                            .unwrap_or((plan.ip, DEFAULT_UDP_PORT_BASE)),
                    )
                }
            };
            let probe = Probe {
                flow: flow as u32,
                seq,
                tx_time: now,
            };
            let mut ep = plan.endpoints(src, *p.dst.ip());
            let (src, sport, dst, dport) = match p.dst_flows {
                Some(port) => (plan.ip, port, src, sport),
                None => (src, sport, *p.dst.ip(), p.dst.port()),
            };
            let size = match p.vlan {
                Some(vid) => {
                    ep.vlan = Some(VlanTag {
                        pcp: 0,
                        dei: false,
                        vid,
                    });
                    size.saturating_sub(VLAN_TAG_LEN)
                }
                None => size,
            };
            if let Some(Gtpc {
                every,
                format,
                attach,
            }) = p.gtpc
            {
                // The UE's session message first, then every `every`-th.
                let first = attach && signalled.get(flow).is_some_and(|s| !s);
                if first || (every > 0 && (seq + 1) % every == 0) {
                    if let Some(s) = signalled.get_mut(flow) {
                        *s = true;
                    }
                    let teid = p
                        .shape
                        .gtpu
                        .unwrap_or(0)
                        .wrapping_add(ue_index(&p.flows, src));
                    ep.src_ip = plan.ip;
                    ep.dst_ip = *p.dst.ip();
                    scratch.clear();
                    scratch.extend_from_slice(&gtpc_body(format, src, teid, plan.ip));
                    scratch.resize(size.saturating_sub(UDP_FRAME_HEADERS).max(GTPC_BODY_LEN), 0);
                    return build_udp_frame(&ep, GTPC_PORT, GTPC_PORT, scratch, true).ok();
                }
            }
            if !p.shape.is_plain() {
                // A tunnel's outer header goes from the host to `dst` (GTP-U:
                // to the gateway, `gtpu_sgw`).
                ep.src_ip = plan.ip;
                ep.dst_ip = p.gtpu_sgw.unwrap_or(*p.dst.ip());
                let payload_len = size.saturating_sub(p.shape.headers()).max(PROBE_LEN);
                scratch.clear();
                scratch.resize(payload_len, 0);
                probe.write(scratch);
                let mut shape = p.shape;
                // One bearer per UE: the TEID follows the UE's address.
                let ue = ue_index(&p.flows, src);
                shape.gtpu = shape.gtpu.map(|t| t.wrapping_add(ue));
                shape.build(&ep, src, sport, dst, dport, scratch)
            } else if p.dst_flows.is_some() {
                ep.src_ip = src;
                ep.dst_ip = dst;
                probe_frame(&ep, sport, dport, size, probe, scratch)
            } else if p.probe {
                probe_frame(&ep, sport, p.dst.port(), size, probe, scratch)
            } else {
                scratch.clear();
                scratch.resize(size.saturating_sub(UDP_FRAME_HEADERS), 0);
                build_udp_frame(&ep, sport, p.dst.port(), scratch, true).ok()
            }
        }
        (Kind::Request(p), Gen::Request { clock, outstanding }) => {
            let size = p.sched.size.sample(rng);
            clock.advance(size);
            if !send {
                return None;
            }
            let probe = Probe {
                flow: w as u32,
                seq: outstanding.next_seq(),
                tx_time: now,
            };
            ws.evicted += outstanding.push(now, p.max_outstanding);
            let ep = plan.endpoints(plan.ip, *p.server.ip());
            probe_frame(&ep, p.src_port, p.server.port(), size, probe, scratch)
        }
        (
            Kind::Pcap(p),
            Gen::Pcap {
                pass, idx, sent, ..
            },
        ) => {
            let i = *idx;
            *sent += 1;
            *idx += 1;
            if *idx >= p.frames.len() {
                *idx = 0;
                *pass += 1;
            }
            if !send {
                return None;
            }
            let mut frame = p.frames.get(i)?.clone();
            if frame.len() >= 12 {
                frame[0..6].copy_from_slice(&plan.gateway_mac);
                frame[6..12].copy_from_slice(&plan.mac);
            }
            Some(frame)
        }
        _ => None,
    }
}

/// A UE's index in its workload's `src_prefix` (its host bits; 0 without
/// a prefix): the offset of its TEID, the same in every workload that draws
/// from the prefix.
fn ue_index(flows: &FlowPlan, ue: Ipv4Addr) -> u32 {
    match flows {
        FlowPlan::Random {
            prefix: Some((_, len)),
            ..
        } => u32::from(ue) & !prefix_mask(*len),
        _ => 0,
    }
}

/// The 16-byte session signalling body for UE `ue` with bearer `teid`
/// served by eNB `enb` (see [`UdpConfig`]).
fn gtpc_body(format: GtpcFormat, ue: Ipv4Addr, teid: u32, enb: Ipv4Addr) -> [u8; GTPC_BODY_LEN] {
    let mut b = [0u8; GTPC_BODY_LEN];
    let t = teid.to_be_bytes();
    match format {
        GtpcFormat::Inca => {
            b[0] = 1; // version
            b[1] = 1; // create or modify
            b[4..8].copy_from_slice(&ue.octets());
            b[8..12].copy_from_slice(&t);
        }
        GtpcFormat::Redplane => {
            b[0..4].copy_from_slice(&ue.octets());
            b[4..8].copy_from_slice(&t);
            b[8..12].copy_from_slice(&t);
        }
    }
    b[12..16].copy_from_slice(&enb.octets());
    b
}

/// A UDP frame of `size` bytes whose payload starts with `probe` and is
/// zero-padded.
fn probe_frame(
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

impl Device for Host {
    fn start(&mut self, now: Nanos, out: &mut Vec<Output>) {
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
            Input::Control(_) => self.metrics.stats.control_ignored += 1,
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

    fn restart(&mut self, now: Nanos, out: &mut Vec<Output>) {
        self.archive_flows();
        self.metrics.stats.restarts += 1;
        self.state = State::new(now);
        self.start(now, out);
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
        let mut c = |k: String, v: u64| {
            r.counters.insert(k, v);
        };
        c("rx_packets".into(), s.rx_packets);
        c("rx_bytes".into(), s.rx_bytes);
        c("rx_malformed".into(), s.rx_malformed);
        c("rx_other".into(), s.rx_other);
        c("rx_probes".into(), s.rx_probes);
        c("rx_udp_plain".into(), s.rx_udp_plain);
        c("rx_probe_future".into(), s.rx_probe_future);
        c("rx_tcp".into(), s.rx_tcp);
        c("tx_packets".into(), s.tx_packets);
        c("tx_bytes".into(), s.tx_bytes);
        c("restarts".into(), s.restarts);
        c("link_down".into(), s.link_down);
        c("link_up".into(), s.link_up);
        c("control_ignored".into(), s.control_ignored);
        let requests = self.plan.requests.len();
        for (w, ws) in self.plan.workloads.iter().zip(&self.metrics.workloads) {
            let n = &w.name;
            match w.kind {
                Kind::Udp(_) | Kind::Pcap(_) | Kind::Request(_) | Kind::Echo { .. } => {
                    c(format!("{n}.tx_packets"), ws.tx_packets);
                    c(format!("{n}.tx_bytes"), ws.tx_bytes);
                }
                _ => {}
            }
            if matches!(w.kind, Kind::Udp(_) | Kind::Pcap(_) | Kind::Request(_)) {
                c(format!("{n}.missed"), ws.missed);
            }
            if let Kind::Request(_) = w.kind {
                c(format!("{n}.responses"), ws.responses);
                c(format!("{n}.lost"), ws.lost);
                c(format!("{n}.late"), ws.late);
                c(format!("{n}.duplicate"), ws.duplicate);
                c(format!("{n}.unknown"), ws.unknown);
                c(format!("{n}.evicted"), ws.evicted);
                if let Some(Gen::Request { outstanding, .. }) = self.state.gens.get(
                    self.plan
                        .workloads
                        .iter()
                        .position(|x| x.name == *n)
                        .unwrap_or(usize::MAX),
                ) {
                    c(
                        format!("{n}.outstanding"),
                        outstanding.slots.iter().filter(|s| s.is_some()).count() as u64,
                    );
                }
                if requests > 1 {
                    r.histograms.insert(format!("rtt.{n}"), ws.rtt.clone());
                }
            }
        }
        if self.plan.has_tcp {
            c("tcp.tx_packets".into(), s.tcp_tx_packets);
            c("tcp.tx_bytes".into(), s.tcp_tx_bytes);
            let (malformed, ignored) = self
                .state
                .tcp
                .as_ref()
                .map_or((0, 0), |t| (t.malformed(), t.ignored()));
            c(
                "tcp.malformed".into(),
                malformed + self.metrics.tcp_malformed_before,
            );
            c("tcp.ignored".into(), ignored);
        }
        r.histograms
            .insert("latency".into(), self.metrics.latency.clone());
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
            let mut bytes = vec![0u64; self.plan.workloads.len()];
            for &(w, id) in &self.state.tcp_flows {
                let Some(f) = stack.flows().get(id) else {
                    continue;
                };
                // A listening socket that never got a connection says little.
                if f.role == Role::Receiver && f.remote.is_none() && f.outcome == Outcome::Open {
                    continue;
                }
                let name = &self.plan.workloads[w].name;
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
            for (w, wl) in self.plan.workloads.iter().enumerate() {
                if matches!(wl.kind, Kind::TcpSend { .. } | Kind::TcpSink { .. }) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use std::collections::BTreeMap;

    const MAC_A: MacAddr = [2, 0, 0, 0, 0, 1];
    const MAC_B: MacAddr = [2, 0, 0, 0, 0, 2];

    fn host(toml: &str) -> Result<Host, HostError> {
        Host::new(HostConfig::from_toml(toml)?, MAC_A, MAC_B, 10_000_000_000)
    }

    fn rng() -> DeviceRng {
        DeviceRng::seed_from_u64(7)
    }

    #[test]
    fn probe_round_trips_and_rejects_other_payloads() {
        let p = Probe {
            flow: 7,
            seq: 1 << 40,
            tx_time: 123_456_789,
        };
        let mut b = [0u8; 30];
        assert!(p.write(&mut b));
        assert_eq!(Probe::parse(&b), Some(p));
        assert_eq!(Probe::parse(&b[..23]), None);
        b[0] ^= 1;
        assert_eq!(Probe::parse(&b), None);
        assert!(!p.write(&mut [0u8; 10]));
    }

    #[test]
    fn every_workload_example_parses() {
        let dir = std::env::temp_dir().join(format!("inca-host-unit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let pcap = dir.join("one.pcap");
        let mut w = inca_wire::PcapWriter::create(&pcap).unwrap();
        w.write(0, &[0u8; 60]).unwrap();
        w.finish().unwrap();
        let text = format!(
            r#"
ip = "10.0.0.1"
prefix_len = 24
gateway = "10.0.0.254"
bin = "1ms"
tcp = {{ send_buffer = 1048576 }}

[[workload]]
kind = "udp"
name = "bg"
dst = "10.0.1.1:5000"
rate = "1Gbps"
size = {{mix = [[64, 7], [570, 4], [1518, 1]]}}
start = "1ms"
stop = "11ms"
flows = 10000
src_ports = [1024, 65535]
src_prefix = "10.0.0.0/24"
zipf = 0.99

[[workload]]
kind = "pcap"
file = {pcap:?}
speedup = 2
loop = true

[[workload]]
kind = "request"
server = "10.0.1.1:7"
pps = 100000
size = {{uniform = [100, "200B"]}}
timeout = "1ms"

[[workload]]
kind = "echo"
port = 7

[[workload]]
kind = "tcp"
dst = "10.0.1.1:5001"
bytes = "1GB"

[[workload]]
kind = "tcp_sink"
port = 5001
backlog = 4
"#
        );
        let h = host(&text).unwrap();
        let names: Vec<_> = h.workload_names().collect();
        assert_eq!(
            names,
            ["bg", "pcap1", "request2", "echo3", "tcp4", "tcp_sink5"]
        );
        assert!(h.plan.notes.iter().any(|n| n.contains("raised to 66 B")));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn errors_name_the_field() {
        let cases = [
            ("ip = \"10.0.0.1\"\nbogus = 1", "bogus"),
            (
                "ip = \"10.0.0.1\"\n[[workload]]\nkind = \"udp\"\ndst = \"1.2.3.4:5\"\nrate = \"10Gbs\"",
                "workload[0] \"udp0\" (udp).rate",
            ),
            (
                "ip = \"10.0.0.1\"\n[[workload]]\nkind = \"udp\"\ndst = \"1.2.3.4:5\"\nrate = \"1G\"\nstart = \"1xs\"",
                "udp0\" (udp).start",
            ),
            ("ip = \"10.0.0.1\"\n[[workload]]\nkind = \"udp\"\ndst = \"1.2.3.4:5\"", "needs rate"),
            (
                "ip = \"10.0.0.1\"\n[[workload]]\nkind = \"udp\"\ndst = \"1.2.3.4:5\"\npps = 1\nwhat = 1",
                "what",
            ),
            (
                "ip = \"10.0.0.1\"\n[[workload]]\nkind = \"udp\"\ndst = \"1.2.3.4:5\"\npps = 1\nflows = 70000",
                "flows: 70000 distinct",
            ),
            (
                "ip = \"10.0.0.1\"\n[[workload]]\nkind = \"udp\"\ndst = \"1.2.3.4:5\"\npps = 1\nsize = {mix = []}",
                "size: mix is empty",
            ),
            (
                "ip = \"10.0.0.1\"\n[[workload]]\nkind = \"pcap\"\nfile = \"/nonexistent.pcap\"",
                "pcap0\" (pcap).file",
            ),
            ("ip = \"10.0.0.1\"\n[[workload]]\nkind = \"teleport\"", "teleport"),
        ];
        for (text, want) in cases {
            let e = host(text).expect_err(text).to_string();
            assert!(e.contains(want), "{text:?}: {e:?} lacks {want:?}");
        }
    }

    #[test]
    fn pace_is_exact_from_the_index() {
        let p = Pace::Bits(10_000_000_000);
        // 1000-byte frames: 8192 wire bits, 819.2 ns each.
        let bits = |i: u64| u128::from(i) * wire_bits(1000);
        assert_eq!(p.offset(1, bits(1)), 819);
        assert_eq!(p.offset(5, bits(5)), 4096);
        assert_eq!(p.offset(1_000_000, bits(1_000_000)), 819_200_000);
        assert_eq!(Pace::Pps(3).offset(2, 0), 666_666_666);
        assert_eq!(Pace::Pps(3).offset(3, 0), 1_000_000_000);
    }

    #[test]
    fn outstanding_requests_time_out_match_and_stay_bounded() {
        let mut o = Outstanding::default();
        assert_eq!(o.push(0, 4), 0);
        assert_eq!(o.push(10, 4), 0);
        assert_eq!(o.push(20, 4), 0);
        assert_eq!(o.answer(1), Answer::Matched(10));
        assert_eq!(o.answer(1), Answer::Duplicate);
        assert_eq!(o.answer(9), Answer::Unknown);
        assert_eq!(o.deadline(100), Some(100));
        assert_eq!(o.expire(100, 100), 1);
        assert_eq!(o.answer(0), Answer::Late);
        assert_eq!(o.deadline(100), Some(120));
        for t in 0..10 {
            o.push(30 + t, 4);
        }
        assert!(o.slots.len() <= 4);
        assert_eq!(o.next_seq(), 13);
    }

    #[test]
    fn zipf_matches_its_formula_and_zero_is_uniform() {
        let z = Zipf::new(1000, 0.99).unwrap();
        let h: f64 = (1..=1000).map(|k| (k as f64).powf(-0.99)).sum();
        for k in [0usize, 1, 9, 999] {
            let want = ((k + 1) as f64).powf(-0.99) / h;
            assert!((z.probability(k) - want).abs() < 1e-12);
        }
        let u = Zipf::new(10, 0.0).unwrap();
        assert!((u.probability(3) - 0.1).abs() < 1e-12);
        assert!(Zipf::new(0, 1.0).is_none());
        assert!(Zipf::new(5, -1.0).is_none());
        assert!(Zipf::new(5, f64::NAN).is_none());
        let mut r = rng();
        assert!((0..10_000).all(|_| z.sample(&mut r) < 1000));
    }

    #[test]
    fn size_mix_follows_its_weights() {
        let spec = SizeSpec::Mix(vec![(64.into(), 7), (570.into(), 4), (1518.into(), 1)]);
        let (d, raised) = SizeDist::resolve(&spec, "size").unwrap();
        assert!(raised);
        let mut r = rng();
        let n = 120_000;
        let mut counts = [0u32; 3];
        for _ in 0..n {
            match d.sample(&mut r) {
                66 => counts[0] += 1,
                570 => counts[1] += 1,
                1518 => counts[2] += 1,
                s => panic!("size {s}"),
            }
        }
        for (c, w) in counts.iter().zip([7.0, 4.0, 1.0]) {
            let got = *c as f64 / n as f64;
            let want = w / 12.0;
            assert!((got - want).abs() / want < 0.03, "{counts:?}");
        }
        let (u, _) = SizeDist::resolve(&SizeSpec::Uniform(100.into(), 200.into()), "size").unwrap();
        assert!((0..1000)
            .map(|_| u.sample(&mut r))
            .all(|s| (100..=200).contains(&s)));
    }

    #[test]
    fn random_flows_are_distinct_and_in_range() {
        let mut r = rng();
        let f = draw_flows(1000, (2000, 2999), None, Ipv4Addr::new(10, 0, 0, 1), &mut r);
        assert_eq!(f.len(), 1000);
        assert_eq!(f.iter().collect::<HashSet<_>>().len(), 1000);
        assert!(f
            .iter()
            .all(|&(a, p)| a == Ipv4Addr::new(10, 0, 0, 1) && (2000..=2999).contains(&p)));
        let pre = parse_prefix("10.9.0.0/16").unwrap();
        let g = draw_flows(5000, (1, 1), Some(pre), Ipv4Addr::new(10, 0, 0, 1), &mut r);
        assert_eq!(g.iter().collect::<HashSet<_>>().len(), 5000);
        assert!(g.iter().all(|&(a, _)| a.octets()[..2] == [10, 9]));
    }

    #[test]
    fn udp_vlan_tags_every_frame_and_keeps_its_size() {
        let text = "ip = \"10.0.0.1\"\n[[workload]]\nkind = \"udp\"\ndst = \"10.0.1.1:9\"\npps = 1000\ncount = 3\nsize = 100\nvlan = 7";
        let mut h = host(text).unwrap();
        let frames = sent_frames(&mut h);
        assert_eq!(frames.len(), 3);
        for f in &frames {
            let eth = EthernetFrame::new_checked(&f[..]).unwrap();
            assert_eq!(eth.vlan().map(|t| t.vid), Some(7));
            assert_eq!(eth.ethertype(), inca_wire::ethernet::ethertype::IPV4);
            assert_eq!(f.len(), 100);
        }
        let bad = text.replace("vlan = 7", "vlan = 4095");
        assert!(host(&bad).unwrap_err().to_string().contains("vlan"));
    }

    /// Runs `h` until its generators stop; returns the frames it sent.
    fn sent_frames(h: &mut Host) -> Vec<Vec<u8>> {
        let (mut r, mut out, mut frames) = (rng(), Vec::new(), Vec::new());
        h.start(0, &mut out);
        for _ in 0..10_000 {
            let timers: Vec<_> = out
                .drain(..)
                .filter_map(|o| match o {
                    Output::Timer { at, token } => Some((at, token)),
                    Output::Transmit { frame, .. } => {
                        frames.push(frame);
                        None
                    }
                    _ => None,
                })
                .collect();
            if timers.is_empty() {
                break;
            }
            for (at, token) in timers {
                h.handle(at, Input::Timer { token }, &mut r, &mut out);
            }
        }
        frames
    }

    #[test]
    fn tcp_syns_to_drawn_destinations_reach_a_sink_as_probes() {
        let text = "ip = \"10.1.2.1\"\n[[workload]]\nkind = \"udp\"\ndst = \"192.0.2.1:5000\"\npps = 1000\ncount = 64\nsize = 66\nflows = 16\nsrc_prefix = \"10.2.0.0/28\"\nsrc_ports = [5000, 5000]\nflows_at = \"dst\"\nsrc_port = 6000\ntcp_flags = 2";
        let mut h = host(text).unwrap();
        assert!(h.plan.notes.iter().any(|n| n.contains("raised to 78 B")));
        let frames = sent_frames(&mut h);
        assert_eq!(frames.len(), 64);
        let mut dsts = HashSet::new();
        for f in &frames {
            assert_eq!(f.len(), 78);
            let ip = Ipv4Packet::new_checked(&f[14..]).unwrap();
            assert_eq!(ip.protocol(), inca_wire::ipv4::protocol::TCP);
            assert_eq!(ip.src_addr(), Ipv4Addr::new(10, 1, 2, 1));
            assert_eq!(ip.dst_addr().octets()[..3], [10, 2, 0]);
            let seg = inca_wire::TcpSegment::new_checked(ip.payload()).unwrap();
            assert_eq!(
                (seg.flags().0, seg.src_port(), seg.dst_port()),
                (2, 6000, 5000)
            );
            dsts.insert(ip.dst_addr());
        }
        assert!(dsts.len() > 8, "destinations vary: {dsts:?}");
        // A host receiving them measures their latency like UDP probes.
        let mut sink = host("ip = \"192.0.2.1\"").unwrap();
        let (mut r, mut out) = (rng(), Vec::new());
        sink.start(0, &mut out);
        for f in frames {
            sink.handle(
                1_000_000_000,
                Input::Frame { port: 0, frame: f },
                &mut r,
                &mut out,
            );
        }
        assert_eq!(sink.stats().rx_probes, 64);
        assert_eq!(sink.stats().rx_other, 0);
        assert_eq!(sink.latency().count(), 64);
        let bad = text
            .replace("flows = 16", "flows = 1")
            .replace("flows_at = \"dst\"\n", "");
        assert!(host(&bad).unwrap_err().to_string().contains("src_port"));
    }

    #[test]
    fn gtpu_uplink_signals_each_ue_first_then_every_nth_packet() {
        let text = "ip = \"10.1.0.1\"\n[[workload]]\nkind = \"udp\"\ndst = \"203.0.113.1:7\"\npps = 1000\ncount = 72\nsize = 102\nflows = 4\nsrc_prefix = \"10.200.0.0/30\"\nsrc_ports = [7000, 7000]\ngtpu_teid = 1000\ngtpu_sgw = \"10.255.0.1\"\ngtpc_every = 18\ngtpc_format = \"redplane\"";
        let frames = sent_frames(&mut host(text).unwrap());
        assert_eq!(frames.len(), 72);
        let (mut signals, mut data) = (BTreeMap::new(), 0);
        let mut teids = BTreeMap::new();
        for (i, f) in frames.iter().enumerate() {
            let ip = Ipv4Packet::new_checked(&f[14..]).unwrap();
            assert_eq!(ip.src_addr(), Ipv4Addr::new(10, 1, 0, 1), "the eNB sends");
            let udp = UdpDatagram::new_checked(ip.payload()).unwrap();
            if udp.dst_port() == GTPC_PORT {
                // Signalling to dst's address: UE, ul TEID, dl TEID, eNB.
                assert_eq!(ip.dst_addr(), Ipv4Addr::new(203, 0, 113, 1));
                let b = udp.payload();
                let ue = Ipv4Addr::new(b[0], b[1], b[2], b[3]);
                assert_eq!(b[4..8], b[8..12]);
                assert_eq!(b[12..16], [10, 1, 0, 1]);
                let teid = u32::from_be_bytes([b[4], b[5], b[6], b[7]]);
                // The UE's first packet is its signalling.
                assert!(signals.contains_key(&ue) || !teids.contains_key(&ue), "{i}");
                *signals.entry(ue).or_insert(0) += 1;
                assert_eq!(*teids.entry(ue).or_insert(teid), teid);
                continue;
            }
            data += 1;
            assert_eq!(udp.dst_port(), encap::GTPU_PORT);
            assert_eq!(
                ip.dst_addr(),
                Ipv4Addr::new(10, 255, 0, 1),
                "to the gateway"
            );
            assert_eq!(f.len(), 102);
            let g = udp.payload();
            let teid = u32::from_be_bytes([g[4], g[5], g[6], g[7]]);
            let inner = Ipv4Packet::new_checked(&g[8..]).unwrap();
            let ue = inner.src_addr();
            assert_eq!(ue.octets()[..3], [10, 200, 0]);
            assert_eq!(inner.dst_addr(), Ipv4Addr::new(203, 0, 113, 1));
            assert_eq!(
                teids.get(&ue),
                Some(&teid),
                "data after the UE's signalling"
            );
            assert!((1000..1004).contains(&teid));
        }
        // 4 first messages plus every 18th packet (4 of 72), some of
        // which fell on a UE's first packet already.
        let total: u32 = signals.values().sum();
        assert_eq!(signals.len(), 4);
        assert!((5..=8).contains(&total), "{total} signalling messages");
        assert_eq!(data + total as usize, 72);
        // The downlink (the same tunnel back) reaches the eNB's probe
        // reader; malformed GTP-U is counted, not parsed.
        let mut enb = host("ip = \"10.1.0.1\"").unwrap();
        let (mut r, mut out) = (rng(), Vec::new());
        enb.start(0, &mut out);
        let data_frames: Vec<_> = frames
            .iter()
            .filter(|f| f[36..38] == encap::GTPU_PORT.to_be_bytes())
            .cloned()
            .collect();
        for f in &data_frames {
            enb.handle(
                1_000_000_000,
                Input::Frame {
                    port: 0,
                    frame: f.clone(),
                },
                &mut r,
                &mut out,
            );
        }
        assert_eq!(enb.stats().rx_probes, data_frames.len() as u64);
        let mut bad = data_frames[0].clone();
        bad[14 + 20 + 8 + 1] = 1; // not a G-PDU
        let bad = with_udp_checksum_zero(bad);
        enb.handle(
            1_000_000_000,
            Input::Frame {
                port: 0,
                frame: bad,
            },
            &mut r,
            &mut out,
        );
        assert_eq!(enb.stats().rx_probes, data_frames.len() as u64);
        assert_eq!(enb.stats().rx_udp_plain, 1);
        // The inca-apps layout: version 1, create, UE, TEID, eNB.
        let inca = sent_frames(&mut host(&text.replace("\"redplane\"", "\"inca\"")).unwrap());
        let b = &inca[0][14 + 20 + 8..];
        assert_eq!(b[..2], [1, 1]);
        assert_eq!(b[12..16], [10, 1, 0, 1]);
        // Without attach messages exactly every 18th packet signals.
        let later = sent_frames(&mut host(&format!("{text}\ngtpc_attach = false")).unwrap());
        let sig: Vec<usize> = (0..later.len())
            .filter(|&i| later[i][36..38] == GTPC_PORT.to_be_bytes())
            .collect();
        assert_eq!(sig, vec![17, 35, 53, 71]);
        // The options need the tunnel, and one tunnel at a time.
        let no_tunnel = text.replace("gtpu_teid = 1000\n", "");
        assert!(host(&no_tunnel)
            .unwrap_err()
            .to_string()
            .contains("gtpu_teid"));
        let both = format!("{text}\nvxlan_vni = 1");
        assert!(host(&both).unwrap_err().to_string().contains("vxlan_vni"));
    }

    /// Zeroes a frame's UDP checksum (optional in IPv4) after an edit.
    fn with_udp_checksum_zero(mut f: Vec<u8>) -> Vec<u8> {
        f[14 + 20 + 6] = 0;
        f[14 + 20 + 7] = 0;
        f
    }

    #[test]
    fn tcp_echo_answers_generated_segments_with_swapped_ends() {
        let gen = "ip = \"10.1.0.1\"\n[[workload]]\nkind = \"udp\"\ndst = \"203.0.113.1:7\"\npps = 1000\ncount = 3\nsize = 78\nsrc_port = 41000\ntcp_flags = 24";
        let frames = sent_frames(&mut host(gen).unwrap());
        for tcp in [true, false] {
            let echo = format!(
                "ip = \"203.0.113.1\"\n[[workload]]\nkind = \"echo\"\nport = 7\ntcp = {tcp}"
            );
            let mut e = host(&echo).unwrap();
            let (mut r, mut out) = (rng(), Vec::new());
            e.start(0, &mut out);
            out.clear();
            for f in &frames {
                e.handle(
                    1_000,
                    Input::Frame {
                        port: 0,
                        frame: f.clone(),
                    },
                    &mut r,
                    &mut out,
                );
            }
            let answers: Vec<Vec<u8>> = out
                .iter()
                .filter_map(|o| match o {
                    Output::Transmit { frame, .. } => Some(frame.clone()),
                    _ => None,
                })
                .collect();
            if !tcp {
                assert!(answers.is_empty(), "UDP-only echo leaves TCP alone");
                continue;
            }
            assert_eq!(answers.len(), 3);
            let ip = Ipv4Packet::new_checked(&answers[0][14..]).unwrap();
            assert_eq!(ip.dst_addr(), Ipv4Addr::new(10, 1, 0, 1));
            let seg = inca_wire::TcpSegment::new_checked(ip.payload()).unwrap();
            assert_eq!(
                (seg.src_port(), seg.dst_port(), seg.flags().0),
                (7, 41000, 0x18)
            );
            // Back at the sender the answer is a probe: a round trip.
            let mut g = host("ip = \"10.1.0.1\"").unwrap();
            g.start(0, &mut out);
            g.handle(
                5_000,
                Input::Frame {
                    port: 0,
                    frame: answers[0].clone(),
                },
                &mut r,
                &mut out,
            );
            assert_eq!(g.stats().rx_probes, 1);
        }
    }

    #[test]
    fn vxlan_frames_carry_the_vni_and_drawn_inner_destinations() {
        let text = "ip = \"10.1.1.1\"\n[[workload]]\nkind = \"udp\"\ndst = \"10.255.0.1:4789\"\npps = 1000\ncount = 32\nsize = 66\nflows = 16\nsrc_prefix = \"10.128.0.0/28\"\nsrc_ports = [5000, 5000]\nflows_at = \"dst\"\nvxlan_vni = 1";
        let frames = sent_frames(&mut host(text).unwrap());
        assert_eq!(frames.len(), 32);
        let mut sink = host("ip = \"192.0.2.1\"").unwrap();
        let (mut r, mut out) = (rng(), Vec::new());
        sink.start(0, &mut out);
        for f in frames {
            assert_eq!(f.len(), 116);
            // As the VPN gateway parses it: VNI 1, inner destination drawn.
            let m = vxlan_vni_and_inner_dst(&f);
            assert_eq!(m.0, 1);
            assert_eq!(m.1[..3], [10, 128, 0]);
            sink.handle(
                1_000_000_000,
                Input::Frame { port: 0, frame: f },
                &mut r,
                &mut out,
            );
        }
        assert_eq!(sink.stats().rx_probes, 32);
        assert_eq!(sink.stats().rx_udp_plain, 0);
        let bad = text.replace("vxlan_vni = 1", "vxlan_vni = 16777216");
        assert!(host(&bad).unwrap_err().to_string().contains("vxlan_vni"));
        let bad = text.replace("flows = 16\n", "").replace(
            "src_prefix = \"10.128.0.0/28\"\nsrc_ports = [5000, 5000]\n",
            "",
        );
        assert!(host(&bad).unwrap_err().to_string().contains("flows_at"));
    }

    /// (VNI, inner IPv4 destination) of an untagged VXLAN frame.
    fn vxlan_vni_and_inner_dst(f: &[u8]) -> (u32, [u8; 4]) {
        let vx = 14 + 20 + 8;
        let vni = u32::from_be_bytes([0, f[vx + 4], f[vx + 5], f[vx + 6]]);
        let ip = Ipv4Packet::new_checked(&f[vx + 8 + 14..]).unwrap();
        (vni, ip.dst_addr().octets())
    }

    #[test]
    fn garbage_never_panics() {
        let mut h = host("ip = \"10.0.0.1\"\n[[workload]]\nkind = \"echo\"\nport = 7").unwrap();
        let mut r = rng();
        let mut out = Vec::new();
        h.start(0, &mut out);
        for i in 0..20_000u64 {
            let len = r.gen_range(0..200);
            let mut frame: Vec<u8> = (0..len).map(|_| r.gen()).collect();
            // Make a fair share look like IPv4/UDP so deeper parsers run.
            if len > 14 && i % 2 == 0 {
                frame[12] = 0x08;
                frame[13] = 0x00;
                frame[14] = 0x45;
            }
            h.handle(i, Input::Frame { port: 0, frame }, &mut r, &mut out);
            out.clear();
        }
        assert_eq!(h.stats().rx_packets, 20_000);
        assert!(h.stats().rx_malformed > 5_000);
    }
}
