//! Laws of the merge operators (specs/exoplane.md §5.6): ⊕ associative and
//! commutative with identity 0̸ for every operator and width; ⊖ inverts ⊕
//! for ADD; OR and MAX, which have no ⊖, are idempotent.

use inca_exoplane::sync::{Algebra, Merge, MergeError, MergeOp, Width};
use proptest::prelude::*;

fn any_merge() -> impl Strategy<Value = Merge> {
    (
        prop_oneof![Just(MergeOp::Add), Just(MergeOp::Or), Just(MergeOp::Max)],
        prop_oneof![
            Just(Width::W8),
            Just(Width::W16),
            Just(Width::W32),
            Just(Width::W64)
        ],
    )
        .prop_map(|(op, w)| Merge::new(op, w))
}

proptest! {
    #[test]
    fn associative_commutative_identity(m in any_merge(), a: u64, b: u64, c: u64) {
        prop_assert_eq!(m.combine(m.combine(a, b), c), m.combine(a, m.combine(b, c)));
        prop_assert_eq!(m.combine(a, b), m.combine(b, a));
        prop_assert_eq!(m.combine(a, m.identity()), m.canon(a));
        prop_assert_eq!(m.combine(a, b) & !m.width().mask(), 0, "result wider than w");
    }

    #[test]
    fn inverse_or_idempotent(m in any_merge(), a: u64, b: u64) {
        match (m.algebra(), m.inverse(a, b)) {
            (Algebra::Group, Some(d)) => {
                prop_assert_eq!(m.combine(d, b), m.canon(a));
                prop_assert_eq!(m.inverse(a, a), Some(m.identity()));
            }
            (Algebra::Semilattice, None) => prop_assert_eq!(m.combine(a, a), m.canon(a)),
            (alg, inv) => prop_assert!(false, "{alg:?} with inverse {inv:?}"),
        }
    }

    #[test]
    fn add_wraps_mod_2_pow_w(a: u8, b: u8) {
        let m = Merge::new(MergeOp::Add, Width::W8);
        prop_assert_eq!(m.combine(u64::from(a), u64::from(b)), u64::from(a.wrapping_add(b)));
        prop_assert_eq!(m.inverse(u64::from(a), u64::from(b)), Some(u64::from(a.wrapping_sub(b))));
    }
}

#[test]
fn wire_codes_round_trip_and_bad_ones_are_named() {
    for op in [MergeOp::Add, MergeOp::Or, MergeOp::Max] {
        for w in Width::ALL {
            let m = Merge::from_wire(op as u8, w.bits()).unwrap();
            assert_eq!((m.op(), m.width()), (op, w));
        }
    }
    assert_eq!(Merge::from_wire(4, 32), Err(MergeError::Op(4)));
    assert_eq!(Merge::from_wire(1, 12), Err(MergeError::Width(12)));
    assert_eq!(
        MergeError::Width(12).to_string(),
        "merge width 12 is not 8, 16, 32 or 64"
    );
}

#[test]
fn max_is_unsigned_and_or_is_bitwise() {
    let max = Merge::new(MergeOp::Max, Width::W16);
    assert_eq!(max.combine(0xffff, 1), 0xffff);
    assert_eq!(
        max.combine(0x1_0001, 2),
        2,
        "inputs are reduced to w bits first"
    );
    let or = Merge::new(MergeOp::Or, Width::W8);
    assert_eq!(or.combine(0b1010, 0b0110), 0b1110);
}
