//! The SRO experiments' run functions (spec §8.2 exp. 2–4), called as
//! `inca sweep` calls them: the errors bad params get, and (ignored) the
//! full runs' numbers. Their quick shapes are asserted through `inca sweep`
//! in crates/inca/tests/swish_experiments.rs.

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
    let e = run(
        "swish-sro-update-rate",
        &["rate=10M", "duration_ms=1000"],
        1,
    )
    .unwrap_err();
    assert!(e.contains("rate") && e.contains("duration_ms"), "{e}");
    let e = run("swish-sro-nat-throughput", &["window_us=100000"], 1).unwrap_err();
    assert!(e.contains("window_us"), "{e}");
    let e = run("swish-sro-nat-latency", &["replicas=0"], 1).unwrap_err();
    assert!(e.contains("replicas"), "{e}");
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
