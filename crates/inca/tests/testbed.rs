//! `inca testbed` end to end: real namespaces, veth pairs, `inca node`
//! processes, and real tools (ping, iperf3, tshark) through them.
//!
//! Needs root, `ip`, `iperf3`, `tshark`, `ethtool` and `ping`; without
//! them each test prints one line saying why it skips. The tests take a
//! lock, so they never run two testbeds (or two iperf3 measurements) at
//! once, and a guard takes every testbed down even when an assertion fails.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Mutex;
use std::time::Duration;

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

mod common;
use common::text;

const INCA: &str = env!("CARGO_BIN_EXE_inca");

fn run(program: &str, args: &[&str]) -> Output {
    Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {program}: {e}"))
}

/// A scenario written to a temporary folder, brought up; taken down on
/// drop whatever happened.
struct Testbed {
    dir: PathBuf,
    scenario: PathBuf,
    state: serde_json::Value,
}

impl Testbed {
    fn up(stem: &str, scenario: &str) -> Testbed {
        let dir = std::env::temp_dir().join(format!("inca-testbed-{stem}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(format!("{stem}.toml"));
        std::fs::write(&path, scenario).unwrap();
        let mut tb = Testbed {
            dir,
            scenario: path,
            state: serde_json::Value::Null,
        };
        let out = tb.inca(&["up", "--capture-dir", &tb.captures().to_string_lossy()]);
        assert!(out.status.success(), "testbed up failed:\n{}", text(&out));
        println!("{}", String::from_utf8_lossy(&out.stdout));
        let state = tb.dir.join("state").join(format!("{stem}.json"));
        tb.state = serde_json::from_str(&std::fs::read_to_string(&state).unwrap()).unwrap();
        tb
    }

    fn captures(&self) -> PathBuf {
        self.dir.join("captures")
    }

    fn inca(&self, args: &[&str]) -> Output {
        let (action, rest) = args.split_first().unwrap();
        Command::new(INCA)
            .args(["testbed", action, &self.scenario.to_string_lossy()])
            .args(rest)
            .env("INCA_TESTBED_DIR", self.dir.join("state"))
            .output()
            .unwrap()
    }

    fn names(&self, key: &str) -> Vec<String> {
        self.state[key]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|r| r["name"].as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    }

    fn namespace(&self, host: &str) -> String {
        self.state["namespaces"]
            .as_array()
            .unwrap()
            .iter()
            .find(|n| n["host"] == host)
            .and_then(|n| n["name"].as_str())
            .unwrap_or_else(|| panic!("no namespace for host {host}"))
            .to_string()
    }

    /// `cmd` in `host`'s namespace, bounded by `timeout_s`.
    fn exec(&self, host: &str, timeout_s: u32, cmd: &[&str]) -> Output {
        let ns = self.namespace(host);
        let t = timeout_s.to_string();
        let mut args = vec![t.as_str(), "ip", "netns", "exec", ns.as_str()];
        args.extend(cmd);
        run("timeout", &args)
    }

    /// Takes the testbed down and checks that everything it created is
    /// gone.
    fn down_and_check(&self) {
        let status = self.inca(&["status"]);
        assert!(
            status.status.success(),
            "status before down:\n{}",
            text(&status)
        );
        let out = self.inca(&["down"]);
        assert!(out.status.success(), "testbed down failed:\n{}", text(&out));
        let netns = text(&run("ip", &["netns", "list"]));
        for ns in self.names("namespaces") {
            assert!(
                !netns.contains(&ns),
                "namespace {ns} survived down:\n{netns}"
            );
        }
        let links = text(&run("ip", &["-o", "link", "show"]));
        for i in self.names("interfaces") {
            assert!(
                !links.contains(&format!(" {i}:")) && !links.contains(&format!(" {i}@")),
                "interface {i} survived down:\n{links}"
            );
        }
        let status = self.inca(&["status"]);
        assert!(!status.status.success(), "status after down says up");
    }

    /// iperf3 from `client` to `server_ip` (a server in `server`), in bit/s
    /// as the receiver counted.
    fn iperf(&self, client: &str, server: &str, server_ip: &str) -> f64 {
        let ns = self.namespace(server);
        let mut srv = Command::new("ip")
            .args(["netns", "exec", &ns, "iperf3", "-s", "-1"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let mut last = String::new();
        let mut bps = None;
        for _ in 0..10 {
            std::thread::sleep(Duration::from_millis(300));
            let out = self.exec(
                client,
                30,
                &[
                    "iperf3",
                    "-c",
                    server_ip,
                    "-t",
                    "3",
                    "-J",
                    "--connect-timeout",
                    "3000",
                ],
            );
            last = text(&out);
            if out.status.success() {
                let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
                bps = v["end"]["sum_received"]["bits_per_second"].as_f64();
                break;
            }
            if !last.contains("refused") {
                break;
            }
        }
        let _ = srv.kill();
        let _ = srv.wait();
        bps.unwrap_or_else(|| panic!("iperf3 failed:\n{last}"))
    }
}

impl Drop for Testbed {
    fn drop(&mut self) {
        let _ = self.inca(&["down"]);
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        } else {
            eprintln!("left {} for inspection", self.dir.display());
        }
    }
}

/// (source, destination) of every IPv4 packet in a pcap.
fn ip_pairs(pcap: &Path) -> Vec<(String, String)> {
    assert!(pcap.exists(), "no capture {}", pcap.display());
    let out = run(
        "tshark",
        &[
            "-n",
            // Without TCP analysis: on a long iperf3 capture it takes
            // minutes, and only the IP addresses matter here.
            "--disable-protocol",
            "tcp",
            "-r",
            &pcap.to_string_lossy(),
            "-T",
            "fields",
            "-e",
            "ip.src",
            "-e",
            "ip.dst",
        ],
    );
    assert!(out.status.success(), "tshark failed:\n{}", text(&out));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let (s, d) = l.split_once('\t')?;
            (!s.is_empty()).then(|| (s.to_string(), d.to_string()))
        })
        .collect()
}

/// The addresses seen on a port: asserts `public` appears as a source and
/// none of `hidden` appears at all.
fn assert_translated(pcap: &Path, public: &str, hidden: &[&str]) {
    let pairs = ip_pairs(pcap);
    let n = pairs.iter().filter(|(s, _)| s == public).count();
    assert!(
        n > 0,
        "{}: no packet from {public} among {} packets",
        pcap.display(),
        pairs.len()
    );
    for (s, d) in &pairs {
        for h in hidden {
            assert!(
                s != h && d != h,
                "{}: {h} leaked to this side ({s} -> {d})",
                pcap.display()
            );
        }
    }
    println!(
        "{}: {} IPv4 packets, {n} from {public}, none from or to {hidden:?}",
        pcap.display(),
        pairs.len()
    );
}

const ONE_NAT: &str = r#"
name = "live NAT"
duration = "1s"

[[switch]]
name = "nat1"
program = "nat"
params = { outside_port = 0, public = "198.51.100.1" }

[[host]]
name = "client"
ip = "10.0.0.1"

[[host]]
name = "server"
ip = "10.1.0.1"

[[link]]
a = "client:0"
b = "nat1:1"

[[link]]
a = "nat1:0"
b = "server:0"
"#;

#[test]
fn tcp_through_a_live_nat_is_translated() {
    skip_unless!("ip", "iperf3", "tshark", "ethtool", "ping");
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let tb = Testbed::up("t-nat", ONE_NAT);

    // The NAT translates ICMP echo by its identifier, as NATs do.
    let ping = tb.exec("client", 20, &["ping", "-c", "3", "-W", "2", "10.1.0.1"]);
    assert!(ping.status.success(), "ping through nat1:\n{}", text(&ping));
    println!("{}", String::from_utf8_lossy(&ping.stdout));

    let bps = tb.iperf("client", "server", "10.1.0.1");
    println!("iperf3 through nat1: {:.1} Mbit/s", bps / 1e6);
    assert!(bps > 0.0);

    // Captures are complete once the node has stopped.
    tb.down_and_check();
    let cap = tb.captures();
    assert_translated(&cap.join("nat1-port0.pcap"), "198.51.100.1", &["10.0.0.1"]);
    let inside = ip_pairs(&cap.join("nat1-port1.pcap"));
    assert!(inside.iter().any(|(s, _)| s == "10.0.0.1"));
    assert!(inside
        .iter()
        .all(|(s, d)| s != "198.51.100.1" && d != "198.51.100.1"));
}

const TWO_NATS: &str = r#"
name = "two live NATs in series"
duration = "1s"

[[switch]]
name = "nat1"
program = "nat"
params = { outside_port = 0, public = "198.51.100.1" }

[[switch]]
name = "nat2"
program = "nat"
params = { outside_port = 0, public = "203.0.113.1" }

[[host]]
name = "client"
ip = "10.0.0.1"

[[host]]
name = "server"
ip = "10.1.0.1"

[[link]]
a = "client:0"
b = "nat1:1"

[[link]]
a = "nat1:0"
b = "nat2:1"

[[link]]
a = "nat2:0"
b = "server:0"
"#;

#[test]
fn ping_and_tcp_through_two_switch_processes_in_series() {
    skip_unless!("ip", "iperf3", "tshark", "ethtool", "ping");
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let tb = Testbed::up("t-nat2", TWO_NATS);
    assert_eq!(tb.names("interfaces").len(), 3);
    let ping = tb.exec("client", 20, &["ping", "-c", "3", "-W", "2", "10.1.0.1"]);
    assert!(
        ping.status.success(),
        "ping through nat1 and nat2:\n{}",
        text(&ping)
    );
    let bps = tb.iperf("client", "server", "10.1.0.1");
    println!("iperf3 through nat1 and nat2: {:.1} Mbit/s", bps / 1e6);
    assert!(bps > 0.0);
    tb.down_and_check();
    let cap = tb.captures();
    assert_translated(&cap.join("nat1-port0.pcap"), "198.51.100.1", &["10.0.0.1"]);
    assert_translated(
        &cap.join("nat2-port0.pcap"),
        "203.0.113.1",
        &["10.0.0.1", "198.51.100.1"],
    );
}

const ROUTER: &str = r#"
name = "a live router"
duration = "1s"

[[router]]
name = "r1"

[[host]]
name = "client"
ip = "10.0.0.1"

[[host]]
name = "server"
ip = "10.1.0.1"

[[link]]
a = "client:0"
b = "r1:0"

[[link]]
a = "r1:1"
b = "server:0"
"#;

#[test]
fn ping_and_tcp_through_a_live_router() {
    skip_unless!("ip", "iperf3", "ethtool", "ping");
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let tb = Testbed::up("t-router", ROUTER);
    let ping = tb.exec("client", 20, &["ping", "-c", "3", "-W", "2", "10.1.0.1"]);
    assert!(ping.status.success(), "ping through r1:\n{}", text(&ping));
    println!("{}", String::from_utf8_lossy(&ping.stdout));
    let bps = tb.iperf("client", "server", "10.1.0.1");
    println!("iperf3 through r1: {:.1} Mbit/s", bps / 1e6);
    assert!(bps > 0.0);
    tb.down_and_check();
}

#[test]
fn a_failing_up_leaves_nothing_behind() {
    skip_unless!("ip");
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    // A namespace that already exists makes `ip netns add` fail half-way
    // (after the client's namespace and veth were created).
    let blocker = "inca-t-fail-server";
    let veths = || {
        text(&run("ip", &["-o", "link", "show", "type", "veth"]))
            .lines()
            .count()
    };
    let before = veths();
    let out = run("ip", &["netns", "add", blocker]);
    assert!(out.status.success(), "{}", text(&out));
    let dir = std::env::temp_dir().join(format!("inca-testbed-t-fail-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("t-fail.toml");
    std::fs::write(&path, ONE_NAT).unwrap();
    let out = Command::new(INCA)
        .args(["testbed", "up", &path.to_string_lossy()])
        .env("INCA_TESTBED_DIR", dir.join("state"))
        .output()
        .unwrap();
    let _ = run("ip", &["netns", "del", blocker]);
    let msg = text(&out);
    assert!(
        !out.status.success(),
        "up succeeded despite the clash:\n{msg}"
    );
    assert!(msg.contains(blocker), "{msg}");
    let netns = text(&run("ip", &["netns", "list"]));
    assert!(!netns.contains("inca-t-fail-client"), "{netns}");
    assert!(!dir.join("state/t-fail.json").exists());
    assert_eq!(veths(), before, "a veth pair survived the failed up");
    let _ = std::fs::remove_dir_all(&dir);
}
