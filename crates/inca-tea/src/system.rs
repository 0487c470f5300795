//! TEA as an inca system ([`inca_system::System`]): its switch programs
//! ([`crate::catalog`]), its DRAM server, keys crafted against its hash
//! units ([`crate::attack`]) and its built-in lookup campaigns
//! ([`crate::campaign`]).

use std::any::Any;
use std::net::SocketAddrV4;

use inca_apps::params::Params;
use inca_sim::engine::Node;
use inca_sim::nodes::attack::CraftRequest;
use inca_sim::scenario::ServerSetup;
use inca_switch::placement::Placement;
use inca_switch::Profile;
use inca_system::campaign::SeedResult;
use inca_system::server::params_with_addresses;
use inca_system::{
    BuiltinCampaign, CampaignError, CheckError, ProgramInfo, RunMode, ServerKindInfo, System,
    SystemError, SystemRun,
};

use crate::campaign::{lookup_campaign_faulted, CampaignConfig};

/// TEA, registered in the binary's list of systems.
#[derive(Debug, Clone, Copy, Default)]
pub struct TeaSystem;

impl System for TeaSystem {
    fn name(&self) -> &'static str {
        "tea"
    }

    fn programs(&self) -> Vec<ProgramInfo> {
        crate::catalog::PROGRAMS
            .iter()
            .map(|&(name, about)| ProgramInfo {
                name,
                about,
                params: crate::catalog::PARAMS.to_vec(),
            })
            .collect()
    }

    fn check(
        &self,
        program: &str,
        params: &Params,
        profile: &Profile,
    ) -> Result<Placement, CheckError> {
        crate::catalog::check(program, params, profile).map_err(CheckError::Refused)
    }

    fn load_check(
        &self,
        program: &str,
        params: &Params,
        profile: &Profile,
        opts: inca_switch::loadcheck::LoadCheckOptions,
    ) -> Result<inca_switch::loadcheck::LoadCheckReport, CheckError> {
        crate::catalog::load_check(program, params, profile, opts).map_err(CheckError::Refused)
    }

    fn start_run(&self, _mode: RunMode) -> Box<dyn SystemRun> {
        // Checked TEA runs judge themselves: the program's `check=1`
        // parameter compares every lookup with the operation history.
        Box::new(TeaRun)
    }

    fn server_kinds(&self) -> Vec<ServerKindInfo> {
        vec![ServerKindInfo {
            kind: "tea_dram",
            about: "TEA DRAM server: the table's buckets, read over RoCEv2",
        }]
    }

    fn craft_sources(&self, request: &CraftRequest) -> Result<Vec<SocketAddrV4>, SystemError> {
        crate::attack::craft_sources(request).map_err(SystemError::Refused)
    }

    fn campaigns(&self) -> Vec<BuiltinCampaign> {
        vec![
            BuiltinCampaign {
                name: "tea-lookup",
                about: "TEA switch + 2 DRAM servers (R = 2): 300 random inserts/updates/deletes through the control plane with displacement, stash overflow and cache changes, a server crash and recovery, and a continuous lookup stream judged against a reference map",
                run_seed: |seed| lookup_seed(seed, false),
            },
            BuiltinCampaign {
                name: "tea-lookup-faults",
                about: "tea-lookup with random faults drawn from the seed on top: link flaps, impairment windows (loss, duplication, reordering, jitter), partitions and pauses of the DRAM servers",
                run_seed: |seed| lookup_seed(seed, true),
            },
            BuiltinCampaign {
                name: "tea-silence",
                about: "tea-lookup (3,000 operations) with server 1's link silently losing every frame for 205 ms — longer than the agent's retry budget, shorter than three heartbeats — before server 0 crashes: a write that gives up must mark its server down and have it reloaded",
                run_seed: silence_seed,
            },
        ]
    }

    fn benches(&self) -> Vec<inca_system::bench::Bench> {
        crate::bench::benches()
    }
}

/// One seed of `tea-lookup` (`tea-lookup-faults` with `random_faults`).
fn lookup_seed(seed: u64, random_faults: bool) -> Result<SeedResult, CampaignError> {
    seed_result(CampaignConfig {
        random_faults,
        ..CampaignConfig::new(seed, 300)
    })
}

/// One seed of `tea-silence`: besides the lookups, every write that gave
/// up must have been followed by a reload of its server (one recovery for
/// it, one for server 0's crash).
fn silence_seed(seed: u64) -> Result<SeedResult, CampaignError> {
    let mut r = seed_result(CampaignConfig {
        silence: Some(205_000_000),
        ..CampaignConfig::new(seed, 3_000)
    })?;
    let give_ups = r.judged.get("tea: writes given up").copied().unwrap_or(0);
    let recoveries = r.judged.get("tea: server recoveries").copied().unwrap_or(0);
    if r.violations.is_empty() && give_ups > 0 && recoveries < 2 {
        r.violations.push(format!(
            "seed {seed}: {give_ups} writes gave up but the silent server was never reloaded"
        ));
    }
    Ok(r)
}

fn seed_result(config: CampaignConfig) -> Result<SeedResult, CampaignError> {
    let seed = config.seed;
    let (result, injected) = lookup_campaign_faulted(&config);
    let mut judged = std::collections::BTreeMap::new();
    let (violations, notes) = match result {
        Ok(stats) => (
            {
                judged.insert("tea: lookups checked".to_string(), stats.lookups);
                judged.insert("tea: table operations".to_string(), stats.commits);
                if config.silence.is_some() {
                    judged.insert("tea: writes given up".to_string(), stats.write_give_ups);
                    judged.insert("tea: server recoveries".to_string(), stats.recoveries);
                }
                Vec::new()
            },
            vec![format!(
                "{} lookups ({} SRAM, {} DRAM, {} misses), {} operations, {} displacements, {} server recoveries",
                stats.lookups,
                stats.sram,
                stats.dram,
                stats.misses,
                stats.commits,
                stats.displacements,
                stats.recoveries
            )],
        ),
        Err(v) => (vec![v.to_string()], Vec::new()),
    };
    Ok(SeedResult {
        seed,
        faults: injected.log,
        kinds: injected
            .tally
            .iter()
            .map(|(k, n)| (k.to_string(), *n))
            .collect(),
        violations,
        judged,
        notes,
        events: 0,
    })
}

/// A run of TEA devices: nothing to remember between them.
struct TeaRun;

impl SystemRun for TeaRun {
    fn build_switch(
        &mut self,
        program: &str,
        params: &Params,
        profile: Profile,
    ) -> Result<Box<dyn Node>, SystemError> {
        crate::catalog::build(program, params, &profile).map_err(SystemError::Refused)
    }

    fn build_server(
        &mut self,
        kind: &str,
        setup: &ServerSetup,
    ) -> Result<Box<dyn Node>, SystemError> {
        if kind != "tea_dram" {
            return Err(SystemError::UnknownServerKind {
                kind: kind.to_string(),
                known: "tea_dram".into(),
            });
        }
        let table = params_with_addresses(setup, "controller_mac");
        let config: crate::server::DramServerConfig = toml::Value::Table(table)
            .try_into()
            .map_err(|e| SystemError::Refused(format!("params: {e}")))?;
        let server = crate::server::DramServer::new(config)
            .map_err(|e| SystemError::Refused(e.to_string()))?;
        Ok(Box::new(server))
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
