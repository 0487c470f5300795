//! CLIP servers in scenarios: `[[server]] kind = "clip_server"`, a CLIP
//! server ([`ClipServer`]: the runtime and its CLIP-CTL endpoint toward the
//! controller on the switch CPU) on a multi-core server
//! ([`inca_server::MultiCoreServer`]) as a simulator node.
//!
//! ```toml
//! [[server]]
//! name = "clip1"
//! kind = "clip_server"
//! ip = "10.0.2.1"                  # unused by CLIP (raw Ethernet), required by scenarios
//! params = { app = "snat", server_id = 1, cores = 8, pool = { base_ip = "198.51.100.1", lo = 1024, hi = 65535 } }
//! ```
//!
//! Parameters (`params`), every one but `app` and `server_id` optional:
//!
//! | field | meaning | default |
//! |---|---|---|
//! | `app` | `"null"`, `"mfwd"` or `"snat"`: the remote handler | required |
//! | `server_id` | this server's id (1..=127), as in the switch's `servers` | required |
//! | `cores` | worker cores, one receive queue each | 8 (§8.1: Xeon Silver 4110-class) |
//! | `rss` | [`inca_server::RssConfig`] (the runtime hashes the flow key behind the shim) | Microsoft key, 128-entry RETA |
//! | `costs` | [`CoreCosts`]: I/O per frame | 400 ns (§8.1) |
//! | `clip_costs` | [`ClipCosts`]: shim, mirrored lookup, SNAT allocation per request | 50 / 300 / 500 ns (§8.1) |
//! | `nic` | [`NicConfig`] | [`clip_nic`]: 40 GbE on PCIe 3.0 × 16 (ConnectX-5-class, §8.1) |
//! | `runtime` | [`RuntimeConfig`] without `server_id` (T_exp, bounds, intervals) | the spec's |
//! | `mirror_capacity` | entries of the app's mirrored table (MFWD, SNAT) | 1,048,576 (§3.2) |
//! | `pool` | SNAT only: this server's slice, `{ base_ip, lo, hi }` (POOL_ASSIGN) | required for `snat` |
//!
//! The server has one linked port (port 0, the switch's server port); a
//! request's response leaves where it came in. Its node report has the
//! multi-core server's counters and the runtime's (`nf_...`, the handler's
//! as `nf_app_...`), and `nf_cpu_extra_ns`, the CPU time charged beyond
//! I/O ([`costs`]).
//!
//! The server answers the controller's CLIP-CTL requests (top-N reports,
//! flow queries, offload and expiry notices), reports the entries its
//! handler creates and sends a heartbeat every 100 ms, so a CLIP program
//! with its controller on (`controller = 1`, the default; `promotion =
//! "sketch"` for offload) drives it as the spec's controller drives a
//! server.
//!
//! [our choice] Static set-up stands in for the controller where the
//! controller has no part (it does not manage SNAT pools; TRD's index
//! slices it does assign, `switch::controller::conns`): the pool slice
//! is assigned at start and again after a restart (§4.5 has the
//! controller re-assign it when the server registers). MFWD's mirrored entries are not preinstalled:
//! a scenario's hosts draw their random 5-tuples from their own seeded
//! generators, which a server cannot reproduce; tests and experiments that
//! need them install them through the runtime's control API
//! ([`crate::server::ClipRuntime::mirror_insert`]) or the controller's
//! MIRROR_INSERT. Without them every MFWD request
//! misses and the switch forwards the packet by its regular routes.

pub mod costs;

use std::net::Ipv4Addr;

use inca_server::ServerConfig;
use inca_server::{CoreCosts, MultiCoreServer, NicConfig, PcieConfig, PortMacs, RssConfig};
use inca_sim::engine::Node;
use inca_sim::scenario::ServerSetup;
use inca_system::server::ServerNode;
use inca_system::SystemError;
use serde::Deserialize;

use crate::apps::mfwd::MfwdHandler;
use crate::apps::null::NullHandler;
use crate::apps::snat::{SnatHandler, POOL_PORTS};
use crate::server::{ClipServer, RuntimeConfig};
pub use costs::{ClipCosts, CountedWork, PricedRuntime, Work};

/// The server kind's name in scenarios.
pub const KIND: &str = "clip_server";

/// The apps a `clip_server` runs.
pub const APPS: [&str; 3] = ["null", "mfwd", "snat"];

/// Most mirrored-table entries a server may be given [our choice: 2^24,
/// sixteen times §3.2's default; it bounds a typo, not a workload].
pub const MAX_MIRROR: usize = 1 << 24;

/// The NIC of a CLIP server (§8.1: "ConnectX-5-class 40 Gbps NIC"): 40 GbE
/// on PCIe 3.0 × 16 (NVIDIA, ConnectX-5 EN adapter cards user manual,
/// "Interfaces": PCIe Gen 3.0 through an ×16 edge connector, 8.0 GT/s;
/// 128b/130b line code, PCI-SIG base specification 3.0). The rest is
/// [`NicConfig`]'s default (rings of 1,024, bursts of 32 — the spec's §3.2
/// and §8.1 values — PCIe latencies of Neugebauer et al.; the 512 KB packet
/// buffer is the 82599's, ConnectX-5's is not published [our choice]).
pub fn clip_nic() -> NicConfig {
    NicConfig {
        line_rate_gbps: 40.0,
        pcie: PcieConfig {
            lanes: 16,
            gt_per_s: 8.0,
            encoding: 128.0 / 130.0,
            ..PcieConfig::default()
        },
        ..NicConfig::default()
    }
}

/// `pool = { base_ip, lo, hi }`: a SNAT server's slice of public ports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PoolParams {
    /// The public address.
    pub base_ip: Ipv4Addr,
    /// First port of the slice (≥ 1).
    pub lo: u32,
    /// Last port of the slice (≤ 65,535).
    pub hi: u32,
}

/// A `clip_server`'s `params` as written. See the module documentation.
#[derive(Debug, Clone)]
pub struct ClipServerParams {
    /// The app.
    pub app: Option<String>,
    /// The server id.
    pub server_id: Option<u8>,
    /// Worker cores.
    pub cores: usize,
    /// RSS.
    pub rss: RssConfig,
    /// I/O cost per frame.
    pub costs: CoreCosts,
    /// Costs per request beyond I/O.
    pub clip_costs: ClipCosts,
    /// The NIC.
    pub nic: NicConfig,
    /// The runtime's configuration without `server_id`.
    pub runtime: Option<toml::Table>,
    /// Mirrored-table capacity.
    pub mirror_capacity: usize,
    /// SNAT's pool slice.
    pub pool: Option<PoolParams>,
}

impl Default for ClipServerParams {
    fn default() -> Self {
        ClipServerParams {
            app: None,
            server_id: None,
            cores: 8,
            rss: RssConfig::default(),
            // CLIP spec §8.1: DPDK-class I/O, 400 ns per packet
            // [our choice there; docs/calibration.md].
            costs: CoreCosts {
                fixed_ns: 400,
                per_byte_ps: 0,
            },
            clip_costs: ClipCosts::default(),
            nic: clip_nic(),
            runtime: None,
            mirror_capacity: 1_048_576,
            pool: None,
        }
    }
}

/// A `clip_server` ready to build: what [`ClipServerParams`] says, checked.
#[derive(Debug, Clone)]
pub struct ClipServerConfig {
    /// The app.
    pub app: &'static str,
    /// The multi-core server.
    pub server: ServerConfig,
    /// The runtime.
    pub runtime: RuntimeConfig,
    /// Costs per request beyond I/O.
    pub clip_costs: ClipCosts,
    /// Mirrored-table capacity.
    pub mirror_capacity: usize,
    /// SNAT's pool slice.
    pub pool: Option<PoolParams>,
}

impl ClipServerParams {
    /// Reads `params`, field by field so that an error names its field.
    pub fn from_table(params: &toml::Table) -> Result<Self, String> {
        fn get<T: serde::de::DeserializeOwned>(k: &str, v: &toml::Value) -> Result<T, String> {
            v.clone()
                .try_into()
                .map_err(|e: toml::de::Error| format!("{k}: {}", e.message()))
        }
        let mut p = ClipServerParams::default();
        for (k, v) in params {
            match k.as_str() {
                "app" => p.app = Some(get(k, v)?),
                "server_id" => p.server_id = Some(get(k, v)?),
                "cores" => p.cores = get(k, v)?,
                "rss" => p.rss = get(k, v)?,
                "costs" => p.costs = get(k, v)?,
                "clip_costs" => p.clip_costs = get(k, v)?,
                "nic" => p.nic = get(k, v)?,
                "runtime" => p.runtime = Some(get(k, v)?),
                "mirror_capacity" => p.mirror_capacity = get(k, v)?,
                "pool" => p.pool = Some(get(k, v)?),
                _ => {
                    return Err(format!(
                        "{k}: unknown field (the fields: app, server_id, cores, rss, costs, \
                         clip_costs, nic, runtime, mirror_capacity, pool)"
                    ))
                }
            }
        }
        Ok(p)
    }

    /// Checks every field and resolves the defaults; errors name the field.
    pub fn resolve(self) -> Result<ClipServerConfig, String> {
        let app = match self.app.as_deref() {
            None => return Err(format!("app: missing (one of {})", APPS.join(", "))),
            Some(a) => APPS
                .iter()
                .find(|&&k| k == a)
                .copied()
                .ok_or_else(|| format!("app: {a:?} is not one of {}", APPS.join(", ")))?,
        };
        let server_id = self
            .server_id
            .ok_or("server_id: missing (the id the switch's `servers` gives this server)")?;
        let mut runtime_table = self.runtime.unwrap_or_default();
        if runtime_table.contains_key("server_id") {
            return Err("runtime.server_id: give server_id at the top level".into());
        }
        runtime_table.insert("server_id".into(), i64::from(server_id).into());
        let runtime: RuntimeConfig = toml::Value::Table(runtime_table)
            .try_into()
            .map_err(|e: toml::de::Error| format!("runtime: {}", e.message()))?;
        runtime.check().map_err(|e| {
            if e.starts_with("server_id") {
                e
            } else {
                format!("runtime.{e}")
            }
        })?;
        if !(1..=inca_server::multicore::MAX_CORES).contains(&self.cores) {
            return Err(format!(
                "cores must be from 1 to {}, not {}",
                inca_server::multicore::MAX_CORES,
                self.cores
            ));
        }
        self.nic.check()?;
        self.clip_costs.check()?;
        if !(1..=MAX_MIRROR).contains(&self.mirror_capacity) {
            return Err(format!(
                "mirror_capacity must be from 1 to {MAX_MIRROR}, not {}",
                self.mirror_capacity
            ));
        }
        match (app, self.pool) {
            ("snat", None) => {
                return Err("pool: the snat app needs its slice, { base_ip, lo, hi }".into())
            }
            ("snat", Some(p)) if p.lo == 0 || p.lo > p.hi || p.hi > u32::from(u16::MAX) => {
                return Err(format!(
                    "pool: ports {}..={} are not a range within 1..=65535",
                    p.lo, p.hi
                ))
            }
            (a, Some(_)) if a != "snat" => {
                return Err(format!("pool: only the snat app takes a pool, not {a}"))
            }
            _ => {}
        }
        Ok(ClipServerConfig {
            app,
            server: ServerConfig {
                cores: self.cores,
                rss: self.rss,
                costs: self.costs,
                nic: self.nic,
            },
            runtime,
            clip_costs: self.clip_costs,
            mirror_capacity: self.mirror_capacity,
            pool: self.pool,
        })
    }
}

/// The node a `clip_server` is, for handler `H`.
pub type ClipServerNode<H> = ServerNode<PricedRuntime<H>>;

/// Builds the server for `handler` on `ports`.
fn node<H: CountedWork>(
    cfg: &ClipServerConfig,
    ports: Vec<PortMacs>,
    handler: H,
) -> Result<Box<dyn Node>, String> {
    let mut rt = ClipServer::new(cfg.runtime.clone(), cfg.server.cores, handler)
        .map_err(|e| e.to_string())?;
    if let Some(p) = cfg.pool {
        rt.runtime_mut()
            .pool_assign(POOL_PORTS, p.base_ip.octets(), p.lo, p.hi);
    }
    let nf = PricedRuntime::new(rt, cfg.clip_costs).with_pool(cfg.pool);
    let server = MultiCoreServer::new(cfg.server.clone(), ports, nf).map_err(|e| e.to_string())?;
    Ok(Box::new(ServerNode(server)))
}

/// The `[[server]] kind = "clip_server"` node from its scenario set-up.
pub fn build(setup: &ServerSetup) -> Result<Box<dyn Node>, SystemError> {
    let refuse = |e: String| SystemError::Refused(format!("server {:?} params: {e}", setup.name));
    let cfg = ClipServerParams::from_table(&setup.params)
        .and_then(ClipServerParams::resolve)
        .map_err(refuse)?;
    let ports: Vec<PortMacs> = setup
        .macs
        .iter()
        .zip(&setup.neighbour_macs)
        .take(1)
        .map(|(&mac, &neighbour)| PortMacs { mac, neighbour })
        .collect();
    if ports.is_empty() {
        return Err(refuse(
            "the server has no linked port (link its port 0 to the switch's server port)".into(),
        ));
    }
    let cap = cfg.mirror_capacity;
    match cfg.app {
        "null" => node(&cfg, ports, NullHandler::new()),
        "mfwd" => node(&cfg, ports, MfwdHandler::new(cap)),
        _ => node(&cfg, ports, SnatHandler::new(cap)),
    }
    .map_err(refuse)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolve(text: &str) -> Result<ClipServerConfig, String> {
        let t: toml::Table = toml::from_str(text).unwrap();
        ClipServerParams::from_table(&t).and_then(ClipServerParams::resolve)
    }

    #[test]
    fn defaults_are_the_spec_s_testbed() {
        let c = resolve("app = \"null\"\nserver_id = 3").unwrap();
        assert_eq!((c.app, c.runtime.server_id), ("null", 3));
        assert_eq!(c.server.cores, 8);
        assert_eq!(c.server.costs.fixed_ns, 400);
        assert_eq!(c.clip_costs, ClipCosts::default());
        assert_eq!(c.server.nic.line_rate_gbps, 40.0);
        assert_eq!(c.server.nic.pcie.rate_bps(), 126_030_769_231);
        let c = resolve(
            "app = \"snat\"\nserver_id = 2\ncores = 1\nruntime = { t_exp_ns = 5 }\n\
             pool = { base_ip = \"198.51.100.1\", lo = 1024, hi = 2047 }",
        )
        .unwrap();
        assert_eq!((c.server.cores, c.runtime.t_exp_ns), (1, 5));
        assert_eq!(c.pool.map(|p| (p.lo, p.hi)), Some((1024, 2047)));
    }

    #[test]
    fn every_bad_field_is_named() {
        let ok = "app = \"null\"\nserver_id = 1\n";
        for (text, field) in [
            ("server_id = 1", "app"),
            ("app = \"nat\"\nserver_id = 1", "app"),
            ("app = \"null\"", "server_id"),
            ("app = \"null\"\nserver_id = 300", "server_id"),
            ("app = \"null\"\nserver_id = 0", "server_id"),
            (&format!("{ok}nic = {{ line_rate_gbps = \"x\" }}"), "nic"),
            (
                &format!("{ok}nic = {{ line_rate_gbps = 0.0 }}"),
                "nic.line_rate_gbps",
            ),
            (&format!("{ok}costs = {{ fixed = 3 }}"), "costs"),
            (
                &format!("{ok}clip_costs = {{ alloc_ns = 9999999 }}"),
                "clip_costs.alloc_ns",
            ),
            (
                &format!("{ok}runtime = {{ t_exp_ns = 0 }}"),
                "runtime.t_exp_ns",
            ),
            (
                &format!("{ok}runtime = {{ server_id = 1 }}"),
                "runtime.server_id",
            ),
            (&format!("{ok}runtime = {{ t_exp = 1 }}"), "runtime"),
            (&format!("{ok}mirror_capacity = 0"), "mirror_capacity"),
            (
                &format!("{ok}pool = {{ base_ip = \"1.2.3.4\", lo = 1, hi = 2 }}"),
                "pool",
            ),
            ("app = \"snat\"\nserver_id = 1", "pool"),
            (
                "app = \"snat\"\nserver_id = 1\npool = { base_ip = \"1.2.3.4\", lo = 0, hi = 2 }",
                "pool",
            ),
            (
                "app = \"snat\"\nserver_id = 1\npool = { base_ip = \"x\", lo = 1, hi = 2 }",
                "pool",
            ),
            (&format!("{ok}bogus = 1"), "bogus"),
        ] {
            let e = resolve(text)
                .err()
                .unwrap_or_else(|| panic!("{text} accepted"));
            assert!(e.starts_with(field), "{text}: {e}");
        }
    }
}
