//! RedPlane as an inca system ([`inca_system::System`]): its switch
//! programs (the replicated apps of [`crate::catalog`] and the
//! bounded-mode ones of [`crate::snapshot::catalog`]), its state-store
//! server, its per-run linearizability check and its built-in
//! `redplane-snapshot` campaign.
//!
//! A run remembers the RedPlane address of every RedPlane switch it built:
//! a store server whose params give no `allowed_switches` accepts those
//! (scenarios build switches before servers). In checked mode the first
//! RedPlane device creates the run's [`RunChecker`] and every later one
//! records into it.

use std::any::Any;
use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use inca_apps::params::Params;
use inca_sim::engine::{Node, Simulation};
use inca_sim::scenario::ServerSetup;
use inca_switch::loadcheck::{load_check, LoadCheckOptions, LoadCheckReport};
use inca_switch::placement::Placement;
use inca_switch::{Profile, Switch};
use inca_system::campaign::SeedResult;
use inca_system::server::params_with_addresses;
use inca_system::{
    BuiltinCampaign, CampaignError, CheckError, Judgement, ProgramInfo, RunCheck, RunMode,
    ServerKindInfo, System, SystemError, SystemRun,
};

use crate::snapshot::catalog as bounded;
use crate::verify::run_check::RunChecker;

/// The bounded-mode programs (snapshots, not per-packet replication).
fn is_bounded(program: &str) -> bool {
    bounded::PROGRAMS.iter().any(|p| p.0 == program)
}

/// The placement of a bounded-mode program on `profile`.
fn placed<P: inca_switch::Program>(
    profile: &Profile,
    program: Result<P, String>,
) -> Result<Placement, CheckError> {
    let sw = Switch::new(profile.clone(), program.map_err(CheckError::Refused)?)?;
    Ok(sw.placement().clone())
}

/// RedPlane, registered in the binary's list of systems.
#[derive(Debug, Clone, Copy, Default)]
pub struct RedPlaneSystem;

impl System for RedPlaneSystem {
    fn name(&self) -> &'static str {
        "redplane"
    }

    fn programs(&self) -> Vec<ProgramInfo> {
        let replicated = crate::catalog::PROGRAMS
            .iter()
            .map(|&(name, about)| (name, about, crate::catalog::params_of(name)));
        let snapshots = bounded::PROGRAMS
            .iter()
            .map(|&(name, about)| (name, about, bounded::params_of(name)));
        replicated
            .chain(snapshots)
            .map(|(name, about, params)| ProgramInfo {
                name,
                about,
                params: params.unwrap_or_default(),
            })
            .collect()
    }

    fn check(
        &self,
        program: &str,
        params: &Params,
        profile: &Profile,
    ) -> Result<Placement, CheckError> {
        match program {
            "redplane_hh" => placed(profile, bounded::program_hh(params, profile)),
            "redplane_async_counter" => {
                placed(profile, bounded::program_async_counter(params, profile))
            }
            _ => {
                crate::catalog::check_program(program, params, profile).map_err(CheckError::Refused)
            }
        }
    }

    fn load_check(
        &self,
        program: &str,
        params: &Params,
        profile: &Profile,
        opts: LoadCheckOptions,
    ) -> Result<LoadCheckReport, CheckError> {
        let refused = |e: String| CheckError::Refused(e);
        let run = |r: Result<LoadCheckReport, inca_switch::LoadError>| r.map_err(CheckError::from);
        match program {
            "redplane_hh" => run(load_check(
                profile,
                bounded::program_hh(params, profile).map_err(refused)?,
                opts,
            )),
            "redplane_async_counter" => run(load_check(
                profile,
                bounded::program_async_counter(params, profile).map_err(refused)?,
                opts,
            )),
            _ => crate::catalog::load_check_program(program, params, profile, opts)
                .map_err(CheckError::Refused),
        }
    }

    fn start_run(&self, mode: RunMode) -> Box<dyn SystemRun> {
        Box::new(RedPlaneRun {
            checked: mode == RunMode::Checked,
            checker: None,
            switches: Vec::new(),
        })
    }

    fn server_kinds(&self) -> Vec<ServerKindInfo> {
        vec![ServerKindInfo {
            kind: "redplane_store",
            about: "RedPlane state store: a chain-replicated shard member",
        }]
    }

    fn campaigns(&self) -> Vec<BuiltinCampaign> {
        vec![BuiltinCampaign {
            name: "redplane-snapshot",
            about: "RedPlane bounded mode: HH switch A crashes under 0-5 % link loss, switch B restores the partition from the store; the restored state must be an exact snapshot no older than epsilon",
            run_seed: snapshot_seed,
        }]
    }

    fn benches(&self) -> Vec<inca_system::bench::Bench> {
        crate::bench::benches()
    }
}

/// One seed of `redplane-snapshot`.
fn snapshot_seed(seed: u64) -> Result<SeedResult, CampaignError> {
    let run = crate::snapshot::campaign::crash_restore_run(seed, 0.05)
        .map_err(|message| CampaignError::Seed { seed, message })?;
    let mut violations = run.violations.clone();
    if run.access_violations > 0 {
        violations.push(format!(
            "{} data-plane access violations",
            run.access_violations
        ));
    }
    Ok(SeedResult {
        seed,
        faults: vec![
            (0, format!("switch links lose {:.1} %", run.loss * 100.0)),
            (run.crash_at, "switch A crashed (state lost)".into()),
        ],
        kinds: BTreeMap::from([("loss".to_string(), 1), ("crash".to_string(), 1)]),
        violations,
        judged: BTreeMap::from([(
            "redplane-snapshot: restores checked".to_string(),
            run.b_restores,
        )]),
        notes: vec![format!(
            "B restored {} time(s), {} exact; {} epsilon actions",
            run.b_restores, run.exact_restores, run.epsilon_fired
        )],
        events: 0,
    })
}

/// One run's RedPlane devices: the switches' addresses (the store's
/// default allowlist) and, checked, the run's recorder and checker.
pub struct RedPlaneRun {
    checked: bool,
    checker: Option<RunChecker>,
    switches: Vec<Ipv4Addr>,
}

impl RedPlaneRun {
    /// The run's checker, if a RedPlane device was built in checked mode
    /// (its recorder holds the run's history).
    pub fn checker(&self) -> Option<&RunChecker> {
        self.checker.as_ref()
    }

    /// The run's checker, created on first use; `None` unless checked.
    fn checker_for_device(&mut self) -> Option<RunChecker> {
        if !self.checked {
            return None;
        }
        Some(self.checker.get_or_insert_with(RunChecker::new).clone())
    }

    /// Remembers a RedPlane switch's RedPlane address (`rp_ip`, or
    /// `switch_ip` for the bounded-mode programs); bad params are reported
    /// by the build itself.
    fn note_switch(&mut self, program: &str, params: &Params) {
        let ip = if is_bounded(program) {
            crate::snapshot::config::SnapshotConfig::from_params(params)
                .ok()
                .map(|c| c.switch_ip)
        } else {
            crate::switch::RedPlaneConfig::from_params(params)
                .ok()
                .map(|c| c.ip.into())
        };
        if let Some(ip) = ip.filter(|ip| !self.switches.contains(ip)) {
            self.switches.push(ip);
        }
    }
}

impl SystemRun for RedPlaneRun {
    fn build_switch(
        &mut self,
        program: &str,
        params: &Params,
        profile: Profile,
    ) -> Result<Box<dyn Node>, SystemError> {
        self.note_switch(program, params);
        if is_bounded(program) {
            return bounded::build(program, params, &profile).map_err(SystemError::Refused);
        }
        let observer = self
            .checker_for_device()
            .map(|c| c.switch_observer(program, params));
        crate::catalog::build_observed(program, params, &profile, observer)
            .map_err(SystemError::Refused)
    }

    fn build_server(
        &mut self,
        kind: &str,
        setup: &ServerSetup,
    ) -> Result<Box<dyn Node>, SystemError> {
        if kind != "redplane_store" {
            return Err(SystemError::UnknownServerKind {
                kind: kind.to_string(),
                known: "redplane_store".into(),
            });
        }
        let mut table = params_with_addresses(setup, "gateway_mac");
        if !self.switches.is_empty() {
            let list = self
                .switches
                .iter()
                .map(|ip| ip.to_string().into())
                .collect();
            table
                .entry("allowed_switches")
                .or_insert(toml::Value::Array(list));
        }
        let config: crate::store::config::StoreConfig = toml::Value::Table(table)
            .try_into()
            .map_err(|e| SystemError::Refused(format!("params: {e}")))?;
        let server =
            crate::store::StoreServer::new(config).map_err(|e| SystemError::Device(Box::new(e)))?;
        Ok(match self.checker_for_device() {
            Some(c) => Box::new(server.with_observer(c.store_observer())),
            None => Box::new(server),
        })
    }

    fn run_checks(&self) -> Vec<&dyn RunCheck> {
        match &self.checker {
            Some(c) => vec![c as &dyn RunCheck],
            None => Vec::new(),
        }
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// Checkers A/B, the app oracles and the monitor invariants over the
/// recorded history (see [`crate::verify::run_check`]).
impl RunCheck for RunChecker {
    fn judge(&self, sim: &Simulation) -> Judgement {
        let r = RunChecker::check(self, sim.seed());
        let mut j = Judgement {
            violations: r.violations,
            ..Judgement::default()
        };
        for (what, n) in [
            ("redplane: flows", r.flows),
            ("redplane: operations", r.ops),
            (
                "redplane: flows judged by Checker A (search)",
                r.checker_a_flows,
            ),
            ("redplane: operations judged by Checker A", r.checker_a_ops),
            (
                "redplane: flows judged by Checker B (witness)",
                r.checker_b_flows,
            ),
            ("redplane: inconclusive verdicts", r.inconclusive),
        ] {
            j.count(what, n as u64);
        }
        j.count("redplane: monitor events", r.monitor_events);
        j
    }
}
