//! Register arrays: per-entry state that the data plane reads and writes.
//!
//! On a Tofino-class switch a register array lives in one stage's SRAM and is
//! reached only through that stage's stateful ALU, which performs one
//! read-modify-write ("register action") of one entry per packet. An entry is
//! 8, 16 or 32 bits wide, or a pair of 32-bit values that one action updates
//! together. The one-access-per-packet rule is enforced by
//! [`crate::objects::DataPlane`]; this module is only the storage.

use crate::counter::IndexError;

/// A value a register entry can hold.
pub trait RegisterValue: Copy + Default + std::fmt::Debug + 'static {
    /// Width of one entry in bits (what the resource model charges).
    const BITS: u32;
    /// The value as a u64 (pairs: `hi << 32 | lo`), for control-plane reads.
    fn to_u64(self) -> u64;
    /// The value from a u64 (truncating), for control-plane writes.
    fn from_u64(v: u64) -> Self;
}

macro_rules! register_value {
    ($t:ty, $bits:expr) => {
        impl RegisterValue for $t {
            const BITS: u32 = $bits;
            fn to_u64(self) -> u64 {
                self as u64
            }
            fn from_u64(v: u64) -> Self {
                v as $t
            }
        }
    };
}
register_value!(u8, 8);
register_value!(u16, 16);
register_value!(u32, 32);

/// A pair of 32-bit values updated together by one register action, as a
/// Tofino stateful ALU allows (`lo` and `hi` halves of a 64-bit entry).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Pair {
    /// The low 32-bit value.
    pub lo: u32,
    /// The high 32-bit value.
    pub hi: u32,
}

impl RegisterValue for Pair {
    const BITS: u32 = 64;
    fn to_u64(self) -> u64 {
        (u64::from(self.hi) << 32) | u64::from(self.lo)
    }
    fn from_u64(v: u64) -> Self {
        Pair {
            lo: v as u32,
            hi: (v >> 32) as u32,
        }
    }
}

/// An array of register entries of type `T`.
#[derive(Debug, Clone)]
pub struct RegisterArray<T> {
    values: Vec<T>,
}

impl<T: RegisterValue> RegisterArray<T> {
    /// An array of `size` entries, all zero.
    pub fn new(size: usize) -> Self {
        RegisterArray {
            values: vec![T::default(); size],
        }
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// True if the array has no entries.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// Runs one register action on entry `index`: `action` gets the entry
    /// and may change it; its result is returned to the caller.
    pub fn execute<R>(
        &mut self,
        index: u64,
        action: impl FnOnce(&mut T) -> R,
    ) -> Result<R, IndexError> {
        let size = self.values.len() as u64;
        let slot = usize::try_from(index)
            .ok()
            .and_then(|i| self.values.get_mut(i))
            .ok_or(IndexError { index, size })?;
        Ok(action(slot))
    }

    /// Reads entry `index` (control plane).
    pub fn get(&self, index: u64) -> Result<T, IndexError> {
        usize::try_from(index)
            .ok()
            .and_then(|i| self.values.get(i))
            .copied()
            .ok_or(IndexError {
                index,
                size: self.values.len() as u64,
            })
    }

    /// Sets every entry back to zero.
    pub fn clear(&mut self) {
        self.values.fill(T::default());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn execute_reads_modifies_and_returns() {
        let mut r = RegisterArray::<u32>::new(4);
        let old = r.execute(2, |v| {
            let old = *v;
            *v += 5;
            old
        });
        assert_eq!(old, Ok(0));
        assert_eq!(r.get(2), Ok(5));
        assert!(r.execute(4, |_| ()).is_err());
        assert!(r.get(u64::MAX).is_err());
    }

    #[test]
    fn pair_round_trips_through_u64() {
        let p = Pair { lo: 7, hi: 9 };
        assert_eq!(Pair::from_u64(p.to_u64()), p);
        assert_eq!(u8::from_u64(0x1ff), 0xff);
    }
}
