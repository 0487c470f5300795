//! Builds the apps of `inca-apps` and the systems' devices as simulator
//! nodes: the simulator knows devices, not apps, so whoever runs a scenario
//! supplies this.
//!
//! A factory made with [`AppFactory::checked`] also collects, while it
//! builds, the checks each system wants run over a finished simulation
//! ([`RunCheck`]); `inca campaign` asks for them after every seed.

use std::cell::RefCell;

use inca_apps::catalog::{with_app, AppVisitor};
use inca_apps::params::Params;
use inca_redplane::verify::run_check::RunChecker;
use inca_sim::engine::{Node, Simulation};
use inca_sim::scenario::{ServerSetup, SwitchFactory};
use inca_switch::{Profile, Program, Switch};

/// A check over a finished run that needs more than one device's view (a
/// per-flow linearizability check over the recorded history, say). Returns
/// one message per violation, each saying what, where and when.
pub trait RunCheck {
    /// Checks the run; empty means it passed.
    fn check(&self, sim: &Simulation) -> Vec<String>;
}

/// The apps of `inca-apps` and the systems' devices as simulator nodes.
#[derive(Default)]
pub struct AppFactory {
    /// Whether to attach observers and collect run checks.
    checked: bool,
    checks: RefCell<Vec<Box<dyn RunCheck>>>,
    /// RedPlane's recorder and checker for this run, once a RedPlane
    /// device was built (checked mode only).
    redplane: RefCell<Option<RunChecker>>,
    /// The RedPlane addresses of the RedPlane switches built so far: the
    /// allowlist of state stores whose params give none (scenarios build
    /// switches before servers).
    redplane_switches: RefCell<Vec<std::net::Ipv4Addr>>,
}

impl AppFactory {
    /// A factory that attaches each system's observers to the devices it
    /// builds and collects their run checks.
    pub fn checked() -> Self {
        AppFactory {
            checked: true,
            checks: RefCell::new(Vec::new()),
            redplane: RefCell::new(None),
            redplane_switches: RefCell::new(Vec::new()),
        }
    }

    /// Whether this factory collects checks.
    pub fn is_checked(&self) -> bool {
        self.checked
    }

    /// Adds a run check (systems' builders call this).
    pub fn add_check(&self, check: Box<dyn RunCheck>) {
        self.checks.borrow_mut().push(check);
    }

    /// The run's RedPlane checker, created (and its run check added) on
    /// first use; `None` unless checked.
    fn redplane_checker(&self) -> Option<RunChecker> {
        if !self.checked {
            return None;
        }
        let mut slot = self.redplane.borrow_mut();
        if slot.is_none() {
            let checker = RunChecker::new();
            self.add_check(Box::new(RedPlaneCheck(checker.clone())));
            *slot = Some(checker);
        }
        slot.clone()
    }

    /// The run's RedPlane checker, if a RedPlane device was built in
    /// checked mode (its recorder holds the run's history).
    pub fn redplane(&self) -> Option<RunChecker> {
        self.redplane.borrow().clone()
    }

    /// Runs every collected check over `sim`.
    pub fn run_checks(&self, sim: &Simulation) -> Vec<String> {
        self.checks
            .borrow()
            .iter()
            .flat_map(|c| c.check(sim))
            .collect()
    }
}

impl SwitchFactory for AppFactory {
    fn build(
        &self,
        program: &str,
        params: &[(String, String)],
        profile: Profile,
    ) -> Result<Box<dyn Node>, String> {
        struct Build(Profile);
        impl AppVisitor for Build {
            type Output = Result<Box<dyn Node>, String>;
            fn visit<P: Program>(self, program: P) -> Self::Output {
                Switch::new(self.0, program)
                    .map(|s| Box::new(s) as Box<dyn Node>)
                    .map_err(|e| e.to_string())
            }
        }
        let pairs: Vec<String> = params.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let params = Params::parse(pairs.iter().map(String::as_str)).map_err(|e| e.to_string())?;
        if program.starts_with("redplane_") {
            self.note_redplane_switch(program, &params);
        }
        match program {
            "redplane_hh" | "redplane_async_counter" => {
                inca_redplane::snapshot::catalog::build(program, &params, &profile)
            }
            p if p.starts_with("redplane_") => {
                let observer = self
                    .redplane_checker()
                    .map(|c| c.switch_observer(program, &params));
                inca_redplane::catalog::build_observed(program, &params, &profile, observer)
            }
            p if p.starts_with("tea_") => inca_tea::catalog::build(program, &params, &profile),
            _ => with_app(program, &params, Build(profile)).map_err(|e| e.to_string())?,
        }
    }

    fn build_server(&self, kind: &str, setup: &ServerSetup) -> Result<Box<dyn Node>, String> {
        match kind {
            "redplane_store" => {
                let mut table = with_addresses(setup, "gateway_mac");
                let switches = self.redplane_switches.borrow();
                if !switches.is_empty() {
                    let list = switches.iter().map(|ip| ip.to_string().into()).collect();
                    table
                        .entry("allowed_switches")
                        .or_insert(toml::Value::Array(list));
                }
                let config: inca_redplane::store::config::StoreConfig = toml::Value::Table(table)
                    .try_into()
                    .map_err(|e| format!("params: {e}"))?;
                let server = inca_redplane::store::StoreServer::new(config)?;
                Ok(match self.redplane_checker() {
                    Some(c) => Box::new(server.with_observer(c.store_observer())) as Box<dyn Node>,
                    None => Box::new(server) as Box<dyn Node>,
                })
            }
            "tea_dram" => {
                let table = with_addresses(setup, "controller_mac");
                let config: inca_tea::server::DramServerConfig = toml::Value::Table(table)
                    .try_into()
                    .map_err(|e| format!("params: {e}"))?;
                inca_tea::server::DramServer::new(config)
                    .map(|s| Box::new(s) as Box<dyn Node>)
                    .map_err(|e| e.to_string())
            }
            _ => Err(format!(
                "unknown server kind {kind:?}; the kinds are redplane_store and tea_dram"
            )),
        }
    }

    /// Keys crafted against a switch's hash units (`tuples` workloads'
    /// `craft`; only TEA crafts them).
    fn craft_sources(
        &self,
        request: &inca_sim::nodes::attack::CraftRequest,
    ) -> Result<Vec<std::net::SocketAddrV4>, String> {
        if request.program.starts_with("tea_") {
            inca_tea::attack::craft_sources(request)
        } else {
            Err(format!(
                "program {:?} has no crafted keys (TEA programs do)",
                request.program
            ))
        }
    }
}

impl AppFactory {
    /// Remembers a RedPlane switch's RedPlane address (`rp_ip`, or
    /// `switch_ip` for the bounded-mode programs); bad params are reported
    /// by the build itself.
    fn note_redplane_switch(&self, program: &str, params: &Params) {
        let ip = match program {
            "redplane_hh" | "redplane_async_counter" => {
                inca_redplane::snapshot::config::SnapshotConfig::from_params(params)
                    .ok()
                    .map(|c| c.switch_ip)
            }
            _ => inca_redplane::switch::RedPlaneConfig::from_params(params)
                .ok()
                .map(|c| c.ip.into()),
        };
        let mut list = self.redplane_switches.borrow_mut();
        if let Some(ip) = ip.filter(|ip| !list.contains(ip)) {
            list.push(ip);
        }
    }
}

/// RedPlane's per-run check: Checkers A/B, the app oracles and the
/// monitor invariants over the recorded history (see
/// `inca_redplane::verify::run_check`).
struct RedPlaneCheck(RunChecker);

impl RunCheck for RedPlaneCheck {
    fn check(&self, sim: &Simulation) -> Vec<String> {
        self.0.check(sim.seed()).violations
    }
}

/// A server's `params` with what the scenario already knows filled in
/// where the file leaves it out: its address, its MAC and the MAC of the
/// device at the other end of port 0 (under the name `neighbour_field`).
fn with_addresses(setup: &ServerSetup, neighbour_field: &str) -> toml::Table {
    let mac = |m: [u8; 6]| toml::Value::Array(m.iter().map(|&b| i64::from(b).into()).collect());
    let mut t = setup.params.clone();
    t.entry("ip")
        .or_insert_with(|| toml::Value::String(setup.ip.to_string()));
    if let Some(&m) = setup.macs.first() {
        t.entry("mac").or_insert_with(|| mac(m));
    }
    if let Some(&m) = setup.neighbour_macs.first() {
        t.entry(neighbour_field).or_insert_with(|| mac(m));
    }
    t
}
