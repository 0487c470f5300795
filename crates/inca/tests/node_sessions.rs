//! Control sessions live: two `inca node` processes running the
//! `session_pingpong` test device exchange control messages over real TCP on
//! loopback. tshark captures the exchange and must decode it as TCP carrying
//! the length-prefixed ping and pong messages, in order. Then the pong node
//! is killed (the ping node sees the session reset) and started again (the
//! session comes back and the remaining pings are answered).
//!
//! Capturing on `lo` needs root or dumpcap's capabilities (CI runs as
//! root). Skipped, saying so, only when tshark is not installed or
//! INCA_SKIP_TSHARK=1.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const COUNT: u32 = 40;

fn tshark() -> bool {
    if std::env::var("INCA_SKIP_TSHARK").as_deref() == Ok("1") {
        println!("skipped: INCA_SKIP_TSHARK=1, live session capture not run");
        return false;
    }
    match Command::new("tshark").arg("-v").output() {
        Ok(o) if o.status.success() => true,
        _ => {
            println!("skipped: tshark is not installed, live session capture not run");
            false
        }
    }
}

fn free_tcp() -> SocketAddr {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
}

fn write_config(
    dir: &Path,
    name: &str,
    role: &str,
    listen: SocketAddr,
    peer: SocketAddr,
    metrics: SocketAddr,
) -> PathBuf {
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(
        &path,
        format!(
            r#"name = "{name}"
metrics = "{metrics}"
session_listen = "{listen}"

[device]
kind = "switch"
program = "session_pingpong"
params = {{ role = "{role}", count = {COUNT}, size = 24, session = 5 }}

[[session]]
id = 5
peer = "{peer}"
"#
        ),
    )
    .unwrap();
    path
}

/// A node process, killed if the test fails before stopping it.
struct Node(Child);

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn spawn_node(config: &Path) -> Node {
    Node(
        Command::new(env!("CARGO_BIN_EXE_inca"))
            .args(["node", "--config", config.to_str().unwrap()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    )
}

fn signal(child: &Child, sig: i32) {
    // SAFETY: kill(2) with the pid of our own child and a signal number.
    unsafe { libc::kill(child.id() as i32, sig) };
}

/// The value of metric `name` on the node serving `addr` (None: not yet).
fn metric(addr: SocketAddr, name: &str) -> Option<u64> {
    let mut conn = TcpStream::connect(addr).ok()?;
    conn.set_read_timeout(Some(Duration::from_secs(1))).ok()?;
    conn.write_all(b"GET /metrics HTTP/1.0\r\n\r\n").ok()?;
    let mut text = String::new();
    conn.read_to_string(&mut text).ok()?;
    text.lines()
        .find(|l| l.starts_with(&format!("inca_{name}{{")))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

fn wait_for(what: &str, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !ok() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Messages (length-prefixed frames) of a TCP byte stream.
fn frames(mut stream: &[u8]) -> Vec<Vec<u8>> {
    let mut v = Vec::new();
    while stream.len() >= 4 {
        let len = u32::from_be_bytes(stream[..4].try_into().unwrap()) as usize;
        assert!(stream.len() >= 4 + len, "a frame cut short in the capture");
        v.push(stream[4..4 + len].to_vec());
        stream = &stream[4 + len..];
    }
    assert!(stream.is_empty(), "bytes left over: {stream:?}");
    v
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len() / 2)
        .map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).unwrap())
        .collect()
}

#[test]
fn two_nodes_exchange_control_messages_over_tcp_and_tshark_decodes_them() {
    if !tshark() {
        return;
    }
    let (la, lb, ma, mb) = (free_tcp(), free_tcp(), free_tcp(), free_tcp());
    let dir = std::env::temp_dir().join(format!("inca-node-sessions-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let pcap = dir.join("sessions.pcapng");
    let _ = std::fs::remove_file(&pcap);
    let filter = format!("tcp port {} or tcp port {}", la.port(), lb.port());
    let mut capture = Command::new("tshark")
        .args(["-i", "lo", "-f", &filter, "-w", pcap.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // tshark says "Capturing on 'Loopback: lo'" once it is capturing.
    let mut err = capture.stderr.take().unwrap();
    let mut said = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !String::from_utf8_lossy(&said).contains("Capturing on") {
        let mut buf = [0u8; 256];
        let n = err.read(&mut buf).unwrap_or(0);
        assert!(
            n > 0 && Instant::now() < deadline,
            "tshark could not capture on lo (root or dumpcap capabilities needed): {}",
            String::from_utf8_lossy(&said)
        );
        said.extend_from_slice(&buf[..n]);
    }
    std::thread::spawn(move || std::io::copy(&mut err, &mut std::io::sink()));
    // dumpcap may take a moment after saying so.
    std::thread::sleep(Duration::from_secs(1));

    let ca = write_config(&dir, "ping", "ping", la, lb, ma);
    let cb = write_config(&dir, "pong", "pong", lb, la, mb);
    let mut a = spawn_node(&ca);
    let mut b = spawn_node(&cb);
    wait_for("every pong", || metric(ma, "pingpong_done") == Some(1));
    assert_eq!(
        metric(ma, "pingpong_pongs_received"),
        Some(u64::from(COUNT))
    );
    assert_eq!(metric(ma, "pingpong_out_of_order"), Some(0));
    assert_eq!(
        metric(mb, "pingpong_pings_received"),
        Some(u64::from(COUNT))
    );
    assert_eq!(metric(mb, "pingpong_out_of_order"), Some(0));
    assert_eq!(metric(ma, "session_ups"), Some(1));
    std::thread::sleep(Duration::from_millis(500));
    signal(&capture, libc::SIGTERM);
    capture.wait().unwrap();

    // tshark reads the capture back as TCP: per connection direction, the
    // payload bytes in order.
    let out = Command::new("tshark")
        .args([
            "-r",
            pcap.to_str().unwrap(),
            "-Y",
            "tcp.len > 0",
            "-T",
            "fields",
        ])
        .args([
            "-e",
            "frame.protocols",
            "-e",
            "tcp.srcport",
            "-e",
            "tcp.dstport",
        ])
        .args(["-e", "tcp.payload"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let all = Command::new("tshark")
        .args(["-r", pcap.to_str().unwrap()])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned());
    let mut streams: std::collections::BTreeMap<(String, String), Vec<u8>> = Default::default();
    for line in text.lines() {
        let f: Vec<&str> = line.split('\t').collect();
        assert_eq!(f.len(), 4, "{line}");
        assert!(f[0].contains(":ip:tcp"), "decoded as {}, not TCP", f[0]);
        streams
            .entry((f[1].to_string(), f[2].to_string()))
            .or_default()
            .extend(hex(&f[3].replace(':', "")));
    }
    assert_eq!(
        streams.len(),
        2,
        "one connection, two directions: {:?}; the capture: {all:?}",
        streams.keys()
    );
    let msg = |kind: &[u8; 4], seq: u32| {
        let mut m = vec![0; 24];
        m[..4].copy_from_slice(kind);
        m[4..8].copy_from_slice(&seq.to_be_bytes());
        m
    };
    let pings: Vec<Vec<u8>> = (0..COUNT).map(|i| msg(b"ping", i)).collect();
    let pongs: Vec<Vec<u8>> = (0..COUNT).map(|i| msg(b"pong", i)).collect();
    let mut seen = (false, false);
    for bytes in streams.values() {
        let mut f = frames(bytes);
        // The dialer's first frame is its hello: magic and the session id.
        if f.first().is_some_and(|h| h.starts_with(b"INCS")) {
            assert_eq!(f.remove(0), b"INCS\0\0\0\x05");
        }
        if f == pings {
            seen.0 = true;
        } else if f == pongs {
            seen.1 = true;
        } else {
            panic!("unexpected stream: {f:?}");
        }
    }
    assert_eq!(seen, (true, true), "the pings and the pongs, each in order");

    // A dropped connection is a reset; the session comes back.
    signal(&b.0, libc::SIGKILL);
    b.0.wait().unwrap();
    wait_for("the reset", || metric(ma, "session_resets") == Some(1));
    assert_eq!(metric(ma, "pingpong_resets"), Some(1));
    let mut b = spawn_node(&cb);
    wait_for("the session back up", || {
        metric(ma, "session_ups") == Some(2)
    });
    wait_for("the restarted pong end up", || {
        metric(mb, "pingpong_ups") == Some(1)
    });
    for node in [&mut a, &mut b] {
        signal(&node.0, libc::SIGTERM);
        node.0.wait().unwrap();
    }
    let _ = std::fs::remove_dir_all(&dir);
}
