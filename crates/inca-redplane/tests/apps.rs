//! The RedPlane apps on one switch with the test as the store: each app's
//! outputs match its `spec_step` reference model, and its NF behaviour
//! (translation, filtering, tunnelling, counting) is right.

use std::net::Ipv4Addr;

use inca_redplane::apps::epc::RpEpc;
use inca_redplane::apps::firewall::RpFirewall;
use inca_redplane::apps::kv::RpKv;
use inca_redplane::apps::lb::RpLb;
use inca_redplane::apps::nat::RpNat;
use inca_redplane::apps::sync_counter::SyncCounter;
use inca_redplane::apps::SpecModel;
use inca_redplane::switch::config::shard_hash_range;
use inca_redplane::switch::{Bytes, RedPlane, RedPlaneApp, RedPlaneConfig, Route};
use inca_switch::device::MILLIS;
use inca_switch::harness::{Harness, Transmitted};
use inca_switch::{Nanos, Profile, Switch};
use inca_wire::builder::{build_tcp_frame, build_udp_frame, Endpoints};
use inca_wire::redplane::{build_ack_frame, parse_udp_frame, AckRepr, AckType, ReqType, Request};
use inca_wire::tcp::{TcpFlags, TcpRepr};

const STORE: u16 = 2;
const UP: u16 = 1;
const DOWN: u16 = 0;

struct Req {
    kind: u8,
    seq: u16,
    key: Vec<u8>,
    value: Vec<u8>,
    piggy: Vec<u8>,
    ident: u16,
}

struct Rig<A: RedPlaneApp + SpecModel> {
    h: Harness<Switch<RedPlane<A>>>,
    spec: A,
    k: usize,
    v: usize,
}

impl<A: RedPlaneApp + SpecModel> Rig<A> {
    fn new(app: A) -> Self {
        let cfg = RedPlaneConfig {
            routes: vec![
                Route {
                    net: [0; 4],
                    len: 0,
                    port: UP,
                },
                Route {
                    net: [10, 0, 0, 0],
                    len: 8,
                    port: DOWN,
                },
            ],
            slots: 1024,
            ..RedPlaneConfig::default()
        };
        let (k, v) = (app.key_bytes(), app.value_bytes());
        let sw = Switch::new(Profile::tofino(), RedPlane::new(app.clone(), cfg)).expect("loads");
        let mut h = Harness::new(sw, 3);
        h.advance_to(10 * MILLIS);
        Rig { h, spec: app, k, v }
    }

    fn collect(&mut self, wait: Nanos) -> (Vec<Req>, Vec<Transmitted>) {
        self.h.advance_to(self.h.now() + wait);
        let (mut reqs, mut out) = (Vec::new(), Vec::new());
        for t in self.h.take() {
            if t.port != STORE {
                out.push(t);
                continue;
            }
            let info = parse_udp_frame(&t.frame).unwrap();
            let r = Request::new_checked(info.payload, self.k, self.v).unwrap();
            reqs.push(Req {
                kind: r.type_byte(),
                seq: r.seq(),
                key: r.key().to_vec(),
                value: r.value().to_vec(),
                piggy: r.piggyback().to_vec(),
                ident: info.ident,
            });
        }
        (reqs, out)
    }

    fn send(&mut self, port: u16, frame: &[u8]) -> (Vec<Req>, Vec<Transmitted>) {
        let t = self.h.now() + 1000;
        self.h.send(t, port, frame.to_vec());
        self.collect(10_000)
    }

    fn ack(
        &mut self,
        kind: AckType,
        seq: u16,
        r: &Req,
        value: &[u8],
    ) -> (Vec<Req>, Vec<Transmitted>) {
        let mut e = Endpoints::new(
            [2; 6],
            Ipv4Addr::new(10, 254, 0, 1),
            [3; 6],
            Ipv4Addr::new(10, 255, 0, 1),
        );
        e.ident = r.ident;
        let value = if kind.carries_value() { value } else { &[] };
        let f = build_ack_frame(
            &e,
            8001,
            &AckRepr {
                ack_type: kind,
                seq,
                key: &r.key,
                value,
                piggyback: &r.piggy,
            },
        )
        .unwrap();
        let t = self.h.now() + 1000;
        self.h.send(t, STORE, f);
        // Grants go through the control plane (a few hundred µs).
        self.collect(if kind.carries_value() {
            900_000
        } else {
            10_000
        })
    }

    /// Sends `frame` for a key without a lease, grants it with `value` and
    /// returns what the re-injected packet produced.
    fn first(&mut self, port: u16, frame: &[u8], value: &[u8]) -> (Vec<Req>, Vec<Transmitted>) {
        let (reqs, out) = self.send(port, frame);
        assert!(out.is_empty());
        assert_eq!(reqs.len(), 1);
        assert_eq!(reqs[0].kind, ReqType::LeaseNew as u8);
        assert_eq!(Some(reqs[0].key.clone()), self.spec.spec_key(frame), "key");
        self.ack(AckType::LeaseNew, 0, &reqs[0], value)
    }

    /// Checks an output against the reference model from `state`.
    fn check(&self, state: &[u8], input: &[u8], output: Option<&[u8]>) -> Vec<u8> {
        let (outs, next) = self.spec.spec_step(state, input);
        match output {
            Some(o) => assert_eq!(outs, vec![o.to_vec()], "output matches spec_step"),
            None => assert!(outs.is_empty(), "spec_step has no output either"),
        }
        next
    }
}

fn ep(src: [u8; 4], dst: [u8; 4]) -> Endpoints {
    Endpoints::new(
        [2, 0, 0, 0, 0, 9],
        Ipv4Addr::from(src),
        [2, 0, 0, 0, 0, 8],
        Ipv4Addr::from(dst),
    )
}

fn udp(src: [u8; 4], sport: u16, dst: [u8; 4], dport: u16, payload: &[u8]) -> Vec<u8> {
    build_udp_frame(&ep(src, dst), sport, dport, payload, true).unwrap()
}

fn tcp(
    src: [u8; 4],
    sport: u16,
    dst: [u8; 4],
    dport: u16,
    syn: bool,
    ack: bool,
    payload: &[u8],
) -> Vec<u8> {
    let flags = (if syn { 0x02 } else { 0 }) | (if ack { 0x10 } else { 0 });
    let repr = TcpRepr {
        src_port: sport,
        dst_port: dport,
        seq: 1,
        ack: u32::from(ack),
        flags: TcpFlags(flags),
        window: 65_535,
        urgent: 0,
        options: &[],
        payload,
    };
    build_tcp_frame(&ep(src, dst), &repr).unwrap()
}

/// The UDP checksum of a frame verifies (or is 0).
fn udp_checksum_ok(frame: &[u8]) -> bool {
    let info = parse_udp_frame(frame).unwrap();
    let ip = &frame[14..];
    let udp = &ip[20..usize::from(u16::from_be_bytes([ip[2], ip[3]]))];
    if udp[6..8] == [0, 0] {
        return true;
    }
    let pseudo =
        inca_wire::checksum::pseudo_header_ipv4(info.src_ip, info.dst_ip, 17, udp.len() as u16);
    inca_wire::checksum::fold(inca_wire::checksum::combine(
        pseudo,
        inca_wire::checksum::sum(udp),
    )) == 0xFFFF
}

#[test]
fn nat_translates_both_directions_like_its_spec() {
    let mut r = Rig::new(RpNat::new([198, 51, 100, 1], 1024, 64_512, 1));
    let out_pkt = udp([10, 0, 0, 1], 1000, [192, 0, 2, 7], 53, &[7; 40]);
    let public = [198, 51, 100, 1, 0x13, 0x88];
    let (reqs, out) = r.first(DOWN, &out_pkt, &public);
    assert!(reqs.is_empty(), "NAT packets are reads");
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].port, UP);
    let info = parse_udp_frame(&out[0].frame).unwrap();
    assert_eq!(
        (info.src_ip.octets(), info.src_port),
        ([198, 51, 100, 1], 5000)
    );
    assert!(udp_checksum_ok(&out[0].frame));
    r.check(&public, &out_pkt, Some(&out[0].frame[14..]));
    // The reply: reverse key (public endpoint), value = internal endpoint.
    let back = udp([192, 0, 2, 7], 53, [198, 51, 100, 1], 5000, &[9; 40]);
    let internal = [10, 0, 0, 1, 0x03, 0xe8];
    let (reqs, out) = r.first(UP, &back, &internal);
    assert!(reqs.is_empty());
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].port, DOWN);
    let info = parse_udp_frame(&out[0].frame).unwrap();
    assert_eq!((info.dst_ip.octets(), info.dst_port), ([10, 0, 0, 1], 1000));
    assert!(udp_checksum_ok(&out[0].frame));
    r.check(&internal, &back, Some(&out[0].frame[14..]));
    // An unknown reverse key gets 0.0.0.0:0 and is dropped.
    let stray = udp([192, 0, 2, 7], 53, [198, 51, 100, 1], 6000, &[9; 40]);
    let (_, out) = r.first(UP, &stray, &[0; 6]);
    assert!(out.is_empty());
    r.check(&[0; 6], &stray, None);
}

#[test]
fn nat_shards_reverse_keys_by_port_range() {
    let nat = RpNat::new([198, 51, 100, 1], 1024, 64_512, 2);
    let low = Bytes::new(&[198, 51, 100, 1, 0x04, 0x00]); // port 1024
    let high = Bytes::new(&[198, 51, 100, 1, 0xff, 0x00]); // port 65280
    let (lo1, _) = shard_hash_range(1, 2);
    assert_eq!(nat.shard_hash(&low), Some(0));
    assert_eq!(nat.shard_hash(&high), Some(lo1));
    assert_eq!(
        nat.shard_hash(&Bytes::new(&[10, 0, 0, 1, 0, 80])),
        None,
        "forward keys hash"
    );
}

#[test]
fn sync_counter_stamps_distinct_increasing_counts_like_its_spec() {
    let mut r = Rig::new(SyncCounter::new());
    let pkt = udp([10, 0, 0, 1], 1000, [192, 0, 2, 1], 80, &[0; 40]);
    let (mut reqs, _) = r.first(DOWN, &pkt, &[0; 4]);
    for _ in 0..2 {
        reqs.extend(r.send(DOWN, &pkt).0);
    }
    assert_eq!(reqs.len(), 3);
    let mut state = vec![0; 4];
    for (i, q) in reqs.iter().enumerate() {
        assert_eq!(q.seq, i as u16 + 1);
        assert_eq!(q.value, (i as u32 + 1).to_be_bytes());
        state = r.check(&state, &pkt, Some(&q.piggy));
        assert_eq!(state, q.value, "value_after is the spec's next state");
    }
    // Released in ack order, each its own count.
    let mut counts = Vec::new();
    for q in &reqs {
        let (_, out) = r.ack(AckType::LeaseRenew, q.seq, q, &[]);
        assert_eq!(out.len(), 1);
        assert!(udp_checksum_ok(&out[0].frame));
        let at = 14 + 20 + 8 + 24;
        counts.push(u32::from_be_bytes(
            out[0].frame[at..at + 4].try_into().unwrap(),
        ));
    }
    assert_eq!(counts, vec![1, 2, 3]);
}

/// The windowed Checker A treats Sync-Counter's lost packets of one effect
/// class as interchangeable: every IPv4 packet must take every state to the
/// same next state (class 1), anything else to itself (class 0).
#[test]
fn sync_counter_packets_of_one_effect_class_step_alike() {
    let app = SyncCounter::new();
    let a = udp([10, 0, 0, 1], 1000, [192, 0, 2, 1], 80, &[0; 40]);
    let b = udp([10, 0, 0, 9], 2000, [192, 0, 2, 7], 53, &[7; 12]);
    let junk = vec![0xFFu8; 30];
    assert_eq!(app.spec_effect_class(&a), Some(1));
    assert_eq!(app.spec_effect_class(&b), Some(1));
    assert_eq!(app.spec_effect_class(&junk), Some(0));
    for n in [0u32, 1, 41, 0xFFFF_FFFE, 0xFFFF_FFFF] {
        let s = n.to_be_bytes();
        assert_eq!(
            app.spec_step(&s, &a).1,
            app.spec_step(&s, &b).1,
            "state {n}"
        );
        assert_eq!(app.spec_step(&s, &junk).1, s.to_vec(), "state {n}");
    }
}

#[test]
fn firewall_admits_inbound_only_after_outbound_syn() {
    let mut r = Rig::new(RpFirewall::new([10, 0, 0, 0], 8));
    let inbound = tcp([192, 0, 2, 1], 80, [10, 0, 0, 1], 1000, false, true, b"hi");
    let (_, out) = r.first(UP, &inbound, &[0; 6]);
    assert!(out.is_empty(), "no state: dropped");
    r.check(&[0; 6], &inbound, None);
    let syn = tcp([10, 0, 0, 1], 1000, [192, 0, 2, 1], 80, true, false, b"");
    let (reqs, out) = r.send(DOWN, &syn);
    assert!(out.is_empty());
    assert_eq!(reqs.len(), 1);
    assert_eq!(reqs[0].value[0], 1, "SYN out");
    let next = r.check(&[0; 6], &syn, Some(&reqs[0].piggy));
    assert_eq!(next, reqs[0].value);
    let (_, out) = r.ack(AckType::LeaseRenew, reqs[0].seq, &reqs[0], &[]);
    assert_eq!(out.len(), 1);
    let (reqs, out) = r.send(UP, &inbound);
    assert!(reqs.is_empty());
    assert_eq!(out.len(), 1, "admitted after the SYN");
    r.check(&next, &inbound, Some(&out[0].frame[14..]));
}

#[test]
fn load_balancer_pins_a_backend_and_rewrites_replies() {
    let mut r = Rig::new(RpLb::new(([203, 0, 113, 10], 80), ([10, 1, 0, 0], 16)));
    let req = tcp(
        [192, 0, 2, 9],
        4000,
        [203, 0, 113, 10],
        80,
        true,
        false,
        b"",
    );
    let backend = [10, 1, 0, 2, 0x1f, 0x90]; // 10.1.0.2:8080
    let (_, out) = r.first(UP, &req, &backend);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].port, DOWN);
    assert_eq!(&out[0].frame[14 + 16..14 + 20], &[10, 1, 0, 2]);
    r.check(&backend, &req, Some(&out[0].frame[14..]));
    let reply = tcp([10, 1, 0, 2], 8080, [192, 0, 2, 9], 4000, true, true, b"");
    let (_, out) = r.send(DOWN, &reply);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].port, UP);
    assert_eq!(&out[0].frame[14 + 12..14 + 16], &[203, 0, 113, 10]);
    r.check(&backend, &reply, Some(&out[0].frame[14..]));
}

#[test]
fn epc_signaling_then_uplink_decap_and_downlink_encap() {
    let mut r = Rig::new(RpEpc::new([192, 0, 2, 100], ([10, 200, 0, 0], 16)));
    let ue = [10, 200, 0, 5];
    let enb = [10, 50, 0, 1];
    let mut body = ue.to_vec();
    body.extend_from_slice(&0x1111u32.to_be_bytes());
    body.extend_from_slice(&0x2222u32.to_be_bytes());
    body.extend_from_slice(&enb);
    let sig = udp([10, 60, 0, 1], 2123, [192, 0, 2, 100], 2123, &body);
    let (reqs, _) = r.first(DOWN, &sig, &[0; 12]);
    assert_eq!(reqs.len(), 1, "signaling is a write");
    let value = reqs[0].value.clone();
    assert_eq!(&value[8..], &enb);
    r.check(&[0; 12], &sig, Some(&reqs[0].piggy));
    r.ack(AckType::LeaseRenew, reqs[0].seq, &reqs[0], &[]);
    // Uplink with the right TEID: decapsulated.
    let inner = udp(ue, 5000, [8, 8, 8, 8], 53, &[1; 20]);
    let mut gtp = vec![0x30, 0xFF];
    gtp.extend_from_slice(&((inner.len() - 14) as u16).to_be_bytes());
    gtp.extend_from_slice(&0x1111u32.to_be_bytes());
    gtp.extend_from_slice(&inner[14..]);
    let up = udp(enb, 2152, [192, 0, 2, 100], 2152, &gtp);
    let (_, out) = r.send(DOWN, &up);
    assert_eq!(out.len(), 1);
    assert_eq!(&out[0].frame[14..], &inner[14..], "the inner packet");
    r.check(&value, &up, Some(&out[0].frame[14..]));
    // Wrong TEID: dropped.
    let mut bad = up.clone();
    bad[14 + 28 + 7] ^= 1;
    assert!(r.send(DOWN, &bad).1.is_empty());
    // Downlink: encapsulated toward the eNB with the downlink TEID.
    let down = udp([8, 8, 8, 8], 53, ue, 5000, &[2; 20]);
    let (_, out) = r.send(UP, &down);
    assert_eq!(out.len(), 1);
    let f = &out[0].frame;
    assert_eq!(&f[14 + 16..14 + 20], &enb);
    assert_eq!(&f[14 + 28 + 4..14 + 28 + 8], &0x2222u32.to_be_bytes());
    assert_eq!(&f[14 + 36..], &down[14..]);
    r.check(&value, &down, Some(&f[14..]));
}

#[test]
fn kv_reads_and_updates_like_its_spec() {
    let mut r = Rig::new(RpKv::new());
    let req = |op: u8, v: u32| {
        let mut b = vec![op, 0, 0, 0, 9];
        b.extend_from_slice(&v.to_be_bytes());
        udp([10, 0, 0, 5], 7000, [10, 9, 9, 9], 5000, &b)
    };
    let (_, out) = r.first(DOWN, &req(0, 0), &[0, 0, 0, 3]);
    assert_eq!(out.len(), 1);
    r.check(&[0, 0, 0, 3], &req(0, 0), Some(&out[0].frame[14..]));
    assert!(udp_checksum_ok(&out[0].frame));
    let (reqs, _) = r.send(DOWN, &req(1, 77));
    assert_eq!(reqs[0].value, 77u32.to_be_bytes());
    let next = r.check(&[0, 0, 0, 3], &req(1, 77), Some(&reqs[0].piggy));
    assert_eq!(next, 77u32.to_be_bytes());
}

#[test]
fn catalog_builds_every_program_and_rejects_bad_names_and_params() {
    use inca_apps::params::Params;
    use inca_redplane::catalog::{build, PROGRAMS};
    let profile = Profile::tofino();
    let params =
        Params::parse(["slots=4096", "shards=2", "store_ip=10.9.0.1", "up_port=3"]).unwrap();
    for (name, _) in PROGRAMS {
        let node = build(name, &params, &profile).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(node.kind(), "switch");
    }
    let e = build("redplane_nope", &params, &profile).err().unwrap();
    assert!(e.contains("redplane_nat"), "{e}");
    let typo = Params::parse(["slotz=4"]).unwrap();
    let e = build("redplane_nat", &typo, &profile).err().unwrap();
    assert!(e.contains("slotz"), "{e}");
    let nat_only = Params::parse(["public=198.51.100.9"]).unwrap();
    assert!(build("redplane_nat", &nat_only, &profile).is_ok());
    assert!(
        build("redplane_kv", &nat_only, &profile).is_err(),
        "app parameters are per app"
    );
    let bad = Params::parse(["renew_interval_us=2000000"]).unwrap();
    assert!(
        build("redplane_kv", &bad, &profile).is_err(),
        "renewal after the lease ends"
    );
}

#[test]
fn config_splits_the_hash_space_like_the_store() {
    use inca_redplane::switch::config::shard_hash_range;
    for n in 1..=7u32 {
        let mut next = 0u32;
        for i in 0..n {
            let (lo, hi) = shard_hash_range(i, n);
            assert_eq!(u32::from(lo), next, "contiguous");
            for h in [lo, hi] {
                assert_eq!((u32::from(h) * n) >> 16, i, "the store's split");
            }
            next = u32::from(hi) + 1;
        }
        assert_eq!(next, 65_536);
    }
}
