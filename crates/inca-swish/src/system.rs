//! SwiSh as an inca system ([`inca_system::System`]): its programs in
//! `inca check --list`, `inca check` and scenarios. Each program is built
//! from named parameters by [`build`]; a run builds them as simulator
//! switches.

use std::any::Any;

use inca_apps::params::Params;
use inca_sim::engine::Node;
use inca_switch::loadcheck::{load_check, LoadCheckOptions, LoadCheckReport};
use inca_switch::placement::Placement;
use inca_switch::{Profile, Switch};
use inca_system::{CheckError, ProgramInfo, RunMode, System, SystemError, SystemRun};

use crate::readout::SketchReadout;

/// SwiSh, registered in the binary's list of systems.
#[derive(Debug, Default, Clone, Copy)]
pub struct SwishSystem;

/// One of the programs, built from parameters.
enum Built {
    Readout(Box<SketchReadout>),
}

fn known() -> String {
    SwishSystem
        .programs()
        .iter()
        .map(|p| p.name)
        .collect::<Vec<_>>()
        .join(", ")
}

fn build(program: &str, params: &Params) -> Result<Built, SystemError> {
    match program {
        crate::readout::PROGRAM => Ok(Built::Readout(Box::new(SketchReadout::from_params(
            params,
        )?))),
        other => Err(SystemError::UnknownProgram {
            program: other.to_string(),
            known: known(),
        }),
    }
}

fn check_error(e: SystemError) -> CheckError {
    match e {
        SystemError::UnknownProgram { program, known } => {
            CheckError::UnknownProgram { program, known }
        }
        SystemError::Param(e) => CheckError::Param(e),
        SystemError::Load(e) => CheckError::DoesNotFit(e),
        e => CheckError::Refused(e.to_string()),
    }
}

impl System for SwishSystem {
    fn name(&self) -> &'static str {
        "swish"
    }

    fn programs(&self) -> Vec<ProgramInfo> {
        vec![ProgramInfo {
            name: crate::readout::PROGRAM,
            about: "a rows x columns sketch read once at start, by control-plane register reads (mode=cp) or a packet-generator walk (mode=dp); reports readout_ns (SwiSh experiment 1)",
            params: crate::readout::PARAMS.to_vec(),
        }]
    }

    fn check(
        &self,
        program: &str,
        params: &Params,
        profile: &Profile,
    ) -> Result<Placement, CheckError> {
        let placed = match build(program, params).map_err(check_error)? {
            Built::Readout(mut p) => inca_switch::check(profile, &mut *p),
        };
        placed.map_err(CheckError::DoesNotFit)
    }

    fn load_check(
        &self,
        program: &str,
        params: &Params,
        profile: &Profile,
        opts: LoadCheckOptions,
    ) -> Result<LoadCheckReport, CheckError> {
        let report = match build(program, params).map_err(check_error)? {
            Built::Readout(p) => load_check(profile, *p, opts),
        };
        report.map_err(CheckError::DoesNotFit)
    }

    fn start_run(&self, _mode: RunMode) -> Box<dyn SystemRun> {
        Box::new(SwishRun)
    }
}

/// One run's SwiSh devices.
struct SwishRun;

impl SystemRun for SwishRun {
    fn build_switch(
        &mut self,
        program: &str,
        params: &Params,
        profile: Profile,
    ) -> Result<Box<dyn Node>, SystemError> {
        Ok(match build(program, params)? {
            Built::Readout(p) => Box::new(Switch::new(profile, *p)?),
        })
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
