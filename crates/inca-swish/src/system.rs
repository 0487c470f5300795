//! SwiSh as an inca system ([`inca_system::System`]): its programs in
//! `inca check --list`, `inca check` and scenarios, and its built-in
//! campaigns. Each program is built from named parameters by [`build`]; a
//! run builds them as simulator switches. The campaigns are the protocols'
//! own seeded runs ([`crate::sro::checks::run_seed`],
//! [`crate::sdw::campaign::run_seed`], `run_recovery_seed` and `run_join_seed`,
//! [`crate::ewo::campaign::run_seed`]), each judging its §6 properties.

use std::any::Any;

use inca_apps::params::Params;
use inca_sim::engine::Node;
use inca_sim::scenario::ServerSetup;
use inca_switch::loadcheck::{load_check, LoadCheckOptions, LoadCheckReport};
use inca_switch::placement::Placement;
use inca_switch::{Profile, Switch};
use inca_system::{
    BuiltinCampaign, CampaignError, CheckError, ProgramInfo, RunMode, ServerKindInfo, System,
    SystemError, SystemRun, WorkloadRegistration,
};
use inca_verify::SeedResult;

use crate::ddos::local::DdosLocal;
use crate::ewo::program::EwoProgram;
use crate::readout::SketchReadout;
use crate::sdw::program::SdwProgram;
use crate::sro::program::SroNat;

/// The SRO NAT program's name.
pub const SRO_PROGRAM: &str = "swish_sro_nat";
/// The SDW replica program's name.
pub const SDW_PROGRAM: &str = "swish_sdw";
/// The EWO replica program's name.
pub const EWO_PROGRAM: &str = "swish_ewo";
/// The §7 DDoS detector on an SDW replica (`swish_sdw` with `app=ddos`).
pub const SDW_DDOS_PROGRAM: &str = "swish_sdw_ddos";
/// A DDoS baseline switch (local sketch, pull ring or push digests).
pub const DDOS_LOCAL_PROGRAM: &str = "swish_ddos_local";

/// SwiSh, registered in the binary's list of systems.
#[derive(Debug, Default, Clone, Copy)]
pub struct SwishSystem;

/// One of the programs, built from parameters.
enum Built {
    Readout(Box<SketchReadout>),
    Sro(Box<SroNat>),
    Sdw(Box<SdwProgram>),
    Ewo(Box<EwoProgram>),
    Local(Box<DdosLocal>),
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
        SRO_PROGRAM => Ok(Built::Sro(Box::new(SroNat::from_params(params)?))),
        SDW_PROGRAM => Ok(Built::Sdw(Box::new(SdwProgram::from_params(params)?))),
        SDW_DDOS_PROGRAM => {
            if params.text("app").is_some_and(|a| a != "ddos") {
                return Err(SystemError::Param(inca_apps::params::ParamError::Value {
                    name: "app".into(),
                    reason: "swish_sdw_ddos runs the DDoS detector".into(),
                }));
            }
            let mut p = params.clone();
            p.set("app", "ddos");
            if params.text("cols").is_none() {
                p.set("cols", crate::detector::COLS);
            }
            Ok(Built::Sdw(Box::new(SdwProgram::from_params(&p)?)))
        }
        DDOS_LOCAL_PROGRAM => Ok(Built::Local(Box::new(DdosLocal::from_params(params)?))),
        EWO_PROGRAM => Ok(Built::Ewo(Box::new(crate::ewo::params::from_params(
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
        vec![
            ProgramInfo {
                name: SRO_PROGRAM,
                about: "SwiSh SRO replica with the NAT: pending check and read-from-tail tunnel in the data plane, chain replication of new mappings through the switch CPUs (SwiSh §5.2)",
                params: SroNat::PARAMS.to_vec(),
            },
            ProgramInfo {
                name: SDW_PROGRAM,
                about: "SwiSh SDW replica: a rows x columns collection updated in windows, DATA/ACK/READY exchange by generator streams, ready phase, ACK-check retransmission (SwiSh §5.5)",
                params: SdwProgram::PARAMS.to_vec(),
            },
            ProgramInfo {
                name: SDW_DDOS_PROGRAM,
                about: "SwiSh SDW replica running the super-spreader / DDoS detector: 3 x 32K bitsets (Or), 1/16 pair sampling, every packet queries R_r and is dropped at popcount >= 28 in all rows (SwiSh §7)",
                params: SdwProgram::PARAMS.to_vec(),
            },
            ProgramInfo {
                name: DDOS_LOCAL_PROGRAM,
                about: "DDoS baseline switch: local 3 x 32K sketch, 64K-bit already-reported array, pull ring of 65,536 {src, est} or push digests, exact-match source block table (SwiSh §7)",
                params: DdosLocal::PARAMS.to_vec(),
            },
            ProgramInfo {
                name: EWO_PROGRAM,
                about: "SwiSh EWO replica: local writes, mirror/multicast UPDATEs, CRDT merges and anti-entropy (SwiSh §5.3)",
                params: crate::ewo::params::PARAMS.to_vec(),
            },
            ProgramInfo {
                name: crate::readout::PROGRAM,
                about: "a rows x columns sketch read once at start, by control-plane register reads (mode=cp) or a packet-generator walk (mode=dp); reports readout_ns (SwiSh experiment 1)",
                params: crate::readout::PARAMS.to_vec(),
            },
        ]
    }

    fn experiments(&self) -> Vec<inca_system::BuiltinExperiment> {
        crate::experiments::all()
    }

    fn benches(&self) -> Vec<inca_system::bench::Bench> {
        crate::bench::benches()
    }

    fn server_kinds(&self) -> Vec<ServerKindInfo> {
        vec![ServerKindInfo {
            kind: crate::sdw::controller::KIND,
            about: "the SwiSh controller: a control session to every SDW replica's CPU (§4.5 RPC); reads each replica's window, then INJECTs START into all of them",
        }]
    }

    fn workloads(&self) -> Vec<WorkloadRegistration> {
        vec![WorkloadRegistration {
            kind: crate::sdw::workload::KIND,
            about: "SDW app client: updates and/or queries of one key at one replica (rid), recording accepted/rejected updates, windows and what the queries read",
            build: crate::sdw::workload::SdwApp::build,
        }]
    }

    fn campaigns(&self) -> Vec<BuiltinCampaign> {
        vec![
            BuiltinCampaign {
                name: "swish-sro",
                about: "SwiSh SRO NAT on a 2-4 replica chain: loss, duplication, reordering, head/middle/tail fail-stop and a join at the tail; S1 (linearizable per key) to S6 judged from what the sinks saw and the switches' tables",
                run_seed: |seed| seed_result(seed, crate::sro::checks::run_seed(seed)),
            },
            BuiltinCampaign {
                name: "swish-sdw",
                about: "SwiSh SDW on local-2 or symmetric-4: loss, duplication, reordering, both duplicate filters, ready phase on; D1-D8 judged from queries, window samples and advance logs",
                run_seed: |seed| seed_result(seed, crate::sdw::campaign::run_seed(seed)),
            },
            BuiltinCampaign {
                name: "swish-sdw-recovery",
                about: "SwiSh SDW on symmetric-4 with 1-3 replicas failing and the controller's recovery (SwiSh §5.6); D9 and D1-D3 afterwards",
                run_seed: |seed| seed_result(seed, crate::sdw::campaign::run_recovery_seed(seed)),
            },
            BuiltinCampaign {
                name: "swish-sdw-join",
                about: "SwiSh SDW on symmetric-4: 1-3 replicas fail, the controller recovers the rest, then failed replicas restart empty and join again one by one (SwiSh §5.6 Join); D1-D3, D6, D8, D9 and not_ready until the joiner's first window completes",
                run_seed: |seed| seed_result(seed, crate::sdw::campaign::run_join_seed(seed)),
            },
            BuiltinCampaign {
                name: "swish-ewo",
                about: "SwiSh EWO on local-2 or symmetric-4: loss, duplication, jitter, per-write or batched propagation, a fail-stop or a join; E2-E4 judged from host answers and registers read back",
                run_seed: |seed| seed_result(seed, crate::ewo::campaign::run_seed(seed)),
            },
        ]
    }

    fn check(
        &self,
        program: &str,
        params: &Params,
        profile: &Profile,
    ) -> Result<Placement, CheckError> {
        let placed = match build(program, params).map_err(check_error)? {
            Built::Readout(mut p) => inca_switch::check(profile, &mut *p),
            Built::Sro(mut p) => inca_switch::check(profile, &mut *p),
            Built::Sdw(mut p) => inca_switch::check(profile, &mut *p),
            Built::Ewo(mut p) => inca_switch::check(profile, &mut *p),
            Built::Local(mut p) => inca_switch::check(profile, &mut *p),
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
            Built::Sro(p) => load_check(profile, *p, opts),
            Built::Sdw(p) => load_check(profile, *p, opts),
            Built::Ewo(p) => load_check(profile, *p, opts),
            Built::Local(p) => load_check(profile, *p, opts),
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
            Built::Sro(p) => Box::new(Switch::new(profile, *p)?),
            Built::Sdw(p) => Box::new(Switch::new(profile, *p)?),
            Built::Ewo(p) => Box::new(Switch::new(profile, *p)?),
            Built::Local(p) => Box::new(Switch::new(profile, *p)?),
        })
    }

    fn build_server(
        &mut self,
        kind: &str,
        setup: &ServerSetup,
    ) -> Result<Box<dyn Node>, SystemError> {
        use crate::sdw::controller::{ControllerConfig, SdwController, KIND};
        if kind != KIND {
            return Err(SystemError::UnknownServerKind {
                kind: kind.to_string(),
                known: KIND.into(),
            });
        }
        let cfg = ControllerConfig::from_table(&setup.params).map_err(SystemError::Refused)?;
        Ok(Box::new(SdwController::new(cfg)))
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// A protocol's seed result as a campaign's: a run that could not be built
/// is the seed's error.
fn seed_result(seed: u64, r: Result<SeedResult, String>) -> Result<SeedResult, CampaignError> {
    r.map_err(|message| CampaignError::Seed { seed, message })
}
