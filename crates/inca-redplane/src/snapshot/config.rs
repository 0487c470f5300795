//! Parameters of bounded-inconsistency mode (spec §5.9, §5.11) with their
//! defaults, the lease-time arithmetic of §5.4 in the 2^16 ns units the data
//! plane keeps, and the packet-generator validator of §9 item 15.
//!
//! H2's linearizable switch keeps its own copy of the lease arithmetic; this
//! one is small and local so that the snapshot block does not depend on the
//! per-flow switch [our choice].

use std::net::Ipv4Addr;

use inca_apps::params::{ParamError, Params};
use inca_switch::control::serialisation;
use inca_switch::tm::WIRE_OVERHEAD_BYTES;
use inca_switch::{Nanos, PortId, Profile};

/// What the control plane does when a partition's last committed snapshot is
/// older than ε (§5.9 "ε monitor", \[TH\] §5.4.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum EpsilonAction {
    /// Only report: a counter, a [`crate::snapshot::MSG_EPSILON`] control
    /// message, and the observer.
    Alarm,
    /// Give the partition up here: its lease is zeroed, so its next packet
    /// asks the store again and gets the last committed snapshot back; what
    /// was counted since that snapshot is dropped.
    DropPartition,
    /// Withdraw from ECMP for the partition (the default, §9 item 13): the
    /// switch stops forwarding the partition's data and stops replicating
    /// it (so its lease lapses at the store and another switch can take the
    /// partition over), and sends a [`crate::snapshot::MSG_WITHDRAW`]
    /// control message naming the partition. A router learns it the way it
    /// learns any withdrawal: the switch's control plane stops announcing the
    /// partition's VLAN (a BGP withdraw, or BFD on the VLAN sub-interface);
    /// in inca the message is what a scenario driver hands to the router.
    DeclareFailed,
}

impl EpsilonAction {
    /// Parses `alarm`, `drop_partition` or `declare_failed`.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "alarm" => Some(EpsilonAction::Alarm),
            "drop_partition" => Some(EpsilonAction::DropPartition),
            "declare_failed" => Some(EpsilonAction::DeclareFailed),
            _ => None,
        }
    }

    /// Its parameter spelling.
    pub fn name(self) -> &'static str {
        match self {
            EpsilonAction::Alarm => "alarm",
            EpsilonAction::DropPartition => "drop_partition",
            EpsilonAction::DeclareFailed => "declare_failed",
        }
    }
}

/// Everything bounded mode needs besides the app. See the module
/// documentation; defaults are those of §5.11.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotConfig {
    /// Snapshot period T_snap (1 ms).
    pub t_snap: Nanos,
    /// Staleness bound ε (3·T_snap).
    pub epsilon: Nanos,
    /// What happens when ε is exceeded.
    pub action: EpsilonAction,
    /// LEASE_PERIOD (1 s).
    pub lease_period: Nanos,
    /// LEASE_GUARD (1 ms).
    pub lease_guard: Nanos,
    /// MAX_ACK_AGE (250 ms).
    pub max_ack_age: Nanos,
    /// Retransmission timeout of snapshot requests (1 ms).
    pub rto: Nanos,
    /// Retransmissions before giving up (16).
    pub max_retx: u8,
    /// The switch's RedPlane address and MAC.
    pub switch_ip: Ipv4Addr,
    /// The switch's MAC.
    pub switch_mac: [u8; 6],
    /// The store head's address.
    pub store_ip: Ipv4Addr,
    /// The next hop's MAC towards the store.
    pub store_mac: [u8; 6],
    /// The store worker's UDP port (8001–8063).
    pub store_udp: u16,
    /// The switch port towards the store.
    pub store_port: PortId,
    /// Data path: frames from `in_port` go to `out_port` and back.
    pub in_port: PortId,
    /// See `in_port`.
    pub out_port: PortId,
    /// The packet-generator stream of the snapshot timer.
    pub pktgen_stream: u8,
    /// The 3-bit app id in the generator header.
    pub app_id: u8,
    /// The mirror session of the retransmission loop.
    pub mirror_session: u16,
}

impl Default for SnapshotConfig {
    fn default() -> Self {
        SnapshotConfig {
            t_snap: 1_000_000,
            epsilon: 3_000_000,
            action: EpsilonAction::DeclareFailed,
            lease_period: 1_000_000_000,
            lease_guard: 1_000_000,
            max_ack_age: 250_000_000,
            rto: 1_000_000,
            max_retx: 16,
            switch_ip: Ipv4Addr::new(10, 0, 100, 1),
            switch_mac: [0x02, 0, 0, 0, 0x64, 1],
            store_ip: Ipv4Addr::new(10, 0, 200, 1),
            store_mac: [0x02, 0, 0, 0, 0xc8, 1],
            store_udp: 8001,
            store_port: 2,
            in_port: 0,
            out_port: 1,
            pktgen_stream: 0,
            app_id: 1,
            mirror_session: 7,
        }
    }
}

impl SnapshotConfig {
    /// Parameter names.
    pub const PARAMS: &'static [&'static str] = &[
        "t_snap_us",
        "epsilon_us",
        "epsilon_action",
        "lease_ms",
        "rto_us",
        "max_retx",
        "switch_ip",
        "store_ip",
        "store_udp",
        "store_port",
        "in_port",
        "out_port",
        "switch_mac_low",
    ];

    /// From parameters: `t_snap_us` (1000), `epsilon_us` (3·T_snap),
    /// `epsilon_action` (declare_failed), `lease_ms` (1000), `rto_us`
    /// (1000), `max_retx` (16), `switch_ip`, `store_ip`, `store_udp`
    /// (8001), `store_port` (2), `in_port` (0), `out_port` (1),
    /// `switch_mac_low` (last MAC byte, 1).
    pub fn from_params(p: &Params) -> Result<Self, ParamError> {
        let d = SnapshotConfig::default();
        let t_snap = p.number("t_snap_us", 1000, 1, 10_000_000)? * 1000;
        let action = match p.text("epsilon_action") {
            None => d.action,
            Some(s) => EpsilonAction::parse(s).ok_or_else(|| ParamError::Value {
                name: "epsilon_action".into(),
                reason: format!("{s:?} is not alarm, drop_partition or declare_failed"),
            })?,
        };
        let mut mac = d.switch_mac;
        mac[5] = p.number("switch_mac_low", 1, 0, 255)? as u8;
        Ok(SnapshotConfig {
            t_snap,
            epsilon: p.number("epsilon_us", 3 * t_snap / 1000, 1, 1_000_000_000)? * 1000,
            action,
            lease_period: p.number("lease_ms", 1000, 1, 3_600_000)? * 1_000_000,
            rto: p.number("rto_us", 1000, 1, 10_000_000)? * 1000,
            max_retx: p.number("max_retx", 16, 1, 255)? as u8,
            switch_ip: p.ipv4("switch_ip", d.switch_ip.octets())?.into(),
            switch_mac: mac,
            store_ip: p.ipv4("store_ip", d.store_ip.octets())?.into(),
            store_udp: p.number("store_udp", 8001, 8001, 8063)? as u16,
            store_port: p.number("store_port", 2, 0, 511)? as PortId,
            in_port: p.number("in_port", 0, 0, 511)? as PortId,
            out_port: p.number("out_port", 1, 0, 511)? as PortId,
            ..d
        })
    }
}

/// Lease and commit times are kept in the data plane as bits \[47:16\] of the
/// 48-bit nanosecond clock: units of 65.536 µs (§3.1, \[PROTO\]).
pub const LEASE_UNIT_SHIFT: u32 = 16;

/// `t` in lease units (wrapping, as the 32-bit register does).
pub fn lease_units(t: Nanos) -> u32 {
    (t >> LEASE_UNIT_SHIFT) as u32
}

/// Whether lease-unit time `a` is after `b` in serial order (RFC 1982 on 32
/// bits), so a lease survives the register's wrap.
pub fn units_after(a: u32, b: u32) -> bool {
    a != b && a.wrapping_sub(b) < 1 << 31
}

/// The send timestamp a request carries in its IPv4 Identification: bits
/// \[31:16\] of the clock (§4.1).
pub fn send_stamp(t: Nanos) -> u16 {
    (t >> 16) as u16
}

/// §5.4: the lease end (lease units) an ack with Identification `ident`
/// arriving at `now` grants, or `None` if the ack is older than
/// MAX_ACK_AGE.
pub fn lease_end(cfg: &SnapshotConfig, now: Nanos, ident: u16) -> Option<u32> {
    let age = u64::from(send_stamp(now).wrapping_sub(ident)) << 16;
    if age > cfg.max_ack_age {
        return None;
    }
    let end = (now - age.min(now)) + cfg.lease_period - cfg.lease_guard.min(cfg.lease_period);
    Some(lease_units(end))
}

/// What the generator validator found (§9 item 15).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GeneratorPlan {
    /// Packets per burst (n·P).
    pub batch: u16,
    /// Time from packet 0 entering ingress to the last packet leaving it.
    pub burst_time: Nanos,
}

/// Checks the lazy-snapshot precondition: a burst of `entries × partitions`
/// packets of `frame_len` bytes fits the generator's 16-bit packet ids, and
/// it has passed the pipeline (the last packet's ingress plus the ingress
/// latency) before the next burst's packet 0 flips `active` again.
pub fn validate_generator(
    profile: &Profile,
    cfg: &SnapshotConfig,
    entries: usize,
    partitions: usize,
    frame_len: usize,
) -> Result<GeneratorPlan, String> {
    let n = entries
        .checked_mul(partitions)
        .filter(|&n| n >= 1 && n <= usize::from(u16::MAX))
        .ok_or_else(|| {
            format!(
                "a snapshot burst of {entries} entries × {partitions} partitions does not fit the generator's 16-bit packet ids"
            )
        })?;
    if profile.features.pktgen_streams <= cfg.pktgen_stream {
        return Err(format!(
            "packet-generator stream {} does not exist on profile {} ({} streams)",
            cfg.pktgen_stream, profile.name, profile.features.pktgen_streams
        ));
    }
    let gap = serialisation(
        frame_len + WIRE_OVERHEAD_BYTES,
        profile.data_path.port_rate_bps,
    );
    let burst_time = gap * (n as u64 - 1) + profile.data_path.ingress_latency;
    if burst_time >= cfg.t_snap {
        return Err(format!(
            "a snapshot burst of {n} packets takes {burst_time} ns through the pipeline, not less than T_snap = {} ns: bursts would overlap",
            cfg.t_snap
        ));
    }
    if cfg.epsilon <= cfg.t_snap {
        return Err(format!(
            "epsilon ({} ns) must exceed T_snap ({} ns)",
            cfg.epsilon, cfg.t_snap
        ));
    }
    Ok(GeneratorPlan {
        batch: n as u16,
        burst_time,
    })
}
