//! Timing helpers shared by the benchmarks: wall-clock rates, medians, and
//! the one function callgrind is told to count.
//!
//! Every benchmark times a fixed amount of work with [`Instant`] after a
//! warm-up of the same work; a rate is units of work over elapsed seconds.

use std::time::{Duration, Instant};

/// Units per second of `units` done in `elapsed` (0 for an empty interval).
pub fn rate(units: u64, elapsed: Duration) -> f64 {
    let s = elapsed.as_secs_f64();
    if s > 0.0 {
        units as f64 / s
    } else {
        0.0
    }
}

/// Runs `work` (which returns how many units it did) and returns its rate.
pub fn timed_rate(work: impl FnOnce() -> u64) -> f64 {
    let start = Instant::now();
    let units = work();
    rate(units, start.elapsed())
}

pub use inca_system::bench::median;

/// The measured work of a `--profile-iterations` run. It only calls `f`,
/// but it is never inlined, so `valgrind --tool=callgrind
/// --collect-atstart=no --toggle-collect='*bench*profiled*'` counts exactly
/// the work and none of the set-up; the instruction count divided by the
/// iterations is the cost of one packet or request.
#[inline(never)]
pub fn profiled<R>(f: impl FnOnce() -> R) -> R {
    std::hint::black_box(f())
}

/// Counts in a loop until `warmup` and then `measure` have passed; returns
/// the count difference and the exact time between the two snapshots. For
/// the live paths, whose work is "whatever arrives in this interval".
pub fn count_over(warmup: Duration, measure: Duration, mut count: impl FnMut() -> u64) -> f64 {
    let start = Instant::now();
    while start.elapsed() < warmup {
        count();
    }
    let (c0, t0) = (count(), Instant::now());
    while t0.elapsed() < measure {
        count();
    }
    let (c1, t1) = (count(), Instant::now());
    rate(c1.saturating_sub(c0), t1 - t0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_even_and_empty() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 2.5);
        assert_eq!(median(&[]), 0.0);
        assert_eq!(median(&[1.0, f64::NAN, 2.0]), 2.0);
    }

    #[test]
    fn rate_of_units_over_time() {
        assert_eq!(rate(10, Duration::from_millis(500)), 20.0);
        assert_eq!(rate(10, Duration::ZERO), 0.0);
    }
}
