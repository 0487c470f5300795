//! The switch-side parameters of RedPlane (spec §5.11) and where its
//! messages go: the switch's own address, the store shards, and the static
//! routes released packets take.

use inca_apps::params::{ParamError, Params};
use inca_switch::device::{MILLIS, SECONDS};
use inca_switch::{Nanos, PortId};

/// One shard of the state store as `shard_map` sees it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Shard {
    /// Lowest 16-bit key hash the shard owns.
    pub lo: u16,
    /// Highest 16-bit key hash the shard owns.
    pub hi: u16,
    /// The shard head's IPv4 address.
    pub ip: [u8; 4],
    /// The worker's UDP port (8001..=8063).
    pub udp: u16,
    /// The switch port toward it.
    pub port: PortId,
}

/// The 16-bit hash range of shard `i` of `n`: the hashes `h` with
/// `h * n >> 16 == i`, the store's own split (`store::apps::hash_shard`).
pub fn shard_hash_range(i: u32, n: u32) -> (u16, u16) {
    let n = u64::from(n.max(1));
    let lo = |i: u64| (i * 65_536).div_ceil(n);
    let (a, b) = (lo(u64::from(i)), lo(u64::from(i) + 1));
    (a.min(65_535) as u16, (b - 1).min(65_535) as u16)
}

/// A static route for released and bypassing packets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Route {
    /// Prefix.
    pub net: [u8; 4],
    /// Prefix length.
    pub len: u8,
    /// Egress port.
    pub port: PortId,
}

/// Parses one `NET/LEN@PORT` static route.
fn parse_route(item: &str) -> Result<Route, String> {
    let bad = || format!("{item:?} is not NET/LEN@PORT");
    let (prefix, port) = item.split_once('@').ok_or_else(bad)?;
    let (net, len) = prefix.split_once('/').ok_or_else(bad)?;
    let net: std::net::Ipv4Addr = net.parse().map_err(|_| bad())?;
    let len: u8 = len.parse().map_err(|_| bad())?;
    let port: PortId = port.parse().map_err(|_| bad())?;
    if len > 32 || port > 511 {
        return Err(bad());
    }
    Ok(Route {
        net: net.octets(),
        len,
        port,
    })
}

/// After a (re)start the control plane accepts no grant for a request sent
/// within this long of the boot [our choice]: the store lets a repeated
/// LEASE_NEW from the owner join its grant (same fence) while no write was
/// applied under it, and such a grant must never be one an earlier
/// incarnation of this switch wrote under. Must be longer than any write of
/// that incarnation can stay in flight (links, queues, reordering: well
/// under 1 ms in the simulated topologies).
pub const BOOT_QUIET: Nanos = 1_000_000;

/// RedPlane switch parameters. Defaults are spec §5.11.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RedPlaneConfig {
    /// This switch's id in recorded histories.
    pub switch_id: u32,
    /// This switch's RedPlane IPv4 address (source of requests).
    pub ip: [u8; 4],
    /// The switch's MAC address (source of frames it builds).
    pub mac: [u8; 6],
    /// Destination MAC of frames it builds [our choice: one next-hop MAC;
    /// simulator links are point-to-point and routers rewrite MACs].
    pub next_hop_mac: [u8; 6],
    /// Store shards, by hash range.
    pub shards: Vec<Shard>,
    /// Static routes (longest prefix wins).
    pub routes: Vec<Route>,
    /// LEASE_PERIOD.
    pub lease_period: Nanos,
    /// RENEW_INTERVAL.
    pub renew_interval: Nanos,
    /// RENEW_RETRY.
    pub renew_retry: Nanos,
    /// LEASE_GUARD.
    pub lease_guard: Nanos,
    /// MAX_ACK_AGE.
    pub max_ack_age: Nanos,
    /// RTO of the retransmission loop.
    pub rto: Nanos,
    /// MAX_RETX.
    pub max_retx: u8,
    /// MAX_INFLIGHT.
    pub max_inflight: u32,
    /// MAX_FLOWS: per-flow register slots and `lease_tbl` entries.
    pub slots: usize,
    /// The idle reaper frees a slot after this long without a hit
    /// (spec §3.3: 10 s).
    pub idle_timeout: Nanos,
    /// Emulated request loss (spec §8 item 8), per mille: each write
    /// request (first send or retransmission) about to leave for the store
    /// is dropped with this probability, drawn from the device RNG. Its loop
    /// copy stays, so the loop retransmits it. 0 (the default) in normal use.
    pub request_drop_permille: u16,
    /// Bin of the loop-occupancy series (`loop_queue_max_bytes`)
    /// [our choice: 1 ms].
    pub occupancy_bin: Nanos,
    /// A deliberately broken switch, for showing that the campaign's
    /// checkers catch bugs (test only; `None` in every real scenario).
    pub mutant: Option<Mutant>,
}

/// Deliberate bugs (param `mutant`), test only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mutant {
    /// `no_state_transfer`: a grant installs the app's zero value instead
    /// of the value the store sent, so a flow that migrates loses its
    /// state (its counter restarts).
    NoStateTransfer,
    /// `skip_fence`: a grant for an installed key keeps the installed
    /// sequence registers instead of adopting the store's base.
    SkipFence,
}

impl Default for RedPlaneConfig {
    fn default() -> Self {
        RedPlaneConfig {
            switch_id: 0,
            ip: [10, 255, 0, 1],
            mac: [0x02, 0, 0, 0, 0xfe, 0x01],
            next_hop_mac: [0x02, 0, 0, 0, 0xfe, 0xff],
            shards: vec![Shard {
                lo: 0,
                hi: u16::MAX,
                ip: [10, 254, 0, 1],
                udp: 8001,
                port: 2,
            }],
            routes: Vec::new(),
            lease_period: SECONDS,
            renew_interval: SECONDS / 2,
            renew_retry: 10 * MILLIS,
            lease_guard: MILLIS,
            max_ack_age: 250 * MILLIS,
            rto: MILLIS,
            max_retx: 16,
            max_inflight: 1024,
            slots: 131_072,
            idle_timeout: 10 * SECONDS,
            request_drop_permille: 0,
            occupancy_bin: MILLIS,
            mutant: None,
        }
    }
}

/// Parameter names [`RedPlaneConfig::from_params`] reads.
pub const PARAMS: &[&str] = &[
    "switch_id",
    "rp_ip",
    "store_ip",
    "store_udp",
    "store_port",
    "shards",
    "up_port",
    "down_net",
    "down_len",
    "down_port",
    "lease_period_us",
    "renew_interval_us",
    "rto_us",
    "max_retx",
    "max_inflight",
    "slots",
    "flows",
    "idle_timeout_ms",
    "routes",
    "request_drop_permille",
    "occupancy_bin_us",
    "mutant",
];

impl RedPlaneConfig {
    /// Reads the RedPlane parameters: `shards` shards whose heads are
    /// `store_ip`, `store_ip`+1, … on UDP `store_udp`, all reached through
    /// `store_port`, splitting the hash space evenly; a default route via
    /// `up_port` and one more-specific route `down_net/down_len` via
    /// `down_port` [our choice: enough for the aggregation-switch
    /// topologies of spec §8, in key=value form].
    pub fn from_params(p: &Params) -> Result<Self, ParamError> {
        let d = RedPlaneConfig::default();
        let store_ip = p.ipv4("store_ip", d.shards[0].ip)?;
        let store_udp = p.number("store_udp", 8001, 8001, 8063)? as u16;
        let store_port = p.number("store_port", 2, 0, 511)? as PortId;
        let n = p.count("shards", 1, 64)? as u32;
        let shards = (0..n)
            .map(|i| {
                let (lo, hi) = shard_hash_range(i, n);
                Shard {
                    lo,
                    hi,
                    ip: u32::from_be_bytes(store_ip).wrapping_add(i).to_be_bytes(),
                    udp: store_udp,
                    port: store_port,
                }
            })
            .collect();
        let mut routes = vec![Route {
            net: [0; 4],
            len: 0,
            port: p.number("up_port", 1, 0, 511)? as PortId,
        }];
        let down_len = p.number("down_len", 0, 0, 32)? as u8;
        if down_len > 0 {
            routes.push(Route {
                net: p.ipv4("down_net", [10, 0, 0, 0])?,
                len: down_len,
                port: p.number("down_port", 0, 0, 511)? as PortId,
            });
        }
        // More static routes, `NET/LEN@PORT` separated by commas or spaces
        // (several racks below one switch) [our choice].
        if let Some(text) = p.text("routes") {
            for item in text.split([',', ' ']).filter(|s| !s.is_empty()) {
                routes.push(parse_route(item).map_err(|reason| ParamError::Value {
                    name: "routes".into(),
                    reason,
                })?);
            }
        }
        let us = |name: &str, default: Nanos| -> Result<Nanos, ParamError> {
            Ok(p.count(name, default / 1000, 3_600_000_000)? * 1000)
        };
        let cfg = RedPlaneConfig {
            switch_id: p.number("switch_id", 0, 0, u64::from(u32::MAX))? as u32,
            ip: p.ipv4("rp_ip", d.ip)?,
            shards,
            routes,
            lease_period: us("lease_period_us", d.lease_period)?,
            renew_interval: us("renew_interval_us", d.renew_interval)?,
            rto: us("rto_us", d.rto)?,
            max_retx: p.number("max_retx", 16, 1, 255)? as u8,
            max_inflight: p.number("max_inflight", 1024, 1, 16_384)? as u32,
            // `flows` (as the plain apps call it) is an alias of `slots`.
            slots: p.count("slots", p.count("flows", d.slots as u64, 1 << 24)?, 1 << 24)? as usize,
            idle_timeout: p.count("idle_timeout_ms", 10_000, 3_600_000)? * MILLIS,
            request_drop_permille: p.number("request_drop_permille", 0, 0, 1000)? as u16,
            occupancy_bin: p.count("occupancy_bin_us", d.occupancy_bin / 1000, 3_600_000_000)?
                * 1000,
            mutant: match p.text("mutant") {
                None => None,
                Some("no_state_transfer") => Some(Mutant::NoStateTransfer),
                Some("skip_fence") => Some(Mutant::SkipFence),
                Some(other) => {
                    return Err(ParamError::Value {
                        name: "mutant".into(),
                        reason: format!(
                            "{other:?}: the test-only mutants are no_state_transfer and skip_fence"
                        ),
                    })
                }
            },
            ..d
        };
        cfg.validate().map_err(|reason| ParamError::Value {
            name: "redplane".into(),
            reason,
        })?;
        Ok(cfg)
    }

    /// Checks the relations the protocol needs (spec §5.6: MAX_INFLIGHT +
    /// FENCE_GAP < 2^15; the renewal must come before the lease ends).
    pub fn validate(&self) -> Result<(), String> {
        if self.max_inflight + 4096 >= 1 << 15 {
            return Err("max_inflight + FENCE_GAP must stay below 2^15".into());
        }
        if self.renew_interval >= self.lease_period {
            return Err("renew_interval must be shorter than lease_period".into());
        }
        if self.lease_guard >= self.lease_period {
            return Err("lease_guard must be shorter than lease_period".into());
        }
        if self.routes.len() > 64 {
            return Err("at most 64 static routes (the rp_route table)".into());
        }
        if self.shards.is_empty() {
            return Err("at least one store shard is needed".into());
        }
        Ok(())
    }
}
