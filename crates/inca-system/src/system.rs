//! The [`System`] trait: everything a system offers inca's commands.
//!
//! A system is a family of switch programs plus whatever else they need
//! around them: server devices in scenarios (RedPlane's state store, TEA's
//! DRAM servers), checks over a finished run (RedPlane's linearizability
//! checker), built-in campaigns driven by scripts rather than scenario
//! files, benchmarks and traffic workloads. The commands never name a
//! system: they ask the [`crate::Registry`], which asks each system.
//!
//! Building is per run: [`System::start_run`] returns a [`SystemRun`] that
//! builds the run's devices in scenario order (switches, then servers) and
//! may keep what it learns along the way (RedPlane's servers are told the
//! addresses of the RedPlane switches built before them; in checked mode
//! every device is wired to one recorder, checked after the run).

use inca_sim::nodes::host::workload::{BuildContext, Workload};
use inca_sim::nodes::host::HostError;
use std::any::Any;
use std::net::SocketAddrV4;

use inca_apps::params::Params;
use inca_sim::engine::Node;
use inca_sim::nodes::attack::CraftRequest;
use inca_sim::scenario::ServerSetup;
use inca_switch::loadcheck::{LoadCheckOptions, LoadCheckReport};
use inca_switch::placement::Placement;
use inca_switch::Profile;

use crate::bench::Bench;
use crate::error::{CampaignError, CheckError, SystemError};
use inca_verify::SeedResult;

/// A switch program a system offers.
#[derive(Debug, Clone)]
pub struct ProgramInfo {
    /// Its name in scenarios and on the command line (unique over all
    /// registered systems).
    pub name: &'static str,
    /// One line on what it does.
    pub about: &'static str,
    /// The parameters it takes (empty: see the system's docs).
    pub params: Vec<&'static str>,
}

/// A `[[server]]` kind a system adds to scenarios.
#[derive(Debug, Clone)]
pub struct ServerKindInfo {
    /// Its `server = "..."` name (unique over all registered systems).
    pub kind: &'static str,
    /// One line on what it is.
    pub about: &'static str,
}

/// A campaign built in rather than written as a scenario: it drives its
/// devices with scripted operations and judges every result against a
/// reference. `inca campaign NAME` runs it.
#[derive(Debug, Clone, Copy)]
pub struct BuiltinCampaign {
    /// Its name on the command line (unique over all registered systems).
    pub name: &'static str,
    /// What one seed does.
    pub about: &'static str,
    /// Runs one seed.
    pub run_seed: fn(u64) -> Result<SeedResult, CampaignError>,
}

/// A traffic workload a system registers for scenarios' hosts (SwiSh and
/// CLIP clients, say), so that adding one does not mean editing the
/// simulator's host device: a host's `[[host.workload]]` table whose `kind`
/// no built-in workload has is handed to the system that registered it
/// ([`crate::SystemFactory`] implements the simulator's
/// `SwitchFactory::workload` hook over every registered system).
#[derive(Debug, Clone, Copy)]
pub struct WorkloadRegistration {
    /// Its `kind = "..."` name in a host's `[[host.workload]]` table.
    pub kind: &'static str,
    /// One line on what traffic it generates.
    pub about: &'static str,
    /// Builds one from its table (as written, without `kind`).
    pub build: BuildWorkload,
}

/// Builds a registered workload from its table; errors name the field with
/// [`BuildContext::invalid`].
pub type BuildWorkload =
    fn(&toml::Table, &mut BuildContext<'_>) -> Result<Box<dyn Workload>, HostError>;

/// Whether a run is checked (`inca campaign`) or plain (`inca run`, live
/// nodes, benchmarks).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunMode {
    /// Just the devices.
    Plain,
    /// Devices wired to the system's recorders, and run checks collected.
    Checked,
}

/// A check over a finished run that needs more than one device's view;
/// the trait lives with the campaign loop in `inca_verify`.
pub use inca_verify::{Judgement, RunCheck};

/// One run's builder for a system's devices, and the checks it wants run
/// over the finished simulation.
pub trait SystemRun: Any {
    /// A switch running `program` (one of the system's) on `profile`.
    fn build_switch(
        &mut self,
        program: &str,
        params: &Params,
        profile: Profile,
    ) -> Result<Box<dyn Node>, SystemError>;

    /// A `[[server]]` of `kind` (one of the system's).
    fn build_server(
        &mut self,
        kind: &str,
        setup: &ServerSetup,
    ) -> Result<Box<dyn Node>, SystemError> {
        let _ = setup;
        Err(SystemError::UnknownServerKind {
            kind: kind.to_string(),
            known: String::new(),
        })
    }

    /// The checks to run over the finished simulation (checked mode; empty
    /// when the run built none of the system's devices).
    fn run_checks(&self) -> Vec<&dyn RunCheck> {
        Vec::new()
    }

    /// This run as `Any`, so a test that knows the system can look at its
    /// recorder ([`crate::SystemFactory::run_of`]).
    fn as_any(&self) -> &dyn Any;
}

/// A system: its programs, devices, checks, campaigns, benchmarks and
/// workloads. Implemented by each system crate; registered once, in the
/// binary's list.
pub trait System: Send + Sync {
    /// Its name (`apps`, `redplane`, `tea`).
    fn name(&self) -> &'static str;

    /// The switch programs it offers.
    fn programs(&self) -> Vec<ProgramInfo>;

    /// The device profile `program` is meant for (`inca check` uses it when
    /// no `--profile` is given): `tofino` unless the system says otherwise
    /// (a smart-NIC program, say).
    fn default_profile(&self, program: &str) -> &'static str {
        let _ = program;
        "tofino"
    }

    /// Declares `program` with `params` and places it on `profile` without
    /// building its storage: the resource report of `inca check`.
    fn check(
        &self,
        program: &str,
        params: &Params,
        profile: &Profile,
    ) -> Result<Placement, CheckError>;

    /// Runs the load-time check of `program` (`inca check` after placement;
    /// see [`inca_switch::loadcheck`]): the program exercised on
    /// synthesized packets, every pass checked for double accesses and
    /// dependencies against its data flow. Default: not offered (a skipped
    /// report).
    fn load_check(
        &self,
        program: &str,
        params: &Params,
        profile: &Profile,
        opts: LoadCheckOptions,
    ) -> Result<LoadCheckReport, CheckError> {
        let _ = (params, profile);
        Ok(LoadCheckReport {
            program: program.to_string(),
            seed: opts.seed,
            skipped: Some(format!("system {} offers no load-time check", self.name())),
            ..LoadCheckReport::default()
        })
    }

    /// A builder for one run's devices.
    fn start_run(&self, mode: RunMode) -> Box<dyn SystemRun>;

    /// The `[[server]]` kinds it adds to scenarios.
    fn server_kinds(&self) -> Vec<ServerKindInfo> {
        Vec::new()
    }

    /// Sources crafted against the hash units of `request.program` (one of
    /// its programs), for `tuples` workloads' `craft`.
    fn craft_sources(&self, request: &CraftRequest) -> Result<Vec<SocketAddrV4>, SystemError> {
        Err(SystemError::NoCraftedKeys {
            program: request.program.clone(),
        })
    }

    /// Its built-in campaigns.
    fn campaigns(&self) -> Vec<BuiltinCampaign> {
        Vec::new()
    }

    /// Its built-in experiments, for `inca sweep` descriptors that name
    /// one (`experiment = "..."`).
    fn experiments(&self) -> Vec<crate::experiment::BuiltinExperiment> {
        Vec::new()
    }

    /// Its rows of `inca bench`.
    fn benches(&self) -> Vec<Bench> {
        Vec::new()
    }

    /// Its traffic workloads for scenario hosts (none by default; see
    /// [`WorkloadRegistration`]).
    fn workloads(&self) -> Vec<WorkloadRegistration> {
        Vec::new()
    }
}
