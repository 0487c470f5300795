//! The RedPlane switch blocks on one switch (the `inca_switch::harness`
//! driver), with the test playing the state store: lease acquisition,
//! writes with piggybacked outputs, release on ack, BUF_READ, the
//! retransmission loop, give-up, rejects, lease expiry, renewal rate
//! limiting, grants with queued packets, and resource placement.

use std::net::Ipv4Addr;

use inca_redplane::apps::kv::RpKv;
use inca_redplane::apps::nat::RpNat;
use inca_redplane::apps::sync_counter::SyncCounter;
use inca_redplane::switch::{RedPlane, RedPlaneApp, RedPlaneConfig, Route};
use inca_switch::device::{MILLIS, SECONDS};
use inca_switch::harness::{Harness, Transmitted};
use inca_switch::{Nanos, Profile, Switch};
use inca_wire::builder::{build_udp_frame, Endpoints};
use inca_wire::redplane::{build_ack_frame, parse_udp_frame, AckRepr, AckType, ReqType, Request};

const STORE_PORT: u16 = 2;
const UP: u16 = 1;
const DOWN: u16 = 0;
const T0: Nanos = 10 * MILLIS;

fn config() -> RedPlaneConfig {
    RedPlaneConfig {
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
    }
}

fn switch<A: RedPlaneApp>(app: A) -> Harness<Switch<RedPlane<A>>> {
    let sw = Switch::new(Profile::tofino(), RedPlane::new(app, config())).expect("loads");
    Harness::new(sw, 7)
}

fn ep(src: [u8; 4], dst: [u8; 4]) -> Endpoints {
    Endpoints::new(
        [2, 0, 0, 0, 0, 9],
        Ipv4Addr::from(src),
        [2, 0, 0, 0, 0, 8],
        Ipv4Addr::from(dst),
    )
}

/// A UDP packet with a 32-byte payload (a 24-byte probe, then room for the
/// Sync-Counter stamp).
fn udp(src: [u8; 4], sport: u16, dst: [u8; 4], dport: u16) -> Vec<u8> {
    build_udp_frame(&ep(src, dst), sport, dport, &[0u8; 32], true).unwrap()
}

fn kv_req(op: u8, key: u32, value: u32) -> Vec<u8> {
    let mut body = vec![op];
    body.extend_from_slice(&key.to_be_bytes());
    body.extend_from_slice(&value.to_be_bytes());
    build_udp_frame(&ep([10, 0, 0, 5], [10, 9, 9, 9]), 7000, 5000, &body, true).unwrap()
}

/// A request the switch sent: (type, seq, key, value, piggyback, ident).
#[derive(Debug, Clone)]
struct Req {
    kind: u8,
    seq: u16,
    key: Vec<u8>,
    value: Vec<u8>,
    piggy: Vec<u8>,
    ident: u16,
    len: usize,
}

fn requests<A: RedPlaneApp>(
    h: &mut Harness<Switch<RedPlane<A>>>,
    k: usize,
    v: usize,
) -> (Vec<Req>, Vec<Transmitted>) {
    // Let the pipeline and queues drain.
    h.advance_to(h.now() + 10_000);
    let mut reqs = Vec::new();
    let mut other = Vec::new();
    for t in h.take() {
        if t.port != STORE_PORT {
            other.push(t);
            continue;
        }
        let info = parse_udp_frame(&t.frame).expect("a request parses");
        assert_eq!(info.dst_port, 8001);
        assert_eq!(info.src_port, 4000);
        let r = Request::new_checked(info.payload, k, v).expect("request header");
        reqs.push(Req {
            kind: r.type_byte(),
            seq: r.seq(),
            key: r.key().to_vec(),
            value: r.value().to_vec(),
            piggy: r.piggyback().to_vec(),
            ident: info.ident,
            len: t.frame.len(),
        });
    }
    (reqs, other)
}

fn ack(kind: AckType, seq: u16, key: &[u8], value: &[u8], piggy: &[u8], ident: u16) -> Vec<u8> {
    let mut e = ep([10, 254, 0, 1], [10, 255, 0, 1]);
    e.ident = ident;
    build_ack_frame(
        &e,
        8001,
        &AckRepr {
            ack_type: kind,
            seq,
            key,
            value: if kind.carries_value() { value } else { &[] },
            piggyback: piggy,
        },
    )
    .unwrap()
}

/// Lease through a NEW_ACK for the first packet of a flow; returns the
/// request the re-injected packet produced (if any) and other frames.
fn grant<A: RedPlaneApp>(
    h: &mut Harness<Switch<RedPlane<A>>>,
    at: Nanos,
    frame: Vec<u8>,
    value: &[u8],
    k: usize,
) -> (Vec<Req>, Vec<Transmitted>) {
    let v = value.len();
    h.send(at, DOWN, frame);
    let (reqs, _) = requests(h, k, v);
    assert_eq!(reqs.len(), 1, "one LEASE_NEW");
    let r = &reqs[0];
    assert_eq!(r.kind, ReqType::LeaseNew as u8);
    assert_eq!(r.seq, 0);
    h.send(
        at + 20_000,
        STORE_PORT,
        ack(AckType::LeaseNew, 0, &r.key, value, &r.piggy, r.ident),
    );
    // The grant's control-plane work takes a few hundred µs; stop before
    // the first write's RTO.
    h.advance_to(at + 900_000);
    requests(h, k, v)
}

fn l3(frame: &[u8]) -> &[u8] {
    &frame[14..]
}

#[test]
fn lease_new_carries_the_whole_packet_and_the_app_does_not_run() {
    let mut h = switch(SyncCounter::new());
    let pkt = udp([10, 0, 0, 1], 1000, [192, 0, 2, 1], 80);
    h.send(T0, DOWN, pkt.clone());
    let (reqs, other) = requests(&mut h, 13, 4);
    assert!(other.is_empty(), "nothing released without a lease");
    assert_eq!(reqs.len(), 1);
    assert_eq!(reqs[0].kind, ReqType::LeaseNew as u8);
    assert_eq!(reqs[0].piggy, l3(&pkt), "unchanged packet from IPv4 on");
    assert_eq!(reqs[0].value, vec![0; 4]);
    // A second packet without a lease sends its own request.
    h.send(T0 + 1000, DOWN, pkt);
    assert_eq!(requests(&mut h, 13, 4).0.len(), 1);
    assert_eq!(h.device.program().stats().lease_new, 2);
}

#[test]
fn write_goes_out_as_request_with_piggyback_and_is_released_by_its_ack() {
    let mut h = switch(SyncCounter::new());
    let pkt = udp([10, 0, 0, 1], 1000, [192, 0, 2, 1], 80);
    let (reqs, other) = grant(&mut h, T0, pkt.clone(), &[0, 0, 0, 7], 13);
    assert!(other.is_empty(), "a write's output is not forwarded");
    assert_eq!(reqs.len(), 1);
    let w = &reqs[0];
    assert_eq!(w.kind, ReqType::LeaseRenew as u8);
    assert_eq!(w.seq, 1, "first write after base 0");
    assert_eq!(
        w.value,
        8u32.to_be_bytes(),
        "value_after: installed 7, plus one"
    );
    // The count is stamped after the 24-byte probe header.
    let stamp = 20 + 8 + 24;
    assert_eq!(&w.piggy[stamp..stamp + 4], &8u32.to_be_bytes());
    // Release on RENEW_ACK: the piggybacked output leaves by the routes.
    let t = h.now();
    h.send(
        t + 10_000,
        STORE_PORT,
        ack(AckType::LeaseRenew, 1, &w.key, &[], &w.piggy, w.ident),
    );
    h.advance_to(t + 20_000);
    let out = h.take();
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].port, UP);
    assert_eq!(l3(&out[0].frame), &w.piggy[..]);
    // The loop stops: nothing is resent later.
    h.advance_to(t + 5 * MILLIS);
    assert!(h.take().is_empty(), "acked write is not retransmitted");
    let s = h.device.program().stats();
    assert_eq!((s.released, s.retransmits, s.grants), (1, 0, 1));
    assert_eq!(h.device.program().loop_copies(), 0);
    assert!(
        h.device.violations().is_empty(),
        "{:?}",
        h.device.violations()
    );
}

#[test]
fn read_while_a_write_is_outstanding_goes_out_as_buf_read() {
    let mut h = switch(RpKv::new());
    // Lease via a read; the re-injected read is forwarded at once.
    let (reqs, out) = grant(&mut h, T0, kv_req(0, 42, 0), &[0, 0, 0, 5], 4);
    assert!(reqs.is_empty());
    assert_eq!(out.len(), 1, "read released at once");
    let body = &out[0].frame[14 + 20 + 8..];
    assert_eq!(
        &body[5..9],
        &5u32.to_be_bytes(),
        "reads the installed value"
    );
    let t = h.now();
    h.send(t, DOWN, kv_req(1, 42, 99));
    h.send(t + 1000, DOWN, kv_req(0, 42, 0));
    let (reqs, out) = requests(&mut h, 4, 4);
    assert!(out.is_empty(), "nothing leaves before the write is durable");
    assert_eq!(reqs.len(), 2);
    assert_eq!((reqs[0].kind, reqs[0].seq), (ReqType::LeaseRenew as u8, 1));
    assert_eq!(reqs[0].value, 99u32.to_be_bytes());
    assert_eq!((reqs[1].kind, reqs[1].seq), (ReqType::BufRead as u8, 1));
    // The buffered read saw the new value.
    assert_eq!(&reqs[1].piggy[28 + 5..28 + 9], &99u32.to_be_bytes());
    // BUF_READ_ACK releases it.
    h.send(
        t + 30_000,
        STORE_PORT,
        ack(
            AckType::BufRead,
            1,
            &reqs[1].key,
            &[],
            &reqs[1].piggy,
            reqs[1].ident,
        ),
    );
    h.advance_to(t + 40_000);
    let out = h.take();
    assert_eq!(out.len(), 1);
    assert_eq!(l3(&out[0].frame), &reqs[1].piggy[..]);
}

#[test]
fn unacked_write_is_resent_after_rto_truncated_and_given_up_after_max_retx() {
    let mut h = switch(SyncCounter::new());
    let pkt = udp([10, 0, 0, 1], 1000, [192, 0, 2, 1], 80);
    let (reqs, _) = grant(&mut h, T0, pkt.clone(), &[0; 4], 13);
    let w = reqs[0].clone();
    assert!(!w.piggy.is_empty());
    let start = h.now();
    // No ack: by 1.5 RTO one retransmission, header only.
    h.advance_to(start + 3 * MILLIS / 2);
    let (resent, _) = requests(&mut h, 13, 4);
    assert!(!resent.is_empty(), "resent within RTO + a loop pass");
    let r = &resent[0];
    assert_eq!(
        (r.kind, r.seq, &r.value, r.ident),
        (w.kind, w.seq, &w.value, w.ident)
    );
    assert!(r.piggy.is_empty(), "truncated to the header");
    assert_eq!(r.len, 14 + 20 + 8 + 3 + 13 + 4);
    // Keep going: exactly MAX_RETX resends in all, then the lease ends.
    h.advance_to(start + 40 * MILLIS);
    let (more, _) = requests(&mut h, 13, 4);
    assert_eq!(resent.len() + more.len(), 16, "MAX_RETX retransmissions");
    let s = h.device.program().stats();
    assert_eq!((s.retransmits, s.gave_up), (16, 1));
    assert_eq!(h.device.program().loop_copies(), 0);
    // The control plane ended the lease: the next packet asks again.
    h.send(h.now() + 1000, DOWN, pkt);
    let (reqs, _) = requests(&mut h, 13, 4);
    assert_eq!(reqs[0].kind, ReqType::LeaseNew as u8);
}

#[test]
fn reject_stops_the_loop_and_ends_the_lease() {
    let mut h = switch(SyncCounter::new());
    let pkt = udp([10, 0, 0, 1], 1000, [192, 0, 2, 1], 80);
    let (reqs, _) = grant(&mut h, T0, pkt.clone(), &[0; 4], 13);
    let w = &reqs[0];
    let t = h.now();
    h.send(
        t + 10_000,
        STORE_PORT,
        ack(AckType::LeaseReject, w.seq, &w.key, &[], &[], w.ident),
    );
    h.advance_to(t + 5 * MILLIS);
    let (resent, out) = requests(&mut h, 13, 4);
    assert!(
        resent.is_empty() && out.is_empty(),
        "no retransmission, nothing released"
    );
    assert_eq!(h.device.program().stats().rejects, 1);
    h.send(h.now(), DOWN, pkt);
    let (reqs, _) = requests(&mut h, 13, 4);
    assert_eq!(reqs[0].kind, ReqType::LeaseNew as u8);
}

fn nat() -> RpNat {
    RpNat::new([198, 51, 100, 1], 1024, 64_512, 1)
}

#[test]
fn nat_read_path_translates_and_the_lease_expires() {
    let mut h = switch(nat());
    let pkt = udp([10, 0, 0, 1], 1000, [192, 0, 2, 1], 80);
    let value = [198, 51, 100, 1, 0x13, 0x88]; // 198.51.100.1:5000
    let (reqs, out) = grant(&mut h, T0, pkt.clone(), &value, 6);
    assert!(reqs.is_empty());
    assert_eq!(out.len(), 1);
    let info = parse_udp_frame(&out[0].frame).unwrap();
    assert_eq!(
        (info.src_ip.octets(), info.src_port),
        ([198, 51, 100, 1], 5000)
    );
    assert_eq!(out[0].port, UP);
    // Within the lease: forwarded, no store traffic.
    h.send(h.now() + MILLIS, DOWN, pkt.clone());
    let (reqs, out) = requests(&mut h, 6, 6);
    assert!(reqs.is_empty());
    assert_eq!(out.len(), 1);
    // No renewal acks: after LEASE_PERIOD the lease is gone.
    h.send(T0 + 2 * SECONDS, DOWN, pkt);
    let (reqs, out) = requests(&mut h, 6, 6);
    assert!(out.is_empty());
    assert_eq!(
        reqs.iter()
            .filter(|r| r.kind == ReqType::LeaseNew as u8)
            .count(),
        1
    );
}

#[test]
fn renewals_are_rate_limited() {
    let mut h = switch(nat());
    let pkt = udp([10, 0, 0, 1], 1000, [192, 0, 2, 1], 80);
    let value = [198, 51, 100, 1, 0x13, 0x88];
    grant(&mut h, T0, pkt.clone(), &value, 6);
    let renewals = |h: &mut Harness<Switch<RedPlane<RpNat>>>| {
        requests(h, 6, 6)
            .0
            .into_iter()
            .filter(|r| r.kind == ReqType::LeaseRenew as u8 && r.seq == 0)
            .count()
    };
    // Reads every 1 ms for 0.4 s: the lease is fresh, no renewal.
    let mut t = h.now();
    for _ in 0..400 {
        t += MILLIS;
        h.send(t, DOWN, pkt.clone());
    }
    assert_eq!(renewals(&mut h), 0);
    // Past RENEW_INTERVAL: one renewal, then at most one per RENEW_RETRY.
    t = T0 + 600 * MILLIS;
    for _ in 0..50 {
        t += MILLIS;
        h.send(t, DOWN, pkt.clone());
    }
    let n = renewals(&mut h);
    assert!(
        (5..=6).contains(&n),
        "50 ms of reads, 10 ms retry: {n} renewals"
    );
}

#[test]
fn grant_with_queued_packets_adopts_the_newest_fence() {
    let mut h = switch(SyncCounter::new());
    let pkt = udp([10, 0, 0, 1], 1000, [192, 0, 2, 1], 80);
    h.send(T0, DOWN, pkt.clone());
    h.send(T0 + 1000, DOWN, pkt.clone());
    let (reqs, _) = requests(&mut h, 13, 4);
    assert_eq!(reqs.len(), 2);
    // The store answers the first with NEW, the second with MIGRATE and a
    // new fence (same owner).
    let a = ack(
        AckType::LeaseNew,
        0,
        &reqs[0].key,
        &[0; 4],
        &reqs[0].piggy,
        reqs[0].ident,
    );
    let b = ack(
        AckType::LeaseMigrate,
        4096,
        &reqs[1].key,
        &[0; 4],
        &reqs[1].piggy,
        reqs[1].ident,
    );
    h.send(T0 + 20_000, STORE_PORT, a);
    h.send(T0 + 21_000, STORE_PORT, b);
    h.advance_to(T0 + 900_000);
    let (writes, _) = requests(&mut h, 13, 4);
    let seqs: Vec<u16> = writes
        .iter()
        .filter(|r| r.kind == ReqType::LeaseRenew as u8)
        .map(|r| r.seq)
        .collect();
    assert_eq!(
        writes.len(),
        2,
        "both queued packets re-injected: {writes:?}"
    );
    assert_eq!(
        *seqs.last().unwrap(),
        4097,
        "continues from the newest base: {seqs:?}"
    );
    // The newer grant is installed over the first (value and registers).
    let s = h.device.program().stats();
    assert_eq!((s.grants, s.grants_joined), (2, 0));
}

/// The seqs of the LEASE_RENEW writes among `reqs`.
fn write_seqs(reqs: &[Req]) -> Vec<u16> {
    reqs.iter()
        .filter(|r| r.kind == ReqType::LeaseRenew as u8 && r.seq != 0)
        .map(|r| r.seq)
        .collect()
}

/// Model checker finding 1: an older NEW_ACK reordered behind a newer
/// MIGRATE_ACK, arriving well after the newer grant was installed, must not
/// be installed: that would rewind `seq_issued` to 0 and reuse seqs.
#[test]
fn an_older_grant_reordered_after_a_newer_one_only_reinjects() {
    let mut h = switch(SyncCounter::new());
    let pkt = udp([10, 0, 0, 1], 1000, [192, 0, 2, 1], 80);
    h.send(T0, DOWN, pkt.clone());
    h.send(T0 + 1000, DOWN, pkt.clone());
    let (reqs, _) = requests(&mut h, 13, 4);
    assert_eq!(reqs.len(), 2);
    let old = ack(
        AckType::LeaseNew,
        0,
        &reqs[0].key,
        &[0; 4],
        &reqs[0].piggy,
        reqs[0].ident,
    );
    let new = ack(
        AckType::LeaseMigrate,
        4096,
        &reqs[1].key,
        &[0; 4],
        &reqs[1].piggy,
        reqs[1].ident,
    );
    h.send(T0 + 20_000, STORE_PORT, new);
    h.advance_to(T0 + 900_000);
    let (first, _) = requests(&mut h, 13, 4);
    assert_eq!(write_seqs(&first), vec![4097]);
    // 5 ms later (well past any settling time) the old NEW_ACK arrives.
    h.send(T0 + 5 * MILLIS, STORE_PORT, old);
    h.advance_to(T0 + 5 * MILLIS + 900_000);
    let (second, _) = requests(&mut h, 13, 4);
    // (4097 may be retransmitted: the test plays no store for it.)
    let seqs: std::collections::BTreeSet<u16> = write_seqs(&second).into_iter().collect();
    assert_eq!(
        seqs,
        [4097, 4098].into(),
        "the old grant's packet continues the newer base"
    );
    let s = h.device.program().stats();
    assert_eq!((s.grants, s.grants_joined), (1, 1));
}

/// Model checker finding 2: a restarted switch ignores a grant ack for a
/// request it sent before the crash (here a duplicate of the NEW_ACK it
/// already used), otherwise it would issue seq 1 a second time.
#[test]
fn a_restarted_switch_ignores_grant_acks_from_before_the_crash() {
    let mut h = switch(SyncCounter::new());
    let pkt = udp([10, 0, 0, 1], 1000, [192, 0, 2, 1], 80);
    h.send(T0, DOWN, pkt.clone());
    let (reqs, _) = requests(&mut h, 13, 4);
    assert_eq!(reqs.len(), 1);
    let grant = ack(
        AckType::LeaseNew,
        0,
        &reqs[0].key,
        &[0; 4],
        &reqs[0].piggy,
        reqs[0].ident,
    );
    h.send(T0 + 20_000, STORE_PORT, grant.clone());
    h.advance_to(T0 + 900_000);
    let (first, _) = requests(&mut h, 13, 4);
    assert_eq!(write_seqs(&first), vec![1]);
    // Drop what left before the crash (retransmissions of write 1).
    h.advance_to(T0 + 2 * MILLIS);
    h.take();
    h.restart(T0 + 2 * MILLIS);
    // The duplicate arrives after the restart, still young enough to pass
    // MAX_ACK_AGE.
    h.send(T0 + 3 * MILLIS, STORE_PORT, grant);
    h.advance_to(T0 + 4 * MILLIS);
    let (after, _) = requests(&mut h, 13, 4);
    assert!(write_seqs(&after).is_empty(), "seq reused: {after:?}");
    let s = h.device.program().stats();
    assert_eq!((s.grants, s.pre_boot_acks), (0, 1));
    // A request sent after the restart is granted as usual.
    h.send(T0 + 5 * MILLIS, DOWN, pkt);
    let (reqs, _) = requests(&mut h, 13, 4);
    assert_eq!(reqs.len(), 1);
    assert_eq!(reqs[0].kind, ReqType::LeaseNew as u8);
    h.send(
        T0 + 5 * MILLIS + 20_000,
        STORE_PORT,
        ack(
            AckType::LeaseMigrate,
            4097,
            &reqs[0].key,
            &[1, 0, 0, 0],
            &reqs[0].piggy,
            reqs[0].ident,
        ),
    );
    h.advance_to(T0 + 6 * MILLIS);
    let (w, _) = requests(&mut h, 13, 4);
    assert_eq!(write_seqs(&w).first(), Some(&4098));
}

#[test]
fn every_app_with_redplane_fits_tofino_at_100k_flows() {
    use inca_apps::params::Params;
    use inca_redplane::catalog::{check_program, PROGRAMS};
    use inca_switch::resources::Resource;
    let params = Params::parse(["slots=100000"]).unwrap();
    for (name, _) in PROGRAMS {
        let p = check_program(name, &params, &Profile::tofino())
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(p.utilisation(Resource::SramBlocks) < 1.0);
    }
    // What RedPlane adds (spec §8 item 9): the use of its own objects.
    let rp = check_program("redplane_nat", &params, &Profile::tofino()).unwrap();
    let mut extra = std::collections::BTreeMap::new();
    for o in rp.objects.iter().filter(|o| o.name.starts_with("rp_")) {
        for (_, v) in &o.stage_use {
            for (r, n) in v.iter() {
                *extra.entry(r.name()).or_insert(0u64) += n;
            }
        }
    }
    for (r, n) in &extra {
        println!("redplane adds {r:>24}: {n}");
    }
    assert!(
        extra[Resource::SramBlocks.name()] > 0,
        "per-flow registers cost SRAM"
    );
    assert!(
        extra[Resource::TcamBlocks.name()] > 0,
        "range tables cost TCAM"
    );
}

mod observer {
    use super::*;
    use inca_redplane::switch::Observer;
    use std::sync::{Arc, Mutex};

    /// (time, key, frame, version) of a released output.
    type Released = (Nanos, Vec<u8>, Vec<u8>, (u16, u16));

    #[derive(Default)]
    struct Record {
        inputs: Mutex<Vec<(Nanos, u32, Vec<u8>)>>,
        outputs: Mutex<Vec<Released>>,
    }

    impl Observer for Record {
        fn input(&self, at: Nanos, switch: u32, key: &[u8], _frame: &[u8]) {
            self.inputs.lock().unwrap().push((at, switch, key.to_vec()));
        }
        fn output(&self, at: Nanos, _switch: u32, key: &[u8], frame: &[u8], version: (u16, u16)) {
            self.outputs
                .lock()
                .unwrap()
                .push((at, key.to_vec(), frame.to_vec(), version));
        }
    }

    #[test]
    fn observer_sees_inputs_once_and_releases_with_their_version() {
        let rec = Arc::new(Record::default());
        let cfg = RedPlaneConfig {
            switch_id: 7,
            ..config()
        };
        let prog = RedPlane::new(SyncCounter::new(), cfg).with_observer(rec.clone());
        let mut h = Harness::new(Switch::new(Profile::tofino(), prog).unwrap(), 7);
        let pkt = udp([10, 0, 0, 1], 1000, [192, 0, 2, 1], 80);
        h.send(T0, DOWN, pkt.clone());
        let (reqs, _) = requests(&mut h, 13, 4);
        let r = &reqs[0];
        // MIGRATE with fence 4096: the write is seq 4097.
        h.send(
            T0 + 20_000,
            STORE_PORT,
            ack(
                AckType::LeaseMigrate,
                4096,
                &r.key,
                &[0; 4],
                &r.piggy,
                r.ident,
            ),
        );
        h.advance_to(T0 + 900_000);
        let (w, _) = requests(&mut h, 13, 4);
        assert_eq!(w[0].seq, 4097);
        assert!(
            rec.outputs.lock().unwrap().is_empty(),
            "nothing released before the ack"
        );
        h.send(
            h.now() + 1000,
            STORE_PORT,
            ack(
                AckType::LeaseRenew,
                4097,
                &w[0].key,
                &[],
                &w[0].piggy,
                w[0].ident,
            ),
        );
        h.advance_to(h.now() + 10_000);
        let inputs = rec.inputs.lock().unwrap();
        assert_eq!(inputs.len(), 1, "the re-injected packet is not a new input");
        assert_eq!((inputs[0].0, inputs[0].1, &inputs[0].2), (T0, 7, &r.key));
        let outputs = rec.outputs.lock().unwrap();
        assert_eq!(outputs.len(), 1);
        assert_eq!(outputs[0].3, (4096, 4097));
        assert_eq!(&outputs[0].2[14..], &w[0].piggy[..]);
    }
}

mod robustness {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(32))]
        /// Malformed data packets, acks and announcements are dropped and
        /// counted, never a panic, with and without a lease.
        #[test]
        fn garbage_never_panics(payloads in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..120), 1..20), ports in proptest::collection::vec(0u16..3, 20)) {
            let mut h = switch(SyncCounter::new());
            let pkt = udp([10, 0, 0, 1], 1000, [192, 0, 2, 1], 80);
            let _ = grant(&mut h, T0, pkt, &[0; 4], 13);
            let mut t = h.now();
            for (i, p) in payloads.iter().enumerate() {
                t += 1000;
                // As a raw frame, as an ack payload and as an announcement.
                h.send(t, ports[i], p.clone());
                let mut e = ep([10, 254, 0, 1], [10, 255, 0, 1]);
                e.ident = i as u16;
                let f = build_udp_frame(&e, 8001, 4000, p, false).unwrap();
                h.send(t + 10, STORE_PORT, f);
                let mut a = vec![0x20];
                a.extend_from_slice(p);
                let f = build_udp_frame(&e, 9000, 4000, &a, false).unwrap();
                h.send(t + 20, STORE_PORT, f);
            }
            h.advance_to(t + 50 * MILLIS);
        }
    }
}

// ---------------------------------------------------------------------------
// End to end, in the simulator, with a real state store: client → router →
// RedPlane NAT switch (one of two) ↔ store; the switch carrying the flow
// crashes, the other takes over after the lease lapses, and the flow keeps
// its public port.

mod e2e {
    use std::any::Any;
    use std::collections::BTreeMap;
    use std::net::Ipv4Addr;

    use inca_redplane::apps::nat::RpNat;
    use inca_redplane::store::apps::AppConfig;
    use inca_redplane::store::config::{StoreConfig, WorkerConfig};
    use inca_redplane::store::StoreServer;
    use inca_redplane::switch::{RedPlane, RedPlaneConfig, Route, Shard};
    use inca_sim::engine::Node;
    use inca_sim::metrics::NodeReport;
    use inca_sim::nodes::router::{Router, RouterConfig};
    use inca_sim::{ChannelConfig, Fault, Simulation};
    use inca_switch::device::{DeviceRng, Input, Output, MILLIS, SECONDS};
    use inca_switch::{Device, Nanos, Profile, Switch};
    use inca_wire::builder::{build_udp_frame, Endpoints};
    use inca_wire::redplane::parse_udp_frame;

    const CLIENT: [u8; 4] = [10, 0, 0, 1];
    const SERVER: [u8; 4] = [192, 0, 2, 1];
    const PUBLIC: [u8; 4] = [198, 51, 100, 1];
    const STORE: [u8; 4] = [10, 254, 0, 1];

    /// Sends one UDP packet per millisecond and counts the echoes.
    #[derive(Default)]
    struct Client {
        replies: Vec<Nanos>,
        sent: u32,
    }

    impl Device for Client {
        fn start(&mut self, now: Nanos, _rng: &mut DeviceRng, out: &mut Vec<Output>) {
            out.push(Output::Timer {
                at: now + 10 * MILLIS,
                token: 1,
            });
        }
        fn handle(
            &mut self,
            now: Nanos,
            input: Input,
            _rng: &mut DeviceRng,
            out: &mut Vec<Output>,
        ) {
            match input {
                Input::Timer { .. } => {
                    self.sent += 1;
                    let ep = Endpoints::new(
                        [2; 6],
                        Ipv4Addr::from(CLIENT),
                        [3; 6],
                        Ipv4Addr::from(SERVER),
                    );
                    let frame =
                        build_udp_frame(&ep, 1000, 80, &self.sent.to_be_bytes(), true).unwrap();
                    out.push(Output::Transmit {
                        at: now,
                        port: 0,
                        frame,
                    });
                    out.push(Output::Timer {
                        at: now + MILLIS,
                        token: 1,
                    });
                }
                Input::Frame { frame, .. } => {
                    if let Ok(i) = parse_udp_frame(&frame) {
                        if i.dst_ip.octets() == CLIENT
                            && i.dst_port == 1000
                            && i.src_ip.octets() == SERVER
                        {
                            self.replies.push(now);
                        }
                    }
                }
                _ => {}
            }
        }
        fn restart(&mut self, now: Nanos, rng: &mut DeviceRng, out: &mut Vec<Output>) {
            self.start(now, rng, out);
        }
    }

    impl Node for Client {
        fn kind(&self) -> &'static str {
            "test-client"
        }
        fn report(&self, _now: Nanos) -> NodeReport {
            NodeReport::default()
        }
        fn as_any(&self) -> &dyn Any {
            self
        }
    }

    /// Echoes UDP packets and records the source endpoints it saw.
    #[derive(Default)]
    struct Server {
        seen: BTreeMap<([u8; 4], u16), u32>,
    }

    impl Device for Server {
        fn handle(
            &mut self,
            now: Nanos,
            input: Input,
            _rng: &mut DeviceRng,
            out: &mut Vec<Output>,
        ) {
            let Input::Frame { frame, .. } = input else {
                return;
            };
            let Ok(i) = parse_udp_frame(&frame) else {
                return;
            };
            *self
                .seen
                .entry((i.src_ip.octets(), i.src_port))
                .or_default() += 1;
            let ep = Endpoints::new([3; 6], i.dst_ip, [2; 6], i.src_ip);
            let reply = build_udp_frame(&ep, i.dst_port, i.src_port, i.payload, true).unwrap();
            out.push(Output::Transmit {
                at: now,
                port: 0,
                frame: reply,
            });
        }
        fn restart(&mut self, _now: Nanos, _rng: &mut DeviceRng, _out: &mut Vec<Output>) {}
    }

    impl Node for Server {
        fn kind(&self) -> &'static str {
            "test-server"
        }
        fn report(&self, _now: Nanos) -> NodeReport {
            NodeReport::default()
        }
        fn as_any(&self) -> &dyn Any {
            self
        }
    }

    type NatSwitch = Switch<RedPlane<RpNat>>;

    fn nat_switch(id: u32, ip: [u8; 4]) -> NatSwitch {
        let cfg = RedPlaneConfig {
            switch_id: id,
            ip,
            shards: vec![Shard {
                lo: 0,
                hi: u16::MAX,
                ip: STORE,
                udp: 8001,
                port: 2,
            }],
            routes: vec![
                Route {
                    net: [0; 4],
                    len: 0,
                    port: 1,
                },
                Route {
                    net: [10, 0, 0, 0],
                    len: 8,
                    port: 0,
                },
            ],
            slots: 4096,
            ..RedPlaneConfig::default()
        };
        Switch::new(
            Profile::tofino(),
            RedPlane::new(RpNat::new(PUBLIC, 1024, 64_512, 1), cfg),
        )
        .unwrap()
    }

    fn router(ports: usize, routes: &[([u8; 4], u8, Vec<u16>)], seed: u32) -> Router {
        let macs = (0..ports)
            .map(|p| [2, 0, 0, seed as u8, 0, p as u8])
            .collect();
        let mut r = Router::new(
            RouterConfig {
                hash_seed: seed,
                ..RouterConfig::default()
            },
            macs,
            vec![[0xff; 6]; ports],
        );
        for (net, len, ports) in routes {
            r.add_route(*net, *len, ports.clone()).unwrap();
        }
        r
    }

    #[test]
    fn nat_flow_survives_a_switch_crash_with_its_public_port() {
        let mut sim = Simulation::new(11, 100 * MILLIS);
        let client = sim.add_node("client", Box::new(Client::default()));
        let server = sim.add_node("server", Box::new(Server::default()));
        let a = sim.add_node("nat_a", Box::new(nat_switch(1, [10, 255, 0, 1])));
        let b = sim.add_node("nat_b", Box::new(nat_switch(2, [10, 255, 0, 2])));
        let r_in = sim.add_node(
            "r_in",
            Box::new(router(
                3,
                &[(CLIENT, 32, vec![0]), ([0; 4], 0, vec![1, 2])],
                1,
            )),
        );
        let r_out = sim.add_node(
            "r_out",
            Box::new(router(
                3,
                &[(SERVER, 32, vec![2]), (PUBLIC, 32, vec![0, 1])],
                2,
            )),
        );
        let r_store = sim.add_node(
            "r_store",
            Box::new(router(
                3,
                &[
                    ([10, 255, 0, 1], 32, vec![0]),
                    ([10, 255, 0, 2], 32, vec![1]),
                    (STORE, 32, vec![2]),
                ],
                3,
            )),
        );
        let worker = WorkerConfig {
            worker: 1,
            app: AppConfig::Nat {
                public_ip: Ipv4Addr::from(PUBLIC),
                port_base: 1024,
                port_count: 64_512,
            },
            shard: 0,
            shards: 1,
        };
        let store =
            StoreServer::new(StoreConfig::new(Ipv4Addr::from(STORE), vec![worker])).unwrap();
        let store = sim.add_node("store", Box::new(store));
        let link = ChannelConfig {
            delay: 2_000,
            ..ChannelConfig::default()
        };
        let mut connect = |name: &str, x, y| {
            sim.connect(name, x, y, link, link).unwrap();
        };
        connect("c-rin", (client, 0), (r_in, 0));
        connect("rin-a", (r_in, 1), (a, 0));
        connect("rin-b", (r_in, 2), (b, 0));
        connect("a-rout", (a, 1), (r_out, 0));
        connect("b-rout", (b, 1), (r_out, 1));
        connect("rout-s", (r_out, 2), (server, 0));
        connect("a-rst", (a, 2), (r_store, 0));
        connect("b-rst", (b, 2), (r_store, 1));
        connect("rst-st", (r_store, 2), (store, 0));

        sim.run_until(SECONDS / 2, |_| {});
        let carried = |sim: &Simulation, id| {
            sim.node::<NatSwitch>(id)
                .unwrap()
                .program()
                .stats()
                .reads_forwarded
        };
        let (na, nb) = (carried(&sim, a), carried(&sim, b));
        assert!(na + nb > 400, "the flow runs through the NAT: {na} + {nb}");
        let victim = if na > nb { a } else { b };
        let crash_at = SECONDS;
        sim.schedule(crash_at, Fault::Crash(victim));
        sim.run_until(4 * SECONDS, |_| {});

        let srv = sim.node::<Server>(server).unwrap();
        assert_eq!(
            srv.seen.len(),
            1,
            "one public endpoint for the flow: {:?}",
            srv.seen
        );
        let (&(ip, port), &n) = srv.seen.iter().next().unwrap();
        assert_eq!(ip, PUBLIC);
        assert!((1024..=65_535).contains(&port));
        let c = sim.node::<Client>(client).unwrap();
        let before = c.replies.iter().filter(|&&t| t < crash_at).count();
        let after = c.replies.iter().filter(|&&t| t > 3 * SECONDS).count();
        assert!(before > 900, "replies before the crash: {before}");
        assert!(
            after > 900,
            "the flow recovered through the other switch: {after} (server saw {n})"
        );
        let survivor = if victim == a { b } else { a };
        let s = sim.node::<NatSwitch>(survivor).unwrap().program().stats();
        assert!(s.grants >= 1, "the survivor took the lease over: {s:?}");
        // The outage is bounded by detection + the dead owner's remaining
        // lease + grant time (spec §8 item 7).
        let first_after = c
            .replies
            .iter()
            .find(|&&t| t > crash_at + MILLIS)
            .copied()
            .unwrap();
        println!(
            "crashed {victim:?} at {crash_at}; replies resume at {first_after}; survivor {s:?}"
        );
        assert!(
            first_after < crash_at + 50 * MILLIS + SECONDS + 100 * MILLIS,
            "outage until {first_after}"
        );
    }
}
