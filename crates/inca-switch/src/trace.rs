//! The access trace of one packet pass, for the load-time check.
//!
//! While a trace is attached to the objects ([`crate::objects::Objects`]),
//! every data-plane access appends an [`Access`]: which object, a
//! fingerprint of how it was reached (table key, array index and the value
//! an action left, bytes counted, hash input), and whether the rules
//! refused it. The trace also keeps what the pass changed (an undo log), so
//! the same pass can be run again from the same state, and it can perturb
//! the result of one chosen access: a table hit becomes a miss, a register
//! action sees another stored value, a meter another colour, a hash unit
//! another output. Comparing the accesses after the perturbed one with the
//! unperturbed run says which of them depend on its result
//! ([`crate::probe`]).

use crate::meter::{Color, Meter};

/// Perturbations tried on a table lookup: hit → miss / miss → first entry,
/// and hit or miss → last entry.
pub const TABLE_MODES: u8 = 2;
/// Perturbations of a register's stored value: zero (or one if zero), all
/// bits flipped, plus one, minus one.
pub const REGISTER_MODES: u8 = 4;
/// Perturbations of a meter's colour: the two other colours.
pub const METER_MODES: u8 = 2;
/// Perturbations of a hash output: all bits flipped, the lowest bit flipped.
pub const HASH_MODES: u8 = 2;

/// How the rules answered an access.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The second access to the object in this pass.
    Double,
    /// The object belongs to the other pipeline.
    WrongGress,
}

/// One access of a traced pass.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Access {
    /// The object (its index in the declaration list).
    pub object: usize,
    /// How it was reached (key, index, value written, bytes, hash input).
    pub fingerprint: u64,
    /// Why the rules refused it, if they did.
    pub refused: Option<Refusal>,
    /// How many perturbations its result admits (0: it has no result).
    pub modes: u8,
}

/// A change a traced pass made, to be undone.
#[derive(Debug, Clone)]
pub(crate) enum Undo {
    /// Register entry and its value before.
    Register(usize, u64, u64),
    /// Counter entry and its (packets, bytes) before.
    Counter(usize, u64, (u64, u64)),
    /// Meter entry and its state before.
    Meter(usize, u64, Option<Meter>),
}

/// The trace of one pass (see the module documentation).
#[derive(Debug, Default)]
pub struct PassTrace {
    /// The accesses, in order.
    pub accesses: Vec<Access>,
    /// Perturb the result of access number `.0` with mode `.1`.
    pub perturb: Option<(usize, u8)>,
    pub(crate) undo: Vec<Undo>,
}

impl PassTrace {
    /// A trace that perturbs access `perturb.0` with mode `perturb.1`.
    pub fn new(perturb: Option<(usize, u8)>) -> Self {
        PassTrace {
            perturb,
            ..PassTrace::default()
        }
    }

    /// Appends an access; returns its number.
    pub(crate) fn push(&mut self, object: usize, refused: Option<Refusal>) -> usize {
        self.accesses.push(Access {
            object,
            fingerprint: 0,
            refused,
            modes: 0,
        });
        self.accesses.len() - 1
    }

    /// Sets the fingerprint and the number of modes of the last access, and
    /// says which perturbation to apply to its result, if any.
    pub(crate) fn finish(&mut self, fingerprint: u64, modes: u8) -> Option<u8> {
        let n = self.accesses.len().checked_sub(1)?;
        let a = &mut self.accesses[n];
        a.fingerprint = fingerprint;
        a.modes = modes;
        match self.perturb {
            Some((at, mode)) if at == n && mode < modes => Some(mode),
            _ => None,
        }
    }
}

/// FNV-1a over `parts`: a fingerprint stable across runs and platforms.
pub fn fingerprint(parts: &[&[u8]]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        for &b in *part {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        // Separate the parts so ("ab", "c") and ("a", "bc") differ.
        h ^= 0xff;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// A register value as another run might have found it.
pub(crate) fn perturb_register(v: u64, mode: u8) -> u64 {
    match mode {
        0 if v == 0 => 1,
        0 => 0,
        1 => !v,
        2 => v.wrapping_add(1),
        _ => v.wrapping_sub(1),
    }
}

/// Another meter colour.
pub(crate) fn perturb_color(c: Color, mode: u8) -> Color {
    let order = [Color::Green, Color::Yellow, Color::Red];
    let i = order.iter().position(|&x| x == c).unwrap_or(0);
    order[(i + 1 + usize::from(mode)) % 3]
}

/// Another hash output of `bits` bits.
pub(crate) fn perturb_hash(h: u64, bits: u8, mode: u8) -> u64 {
    let mask = if bits >= 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    };
    match mode {
        0 => !h & mask,
        _ => (h ^ 1) & mask,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn perturbations_change_the_value() {
        for v in [0u64, 1, 7, u64::MAX] {
            for m in 0..REGISTER_MODES {
                assert_ne!(perturb_register(v, m), v, "value {v} mode {m}");
            }
        }
        for c in [Color::Green, Color::Yellow, Color::Red] {
            for m in 0..METER_MODES {
                assert_ne!(perturb_color(c, m), c);
            }
        }
        for bits in [1u8, 16, 32, 64] {
            for m in 0..HASH_MODES {
                assert_ne!(perturb_hash(0, bits, m), 0);
            }
        }
        assert_ne!(fingerprint(&[b"ab", b"c"]), fingerprint(&[b"a", b"bc"]));
    }

    #[test]
    fn only_the_chosen_access_is_perturbed() {
        let mut t = PassTrace::new(Some((1, 0)));
        t.push(0, None);
        assert_eq!(t.finish(5, 2), None);
        t.push(1, None);
        assert_eq!(t.finish(6, 2), Some(0));
        t.push(2, None);
        assert_eq!(t.finish(7, 0), None);
    }
}
