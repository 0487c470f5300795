//! What a campaign found, per seed and over all seeds: written by the
//! loop ([`crate::campaign`]) and by systems' built-in campaigns,
//! serialised by `inca campaign --json` (and deserialisable into the same
//! structs, for tools reading it).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// What one seed's run found.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SeedResult {
    /// The seed.
    pub seed: u64,
    /// Faults injected, with their times.
    pub faults: Vec<(u64, String)>,
    /// Faults started, by kind (link, crash, pause, impair, partition, ..).
    pub kinds: BTreeMap<String, u64>,
    /// Violations found (empty for a passing run).
    pub violations: Vec<String>,
    /// What the checks judged, by name ([`crate::run_check::Judgement`]).
    #[serde(default)]
    pub judged: BTreeMap<String, u64>,
    /// What the run did, for people (built-in campaigns).
    pub notes: Vec<String>,
    /// Simulator events processed.
    pub events: u64,
}

/// The whole campaign.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CampaignSummary {
    /// The scenario file.
    pub scenario: String,
    /// Seeds run.
    pub seeds: u64,
    /// Seeds with at least one violation.
    pub failed: u64,
    /// What the checks judged over all seeds, by name. A campaign whose
    /// counts are all zero judged nothing and fails ([`Self::passed`]).
    #[serde(default)]
    pub judged: BTreeMap<String, u64>,
    /// Faults started over all seeds (their undoing not counted).
    pub faults: u64,
    /// Simulator events over all seeds.
    pub events: u64,
    /// Wall-clock seconds.
    pub wall_seconds: f64,
    /// The failing seeds, in seed order.
    pub failures: Vec<SeedResult>,
    /// Per fault kind: faults, seeds that had one, and failing seeds among
    /// them.
    pub by_kind: BTreeMap<String, KindTally>,
}

impl CampaignSummary {
    /// Whether something was judged (a count above zero).
    pub fn judged_anything(&self) -> bool {
        self.judged.values().any(|&n| n > 0)
    }

    /// Whether the campaign passed: no seed failed, and the checks judged
    /// something.
    pub fn passed(&self) -> bool {
        self.failed == 0 && self.judged_anything()
    }
}

/// One fault kind over a campaign.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct KindTally {
    /// Faults of this kind started.
    pub faults: u64,
    /// Seeds with at least one.
    pub seeds: u64,
    /// Of those, seeds with a violation.
    pub failed: u64,
}
