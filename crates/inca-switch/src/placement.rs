//! The resource model: placing a program's objects into pipeline stages.

use crate::table::MatchKind;

/// Which pipeline an object belongs to. On a Tofino-class switch the two
/// share the physical stages, but a register used in ingress cannot be
/// reached from egress, and dependency chains are per pipeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Gress {
    /// The ingress pipeline (before the traffic manager).
    Ingress,
    /// The egress pipeline (after the traffic manager).
    Egress,
}

/// What kind of object, with the sizes that decide its resource needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ObjectKind {
    /// A match-action table.
    Table {
        /// How it matches.
        kind: MatchKind,
        /// Width of the match key, bits.
        key_bits: u32,
        /// Width of the action data stored per entry, bits.
        action_data_bits: u32,
        /// Maximum number of entries.
        entries: u64,
        /// Idle-timeout aging is enabled (costs map RAM).
        idle_timeout: bool,
    },
    /// A register array driven by a stateful ALU.
    Register {
        /// Width of one entry: 8, 16, 32, or 64 (a pair of 32-bit values).
        value_bits: u32,
        /// Number of entries.
        entries: u64,
    },
    /// A packet-and-byte counter array.
    Counter {
        /// Number of entries.
        entries: u64,
    },
    /// An RFC 2698 meter array.
    Meter {
        /// Number of entries.
        entries: u64,
    },
    /// A hash unit producing `output_bits` bits (CRC16/32/64).
    Hash {
        /// Width of the output used by the program.
        output_bits: u32,
    },
    /// A condition evaluated by a gateway (an `if` in the control flow).
    Gateway,
}

/// An object as a program declares it for placement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectDecl {
    /// The object's name, unique within the program (used in reports and
    /// errors).
    pub name: String,
    /// What it is and how big.
    pub kind: ObjectKind,
    /// The pipeline it is used in.
    pub gress: Gress,
    /// Indices (into the same declaration list) of objects whose result this
    /// one needs: it must be placed in a later stage than all of them.
    pub after: Vec<usize>,
    /// VLIW instruction slots its actions use.
    pub vliw_slots: u32,
}
