//! Short versions of the lookup-correctness campaign (spec §6 item 3 end to
//! end); `inca campaign` runs long ones with a seed count.

use inca_tea::campaign::{lookup_campaign, lookup_campaign_with, CampaignConfig};
use inca_tea::table::InsertOrder;

#[test]
fn campaign_finds_no_wrong_lookup() {
    for seed in 1..=2 {
        let s = lookup_campaign(seed, 120).unwrap_or_else(|v| panic!("{v}"));
        eprintln!("seed {seed}: {s:?}");
        assert!(s.dram > 2000 && s.sram > 100 && s.misses > 0, "{s:?}");
        assert!(s.displacements > 0, "the table must displace: {s:?}");
        assert!(s.cache_changes > 0, "the cache must change: {s:?}");
        assert_eq!(s.recoveries, 1, "server 0 recovered: {s:?}");
    }
}

#[test]
fn campaign_catches_the_thesis_insert_order() {
    // Spec §6 item 3: without the mutation shield the check must fail.
    let caught = (1..=6).any(|seed| {
        let c = CampaignConfig {
            insert_order: InsertOrder::ThesisAlg1,
            failover: false,
            lookup_gap: 1_000,
            ..CampaignConfig::new(seed, 120)
        };
        match lookup_campaign_with(&c) {
            Err(v) => {
                eprintln!("caught: {v}");
                assert!(
                    v.lookup.is_some(),
                    "a wrong lookup, not another failure: {v}"
                );
                true
            }
            Ok(_) => false,
        }
    });
    assert!(caught, "the unshielded insert order went unnoticed");
}

#[test]
#[ignore = "long: cargo test --release -p inca-tea --test campaign -- --ignored"]
fn long_campaign() {
    for seed in 1..=20 {
        let s = lookup_campaign(seed, 300).unwrap_or_else(|v| panic!("{v}"));
        eprintln!("seed {seed}: {s:?}");
    }
}
