//! An SDW replica's configuration (specs/swish.md §3.3, §5.5): the
//! collection's shape, the members, the timers, the switches the ablation
//! and the broken variant use; validation against the §3.3/§2 limits; and
//! the named parameters `inca check` sizes the program with.

use inca_apps::params::{ParamError, Params};
use inca_switch::{Nanos, PortId};

use crate::addr::{ReplicaAddr, Rid};

/// How the cells of a collection merge (§3.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Merge {
    /// Wrapping sum (identity 0).
    Sum,
    /// Bitwise or (identity 0).
    Or,
    /// Maximum (identity 0).
    Max,
}

impl Merge {
    /// `a ⊕ b`.
    pub fn apply(self, a: u32, b: u32) -> u32 {
        match self {
            Merge::Sum => a.wrapping_add(b),
            Merge::Or => a | b,
            Merge::Max => a.max(b),
        }
    }
}

/// The duplicate filter (§3.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dedup {
    /// `next_col[N]`: a sender's columns must arrive in order; N ≤ 4,096.
    CounterPerSwitch,
    /// `colmask[C]` and `recv_cols[N]`: any order; N ≤ 32.
    BitmapPerColumn,
}

/// Largest N in bitmap mode: the mask width (§3.3).
pub const BITMAP_MAX_N: usize = 32;
/// Largest N in counter mode (§3.3, the paper's sizing, model input).
pub const COUNTER_MAX_N: usize = 4_096;
/// Generator streams per pipe (§2).
pub const MAX_STREAMS: u8 = 8;
/// Columns one generator batch can carry (the batch size is a u16).
pub const BATCH_MAX: u32 = 65_535;
/// `B` meaning unbounded (§3.3).
pub const UNBOUNDED: u32 = u32::MAX;

/// One replica's configuration.
#[derive(Debug, Clone)]
pub struct SdwConfig {
    /// This replica.
    pub rid: Rid,
    /// Every member, this replica included, in bit order (member k is bit
    /// k of the status bitmaps); `port` is the local port toward it (for
    /// this replica: unused, see `loop_port`).
    pub members: Vec<ReplicaAddr>,
    /// The port cabled back to this switch (a recirculation port in
    /// loopback, §5.5 handler 6): the self copy of DATA leaves on it.
    pub loop_port: PortId,
    /// Rows R (≤ 3: one packet carries them all; §2).
    pub rows: u8,
    /// Columns C per row.
    pub cols: u32,
    /// The merge.
    pub merge: Merge,
    /// Maximum accepted updates per window ([`UNBOUNDED`]: none).
    pub b: u32,
    /// The duplicate filter.
    pub dedup: Dedup,
    /// The ready phase (§5.5); off only for the ablation.
    pub ready_phase: bool,
    /// ACK-check timer period T_chk (default 2 µs, [our choice] §5.5).
    pub t_chk: Nanos,
    /// RTO_ready (default 10 µs, [our choice] §5.5).
    pub rto_ready: Nanos,
    /// Round-trip time between replicas assumed by RTO_data (default
    /// 2 µs: two 0.5 µs links and two 0.5 µs pipeline passes, spec §8.1).
    pub rtt: Nanos,
    /// Rate of the replication port, for t_pkt (default 100 Gb/s, §8.1).
    pub port_rate_bps: u64,
    /// SwiSh group id of the collection.
    pub group_id: u8,
    /// The collection id carried in DATA.
    pub coll_id: u16,
    /// First generator stream the collection uses: the ACK-check timer,
    /// then one DATA stream per [`BATCH_MAX`] columns.
    pub first_stream: u8,
    /// Members the controller declared failed (recovery, §5.6): excluded
    /// from the groups, the status masks and the counts; their bit
    /// positions stay, so no state is renumbered [our choice].
    pub failed: Vec<Rid>,
    /// Broken variant, for showing the checks catch it: no duplicate
    /// filter (every DATA of the window merges; completion on the last
    /// column). Never in real runs.
    pub break_dedup: bool,
    /// The application the replica runs on its collection (default: the
    /// test application of [`super::app`]).
    pub app: SdwApp,
    /// Shortest time from an advance to the window's READY (0: none, the
    /// protocol as §5.5 has it). [our choice, scale] A simulation of a
    /// second or more paces the windows so it does not model 160 Mpps of
    /// sync traffic; a query then lags by up to ~3 such windows. Needs the
    /// ready phase.
    pub min_window: Nanos,
    /// The rate limiter on this collection (§7; [`super::limiter`]), or
    /// none.
    pub limiter: Option<crate::limiter::UserLimit>,
    /// Data load through the data ports (spec §8.2 exp. 6), none by
    /// default: app requests are answered instead of snaked.
    pub snake: Option<Snake>,
}

/// What the replica's non-SDW traffic is (§7).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SdwApp {
    /// Update/query requests of the test application ([`super::app`]),
    /// answered back to the sender.
    Test,
    /// The super-spreader / DDoS detector ([`super::ddos`]): every other
    /// IPv4/UDP frame is traffic, sampled into the sketch and forwarded to
    /// `out_port` unless its source is blocked.
    Ddos {
        /// Where passing traffic leaves.
        out_port: PortId,
    },
}

/// A snake through the data ports [our choice of wiring]: ports `first ..
/// first + 2·pairs` are cabled in pairs (`first + 2k` to `first + 2k + 1`).
/// An app request from any other port goes out `first`; one arriving on
/// the odd port of a pair goes back out that port, across the cable;
/// one arriving back on the even port goes on to the next pair; after the
/// last pair it is dropped. Every pass runs the app handler (the update
/// lands in R_u), so a request crosses the pipeline `1 + 2·pairs` times
/// and every snake port carries the stream in both directions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Snake {
    /// The first snake port.
    pub first: PortId,
    /// Cabled port pairs.
    pub pairs: u16,
}

impl Snake {
    /// Where a request that arrived on `port` goes next (`None`: the
    /// snake ends and it is dropped).
    pub fn next(self, port: PortId) -> Option<PortId> {
        let end = self.first + 2 * self.pairs;
        if port < self.first || port >= end {
            return Some(self.first);
        }
        let o = port - self.first;
        if o % 2 == 1 {
            Some(port)
        } else if port + 2 < end {
            Some(port + 2)
        } else {
            None
        }
    }
}

/// Why a configuration is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// A field is out of its range.
    #[error("SDW config field {field}: {reason}")]
    Field {
        /// The field.
        field: &'static str,
        /// What is wrong.
        reason: String,
    },
}

fn bad(field: &'static str, reason: impl Into<String>) -> ConfigError {
    ConfigError::Field {
        field,
        reason: reason.into(),
    }
}

impl SdwConfig {
    /// A configuration with the spec's defaults for replica `rid` of
    /// `members`.
    pub fn new(rid: Rid, members: Vec<ReplicaAddr>, loop_port: PortId) -> Self {
        SdwConfig {
            rid,
            members,
            loop_port,
            rows: 3,
            cols: 64,
            merge: Merge::Sum,
            b: UNBOUNDED,
            dedup: Dedup::BitmapPerColumn,
            ready_phase: true,
            t_chk: 2_000,
            rto_ready: 10_000,
            rtt: 2_000,
            port_rate_bps: 100_000_000_000,
            group_id: 1,
            coll_id: 1,
            first_stream: 0,
            failed: Vec::new(),
            break_dedup: false,
            app: SdwApp::Test,
            min_window: 0,
            limiter: None,
            snake: None,
        }
    }

    /// Generator streams the collection needs: the ACK-check timer and
    /// one DATA stream per [`BATCH_MAX`] columns.
    pub fn streams(&self) -> u8 {
        1 + self.cols.div_ceil(BATCH_MAX) as u8
    }

    /// Columns each DATA stream sends (the last may send fewer).
    pub fn cols_per_stream(&self) -> u32 {
        let n = u32::from(self.streams() - 1).max(1);
        self.cols.div_ceil(n)
    }

    /// RTO_data = max(10 µs, 2·ncols·t_pkt + 2·RTT) [our choice, §5.5];
    /// t_pkt is a 78-byte DATA frame plus 20 bytes of preamble and gap on
    /// the replication port.
    pub fn rto_data(&self) -> Nanos {
        let t_pkt = (78 + 20) * 8 * 1_000_000_000 / self.port_rate_bps.max(1);
        (2 * u64::from(self.cols) * t_pkt + 2 * self.rtt).max(10_000)
    }

    /// This replica's bit index.
    pub fn self_index(&self) -> Option<usize> {
        self.members.iter().position(|m| m.rid == self.rid)
    }

    /// Whether member `k` is live (not declared failed).
    pub fn is_live(&self, k: usize) -> bool {
        self.members
            .get(k)
            .is_some_and(|m| !self.failed.contains(&m.rid))
    }

    /// Live members.
    pub fn live_n(&self) -> usize {
        (0..self.members.len()).filter(|&k| self.is_live(k)).count()
    }

    /// The status mask of the live members (bitmap mode).
    pub fn member_mask(&self) -> u32 {
        (0..self.members.len().min(32))
            .filter(|&k| self.is_live(k))
            .fold(0, |m, k| m | (1u32 << k))
    }

    /// Checks the limits of §2 and §3.3.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let n = self.members.len();
        if n == 0 {
            return Err(bad("members", "at least one member"));
        }
        if self.self_index().is_none() {
            return Err(bad("rid", format!("{} is not among the members", self.rid)));
        }
        let max = match self.dedup {
            Dedup::BitmapPerColumn => BITMAP_MAX_N,
            Dedup::CounterPerSwitch => COUNTER_MAX_N,
        };
        if n > max {
            return Err(bad(
                "members",
                format!("{n} members; {:?} allows at most {max}", self.dedup),
            ));
        }
        let mut rids: Vec<Rid> = self.members.iter().map(|m| m.rid).collect();
        rids.sort_unstable();
        rids.dedup();
        if rids.len() != n {
            return Err(bad("members", "a rid appears twice"));
        }
        if self.rows == 0 || self.rows > 3 {
            return Err(bad(
                "rows",
                format!("{} rows; 1 to 3 per packet", self.rows),
            ));
        }
        if self.cols == 0 {
            return Err(bad("cols", "at least one column"));
        }
        if self.b == 0 {
            return Err(bad("b", "at least 1 (unbounded: 0xFFFFFFFF)"));
        }
        if self.min_window > 0 && !self.ready_phase {
            return Err(bad("min_window", "pacing windows needs the ready phase"));
        }
        if let SdwApp::Ddos { .. } = self.app {
            if self.rows != 3 || self.merge != Merge::Or {
                return Err(bad(
                    "app",
                    "the DDoS detector needs 3 rows and the Or merge",
                ));
            }
        }
        if self.t_chk == 0 || self.rto_ready == 0 {
            return Err(bad("t_chk", "timers must be positive"));
        }
        if let Some(sn) = self.snake {
            let end = u32::from(sn.first) + 2 * u32::from(sn.pairs);
            let taken = |p: u32| {
                p <= self.members.len() as u32
                    || p == u32::from(self.loop_port)
                    || p == u32::from(self.loop_port) + 1
            };
            if sn.pairs == 0 || (u32::from(sn.first)..end).any(taken) {
                return Err(bad(
                    "snake",
                    format!(
                        "ports {}..{end} must be at least one pair clear of the app, \
                         replication and loopback ports",
                        sn.first
                    ),
                ));
            }
        }
        let limiter = u32::from(self.limiter.is_some());
        let last = u32::from(self.first_stream) + u32::from(self.streams()) + limiter;
        if last > u32::from(MAX_STREAMS) {
            return Err(bad(
                "first_stream",
                format!(
                    "streams {}..{last} exceed the pipe's {MAX_STREAMS}",
                    self.first_stream
                ),
            ));
        }
        if let Some(l) = &self.limiter {
            if self.app != SdwApp::Test {
                // Both own the traffic of the data ports.
                return Err(bad("limiter", "not with another app"));
            }
            super::limiter::validate(self, l)?;
        }
        Ok(())
    }

    /// The parameters [`SdwConfig::from_params`] takes.
    pub const PARAMS: &'static [&'static str] = &[
        "rows",
        "cols",
        "replicas",
        "rid",
        "b",
        "dedup",
        "ready",
        "merge",
        "t_chk",
        "rto_ready",
        "app",
        "limiter",
        "ports",
        "rtt",
    ];

    /// A configuration from named parameters (`inca check sdw --set
    /// cols=65536`): `rows` (3), `cols` (64), `replicas` N (2, rids 1..=N
    /// on ports 1..=N, the loopback on port 0), `rid` (1), `b`
    /// (unbounded), `dedup` (`bitmap` or `counter`), `ready` (1),
    /// `merge` (`sum`, `or`, `max`), `t_chk`, `rto_ready` and `rtt` (the
    /// round trip RTO_data assumes; live runs set it to the real one) in
    /// ns, `app` (`test`, or `ddos`: the §7 detector, which sets 3 rows and
    /// Or), `limiter` (0|1: SwiSh §9.1's rate limiter, 40 users from
    /// 10.49.0.0 admitted to port N + 1; needs `merge=sum` and ≥ 40
    /// `cols`), and
    /// `ports` — the port toward each member in rid order (`"2,1"` or
    /// `[2, 1]`), this replica's own entry being its loopback port (cabled
    /// to the next port) [our choice]; without it member r is on port r
    /// and the loopback is port 0 (what `inca check` needs). Members have
    /// their conventional addresses ([`ReplicaAddr::conventional`]).
    pub fn from_params(p: &Params) -> Result<Self, ParamError> {
        p.check_known("swish_sdw", Self::PARAMS)?;
        let n = p.count("replicas", 2, COUNTER_MAX_N as u64)? as u16;
        let rid = p.number("rid", 1, 1, u64::from(n))? as u16;
        let ports = match p.text("ports") {
            Some(text) => parse_ports(text, n)?,
            None => (1..=n).map(|r| if r == rid { 0 } else { r }).collect(),
        };
        let loop_port = ports[usize::from(rid - 1)];
        // (The default layout is for sizing only and never cabled.)
        if p.text("ports").is_some() && ports.contains(&loop_port.wrapping_add(1)) {
            return Err(ParamError::Value {
                name: "ports".into(),
                reason: format!(
                    "port {} is where loopback port {loop_port} comes back in, not a peer's",
                    loop_port.wrapping_add(1)
                ),
            });
        }
        let members = (1..=n)
            .map(|r| ReplicaAddr::conventional(r, ports[usize::from(r - 1)]))
            .collect();
        let mut c = SdwConfig::new(rid, members, loop_port);
        c.rows = p.number("rows", 3, 1, 3)? as u8;
        c.cols = p.count("cols", 64, 1 << 24)? as u32;
        c.b = p.count("b", u64::from(UNBOUNDED), u64::from(UNBOUNDED))? as u32;
        c.ready_phase = p.number("ready", 1, 0, 1)? == 1;
        c.t_chk = p.count("t_chk", 2_000, 1_000_000_000)?;
        c.rto_ready = p.count("rto_ready", 10_000, 1_000_000_000)?;
        c.rtt = p.count("rtt", 2_000, 1_000_000_000)?;
        let value = |name: &str, reason: &str| ParamError::Value {
            name: name.to_string(),
            reason: reason.to_string(),
        };
        c.dedup = match p.text("dedup").unwrap_or("bitmap") {
            "bitmap" => Dedup::BitmapPerColumn,
            "counter" => Dedup::CounterPerSwitch,
            _ => return Err(value("dedup", "bitmap or counter")),
        };
        c.merge = match p.text("merge").unwrap_or("sum") {
            "sum" => Merge::Sum,
            "or" => Merge::Or,
            "max" => Merge::Max,
            _ => return Err(value("merge", "sum, or or max")),
        };
        match p.text("app").unwrap_or("test") {
            "test" => {}
            "ddos" => {
                // Traffic leaves after the member ports [our choice].
                c.app = SdwApp::Ddos { out_port: n + 1 };
                c.merge = Merge::Or;
                c.rows = 3;
            }
            _ => return Err(value("app", "test or ddos")),
        }
        if p.number("limiter", 0, 0, 1)? == 1 {
            let first = std::net::Ipv4Addr::new(10, 49, 0, 0);
            c.limiter = Some(crate::limiter::UserLimit::new(first, n + 1));
        }
        c.validate()
            .map_err(|e| value("swish_sdw", &e.to_string()))?;
        Ok(c)
    }
}

/// The `ports` parameter: one port per member, in rid order; the peers'
/// ports distinct and none of them the loopback's return port (own + 1).
fn parse_ports(text: &str, n: u16) -> Result<Vec<PortId>, ParamError> {
    let bad = |reason: String| ParamError::Value {
        name: "ports".into(),
        reason,
    };
    let inner = text.trim().trim_start_matches('[').trim_end_matches(']');
    let ports = inner
        .split(',')
        .map(|s| {
            s.trim()
                .parse::<PortId>()
                .map_err(|_| bad(format!("{:?} is not a port number", s.trim())))
        })
        .collect::<Result<Vec<_>, _>>()?;
    if ports.len() != usize::from(n) {
        return Err(bad(format!(
            "{} ports for {n} replicas: give one per member, in rid order",
            ports.len()
        )));
    }
    let mut sorted = ports.clone();
    sorted.sort_unstable();
    if sorted.windows(2).any(|w| w[0] == w[1]) {
        return Err(bad("a port appears twice".into()));
    }
    Ok(ports)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn members(n: u16) -> Vec<ReplicaAddr> {
        (1..=n).map(|r| ReplicaAddr::conventional(r, r)).collect()
    }

    #[test]
    fn validation_enforces_the_scaling_limits() {
        let mut c = SdwConfig::new(1, members(32), 0);
        assert!(c.validate().is_ok());
        c.members = members(33);
        assert!(c.validate().is_err(), "bitmap mode caps N at 32");
        c.dedup = Dedup::CounterPerSwitch;
        assert!(c.validate().is_ok());
        c.members = members(4_096);
        assert!(c.validate().is_ok(), "counter mode takes N = 4,096");
        c.members = members(4_097);
        assert!(c.validate().is_err());
        let mut c = SdwConfig::new(1, members(2), 0);
        c.cols = 65_536;
        assert_eq!(c.streams(), 3);
        c.first_stream = 5;
        assert!(c.validate().is_ok());
        c.first_stream = 6;
        assert!(c.validate().is_err(), "more than 8 streams per pipe");
        c.first_stream = 0;
        c.rows = 4;
        assert!(c.validate().is_err());
        c.rows = 3;
        c.snake = Some(Snake {
            first: 3,
            pairs: 13,
        });
        assert!(c.validate().is_ok());
        c.snake = Some(Snake { first: 2, pairs: 1 });
        assert!(c.validate().is_err(), "port 2 replicates");
    }

    #[test]
    fn the_snake_visits_every_port_both_ways_then_ends() {
        let s = Snake { first: 3, pairs: 2 };
        let mut at = 0;
        let mut path = Vec::new();
        while let Some(out) = s.next(at) {
            path.push(out);
            // A cable joins 3-4 and 5-6.
            at = if (out - 3) % 2 == 0 { out + 1 } else { out - 1 };
        }
        assert_eq!(path, vec![3, 4, 5, 6]);
        assert_eq!(at, 5);
    }

    #[test]
    fn params_build_a_valid_config() {
        let p = Params::parse(["cols=65536", "replicas=4", "rid=2", "dedup=counter"]).unwrap();
        let c = SdwConfig::from_params(&p).unwrap();
        assert_eq!((c.cols, c.members.len(), c.rid), (65_536, 4, 2));
        assert!(SdwConfig::from_params(&Params::parse(["rows=4"]).unwrap()).is_err());
        assert!(SdwConfig::from_params(&Params::parse(["bogus=1"]).unwrap()).is_err());
        let p = Params::parse(["rid=2", "ports=[1, 2]"]).unwrap();
        let c = SdwConfig::from_params(&p).unwrap();
        assert_eq!((c.loop_port, c.members[0].port), (2, 1));
        for bad in ["ports=1", "ports=1,1", "ports=1,x", "ports=0,1"] {
            let e = SdwConfig::from_params(&Params::parse([bad]).unwrap()).unwrap_err();
            assert!(e.to_string().contains("ports"), "{bad}: {e}");
        }
    }

    #[test]
    fn the_limiter_needs_a_sum_collection_of_a_column_per_user() {
        let ok = Params::parse(["rows=1", "cols=40", "limiter=1"]).unwrap();
        let c = SdwConfig::from_params(&ok).unwrap();
        assert_eq!(c.limiter.map(|l| l.users), Some(40));
        let few = Params::parse(["rows=1", "cols=39", "limiter=1"]).unwrap();
        let e = SdwConfig::from_params(&few).unwrap_err().to_string();
        assert!(e.contains("limiter"), "{e}");
        let or = Params::parse(["rows=1", "cols=40", "merge=or", "limiter=1"]).unwrap();
        assert!(SdwConfig::from_params(&or).is_err());
    }
}
