//! Live links with a scenario's link model: an `inca node` router whose
//! egress port carries `link = { delay, loss, rate … }` delays, loses and
//! paces real frames as configured. The test is both ends (two UDP sockets
//! on loopback), so it times each probe one way on its own clock.
//! Unprivileged: it never skips.

#[path = "common/nodes.rs"]
mod nodes;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use nodes::{free_tcp, free_udp, Nodes};

const SEED: u64 = 20;
const MAGIC: &[u8; 8] = b"incaprob";

/// A router node forwarding 10/8 from port 0 to port 1, with `link` on
/// port 1; the test's sockets `a` (sends) and `b` (receives) are the peers.
fn start_router(nodes: &mut Nodes, a: &UdpSocket, b: &UdpSocket, link: &str) -> Ports {
    let (p0, p1, metrics) = (free_udp(), free_udp(), free_tcp());
    nodes.start(
        "r1",
        &format!(
            r#"name = "r1"
seed = {SEED}
metrics = "{metrics}"
[device]
kind = "router"
routes = [{{ prefix = "10.0.0.0/8", ports = [1] }}]
[[port]]
id = 0
udp = {{ local = "{p0}", peer = "{a}" }}
[[port]]
id = 1
udp = {{ local = "{p1}", peer = "{b}" }}
link = {link}
"#,
            a = a.local_addr().unwrap(),
            b = b.local_addr().unwrap(),
        ),
    );
    Ports { p0, metrics }
}

struct Ports {
    p0: SocketAddr,
    metrics: SocketAddr,
}

/// A probe: a UDP frame to 10.9.9.9 whose payload ends with its sequence
/// number and send time (ns since `base`), padded to `size` bytes.
fn probe(seq: u64, sent: u64, size: usize) -> Vec<u8> {
    let ep = inca_wire::Endpoints::new(
        [2; 6],
        "192.0.2.1".parse().unwrap(),
        [2; 6],
        "10.9.9.9".parse().unwrap(),
    );
    let mut payload = vec![0u8; size.saturating_sub(24)];
    payload.extend_from_slice(MAGIC);
    payload.extend_from_slice(&seq.to_be_bytes());
    payload.extend_from_slice(&sent.to_be_bytes());
    inca_wire::build_udp_frame(&ep, 1, 2, &payload, true).unwrap()
}

/// (sequence, send time) of a received probe.
fn parse(frame: &[u8]) -> Option<(u64, u64)> {
    let n = frame.len().checked_sub(24)?;
    let tail = &frame[n..];
    (&tail[..8] == MAGIC).then(|| {
        (
            u64::from_be_bytes(tail[8..16].try_into().unwrap()),
            u64::from_be_bytes(tail[16..24].try_into().unwrap()),
        )
    })
}

/// Receives probes on `b` until `stop`: (sequence, sent, received, frame
/// length), times in ns since `base`.
fn receiver(
    b: UdpSocket,
    base: Instant,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<Vec<(u64, u64, u64, usize)>> {
    b.set_read_timeout(Some(Duration::from_millis(20))).unwrap();
    std::thread::spawn(move || {
        let mut got = Vec::new();
        let mut buf = vec![0u8; 65536];
        while !stop.load(Ordering::Relaxed) {
            if let Ok((len, _)) = b.recv_from(&mut buf) {
                let at = base.elapsed().as_nanos() as u64;
                if let Some((seq, sent)) = parse(&buf[..len]) {
                    got.push((seq, sent, at, len));
                }
            }
        }
        got
    })
}

/// Sends probes with sequence numbers from `u64::MAX` down until one comes
/// through (the node has started), then waits for the node's counters to
/// settle; returns them.
fn warm_up(a: &UdpSocket, node: &Ports, b: &UdpSocket) -> Counters {
    b.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
    let mut buf = vec![0u8; 65536];
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut sent = 0;
    while Instant::now() < deadline {
        a.send_to(&probe(u64::MAX - sent, 0, 64), node.p0).unwrap();
        sent += 1;
        if let Ok((len, _)) = b.recv_from(&mut buf) {
            if parse(&buf[..len]).is_some() {
                // Let the stragglers of the warm-up arrive (or not), and
                // the metrics text (refreshed every 200 ms) catch up.
                std::thread::sleep(Duration::from_millis(400));
                while b.recv_from(&mut buf).is_ok() {}
                return counters(node.metrics);
            }
        }
    }
    panic!("the node forwarded nothing in 10 s");
}

/// The link counters of the node's port 1.
#[derive(Debug, Clone, Copy)]
struct Counters {
    offered: u64,
    delivered: u64,
    lost: u64,
    queue_drops: u64,
    late: u64,
}

fn counters(metrics: SocketAddr) -> Counters {
    let text = scrape(metrics);
    let value = |n: &str| -> u64 {
        let key = format!("inca_link_{n}{{node=\"r1\",port=\"1\"}} ");
        text.lines()
            .find_map(|l| l.strip_prefix(&key))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no link_{n} in:\n{text}"))
    };
    Counters {
        offered: value("offered"),
        delivered: value("delivered"),
        lost: value("loss_drops"),
        queue_drops: value("queue_drops"),
        late: value("late"),
    }
}

/// The counters once `done` says they are final (or after 10 s).
fn counters_when(metrics: SocketAddr, done: impl Fn(&Counters) -> bool) -> Counters {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let c = counters(metrics);
        if done(&c) || Instant::now() > deadline {
            return c;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn scrape(addr: SocketAddr) -> String {
    let mut conn = TcpStream::connect(addr).unwrap();
    conn.write_all(b"GET /metrics HTTP/1.0\r\n\r\n").unwrap();
    let mut text = String::new();
    conn.read_to_string(&mut text).unwrap();
    text
}

fn dir(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("inca-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn a_lossy_delayed_link_loses_and_delays_as_configured() {
    const N: u64 = 2000;
    const LOSS: f64 = 0.1;
    const DELAY: u64 = 2_000_000;
    let (a, b) = (
        UdpSocket::bind("127.0.0.1:0").unwrap(),
        UdpSocket::bind("127.0.0.1:0").unwrap(),
    );
    let mut nodes = Nodes::new(dir("node-link-loss"));
    let node = start_router(
        &mut nodes,
        &a,
        &b,
        r#"{ rate = "1Gbps", delay = "2ms", loss = 0.1 }"#,
    );
    let before = warm_up(&a, &node, &b);
    let base = Instant::now();
    let stop = Arc::new(AtomicBool::new(false));
    let rx = receiver(b, base, stop.clone());
    for seq in 0..N {
        let sent = base.elapsed().as_nanos() as u64;
        a.send_to(&probe(seq, sent, 64), node.p0).unwrap();
        std::thread::sleep(Duration::from_micros(250));
    }
    std::thread::sleep(Duration::from_millis(100));
    stop.store(true, Ordering::Relaxed);
    let got = rx.join().unwrap();
    let probes: Vec<_> = got.iter().filter(|g| g.0 < N).collect();
    let received = probes.len() as u64;

    // Loss: binomial, N draws of p = 0.1; 5 standard deviations either
    // side (a false alarm about once in 1.7 million runs).
    let lost = N - received;
    let measured = lost as f64 / N as f64;
    let sd = (LOSS * (1.0 - LOSS) / N as f64).sqrt();
    // Delay: one way, on this process's clock. The configured delay plus
    // serialisation (64-byte frame + payload at 1 Gbit/s, under 1 µs) is a
    // floor; above it is process scheduling (the test's, the node's).
    let mut delays: Vec<u64> = probes.iter().map(|&&(_, s, r, _)| r - s).collect();
    delays.sort_unstable();
    let pct = |q: f64| delays[((delays.len() - 1) as f64 * q) as usize];
    let (min, median, p99) = (delays[0], pct(0.5), pct(0.99));
    eprintln!(
        "seed {SEED}: {N} probes, {lost} lost ({:.2} %, configured 10 %, bound ±{:.2} %); \
         one-way delay min {} µs, median {} µs, p99 {} µs (configured 2000 µs)",
        measured * 100.0,
        5.0 * sd * 100.0,
        min / 1000,
        median / 1000,
        p99 / 1000
    );
    assert!(
        (measured - LOSS).abs() <= 5.0 * sd,
        "loss {measured} vs configured {LOSS}"
    );
    assert!(
        min >= DELAY,
        "a probe arrived after {min} ns, before the delay"
    );
    // The fastest probe shows the model's delay; the median and the tail
    // add process scheduling, which on a loaded shared machine reaches
    // milliseconds (median 4 ms seen at load 7), so they are printed, not
    // judged: a timed bound would be a flaky test.
    assert!(
        min <= DELAY + 500_000,
        "the fastest probe took {min} ns, configured {DELAY}: the delay is applied more than once"
    );
    // What the node counted is what the test saw: every probe the channel
    // was offered was lost to the model or arrived.
    let after = counters_when(node.metrics, |c| c.offered >= before.offered + N);
    eprintln!(
        "node counters: before {before:?}, after {after:?}; {} probes left over 100 µs late",
        after.late - before.late
    );
    assert_eq!(after.offered - before.offered, N);
    assert_eq!(after.queue_drops, 0);
    assert_eq!(
        after.lost - before.lost,
        lost,
        "the model's losses are the only ones"
    );
    nodes.stop();
}

#[test]
fn a_10_mbit_link_paces_frames_at_its_rate() {
    const K: u64 = 300;
    const RATE: f64 = 10e6;
    let (a, b) = (
        UdpSocket::bind("127.0.0.1:0").unwrap(),
        UdpSocket::bind("127.0.0.1:0").unwrap(),
    );
    let mut nodes = Nodes::new(dir("node-link-rate"));
    let node = start_router(
        &mut nodes,
        &a,
        &b,
        r#"{ rate = "10Mbps", delay = 0, queue = "1MB" }"#,
    );
    let before = warm_up(&a, &node, &b);
    let base = Instant::now();
    let stop = Arc::new(AtomicBool::new(false));
    let rx = receiver(b, base, stop.clone());
    // Offered at ~10x the link rate: the queue builds, the link paces.
    for seq in 0..K {
        let sent = base.elapsed().as_nanos() as u64;
        a.send_to(&probe(seq, sent, 1000), node.p0).unwrap();
        std::thread::sleep(Duration::from_micros(100));
    }
    // K frames of ~1066 wire bytes at 10 Mbit/s: ~256 ms.
    let after = counters_when(node.metrics, |c| c.delivered >= before.delivered + K);
    eprintln!("node counters: before {before:?}, after {after:?}");
    std::thread::sleep(Duration::from_millis(100));
    stop.store(true, Ordering::Relaxed);
    let mut got: Vec<_> = rx.join().unwrap().into_iter().filter(|g| g.0 < K).collect();
    got.sort_by_key(|g| g.2);
    assert_eq!(
        got.len() as u64,
        K,
        "a lossless link with room in its queue"
    );
    // The frames after the first left back to back: their wire bytes
    // (frame + 24 of preamble, FCS, gap) over the time between the first
    // and the last arrival.
    let bits: u64 = got[1..].iter().map(|g| (g.3 as u64 + 24) * 8).sum();
    let span = (got[got.len() - 1].2 - got[0].2) as f64 / 1e9;
    let measured = bits as f64 / span;
    eprintln!(
        "seed {SEED}: {K} frames of {} bytes in {:.1} ms: {:.3} Mbit/s (configured 10)",
        got[0].3,
        span * 1e3,
        measured / 1e6
    );
    // [our choice] Never faster than the link by more than 3 % (the first
    // and last arrivals are each off by a scheduling delay, ~0.1 ms over a
    // ~255 ms span); slower by up to 20 %, the runner waking late on a
    // loaded shared machine (a timed bound tighter than that is flaky).
    assert!(
        (RATE * 0.8..=RATE * 1.03).contains(&measured),
        "measured {measured} bit/s, configured {RATE}"
    );
    nodes.stop();
}
