//! `[[server]] kind = "clip_server"` in the testbed scenario
//! (experiments/clip/testbed.toml): a SNAT server core is charged exactly
//! §8.1's per-request prices through the multi-core server's CPU model
//! (I/O per frame, shim per request, a lookup each, an allocation per new
//! flow; the controller's datagrams I/O only), every packet comes back
//! translated, and a run is a function of its seed.

use std::collections::BTreeMap;
use std::sync::Arc;

use inca_clip::experiments::rig::Testbed;
use inca_clip::system::ClipSystem;

const SEED: u64 = 7;

/// The SNAT configuration on one core, 2,000 packets of 100 flows at
/// 100 kpps from 2 ms; every node's counters after the run.
fn run(seed: u64) -> BTreeMap<String, BTreeMap<String, u64>> {
    let set: Vec<String> = [
        "clip.program=\"clip_snat\"",
        "clip.params={ servers = \"1:2,2:3\", group = \"1\", route_port = 1 }",
        "clip1.params={ app = \"snat\", server_id = 1, cores = 1, pool = { base_ip = \"198.51.100.1\", lo = 1024, hi = 65535 } }",
        "gen.workload.load.flows=100",
        "gen.workload.load.count=2000",
        "gen.workload.load.start=\"2ms\"",
        "duration=\"30ms\"",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let mut tb = Testbed::build(&set, seed, Arc::new(ClipSystem)).unwrap();
    tb.run_until(30_000_000);
    tb.run_report()
        .nodes
        .into_iter()
        .map(|(name, _, r)| (name, r.counters))
        .collect()
}

#[test]
fn a_snat_core_is_charged_the_spec_s_prices_per_request() {
    println!("seed {SEED}");
    let nodes = run(SEED);
    let s = &nodes["clip1"];
    let (frames, requests) = (s["nf_frames"], s["nf_requests"]);
    let (hits, allocated) = (s["nf_app_hits"], s["nf_app_allocated"]);
    assert_eq!((frames, requests), (2_000, 2_000), "{s:?}");
    assert_eq!(hits + allocated, 2_000);
    assert!(
        (90..=100).contains(&allocated),
        "{allocated} of 100 flows seen"
    );
    // §8.1: I/O 400 ns a frame, shim 50 and lookup 300 a request,
    // allocation 500 a new flow; all of it on the one core. The
    // controller's datagrams (CLIP-CTL) pay I/O only.
    let ctl = s["nf_ctl_in"];
    assert_eq!(s["core0_packets"], 2_000 + ctl);
    let extra = 2_000 * (50 + 300) + allocated * 500;
    assert_eq!(s["core0_busy_ns"], (2_000 + ctl) * 400 + extra);
    assert_eq!(s["nf_cpu_extra_ns"], extra);
    assert_eq!(s["rx_ring_drops"] + s["rx_buffer_drops"], 0);
    // Every packet back through the switch to the sink, none left over.
    assert_eq!(nodes["sink"]["rx_packets"], 2_000);
    let sw = &nodes["clip"];
    assert_eq!(sw["clip_flight"], 2_000, "{sw:?}");
    assert_eq!(sw["clip_response"], 2_000);
}

#[test]
fn the_same_seed_gives_the_same_run() {
    println!("seed {SEED}");
    assert_eq!(run(SEED), run(SEED));
}
