//! The sketch core: which entry of each row a key touches ([`RowHashes`]),
//! what a packet does to a cell (a count-min counter, [`count`]; a bitset
//! of a distinct-count sketch, [`set_bit`]), and what the rows say (the
//! minimum over the rows, [`min`]; linear counting, [`linear_count`],
//! [`popcount_threshold`], [`destinations_of`]).
//!
//! No register arrays here: each system keeps the rows where they live —
//! the plain monitors ([`crate::heavy_hitter`], [`crate::univmon`],
//! [`crate::superspreader`], [`crate::netcache`]) in register arrays, one
//! register action per row applying the cell update; RedPlane's bounded
//! mode in snapshotted arrays; TEA's hot-key sketch in 16-bit registers;
//! SwiSh's SDW collections (next) in double-buffered rows — and applies
//! these per row access. [`CountMin`] and [`BitsetSketch`] are the same
//! sketches in memory, for software data paths and as the reference the
//! switch versions are tested against.
//!
//! The hash families differ by system and are explicit, because their
//! choice is each spec's: the switch model's hash units offer CRCs only,
//! and CRC is linear, so rows must differ in polynomial or in input layout
//! or they collide on the same keys.

use inca_switch::hash::{HashAlgorithm, HashUnit};

/// Key bytes a rotated input uses at most.
const ROTATED_MAX: usize = 32;

/// How row `r` of a sketch hashes a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RowHashes {
    /// The plain apps': CRC-32 on even rows, CRC-64 on odd ones, over the
    /// key (its first 32 bytes) rotated left by `3·⌊r/2⌋` bytes — a
    /// different polynomial or field order per row, as P4 programs on
    /// Tofino do.
    Rotated,
    /// RedPlane's bounded-mode heavy hitter (\[RP\] §6 (5)): CRC-32,
    /// CRC-64, CRC-16 in turn, over the key rotated by `3·⌊r/3⌋` bytes.
    Cycled,
    /// NetCache's three rows: CRC-32 and CRC-64 of the key, then CRC-32 of
    /// its bytes reversed (rows past 2 repeat the cycle).
    Reversed,
    /// TEA's (spec §5.1): CRC-32 of one byte, `first + r`, then the key.
    Seeded {
        /// The byte before the key in row 0.
        first: u8,
    },
}

impl RowHashes {
    /// The algorithm of row `r`.
    pub fn algorithm(self, r: usize) -> HashAlgorithm {
        use HashAlgorithm::{Crc16, Crc32, Crc64};
        match self {
            RowHashes::Rotated if r % 2 == 1 => Crc64,
            RowHashes::Cycled => [Crc32, Crc64, Crc16][r % 3],
            RowHashes::Reversed if r % 3 == 1 => Crc64,
            _ => Crc32,
        }
    }

    /// Calls `f` with row `r`'s hash input for `key` (built on the stack
    /// for keys up to 63 bytes).
    pub fn with_input<R>(self, r: usize, key: &[u8], f: impl FnOnce(&[u8]) -> R) -> R {
        let mut buf = [0u8; 64];
        if key.len() < buf.len() {
            let n = self.write_input(r, key, &mut buf);
            f(&buf[..n])
        } else {
            let mut v = vec![0u8; key.len() + 1];
            let n = self.write_input(r, key, &mut v);
            f(&v[..n])
        }
    }

    /// Writes row `r`'s input for `key` into `out` (at least `key.len() + 1`
    /// bytes); returns its length.
    fn write_input(self, r: usize, key: &[u8], out: &mut [u8]) -> usize {
        let rotated = |rot: usize, out: &mut [u8]| {
            let k = &key[..key.len().min(ROTATED_MAX)];
            let n = k.len();
            let rot = if n == 0 { 0 } else { rot % n };
            out[..n - rot].copy_from_slice(&k[rot..]);
            out[n - rot..n].copy_from_slice(&k[..rot]);
            n
        };
        match self {
            RowHashes::Rotated => rotated((r / 2) * 3, out),
            RowHashes::Cycled => rotated((r / 3) * 3, out),
            RowHashes::Reversed => {
                let n = key.len();
                out[..n].copy_from_slice(key);
                if r % 3 == 2 {
                    out[..n].reverse();
                }
                n
            }
            RowHashes::Seeded { first } => {
                out[0] = first.wrapping_add(r as u8);
                out[1..=key.len()].copy_from_slice(key);
                key.len() + 1
            }
        }
    }

    /// The `bits`-bit hash of row `r` over `key`, as the data plane's hash
    /// unit for the row computes it (0 for a width the unit refuses).
    pub fn hash(self, r: usize, bits: u8, key: &[u8]) -> u64 {
        let Ok(unit) = HashUnit::new(self.algorithm(r), bits) else {
            return 0;
        };
        self.with_input(r, key, |input| unit.hash(input))
    }
}

/// A counter a sketch cell can hold.
pub trait Counter: Copy + Ord {
    /// The largest count.
    const MAX: Self;
    /// Adds one, saturating.
    fn bump(self) -> Self;
}

macro_rules! counter {
    ($($t:ty),*) => {$(
        impl Counter for $t {
            const MAX: Self = <$t>::MAX;
            fn bump(self) -> Self {
                self.saturating_add(1)
            }
        }
    )*};
}
counter!(u8, u16, u32, u64);

/// A count-min cell's update: one more packet, saturating (a saturated
/// counter stays an upper bound of the key's count). Returns the new count,
/// as the register action does.
pub fn count<C: Counter>(cell: &mut C) -> C {
    *cell = cell.bump();
    *cell
}

/// The sketch's estimate from the counts of one key's cells: their minimum
/// (None without rows). Every cell is an upper bound of the key's count.
pub fn min<C: Counter>(counts: impl IntoIterator<Item = C>) -> Option<C> {
    counts.into_iter().min()
}

/// A distinct-count cell's update: sets `bit` (0..32) of a 32-bit bitset.
/// Returns the popcount before and after, as the register action does.
pub fn set_bit(cell: &mut u32, bit: u32) -> (u32, u32) {
    let before = cell.count_ones();
    *cell |= 1 << (bit & 31);
    (before, cell.count_ones())
}

/// Linear counting: how many distinct keys hashed into `width` cells leave
/// `zeros` of them empty, `−width·ln(zeros/width)` (Whang et al., 1990).
/// No empty cell at all counts as half of one, so the estimate stays
/// finite.
pub fn linear_count(zeros: f64, width: f64) -> f64 {
    -width * (zeros.max(0.5) / width).ln()
}

/// Distinct keys a 32-bit bitset with `popcount` bits set stands for
/// ([`linear_count`] over its 32 bits; all set counts as 32·ln 64).
pub fn destinations_of(popcount: u32) -> f64 {
    linear_count(f64::from(32 - popcount.min(32)), 32.0)
}

/// The popcount a 32-bit bitset reaches, in expectation, after `distinct`
/// keys: `32·(1 − (31/32)^distinct)`, rounded, at least 1. (A sampled
/// stream passes `distinct · p`.)
pub fn popcount_threshold(distinct: f64) -> u32 {
    let e = 32.0 * (1.0 - (31.0f64 / 32.0).powf(distinct));
    (e.round() as u32).clamp(1, 32)
}

/// A count-min sketch in memory: `rows` × `2^bits` counters hashed by
/// `hashes`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CountMin {
    hashes: RowHashes,
    bits: u8,
    rows: Vec<Vec<u32>>,
}

impl CountMin {
    /// An empty sketch of `rows` rows of `2^bits` counters.
    pub fn new(hashes: RowHashes, rows: usize, bits: u8) -> Self {
        CountMin {
            hashes,
            bits,
            rows: vec![vec![0; 1 << bits]; rows],
        }
    }

    /// The cell of `key` in row `r`.
    pub fn index(&self, r: usize, key: &[u8]) -> usize {
        self.hashes.hash(r, self.bits, key) as usize
    }

    /// Counts one packet of `key`; returns the new estimate.
    pub fn add(&mut self, key: &[u8]) -> u32 {
        let mut est = None;
        for r in 0..self.rows.len() {
            let i = self.index(r, key);
            let c = count(&mut self.rows[r][i]);
            est = min([c].into_iter().chain(est));
        }
        est.unwrap_or(0)
    }

    /// The estimate of `key`.
    pub fn estimate(&self, key: &[u8]) -> u32 {
        min((0..self.rows.len()).map(|r| self.rows[r][self.index(r, key)])).unwrap_or(0)
    }

    /// Zeroes every counter (an epoch reset).
    pub fn clear(&mut self) {
        self.rows.iter_mut().for_each(|row| row.fill(0));
    }

    /// Row `r`'s counters.
    pub fn row(&self, r: usize) -> &[u32] {
        &self.rows[r]
    }
}

/// A distinct-count sketch in memory: `rows` × `2^bits` 32-bit bitsets,
/// a key's bitset in each row picked by `hashes`, the bit by the caller
/// (a hash of the item counted).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BitsetSketch {
    hashes: RowHashes,
    bits: u8,
    rows: Vec<Vec<u32>>,
}

impl BitsetSketch {
    /// An empty sketch of `rows` rows of `2^bits` bitsets.
    pub fn new(hashes: RowHashes, rows: usize, bits: u8) -> Self {
        BitsetSketch {
            hashes,
            bits,
            rows: vec![vec![0; 1 << bits]; rows],
        }
    }

    /// Sets `bit` in `key`'s bitset of every row; returns the minimum
    /// popcount over the rows before and after.
    pub fn insert(&mut self, key: &[u8], bit: u32) -> (u32, u32) {
        let (hashes, bits) = (self.hashes, self.bits);
        self.rows
            .iter_mut()
            .enumerate()
            .map(|(r, row)| set_bit(&mut row[hashes.hash(r, bits, key) as usize], bit))
            .fold((u32::MAX, u32::MAX), |(a, b), (x, y)| (a.min(x), b.min(y)))
    }

    /// The minimum popcount of `key`'s bitsets over the rows.
    pub fn popcount(&self, key: &[u8]) -> u32 {
        min((0..self.rows.len())
            .map(|r| self.rows[r][self.hashes.hash(r, self.bits, key) as usize].count_ones()))
        .unwrap_or(0)
    }

    /// Empties every bitset (an epoch reset).
    pub fn clear(&mut self) {
        self.rows.iter_mut().for_each(|row| row.fill(0));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rotated_inputs_rotate_by_three_bytes_every_two_rows() {
        let key: Vec<u8> = (0..13).collect();
        let got = |r| RowHashes::Rotated.with_input(r, &key, <[u8]>::to_vec);
        assert_eq!(got(0), key);
        assert_eq!(got(1), key);
        assert_eq!(got(2)[..3], [3, 4, 5]);
        assert_eq!(got(4)[..3], [6, 7, 8]);
        let long = [7u8; 40];
        assert_eq!(RowHashes::Rotated.with_input(0, &long, <[u8]>::len), 32);
    }

    #[test]
    fn seeded_inputs_put_the_row_byte_first_for_any_key_length() {
        let key = vec![9u8; 100];
        let input = RowHashes::Seeded { first: 0x10 }.with_input(1, &key, <[u8]>::to_vec);
        assert_eq!(input.len(), 101);
        assert_eq!(input[0], 0x11);
    }

    #[test]
    fn linear_counting_and_popcount_thresholds_agree() {
        assert_eq!(popcount_threshold(20.0), 15);
        assert_eq!(popcount_threshold(1000.0), 32);
        // SwiSh's super-spreader: 1,000 destinations sampled 1 in 16.
        assert_eq!(popcount_threshold(1000.0 / 16.0), 28);
        assert!((destinations_of(15) - 20.3).abs() < 0.5);
        assert!(linear_count(1024.0, 1024.0).abs() < 1e-9);
    }

    #[test]
    fn count_min_never_undercounts() {
        let mut s = CountMin::new(RowHashes::Rotated, 3, 4);
        for i in 0..200u32 {
            s.add(&(i % 37).to_be_bytes());
        }
        for k in 0..37u32 {
            let truth = (0..200).filter(|i| i % 37 == k).count() as u32;
            assert!(s.estimate(&k.to_be_bytes()) >= truth);
        }
    }
}
