//! Smart NICs as scenario devices: `experiments/smartnic-offload.toml` (a
//! tofino switch steering flows to two smart NICs) runs, both NICs process
//! packets with their tables in DRAM, and their counters reach the run
//! report and the printed summary, with per-hop latency through them;
//! `[[smartnic]]` mistakes name the field.

mod inca_run;
use inca_run::{inca_run, repo, tmp};

#[test]
fn the_switch_and_two_smartnics_scenario_reports_both_nics() {
    let out = tmp("offload");
    let scenario = repo().join("experiments/smartnic-offload.toml");
    println!("seed 1 (the scenario's)");
    let (ok, stdout, stderr) = inca_run(&[
        scenario.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--set",
        "duration=30ms",
    ]);
    assert!(ok, "{stderr}");
    let nodes: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("nodes.json")).unwrap()).unwrap();
    let node = |name: &str| {
        nodes
            .as_array()
            .unwrap()
            .iter()
            .find(|n| n["name"] == name)
            .unwrap_or_else(|| panic!("{name} in nodes.json"))
            .clone()
    };
    let counter = |n: &serde_json::Value, k: &str| {
        n["counters"][k]
            .as_u64()
            .unwrap_or_else(|| panic!("{} has no counter {k}: {}", n["name"], n["counters"]))
    };
    let edge = node("edge");
    assert_eq!(edge["kind"], "switch");
    for (nic, edge_port, table) in [("nic1", 2, "nat_out"), ("nic2", 3, "fw_conn")] {
        let n = node(nic);
        assert_eq!(n["kind"], "smartnic", "{nic}");
        // What the switch steered to the NIC is what the NIC received.
        let steered = counter(&edge, &format!("port{edge_port}.tx_packets"));
        assert!(steered > 0, "the switch steered nothing to {nic}");
        assert_eq!(counter(&n, "port0.rx_packets"), steered, "{nic}");
        assert!(counter(&n, "tx_packets") > 0, "{nic} forwarded nothing");
        // New flows went through the control channel into the tables.
        let entries = counter(&n, &format!("table.{table}.entries"));
        assert!(entries > 0, "{nic}: {table} is empty");
        assert_eq!(counter(&n, &format!("table.{table}.capacity")), 1_000_000);
        assert!(counter(&n, "cp_ops") >= entries, "{nic}");
        assert!(counter(&n, "cp_rpcs") > 0, "{nic}");
        // A million-flow table does not fit 8 MB of SRAM: it is in DRAM.
        assert!(counter(&n, "dram_used_bytes") > 8 << 20, "{nic}");
        assert_eq!(counter(&n, "dram_bytes"), 2 << 30, "{nic}");
        assert!(
            stdout.contains(&format!("{nic} (smartnic, ")),
            "the summary names {nic}:\n{stdout}"
        );
    }
    // The firewall drops c1's unsolicited flows to s2, the NAT nothing.
    assert!(counter(&node("nic2"), "program_drops") > 0);
    assert_eq!(counter(&node("nic1"), "program_drops"), 0);
    assert!(
        counter(&node("s1"), "rx_probes") > 0,
        "nothing crossed the NAT"
    );
    assert!(
        counter(&node("c1"), "rx_probes") > 0,
        "nothing crossed the firewall"
    );
    // The switch and the NICs stamp probes: s1's latency splits into hops
    // through the switch and the NAT NIC, one sample per probe each.
    let s1 = node("s1");
    for hop in [
        "hop:src>edge.in",
        "hop:edge.in>edge.out",
        "hop:edge.out>nic1.in",
        "hop:nic1.in>nic1.out",
        "hop:nic1.out>dst",
    ] {
        assert_eq!(
            s1["histograms"][hop]["count"].as_u64(),
            Some(counter(&s1, "rx_probes")),
            "{hop}: {}",
            s1["histograms"]
        );
    }
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn smartnic_mistakes_name_the_field() {
    let dir = tmp("bad");
    std::fs::create_dir_all(&dir).unwrap();
    let write = |name: &str, text: &str| {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    };
    let base = "name = \"bad\"\nduration = \"1ms\"\n[[host]]\nname = \"h\"\nip = \"10.0.0.1\"\n";
    // A smart NIC has two ports.
    let p = write(
        "ports.toml",
        &format!("{base}[[smartnic]]\nname = \"nic\"\nprogram = \"nat\"\n[[link]]\na = \"h:0\"\nb = \"nic:2\"\n"),
    );
    let (ok, _, err) = inca_run(&[p.to_str().unwrap()]);
    assert!(!ok);
    assert!(
        err.contains(":11:") && err.contains("ports 0 to 1"),
        "{err}"
    );
    // Its DRAM is given once.
    let p = write(
        "dram.toml",
        &format!("{base}[[smartnic]]\nname = \"nic\"\nprogram = \"nat\"\ndram = \"1GiB\"\nprofile_set = {{ dram_bytes = \"2GiB\" }}\n"),
    );
    let (ok, _, err) = inca_run(&[p.to_str().unwrap()]);
    assert!(!ok);
    assert!(err.contains(":9:") && err.contains("dram"), "{err}");
    // Its tables must fit its DRAM.
    let p = write(
        "small.toml",
        &format!("{base}[[smartnic]]\nname = \"nic\"\nprogram = \"nat\"\nparams = {{ flows = 1000000 }}\ndram = \"1MiB\"\n"),
    );
    let (ok, _, err) = inca_run(&[p.to_str().unwrap()]);
    assert!(!ok);
    assert!(err.contains("program") && err.contains("DRAM"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}
