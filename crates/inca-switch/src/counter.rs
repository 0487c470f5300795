//! Counter arrays: per-index packet and byte counts, as a Tofino indirect
//! counter array of type `packets_and_bytes`.
//!
//! A [`CounterArray`] is a plain data structure; the pipeline wrapper decides
//! when a packet may touch it (one access per array per pass). Both counts are
//! `u64` and wrap on overflow rather than saturate or panic: hardware counters
//! wrap, and the control plane reads deltas, so wrapping keeps deltas right.
//!
//! This module also holds [`IndexError`], the one out-of-range error shared by
//! every indexed stateful object (counters, meters, registers).

use thiserror::Error;

/// An index was outside an indexed object of `size` cells.
///
/// Indices are `u64` everywhere in the data plane because they are usually
/// computed from packet fields or hash outputs; keeping them `u64` means a
/// huge index is reported as-is instead of being silently truncated by a cast.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Error)]
#[error("index {index} out of range for size {size}")]
pub struct IndexError {
    /// The index that was asked for.
    pub index: u64,
    /// The number of cells in the object (valid indices are `0..size`).
    pub size: u64,
}

impl IndexError {
    /// Checks `index` against an object of `len` cells and returns it as a
    /// `usize` ready for slice indexing, or the error describing the miss.
    #[inline]
    pub fn check(index: u64, len: usize) -> Result<usize, IndexError> {
        // Compare in u64 so that a u64 index larger than usize::MAX (on 32-bit
        // targets) cannot wrap into range.
        if index < len as u64 {
            Ok(index as usize)
        } else {
            Err(IndexError {
                index,
                size: len as u64,
            })
        }
    }
}

/// One counter cell: packets and bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Cell {
    packets: u64,
    bytes: u64,
}

/// An array of packet-and-byte counters, all starting at zero.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CounterArray {
    // Packets and bytes side by side so one count touches one cache line.
    cells: Box<[Cell]>,
}

impl CounterArray {
    /// Makes an array of `size` counters, all zero.
    pub fn new(size: usize) -> Self {
        CounterArray {
            cells: vec![Cell::default(); size].into_boxed_slice(),
        }
    }

    /// Number of counters in the array.
    #[inline]
    pub fn len(&self) -> usize {
        self.cells.len()
    }

    /// Whether the array has no counters at all.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.cells.is_empty()
    }

    /// Counts one packet of `bytes` bytes at `index` (both counts wrap).
    #[inline]
    pub fn count(&mut self, index: u64, bytes: u64) -> Result<(), IndexError> {
        let i = IndexError::check(index, self.cells.len())?;
        let cell = &mut self.cells[i];
        cell.packets = cell.packets.wrapping_add(1);
        cell.bytes = cell.bytes.wrapping_add(bytes);
        Ok(())
    }

    /// Adds `packets` to the packet count at `index` (wrapping; bytes
    /// unchanged): a MERGE of counted packets from another copy.
    #[inline]
    pub fn add_packets(&mut self, index: u64, packets: u64) -> Result<u64, IndexError> {
        let i = IndexError::check(index, self.cells.len())?;
        let cell = &mut self.cells[i];
        cell.packets = cell.packets.wrapping_add(packets);
        Ok(cell.packets)
    }

    /// Reads `(packets, bytes)` at `index`.
    #[inline]
    pub fn read(&self, index: u64) -> Result<(u64, u64), IndexError> {
        let i = IndexError::check(index, self.cells.len())?;
        let cell = self.cells[i];
        Ok((cell.packets, cell.bytes))
    }

    /// Resets the counter at `index` to zero (a control-plane write).
    pub fn reset(&mut self, index: u64) -> Result<(), IndexError> {
        let i = IndexError::check(index, self.cells.len())?;
        self.cells[i] = Cell::default();
        Ok(())
    }

    /// Puts `(packets, bytes)` back at `index` (the load-time check undoing
    /// a traced pass); out of range does nothing.
    pub(crate) fn restore(&mut self, index: u64, (packets, bytes): (u64, u64)) {
        if let Ok(i) = IndexError::check(index, self.cells.len()) {
            self.cells[i] = Cell { packets, bytes };
        }
    }

    /// Resets every counter to zero.
    pub fn clear(&mut self) {
        self.cells.fill(Cell::default());
    }

    /// Iterates over `(packets, bytes)` of every counter in index order.
    pub fn iter(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.cells.iter().map(|c| (c.packets, c.bytes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_packets_and_bytes() {
        let mut c = CounterArray::new(4);
        assert_eq!(c.len(), 4);
        assert!(!c.is_empty());
        c.count(1, 100).unwrap();
        c.count(1, 60).unwrap();
        c.count(3, 1500).unwrap();
        assert_eq!(c.read(0), Ok((0, 0)));
        assert_eq!(c.read(1), Ok((2, 160)));
        assert_eq!(c.read(3), Ok((1, 1500)));
        assert_eq!(
            c.iter().collect::<Vec<_>>(),
            vec![(0, 0), (2, 160), (0, 0), (1, 1500)]
        );
    }

    #[test]
    fn out_of_range_is_an_error() {
        let mut c = CounterArray::new(8);
        let e = c.count(12, 1).unwrap_err();
        assert_eq!(e, IndexError { index: 12, size: 8 });
        assert_eq!(e.to_string(), "index 12 out of range for size 8");
        assert_eq!(c.read(8), Err(IndexError { index: 8, size: 8 }));
        assert_eq!(
            c.read(u64::MAX),
            Err(IndexError {
                index: u64::MAX,
                size: 8
            })
        );
        assert!(c.reset(8).is_err());
        let mut empty = CounterArray::new(0);
        assert!(empty.is_empty());
        assert!(empty.count(0, 1).is_err());
    }

    #[test]
    fn wraps_instead_of_panicking() {
        let mut c = CounterArray::new(1);
        c.count(0, u64::MAX).unwrap();
        c.count(0, 2).unwrap();
        assert_eq!(c.read(0), Ok((2, 1)));
    }

    #[test]
    fn clear_and_reset() {
        let mut c = CounterArray::new(3);
        for i in 0..3 {
            c.count(i, 10).unwrap();
        }
        c.reset(1).unwrap();
        assert_eq!(c.read(1), Ok((0, 0)));
        assert_eq!(c.read(2), Ok((1, 10)));
        c.clear();
        assert!(c.iter().all(|x| x == (0, 0)));
    }

    #[test]
    fn index_check_helper() {
        assert_eq!(IndexError::check(0, 1), Ok(0));
        assert_eq!(
            IndexError::check(1, 1),
            Err(IndexError { index: 1, size: 1 })
        );
    }
}
