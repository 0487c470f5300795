//! The stateful firewall through the switch model with real frames: inside
//! connections and their replies, unsolicited traffic, aging, RST, a full
//! table, a crash, other profiles, the resource check and random input.

use std::net::Ipv4Addr;

use inca_apps::firewall::{Firewall, STAT_IN, STAT_NEW, STAT_NOT_L4, STAT_OUT, STAT_UNSOLICITED};
use inca_switch::device::{MILLIS, SECONDS};
use inca_switch::harness::{Harness, Transmitted};
use inca_switch::{check, PortId, Profile, Switch};
use inca_wire::{
    build_tcp_frame, build_udp_frame, Endpoints, EthernetFrame, Ipv4Packet, TcpFlags, TcpRepr,
    TcpSegment, UdpDatagram,
};
use proptest::prelude::*;

const OUTSIDE: u16 = 0;
const INSIDE: u16 = 3;
const SEED: u64 = 7;

fn host(n: u8) -> Endpoints {
    Endpoints::new(
        [2, 0, 0, 0, 0, n],
        Ipv4Addr::new(10, 0, 0, n),
        [2, 0, 0, 0, 0, 0xfe],
        Ipv4Addr::new(203, 0, 113, 9),
    )
}

fn tcp(ep: &Endpoints, sport: u16, dport: u16, flags: TcpFlags, payload: &[u8]) -> Vec<u8> {
    let repr = TcpRepr {
        src_port: sport,
        dst_port: dport,
        seq: 1000,
        ack: 0,
        flags,
        window: 65_535,
        urgent: 0,
        options: &[],
        payload,
    };
    build_tcp_frame(ep, &repr).unwrap()
}

/// (src, sport, dst, dport) of a frame, after checking both checksums.
fn endpoints_of(frame: &[u8]) -> (Ipv4Addr, u16, Ipv4Addr, u16) {
    let eth = EthernetFrame::new_checked(frame).unwrap();
    let ip = Ipv4Packet::new_checked(eth.payload()).unwrap();
    assert!(ip.verify_checksum(), "IPv4 checksum broken");
    let (src, dst) = (ip.src_addr(), ip.dst_addr());
    if ip.protocol() == 6 {
        let t = TcpSegment::new_checked(ip.payload()).unwrap();
        assert!(t.verify_checksum(src, dst), "TCP checksum broken");
        (src, t.src_port(), dst, t.dst_port())
    } else {
        let u = UdpDatagram::new_checked(ip.payload()).unwrap();
        assert!(u.verify_checksum(src, dst), "UDP checksum broken");
        (src, u.src_port(), dst, u.dst_port())
    }
}

fn fw_switch(flows: usize, idle: u64) -> Harness<Switch<Firewall>> {
    println!("seed {SEED}");
    let fw = Firewall::new(flows, OUTSIDE, idle);
    Harness::new(Switch::new(Profile::tofino(), fw).unwrap(), SEED)
}

fn stat(h: &Harness<Switch<Firewall>>, index: u64) -> u64 {
    let c = h.device.program().stats_counter().unwrap();
    h.device.objects().counter_read(c, index).unwrap().0
}

fn on_port(tx: &[Transmitted], port: u16) -> Vec<&Transmitted> {
    tx.iter().filter(|t| t.port == port).collect()
}

fn conn_entries(h: &Harness<Switch<Firewall>>) -> usize {
    let t = h.device.program().conn_table().unwrap();
    h.device.objects().table_len(t.id())
}

#[test]
fn inside_connections_open_the_way_back_to_their_own_port() {
    let mut h = fw_switch(1024, 60 * SECONDS);
    let timing = Profile::tofino().control_plane;
    let a = host(5);
    let b = host(6);
    h.send(0, INSIDE, tcp(&a, 40_000, 80, TcpFlags::SYN, b"hello"));
    h.send(10, 7, tcp(&b, 41_000, 443, TcpFlags::SYN, b""));
    h.advance_to(10 * MILLIS);
    let out = h.take();
    let first = on_port(&out, OUTSIDE);
    assert_eq!(first.len(), 2, "both go out after the control plane");
    let min_first = timing.punt_latency + timing.cpu_per_event + timing.table_write;
    assert!(first[0].at >= min_first, "left at {} ns", first[0].at);
    assert_eq!(
        endpoints_of(&first[0].frame),
        (
            Ipv4Addr::new(10, 0, 0, 5),
            40_000,
            Ipv4Addr::new(203, 0, 113, 9),
            80
        ),
        "forwarded unchanged"
    );
    assert!(first[0].frame.ends_with(b"hello"));
    assert_eq!(h.device.program().connections(), 2);
    assert_eq!(conn_entries(&h), 2, "one entry per connection");
    assert_eq!(stat(&h, STAT_NEW), 2);

    // Later packets stay on the fast path.
    let t = h.now();
    let cpu = h.device.stats().cpu_events;
    h.send(t, INSIDE, tcp(&a, 40_000, 80, TcpFlags::ACK, b"more"));
    h.advance_to(t + 10_000);
    let out = h.take();
    assert_eq!(out.len(), 1);
    assert_eq!((out[0].port, out[0].at), (OUTSIDE, t + 450));
    assert_eq!(h.device.stats().cpu_events, cpu);

    // Replies go back to the port each connection came from.
    let t = h.now();
    h.send(
        t,
        OUTSIDE,
        tcp(&a.reversed(), 80, 40_000, TcpFlags::ACK, b"r1"),
    );
    h.send(
        t + 1,
        OUTSIDE,
        tcp(&b.reversed(), 443, 41_000, TcpFlags::ACK, b"r2"),
    );
    h.advance_to(t + 10_000);
    let back = h.take();
    assert_eq!(back.len(), 2);
    assert_eq!(back[0].port, INSIDE);
    assert_eq!(back[1].port, 7);
    assert_eq!(
        endpoints_of(&back[0].frame),
        (
            Ipv4Addr::new(203, 0, 113, 9),
            80,
            Ipv4Addr::new(10, 0, 0, 5),
            40_000
        )
    );
    assert!(back[1].frame.ends_with(b"r2"));
    assert_eq!(stat(&h, STAT_IN), 2);
    assert_eq!(
        stat(&h, STAT_OUT),
        3,
        "the two re-injected first packets hit too"
    );
}

#[test]
fn unsolicited_and_mismatched_outside_packets_are_dropped_and_counted() {
    let mut h = fw_switch(1024, 60 * SECONDS);
    let a = host(5);
    h.send(0, INSIDE, tcp(&a, 40_000, 80, TcpFlags::SYN, b""));
    h.advance_to(10 * MILLIS);
    assert_eq!(h.take().len(), 1);
    let t = h.now();
    // Unsolicited: another remote port, another inside port, a new remote.
    h.send(
        t,
        OUTSIDE,
        tcp(&a.reversed(), 81, 40_000, TcpFlags::SYN, b""),
    );
    h.send(
        t + 1,
        OUTSIDE,
        tcp(&a.reversed(), 80, 40_001, TcpFlags::ACK, b""),
    );
    let mut other = a.reversed();
    other.src_ip = Ipv4Addr::new(198, 51, 100, 66);
    h.send(t + 2, OUTSIDE, tcp(&other, 80, 40_000, TcpFlags::ACK, b""));
    // UDP reply to a TCP connection.
    h.send(
        t + 3,
        OUTSIDE,
        build_udp_frame(&a.reversed(), 80, 40_000, b"x", true).unwrap(),
    );
    h.advance_to(t + 10 * MILLIS);
    assert!(h.take().is_empty());
    assert_eq!(stat(&h, STAT_UNSOLICITED), 4);
    let s = h.device.stats();
    assert_eq!(s.punts, 1, "outside misses never reach the control plane");
    assert_eq!(s.program_drops, 4);
}

#[test]
fn udp_and_non_l4_traffic() {
    let mut h = fw_switch(1024, 60 * SECONDS);
    let a = host(9);
    h.send(0, 2, build_udp_frame(&a, 5353, 53, b"query", true).unwrap());
    h.advance_to(10 * MILLIS);
    let out = h.take();
    assert_eq!(out.len(), 1);
    assert_eq!(endpoints_of(&out[0].frame).1, 5353);
    let t = h.now();
    h.send(
        t,
        OUTSIDE,
        build_udp_frame(&a.reversed(), 53, 5353, b"answer", false).unwrap(),
    );
    h.advance_to(t + 10_000);
    let back = h.take();
    assert_eq!(back.len(), 1);
    assert_eq!(back[0].port, 2);
    // An ARP-like frame and an ICMP packet: dropped, counted.
    let mut arp = vec![0xffu8; 12];
    arp.extend_from_slice(&[0x08, 0x06]);
    arp.resize(60, 0);
    h.send(t + 20_000, 2, arp);
    let mut icmp = build_udp_frame(&a, 1, 2, b"", true).unwrap();
    icmp[14 + 9] = 1; // protocol ICMP (checksum no longer matters: dropped)
    h.send(t + 20_001, 2, icmp);
    h.advance_to(t + 10 * MILLIS);
    assert!(h.take().is_empty());
    assert_eq!(stat(&h, STAT_NOT_L4), 2);
}

#[test]
fn idle_connections_age_out_and_active_ones_stay() {
    let idle = 10 * MILLIS;
    let mut h = fw_switch(1024, idle);
    let a = host(5);
    let b = host(6);
    h.send(0, INSIDE, tcp(&a, 1000, 80, TcpFlags::SYN, b""));
    h.send(0, INSIDE, tcp(&b, 2000, 80, TcpFlags::SYN, b""));
    h.advance_to(MILLIS);
    assert_eq!(h.take().len(), 2);
    // Keep b alive with inbound traffic only: the one entry sees both ways.
    let mut t = MILLIS;
    while t < 60 * MILLIS {
        t += 2 * MILLIS;
        h.send(t, OUTSIDE, tcp(&b.reversed(), 80, 2000, TcpFlags::ACK, b""));
    }
    h.advance_to(61 * MILLIS + 10_000);
    assert_eq!(on_port(&h.take(), INSIDE).len(), 30, "b's replies all pass");
    assert_eq!(h.device.program().expired, 1, "a aged out");
    assert_eq!(conn_entries(&h), 1);
    // a's late reply is now unsolicited.
    h.send(
        62 * MILLIS,
        OUTSIDE,
        tcp(&a.reversed(), 80, 1000, TcpFlags::ACK, b""),
    );
    h.advance_to(70 * MILLIS);
    assert!(h.take().is_empty());
    assert_eq!(stat(&h, STAT_UNSOLICITED), 1);
    // Opening it again from inside works.
    h.send(71 * MILLIS, INSIDE, tcp(&a, 1000, 80, TcpFlags::SYN, b""));
    h.send(
        72 * MILLIS,
        OUTSIDE,
        tcp(&a.reversed(), 80, 1000, TcpFlags::ACK, b""),
    );
    h.advance_to(73 * MILLIS);
    assert_eq!(h.take().len(), 2);
}

#[test]
fn a_reset_closes_the_connection() {
    let mut h = fw_switch(1024, 60 * SECONDS);
    let a = host(5);
    h.send(0, INSIDE, tcp(&a, 1000, 80, TcpFlags::SYN, b""));
    h.advance_to(MILLIS);
    assert_eq!(h.take().len(), 1);
    h.send(
        2 * MILLIS,
        OUTSIDE,
        tcp(&a.reversed(), 80, 1000, TcpFlags::RST, b""),
    );
    h.advance_to(3 * MILLIS);
    assert_eq!(on_port(&h.take(), INSIDE).len(), 1, "the RST itself passes");
    assert_eq!(h.device.program().reset, 1);
    assert_eq!(conn_entries(&h), 0);
    h.send(
        4 * MILLIS,
        OUTSIDE,
        tcp(&a.reversed(), 80, 1000, TcpFlags::ACK, b""),
    );
    h.advance_to(5 * MILLIS);
    assert!(h.take().is_empty());
    // A stray RST from inside goes out without opening anything.
    h.send(6 * MILLIS, INSIDE, tcp(&a, 1001, 80, TcpFlags::RST, b""));
    h.advance_to(7 * MILLIS);
    assert_eq!(h.take().len(), 1);
    assert_eq!(h.device.stats().punts, 1);
    assert_eq!(h.device.program().connections(), 0);
}

#[test]
fn a_full_table_refuses_new_connections() {
    let mut h = fw_switch(2, 60 * SECONDS);
    for i in 0..3u16 {
        h.send(
            u64::from(i),
            INSIDE,
            tcp(&host(5), 6000 + i, 80, TcpFlags::SYN, b""),
        );
    }
    // A repeat of the first while its install is on its way: no second entry.
    h.send(10, INSIDE, tcp(&host(5), 6000, 80, TcpFlags::SYN, b""));
    h.advance_to(100 * MILLIS);
    assert_eq!(on_port(&h.take(), OUTSIDE).len(), 3);
    assert_eq!(h.device.program().refused, 1);
    assert_eq!(conn_entries(&h), 2);
    assert_eq!(h.device.stats().cp_op_failures, 0);
}

#[test]
fn a_crash_loses_the_connections() {
    let mut h = fw_switch(1024, 60 * SECONDS);
    let a = host(5);
    h.send(0, INSIDE, tcp(&a, 1000, 80, TcpFlags::SYN, b""));
    h.advance_to(MILLIS);
    assert_eq!(h.take().len(), 1);
    h.restart(2 * MILLIS);
    h.send(
        3 * MILLIS,
        OUTSIDE,
        tcp(&a.reversed(), 80, 1000, TcpFlags::ACK, b""),
    );
    h.advance_to(4 * MILLIS);
    assert!(h.take().is_empty());
    assert_eq!(h.device.program().connections(), 0);
}

#[test]
fn loads_on_a_smartnic_and_punts_there() {
    let nic = Profile::smartnic();
    let fw = Firewall::new(1 << 20, OUTSIDE, 60 * SECONDS);
    let mut h = Harness::new(Switch::new(nic, fw).unwrap(), SEED);
    let a = host(5);
    h.send(0, 1, tcp(&a, 1000, 80, TcpFlags::SYN, b""));
    h.advance_to(100 * MILLIS);
    assert_eq!(on_port(&h.take(), OUTSIDE).len(), 1);
    h.send(
        200 * MILLIS,
        OUTSIDE,
        tcp(&a.reversed(), 80, 1000, TcpFlags::ACK, b""),
    );
    h.advance_to(201 * MILLIS);
    assert_eq!(on_port(&h.take(), 1).len(), 1);
    assert_eq!(h.device.stats().punts, 1);
    assert!(h.device.violations().is_empty());
}

#[test]
fn on_a_server_the_firewall_installs_inline_and_ages() {
    let server = Profile::server();
    let dp = server.data_path;
    let fw = Firewall::new(1 << 20, OUTSIDE, 10 * MILLIS);
    let mut h = Harness::new(Switch::new(server, fw).unwrap(), SEED);
    let a = host(5);
    h.send(0, 1, tcp(&a, 40_000, 80, TcpFlags::SYN, b"hi"));
    h.advance_to(MILLIS);
    let out = h.take();
    assert_eq!(out.len(), 1);
    assert_eq!(
        out[0].at,
        dp.ingress_latency + dp.egress_latency,
        "no round trip"
    );
    assert_eq!(endpoints_of(&out[0].frame).1, 40_000);
    assert_eq!(h.device.stats().punts, 0);
    h.send(
        2 * MILLIS,
        OUTSIDE,
        tcp(&a.reversed(), 80, 40_000, TcpFlags::ACK, b""),
    );
    h.advance_to(3 * MILLIS);
    assert_eq!(on_port(&h.take(), 1).len(), 1);
    // Aging still goes through the (fast) control plane.
    h.advance_to(40 * MILLIS);
    assert_eq!(h.device.program().expired, 1);
    h.send(
        41 * MILLIS,
        OUTSIDE,
        tcp(&a.reversed(), 80, 40_000, TcpFlags::ACK, b""),
    );
    h.advance_to(42 * MILLIS);
    assert!(h.take().is_empty());
    assert!(h.device.violations().is_empty());
}

#[test]
fn params_and_resource_check() {
    let p = inca_apps::params::Params::parse(["flows=1000", "outside_port=4", "idle_timeout=5"])
        .unwrap();
    let mut fw = Firewall::from_params(&p).unwrap();
    let report = check(&Profile::tofino(), &mut fw).unwrap();
    println!("{report}");
    let bad = inca_apps::params::Params::parse(["flow=1"]).unwrap();
    assert!(Firewall::from_params(&bad).is_err());

    let fits = |n: usize| check(&Profile::tofino(), &mut Firewall::new(n, 0, SECONDS)).is_ok();
    assert!(fits(65_536));
    let (mut lo, mut hi) = (65_536usize, 1 << 26);
    assert!(!fits(hi));
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if fits(mid) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    println!(
        "{}",
        check(&Profile::tofino(), &mut Firewall::new(lo, 0, SECONDS)).unwrap()
    );
    let err = check(&Profile::tofino(), &mut Firewall::new(hi, 0, SECONDS))
        .unwrap_err()
        .to_string();
    println!("largest firewall on tofino: {lo} connections; at {hi}: {err}");
    assert!(err.contains("fw_conn"), "{err}");
    for profile in [Profile::smartnic(), Profile::server()] {
        check(&profile, &mut Firewall::new(1 << 20, 0, SECONDS)).unwrap();
    }
}

fn frames() -> impl Strategy<Value = Vec<(u64, PortId, Vec<u8>)>> {
    let valid = tcp(&host(5), 1000, 80, TcpFlags::SYN, b"payload");
    let frame = prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..600),
        // A valid frame with some bytes changed and maybe cut short.
        (
            proptest::collection::vec((0usize..80, any::<u8>()), 0..6),
            0usize..80,
            any::<bool>(),
        )
            .prop_map(move |(edits, cut, flags_only)| {
                let mut f = valid.clone();
                for (i, b) in edits {
                    let i = if flags_only { 47 } else { i % f.len() };
                    f[i] = b;
                }
                f.truncate(cut.max(14));
                f
            }),
    ];
    proptest::collection::vec((0u64..5_000, 0u16..40, frame), 1..40)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn random_frames_never_panic_and_are_all_counted(seed in any::<u64>(), frames in frames()) {
        println!("seed {seed}");
        for profile in [Profile::tofino(), Profile::server()] {
            let fw = Firewall::new(16, OUTSIDE, 5 * MILLIS);
            let mut h = Harness::new(Switch::new(profile, fw).unwrap(), seed);
            let mut t = 0;
            for (gap, port, f) in &frames {
                t += gap;
                h.send(t, *port, f.clone());
            }
            h.advance_to(t + 100 * MILLIS);
            let s = h.device.stats();
            let n = frames.len() as u64 + h.device.program().reinjected;
            prop_assert_eq!(s.fates(), n, "stats {:?}", s);
            prop_assert!(h.device.violations().is_empty(), "{:?}", h.device.violations());
            let tx: u64 = s.ports.iter().map(|p| p.tx_packets).sum();
            prop_assert_eq!(h.transmit_count, tx);
        }
    }
}
