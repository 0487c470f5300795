//! A host's configuration as written in a scenario file: the `[[host]]`
//! table, its `[[host.workload]]` tables (built-in kinds and
//! [`WorkloadConfig::Registered`] ones) and the quantities they use, with
//! the errors that name the bad field.

use std::fmt;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::path::PathBuf;

use inca_switch::device::Nanos;
use inca_switch::units;
use inca_wire::PROBE_LEN;
use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::Deserialize;

use crate::nodes::attack::{NewFlowsConfig, TuplesConfig};
use crate::tcp::TcpConfig;

// ---------------------------------------------------------------------------
// Constants.

/// Ethernet (14) + IPv4 (20) + UDP (8) header bytes of a generated frame.
pub const UDP_FRAME_HEADERS: usize = 42;

/// The smallest generated frame: headers plus the probe. Smaller configured
/// sizes are raised to this (and a report note says so).
pub const MIN_PROBE_FRAME: usize = UDP_FRAME_HEADERS + PROBE_LEN;

/// The largest frame a host generates (a 9200-byte jumbo MTU plus the
/// Ethernet header).
pub const MAX_FRAME: usize = 9214;

/// Most random 5-tuples one `udp` workload may draw. Up to a million each
/// costs 6 bytes (and a Zipf CDF 8 more); above, flows and their Zipf
/// sampler take O(1) memory ([`super::dist::FlowSet`],
/// [`super::dist::RejectionInversion`]).
pub const MAX_FLOWS: u64 = 1_000_000_000;

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
pub(crate) const DEFAULT_UDP_PORT_BASE: u16 = 10_000;

/// Largest TCP sink backlog (smoltcp has one socket per expected connection).
pub(crate) const MAX_BACKLOG: usize = 4096;

// The generated frame's headers are Ethernet, IPv4 without options and UDP.
const _: () = assert!(
    UDP_FRAME_HEADERS
        == inca_wire::ethernet::HEADER_LEN
            + inca_wire::ipv4::MIN_HEADER_LEN
            + inca_wire::udp::HEADER_LEN
);
const _: () = assert!(MIN_PROBE_FRAME <= MAX_FRAME);
const _: () = assert!(GTPC_BODY_LEN == 4 * 4);
const _: () = assert!(DEFAULT_MAX_OUTSTANDING <= MAX_OUTSTANDING);

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
    pub(crate) fn parse(&self, parse: fn(&str) -> Option<u64>) -> Option<u64> {
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

/// One workload of a host, tagged by `kind`: a built-in kind, or
/// [`WorkloadConfig::Registered`] for any other kind, resolved when the host
/// is built by a [`super::workload::WorkloadRegistry`].
#[derive(Debug, Clone)]
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
    /// `kind = "new_flows"`: a new-flow flood ([`crate::nodes::attack`]).
    NewFlows(NewFlowsConfig),
    /// `kind = "tuples"`: traffic over a list of (crafted) sources.
    Tuples(TuplesConfig),
    /// Any other kind: the table as written (without `kind`), for a
    /// registry to build.
    Registered {
        /// The `kind`.
        kind: String,
        /// The rest of the table.
        table: toml::Table,
    },
}

/// The built-in workload kinds, in the order an error lists them.
pub const BUILTIN_KINDS: [&str; 9] = [
    "udp",
    "backbone",
    "pcap",
    "request",
    "echo",
    "tcp",
    "tcp_sink",
    "new_flows",
    "tuples",
];

impl WorkloadConfig {
    /// The `kind` it was written with.
    pub fn kind(&self) -> &str {
        match self {
            WorkloadConfig::Udp(_) => "udp",
            WorkloadConfig::Pcap(_) => "pcap",
            WorkloadConfig::Request(_) => "request",
            WorkloadConfig::Echo(_) => "echo",
            WorkloadConfig::Tcp(_) => "tcp",
            WorkloadConfig::TcpSink(_) => "tcp_sink",
            WorkloadConfig::NewFlows(_) => "new_flows",
            WorkloadConfig::Tuples(_) => "tuples",
            WorkloadConfig::Registered { kind, .. } => kind,
        }
    }

    /// Its `name`, if it was given one.
    pub fn name(&self) -> Option<&str> {
        match self {
            WorkloadConfig::Udp(c) => c.name.as_deref(),
            WorkloadConfig::Pcap(c) => c.name.as_deref(),
            WorkloadConfig::Request(c) => c.name.as_deref(),
            WorkloadConfig::Echo(c) => c.name.as_deref(),
            WorkloadConfig::Tcp(c) => c.name.as_deref(),
            WorkloadConfig::TcpSink(c) => c.name.as_deref(),
            WorkloadConfig::NewFlows(c) => c.name.as_deref(),
            WorkloadConfig::Tuples(c) => c.name.as_deref(),
            WorkloadConfig::Registered { table, .. } => table.get("name").and_then(|v| v.as_str()),
        }
    }
}

impl<'de> Deserialize<'de> for WorkloadConfig {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let mut table = toml::Table::deserialize(d)?;
        let kind = match table.remove("kind") {
            Some(toml::Value::String(k)) => k,
            Some(other) => {
                return Err(de::Error::custom(format!(
                    "kind must be a string, not {}",
                    other.type_str()
                )))
            }
            None => return Err(de::Error::missing_field("kind")),
        };
        fn typed<T: serde::de::DeserializeOwned, E: de::Error>(table: toml::Table) -> Result<T, E> {
            T::deserialize(toml::Value::Table(table)).map_err(|e| E::custom(e.message()))
        }
        Ok(match kind.as_str() {
            "udp" => WorkloadConfig::Udp(typed(table)?),
            // A preset of `udp` (super::traces).
            "backbone" => WorkloadConfig::Udp(typed(super::traces::backbone_defaults(table))?),
            "pcap" => WorkloadConfig::Pcap(typed(table)?),
            "request" => WorkloadConfig::Request(typed(table)?),
            "echo" => WorkloadConfig::Echo(typed(table)?),
            "tcp" => WorkloadConfig::Tcp(typed(table)?),
            "tcp_sink" => WorkloadConfig::TcpSink(typed(table)?),
            "new_flows" => WorkloadConfig::NewFlows(typed(table)?),
            "tuples" => WorkloadConfig::Tuples(typed(table)?),
            _ => WorkloadConfig::Registered { kind, table },
        })
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
/// tenant = { count = 16, base = 100 }  # or: VID = 100 + hash(5-tuple) mod 16, per flow
/// rotate_every = "10ms"            # with zipf: the popular flows change every 10 ms
/// tcp_flags = 2                    # send TCP segments with these flags (here SYN)
/// flows_at = "dst"                 # random flows vary the destination, not the source
/// vxlan_vni = 1                    # wrap every frame in VXLAN with this VNI
/// gtpu_teid = 1000                 # send every packet in GTP-U, TEID 1000 + UE index
/// gtpu_sgw = "10.255.0.1"          # the tunnel's outer destination (default dst's)
/// gtpc_every = 18                  # session signalling: each UE's first packet, then every 18th
/// gtpc_body = ["ue", "teid", "teid", "enb"]   # its body's four words; default the inca-apps epc layout
/// gtpc_attach = false              # no session message before each UE's first packet
/// ```
///
/// `tenant` tags each flow with its tenant's VLAN: `base` (default 1) +
/// a hash of the generated 5-tuple mod `count`, so a flow keeps its tenant
/// for its life and tenants split the flows near evenly [our choice: a
/// hash, not a table, so it costs nothing at 10^8 flows]. `rotate_every`
/// shifts popularity: in period `e` (from `start`) Zipf rank `r` is flow
/// `(r + o_e) mod flows`, `o_e` a hash of `e` — the top-k flows change at
/// each period boundary and are stable within one.
///
/// `tcp_flags`, `flows_at` and `vxlan_vni` shape frames for NFs that need
/// them ([`crate::nodes::encap`]): a firewall learning connections from inside SYNs,
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
/// four big-endian 32-bit words laid out by `gtpc_body` ([`GtpcWord`]); the
/// default is inca-apps' `epc` signal (version 1, create, UE, TEID, eNB),
/// and a system with another layout writes its own (RedPlane's EPC-SGW:
/// `["ue", "teid", "teid", "enb"]`, see `inca_redplane::apps::epc`). The
/// eNB is the host's address.
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
    /// Number of random 5-tuples (1..=10^9; above 10^6 in O(1) memory).
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
    /// Per-flow tenant VLAN (not with `vlan`).
    pub tenant: Option<TenantConfig>,
    /// With `zipf`: re-rank popularity every this long (time).
    pub rotate_every: Option<Quantity>,
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
    /// The signalling body's four words. Default
    /// [`GtpcWord::INCA_EPC`].
    pub gtpc_body: Option<[GtpcWord; 4]>,
    /// Whether each UE's first packet is its session message (default
    /// true; false when an earlier workload attached the UEs).
    pub gtpc_attach: Option<bool>,
}

/// One 32-bit word of a generated session signalling body (see
/// [`UdpConfig`]): written in a scenario as `"ue"`, `"teid"`, `"enb"` or an
/// integer constant. The simulator knows only these fields; which system
/// wants which layout is the system's business.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GtpcWord {
    /// A field of the message.
    Field(GtpcField),
    /// A constant (a version, a message type).
    Const(u32),
}

/// A field of a session signalling message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GtpcField {
    /// The UE's address.
    Ue,
    /// The bearer's TEID.
    Teid,
    /// The eNB's address (the host's).
    Enb,
}

struct GtpcWordVisitor;

impl<'de> Visitor<'de> for GtpcWordVisitor {
    type Value = GtpcWord;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a gtpc_body word: \"ue\", \"teid\", \"enb\" or an integer in 0..=4294967295")
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<GtpcWord, E> {
        u32::try_from(v)
            .map(GtpcWord::Const)
            .map_err(|_| E::custom(format!("gtpc_body word {v} does not fit in 32 bits")))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<GtpcWord, E> {
        u64::try_from(v)
            .map_err(|_| E::custom(format!("gtpc_body word {v} is negative")))
            .and_then(|v| self.visit_u64(v))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<GtpcWord, E> {
        match v {
            "ue" => Ok(GtpcWord::Field(GtpcField::Ue)),
            "teid" => Ok(GtpcWord::Field(GtpcField::Teid)),
            "enb" => Ok(GtpcWord::Field(GtpcField::Enb)),
            other => Err(E::custom(format!(
                "gtpc_body word {other:?} is none of \"ue\", \"teid\", \"enb\" (or an integer)"
            ))),
        }
    }
}

impl<'de> Deserialize<'de> for GtpcWord {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(GtpcWordVisitor)
    }
}

impl GtpcWord {
    /// inca-apps `epc`: version 1, type 1 (create), 2 reserved bytes, UE,
    /// TEID, eNB.
    pub const INCA_EPC: [GtpcWord; 4] = [
        GtpcWord::Const(0x0101_0000),
        GtpcWord::Field(GtpcField::Ue),
        GtpcWord::Field(GtpcField::Teid),
        GtpcWord::Field(GtpcField::Enb),
    ];

    /// Lays `words` out as a signalling body.
    pub fn body(
        words: &[GtpcWord; 4],
        ue: Ipv4Addr,
        teid: u32,
        enb: Ipv4Addr,
    ) -> [u8; GTPC_BODY_LEN] {
        let mut b = [0u8; GTPC_BODY_LEN];
        for (chunk, w) in b.chunks_exact_mut(4).zip(words) {
            let v = match w {
                GtpcWord::Field(GtpcField::Ue) => u32::from(ue),
                GtpcWord::Field(GtpcField::Teid) => teid,
                GtpcWord::Field(GtpcField::Enb) => u32::from(enb),
                GtpcWord::Const(c) => *c,
            };
            chunk.copy_from_slice(&v.to_be_bytes());
        }
        b
    }
}

/// The signalling (GTP-C stand-in) UDP port.
pub const GTPC_PORT: u16 = 2123;

/// Length of a signalling body.
pub const GTPC_BODY_LEN: usize = 16;

/// `tenant = { count = T, base = B }` of a `udp` workload: VLAN id
/// `B + hash(5-tuple) mod T`.
#[derive(Debug, Clone, Copy, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TenantConfig {
    /// Number of tenants (1..=4094).
    pub count: u16,
    /// First tenant's VLAN id. Default 1.
    pub base: Option<u16>,
}

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
pub(crate) fn src_port_range(
    field: &str,
    ports: Option<[u16; 2]>,
) -> Result<(u16, u16), HostError> {
    match ports {
        Some([lo, hi]) if lo > hi || lo == 0 => Err(invalid(
            &format!("{field}.src_ports"),
            format!("[{lo}, {hi}] is not a range of non-zero ports"),
        )),
        Some([lo, hi]) => Ok((lo, hi)),
        None => Ok((1024, 65535)),
    }
}

pub(crate) fn invalid(field: &str, reason: impl Into<String>) -> HostError {
    HostError::Invalid {
        field: field.to_string(),
        reason: reason.into(),
    }
}

/// A time field (`"1ms"`, `1500`), checked.
pub(crate) fn parse_time_field(q: &Quantity, field: &str) -> Result<Nanos, HostError> {
    q.parse(units::parse_time).ok_or_else(|| {
        invalid(
            field,
            format!("invalid time {q}: write e.g. 1500, 20us, 1.5ms, 2s"),
        )
    })
}
