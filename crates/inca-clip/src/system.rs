//! CLIP as an inca system ([`inca_system::System`]): its switch programs
//! in `inca check --list`, `inca check` (placement and the load-time
//! check) and scenarios, its server kind `clip_server`
//! ([`crate::scenario`]) and its rows of `inca bench` ([`crate::bench`]).

use std::any::Any;
use std::sync::Arc;

use inca_apps::params::Params;
use inca_sim::engine::Node;
use inca_sim::scenario::ServerSetup;
use inca_switch::loadcheck::{load_check, LoadCheckOptions, LoadCheckReport};
use inca_switch::placement::Placement;
use inca_switch::{Profile, Switch};
use inca_system::{
    BuiltinCampaign, CheckError, ProgramInfo, RunMode, ServerKindInfo, System, SystemError,
    SystemRun,
};

use crate::params::{
    build, Built, MFWD_PROGRAM, NULL_PROGRAM, PARAMS, PROGRAMS, SNAT_PROGRAM, TRD_PROGRAM,
};

/// CLIP, registered in the binary's list of systems.
#[derive(Debug, Default, Clone, Copy)]
pub struct ClipSystem;

fn built(program: &str, params: &Params) -> Result<Built, SystemError> {
    match build(program, params) {
        Some(r) => r.map_err(SystemError::Param),
        None => Err(SystemError::UnknownProgram {
            program: program.to_string(),
            known: PROGRAMS.join(", "),
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

impl System for ClipSystem {
    fn name(&self) -> &'static str {
        "clip"
    }

    fn programs(&self) -> Vec<ProgramInfo> {
        vec![
            ProgramInfo {
                name: NULL_PROGRAM,
                about: "CLIP with the NULL app: every packet (flight=1) or none (flight=0, Ideal) visits a server; CMS, pins, two Bloom filters, pin cache, server slots (CLIP §5.2, §5.4)",
                params: PARAMS.to_vec(),
            },
            ProgramInfo {
                name: MFWD_PROGRAM,
                about: "CLIP with MFWD: a flow-keyed forwarding table cached in the switch (1,024 entries), all entries mirrored on servers (CLIP §7.3)",
                params: PARAMS.to_vec(),
            },
            ProgramInfo {
                name: SNAT_PROGRAM,
                about: "CLIP with state-heavy SNAT: nat_table in the switch (1,024), translations allocated by servers from their pool slices (CLIP §7.1)",
                params: PARAMS.to_vec(),
            },
            ProgramInfo {
                name: TRD_PROGRAM,
                about: "CLIP with TRD: TCP retransmission detection per connection (VXLAN inner key), conn_idx (R = 65,536) and max_end/retx_cnt registers, indices allocated by servers (CLIP §7.2)",
                params: PARAMS.to_vec(),
            },
        ]
    }

    fn check(
        &self,
        program: &str,
        params: &Params,
        profile: &Profile,
    ) -> Result<Placement, CheckError> {
        let placed = match built(program, params).map_err(check_error)? {
            Built::Null(mut p) => inca_switch::check(profile, &mut *p),
            Built::Mfwd(mut p) => inca_switch::check(profile, &mut *p),
            Built::Snat(mut p) => inca_switch::check(profile, &mut *p),
            Built::Trd(mut p) => inca_switch::check(profile, &mut *p),
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
        let report = match built(program, params).map_err(check_error)? {
            Built::Null(p) => load_check(profile, *p, opts),
            Built::Mfwd(p) => load_check(profile, *p, opts),
            Built::Snat(p) => load_check(profile, *p, opts),
            Built::Trd(p) => load_check(profile, *p, opts),
        };
        report.map_err(CheckError::DoesNotFit)
    }

    fn campaigns(&self) -> Vec<BuiltinCampaign> {
        vec![BuiltinCampaign {
            name: "clip-membership",
            about: "CLIP membership changes: 2-4 servers, 20-80 flows with idle gaps, 2-6 random transitions (scale-out/in, same group, back to back), Bloom filters shrunk to 64-4,096 bits, a server failing now and then; flow affinity per server-state lifetime, no halt, no ver_mismatch (CLIP §5.6, §6 P4, P6)",
            run_seed: |seed| Ok(crate::campaign::run_seed(seed)),
        }]
    }

    fn benches(&self) -> Vec<inca_system::bench::Bench> {
        crate::bench::benches()
    }

    fn start_run(&self, _mode: RunMode) -> Box<dyn SystemRun> {
        Box::new(ClipRun)
    }

    /// §8.2's E1, E3, E4, E5, E6 and E8, each run handed this system to build its
    /// CLIP devices with, and E7 (a placement).
    fn experiments(&self) -> Vec<inca_system::BuiltinExperiment> {
        use crate::experiments::{
            capacity, flow_selection, forwarding, resources, snat_latency, snat_throughput, trd,
        };
        vec![
            forwarding::experiment(|p, seed| forwarding::run(p, seed, Arc::new(ClipSystem))),
            capacity::experiment(|p, seed| capacity::run(p, seed, Arc::new(ClipSystem))),
            flow_selection::experiment(|p, seed| {
                flow_selection::run(p, seed, Arc::new(ClipSystem))
            }),
            snat_latency::experiment(|p, seed| snat_latency::run(p, seed, Arc::new(ClipSystem))),
            snat_throughput::experiment(|p, seed| {
                snat_throughput::run(p, seed, Arc::new(ClipSystem))
            }),
            resources::experiment(),
            trd::experiment(trd::run),
        ]
    }

    fn server_kinds(&self) -> Vec<ServerKindInfo> {
        vec![ServerKindInfo {
            kind: crate::scenario::KIND,
            about: "a CLIP server: the runtime (§5.3) with the NULL, MFWD or SNAT handler on a multi-core server with a 40 GbE NIC, each request priced per §8.1 (I/O, shim, lookup, allocation)",
        }]
    }
}

/// One run's CLIP devices.
struct ClipRun;

impl SystemRun for ClipRun {
    fn build_switch(
        &mut self,
        program: &str,
        params: &Params,
        profile: Profile,
    ) -> Result<Box<dyn Node>, SystemError> {
        Ok(match built(program, params)? {
            Built::Null(p) => Box::new(Switch::new(profile, *p)?),
            Built::Mfwd(p) => Box::new(Switch::new(profile, *p)?),
            Built::Snat(p) => Box::new(Switch::new(profile, *p)?),
            Built::Trd(p) => Box::new(Switch::new(profile, *p)?),
        })
    }

    fn build_server(
        &mut self,
        kind: &str,
        setup: &ServerSetup,
    ) -> Result<Box<dyn Node>, SystemError> {
        if kind != crate::scenario::KIND {
            return Err(SystemError::UnknownServerKind {
                kind: kind.to_string(),
                known: crate::scenario::KIND.into(),
            });
        }
        crate::scenario::build(setup)
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
