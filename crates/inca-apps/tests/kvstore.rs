//! The in-switch key-value store through the switch model with real
//! frames: reads answered by the switch, updates stored and acknowledged,
//! new keys through the control plane, misses, order, deletion, a full
//! store, malformed frames, other profiles and the resource check.

use std::net::Ipv4Addr;

use inca_apps::kvstore::{
    encode_kv, insert_message, KvStore, Value, KV_LEN, KV_PORT, MSG_DELETE, MSG_INSERT, OP_ACK,
    OP_READ, OP_REPLY, OP_UPDATE, STATUS_FULL, STATUS_MISS, STATUS_OK,
};
use inca_switch::device::{ControlMessage, MILLIS};
use inca_switch::harness::{Harness, Transmitted};
use inca_switch::{check, Profile, Switch};
use inca_wire::{build_udp_frame, Endpoints, EthernetFrame, Ipv4Packet, UdpDatagram};

const SEED: u64 = 7;
const CLIENT_PORT: u16 = 5;

fn client() -> Endpoints {
    Endpoints::new(
        [2, 0, 0, 0, 0, 1],
        Ipv4Addr::new(10, 0, 0, 1),
        [2, 0, 0, 0, 0, 0xaa],
        Ipv4Addr::new(10, 0, 0, 100),
    )
}

fn request(op: u8, id: u16, key: u64, value: Value) -> Vec<u8> {
    build_udp_frame(
        &client(),
        40_000,
        KV_PORT,
        &encode_kv(op, 0, id, key, &value),
        true,
    )
    .unwrap()
}

/// A reply as the client sees it, after checking addresses and checksums.
#[derive(Debug, PartialEq, Eq)]
struct Reply {
    op: u8,
    status: u8,
    id: u16,
    key: u64,
    value: Value,
}

fn reply(t: &Transmitted) -> Reply {
    let eth = EthernetFrame::new_checked(&t.frame[..]).unwrap();
    assert_eq!(eth.dst(), client().src_mac, "back to the client's MAC");
    let ip = Ipv4Packet::new_checked(eth.payload()).unwrap();
    assert!(ip.verify_checksum());
    assert_eq!(ip.dst_addr(), client().src_ip);
    assert_eq!(ip.src_addr(), client().dst_ip);
    let udp = UdpDatagram::new_checked(ip.payload()).unwrap();
    assert!(
        udp.verify_checksum(ip.src_addr(), ip.dst_addr()),
        "UDP checksum"
    );
    assert_ne!(udp.checksum(), 0, "the checksum is kept, not zeroed");
    assert_eq!((udp.src_port(), udp.dst_port()), (KV_PORT, 40_000));
    let h = udp.payload();
    assert_eq!(h.len(), KV_LEN);
    let mut value = [0u32; 4];
    for (i, w) in value.iter_mut().enumerate() {
        *w = u32::from_be_bytes(h[12 + 4 * i..16 + 4 * i].try_into().unwrap());
    }
    Reply {
        op: h[0],
        status: h[1],
        id: u16::from_be_bytes([h[2], h[3]]),
        key: u64::from_be_bytes(h[4..12].try_into().unwrap()),
        value,
    }
}

fn store(flows: usize) -> Harness<Switch<KvStore>> {
    println!("seed {SEED}");
    Harness::new(
        Switch::new(Profile::tofino(), KvStore::new(flows)).unwrap(),
        SEED,
    )
}

fn v(x: u32) -> Value {
    [x, x + 1, x + 2, 0xdead_0000 | x]
}

fn one(h: &mut Harness<Switch<KvStore>>) -> Transmitted {
    let out = h.take();
    assert_eq!(out.len(), 1, "{out:?}");
    assert_eq!(
        out[0].port, CLIENT_PORT,
        "replies leave by the arrival port"
    );
    out.into_iter().next().unwrap()
}

#[test]
fn returns_what_was_written() {
    let mut h = store(1024);
    let timing = Profile::tofino().control_plane;
    // A new key: the control plane stores it and acknowledges.
    h.send(0, CLIENT_PORT, request(OP_UPDATE, 1, 42, v(100)));
    h.advance_to(10 * MILLIS);
    let ack = one(&mut h);
    assert_eq!(
        reply(&ack),
        Reply {
            op: OP_ACK,
            status: STATUS_OK,
            id: 1,
            key: 42,
            value: v(100)
        }
    );
    // Four register writes and a table write went first.
    let min = timing.punt_latency
        + timing.cpu_per_event
        + 4 * (timing.register_op + timing.register_per_entry)
        + timing.table_write;
    assert!(ack.at >= min, "ack at {} before the writes ({min})", ack.at);
    assert_eq!(h.device.program().stored(), 1);

    // A read is answered by the switch itself, at pipeline latency.
    let t = h.now();
    h.send(t, CLIENT_PORT, request(OP_READ, 2, 42, [0; 4]));
    h.advance_to(t + 10_000);
    let r = one(&mut h);
    assert_eq!(r.at, t + 450);
    assert_eq!(
        reply(&r),
        Reply {
            op: OP_REPLY,
            status: STATUS_OK,
            id: 2,
            key: 42,
            value: v(100)
        }
    );
    // An update of a stored key stays in the data plane.
    let cpu = h.device.stats().cpu_events;
    let t = h.now();
    h.send(t, CLIENT_PORT, request(OP_UPDATE, 3, 42, v(7)));
    h.send(t + 1, CLIENT_PORT, request(OP_READ, 4, 42, [0; 4]));
    h.advance_to(t + 10_000);
    let out = h.take();
    assert_eq!(out.len(), 2);
    assert_eq!(reply(&out[0]).op, OP_ACK);
    assert_eq!(reply(&out[0]).value, v(7));
    assert_eq!(reply(&out[1]).value, v(7));
    assert_eq!(h.device.stats().cpu_events, cpu, "no control plane");
    // The value is in the four register arrays, one word each.
    let slot = u64::from(h.device.program().slot_of(42).unwrap());
    let regs = h.device.program().value_registers().to_vec();
    for (i, reg) in regs.into_iter().enumerate() {
        assert_eq!(
            h.device.objects().register_peek(reg, slot).unwrap(),
            v(7)[i]
        );
    }
    assert!(h.device.violations().is_empty());
}

/// The UDP checksum of a frame built by [`request`].
fn udp_sum(frame: &[u8]) -> u16 {
    u16::from_be_bytes([frame[14 + 20 + 6], frame[14 + 20 + 7]])
}

#[test]
fn a_reply_whose_checksum_passes_through_zero_midway_is_still_valid() {
    // The reply rewrites op/status first, then the four value words. Pick
    // the READ whose checksum is exactly 0 after the op/status word (one
    // request id in 65,536 does): every later word must still be folded
    // in, and a final 0 sent as 0xFFFF (RFC 768), or the client drops it.
    let mut h = store(16);
    h.send(0, CLIENT_PORT, request(OP_UPDATE, 1, 42, v(100)));
    h.advance_to(10 * MILLIS);
    one(&mut h);
    let word0 = |op: u8| u16::from_be_bytes([op, STATUS_OK]);
    let id = (0..=u16::MAX)
        .find(|&id| {
            let s = udp_sum(&request(OP_READ, id, 42, [0; 4]));
            inca_wire::checksum::update_u16(s, word0(OP_READ), word0(OP_REPLY)) == 0
        })
        .expect("some request id zeroes the running checksum");
    println!("request id {id}");
    let t = h.now();
    h.send(t, CLIENT_PORT, request(OP_READ, id, 42, [0; 4]));
    h.advance_to(t + 10_000);
    let r = reply(&one(&mut h));
    assert_eq!(
        (r.op, r.status, r.id, r.value),
        (OP_REPLY, STATUS_OK, id, v(100))
    );
}

#[test]
fn unknown_keys_get_a_miss_reply() {
    let mut h = store(16);
    h.send(0, CLIENT_PORT, request(OP_READ, 9, 1234, [5; 4]));
    h.advance_to(MILLIS);
    let r = one(&mut h);
    assert_eq!(r.at, 450, "answered by the switch");
    assert_eq!(
        reply(&r),
        Reply {
            op: OP_REPLY,
            status: STATUS_MISS,
            id: 9,
            key: 1234,
            value: [0; 4]
        }
    );
    assert_eq!(h.device.stats().punts, 0, "a read miss never punts");
}

#[test]
fn interleaved_requests_behave_in_arrival_order() {
    let mut h = store(64);
    for k in 0..4u64 {
        h.control(
            0,
            ControlMessage {
                kind: MSG_INSERT,
                body: insert_message(k, &v(0)),
            },
        );
    }
    h.advance_to(5 * MILLIS);
    assert_eq!(h.device.program().stored(), 4);
    // Four clients' requests interleaved, 10 ns apart, on the fast path.
    let mut t = h.now();
    let mut expect = [v(0); 4];
    let mut id = 0u16;
    let mut want = Vec::new();
    for round in 1..=20u32 {
        for k in 0..4u64 {
            id += 1;
            t += 10;
            if (round + k as u32).is_multiple_of(3) {
                let val = v(round * 10 + k as u32);
                h.send(t, CLIENT_PORT, request(OP_UPDATE, id, k, val));
                expect[k as usize] = val;
                want.push((id, OP_ACK, val));
            } else {
                h.send(t, CLIENT_PORT, request(OP_READ, id, k, [0; 4]));
                want.push((id, OP_REPLY, expect[k as usize]));
            }
        }
    }
    h.advance_to(t + MILLIS);
    let got: Vec<_> = h
        .take()
        .iter()
        .map(|t| {
            let r = reply(t);
            assert_eq!(r.status, STATUS_OK);
            (r.id, r.op, r.value)
        })
        .collect();
    assert_eq!(got, want, "every read sees the last update before it");
}

#[test]
fn updates_of_a_key_being_installed_apply_in_order() {
    let mut h = store(64);
    // Three updates of a new key, the later ones while the first is still
    // with the control plane; then a read once everything settled.
    h.send(0, CLIENT_PORT, request(OP_UPDATE, 1, 77, v(1)));
    h.send(1_000, CLIENT_PORT, request(OP_UPDATE, 2, 77, v(2)));
    h.send(2_000, CLIENT_PORT, request(OP_UPDATE, 3, 77, v(3)));
    h.advance_to(10 * MILLIS);
    let acks: Vec<_> = h.take().iter().map(reply).collect();
    assert_eq!(acks.iter().map(|r| r.id).collect::<Vec<_>>(), [1, 2, 3]);
    assert!(acks.iter().all(|r| r.op == OP_ACK && r.status == STATUS_OK));
    h.send(10 * MILLIS, CLIENT_PORT, request(OP_READ, 4, 77, [0; 4]));
    h.advance_to(11 * MILLIS);
    assert_eq!(reply(&one(&mut h)).value, v(3), "the last write wins");
    assert_eq!(h.device.program().stored(), 1);
    assert_eq!(h.device.program().packet_outs, 3);
}

#[test]
fn deleted_keys_miss_and_their_slots_are_reused() {
    let mut h = store(1);
    h.control(
        0,
        ControlMessage {
            kind: MSG_INSERT,
            body: insert_message(5, &v(50)),
        },
    );
    h.advance_to(MILLIS);
    h.send(MILLIS, CLIENT_PORT, request(OP_READ, 1, 5, [0; 4]));
    h.advance_to(2 * MILLIS);
    assert_eq!(reply(&one(&mut h)).value, v(50));
    h.control(
        2 * MILLIS,
        ControlMessage {
            kind: MSG_DELETE,
            body: 5u64.to_be_bytes().to_vec(),
        },
    );
    h.advance_to(3 * MILLIS);
    h.send(3 * MILLIS, CLIENT_PORT, request(OP_READ, 2, 5, [0; 4]));
    h.advance_to(4 * MILLIS);
    assert_eq!(reply(&one(&mut h)).status, STATUS_MISS);
    // The one slot takes a new key, whose read never sees the old value.
    h.send(4 * MILLIS, CLIENT_PORT, request(OP_UPDATE, 3, 6, v(60)));
    h.advance_to(5 * MILLIS);
    assert_eq!(reply(&one(&mut h)).status, STATUS_OK);
    h.send(5 * MILLIS, CLIENT_PORT, request(OP_READ, 4, 6, [0; 4]));
    h.advance_to(6 * MILLIS);
    assert_eq!(reply(&one(&mut h)).value, v(60));
}

#[test]
fn a_full_store_refuses_new_keys() {
    let mut h = store(2);
    for k in 0..3u64 {
        h.send(k * 10, CLIENT_PORT, request(OP_UPDATE, k as u16, k, v(1)));
    }
    h.advance_to(10 * MILLIS);
    let st: Vec<_> = h.take().iter().map(|t| reply(t).status).collect();
    assert_eq!(st, [STATUS_OK, STATUS_OK, STATUS_FULL]);
    assert_eq!(h.device.program().refused, 1);
    assert_eq!(h.device.program().stored(), 2);
}

#[test]
fn malformed_and_foreign_frames_are_counted_and_dropped() {
    let mut h = store(16);
    let good = request(OP_READ, 1, 1, [0; 4]);
    // Cuts inside the headers or the KV header.
    for cut in 0..good.len() {
        h.send(cut as u64, CLIENT_PORT, good[..cut].to_vec());
    }
    // An unknown op, a reply sent to the store, and plain UDP elsewhere.
    let mut bad = request(OP_READ, 1, 1, [0; 4]);
    let n = bad.len();
    bad[n - KV_LEN] = 9;
    h.send(1_000, CLIENT_PORT, bad);
    h.send(1_001, CLIENT_PORT, request(OP_REPLY, 1, 1, [0; 4]));
    h.send(
        1_002,
        CLIENT_PORT,
        build_udp_frame(&client(), 1, 53, b"dns", true).unwrap(),
    );
    h.advance_to(MILLIS);
    assert!(h.take().is_empty());
    let s = h.device.stats();
    // Every cut shorter than Ethernet + IPv4 + UDP + KV fails to parse,
    // except the 8 that keep IPv4 but cut the UDP header (no ports: not KV,
    // dropped by the program); the unknown op fails to parse.
    assert_eq!(s.parse_drops + s.program_drops, good.len() as u64 + 3);
    assert_eq!(
        s.program_drops,
        8 + 2,
        "UDP-less cuts, the reply, the DNS query"
    );
    assert!(h.device.violations().is_empty());
}

#[test]
fn loads_on_a_smartnic_and_a_server() {
    for profile in [Profile::smartnic(), Profile::server()] {
        let name = profile.name.clone();
        let dp = profile.data_path;
        let mut h = Harness::new(Switch::new(profile, KvStore::new(4096)).unwrap(), SEED);
        h.send(0, 1, request(OP_UPDATE, 1, 3, v(30)));
        h.advance_to(100 * MILLIS);
        let ack = h.take();
        assert_eq!(ack.len(), 1, "{name}");
        assert_eq!(reply(&ack[0]).status, STATUS_OK, "{name}");
        if name == "server" {
            assert_eq!(
                ack[0].at,
                dp.ingress_latency + dp.egress_latency,
                "a server installs inline"
            );
        }
        h.send(100 * MILLIS, 1, request(OP_READ, 2, 3, [0; 4]));
        h.advance_to(101 * MILLIS);
        let r = h.take();
        assert_eq!(reply(&r[0]).value, v(30), "{name}");
        assert!(h.device.violations().is_empty(), "{name}");
    }
}

/// The largest `flows` that loads on `profile` (binary search).
fn largest_fit(profile: &Profile) -> usize {
    let (mut lo, mut hi) = (1usize, 1 << 20);
    while lo + 1 < hi {
        let mid = lo + (hi - lo) / 2;
        if check(profile, &mut KvStore::new(mid)).is_ok() {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    lo
}

#[test]
fn resource_check_fits_65536_keys_and_names_what_runs_out() {
    let tofino = Profile::tofino();
    let report = check(&tofino, &mut KvStore::new(65_536)).unwrap();
    println!("{report}");
    let max = largest_fit(&tofino);
    println!("largest kvstore on tofino: {max} keys");
    assert!(max >= 65_536);
    let err = check(&tofino, &mut KvStore::new(max + 1))
        .unwrap_err()
        .to_string();
    println!("{err}");
    assert!(err.contains("kv_value"), "names the object: {err}");
    assert!(
        err.contains("map-RAM"),
        "a value array's map RAM runs out first: {err}"
    );
}

mod fuzz {
    use super::*;
    use proptest::prelude::*;

    fn frame() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            proptest::collection::vec(any::<u8>(), 0..600),
            // A real request, then mutated and cut.
            (
                1u8..5,
                0u64..8,
                any::<u32>(),
                proptest::collection::vec((0usize..80, any::<u8>()), 0..3),
                0usize..100
            )
                .prop_map(|(op, key, x, flips, cut)| {
                    let mut f = request(op, 1, key, v(x));
                    for (i, b) in flips {
                        let i = i % f.len();
                        f[i] = b;
                    }
                    let keep = f.len().saturating_sub(cut % 20);
                    f.truncate(keep);
                    f
                }),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn random_frames_never_panic_and_are_all_counted(
            frames in proptest::collection::vec((0u64..5_000, 0u16..40, frame()), 1..60)
        ) {
            let mut h = store(4);
            let mut t = 0;
            for (gap, port, f) in &frames {
                t += gap;
                h.send(t, *port, f.clone());
            }
            h.advance_to(t + 100 * MILLIS);
            let s = h.device.stats();
            let outs = h.device.program().packet_outs;
            prop_assert_eq!(s.fates(), frames.len() as u64 + outs, "stats {:?}", s);
            prop_assert!(h.device.violations().is_empty());
        }
    }
}
