//! The device's popularity sketch (spec §3.3, §5.3 step 2): a count-min
//! sketch of 4 rows × 65,536 × u32 per app, in two banks. Packets count in
//! the current bank; every `T_win` the bank selector flips and the bank
//! that was current is zeroed while the other fills, so each window counts
//! from zero. Row `j` hashes with `inca_switch::hash` unit `j` of
//! [`HashUnit::independent_rows`], so the data-plane version computes the
//! same indexes.
//!
//! Every row grows by exactly 1 per packet, so the minimum passes each
//! value exactly once: [`CountMin::add`] returns the new minimum and the
//! caller reports when it equals θ.

use inca_switch::hash::{HashError, HashUnit};

/// Rows of the sketch (spec §3.3 [our choice]).
pub const CMS_ROWS: usize = 4;
/// Index bits per row: 65,536 counters (spec §3.3 [our choice]).
pub const CMS_INDEX_BITS: u8 = 16;

/// A two-bank count-min sketch.
#[derive(Clone, Debug)]
pub struct CountMin {
    rows: Vec<HashUnit>,
    width: usize,
    banks: [Vec<u32>; 2],
    current: usize,
}

impl CountMin {
    /// A sketch of `rows` rows of `2^index_bits` counters per bank.
    pub fn new(rows: usize, index_bits: u8) -> Result<Self, HashError> {
        let units = HashUnit::independent_rows(rows, index_bits)?;
        let width = 1usize << index_bits;
        Ok(CountMin {
            rows: units,
            width,
            banks: [vec![0; rows * width], vec![0; rows * width]],
            current: 0,
        })
    }

    /// The spec's sketch: [`CMS_ROWS`] × 2^[`CMS_INDEX_BITS`].
    pub fn standard() -> Self {
        CountMin::new(CMS_ROWS, CMS_INDEX_BITS).expect("4 independent 32-bit rows exist")
    }

    /// Counts one packet of `key` in the current bank (saturating) and
    /// returns the new minimum over the rows.
    pub fn add(&mut self, key: &[u8]) -> u32 {
        let bank = &mut self.banks[self.current];
        let mut min = u32::MAX;
        for (j, unit) in self.rows.iter().enumerate() {
            let i = j * self.width + unit.hash(key) as usize;
            bank[i] = bank[i].saturating_add(1);
            min = min.min(bank[i]);
        }
        min
    }

    /// The current bank's estimate of `key`.
    pub fn estimate(&self, key: &[u8]) -> u32 {
        let bank = &self.banks[self.current];
        self.rows
            .iter()
            .enumerate()
            .map(|(j, unit)| bank[j * self.width + unit.hash(key) as usize])
            .min()
            .unwrap_or(0)
    }

    /// Ends a window: count in the other bank from now on and zero the one
    /// that was current.
    pub fn flip(&mut self) {
        let old = self.current;
        self.current ^= 1;
        self.banks[old].iter_mut().for_each(|c| *c = 0);
    }

    /// Which bank counts now (the `bank` field of REPORT).
    pub fn bank(&self) -> u8 {
        self.current as u8
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn min_passes_threshold_exactly_once_and_flip_resets() {
        let mut cms = CountMin::new(4, 8).unwrap();
        let hits: Vec<u32> = (0..100).map(|_| cms.add(b"flow-a")).collect();
        assert_eq!(hits.iter().filter(|&&m| m == 64).count(), 1);
        assert_eq!(cms.estimate(b"flow-a"), 100);
        cms.flip();
        assert_eq!(cms.estimate(b"flow-a"), 0);
        assert_eq!(cms.bank(), 1);
        cms.flip();
        assert_eq!(cms.estimate(b"flow-a"), 0, "the idle bank was zeroed");
    }

    #[test]
    fn never_underestimates() {
        let mut cms = CountMin::new(4, 6).unwrap();
        for i in 0..500u32 {
            for _ in 0..(i % 7) {
                cms.add(&i.to_be_bytes());
            }
        }
        for i in 0..500u32 {
            assert!(cms.estimate(&i.to_be_bytes()) >= i % 7);
        }
    }
}
