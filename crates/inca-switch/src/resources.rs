//! Resource kinds of a match-action pipeline and vectors of amounts of them.

use std::ops::{Index, IndexMut};

/// One kind of pipeline resource, as the papers' resource tables count them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
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
}

/// An amount of each resource kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ResourceVec(pub [u64; Resource::ALL.len()]);

impl ResourceVec {
    /// Nothing of anything.
    pub const ZERO: ResourceVec = ResourceVec([0; Resource::ALL.len()]);
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
