//! Every registered program passes the load-time check with its default
//! parameters on the profile it is meant for (`tofino`, or the smart NIC
//! for a device program): no double access, no dependency
//! missing or against its data flow, apart from the violations a program
//! declares known (printed, with their reasons). A regression in a
//! program's declarations or data path fails here.

use inca_apps::params::Params;
use inca_switch::loadcheck::LoadCheckOptions;
use inca_switch::Profile;

const SEED: u64 = 1;

#[test]
fn every_catalog_program_passes_the_load_time_check() {
    println!("seed {SEED}");
    let registry = inca::registry();
    let mut refused = Vec::new();
    let mut known = Vec::new();
    for (_, info) in registry.programs() {
        let name = registry.default_profile(info.name);
        let profile = Profile::by_name(name).unwrap_or_else(|e| panic!("profile {name}: {e}"));
        let r = registry
            .load_check(
                info.name,
                &Params::default(),
                &profile,
                LoadCheckOptions { seed: SEED },
            )
            .unwrap_or_else(|e| panic!("{}: {e}", info.name));
        print!("{r}");
        assert!(r.skipped.is_none(), "{}: skipped", info.name);
        assert!(r.passes > 0, "{}: no pass analysed", info.name);
        refused.extend(r.findings.iter().map(|f| f.to_string()));
        known.extend(r.known.iter().map(|(f, _)| f.object.clone()));
    }
    assert!(refused.is_empty(), "refused:\n{}", refused.join("\n"));
    // Today's known violations are RedPlane's shard-map lookup order only.
    assert!(known.iter().all(|o| o == "rp_shard_map"), "{known:?}");
}

/// The four-app composite of `experiments/composite-four-apps.toml` (its
/// default has no classifier rules, so no block would run).
#[test]
fn the_four_app_composite_passes_with_every_block_exercised() {
    println!("seed {SEED}");
    let params = Params::parse([
        "apps=nat,firewall,univmon,acl",
        "classify=nat:port=1;nat:port=2;firewall:port=3;firewall:port=4;univmon:port=5;univmon:port=6;acl:port=7;acl:port=0",
        "nat.flows=4096",
        "nat.outside_port=2",
        "firewall.flows=4096",
        "firewall.outside_port=4",
        "univmon.in_port=5",
        "univmon.out_port=6",
        "univmon.epoch_ms=20",
        "acl.out_port=7",
    ])
    .unwrap();
    let r = inca::registry()
        .load_check(
            "composite",
            &params,
            &Profile::tofino(),
            LoadCheckOptions { seed: SEED },
        )
        .unwrap();
    print!("{r}");
    assert!(r.passed(), "{r}");
    // Every block's objects were reached and perturbed, not just the
    // classifier's.
    assert!(r.accesses > 2 * r.passes && r.reruns > 100, "{r}");
}
