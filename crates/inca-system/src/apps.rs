//! The plain apps of `inca-apps` (NAT, firewall, sketches, ...) served as a
//! system: each app alone on a switch, no run checks; and the software NAT
//! baseline as a `[[server]]` kind (`sw_nat`, [`crate::software_nat`]).

use std::any::Any;

use inca_apps::catalog::{check_app, load_check_app, with_app, AppVisitor, CatalogError, APPS};
use inca_apps::params::Params;
use inca_sim::engine::Node;
use inca_switch::loadcheck::{LoadCheckOptions, LoadCheckReport};
use inca_switch::placement::Placement;
use inca_switch::{Profile, Program, Switch};

use inca_sim::scenario::ServerSetup;

use crate::error::{CheckError, SystemError};
use crate::system::{ProgramInfo, RunMode, ServerKindInfo, System, SystemRun};

/// The `inca-apps` catalog as a system.
#[derive(Debug, Clone, Copy, Default)]
pub struct AppsSystem;

impl System for AppsSystem {
    fn name(&self) -> &'static str {
        "apps"
    }

    fn programs(&self) -> Vec<ProgramInfo> {
        APPS.iter()
            .map(|&(name, about, params)| ProgramInfo {
                name,
                about,
                params: params.to_vec(),
            })
            .collect()
    }

    fn check(
        &self,
        program: &str,
        params: &Params,
        profile: &Profile,
    ) -> Result<Placement, CheckError> {
        check_app(program, params, profile).map_err(|e| match innermost(e) {
            CatalogError::Unknown { name, known } => CheckError::UnknownProgram {
                program: name,
                known,
            },
            CatalogError::Param(e) => CheckError::Param(e),
            CatalogError::Load(e) => CheckError::DoesNotFit(e),
            e => CheckError::Refused(e.to_string()),
        })
    }

    fn load_check(
        &self,
        program: &str,
        params: &Params,
        profile: &Profile,
        opts: LoadCheckOptions,
    ) -> Result<LoadCheckReport, CheckError> {
        load_check_app(program, params, profile, opts).map_err(|e| match innermost(e) {
            CatalogError::Unknown { name, known } => CheckError::UnknownProgram {
                program: name,
                known,
            },
            CatalogError::Param(e) => CheckError::Param(e),
            CatalogError::Load(e) => CheckError::DoesNotFit(e),
            e => CheckError::Refused(e.to_string()),
        })
    }

    fn start_run(&self, _mode: RunMode) -> Box<dyn SystemRun> {
        Box::new(AppsRun)
    }

    fn server_kinds(&self) -> Vec<ServerKindInfo> {
        vec![ServerKindInfo {
            kind: "sw_nat",
            about: "software NAT on a multi-core server with a NIC (RSS, per-core costs, PCIe DMA): the papers' server baseline",
        }]
    }
}

/// A run of the plain apps: nothing to remember between devices.
struct AppsRun;

impl SystemRun for AppsRun {
    fn build_switch(
        &mut self,
        program: &str,
        params: &Params,
        profile: Profile,
    ) -> Result<Box<dyn Node>, SystemError> {
        struct Build(Profile);
        impl AppVisitor for Build {
            type Output = Result<Box<dyn Node>, SystemError>;
            fn visit<P: Program>(self, program: P) -> Self::Output {
                Ok(Box::new(Switch::new(self.0, program)?))
            }
        }
        with_app(program, params, Build(profile)).map_err(|e| match innermost(e) {
            CatalogError::Unknown { name, known } => SystemError::UnknownProgram {
                program: name,
                known,
            },
            CatalogError::Param(e) => SystemError::Param(e),
            CatalogError::Load(e) => SystemError::Load(e),
            e => SystemError::Refused(e.to_string()),
        })?
    }

    fn build_server(
        &mut self,
        kind: &str,
        setup: &ServerSetup,
    ) -> Result<Box<dyn Node>, SystemError> {
        if kind != "sw_nat" {
            return Err(SystemError::UnknownServerKind {
                kind: kind.to_string(),
                known: "sw_nat".into(),
            });
        }
        Ok(Box::new(crate::software_nat::build(setup)?))
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// The error of a composite's app whose parameter is wrong or that does not
/// fit, unwrapped so that `inca check --largest` can tell the two apart
/// (the load error already names the app: its objects are `app/object`);
/// anything else as it is, with the app named.
fn innermost(e: CatalogError) -> CatalogError {
    match e {
        CatalogError::InApp { source, .. }
            if matches!(*source, CatalogError::Param(_) | CatalogError::Load(_)) =>
        {
            innermost(*source)
        }
        e => e,
    }
}
