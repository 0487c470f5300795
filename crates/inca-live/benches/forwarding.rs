//! Live forwarding between two inca runners over UDP on loopback, and the
//! machine's own limit measured side by side.
//!
//! - **inca**: a sender runner with a `Host` generating 64-byte UDP frames
//!   (raised to 66 B, the smallest frame with a probe header) faster than
//!   they can go, and a receiver runner with a sink `Host`, each on its own
//!   thread (as two processes would be), linked by a `UdpPort` pair;
//!   frames per second counted by the sink host.
//! - **baseline**: the same frame, raw `sendmmsg` → `recvmmsg` between two
//!   plain sockets, same batch size and socket buffers, no devices.
//!
//! Each runs `INCA_BENCH_RUNS` times (default 5) for `INCA_BENCH_SECS`
//! (default 1) after a 0.2 s warm-up, alternating; the median of each and
//! their ratio are printed. `INCA_BENCH_PPS` sets the generator's packet
//! rate (default 3,000,000/s: above what this path carries, so the sender
//! is never idle, yet not so far above that skipping the packets it could
//! not send costs much).
//!
//! `cargo bench -p inca-live --bench forwarding`

use std::net::UdpSocket;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use inca_live::port::{Port, BATCH, MAX_FRAME};
use inca_live::runner::{Runner, RunnerConfig};
use inca_live::udp::{UdpPort, SOCKET_BUFFER};
use inca_sim::nodes::host::{Host, HostConfig, SizeSpec, UdpConfig, WorkloadConfig};

const WARMUP: Duration = Duration::from_millis(200);
const FRAME: usize = 64;

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// What one measurement saw.
struct Sample {
    /// Frames per second received.
    rate: f64,
    /// Frames per second the sender got into its socket.
    sent_rate: f64,
    /// Extra detail for the log line.
    note: String,
}

/// Counts in a loop until the warm-up and the measurement are over;
/// returns the count difference and the exact time between the snapshots.
fn measure(measure: Duration, mut count: impl FnMut() -> u64) -> (u64, Duration) {
    let start = Instant::now();
    while start.elapsed() < WARMUP {
        count();
    }
    let (c0, t0) = (count(), Instant::now());
    while t0.elapsed() < measure {
        count();
    }
    let (c1, t1) = (count(), Instant::now());
    (c1 - c0, t1 - t0)
}

// ---------------------------------------------------------------------------
// inca: two runners.

fn inca_once(secs: Duration, pps: u64, offload: bool) -> Sample {
    let (mut pa, mut pb) = UdpPort::loopback_pair().expect("loopback sockets");
    pa.set_offload(offload);
    pb.set_offload(offload);
    let mac_a = [2, 0, 0, 0, 0, 1];
    let mac_b = [2, 0, 0, 0, 0, 2];
    let mut cfg = HostConfig::new("10.0.0.1".parse().unwrap());
    cfg.workloads.push(WorkloadConfig::Udp(UdpConfig {
        dst: Some("10.0.0.2:5000".parse().unwrap()),
        pps: Some(pps),
        size: Some(SizeSpec::from(FRAME as u64)),
        ..UdpConfig::default()
    }));
    let sender = Host::new(cfg, mac_a, mac_b, 100_000_000_000).expect("sender host");
    let sink = Host::new(
        HostConfig::new("10.0.0.2".parse().unwrap()),
        mac_b,
        mac_a,
        100_000_000_000,
    )
    .expect("sink host");
    let config = RunnerConfig {
        busy_poll: true,
        ..RunnerConfig::default()
    };
    let stop = Arc::new(AtomicBool::new(false));
    let stop_tx = stop.clone();
    let tx = std::thread::spawn(move || {
        let ports: Vec<Box<dyn Port>> = vec![Box::new(pa)];
        let mut r = Runner::new(sender, ports, 1, config);
        let start = Instant::now();
        r.run(&stop_tx).expect("sender runner");
        let elapsed = start.elapsed();
        let missed = r.device().workload_stats("udp0").map_or(0, |w| w.missed);
        (r.ports()[0].stats(), missed, elapsed)
    });
    let rx = std::thread::spawn(move || {
        let ports: Vec<Box<dyn Port>> = vec![Box::new(pb)];
        let mut r = Runner::new(sink, ports, 2, config);
        let (n, dt) = measure(secs, || {
            r.step().expect("sink runner");
            r.device().stats().rx_packets
        });
        (n, dt, r.ports()[0].stats(), *r.device().stats())
    });
    let (n, dt, rx_port, sink) = rx.join().expect("sink thread");
    stop.store(true, Ordering::Relaxed);
    let (tx_port, missed, tx_elapsed) = tx.join().expect("sender thread");
    let sent_rate = tx_port.tx_frames as f64 / tx_elapsed.as_secs_f64();
    let lost = tx_port.tx_frames.saturating_sub(rx_port.rx_frames);
    Sample {
        rate: n as f64 / dt.as_secs_f64(),
        sent_rate,
        note: format!(
            "sent {} ({} dropped at send, {} skipped by the generator), received {} ({} malformed, {} not received: in flight at the end, or dropped), sink saw {} probes",
            tx_port.tx_frames,
            tx_port.tx_dropped,
            missed,
            rx_port.rx_frames,
            rx_port.rx_malformed,
            lost,
            sink.rx_probes,
        ),
    }
}

// ---------------------------------------------------------------------------
// Baseline: raw sendmmsg → recvmmsg.

fn setsockopt_int(fd: i32, name: i32, value: i32) {
    // SAFETY: `value` is a live c_int of the length passed; setsockopt only
    // reads it.
    unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            name,
            (&value as *const i32).cast(),
            std::mem::size_of::<i32>() as libc::socklen_t,
        );
    }
}

/// The same socket set-up as a `UdpPort`: non-blocking, big buffers.
fn plain_socket() -> UdpSocket {
    let s = UdpSocket::bind("127.0.0.1:0").expect("bind");
    s.set_nonblocking(true).expect("nonblocking");
    let fd = s.as_raw_fd();
    // SO_RCVBUFFORCE / SO_SNDBUFFORCE first (root), else the capped kind.
    setsockopt_int(fd, 33, SOCKET_BUFFER as i32);
    setsockopt_int(fd, 32, SOCKET_BUFFER as i32);
    setsockopt_int(fd, libc::SO_RCVBUF, SOCKET_BUFFER as i32);
    setsockopt_int(fd, libc::SO_SNDBUF, SOCKET_BUFFER as i32);
    s
}

fn baseline_once(secs: Duration) -> Sample {
    let a = plain_socket();
    let b = plain_socket();
    // Unconnected, with the destination in every message, as a UdpPort
    // sends (it cannot connect: it must see and count foreign datagrams).
    let std::net::SocketAddr::V4(to) = b.local_addr().unwrap() else {
        unreachable!("bound to 127.0.0.1")
    };
    let dest = libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: to.port().to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from_ne_bytes(to.ip().octets()),
        },
        sin_zero: [0; 8],
    };
    let stop = Arc::new(AtomicBool::new(false));
    let stop_tx = stop.clone();
    let tx = std::thread::spawn(move || {
        let frame = [0x5au8; FRAME];
        // SAFETY: all-zero bytes are valid iovec/mmsghdr values.
        let mut iovs: Vec<libc::iovec> = vec![unsafe { std::mem::zeroed() }; BATCH];
        let mut hdrs: Vec<libc::mmsghdr> = vec![unsafe { std::mem::zeroed() }; BATCH];
        for (iov, h) in iovs.iter_mut().zip(hdrs.iter_mut()) {
            iov.iov_base = frame.as_ptr() as *mut libc::c_void;
            iov.iov_len = frame.len();
            h.msg_hdr.msg_iov = iov;
            h.msg_hdr.msg_iovlen = 1;
            h.msg_hdr.msg_name =
                (&dest as *const libc::sockaddr_in as *mut libc::sockaddr_in).cast();
            h.msg_hdr.msg_namelen = std::mem::size_of::<libc::sockaddr_in>() as u32;
        }
        let (mut sent, mut full) = (0u64, 0u64);
        let start = Instant::now();
        while !stop_tx.load(Ordering::Relaxed) {
            // SAFETY: `hdrs` holds BATCH initialised headers, each naming
            // one iovec over `frame`; all live for the call, only read
            // (msg_len written), as is the destination `dest`.
            let r = unsafe {
                libc::sendmmsg(
                    a.as_raw_fd(),
                    hdrs.as_mut_ptr(),
                    BATCH as u32,
                    libc::MSG_DONTWAIT,
                )
            };
            if r > 0 {
                sent += r as u64;
            } else {
                full += 1;
            }
        }
        (sent, full, start.elapsed())
    });
    let rx = std::thread::spawn(move || {
        let mut bufs = vec![0u8; BATCH * (MAX_FRAME + 1)];
        // SAFETY: as above.
        let mut iovs: Vec<libc::iovec> = vec![unsafe { std::mem::zeroed() }; BATCH];
        let mut hdrs: Vec<libc::mmsghdr> = vec![unsafe { std::mem::zeroed() }; BATCH];
        // SAFETY: as above.
        let mut addrs: Vec<libc::sockaddr_storage> = vec![unsafe { std::mem::zeroed() }; BATCH];
        for (i, buf) in bufs.chunks_exact_mut(MAX_FRAME + 1).enumerate() {
            iovs[i].iov_base = buf.as_mut_ptr().cast();
            iovs[i].iov_len = buf.len();
        }
        let mut total = 0u64;
        let (n, dt) = measure(secs, || {
            for i in 0..BATCH {
                let h = &mut hdrs[i].msg_hdr;
                h.msg_iov = &mut iovs[i];
                h.msg_iovlen = 1;
                h.msg_name = (&mut addrs[i] as *mut libc::sockaddr_storage).cast();
                h.msg_namelen = std::mem::size_of::<libc::sockaddr_storage>() as u32;
            }
            // SAFETY: BATCH initialised headers, each naming one iovec over
            // MAX_FRAME + 1 bytes of `bufs` and an address buffer of the
            // length given, all live and exclusively ours for the call.
            let r = unsafe {
                libc::recvmmsg(
                    b.as_raw_fd(),
                    hdrs.as_mut_ptr(),
                    BATCH as u32,
                    libc::MSG_DONTWAIT,
                    std::ptr::null_mut(),
                )
            };
            if r > 0 {
                total += r as u64;
            }
            total
        });
        (n, dt)
    });
    let (n, dt) = rx.join().expect("receiver thread");
    stop.store(true, Ordering::Relaxed);
    let (sent, full, elapsed) = tx.join().expect("sender thread");
    Sample {
        rate: n as f64 / dt.as_secs_f64(),
        sent_rate: sent as f64 / elapsed.as_secs_f64(),
        note: format!("sent {sent} ({full} sendmmsg calls refused)"),
    }
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n == 0 {
        0.0
    } else if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn main() {
    // `cargo test --benches` runs this with --test / --list: do nothing then.
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--list" || a == "--test") {
        return;
    }
    let runs: usize = env_or("INCA_BENCH_RUNS", 5).max(1);
    let secs = Duration::from_secs_f64(env_or("INCA_BENCH_SECS", 1.0f64).max(0.05));
    let pps: u64 = env_or("INCA_BENCH_PPS", 3_000_000u64).max(1);
    println!(
        "live forwarding over UDP on loopback: {FRAME}-byte frames, batch {BATCH}, {runs} runs of {:.1} s (+{:.1} s warm-up), generator at {pps} pps",
        secs.as_secs_f64(),
        WARMUP.as_secs_f64()
    );
    let mut base = Vec::new();
    let mut plain = Vec::new();
    let mut inca = Vec::new();
    for run in 0..runs {
        let b = baseline_once(secs);
        println!(
            "  run {run} baseline:        {:>10.0} frames/s received ({:.0}/s sent; {})",
            b.rate, b.sent_rate, b.note
        );
        base.push(b.rate);
        let p = inca_once(secs, pps, false);
        println!(
            "  run {run} inca, no offload: {:>10.0} frames/s received ({:.0}/s sent; {})",
            p.rate, p.sent_rate, p.note
        );
        plain.push(p.rate);
        let i = inca_once(secs, pps, true);
        println!(
            "  run {run} inca:            {:>10.0} frames/s received ({:.0}/s sent; {})",
            i.rate, i.sent_rate, i.note
        );
        inca.push(i.rate);
    }
    let mb = median(&mut base);
    let mp = median(&mut plain);
    let mi = median(&mut inca);
    let ratio = |x: f64| if mb > 0.0 { x / mb } else { 0.0 };
    println!(
        "baseline (raw sendmmsg -> recvmmsg, one datagram per frame): median {mb:.0} frames/s"
    );
    println!(
        "inca, UdpPort offload off (sendmmsg/recvmmsg only): median {mp:.0} frames/s ({:.2} x baseline)",
        ratio(mp)
    );
    println!(
        "inca, UdpPort default (UDP GSO/GRO): median {mi:.0} frames/s ({:.2} x baseline)",
        ratio(mi)
    );
    println!(
        "target 1 M frames/s through the inca runners: {}",
        if mi >= 1e6 { "met" } else { "NOT met" }
    );
}
