//! EPC serving gateway through the switch model with real frames:
//! signalling then data, exact GTP-U bytes, decapsulation, unknown users and
//! TEIDs, bearer updates, other profiles and the resource check.

use std::net::Ipv4Addr;

use inca_apps::epc::{ServingGateway, Signal, GTPU_PORT, SIGNAL_PORT};
use inca_switch::device::{MICROS, MILLIS};
use inca_switch::harness::{Harness, Transmitted};
use inca_switch::{check, PortId, Profile, Switch};
use inca_wire::{build_udp_frame, Endpoints, EthernetFrame, Ipv4Packet, UdpDatagram};

const CORE: PortId = 0;
const ACCESS: PortId = 1;
const MME: PortId = 5;
const LOCAL: [u8; 4] = [192, 0, 2, 2];
const USER: [u8; 4] = [10, 45, 0, 7];
const ENB: [u8; 4] = [100, 64, 0, 1];
const SEED: u64 = 11;

fn start(profile: Profile, flows: usize) -> Harness<Switch<ServingGateway>> {
    println!("seed {SEED}");
    let app = ServingGateway::new(flows, CORE, ACCESS, LOCAL);
    Harness::new(Switch::new(profile, app).unwrap(), SEED)
}

fn signal(create: bool, user: [u8; 4], teid: u32, enb: [u8; 4]) -> Vec<u8> {
    let ep = Endpoints::new(
        [2, 0, 0, 0, 0, 0x33],
        Ipv4Addr::new(192, 0, 2, 100),
        [2, 0, 0, 0, 0, 0x22],
        Ipv4Addr::from(LOCAL),
    );
    let s = Signal {
        create,
        user,
        teid,
        enb,
    };
    build_udp_frame(&ep, SIGNAL_PORT, SIGNAL_PORT, &s.encode(), true).unwrap()
}

/// A downlink packet from the internet to `user`.
fn downlink(user: [u8; 4], payload: &[u8]) -> Vec<u8> {
    let ep = Endpoints::new(
        [2, 0, 0, 0, 0, 1],
        Ipv4Addr::new(93, 184, 216, 34),
        [2, 0, 0, 0, 0, 0x22],
        Ipv4Addr::from(user),
    );
    build_udp_frame(&ep, 443, 50_000, payload, true).unwrap()
}

/// An uplink GTP-U packet from `enb` carrying a packet from `user`.
fn uplink(enb: [u8; 4], teid: u32, user: [u8; 4], payload: &[u8]) -> (Vec<u8>, Vec<u8>) {
    let inner_ep = Endpoints::new(
        [2, 0, 0, 0, 0, 9],
        Ipv4Addr::from(user),
        [2, 0, 0, 0, 0, 9],
        Ipv4Addr::new(93, 184, 216, 34),
    );
    let inner = build_udp_frame(&inner_ep, 50_000, 443, payload, true).unwrap();
    let inner_ip = inner[14..].to_vec();
    let mut gtp = vec![0x30, 0xFF];
    gtp.extend_from_slice(&(inner_ip.len() as u16).to_be_bytes());
    gtp.extend_from_slice(&teid.to_be_bytes());
    gtp.extend_from_slice(&inner_ip);
    let ep = Endpoints::new(
        [2, 0, 0, 0, 0, 0x44],
        Ipv4Addr::from(enb),
        [2, 0, 0, 0, 0, 0x22],
        Ipv4Addr::from(LOCAL),
    );
    (
        build_udp_frame(&ep, GTPU_PORT, GTPU_PORT, &gtp, false).unwrap(),
        inner_ip,
    )
}

/// Parses a GTP-U frame the gateway sent: (outer src, outer dst, TEID,
/// inner IP packet), checking every fixed field.
fn gtpu(frame: &[u8]) -> (Ipv4Addr, Ipv4Addr, u32, Vec<u8>) {
    let eth = EthernetFrame::new_checked(frame).unwrap();
    assert_eq!(eth.ethertype(), 0x0800);
    let ip = Ipv4Packet::new_checked(eth.payload()).unwrap();
    assert!(ip.verify_checksum(), "outer IPv4 checksum");
    assert_eq!(ip.header_len(), 20);
    assert_eq!(ip.protocol(), 17);
    assert_eq!(ip.ttl(), 64);
    assert!(ip.dont_frag());
    assert_eq!(usize::from(ip.total_len()), eth.payload().len());
    let udp = UdpDatagram::new_checked(ip.payload()).unwrap();
    assert_eq!((udp.src_port(), udp.dst_port()), (GTPU_PORT, GTPU_PORT));
    assert_eq!(udp.checksum(), 0);
    assert_eq!(usize::from(udp.len()), ip.payload().len());
    let g = udp.payload();
    assert_eq!(g[0], 0x30, "GTP-U flags: version 1, PT, no options");
    assert_eq!(g[1], 0xFF, "G-PDU");
    let len = u16::from_be_bytes([g[2], g[3]]);
    assert_eq!(usize::from(len), g.len() - 8, "GTP-U length");
    let teid = u32::from_be_bytes([g[4], g[5], g[6], g[7]]);
    (ip.src_addr(), ip.dst_addr(), teid, g[8..].to_vec())
}

fn on_port(tx: &[Transmitted], port: PortId) -> Vec<&Transmitted> {
    tx.iter().filter(|t| t.port == port).collect()
}

#[test]
fn signalling_then_downlink_is_encapsulated_exactly() {
    let mut h = start(Profile::tofino(), 1024);
    // Before signalling, the user is unknown.
    h.send(0, CORE, downlink(USER, b"early"));
    h.send(10, MME, signal(true, USER, 0xABCD_0001, ENB));
    h.advance_to(MILLIS);
    assert!(
        h.take().is_empty(),
        "signalling is consumed; unknown user dropped"
    );
    let s = h.device.stats();
    assert_eq!(s.punts, 1);
    assert_eq!(s.program_drops, 1);
    assert_eq!(h.device.program().users(), 1);

    let original = downlink(USER, b"hello user");
    let t = h.now();
    h.send(t, CORE, original.clone());
    h.advance_to(t + 10_000);
    let out = h.take();
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].port, ACCESS);
    assert_eq!(out[0].at, t + 450, "fast path");
    assert_eq!(out[0].frame.len(), original.len() + 36);
    assert_eq!(out[0].frame[..14], original[..14], "Ethernet kept");
    let (src, dst, teid, inner) = gtpu(&out[0].frame);
    assert_eq!(src, Ipv4Addr::from(LOCAL));
    assert_eq!(dst, Ipv4Addr::from(ENB));
    assert_eq!(teid, 0xABCD_0001);
    assert_eq!(inner, original[14..], "the user's packet, whole");
    // The exact bytes of the encapsulation.
    let expected_hdr: [u8; 36] = {
        let total = (original.len() - 14 + 36) as u16;
        let mut e = [0u8; 36];
        e[..12].copy_from_slice(&[0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, 17, 0, 0]);
        e[2..4].copy_from_slice(&total.to_be_bytes());
        e[12..16].copy_from_slice(&LOCAL);
        e[16..20].copy_from_slice(&ENB);
        let sum = inca_wire::checksum::checksum(&e[..20]);
        e[10..12].copy_from_slice(&sum.to_be_bytes());
        e[20..24].copy_from_slice(&[0x08, 0x68, 0x08, 0x68]);
        e[24..26].copy_from_slice(&(total - 20).to_be_bytes());
        e[28..30].copy_from_slice(&[0x30, 0xFF]);
        e[30..32].copy_from_slice(&(total - 36).to_be_bytes());
        e[32..36].copy_from_slice(&[0xAB, 0xCD, 0x00, 0x01]);
        e
    };
    assert_eq!(out[0].frame[14..50], expected_hdr);
    assert!(h.device.violations().is_empty());
}

#[test]
fn the_first_data_packet_waits_for_the_control_plane() {
    let mut h = start(Profile::tofino(), 1024);
    let timing = Profile::tofino().control_plane;
    h.send(0, MME, signal(true, USER, 7, ENB));
    // Punt, CPU time and two table writes (spaced by the op rate).
    let ready = timing.punt_latency + timing.cpu_per_event + 2 * timing.table_write;
    h.send(10 * MICROS, CORE, downlink(USER, b"too soon"));
    h.send(ready + 50 * MICROS, CORE, downlink(USER, b"in time"));
    h.advance_to(MILLIS);
    let out = h.take();
    assert_eq!(out.len(), 1);
    assert!(out[0].frame.ends_with(b"in time"));
}

#[test]
fn uplink_is_decapsulated_when_the_teid_is_known() {
    let mut h = start(Profile::tofino(), 1024);
    h.send(0, MME, signal(true, USER, 0x1234, ENB));
    h.advance_to(MILLIS);
    let t = h.now();
    let (frame, inner_ip) = uplink(ENB, 0x1234, USER, b"from the phone");
    h.send(t, ACCESS, frame.clone());
    // Unknown TEID, a spoofed inner source, and GTP-U from the core side.
    h.send(t, ACCESS, uplink(ENB, 0x9999, USER, b"x").0);
    h.send(t, ACCESS, uplink(ENB, 0x1234, [10, 45, 0, 8], b"x").0);
    // A GTP echo request (type 1) is not a G-PDU.
    let mut echo = frame.clone();
    echo[43] = 1;
    h.send(t, ACCESS, echo);
    // Plain IP from the access side is not accepted.
    h.send(t, ACCESS, downlink([93, 184, 216, 34], b"x"));
    h.advance_to(t + MILLIS);
    let out = h.take();
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].port, CORE);
    assert_eq!(out[0].frame[..14], frame[..14]);
    assert_eq!(out[0].frame[14..], inner_ip[..], "outer headers stripped");
    let ip = Ipv4Packet::new_checked(&out[0].frame[14..]).unwrap();
    assert!(ip.verify_checksum());
    assert_eq!(ip.src_addr(), Ipv4Addr::from(USER));
    assert_eq!(h.device.stats().program_drops, 4);
}

#[test]
fn gtpu_with_a_sequence_number_is_decapsulated() {
    let mut h = start(Profile::tofino(), 1024);
    h.send(0, MME, signal(true, USER, 0x1234, ENB));
    h.advance_to(MILLIS);
    let (frame, inner_ip) = uplink(ENB, 0x1234, USER, b"seq");
    // Set S and add the 4 optional bytes (sequence 5, N-PDU 0, next 0).
    let mut f = frame.clone();
    f[42] = 0x32;
    f.splice(50..50, [0, 5, 0, 0]);
    let t = h.now();
    h.send(t, ACCESS, f);
    h.advance_to(t + MILLIS);
    let out = h.take();
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].frame[14..], inner_ip[..]);
}

#[test]
fn an_update_changes_the_teid_and_enb_for_later_packets() {
    let mut h = start(Profile::tofino(), 1024);
    h.send(0, MME, signal(true, USER, 100, ENB));
    h.advance_to(MILLIS);
    h.send(MILLIS, CORE, downlink(USER, b"a"));
    // Handover: a new eNB and a new TEID.
    let enb2 = [100, 64, 0, 2];
    h.send(2 * MILLIS, MME, signal(true, USER, 200, enb2));
    h.advance_to(3 * MILLIS);
    h.send(3 * MILLIS, CORE, downlink(USER, b"b"));
    h.advance_to(4 * MILLIS);
    let out = on_port(&h.take(), ACCESS)
        .iter()
        .map(|t| gtpu(&t.frame))
        .map(|(_, dst, teid, _)| (dst, teid))
        .collect::<Vec<_>>();
    assert_eq!(
        out,
        vec![(Ipv4Addr::from(ENB), 100), (Ipv4Addr::from(enb2), 200)]
    );
    assert_eq!(h.device.program().teid_of(USER), Some(200));
    // The old TEID no longer decapsulates; the new one does.
    let t = h.now();
    h.send(t, ACCESS, uplink(ENB, 100, USER, b"old").0);
    h.send(t, ACCESS, uplink(enb2, 200, USER, b"new").0);
    h.advance_to(t + MILLIS);
    let out = h.take();
    assert_eq!(out.len(), 1);
    assert!(out[0].frame.ends_with(b"new"));
    assert_eq!(h.device.stats().cp_op_failures, 0);
}

#[test]
fn delete_full_table_and_taken_teids_are_refused_or_applied() {
    let mut h = start(Profile::tofino(), 2);
    h.send(0, MME, signal(true, [10, 0, 0, 1], 1, ENB));
    h.send(1, MME, signal(true, [10, 0, 0, 2], 1, ENB)); // TEID taken
    h.send(2, MME, signal(true, [10, 0, 0, 2], 2, ENB));
    h.send(3, MME, signal(true, [10, 0, 0, 3], 3, ENB)); // full
    h.send(4, MME, signal(false, [10, 0, 0, 9], 9, ENB)); // unknown
    let mut short = signal(true, [10, 0, 0, 4], 4, ENB);
    short.truncate(short.len() - 1);
    h.send(5, MME, short);
    h.advance_to(5 * MILLIS);
    assert_eq!(h.device.program().users(), 2);
    assert_eq!(h.device.program().refused, 4);
    h.send(5 * MILLIS, MME, signal(false, [10, 0, 0, 1], 1, ENB));
    h.advance_to(6 * MILLIS);
    h.send(6 * MILLIS, CORE, downlink([10, 0, 0, 1], b"gone"));
    h.send(6 * MILLIS, CORE, downlink([10, 0, 0, 2], b"here"));
    h.advance_to(7 * MILLIS);
    let out = h.take();
    assert_eq!(out.len(), 1);
    assert_eq!(gtpu(&out[0].frame).2, 2);
    assert_eq!(h.device.program().users(), 1);
    assert_eq!(h.device.stats().cp_op_failures, 0);
}

#[test]
fn truncated_frames_are_counted_not_fatal() {
    let mut h = start(Profile::tofino(), 16);
    h.send(0, MME, signal(true, USER, 0x1234, ENB));
    h.advance_to(MILLIS);
    let base = h.device.stats();
    let (good, _) = uplink(ENB, 0x1234, USER, b"");
    let t = h.now();
    for cut in 0..=good.len() {
        h.send(t + cut as u64, ACCESS, good[..cut].to_vec());
    }
    h.advance_to(t + MILLIS);
    let sent = h.take().len() as u64;
    let s = h.device.stats();
    assert_eq!(s.fates() - base.fates(), good.len() as u64 + 1);
    // Cuts that keep the inner IPv4 header whole (70 bytes) are forwarded.
    assert_eq!(sent, (good.len() - 70 + 1) as u64);
    assert!(h.device.violations().is_empty());
}

#[test]
fn loads_on_a_smartnic_and_signals_inline_on_a_server() {
    let nic = Switch::new(
        Profile::smartnic(),
        ServingGateway::new(65_536, 0, 1, LOCAL),
    );
    assert!(nic.is_ok(), "{:?}", nic.err().map(|e| e.to_string()));

    let server = Profile::server();
    let dp = server.data_path;
    let mut h = start(server, 1 << 20);
    // Signalling arrives on the core port (0) and is applied inline.
    h.send(0, CORE, signal(true, USER, 42, ENB));
    h.send(dp.per_packet, CORE, downlink(USER, b"at once"));
    h.advance_to(MILLIS);
    let out = h.take();
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].port, ACCESS);
    assert_eq!(gtpu(&out[0].frame).2, 42);
    let s = h.device.stats();
    assert_eq!(s.punts, 0, "no control-plane round trip");
    assert_eq!(s.cpu_events, 1, "only the start event");
    assert!(h.device.violations().is_empty());
    // Update inline, then the uplink with the new TEID.
    h.send(2 * MILLIS, CORE, signal(true, USER, 43, ENB));
    h.send(2 * MILLIS + 100, ACCESS, uplink(ENB, 43, USER, b"up").0);
    h.send(2 * MILLIS + 200, ACCESS, uplink(ENB, 42, USER, b"old").0);
    h.advance_to(3 * MILLIS);
    let out = h.take();
    assert_eq!(out.len(), 1);
    assert!(out[0].frame.ends_with(b"up"));
}

#[test]
fn resource_check_on_tofino() {
    let tofino = Profile::tofino();
    assert!(check(&tofino, &mut ServingGateway::new(65_536, 0, 1, LOCAL)).is_ok());
    let (mut lo, mut hi) = (1usize, 1 << 26);
    while lo + 1 < hi {
        let mid = (lo + hi) / 2;
        if check(&tofino, &mut ServingGateway::new(mid, 0, 1, LOCAL)).is_ok() {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    let err = check(&tofino, &mut ServingGateway::new(hi, 0, 1, LOCAL))
        .unwrap_err()
        .to_string();
    println!("largest flows on tofino: {lo}; at {hi}: {err}");
    assert!(err.contains("epc_"), "names the object: {err}");
}

mod fuzz {
    use super::*;
    use proptest::prelude::*;

    fn frames() -> impl Strategy<Value = Vec<(PortId, Vec<u8>)>> {
        let frame = prop_oneof![
            proptest::collection::vec(any::<u8>(), 0..600),
            // Valid frames of each kind with random bytes written over them.
            (
                0u8..3,
                proptest::collection::vec((0usize..80, any::<u8>()), 0..4),
                0usize..200
            )
                .prop_map(|(kind, edits, cut)| {
                    let mut f = match kind {
                        0 => signal(true, USER, 5, ENB),
                        1 => downlink(USER, &[1; 40]),
                        _ => uplink(ENB, 5, USER, &[2; 40]).0,
                    };
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
            let mut h = start(Profile::tofino(), 64);
            h.send(0, MME, signal(true, USER, 5, ENB));
            h.advance_to(MILLIS);
            let t = h.now();
            for (i, (port, f)) in frames.iter().enumerate() {
                h.send(t + i as u64 * 100, *port, f.clone());
            }
            h.advance_to(t + 100 * MILLIS);
            let s = h.device.stats();
            // The control plane consumes signalling: one fate per frame.
            prop_assert_eq!(s.fates(), frames.len() as u64 + 1, "{:?}", s);
            prop_assert!(h.device.violations().is_empty());
        }
    }
}

#[test]
fn parameters_are_checked() {
    use inca_apps::params::Params;
    let p = Params::parse(["flows=1000", "core_port=2", "access_port=3"]).unwrap();
    let mut app = ServingGateway::from_params(&p).unwrap();
    assert!(check(&Profile::tofino(), &mut app).is_ok());
    assert!(ServingGateway::from_params(&Params::parse(["users=1"]).unwrap()).is_err());
}
