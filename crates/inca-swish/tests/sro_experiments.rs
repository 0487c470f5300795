//! The SRO experiments' run functions (spec §8.2 exp. 2–4), called as
//! `inca sweep` calls them: their reports and the errors bad params get.

use inca_apps::params::Params;
use inca_swish::experiments::sro::experiments;
use inca_system::ExperimentRun;

fn run(name: &str, params: &[&str], seed: u64) -> Result<ExperimentRun, String> {
    let e = experiments().into_iter().find(|e| e.name == name).unwrap();
    let p = Params::parse(params.iter().copied()).unwrap();
    (e.run)(&p, seed)
}

fn result(run: &ExperimentRun) -> &inca_sim::metrics::NodeReport {
    &run.nodes.iter().find(|(n, _, _)| n == "result").unwrap().2
}

#[test]
fn bad_params_name_themselves() {
    let e = run("swish-sro-nat-latency", &["packetz=10"], 1).unwrap_err();
    assert!(e.contains("packetz"), "{e}");
    let e = run("swish-sro-update-rate", &["rate=fast"], 1).unwrap_err();
    assert!(e.contains("rate"), "{e}");
    let e = run("swish-sro-nat-throughput", &["frame_bytes=10"], 1).unwrap_err();
    assert!(e.contains("frame_bytes"), "{e}");
    let e = run("swish-sro-nat-latency", &["replicas=0"], 1).unwrap_err();
    assert!(e.contains("replicas"), "{e}");
}

fn counter(run: &ExperimentRun, name: &str) -> u64 {
    result(run).counters[name]
}

// The shapes below run each experiment as its descriptor's `--quick` does
// (experiments/swish/e2-e4); seed 1.

#[test]
fn e2_reads_keep_their_latency_and_updates_pay_for_the_tail() {
    println!("seed 1");
    let one = run("swish-sro-nat-latency", &["replicas=1", "packets=10000"], 1).unwrap();
    let two = run("swish-sro-nat-latency", &["replicas=2", "packets=10000"], 1).unwrap();
    for r in [&one, &two] {
        println!("{:?}", result(r).counters);
        assert_eq!(counter(r, "delivered"), 10_000);
        // The trace's share of new connections (21 % in expectation).
        assert!((150..=270).contains(&counter(r, "new_permille")));
    }
    let (r1, r2) = (counter(&one, "read_p50_ns"), counter(&two, "read_p50_ns"));
    assert!(r1.abs_diff(r2) < 1_000, "read p50 {r1} vs {r2} ns");
    // A read never waits for a CPU (20 us a punt): a lookup and a rewrite.
    for r in [&one, &two] {
        assert!(counter(r, "read_p99_ns") < 10_000);
    }
    // One more control-plane round on the tail: its CPU (20 us a punt) and
    // two table writes (20 us each) at least, on the tofino profile.
    let (u1, u2) = (
        counter(&one, "update_p50_ns"),
        counter(&two, "update_p50_ns"),
    );
    assert!(u2 > u1 + 50_000, "update p50 {u1} vs {u2} ns");
}

#[test]
fn e3_both_forward_at_line_rate_once_the_handshakes_are_done() {
    println!("seed 1");
    let pps: Vec<u64> = ["replicas=1", "replicas=2"]
        .iter()
        .map(|r| {
            let x = run("swish-sro-nat-throughput", &[r, "window_us=100"], 1).unwrap();
            println!("{r}: {:?}", result(&x).counters);
            assert_eq!(counter(&x, "handshakes_committed"), 64);
            assert_eq!(counter(&x, "tunnelled"), 0);
            assert_eq!(counter(&x, "delivered"), counter(&x, "offered"));
            assert!(counter(&x, "permille_of_line") >= 970);
            counter(&x, "pps")
        })
        .collect();
    assert!(pps[0].abs_diff(pps[1]) * 100 < pps[0], "{pps:?}");
}

#[test]
fn e4_updates_saturate_the_control_plane_and_the_chain_saturates_first() {
    println!("seed 1");
    let rates = [
        1_000u64, 2_000, 5_000, 8_000, 10_000, 12_000, 15_000, 20_000, 50_000, 100_000, 200_000,
    ];
    let sweep = |replicas: &str| -> Vec<(u64, u64, u64, u64)> {
        rates
            .iter()
            .map(|r| {
                let rate = format!("rate={r}");
                let x = run(
                    "swish-sro-update-rate",
                    &[replicas, &rate, "duration_ms=20", "drain_ms=20"],
                    1,
                )
                .unwrap();
                let c = |n| counter(&x, n);
                println!(
                    "{replicas} {rate}: mean {} p99 {} goodput {}/s",
                    c("mean_ns"),
                    c("p99_ns"),
                    c("goodput_per_s")
                );
                (
                    c("mean_ns"),
                    c("goodput_per_s"),
                    c("offered"),
                    c("delivered"),
                )
            })
            .collect()
    };
    let (one, two) = (sweep("replicas=1"), sweep("replicas=2"));
    for v in [&one, &two] {
        // Latency rises with rate and blows up past the ceiling.
        assert!(v[3].0 > v[0].0 && v[8].0 > v[3].0, "{v:?}");
        assert!(v[10].0 > 10 * v[0].0, "{v:?}");
        // Well under the ceiling every connection gets through.
        assert_eq!(v[1].2, v[1].3, "{v:?}");
    }
    // The single switch's plateau is its control channel's rate: one
    // register write, two table writes and the release's packet-out per
    // connection, serially (the tofino profile's costs).
    let cp = inca_switch::Profile::tofino().control_plane;
    let per_write = cp.register_op + cp.register_per_entry + 2 * cp.table_write + cp.punt_latency;
    let ceiling = 1e9 / per_write as f64;
    let plateau = one.iter().map(|p| p.1).max().unwrap() as f64;
    assert!(
        (0.9 * ceiling..1.03 * ceiling).contains(&plateau),
        "single plateau {plateau}/s, computed {ceiling:.0}/s"
    );
    // The replicated version saturates at a lower rate.
    let peak2 = two.iter().map(|p| p.1).max().unwrap() as f64;
    assert!(
        peak2 < 0.95 * plateau,
        "SRO peak {peak2}/s, single {plateau}/s"
    );
}

#[test]
#[ignore = "the full experiments (about a minute in a debug build): prints their numbers"]
fn full_runs() {
    for r in ["1", "2"] {
        let t = std::time::Instant::now();
        let rep = format!("replicas={r}");
        let x = run("swish-sro-nat-latency", &[&rep, "packets=10000"], 1).unwrap();
        println!("E2 {r}: {:?} {:?}", result(&x).counters, t.elapsed());
        let x = run("swish-sro-nat-throughput", &[&rep, "window_us=1000"], 1).unwrap();
        println!("E3 {r}: {:?} {:?}", result(&x).counters, t.elapsed());
        for rate in [
            "1000", "2000", "5000", "8000", "10000", "12000", "15000", "20000", "50000", "100000",
            "200000",
        ] {
            let rt = format!("rate={rate}");
            let x = run(
                "swish-sro-update-rate",
                &[&rep, &rt, "duration_ms=100", "drain_ms=50"],
                1,
            )
            .unwrap();
            println!("E4 {r} {rate}: {:?} {:?}", result(&x).counters, t.elapsed());
        }
    }
}
