//! NAT through the switch model with real frames: both directions, the
//! control-plane path for new flows, unsolicited traffic, a crash, and the
//! resource check that motivates TEA and ExoPlane.

use std::net::Ipv4Addr;

use inca_apps::catalog::check_app;
use inca_apps::nat::Nat;
use inca_apps::params::Params;
use inca_switch::harness::{Harness, Transmitted};
use inca_switch::{Profile, Switch};
use inca_wire::{
    build_tcp_frame, build_udp_frame, Endpoints, EthernetFrame, Ipv4Packet, TcpFlags, TcpRepr,
    TcpSegment, UdpDatagram,
};

const OUTSIDE: u16 = 0;
const INSIDE: u16 = 3;
const SEED: u64 = 1;

fn client() -> Endpoints {
    Endpoints::new(
        [2, 0, 0, 0, 0, 1],
        Ipv4Addr::new(10, 0, 0, 5),
        [2, 0, 0, 0, 0, 0xfe],
        Ipv4Addr::new(203, 0, 113, 9),
    )
}

fn tcp(ep: &Endpoints, sport: u16, dport: u16, payload: &[u8]) -> Vec<u8> {
    let repr = TcpRepr {
        src_port: sport,
        dst_port: dport,
        seq: 1000,
        ack: 0,
        flags: TcpFlags::SYN,
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

fn nat_switch(flows: usize) -> Harness<Switch<Nat>> {
    let nat = Nat::new(flows, OUTSIDE, [198, 51, 100, 1]);
    println!("seed {SEED}");
    Harness::new(Switch::new(Profile::tofino(), nat).unwrap(), SEED)
}

fn on_port(tx: &[Transmitted], port: u16) -> Vec<&Transmitted> {
    tx.iter().filter(|t| t.port == port).collect()
}

#[test]
fn translates_both_directions_and_keeps_the_mapping() {
    let mut h = nat_switch(1024);
    let timing = Profile::tofino().control_plane;
    h.send(0, INSIDE, tcp(&client(), 40_000, 80, b"hello"));
    h.advance_to(10_000_000);
    let out = h.take();
    let first = on_port(&out, OUTSIDE);
    assert_eq!(
        first.len(),
        1,
        "the first packet goes out after the control plane installs the flow"
    );
    // Punt, CPU time, two table writes spaced by the op rate, then the packet-out.
    let min_first = timing.punt_latency + timing.cpu_per_event + timing.table_write * 2;
    assert!(
        first[0].at >= min_first,
        "first packet left at {} ns, before the control plane could act",
        first[0].at
    );
    let (src, sport, dst, dport) = endpoints_of(&first[0].frame);
    assert_eq!((src, sport), (Ipv4Addr::new(198, 51, 100, 1), 1024));
    assert_eq!((dst, dport), (Ipv4Addr::new(203, 0, 113, 9), 80));
    assert!(first[0].frame.ends_with(b"hello"), "payload untouched");

    // Later packets of the flow stay on the fast path: no control plane.
    let cpu_events = h.device.stats().cpu_events;
    let t = h.now();
    h.send(t, INSIDE, tcp(&client(), 40_000, 80, b"again"));
    h.advance_to(t + 10_000);
    let out = h.take();
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].at, t + 450, "fast path: pipeline latency only");
    assert_eq!(endpoints_of(&out[0].frame).1, 1024);
    assert_eq!(h.device.stats().cpu_events, cpu_events);

    // The reply is translated back to the client on its port.
    let server = client().reversed();
    let mut reply_ep = server;
    reply_ep.dst_ip = Ipv4Addr::new(198, 51, 100, 1);
    let t = h.now();
    h.send(t, OUTSIDE, tcp(&reply_ep, 80, 1024, b"world"));
    h.advance_to(t + 10_000);
    let back = h.take();
    assert_eq!(back.len(), 1);
    assert_eq!(back[0].port, INSIDE);
    assert_eq!(
        endpoints_of(&back[0].frame),
        (
            Ipv4Addr::new(203, 0, 113, 9),
            80,
            Ipv4Addr::new(10, 0, 0, 5),
            40_000
        )
    );
}

#[test]
fn distinct_flows_get_distinct_public_ports_and_udp_works() {
    let mut h = nat_switch(1024);
    for i in 0..10u16 {
        h.send(
            u64::from(i) * 1000,
            INSIDE,
            build_udp_frame(&client(), 5000 + i, 53, b"q", true).unwrap(),
        );
    }
    h.advance_to(100_000_000);
    let mut ports: Vec<u16> = on_port(&h.take(), OUTSIDE)
        .iter()
        .map(|t| endpoints_of(&t.frame).1)
        .collect();
    ports.sort();
    assert_eq!(ports, (1024..1034).collect::<Vec<_>>());
    assert_eq!(h.device.program().allocated(), 10);
}

#[test]
fn unsolicited_inbound_is_dropped() {
    let mut h = nat_switch(1024);
    let mut ep = client().reversed();
    ep.dst_ip = Ipv4Addr::new(198, 51, 100, 1);
    h.send(0, OUTSIDE, tcp(&ep, 80, 1024, b"x"));
    h.advance_to(10_000_000);
    assert!(h.take().is_empty());
    assert_eq!(h.device.stats().program_drops, 1);
    assert_eq!(
        h.device.stats().punts,
        0,
        "outside misses never reach the control plane"
    );
}

#[test]
fn a_full_table_refuses_new_flows() {
    let mut h = nat_switch(2);
    for i in 0..3u16 {
        h.send(u64::from(i), INSIDE, tcp(&client(), 6000 + i, 80, b""));
    }
    h.advance_to(100_000_000);
    assert_eq!(on_port(&h.take(), OUTSIDE).len(), 2);
    assert_eq!(h.device.program().refused, 1);
}

#[test]
fn a_crash_loses_the_translations() {
    let mut h = nat_switch(1024);
    h.send(0, INSIDE, tcp(&client(), 40_000, 80, b""));
    h.advance_to(10_000_000);
    assert_eq!(h.take().len(), 1);
    h.restart(20_000_000);
    // The reply to the old mapping now finds no state: the connection breaks.
    let mut ep = client().reversed();
    ep.dst_ip = Ipv4Addr::new(198, 51, 100, 1);
    h.send(20_000_100, OUTSIDE, tcp(&ep, 80, 1024, b""));
    h.advance_to(30_000_000);
    assert!(h.take().is_empty());
    assert_eq!(h.device.program().allocated(), 0);
}

#[test]
fn malformed_frames_are_counted_not_fatal() {
    let mut h = nat_switch(16);
    let good = tcp(&client(), 1, 2, b"");
    for cut in 0..good.len() {
        h.send(cut as u64, INSIDE, good[..cut].to_vec());
    }
    h.advance_to(10_000_000);
    let s = h.device.stats();
    let sent = h.take().len() as u64;
    // A truncation that cuts into the headers fails to parse or carries no
    // ports (dropped); one that keeps whole headers is translated, as a
    // switch, which never checks the IPv4 total length, would do.
    assert_eq!(s.parse_drops + s.program_drops + sent, good.len() as u64);
    assert_eq!(
        sent, 4,
        "the cuts inside the 4-byte TCP option keep a whole 20-byte TCP header"
    );
}

#[test]
fn resource_check_fits_65536_flows_and_fails_10_million_on_sram() {
    let tofino = Profile::tofino();
    let ok = check_app("nat", &Params::parse(["flows=65536"]).unwrap(), &tofino).unwrap();
    println!("{ok}");
    let err = check_app("nat", &Params::parse(["flows=10000000"]).unwrap(), &tofino)
        .unwrap_err()
        .to_string();
    println!("{err}");
    assert!(err.contains("nat_"), "names the object: {err}");
    assert!(err.contains("SRAM"), "names the resource: {err}");
}

#[test]
fn frames_longer_than_the_parse_depth_are_translated_whole() {
    let mut h = nat_switch(16);
    let payload: Vec<u8> = (0..1400u32).map(|i| (i * 7) as u8).collect();
    h.send(0, INSIDE, tcp(&client(), 40_000, 80, &payload));
    h.advance_to(10_000_000);
    let out = h.take();
    assert_eq!(out.len(), 1, "a 1,4xx-byte frame passes a 512-byte parser");
    assert!(out[0].frame.len() > Profile::tofino().data_path.parse_depth);
    // The incremental update keeps the checksum over the unseen payload right.
    assert_eq!(endpoints_of(&out[0].frame).1, 1024);
    assert!(out[0].frame.ends_with(&payload));
}

#[test]
fn on_a_server_the_nat_installs_new_flows_inline() {
    let server = Profile::server();
    let dp = server.data_path;
    let nat = Nat::new(1024, OUTSIDE, [198, 51, 100, 1]);
    // A server has two ports: the outside (0) and one inside (1).
    let mut h = Harness::new(Switch::new(server, nat).unwrap(), SEED);
    h.send(0, 1, tcp(&client(), 40_000, 80, b"hi"));
    h.advance_to(10_000_000);
    let out = h.take();
    assert_eq!(out.len(), 1);
    assert_eq!(
        out[0].at,
        dp.ingress_latency + dp.egress_latency,
        "no control-plane round trip"
    );
    assert_eq!(endpoints_of(&out[0].frame).1, 1024);
    assert_eq!(h.device.stats().punts, 0);
    assert!(h.device.violations().is_empty());
    // The reply finds the mapping the data path installed.
    let mut ep = client().reversed();
    ep.dst_ip = Ipv4Addr::new(198, 51, 100, 1);
    h.send(20_000_000, OUTSIDE, tcp(&ep, 80, 1024, b""));
    h.advance_to(30_000_000);
    assert_eq!(h.take().len(), 1);
}

/// An Ethernet/IPv4/ICMP echo frame (request `true`, or reply) with valid
/// checksums.
fn icmp_echo(src: Ipv4Addr, dst: Ipv4Addr, request: bool, id: u16, seq: u16) -> Vec<u8> {
    let mut f = vec![0u8; 14 + 20 + 8 + 16];
    f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    let ip = &mut f[14..34];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&(20u16 + 8 + 16).to_be_bytes());
    ip[8] = 64;
    ip[9] = 1;
    ip[12..16].copy_from_slice(&src.octets());
    ip[16..20].copy_from_slice(&dst.octets());
    let s = inca_wire::checksum::checksum(&f[14..34]);
    f[24..26].copy_from_slice(&s.to_be_bytes());
    f[34] = if request { 8 } else { 0 };
    f[38..40].copy_from_slice(&id.to_be_bytes());
    f[40..42].copy_from_slice(&seq.to_be_bytes());
    let s = inca_wire::checksum::checksum(&f[34..]);
    f[36..38].copy_from_slice(&s.to_be_bytes());
    f
}

#[test]
fn ping_goes_through_the_nat() {
    let mut h = nat_switch(16);
    let (inside, remote, public) = (
        Ipv4Addr::new(10, 0, 0, 5),
        Ipv4Addr::new(203, 0, 113, 9),
        Ipv4Addr::new(198, 51, 100, 1),
    );
    h.send(0, INSIDE, icmp_echo(inside, remote, true, 0x1234, 1));
    h.advance_to(10_000_000);
    let out = h.take();
    assert_eq!(out.len(), 1);
    let f = &out[0].frame;
    let ip = Ipv4Packet::new_checked(&f[14..]).unwrap();
    assert!(ip.verify_checksum());
    assert_eq!(ip.src_addr(), public);
    assert_eq!(
        inca_wire::checksum::checksum(&f[34..]),
        0,
        "ICMP checksum still valid"
    );
    let public_id = u16::from_be_bytes([f[38], f[39]]);
    assert_eq!(public_id, 1024, "the identifier is translated like a port");
    // The reply comes back to the client with its own identifier.
    let t = h.now();
    h.send(t, OUTSIDE, icmp_echo(remote, public, false, public_id, 1));
    h.advance_to(t + 10_000);
    let back = h.take();
    assert_eq!(back.len(), 1);
    let f = &back[0].frame;
    assert_eq!(back[0].port, INSIDE);
    assert_eq!(
        Ipv4Packet::new_checked(&f[14..]).unwrap().dst_addr(),
        inside
    );
    assert_eq!(u16::from_be_bytes([f[38], f[39]]), 0x1234);
    assert_eq!(inca_wire::checksum::checksum(&f[34..]), 0);
    // Other ICMP (a destination-unreachable) is still dropped.
    let mut other = icmp_echo(inside, remote, true, 7, 1);
    other[34] = 3;
    h.send(h.now(), INSIDE, other);
    h.advance_to(h.now() + 10_000_000);
    assert!(h.take().is_empty());
}

#[test]
fn per_tenant_nat_keeps_tenants_apart_and_shards_share_no_port() {
    use inca_wire::VlanTag;
    // Two tenants (VIDs 10 and 20) with the same inside 5-tuple: two flows,
    // two public endpoints; each reply goes back in its own tenant.
    let p = Params::parse(["per_tenant=1", "outside_port=0", "flows=64"]).unwrap();
    let nat = Nat::from_params(&p).unwrap();
    let mut h = Harness::new(Switch::new(Profile::tofino(), nat).unwrap(), SEED);
    let tagged = |vid| {
        let mut ep = client();
        ep.vlan = Some(VlanTag {
            pcp: 0,
            dei: false,
            vid,
        });
        ep
    };
    for (i, vid) in [10u16, 20].into_iter().enumerate() {
        let f = build_udp_frame(&tagged(vid), 5000, 53, b"q", true).unwrap();
        h.send(i as u64 * 1_000_000, INSIDE, f);
    }
    h.advance_to(50_000_000);
    let out = h.take();
    let mut by_vid: Vec<(u16, u16)> = on_port(&out, OUTSIDE)
        .iter()
        .map(|t| {
            let vid = EthernetFrame::new_checked(&t.frame[..])
                .unwrap()
                .vlan()
                .unwrap()
                .vid;
            (vid, endpoints_of(&t.frame).1)
        })
        .collect();
    by_vid.sort();
    assert_eq!(by_vid.len(), 2);
    assert_ne!(by_vid[0].1, by_vid[1].1, "one public port per tenant flow");
    // Tenant 20's reply reaches tenant 20's flow only.
    let mut reply = tagged(20).reversed();
    reply.dst_ip = Ipv4Addr::new(198, 51, 100, 1);
    let t = h.now();
    let f = build_udp_frame(&reply, 53, by_vid[1].1, b"a", true).unwrap();
    h.send(t, OUTSIDE, f.clone());
    // The same reply in tenant 10's VLAN matches nothing there: dropped.
    let mut wrong = f;
    wrong[14..16].copy_from_slice(&10u16.to_be_bytes());
    h.send(t + 1_000, OUTSIDE, wrong);
    h.advance_to(t + 100_000);
    let back = h.take();
    assert_eq!(back.len(), 1);
    assert_eq!(back[0].port, INSIDE);
    assert_eq!(endpoints_of(&back[0].frame).3, 5000);
    // Pool shares: out of range is refused by name.
    let e = Nat::from_params(&Params::parse(["pool_shard=2", "pool_shards=2"]).unwrap())
        .unwrap_err()
        .to_string();
    assert!(e.contains("pool_shard"), "{e}");
}
