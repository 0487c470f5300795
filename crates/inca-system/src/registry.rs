//! The registered systems, and the scenario factory that builds devices
//! through them.
//!
//! [`Registry`] answers the commands' questions by asking every system in
//! turn: who offers this program, this server kind, this campaign; what are
//! all the programs. Names are unique over the registry
//! ([`Registry::new`] refuses a duplicate), so the first system to claim a
//! name is the only one.
//!
//! [`SystemFactory`] is what `inca run`, `inca campaign`, `inca node` and
//! the testbed hand the scenario loader: it starts one [`SystemRun`] per
//! system and routes each device to the run of the system that owns it.

use inca_sim::nodes::host::workload::{BuildContext, Workload};
use inca_sim::nodes::host::HostError;
use std::cell::RefCell;
use std::net::SocketAddrV4;
use std::sync::Arc;

use inca_apps::params::Params;
use inca_sim::engine::{Node, Simulation};
use inca_sim::nodes::attack::CraftRequest;
use inca_sim::scenario::{FactoryError, ServerSetup, SwitchFactory};
use inca_switch::placement::Placement;
use inca_switch::Profile;

use crate::bench::Bench;
use crate::error::{CheckError, SystemError};
use crate::system::{BuiltinCampaign, Judgement, ProgramInfo, RunMode, System, SystemRun};

/// A name two registered systems both claim.
#[derive(Debug, thiserror::Error)]
#[error("{what} {name:?} is offered by both {first} and {second}")]
pub struct DuplicateName {
    /// Program, server kind, campaign or benchmark.
    pub what: &'static str,
    /// The name.
    pub name: String,
    /// The system registered first.
    pub first: &'static str,
    /// The other.
    pub second: &'static str,
}

/// The registered systems, in registration order (the order `inca check
/// --list`, `inca bench --list` and error messages use).
#[derive(Clone)]
pub struct Registry {
    systems: Vec<Arc<dyn System>>,
}

impl Registry {
    /// A registry of `systems`; every program, server kind, campaign and
    /// benchmark name must belong to one system only.
    pub fn new(systems: Vec<Arc<dyn System>>) -> Result<Registry, DuplicateName> {
        let registry = Registry { systems };
        let mut seen: Vec<(&'static str, String, &'static str)> = Vec::new();
        for s in &registry.systems {
            let names = s
                .programs()
                .into_iter()
                .map(|p| ("program", p.name))
                .chain(
                    s.server_kinds()
                        .into_iter()
                        .map(|k| ("server kind", k.kind)),
                )
                .chain(s.campaigns().into_iter().map(|c| ("campaign", c.name)))
                .chain(s.experiments().into_iter().map(|e| ("experiment", e.name)))
                .chain(s.benches().into_iter().map(|b| ("benchmark", b.name)))
                .chain(s.workloads().into_iter().map(|w| ("workload", w.kind)));
            for (what, name) in names {
                if let Some(first) = seen.iter().find(|(w, n, _)| *w == what && n == name) {
                    return Err(DuplicateName {
                        what,
                        name: name.to_string(),
                        first: first.2,
                        second: s.name(),
                    });
                }
                seen.push((what, name.to_string(), s.name()));
            }
        }
        Ok(registry)
    }

    /// The systems, in registration order.
    pub fn systems(&self) -> impl Iterator<Item = &dyn System> {
        self.systems.iter().map(|s| s.as_ref())
    }

    /// Every program of every system, in registration order.
    pub fn programs(&self) -> Vec<(&'static str, ProgramInfo)> {
        self.systems()
            .flat_map(|s| s.programs().into_iter().map(move |p| (s.name(), p)))
            .collect()
    }

    fn program_names(&self) -> String {
        let names: Vec<&str> = self.programs().iter().map(|(_, p)| p.name).collect();
        names.join(", ")
    }

    /// The index of the system offering `program`.
    fn program_owner(&self, program: &str) -> Option<usize> {
        self.systems
            .iter()
            .position(|s| s.programs().iter().any(|p| p.name == program))
    }

    /// The system offering `program`.
    pub fn system_of(&self, program: &str) -> Option<&dyn System> {
        self.program_owner(program)
            .map(|i| self.systems[i].as_ref())
    }

    /// The profile `program` is meant for ([`System::default_profile`]);
    /// `tofino` for a program no system offers (the check then names it).
    pub fn default_profile(&self, program: &str) -> &'static str {
        self.system_of(program)
            .map_or("tofino", |s| s.default_profile(program))
    }

    /// The resource report of `program` (`inca check`).
    pub fn check(
        &self,
        program: &str,
        params: &Params,
        profile: &Profile,
    ) -> Result<Placement, CheckError> {
        match self.system_of(program) {
            Some(s) => s.check(program, params, profile),
            None => Err(CheckError::UnknownProgram {
                program: program.to_string(),
                known: self.program_names(),
            }),
        }
    }

    /// The load-time check of `program` (`inca check`; see
    /// [`System::load_check`]).
    pub fn load_check(
        &self,
        program: &str,
        params: &Params,
        profile: &Profile,
        opts: inca_switch::loadcheck::LoadCheckOptions,
    ) -> Result<inca_switch::loadcheck::LoadCheckReport, CheckError> {
        match self.system_of(program) {
            Some(s) => s.load_check(program, params, profile, opts),
            None => Err(CheckError::UnknownProgram {
                program: program.to_string(),
                known: self.program_names(),
            }),
        }
    }

    /// Every built-in campaign, in registration order.
    pub fn campaigns(&self) -> Vec<BuiltinCampaign> {
        self.systems().flat_map(|s| s.campaigns()).collect()
    }

    /// The built-in campaign `name`.
    pub fn campaign(&self, name: &str) -> Option<BuiltinCampaign> {
        self.campaigns().into_iter().find(|c| c.name == name)
    }

    /// Every built-in experiment, in registration order.
    pub fn experiments(&self) -> Vec<crate::experiment::BuiltinExperiment> {
        self.systems().flat_map(|s| s.experiments()).collect()
    }

    /// The built-in experiment `name`.
    pub fn experiment(&self, name: &str) -> Option<crate::experiment::BuiltinExperiment> {
        self.experiments().into_iter().find(|e| e.name == name)
    }

    /// Every system's benchmarks, in registration order.
    pub fn benches(&self) -> Vec<Bench> {
        self.systems().flat_map(|s| s.benches()).collect()
    }
}

/// Builds a scenario's devices through the registered systems: one
/// [`SystemRun`] per system for the whole run (a factory is one run).
pub struct SystemFactory {
    registry: Registry,
    mode: RunMode,
    runs: Vec<RefCell<Box<dyn SystemRun>>>,
}

impl SystemFactory {
    /// A factory for a plain run.
    pub fn new(registry: Registry) -> SystemFactory {
        SystemFactory::with_mode(registry, RunMode::Plain)
    }

    /// A factory whose systems wire their recorders to the devices they
    /// build and collect their run checks (`inca campaign`).
    pub fn checked(registry: Registry) -> SystemFactory {
        SystemFactory::with_mode(registry, RunMode::Checked)
    }

    fn with_mode(registry: Registry, mode: RunMode) -> SystemFactory {
        let runs = registry
            .systems()
            .map(|s| RefCell::new(s.start_run(mode)))
            .collect();
        SystemFactory {
            registry,
            mode,
            runs,
        }
    }

    /// Whether this factory collects checks.
    pub fn is_checked(&self) -> bool {
        self.mode == RunMode::Checked
    }

    /// The registry it builds through.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// Runs every system's run checks over `sim` (the finished run); one
    /// message per violation.
    pub fn run_checks(&self, sim: &Simulation) -> Vec<String> {
        self.judge(sim).violations
    }

    /// Runs every system's run checks over `sim`: their violations and
    /// what they judged.
    pub fn judge(&self, sim: &Simulation) -> Judgement {
        let mut all = Judgement::default();
        for run in &self.runs {
            for c in run.borrow().run_checks() {
                all.merge(c.judge(sim));
            }
        }
        all
    }

    /// Calls `f` with this run's state of the system whose run type is `R`
    /// (a test that knows the system looks at its recorder this way);
    /// `None` if no registered system runs as `R`.
    pub fn run_of<R: SystemRun, T>(&self, f: impl FnOnce(&R) -> T) -> Option<T> {
        let run = self
            .runs
            .iter()
            .find(|run| run.borrow().as_any().is::<R>())?
            .borrow();
        run.as_any().downcast_ref::<R>().map(f)
    }

    /// A switch running `program`, built by the system that offers it.
    pub fn build_switch(
        &self,
        program: &str,
        params: &Params,
        profile: Profile,
    ) -> Result<Box<dyn Node>, SystemError> {
        let Some(i) = self.registry.program_owner(program) else {
            return Err(SystemError::UnknownProgram {
                program: program.to_string(),
                known: self.registry.program_names(),
            });
        };
        self.runs[i]
            .borrow_mut()
            .build_switch(program, params, profile)
    }

    /// A `[[server]]` of `kind`, built by the system that offers it.
    pub fn build_server_node(
        &self,
        kind: &str,
        setup: &ServerSetup,
    ) -> Result<Box<dyn Node>, SystemError> {
        let owner = self
            .registry
            .systems()
            .position(|s| s.server_kinds().iter().any(|k| k.kind == kind));
        match owner {
            Some(i) => self.runs[i].borrow_mut().build_server(kind, setup),
            None => {
                let known: Vec<&str> = self
                    .registry
                    .systems()
                    .flat_map(|s| s.server_kinds().into_iter().map(|k| k.kind))
                    .collect();
                Err(SystemError::UnknownServerKind {
                    kind: kind.to_string(),
                    known: known.join(", "),
                })
            }
        }
    }
}

impl SwitchFactory for SystemFactory {
    fn build(
        &self,
        program: &str,
        params: &[(String, String)],
        profile: Profile,
    ) -> Result<Box<dyn Node>, FactoryError> {
        let pairs: Vec<String> = params.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let params = Params::parse(pairs.iter().map(String::as_str)).map_err(SystemError::Param)?;
        Ok(self.build_switch(program, &params, profile)?)
    }

    fn build_server(&self, kind: &str, setup: &ServerSetup) -> Result<Box<dyn Node>, FactoryError> {
        Ok(self.build_server_node(kind, setup)?)
    }

    fn workload(
        &self,
        kind: &str,
        table: &toml::Table,
        cx: &mut BuildContext<'_>,
    ) -> Option<Result<Box<dyn Workload>, HostError>> {
        let registration = self
            .registry
            .systems()
            .flat_map(|s| s.workloads())
            .find(|w| w.kind == kind)?;
        Some((registration.build)(table, cx))
    }

    fn craft_sources(&self, request: &CraftRequest) -> Result<Vec<SocketAddrV4>, FactoryError> {
        Ok(match self.registry.system_of(&request.program) {
            Some(s) => s.craft_sources(request),
            None => Err(SystemError::NoCraftedKeys {
                program: request.program.clone(),
            }),
        }?)
    }
}
