//! TCP flows from smoltcp hosts through NAT, firewall and load balancer,
//! end to end in the simulator.

use inca_sim::nodes::host::Host;
use inca_sim::scenario::Loaded;
use inca_sim::tcp::Outcome;

/// Runs `text` and returns, per host name, the outcomes of its TCP flows.
fn outcomes(text: &str) -> Vec<(String, Vec<Outcome>, u64)> {
    let loaded = Loaded::from_str(text, "e2e.toml", &[]).unwrap();
    println!("seed 1");
    let mut built = loaded.build(&inca::factory(), Some(1), None).unwrap();
    built.sim.run_until(built.duration, |_| {});
    built
        .hosts
        .iter()
        .map(|(name, id)| {
            let h = built.sim.node::<Host>(*id).unwrap();
            let flows = h.tcp_flows();
            (
                name.clone(),
                flows.iter().map(|f| f.outcome).collect(),
                flows
                    .iter()
                    .map(|f| f.bytes_sent_acked.max(f.bytes_received))
                    .sum(),
            )
        })
        .collect()
}

const CLIENT_SERVER: &str = r#"
duration = "200ms"
[defaults.link]
rate = "1Gbps"
delay = "2us"
[[host]]
name = "client"
ip = "10.0.0.1"
[[host.workload]]
kind = "tcp"
dst = "DST"
bytes = "4MB"
start = "1ms"
[[host]]
name = "server"
ip = "10.1.0.1"
[[host.workload]]
kind = "tcp_sink"
port = 5001
backlog = 4
[[link]]
a = "client:0"
b = "sw:1"
[[link]]
a = "sw:0"
b = "server:0"
"#;

fn assert_completed(results: &[(String, Vec<Outcome>, u64)], host: &str, bytes: u64) {
    let (_, outcomes, moved) = results.iter().find(|(n, _, _)| n == host).unwrap();
    assert_eq!(outcomes, &vec![Outcome::Completed], "{host}: {results:?}");
    assert_eq!(*moved, bytes, "{host}: {results:?}");
}

#[test]
fn tcp_through_nat() {
    let text = format!(
        "name = \"nat\"\n{}\n[[switch]]\nname = \"sw\"\nprogram = \"nat\"\nparams = {{ outside_port = 0 }}\n",
        CLIENT_SERVER.replace("DST", "10.1.0.1:5001")
    );
    assert_completed(&outcomes(&text), "client", 4_000_000);
}

#[test]
fn tcp_through_the_firewall() {
    let text = format!(
        "name = \"fw\"\n{}\n[[switch]]\nname = \"sw\"\nprogram = \"firewall\"\nparams = {{ outside_port = 0 }}\n",
        CLIENT_SERVER.replace("DST", "10.1.0.1:5001")
    );
    assert_completed(&outcomes(&text), "client", 4_000_000);
}

#[test]
fn tcp_through_the_load_balancer_to_both_backends() {
    // Clients on port 0; the VIP's pool is 10.1.0.1 on port 1 and 10.1.0.2
    // on port 2 (the default pool layout).
    let mut text = String::from(
        r#"name = "lb"
duration = "200ms"
[defaults.link]
rate = "1Gbps"
delay = "2us"
[[switch]]
name = "sw"
program = "lb"
params = { vip = "192.0.2.1", vip_port = 5001, backends = 2, buckets = 4 }
announce = ["192.0.2.1/32"]
[[router]]
name = "edge"
[[host]]
name = "s1"
ip = "10.1.0.1"
[[host.workload]]
kind = "tcp_sink"
port = 5001
backlog = 8
[[host]]
name = "s2"
ip = "10.1.0.2"
[[host.workload]]
kind = "tcp_sink"
port = 5001
backlog = 8
[[link]]
a = "edge:0"
b = "sw:0"
[[link]]
a = "sw:1"
b = "s1:0"
[[link]]
a = "sw:2"
b = "s2:0"
"#,
    );
    for i in 1..=4 {
        text.push_str(&format!(
            "[[host]]\nname = \"c{i}\"\nip = \"10.0.0.{i}\"\n[[host.workload]]\nkind = \"tcp\"\ndst = \"192.0.2.1:5001\"\nbytes = \"1MB\"\nstart = \"{i}ms\"\nsrc_port = {}\n[[link]]\na = \"c{i}:0\"\nb = \"edge:{i}\"\n",
            40_000 + i
        ));
    }
    let results = outcomes(&text);
    for i in 1..=4 {
        assert_completed(&results, &format!("c{i}"), 1_000_000);
    }
    let served = |s: &str| results.iter().find(|(n, _, _)| n == s).unwrap().2;
    assert_eq!(served("s1") + served("s2"), 4_000_000, "{results:?}");
    assert!(
        served("s1") > 0 && served("s2") > 0,
        "both backends serve: {results:?}"
    );
}
