//! The L4 load balancer through the switch model with real frames: new
//! connections spread over the pool, return traffic back through the VIP,
//! pool changes that move no existing connection (also while connections
//! are being installed), draining a removed backend, aging, other profiles,
//! the resource check and random input.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use inca_apps::lb::{
    bucket_of, Backend, LoadBalancer, PoolChange, STAT_NEW, STAT_TO_BACKEND, STAT_TO_CLIENT,
    STAT_UNKNOWN,
};
use inca_apps::params::Params;
use inca_switch::device::{ControlMessage, MILLIS, SECONDS};
use inca_switch::harness::{Harness, Transmitted};
use inca_switch::{check, PortId, Profile, Switch};
use inca_wire::{
    build_tcp_frame, build_udp_frame, Endpoints, EthernetFrame, Ipv4Packet, TcpFlags, TcpRepr,
    TcpSegment, UdpDatagram,
};
use proptest::prelude::*;

const CLIENT_PORT: u16 = 0;
const VIP: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 1);
const SEED: u64 = 11;
/// Time for the initial pool (256 buckets, one write per 20 µs) to be in.
const BOOT: u64 = 6 * MILLIS;

type H = Harness<Switch<LoadBalancer>>;

fn client(n: u8) -> Endpoints {
    Endpoints::new(
        [2, 0, 0, 0, 1, n],
        Ipv4Addr::new(198, 51, 100, n),
        [2, 0, 0, 0, 0, 0xfe],
        VIP,
    )
}

fn backend_ep(b: &Backend, to: &Endpoints) -> Endpoints {
    let mut ep = to.reversed();
    ep.src_ip = Ipv4Addr::from(b.ip);
    ep
}

fn tcp(ep: &Endpoints, sport: u16, dport: u16, flags: TcpFlags, payload: &[u8]) -> Vec<u8> {
    let repr = TcpRepr {
        src_port: sport,
        dst_port: dport,
        seq: 77,
        ack: 0,
        flags,
        window: 65_535,
        urgent: 0,
        options: &[2, 4, 5, 0xb4],
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

fn lb_switch(backends: usize) -> H {
    println!("seed {SEED}");
    let pool = LoadBalancer::default_pool(backends, 80);
    let lb = LoadBalancer::new(1 << 16, VIP.octets(), 80, pool, 256, 60 * SECONDS);
    let mut h = Harness::new(Switch::new(Profile::tofino(), lb).unwrap(), SEED);
    h.advance_to(BOOT);
    h
}

fn stat(h: &H, index: u64) -> u64 {
    let c = h.device.program().stats_counter().unwrap();
    h.device.objects().counter_read(c, index).unwrap().0
}

fn conn_entries(h: &H) -> usize {
    let t = h.device.program().conn_table().unwrap();
    h.device.objects().table_len(t.id())
}

/// The backend (address, egress port) a client packet was sent to,
/// checking the rewrite.
fn backend_of(t: &Transmitted, sport: u16) -> (Ipv4Addr, u16) {
    let (src, s, dst, d) = endpoints_of(&t.frame);
    assert_eq!(s, sport);
    assert_eq!(d, 80);
    assert_eq!(src.octets()[0], 198, "source untouched");
    assert_eq!(
        dst.octets()[..3],
        [10, 1, 0],
        "destination rewritten to a backend"
    );
    (dst, t.port)
}

/// Sends one packet for each client port at `at` and returns where each
/// went.
fn send_all(h: &mut H, at: u64, sports: &[u16], flags: TcpFlags) -> BTreeMap<u16, (Ipv4Addr, u16)> {
    for (i, &s) in sports.iter().enumerate() {
        h.send(
            at + i as u64,
            CLIENT_PORT,
            tcp(&client(1), s, 80, flags, b"data"),
        );
    }
    h.advance_to(at + sports.len() as u64 + 10_000);
    let out = h.take();
    assert_eq!(out.len(), sports.len(), "every packet forwarded at once");
    out.iter()
        .map(|t| {
            let s = endpoints_of(&t.frame).1;
            (s, backend_of(t, s))
        })
        .collect()
}

fn message(change: PoolChange) -> ControlMessage {
    change.encode()
}

#[test]
fn new_connections_spread_and_replies_come_back_from_the_vip() {
    let mut h = lb_switch(4);
    let sports: Vec<u16> = (10_000..10_200).collect();
    let t = h.now();
    // The first packet goes straight through at pipeline latency.
    h.send(
        t,
        CLIENT_PORT,
        tcp(&client(1), 9_999, 80, TcpFlags::SYN, b"hello"),
    );
    h.advance_to(t + 10_000);
    let first = h.take();
    assert_eq!(first.len(), 1);
    assert_eq!(first[0].at, t + 450, "no control-plane round trip");
    assert!(first[0].frame.ends_with(b"hello"));
    let (ip, port) = backend_of(&first[0], 9_999);
    assert_eq!(ip.octets()[3] as u16, port, "10.1.0.i is on port i");

    let t = h.now();
    let chosen = send_all(&mut h, t, &sports, TcpFlags::SYN);
    let mut per_backend = BTreeMap::new();
    for (ip, _) in chosen.values() {
        *per_backend.entry(*ip).or_insert(0) += 1;
    }
    println!("{per_backend:?}");
    assert_eq!(per_backend.len(), 4, "all four backends get connections");
    assert!(per_backend.values().all(|&n| n > 25), "{per_backend:?}");
    h.advance_to(h.now() + 20 * MILLIS);
    assert_eq!(h.device.program().connections(), 201);
    assert_eq!(conn_entries(&h), 201);
    assert_eq!(stat(&h, STAT_NEW), 201);

    // Installed: the same backends, from the table now.
    let t = h.now();
    let again = send_all(&mut h, t, &sports, TcpFlags::ACK);
    assert_eq!(again, chosen);
    assert_eq!(stat(&h, STAT_TO_BACKEND), 200);

    // Each backend answers; the client sees the VIP.
    let t = h.now();
    for (i, (&s, &(ip, port))) in chosen.iter().enumerate() {
        let b = Backend {
            ip: ip.octets(),
            port: 80,
            egress: port,
        };
        let reply = tcp(&backend_ep(&b, &client(1)), 80, s, TcpFlags::ACK, b"reply");
        h.send(t + i as u64, port, reply);
    }
    h.advance_to(t + 20_000);
    let back = h.take();
    assert_eq!(back.len(), 200);
    for r in &back {
        assert_eq!(r.port, CLIENT_PORT);
        let (src, sport, dst, _) = endpoints_of(&r.frame);
        assert_eq!((src, sport, dst), (VIP, 80, Ipv4Addr::new(198, 51, 100, 1)));
        assert!(r.frame.ends_with(b"reply"));
    }
    assert_eq!(stat(&h, STAT_TO_CLIENT), 200);
}

#[test]
fn replies_from_the_wrong_backend_and_stray_packets_are_dropped_or_returned_statelessly() {
    let mut h = lb_switch(4);
    let t = h.now();
    let chosen = send_all(&mut h, t, &[5000], TcpFlags::SYN);
    h.advance_to(h.now() + MILLIS);
    let (ip, port) = chosen[&5000];
    let right = Backend {
        ip: ip.octets(),
        port: 80,
        egress: port,
    };
    let mut wrong = right;
    wrong.ip[3] = if ip.octets()[3] == 1 { 2 } else { 1 };
    let t = h.now();
    h.send(
        t,
        2,
        tcp(
            &backend_ep(&wrong, &client(1)),
            80,
            5000,
            TcpFlags::ACK,
            b"",
        ),
    );
    h.send(
        t + 1,
        port,
        tcp(
            &backend_ep(&right, &client(1)),
            81,
            5000,
            TcpFlags::ACK,
            b"",
        ),
    );
    h.send(
        t + 2,
        port,
        tcp(
            &backend_ep(&right, &client(1)),
            80,
            5001,
            TcpFlags::ACK,
            b"",
        ),
    );
    // Client traffic to another port of the VIP, and to another address.
    h.send(
        t + 3,
        CLIENT_PORT,
        tcp(&client(1), 5000, 22, TcpFlags::SYN, b""),
    );
    let mut other = client(1);
    other.dst_ip = Ipv4Addr::new(192, 0, 2, 2);
    h.send(
        t + 4,
        CLIENT_PORT,
        tcp(&other, 5000, 80, TcpFlags::SYN, b""),
    );
    h.advance_to(t + MILLIS);
    // The one packet from a backend's service port (80) that belongs to no
    // connection (client port 5001) is returned statelessly towards the
    // clients, as a reply racing its connection's install would be; the
    // wrong backend, the wrong source port and the client strays are dropped.
    let out = h.take();
    assert_eq!(out.len(), 1, "{out:?}");
    assert_eq!(out[0].port, CLIENT_PORT);
    assert_eq!(stat(&h, STAT_UNKNOWN), 4);
    assert_eq!(h.device.stats().digests, 1, "only the real connection");
}

#[test]
fn udp_with_and_without_checksum() {
    let mut h = lb_switch(2);
    let t = h.now();
    h.send(
        t,
        CLIENT_PORT,
        build_udp_frame(&client(3), 53, 80, b"q1", true).unwrap(),
    );
    h.send(
        t + 1,
        CLIENT_PORT,
        build_udp_frame(&client(3), 54, 80, b"q2", false).unwrap(),
    );
    h.advance_to(t + MILLIS);
    let out = h.take();
    assert_eq!(out.len(), 2);
    for o in &out {
        let (_, _, dst, dport) = endpoints_of(&o.frame);
        assert_eq!((dst.octets()[..3].to_vec(), dport), (vec![10, 1, 0], 80));
    }
    let u = UdpDatagram::new_checked(&out[1].frame[34..]).unwrap();
    assert_eq!(u.checksum(), 0, "no checksum stays no checksum");
}

#[test]
fn pool_changes_move_no_existing_connection() {
    let mut h = lb_switch(4);
    let old: Vec<u16> = (20_000..20_300).collect();
    let t = h.now();
    let before = send_all(&mut h, t, &old, TcpFlags::SYN);
    h.advance_to(h.now() + 20 * MILLIS);

    // Add 10.1.0.5 on port 5.
    let five = Backend {
        ip: [10, 1, 0, 5],
        port: 80,
        egress: 5,
    };
    let t = h.now();
    h.control(t, message(PoolChange::Add(five)));
    h.advance_to(t + 10 * MILLIS);
    assert!(!h.device.program().changing());
    assert_eq!(h.device.program().members().len(), 5);
    assert_eq!(h.device.program().pool_changes, 1);
    let t = h.now();
    assert_eq!(
        send_all(&mut h, t, &old, TcpFlags::ACK),
        before,
        "nothing moved"
    );

    // New connections use the new pool, as the control plane's copy says.
    let fresh: Vec<u16> = (30_000..30_300).collect();
    let t = h.now();
    let after = send_all(&mut h, t, &fresh, TcpFlags::SYN);
    let on_five = after.values().filter(|(_, p)| *p == 5).count();
    assert!(on_five > 30, "the new member takes its share: {on_five}");
    check_agrees_with_assignment(&h, &after);
    h.advance_to(h.now() + 20 * MILLIS);

    // Remove 10.1.0.2: its connections drain (stay), new ones avoid it.
    let two = Backend {
        ip: [10, 1, 0, 2],
        port: 80,
        egress: 2,
    };
    let t = h.now();
    h.control(t, message(PoolChange::Remove(two.ip, two.port)));
    h.advance_to(t + 10 * MILLIS);
    let t = h.now();
    let mut all = old.clone();
    all.extend(&fresh);
    let now = send_all(&mut h, t, &all, TcpFlags::ACK);
    for s in &old {
        assert_eq!(now[s], before[s]);
    }
    for s in &fresh {
        assert_eq!(now[s], after[s]);
    }
    let draining = old.iter().filter(|s| before[s].1 == 2).count();
    assert!(draining > 0);
    // The removed backend's replies still reach the client.
    let s = *old.iter().find(|s| before[s].1 == 2).unwrap();
    let t = h.now();
    h.send(
        t,
        2,
        tcp(&backend_ep(&two, &client(1)), 80, s, TcpFlags::ACK, b""),
    );
    h.advance_to(t + 10_000);
    assert_eq!(h.take()[0].port, CLIENT_PORT);
    let newest: Vec<u16> = (40_000..40_300).collect();
    let t = h.now();
    let last = send_all(&mut h, t, &newest, TcpFlags::SYN);
    assert!(
        last.values().all(|(_, p)| *p != 2),
        "no new connection to a removed backend"
    );
    check_agrees_with_assignment(&h, &last);
    assert_eq!(h.device.stats().cp_op_failures, 0);
}

fn check_agrees_with_assignment(h: &H, chosen: &BTreeMap<u16, (Ipv4Addr, u16)>) {
    let lb = h.device.program();
    for (&s, &(ip, _)) in chosen {
        let key = five_tuple(Ipv4Addr::new(198, 51, 100, 1), s);
        let b = lb.assignment()[bucket_of(&key, 256)].unwrap();
        assert_eq!(Ipv4Addr::from(b.ip), ip);
    }
}

fn five_tuple(src: Ipv4Addr, sport: u16) -> [u8; 13] {
    let mut k = [0u8; 13];
    k[0..4].copy_from_slice(&src.octets());
    k[4..8].copy_from_slice(&VIP.octets());
    k[8] = 6;
    k[9..11].copy_from_slice(&sport.to_be_bytes());
    k[11..13].copy_from_slice(&80u16.to_be_bytes());
    k
}

/// Connections whose first packet went through the old pool just before a
/// change, and whose later packets arrive while the change and their
/// installs are under way, never split between backends.
#[test]
fn connections_being_installed_during_a_pool_change_do_not_split() {
    let mut h = lb_switch(4);
    let sports: Vec<u16> = (50_000..50_064).collect();
    let t0 = h.now();
    let first = send_all(&mut h, t0, &sports, TcpFlags::SYN);
    // Right after: add a member and remove another, before any digest
    // has reached the control plane.
    let t = h.now();
    h.control(
        t,
        message(PoolChange::Add(Backend {
            ip: [10, 1, 0, 6],
            port: 80,
            egress: 6,
        })),
    );
    h.control(t + 1, message(PoolChange::Remove([10, 1, 0, 3], 80)));
    // Later packets of every connection at many moments through the
    // change: before the punt mode is on, while it is, while the buckets
    // are rewritten, after.
    const STEPS: u64 = 30;
    let mut at = t + 2;
    let mut punted = 0;
    for step in 0..STEPS {
        for (i, &s) in sports.iter().enumerate() {
            h.send(
                at + i as u64,
                CLIENT_PORT,
                tcp(&client(1), s, 80, TcpFlags::ACK, b""),
            );
        }
        at += 10_000 + step * step * 2_000;
        h.advance_to(at);
        punted = h.device.stats().punts;
        for o in &h.take() {
            let s = endpoints_of(&o.frame).1;
            assert_eq!(
                backend_of(o, s),
                first[&s],
                "port {s} split at step {step} ({} ns after the change)",
                at - t
            );
        }
    }
    h.advance_to(at + 100 * MILLIS);
    for o in &h.take() {
        let s = endpoints_of(&o.frame).1;
        assert_eq!(backend_of(o, s), first[&s]);
    }
    let lb = h.device.program();
    let s = h.device.stats();
    assert!(punted > 0, "some packets went through the control plane");
    assert!(!lb.changing());
    assert_eq!(lb.pool_changes, 2, "the second change joined the first");
    assert_eq!(lb.connections(), 64);
    assert_eq!(s.program_drops, 1, "only the marker is dropped");
    let tx: u64 = s.ports.iter().map(|p| p.tx_packets).sum();
    assert_eq!(tx, 64 * (STEPS + 1), "every packet delivered");
    // And new connections now use the new pool.
    let t = h.now();
    let fresh = send_all(
        &mut h,
        t,
        &(60_000..60_200).collect::<Vec<_>>(),
        TcpFlags::SYN,
    );
    assert!(fresh.values().any(|(_, p)| *p == 6));
    assert!(fresh.values().all(|(_, p)| *p != 3));
}

#[test]
fn bad_messages_are_counted_and_ignored() {
    let mut h = lb_switch(2);
    let t = h.now();
    h.control(
        t,
        ControlMessage {
            kind: 1,
            body: vec![1, 2, 3],
        },
    );
    h.control(
        t,
        ControlMessage {
            kind: 2,
            body: vec![],
        },
    );
    h.control(
        t,
        ControlMessage {
            kind: 1,
            body: vec![10, 1, 0, 9, 0, 80, 4, 0],
        },
    );
    // A removal of a non-member and a duplicate add change nothing.
    h.control(t, message(PoolChange::Remove([9, 9, 9, 9], 80)));
    h.control(
        t,
        message(PoolChange::Add(Backend {
            ip: [10, 1, 0, 1],
            port: 80,
            egress: 1,
        })),
    );
    h.advance_to(t + 10 * MILLIS);
    let lb = h.device.program();
    assert_eq!(lb.bad_messages, 3, "short, empty, egress port beyond 511");
    assert_eq!(lb.members().len(), 2);
    assert!(!lb.changing());
}

#[test]
fn an_empty_pool_drops_new_connections_until_a_member_returns() {
    let mut h = lb_switch(1);
    let t = h.now();
    let first = send_all(&mut h, t, &[1000], TcpFlags::SYN);
    h.advance_to(h.now() + MILLIS);
    let t = h.now();
    h.control(t, message(PoolChange::Remove([10, 1, 0, 1], 80)));
    h.advance_to(t + 20 * MILLIS);
    assert!(h.device.program().assignment().iter().all(Option::is_none));
    let t = h.now();
    h.send(
        t,
        CLIENT_PORT,
        tcp(&client(1), 2000, 80, TcpFlags::SYN, b""),
    );
    h.advance_to(t + MILLIS);
    assert!(h.take().is_empty(), "no backend for a new connection");
    // The old one drains.
    let t = h.now();
    assert_eq!(send_all(&mut h, t, &[1000], TcpFlags::ACK), first);
    let back = Backend {
        ip: [10, 1, 0, 7],
        port: 8080,
        egress: 7,
    };
    let t = h.now();
    h.control(t, message(PoolChange::Add(back)));
    h.advance_to(t + 20 * MILLIS);
    let t = h.now();
    h.send(
        t,
        CLIENT_PORT,
        tcp(&client(1), 2001, 80, TcpFlags::SYN, b""),
    );
    h.advance_to(t + MILLIS);
    let out = h.take();
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].port, 7);
    let (_, _, dst, dport) = endpoints_of(&out[0].frame);
    assert_eq!(
        (dst, dport),
        (Ipv4Addr::new(10, 1, 0, 7), 8080),
        "port rewritten too"
    );
    // Its reply comes back from VIP:80.
    let t = h.now();
    h.send(
        t + MILLIS,
        7,
        tcp(
            &backend_ep(&back, &client(1)),
            8080,
            2001,
            TcpFlags::ACK,
            b"",
        ),
    );
    h.advance_to(t + 2 * MILLIS);
    let r = h.take();
    assert_eq!(r.len(), 1);
    assert_eq!(endpoints_of(&r[0].frame).0, VIP);
    assert_eq!(endpoints_of(&r[0].frame).1, 80);
}

#[test]
fn idle_connections_are_deleted() {
    let pool = LoadBalancer::default_pool(2, 80);
    let lb = LoadBalancer::new(1024, VIP.octets(), 80, pool, 256, 10 * MILLIS);
    let mut h = Harness::new(Switch::new(Profile::tofino(), lb).unwrap(), SEED);
    h.advance_to(BOOT);
    let t = h.now();
    send_all(&mut h, t, &[1, 2], TcpFlags::SYN);
    h.advance_to(t + MILLIS);
    assert_eq!(conn_entries(&h), 2);
    h.advance_to(t + 40 * MILLIS);
    assert_eq!(conn_entries(&h), 0);
    assert_eq!(h.device.program().expired, 2);
    assert_eq!(h.device.program().connections(), 0);
}

#[test]
fn a_crash_restarts_from_the_configured_pool() {
    let mut h = lb_switch(2);
    let t = h.now();
    h.control(
        t,
        message(PoolChange::Add(Backend {
            ip: [10, 1, 0, 9],
            port: 80,
            egress: 9,
        })),
    );
    h.advance_to(t + 10 * MILLIS);
    assert_eq!(h.device.program().members().len(), 3);
    let t = h.now();
    h.restart(t);
    h.advance_to(t + BOOT);
    assert_eq!(h.device.program().members().len(), 2);
    assert_eq!(h.device.program().connections(), 0);
    let t = h.now();
    let c = send_all(&mut h, t, &(1..100).collect::<Vec<_>>(), TcpFlags::SYN);
    assert!(c.values().all(|(_, p)| *p == 1 || *p == 2));
}

#[test]
fn loads_on_a_smartnic() {
    let pool = LoadBalancer::default_pool(1, 80);
    // Control-plane writes take 20 ms each on a smart NIC, one after
    // another: few buckets, or the pool takes seconds to install.
    let lb = LoadBalancer::new(1 << 20, VIP.octets(), 80, pool, 4, 60 * SECONDS);
    let mut h = Harness::new(Switch::new(Profile::smartnic(), lb).unwrap(), SEED);
    h.advance_to(100 * MILLIS);
    let t = h.now();
    h.send(
        t,
        CLIENT_PORT,
        tcp(&client(1), 1234, 80, TcpFlags::SYN, b""),
    );
    h.advance_to(t + 100 * MILLIS);
    let out = h.take();
    assert_eq!(out.len(), 1);
    assert_eq!(backend_of(&out[0], 1234).1, 1);
    assert_eq!(h.device.program().connections(), 1);
    assert!(h.device.violations().is_empty());
}

#[test]
fn on_a_server_connections_are_installed_inline() {
    let server = Profile::server();
    let dp = server.data_path;
    // Two backends behind port 1; the client on port 0.
    let pool = vec![
        Backend {
            ip: [10, 1, 0, 1],
            port: 80,
            egress: 1,
        },
        Backend {
            ip: [10, 1, 0, 2],
            port: 80,
            egress: 1,
        },
    ];
    let lb = LoadBalancer::new(1 << 20, VIP.octets(), 80, pool, 256, 60 * SECONDS);
    let mut h = Harness::new(Switch::new(server, lb).unwrap(), SEED);
    h.advance_to(MILLIS);
    let t = h.now();
    h.send(
        t,
        CLIENT_PORT,
        tcp(&client(1), 1234, 80, TcpFlags::SYN, b""),
    );
    h.advance_to(t + MILLIS);
    let out = h.take();
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].at, t + dp.ingress_latency + dp.egress_latency);
    let (ip, _) = backend_of(&out[0], 1234);
    let s = h.device.stats();
    assert_eq!((s.punts, s.digests), (0, 0), "installed inline");
    assert_eq!(conn_entries(&h), 1);
    // A pool change on the server too: the connection stays.
    let t = h.now();
    h.control(t, message(PoolChange::Remove(ip.octets(), 80)));
    h.advance_to(t + MILLIS);
    let t = h.now();
    let again = send_all(&mut h, t, &[1234], TcpFlags::ACK);
    assert_eq!(again[&1234].0, ip);
    let t = h.now();
    let fresh = send_all(&mut h, t, &(2000..2050).collect::<Vec<_>>(), TcpFlags::SYN);
    assert!(fresh.values().all(|(i, _)| *i != ip));
    // Replies.
    let b = Backend {
        ip: ip.octets(),
        port: 80,
        egress: 1,
    };
    let t = h.now();
    h.send(
        t,
        1,
        tcp(&backend_ep(&b, &client(1)), 80, 1234, TcpFlags::ACK, b""),
    );
    h.advance_to(t + MILLIS);
    let r = h.take();
    assert_eq!(r.len(), 1);
    assert_eq!((r[0].port, endpoints_of(&r[0].frame).0), (CLIENT_PORT, VIP));
    assert!(h.device.violations().is_empty());
}

#[test]
fn params_and_resource_check() {
    let p = Params::parse(["flows=1000", "vip=192.0.2.9", "vip_port=443", "backends=8"]).unwrap();
    let mut lb = LoadBalancer::from_params(&p).unwrap();
    println!("{}", check(&Profile::tofino(), &mut lb).unwrap());
    assert!(LoadBalancer::from_params(&Params::parse(["buckets=100"]).unwrap()).is_err());
    assert!(LoadBalancer::from_params(&Params::parse(["backend=1"]).unwrap()).is_err());

    let fits = |n: usize| {
        let mut lb = LoadBalancer::new(n, VIP.octets(), 80, vec![], 256, SECONDS);
        check(&Profile::tofino(), &mut lb).is_ok()
    };
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
    let mut largest = LoadBalancer::new(lo, VIP.octets(), 80, vec![], 256, SECONDS);
    println!("{}", check(&Profile::tofino(), &mut largest).unwrap());
    let mut over = LoadBalancer::new(hi, VIP.octets(), 80, vec![], 256, SECONDS);
    let err = check(&Profile::tofino(), &mut over)
        .unwrap_err()
        .to_string();
    println!("largest lb on tofino: {lo} connections; at {hi}: {err}");
    assert!(err.contains("lb_"), "{err}");
    for profile in [Profile::smartnic(), Profile::server()] {
        let mut lb = LoadBalancer::new(1 << 20, VIP.octets(), 80, vec![], 256, SECONDS);
        check(&profile, &mut lb).unwrap();
    }
}

#[derive(Debug, Clone)]
enum Input {
    Frame(PortId, Vec<u8>),
    Message(u32, Vec<u8>),
}

fn inputs() -> impl Strategy<Value = Vec<(u64, Input)>> {
    let to_vip = tcp(&client(1), 1000, 80, TcpFlags::SYN, b"payload");
    let b = Backend {
        ip: [10, 1, 0, 1],
        port: 80,
        egress: 1,
    };
    let reply = tcp(&backend_ep(&b, &client(1)), 80, 1000, TcpFlags::ACK, b"r");
    let input = prop_oneof![
        4 => (0u16..40, proptest::collection::vec(any::<u8>(), 0..600))
            .prop_map(|(p, f)| Input::Frame(p, f)),
        4 => (
            0u16..4,
            any::<bool>(),
            proptest::collection::vec((0usize..80, any::<u8>()), 0..4),
            0usize..80,
        )
            .prop_map(move |(p, fwd, edits, cut)| {
                let mut f = if fwd { to_vip.clone() } else { reply.clone() };
                for (i, v) in edits {
                    let i = i % f.len();
                    f[i] = v;
                }
                f.truncate(cut.max(14));
                Input::Frame(p, f)
            }),
        1 => (1u32..3, proptest::collection::vec(0u8..12, 5..9))
            .prop_map(|(k, body)| Input::Message(k, body)),
    ];
    proptest::collection::vec((0u64..20_000, input), 1..60)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn random_frames_and_messages_never_panic_and_are_all_counted(
        seed in any::<u64>(),
        inputs in inputs(),
    ) {
        println!("seed {seed}");
        for profile in [Profile::tofino(), Profile::server()] {
            let pool = LoadBalancer::default_pool(2, 80);
            let lb = LoadBalancer::new(16, [198, 51, 100, 1], 80, pool, 16, 5 * MILLIS);
            let mut h = Harness::new(Switch::new(profile, lb).unwrap(), seed);
            let mut t = MILLIS;
            let mut frames = 0u64;
            for (gap, input) in &inputs {
                t += gap;
                match input {
                    Input::Frame(port, f) => {
                        frames += 1;
                        h.send(t, *port, f.clone());
                    }
                    Input::Message(kind, body) => h.control(
                        t,
                        ControlMessage { kind: *kind, body: body.clone() },
                    ),
                }
            }
            h.advance_to(t + 200 * MILLIS);
            let s = h.device.stats();
            let lb = h.device.program();
            prop_assert_eq!(s.fates(), frames + lb.packet_outs, "stats {:?}", s);
            prop_assert!(h.device.violations().is_empty(), "{:?}", h.device.violations());
            prop_assert!(!lb.changing(), "every pool change finished");
            let tx: u64 = s.ports.iter().map(|p| p.tx_packets).sum();
            prop_assert_eq!(h.transmit_count, tx);
        }
    }
}
