//! TEA between processes (issue 7): a `tea_nat` switch process, two
//! `tea_dram` server processes, a traffic source and a sink, each an
//! `inca node` linked to the others by UDP datagrams on loopback
//! (unprivileged). The NAT's translation table lives in the servers' DRAM:
//! the test checks, through the metrics endpoints, that the servers answered
//! READs and the sink got translated packets, and (when tshark is
//! installed) that tshark decodes the switch–server traffic in the
//! switch's captures as RoCE (InfiniBand BTH over UDP 4791) — WRITEs,
//! READs and READ RESPONSEs — with nothing malformed.
//!
//! [our choice] The cache is off (`cache = 0`), so every packet of a
//! learned flow is looked up in DRAM: the count of READ RESPONSEs is then a
//! count of lookups.
//!
//! T_GRACE is 20 ms here (`grace_us`), not the simulator's 100 µs: a round
//! trip between debug processes over loopback took longer than 100 µs on a
//! slower 2-core VM, so every response was late, every lookup redone and
//! no packet reached the sink (seen 2026-11-28).

#[path = "common/nodes.rs"]
mod nodes;
use nodes::{free_tcp, free_udp, Nodes};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The metrics text of the node serving on `addr`.
fn scrape(addr: SocketAddr) -> String {
    let mut conn = TcpStream::connect(addr).unwrap();
    conn.write_all(b"GET /metrics HTTP/1.0\r\n\r\n").unwrap();
    let mut text = String::new();
    conn.read_to_string(&mut text).unwrap();
    text
}

/// The value of counter `name` of `node` in metrics `text` (0 if absent).
fn counter(text: &str, name: &str, node: &str) -> u64 {
    let key = format!("inca_{name}{{node=\"{node}\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&key))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

/// A UDP link: (a's local, b's local).
fn link() -> (SocketAddr, SocketAddr) {
    (free_udp(), free_udp())
}

fn port(id: u16, local: SocketAddr, peer: SocketAddr) -> String {
    format!("[[port]]\nid = {id}\nudp = {{ local = \"{local}\", peer = \"{peer}\" }}\n")
}

fn tshark_available() -> bool {
    Command::new("tshark")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// (opcode names, malformed count) tshark reports for a capture.
fn tshark_roce(pcap: &Path) -> (Vec<String>, usize) {
    let out = Command::new("tshark")
        .args(["-n", "-r"])
        .arg(pcap)
        .args([
            "-T",
            "fields",
            "-e",
            "infiniband.bth.opcode",
            "-e",
            "_ws.malformed",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "tshark: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let mut ops = Vec::new();
    let mut malformed = 0;
    for line in text.lines() {
        let mut f = line.split('\t');
        let op = f.next().unwrap_or("");
        if f.next().is_some_and(|m| !m.is_empty()) {
            malformed += 1;
        }
        if !op.is_empty() {
            ops.push(op.to_string());
        }
    }
    (ops, malformed)
}

#[test]
fn tea_lookups_cross_real_udp_between_processes_and_decode_as_roce() {
    let dir = std::env::temp_dir().join(format!("inca-node-tea-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let captures = dir.join("captures");
    let mut nodes = Nodes::new(dir.clone());
    let (gen_tea, tea_gen) = link();
    let (tea_sink, sink_tea) = link();
    let (tea_d1, d1_tea) = link();
    let (tea_d2, d2_tea) = link();
    let (m_tea, m_d1, m_d2, m_sink) = (free_tcp(), free_tcp(), free_tcp(), free_tcp());

    // The switch: port 0 inside (source), 1 outside (sink), 2 and 3 the
    // DRAM servers (server ids 0 and 1, every entry on both: R = 2).
    nodes.start(
        "tea",
        &format!(
            r#"name = "tea"
metrics = "{m_tea}"
capture_dir = "{cap}"
[device]
kind = "switch"
program = "tea_nat"
params = {{ servers = "2/10.0.0.1,3/10.0.0.2", replication = 2, cache = 0, entries = 4096, outside_port = 1, inside_port = 0, grace_us = 20000 }}
{p0}{p1}{p2}{p3}"#,
            cap = captures.display(),
            p0 = port(0, tea_gen, gen_tea),
            p1 = port(1, tea_sink, sink_tea),
            p2 = port(2, tea_d1, d1_tea),
            p3 = port(3, tea_d2, d2_tea),
        ),
    );
    for (name, id, ip, m, local, peer) in [
        ("dram1", 0, "10.0.0.1", m_d1, d1_tea, tea_d1),
        ("dram2", 1, "10.0.0.2", m_d2, d2_tea, tea_d2),
    ] {
        nodes.start(
            name,
            &format!(
                r#"name = "{name}"
metrics = "{m}"
[device]
kind = "server"
server = "tea_dram"
ip = "{ip}"
params = {{ server_id = {id}, mac = [2, 0, 0, 0, 10, {last}] }}
{p}"#,
                last = id + 1,
                p = port(0, local, peer),
            ),
        );
    }
    nodes.start(
        "sink",
        &format!(
            r#"name = "sink"
metrics = "{m_sink}"
[device]
kind = "host"
[device.config]
ip = "192.0.2.1"
{p}"#,
            p = port(0, sink_tea, tea_sink),
        ),
    );
    // Let the servers register their memory with the switch before
    // traffic (their agents say hello on start).
    std::thread::sleep(Duration::from_millis(500));
    // 8 flows at 1,000 packets per second.
    nodes.start(
        "gen",
        &format!(
            r#"name = "gen"
[device]
kind = "host"
gateway_mac = "02:00:00:00:00:01"
[device.config]
ip = "10.1.1.1"
[[device.config.workload]]
kind = "udp"
dst = "192.0.2.1:5000"
pps = 1000
size = 100
flows = 8
src_prefix = "10.2.0.0/29"
src_ports = [5000, 5000]
{p}"#,
            p = port(0, gen_tea, tea_gen),
        ),
    );

    // Wait until the sink has had a good share of the traffic.
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut sink_rx = 0;
    while Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(300));
        let m = scrape(m_sink);
        sink_rx = counter(&m, "rx_packets", "sink").max(counter(&m, "rx_frames", "sink"));
        if sink_rx >= 1000 {
            break;
        }
    }
    // The last metrics snapshot is at most 200 ms old.
    std::thread::sleep(Duration::from_millis(300));
    let tea = scrape(m_tea);
    let (d1, d2) = (scrape(m_d1), scrape(m_d2));
    let sink = scrape(m_sink);
    nodes.stop();

    let reads = |m: &str, n: &str| counter(m, "nic_read_response_packets", n);
    let cells = |m: &str, n: &str| counter(m, "agent_cell_writes", n);
    let (r1, r2) = (reads(&d1, "dram1"), reads(&d2, "dram2"));
    let (c1, c2) = (cells(&d1, "dram1"), cells(&d2, "dram2"));
    println!(
        "sink received {sink_rx}; READ RESPONSEs dram1 {r1} dram2 {r2}; table cells written dram1 {c1} dram2 {c2}"
    );
    assert!(sink_rx >= 1000, "the sink got {sink_rx} packets:\n{sink}");
    // Every forwarded packet of a learned flow was looked up in DRAM
    // (cache off), on the range's active replica (TEA reads one replica
    // and flips to the other only when it fails).
    assert!(
        r1 + r2 >= sink_rx / 2,
        "DRAM lookups answered: {r1} + {r2} for {sink_rx} packets\n{tea}\n{d1}\n{d2}"
    );
    // R = 2: the learned entries were written to both servers.
    assert!(c1 > 0 && c2 > 0, "table writes: dram1 {c1}, dram2 {c2}");
    assert!(
        counter(&tea, "rx_packets", "tea") > sink_rx,
        "the switch saw the packets and the responses:\n{tea}"
    );

    if !tshark_available() {
        let _ = std::io::Write::write_all(
            &mut std::io::stderr(),
            b"tshark is not installed: the RoCE decoding check is skipped\n",
        );
        return;
    }
    let mut all_ops = Vec::new();
    for p in [2, 3] {
        let pcap = captures.join(format!("tea-port{p}.pcap"));
        let (ops, malformed) = tshark_roce(&pcap);
        assert_eq!(malformed, 0, "{}: malformed packets", pcap.display());
        all_ops.extend(ops);
    }
    let count = |op: u32| {
        all_ops
            .iter()
            .filter(|o| o.parse::<u32>().ok() == Some(op))
            .count()
    };
    // RC opcodes: 10 RDMA WRITE Only, 12 RDMA READ Request, 16 RDMA READ
    // Response Only.
    let (w, r, rr) = (count(10), count(12), count(16));
    println!(
        "tshark decoded {} RoCE packets: {w} WRITE, {r} READ, {rr} READ RESPONSE",
        all_ops.len()
    );
    assert!(
        w > 0 && r > 0 && rr > 0,
        "WRITE {w}, READ {r}, READ RESPONSE {rr}"
    );
}
