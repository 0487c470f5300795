//! What the TEA program adds to its switch's node report
//! ([`inca_switch::Program::report`]): data-plane counters (SRAM and cache
//! hits, DRAM lookups, drops by reason, failovers), the slow path's punt
//! queue, and DRAM lookups per replica role over time, which shows the
//! active replica through overload and failures (E5); the memory the
//! switch holds ([`Gauges`]: table, stash, cache, queues — each bounded,
//! issue 8); and, in checked mode, the lookup-correctness verdict.

/// Sizes at report time and high-water marks of the bounded structures.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Gauges {
    /// Entries in the table (DRAM cells and stash).
    pub table_entries: u64,
    /// Entries in the stash (bounded by `stash_cap`).
    pub stash_entries: u64,
    /// Entries in the cache (bounded by `cache_cap`).
    pub cache_entries: u64,
    /// Most operations ever queued at once (bounded by `MAX_INTENTS`).
    pub intents_max: u64,
    /// Most NF punts ever waiting at once (bounded by `MAX_PUNTS_WAITING`).
    pub punts_waiting_max: u64,
    /// Displacement chains skipped as hopeless (a bucket-collision attack).
    pub hopeless_chains: u64,
    /// Checked mode's verdict; `None` when not checked.
    pub check: Option<CheckVerdict>,
}

use inca_switch::{Nanos, ProgramReport, ProgramSeries};

use super::cp::CpStats;
use super::dataplane::DpStats;
use super::nf_api::DropReason;
use super::observer::CheckVerdict;

/// Width of a time bin of the per-replica series.
pub const SERIES_BIN: Nanos = 100_000;
/// Most bins kept (6.5 s at 100 µs) [our choice]; later lookups are
/// counted in the totals only.
pub const SERIES_MAX_BINS: usize = 1 << 16;

/// DRAM lookups per time bin, per replica role (0 primary, 1 secondary).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReplicaSeries {
    bins: [Vec<u64>; 2],
}

impl ReplicaSeries {
    /// Counts one lookup sent to `replica` at `now`.
    pub fn record(&mut self, now: Nanos, replica: u8) {
        let bin = (now / SERIES_BIN) as usize;
        if bin >= SERIES_MAX_BINS {
            return;
        }
        let v = &mut self.bins[usize::from(replica & 1)];
        if v.len() <= bin {
            v.resize(bin + 1, 0);
        }
        v[bin] += 1;
    }

    /// The lookups per bin sent to `replica`.
    pub fn values(&self, replica: u8) -> &[u64] {
        &self.bins[usize::from(replica & 1)]
    }
}

const REASONS: [(DropReason, &str); 11] = [
    (DropReason::NoServer, "no_server"),
    (DropReason::FcReject, "fc_reject"),
    (DropReason::Nf, "nf"),
    (DropReason::StaleQp, "stale_qp"),
    (DropReason::DupResponse, "dup_response"),
    (DropReason::Malformed, "malformed"),
    (DropReason::Ack, "ack"),
    (DropReason::Nak, "nak"),
    (DropReason::ReinjectMiss, "reinject_miss"),
    (DropReason::NoRoute, "no_route"),
    (DropReason::LateResponse, "late_response"),
];

/// The report: counters prefixed `tea_`, series `tea_lookups_primary` and
/// `tea_lookups_secondary`.
pub fn build(dp: &DpStats, cp: &CpStats, series: &ReplicaSeries, g: &Gauges) -> ProgramReport {
    let mut counters = vec![
        ("tea_sram_hits".to_string(), dp.sram_hits),
        ("tea_cache_hits".to_string(), dp.cache_hits),
        (
            "tea_stash_hits".to_string(),
            dp.sram_hits - dp.cache_hits.min(dp.sram_hits),
        ),
        ("tea_dram_lookups".to_string(), dp.dram_lookups),
        ("tea_responses".to_string(), dp.responses),
        ("tea_remote_misses".to_string(), dp.remote_misses),
        ("tea_late_responses".to_string(), dp.late_responses),
        ("tea_redone_lookups".to_string(), dp.redone),
        ("tea_failovers".to_string(), dp.failovers),
        ("tea_hot_digests".to_string(), dp.hot_digests),
        ("tea_cache_changes".to_string(), cp.cache_changes),
        ("tea_ops_refused".to_string(), cp.ops_refused),
        ("tea_punts_queued".to_string(), cp.punts_queued),
        ("tea_punts_dropped".to_string(), cp.punts_dropped),
        ("tea_epochs".to_string(), cp.epochs),
        ("tea_epoch_overruns".to_string(), cp.epoch_overruns),
        ("tea_hit_reads".to_string(), cp.hit_reads),
        ("tea_table_entries".to_string(), g.table_entries),
        ("tea_stash_entries".to_string(), g.stash_entries),
        ("tea_cache_entries".to_string(), g.cache_entries),
        ("tea_intents_max".to_string(), g.intents_max),
        ("tea_punts_waiting_max".to_string(), g.punts_waiting_max),
        ("tea_hopeless_chains".to_string(), g.hopeless_chains),
    ];
    if let Some(v) = g.check {
        counters.push(("tea_check_lookups".to_string(), v.lookups));
        counters.push(("tea_check_violations".to_string(), v.violations));
        counters.push(("tea_check_dropped".to_string(), v.dropped));
    }
    for (r, name) in REASONS {
        counters.push((format!("tea_drops_{name}"), dp.drops[r as usize]));
    }
    let s = |r: u8| ProgramSeries {
        bin: SERIES_BIN,
        values: series.values(r).to_vec(),
    };
    ProgramReport {
        counters,
        series: vec![
            ("tea_lookups_primary".to_string(), s(0)),
            ("tea_lookups_secondary".to_string(), s(1)),
        ],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn series_bins_by_time_and_role_within_the_bound() {
        let mut s = ReplicaSeries::default();
        s.record(50_000, 0);
        s.record(250_000, 1);
        s.record(260_000, 1);
        s.record(SERIES_BIN * SERIES_MAX_BINS as u64, 0);
        assert_eq!(s.values(0), &[1]);
        assert_eq!(s.values(1), &[0, 0, 2]);
        let r = build(
            &DpStats::default(),
            &CpStats::default(),
            &s,
            &Gauges::default(),
        );
        assert_eq!(r.series[1].1.values, vec![0, 0, 2]);
        assert!(r.counters.iter().any(|(k, _)| k == "tea_drops_no_server"));
    }
}
