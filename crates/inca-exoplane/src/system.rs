//! ExoPlane as an inca system ([`inca_system::System`]): its two programs,
//! `exoplane_switch` (the rack switch, §5.2) and `exoplane_device` (a smart
//! NIC, §5.3), sized from parameters ([`crate::programs`]), so that
//! `inca check --list` names them, `inca check` places them, and scenario
//! switches and `[[smartnic]]`s can run them.
//!
//! Its `inca bench` row is [`crate::bench`]. With `hub = 1` the switch
//! program runs the hub and with `pdev = N` a device program a daemon
//! (over the scenario's `[[session]]`s); in checked mode (`inca campaign`)
//! the run is checked by [`crate::checks`].

use std::any::Any;

use inca_apps::params::Params;
use inca_sim::engine::Node;
use inca_switch::loadcheck::{load_check, LoadCheckOptions, LoadCheckReport};
use inca_switch::placement::Placement;
use inca_switch::{Profile, Switch};
use inca_system::{CheckError, ProgramInfo, RunMode, System, SystemError, SystemRun};

use crate::programs::{device_from_params, switch_from_params, DEVICE_PARAMS, SWITCH_PARAMS};

/// The switch program's name.
pub const SWITCH_PROGRAM: &str = "exoplane_switch";
/// The device program's name.
pub const DEVICE_PROGRAM: &str = "exoplane_device";

/// ExoPlane, registered in the binary's list of systems.
#[derive(Debug, Default, Clone, Copy)]
pub struct ExoPlaneSystem;

/// One of the two programs, built from parameters.
enum Built {
    Switch(Box<crate::switch::ExoSwitch>),
    Device(Box<crate::device::ExoDevice>),
}

fn build(program: &str, params: &Params) -> Result<Built, SystemError> {
    match program {
        SWITCH_PROGRAM => Ok(Built::Switch(Box::new(switch_from_params(params)?))),
        DEVICE_PROGRAM => Ok(Built::Device(Box::new(device_from_params(params)?))),
        other => Err(SystemError::UnknownProgram {
            program: other.to_string(),
            known: format!("{SWITCH_PROGRAM}, {DEVICE_PROGRAM}"),
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

impl System for ExoPlaneSystem {
    fn name(&self) -> &'static str {
        "exoplane"
    }

    fn programs(&self) -> Vec<ProgramInfo> {
        vec![
            ProgramInfo {
                name: SWITCH_PROGRAM,
                about: "ExoPlane rack switch: classifier, per-app flow managers, shard map to smart NICs, port-down failover (ExoPlane)",
                params: SWITCH_PARAMS.to_vec(),
            },
            ProgramInfo {
                name: DEVICE_PROGRAM,
                about: "ExoPlane smart NIC: the apps' long tail with count-min popularity and MISS punts (ExoPlane)",
                params: DEVICE_PARAMS.to_vec(),
            },
        ]
    }

    fn default_profile(&self, program: &str) -> &'static str {
        if program == DEVICE_PROGRAM {
            "smartnic"
        } else {
            "tofino"
        }
    }

    fn check(
        &self,
        program: &str,
        params: &Params,
        profile: &Profile,
    ) -> Result<Placement, CheckError> {
        let placed = match build(program, params).map_err(check_error)? {
            Built::Switch(mut p) => inca_switch::check(profile, &mut *p),
            Built::Device(mut p) => inca_switch::check(profile, &mut *p),
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
            Built::Switch(p) => load_check(profile, *p, opts),
            Built::Device(p) => load_check(profile, *p, opts),
        };
        report.map_err(CheckError::DoesNotFit)
    }

    fn start_run(&self, mode: RunMode) -> Box<dyn SystemRun> {
        Box::new(ExoPlaneRun {
            checks: (mode == RunMode::Checked).then_some(crate::checks::ExoChecks),
        })
    }

    fn benches(&self) -> Vec<inca_system::bench::Bench> {
        crate::bench::benches()
    }
}

/// One run's ExoPlane devices, and in checked mode the §6 checks over it.
struct ExoPlaneRun {
    checks: Option<crate::checks::ExoChecks>,
}

impl SystemRun for ExoPlaneRun {
    fn build_switch(
        &mut self,
        program: &str,
        params: &Params,
        profile: Profile,
    ) -> Result<Box<dyn Node>, SystemError> {
        Ok(match build(program, params)? {
            Built::Switch(p) => Box::new(Switch::new(profile, *p)?),
            Built::Device(p) => Box::new(Switch::new(profile, *p)?),
        })
    }

    fn run_checks(&self) -> Vec<&dyn inca_system::RunCheck> {
        match &self.checks {
            Some(c) => vec![c as &dyn inca_system::RunCheck],
            None => Vec::new(),
        }
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checks_and_builds_both_programs_and_names_bad_input() {
        let sys = ExoPlaneSystem;
        let none = Params::default();
        let placed = sys
            .check(SWITCH_PROGRAM, &none, &Profile::tofino())
            .unwrap();
        assert!(placed.objects.iter().any(|o| o.name == "exo/fm_nat"));
        sys.check(DEVICE_PROGRAM, &none, &Profile::smartnic())
            .unwrap();
        let big = Params::parse(["fm=100M"]).unwrap();
        match sys.check(SWITCH_PROGRAM, &big, &Profile::tofino()) {
            Err(CheckError::DoesNotFit(e)) => assert!(e.to_string().contains("fm_"), "{e}"),
            other => panic!("expected DoesNotFit, got {other:?}"),
        }
        let bad = Params::parse(["apps=nat,xyz"]).unwrap();
        assert!(matches!(
            sys.check(SWITCH_PROGRAM, &bad, &Profile::tofino()),
            Err(CheckError::Param(_))
        ));
        assert!(matches!(
            sys.check("exoplane_nothing", &none, &Profile::tofino()),
            Err(CheckError::UnknownProgram { .. })
        ));
        let mut run = sys.start_run(RunMode::Plain);
        let sw = run
            .build_switch(SWITCH_PROGRAM, &none, Profile::tofino())
            .unwrap();
        assert_eq!(sw.kind(), "switch");
        run.build_switch(DEVICE_PROGRAM, &none, Profile::smartnic())
            .unwrap();
    }
}
