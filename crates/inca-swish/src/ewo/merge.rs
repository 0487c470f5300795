//! EWO merge functions (specs/swish.md §3.2): what a replica does with the
//! absolute values an UPDATE or SYNC brings, one array word at a time, as
//! a stateful ALU would. Every merge is commutative, associative and
//! idempotent (property E1, checked in the tests below on cells whose
//! counters and versions lie within half the serial space of each other —
//! serial arithmetic orders nothing further apart).
//!
//! - LWW: version = ts:24 ‖ rid:8; higher version wins, ts compared in
//!   24-bit serial arithmetic, then rid; [our choice] a full tie (equal
//!   versions, which one writer never produces) keeps the larger value, so
//!   the merge stays commutative on any input.
//! - G-counter slots: max in 32-bit serial arithmetic.
//! - G-set: OR. Max register: max.

/// Most slots an EWO counter has (N_max, §3.2 [our choice; stage budget]).
pub const N_MAX: usize = 8;

/// Later of two 32-bit serial numbers (RFC 1982 style): `b` if it is ahead
/// of `a` by less than 2^31.
pub fn serial_max(a: u32, b: u32) -> u32 {
    if (b.wrapping_sub(a) as i32) > 0 {
        b
    } else {
        a
    }
}

/// Whether 24-bit serial number `a` is ahead of `b`.
fn ts_ahead(a: u32, b: u32) -> bool {
    let d = a.wrapping_sub(b) & 0x00FF_FFFF;
    d != 0 && d < 0x0080_0000
}

/// An LWW version: logical time `ts` (24 bits kept) and the writer's rid
/// (low 8 bits).
pub fn version(ts: u32, rid: u16) -> u32 {
    ((ts & 0x00FF_FFFF) << 8) | u32::from(rid & 0xFF)
}

/// The logical time of a version.
pub fn version_ts(version: u32) -> u32 {
    version >> 8
}

/// Whether version `a` beats version `b` (ts, then rid).
pub fn version_newer(a: u32, b: u32) -> bool {
    let (ta, tb) = (version_ts(a), version_ts(b));
    if ta != tb {
        return ts_ahead(ta, tb);
    }
    (a & 0xFF) > (b & 0xFF)
}

/// An LWW cell: (value, version).
pub type Lww = (u32, u32);

/// Merges two LWW cells.
pub fn lww(a: Lww, b: Lww) -> Lww {
    if version_newer(b.1, a.1) || (b.1 == a.1 && b.0 > a.0) {
        b
    } else {
        a
    }
}

/// The local write of `value` by `rid` over cell `a`: ts one past the
/// stored one (a per-entry logical clock, [our choice] §3.2).
pub fn lww_write(a: Lww, value: u32, rid: u16) -> Lww {
    (value, version(version_ts(a.1).wrapping_add(1), rid))
}

/// Merges one G-counter slot (also each half of a PN-counter).
pub fn slot(a: u32, b: u32) -> u32 {
    serial_max(a, b)
}

/// The broken variant's slot merge (adds instead of max: not idempotent).
pub fn slot_broken(a: u32, b: u32) -> u32 {
    a.wrapping_add(b)
}

/// Merges a G-set word.
pub fn gset(a: u32, b: u32) -> u32 {
    a | b
}

/// Merges a max register.
pub fn max(a: u32, b: u32) -> u32 {
    a.max(b)
}

/// A G-counter's value: the sum of its slots (wrapping, as the data
/// plane's adders do).
pub fn counter_value(slots: &[u32]) -> u32 {
    slots.iter().fold(0u32, |s, v| s.wrapping_add(*v))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Three values within 2^30 of `base` (so any two are within 2^31).
    fn near(base: u32, off: [u32; 3]) -> [u32; 3] {
        off.map(|o| base.wrapping_add(o & 0x3FFF_FFFF))
    }

    /// A version near `ts` (within 2^22) by one of a few rids.
    fn ver(ts: u32, off: u32, rid: u8) -> u32 {
        version(ts.wrapping_add(off & 0x003F_FFFF), u16::from(rid % 4))
    }

    fn cells(c: &[u32], v: &[u32]) -> [Lww; 3] {
        [(c[0], v[0]), (c[1], v[1]), (c[2], v[2])]
    }

    proptest! {
        #[test]
        fn slot_merge_is_a_semilattice(base: u32, off: [u32; 3]) {
            let [a, b, c] = near(base, off);
            prop_assert_eq!(slot(a, b), slot(b, a));
            prop_assert_eq!(slot(slot(a, b), c), slot(a, slot(b, c)));
            prop_assert_eq!(slot(a, a), a);
            prop_assert_eq!(slot(slot(a, b), b), slot(a, b));
        }

        #[test]
        fn lww_merge_is_a_semilattice(
            ts: u32, offs: [u32; 3], rids: [u8; 3], vals: [u32; 3]
        ) {
            let v: Vec<u32> = (0..3).map(|i| ver(ts, offs[i], rids[i])).collect();
            let [a, b, c] = cells(&vals, &v);
            prop_assert_eq!(lww(a, b), lww(b, a));
            prop_assert_eq!(lww(lww(a, b), c), lww(a, lww(b, c)));
            prop_assert_eq!(lww(a, a), a);
            prop_assert_eq!(lww(lww(a, b), b), lww(a, b));
        }

        #[test]
        fn or_and_max_are_semilattices(a: u32, b: u32, c: u32) {
            for f in [gset as fn(u32, u32) -> u32, max] {
                prop_assert_eq!(f(a, b), f(b, a));
                prop_assert_eq!(f(f(a, b), c), f(a, f(b, c)));
                prop_assert_eq!(f(a, a), a);
            }
        }

        /// A G-counter cell merges slot by slot; the merged counter is at
        /// least each input (reads never go back after a merge).
        #[test]
        fn counter_cells_merge_to_an_upper_bound(
            base: u32, x in prop::array::uniform8(0u32..1 << 20),
            y in prop::array::uniform8(0u32..1 << 20)
        ) {
            let a: Vec<u32> = x.iter().map(|o| base.wrapping_add(*o)).collect();
            let b: Vec<u32> = y.iter().map(|o| base.wrapping_add(*o)).collect();
            let m: Vec<u32> = a.iter().zip(&b).map(|(p, q)| slot(*p, *q)).collect();
            let rel = |s: &[u32]| counter_value(s).wrapping_sub(base.wrapping_mul(8));
            prop_assert!(rel(&m) >= rel(&a) && rel(&m) >= rel(&b));
        }
    }

    #[test]
    fn a_local_write_beats_what_it_overwrote() {
        let stored = (5, version(0x00FF_FFFF, 3));
        let w = lww_write(stored, 9, 1);
        assert_eq!(version_ts(w.1), 0, "ts wraps in 24 bits");
        assert_eq!(lww(stored, w), w);
        assert_eq!(lww(w, stored), w);
        // Same ts: the higher rid wins.
        assert!(version_newer(version(7, 2), version(7, 1)));
    }

    #[test]
    fn the_broken_merge_is_not_idempotent() {
        assert_ne!(slot_broken(3, 3), 3);
        assert_eq!(slot(3, 3), 3);
    }
}
