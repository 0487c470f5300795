//! Adversarial workloads against TEA end to end (issue 8): the scenario
//! experiments/tea/attack-base.toml, shortened, with each attack on, in
//! checked mode. Every lookup must stay correct and every queue within its
//! bound; the legitimate traffic must still be delivered.

use std::collections::BTreeMap;
use std::path::Path;

use inca_apps::params::Params;
use inca_sim::engine::Node;
use inca_sim::nodes::attack::CraftRequest;
use inca_sim::scenario::{FactoryError, Loaded, ServerSetup, SwitchFactory};
use inca_switch::Profile;

/// Builds the TEA programs and DRAM servers, as the `inca` factory does.
struct TeaOnly;

impl SwitchFactory for TeaOnly {
    fn build(
        &self,
        program: &str,
        params: &[(String, String)],
        profile: Profile,
    ) -> Result<Box<dyn Node>, FactoryError> {
        let pairs: Vec<String> = params.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let params = Params::parse(pairs.iter().map(String::as_str)).map_err(|e| e.to_string())?;
        Ok(inca_tea::catalog::build(program, &params, &profile)?)
    }

    fn build_server(&self, kind: &str, setup: &ServerSetup) -> Result<Box<dyn Node>, FactoryError> {
        assert_eq!(kind, "tea_dram");
        let mac = |m: [u8; 6]| toml::Value::Array(m.iter().map(|&b| i64::from(b).into()).collect());
        let mut t = setup.params.clone();
        t.entry("ip")
            .or_insert_with(|| toml::Value::String(setup.ip.to_string()));
        t.entry("mac").or_insert_with(|| mac(setup.macs[0]));
        t.entry("controller_mac")
            .or_insert_with(|| mac(setup.neighbour_macs[0]));
        let config: inca_tea::server::DramServerConfig = toml::Value::Table(t)
            .try_into()
            .map_err(|e| format!("{e}"))?;
        inca_tea::server::DramServer::new(config)
            .map(|s| Box::new(s) as Box<dyn Node>)
            .map_err(|e| e.to_string().into())
    }

    fn craft_sources(
        &self,
        request: &CraftRequest,
    ) -> Result<Vec<std::net::SocketAddrV4>, FactoryError> {
        Ok(inca_tea::attack::craft_sources(request)?)
    }
}

/// Runs attack-base.toml with `sets`, shortened (the measured window
/// 210-213 ms) if `short`; every node's counters as `node/counter`.
fn run(short: bool, sets: &[&str]) -> BTreeMap<String, u64> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../experiments/tea/attack-base.toml");
    let shortened = [
        "duration=\"213ms\"",
        "gen1.workload.warm.count=2000",
        "gen1.workload.load.stop=\"213ms\"",
        "gen3.workload.newcomers.start=\"211ms\"",
        "gen3.workload.newcomers.stop=\"213ms\"",
    ];
    let mut all: Vec<String> = Vec::new();
    if short {
        all.extend(shortened.iter().map(|s| s.to_string()));
    }
    all.extend(sets.iter().map(|s| s.to_string()));
    let loaded = Loaded::from_file(&path, &all).unwrap();
    let mut built = loaded.build(&TeaOnly, None, None).unwrap();
    built.sim.run_until(built.duration, |_| {});
    let mut out = BTreeMap::new();
    for (name, _, r) in built.sim.node_reports() {
        for (k, v) in r.counters {
            out.insert(format!("{name}/{k}"), v);
        }
    }
    out
}

fn assert_correct_and_bounded(c: &BTreeMap<String, u64>, what: &str) {
    let get = |k: &str| {
        c.get(k)
            .copied()
            .unwrap_or_else(|| panic!("{what}: no {k}"))
    };
    assert!(
        get("tea/tea_check_lookups") > 10_000,
        "{what}: lookups judged"
    );
    assert_eq!(get("tea/tea_check_violations"), 0, "{what}: wrong lookups");
    assert_eq!(
        get("tea/tea_check_dropped"),
        0,
        "{what}: history incomplete"
    );
    assert!(get("tea/tea_intents_max") <= 65_536, "{what}");
    assert!(get("tea/tea_punts_waiting_max") <= 4_096, "{what}");
    assert!(get("tea/tea_stash_entries") <= 32_768, "{what}");
    // The legitimate load (5 Mpps over learned flows) still gets through.
    assert!(
        get("sink/rx_probes") > 10_000,
        "{what}: legitimate delivery"
    );
}

#[test]
fn attacks_leave_lookups_correct_and_queues_bounded() {
    let base = run(true, &[]);
    assert_correct_and_bounded(&base, "no attack");
    assert_eq!(base["sink/rx_udp_plain"], 0);
    // A new-flow flood at 1 Mpps for 14 ms (the whole scenario): the NAT's
    // slow path saturates, and its watchdog must not mistake busy QPs for
    // stalled ones (it used to rewind their PSNs, and 6,738 lookups
    // returned packets parked by older lookups).
    let flood = run(false, &["gen2.workload.flood.start=\"212ms\""]);
    assert_correct_and_bounded(&flood, "flood");
    assert!(flood["tea/tea_remote_misses"] > base["tea/tea_remote_misses"] + 3_000);
    // Keys sharing one bucket: stashed without displacement chains.
    let bucket = run(
        true,
        &[
            "gen2.workload.bucket.start=\"150ms\"",
            "gen2.workload.bucket.pps=5000",
        ],
    );
    assert_correct_and_bounded(&bucket, "bucket");
    assert!(
        bucket["tea/tea_hopeless_chains"] > 0,
        "colliding inserts were stashed at once: {bucket:?}"
    );
}
