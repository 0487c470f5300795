//! Where a slot's value lives: register arrays indexed by slot, one access
//! each per packet. A value is wider than one stateful ALU reaches, so it
//! is split over arrays: 32-bit words (the KV header's 16 bytes in four
//! arrays, as NetCache's prototype does) or, for ExoPlane's 128-byte
//! values, pairs of words that one ALU updates together (Tofino's 64-bit
//! register action), two arrays per 16 bytes — 32 single-word arrays would
//! need more stateful ALUs than the stages after the state array have.

use inca_switch::register::Pair;
use inca_switch::{
    AccessError, ArrayDecl, DataPlane, Declare, DeclareError, ObjectId, RegisterHandle,
};

/// A value's register arrays.
#[derive(Debug, Clone, Default)]
pub enum Values {
    /// Not declared yet.
    #[default]
    None,
    /// One 32-bit word per array.
    Words(Vec<RegisterHandle<u32>>),
    /// Two words per array: word `2i` in `hi`, `2i + 1` in `lo`.
    Pairs(Vec<RegisterHandle<Pair>>),
}

impl Values {
    /// Declares `words` words (rounded up to pairs when `pairs`) as arrays
    /// `nc_value0..` of `slots` entries, after `after`.
    pub fn declare(
        d: &mut Declare,
        words: usize,
        pairs: bool,
        slots: usize,
        after: &[ObjectId],
    ) -> Result<Self, DeclareError> {
        let decl = |i: usize| ArrayDecl::new(&format!("nc_value{i}"), slots).after(after);
        Ok(if pairs {
            Values::Pairs(
                (0..words.div_ceil(2))
                    .map(|i| d.register::<Pair>(decl(i)))
                    .collect::<Result<_, _>>()?,
            )
        } else {
            Values::Words(
                (0..words)
                    .map(|i| d.register::<u32>(decl(i)))
                    .collect::<Result<_, _>>()?,
            )
        })
    }

    /// Reads slot `slot` into `out` (as many words as declared).
    pub fn read(
        &self,
        dp: &mut DataPlane<'_>,
        slot: u64,
        out: &mut [u32],
    ) -> Result<(), AccessError> {
        match self {
            Values::None => {}
            Values::Words(regs) => {
                for (w, reg) in out.iter_mut().zip(regs) {
                    *w = dp.register(*reg, slot, |x| *x)?;
                }
            }
            Values::Pairs(regs) => {
                for (w, reg) in out.chunks_mut(2).zip(regs) {
                    let p = dp.register(*reg, slot, |x| *x)?;
                    w[0] = p.hi;
                    if let Some(lo) = w.get_mut(1) {
                        *lo = p.lo;
                    }
                }
            }
        }
        Ok(())
    }

    /// Writes `value` (as many words as declared) into slot `slot`.
    pub fn write(
        &self,
        dp: &mut DataPlane<'_>,
        slot: u64,
        value: &[u32],
    ) -> Result<(), AccessError> {
        match self {
            Values::None => {}
            Values::Words(regs) => {
                for (&w, reg) in value.iter().zip(regs) {
                    dp.register(*reg, slot, |x| *x = w)?;
                }
            }
            Values::Pairs(regs) => {
                for (w, reg) in value.chunks(2).zip(regs) {
                    let p = Pair {
                        hi: w[0],
                        lo: w.get(1).copied().unwrap_or(0),
                    };
                    dp.register(*reg, slot, |x| *x = p)?;
                }
            }
        }
        Ok(())
    }
}
