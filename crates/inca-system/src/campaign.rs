//! The campaign runner: one scenario, or a system's built-in campaign,
//! under many seeds, every run checked.
//!
//! A scenario seed builds the scenario afresh (its `[random_faults]` draw a
//! new fault schedule from the seed), runs it to its duration and then asks
//! two things:
//! - each node's report: a counter named `invariant_violations` above zero
//!   is a failed run-time assertion (the devices check their own invariants
//!   while they run and count what fails, with a note saying what);
//! - the simulator's check of the device contract: an output timed before
//!   the call that made it fails the run;
//! - each system's run checks ([`crate::RunCheck`]), which the systems
//!   collected while they built the devices: RedPlane's per-flow
//!   linearizability and snapshot bounds, for example.
//!
//! A built-in campaign ([`crate::BuiltinCampaign`]) runs its own script per
//! seed. Seeds run on `jobs` threads; results are in seed order whatever
//! the threads did, so a summary depends only on the seeds.

use std::path::Path;

use inca_sim::scenario::Loaded;
use inca_verify::campaign::run_campaign;
use inca_verify::run_check::{device_violations, seed_result};

use crate::error::CampaignError;
use crate::registry::{Registry, SystemFactory};
use crate::system::BuiltinCampaign;
pub use inca_verify::campaign_results::{CampaignSummary, KindTally, SeedResult};

/// Runs one seed of `loaded`, building through `registry`, and checks it.
pub fn run_seed(
    registry: &Registry,
    loaded: &Loaded,
    seed: u64,
) -> Result<SeedResult, CampaignError> {
    let factory = SystemFactory::checked(registry.clone());
    let mut built = loaded.build(&factory, Some(seed), None)?;
    built.sim.run_until(built.duration, |_| {});
    let mut judgement = factory.judge(&built.sim);
    let mut violations = device_violations(&built.sim);
    violations.append(&mut judgement.violations);
    judgement.violations = violations;
    Ok(seed_result(seed, &built.sim, judgement))
}

/// What a campaign runs: a scenario file or a built-in campaign.
enum Source {
    Scenario(Box<Loaded>),
    Builtin(BuiltinCampaign),
}

/// A campaign ready to run.
pub struct Campaign {
    registry: Registry,
    source: Source,
    /// The scenario path or built-in name as given.
    given: String,
}

impl Campaign {
    /// `scenario` as a built-in campaign of a registered system if one has
    /// that name, else as a scenario file with `set` overrides (built once
    /// with seed `first` so a scenario that does not build fails here).
    pub fn open(
        registry: Registry,
        scenario: &Path,
        set: &[String],
        first: u64,
    ) -> Result<Campaign, CampaignError> {
        let given = scenario.display().to_string();
        let builtin = registry.campaign(&given);
        let source = match builtin {
            Some(b) => Source::Builtin(b),
            None => {
                if !scenario.exists() {
                    let known: Vec<&str> = registry.campaigns().iter().map(|c| c.name).collect();
                    return Err(CampaignError::Unknown {
                        name: given,
                        known: known.join(", "),
                    });
                }
                let loaded = Loaded::from_file(scenario, set)?;
                drop(loaded.build(&SystemFactory::checked(registry.clone()), Some(first), None)?);
                Source::Scenario(Box::new(loaded))
            }
        };
        Ok(Campaign {
            registry,
            source,
            given,
        })
    }

    /// The scenario's name, or the built-in campaign's.
    pub fn name(&self) -> String {
        match &self.source {
            Source::Scenario(l) => l.scenario.name.clone(),
            Source::Builtin(b) => b.name.to_string(),
        }
    }

    /// Whether this is a built-in campaign (reproduced with `inca campaign
    /// NAME --first-seed N --seeds 1` rather than `inca run --seed N`).
    pub fn is_builtin(&self) -> bool {
        matches!(self.source, Source::Builtin(_))
    }

    /// Runs one seed.
    pub fn run_seed(&self, seed: u64) -> Result<SeedResult, CampaignError> {
        match &self.source {
            Source::Scenario(l) => run_seed(&self.registry, l, seed),
            Source::Builtin(b) => (b.run_seed)(seed),
        }
    }

    /// Runs seeds `first..first + count` on `jobs` threads; `on_seed` hears
    /// each result as it comes (in completion order). The first seed that
    /// cannot run stops the campaign with its error.
    pub fn run(
        &self,
        first: u64,
        count: u64,
        jobs: usize,
        on_seed: &(dyn Fn(&SeedResult) + Sync),
    ) -> Result<CampaignSummary, CampaignError> {
        run_campaign(
            &self.given,
            first,
            count,
            jobs,
            &|seed| self.run_seed(seed),
            on_seed,
        )
        .map_err(|f| match f.error {
            e @ CampaignError::Seed { .. } => e,
            other => CampaignError::Seed {
                seed: f.seed,
                message: other.to_string(),
            },
        })
    }
}
