//! Resource kinds of a match-action pipeline and vectors of amounts of them.
//!
//! This module also defines, in one place, the geometry of the memory blocks
//! the resource model counts ([`SRAM_BLOCK_WORDS`], [`SRAM_WORD_BITS`],
//! [`TCAM_BLOCK_WORDS`], [`TCAM_WORD_BITS`], [`MAP_RAM_BLOCK_WORDS`]). The
//! demand formulas in [`crate::placement`] and the profiles in
//! [`crate::profile`] use these constants.

use std::fmt;
use std::ops::{Add, AddAssign, Index, IndexMut, Mul, Sub, SubAssign};

use serde::ser::{Serialize, SerializeMap, Serializer};

/// Words in one SRAM block. Tofino-1 SRAM units are 1,024 words deep
/// (`SRAM_DEPTH = 1024` in the open-source Tofino compiler,
/// p4lang/p4c `backends/tofino/bf-p4c/mau/tofino/memories.h`; the RMT chip of
/// Bosshart et al., SIGCOMM 2013, also used 1K-word blocks).
pub const SRAM_BLOCK_WORDS: u64 = 1_024;
/// Bits in one SRAM word (Tofino-1: 128 b; the ExoPlane spec §2 uses the
/// same 1,024 × 128 b block; RMT's blocks were 112 b wide).
pub const SRAM_WORD_BITS: u64 = 128;
/// Words in one TCAM block (Tofino-1: `TCAM_DEPTH = 512`, same compiler
/// source; ExoPlane spec §2: 512 × 44 b).
pub const TCAM_BLOCK_WORDS: u64 = 512;
/// Bits in one TCAM word (Tofino-1: 44 b, of which the model uses all 44 for
/// key bits; ExoPlane spec §2).
pub const TCAM_WORD_BITS: u64 = 44;
/// Words in one map-RAM block. Map RAMs sit next to the SRAM units, one
/// per SRAM in 6 of the 10 columns (`MAPRAM_COLUMNS = 6` × 8 rows = 48 per
/// stage in the Tofino compiler source); their depth is taken equal to the
/// SRAM depth [our choice].
pub const MAP_RAM_BLOCK_WORDS: u64 = 1_024;
/// Bytes of one SRAM block (16 KiB), used to convert block budgets into bytes
/// on run-to-completion devices.
pub const SRAM_BLOCK_BYTES: u64 = SRAM_BLOCK_WORDS * SRAM_WORD_BITS / 8;

/// One kind of pipeline resource, as the papers' resource tables count them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Resource {
    /// SRAM blocks (1,024 words × 128 bits on the `tofino` profile).
    SramBlocks,
    /// TCAM blocks (512 words × 44 bits on the `tofino` profile).
    TcamBlocks,
    /// Map-RAM blocks (idle-timeout state, meter colours, register spares).
    MapRamBlocks,
    /// Stateful ALUs (one per register array or meter array in a stage).
    StatefulAlus,
    /// Bits of hash-unit output (indexes, exact-match hashing).
    HashBits,
    /// Bytes of the exact-match input crossbar.
    ExactXbarBytes,
    /// Bytes of the ternary-match input crossbar.
    TernaryXbarBytes,
    /// VLIW action instruction slots.
    VliwSlots,
    /// Gateways (the conditions of `if` statements).
    Gateways,
    /// Logical table IDs.
    LogicalTables,
}

impl Resource {
    /// Every resource kind, in report order.
    pub const ALL: [Resource; 10] = [
        Resource::SramBlocks,
        Resource::TcamBlocks,
        Resource::MapRamBlocks,
        Resource::StatefulAlus,
        Resource::HashBits,
        Resource::ExactXbarBytes,
        Resource::TernaryXbarBytes,
        Resource::VliwSlots,
        Resource::Gateways,
        Resource::LogicalTables,
    ];

    /// The name used in reports and errors.
    pub fn name(self) -> &'static str {
        match self {
            Resource::SramBlocks => "SRAM blocks",
            Resource::TcamBlocks => "TCAM blocks",
            Resource::MapRamBlocks => "map-RAM blocks",
            Resource::StatefulAlus => "stateful ALUs",
            Resource::HashBits => "hash bits",
            Resource::ExactXbarBytes => "exact crossbar bytes",
            Resource::TernaryXbarBytes => "ternary crossbar bytes",
            Resource::VliwSlots => "VLIW slots",
            Resource::Gateways => "gateways",
            Resource::LogicalTables => "logical tables",
        }
    }

    /// The machine-readable name: snake_case, as used in JSON output and in
    /// profile parameter names (`budget.sram_blocks`).
    pub fn key(self) -> &'static str {
        match self {
            Resource::SramBlocks => "sram_blocks",
            Resource::TcamBlocks => "tcam_blocks",
            Resource::MapRamBlocks => "map_ram_blocks",
            Resource::StatefulAlus => "stateful_alus",
            Resource::HashBits => "hash_bits",
            Resource::ExactXbarBytes => "exact_xbar_bytes",
            Resource::TernaryXbarBytes => "ternary_xbar_bytes",
            Resource::VliwSlots => "vliw_slots",
            Resource::Gateways => "gateways",
            Resource::LogicalTables => "logical_tables",
        }
    }

    /// A short column header for per-stage tables.
    pub fn short_name(self) -> &'static str {
        match self {
            Resource::SramBlocks => "SRAM",
            Resource::TcamBlocks => "TCAM",
            Resource::MapRamBlocks => "mapRAM",
            Resource::StatefulAlus => "SALU",
            Resource::HashBits => "hash",
            Resource::ExactXbarBytes => "xbarX",
            Resource::TernaryXbarBytes => "xbarT",
            Resource::VliwSlots => "VLIW",
            Resource::Gateways => "gw",
            Resource::LogicalTables => "LT",
        }
    }

    /// The resource whose [`key`](Resource::key) is `key`.
    pub fn from_key(key: &str) -> Option<Resource> {
        Resource::ALL.into_iter().find(|r| r.key() == key)
    }

    /// The memory resources (the ones a table can split across stages).
    pub const MEMORY: [Resource; 3] = [
        Resource::SramBlocks,
        Resource::TcamBlocks,
        Resource::MapRamBlocks,
    ];

    /// Whether this is a memory resource (SRAM, TCAM or map RAM).
    pub fn is_memory(self) -> bool {
        Resource::MEMORY.contains(&self)
    }
}

impl fmt::Display for Resource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An amount of each resource kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct ResourceVec(pub [u64; Resource::ALL.len()]);

impl ResourceVec {
    /// Nothing of anything.
    pub const ZERO: ResourceVec = ResourceVec([0; Resource::ALL.len()]);

    /// A vector with `amount` of `r` and nothing else.
    pub fn of(r: Resource, amount: u64) -> ResourceVec {
        let mut v = ResourceVec::ZERO;
        v[r] = amount;
        v
    }

    /// A vector from `(resource, amount)` pairs (later pairs overwrite).
    pub fn from_pairs(pairs: &[(Resource, u64)]) -> ResourceVec {
        let mut v = ResourceVec::ZERO;
        for &(r, a) in pairs {
            v[r] = a;
        }
        v
    }

    /// `(resource, amount)` for every resource, in report order.
    pub fn iter(&self) -> impl Iterator<Item = (Resource, u64)> + '_ {
        Resource::ALL.into_iter().map(move |r| (r, self[r]))
    }

    /// Whether every amount is zero.
    pub fn is_zero(&self) -> bool {
        self.0.iter().all(|&a| a == 0)
    }

    /// Whether every amount of `self` is at most the amount in `budget`.
    pub fn fits_in(&self, budget: &ResourceVec) -> bool {
        self.0.iter().zip(budget.0.iter()).all(|(a, b)| a <= b)
    }

    /// The resources of `self` that exceed `budget`, with (needed, available).
    pub fn excess_over(&self, budget: &ResourceVec) -> Vec<(Resource, u64, u64)> {
        self.iter()
            .filter(|&(r, a)| a > budget[r])
            .map(|(r, a)| (r, a, budget[r]))
            .collect()
    }

    /// Element-wise `self + other`, saturating at `u64::MAX`.
    pub fn saturating_add(&self, other: &ResourceVec) -> ResourceVec {
        self.zip_with(other, u64::saturating_add)
    }

    /// Element-wise `self - other`, saturating at zero.
    pub fn saturating_sub(&self, other: &ResourceVec) -> ResourceVec {
        self.zip_with(other, u64::saturating_sub)
    }

    /// Element-wise `self - other`, or `None` if any amount would go negative.
    pub fn checked_sub(&self, other: &ResourceVec) -> Option<ResourceVec> {
        let mut out = ResourceVec::ZERO;
        for i in 0..self.0.len() {
            out.0[i] = self.0[i].checked_sub(other.0[i])?;
        }
        Some(out)
    }

    /// Every amount multiplied by `k`, saturating at `u64::MAX`.
    pub fn saturating_mul(&self, k: u64) -> ResourceVec {
        ResourceVec(self.0.map(|a| a.saturating_mul(k)))
    }

    /// Element-wise minimum.
    pub fn min(&self, other: &ResourceVec) -> ResourceVec {
        self.zip_with(other, u64::min)
    }

    /// Element-wise maximum.
    pub fn max(&self, other: &ResourceVec) -> ResourceVec {
        self.zip_with(other, u64::max)
    }

    /// Only the memory resources of `self` (SRAM, TCAM, map RAM); the rest
    /// zero.
    pub fn memory_part(&self) -> ResourceVec {
        let mut v = ResourceVec::ZERO;
        for r in Resource::MEMORY {
            v[r] = self[r];
        }
        v
    }

    /// Only the non-memory resources of `self`; the memory ones zero.
    pub fn non_memory_part(&self) -> ResourceVec {
        let mut v = *self;
        for r in Resource::MEMORY {
            v[r] = 0;
        }
        v
    }

    fn zip_with(&self, other: &ResourceVec, f: impl Fn(u64, u64) -> u64) -> ResourceVec {
        let mut out = ResourceVec::ZERO;
        for i in 0..self.0.len() {
            out.0[i] = f(self.0[i], other.0[i]);
        }
        out
    }
}

impl Index<Resource> for ResourceVec {
    type Output = u64;
    fn index(&self, r: Resource) -> &u64 {
        &self.0[r as usize]
    }
}

impl IndexMut<Resource> for ResourceVec {
    fn index_mut(&mut self, r: Resource) -> &mut u64 {
        &mut self.0[r as usize]
    }
}

/// Saturating element-wise addition.
impl Add for ResourceVec {
    type Output = ResourceVec;
    fn add(self, rhs: ResourceVec) -> ResourceVec {
        self.saturating_add(&rhs)
    }
}

impl AddAssign for ResourceVec {
    fn add_assign(&mut self, rhs: ResourceVec) {
        *self = self.saturating_add(&rhs);
    }
}

/// Saturating element-wise subtraction (never below zero).
impl Sub for ResourceVec {
    type Output = ResourceVec;
    fn sub(self, rhs: ResourceVec) -> ResourceVec {
        self.saturating_sub(&rhs)
    }
}

impl SubAssign for ResourceVec {
    fn sub_assign(&mut self, rhs: ResourceVec) {
        *self = self.saturating_sub(&rhs);
    }
}

/// Saturating scaling by a count.
impl Mul<u64> for ResourceVec {
    type Output = ResourceVec;
    fn mul(self, k: u64) -> ResourceVec {
        self.saturating_mul(k)
    }
}

impl std::iter::Sum for ResourceVec {
    fn sum<I: Iterator<Item = ResourceVec>>(iter: I) -> ResourceVec {
        iter.fold(ResourceVec::ZERO, |a, b| a + b)
    }
}

/// Shown as `{SRAM blocks: 3, hash bits: 40}` listing only the non-zero
/// amounts.
impl fmt::Display for ResourceVec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("{")?;
        let mut first = true;
        for (r, a) in self.iter().filter(|&(_, a)| a > 0) {
            if !first {
                f.write_str(", ")?;
            }
            first = false;
            write!(f, "{}: {}", r.name(), a)?;
        }
        f.write_str("}")
    }
}

/// Serialised as a map from the snake_case resource key to the amount, in
/// report order (`{"sram_blocks": 80, "tcam_blocks": 0, …}`).
impl Serialize for ResourceVec {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut m = serializer.serialize_map(Some(Resource::ALL.len()))?;
        for (r, a) in self.iter() {
            m.serialize_entry(r.key(), &a)?;
        }
        m.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_saturates_and_fits() {
        let a = ResourceVec::from_pairs(&[(Resource::SramBlocks, 10), (Resource::HashBits, 5)]);
        let b = ResourceVec::of(Resource::SramBlocks, 4);
        assert_eq!((a - b)[Resource::SramBlocks], 6);
        assert_eq!((b - a)[Resource::SramBlocks], 0);
        assert_eq!(b.checked_sub(&a), None);
        assert!(b.fits_in(&a));
        assert!(!a.fits_in(&b));
        assert_eq!(
            a.excess_over(&b),
            vec![(Resource::SramBlocks, 10, 4), (Resource::HashBits, 5, 0)]
        );
        assert_eq!((a * 3)[Resource::HashBits], 15);
        let big = ResourceVec::of(Resource::SramBlocks, u64::MAX);
        assert_eq!((big + big)[Resource::SramBlocks], u64::MAX);
        assert_eq!(
            [a, b].into_iter().sum::<ResourceVec>()[Resource::SramBlocks],
            14
        );
        assert_eq!(a.memory_part() + a.non_memory_part(), a);
    }

    #[test]
    fn keys_round_trip() {
        for r in Resource::ALL {
            assert_eq!(Resource::from_key(r.key()), Some(r));
        }
        assert_eq!(SRAM_BLOCK_BYTES, 16 * 1024);
    }
}
