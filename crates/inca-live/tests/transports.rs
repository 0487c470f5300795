//! The live transports: batched UDP ports on loopback, AF_PACKET ports on a
//! veth pair (root only; skipped with a reason otherwise), and two live
//! runners exchanging generated traffic over UDP.

use std::net::UdpSocket;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use inca_live::packet::{PacketError, PacketPort};
use inca_live::port::{Port, BATCH, MAX_FRAME};
use inca_live::runner::{Runner, RunnerConfig};
use inca_live::udp::UdpPort;
use inca_sim::nodes::host::{Host, HostConfig, SizeSpec, UdpConfig, WorkloadConfig};

/// An Ethernet frame of `len` bytes (at least 14) carrying `index`, with a
/// local-experimental ethertype and a byte pattern that depends on both.
fn frame(src: u8, index: u32, len: usize) -> Vec<u8> {
    let mut f = vec![0u8; len.max(20)];
    f[..6].copy_from_slice(&[2, 0, 0, 0, 0, src ^ 1]);
    f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, src]);
    f[12..14].copy_from_slice(&0x88b5u16.to_be_bytes());
    f[14..18].copy_from_slice(&index.to_be_bytes());
    f[18] = src;
    for (i, b) in f.iter_mut().enumerate().skip(19) {
        *b = (i as u32).wrapping_mul(31).wrapping_add(index) as u8;
    }
    f
}

/// Whether a received frame is one of ours (not stray kernel traffic).
fn ours(f: &[u8]) -> bool {
    f.len() >= 19 && f[12..14] == 0x88b5u16.to_be_bytes()
}

/// Receives on `port` until `n` frames of ours arrived or `timeout`.
fn collect(port: &mut dyn Port, n: usize, timeout: Duration) -> Vec<Vec<u8>> {
    let deadline = Instant::now() + timeout;
    let mut got = Vec::new();
    let mut buf = Vec::new();
    while got.len() < n && Instant::now() < deadline {
        buf.clear();
        if port.recv_batch(&mut buf, BATCH).unwrap() == 0 {
            std::thread::sleep(Duration::from_micros(200));
        }
        got.extend(buf.drain(..).filter(|f| ours(f)));
    }
    got
}

#[test]
fn udp_ports_move_many_frames_in_order() {
    let (mut a, mut b) = UdpPort::loopback_pair().unwrap();
    assert_eq!(a.peer_addr(), b.local_addr().unwrap());
    let total = 2000u32;
    let mut sent = Vec::new();
    let mut got = Vec::new();
    // Rounds of several batches (more than BATCH per call), drained in
    // between so the receive queue never overflows.
    for round in 0..(total / 250) {
        let mut frames: Vec<Vec<u8>> = (0..250)
            .map(|i| {
                let idx = round * 250 + i;
                frame(0x0a, idx, 60 + (idx as usize * 7) % 1400)
            })
            .collect();
        sent.extend(frames.iter().cloned());
        a.send_batch(&mut frames).unwrap();
        assert!(frames.is_empty(), "send_batch drains its input");
        got.extend(collect(&mut b, 250, Duration::from_secs(5)));
    }
    assert_eq!(got.len(), sent.len());
    assert!(got == sent, "frames arrive intact and in order");
    assert_eq!(a.stats().tx_frames, u64::from(total));
    assert_eq!(a.stats().tx_dropped, 0);
    assert_eq!(b.stats().rx_frames, u64::from(total));
    assert_eq!(b.stats().rx_malformed, 0);
    // And the other way.
    let mut back = vec![frame(0x0b, 1, 100), frame(0x0b, 2, 14 + 6)];
    let want = back.clone();
    b.send_batch(&mut back).unwrap();
    assert_eq!(collect(&mut a, 2, Duration::from_secs(5)), want);
}

/// Runs of equal-length frames (sent with segmentation offload, received
/// coalesced where the kernel supports it) mixed with odd lengths; small
/// `max` so coalesced datagrams are handed out over several calls.
#[test]
fn udp_ports_keep_order_with_and_without_offload() {
    for offload in [true, false] {
        let (mut a, mut b) = UdpPort::loopback_pair().unwrap();
        a.set_offload(offload);
        b.set_offload(offload);
        let mut sent = Vec::new();
        let mut got = Vec::new();
        let mut idx = 0u32;
        for round in 0..20 {
            let mut frames = Vec::new();
            // 100 of one size, a few odd ones, 70 of another, one huge.
            for i in 0..180u32 {
                let len = match i {
                    0..=99 => 66,
                    100..=104 => 67 + i as usize,
                    105..=174 => 1000 + round,
                    _ => MAX_FRAME - (i as usize - 175),
                };
                frames.push(frame(0x0a, idx, len));
                idx += 1;
            }
            sent.extend(frames.iter().cloned());
            a.send_batch(&mut frames).unwrap();
            let deadline = Instant::now() + Duration::from_secs(5);
            let want = sent.len();
            while got.len() < want && Instant::now() < deadline {
                let mut buf = Vec::new();
                let n = b.recv_batch(&mut buf, 7).unwrap();
                assert!(n <= 7 && buf.len() == n, "max is honoured");
                got.extend(buf);
            }
        }
        assert_eq!(got.len(), sent.len(), "offload {offload}");
        assert!(got == sent, "offload {offload}: intact and in order");
        assert_eq!(a.stats().tx_frames, sent.len() as u64);
        assert_eq!(b.stats().rx_frames, sent.len() as u64);
        assert_eq!(b.stats().rx_malformed, 0);
    }
}

#[test]
fn udp_port_counts_bad_datagrams_and_keeps_good_ones() {
    let peer = UdpSocket::bind("127.0.0.1:0").unwrap();
    let stranger = UdpSocket::bind("127.0.0.1:0").unwrap();
    let mut port =
        UdpPort::bind("127.0.0.1:0".parse().unwrap(), peer.local_addr().unwrap()).unwrap();
    let to = port.local_addr().unwrap();
    let good = frame(1, 1, 100);
    let smallest = vec![0xee; 14];
    let largest = frame(1, 2, MAX_FRAME);
    peer.send_to(&good, to).unwrap();
    peer.send_to(&[1, 2, 3, 4, 5], to).unwrap(); // too short
    peer.send_to(&[], to).unwrap(); // empty
    peer.send_to(&vec![7; MAX_FRAME + 1], to).unwrap(); // too long
    peer.send_to(&vec![7; 20_000], to).unwrap(); // far too long
    stranger.send_to(&frame(1, 3, 100), to).unwrap(); // not the peer
    peer.send_to(&smallest, to).unwrap();
    peer.send_to(&largest, to).unwrap();
    let mut out = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(5);
    while out.len() < 3 && Instant::now() < deadline {
        port.recv_batch(&mut out, BATCH).unwrap();
    }
    assert_eq!(out, vec![good, smallest, largest]);
    let s = port.stats();
    assert_eq!(s.rx_frames, 3);
    assert_eq!(s.rx_malformed, 5);

    // Sending: a frame longer than MAX_FRAME is dropped and counted, the
    // others go.
    let mut frames = vec![frame(2, 1, 64), vec![0; MAX_FRAME + 1], frame(2, 2, 64)];
    port.send_batch(&mut frames).unwrap();
    assert_eq!(port.stats().tx_frames, 2);
    assert_eq!(port.stats().tx_dropped, 1);
    peer.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut buf = [0u8; 128];
    for i in 1..=2 {
        let (n, from) = peer.recv_from(&mut buf).unwrap();
        assert_eq!(from, to);
        assert_eq!(&buf[..n], &frame(2, i, 64)[..]);
    }
    // `max` is honoured: with 3 waiting and max 2, 2 come out.
    for i in 0..3 {
        peer.send_to(&frame(1, 10 + i, 64), to).unwrap();
    }
    std::thread::sleep(Duration::from_millis(50));
    let mut out = Vec::new();
    assert_eq!(port.recv_batch(&mut out, 2).unwrap(), 2);
    assert_eq!(port.recv_batch(&mut out, 2).unwrap(), 1);
    assert_eq!(port.recv_batch(&mut out, 2).unwrap(), 0);
    assert_eq!(out.len(), 3);
}

#[test]
fn two_live_hosts_exchange_generated_traffic_without_loss() {
    let (pa, pb) = UdpPort::loopback_pair().unwrap();
    let pps = 50_000u64;
    let count = 10_000u64; // 0.2 s
    let mut cfg = HostConfig::new("10.0.0.1".parse().unwrap());
    cfg.workloads.push(WorkloadConfig::Udp(UdpConfig {
        dst: Some("10.0.0.2:5000".parse().unwrap()),
        pps: Some(pps),
        count: Some(count),
        size: Some(SizeSpec::from(100)),
        ..UdpConfig::default()
    }));
    let mac_a = [2, 0, 0, 0, 0, 1];
    let mac_b = [2, 0, 0, 0, 0, 2];
    let sender = Host::new(cfg, mac_a, mac_b, 10_000_000_000).unwrap();
    let sink = Host::new(
        HostConfig::new("10.0.0.2".parse().unwrap()),
        mac_b,
        mac_a,
        10_000_000_000,
    )
    .unwrap();

    let stop = Arc::new(AtomicBool::new(false));
    let stop_tx = stop.clone();
    let tx = std::thread::spawn(move || {
        let ports: Vec<Box<dyn Port>> = vec![Box::new(pa)];
        let mut r = Runner::new(sender, ports, 1, RunnerConfig::default());
        r.run(&stop_tx).unwrap();
        let ws = r.device().workload_stats("udp0").cloned().unwrap();
        (*r.device().stats(), ws, r.ports()[0].stats())
    });
    let stop_rx = stop.clone();
    let rx = std::thread::spawn(move || {
        let ports: Vec<Box<dyn Port>> = vec![Box::new(pb)];
        let mut r = Runner::new(sink, ports, 2, RunnerConfig::default());
        // Step by hand so the test ends as soon as everything arrived.
        let deadline = Instant::now() + Duration::from_secs(20);
        while r.device().stats().rx_packets < count
            && Instant::now() < deadline
            && !stop_rx.load(Ordering::Relaxed)
        {
            if !r.step().unwrap() {
                std::thread::sleep(Duration::from_micros(100));
            }
        }
        // A little longer, to see any frame too many.
        let until = Instant::now() + Duration::from_millis(50);
        while Instant::now() < until {
            if !r.step().unwrap() {
                std::thread::sleep(Duration::from_micros(100));
            }
        }
        (*r.device().stats(), r.ports()[0].stats())
    });
    let (sink_stats, sink_port) = rx.join().unwrap();
    stop.store(true, Ordering::Relaxed);
    let (sender_stats, ws, sender_port) = tx.join().unwrap();
    assert_eq!(
        ws.tx_packets + ws.missed,
        count,
        "the generator went through its count"
    );
    assert_eq!(sender_stats.tx_packets, ws.tx_packets);
    assert_eq!(sender_port.tx_frames, ws.tx_packets);
    assert_eq!(sender_port.tx_dropped, 0);
    assert_eq!(
        sink_stats.rx_packets, sender_port.tx_frames,
        "every frame sent arrived (sink {sink_stats:?}, sender port {sender_port:?})"
    );
    assert_eq!(sink_port.rx_frames, sink_stats.rx_packets);
    assert_eq!(sink_stats.rx_probes, sink_stats.rx_packets);
    assert_eq!(sink_stats.rx_malformed, 0);
    // Under heavy load a host may skip packets it could not send in time
    // (counted as missed); on an idle machine at 50k pps there are none.
    assert!(ws.missed < count / 10, "{} of {count} missed", ws.missed);
}

// ---------------------------------------------------------------------------
// AF_PACKET.

#[test]
fn packet_port_open_reports_bad_names_clearly() {
    match PacketPort::open("no-such-if-xyz") {
        Err(PacketError::NoSuchInterface(n)) => assert_eq!(n, "no-such-if-xyz"),
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        PacketPort::open("a-name-far-too-long-for-linux"),
        Err(PacketError::BadName(_))
    ));
    assert!(matches!(
        PacketPort::open("bad\0name"),
        Err(PacketError::BadName(_))
    ));
    assert!(matches!(PacketPort::open(""), Err(PacketError::BadName(_))));
    let e: std::io::Error = PacketPort::open("no-such-if-xyz").unwrap_err().into();
    assert_eq!(e.kind(), std::io::ErrorKind::NotFound);
    assert!(e.to_string().contains("no-such-if-xyz"));
}

/// Why AF_PACKET tests cannot run here, if they cannot.
fn packet_skip_reason() -> Option<String> {
    // SAFETY: geteuid has no arguments and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Some("not root (AF_PACKET and veth need CAP_NET_RAW/CAP_NET_ADMIN)".into());
    }
    match Command::new("ip").arg("-V").output() {
        Ok(o) if o.status.success() => None,
        _ => Some("the `ip` command (iproute2) is missing".into()),
    }
}

fn ip(args: &[&str]) -> Result<(), String> {
    let o = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("ip {}: {e}", args.join(" ")))?;
    if o.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&o.stderr).trim()
        ))
    }
}

/// A veth pair, deleted when dropped (also when a test fails).
struct Veth {
    a: String,
    b: String,
}

impl Veth {
    fn create(tag: &str, mtu: u32) -> Result<Veth, String> {
        let pid = std::process::id();
        let a = format!("ic{tag}{pid}a");
        let b = format!("ic{tag}{pid}b");
        ip(&["link", "add", &a, "type", "veth", "peer", "name", &b])?;
        let v = Veth { a, b };
        for end in [&v.a, &v.b] {
            // No IPv6 chatter (router solicitations, MLD) on the test link.
            let _ = std::fs::write(format!("/proc/sys/net/ipv6/conf/{end}/disable_ipv6"), "1");
            ip(&["link", "set", end, "mtu", &mtu.to_string()])?;
        }
        for end in [&v.a, &v.b] {
            ip(&["link", "set", end, "up"])?;
        }
        // Wait for the carrier (both ends up) before frames can pass.
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let up = [&v.a, &v.b].iter().all(|e| {
                std::fs::read_to_string(format!("/sys/class/net/{e}/operstate"))
                    .is_ok_and(|s| s.trim() == "up")
            });
            if up {
                break;
            }
            if Instant::now() > deadline {
                return Err(format!("{} and {} did not come up", v.a, v.b));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Ok(v)
    }
}

impl Drop for Veth {
    fn drop(&mut self) {
        // Deleting one end deletes the pair.
        if let Err(e) = ip(&["link", "del", &self.a]) {
            eprintln!("cleanup: {e}");
        }
    }
}

/// Sends `frames` on `from` and collects them on `to`.
fn exchange(from: &mut PacketPort, to: &mut PacketPort, frames: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let mut got = Vec::new();
    for chunk in frames.chunks(100) {
        let mut batch = chunk.to_vec();
        from.send_batch(&mut batch).unwrap();
        got.extend(collect(to, chunk.len(), Duration::from_secs(5)));
    }
    got
}

#[test]
fn packet_ports_exchange_frames_over_a_veth_pair() {
    if let Some(why) = packet_skip_reason() {
        println!("skipped: {why}");
        return;
    }
    // MTU such that the largest frame a port carries fits exactly.
    let mtu = (MAX_FRAME - 14) as u32;
    let veth = match Veth::create("p", mtu) {
        Ok(v) => v,
        Err(e) => {
            println!("skipped: cannot create a veth pair: {e}");
            return;
        }
    };
    let mut pa = PacketPort::open(&veth.a).unwrap();
    let mut pb = PacketPort::open(&veth.b).unwrap();
    assert!(pa.describe().contains(&veth.a));

    // A → B: sizes from minimum to the largest frame.
    let sizes = |i: u32| match i {
        0 => 14,
        1 => MAX_FRAME,
        _ => 60 + (i as usize * 37) % 1500,
    };
    let ab: Vec<Vec<u8>> = (0..300).map(|i| frame(0x0a, i, sizes(i))).collect();
    let got = exchange(&mut pa, &mut pb, &ab);
    assert_eq!(got.len(), ab.len(), "every frame A sent reached B");
    assert!(got == ab, "frames arrive intact and in order");
    // A must not see its own frames.
    let echoed = collect(&mut pa, 1, Duration::from_millis(200));
    assert!(echoed.is_empty(), "A received {} own frames", echoed.len());

    // B → A.
    let ba: Vec<Vec<u8>> = (0..300).map(|i| frame(0x0b, i, sizes(i))).collect();
    let got = exchange(&mut pb, &mut pa, &ba);
    assert!(got == ba, "B's frames reach A intact and in order");
    let echoed = collect(&mut pb, 1, Duration::from_millis(200));
    assert!(echoed.is_empty(), "B received {} own frames", echoed.len());

    // Without the kernel's filter (as on kernels before 4.20), the port
    // drops its own frames itself, by their packet type.
    assert!(pa.kernel_ignores_outgoing());
    let off: libc::c_int = 0;
    // SAFETY: `off` is a live c_int of the length passed; 263/23 are
    // SOL_PACKET/PACKET_IGNORE_OUTGOING.
    let r = unsafe {
        libc::setsockopt(
            pa.fd(),
            263,
            23,
            (&off as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as u32,
        )
    };
    assert_eq!(r, 0, "{}", std::io::Error::last_os_error());
    // (The kernel never loops a socket's own frames back to it; what the
    // filter keeps out are frames other sockets send out of the interface.)
    let again: Vec<Vec<u8>> = (300..320).map(|i| frame(0x0a, i, 100)).collect();
    for f in &again {
        inject(&veth.a, f);
    }
    assert!(collect(&mut pb, 20, Duration::from_secs(5)) == again);
    let echoed = collect(&mut pa, 1, Duration::from_millis(200));
    assert!(
        echoed.is_empty(),
        "A received {} outgoing frames",
        echoed.len()
    );
    assert_eq!(pa.outgoing_skipped(), 20);

    assert_eq!(pa.stats().tx_frames, 300);
    assert_eq!(pb.stats().tx_frames, 300);
    assert_eq!(pa.stats().tx_dropped + pb.stats().tx_dropped, 0);
    assert!(pa.stats().rx_frames >= 300 && pb.stats().rx_frames >= 320);
    assert_eq!(pa.stats().rx_malformed + pb.stats().rx_malformed, 0);

    // A frame above MAX_FRAME: not sent by a port (dropped and counted);
    // injected with a plain packet socket, counted as malformed by B.
    let mut big = vec![frame(0x0a, 999, MAX_FRAME + 1)];
    pa.send_batch(&mut big).unwrap();
    assert_eq!(pa.stats().tx_dropped, 1);
    ip(&["link", "set", &veth.a, "mtu", "9500"]).unwrap();
    ip(&["link", "set", &veth.b, "mtu", "9500"]).unwrap();
    inject(&veth.a, &frame(0x0a, 1000, MAX_FRAME + 100));
    let mut tail = vec![frame(0x0a, 1001, 64)];
    pa.send_batch(&mut tail).unwrap();
    let got = collect(&mut pb, 1, Duration::from_secs(5));
    assert_eq!(got, vec![frame(0x0a, 1001, 64)]);
    assert_eq!(pb.stats().rx_malformed, 1, "the oversize frame was counted");
    drop(veth);
}

/// Sends one raw frame out of `interface` with a plain AF_PACKET socket.
fn inject(interface: &str, frame: &[u8]) {
    let name = std::ffi::CString::new(interface).unwrap();
    // SAFETY: a live NUL-terminated string.
    let ifindex = unsafe { libc::if_nametoindex(name.as_ptr()) };
    assert!(ifindex > 0);
    // SAFETY: no memory arguments.
    let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW, 0) };
    assert!(fd >= 0, "{}", std::io::Error::last_os_error());
    // SAFETY: all-zero is a valid sockaddr_ll.
    let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    sll.sll_family = libc::AF_PACKET as u16;
    sll.sll_ifindex = ifindex as i32;
    sll.sll_halen = 6;
    sll.sll_addr[..6].copy_from_slice(&frame[..6]);
    // SAFETY: `frame` and `sll` are live for the call and the lengths are
    // theirs; sendto only reads them. `fd` is ours and closed right after.
    let r = unsafe {
        let r = libc::sendto(
            fd,
            frame.as_ptr().cast(),
            frame.len(),
            0,
            (&sll as *const libc::sockaddr_ll).cast(),
            std::mem::size_of::<libc::sockaddr_ll>() as u32,
        );
        libc::close(fd);
        r
    };
    assert_eq!(
        r,
        frame.len() as isize,
        "{}",
        std::io::Error::last_os_error()
    );
}

#[test]
fn packet_port_on_a_live_runner_forwards_between_veths() {
    // A router between two veth pairs, frames from one side reach the
    // other: the AF_PACKET port works under the runner too.
    if let Some(why) = packet_skip_reason() {
        println!("skipped: {why}");
        return;
    }
    let (v1, v2) = match (Veth::create("r", 1500), Veth::create("s", 1500)) {
        (Ok(a), Ok(b)) => (a, b),
        (Err(e), _) | (_, Err(e)) => {
            println!("skipped: cannot create a veth pair: {e}");
            return;
        }
    };
    let mut outer1 = PacketPort::open(&v1.a).unwrap();
    let mut outer2 = PacketPort::open(&v2.a).unwrap();
    let ports: Vec<Box<dyn Port>> = vec![
        Box::new(PacketPort::open(&v1.b).unwrap()),
        Box::new(PacketPort::open(&v2.b).unwrap()),
    ];
    let mut router = inca_sim::nodes::router::Router::new(
        inca_sim::nodes::router::RouterConfig::default(),
        vec![[2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2]],
        vec![[4; 6], [6; 6]],
    );
    router.add_route([10, 0, 0, 0], 8, vec![1]).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let stop2 = stop.clone();
    let handle = std::thread::spawn(move || {
        let mut r = Runner::new(router, ports, 1, RunnerConfig::default());
        r.run(&stop2).unwrap();
        r.stats()
    });
    let ep = inca_wire::Endpoints::new(
        [2; 6],
        "192.0.2.1".parse().unwrap(),
        [2, 0, 0, 0, 0, 1],
        "10.1.2.3".parse().unwrap(),
    );
    let n = 100u16;
    let mut frames: Vec<Vec<u8>> = (0..n)
        .map(|i| inca_wire::build_udp_frame(&ep, 1000 + i, 53, b"veth", true).unwrap())
        .collect();
    outer1.send_batch(&mut frames).unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut got = 0;
    let mut buf = Vec::new();
    while got < n && Instant::now() < deadline {
        buf.clear();
        outer2.recv_batch(&mut buf, BATCH).unwrap();
        for f in &buf {
            let Ok(ip) = inca_wire::Ipv4Packet::new_checked(&f[14.min(f.len())..]) else {
                continue;
            };
            if ip.dst_addr() == std::net::Ipv4Addr::new(10, 1, 2, 3) {
                assert_eq!(ip.ttl(), 63);
                got += 1;
            }
        }
        if buf.is_empty() {
            std::thread::sleep(Duration::from_micros(200));
        }
    }
    stop.store(true, Ordering::Relaxed);
    let rs = handle.join().unwrap();
    assert_eq!(got, n, "every frame crossed the router (runner {rs:?})");
    drop((v1, v2));
}
