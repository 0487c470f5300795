//! Where the MEDIUM apps' packets were served over time: flow-manager hits
//! (served by the switch) and misses (sent to a device) per time bin. The
//! run's counters sum over the whole run, setup and promotion included;
//! the throughput experiments (specs/exoplane.md §8 E4, E5) read the tail
//! fraction `misses / (hits + misses)` over a steady window from these.

use inca_switch::device::Nanos;
use inca_switch::ProgramSeries;

/// Width of a bin [our choice: 10 ms, a tenth of the scenarios' usual
/// 100 ms bins, so any window they measure is whole bins].
pub const SERVED_BIN: Nanos = 10_000_000;

/// Bound on the bins kept (about 11 minutes); later packets count in the
/// last bin.
pub const MAX_SERVED_BINS: usize = 1 << 16;

/// Flow-manager hits and misses per [`SERVED_BIN`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Served {
    hits: Vec<u64>,
    misses: Vec<u64>,
}

fn add(bins: &mut Vec<u64>, now: Nanos) {
    let i = ((now / SERVED_BIN) as usize).min(MAX_SERVED_BINS - 1);
    if bins.len() <= i {
        bins.resize(i + 1, 0);
    }
    bins[i] += 1;
}

impl Served {
    /// A MEDIUM packet at `now` hit its app's flow manager.
    pub fn hit(&mut self, now: Nanos) {
        add(&mut self.hits, now);
    }

    /// A MEDIUM packet at `now` missed and went to a device.
    pub fn miss(&mut self, now: Nanos) {
        add(&mut self.misses, now);
    }

    /// The series, named `fm_hits` and `fm_misses`.
    pub fn series(&self) -> Vec<(String, ProgramSeries)> {
        let s = |values: &Vec<u64>| ProgramSeries {
            bin: SERVED_BIN,
            values: values.clone(),
        };
        vec![
            ("fm_hits".to_string(), s(&self.hits)),
            ("fm_misses".to_string(), s(&self.misses)),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_per_bin_and_bounds_the_bins() {
        let mut s = Served::default();
        s.hit(0);
        s.hit(SERVED_BIN - 1);
        s.miss(2 * SERVED_BIN + 5);
        s.miss(Nanos::MAX);
        let series = s.series();
        assert_eq!(series[0].0, "fm_hits");
        assert_eq!(series[0].1.values, vec![2]);
        assert_eq!(series[1].1.values.len(), MAX_SERVED_BINS);
        assert_eq!(series[1].1.values[2], 1);
        assert_eq!(series[1].1.values[MAX_SERVED_BINS - 1], 1);
    }
}
