//! The SDW test application as a scenario host's workload
//! (`[[host.workload]] kind = "swish_sdw_app"`): sends [`super::app`]
//! updates and/or queries of one key to one replica at a fixed gap and
//! records the replies — accepted and rejected updates, the window each
//! landed in, and what the queries read — in the host's report.
//!
//! ```toml
//! [[host.workload]]
//! kind = "swish_sdw_app"
//! name = "q"
//! replica = 2        # the replica's rid (its address 10.47.x.y, §2)
//! op = "query"       # "update", "query" or "both"
//! key = 7
//! value = 1          # what an update adds (merge Sum)
//! count = 200
//! gap = "20us"
//! start = "2ms"
//! ```
//!
//! Report, under `name.`: `tx_packets`, `replies`, `accepted`,
//! `rejected`, `unmatched` (replies to nothing it sent), `first_win` and
//! `last_win` (the windows of the first and latest replies), and for queries `read_last`/`read_max`
//! (row 0's cell in the latest reply and the largest seen: with one key,
//! the sum of the updates the replica's snapshot holds) and
//! `first_seen_win` (the window of the first query that read a non-zero
//! value; 0 if none did), `not_ready` (query replies of a replica that
//! joined and has not completed its first window, §5.6: they read
//! nothing).

use inca_sim::metrics::NodeReport;
use inca_sim::nodes::host::workload::{
    report_tx, Arrival, BuildContext, Claim, HostInfo, StepContext, Workload,
};
use inca_sim::nodes::host::{HostError, WorkloadStats};
use inca_switch::device::{DeviceRng, Nanos};
use inca_wire::builder::build_udp_frame;
use serde::Deserialize;

use super::app::{AppReply, AppRequest, APP_PORT, OP_QUERY, OP_UPDATE, ST_OK, ST_REJECTED};
use crate::addr::{ReplicaAddr, Rid};

/// The workload kind's name in scenarios.
pub const KIND: &str = "swish_sdw_app";
/// Requests one workload sends at most [our choice: a bound on its table
/// of sent ids].
pub const MAX_COUNT: u64 = 1 << 20;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    #[allow(dead_code)]
    name: Option<String>,
    replica: Rid,
    op: String,
    key: u32,
    #[serde(default = "one")]
    value: u32,
    count: u64,
    gap: String,
    #[serde(default)]
    start: Option<String>,
}

fn one() -> u32 {
    1
}

/// What the replies said.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AppTally {
    /// Replies to requests it sent.
    pub replies: u64,
    /// Updates accepted.
    pub accepted: u64,
    /// Updates rejected (count = B).
    pub rejected: u64,
    /// Replies to nothing it sent (or duplicates).
    pub unmatched: u64,
    /// The first reply's window.
    pub first_win: Option<u32>,
    /// The latest reply's window.
    pub last_win: u32,
    /// Row 0 of the latest query reply.
    pub read_last: u32,
    /// The largest row-0 value a query read.
    pub read_max: u32,
    /// The window of the first query that read non-zero.
    pub first_seen_win: Option<u32>,
    /// Query replies marked not ready (§5.6 join).
    pub not_ready: u64,
}

/// The workload.
#[derive(Debug)]
pub struct SdwApp {
    replica: ReplicaAddr,
    op: u8,
    key: u32,
    value: u32,
    count: u64,
    gap: Nanos,
    start: Nanos,
    /// (start of this life, requests sent in it).
    life: Option<(Nanos, u64)>,
    /// Whether request i (by req_id) was answered; req_ids run from 0
    /// over all lives.
    answered: Vec<bool>,
    /// The tally.
    pub tally: AppTally,
}

impl SdwApp {
    /// Builds one from its scenario table; errors name the field.
    pub fn build(
        table: &toml::Table,
        cx: &mut BuildContext<'_>,
    ) -> Result<Box<dyn Workload>, HostError> {
        let c: Config = toml::Value::Table(table.clone())
            .try_into()
            .map_err(|e: toml::de::Error| cx.invalid("", e.message().to_string()))?;
        let op = match c.op.as_str() {
            "update" => OP_UPDATE,
            "query" => OP_QUERY,
            "both" => OP_UPDATE | OP_QUERY,
            other => return Err(cx.invalid("op", format!("{other:?}: update, query or both"))),
        };
        if c.count == 0 || c.count > MAX_COUNT {
            return Err(cx.invalid("count", format!("1 to {MAX_COUNT}")));
        }
        let time = |field: &str, v: &str| {
            inca_switch::units::parse_time(v)
                .ok_or_else(|| cx.invalid(field, format!("{v:?} is not a time (\"20us\")")))
        };
        let gap = time("gap", &c.gap)?;
        if gap == 0 {
            return Err(cx.invalid("gap", "must be > 0"));
        }
        let start = match &c.start {
            Some(s) => time("start", s)?,
            None => 0,
        };
        Ok(Box::new(SdwApp {
            replica: ReplicaAddr::conventional(c.replica, 0),
            op,
            key: c.key,
            value: c.value,
            count: c.count,
            gap,
            start,
            life: None,
            answered: Vec::new(),
            tally: AppTally::default(),
        }))
    }

    fn on_reply(&mut self, r: &AppReply) {
        let fresh = self
            .answered
            .get_mut(r.req_id as usize)
            .filter(|a| !**a && r.key == self.key && r.op == self.op);
        let Some(a) = fresh else {
            self.tally.unmatched += 1;
            return;
        };
        *a = true;
        let t = &mut self.tally;
        t.replies += 1;
        t.first_win.get_or_insert(r.win);
        t.last_win = r.win;
        if r.op & OP_UPDATE != 0 {
            match r.status {
                ST_OK => t.accepted += 1,
                ST_REJECTED => t.rejected += 1,
                _ => {}
            }
        }
        if r.op & OP_QUERY != 0 && r.not_ready {
            t.not_ready += 1;
        } else if r.op & OP_QUERY != 0 {
            t.read_last = r.res[0];
            t.read_max = t.read_max.max(r.res[0]);
            if r.res[0] != 0 && t.first_seen_win.is_none() {
                t.first_seen_win = Some(r.win);
            }
        }
    }
}

impl Workload for SdwApp {
    fn begin(&mut self, _host: &HostInfo, anchor: Nanos, _rng: &mut DeviceRng) {
        self.life = Some((anchor + self.start, 0));
    }

    fn end(&mut self) {
        self.life = None;
    }

    fn next_at(&self) -> Option<Nanos> {
        let (start, sent) = self.life?;
        let total = self.answered.len() as u64;
        (total < self.count).then_some(start + sent * self.gap)
    }

    fn step(&mut self, cx: &mut StepContext<'_>) -> Option<Vec<u8>> {
        let (_, sent) = self.life.as_mut()?;
        *sent += 1;
        let req_id = self.answered.len() as u32;
        self.answered.push(false);
        if !cx.send {
            return None;
        }
        let req = AppRequest {
            op: self.op,
            req_id,
            key: self.key,
            value: self.value,
        };
        let ep = cx.host.endpoints(cx.host.ip, self.replica.ip);
        build_udp_frame(&ep, APP_PORT, APP_PORT, &req.payload(), false).ok()
    }

    fn claim(&mut self, _now: Nanos, d: &Arrival<'_>, _stats: &mut WorkloadStats) -> Claim {
        if d.sport != APP_PORT || d.dport != APP_PORT || d.src != self.replica.ip {
            return Claim::NotMine;
        }
        match AppReply::parse_payload(d.payload) {
            // Another workload's (one host may run several per replica).
            Some(r) if r.op != self.op || r.key != self.key => return Claim::NotMine,
            Some(r) => self.on_reply(&r),
            None => self.tally.unmatched += 1,
        }
        Claim::Mine
    }

    fn report(&self, name: &str, stats: &WorkloadStats, r: &mut NodeReport) {
        report_tx(name, stats, r);
        let t = &self.tally;
        for (k, v) in [
            ("replies", t.replies),
            ("accepted", t.accepted),
            ("rejected", t.rejected),
            ("unmatched", t.unmatched),
            ("first_win", u64::from(t.first_win.unwrap_or(0))),
            ("last_win", u64::from(t.last_win)),
            ("read_last", u64::from(t.read_last)),
            ("read_max", u64::from(t.read_max)),
            ("first_seen_win", u64::from(t.first_seen_win.unwrap_or(0))),
            ("not_ready", t.not_ready),
        ] {
            r.counters.insert(format!("{name}.{k}"), v);
        }
    }
}
