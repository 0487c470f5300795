//! `inca node` as a process: a router on two UDP ports forwards real frames,
//! serves its counters, and stops cleanly on SIGTERM. Unprivileged.

use std::io::{Read, Write};
use std::net::{TcpStream, UdpSocket};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn free_udp() -> UdpSocket {
    UdpSocket::bind("127.0.0.1:0").unwrap()
}

#[test]
fn a_router_node_forwards_frames_serves_metrics_and_stops_on_sigterm() {
    let a = free_udp();
    let b = free_udp();
    b.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    // Ports the node will bind: find free ones by binding and releasing.
    let (p0, p1, m) = {
        let s0 = free_udp();
        let s1 = free_udp();
        let t = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        (
            s0.local_addr().unwrap(),
            s1.local_addr().unwrap(),
            t.local_addr().unwrap(),
        )
    };
    let dir = std::env::temp_dir().join(format!("inca-node-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let config = dir.join("r1.toml");
    std::fs::write(
        &config,
        format!(
            r#"name = "r1"
metrics = "{m}"
capture_dir = "{cap}"
[device]
kind = "router"
routes = [{{ prefix = "10.0.0.0/8", ports = [1] }}]
[[port]]
id = 0
udp = {{ local = "{p0}", peer = "{a}" }}
[[port]]
id = 1
udp = {{ local = "{p1}", peer = "{b}" }}
"#,
            cap = dir.display(),
            a = a.local_addr().unwrap(),
            b = b.local_addr().unwrap(),
        ),
    )
    .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_inca"))
        .args(["node", "--config", config.to_str().unwrap()])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let ep = inca_wire::Endpoints::new(
        [2; 6],
        "192.0.2.1".parse().unwrap(),
        [2; 6],
        "10.9.9.9".parse().unwrap(),
    );
    let frame = inca_wire::build_udp_frame(&ep, 1, 2, b"hello node", true).unwrap();
    let mut got = 0;
    let mut buf = [0u8; 2048];
    let deadline = Instant::now() + Duration::from_secs(10);
    while got < 5 && Instant::now() < deadline {
        a.send_to(&frame, p0).unwrap();
        if let Ok((len, _)) = b.recv_from(&mut buf) {
            assert!(buf[..len].ends_with(b"hello node"));
            got += 1;
        }
    }
    assert_eq!(got, 5, "the node forwards real datagrams");
    std::thread::sleep(Duration::from_millis(300));
    let mut conn = TcpStream::connect(m).unwrap();
    conn.write_all(b"GET /metrics HTTP/1.0\r\n\r\n").unwrap();
    let mut text = String::new();
    conn.read_to_string(&mut text).unwrap();
    assert!(text.contains("inca_tx_packets{node=\"r1\"}"), "{text}");
    assert!(
        text.contains("inca_port_rx_frames{node=\"r1\",port=\"0\"}"),
        "{text}"
    );
    // SIGTERM: a clean stop, captures closed.
    // SAFETY: kill(2) with a valid pid of our own child and a signal number.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let status = child.wait().unwrap();
    assert!(status.success(), "exit {status:?}");
    let frames = inca_wire::read_capture(dir.join("r1-port1.pcap")).unwrap();
    assert!(frames.len() >= 5, "{} frames captured", frames.len());
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_bad_config_names_the_field() {
    let dir = std::env::temp_dir().join(format!("inca-node-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let config = dir.join("bad.toml");
    std::fs::write(
        &config,
        "name = \"x\"\n[device]\nkind = \"switch\"\nprogrm = \"nat\"\n",
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_inca"))
        .args(["node", "--config", config.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("progrm") && err.contains("line"), "{err}");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_host_node_generates_traffic() {
    let sink = free_udp();
    sink.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let local = free_udp().local_addr().unwrap();
    let dir = std::env::temp_dir().join(format!("inca-node-host-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let config = dir.join("gen.toml");
    std::fs::write(
        &config,
        format!(
            r#"name = "gen"
[device]
kind = "host"
[device.config]
ip = "10.0.0.1"
[[device.config.workload]]
kind = "udp"
dst = "10.1.0.1:9"
pps = 1000
size = 100
[[port]]
id = 0
udp = {{ local = "{local}", peer = "{peer}" }}
"#,
            peer = sink.local_addr().unwrap()
        ),
    )
    .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_inca"))
        .args(["node", "--config", config.to_str().unwrap()])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut buf = [0u8; 2048];
    let mut got = 0;
    let deadline = Instant::now() + Duration::from_secs(10);
    while got < 20 && Instant::now() < deadline {
        if let Ok((len, _)) = sink.recv_from(&mut buf) {
            assert_eq!(len, 100, "the generator's frame size");
            let ip = inca_wire::Ipv4Packet::new_checked(&buf[14..len]).unwrap();
            assert_eq!(
                ip.dst_addr(),
                "10.1.0.1".parse::<std::net::Ipv4Addr>().unwrap()
            );
            got += 1;
        }
    }
    // SAFETY: kill(2) with a valid pid of our own child and a signal number.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    assert!(child.wait().unwrap().success());
    assert_eq!(got, 20, "a live generator at 1,000 pps sends frames");
    let _ = std::fs::remove_dir_all(dir);
}
