//! Differential test: TEA's hot-key sketch and report filter index their
//! rows as `inca_apps::core::sketch`'s seeded family defines it (CRC-32 of
//! a row byte and the key, spec §5.1), for random keys of any length: the
//! attack crafter's indices (the data plane's, by the crafter's contract)
//! against the core's. The data plane's own use is checked through the
//! switch by `switch.rs` (a hot key's estimate read back at the core's
//! indices) and `attack.rs` (crafted keys collide in the data plane).

use inca_apps::core::sketch::RowHashes;
use inca_tea::attack::{bf_index, cms_index, BF_SEED, CMS_SEED};
use inca_tea::switch::dataplane::{BF_ARRAYS, BF_BITS, CMS_COLS, CMS_ROWS};
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]
    #[test]
    fn tea_sketch_indices_are_the_cores(key in prop::collection::vec(any::<u8>(), 0..80)) {
        let cms = RowHashes::Seeded { first: CMS_SEED };
        for r in 0..CMS_ROWS {
            let bits = CMS_COLS.trailing_zeros() as u8;
            prop_assert_eq!(cms_index(r, &key), cms.hash(r, bits, &key));
        }
        let bf = RowHashes::Seeded { first: BF_SEED };
        for j in 0..BF_ARRAYS {
            let bits = BF_BITS.trailing_zeros() as u8;
            prop_assert_eq!(bf_index(j, &key), bf.hash(j, bits, &key));
        }
    }
}
