//! The NetCache-style cache through the switch model with real frames: hot
//! keys reported by the sketch, cached by the control plane, filled by the
//! server's reply and then served by the switch; writes invalidate; hit
//! statistics; eviction; epochs; other profiles; the resource check.

use std::net::Ipv4Addr;

use inca_apps::kvstore::{
    encode_kv, Value, KV_LEN, KV_PORT, OP_ACK, OP_READ, OP_REPLY, OP_UPDATE, STATUS_MISS, STATUS_OK,
};
use inca_apps::netcache::NetCache;
use inca_switch::device::{Nanos, MICROS, MILLIS};
use inca_switch::harness::{Harness, Transmitted};
use inca_switch::{check, Profile, Switch};
use inca_wire::{build_udp_frame, Endpoints, EthernetFrame, Ipv4Packet, UdpDatagram};

const SEED: u64 = 11;
const CLIENTS: u16 = 0;
const SERVER: u16 = 1;

fn client() -> Endpoints {
    Endpoints::new(
        [2, 0, 0, 0, 0, 1],
        Ipv4Addr::new(10, 0, 0, 1),
        [2, 0, 0, 0, 0, 0x5e],
        Ipv4Addr::new(10, 0, 1, 1),
    )
}

fn request(op: u8, id: u16, key: u64, value: Value) -> Vec<u8> {
    let kv = encode_kv(op, 0, id, key, &value);
    build_udp_frame(&client(), 40_000, KV_PORT, &kv, true).unwrap()
}

fn read(id: u16, key: u64) -> Vec<u8> {
    request(OP_READ, id, key, [0; 4])
}

/// The server's answer to a client request.
fn server_reply(op: u8, status: u8, id: u16, key: u64, value: Value) -> Vec<u8> {
    let kv = encode_kv(op, status, id, key, &value);
    build_udp_frame(&client().reversed(), KV_PORT, 40_000, &kv, true).unwrap()
}

/// (op, status, id, key, value) of a KV frame, after checking checksums.
fn kv(t: &Transmitted) -> (u8, u8, u16, u64, Value) {
    let eth = EthernetFrame::new_checked(&t.frame[..]).unwrap();
    let ip = Ipv4Packet::new_checked(eth.payload()).unwrap();
    assert!(ip.verify_checksum());
    let udp = UdpDatagram::new_checked(ip.payload()).unwrap();
    assert!(udp.verify_checksum(ip.src_addr(), ip.dst_addr()));
    let h = udp.payload();
    assert_eq!(h.len(), KV_LEN);
    let mut value = [0u32; 4];
    for (i, w) in value.iter_mut().enumerate() {
        *w = u32::from_be_bytes(h[12 + 4 * i..16 + 4 * i].try_into().unwrap());
    }
    (
        h[0],
        h[1],
        u16::from_be_bytes([h[2], h[3]]),
        u64::from_be_bytes(h[4..12].try_into().unwrap()),
        value,
    )
}

type H = Harness<Switch<NetCache>>;

fn cache(profile: Profile, flows: usize, threshold: u32, epoch: Nanos) -> H {
    println!("seed {SEED}");
    let nc = NetCache::new(flows, SERVER, CLIENTS).with_stats(1024, threshold, epoch);
    Harness::new(Switch::new(profile, nc).unwrap(), SEED)
}

fn v(x: u32) -> Value {
    [x, !x, x.rotate_left(8), 0xcafe_0000 | (x & 0xffff)]
}

fn on(out: &[Transmitted], port: u16) -> Vec<&Transmitted> {
    out.iter().filter(|t| t.port == port).collect()
}

/// Makes `key` hot with `threshold` reads, lets the control plane cache it,
/// and fills it through a read answered by the server with `value`.
fn make_cached(h: &mut H, key: u64, threshold: u32, value: Value) {
    let t0 = h.now();
    for i in 0..threshold {
        h.send(t0 + u64::from(i) * 100, CLIENTS, read(i as u16, key));
    }
    // Digest, CPU, a register write and a table write (tens of ms on a
    // smart NIC).
    let settle = if h.device.profile().name == "tofino" {
        5 * MILLIS
    } else {
        50 * MILLIS
    };
    h.advance_to(t0 + settle);
    let out = h.take();
    assert_eq!(
        on(&out, SERVER).len(),
        threshold as usize,
        "uncached reads go to the server"
    );
    assert!(
        h.device.program().slot_of(key).is_some(),
        "reported and cached"
    );
    // The first read after insertion misses (the slot is not filled yet);
    // the server's reply fills it on its way to the client.
    let t = h.now();
    h.send(t, CLIENTS, read(900, key));
    h.advance_to(t + 10 * MICROS);
    assert_eq!(on(&h.take(), SERVER).len(), 1, "an unfilled slot misses");
    h.send(
        t + 10 * MICROS,
        SERVER,
        server_reply(OP_REPLY, STATUS_OK, 900, key, value),
    );
    h.advance_to(t + 20 * MICROS);
    let out = h.take();
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].port, CLIENTS, "the reply reaches the client");
}

#[test]
fn a_hot_key_is_reported_cached_and_then_served_by_the_switch() {
    let mut h = cache(Profile::tofino(), 64, 8, 1_000 * MILLIS);
    // Many more reads than the threshold before the control plane acts:
    // the Bloom filter reports the key once.
    for i in 0..40u64 {
        h.send(i * 500, CLIENTS, read(i as u16, 99));
    }
    h.advance_to(20 * MICROS);
    assert_eq!(on(&h.take(), SERVER).len(), 40);
    h.advance_to(5 * MILLIS);
    assert_eq!(h.device.stats().digests, 1, "reported once");
    assert_eq!(h.device.program().reports, 1);
    assert!(h.device.program().slot_of(99).is_some());

    let t = h.now();
    h.send(t, CLIENTS, read(1, 99));
    h.advance_to(t + 10 * MICROS);
    assert_eq!(on(&h.take(), SERVER).len(), 1);
    h.send(
        t + 10 * MICROS,
        SERVER,
        server_reply(OP_REPLY, STATUS_OK, 1, 99, v(5)),
    );
    h.advance_to(t + 20 * MICROS);
    assert_eq!(on(&h.take(), CLIENTS).len(), 1);

    // Now the switch answers: no frame to the server, pipeline latency.
    let t = h.now();
    h.send(t, CLIENTS, read(2, 99));
    h.advance_to(t + 10 * MICROS);
    let out = h.take();
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].port, CLIENTS);
    assert_eq!(out[0].at, t + 450, "no server round trip");
    assert_eq!(kv(&out[0]), (OP_REPLY, STATUS_OK, 2, 99, v(5)));
    // The reply is addressed to the client.
    let eth = EthernetFrame::new_checked(&out[0].frame[..]).unwrap();
    assert_eq!(eth.dst(), client().src_mac);
    assert!(h.device.violations().is_empty());
}

#[test]
fn a_write_invalidates_and_the_server_ack_refreshes() {
    let mut h = cache(Profile::tofino(), 64, 4, 1_000 * MILLIS);
    make_cached(&mut h, 7, 4, v(1));
    let t = h.now();
    h.send(t, CLIENTS, read(1, 7));
    h.advance_to(t + MICROS);
    assert_eq!(kv(&h.take()[0]).4, v(1), "served from the cache");

    // Two writes in flight: the cached copy is invalid until both are
    // acknowledged.
    let t = h.now();
    h.send(t, CLIENTS, request(OP_UPDATE, 2, 7, v(2)));
    h.send(t + 100, CLIENTS, request(OP_UPDATE, 3, 7, v(3)));
    h.send(t + 200, CLIENTS, read(4, 7));
    h.advance_to(t + 10 * MICROS);
    let out = h.take();
    assert_eq!(
        on(&out, SERVER).len(),
        3,
        "writes and the read go to the server"
    );
    assert_eq!(kv(on(&out, SERVER)[0]).0, OP_UPDATE);

    let t = h.now();
    h.send(t, SERVER, server_reply(OP_ACK, STATUS_OK, 2, 7, v(2)));
    h.send(t + 100, CLIENTS, read(5, 7));
    h.advance_to(t + 10 * MICROS);
    let out = h.take();
    assert_eq!(on(&out, CLIENTS).len(), 1, "the ACK goes to the client");
    assert_eq!(
        on(&out, SERVER).len(),
        1,
        "one write still pending: the read goes to the server"
    );

    let t = h.now();
    h.send(t, SERVER, server_reply(OP_ACK, STATUS_OK, 3, 7, v(3)));
    h.send(t + 100, CLIENTS, read(6, 7));
    h.advance_to(t + 10 * MICROS);
    let out = h.take();
    assert!(on(&out, SERVER).is_empty(), "valid again: served");
    let served: Vec<_> = on(&out, CLIENTS).iter().map(|t| kv(t)).collect();
    assert_eq!(served.len(), 2);
    assert_eq!(
        served[1],
        (OP_REPLY, STATUS_OK, 6, 7, v(3)),
        "the new value"
    );
    assert!(h.device.violations().is_empty());
}

#[test]
fn server_misses_and_replies_for_uncached_keys_pass_through() {
    let mut h = cache(Profile::tofino(), 64, 4, 1_000 * MILLIS);
    make_cached(&mut h, 8, 4, v(8));
    // A write of an uncached key goes to the server; its ACK and a MISS
    // reply come back untouched.
    let t = h.now();
    h.send(t, CLIENTS, request(OP_UPDATE, 1, 1000, v(1)));
    h.send(
        t + 100,
        SERVER,
        server_reply(OP_ACK, STATUS_OK, 1, 1000, v(1)),
    );
    h.send(
        t + 200,
        SERVER,
        server_reply(OP_REPLY, STATUS_MISS, 2, 1001, [0; 4]),
    );
    h.advance_to(t + 10 * MICROS);
    let out = h.take();
    assert_eq!(on(&out, SERVER).len(), 1);
    assert_eq!(on(&out, CLIENTS).len(), 2);
    // The cached key is unaffected.
    h.send(h.now(), CLIENTS, read(3, 8));
    h.advance_to(h.now() + MICROS);
    assert_eq!(kv(&h.take()[0]).4, v(8));
}

#[test]
fn hit_statistics_count_served_reads() {
    let epoch = 10 * MILLIS;
    let mut h = cache(Profile::tofino(), 64, 4, epoch);
    make_cached(&mut h, 3, 4, v(3));
    let t = h.now();
    for i in 0..25u64 {
        h.send(t + i * 100, CLIENTS, read(i as u16, 3));
    }
    h.advance_to(t + 10 * MICROS);
    assert_eq!(on(&h.take(), CLIENTS).len(), 25);
    let p = h.device.program();
    let slot = u64::from(p.slot_of(3).unwrap());
    let hits = p.hits_register().unwrap();
    assert_eq!(h.device.objects().register_peek(hits, slot).unwrap(), 25);
    // The control plane reads them once per epoch.
    h.advance_to(epoch + MILLIS);
    assert_eq!(h.device.program().recent_hits(3), Some(25));
    // No reads in the next epoch.
    h.advance_to(2 * epoch + MILLIS);
    assert_eq!(h.device.program().recent_hits(3), Some(0));
}

#[test]
fn a_full_cache_evicts_the_least_hit_key() {
    let epoch = 10 * MILLIS;
    let mut h = cache(Profile::tofino(), 2, 4, epoch);
    make_cached(&mut h, 1, 4, v(1));
    make_cached(&mut h, 2, 4, v(2));
    let t = h.now();
    for i in 0..10u64 {
        h.send(t + i * 100, CLIENTS, read(0, 1));
    }
    h.send(t + 2_000, CLIENTS, read(0, 2));
    h.advance_to(epoch + MILLIS); // hits measured: key 1: 10, key 2: 1
    h.take();
    assert_eq!(h.device.program().recent_hits(2), Some(1));
    make_cached(&mut h, 3, 4, v(3));
    let p = h.device.program();
    assert_eq!(p.evictions, 1);
    assert_eq!(p.slot_of(2), None, "the least hit key went");
    assert!(p.slot_of(1).is_some() && p.slot_of(3).is_some());
    // Key 1 is still served; key 2 goes to the server again.
    let t = h.now();
    h.send(t, CLIENTS, read(1, 1));
    h.send(t + 100, CLIENTS, read(2, 2));
    h.advance_to(t + 10 * MICROS);
    let out = h.take();
    assert_eq!(kv(on(&out, CLIENTS)[0]).4, v(1));
    assert_eq!(kv(on(&out, SERVER)[0]).3, 2);
}

#[test]
fn popularity_resets_every_epoch() {
    let epoch = MILLIS;
    let mut h = cache(Profile::tofino(), 64, 8, epoch);
    // Five reads at the end of one epoch and five at the start of the next:
    // never eight in one epoch.
    for i in 0..5u64 {
        h.send(epoch - 10_000 + i * 100, CLIENTS, read(0, 5));
    }
    for i in 0..5u64 {
        h.send(epoch + 10_000 + i * 100, CLIENTS, read(0, 5));
    }
    h.advance_to(10 * MILLIS);
    assert_eq!(h.device.stats().digests, 0);
    assert_eq!(h.device.program().cached(), 0);
    // Eight in one epoch report it.
    for i in 0..8u64 {
        h.send(10 * MILLIS + i * 100, CLIENTS, read(0, 5));
    }
    h.advance_to(15 * MILLIS);
    assert_eq!(h.device.stats().digests, 1);
}

#[test]
fn other_traffic_is_forwarded_and_malformed_frames_dropped() {
    let mut h = cache(Profile::tofino(), 64, 8, MILLIS);
    let dns = build_udp_frame(&client(), 1, 53, b"q", true).unwrap();
    h.send(0, CLIENTS, dns.clone());
    h.send(
        1,
        SERVER,
        build_udp_frame(&client().reversed(), 53, 1, b"a", true).unwrap(),
    );
    let mut cut = read(1, 1);
    cut.truncate(cut.len() - 1);
    h.send(2, CLIENTS, cut);
    h.send(3, CLIENTS, server_reply(OP_REPLY, 0, 1, 1, [0; 4])); // wrong way
    h.advance_to(MILLIS);
    let out = h.take();
    assert_eq!(on(&out, SERVER).len(), 1);
    assert_eq!(on(&out, CLIENTS).len(), 1);
    let s = h.device.stats();
    assert_eq!(s.parse_drops, 1);
    assert_eq!(s.program_drops, 1);
}

#[test]
fn loads_on_a_smartnic_and_a_server() {
    for profile in [Profile::smartnic(), Profile::server()] {
        let name = profile.name.clone();
        let mut h = cache(profile, 256, 4, 10_000 * MILLIS);
        h.advance_to(MILLIS);
        make_cached(&mut h, 42, 4, v(42));
        let t = h.now() + 100 * MILLIS;
        h.send(t, CLIENTS, read(1, 42));
        h.advance_to(t + MILLIS);
        let out = h.take();
        assert_eq!(out.len(), 1, "{name}");
        assert_eq!(out[0].port, CLIENTS, "{name}: served by the device");
        assert_eq!(kv(&out[0]).4, v(42), "{name}");
        assert!(h.device.violations().is_empty(), "{name}");
    }
}

/// The largest `flows` that loads on `profile` (binary search), with the
/// default 65,536-wide sketch.
fn largest_fit(profile: &Profile) -> usize {
    let (mut lo, mut hi) = (1usize, 1 << 20);
    while lo + 1 < hi {
        let mid = lo + (hi - lo) / 2;
        if check(profile, &mut NetCache::new(mid, SERVER, CLIENTS)).is_ok() {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    lo
}

#[test]
fn resource_check_fits_the_paper_sizes() {
    let tofino = Profile::tofino();
    // NetCache's prototype size: 64K keys, 64K-wide sketch rows.
    let report = check(&tofino, &mut NetCache::new(65_536, SERVER, CLIENTS)).unwrap();
    println!("{report}");
    let max = largest_fit(&tofino);
    println!("largest netcache on tofino: {max} slots");
    assert!(max >= 65_536);
    let err = check(&tofino, &mut NetCache::new(max + 1, SERVER, CLIENTS))
        .unwrap_err()
        .to_string();
    println!("{err}");
    assert!(err.contains("nc_value"), "names the object: {err}");
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
            (
                1u8..5,
                0u64..4,
                any::<u32>(),
                any::<bool>(),
                proptest::collection::vec((0usize..80, any::<u8>()), 0..3),
                0usize..40
            )
                .prop_map(|(op, key, x, from_server, flips, cut)| {
                    let mut f = if from_server {
                        server_reply(op, 0, 1, key, v(x))
                    } else {
                        request(op, 1, key, v(x))
                    };
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
            frames in proptest::collection::vec((0u64..5_000, 0u16..40, frame()), 1..80)
        ) {
            let mut h = cache(Profile::tofino(), 2, 3, 100 * MICROS);
            let mut t = 0;
            for (gap, port, f) in &frames {
                t += gap;
                h.send(t, *port, f.clone());
            }
            h.advance_to(t + 100 * MILLIS);
            let s = h.device.stats();
            prop_assert_eq!(s.fates(), frames.len() as u64, "stats {:?}", s);
            prop_assert_eq!(s.punts, 0);
            prop_assert!(h.device.violations().is_empty());
        }
    }
}

/// A frame of ExoPlane's NetCache header (UDP 50000 at both ends) from the
/// client, or (`reply`) from the server.
fn exo(op: inca_wire::exoplane::netcache::Op, key: u8, value: Vec<u8>, reply: bool) -> Vec<u8> {
    use inca_wire::exoplane::netcache::{NetCacheRepr, PORT};
    let r = NetCacheRepr {
        op,
        seq: 77,
        key: [key; 16],
        value,
    };
    let ep = if reply { client().reversed() } else { client() };
    build_udp_frame(&ep, PORT, PORT, &r.to_bytes().unwrap(), true).unwrap()
}

#[test]
fn the_exoplane_header_caches_128_bit_keys_and_wide_values() {
    use inca_apps::params::Params;
    use inca_wire::exoplane::netcache::{NetCacheRepr, Op};
    let p = Params::parse([
        "format=exo",
        "flows=16",
        "sketch_width=1024",
        "threshold=4",
        "value_bytes=32",
    ])
    .unwrap();
    let nc = NetCache::from_params(&p).unwrap();
    assert_eq!(nc.value_words(), 8);
    println!("seed {SEED}");
    let mut h = Harness::new(Switch::new(Profile::tofino(), nc).unwrap(), SEED);
    let value: Vec<u8> = (0..32).collect();
    for i in 0..6u64 {
        h.send(i * 500, CLIENTS, exo(Op::Read, 5, vec![0; 32], false));
    }
    h.advance_to(5 * MILLIS);
    assert_eq!(on(&h.take(), SERVER).len(), 6, "uncached: to the server");
    assert_eq!(h.device.program().slot_of_key(&[5; 16]), Some(0));
    // The server's reply fills the slot; a reply of another value width
    // passes but does not fill; then a READ is answered here, and a READ
    // with no room for the value goes to the server.
    let t = h.now();
    h.send(t, SERVER, exo(Op::Reply, 5, vec![9; 16], true));
    h.send(t + 100, SERVER, exo(Op::Reply, 5, value.clone(), true));
    h.send(
        t + 10 * MICROS,
        CLIENTS,
        exo(Op::Read, 5, vec![0; 32], false),
    );
    h.send(
        t + 11 * MICROS,
        CLIENTS,
        exo(Op::Read, 5, vec![0; 16], false),
    );
    h.advance_to(t + 20 * MICROS);
    let out = h.take();
    let to_clients = on(&out, CLIENTS);
    assert_eq!(to_clients.len(), 3, "two replies and the switch's answer");
    assert_eq!(on(&out, SERVER).len(), 1, "the READ with no room");
    let eth = EthernetFrame::new_checked(&to_clients[2].frame[..]).unwrap();
    let ip = Ipv4Packet::new_checked(eth.payload()).unwrap();
    let udp = UdpDatagram::new_checked(ip.payload()).unwrap();
    assert!(udp.verify_checksum(ip.src_addr(), ip.dst_addr()));
    assert_eq!(ip.dst_addr(), Ipv4Addr::new(10, 0, 0, 1), "to the client");
    let r = NetCacheRepr::parse(udp.payload()).unwrap();
    assert_eq!(
        (r.op, r.seq, r.key, r.value),
        (Op::Reply, 77, [5; 16], value)
    );

    // With an external index, a hot key waits for its owner.
    let p = Params::parse([
        "format=exo",
        "index=external",
        "flows=16",
        "sketch_width=1024",
        "threshold=4",
    ])
    .unwrap();
    let nc = NetCache::from_params(&p).unwrap();
    let mut h = Harness::new(Switch::new(Profile::tofino(), nc).unwrap(), SEED);
    for i in 0..6u64 {
        h.send(i * 500, CLIENTS, exo(Op::Read, 6, vec![0; 128], false));
    }
    h.advance_to(5 * MILLIS);
    let hot: Vec<_> = h.device.program().hot_keys().iter().copied().collect();
    assert_eq!(hot.len(), 1);
    assert_eq!(hot[0].key(), &[6u8; 16]);
    assert_eq!(h.device.program().cached(), 0, "not cached by itself");

    // Bad parameters name themselves.
    for (bad, name) in [
        (&["format=exo", "value_bytes=20"][..], "value_bytes"),
        (&["value_bytes=32"][..], "value_bytes"),
        (&["format=xml"][..], "format"),
        (&["index=hub"][..], "index"),
    ] {
        let e = NetCache::from_params(&Params::parse(bad.iter().copied()).unwrap())
            .unwrap_err()
            .to_string();
        assert!(e.contains(name), "{bad:?}: {e}");
    }
}
