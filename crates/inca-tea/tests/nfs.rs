//! The TEA firewall, load balancer and VPN gateway end to end in the rig
//! (the NAT is covered by tests/switch.rs).

use std::net::Ipv4Addr;

use inca_apps::headers::parse;
use inca_tea::nf::{vpn, TeaFirewall, TeaLb, TeaVpn};
use inca_tea::rig::{Probe, Rig, RigConfig, INSIDE_PORT, OUTSIDE_PORT};
use inca_tea::switch::TeaNf;
use inca_wire::tcp::{TcpFlags, TcpRepr};
use inca_wire::{build_tcp_frame, build_udp_frame, Endpoints};

const MS: u64 = 1_000_000;

fn ep(src: [u8; 4], dst: [u8; 4]) -> Endpoints {
    Endpoints::new(
        [2, 0, 0, 0, 1, 1],
        Ipv4Addr::from(src),
        [2, 0, 0, 0, 1, 2],
        Ipv4Addr::from(dst),
    )
}

fn tcp(src: [u8; 4], sport: u16, dst: [u8; 4], dport: u16, flags: u8) -> Vec<u8> {
    let t = TcpRepr {
        src_port: sport,
        dst_port: dport,
        seq: 1,
        ack: 0,
        flags: TcpFlags(flags),
        window: 1000,
        urgent: 0,
        options: &[],
        payload: b"",
    };
    build_tcp_frame(&ep(src, dst), &t).unwrap()
}

fn ready<N: TeaNf>(nf: N, cfg: &RigConfig) -> Rig<N> {
    let mut rig = Rig::with_nf(cfg, nf, Probe::default(), Probe::default()).unwrap();
    assert!(rig.run_until_ready(20 * MS));
    rig
}

#[test]
fn firewall_lets_replies_of_inside_connections_in_and_nothing_else() {
    let mut rig = ready(
        TeaFirewall::new(OUTSIDE_PORT, INSIDE_PORT),
        &RigConfig::default(),
    );
    let t0 = rig.sim.now();
    let (host, web) = ([10, 1, 0, 5], [8, 8, 8, 8]);
    // Unsolicited: dropped (one DRAM lookup, a miss).
    rig.send(t0, rig.outside, tcp(web, 80, host, 40000, 0x12));
    rig.run_until(t0 + MS);
    assert!(rig.probe(rig.inside).received.is_empty());
    // The inside SYN goes out and opens the reverse direction.
    rig.send(t0 + MS, rig.inside, tcp(host, 40000, web, 80, 0x02));
    rig.send(t0 + 3 * MS, rig.outside, tcp(web, 80, host, 40000, 0x12));
    rig.send(t0 + 3 * MS, rig.outside, tcp(web, 80, host, 40001, 0x12));
    rig.run_until(t0 + 5 * MS);
    assert_eq!(rig.probe(rig.outside).received.len(), 1, "the SYN left");
    let got = &rig.probe(rig.inside).received;
    assert_eq!(
        got.len(),
        1,
        "only the reply of the open connection came in"
    );
    assert_eq!(parse(&got[0].1).unwrap().dport, 40000);
    assert_eq!(rig.tea().dp_stats().remote_misses, 2);
}

#[test]
fn load_balancer_pins_a_new_connection_to_a_backend() {
    let lb = TeaLb {
        vip: [10, 9, 0, 1],
        vip_port: 80,
        backends: vec![
            ([10, 9, 1, 1], 8080),
            ([10, 9, 1, 2], 8080),
            ([10, 9, 1, 3], 8080),
        ],
        client_port: INSIDE_PORT,
        backend_port: OUTSIDE_PORT,
    };
    let mut rig = ready(lb.clone(), &RigConfig::default());
    let t0 = rig.sim.now();
    let f = build_udp_frame(&ep([10, 1, 0, 7], [10, 9, 0, 1]), 5555, 80, b"GET /", true).unwrap();
    rig.send(t0, rig.inside, f.clone());
    rig.send(t0 + 2 * MS, rig.inside, f.clone());
    rig.run_until(t0 + 4 * MS);
    let got = &rig.probe(rig.outside).received;
    assert_eq!(got.len(), 2, "first via the slow path, then via DRAM");
    let key = parse(&f).unwrap().five_tuple();
    let (ip, port) = lb.pick(&key).unwrap();
    for (_, g) in got {
        let p = parse(g).unwrap();
        assert_eq!(
            (p.dst, p.dport),
            (ip, port),
            "both packets on the picked backend"
        );
    }
    assert_eq!(rig.tea().dp_stats().remote_misses, 1);
}

#[test]
fn vpn_gateway_readdresses_known_tunnels_and_drops_unknown_ones() {
    let gw = TeaVpn {
        outside_port: OUTSIDE_PORT,
        inside_port: INSIDE_PORT,
        local: [10, 255, 0, 1],
    };
    let cfg = RigConfig {
        preload: vec![(
            vpn::vpn_key(77, [172, 16, 0, 9]),
            vpn::vpn_value([10, 64, 0, 3], 4242),
        )],
        ..RigConfig::default()
    };
    let mut rig = ready(gw, &cfg);
    let vxlan = |vni: u32, vm: [u8; 4]| {
        let inner = build_udp_frame(&ep([192, 168, 0, 1], vm), 1, 2, b"inner", true).unwrap();
        let mut payload = vec![0x08, 0, 0, 0];
        payload.extend_from_slice(&vni.to_be_bytes()[1..]);
        payload.push(0);
        payload.extend_from_slice(&inner);
        build_udp_frame(
            &ep([203, 0, 113, 5], [10, 255, 0, 1]),
            999,
            4789,
            &payload,
            true,
        )
        .unwrap()
    };
    let t0 = rig.sim.now();
    rig.send(t0, rig.outside, vxlan(77, [172, 16, 0, 9]));
    rig.send(t0, rig.outside, vxlan(78, [172, 16, 0, 9]));
    rig.run_until(t0 + MS);
    let got = &rig.probe(rig.inside).received;
    assert_eq!(got.len(), 1, "the unknown tunnel is dropped");
    let m = inca_apps::vpn::parse_vxlan(&got[0].1).unwrap();
    assert_eq!(
        (m.outer.src, m.outer.dst, m.vni),
        ([10, 255, 0, 1], [10, 64, 0, 3], 4242)
    );
    let ip = inca_wire::Ipv4Packet::new_checked(&got[0].1[14..]).unwrap();
    assert!(ip.verify_checksum(), "outer IPv4 checksum updated");
}
