//! SwiSh SDW live (the issue's live mode): the two replicas of
//! experiments/swish/sdw-local2.toml as two `inca node` switch processes,
//! the SwiSh controller as a third (a control session to each replica over
//! real TCP), and an app host at each replica, every data link a UDP
//! datagram link on loopback (unprivileged: no namespaces, so nothing to
//! skip). The controller reads both replicas' windows and INJECTs START;
//! then h1 adds 1 to key 7 at replica 1 and h2 queries key 7 at replica 2.
//! From the metrics endpoints: every update replica 1 took is what h2's
//! queries at replica 2 read once the window has advanced — and not before
//! two windows after the first update (D2). Then replica 1's process is
//! killed: its session resets, the controller recovers replica 2 alone
//! over its session (§5.6), and replica 2's windows advance again with
//! every update still read there. Then replica 1's process starts again,
//! empty: the controller joins it (§5.6 "Join") and a query there reads
//! every update too.
//!
//! Timers for a real network [our choice]: T_chk 100 µs, RTO_ready 2 ms and
//! an assumed RTT of 500 µs (RTO_data ≈ 1 ms) instead of the simulator's
//! 2 µs / 10 µs / 2 µs, which a process polling sockets cannot keep.

#[path = "common/nodes.rs"]
mod nodes;
use nodes::{free_tcp, free_udp, Nodes};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// The metrics text served on `addr` (None: not reachable yet).
fn scrape(addr: SocketAddr) -> Option<String> {
    let mut conn = TcpStream::connect(addr).ok()?;
    conn.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    conn.write_all(b"GET /metrics HTTP/1.0\r\n\r\n").ok()?;
    let mut text = String::new();
    conn.read_to_string(&mut text).ok()?;
    Some(text)
}

/// Counter `name` of `node` served on `addr` (None: not reachable yet).
fn metric(addr: SocketAddr, node: &str, name: &str) -> Option<u64> {
    let text = scrape(addr)?;
    let key = format!("inca_{name}{{node=\"{node}\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&key))
        .and_then(|v| v.trim().parse().ok())
}

fn wait_for(what: &str, secs: u64, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !ok() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn port(id: u16, local: SocketAddr, peer: SocketAddr) -> String {
    format!("[[port]]\nid = {id}\nudp = {{ local = \"{local}\", peer = \"{peer}\" }}\n")
}

/// A replica's node: port 0 its app host, 1 the other replica, 2 → 3 its
/// loopback.
#[allow(clippy::too_many_arguments)]
fn replica(
    rid: u16,
    metrics: SocketAddr,
    listen: SocketAddr,
    ctl: SocketAddr,
    app: (SocketAddr, SocketAddr),
    peer: (SocketAddr, SocketAddr),
) -> String {
    let ports = if rid == 1 { "[2, 1]" } else { "[1, 2]" };
    let (l2, l3) = (free_udp(), free_udp());
    format!(
        r#"name = "sdw{rid}"
metrics = "{metrics}"
session_listen = "{listen}"

[device]
kind = "switch"
program = "swish_sdw"
params = {{ replicas = 2, rid = {rid}, rows = 1, cols = 64, ports = {ports}, t_chk = 100000, rto_ready = 2000000, rtt = 500000 }}

[[session]]
id = {rid}
peer = "{ctl}"

{}{}{}{}"#,
        port(0, app.0, app.1),
        port(1, peer.0, peer.1),
        port(2, l2, l3),
        port(3, l3, l2),
    )
}

fn host(
    name: &str,
    ip: &str,
    metrics: SocketAddr,
    link: (SocketAddr, SocketAddr),
    w: &str,
) -> String {
    format!(
        r#"name = "{name}"
metrics = "{metrics}"
[device]
kind = "host"
[device.config]
ip = "{ip}"
[[device.config.workload]]
{w}
{}"#,
        port(0, link.0, link.1)
    )
}

#[test]
fn an_update_at_one_replica_process_is_read_at_the_other() {
    let dir = std::env::temp_dir().join(format!("inca-node-swish-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut nodes = Nodes::new(dir);
    let (m1, m2, mc, mh1, mh2) = (free_tcp(), free_tcp(), free_tcp(), free_tcp(), free_tcp());
    let (s1, s2, sc) = (free_tcp(), free_tcp(), free_tcp());
    let (h1_sw, sw_h1, h2_sw, sw_h2) = (free_udp(), free_udp(), free_udp(), free_udp());
    let (r1, r2) = (free_udp(), free_udp());
    nodes.start("sdw1", &replica(1, m1, s1, sc, (sw_h1, h1_sw), (r1, r2)));
    nodes.start("sdw2", &replica(2, m2, s2, sc, (sw_h2, h2_sw), (r2, r1)));
    nodes.start(
        "ctl",
        &format!(
            r#"name = "ctl"
metrics = "{mc}"
session_listen = "{sc}"

[device]
kind = "server"
server = "swish_controller"
ip = "10.0.0.100"
params = {{ replicas = [{{ rid = 1, session = 1 }}, {{ rid = 2, session = 2 }}], rows = 1, cols = 64 }}

[[session]]
id = 1
peer = "{s1}"

[[session]]
id = 2
peer = "{s2}"
"#
        ),
    );
    // The controller starts both replicas over its sessions; windows move.
    wait_for("the controller's STARTs", 30, || {
        metric(mc, "ctl", "ctl_starts") == Some(2)
    });
    wait_for("windows advancing at both replicas", 30, || {
        [(m1, "sdw1"), (m2, "sdw2")]
            .iter()
            .all(|&(m, n)| metric(m, n, "sdw_window").unwrap_or(0) >= 5)
    });
    assert_eq!(metric(mc, "ctl", "ctl_values_in"), Some(2));
    nodes.start(
        "h1",
        &host(
            "h1",
            "10.0.0.1",
            mh1,
            (h1_sw, sw_h1),
            "kind = \"swish_sdw_app\"\nname = \"u\"\nreplica = 1\nop = \"update\"\nkey = 7\ncount = 50\ngap = \"2ms\"",
        ),
    );
    nodes.start(
        "h2",
        &host(
            "h2",
            "10.0.0.2",
            mh2,
            (h2_sw, sw_h2),
            "kind = \"swish_sdw_app\"\nname = \"q\"\nreplica = 2\nop = \"query\"\nkey = 7\ncount = 4000\ngap = \"5ms\"",
        ),
    );
    wait_for("h1's 50 updates answered", 30, || {
        metric(mh1, "h1", "u_replies") == Some(50)
    });
    // Every update answered as accepted (B unbounded): replica 1 holds 50.
    let taken = metric(mh1, "h1", "u_accepted").unwrap();
    assert_eq!(taken, 50);
    wait_for("h2 reading all 50 updates at replica 2", 30, || {
        metric(mh2, "h2", "q_read_last") == Some(taken)
    });
    let first_update = metric(mh1, "h1", "u_first_win").unwrap();
    let first_seen = metric(mh2, "h2", "q_first_seen_win").unwrap();
    println!(
        "first update in window {first_update}, first seen at replica 2 in window {first_seen}"
    );
    assert!(
        first_seen >= first_update + 2,
        "an update of window w is visible from window w + 2 only"
    );
    assert!(metric(mh2, "h2", "q_read_max").unwrap() <= taken);
    assert_eq!(metric(m2, "sdw2", "sdw_malformed"), Some(0));

    // Fail-stop of replica 1; the controller recovers the survivor.
    nodes.kill("sdw1");
    let deadline = Instant::now() + Duration::from_secs(30);
    while metric(mc, "ctl", "ctl_recoveries") != Some(1) {
        if Instant::now() > deadline {
            let show = |a| {
                scrape(a)
                    .unwrap_or_default()
                    .lines()
                    .filter(|l| {
                        l.contains("ctl_") || l.contains("sdw_") || l.contains("session_messages")
                    })
                    .collect::<Vec<_>>()
                    .join("\n")
            };
            panic!("no recovery of replica 2:\n{}\n{}", show(mc), show(m2));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(metric(mc, "ctl", "ctl_recoveries_aborted"), Some(0));
    let wmax = metric(mc, "ctl", "ctl_recovery_wmax").unwrap();
    let took = metric(mc, "ctl", "ctl_recovery_done_ns").unwrap()
        - metric(mc, "ctl", "ctl_recovery_started_ns").unwrap();
    println!("recovered in window {wmax}, {took} ns after detection");
    wait_for("replica 2 advancing alone", 30, || {
        metric(m2, "sdw2", "sdw_window").unwrap_or(0) > wmax + 5
    });
    wait_for("queries answered after the recovery", 30, || {
        metric(mh2, "h2", "q_last_win").unwrap_or(0) > wmax + 1
    });
    assert_eq!(
        metric(mh2, "h2", "q_read_last"),
        Some(taken),
        "the recovered snapshot keeps every update"
    );
    // Replica 1's process starts again, empty: its session comes back and
    // the controller joins it (§5.6 "Join"); h1 comes back querying it.
    nodes.start("sdw1", &replica(1, m1, s1, sc, (sw_h1, h1_sw), (r1, r2)));
    wait_for("replica 1's join", 60, || {
        metric(mc, "ctl", "ctl_joins") == Some(1)
    });
    assert_eq!(metric(mc, "ctl", "ctl_joins_aborted"), Some(0));
    assert_eq!(metric(mc, "ctl", "ctl_failed"), Some(0));
    let joined = metric(mc, "ctl", "ctl_recovery_wmax").unwrap();
    println!("replica 1 joined in window {}", joined + 1);
    wait_for("both replicas advancing after the join", 30, || {
        [(m1, "sdw1"), (m2, "sdw2")]
            .iter()
            .all(|&(m, n)| metric(m, n, "sdw_window").unwrap_or(0) > joined + 5)
    });
    nodes.kill("h1");
    nodes.start(
        "h1",
        &host(
            "h1",
            "10.0.0.1",
            mh1,
            (h1_sw, sw_h1),
            "kind = \"swish_sdw_app\"\nname = \"q\"\nreplica = 1\nop = \"query\"\nkey = 7\ncount = 4000\ngap = \"5ms\"",
        ),
    );
    wait_for("the joined replica reading every update", 30, || {
        metric(mh1, "h1", "q_read_last") == Some(taken)
    });
    assert!(metric(mh1, "h1", "q_read_max").unwrap() <= taken);
}
