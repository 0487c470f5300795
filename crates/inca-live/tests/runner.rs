//! Two live runners over UDP on loopback: a switch model forwarding between
//! two ports, with frames really crossing sockets.

use std::net::UdpSocket;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use inca_live::port::Port;
use inca_live::runner::{Runner, RunnerConfig};
use inca_live::udp::UdpPort;
use inca_sim::nodes::router::{Router, RouterConfig};

/// A router with port 0 ↔ test socket A and port 1 ↔ test socket B, running
/// live in a thread; frames to 10.0.0.0/8 go out port 1.
#[test]
fn a_live_router_forwards_real_datagrams() {
    let a = UdpSocket::bind("127.0.0.1:0").unwrap();
    let b = UdpSocket::bind("127.0.0.1:0").unwrap();
    b.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let p0 = UdpPort::bind("127.0.0.1:0".parse().unwrap(), a.local_addr().unwrap()).unwrap();
    let p1 = UdpPort::bind("127.0.0.1:0".parse().unwrap(), b.local_addr().unwrap()).unwrap();
    let to_router = p0.local_addr().unwrap();
    let mut router = Router::new(
        RouterConfig::default(),
        vec![[2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2]],
        vec![[4; 6], [6; 6]],
    );
    router.add_route([10, 0, 0, 0], 8, vec![1]).unwrap();
    let ports: Vec<Box<dyn Port>> = vec![Box::new(p0), Box::new(p1)];
    let stop = Arc::new(AtomicBool::new(false));
    let stop2 = stop.clone();
    let handle = std::thread::spawn(move || {
        let mut r = Runner::new(router, ports, 1, RunnerConfig::default());
        r.run(&stop2).unwrap();
        (r.stats(), r.device().stats())
    });
    let ep = inca_wire::Endpoints::new(
        [2; 6],
        "192.0.2.1".parse().unwrap(),
        [2, 0, 0, 0, 0, 1],
        "10.1.2.3".parse().unwrap(),
    );
    let n = 200;
    for i in 0..n {
        let f = inca_wire::build_udp_frame(&ep, 1000 + i, 53, b"live", true).unwrap();
        a.send_to(&f, to_router).unwrap();
    }
    a.send_to(b"junk", to_router).unwrap(); // too short: counted, dropped
    let mut got = 0;
    let mut buf = [0u8; 2048];
    let deadline = Instant::now() + Duration::from_secs(5);
    while got < n && Instant::now() < deadline {
        if let Ok((len, _)) = b.recv_from(&mut buf) {
            let ip = inca_wire::Ipv4Packet::new_checked(&buf[14..len]).unwrap();
            assert_eq!(ip.ttl(), 63);
            assert!(ip.verify_checksum());
            got += 1;
        }
    }
    stop.store(true, Ordering::Relaxed);
    let (rs, router_stats) = handle.join().unwrap();
    assert_eq!(got, n, "every frame crossed the live router");
    assert_eq!(rs.frames_in, u64::from(n));
    assert_eq!(router_stats.tx, u64::from(n));
}

/// The same router with link models: 3 ms on what arrives at port 0, 5 ms
/// on what leaves port 1. Every frame takes both, and the loss-free models
/// pass every frame.
#[test]
fn a_live_routers_link_models_delay_both_ways_through() {
    use inca_live::link::LiveLink;
    use inca_sim::link::ChannelConfig;
    let a = UdpSocket::bind("127.0.0.1:0").unwrap();
    let b = UdpSocket::bind("127.0.0.1:0").unwrap();
    b.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let p0 = UdpPort::bind("127.0.0.1:0".parse().unwrap(), a.local_addr().unwrap()).unwrap();
    let p1 = UdpPort::bind("127.0.0.1:0".parse().unwrap(), b.local_addr().unwrap()).unwrap();
    let to_router = p0.local_addr().unwrap();
    let mut router = Router::new(
        RouterConfig::default(),
        vec![[2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2]],
        vec![[4; 6], [6; 6]],
    );
    router.add_route([10, 0, 0, 0], 8, vec![1]).unwrap();
    let ports: Vec<Box<dyn Port>> = vec![Box::new(p0), Box::new(p1)];
    let delayed = |delay| ChannelConfig {
        delay,
        ..ChannelConfig::default()
    };
    let stop = Arc::new(AtomicBool::new(false));
    let stop2 = stop.clone();
    let handle = std::thread::spawn(move || {
        let mut r = Runner::new(router, ports, 1, RunnerConfig::default())
            .with_links(vec![None, Some(LiveLink::egress(delayed(5_000_000), 1, 1))])
            .with_ingress_links(vec![Some(LiveLink::ingress(delayed(3_000_000), 1, 0))]);
        r.run(&stop2).unwrap();
        (
            r.link(1).unwrap().stats(),
            r.ingress_link(0).unwrap().stats(),
            r.link(0).is_none(),
        )
    });
    let ep = inca_wire::Endpoints::new(
        [2; 6],
        "192.0.2.1".parse().unwrap(),
        [2, 0, 0, 0, 0, 1],
        "10.1.2.3".parse().unwrap(),
    );
    let n = 50u64;
    let mut buf = [0u8; 2048];
    let mut fastest = Duration::MAX;
    for i in 0..n {
        let f = inca_wire::build_udp_frame(&ep, 1000 + i as u16, 53, b"live", true).unwrap();
        let t = Instant::now();
        a.send_to(&f, to_router).unwrap();
        b.recv_from(&mut buf).expect("every frame comes through");
        fastest = fastest.min(t.elapsed());
    }
    stop.store(true, Ordering::Relaxed);
    let (egress, ingress, port0_plain) = handle.join().unwrap();
    eprintln!("fastest of {n}: {fastest:?} (3 ms in + 5 ms out)");
    assert!(fastest >= Duration::from_millis(8), "{fastest:?}");
    assert_eq!(egress.channel.offered, n);
    assert_eq!(ingress.channel.delivered, n);
    assert!(port0_plain, "port 0 sends without a model");
}
