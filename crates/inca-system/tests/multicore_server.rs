//! The software NAT on a multi-core server, in the simulator: a generator
//! offers more than the server can take and the sink counts what comes
//! out; at low load the one-way latency is the sum of the model's parts;
//! one elephant flow loads one core.

use std::sync::Arc;

use inca_sim::engine::Simulation;
use inca_sim::nodes::host::Host;
use inca_sim::scenario::Loaded;
use inca_system::apps::AppsSystem;
use inca_system::server::ServerNode;
use inca_system::software_nat::SoftwareNat;
use inca_system::{Registry, SystemFactory};

const SEED: u64 = 15;

/// gen -- nat -- sink; `workloads` are the generator's `[[host.workload]]`
/// tables, `params` the server's.
fn scenario(link_rate: &str, params: &str, workloads: &str) -> Simulation {
    let text = format!(
        r#"
name = "sw_nat"
duration = "10ms"
seed = {SEED}

[defaults.link]
rate = "{link_rate}"
delay = "500ns"
queue = "4MB"

[[host]]
name = "gen"
ip = "10.0.0.1"
{workloads}

[[server]]
name = "nat"
kind = "sw_nat"
ip = "10.0.2.1"
params = {params}

[[host]]
name = "sink"
ip = "10.0.1.1"

[[link]]
a = "gen:0"
b = "nat:0"

[[link]]
a = "nat:1"
b = "sink:0"
"#
    );
    let factory = SystemFactory::new(Registry::new(vec![Arc::new(AppsSystem)]).unwrap());
    let loaded = Loaded::from_str(&text, "test", &[]).unwrap();
    loaded.build(&factory, None, None).unwrap().sim
}

fn sink(sim: &Simulation) -> &Host {
    sim.node::<Host>(sim.node_id("sink").unwrap()).unwrap()
}

fn server(sim: &Simulation) -> &ServerNode<SoftwareNat> {
    sim.node::<ServerNode<SoftwareNat>>(sim.node_id("nat").unwrap())
        .unwrap()
}

/// Frames per second through a `cores`-core NAT while the generator offers
/// 256-byte frames at 40 Gbps to its 10 GbE NIC.
fn throughput(cores: usize) -> f64 {
    let mut sim = scenario(
        "40Gbps",
        &format!("{{ cores = {cores}, nic = {{ line_rate_gbps = 10.0 }} }}"),
        r#"
[[host.workload]]
kind = "udp"
dst = "10.0.1.1:9"
rate = "line"
size = 256
flows = 1000
"#,
    );
    let (warm, end) = (500_000, 2_500_000);
    sim.run_until(warm, |_| {});
    let before = sink(&sim).stats().rx_packets;
    sim.run_until(end, |_| {});
    let got = sink(&sim).stats().rx_packets - before;
    let c = server(&sim).0.counters();
    println!(
        "{cores} cores: {} pps; drops: buffer {}, rings {}",
        got * 1_000_000_000 / (end - warm),
        c["rx_buffer_drops"],
        c["rx_ring_drops"]
    );
    assert!(
        c["rx_buffer_drops"] + c["rx_ring_drops"] > 0,
        "the generator offers more than capacity"
    );
    got as f64 * 1e9 / (end - warm) as f64
}

#[test]
fn throughput_scales_with_cores_until_the_nic_line_rate() {
    println!("seed {SEED}");
    // Model inputs: 1,100 ns per packet (the sw_nat default) and a 10 GbE
    // port: 256 B frames + 24 B of preamble, gap and FCS.
    let per_core = 1e9 / 1100.0;
    let nic_bound = 10e9 / ((256 + 24) * 8) as f64;
    let close = |got: f64, want: f64| (got - want).abs() / want < 0.03;
    let t: Vec<f64> = [1, 2, 4, 8, 16].iter().map(|&n| throughput(n)).collect();
    for (i, n) in [1.0, 2.0, 4.0].iter().enumerate() {
        assert!(
            close(t[i], n * per_core),
            "{n} cores: {} pps, want {}",
            t[i],
            n * per_core
        );
    }
    // Eight cores could do 7.3 Mpps; the NIC passes 4.46.
    assert!(
        close(t[3], nic_bound),
        "8 cores: {} pps at the NIC's {nic_bound}",
        t[3]
    );
    assert!(
        close(t[4], nic_bound),
        "16 cores: {} pps at the NIC's {nic_bound}",
        t[4]
    );
}

#[test]
fn low_load_latency_includes_dma_and_cpu_time() {
    println!("seed {SEED}");
    let mut sim = scenario(
        "10Gbps",
        "{ cores = 2 }",
        r#"
[[host.workload]]
kind = "udp"
dst = "10.0.1.1:9"
pps = 10000
size = 256
src_port = 4000
"#,
    );
    sim.run_until(5_000_000, |_| {});
    let h = sink(&sim);
    assert!(h.stats().rx_probes >= 40, "{:?}", h.stats());
    let (min, max) = h.latency_range().unwrap();
    // Each link: 280 wire bytes at 10 Gb/s + 500 ns.
    let link = 280 * 8 / 10 + 500;
    // The server (PCIe 2.0 x8: 4 bytes/ns, 24 B per TLP; reads 500 ns,
    // posted writes 250 ns): RX payload and descriptor writes, CPU,
    // doorbell, TX descriptor read, TX payload read.
    let rx_dma = (256 + 24) / 4 + (16 + 24) / 4 + 250;
    let cpu = 1100;
    let doorbell = 250;
    let tx_descriptor = 24 / 4 + 500 + (16 + 24) / 4;
    let tx_payload = 24 / 4 + 500 + (256 + 24) / 4;
    let server = rx_dma + cpu + doorbell + tx_descriptor + tx_payload;
    println!("one-way {min}..{max} ns; links 2 x {link}, server {server} (CPU {cpu})");
    assert_eq!(min, 2 * link + server);
    // Frames that open a batch also carry its descriptor prefetch request
    // and doorbell bytes: a few ns more, never a queue.
    assert!(max - min <= 20, "{min}..{max}");
}

#[test]
fn an_elephant_flow_loads_one_core() {
    println!("seed {SEED}");
    let mice = r#"
[[host.workload]]
name = "mice"
kind = "udp"
dst = "10.0.1.1:9"
pps = 400000
size = 128
flows = 1000
"#;
    let elephant = r#"
[[host.workload]]
name = "elephant"
kind = "udp"
dst = "10.0.1.1:9"
pps = 500000
size = 128
src_port = 7777
"#;
    let loads = |workloads: &str| {
        let mut sim = scenario("10Gbps", "{ cores = 4 }", workloads);
        sim.run_until(2_000_000, |_| {});
        let s = server(&sim);
        let c = s.0.counters();
        assert_eq!(
            c["rx_ring_drops"] + c["rx_buffer_drops"],
            0,
            "under capacity"
        );
        let per_core: Vec<u64> = s.0.core_stats().iter().map(|c| c.packets).collect();
        println!("{per_core:?}");
        let max = *per_core.iter().max().unwrap() as f64;
        let min = *per_core.iter().min().unwrap() as f64;
        max / min
    };
    let even = loads(mice);
    let skewed = loads(&format!("{mice}{elephant}"));
    assert!(even < 1.5, "1000 mice spread evenly: max/min {even:.2}");
    // The elephant's 500 kpps all land on one core, beside its share of
    // the mice (100 kpps per core).
    assert!(skewed > 4.0, "one elephant: max/min {skewed:.2}");
}

#[test]
fn the_example_scenario_runs_and_reports_per_core_counters() {
    println!("seed {SEED}");
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../experiments/examples/sw-nat-server.toml");
    let loaded = Loaded::from_file(&path, &[]).unwrap();
    let factory = SystemFactory::new(Registry::new(vec![Arc::new(AppsSystem)]).unwrap());
    let mut sim = loaded.build(&factory, Some(SEED), None).unwrap().sim;
    sim.run_until(1_000_000, |_| {});
    let reports = sim.node_reports();
    let (_, kind, nat) = reports.iter().find(|r| r.0 == "nat").unwrap();
    assert_eq!(*kind, "server");
    for core in 0..4 {
        assert!(nat.counters[&format!("core{core}_packets")] > 0);
        assert!(nat.counters[&format!("core{core}_busy_ns")] > 0);
    }
    assert!(nat.counters["nf_translated_out"] > 0);
    assert!(nat.counters["pcie_up_bytes"] > 0);
    assert!(sink(&sim).stats().rx_packets > 0);
}

#[test]
fn bad_server_params_are_refused_naming_the_field() {
    let factory = SystemFactory::new(Registry::new(vec![Arc::new(AppsSystem)]).unwrap());
    let build = |params: &str| {
        let text = format!(
            "name = \"x\"\nduration = \"1ms\"\n[[server]]\nname = \"nat\"\nkind = \"sw_nat\"\nip = \"10.0.2.1\"\nparams = {params}\n[[host]]\nname = \"a\"\nip = \"10.0.0.1\"\n[[host]]\nname = \"b\"\nip = \"10.0.1.1\"\n[[link]]\na = \"a:0\"\nb = \"nat:0\"\n[[link]]\na = \"nat:1\"\nb = \"b:0\"\n"
        );
        let loaded = Loaded::from_str(&text, "test", &[]).unwrap();
        loaded
            .build(&factory, None, None)
            .err()
            .map(|e| e.to_string())
    };
    assert_eq!(build("{ cores = 2 }"), None);
    let e = build("{ cores = 0 }").unwrap();
    assert!(e.contains("cores"), "{e}");
    let e = build("{ nic = { rx_ring = 0 } }").unwrap();
    assert!(e.contains("nic.rx_ring"), "{e}");
    let e = build("{ nic = { pcie = { lanes = 3 } } }").unwrap();
    assert!(e.contains("nic.pcie.lanes"), "{e}");
    let e = build("{ nic = { bogus = 1 } }").unwrap();
    assert!(e.contains("bogus"), "{e}");
    let e = build("{ rss = { reta_size = 100 } }").unwrap();
    assert!(e.contains("reta_size"), "{e}");
    let e = build("{ nat = { outside_port = 2 } }").unwrap();
    assert!(e.contains("port 2"), "{e}");
}
