//! The RedPlane state store driven directly, frames in and frames out
//! (specs/redplane.md §5.6, §5.7, §5.9 "Store side"): every request rule,
//! deferral and expiry, fences, duplicate writes, BUF_READ hold and timeout,
//! chain commit order, chain member failure and recovery, snapshots, garbage.

use std::any::Any;
use std::cell::RefCell;
use std::net::Ipv4Addr;
use std::rc::Rc;

use inca_redplane::store::{
    AppConfig, CommitEvent, GrantEvent, StoreConfig, StoreConfigError, StoreError, StoreObserver,
    StoreServer, WorkerConfig,
};
use inca_sim::engine::{Fault, Node, NodeId, Simulation};
use inca_sim::link::ChannelConfig;
use inca_sim::metrics::NodeReport;
use inca_switch::device::{
    ControlMessage, Device, DeviceRng, Input, Nanos, Output, PortId, MILLIS, SECONDS,
};
use inca_switch::harness::Harness;
use inca_wire::redplane::*;

const S1: Ipv4Addr = Ipv4Addr::new(10, 1, 0, 1);
const S2: Ipv4Addr = Ipv4Addr::new(10, 1, 0, 2);
/// A switch no store lists.
const S3: Ipv4Addr = Ipv4Addr::new(10, 1, 0, 3);
const ST: Ipv4Addr = Ipv4Addr::new(10, 9, 0, 1);
const K: usize = 4;
const V: usize = 4;
const PORT: u16 = 8001;

fn kv_worker() -> WorkerConfig {
    WorkerConfig {
        worker: 1,
        app: AppConfig::Kv,
        shard: 0,
        shards: 1,
    }
}

fn store(workers: Vec<WorkerConfig>) -> Harness<StoreServer> {
    Harness::new(StoreServer::new(StoreConfig::new(ST, workers)).unwrap(), 1)
}

fn req_to(
    dst: Ipv4Addr,
    from: Ipv4Addr,
    t: ReqType,
    seq: u16,
    key: &[u8],
    value: &[u8],
    pkt: &[u8],
) -> Vec<u8> {
    let ep = rp_endpoints([2, 0, 0, 0, 0, 1], from, [2, 0, 0, 0, 0, 9], dst, 0x77);
    let r = RequestRepr {
        req_type: t,
        seq,
        key,
        value,
        piggyback: pkt,
    };
    build_request_frame(&ep, PORT, &r).unwrap()
}

fn req(from: Ipv4Addr, t: ReqType, seq: u16, key: &[u8], value: &[u8], pkt: &[u8]) -> Vec<u8> {
    req_to(ST, from, t, seq, key, value, pkt)
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Got {
    at: Nanos,
    to: Ipv4Addr,
    ident: u16,
    t: AckType,
    seq: u16,
    key: Vec<u8>,
    value: Vec<u8>,
    pkt: Vec<u8>,
}

fn acks_of(frames: impl IntoIterator<Item = (Nanos, Vec<u8>)>, k: usize, v: usize) -> Vec<Got> {
    frames
        .into_iter()
        .filter_map(|(at, f)| {
            let info = parse_udp_frame(&f).ok()?;
            if info.dst_port != SWITCH_PORT || info.src_port == NODE_CONTROL_PORT {
                return None;
            }
            let a = Ack::new_checked(info.payload, k, v).ok()?;
            Some(Got {
                at,
                to: info.dst_ip,
                ident: info.ident,
                t: a.ack_type(),
                seq: a.seq(),
                key: a.key().to_vec(),
                value: a.value().to_vec(),
                pkt: a.piggyback().to_vec(),
            })
        })
        .collect()
}

fn acks(h: &mut Harness<StoreServer>) -> Vec<Got> {
    let f: Vec<_> = h.take().into_iter().map(|t| (t.at, t.frame)).collect();
    acks_of(f, K, V)
}

/// Sends at `at` and returns the acks that left by `at + 10 µs`.
fn exchange(h: &mut Harness<StoreServer>, at: Nanos, frame: Vec<u8>) -> Vec<Got> {
    h.send(at, 0, frame);
    h.advance_to(at + 10_000);
    acks(h)
}

const KEY: [u8; 4] = [0, 0, 0, 42];

#[test]
fn new_key_grant_then_writes_in_order() {
    let mut h = store(vec![kv_worker()]);
    let a = exchange(
        &mut h,
        1000,
        req(S1, ReqType::LeaseNew, 0, &KEY, &[0; 4], b"pkt0"),
    );
    assert_eq!(a.len(), 1);
    assert_eq!(
        (a[0].t, a[0].seq, a[0].to, a[0].ident),
        (AckType::LeaseNew, 0, S1, 0x77)
    );
    assert_eq!(
        (a[0].value.as_slice(), a[0].pkt.as_slice()),
        (&[0u8; 4][..], &b"pkt0"[..])
    );
    // The reply leaves after the 250 ns service time.
    assert_eq!(a[0].at, 1250);
    let a = exchange(
        &mut h,
        20_000,
        req(S1, ReqType::LeaseRenew, 1, &KEY, &[1, 2, 3, 4], b"out1"),
    );
    assert_eq!(
        (a[0].t, a[0].seq, a[0].pkt.as_slice()),
        (AckType::LeaseRenew, 1, &b"out1"[..])
    );
    assert!(a[0].value.is_empty());
    let r = h.device.worker(1).unwrap().record(&KEY).unwrap();
    assert_eq!(
        (r.value.as_slice(), r.last_seq, r.fence, r.owner),
        (&[1u8, 2, 3, 4][..], 1, 0, Some(S1))
    );
}

#[test]
fn regrant_fences_older_writes_and_duplicates_are_acked_unapplied() {
    let mut h = store(vec![kv_worker()]);
    exchange(
        &mut h,
        1000,
        req(S1, ReqType::LeaseNew, 0, &KEY, &[0; 4], b""),
    );
    exchange(
        &mut h,
        2000,
        req(S1, ReqType::LeaseRenew, 1, &KEY, &[1; 4], b""),
    );
    exchange(
        &mut h,
        3000,
        req(S1, ReqType::LeaseRenew, 2, &KEY, &[2; 4], b""),
    );
    // Write 1 again (a retransmission): acked with its packet, not applied.
    let a = exchange(
        &mut h,
        4000,
        req(S1, ReqType::LeaseRenew, 1, &KEY, &[1; 4], b"dup"),
    );
    assert_eq!(
        (a[0].t, a[0].seq, a[0].pkt.as_slice()),
        (AckType::LeaseRenew, 1, &b"dup"[..])
    );
    assert_eq!(
        h.device.worker(1).unwrap().record(&KEY).unwrap().value,
        vec![2; 4]
    );
    assert_eq!(h.device.stats().duplicate_writes, 1);
    // The owner asks again (say after a link flap): MIGRATE with a fence.
    let a = exchange(
        &mut h,
        5000,
        req(S1, ReqType::LeaseNew, 0, &KEY, &[0; 4], b"p"),
    );
    assert_eq!(
        (a[0].t, a[0].seq, a[0].value.as_slice()),
        (AckType::LeaseMigrate, 2 + 4096, &[2u8; 4][..])
    );
    // Its old in-flight write 3 is now fenced.
    let a = exchange(
        &mut h,
        6000,
        req(S1, ReqType::LeaseRenew, 3, &KEY, &[3; 4], b"old"),
    );
    assert_eq!((a[0].t, a[0].seq), (AckType::LeaseReject, 3));
    assert!(a[0].pkt.is_empty(), "a reject never returns the packet");
    let a = exchange(
        &mut h,
        7000,
        req(S1, ReqType::LeaseRenew, 4099, &KEY, &[9; 4], b"new"),
    );
    assert_eq!((a[0].t, a[0].seq), (AckType::LeaseRenew, 4099));
    let r = h.device.worker(1).unwrap().record(&KEY).unwrap();
    assert_eq!(
        (r.fence, r.last_seq, r.value.clone()),
        (4098, 4099, vec![9; 4])
    );
}

/// A repeated LEASE_NEW from the owner that has not written under its
/// grant joins it (same fence), however long after the grant; once a write
/// was applied the next one fences again. A fence per request (earlier: per
/// millisecond) outran a switch control plane busy installing the previous
/// grant and wrapped the 16-bit fence in the linearizability campaign
/// (seeds 107, 131 and 189 of experiments/redplane/campaign.toml).
#[test]
fn repeated_lease_new_without_writes_joins_the_grant() {
    let mut h = store(vec![kv_worker()]);
    let new = |h: &mut Harness<StoreServer>, at: Nanos| {
        let a = exchange(h, at, req(S1, ReqType::LeaseNew, 0, &KEY, &[0; 4], b"p"));
        (a[0].t, a[0].seq)
    };
    exchange(
        &mut h,
        1000,
        req(S1, ReqType::LeaseNew, 0, &KEY, &[0; 4], b""),
    );
    exchange(
        &mut h,
        2000,
        req(S1, ReqType::LeaseRenew, 1, &KEY, &[1; 4], b""),
    );
    assert_eq!(new(&mut h, 3000), (AckType::LeaseMigrate, 4097));
    // 5 and 9 ms later, still no write under fence 4097: joined.
    assert_eq!(new(&mut h, 5_003_000), (AckType::LeaseMigrate, 4097));
    assert_eq!(new(&mut h, 9_003_000), (AckType::LeaseMigrate, 4097));
    exchange(
        &mut h,
        9_010_000,
        req(S1, ReqType::LeaseRenew, 4098, &KEY, &[2; 4], b""),
    );
    assert_eq!(new(&mut h, 9_020_000), (AckType::LeaseMigrate, 4098 + 4096));
}

#[test]
fn sequence_numbers_wrap_in_serial_order() {
    let mut h = store(vec![kv_worker()]);
    exchange(
        &mut h,
        1000,
        req(S1, ReqType::LeaseNew, 0, &KEY, &[0; 4], b""),
    );
    // Walk last_seq up to 65535 in steps that stay inside the serial window.
    let mut s: u16 = 0;
    let mut t = 2000;
    while s != 65535 {
        s = s.saturating_add(10000);
        t += 1000;
        let a = exchange(
            &mut h,
            t,
            req(
                S1,
                ReqType::LeaseRenew,
                s,
                &KEY,
                &s.to_be_bytes().repeat(2),
                b"",
            ),
        );
        assert_eq!(a[0].t, AckType::LeaseRenew);
    }
    // 65535 → 1 is "later".
    let a = exchange(
        &mut h,
        t + 1000,
        req(S1, ReqType::LeaseRenew, 1, &KEY, &[7; 4], b""),
    );
    assert_eq!(a[0].t, AckType::LeaseRenew);
    assert_eq!(
        h.device.worker(1).unwrap().record(&KEY).unwrap().last_seq,
        1
    );
    assert_eq!(h.device.stats().duplicate_writes, 0);
}

#[test]
fn other_switch_is_deferred_until_the_lease_lapses() {
    let mut h = store(vec![kv_worker()]);
    exchange(
        &mut h,
        1000,
        req(S1, ReqType::LeaseNew, 0, &KEY, &[0; 4], b""),
    );
    exchange(
        &mut h,
        2000,
        req(S1, ReqType::LeaseRenew, 1, &KEY, &[5; 4], b""),
    );
    // S2 asks: deferred, no answer.
    assert!(exchange(
        &mut h,
        3000,
        req(S2, ReqType::LeaseNew, 0, &KEY, &[0; 4], b"s2-a")
    )
    .is_empty());
    assert!(exchange(
        &mut h,
        4000,
        req(S2, ReqType::LeaseNew, 0, &KEY, &[0; 4], b"s2-b")
    )
    .is_empty());
    // S2's writes and renewals are rejected, its BUF_READs dropped.
    let a = exchange(
        &mut h,
        5000,
        req(S2, ReqType::LeaseRenew, 2, &KEY, &[6; 4], b""),
    );
    assert_eq!(a[0].t, AckType::LeaseReject);
    let a = exchange(
        &mut h,
        6000,
        req(S2, ReqType::LeaseRenew, 0, &KEY, &[0; 4], b""),
    );
    assert_eq!(a[0].t, AckType::LeaseReject);
    // S1 renews at 0.5 s: the lease now ends at 1.5 s.
    let a = exchange(
        &mut h,
        SECONDS / 2,
        req(S1, ReqType::LeaseRenew, 0, &KEY, &[0; 4], b""),
    );
    assert_eq!((a[0].t, a[0].seq), (AckType::LeaseRenew, 0));
    h.advance_to(SECONDS + SECONDS / 4);
    assert!(
        acks(&mut h).is_empty(),
        "granted before the owner's lease lapsed"
    );
    h.advance_to(2 * SECONDS);
    let a = acks(&mut h);
    assert_eq!(a.len(), 2, "{a:?}");
    // The first gets a new fence; the second MIGRATE without a new one.
    assert!(a
        .iter()
        .all(|g| g.t == AckType::LeaseMigrate && g.to == S2 && g.seq == 1 + 4096));
    assert_eq!(a[0].pkt, b"s2-a");
    assert_eq!(a[1].pkt, b"s2-b");
    assert_eq!(a[0].value, vec![5; 4]);
    assert!(a[0].at >= SECONDS / 2 + SECONDS);
    // S1's late write is rejected now.
    let a = exchange(
        &mut h,
        3 * SECONDS,
        req(S1, ReqType::LeaseRenew, 2, &KEY, &[6; 4], b""),
    );
    assert_eq!(a[0].t, AckType::LeaseReject);
    assert_eq!(h.device.stats().deferred, 2);
}

#[test]
fn deferred_fifo_is_bounded() {
    let mut h = store(vec![kv_worker()]);
    exchange(
        &mut h,
        1000,
        req(S1, ReqType::LeaseNew, 0, &KEY, &[0; 4], b""),
    );
    for i in 0..40 {
        h.send(
            2000 + i,
            0,
            req(S2, ReqType::LeaseNew, 0, &KEY, &[0; 4], b""),
        );
    }
    assert_eq!(h.device.stats().deferred, 32);
    assert_eq!(h.device.stats().deferred_overflow, 8);
}

#[test]
fn buf_read_is_held_until_its_write_commits_or_times_out() {
    let mut h = store(vec![kv_worker()]);
    exchange(
        &mut h,
        1000,
        req(S1, ReqType::LeaseNew, 0, &KEY, &[0; 4], b""),
    );
    exchange(
        &mut h,
        2000,
        req(S1, ReqType::LeaseRenew, 1, &KEY, &[1; 4], b""),
    );
    // Read after write 1: released at once.
    let a = exchange(
        &mut h,
        3000,
        req(S1, ReqType::BufRead, 1, &KEY, &[0; 4], b"r1"),
    );
    assert_eq!(
        (a[0].t, a[0].seq, a[0].pkt.as_slice()),
        (AckType::BufRead, 1, &b"r1"[..])
    );
    // Read after write 2, which has not arrived: held.
    assert!(exchange(
        &mut h,
        4000,
        req(S1, ReqType::BufRead, 2, &KEY, &[0; 4], b"r2")
    )
    .is_empty());
    let a = exchange(
        &mut h,
        5000,
        req(S1, ReqType::LeaseRenew, 2, &KEY, &[2; 4], b"w2"),
    );
    let kinds: Vec<_> = a.iter().map(|g| (g.t, g.seq, g.pkt.clone())).collect();
    assert!(
        kinds.contains(&(AckType::LeaseRenew, 2, b"w2".to_vec())),
        "{kinds:?}"
    );
    assert!(
        kinds.contains(&(AckType::BufRead, 2, b"r2".to_vec())),
        "{kinds:?}"
    );
    // Read after write 3, which never comes: dropped after HOLD_TIMEOUT.
    assert!(exchange(
        &mut h,
        6000,
        req(S1, ReqType::BufRead, 3, &KEY, &[0; 4], b"r3")
    )
    .is_empty());
    h.advance_to(6000 + 2 * MILLIS);
    assert!(acks(&mut h).is_empty());
    assert_eq!(h.device.stats().hold_timeouts, 1);
    // Fenced or foreign reads are dropped.
    assert!(exchange(
        &mut h,
        3 * MILLIS,
        req(S2, ReqType::BufRead, 2, &KEY, &[0; 4], b"")
    )
    .is_empty());
    assert_eq!(h.device.stats().buf_read_dropped, 1);
}

/// Model checker finding 3: a held BUF_READ is re-checked against owner
/// and fence when a commit would release it. Write 2 never arrives; a
/// regrant (the same switch asks again, e.g. after its lease lapsed on its
/// side) commits a new fence, so last_seq rises above the read's seq. The
/// read saw write 2, which never became durable: it must never be released.
#[test]
fn held_buf_read_is_not_released_by_a_later_grant() {
    let mut h = store(vec![kv_worker()]);
    exchange(
        &mut h,
        1000,
        req(S1, ReqType::LeaseNew, 0, &KEY, &[0; 4], b""),
    );
    exchange(
        &mut h,
        2000,
        req(S1, ReqType::LeaseRenew, 1, &KEY, &[1; 4], b""),
    );
    assert!(exchange(
        &mut h,
        3000,
        req(S1, ReqType::BufRead, 2, &KEY, &[0; 4], b"r2")
    )
    .is_empty());
    let a = exchange(
        &mut h,
        4000,
        req(S1, ReqType::LeaseNew, 0, &KEY, &[0; 4], b"n"),
    );
    let kinds: Vec<_> = a.iter().map(|g| (g.t, g.seq)).collect();
    assert_eq!(kinds.len(), 1, "{kinds:?}");
    assert_eq!(kinds[0].0, AckType::LeaseMigrate);
    assert!(kinds[0].1 > 2, "a new fence above the read: {kinds:?}");
    h.advance_to(4000 + 5 * MILLIS);
    assert!(acks(&mut h).iter().all(|g| g.t != AckType::BufRead));
    assert_eq!(h.device.stats().buf_read_dropped, 1);
    assert_eq!(h.device.stats().hold_timeouts, 0);
}

#[test]
fn garbage_unknown_ports_and_unlisted_switches_are_counted_and_ignored() {
    let mut cfg = StoreConfig::new(ST, vec![kv_worker()]);
    cfg.allowed_switches = vec![S1];
    let mut h = Harness::new(StoreServer::new(cfg).unwrap(), 1);
    let mut rng = 0x1234_5678_u64;
    for i in 0..2000u64 {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let len = (rng % 120) as usize;
        let mut f: Vec<u8> = (0..len).map(|j| (rng >> (j % 56)) as u8).collect();
        if i % 2 == 0 {
            // Mutate a valid request so deeper parsers are reached too.
            let mut v = req(S1, ReqType::LeaseNew, 0, &KEY, &[0; 4], b"x");
            let n = v.len();
            v[(rng as usize) % n] ^= 0xff;
            v.truncate(n - (rng as usize % 8));
            f = v;
        }
        h.send(1000 + i * 100, 0, f);
    }
    let s = *h.device.stats();
    assert!(s.malformed > 0, "{s:?}");
    // Short or headerless requests to the worker port.
    let ep = rp_endpoints([2; 6], S1, [3; 6], ST, 1);
    h.send(
        SECONDS,
        0,
        build_rp_frame(&ep, SWITCH_PORT, PORT, &[0, 0]).unwrap(),
    );
    h.send(
        SECONDS,
        0,
        build_rp_frame(&ep, SWITCH_PORT, PORT, &[9, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8]).unwrap(),
    );
    h.send(
        SECONDS,
        0,
        build_rp_frame(&ep, SWITCH_PORT, 8002, &[0; 11]).unwrap(),
    );
    h.send(
        SECONDS,
        0,
        build_rp_frame(&ep, SWITCH_PORT, 7000, &[0; 11]).unwrap(),
    );
    h.send(
        SECONDS,
        0,
        req(S2, ReqType::LeaseNew, 0, &KEY, &[0; 4], b""),
    );
    let s2 = *h.device.stats();
    assert_eq!(s2.malformed, s.malformed + 2);
    assert_eq!(s2.unknown_port, s.unknown_port + 2);
    assert_eq!(s2.from_unknown_switch, s.from_unknown_switch + 1);
    assert_eq!(s2.invariant_violations, 0);
    // It still works.
    let a = exchange(
        &mut h,
        2 * SECONDS,
        req(S1, ReqType::LeaseNew, 0, &[0, 0, 0, 77], &[0; 4], b""),
    );
    assert_eq!(a.last().unwrap().t, AckType::LeaseNew);
}

#[test]
fn worker_queue_is_bounded_and_service_time_spaces_replies() {
    let mut cfg = StoreConfig::new(ST, vec![kv_worker()]);
    cfg.worker_queue = 8;
    let mut h = Harness::new(StoreServer::new(cfg).unwrap(), 1);
    for i in 0..20u8 {
        h.send(
            1000,
            0,
            req(S1, ReqType::LeaseNew, 0, &[0, 0, 1, i], &[0; 4], b""),
        );
    }
    h.advance_to(MILLIS);
    let a = acks(&mut h);
    assert_eq!(a.len(), 8);
    assert_eq!(h.device.stats().queue_drops, 12);
    for (i, g) in a.iter().enumerate() {
        assert_eq!(g.at, 1000 + 250 * (i as u64 + 1));
    }
}

#[test]
fn observer_sees_commits_and_grants_in_order() {
    #[derive(Default)]
    struct Log(Vec<String>);
    struct Obs(Rc<RefCell<Log>>);
    impl StoreObserver for Obs {
        fn committed(&mut self, e: &CommitEvent<'_>) {
            self.0
                .borrow_mut()
                .0
                .push(format!("c {:?} {} {} {:?}", e.key, e.fence, e.seq, e.value));
        }
        fn lease_granted(&mut self, e: &GrantEvent<'_>) {
            self.0
                .borrow_mut()
                .0
                .push(format!("g {:?} {} {:?}", e.key, e.base, e.kind));
        }
    }
    let log = Rc::new(RefCell::new(Log::default()));
    let s = StoreServer::new(StoreConfig::new(ST, vec![kv_worker()]))
        .unwrap()
        .with_observer(Box::new(Obs(log.clone())));
    let mut h = Harness::new(s, 1);
    exchange(
        &mut h,
        1000,
        req(S1, ReqType::LeaseNew, 0, &KEY, &[0; 4], b""),
    );
    exchange(
        &mut h,
        2000,
        req(S1, ReqType::LeaseRenew, 1, &KEY, &[1; 4], b""),
    );
    exchange(
        &mut h,
        3000,
        req(S1, ReqType::LeaseRenew, 1, &KEY, &[1; 4], b""),
    );
    exchange(
        &mut h,
        4000,
        req(S1, ReqType::LeaseNew, 0, &KEY, &[0; 4], b""),
    );
    assert_eq!(
        log.borrow().0,
        vec![
            "c [0, 0, 0, 42] 0 0 [0, 0, 0, 0]",
            "g [0, 0, 0, 42] 0 New",
            "c [0, 0, 0, 42] 0 1 [1, 1, 1, 1]",
            "c [0, 0, 0, 42] 4097 4097 [1, 1, 1, 1]",
            "g [0, 0, 0, 42] 4097 Migrate",
        ]
    );
}

#[test]
fn nat_grant_allocates_a_port_and_creates_the_reverse_record() {
    let public = Ipv4Addr::new(100, 64, 0, 1);
    let w = WorkerConfig {
        worker: 1,
        app: AppConfig::Nat {
            public_ip: public,
            port_base: 2000,
            port_count: 1000,
        },
        shard: 1,
        shards: 2,
    };
    let mut h = store(vec![w]);
    let fwd = [10, 0, 0, 5, 0x30, 0x39];
    h.send(1000, 0, {
        let ep = rp_endpoints([2; 6], S1, [3; 6], ST, 1);
        build_request_frame(
            &ep,
            PORT,
            &RequestRepr {
                req_type: ReqType::LeaseNew,
                seq: 0,
                key: &fwd,
                value: &[0; 6],
                piggyback: b"",
            },
        )
        .unwrap()
    });
    h.advance_to(MILLIS);
    let f: Vec<_> = h.take().into_iter().map(|t| (t.at, t.frame)).collect();
    let a = acks_of(f, 6, 6);
    assert_eq!(a[0].t, AckType::LeaseNew);
    let port = u16::from_be_bytes([a[0].value[4], a[0].value[5]]);
    assert_eq!(&a[0].value[..4], &public.octets());
    assert!(
        (2500..3000).contains(&port),
        "shard 1 of 2 owns 2500..3000, got {port}"
    );
    let rev = h.device.worker(1).unwrap().record(&a[0].value).unwrap();
    assert_eq!(rev.value, fwd.to_vec());
    assert_eq!(rev.owner, None);
}

#[test]
fn snapshot_epoch_commits_all_or_nothing_and_restores_on_lease_new() {
    let w = WorkerConfig {
        worker: 1,
        app: AppConfig::AsyncCounter { entries: 4 },
        shard: 0,
        shards: 1,
    };
    let mut h = store(vec![w]);
    let snap = |from, epoch: u16, idx: u8, val: u8| {
        let ep = rp_endpoints([2; 6], from, [3; 6], ST, 5);
        build_request_frame(
            &ep,
            PORT,
            &RequestRepr {
                req_type: ReqType::Snapshot,
                seq: epoch,
                key: &[0, idx],
                value: &[0, 0, 0, val],
                piggyback: b"",
            },
        )
        .unwrap()
    };
    let take = |h: &mut Harness<StoreServer>| {
        let f: Vec<_> = h.take().into_iter().map(|t| (t.at, t.frame)).collect();
        acks_of(f, 2, 4)
    };
    let new_req = |from| {
        let ep = rp_endpoints([2; 6], from, [3; 6], ST, 5);
        build_request_frame(
            &ep,
            PORT,
            &RequestRepr {
                req_type: ReqType::LeaseNew,
                seq: 0,
                key: &[0, 3],
                value: &[0; 4],
                piggyback: b"p",
            },
        )
        .unwrap()
    };
    // Before the lease: entries are rejected.
    h.send(500, 0, snap(S1, 1, 0, 9));
    h.advance_to(900);
    assert_eq!(take(&mut h)[0].t, AckType::LeaseReject);
    // The lease: a restore of the (empty) committed snapshot, one per entry.
    h.send(1000, 0, new_req(S1));
    h.advance_to(10_000);
    let a = take(&mut h);
    assert_eq!(a.len(), 4);
    assert!(a
        .iter()
        .all(|g| g.t == AckType::SnapshotRestore && g.seq == 0 && g.value == vec![0; 4]));
    assert_eq!(a[3].pkt, b"p");
    assert!(a[..3].iter().all(|g| g.pkt.is_empty()));
    // Epoch 1: three entries stage, nothing is acked.
    for i in 0..3 {
        h.send(20_000 + u64::from(i) * 1000, 0, snap(S1, 1, i, 10 + i));
    }
    h.advance_to(30_000);
    assert!(take(&mut h).is_empty());
    // The last entry commits the epoch: one ack per entry.
    h.send(40_000, 0, snap(S1, 1, 3, 13));
    h.advance_to(50_000);
    let a = take(&mut h);
    assert_eq!(a.len(), 4);
    assert!(a.iter().all(|g| g.t == AckType::Snapshot && g.seq == 1));
    assert_eq!(
        h.device
            .worker(1)
            .unwrap()
            .committed_snapshot(&[0, 0])
            .unwrap(),
        (
            1,
            &[
                vec![0, 0, 0, 10],
                vec![0, 0, 0, 11],
                vec![0, 0, 0, 12],
                vec![0, 0, 0, 13]
            ][..]
        )
    );
    // A retransmitted entry of the committed epoch is acked again; an old
    // epoch is ignored; a partial newer epoch does not replace the commit.
    h.send(60_000, 0, snap(S1, 1, 2, 12));
    h.send(61_000, 0, snap(S1, 0, 2, 99));
    h.send(62_000, 0, snap(S1, 2, 0, 50));
    h.advance_to(70_000);
    let a = take(&mut h);
    assert_eq!(a.len(), 1);
    assert_eq!((a[0].t, a[0].seq), (AckType::Snapshot, 1));
    assert_eq!(h.device.stats().snapshot_stale, 1);
    // After the owner's lease lapses, another switch gets the committed epoch.
    h.send(80_000, 0, new_req(S2));
    h.advance_to(3 * SECONDS);
    let a = take(&mut h);
    assert_eq!(a.len(), 4);
    assert!(a.iter().all(|g| g.to == S2 && g.seq == 1));
    assert_eq!(
        a.iter().map(|g| g.value[3]).collect::<Vec<_>>(),
        vec![10, 11, 12, 13]
    );
}

// ---------------------------------------------------------------------------
// Chains in the simulator
// ---------------------------------------------------------------------------

/// Forwards frames by IPv4 destination (an idealised L3 switch for tests).
/// Control messages cut (kind [`CUT`]) or restore (kind [`MEND`]) the
/// path between two addresses, both ways (body: the two IPv4 addresses).
struct Hub {
    routes: Vec<(Ipv4Addr, PortId)>,
    cut: Vec<(Ipv4Addr, Ipv4Addr)>,
}

const CUT: u32 = 1;
const MEND: u32 = 2;

impl Device for Hub {
    fn handle(&mut self, now: Nanos, input: Input, _rng: &mut DeviceRng, out: &mut Vec<Output>) {
        if let Input::Control(m) = &input {
            if let [a, b, c, d, e, f, g, h] = m.body[..] {
                let pair = (Ipv4Addr::new(a, b, c, d), Ipv4Addr::new(e, f, g, h));
                match m.kind {
                    CUT => self.cut.push(pair),
                    MEND => self.cut.retain(|&p| p != pair),
                    _ => {}
                }
            }
        }
        if let Input::Frame { frame, .. } = input {
            if let Ok(info) = parse_udp_frame(&frame) {
                let (s, d) = (info.src_ip, info.dst_ip);
                if self.cut.iter().any(|&p| p == (s, d) || p == (d, s)) {
                    return;
                }
                if let Some(&(_, p)) = self.routes.iter().find(|(ip, _)| *ip == info.dst_ip) {
                    out.push(Output::Transmit {
                        at: now,
                        port: p,
                        frame,
                    });
                }
            }
        }
    }
    fn restart(&mut self, _now: Nanos, _rng: &mut DeviceRng, _out: &mut Vec<Output>) {}
}

impl Node for Hub {
    fn kind(&self) -> &'static str {
        "hub"
    }
    fn report(&self, _now: Nanos) -> NodeReport {
        NodeReport::default()
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// A stand-in switch: sends the frames it is told to (control messages),
/// records every frame it receives.
#[derive(Default)]
struct Client {
    got: Vec<(Nanos, Vec<u8>)>,
}

impl Device for Client {
    fn handle(&mut self, now: Nanos, input: Input, _rng: &mut DeviceRng, out: &mut Vec<Output>) {
        match input {
            Input::Frame { frame, .. } => self.got.push((now, frame)),
            Input::Control(m) => out.push(Output::Transmit {
                at: now,
                port: 0,
                frame: m.body,
            }),
            _ => {}
        }
    }
    fn restart(&mut self, _now: Nanos, _rng: &mut DeviceRng, _out: &mut Vec<Output>) {}
}

impl Node for Client {
    fn kind(&self) -> &'static str {
        "client"
    }
    fn report(&self, _now: Nanos) -> NodeReport {
        NodeReport::default()
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

const CHAIN: [Ipv4Addr; 3] = [
    Ipv4Addr::new(10, 9, 0, 1),
    Ipv4Addr::new(10, 9, 0, 2),
    Ipv4Addr::new(10, 9, 0, 3),
];

struct ChainSim {
    sim: Simulation,
    stores: Vec<NodeId>,
    client: NodeId,
    hub: NodeId,
}

fn chain_sim(link_delay: Nanos) -> ChainSim {
    chain_sim_with(7, link_delay, |_| {})
}

/// The chain of [`chain_sim`] with each store's config adjusted by `tweak`.
fn chain_sim_with(seed: u64, link_delay: Nanos, tweak: impl Fn(&mut StoreConfig)) -> ChainSim {
    chain_sim_built(seed, link_delay, |mut cfg| {
        tweak(&mut cfg);
        StoreServer::new(cfg).unwrap()
    })
}

/// The chain of [`chain_sim`] with each store built by `build` from its
/// config.
fn chain_sim_built(
    seed: u64,
    link_delay: Nanos,
    build: impl Fn(StoreConfig) -> StoreServer,
) -> ChainSim {
    chain_of(&CHAIN, seed, link_delay, build)
}

/// A chain of the first `members.len()` addresses of [`CHAIN`] (at most 3).
fn chain_of(
    members: &[Ipv4Addr],
    seed: u64,
    link_delay: Nanos,
    build: impl Fn(StoreConfig) -> StoreServer,
) -> ChainSim {
    let mut sim = Simulation::new(seed, MILLIS);
    let mut stores = Vec::new();
    for &ip in members {
        let mut cfg = StoreConfig::new(ip, vec![kv_worker()]);
        cfg.chain = members.to_vec();
        cfg.allowed_switches = vec![S1, S2];
        stores.push(sim.add_node(&format!("store{ip}"), Box::new(build(cfg))));
    }
    let client = sim.add_node("switch", Box::new(Client::default()));
    let mut routes: Vec<(Ipv4Addr, PortId)> = members
        .iter()
        .enumerate()
        .map(|(i, &ip)| (ip, i as PortId))
        .collect();
    routes.push((S1, 3));
    routes.push((S2, 3));
    routes.push((S3, 3));
    let hub = sim.add_node(
        "hub",
        Box::new(Hub {
            routes,
            cut: Vec::new(),
        }),
    );
    let link = ChannelConfig {
        delay: link_delay,
        ..ChannelConfig::default()
    };
    for (i, &s) in stores.iter().enumerate() {
        sim.connect(&format!("l{i}"), (s, 0), (hub, i as PortId), link, link)
            .unwrap();
    }
    sim.connect("lc", (client, 0), (hub, 3), link, link)
        .unwrap();
    ChainSim {
        sim,
        stores,
        client,
        hub,
    }
}

impl ChainSim {
    fn send(&mut self, at: Nanos, frame: Vec<u8>) {
        self.sim.schedule(
            at,
            Fault::Message(
                self.client,
                ControlMessage {
                    kind: 0,
                    body: frame,
                },
            ),
        );
    }
    /// Cuts (or with `mend`, restores) the path between two members.
    fn cut(&mut self, at: Nanos, a: Ipv4Addr, b: Ipv4Addr, mend: bool) {
        let mut body = a.octets().to_vec();
        body.extend_from_slice(&b.octets());
        let kind = if mend { MEND } else { CUT };
        self.sim
            .schedule(at, Fault::Message(self.hub, ControlMessage { kind, body }));
    }
    fn store(&self, i: usize) -> &StoreServer {
        self.sim.node::<StoreServer>(self.stores[i]).unwrap()
    }
    fn acks(&self) -> Vec<Got> {
        acks_of(
            self.sim.node::<Client>(self.client).unwrap().got.clone(),
            K,
            V,
        )
    }
    fn announces(&self) -> Vec<HeadAnnounceRepr> {
        self.sim
            .node::<Client>(self.client)
            .unwrap()
            .got
            .iter()
            .filter_map(|(_, f)| {
                let info = parse_udp_frame(f).ok().filter(|i| i.dst_ip == S1)?;
                HeadAnnounce::new_checked(info.payload)
                    .ok()
                    .map(|h| HeadAnnounceRepr::parse(&h))
            })
            .collect()
    }
}

#[test]
fn chain_replies_only_after_the_tail_commits_in_order_and_replicas_agree() {
    let d = 10_000;
    let mut c = chain_sim(d);
    c.send(1000, req(S1, ReqType::LeaseNew, 0, &KEY, &[0; 4], b"n"));
    for s in 1..=20u16 {
        // Pipelined: a write every 1 µs, far faster than the chain RTT.
        c.send(
            200_000 + u64::from(s) * 1000,
            req(
                S1,
                ReqType::LeaseRenew,
                s,
                &KEY,
                &s.to_be_bytes().repeat(2),
                b"w",
            ),
        );
    }
    // A read of write 20 arrives before it commits: held, released with it.
    c.send(221_500, req(S1, ReqType::BufRead, 20, &KEY, &[0; 4], b"r"));
    c.sim.run_until(5 * MILLIS, |_| {});
    let a = c.acks();
    assert_eq!(a[0].t, AckType::LeaseNew);
    // Client→hub→head→hub→middle→hub→tail→hub→head→hub→client: 10 link hops.
    assert!(
        a[0].at >= 1000 + 10 * d,
        "NEW_ACK at {} came before the chain could commit",
        a[0].at
    );
    let writes: Vec<u16> = a
        .iter()
        .filter(|g| g.t == AckType::LeaseRenew)
        .map(|g| g.seq)
        .collect();
    assert_eq!(
        writes,
        (1..=20).collect::<Vec<_>>(),
        "acks out of commit order"
    );
    let r = a
        .iter()
        .find(|g| g.t == AckType::BufRead)
        .expect("held read released");
    let w20 = a
        .iter()
        .find(|g| g.t == AckType::LeaseRenew && g.seq == 20)
        .unwrap();
    assert!(r.at >= w20.at - 1000);
    let dumps: Vec<_> = (0..3)
        .map(|i| c.store(i).worker(1).unwrap().dump())
        .collect();
    assert_eq!(dumps[0], dumps[1]);
    assert_eq!(dumps[1], dumps[2]);
    assert_eq!(dumps[0][0].2, 20);
    for i in 0..3 {
        assert_eq!(
            c.store(i).worker(1).unwrap().update_ids(),
            (21, 21),
            "store {i}"
        );
        assert_eq!(c.store(i).stats().invariant_violations, 0);
    }
}

#[test]
fn head_failure_promotes_the_next_node_which_announces_and_honours_leases() {
    let mut c = chain_sim(5_000);
    c.send(1000, req(S1, ReqType::LeaseNew, 0, &KEY, &[0; 4], b""));
    c.send(100_000, req(S1, ReqType::LeaseRenew, 1, &KEY, &[1; 4], b""));
    c.sim.schedule(10 * MILLIS, Fault::Crash(c.stores[0]));
    c.sim.run_until(60 * MILLIS, |_| {});
    // Detected after 3 missed heartbeats (≤ 40 ms), announced to the switch.
    assert!(c.store(1).is_head());
    assert_eq!(c.store(2).chain_view(), vec![CHAIN[1], CHAIN[2]]);
    let ann = c.announces();
    assert_eq!(ann.len(), 1, "{ann:?}");
    assert_eq!(
        (ann[0].old_head, ann[0].new_head, ann[0].config_version),
        (CHAIN[0], CHAIN[1], 1)
    );
    let new_head = CHAIN[1];
    // The owner keeps writing through the new head; another switch waits a
    // full LEASE_PERIOD from the failover.
    c.send(
        70 * MILLIS,
        req_to(new_head, S1, ReqType::LeaseRenew, 2, &KEY, &[2; 4], b"w2"),
    );
    c.send(
        71 * MILLIS,
        req_to(new_head, S2, ReqType::LeaseNew, 0, &KEY, &[0; 4], b"s2"),
    );
    c.sim.run_until(500 * MILLIS, |_| {});
    let a = c.acks();
    assert!(a
        .iter()
        .any(|g| g.t == AckType::LeaseRenew && g.seq == 2 && g.pkt == b"w2"));
    assert!(
        !a.iter().any(|g| g.to == S2),
        "S2 granted while S1's lease could be live"
    );
    c.sim.run_until(1200 * MILLIS, |_| {});
    let a = c.acks();
    let g = a
        .iter()
        .find(|g| g.to == S2)
        .expect("S2 eventually granted");
    assert_eq!(
        (g.t, g.seq, g.value.clone()),
        (AckType::LeaseMigrate, 2 + 4096, vec![2; 4])
    );
    assert_eq!(
        c.store(1).worker(1).unwrap().dump(),
        c.store(2).worker(1).unwrap().dump()
    );
}

/// Campaign seeds 173 (Sync-Counter) and 532 (NAT): the head died after
/// the tail applied a write but before the tail's ack reached it; the
/// middle took the ack as a middle and then became head. The commit used
/// to be reported by the head when the ack arrived, so nobody reported it
/// and the checker replayed a history without a durable write. The tail
/// reports it now: whenever the survivors hold write 1, it was reported,
/// exactly once, whatever the instant of the crash.
#[test]
fn every_commit_is_reported_once_whenever_the_head_dies() {
    #[derive(Default)]
    struct Log(Vec<(u16, u16)>);
    struct Obs(Rc<RefCell<Log>>);
    impl StoreObserver for Obs {
        fn committed(&mut self, e: &CommitEvent<'_>) {
            self.0.borrow_mut().0.push((e.fence, e.seq));
        }
    }
    let d = 5_000;
    let mut durable = 0;
    for crash_after in (0..60_000).step_by(1_000) {
        let log = Rc::new(RefCell::new(Log::default()));
        let mut c = chain_sim_built(7, d, |cfg| {
            StoreServer::new(cfg)
                .unwrap()
                .with_observer(Box::new(Obs(log.clone())))
        });
        c.send(1000, req(S1, ReqType::LeaseNew, 0, &KEY, &[0; 4], b""));
        c.send(100_000, req(S1, ReqType::LeaseRenew, 1, &KEY, &[1; 4], b""));
        c.sim
            .schedule(100_000 + crash_after, Fault::Crash(c.stores[0]));
        c.sim.run_until(60 * MILLIS, |_| {});
        assert!(c.store(1).is_head(), "crash at +{crash_after} ns");
        let survivors: Vec<u16> = (1..3)
            .map(|i| c.store(i).worker(1).unwrap().dump()[0].2)
            .collect();
        let reported = log.borrow().0.clone();
        let writes = reported.iter().filter(|&&v| v == (0, 1)).count();
        if survivors == [1, 1] {
            durable += 1;
            assert_eq!(
                writes, 1,
                "crash at +{crash_after} ns: write 1 is on every survivor, reported {reported:?}"
            );
        } else {
            assert_eq!(writes, 0, "crash at +{crash_after} ns: {reported:?}");
        }
    }
    // The sweep covers crashes before and after the write reached the tail.
    assert!(durable > 0 && durable < 60, "{durable} of 60 durable");
}

#[test]
fn middle_and_tail_failures_keep_the_chain_committing() {
    let mut c = chain_sim(5_000);
    c.send(1000, req(S1, ReqType::LeaseNew, 0, &KEY, &[0; 4], b""));
    c.sim.schedule(5 * MILLIS, Fault::Crash(c.stores[1]));
    // Written while the middle is dead but not yet detected: the head resends
    // to the tail after reconfiguration.
    c.send(
        6 * MILLIS,
        req(S1, ReqType::LeaseRenew, 1, &KEY, &[1; 4], b"w1"),
    );
    c.sim.run_until(60 * MILLIS, |_| {});
    assert_eq!(c.store(0).chain_view(), vec![CHAIN[0], CHAIN[2]]);
    assert!(c.acks().iter().any(|g| g.seq == 1 && g.pkt == b"w1"));
    // The tail dies too: the head alone is not a quorum of the three
    // configured members (it cannot tell this from being cut off), so it
    // keeps its view and serves nothing until a member comes back.
    c.sim.schedule(70 * MILLIS, Fault::Crash(c.stores[2]));
    c.send(
        71 * MILLIS,
        req(S1, ReqType::LeaseRenew, 2, &KEY, &[2; 4], b"w2"),
    );
    // A request once the tail has been silent a while is refused outright.
    c.send(
        100 * MILLIS,
        req(S1, ReqType::LeaseRenew, 0, &KEY, &[0; 4], b"r"),
    );
    c.sim.run_until(150 * MILLIS, |_| {});
    assert_eq!(c.store(0).chain_view(), vec![CHAIN[0], CHAIN[2]]);
    assert!(!c.acks().iter().any(|g| g.seq == 2 || g.pkt == b"r"));
    assert_eq!(c.store(0).stats().no_quorum, 1);
    // The middle comes back without its state: heard again, it makes a
    // quorum with the head, which removes the dead tail; the middle
    // rejoins behind the head with a copy, and the write after that (the
    // switch's next one) commits on both.
    c.sim.schedule(160 * MILLIS, Fault::Restart(c.stores[1]));
    c.send(
        200 * MILLIS,
        req(S1, ReqType::LeaseRenew, 3, &KEY, &[3; 4], b"w3"),
    );
    c.sim.run_until(250 * MILLIS, |_| {});
    assert_eq!(c.store(0).chain_view(), vec![CHAIN[0], CHAIN[1]]);
    assert_eq!(c.store(1).chain_view(), vec![CHAIN[0], CHAIN[1]]);
    assert!(c.acks().iter().any(|g| g.seq == 3 && g.pkt == b"w3"));
    for i in [0, 1] {
        assert_eq!(
            c.store(i).worker(1).unwrap().record(&KEY).unwrap().last_seq,
            3
        );
    }
}

/// Chain recovery (§5.7): a restarted replica rejoins as the new tail with a
/// copy of the state, so a later failure of another member loses nothing.
/// Crash the middle, restart it, crash the head, restart it, crash the new
/// head, crash the last original member and restart it: every write
/// acknowledged at any point is still in the replica that stayed up, which
/// only ever had its state from transfers. Writes keep flowing throughout, so transfers run
/// while the chain is busy.
#[test]
fn restarted_replicas_rejoin_as_tail_and_no_committed_write_is_lost() {
    let mut c = chain_sim(5_000);
    let keys: Vec<[u8; 4]> = (0..24u8).map(|i| [0, 0, 7, i]).collect();
    // Which node the switch talks to: the head as it will be after each
    // failure has been detected (requests in between are lost or redirected).
    let head_at = |t: Nanos| -> Ipv4Addr {
        match t {
            t if t < 150 * MILLIS => CHAIN[0],
            t if t < 350 * MILLIS => CHAIN[2],
            _ => CHAIN[1],
        }
    };
    for k in &keys {
        c.send(1000, req(S1, ReqType::LeaseNew, 0, k, &[0; 4], b""));
    }
    // Keys 0..12 are written only before the first failure; 12..24 all the
    // time (each write renews the lease).
    let mut seq = vec![0u16; keys.len()];
    let mut t = MILLIS;
    let mut n = 0usize;
    while t < 540 * MILLIS {
        let i = if t < 9 * MILLIS { n % 24 } else { 12 + n % 12 };
        seq[i] += 1;
        let s = seq[i];
        c.send(
            t,
            req_to(
                head_at(t),
                S1,
                ReqType::LeaseRenew,
                s,
                &keys[i],
                &s.to_be_bytes().repeat(2),
                b"w",
            ),
        );
        n += 1;
        t += 250_000;
    }
    let views = |c: &ChainSim, idx: &[usize]| -> Vec<Vec<Ipv4Addr>> {
        idx.iter().map(|&i| c.store(i).chain_view()).collect()
    };
    c.sim.schedule(10 * MILLIS, Fault::Crash(c.stores[1]));
    c.sim.schedule(60 * MILLIS, Fault::Restart(c.stores[1]));
    c.sim.run_until(140 * MILLIS, |_| {});
    let rejoined = vec![CHAIN[0], CHAIN[2], CHAIN[1]];
    assert_eq!(views(&c, &[0, 1, 2]), vec![rejoined.clone(); 3]);
    assert_eq!(c.store(1).stats().rejoins, 1);
    assert_eq!(c.store(2).stats().joins_admitted, 1);
    assert!(c.store(2).stats().sync_chunks_sent > 0);
    // Quiet moment between writes: every replica holds the same records.
    let d = c.store(0).worker(1).unwrap().dump();
    assert_eq!(d.len(), 24);
    assert_eq!(c.store(1).worker(1).unwrap().dump(), d);
    assert_eq!(c.store(2).worker(1).unwrap().dump(), d);

    c.sim.schedule(150 * MILLIS, Fault::Crash(c.stores[0]));
    c.sim.schedule(250 * MILLIS, Fault::Restart(c.stores[0]));
    c.sim.run_until(340 * MILLIS, |_| {});
    assert_eq!(
        views(&c, &[0, 1, 2]),
        vec![vec![CHAIN[2], CHAIN[1], CHAIN[0]]; 3]
    );
    c.sim.schedule(350 * MILLIS, Fault::Crash(c.stores[2]));
    c.sim.run_until(440 * MILLIS, |_| {});
    assert_eq!(views(&c, &[0, 1]), vec![vec![CHAIN[1], CHAIN[0]]; 2]);
    assert!(c.store(1).is_head());
    // The last original member dies: the survivor alone is no quorum and
    // waits; once the dead member restarts (heard, holding nothing) the
    // survivor goes on and the restarted member rejoins from it.
    c.sim.schedule(450 * MILLIS, Fault::Crash(c.stores[0]));
    c.sim.run_until(465 * MILLIS, |_| {});
    assert_eq!(c.store(1).chain_view(), vec![CHAIN[1], CHAIN[0]]);
    c.sim.schedule(470 * MILLIS, Fault::Restart(c.stores[0]));
    c.sim.run_until(600 * MILLIS, |_| {});
    assert_eq!(views(&c, &[0, 1]), vec![vec![CHAIN[1], CHAIN[0]]; 2]);

    // Every acknowledged write is in the last replica standing.
    let mut acked = vec![0u16; keys.len()];
    for g in c.acks().iter().filter(|g| g.t == AckType::LeaseRenew) {
        let i = keys.iter().position(|k| k[..] == g.key[..]).unwrap();
        acked[i] = acked[i].max(g.seq);
    }
    assert!(acked[..12].iter().all(|&a| a > 0), "{acked:?}");
    // The chain serves again after each failure: the last writes commit.
    assert_eq!(acked[12..], seq[12..], "writes stalled");
    let w = c.store(1).worker(1).unwrap();
    for (i, k) in keys.iter().enumerate() {
        let r = w.record(k).unwrap_or_else(|| panic!("key {i} lost"));
        assert!(
            r.last_seq >= acked[i],
            "key {i}: acked {} but the survivor has {}",
            acked[i],
            r.last_seq
        );
        assert_eq!(r.value, r.last_seq.to_be_bytes().repeat(2), "key {i}");
    }
    for i in 0..3 {
        assert_eq!(c.store(i).stats().invariant_violations, 0, "store {i}");
    }
}

#[test]
fn lossy_chain_links_still_commit_every_write_in_order() {
    let mut c = chain_sim(2_000);
    // Rebuild with loss between the hub and the middle/tail.
    let mut sim = Simulation::new(11, MILLIS);
    let mut stores = Vec::new();
    for ip in CHAIN {
        let mut cfg = StoreConfig::new(ip, vec![kv_worker()]);
        cfg.chain = CHAIN.to_vec();
        stores.push(sim.add_node(
            &format!("store{ip}"),
            Box::new(StoreServer::new(cfg).unwrap()),
        ));
    }
    let client = sim.add_node("switch", Box::new(Client::default()));
    let mut routes: Vec<(Ipv4Addr, PortId)> = CHAIN
        .iter()
        .enumerate()
        .map(|(i, &ip)| (ip, i as PortId))
        .collect();
    routes.push((S1, 3));
    let hub = sim.add_node(
        "hub",
        Box::new(Hub {
            routes,
            cut: Vec::new(),
        }),
    );
    let clean = ChannelConfig {
        delay: 2_000,
        ..ChannelConfig::default()
    };
    let lossy = ChannelConfig {
        loss: inca_sim::link::LossModel::Bernoulli { p: 0.05 },
        duplicate: 0.01,
        reorder: 0.05,
        ..clean
    };
    for (i, &s) in stores.iter().enumerate() {
        let l = if i == 0 { clean } else { lossy };
        sim.connect(&format!("l{i}"), (s, 0), (hub, i as PortId), l, l)
            .unwrap();
    }
    sim.connect("lc", (client, 0), (hub, 3), clean, clean)
        .unwrap();
    c.sim = sim;
    c.stores = stores;
    c.client = client;
    c.send(1000, req(S1, ReqType::LeaseNew, 0, &KEY, &[0; 4], b""));
    for s in 1..=200u16 {
        c.send(
            100_000 + u64::from(s) * 3000,
            req(
                S1,
                ReqType::LeaseRenew,
                s,
                &KEY,
                &s.to_be_bytes().repeat(2),
                b"",
            ),
        );
    }
    c.sim.run_until(20 * MILLIS, |_| {});
    let writes: Vec<u16> = c
        .acks()
        .iter()
        .filter(|g| g.t == AckType::LeaseRenew)
        .map(|g| g.seq)
        .collect();
    assert_eq!(writes, (1..=200).collect::<Vec<_>>());
    assert!(
        c.store(0).stats().chain_resends > 0,
        "loss never exercised the resend path"
    );
    let d0 = c.store(0).worker(1).unwrap().dump();
    assert_eq!(d0, c.store(1).worker(1).unwrap().dump());
    assert_eq!(d0, c.store(2).worker(1).unwrap().dump());
}

#[test]
fn config_deserialises_from_snake_case_toml_like_json() {
    let cfg: StoreConfig = serde_json::from_str(
        r#"{"ip":"10.9.0.1","mac":[2,0,0,0,0,1],"gateway_mac":[2,0,0,0,0,2],
            "workers":[{"worker":1,"app":"nat","public_ip":"100.64.0.1","shard":0,"shards":2},
                       {"worker":2,"app":"sync_counter"},
                       {"worker":3,"app":"heavy_hitter","rows":4}],
            "chain":["10.9.0.1","10.9.0.2","10.9.0.3"],"chain_enabled":true,
            "lease_period":1000000000,"service_time":250,"allowed_switches":["10.1.0.1"]}"#,
    )
    .unwrap();
    let s = StoreServer::new(cfg).unwrap();
    assert_eq!(s.worker(2).unwrap().widths(), (13, 4));
    assert_eq!(s.worker(3).unwrap().widths(), (3, 16));
    let bad: StoreConfig =
        serde_json::from_str(r#"{"ip":"10.9.0.1","workers":[{"worker":0,"app":"kv"}]}"#).unwrap();
    let e = StoreServer::new(bad).err().unwrap();
    assert_eq!(
        e,
        StoreError::Config(StoreConfigError::WorkerNumber { worker: 0 })
    );
    assert_eq!(e.to_string(), "workers: worker 0 is not in 1..=63");
    let outsider: StoreConfig =
        serde_json::from_str(r#"{"ip":"10.9.0.9","workers":[],"chain":["10.9.0.1"]}"#).unwrap();
    assert_eq!(
        StoreServer::new(outsider).err().unwrap().to_string(),
        "chain: does not contain this server's ip 10.9.0.9"
    );
    assert!(
        serde_json::from_str::<StoreConfig>(r#"{"ip":"10.9.0.1","workers":[],"bogus":1}"#).is_err()
    );
}

#[test]
fn workers_serve_in_parallel_and_port_times_never_go_back() {
    let w2 = WorkerConfig {
        worker: 2,
        ..kv_worker()
    };
    let mut h = store(vec![kv_worker(), w2]);
    for i in 0..20u8 {
        h.send(
            1000,
            0,
            req(S1, ReqType::LeaseNew, 0, &[0, 0, 1, i], &[0; 4], b""),
        );
    }
    // Worker 2 is idle: its reply is not stuck behind worker 1's backlog.
    let ep = rp_endpoints([2; 6], S1, [3; 6], ST, 9);
    let r = RequestRepr {
        req_type: ReqType::LeaseNew,
        seq: 0,
        key: &KEY,
        value: &[0; 4],
        piggyback: b"",
    };
    h.send(1100, 0, build_request_frame(&ep, 8002, &r).unwrap());
    h.advance_to(MILLIS);
    let t = h.take();
    assert_eq!(t.len(), 21);
    assert!(
        t.windows(2).all(|w| w[0].at <= w[1].at),
        "port times went back"
    );
    let w2_at = t
        .iter()
        .find(|x| parse_udp_frame(&x.frame).unwrap().src_port == 8002)
        .unwrap()
        .at;
    assert!(w2_at <= 1100 + 2 * 250, "worker 2 reply at {w2_at}");
    assert_eq!(t.last().unwrap().at, 1000 + 20 * 250);
}

/// A joiner whose source dies in the middle of the copy gives the copy up,
/// leaves, and rejoins behind the next tail with a complete copy; nothing
/// is committed on its behalf meanwhile.
#[test]
fn a_joiner_whose_source_dies_mid_copy_starts_over() {
    let mut c = chain_sim(5_000);
    // 20,000 keys: a copy of several hundred chunks.
    let n = 20_000u32;
    for i in 0..n {
        let k = (0x0100_0000 | i).to_be_bytes();
        c.send(
            MILLIS + u64::from(i) * 300,
            req(S1, ReqType::LeaseNew, 0, &k, &[0; 4], b""),
        );
    }
    c.sim.schedule(10 * MILLIS, Fault::Crash(c.stores[1]));
    c.sim.schedule(20 * MILLIS, Fault::Restart(c.stores[1]));
    // Step until the tail admits the restarted middle, then kill the tail.
    let mut t = 20 * MILLIS;
    while c.store(2).stats().joins_admitted == 0 {
        t += 2_000;
        assert!(t < 200 * MILLIS, "never admitted");
        c.sim.run_until(t, |_| {});
    }
    c.sim.schedule(t + 20_000, Fault::Crash(c.stores[2]));
    c.sim.run_until(t + 20_000, |_| {});
    assert_eq!(c.store(1).stats().rejoins, 0, "the copy finished too soon");
    assert!(c.store(1).stats().sync_chunks_received > 0);
    c.sim.run_until(t + 200 * MILLIS, |_| {});
    let s = c.store(1).stats();
    assert_eq!((s.syncs_abandoned, s.rejoins), (1, 1), "{s:?}");
    assert_eq!(c.store(0).stats().joins_admitted, 1);
    assert_eq!(c.store(0).chain_view(), vec![CHAIN[0], CHAIN[1]]);
    assert_eq!(c.store(1).chain_view(), vec![CHAIN[0], CHAIN[1]]);
    let d = c.store(0).worker(1).unwrap().dump();
    assert_eq!(d.len(), n as usize);
    assert_eq!(c.store(1).worker(1).unwrap().dump(), d);
    assert_eq!(
        c.store(1).worker(1).unwrap().update_ids(),
        c.store(0).worker(1).unwrap().update_ids()
    );
    // And it serves as the tail: a write commits through it.
    let k = 0x0100_0005u32.to_be_bytes();
    c.send(
        c.sim.now() + MILLIS,
        req(S1, ReqType::LeaseRenew, 1, &k, &[9; 4], b"after"),
    );
    c.sim.run_until(c.sim.now() + 5 * MILLIS, |_| {});
    assert!(c.acks().iter().any(|g| g.pkt == b"after"));
    assert_eq!(
        c.store(1).worker(1).unwrap().record(&k).unwrap().value,
        vec![9; 4]
    );
}

/// Issue 8 / §5.6: leases never give a flow two owners. Three switches
/// (S3 not in the stores' allowlist) act on three keys at random times —
/// asking for the lease when they hold none, writing or renewing when they
/// do, and sometimes writing with a stale sequence number after their lease
/// lapsed — while the chain's head crashes and later rejoins. Each switch
/// tracks its lease the way §5.4 has it (valid from the grant's arrival
/// until its request's send time + LEASE_PERIOD − LEASE_GUARD, extended by
/// every ack, ended by LEASE_REJECT). At no time do two switches hold a
/// valid lease on one key; the lease does move between S1 and S2 (the
/// MIGRATE path after expiry), and S3 never hears a word.
#[test]
fn leases_never_give_a_key_two_owners_and_unlisted_switches_get_nothing() {
    const PERIOD: Nanos = 50 * MILLIS;
    const GUARD: Nanos = MILLIS;
    let keys: [[u8; 4]; 3] = [[0, 0, 9, 1], [0, 0, 9, 2], [0, 0, 9, 3]];
    let switches = [S1, S2, S3];
    let mut handovers = 0;
    for seed in 0..4u64 {
        let mut c = chain_sim_with(seed, 3_000, |cfg| cfg.lease_period = PERIOD);
        let mut rng = 0x9e37_79b9_7f4a_7c15_u64 ^ (seed + 1).wrapping_mul(0xff51_afd7_ed55_8ccd);
        let mut next = move |n: u64| {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng % n
        };
        // Per (switch, key): lease end as the switch sees it, next seq, and
        // its validity intervals [start, end).
        let mut end = [[0 as Nanos; 3]; 3];
        let mut seq = [[0u16; 3]; 3];
        let mut intervals: Vec<Vec<Vec<(Nanos, Nanos)>>> = vec![vec![Vec::new(); 3]; 3];
        let mut sent_at: Vec<Nanos> = Vec::new();
        let mut seen_acks = 0;
        let mut head = CHAIN[0];
        let crash_at = 1_200 * MILLIS;
        c.sim.schedule(crash_at, Fault::Crash(c.stores[0]));
        c.sim
            .schedule(crash_at + 300 * MILLIS, Fault::Restart(c.stores[0]));
        let mut now = MILLIS;
        while now < 3 * SECONDS {
            for (si, &sw) in switches.iter().enumerate() {
                if next(3) != 0 {
                    continue;
                }
                let ki = next(3) as usize;
                let valid = now < end[si][ki];
                let (t, s) = match (valid, next(10)) {
                    (true, 0..=6) => {
                        seq[si][ki] = seq_next(seq[si][ki]);
                        (ReqType::LeaseRenew, seq[si][ki])
                    }
                    (true, _) => (ReqType::LeaseRenew, 0),
                    // Adversarial: a write under a lease that has lapsed.
                    (false, 0..=1) if seq[si][ki] != 0 => (ReqType::LeaseRenew, seq[si][ki]),
                    (false, _) => (ReqType::LeaseNew, 0),
                };
                let ident = sent_at.len() as u16;
                sent_at.push(now);
                let ep = rp_endpoints([2, 0, 0, 0, 0, 1], sw, [2, 0, 0, 0, 0, 9], head, ident);
                let r = RequestRepr {
                    req_type: t,
                    seq: s,
                    key: &keys[ki],
                    value: &s.to_be_bytes().repeat(2),
                    piggyback: b"",
                };
                c.send(now, build_request_frame(&ep, PORT, &r).unwrap());
            }
            now += 200_000 + next(15 * MILLIS);
            c.sim.run_until(now, |_| {});
            if let Some(a) = c.announces().last() {
                head = a.new_head;
            }
            let acks = c.acks();
            for g in &acks[seen_acks..] {
                let si = switches.iter().position(|&s| s == g.to).unwrap();
                assert_ne!(
                    g.to, S3,
                    "seed {seed}: an unlisted switch was answered: {g:?}"
                );
                let ki = keys.iter().position(|k| k[..] == g.key[..]).unwrap();
                let sent = sent_at[usize::from(g.ident)];
                let cur = &mut intervals[si][ki];
                match g.t {
                    AckType::LeaseReject => {
                        if end[si][ki] > g.at {
                            end[si][ki] = g.at;
                            if let Some(last) = cur.last_mut() {
                                last.1 = last.1.min(g.at);
                            }
                        }
                        continue;
                    }
                    AckType::LeaseNew | AckType::LeaseMigrate => seq[si][ki] = g.seq,
                    _ => {}
                }
                let new_end = sent + PERIOD - GUARD;
                if g.at >= end[si][ki] {
                    if new_end > g.at {
                        cur.push((g.at, new_end));
                    }
                } else if let Some(last) = cur.last_mut() {
                    last.1 = last.1.max(new_end);
                }
                end[si][ki] = end[si][ki].max(new_end);
            }
            seen_acks = acks.len();
        }
        for ki in 0..3 {
            let mut all: Vec<(Nanos, Nanos, usize)> = intervals
                .iter()
                .enumerate()
                .flat_map(|(si, per_key)| per_key[ki].iter().map(move |&(a, b)| (a, b, si)))
                .collect();
            all.sort();
            for w in all.windows(2) {
                assert!(
                    w[1].0 >= w[0].1 || w[1].2 == w[0].2,
                    "seed {seed} key {ki}: switches {} and {} both held the lease: {:?} and {:?}",
                    w[0].2,
                    w[1].2,
                    w[0],
                    w[1]
                );
                if w[1].2 != w[0].2 {
                    handovers += 1;
                }
            }
        }
        assert!(c.store(1).stats().from_unknown_switch > 0, "seed {seed}");
        assert!(
            !c.sim
                .node::<Client>(c.client)
                .unwrap()
                .got
                .iter()
                .any(|(_, f)| { parse_udp_frame(f).is_ok_and(|i| i.dst_ip == S3) }),
            "seed {seed}: a frame went to the unlisted switch"
        );
        assert_eq!(c.store(0).chain_view(), vec![CHAIN[1], CHAIN[2], CHAIN[0]]);
        for i in 0..3 {
            assert_eq!(c.store(i).stats().invariant_violations, 0);
        }
    }
    assert!(handovers >= 10, "the lease hardly moved: {handovers}");
}

/// A chain whose middle and tail links have loss, duplication and reordering.
fn impaired_chain_sim(seed: u64, loss: f64) -> ChainSim {
    let mut sim = Simulation::new(seed, MILLIS);
    let mut stores = Vec::new();
    for ip in CHAIN {
        let mut cfg = StoreConfig::new(ip, vec![kv_worker()]);
        cfg.chain = CHAIN.to_vec();
        stores.push(sim.add_node(
            &format!("store{ip}"),
            Box::new(StoreServer::new(cfg).unwrap()),
        ));
    }
    let client = sim.add_node("switch", Box::new(Client::default()));
    let mut routes: Vec<(Ipv4Addr, PortId)> = CHAIN
        .iter()
        .enumerate()
        .map(|(i, &ip)| (ip, i as PortId))
        .collect();
    routes.push((S1, 3));
    let hub = sim.add_node(
        "hub",
        Box::new(Hub {
            routes,
            cut: Vec::new(),
        }),
    );
    let clean = ChannelConfig {
        delay: 2_000,
        ..ChannelConfig::default()
    };
    let bad = ChannelConfig {
        loss: inca_sim::link::LossModel::Bernoulli { p: loss },
        duplicate: 0.01,
        reorder: 0.05,
        reorder_delay: 20_000,
        jitter: 1_000,
        ..clean
    };
    for (i, &s) in stores.iter().enumerate() {
        // The head's link stays clean, so every write and ack between the
        // switch and the head gets through and the chain's loss handling is
        // what is tested (lost switch traffic may lose outputs, §9.16).
        let l = if i == 0 { clean } else { bad };
        sim.connect(&format!("l{i}"), (s, 0), (hub, i as PortId), l, l)
            .unwrap();
    }
    sim.connect("lc", (client, 0), (hub, 3), clean, clean)
        .unwrap();
    ChainSim {
        sim,
        stores,
        client,
        hub,
    }
}

/// §6.2.3 and §6.2.5 under impairments and a middle or tail crash and
/// restart: every write that reaches the head is acked exactly in order,
/// each ack leaves only after the tail has applied it, the restarted
/// replica rejoins (its copy crossing the lossy links while writes go on)
/// and all three replicas agree.
#[test]
fn short_chain_fault_campaign() {
    for seed in 0..12u64 {
        let loss = [0.0, 0.01, 0.05][seed as usize % 3];
        let mut c = impaired_chain_sim(seed, loss);
        let victim = 1 + (seed as usize % 2); // middle or tail
        let crash_at = (2 + seed) * MILLIS;
        c.sim.schedule(crash_at, Fault::Crash(c.stores[victim]));
        // Back before or after the others notice it died.
        let down = [5, 45][seed as usize / 2 % 2] * MILLIS;
        c.sim
            .schedule(crash_at + down, Fault::Restart(c.stores[victim]));
        // Requests on the head's own link can be lost too. The lease request
        // is retried until granted (each grant re-fences, so use the last);
        // every write is sent 3 times, which the store must treat as
        // duplicates.
        let mut base = None;
        for attempt in 0..20u64 {
            c.send(
                attempt * MILLIS + 1000,
                req(S1, ReqType::LeaseNew, 0, &KEY, &[0; 4], b""),
            );
            c.sim.run_until((attempt + 1) * MILLIS, |_| {});
            base = c
                .acks()
                .iter()
                .rev()
                .find(|g| g.t != AckType::LeaseReject)
                .map(|g| g.seq);
            if base.is_some() {
                break;
            }
        }
        let base = base.unwrap_or_else(|| panic!("seed {seed}: no grant"));
        let start = c.sim.now();
        let n = 150u16;
        for s in 1..=n {
            let seq = base + s;
            let f = req(
                S1,
                ReqType::LeaseRenew,
                seq,
                &KEY,
                &seq.to_be_bytes().repeat(2),
                b"w",
            );
            for r in 0..3u64 {
                c.send(start + u64::from(s) * 600_000 + r * 7_000, f.clone());
            }
        }
        c.sim.run_until(200 * MILLIS, |_| {});
        let acked: std::collections::BTreeSet<u16> = c
            .acks()
            .iter()
            .filter(|g| g.t == AckType::LeaseRenew)
            .map(|g| g.seq)
            .collect();
        let expect: std::collections::BTreeSet<u16> = (1..=n).map(|s| base + s).collect();
        assert_eq!(acked, expect, "seed {seed}: writes never acked");
        assert!(
            c.acks().iter().all(|g| g.t != AckType::LeaseReject),
            "seed {seed}: a write was rejected"
        );
        assert_eq!(c.store(victim).stats().rejoins, 1, "seed {seed}");
        let d0 = c.store(0).worker(1).unwrap().dump();
        for i in 0..3 {
            assert_eq!(
                c.store(i).worker(1).unwrap().dump(),
                d0,
                "seed {seed}: replicas differ"
            );
            assert_eq!(c.store(i).stats().invariant_violations, 0);
            let mut expect = CHAIN.to_vec();
            expect.retain(|&a| a != CHAIN[victim]);
            expect.push(CHAIN[victim]);
            assert_eq!(
                c.store(i).chain_view(),
                expect,
                "seed {seed}: view of store {i}"
            );
            assert_eq!(
                c.store(i).worker(1).unwrap().update_ids(),
                c.store(0).worker(1).unwrap().update_ids(),
                "seed {seed}: store {i}'s log is not the head's"
            );
        }
        assert_eq!(d0[0].2, base + n);
    }
}

/// A 2-node chain whose members stop hearing each other (both ways) and
/// later hear each other again: only the head's side goes on (it removes
/// the tail and commits alone), the tail neither takes over nor commits,
/// and after the heal the tail learns it is out, drops its state and
/// rejoins through the state copy, so the chain re-forms with the head's
/// data. Before the quorum rule both removed the other, both acted as
/// head, and the merged view counted both out: the chain never re-formed.
#[test]
fn a_partitioned_two_node_chain_keeps_one_head_and_reforms_after_the_heal() {
    let pair = [CHAIN[0], CHAIN[1]];
    let mut c = chain_of(&pair, 7, 5_000, |cfg| StoreServer::new(cfg).unwrap());
    let k = [0, 0, 9, 1];
    c.send(MILLIS, req(S1, ReqType::LeaseNew, 0, &k, &[0; 4], b""));
    // A write every 2 ms to the head, from before the cut to after the heal.
    let mut seq = 0u16;
    let mut t = 2 * MILLIS;
    while t < 300 * MILLIS {
        seq += 1;
        let v = seq.to_be_bytes().repeat(2);
        c.send(t, req(S1, ReqType::LeaseRenew, seq, &k, &v, b"w"));
        t += 2 * MILLIS;
    }
    // The tail is asked too, mid-partition: it must not answer as a head.
    c.send(
        80 * MILLIS,
        req_to(CHAIN[1], S1, ReqType::LeaseRenew, 999, &k, &[9; 4], b"tail"),
    );
    c.cut(20 * MILLIS, CHAIN[0], CHAIN[1], false);
    c.sim.run_until(100 * MILLIS, |_| {});
    assert_eq!(c.store(0).chain_view(), vec![CHAIN[0]]);
    assert!(c.store(0).is_head());
    assert_eq!(
        c.store(1).chain_view(),
        pair.to_vec(),
        "the tail kept waiting"
    );
    assert!(!c.store(1).is_head());
    assert_eq!(c.store(1).stats().became_head, 0);
    // The head alone commits: writes sent after its removal of the tail
    // (about 50 ms) are acknowledged.
    let acked_at = |c: &ChainSim, after: Nanos| {
        c.acks()
            .iter()
            .filter(|g| g.t == AckType::LeaseRenew && g.at > after)
            .count()
    };
    assert!(acked_at(&c, 60 * MILLIS) > 10);
    assert!(!c.acks().iter().any(|g| g.pkt == b"tail"));
    // No announcement ever named the tail as head.
    assert!(c.announces().iter().all(|a| a.new_head != CHAIN[1]));

    c.cut(120 * MILLIS, CHAIN[0], CHAIN[1], true);
    c.sim.run_until(300 * MILLIS, |_| {});
    assert_eq!(c.store(0).chain_view(), pair.to_vec());
    assert_eq!(c.store(1).chain_view(), pair.to_vec());
    assert_eq!(c.store(1).stats().rejoins, 1);
    assert_eq!(c.store(0).stats().joins_admitted, 1);
    assert!(c.announces().iter().all(|a| a.new_head != CHAIN[1]));
    c.sim.run_until(310 * MILLIS, |_| {});
    // The re-formed chain commits through the tail, and both hold the
    // head's data: the last write, acknowledged.
    let last = c
        .acks()
        .iter()
        .filter(|g| g.t == AckType::LeaseRenew)
        .map(|g| g.seq)
        .max()
        .unwrap();
    assert_eq!(last, seq, "writes after the re-form commit");
    let d = c.store(0).worker(1).unwrap().dump();
    assert_eq!(c.store(1).worker(1).unwrap().dump(), d);
    let r = c.store(1).worker(1).unwrap().record(&k).unwrap();
    assert_eq!(
        (r.last_seq, r.value.clone()),
        (seq, seq.to_be_bytes().repeat(2))
    );
    for i in 0..2 {
        assert_eq!(c.store(i).stats().invariant_violations, 0, "store {i}");
    }
}
