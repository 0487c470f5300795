//! VPN gateway through the switch model with real VXLAN frames: both
//! directions, misses, run-time installs by control message, malformed
//! frames, other profiles, and the resource check.

use std::net::Ipv4Addr;

use inca_apps::vpn::{Mapping, VpnGateway, MSG_ADD_MAPPING, MSG_DEL_MAPPING, VXLAN_PORT};
use inca_switch::device::{ControlMessage, MILLIS};
use inca_switch::harness::Harness;
use inca_switch::{check, PortId, Profile, Switch};
use inca_wire::{build_udp_frame, Endpoints, EthernetFrame, Ipv4Packet, UdpDatagram};

const OUTSIDE: PortId = 0;
const SERVERS: PortId = 2;
const LOCAL: [u8; 4] = [192, 0, 2, 1];
const SEED: u64 = 7;

fn mapping() -> Mapping {
    Mapping {
        ext_vni: 100,
        vm: [10, 0, 0, 1],
        server: [172, 16, 0, 9],
        int_vni: 5000,
        remote: [203, 0, 113, 1],
        port: SERVERS,
    }
}

fn gateway(flows: usize) -> VpnGateway {
    VpnGateway::new(flows, OUTSIDE, LOCAL).with_mapping(mapping())
}

fn start(profile: Profile, app: VpnGateway) -> Harness<Switch<VpnGateway>> {
    println!("seed {SEED}");
    let mut h = Harness::new(Switch::new(profile, app).unwrap(), SEED);
    h.advance_to(MILLIS); // the start entries are installed
    h
}

/// The inner frame a VM exchanges: UDP between `src` and `dst`.
fn inner(src: [u8; 4], dst: [u8; 4], payload: &[u8]) -> Vec<u8> {
    let ep = Endpoints::new(
        [2, 0, 0, 0, 0, 0xa],
        Ipv4Addr::from(src),
        [2, 0, 0, 0, 0, 0xb],
        Ipv4Addr::from(dst),
    );
    build_udp_frame(&ep, 1111, 2222, payload, true).unwrap()
}

/// A VXLAN frame from `outer_src` to `outer_dst` with `vni`, around `inner`.
fn vxlan(outer_src: [u8; 4], outer_dst: [u8; 4], vni: u32, inner: &[u8]) -> Vec<u8> {
    let ep = Endpoints::new(
        [2, 0, 0, 0, 1, 1],
        Ipv4Addr::from(outer_src),
        [2, 0, 0, 0, 1, 2],
        Ipv4Addr::from(outer_dst),
    );
    let v = vni.to_be_bytes();
    let mut payload = vec![0x08, 0, 0, 0, v[1], v[2], v[3], 0];
    payload.extend_from_slice(inner);
    build_udp_frame(&ep, 49_152, VXLAN_PORT, &payload, true).unwrap()
}

/// Outer (src, dst), VNI and the inner frame, after checking the outer
/// IPv4 checksum and that the UDP checksum is 0.
fn decode(frame: &[u8]) -> (Ipv4Addr, Ipv4Addr, u32, Vec<u8>) {
    let eth = EthernetFrame::new_checked(frame).unwrap();
    let ip = Ipv4Packet::new_checked(eth.payload()).unwrap();
    assert!(ip.verify_checksum(), "outer IPv4 checksum broken");
    assert_eq!(ip.protocol(), 17);
    let udp = UdpDatagram::new_checked(ip.payload()).unwrap();
    assert_eq!(udp.dst_port(), VXLAN_PORT);
    assert_eq!(udp.checksum(), 0, "the UDP checksum is cleared");
    let v = udp.payload();
    assert_eq!(v[0], 0x08, "I flag kept");
    let vni = u32::from_be_bytes([0, v[4], v[5], v[6]]);
    (ip.src_addr(), ip.dst_addr(), vni, v[8..].to_vec())
}

#[test]
fn inbound_is_mapped_to_the_server_and_internal_vni() {
    let mut h = start(Profile::tofino(), gateway(1024));
    let vm_frame = inner([198, 51, 100, 7], [10, 0, 0, 1], b"to the vm");
    let t = h.now();
    h.send(t, OUTSIDE, vxlan([203, 0, 113, 1], LOCAL, 100, &vm_frame));
    h.advance_to(t + 10_000);
    let out = h.take();
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].port, SERVERS);
    assert_eq!(out[0].at, t + 450, "fast path: pipeline latency only");
    let (src, dst, vni, inner) = decode(&out[0].frame);
    assert_eq!(src, Ipv4Addr::from(LOCAL));
    assert_eq!(dst, Ipv4Addr::new(172, 16, 0, 9));
    assert_eq!(vni, 5000);
    assert_eq!(inner, vm_frame, "the inner frame is untouched");
    assert!(h.device.violations().is_empty());
}

#[test]
fn outbound_is_mapped_back_to_the_remote_endpoint() {
    let mut h = start(Profile::tofino(), gateway(1024));
    let vm_frame = inner([10, 0, 0, 1], [198, 51, 100, 7], b"from the vm");
    let t = h.now();
    h.send(t, SERVERS, vxlan([172, 16, 0, 9], LOCAL, 5000, &vm_frame));
    h.advance_to(t + 10_000);
    let out = h.take();
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].port, OUTSIDE);
    let (src, dst, vni, inner) = decode(&out[0].frame);
    assert_eq!(
        (src, dst, vni),
        (Ipv4Addr::from(LOCAL), Ipv4Addr::new(203, 0, 113, 1), 100)
    );
    assert_eq!(inner, vm_frame);
}

#[test]
fn misses_and_non_tunnel_traffic_are_dropped() {
    let mut h = start(Profile::tofino(), gateway(1024));
    let t = h.now();
    let to_vm = inner([198, 51, 100, 7], [10, 0, 0, 1], b"x");
    let to_other = inner([198, 51, 100, 7], [10, 0, 0, 2], b"x");
    // Wrong external VNI, unknown VM, the internal VNI from outside.
    h.send(t, OUTSIDE, vxlan([203, 0, 113, 1], LOCAL, 101, &to_vm));
    h.send(t, OUTSIDE, vxlan([203, 0, 113, 1], LOCAL, 100, &to_other));
    h.send(t, OUTSIDE, vxlan([203, 0, 113, 1], LOCAL, 5000, &to_vm));
    // Outbound keyed by the inner source: a spoofed source misses.
    let spoofed = inner([10, 0, 0, 66], [198, 51, 100, 7], b"x");
    h.send(t, SERVERS, vxlan([172, 16, 0, 9], LOCAL, 5000, &spoofed));
    // Plain UDP, and VXLAN without the I flag.
    h.send(t, OUTSIDE, to_vm.clone());
    let mut no_flag = vxlan([203, 0, 113, 1], LOCAL, 100, &to_vm);
    no_flag[42] = 0;
    h.send(t, OUTSIDE, no_flag);
    h.advance_to(t + MILLIS);
    assert!(h.take().is_empty());
    let s = h.device.stats();
    assert_eq!(s.program_drops, 6);
    assert_eq!(s.punts, 0);
}

#[test]
fn control_messages_add_change_and_delete_mappings() {
    let mut h = start(Profile::tofino(), VpnGateway::new(1024, OUTSIDE, LOCAL));
    let to_vm = inner([198, 51, 100, 7], [10, 0, 0, 1], b"x");
    let frame = vxlan([203, 0, 113, 1], LOCAL, 100, &to_vm);
    let t = h.now();
    h.send(t, OUTSIDE, frame.clone());
    h.advance_to(t + 10_000);
    assert!(h.take().is_empty(), "no mapping yet");

    let add = |m: Mapping| ControlMessage {
        kind: MSG_ADD_MAPPING,
        body: m.encode(),
    };
    let t = h.now();
    h.control(t, add(mapping()));
    // Two table writes at 20 µs each, one op per 20 µs.
    h.send(t + 10_000, OUTSIDE, frame.clone());
    h.send(t + MILLIS, OUTSIDE, frame.clone());
    h.advance_to(t + 2 * MILLIS);
    let out = h.take();
    assert_eq!(out.len(), 1, "the entry takes effect after its latency");
    assert_eq!(decode(&out[0].frame).1, Ipv4Addr::new(172, 16, 0, 9));

    // The VM moves to another server under another internal VNI.
    let moved = Mapping {
        server: [172, 16, 0, 10],
        int_vni: 6000,
        ..mapping()
    };
    let t = h.now();
    h.control(t, add(moved));
    h.send(t + MILLIS, OUTSIDE, frame.clone());
    let back = inner([10, 0, 0, 1], [198, 51, 100, 7], b"y");
    h.send(
        t + MILLIS,
        SERVERS,
        vxlan([172, 16, 0, 10], LOCAL, 6000, &back),
    );
    h.send(
        t + MILLIS,
        SERVERS,
        vxlan([172, 16, 0, 9], LOCAL, 5000, &back),
    );
    h.advance_to(t + 2 * MILLIS);
    let out = h.take();
    assert_eq!(out.len(), 2, "the old internal VNI no longer maps");
    let (_, dst, vni, _) = decode(&out[0].frame);
    assert_eq!((dst, vni), (Ipv4Addr::new(172, 16, 0, 10), 6000));
    assert_eq!(decode(&out[1].frame).2, 100);
    assert_eq!(h.device.program().installed(), 1);

    let t = h.now();
    h.control(
        t,
        ControlMessage {
            kind: MSG_DEL_MAPPING,
            body: moved.encode(),
        },
    );
    h.control(
        t,
        ControlMessage {
            kind: MSG_ADD_MAPPING,
            body: vec![1, 2, 3],
        },
    );
    h.send(t + MILLIS, OUTSIDE, frame);
    h.advance_to(t + 2 * MILLIS);
    assert!(h.take().is_empty(), "deleted");
    assert_eq!(h.device.program().installed(), 0);
    assert_eq!(h.device.program().refused, 1, "the bad message");
    assert_eq!(h.device.stats().cp_op_failures, 0);
}

#[test]
fn a_full_table_refuses_mappings() {
    let mut app = VpnGateway::new(2, OUTSIDE, LOCAL);
    for i in 0..3 {
        app = app.with_mapping(VpnGateway::demo_mapping(i));
    }
    let h = start(Profile::tofino(), app);
    assert_eq!(h.device.program().installed(), 2);
    assert_eq!(h.device.program().refused, 1);
    assert_eq!(h.device.stats().cp_op_failures, 0);
}

#[test]
fn tagged_outer_frames_and_long_frames_are_handled() {
    let mut h = start(Profile::tofino(), gateway(16));
    let payload: Vec<u8> = (0..1400u32).map(|i| (i * 13) as u8).collect();
    let vm_frame = inner([198, 51, 100, 7], [10, 0, 0, 1], &payload);
    let mut frame = vxlan([203, 0, 113, 1], LOCAL, 100, &vm_frame);
    let t = h.now();
    h.send(t, OUTSIDE, frame.clone());
    // Insert an 802.1Q tag (VLAN 42) into the outer frame.
    frame.splice(12..12, [0x81, 0x00, 0x00, 42]);
    h.send(t, OUTSIDE, frame);
    h.advance_to(t + MILLIS);
    let out = h.take();
    assert_eq!(out.len(), 2);
    assert!(out[0].frame.len() > Profile::tofino().data_path.parse_depth);
    assert_eq!(decode(&out[0].frame).3, vm_frame);
    assert_eq!(decode(&out[1].frame).3, vm_frame, "through the tag");
    assert_eq!(decode(&out[1].frame).2, 5000);
}

#[test]
fn truncated_frames_are_counted_not_fatal() {
    let mut h = start(Profile::tofino(), gateway(16));
    let good = vxlan(
        [203, 0, 113, 1],
        LOCAL,
        100,
        &inner([198, 51, 100, 7], [10, 0, 0, 1], b""),
    );
    let t = h.now();
    for cut in 0..=good.len() {
        h.send(t + cut as u64, OUTSIDE, good[..cut].to_vec());
    }
    h.advance_to(t + MILLIS);
    let sent = h.take().len() as u64;
    let s = h.device.stats();
    assert_eq!(s.fates(), good.len() as u64 + 1);
    // Only cuts that keep the inner IPv4 header whole are forwarded (the
    // switch never checks lengths against the frame).
    assert_eq!(sent, (good.len() - 84 + 1) as u64);
    assert!(h.device.violations().is_empty());
}

#[test]
fn loads_on_a_smartnic_and_a_server() {
    let nic = Switch::new(Profile::smartnic(), VpnGateway::new(65_536, 0, LOCAL));
    assert!(nic.is_ok(), "{:?}", nic.err().map(|e| e.to_string()));
    // A server has two ports: the outside (0) and the servers (1).
    let m = Mapping {
        port: 1,
        ..mapping()
    };
    let app = VpnGateway::new(1 << 20, 0, LOCAL).with_mapping(m);
    let mut h = start(Profile::server(), app);
    let vm_frame = inner([198, 51, 100, 7], [10, 0, 0, 1], b"hi");
    let t = h.now();
    h.send(t, 0, vxlan([203, 0, 113, 1], LOCAL, 100, &vm_frame));
    h.advance_to(t + MILLIS);
    let out = h.take();
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].port, 1);
    assert_eq!(decode(&out[0].frame).2, 5000);
    assert!(h.device.violations().is_empty());
}

#[test]
fn resource_check_on_tofino() {
    let tofino = Profile::tofino();
    assert!(check(&tofino, &mut VpnGateway::new(65_536, 0, LOCAL)).is_ok());
    // The largest table size that fits.
    let (mut lo, mut hi) = (1usize, 1 << 26);
    while lo + 1 < hi {
        let mid = (lo + hi) / 2;
        if check(&tofino, &mut VpnGateway::new(mid, 0, LOCAL)).is_ok() {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    let err = check(&tofino, &mut VpnGateway::new(hi, 0, LOCAL))
        .unwrap_err()
        .to_string();
    println!("largest flows on tofino: {lo}; at {hi}: {err}");
    assert!(err.contains("vpn_"), "names the object: {err}");
}

mod fuzz {
    use super::*;
    use proptest::prelude::*;

    fn frames() -> impl Strategy<Value = Vec<(PortId, Vec<u8>)>> {
        let frame = prop_oneof![
            proptest::collection::vec(any::<u8>(), 0..600),
            // A valid tunnel frame with random bytes written over it.
            (
                proptest::collection::vec((0usize..120, any::<u8>()), 0..4),
                0usize..200
            )
                .prop_map(|(edits, cut)| {
                    let mut f = vxlan(
                        [203, 0, 113, 1],
                        LOCAL,
                        100,
                        &inner([1, 2, 3, 4], [10, 0, 0, 1], &[7; 60]),
                    );
                    for (at, b) in edits {
                        if let Some(x) = f.get_mut(at) {
                            *x = b;
                        }
                    }
                    f.truncate(cut.max(10));
                    f
                }),
        ];
        proptest::collection::vec((0u16..40, frame), 1..40)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn random_frames_never_panic_and_are_all_counted(frames in frames()) {
            let mut h = start(Profile::tofino(), gateway(64));
            let t = h.now();
            for (i, (port, f)) in frames.iter().enumerate() {
                h.send(t + i as u64 * 100, *port, f.clone());
            }
            h.advance_to(t + 10 * MILLIS);
            let s = h.device.stats();
            prop_assert_eq!(s.fates(), frames.len() as u64, "{:?}", s);
            prop_assert!(h.device.violations().is_empty());
        }
    }
}

#[test]
fn parameters_size_the_tables_and_install_demo_mappings() {
    use inca_apps::params::Params;
    let p = Params::parse(["flows=1000", "demo=3", "local=192.0.2.9"]).unwrap();
    let h = start(Profile::tofino(), VpnGateway::from_params(&p).unwrap());
    assert_eq!(h.device.program().installed(), 3);
    let (vin, _) = h.device.program().tables().unwrap();
    assert_eq!(h.device.objects().table_len(vin.id()), 3);
    let bad = Params::parse(["flow=1"]).unwrap();
    assert!(VpnGateway::from_params(&bad).is_err());
}

#[test]
fn an_admitting_gateway_maps_a_new_vm_on_its_first_outbound_packet() {
    let remote = [203, 0, 113, 9];
    let gw = VpnGateway::new(1024, OUTSIDE, LOCAL).admitting(remote);
    let mut h = start(Profile::tofino(), gw);
    let t = h.now();
    let out_frame = inner([10, 0, 0, 42], [198, 51, 100, 7], b"from a new vm");
    // The first packet through the control plane, the second on the fast
    // path; both re-tunnelled to the admitting endpoint, VNI kept.
    h.send(t, SERVERS, vxlan([172, 16, 0, 3], LOCAL, 77, &out_frame));
    h.advance_to(t + 10 * MILLIS);
    h.send(
        h.now(),
        SERVERS,
        vxlan([172, 16, 0, 3], LOCAL, 77, &out_frame),
    );
    h.advance_to(h.now() + MILLIS);
    let out = h.take();
    assert_eq!(out.len(), 2);
    for o in &out {
        assert_eq!(o.port, OUTSIDE);
        let (_, dst, vni, _) = decode(&o.frame);
        assert_eq!((dst, vni), (Ipv4Addr::from(remote), 77));
    }
    assert_eq!(h.device.program().installed(), 1);
    assert_eq!(h.device.stats().punts, 1);
    // The reverse direction now reaches the VM's server.
    let back = inner([198, 51, 100, 7], [10, 0, 0, 42], b"to the vm");
    let t = h.now();
    h.send(t, OUTSIDE, vxlan(remote, LOCAL, 77, &back));
    h.advance_to(t + MILLIS);
    let out = h.take();
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].port, SERVERS);
    assert_eq!(decode(&out[0].frame).1, Ipv4Addr::new(172, 16, 0, 3));
    // Packets from the outside are never admitted.
    let stranger = inner([198, 51, 100, 7], [10, 0, 0, 43], b"x");
    h.send(h.now(), OUTSIDE, vxlan(remote, LOCAL, 77, &stranger));
    h.advance_to(h.now() + MILLIS);
    assert!(h.take().is_empty());
    assert_eq!(h.device.stats().punts, 1);
}
