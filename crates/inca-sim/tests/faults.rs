//! Faults and routing through whole scenarios (hosts and routers, no
//! programmable switches): pause, partition, loss changes, crash, randomised
//! faults, ECMP rerouting after a link failure, and link captures.

use inca_sim::engine::Node;
use inca_sim::nodes::host::Host;
use inca_sim::nodes::router::Router;
use inca_sim::scenario::{Built, FactoryError, Loaded, SwitchFactory};
use inca_switch::Profile;

struct NoSwitches;
impl SwitchFactory for NoSwitches {
    fn build(
        &self,
        program: &str,
        _: &[(String, String)],
        _: Profile,
    ) -> Result<Box<dyn Node>, FactoryError> {
        Err(format!("no programmable switches in this test (asked for {program})").into())
    }
}

fn build(text: &str, seed: u64, sets: &[&str]) -> Built {
    let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
    let loaded = Loaded::from_str(text, "test.toml", &sets).unwrap();
    println!("seed {seed}");
    loaded
        .build(&NoSwitches, Some(seed), Some(&std::env::temp_dir()))
        .unwrap()
}

/// Two hosts, `a` sending 1000 packets/s... per µs: one packet every 10 µs.
const PAIR: &str = r#"name = "pair"
duration = "10ms"
[[host]]
name = "a"
ip = "10.0.0.1"
[[host.workload]]
kind = "udp"
dst = "10.0.0.2:9"
pps = 100000
size = 200
[[host]]
name = "b"
ip = "10.0.0.2"
[[link]]
a = "a:0"
b = "b:0"
"#;

fn rx(b: &Built, name: &str) -> u64 {
    let id = b.sim.node_id(name).unwrap();
    b.sim.node::<Host>(id).unwrap().stats().rx_packets
}

fn run(mut b: Built) -> Built {
    b.sim.run_until(b.duration, |_| {});
    // Hosts and routers keep the device contract under every fault here.
    assert_eq!(
        b.sim.contract_violations(),
        0,
        "{:?}",
        b.sim.first_contract_violation()
    );
    b
}

#[test]
fn a_partition_stops_traffic_until_healed() {
    let text =
        format!("{PAIR}\n[[fault]]\nat = \"2ms\"\npartition = [[\"a\"], [\"b\"]]\nfor = \"3ms\"\n");
    let b = run(build(&text, 1, &[]));
    // 10 ms at one packet per 10 µs = 1000 sent; 3 ms of them lost.
    assert_eq!(rx(&b, "a"), 0);
    let got = rx(&b, "b");
    assert!((690..=710).contains(&got), "received {got}");
    assert_eq!(b.sim.fault_log.len(), 2, "{:?}", b.sim.fault_log);
}

#[test]
fn a_paused_node_handles_its_backlog_when_it_resumes() {
    let text = format!("{PAIR}\n[[fault]]\nat = \"2ms\"\npause = \"b\"\nfor = \"3ms\"\n");
    let b = run(build(&text, 1, &[]));
    // Nothing is lost: what arrived during the pause is handled after it.
    assert_eq!(rx(&b, "b"), 1000);
    let lat = b
        .sim
        .node::<Host>(b.sim.node_id("b").unwrap())
        .unwrap()
        .latency_range()
        .unwrap();
    assert!(
        lat.1 >= 3_000_000,
        "the first packet of the pause waited ~3 ms: {lat:?}"
    );
}

#[test]
fn a_crashed_node_drops_what_reaches_it_and_restarts_empty() {
    let text = format!("{PAIR}\n[[fault]]\nat = \"2ms\"\ncrash = \"b\"\nfor = \"3ms\"\n");
    let b = run(build(&text, 1, &[]));
    let got = rx(&b, "b");
    assert!((690..=710).contains(&got), "received {got}");
    // The link is dark while b is down: a's frames die on it.
    let down = b
        .sim
        .channel(b.sim.link_id("a-b").unwrap(), 0)
        .unwrap()
        .stats
        .down_drops;
    assert!((290..=310).contains(&down), "{down}");
}

#[test]
fn a_loss_change_mid_run_takes_effect() {
    let text =
        format!("{PAIR}\n[[fault]]\nat = \"5ms\"\nloss = {{ link = \"a-b\", loss = 0.5 }}\n");
    let b = run(build(&text, 3, &[]));
    let lost = b
        .sim
        .channel(b.sim.link_id("a-b").unwrap(), 0)
        .unwrap()
        .stats
        .lost;
    // Half of the last 500 packets, give or take.
    assert!((200..=300).contains(&lost), "{lost}");
}

#[test]
fn random_faults_follow_the_seed() {
    let text = format!(
        "{PAIR}\n[random_faults]\nmean_interval = \"1ms\"\ndown_for = \"200us\"\nkinds = [\"link\", \"pause\"]\nnodes = [\"b\"]\n"
    );
    let log = |seed| {
        let b = run(build(&text, seed, &[]));
        b.sim.fault_log.clone()
    };
    let (a1, a2, b1) = (log(5), log(5), log(6));
    assert!(
        a1.len() >= 6,
        "about 10 faults and their ends in 10 ms: {a1:?}"
    );
    assert_eq!(a1, a2, "same seed, same faults");
    assert_ne!(a1, b1, "another seed, other faults");
}

/// h1 — r1 — {ra, rb} — r2 — h2: two equal-cost paths.
const DIAMOND: &str = r#"name = "diamond"
duration = "200ms"
bin = "10ms"
[[router]]
name = "r1"
detect_delay = "20ms"
[[router]]
name = "ra"
[[router]]
name = "rb"
[[router]]
name = "r2"
[[host]]
name = "h1"
ip = "10.0.0.1"
[[host.workload]]
kind = "udp"
dst = "10.0.1.1:9"
pps = 100000
flows = 64
[[host]]
name = "h2"
ip = "10.0.1.1"
[[link]]
a = "h1:0"
b = "r1:0"
[[link]]
a = "r1:1"
b = "ra:0"
[[link]]
a = "r1:2"
b = "rb:0"
[[link]]
a = "ra:1"
b = "r2:1"
[[link]]
a = "rb:1"
b = "r2:2"
[[link]]
a = "r2:0"
b = "h2:0"
[[fault]]
at = "100ms"
link_down = "r1-ra"
"#;

#[test]
fn ecmp_spreads_flows_and_reroutes_after_the_detection_delay() {
    let b = run(build(DIAMOND, 1, &[]));
    let links = b.sim.link_reports();
    let series = |name: &str| {
        links
            .iter()
            .find(|l| l.link == name && l.from.starts_with("r1"))
            .unwrap()
            .throughput_bytes
            .values
            .clone()
    };
    let (via_a, via_b) = (series("r1-ra"), series("r1-rb"));
    // Before the failure both paths carry traffic.
    assert!(via_a[5] > 0 && via_b[5] > 0, "{via_a:?} {via_b:?}");
    // From the failure until detection (20 ms), ra's share is lost; after it,
    // everything goes through rb.
    assert_eq!(
        via_a[10..].iter().sum::<u64>(),
        0,
        "nothing is delivered over the dead link"
    );
    let before = via_b[5];
    let after = via_b[15];
    assert!(
        after > before * 3 / 2,
        "rb takes over after detection: {before} → {after}"
    );
    let r1 = b.sim.node::<Router>(b.sim.node_id("r1").unwrap()).unwrap();
    assert!(r1.stats().rerouted > 0);
    // The receiver sees the gap: about 20 ms of ra's share missing.
    let sent = 200 * 100;
    let got = rx(&b, "h2");
    assert!(got < sent && got > sent - 2_000, "received {got} of {sent}");
}

#[test]
fn a_capture_holds_the_link_frames() {
    let dir = std::env::temp_dir().join(format!("inca-capture-{}", std::process::id()));
    let text = PAIR.replace("b = \"b:0\"", "b = \"b:0\"\ncapture = \"pair.pcap\"");
    let loaded = Loaded::from_str(&text, "test.toml", &["duration=1ms".to_string()]).unwrap();
    let mut b = loaded.build(&NoSwitches, Some(1), Some(&dir)).unwrap();
    b.sim.run_until(b.duration, |_| {});
    b.sim.finish_captures().unwrap();
    let frames = inca_wire::read_capture(dir.join("pair.pcap")).unwrap();
    assert_eq!(frames.len() as u64, rx(&b, "b"));
    assert!(
        frames.windows(2).all(|w| w[0].0 < w[1].0),
        "time stamps increase"
    );
    let _ = std::fs::remove_dir_all(dir);
}

/// Builds `[[server]]` nodes of kind "echo_host" as hosts with an echo
/// workload, to test how scenarios place, address and route servers.
struct EchoServers;
impl SwitchFactory for EchoServers {
    fn build(
        &self,
        p: &str,
        _: &[(String, String)],
        _: Profile,
    ) -> Result<Box<dyn Node>, FactoryError> {
        Err(format!("no switches here (asked for {p})").into())
    }
    fn build_server(
        &self,
        kind: &str,
        setup: &inca_sim::scenario::ServerSetup,
    ) -> Result<Box<dyn Node>, FactoryError> {
        if kind != "echo_host" {
            return Err(format!("unknown server kind {kind:?}").into());
        }
        let port: u16 = setup
            .params
            .get("port")
            .and_then(|v| v.as_integer())
            .ok_or("params.port: missing")? as u16;
        assert_eq!(setup.addresses["client"].octets(), [10, 0, 0, 1]);
        let text = format!(
            "ip = \"{}\"\n[[workload]]\nkind = \"echo\"\nport = {port}\n",
            setup.ip
        );
        let config =
            inca_sim::nodes::host::HostConfig::from_toml(&text).map_err(|e| e.to_string())?;
        let host = Host::new(
            config,
            setup.macs[0],
            setup.neighbour_macs[0],
            10_000_000_000,
        )
        .map_err(|e| e.to_string())?;
        Ok(Box::new(host))
    }
}

const WITH_SERVER: &str = r#"name = "server"
duration = "5ms"
[[router]]
name = "r"
[[host]]
name = "client"
ip = "10.0.0.1"
[[host.workload]]
kind = "request"
server = "10.9.0.1:7"
pps = 100000
size = 200
stop = "4ms"
[[server]]
name = "srv"
kind = "echo_host"
ip = "10.9.0.1"
params = { port = 7 }
[[link]]
a = "client:0"
b = "r:0"
[[link]]
a = "srv:0"
b = "r:1"
"#;

#[test]
fn servers_are_built_by_the_factory_and_routed_like_hosts() {
    let loaded = Loaded::from_str(WITH_SERVER, "test.toml", &[]).unwrap();
    let mut b = loaded.build(&EchoServers, Some(1), None).unwrap();
    b.sim.run_until(b.duration, |_| {});
    let id = b.sim.node_id("client").unwrap();
    let host = b.sim.node::<Host>(id).unwrap();
    let name = host.workload_names().next().unwrap().to_string();
    let responses = host.workload_stats(&name).unwrap().responses;
    assert!(responses >= 390, "only {responses} responses came back");
    // A bad kind and a missing server are errors naming the field and line.
    let e = Loaded::from_str(&WITH_SERVER.replace("echo_host", "nope"), "t.toml", &[])
        .unwrap()
        .build(&EchoServers, None, None)
        .err()
        .unwrap();
    assert!(
        e.0.contains("t.toml:16:8") && e.0.contains("server: unknown server kind"),
        "{e}"
    );
    let e = Loaded::from_str(WITH_SERVER, "t.toml", &[])
        .unwrap()
        .build(&NoSwitches, None, None)
        .err()
        .unwrap();
    assert!(e.0.contains("unknown server kind"), "{e}");
}
