//! Scenario files: a topology, workloads, faults and a duration in TOML, and
//! how they become a [`Simulation`].
//!
//! ```toml
//! name = "two hosts"
//! duration = "10ms"
//! seed = 1
//! bin = "1ms"                       # time-series granularity
//!
//! [defaults.link]                   # every link unless it says otherwise
//! rate = "10Gbps"
//! delay = "1us"
//! queue = "1MB"
//!
//! [[switch]]                        # a programmable switch
//! name = "agg1"
//! profile = "tofino"
//! program = "nat"
//! params = { flows = 65536, outside_port = 0 }
//! profile_set = { "control_plane.table_write" = "20us" }
//! announce = ["198.51.100.0/24"]    # prefixes routers reach through it
//! telemetry = true                  # stamp probes passing it (also on
//!                                   # smartnic and router; `telemetry_depth`
//!                                   # at the top bounds the stack, 16)
//!
//! [[smartnic]]                      # a P4 smart NIC: the switch model on
//! name = "nic1"                     # the `smartnic` profile (2 ports,
//! program = "nat"                   # run to completion, tables spill to
//! params = { flows = 1000000 }      # DRAM), reported as kind "smartnic"
//! dram = "2GiB"                     # optional: its DRAM (profile's default)
//!
//! [[router]]                        # a fixed-function ECMP router
//! name = "tor1"
//! detect_delay = "50ms"
//!
//! [[host]]                          # see nodes::host for workloads
//! name = "h1"
//! ip = "10.0.0.1"
//!
//! [[server]]                        # a device a system supplies (state
//! name = "store1"                   # store, DRAM server), built by the
//! kind = "redplane_store"           # factory; an endpoint like a host
//! ip = "10.2.0.1"
//! params = { workers = 8 }
//!
//! [[link]]
//! a = "h1:0"
//! b = "tor1:1"
//! loss = 0.001                      # or { p_good_to_bad = .., p_bad_to_good = .., loss_good = .., loss_bad = .. }
//! capture = "h1-tor1.pcap"
//!
//! [[session]]                       # a control session (crate::session)
//! a = "agg1"
//! b = "store1"
//! id = 1
//!
//! [[fault]]
//! at = "5ms"
//! crash = "agg1"                    # or link_down / link_up = "link name",
//! for = "1ms"                       # restart / pause / partition / heal / loss,
//!                                   # session_cut / session_reset = "session name"
//! ```
//!
//! `[random_faults]` draws faults from the seed: see [`crate::random_faults`].
//!
//! Every error names the field and, where the file has one, the line.
//! Routers get their routes automatically: for every host address and every
//! prefix a switch announces, the shortest paths (in hops, never through a
//! host) with all equal-cost next hops as the ECMP group.

use std::collections::{BTreeMap, VecDeque};
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};

use inca_switch::device::{Nanos, PortId};
use inca_switch::Profile;
use serde::Deserialize;
use toml::Spanned;

use crate::engine::{Fault, LinkId, NodeId, Simulation};
use crate::factory::FactoryWorkloads;
pub use crate::factory::{FactoryError, ServerSetup, SwitchFactory};
use crate::link::{ChannelConfig, LossModel};
use crate::nodes::host::{Host, HostConfig};
use crate::nodes::router::{Router, RouterConfig};
use crate::quantity::{de_opt_rate, de_opt_size, de_opt_time, de_time};
pub use crate::random_faults::RandomFaults;
use crate::random_faults::{ImpairBounds, Kind, Plan};
pub use crate::smartnic::SmartNicSpec;

mod overrides;
pub use overrides::apply_overrides;

/// A scenario problem: what is wrong, where.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ScenarioError(pub String);

/// A scenario as written. See the module documentation.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Its name.
    pub name: String,
    /// What it shows.
    #[serde(default)]
    pub description: String,
    /// How much virtual time to simulate.
    #[serde(deserialize_with = "de_time")]
    pub duration: Nanos,
    /// Run seed (`--seed` overrides it).
    #[serde(default = "default_seed")]
    pub seed: u64,
    /// Time-series granularity.
    #[serde(default = "default_bin", deserialize_with = "de_time")]
    pub bin: Nanos,
    /// Defaults for links.
    #[serde(default)]
    pub defaults: Defaults,
    /// Programmable switches (after loading, the smart NICs too, behind
    /// the switches: see [`SmartNicSpec`]).
    #[serde(default)]
    pub switch: Vec<SwitchSpec>,
    /// Smart NICs (moved into `switch` when the file is loaded).
    #[serde(default)]
    pub smartnic: Vec<SmartNicSpec>,
    /// Routers.
    #[serde(default)]
    pub router: Vec<RouterSpec>,
    /// Hosts (each with a `name`; the rest is [`HostConfig`]).
    #[serde(default)]
    pub host: Vec<HostConfig>,
    /// Devices the systems supply (built by the factory).
    #[serde(default)]
    pub server: Vec<ServerSpec>,
    /// Links.
    #[serde(default)]
    pub link: Vec<LinkSpec>,
    /// Control sessions.
    #[serde(default)]
    pub session: Vec<crate::session::SessionSpec>,
    /// Scheduled faults.
    #[serde(default)]
    pub fault: Vec<FaultSpec>,
    /// Randomised faults.
    #[serde(default)]
    pub random_faults: Option<RandomFaults>,
    /// Telemetry records a probe carries at most (default
    /// [`crate::engine::DEFAULT_TELEMETRY_DEPTH`]).
    #[serde(default)]
    pub telemetry_depth: Option<u8>,
}

fn default_seed() -> u64 {
    1
}

fn default_bin() -> Nanos {
    1_000_000
}

/// Defaults applied to every link.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Defaults {
    /// Link defaults (any link field but the ends, name and capture).
    #[serde(default)]
    pub link: LinkParams,
}

/// A programmable switch.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SwitchSpec {
    /// Unique name.
    pub name: Spanned<String>,
    /// Device profile (tofino, smartnic, server).
    #[serde(default = "default_profile")]
    pub profile: Spanned<String>,
    /// The program.
    pub program: Spanned<String>,
    /// Program parameters.
    #[serde(default)]
    pub params: BTreeMap<String, toml::Value>,
    /// Profile model inputs to override.
    #[serde(default)]
    pub profile_set: BTreeMap<String, toml::Value>,
    /// Prefixes reachable through this switch.
    #[serde(default)]
    pub announce: Vec<Spanned<String>>,
    /// Stamps the probe frames that pass it (per-hop telemetry).
    #[serde(default)]
    pub telemetry: bool,
}

impl From<SmartNicSpec> for SwitchSpec {
    /// The programmable device a smart NIC is.
    fn from(nic: SmartNicSpec) -> SwitchSpec {
        let mut profile_set = nic.profile_set;
        if let Some(d) = nic.dram {
            profile_set.insert("dram_bytes".into(), d.into_inner());
        }
        SwitchSpec {
            profile: Spanned::new(nic.name.span(), "smartnic".into()),
            name: nic.name,
            program: nic.program,
            params: nic.params,
            profile_set,
            announce: nic.announce,
            telemetry: nic.telemetry,
        }
    }
}

fn default_profile() -> Spanned<String> {
    Spanned::new(0..0, "tofino".to_string())
}

/// A device a system supplies: a RedPlane state-store server, a TEA DRAM
/// server. For routing it is an endpoint, like a host: its address is
/// reachable, nothing is forwarded through it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerSpec {
    /// Unique name.
    pub name: Spanned<String>,
    /// Which device (the factory knows the kinds).
    pub kind: Spanned<String>,
    /// Its address.
    pub ip: Spanned<Ipv4Addr>,
    /// Its configuration, in the device's own vocabulary.
    #[serde(default)]
    pub params: toml::Table,
}

/// A router.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouterSpec {
    /// Unique name.
    pub name: Spanned<String>,
    /// Forwarding latency.
    #[serde(default, deserialize_with = "de_opt_time")]
    pub latency: Option<Nanos>,
    /// Failure-detection delay.
    #[serde(default, deserialize_with = "de_opt_time")]
    pub detect_delay: Option<Nanos>,
    /// Stamps the probe frames that pass it (per-hop telemetry).
    #[serde(default)]
    pub telemetry: bool,
}

/// Link properties (each optional: unset ones come from the defaults, then
/// from [`ChannelConfig::default`]). A live node's port takes the same
/// table (`link = { rate = "10Mbps", delay = "2ms", loss = 0.1 }`), so it
/// serialises too: quantities as bare numbers (bps, ns, bytes), which read
/// back as the same values.
#[derive(Debug, Default, Clone, PartialEq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct LinkParams {
    /// Rate, both directions.
    #[serde(
        default,
        deserialize_with = "de_opt_rate",
        skip_serializing_if = "Option::is_none"
    )]
    pub rate: Option<u64>,
    /// Propagation delay.
    #[serde(
        default,
        deserialize_with = "de_opt_time",
        skip_serializing_if = "Option::is_none"
    )]
    pub delay: Option<Nanos>,
    /// Queue in front of each direction.
    #[serde(
        default,
        deserialize_with = "de_opt_size",
        skip_serializing_if = "Option::is_none"
    )]
    pub queue: Option<u64>,
    /// Loss model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loss: Option<LossSpec>,
    /// Duplication probability.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duplicate: Option<f64>,
    /// Reordering probability.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reorder: Option<f64>,
    /// Extra delay of a reordered frame.
    #[serde(
        default,
        deserialize_with = "de_opt_time",
        skip_serializing_if = "Option::is_none"
    )]
    pub reorder_delay: Option<Nanos>,
    /// Uniform delay jitter bound.
    #[serde(
        default,
        deserialize_with = "de_opt_time",
        skip_serializing_if = "Option::is_none"
    )]
    pub jitter: Option<Nanos>,
}

impl LinkParams {
    /// These fields laid over `defaults` (each unset one taken from there).
    pub fn over(&self, defaults: &LinkParams) -> LinkParams {
        LinkParams {
            rate: self.rate.or(defaults.rate),
            delay: self.delay.or(defaults.delay),
            queue: self.queue.or(defaults.queue),
            loss: self.loss.clone().or_else(|| defaults.loss.clone()),
            duplicate: self.duplicate.or(defaults.duplicate),
            reorder: self.reorder.or(defaults.reorder),
            reorder_delay: self.reorder_delay.or(defaults.reorder_delay),
            jitter: self.jitter.or(defaults.jitter),
        }
    }

    /// Whether no field is set (the link is [`ChannelConfig::default`]).
    pub fn is_empty(&self) -> bool {
        *self == LinkParams::default()
    }

    /// The channel these fields describe (unset ones from
    /// [`ChannelConfig::default`]); an error names the bad field.
    pub fn channel(&self) -> Result<ChannelConfig, String> {
        channel_config(&LinkParams::default(), self)
    }
}

/// A link.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkSpec {
    /// Name (default `a-b` of the node names).
    #[serde(default)]
    pub name: Option<String>,
    /// One end, `node:port`.
    pub a: Spanned<String>,
    /// The other end.
    pub b: Spanned<String>,
    /// Capture every frame to this pcap file (relative to the output
    /// folder).
    #[serde(default)]
    pub capture: Option<String>,
    /// Rate, both directions.
    #[serde(default, deserialize_with = "de_opt_rate")]
    pub rate: Option<u64>,
    /// Propagation delay.
    #[serde(default, deserialize_with = "de_opt_time")]
    pub delay: Option<Nanos>,
    /// Queue in front of each direction.
    #[serde(default, deserialize_with = "de_opt_size")]
    pub queue: Option<u64>,
    /// Loss model.
    #[serde(default)]
    pub loss: Option<LossSpec>,
    /// Duplication probability.
    #[serde(default)]
    pub duplicate: Option<f64>,
    /// Reordering probability.
    #[serde(default)]
    pub reorder: Option<f64>,
    /// Extra delay of a reordered frame.
    #[serde(default, deserialize_with = "de_opt_time")]
    pub reorder_delay: Option<Nanos>,
    /// Uniform delay jitter bound.
    #[serde(default, deserialize_with = "de_opt_time")]
    pub jitter: Option<Nanos>,
}

impl LinkSpec {
    /// The link's own properties (without the scenario's defaults).
    pub fn params(&self) -> LinkParams {
        LinkParams {
            rate: self.rate,
            delay: self.delay,
            queue: self.queue,
            loss: self.loss.clone(),
            duplicate: self.duplicate,
            reorder: self.reorder,
            reorder_delay: self.reorder_delay,
            jitter: self.jitter,
        }
    }
}

/// A loss model as written: a probability, or Gilbert–Elliott parameters.
#[derive(Debug, Clone, PartialEq, Deserialize, serde::Serialize)]
#[serde(untagged)]
pub enum LossSpec {
    /// Bernoulli loss with this probability.
    Bernoulli(f64),
    /// Gilbert–Elliott.
    GilbertElliott {
        /// Good → bad per frame.
        p_good_to_bad: f64,
        /// Bad → good per frame.
        p_bad_to_good: f64,
        /// Loss in the good state.
        #[serde(default)]
        loss_good: f64,
        /// Loss in the bad state.
        #[serde(default = "one")]
        loss_bad: f64,
    },
}

fn one() -> f64 {
    1.0
}

impl LossSpec {
    fn model(&self) -> Result<LossModel, String> {
        let p_ok = |p: f64| (0.0..=1.0).contains(&p);
        match *self {
            LossSpec::Bernoulli(p) if p_ok(p) => Ok(if p == 0.0 {
                LossModel::None
            } else {
                LossModel::Bernoulli { p }
            }),
            LossSpec::GilbertElliott {
                p_good_to_bad,
                p_bad_to_good,
                loss_good,
                loss_bad,
            } if [p_good_to_bad, p_bad_to_good, loss_good, loss_bad]
                .into_iter()
                .all(p_ok) =>
            {
                Ok(LossModel::GilbertElliott {
                    p_good_to_bad,
                    p_bad_to_good,
                    loss_good,
                    loss_bad,
                })
            }
            _ => Err("loss probabilities must be within 0..=1".into()),
        }
    }
}

/// A scheduled fault: `at`, and exactly one kind.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FaultSpec {
    /// When.
    #[serde(deserialize_with = "de_time")]
    pub at: Nanos,
    /// For how long (then the fault is undone: link up, restart, heal; the
    /// length of a pause).
    #[serde(default, rename = "for", deserialize_with = "de_opt_time")]
    pub duration: Option<Nanos>,
    /// A link goes down.
    pub link_down: Option<Spanned<String>>,
    /// A link comes up.
    pub link_up: Option<Spanned<String>>,
    /// A node crashes.
    pub crash: Option<Spanned<String>>,
    /// A node restarts.
    pub restart: Option<Spanned<String>>,
    /// A node pauses (needs `for`).
    pub pause: Option<Spanned<String>>,
    /// Two groups of nodes are cut apart.
    pub partition: Option<Spanned<[Vec<String>; 2]>>,
    /// Two groups of nodes are joined again.
    pub heal: Option<Spanned<[Vec<String>; 2]>>,
    /// A link's loss changes: `{ link = "..", loss = .. }`.
    pub loss: Option<Spanned<LossChange>>,
    /// A control session is cut (healed after `for`, if given).
    pub session_cut: Option<Spanned<String>>,
    /// A control session is reset.
    pub session_reset: Option<Spanned<String>>,
}

/// A loss-rate change.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LossChange {
    /// The link.
    pub link: String,
    /// Its new loss model.
    pub loss: LossSpec,
}

/// Line and column (1-based) of byte offset `at` in `text`.
fn line_col(text: &str, at: usize) -> (usize, usize) {
    let before = &text[..at.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, col)
}

/// A loaded scenario: the parsed description and the text it came from (for
/// error positions).
pub struct Loaded {
    /// The scenario.
    pub scenario: Scenario,
    text: String,
    origin: String,
}

impl Loaded {
    /// Reads and parses `path`, applying `overrides` (`key=value`) first.
    pub fn from_file(path: &Path, overrides: &[String]) -> Result<Loaded, ScenarioError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ScenarioError(format!("cannot read scenario {}: {e}", path.display())))?;
        Self::from_str(&text, &path.display().to_string(), overrides)
    }

    /// Parses scenario `text` (from `origin`, for messages).
    pub fn from_str(
        text: &str,
        origin: &str,
        overrides: &[String],
    ) -> Result<Loaded, ScenarioError> {
        let text = apply_overrides(text, overrides)?;
        let mut scenario: Scenario =
            toml::from_str(&text).map_err(|e| ScenarioError(format!("{origin}: {e}")))?;
        for nic in std::mem::take(&mut scenario.smartnic) {
            if let (Some(d), true) = (&nic.dram, nic.profile_set.contains_key("dram_bytes")) {
                let (line, col) = line_col(&text, d.span().start);
                return Err(ScenarioError(format!(
                    "{origin}:{line}:{col}: dram: give dram or profile_set.dram_bytes, not both"
                )));
            }
            scenario.switch.push(nic.into());
        }
        let loaded = Loaded {
            scenario,
            text,
            origin: origin.to_string(),
        };
        if let Some(r) = &loaded.scenario.random_faults {
            loaded.check_random_faults(r)?;
        }
        Ok(loaded)
    }

    /// Where the `[name]` header of the file is (`0..0` if it has none).
    fn section_header(&self, name: &str) -> std::ops::Range<usize> {
        let header = format!("[{name}]");
        let mut at = 0;
        for line in self.text.split_inclusive('\n') {
            if line.trim_start().starts_with(&header) {
                return at..at + line.trim_end().len();
            }
            at += line.len();
        }
        0..0
    }

    /// The checks of `[random_faults]` that need no topology: kinds, value
    /// ranges, group sizes.
    fn check_random_faults(&self, r: &RandomFaults) -> Result<(), ScenarioError> {
        let here = self.section_header("random_faults");
        let field = |f: &str| format!("random_faults.{f}");
        let names: Vec<&str> = Kind::ALL.iter().map(|k| k.1).collect();
        let mut kinds = Vec::new();
        for k in r.kinds.get_ref() {
            kinds.push(Kind::parse(k.get_ref()).ok_or_else(|| {
                self.err_at(
                    k.span(),
                    &field("kinds"),
                    format!("unknown kind {:?}: use {}", k.get_ref(), names.join(", ")),
                )
            })?);
        }
        if kinds.is_empty() {
            return Err(self.err_at(r.kinds.span(), &field("kinds"), "needs at least one kind"));
        }
        if r.mean_interval == 0 {
            return Err(self.err_at(here, &field("mean_interval"), "must be above zero"));
        }
        if let (Some(a), Some(b)) = (r.start, r.stop) {
            if b <= a {
                return Err(self.err_at(here, &field("stop"), "must be after start"));
            }
        }
        if let Some(f) = r.storm_factor.as_ref().filter(|f| *f.get_ref() == 0) {
            return Err(self.err_at(f.span(), &field("storm_factor"), "must be at least 1"));
        }
        if let Some(i) = &r.impair {
            let spec = i.get_ref();
            for (name, p) in [
                ("loss", &spec.loss),
                ("duplicate", &spec.duplicate),
                ("reorder", &spec.reorder),
            ] {
                if let Some(p) = p {
                    if !(0.0..=1.0).contains(p.get_ref()) {
                        return Err(self.err_at(
                            p.span(),
                            &field(&format!("impair.{name}")),
                            format!("must be within 0..=1, got {}", p.get_ref()),
                        ));
                    }
                }
            }
            if spec.window == Some(0) {
                return Err(self.err_at(i.span(), &field("impair.for"), "must be above zero"));
            }
            if let Err((f, e)) = impair_bounds(spec).check() {
                return Err(self.err_at(i.span(), &field(f), e));
            }
            if spec.links.as_ref().is_some_and(Vec::is_empty) {
                return Err(self.err_at(i.span(), &field("impair.links"), "is empty"));
            }
        } else if kinds.contains(&Kind::Impair) {
            return Err(self.err_at(
                r.kinds.span(),
                &field("kinds"),
                "\"impair\" needs an `impair = { loss = .., duplicate = .., reorder = .., reorder_delay = .., jitter = .. }` table of maxima",
            ));
        }
        if kinds.contains(&Kind::Partition) {
            let (list, span): (Vec<&str>, _) = match (&r.partition_nodes, &r.nodes) {
                (Some(p), _) => (
                    p.get_ref().iter().map(|n| n.get_ref().as_str()).collect(),
                    p.span(),
                ),
                (None, Some(n)) => (
                    n.iter().map(|n| n.get_ref().as_str()).collect(),
                    here.clone(),
                ),
                // Every switch, router and server: checked when built.
                (None, None) => return Ok(()),
            };
            let mut distinct = list.clone();
            distinct.sort_unstable();
            distinct.dedup();
            if distinct.len() != list.len() {
                return Err(self.err_at(span, &field("partition_nodes"), "names a node twice"));
            }
            if list.len() < 2 {
                return Err(self.err_at(
                    span,
                    &field("partition_nodes"),
                    format!(
                        "a partition splits two or more nodes into two non-empty groups; {} given",
                        list.len()
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Where the `i`-th `[[name]]` header of the file is, for errors about
    /// a table none of whose fields carries a position (a fault that names
    /// no kind). `None` when the tables are written some other way.
    fn table_header(&self, name: &str, i: usize) -> Option<std::ops::Range<usize>> {
        let header = format!("[[{name}]]");
        let mut at = 0;
        let mut found = Vec::new();
        for line in self.text.split_inclusive('\n') {
            if line.trim_start().starts_with(&header) {
                found.push(at..at + line.trim_end().len());
            }
            at += line.len();
        }
        found.into_iter().nth(i)
    }

    fn err_at(
        &self,
        span: std::ops::Range<usize>,
        field: &str,
        msg: impl std::fmt::Display,
    ) -> ScenarioError {
        if span.is_empty() && span.start == 0 {
            return ScenarioError(format!("{}: {field}: {msg}", self.origin));
        }
        let (line, col) = line_col(&self.text, span.start);
        ScenarioError(format!("{}:{line}:{col}: {field}: {msg}", self.origin))
    }
}

/// The MAC of `node`'s `port`: locally administered, unique per port.
pub fn port_mac(node: NodeId, port: PortId) -> [u8; 6] {
    let n = node.0.to_be_bytes();
    let p = port.to_be_bytes();
    [0x02, n[1], n[2], n[3], p[0], p[1]]
}

fn host_name(h: &HostConfig) -> &str {
    h.name.as_ref().map_or("", |n| n.get_ref().as_str())
}

/// A parsed `a.b.c.d/len` (a bare address is a /32).
pub fn parse_prefix(s: &str) -> Option<([u8; 4], u8)> {
    let (ip, len) = s.split_once('/').unwrap_or((s, "32"));
    let ip: Ipv4Addr = ip.trim().parse().ok()?;
    let len: u8 = len.trim().parse().ok()?;
    (len <= 32).then_some((ip.octets(), len))
}

/// For destination node `dest`, the equal-cost next-hop ports of every node
/// that can reach it: shortest paths in hops over `adj` (node → (port,
/// neighbour)), never through a host other than `dest`. Nodes at distance 0
/// (the destination) or with no path are absent. Ports are sorted.
pub fn next_hops(
    adj: &BTreeMap<usize, Vec<(PortId, usize)>>,
    is_host: impl Fn(usize) -> bool,
    dest: usize,
) -> BTreeMap<usize, Vec<PortId>> {
    next_hops_any(adj, is_host, &[dest])
}

/// [`next_hops`] towards the nearest of several destinations (a prefix
/// that more than one switch announces: every equal-cost path to the
/// nearest announcers is in the ECMP group).
pub fn next_hops_any(
    adj: &BTreeMap<usize, Vec<(PortId, usize)>>,
    is_host: impl Fn(usize) -> bool,
    dests: &[usize],
) -> BTreeMap<usize, Vec<PortId>> {
    let is_dest = |n: usize| dests.contains(&n);
    let mut dist: BTreeMap<usize, u32> = dests.iter().map(|&d| (d, 0)).collect();
    let mut queue: VecDeque<usize> = dests.iter().copied().collect();
    while let Some(n) = queue.pop_front() {
        if is_host(n) && !is_dest(n) {
            continue; // hosts do not forward
        }
        for &(_, m) in adj.get(&n).map(Vec::as_slice).unwrap_or(&[]) {
            if !dist.contains_key(&m) {
                dist.insert(m, dist[&n] + 1);
                queue.push_back(m);
            }
        }
    }
    let mut hops = BTreeMap::new();
    for (&n, &d) in &dist {
        if d == 0 {
            continue;
        }
        let mut ports: Vec<PortId> = adj
            .get(&n)
            .map(Vec::as_slice)
            .unwrap_or(&[])
            .iter()
            .filter(|&&(_, m)| dist.get(&m) == Some(&(d - 1)) && (!is_host(m) || is_dest(m)))
            .map(|&(p, _)| p)
            .collect();
        ports.sort_unstable();
        ports.dedup();
        if !ports.is_empty() {
            hops.insert(n, ports);
        }
    }
    hops
}

/// A scenario built into a simulation, with what the runner needs to know.
pub struct Built {
    /// The simulation, ready to run.
    pub sim: Simulation,
    /// Node names by kind, for summaries.
    pub hosts: Vec<(String, NodeId)>,
    /// How long to run.
    pub duration: Nanos,
}

impl Loaded {
    /// Builds the simulation: nodes, links, routes, faults. `seed`
    /// overrides the scenario's; captures go under `out`.
    pub fn build(
        &self,
        factory: &dyn SwitchFactory,
        seed: Option<u64>,
        out: Option<&Path>,
    ) -> Result<Built, ScenarioError> {
        let sc = &self.scenario;
        let seed = seed.unwrap_or(sc.seed);
        let mut sim = Simulation::new(seed, sc.bin);
        let mut names: BTreeMap<String, NodeId> = BTreeMap::new();
        let mut is_host: Vec<bool> = Vec::new();
        let check_name = |name: &Spanned<String>, names: &BTreeMap<String, NodeId>| {
            if names.contains_key(name.get_ref()) {
                Err(self.err_at(
                    name.span(),
                    "name",
                    format!("{:?} is used twice", name.get_ref()),
                ))
            } else {
                Ok(())
            }
        };

        // Ports each node uses, so routers and hosts can be built knowing
        // their neighbours (nodes are added first, then links, so node ids
        // are known in advance: switches, routers, hosts, in file order).
        let mut order: Vec<String> = Vec::new();
        order.extend(sc.switch.iter().map(|s| s.name.get_ref().clone()));
        order.extend(sc.router.iter().map(|s| s.name.get_ref().clone()));
        order.extend(sc.host.iter().map(|h| host_name(h).to_string()));
        order.extend(sc.server.iter().map(|s| s.name.get_ref().clone()));
        let id_of = |n: &str| order.iter().position(|x| x == n).map(|i| NodeId(i as u32));
        let node_names: std::sync::Arc<[String]> = order.clone().into();

        // Links, resolved (before nodes, to know neighbours).
        struct End {
            node: NodeId,
            port: PortId,
        }
        let mut ends: Vec<(End, End)> = Vec::new();
        let mut neighbours: BTreeMap<(NodeId, PortId), (NodeId, PortId)> = BTreeMap::new();
        // Where each (node, port) is named, for errors found once the node's
        // port count is known.
        let mut end_spans: BTreeMap<(NodeId, PortId), std::ops::Range<usize>> = BTreeMap::new();
        for l in &sc.link {
            let parse_end = |e: &Spanned<String>, field: &str| -> Result<End, ScenarioError> {
                let (n, p) = e.get_ref().split_once(':').ok_or_else(|| {
                    self.err_at(
                        e.span(),
                        field,
                        format!("{:?}: write node:port", e.get_ref()),
                    )
                })?;
                let node = id_of(n.trim()).ok_or_else(|| {
                    self.err_at(
                        e.span(),
                        field,
                        format!(
                            "no switch, smart NIC, router, host or server named {:?}",
                            n.trim()
                        ),
                    )
                })?;
                let port: PortId = p.trim().parse().map_err(|_| {
                    self.err_at(
                        e.span(),
                        field,
                        format!("{:?} is not a port number", p.trim()),
                    )
                })?;
                Ok(End { node, port })
            };
            let a = parse_end(&l.a, "a")?;
            let b = parse_end(&l.b, "b")?;
            for (x, y, span) in [(&a, &b, l.a.span()), (&b, &a, l.b.span())] {
                end_spans.insert((x.node, x.port), span.clone());
                if neighbours
                    .insert((x.node, x.port), (y.node, y.port))
                    .is_some()
                {
                    return Err(self.err_at(
                        span,
                        "link",
                        format!(
                            "port {} of {} is connected twice",
                            x.port, order[x.node.0 as usize]
                        ),
                    ));
                }
            }
            ends.push((a, b));
        }
        let port_count = |node: NodeId| -> usize {
            neighbours
                .keys()
                .filter(|(n, _)| *n == node)
                .map(|&(_, p)| usize::from(p) + 1)
                .max()
                .unwrap_or(0)
        };

        // Nodes.
        for s in &sc.switch {
            check_name(&s.name, &names)?;
            let mut profile = Profile::by_name(s.profile.get_ref())
                .map_err(|e| self.err_at(s.profile.span(), "profile", e))?;
            for (k, v) in &s.profile_set {
                profile
                    .set(k, &value_text(v))
                    .map_err(|e| self.err_at(s.name.span(), "profile_set", e))?;
            }
            let params: Vec<(String, String)> = s
                .params
                .iter()
                .map(|(k, v)| (k.clone(), value_text(v)))
                .collect();
            let id = NodeId(names.len() as u32);
            let ports = profile.data_path.ports;
            if let Some(((_, p), span)) = end_spans
                .range((id, 0)..=(id, PortId::MAX))
                .find(|((_, p), _)| *p >= ports)
            {
                return Err(self.err_at(
                    span.clone(),
                    "link",
                    format!(
                        "port {p} of {}: a {} has ports 0 to {}",
                        s.name.get_ref(),
                        s.profile.get_ref(),
                        ports.saturating_sub(1)
                    ),
                ));
            }
            let node = factory
                .build(s.program.get_ref(), &params, profile)
                .map_err(|e| self.err_at(s.program.span(), "program", e))?;
            let id = sim.add_node(s.name.get_ref(), node);
            names.insert(s.name.get_ref().clone(), id);
            is_host.push(false);
        }
        let mut routers: Vec<NodeId> = Vec::new();
        let mut built_routers: Vec<Router> = Vec::new();
        for (i, r) in sc.router.iter().enumerate() {
            check_name(&r.name, &names)?;
            let id = NodeId((sc.switch.len() + i) as u32);
            let ports = port_count(id);
            let macs = (0..ports).map(|p| port_mac(id, p as PortId)).collect();
            let nbrs = (0..ports)
                .map(|p| {
                    neighbours
                        .get(&(id, p as PortId))
                        .map_or([0xff; 6], |&(n, np)| port_mac(n, np))
                })
                .collect();
            let mut config = RouterConfig {
                hash_seed: (seed as u32) ^ id.0.wrapping_mul(0x9e37_79b9),
                ..RouterConfig::default()
            };
            if let Some(l) = r.latency {
                config.latency = l;
            }
            if let Some(d) = r.detect_delay {
                config.detect_delay = d;
            }
            built_routers.push(Router::new(config, macs, nbrs));
            routers.push(id);
            names.insert(r.name.get_ref().clone(), id);
            is_host.push(false);
        }
        // Routes: shortest paths to every destination.
        let mut adj: BTreeMap<usize, Vec<(PortId, usize)>> = BTreeMap::new();
        for (&(n, p), &(m, _)) in &neighbours {
            adj.entry(n.0 as usize).or_default().push((p, m.0 as usize));
        }
        let first_host = sc.switch.len() + sc.router.len();
        let mut destinations: Vec<(([u8; 4], u8), usize)> = Vec::new();
        for (i, h) in sc.host.iter().enumerate() {
            destinations.push(((h.ip.octets(), 32), first_host + i));
        }
        let first_server = first_host + sc.host.len();
        for (i, s) in sc.server.iter().enumerate() {
            destinations.push(((s.ip.get_ref().octets(), 32), first_server + i));
        }
        for (i, s) in sc.switch.iter().enumerate() {
            for a in &s.announce {
                let p = parse_prefix(a.get_ref()).ok_or_else(|| {
                    self.err_at(
                        a.span(),
                        "announce",
                        format!("{:?} is not a.b.c.d/len", a.get_ref()),
                    )
                })?;
                destinations.push((p, i));
            }
        }
        // A prefix several switches announce is one route towards the
        // nearest of them (anycast), not one route per announcer.
        let mut by_prefix: BTreeMap<([u8; 4], u8), Vec<usize>> = BTreeMap::new();
        for (prefix, dest) in destinations {
            by_prefix.entry(prefix).or_default().push(dest);
        }
        for (prefix, dests) in &by_prefix {
            let hops = next_hops_any(&adj, |n| n >= first_host, dests);
            for (r, router) in routers.iter().zip(built_routers.iter_mut()) {
                if let Some(ports) = hops.get(&(r.0 as usize)) {
                    router
                        .add_route(prefix.0, prefix.1, ports.clone())
                        .map_err(|e| ScenarioError(format!("{}: route: {e}", self.origin)))?;
                }
            }
        }
        for router in built_routers {
            sim.add_node(order[sim.node_count()].as_str(), Box::new(router));
        }
        let mut hosts = Vec::new();
        let mut workload_ids = BTreeMap::new();
        for (i, h) in sc.host.iter().enumerate() {
            let Some(name) = &h.name else {
                return Err(ScenarioError(format!(
                    "{}: host {}: every host needs a name",
                    self.origin, h.ip
                )));
            };
            check_name(name, &names)?;
            let id = NodeId((first_host + i) as u32);
            let gateway_mac = neighbours
                .get(&(id, 0))
                .map_or([0xff; 6], |&(n, p)| port_mac(n, p));
            let link_rate = sc
                .link
                .iter()
                .zip(&ends)
                .find(|(_, (a, b))| (a.node == id && a.port == 0) || (b.node == id && b.port == 0))
                .and_then(|(l, _)| l.rate.or(sc.defaults.link.rate))
                .unwrap_or(ChannelConfig::default().rate_bps);
            let mut config = h.clone();
            crate::nodes::attack::resolve_crafts(&mut config.workloads, |target, mut req| {
                let s = sc
                    .switch
                    .iter()
                    .find(|s| s.name.get_ref() == target)
                    .ok_or_else(|| format!("target {target:?} is not a switch of this scenario"))?;
                req.program = s.program.get_ref().clone();
                req.params = s
                    .params
                    .iter()
                    .map(|(k, v)| (k.clone(), value_text(v)))
                    .collect();
                factory.craft_sources(&req).map_err(|e| e.to_string())
            })
            .map_err(|e| self.err_at(name.span(), "host", e))?;
            let mut host = Host::with_registry(
                config,
                port_mac(id, 0),
                gateway_mac,
                link_rate,
                &FactoryWorkloads(factory),
            )
            .map_err(|e| self.err_at(name.span(), "host", e))?;
            host.set_node_names(node_names.clone());
            for w in host.workload_names() {
                workload_ids.insert(format!("{}/{w}", name.get_ref()), (id, w.to_string()));
            }
            let got = sim.add_node(name.get_ref(), Box::new(host));
            debug_assert_eq!(got, id);
            names.insert(name.get_ref().clone(), id);
            hosts.push((name.get_ref().clone(), id));
            is_host.push(true);
        }
        let mut addresses: BTreeMap<String, Ipv4Addr> = BTreeMap::new();
        for h in &sc.host {
            addresses.insert(host_name(h).to_string(), h.ip);
        }
        for s in &sc.server {
            addresses.insert(s.name.get_ref().clone(), *s.ip.get_ref());
        }
        for (i, s) in sc.server.iter().enumerate() {
            check_name(&s.name, &names)?;
            let id = NodeId((first_server + i) as u32);
            let ports = port_count(id).max(1);
            let setup = ServerSetup {
                name: s.name.get_ref().clone(),
                ip: *s.ip.get_ref(),
                macs: (0..ports).map(|p| port_mac(id, p as PortId)).collect(),
                neighbour_macs: (0..ports)
                    .map(|p| {
                        neighbours
                            .get(&(id, p as PortId))
                            .map_or([0xff; 6], |&(n, np)| port_mac(n, np))
                    })
                    .collect(),
                params: s.params.clone(),
                addresses: addresses.clone(),
            };
            let node = factory
                .build_server(s.kind.get_ref(), &setup)
                .map_err(|e| self.err_at(s.kind.span(), "server", e))?;
            let got = sim.add_node(s.name.get_ref(), node);
            debug_assert_eq!(got, id);
            names.insert(s.name.get_ref().clone(), id);
            is_host.push(true);
        }

        // Telemetry points.
        if let Some(d) = sc.telemetry_depth {
            sim.set_telemetry_depth(d);
        }
        let marked = sc.switch.iter().filter(|s| s.telemetry).map(|s| &s.name);
        for name in marked.chain(sc.router.iter().filter(|r| r.telemetry).map(|r| &r.name)) {
            sim.set_telemetry(names[name.get_ref()], true)
                .map_err(|e| self.err_at(name.span(), "telemetry", e))?;
        }

        // Links. Their captures are opened last, once nothing else can fail,
        // so a scenario with an error leaves no results folder behind.
        let mut link_ids: BTreeMap<String, LinkId> = BTreeMap::new();
        let mut captures = Vec::new();
        for (l, (a, b)) in sc.link.iter().zip(&ends) {
            let name = l.name.clone().unwrap_or_else(|| {
                format!("{}-{}", order[a.node.0 as usize], order[b.node.0 as usize])
            });
            let config = channel_config(&sc.defaults.link, &l.params())
                .map_err(|e| self.err_at(l.a.span(), "link", e))?;
            let id = sim
                .connect(&name, (a.node, a.port), (b.node, b.port), config, config)
                .map_err(|e| self.err_at(l.a.span(), "link", e))?;
            if link_ids.insert(name.clone(), id).is_some() {
                return Err(self.err_at(
                    l.a.span(),
                    "name",
                    format!("two links are named {name:?}: give one a name"),
                ));
            }
            if let Some(file) = &l.capture {
                captures.push((id, file, l.a.span()));
            }
        }

        // Control sessions.
        let mut session_ids = BTreeMap::new();
        let declared = crate::session::resolve(&sc.session, &names)
            .map_err(|(span, f, e)| self.err_at(span, &format!("session.{f}"), e))?;
        for (d, spec) in declared.into_iter().zip(&sc.session) {
            let [a, b] = d.ends;
            let idx = sim
                .add_session(&d.name, d.id, a, b, d.config)
                .map_err(|e| {
                    let span = spec.id.as_ref().map_or(spec.a.span(), |i| i.span());
                    self.err_at(span, "session", e)
                })?;
            session_ids.insert(d.name, idx);
        }
        let session = |s: &Spanned<String>, field: &str| {
            session_ids.get(s.get_ref()).copied().ok_or_else(|| {
                self.err_at(
                    s.span(),
                    field,
                    format!(
                        "no session named {:?} (sessions are named a-b by their nodes unless given a name)",
                        s.get_ref()
                    ),
                )
            })
        };

        // Faults.
        let node = |s: &Spanned<String>, field: &str| {
            names.get(s.get_ref()).copied().ok_or_else(|| {
                self.err_at(s.span(), field, format!("no node named {:?}", s.get_ref()))
            })
        };
        let link = |s: &Spanned<String>, field: &str| {
            link_ids
                .get(s.get_ref())
                .copied()
                .ok_or_else(|| self.err_at(s.span(), field, format!("no link named {:?} (links are named a-b by their nodes unless given a name)", s.get_ref())))
        };
        let group = |g: &[String],
                     span: std::ops::Range<usize>,
                     field: &str|
         -> Result<Vec<NodeId>, ScenarioError> {
            g.iter()
                .map(|n| {
                    names.get(n).copied().ok_or_else(|| {
                        self.err_at(span.clone(), field, format!("no node named {n:?}"))
                    })
                })
                .collect()
        };
        for (i, f) in sc.fault.iter().enumerate() {
            let kinds = [
                f.link_down.is_some(),
                f.link_up.is_some(),
                f.crash.is_some(),
                f.restart.is_some(),
                f.pause.is_some(),
                f.partition.is_some(),
                f.heal.is_some(),
                f.loss.is_some(),
                f.session_cut.is_some(),
                f.session_reset.is_some(),
            ];
            if kinds.iter().filter(|&&k| k).count() != 1 {
                return Err(self.err_at(
                    self.table_header("fault", i).unwrap_or(0..0),
                    "fault",
                    format!(
                        "fault at {} ns: give exactly one of link_down, link_up, crash, restart, pause, partition, heal, loss, session_cut, session_reset",
                        f.at
                    ),
                ));
            }
            let after = f.duration.map(|d| f.at + d);
            if let Some(l) = &f.link_down {
                let id = link(l, "link_down")?;
                sim.schedule(f.at, Fault::LinkDown(id));
                if let Some(t) = after {
                    sim.schedule(t, Fault::LinkUp(id));
                }
            } else if let Some(l) = &f.link_up {
                sim.schedule(f.at, Fault::LinkUp(link(l, "link_up")?));
            } else if let Some(n) = &f.crash {
                let id = node(n, "crash")?;
                sim.schedule(f.at, Fault::Crash(id));
                if let Some(t) = after {
                    sim.schedule(t, Fault::Restart(id));
                }
            } else if let Some(n) = &f.restart {
                sim.schedule(f.at, Fault::Restart(node(n, "restart")?));
            } else if let Some(n) = &f.pause {
                let duration = f
                    .duration
                    .ok_or_else(|| self.err_at(n.span(), "pause", "a pause needs `for`"))?;
                sim.schedule(
                    f.at,
                    Fault::Pause {
                        node: node(n, "pause")?,
                        duration,
                    },
                );
            } else if let Some(p) = &f.partition {
                let [a, b] = p.get_ref();
                let (a, b) = (
                    group(a, p.span(), "partition")?,
                    group(b, p.span(), "partition")?,
                );
                sim.schedule(f.at, Fault::Partition(a.clone(), b.clone()));
                if let Some(t) = after {
                    sim.schedule(t, Fault::Heal(a, b));
                }
            } else if let Some(p) = &f.heal {
                let [a, b] = p.get_ref();
                sim.schedule(
                    f.at,
                    Fault::Heal(group(a, p.span(), "heal")?, group(b, p.span(), "heal")?),
                );
            } else if let Some(c) = &f.loss {
                let change = c.get_ref();
                let id = link(&Spanned::new(c.span(), change.link.clone()), "loss.link")?;
                let model = change
                    .loss
                    .model()
                    .map_err(|e| self.err_at(c.span(), "loss", e))?;
                sim.schedule(f.at, Fault::SetLoss(id, model));
            } else if let Some(x) = &f.session_cut {
                let id = session(x, "session_cut")?;
                sim.schedule(f.at, Fault::SessionCut(id));
                if let Some(t) = after {
                    sim.schedule(t, Fault::SessionHeal(id));
                }
            } else if let Some(x) = &f.session_reset {
                sim.schedule(f.at, Fault::SessionReset(session(x, "session_reset")?));
            }
        }
        if let Some(r) = &sc.random_faults {
            let targets = Targets {
                names: &names,
                links: &link_ids,
                sessions: &session_ids,
                workloads: &workload_ids,
                is_host: &is_host,
            };
            self.random_faults(r, &mut sim, seed, &targets, sc.duration)?;
        }
        if let (false, Some(dir)) = (captures.is_empty(), out) {
            std::fs::create_dir_all(dir)
                .map_err(|e| ScenarioError(format!("{}: {e}", dir.display())))?;
            for (id, file, span) in captures {
                sim.capture(id, &dir.join(file))
                    .map_err(|e| self.err_at(span, "capture", e))?;
            }
        }
        Ok(Built {
            sim,
            hosts,
            duration: sc.duration,
        })
    }

    /// Resolves `[random_faults]` against the topology and schedules the
    /// draw for `seed` (see [`crate::random_faults`]).
    fn random_faults(
        &self,
        r: &RandomFaults,
        sim: &mut Simulation,
        seed: u64,
        t: &Targets<'_>,
        duration: Nanos,
    ) -> Result<(), ScenarioError> {
        let (names, links, is_host) = (t.names, t.links, t.is_host);
        self.check_random_faults(r)?;
        let field = |f: &str| format!("random_faults.{f}");
        let nodes_of = |list: &[Spanned<String>], f: &str| -> Result<Vec<NodeId>, ScenarioError> {
            list.iter()
                .map(|n| {
                    names.get(n.get_ref()).copied().ok_or_else(|| {
                        self.err_at(
                            n.span(),
                            &field(f),
                            format!("no node named {:?}", n.get_ref()),
                        )
                    })
                })
                .collect()
        };
        let links_of = |list: &[Spanned<String>], f: &str| -> Result<Vec<LinkId>, ScenarioError> {
            list.iter()
                .map(|l| {
                    links.get(l.get_ref()).copied().ok_or_else(|| {
                        self.err_at(
                            l.span(),
                            &field(f),
                            format!("no link named {:?} (links are named a-b by their nodes unless given a name)", l.get_ref()),
                        )
                    })
                })
                .collect()
        };
        let nodes: Vec<NodeId> = match &r.nodes {
            Some(ns) => nodes_of(ns, "nodes")?,
            None => names
                .values()
                .copied()
                .filter(|n| !is_host[n.0 as usize])
                .collect(),
        };
        let cand_links: Vec<LinkId> = match &r.links {
            Some(ls) => links_of(ls, "links")?,
            None => links.values().copied().collect(),
        };
        let impair = r.impair.as_ref().map(|i| i.get_ref());
        let impair_links = match impair.and_then(|i| i.links.as_ref()) {
            Some(ls) => links_of(ls, "impair.links")?,
            None => cand_links.clone(),
        };
        let partition_nodes = match &r.partition_nodes {
            Some(p) => nodes_of(p.get_ref(), "partition_nodes")?,
            None => nodes.clone(),
        };
        let sessions = match &r.sessions {
            Some(list) => list
                .iter()
                .map(|x| {
                    t.sessions.get(x.get_ref()).copied().ok_or_else(|| {
                        self.err_at(
                            x.span(),
                            &field("sessions"),
                            format!("no session named {:?}", x.get_ref()),
                        )
                    })
                })
                .collect::<Result<Vec<_>, _>>()?,
            None => t.sessions.values().copied().collect(),
        };
        let workloads = r.workloads.iter().flatten().map(|w| {
            t.workloads.get(w.get_ref()).cloned().ok_or_else(|| {
                let known: Vec<&str> = t.workloads.keys().map(String::as_str).collect();
                let why = format!("no workload {:?}; known: {}", w.get_ref(), known.join(", "));
                self.err_at(w.span(), &field("workloads"), why)
            })
        });
        let workloads = workloads.collect::<Result<Vec<_>, _>>()?;
        let plan = Plan {
            start: r.start.unwrap_or(0),
            stop: r.stop.unwrap_or(duration),
            mean_interval: r.mean_interval,
            down_for: r.down_for,
            kinds: r
                .kinds
                .get_ref()
                .iter()
                .filter_map(|k| Kind::parse(k.get_ref()))
                .collect(),
            nodes,
            links: cand_links,
            impair: impair.map(impair_bounds).unwrap_or_default(),
            impair_links,
            impair_for: impair.and_then(|i| i.window).unwrap_or(r.down_for),
            partition_nodes,
            sessions,
            workloads,
            storm_factor: r
                .storm_factor
                .as_ref()
                .map_or(crate::random_faults::DEFAULT_STORM_FACTOR, |f| *f.get_ref()),
        };
        plan.check()
            .map_err(|e| self.err_at(self.section_header("random_faults"), "random_faults", e))?;
        crate::random_faults::schedule(&plan, sim, seed);
        Ok(())
    }
}

/// What random faults may hit, by name.
struct Targets<'a> {
    names: &'a BTreeMap<String, NodeId>,
    links: &'a BTreeMap<String, LinkId>,
    sessions: &'a BTreeMap<String, crate::session::SessionIdx>,
    /// `host/workload` → (host, workload name).
    workloads: &'a BTreeMap<String, (NodeId, String)>,
    is_host: &'a [bool],
}

/// The maxima an `impair` table gives (absent: zero, left as configured).
fn impair_bounds(i: &crate::random_faults::ImpairSpec) -> ImpairBounds {
    let p = |v: &Option<Spanned<f64>>| v.as_ref().map_or(0.0, |v| *v.get_ref());
    ImpairBounds {
        loss: p(&i.loss),
        duplicate: p(&i.duplicate),
        reorder: p(&i.reorder),
        reorder_delay: i.reorder_delay.unwrap_or(0),
        jitter: i.jitter.unwrap_or(0),
    }
}

/// A TOML value as the text a parameter parser expects (`65536`, `10us`).
fn value_text(v: &toml::Value) -> String {
    match v {
        toml::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// A link's channel configuration: its own fields, then the defaults, then
/// the built-in defaults.
fn channel_config(defaults: &LinkParams, own: &LinkParams) -> Result<ChannelConfig, String> {
    let base = ChannelConfig::default();
    let prob = |v: Option<f64>, name: &str| -> Result<f64, String> {
        match v {
            Some(p) if !(0.0..=1.0).contains(&p) => {
                Err(format!("{name} must be within 0..=1, got {p}"))
            }
            Some(p) => Ok(p),
            None => Ok(0.0),
        }
    };
    let loss = own
        .loss
        .as_ref()
        .or(defaults.loss.as_ref())
        .map(LossSpec::model)
        .transpose()?
        .unwrap_or(LossModel::None);
    let rate = own.rate.or(defaults.rate).unwrap_or(base.rate_bps);
    if rate == 0 {
        return Err("rate must be above zero".into());
    }
    Ok(ChannelConfig {
        rate_bps: rate,
        delay: own.delay.or(defaults.delay).unwrap_or(base.delay),
        queue_bytes: own.queue.or(defaults.queue).unwrap_or(base.queue_bytes),
        loss,
        duplicate: prob(own.duplicate.or(defaults.duplicate), "duplicate")?,
        reorder: prob(own.reorder.or(defaults.reorder), "reorder")?,
        reorder_delay: own
            .reorder_delay
            .or(defaults.reorder_delay)
            .unwrap_or(base.reorder_delay),
        jitter: own.jitter.or(defaults.jitter).unwrap_or(base.jitter),
    })
}

/// Where a scenario's results go by default: `out/<scenario file stem>`.
pub fn default_out_dir(scenario: &Path) -> PathBuf {
    let stem = scenario
        .file_stem()
        .map_or("run".into(), |s| s.to_string_lossy().into_owned());
    PathBuf::from("out").join(stem)
}
