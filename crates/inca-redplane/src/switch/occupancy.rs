//! Occupancy of the retransmission loop (spec §8 item 8, [TH] Fig. 5.17):
//! the largest queue depth that request packets (first passes, loop copies,
//! retransmissions) see on the store port, per time bin and over the run.
//!
//! [our choice] The switch model gives egress the bytes queued ahead of a
//! packet when it was enqueued (`enq_queue_bytes`), not Tofino's depth at
//! dequeue; with one FIFO per port the two differ by what arrived while the
//! packet waited, so this is the same upper bound on the loop's buffer use
//! the spec describes, read one queueing delay earlier.

use inca_switch::device::Nanos;
use inca_switch::ProgramSeries;

/// Bound on the bins kept; later samples go into the last bin.
pub const MAX_OCCUPANCY_BINS: usize = 1 << 16;

/// Per-bin and overall maxima of the store-port queue depth seen by
/// requests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoopOccupancy {
    bin: Nanos,
    per_bin: Vec<u64>,
    max: u64,
    samples: u64,
}

impl LoopOccupancy {
    /// An empty record with bins of `bin` ns.
    pub fn new(bin: Nanos) -> Self {
        LoopOccupancy {
            bin: bin.max(1),
            per_bin: Vec::new(),
            max: 0,
            samples: 0,
        }
    }

    /// A request left its queue at `now` having found `depth` bytes ahead.
    pub fn record(&mut self, now: Nanos, depth: u64) {
        let i = ((now / self.bin) as usize).min(MAX_OCCUPANCY_BINS - 1);
        if self.per_bin.len() <= i {
            self.per_bin.resize(i + 1, 0);
        }
        self.per_bin[i] = self.per_bin[i].max(depth);
        self.max = self.max.max(depth);
        self.samples += 1;
    }

    /// The largest depth seen over the run, bytes.
    pub fn max(&self) -> u64 {
        self.max
    }

    /// How many requests were sampled.
    pub fn samples(&self) -> u64 {
        self.samples
    }

    /// The per-bin maxima as a series.
    pub fn series(&self) -> ProgramSeries {
        ProgramSeries {
            bin: self.bin,
            values: self.per_bin.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_largest_depth_per_bin_and_overall() {
        let mut o = LoopOccupancy::new(1000);
        o.record(10, 300);
        o.record(900, 200);
        o.record(2500, 700);
        assert_eq!(o.series().values, vec![300, 0, 700]);
        assert_eq!(o.max(), 700);
        assert_eq!(o.samples(), 3);
    }

    #[test]
    fn late_samples_fall_into_the_last_bin() {
        let mut o = LoopOccupancy::new(1);
        o.record(u64::MAX, 5);
        assert_eq!(o.series().values.len(), MAX_OCCUPANCY_BINS);
        assert_eq!(o.series().values[MAX_OCCUPANCY_BINS - 1], 5);
    }
}
