//! `inca node` processes fed hostile datagrams over their UDP links (issue
//! 8), unprivileged: garbage, datagrams too short for an Ethernet header,
//! one of 64 KiB (beyond any frame a port carries), truncated frames, RDMA
//! requests for QPs a DRAM server never created, and RedPlane requests for
//! flows a state store has no lease for. Each is counted where the node's
//! Prometheus endpoint shows it and dropped (or, for a flow the store does
//! not know, refused), and the process keeps serving: a valid request
//! afterwards still gets its answer.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use inca_tea::server::agent_proto::{
    build_datagram, parse_udp, Body, Message, Reply, Request, AGENT_UDP_PORT,
};
use inca_wire::redplane::*;
use inca_wire::{build_udp_frame, Endpoints, RethRepr, RoceFrameBuilder};

fn free_udp() -> SocketAddr {
    UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
}

fn free_tcp() -> SocketAddr {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
}

/// One node process; SIGTERMed (then killed) on drop.
struct NodeProc {
    child: Child,
    dir: PathBuf,
}

impl NodeProc {
    fn start(name: &str, config: &str) -> NodeProc {
        let dir =
            std::env::temp_dir().join(format!("inca-hostile-node-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("node.toml");
        std::fs::write(&path, config).unwrap();
        let log = std::fs::File::create(dir.join("node.log")).unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_inca"))
            .args(["node", "--config", path.to_str().unwrap()])
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        NodeProc { child, dir }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("node.log")).unwrap_or_default()
    }

    /// Still running (not crashed by what it was fed).
    fn alive(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }

    /// SIGTERM; a clean exit.
    fn stop(mut self) {
        // SAFETY: kill(2) with the pid of our own child and a signal.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let status = self.child.wait().unwrap();
        assert!(status.success(), "exit {status:?}:\n{}", self.log());
    }
}

impl Drop for NodeProc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The value of counter `name` (node-level, or port 0's) in the metrics on
/// `addr`, once the node has published it (the text is refreshed every
/// 200 ms).
fn metric(addr: SocketAddr, name: &str, node: &str) -> u64 {
    let keys = [
        format!("inca_{name}{{node=\"{node}\"}} "),
        format!("inca_{name}{{node=\"{node}\",port=\"0\"}} "),
    ];
    let Ok(mut conn) = TcpStream::connect(addr) else {
        return 0;
    };
    let _ = conn.write_all(b"GET /metrics HTTP/1.0\r\n\r\n");
    let mut text = String::new();
    let _ = conn.read_to_string(&mut text);
    text.lines()
        .find_map(|l| keys.iter().find_map(|k| l.strip_prefix(k.as_str())))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

/// The whole metrics text, for failure messages.
fn scrape(addr: SocketAddr) -> String {
    let mut text = String::new();
    if let Ok(mut conn) = TcpStream::connect(addr) {
        let _ = conn.write_all(b"GET /metrics HTTP/1.0\r\n\r\n");
        let _ = conn.read_to_string(&mut text);
    }
    text
}

/// Waits (up to 10 s) until counter `name` reaches `at_least`; its value.
fn wait_metric(addr: SocketAddr, name: &str, node: &str, at_least: u64) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let v = metric(addr, name, node);
        if v >= at_least || Instant::now() > deadline {
            return v;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Sends `frame` until a datagram for which `answer` says yes comes back
/// (a node just started may not be listening yet); the answer.
fn ask<T>(
    sock: &UdpSocket,
    node: SocketAddr,
    frame: &[u8],
    answer: impl Fn(&[u8]) -> Option<T>,
) -> Option<T> {
    sock.set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut buf = vec![0u8; 65536];
    while Instant::now() < deadline {
        sock.send_to(frame, node).unwrap();
        let until = Instant::now() + Duration::from_millis(300);
        while Instant::now() < until {
            if let Ok((n, _)) = sock.recv_from(&mut buf) {
                if let Some(a) = answer(&buf[..n]) {
                    return Some(a);
                }
            }
        }
    }
    None
}

/// Garbage (seeded, so a failure reproduces), runts, one 64 KiB datagram
/// and truncations of `valid`; how many were runts or oversize (the port
/// counts those) and how many reached the device.
fn hostile_datagrams(sock: &UdpSocket, node: SocketAddr, valid: &[u8]) -> (u64, u64) {
    let (mut port_level, mut device_level) = (0, 0);
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for i in 0..200 {
        let len = 14 + (next() % 600) as usize;
        let junk: Vec<u8> = (0..len).map(|_| next() as u8).collect();
        sock.send_to(&junk, node).unwrap();
        device_level += 1;
        if i % 20 == 0 {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    for len in [0usize, 1, 13] {
        sock.send_to(&vec![0xAB; len], node).unwrap();
        port_level += 1;
    }
    sock.send_to(&vec![0x5A; 65_000], node).unwrap();
    port_level += 1;
    for cut in (14..valid.len()).step_by(3) {
        sock.send_to(&valid[..cut], node).unwrap();
        device_level += 1;
    }
    (port_level, device_level)
}

const CP_MAC: [u8; 6] = [2, 0, 0, 0, 0, 0xfe];
const CP_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 254);
const SERVER_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);

#[test]
fn a_dram_server_node_counts_and_drops_hostile_datagrams_and_keeps_serving() {
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    let (local, metrics) = (free_udp(), free_tcp());
    let node = NodeProc::start(
        "dram",
        &format!(
            r#"name = "dram"
metrics = "{metrics}"
[device]
kind = "server"
server = "tea_dram"
ip = "{SERVER_IP}"
params = {{ server_id = 0, mac = [2, 0, 0, 0, 10, 1] }}
[[port]]
id = 0
udp = {{ local = "{local}", peer = "{peer}" }}
"#,
            peer = sock.local_addr().unwrap()
        ),
    );
    let ep = Endpoints::new(CP_MAC, CP_IP, [2, 0, 0, 0, 10, 1], SERVER_IP);
    let heartbeat = |id| {
        build_datagram(
            &ep,
            40000,
            AGENT_UDP_PORT,
            &Message::request(id, Request::Heartbeat),
        )
        .unwrap()
    };
    let is_reply = |id: u32| {
        move |b: &[u8]| {
            let d = parse_udp(b)?;
            let m = Message::decode(d.payload).ok()?;
            (m.req_id == id && matches!(m.body, Body::Reply(Reply::HeartbeatOk))).then_some(())
        }
    };
    assert!(
        ask(&sock, local, &heartbeat(1), is_reply(1)).is_some(),
        "the server answers:\n{}",
        node.log()
    );

    let (port_level, _) = hostile_datagrams(&sock, local, &heartbeat(2));
    // RDMA WRITEs and READs, ICRC and all, for QPs nobody created.
    let unknown_qps = [0x100u32, 0x155, 0xFF_FFFF];
    for &qpn in &unknown_qps {
        let b = RoceFrameBuilder::new(ep, 0xC001, qpn);
        let reth = RethRepr {
            virtual_addr: 0x7f00_0000_0000,
            rkey: 0x1234,
            dma_len: 8,
        };
        sock.send_to(&b.write_only(0, true, reth, &[0xEE; 8]).unwrap(), local)
            .unwrap();
        sock.send_to(&b.read_request(1, reth, &[]).unwrap(), local)
            .unwrap();
    }

    let mut node = node;
    assert!(node.alive(), "the node died:\n{}", node.log());
    assert!(
        ask(&sock, local, &heartbeat(3), is_reply(3)).is_some(),
        "the server still answers:\n{}",
        node.log()
    );
    let malformed = wait_metric(metrics, "port_rx_malformed", "dram", port_level);
    assert_eq!(
        malformed, port_level,
        "runts and the 64 KiB datagram are counted by the port"
    );
    // Garbage broke neither the device contract nor an invariant.
    let text = scrape(metrics);
    for line in [
        "inca_runner_contract_violations{node=\"dram\"} 0",
        "inca_runner_invariant_violations{node=\"dram\"} 0",
    ] {
        assert!(text.lines().any(|l| l == line), "{line} in:\n{text}");
    }
    let unknown = wait_metric(
        metrics,
        "nic_drops_unknown_qp",
        "dram",
        2 * unknown_qps.len() as u64,
    );
    assert_eq!(
        unknown,
        2 * unknown_qps.len() as u64,
        "requests for unknown QPs are counted"
    );
    // Nothing else was ever RDMA-written: no QP exists.
    assert_eq!(metric(metrics, "nic_bytes_written", "dram"), 0);
    // The rest is counted too: as not for the server, not a message, or a
    // RoCE frame the NIC dropped.
    let counted = metric(metrics, "server_not_for_server", "dram")
        + metric(metrics, "agent_malformed", "dram")
        + metric(metrics, "nic_rx_frames", "dram");
    assert!(counted > 0, "garbage is counted");
    node.stop();
}

const STORE_IP: Ipv4Addr = Ipv4Addr::new(10, 9, 0, 1);
const SWITCH_IP: Ipv4Addr = Ipv4Addr::new(10, 1, 0, 1);

#[test]
fn a_store_node_counts_and_drops_hostile_datagrams_refuses_unknown_flows_and_keeps_serving() {
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    let (local, metrics) = (free_udp(), free_tcp());
    let node = NodeProc::start(
        "store",
        &format!(
            r#"name = "store"
metrics = "{metrics}"
[device]
kind = "server"
server = "redplane_store"
ip = "{STORE_IP}"
params = {{ workers = [{{ worker = 1, app = "kv" }}] }}
[[port]]
id = 0
udp = {{ local = "{local}", peer = "{peer}" }}
"#,
            peer = sock.local_addr().unwrap()
        ),
    );
    let ep = rp_endpoints(
        [2, 0, 0, 0, 0, 1],
        SWITCH_IP,
        [2, 0, 0, 0, 0x5e, 1],
        STORE_IP,
        7,
    );
    let req = |t: ReqType, seq: u16, key: [u8; 4]| {
        let r = RequestRepr {
            req_type: t,
            seq,
            key: &key,
            value: &[0, 0, 0, 1],
            piggyback: &[],
        };
        build_request_frame(&ep, STORE_PORT_BASE + 1, &r).unwrap()
    };
    let acked = |key: [u8; 4], want: AckType| {
        move |b: &[u8]| {
            let i = parse_udp_frame(b).ok()?;
            let a = Ack::new_checked(i.payload, 4, 4).ok()?;
            (a.key() == key && a.ack_type() == want).then_some(())
        }
    };
    let k0 = [0, 0, 0, 1];
    assert!(
        ask(
            &sock,
            local,
            &req(ReqType::LeaseNew, 0, k0),
            acked(k0, AckType::LeaseNew)
        )
        .is_some(),
        "the store answers:\n{}",
        node.log()
    );

    let (port_level, _) = hostile_datagrams(&sock, local, &req(ReqType::LeaseRenew, 1, k0));
    // Writes and buffered reads for flows the store never leased.
    let unknown_flows = 5u8;
    for i in 0..unknown_flows {
        sock.send_to(&req(ReqType::LeaseRenew, 7, [0xF0, 0, 0, i]), local)
            .unwrap();
    }
    // A datagram to a UDP port no worker serves.
    let r = RequestRepr {
        req_type: ReqType::LeaseNew,
        seq: 0,
        key: &k0,
        value: &[0; 4],
        piggyback: &[],
    };
    sock.send_to(
        &build_request_frame(&ep, STORE_PORT_BASE + 40, &r).unwrap(),
        local,
    )
    .unwrap();
    // Plain UDP to the store that is not RedPlane at all.
    let other = build_udp_frame(
        &Endpoints::new([2; 6], SWITCH_IP, [4; 6], STORE_IP),
        1,
        53,
        b"dns?",
        true,
    )
    .unwrap();
    sock.send_to(&other, local).unwrap();

    let mut node = node;
    assert!(node.alive(), "the node died:\n{}", node.log());
    let k1 = [0, 0, 0, 2];
    assert!(
        ask(
            &sock,
            local,
            &req(ReqType::LeaseNew, 0, k1),
            acked(k1, AckType::LeaseNew)
        )
        .is_some(),
        "the store still answers:\n{}",
        node.log()
    );
    assert_eq!(
        wait_metric(metrics, "port_rx_malformed", "store", port_level),
        port_level,
        "runts and the 64 KiB datagram are counted by the port"
    );
    assert!(
        wait_metric(metrics, "malformed", "store", 100) >= 100,
        "garbage is counted as malformed"
    );
    assert!(
        wait_metric(metrics, "unknown_port", "store", 2) >= 2,
        "datagrams to no worker are counted"
    );
    let refused = wait_metric(metrics, "tx_reject", "store", u64::from(unknown_flows));
    assert!(
        refused >= u64::from(unknown_flows),
        "writes for unknown flows are refused (LEASE_REJECT): {refused}\n{}",
        scrape(metrics)
    );
    // Only the two leases asked for hold a record.
    assert_eq!(metric(metrics, "records", "store"), 2);
    node.stop();
}
