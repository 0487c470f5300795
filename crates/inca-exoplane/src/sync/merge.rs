//! Merge operators of data-plane-updatable objects (specs/exoplane.md §5.6,
//! §4.3): ADD mod 2^w with its inverse SUB, and OR and MAX, which have no
//! inverse and are idempotent.
//!
//! The rule "a ⊕ without ⊖ must be idempotent" holds by construction: the
//! set of operators is closed, and [`Merge::algebra`] splits it into
//! [`Algebra::Group`] (has ⊖; synchronised with snapshot *and* history) and
//! [`Algebra::Semilattice`] (idempotent; synchronised by snapshots alone).
//! There is no way to build a non-idempotent operator without an inverse.
//!
//! Values are `u64` holding the low `w` bits; every operation masks its
//! result, so a value never carries bits above its width. Signed registers
//! (count-sketch rows) use ADD: two's complement mod 2^w is the same ring.

use thiserror::Error;

/// A register width `w` (the MERGE body's `width`, §4.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Width {
    /// 8 bits.
    W8,
    /// 16 bits.
    W16,
    /// 32 bits.
    W32,
    /// 64 bits.
    W64,
}

impl Width {
    /// All widths, narrowest first.
    pub const ALL: [Width; 4] = [Width::W8, Width::W16, Width::W32, Width::W64];

    /// The width in bits.
    pub fn bits(self) -> u8 {
        match self {
            Width::W8 => 8,
            Width::W16 => 16,
            Width::W32 => 32,
            Width::W64 => 64,
        }
    }

    /// The mask of the low `w` bits.
    pub fn mask(self) -> u64 {
        match self {
            Width::W64 => u64::MAX,
            w => (1u64 << w.bits()) - 1,
        }
    }

    /// The width with `bits` bits, as the MERGE body encodes it.
    pub fn from_bits(bits: u8) -> Result<Width, MergeError> {
        match bits {
            8 => Ok(Width::W8),
            16 => Ok(Width::W16),
            32 => Ok(Width::W32),
            64 => Ok(Width::W64),
            other => Err(MergeError::Width(other)),
        }
    }
}

/// A built-in merge operator: the one type the wire (the MERGE body's `op`,
/// §4.3), the app declarations and the synchronisation share.
pub use inca_wire::exoplane::MergeOp;

/// How an operator is synchronised, decided by whether it has an inverse.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Algebra {
    /// ⊕ with ⊖ (an abelian group): snapshots and histories, exact deltas.
    Group,
    /// ⊕ idempotent, no ⊖ (a join semilattice): δ is the other side's snapshot.
    Semilattice,
}

/// A bad operator or width in a MERGE body or an object declaration.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum MergeError {
    /// `op` is not 1, 2 or 3.
    #[error("merge op {0} is not 1 (ADD), 2 (OR) or 3 (MAX)")]
    Op(u8),
    /// `width` is not 8, 16, 32 or 64.
    #[error("merge width {0} is not 8, 16, 32 or 64")]
    Width(u8),
}

/// A merge operator at a register width: identity, ⊕ and (for groups) ⊖.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Merge {
    op: MergeOp,
    width: Width,
}

impl Merge {
    /// The operator `op` on `width`-bit registers.
    pub fn new(op: MergeOp, width: Width) -> Merge {
        Merge { op, width }
    }

    /// The operator of a MERGE body's `op` and `width` fields.
    pub fn from_wire(op: u8, width: u8) -> Result<Merge, MergeError> {
        Ok(Merge::new(
            MergeOp::from_u8(op).map_err(|_| MergeError::Op(op))?,
            Width::from_bits(width)?,
        ))
    }

    /// The operator.
    pub fn op(self) -> MergeOp {
        self.op
    }

    /// The register width.
    pub fn width(self) -> Width {
        self.width
    }

    /// Group (has ⊖) or semilattice (idempotent).
    pub fn algebra(self) -> Algebra {
        match self.op {
            MergeOp::Add => Algebra::Group,
            MergeOp::Or | MergeOp::Max => Algebra::Semilattice,
        }
    }

    /// The identity `0̸` (0 for all three: unsigned MAX starts at 0).
    pub fn identity(self) -> u64 {
        0
    }

    /// `v` reduced to the register width.
    pub fn canon(self, v: u64) -> u64 {
        v & self.width.mask()
    }

    /// `a ⊕ b`.
    pub fn combine(self, a: u64, b: u64) -> u64 {
        let (a, b) = (self.canon(a), self.canon(b));
        match self.op {
            MergeOp::Add => self.canon(a.wrapping_add(b)),
            MergeOp::Or => a | b,
            MergeOp::Max => a.max(b),
        }
    }

    /// `a ⊖ b`: the `x` with `x ⊕ b = a`, for groups; `None` for semilattices.
    pub fn inverse(self, a: u64, b: u64) -> Option<u64> {
        match self.algebra() {
            Algebra::Group => Some(self.canon(a.wrapping_sub(b))),
            Algebra::Semilattice => None,
        }
    }
}
