//! SYN proxy through the switch model with real TCP frames: a full
//! handshake with sequence translation both ways, a SYN flood, wrong ACKs,
//! teardown, other profiles and the resource check.

use std::net::Ipv4Addr;

use inca_apps::synproxy::{
    SynProxy, ESTABLISHED, EV_COOKIE_SENT, EV_DROPPED, EV_ESTABLISHED, EV_PASSED, EV_TO_CLIENT,
    EV_TO_SERVER, EV_VALIDATED,
};
use inca_switch::device::MILLIS;
use inca_switch::harness::{Harness, Transmitted};
use inca_switch::{check, PortId, Profile, Switch};
use inca_wire::{
    build_tcp_frame, build_udp_frame, Endpoints, EthernetFrame, Ipv4Packet, TcpFlags, TcpRepr,
    TcpSegment,
};

const OUTSIDE: PortId = 0;
const SERVERS: PortId = 1;
const SEED: u64 = 3;
const CLIENT_ISN: u32 = 0xFFFF_FF00; // wraps during the test
const SERVER_ISN: u32 = 7777;

type H = Harness<Switch<SynProxy>>;

fn start(profile: Profile, flows: usize) -> H {
    println!("seed {SEED}");
    let app = SynProxy::new(flows, OUTSIDE, SERVERS, 0x1234_5678);
    Harness::new(Switch::new(profile, app).unwrap(), SEED)
}

fn client_ep(src: [u8; 4]) -> Endpoints {
    Endpoints::new(
        [2, 0, 0, 0, 0, 1],
        Ipv4Addr::from(src),
        [2, 0, 0, 0, 0, 2],
        Ipv4Addr::new(10, 2, 0, 9),
    )
}

const CLIENT: [u8; 4] = [198, 51, 100, 5];

#[allow(clippy::too_many_arguments)]
fn tcp(
    ep: &Endpoints,
    sport: u16,
    dport: u16,
    seq: u32,
    ack: u32,
    flags: TcpFlags,
    options: &[u8],
    payload: &[u8],
) -> Vec<u8> {
    let repr = TcpRepr {
        src_port: sport,
        dst_port: dport,
        seq,
        ack,
        flags,
        window: 29_200,
        urgent: 0,
        options,
        payload,
    };
    build_tcp_frame(ep, &repr).unwrap()
}

/// A segment as it left the switch, checksums verified.
#[derive(Debug)]
struct Seg {
    src: Ipv4Addr,
    dst: Ipv4Addr,
    sport: u16,
    dport: u16,
    seq: u32,
    ack: u32,
    flags: u8,
    options: Vec<u8>,
    payload: Vec<u8>,
}

fn seg(frame: &[u8]) -> Seg {
    let eth = EthernetFrame::new_checked(frame).unwrap();
    let ip = Ipv4Packet::new_checked(eth.payload()).unwrap();
    assert!(ip.verify_checksum(), "IPv4 checksum broken");
    let t = TcpSegment::new_checked(ip.payload()).unwrap();
    assert!(
        t.verify_checksum(ip.src_addr(), ip.dst_addr()),
        "TCP checksum broken"
    );
    Seg {
        src: ip.src_addr(),
        dst: ip.dst_addr(),
        sport: t.src_port(),
        dport: t.dst_port(),
        seq: t.seq(),
        ack: t.ack(),
        flags: t.flags().bits(),
        options: t.options().to_vec(),
        payload: t.payload().to_vec(),
    }
}

fn one(h: &mut H, at: u64, port: PortId, frame: Vec<u8>) -> Option<Transmitted> {
    h.send(at, port, frame);
    h.advance_to(at + 100_000);
    let mut out = h.take();
    assert!(out.len() <= 1, "one packet in, at most one out: {out:?}");
    out.pop()
}

fn next(h: &mut H, port: PortId, frame: Vec<u8>) -> Option<Transmitted> {
    let t = h.now();
    one(h, t, port, frame)
}

fn events(h: &H, i: u64) -> u64 {
    let e = h.device.program().events().unwrap();
    h.device.objects().counter_read(e, i).unwrap().0
}

fn used_slots(h: &H) -> usize {
    let r = h.device.program().flow_register().unwrap();
    (0..h.device.program().flows() as u64)
        .filter(|&i| h.device.objects().register_peek(r, i).unwrap() != 0)
        .count()
}

const SYN: TcpFlags = TcpFlags::SYN;
const ACK: TcpFlags = TcpFlags::ACK;
const MSS_WS: [u8; 8] = [2, 4, 5, 0xb4, 1, 3, 3, 7];

/// Runs the handshake for `client:sport` and returns the cookie.
fn handshake(h: &mut H, client: [u8; 4], sport: u16) -> u32 {
    let c = client_ep(client);
    let s = c.reversed();
    let t = h.now();
    // 1. The client's SYN is answered by the switch with a cookie.
    let syn = tcp(&c, sport, 80, CLIENT_ISN, 0, SYN, &MSS_WS, b"");
    let out = one(h, t, OUTSIDE, syn).expect("a SYN-ACK");
    assert_eq!(out.port, OUTSIDE);
    let synack = seg(&out.frame);
    assert_eq!(
        (synack.src, synack.dst, synack.sport, synack.dport),
        (s.src_ip, s.dst_ip, 80, sport)
    );
    assert_eq!(synack.flags, 0x12, "SYN|ACK");
    assert_eq!(synack.ack, CLIENT_ISN.wrapping_add(1));
    assert_eq!(synack.options, [2, 4, 5, 0xb4, 1, 1, 1, 1], "MSS + NOPs");
    let cookie = synack.seq;
    assert_eq!(&out.frame[0..6], &c.src_mac, "MACs swapped");

    // 2. The client's ACK validates the flow and becomes the SYN to the server.
    let ack = tcp(
        &c,
        sport,
        80,
        CLIENT_ISN.wrapping_add(1),
        cookie.wrapping_add(1),
        ACK,
        &[],
        b"",
    );
    let out = one(h, t + 200_000, OUTSIDE, ack).expect("a SYN to the server");
    assert_eq!(out.port, SERVERS);
    let to_server = seg(&out.frame);
    assert_eq!(
        (
            to_server.src,
            to_server.dst,
            to_server.sport,
            to_server.dport
        ),
        (c.src_ip, c.dst_ip, sport, 80)
    );
    assert_eq!(to_server.flags, 0x02, "SYN");
    assert_eq!((to_server.seq, to_server.ack), (CLIENT_ISN, 0));

    // 3. The server's SYN-ACK is turned into the ACK completing its handshake.
    let sa = tcp(
        &s,
        80,
        sport,
        SERVER_ISN,
        CLIENT_ISN.wrapping_add(1),
        SYN | ACK,
        &[2, 4, 5, 0xb4],
        b"",
    );
    let out = one(h, t + 400_000, SERVERS, sa).expect("an ACK to the server");
    assert_eq!(out.port, SERVERS);
    let ack = seg(&out.frame);
    assert_eq!(
        (ack.src, ack.dst, ack.sport, ack.dport),
        (c.src_ip, c.dst_ip, sport, 80)
    );
    assert_eq!(ack.flags, 0x10, "ACK");
    assert_eq!(
        (ack.seq, ack.ack),
        (CLIENT_ISN.wrapping_add(1), SERVER_ISN + 1)
    );
    assert_eq!(ack.options, [1, 1, 1, 1], "the server's options are NOPs");
    cookie
}

#[test]
fn a_full_handshake_and_data_are_translated_both_ways() {
    let mut h = start(Profile::tofino(), 1024);
    let cookie = handshake(&mut h, CLIENT, 40_000);
    let c = client_ep(CLIENT);
    let s = c.reversed();
    let offset = cookie.wrapping_sub(SERVER_ISN);
    let t = h.now();

    // Client data: its ack (in the cookie's space) is moved to the server's.
    let cseq = CLIENT_ISN.wrapping_add(1);
    let data = tcp(
        &c,
        40_000,
        80,
        cseq,
        cookie.wrapping_add(1),
        ACK,
        &[],
        b"GET /",
    );
    let out = one(&mut h, t, OUTSIDE, data).unwrap();
    assert_eq!(out.port, SERVERS);
    let d = seg(&out.frame);
    assert_eq!((d.seq, d.ack), (cseq, SERVER_ISN + 1));
    assert_eq!(d.payload, b"GET /");

    // Server data, longer than the parse window: its seq moves to the
    // cookie's space, and the incremental update keeps the checksum right.
    let body: Vec<u8> = (0..1200u32).map(|i| (i * 31) as u8).collect();
    let reply = tcp(
        &s,
        80,
        40_000,
        SERVER_ISN + 1,
        cseq.wrapping_add(5),
        ACK,
        &[],
        &body,
    );
    let out = one(&mut h, t + 200_000, SERVERS, reply).unwrap();
    assert_eq!(out.port, OUTSIDE);
    assert!(out.frame.len() > Profile::tofino().data_path.parse_depth);
    let r = seg(&out.frame);
    assert_eq!(r.seq, cookie.wrapping_add(1));
    assert_eq!(r.seq, (SERVER_ISN + 1).wrapping_add(offset));
    assert_eq!(r.ack, cseq.wrapping_add(5), "the server's ack is untouched");
    assert_eq!(r.payload, body);

    // The client acknowledges the body in its space.
    let ack = tcp(
        &c,
        40_000,
        80,
        cseq.wrapping_add(5),
        cookie.wrapping_add(1 + 1200),
        ACK,
        &[],
        b"",
    );
    let d = seg(&one(&mut h, t + 400_000, OUTSIDE, ack).unwrap().frame);
    assert_eq!(d.ack, SERVER_ISN + 1 + 1200);

    assert_eq!(events(&h, EV_COOKIE_SENT), 1);
    assert_eq!(events(&h, EV_VALIDATED), 1);
    assert_eq!(events(&h, EV_ESTABLISHED), 1);
    assert_eq!(events(&h, EV_TO_SERVER), 2);
    assert_eq!(events(&h, EV_TO_CLIENT), 1);
    assert_eq!(events(&h, EV_DROPPED), 0);
    let st = h.device.stats();
    assert_eq!(
        st.punts + st.cp_ops + st.recirculations,
        0,
        "all in one pass"
    );
    assert!(h.device.violations().is_empty());
}

#[test]
fn a_syn_flood_creates_no_per_flow_state() {
    let mut h = start(Profile::tofino(), 1024);
    let n = 2000u32;
    for i in 0..n {
        let src = (0xC633_0000u32 + i).to_be_bytes(); // 198.51.x.y, spoofed
        let c = client_ep(src);
        h.send(
            u64::from(i) * 100,
            OUTSIDE,
            tcp(&c, 1024 + i as u16, 80, i * 77, 0, SYN, &MSS_WS, b""),
        );
    }
    h.advance_to(MILLIS);
    let out = h.take();
    assert_eq!(out.len(), n as usize, "each SYN answered");
    assert!(out.iter().all(|t| t.port == OUTSIDE));
    assert!(out.iter().all(|t| seg(&t.frame).flags == 0x12));
    assert_eq!(used_slots(&h), 0, "no state at all");
    assert_eq!(events(&h, EV_COOKIE_SENT), u64::from(n));
    assert_eq!(events(&h, EV_VALIDATED), 0);
    assert_eq!(h.device.stats().ports[SERVERS as usize].tx_packets, 0);
    // A real client still gets through during the flood.
    let t = h.now();
    h.advance_to(t);
    handshake(&mut h, CLIENT, 40_000);
    assert_eq!(used_slots(&h), 1);
}

#[test]
fn wrong_or_unsolicited_acks_are_dropped() {
    let mut h = start(Profile::tofino(), 1024);
    let c = client_ep(CLIENT);
    let syn = tcp(&c, 40_000, 80, 1000, 0, SYN, &[], b"");
    let cookie = seg(&one(&mut h, 0, OUTSIDE, syn).unwrap().frame).seq;
    let mut t = h.now();
    for bad_ack in [cookie, cookie.wrapping_add(2), 0, cookie ^ 0x8000_0000] {
        let ack = tcp(&c, 40_000, 80, 1001, bad_ack, ACK, &[], b"");
        assert!(one(&mut h, t, OUTSIDE, ack).is_none());
        t = h.now();
    }
    // The right cookie for another flow (another source port) is wrong here.
    let ack = tcp(&c, 40_001, 80, 1001, cookie.wrapping_add(1), ACK, &[], b"");
    assert!(one(&mut h, t, OUTSIDE, ack).is_none());
    // An ACK carrying data, even with the right cookie, is not accepted.
    let ack = tcp(&c, 40_000, 80, 1001, cookie.wrapping_add(1), ACK, &[], b"x");
    assert!(next(&mut h, OUTSIDE, ack).is_none());
    // Server traffic without a flow, and a SYN from the server side.
    let s = c.reversed();
    let stray = tcp(&s, 80, 40_000, 5, 1001, ACK, &[], b"x");
    assert!(next(&mut h, SERVERS, stray).is_none());
    let sa = tcp(&s, 80, 40_000, 5, 1001, SYN | ACK, &[], b"");
    assert!(next(&mut h, SERVERS, sa).is_none());
    let out_syn = tcp(&s, 80, 40_000, 5, 0, SYN, &[], b"");
    assert!(next(&mut h, SERVERS, out_syn).is_none());
    assert_eq!(used_slots(&h), 0);
    assert_eq!(events(&h, EV_DROPPED), 9);
    assert_eq!(h.device.stats().program_drops, 9);
}

#[test]
fn pending_flows_drop_data_and_a_lost_ack_is_answered_again() {
    let mut h = start(Profile::tofino(), 1024);
    let c = client_ep(CLIENT);
    let s = c.reversed();
    let syn = tcp(&c, 40_000, 80, 1000, 0, SYN, &[], b"");
    let cookie = seg(&one(&mut h, 0, OUTSIDE, syn).unwrap().frame).seq;
    let ack = tcp(&c, 40_000, 80, 1001, cookie.wrapping_add(1), ACK, &[], b"");
    assert_eq!(next(&mut h, OUTSIDE, ack.clone()).unwrap().port, SERVERS);
    // Before the server answers: data, and the ACK again, are dropped.
    let data = tcp(
        &c,
        40_000,
        80,
        1001,
        cookie.wrapping_add(1),
        ACK,
        &[],
        b"early",
    );
    assert!(next(&mut h, OUTSIDE, data).is_none());
    assert!(next(&mut h, OUTSIDE, ack).is_none());
    let r = h.device.program().flow_register().unwrap();
    let pending: Vec<u32> = (0..1024)
        .map(|i| h.device.objects().register_peek(r, i).unwrap())
        .filter(|&v| v != 0)
        .collect();
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0] & ESTABLISHED, 0);
    // The server's SYN-ACK, twice (our ACK was lost): answered both times.
    let sa = tcp(&s, 80, 40_000, 5000, 1001, SYN | ACK, &[], b"");
    for _ in 0..2 {
        let a = seg(&next(&mut h, SERVERS, sa.clone()).unwrap().frame);
        assert_eq!((a.flags, a.seq, a.ack), (0x10, 1001, 5001));
    }
    let o = h.device.program().offset_register().unwrap();
    let i = (0..1024)
        .find(|&i| h.device.objects().register_peek(r, i).unwrap() != 0)
        .unwrap();
    assert_eq!(
        h.device.objects().register_peek(o, i).unwrap(),
        cookie.wrapping_sub(5000)
    );
}

#[test]
fn rst_frees_the_slot_and_fins_let_it_be_reused() {
    let mut h = start(Profile::tofino(), 1024);
    let cookie = handshake(&mut h, CLIENT, 40_000);
    let c = client_ep(CLIENT);
    let s = c.reversed();
    assert_eq!(used_slots(&h), 1);
    let cseq = CLIENT_ISN.wrapping_add(1);
    // FIN from both sides: translated and forwarded, the slot kept.
    let fin = tcp(
        &c,
        40_000,
        80,
        cseq,
        cookie.wrapping_add(1),
        ACK | TcpFlags::FIN,
        &[],
        b"",
    );
    let d = seg(&next(&mut h, OUTSIDE, fin).unwrap().frame);
    assert_eq!(d.ack, SERVER_ISN + 1);
    let sfin = tcp(
        &s,
        80,
        40_000,
        SERVER_ISN + 1,
        cseq.wrapping_add(1),
        ACK | TcpFlags::FIN,
        &[],
        b"",
    );
    let d = seg(&next(&mut h, SERVERS, sfin).unwrap().frame);
    assert_eq!(d.seq, cookie.wrapping_add(1));
    let last = tcp(
        &c,
        40_000,
        80,
        cseq.wrapping_add(1),
        cookie.wrapping_add(2),
        ACK,
        &[],
        b"",
    );
    let d = seg(&next(&mut h, OUTSIDE, last).unwrap().frame);
    assert_eq!(d.ack, SERVER_ISN + 2, "the last ACK still finds the flow");
    assert_eq!(used_slots(&h), 1);
    // The closed connection's 5-tuple is used again: the slot is reclaimed.
    let cookie2 = handshake(&mut h, CLIENT, 40_000);
    assert_eq!(cookie2, cookie, "same 5-tuple, same cookie");
    // An RST from the server frees it.
    let rst = tcp(&s, 80, 40_000, SERVER_ISN + 1, 0, TcpFlags::RST, &[], b"");
    let d = seg(&next(&mut h, SERVERS, rst).unwrap().frame);
    assert_eq!(d.seq, cookie.wrapping_add(1));
    assert_eq!(used_slots(&h), 0);
    assert!(h.device.violations().is_empty());
}

#[test]
fn non_tcp_passes_across_and_malformed_tcp_is_dropped() {
    let mut h = start(Profile::tofino(), 64);
    let c = client_ep(CLIENT);
    let udp = build_udp_frame(&c, 53, 53, b"q", true).unwrap();
    assert_eq!(one(&mut h, 0, OUTSIDE, udp.clone()).unwrap().port, SERVERS);
    assert_eq!(next(&mut h, SERVERS, udp.clone()).unwrap().port, OUTSIDE);
    assert_eq!(events(&h, EV_PASSED), 2);
    // A TCP header claiming a data offset of 4 words, and truncations.
    let mut bad = tcp(&c, 1, 2, 3, 4, SYN, &[], b"");
    bad[46] = 0x40;
    assert!(next(&mut h, OUTSIDE, bad).is_none());
    let good = tcp(&c, 40_000, 80, 1, 0, SYN, &MSS_WS, b"");
    let base = h.device.stats();
    let t = h.now();
    for cut in 0..=good.len() {
        h.send(t + cut as u64, OUTSIDE, good[..cut].to_vec());
    }
    h.advance_to(t + MILLIS);
    let sent = h.take().len();
    let st = h.device.stats();
    assert_eq!(st.fates() - base.fates(), good.len() as u64 + 1);
    assert_eq!(sent, 1, "only the whole SYN is answered");
    assert!(h.device.violations().is_empty());
}

#[test]
fn loads_on_a_smartnic_and_runs_on_a_server() {
    let nic = Switch::new(Profile::smartnic(), SynProxy::new(65_536, 0, 1, 1));
    assert!(nic.is_ok(), "{:?}", nic.err().map(|e| e.to_string()));
    let mut h = start(Profile::server(), 1 << 20);
    handshake(&mut h, CLIENT, 40_000);
    assert!(h.device.violations().is_empty());
    let mut h = start(Profile::smartnic(), 1 << 16);
    handshake(&mut h, CLIENT, 40_000);
    assert!(h.device.violations().is_empty());
}

#[test]
fn resource_check_on_tofino() {
    let tofino = Profile::tofino();
    assert!(check(&tofino, &mut SynProxy::new(65_536, 0, 1, 1)).is_ok());
    let (mut lo, mut hi) = (1usize, 1 << 26);
    while lo + 1 < hi {
        let mid = (lo + hi) / 2;
        if check(&tofino, &mut SynProxy::new(mid, 0, 1, 1)).is_ok() {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    let err = check(&tofino, &mut SynProxy::new(hi, 0, 1, 1))
        .unwrap_err()
        .to_string();
    println!("largest flows on tofino: {lo}; at {hi}: {err}");
    assert!(err.contains("syn_"), "names the object: {err}");
}

mod fuzz {
    use super::*;
    use proptest::prelude::*;

    fn frames() -> impl Strategy<Value = Vec<(PortId, Vec<u8>)>> {
        let frame = prop_oneof![
            proptest::collection::vec(any::<u8>(), 0..600),
            // TCP segments of every flag combination with random edits.
            (
                any::<u8>(),
                any::<u32>(),
                proptest::collection::vec((0usize..80, any::<u8>()), 0..3),
                0usize..200
            )
                .prop_map(|(flags, ack, edits, cut)| {
                    let c = client_ep(CLIENT);
                    let mut f = tcp(&c, 40_000, 80, 9, ack, TcpFlags(flags), &MSS_WS, b"xy");
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
            for (i, (port, f)) in frames.iter().enumerate() {
                h.send(i as u64 * 100, *port, f.clone());
            }
            h.advance_to(10 * MILLIS);
            let s = h.device.stats();
            prop_assert_eq!(s.fates(), frames.len() as u64, "{:?}", s);
            prop_assert!(h.device.violations().is_empty());
        }
    }
}

#[test]
fn parameters_are_checked() {
    use inca_apps::params::Params;
    let p = Params::parse(["flows=1000", "secret=42", "server_port=3"]).unwrap();
    let app = SynProxy::from_params(&p).unwrap();
    assert_eq!(app.flows(), 1000);
    assert!(SynProxy::from_params(&Params::parse(["secret=5000000000"]).unwrap()).is_err());
}
