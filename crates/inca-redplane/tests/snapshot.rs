//! Bounded-inconsistency mode (spec §5.9): the lazy snapshot against its
//! reference, the generator validator, replication with ack counting and
//! the retransmission loop, the ε monitor, and restore after a crash.

use std::net::Ipv4Addr;

use inca_redplane::snapshot::apps::{AsyncCounter, HeavyHitterSketch};
use inca_redplane::snapshot::config::{validate_generator, EpsilonAction, SnapshotConfig};
use inca_redplane::snapshot::lazy::{LazyArray, LazyReference};
use inca_redplane::snapshot::observer::{check_snapshots, SnapEvent, SnapshotRecorder};
use inca_redplane::snapshot::program::{BoundedSwitch, MSG_WITHDRAW};
use inca_switch::harness::{Harness, Transmitted};
use inca_switch::{
    AccessError, DataPlane, Declare, DeclareError, Gress, PacketCtx, ParseError, Profile, Program,
    Switch,
};
use inca_wire::builder::{build_udp_frame, Endpoints};
use inca_wire::ethernet::VlanTag;
use inca_wire::redplane::{
    build_ack_frame, parse_udp_frame, rp_endpoints, AckRepr, AckType, ReqType, Request,
};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

// ---------------------------------------------------------------------------
// The lazy snapshot against its reference
// ---------------------------------------------------------------------------

/// A probe program around one [`LazyArray`]: frame byte 0 is the op (0
/// update, 1 snapshot), bytes 1–2 the index, byte 3 the flip flag, bytes
/// 4–7 the increment. Snapshot results are kept in order.
#[derive(Clone)]
struct Probe {
    n: usize,
    arr: Option<LazyArray>,
    snaps: Vec<(usize, u32)>,
    updates: Vec<u32>,
}

impl Program for Probe {
    type Meta = [u8; 8];
    type Digest = ();
    fn name(&self) -> &str {
        "lazy_probe"
    }
    fn declare(&mut self, d: &mut Declare) -> Result<(), DeclareError> {
        self.arr = Some(LazyArray::declare(d, "probe", self.n, &[])?);
        Ok(())
    }
    fn parse(&self, _g: Gress, h: &[u8], m: &mut [u8; 8]) -> Result<(), ParseError> {
        let b = h.get(..8).ok_or(ParseError("short"))?;
        m.copy_from_slice(b);
        Ok(())
    }
    fn ingress(
        &mut self,
        pkt: &mut PacketCtx<[u8; 8], ()>,
        dp: &mut DataPlane<'_>,
    ) -> Result<(), AccessError> {
        let m = pkt.meta;
        let arr = self.arr.unwrap();
        let i = u16::from_be_bytes([m[1], m[2]]) as u64;
        let u = u32::from_be_bytes([m[4], m[5], m[6], m[7]]);
        if m[0] == 0 {
            self.updates.push(arr.update(dp, i, u)?);
        } else {
            let v = arr.snapshot(dp, i, m[3] == 1)?;
            self.snaps.push((i as usize, v));
        }
        Ok(())
    }
}

fn op(kind: u8, i: usize, flip: bool, u: u32) -> Vec<u8> {
    let mut f = vec![0u8; 64];
    f[0] = kind;
    f[1..3].copy_from_slice(&(i as u16).to_be_bytes());
    f[3] = u8::from(flip);
    f[4..8].copy_from_slice(&u.to_be_bytes());
    f
}

/// Random interleavings of updates and complete bursts: every snapshot value
/// equals the reference array at the flip, every update returns the
/// reference's new value, and no access rule is broken.
#[test]
fn lazy_snapshot_equals_array_at_flip() {
    for seed in 0..40u64 {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let n = rng.gen_range(1..40usize);
        let probe = Probe {
            n,
            arr: None,
            snaps: Vec::new(),
            updates: Vec::new(),
        };
        let sw = Switch::new(Profile::tofino(), probe).unwrap();
        let mut h = Harness::new(sw, seed);
        let mut reference = LazyReference::new(n);
        let mut expect_snaps = Vec::new();
        let mut expect_updates = Vec::new();
        let mut t = 1_000u64;
        for _burst in 0..rng.gen_range(1..8) {
            // Updates between bursts.
            for _ in 0..rng.gen_range(0..30) {
                let (i, u) = (rng.gen_range(0..n), rng.gen_range(0..1000u32));
                h.send(t, 0, op(0, i, false, u));
                expect_updates.push(reference.update(i, u).unwrap());
                t += 10;
            }
            // A burst visiting every index in order, updates interleaved.
            reference.flip();
            for j in 0..n {
                h.send(t, 0, op(1, j, j == 0, 0));
                expect_snaps.push((j, reference.snapshot(j).unwrap()));
                t += 10;
                for _ in 0..rng.gen_range(0..4) {
                    let (i, u) = (rng.gen_range(0..n), rng.gen_range(1..1000u32));
                    h.send(t, 0, op(0, i, false, u));
                    expect_updates.push(reference.update(i, u).unwrap());
                    t += 10;
                }
            }
        }
        let sw = &h.device;
        assert!(
            sw.violations().is_empty(),
            "seed {seed}: {:?}",
            sw.violations()
        );
        assert_eq!(sw.program().snaps, expect_snaps, "seed {seed}");
        assert_eq!(sw.program().updates, expect_updates, "seed {seed}");
        let arr = sw.program().arr.unwrap();
        for i in 0..n {
            assert_eq!(
                arr.current(sw.objects(), i as u64),
                Some(reference.values[i]),
                "seed {seed} index {i}"
            );
        }
    }
}

/// The precondition matters: a burst that skips an index leaves it stale, so
/// the next burst's snapshot of it is wrong — the reference test above could
/// fail.
#[test]
fn incomplete_burst_breaks_the_snapshot() {
    let probe = Probe {
        n: 2,
        arr: None,
        snaps: Vec::new(),
        updates: Vec::new(),
    };
    let mut h = Harness::new(Switch::new(Profile::tofino(), probe).unwrap(), 1);
    h.send(10, 0, op(0, 1, false, 5)); // entry 1 = 5
    h.send(20, 0, op(1, 0, true, 0)); // flip; the burst never reaches entry 1
    h.send(30, 0, op(1, 0, true, 0)); // flip again
    h.send(40, 0, op(1, 1, false, 0)); // entry 1's snapshot: should be 5
    let snaps = &h.device.program().snaps;
    assert_eq!(
        snaps.last(),
        Some(&(1, 0)),
        "the broken precondition shows: {snaps:?}"
    );
}

// ---------------------------------------------------------------------------
// Generator validation
// ---------------------------------------------------------------------------

#[test]
fn generator_validator_enforces_the_lazy_precondition() {
    let tofino = Profile::tofino();
    let cfg = SnapshotConfig::default();
    let plan = validate_generator(&tofino, &cfg, 64, 16, 80).unwrap();
    assert_eq!(plan.batch, 1024);
    assert!(plan.burst_time < cfg.t_snap);
    // Too many packets for 16-bit packet ids.
    assert!(validate_generator(&tofino, &cfg, 1024, 64, 80).is_err());
    // A period shorter than the burst's time through the pipeline.
    let fast = SnapshotConfig {
        t_snap: 1_000,
        epsilon: 3_000,
        ..cfg.clone()
    };
    let e = validate_generator(&tofino, &fast, 64, 16, 80).unwrap_err();
    assert!(e.contains("overlap"), "{e}");
    // ε must exceed T_snap.
    let bad = SnapshotConfig {
        epsilon: cfg.t_snap,
        ..cfg.clone()
    };
    assert!(validate_generator(&tofino, &bad, 64, 16, 80).is_err());
    // A profile without a generator.
    assert!(validate_generator(&Profile::smartnic(), &cfg, 64, 16, 80).is_err());
    // The program refuses to start its stream when the plan fails.
    let sw = BoundedSwitch::new(HeavyHitterSketch::new(3, (1..=16).collect(), 10), fast)
        .for_profile(&tofino);
    let mut h = Harness::new(Switch::new(tofino, sw).unwrap(), 1);
    h.advance_to(5_000_000);
    assert!(h.device.program().config_error().is_some());
    assert_eq!(h.device.stats().generated, 0);
}

// ---------------------------------------------------------------------------
// One HH switch against a scripted store
// ---------------------------------------------------------------------------

const STORE_PORT: u16 = 2;

fn cfg() -> SnapshotConfig {
    SnapshotConfig {
        t_snap: 1_000_000,
        epsilon: 3_000_000,
        ..SnapshotConfig::default()
    }
}

fn data_frame(vlan: u16, sport: u16) -> Vec<u8> {
    let ep = Endpoints {
        vlan: Some(VlanTag {
            pcp: 0,
            dei: false,
            vid: vlan,
        }),
        ..Endpoints::new(
            [2, 0, 0, 0, 1, 1],
            Ipv4Addr::new(10, 1, 0, 1),
            [2, 0, 0, 0, 1, 2],
            Ipv4Addr::new(10, 2, 0, 1),
        )
    };
    build_udp_frame(&ep, sport, 80, &[0u8; 18], false).unwrap()
}

struct Req {
    t: ReqType,
    seq: u16,
    key: Vec<u8>,
    value: Vec<u8>,
    piggyback: Vec<u8>,
    ident: u16,
}

fn requests(out: &[Transmitted], k: usize, v: usize) -> Vec<Req> {
    out.iter()
        .filter(|t| t.port == STORE_PORT)
        .filter_map(|t| {
            let info = parse_udp_frame(&t.frame).ok()?;
            let r = Request::new_checked(info.payload, k, v).ok()?;
            Some(Req {
                t: r.req_type().ok()?,
                seq: r.seq(),
                key: r.key().to_vec(),
                value: r.value().to_vec(),
                piggyback: r.piggyback().to_vec(),
                ident: info.ident,
            })
        })
        .collect()
}

fn ack_frame(
    c: &SnapshotConfig,
    t: AckType,
    seq: u16,
    key: &[u8],
    value: &[u8],
    piggy: &[u8],
    ident: u16,
) -> Vec<u8> {
    let ep = rp_endpoints(c.store_mac, c.store_ip, c.switch_mac, c.switch_ip, ident);
    build_ack_frame(
        &ep,
        c.store_udp,
        &AckRepr {
            ack_type: t,
            seq,
            key,
            value,
            piggyback: piggy,
        },
    )
    .unwrap()
}

type Hh = Switch<BoundedSwitch<HeavyHitterSketch>>;

/// Boots an HH switch with VLANs 1 and 2, sends one packet of VLAN 1, and
/// answers its LEASE_NEW with a restore of epoch 7 whose entry j holds
/// (j, 2j, 3j); returns the harness after the install has taken effect.
fn leased_switch(c: SnapshotConfig, rec: Option<SnapshotRecorder>) -> Harness<Hh> {
    let app = HeavyHitterSketch::new(3, vec![1, 2], 1_000);
    let mut prog = BoundedSwitch::new(app, c.clone());
    if let Some(r) = rec {
        prog = prog.with_recorder(r);
    }
    let mut h = Harness::new(Switch::new(Profile::tofino(), prog).unwrap(), 7);
    h.advance_to(500_000);
    let pkt = data_frame(1, 1234);
    h.send(500_000, 0, pkt);
    h.advance_to(510_000);
    let reqs = requests(&h.take(), 3, 12);
    let lease: Vec<&Req> = reqs.iter().filter(|r| r.t == ReqType::LeaseNew).collect();
    assert_eq!(
        lease.len(),
        1,
        "the first packet without a lease asks for one"
    );
    assert_eq!(lease[0].key, vec![0, 1, 0]);
    assert!(
        !lease[0].piggyback.is_empty(),
        "LEASE_NEW carries the packet"
    );
    let ident = lease[0].ident;
    let piggy = lease[0].piggyback.clone();
    for j in 0..64u32 {
        let mut v = Vec::new();
        for r in 1..=3u32 {
            v.extend_from_slice(&(j * r).to_be_bytes());
        }
        let p = if j == 63 { piggy.as_slice() } else { &[] };
        h.send(
            520_000 + u64::from(j) * 100,
            STORE_PORT,
            ack_frame(
                &c,
                AckType::SnapshotRestore,
                7,
                &[0, 1, j as u8],
                &v,
                p,
                ident,
            ),
        );
    }
    // 192 pair writes + 3 at ~52.6 µs each through the control channel:
    // wait until the lease (written last) has taken effect.
    let lease = h.device.program().lease_register().unwrap();
    let mut t = 600_000;
    while h.device.objects().register_peek(lease, 0).unwrap().lo == 0 {
        t += 100_000;
        assert!(t < 50_000_000, "the restore never installed the lease");
        h.advance_to(t);
    }
    assert_eq!(h.device.program().stats().restores, 1);
    h
}

#[test]
fn restore_installs_both_copies_and_the_waiting_packet_counts() {
    let mut h = leased_switch(cfg(), None);
    // The waiting packet is re-injected after the install's read-back.
    h.advance_to(h.now() + 500_000);
    let sw = &h.device;
    let prog = sw.program();
    let app = prog.app();
    let key = {
        let f = data_frame(1, 1234);
        let p = inca_apps::headers::parse(&f).unwrap();
        p.five_tuple()
    };
    // The re-injected packet was counted on top of the restored values.
    for r in 0..3 {
        let j = app.index_of(r, &key);
        let v = prog.rows()[r].current(sw.objects(), j).unwrap();
        assert_eq!(v, j as u32 * (r as u32 + 1) + 1, "row {r}");
    }
    assert_eq!(prog.stats().updates, 1);
    assert!(sw.violations().is_empty(), "{:?}", sw.violations());
}

#[test]
fn snapshots_replicate_acks_commit_and_loop_copies_stop() {
    let c = cfg();
    let mut h = leased_switch(c.clone(), None);
    // Over the next bursts: VLAN 1 only (VLAN 2 has no lease), epoch 8
    // first (the burst after the restore is skipped to align). A store
    // that answers within 10 µs.
    let mut t = h.now();
    let mut seen: Vec<Vec<Req>> = Vec::new();
    for _ in 0..50 {
        t += 100_000;
        h.advance_to(t);
        let reqs = requests(&h.take(), 3, 12);
        for r in &reqs {
            assert_eq!(r.t, ReqType::Snapshot);
            assert_eq!(
                &r.key[..2],
                &[0, 1],
                "only the leased partition is replicated"
            );
            h.send(
                t + 10_000,
                STORE_PORT,
                ack_frame(&c, AckType::Snapshot, r.seq, &r.key, &[], &[], r.ident),
            );
        }
        if !reqs.is_empty() {
            seen.push(reqs);
        }
    }
    let epochs: Vec<Vec<u16>> = seen
        .iter()
        .map(|b| {
            let mut e: Vec<u16> = b.iter().map(|r| r.seq).collect();
            e.dedup();
            e
        })
        .collect();
    let flat: Vec<u16> = epochs.into_iter().flatten().collect();
    assert!(
        flat.windows(2).all(|w| w[1] == w[0] + 1),
        "epochs consecutive: {flat:?}"
    );
    assert_eq!(flat.first(), Some(&8), "continues the restored epoch 7");
    for b in seen.iter().filter(|b| !b.is_empty()) {
        let desc: Vec<(u16, u8)> = b.iter().map(|r| (r.seq, r.key[2])).collect();
        assert_eq!(b.len(), 64, "a whole partition per burst: {desc:?}");
        // The snapshot of entry j: restored (j, 2j, 3j), plus the one packet.
        for r in b {
            let j = r.key[2] as u32;
            let v: Vec<u32> = r
                .value
                .chunks(4)
                .map(|c| u32::from_be_bytes([c[0], c[1], c[2], c[3]]))
                .collect();
            for (row, &x) in v.iter().enumerate() {
                let base = j * (row as u32 + 1);
                assert!(x == base || x == base + 1, "entry {j} row {row}: {x}");
            }
        }
    }
    let s = h.device.program().stats().clone();
    assert!(s.partition_commits >= 2, "{s:?}");
    assert!(s.epoch_commits >= 2, "{s:?}");
    assert_eq!(s.retransmissions, 0, "acked within the RTO: {s:?}");
    assert_eq!(s.generator_errors, 0);
    assert!(
        h.device.violations().is_empty(),
        "{:?}",
        h.device.violations()
    );
    // The last commit time is recent (units of 1.024 µs).
    let ts = h
        .device
        .objects()
        .register_peek(h.device.program().last_commit_register().unwrap(), 0)
        .unwrap();
    assert!(
        h.now() >> 10 >= u64::from(ts) && (h.now() >> 10) - u64::from(ts) < (2 * c.t_snap) >> 10
    );
}

#[test]
fn unacked_snapshots_retransmit_then_give_up_and_epsilon_withdraws() {
    let c = SnapshotConfig {
        max_retx: 3,
        action: EpsilonAction::DeclareFailed,
        ..cfg()
    };
    let mut h = leased_switch(c.clone(), None);
    h.take();
    // The store is gone: nothing is acked.
    let t0 = h.now();
    h.advance_to(t0 + 10 * c.t_snap);
    let s = h.device.program().stats().clone();
    assert!(s.retransmissions > 0, "{s:?}");
    assert!(s.gave_up > 0, "{s:?}");
    // Retransmissions carry the same epoch, key and value as the original.
    let reqs = requests(&h.take(), 3, 12);
    let first = reqs.iter().find(|r| r.key == vec![0, 1, 5]).unwrap();
    let again = reqs
        .iter()
        .filter(|r| r.key == vec![0, 1, 5] && r.seq == first.seq)
        .count();
    assert!(
        again >= 2,
        "entry 5 of epoch {} sent {again} times",
        first.seq
    );
    // The ε monitor fired and the partition was withdrawn.
    assert_eq!(s.epsilon_fired, 1, "{s:?}");
    assert!(h
        .messages
        .iter()
        .any(|m| m.kind == MSG_WITHDRAW && m.body == vec![0, 1]));
    let before = h.device.program().stats().withdrawn_drops;
    h.send(h.now() + 1000, 0, data_frame(1, 999));
    h.advance_to(h.now() + 10_000);
    assert_eq!(h.device.program().stats().withdrawn_drops, before + 1);
    assert!(
        requests(&h.take(), 3, 12).is_empty(),
        "a withdrawn partition neither forwards nor replicates"
    );
    // Another VLAN is unaffected: it asks for its lease.
    h.send(h.now() + 1000, 0, data_frame(2, 999));
    h.advance_to(h.now() + 10_000);
    assert_eq!(requests(&h.take(), 3, 12)[0].t, ReqType::LeaseNew);
}

#[test]
fn epsilon_alarm_only_reports() {
    let c = SnapshotConfig {
        action: EpsilonAction::Alarm,
        ..cfg()
    };
    let mut h = leased_switch(c.clone(), None);
    let t0 = h.now();
    h.advance_to(t0 + 6 * c.t_snap);
    assert_eq!(h.device.program().stats().epsilon_fired, 1);
    assert!(!h.messages.iter().any(|m| m.kind == MSG_WITHDRAW));
    let before = h.device.program().stats().updates;
    h.send(h.now() + 1000, 0, data_frame(1, 999));
    assert_eq!(
        h.device.program().stats().updates,
        before + 1,
        "still served"
    );
}

#[test]
fn async_counter_loads_and_asks_for_its_partition() {
    let prog = BoundedSwitch::new(AsyncCounter::default(), cfg());
    assert!(prog.plan().is_ok());
    let mut h = Harness::new(Switch::new(Profile::tofino(), prog).unwrap(), 3);
    let f = build_udp_frame(
        &Endpoints::new(
            [2, 0, 0, 0, 1, 1],
            Ipv4Addr::new(10, 1, 0, 1),
            [2, 0, 0, 0, 1, 2],
            Ipv4Addr::new(10, 2, 0, 1),
        ),
        5,
        6,
        &[0; 18],
        false,
    )
    .unwrap();
    h.send(100_000, 0, f);
    h.advance_to(110_000);
    let reqs = requests(&h.take(), 2, 4);
    assert_eq!(reqs.len(), 1);
    assert_eq!(
        (reqs[0].t, reqs[0].key.clone()),
        (ReqType::LeaseNew, vec![0, 0])
    );
}

// ---------------------------------------------------------------------------
// The checker
// ---------------------------------------------------------------------------

#[test]
fn checker_accepts_exact_recent_restores_and_rejects_others() {
    let a = Ipv4Addr::new(10, 0, 0, 1);
    let b = Ipv4Addr::new(10, 0, 0, 2);
    let flip = |epoch, at, v: u32| SnapEvent::Flip {
        switch: a,
        partition: 1,
        epoch,
        flip_at: at,
        values: vec![v; 4],
    };
    let commit = |epoch, at| SnapEvent::Committed {
        switch: a,
        partition: 1,
        epoch,
        at,
    };
    let restore = |epoch, at, v: u32| SnapEvent::Restored {
        switch: b,
        partition: 1,
        epoch,
        at,
        values: vec![v; 4],
    };
    let base = vec![
        SnapEvent::Restored {
            switch: a,
            partition: 1,
            epoch: 0,
            at: 0,
            values: vec![0; 4],
        },
        flip(1, 1_000_000, 5),
        commit(1, 1_050_000),
        flip(2, 2_000_000, 9),
        commit(2, 2_050_000),
        SnapEvent::Failure {
            switch: a,
            at: 2_500_000,
        },
    ];
    let mut ok = base.clone();
    ok.push(restore(2, 3_000_000, 9));
    let r = check_snapshots(&ok, 3_000_000, 1_000_000);
    assert!(r.violations.is_empty(), "{:?}", r.violations);
    assert_eq!(r.from_commits, 1);
    // Wrong values for the epoch.
    let mut wrong = base.clone();
    wrong.push(restore(2, 3_000_000, 8));
    assert_eq!(
        check_snapshots(&wrong, 3_000_000, 1_000_000)
            .violations
            .len(),
        1
    );
    // Too old: epoch 1 flipped 1.5 ms before the failure, ε + T_snap = 1 ms.
    let mut old = base.clone();
    old.push(restore(1, 3_000_000, 5));
    assert_eq!(check_snapshots(&old, 500_000, 500_000).violations.len(), 1);
    // ... unless the ε action fired before the failure.
    let mut acted = base.clone();
    acted.insert(
        5,
        SnapEvent::Epsilon {
            switch: a,
            partition: 1,
            at: 2_400_000,
            action: EpsilonAction::Alarm,
        },
    );
    acted.push(restore(1, 3_000_000, 5));
    assert!(check_snapshots(&acted, 500_000, 500_000)
        .violations
        .is_empty());
}

// ---------------------------------------------------------------------------
// Crash and restore through a real store, in the simulator
// ---------------------------------------------------------------------------

mod sim {
    use std::any::Any;

    use inca_redplane::store::{AppConfig, StoreConfig, StoreServer, WorkerConfig};
    use inca_sim::engine::{Fault, Node, Simulation};
    use inca_sim::link::ChannelConfig;
    use inca_sim::metrics::NodeReport;
    use inca_switch::{Device, DeviceRng, Input, Nanos, Output};

    use super::*;

    /// Sends scripted frames at scripted times; ignores what it receives.
    struct Script {
        frames: Vec<(Nanos, u16, Vec<u8>)>,
        next: usize,
    }

    impl Device for Script {
        fn start(&mut self, _now: Nanos, _rng: &mut DeviceRng, out: &mut Vec<Output>) {
            if let Some(f) = self.frames.first() {
                out.push(Output::Timer { at: f.0, token: 1 });
            }
        }
        fn handle(
            &mut self,
            now: Nanos,
            input: Input,
            _rng: &mut DeviceRng,
            out: &mut Vec<Output>,
        ) {
            if let Input::Timer { .. } = input {
                while let Some((at, port, frame)) = self.frames.get(self.next).cloned() {
                    if at > now {
                        out.push(Output::Timer { at, token: 1 });
                        break;
                    }
                    out.push(Output::Transmit {
                        at: now,
                        port,
                        frame,
                    });
                    self.next += 1;
                }
            }
        }
        fn restart(&mut self, _now: Nanos, _rng: &mut DeviceRng, _out: &mut Vec<Output>) {}
    }

    impl Node for Script {
        fn kind(&self) -> &'static str {
            "script"
        }
        fn report(&self, _now: Nanos) -> NodeReport {
            NodeReport::default()
        }
        fn as_any(&self) -> &dyn Any {
            self
        }
    }

    /// Port 2 faces the store; frames from it go to port 0 or 1 by
    /// destination IP; frames from 0 and 1 go to the store.
    struct Hub {
        ips: [Ipv4Addr; 2],
    }

    impl Device for Hub {
        fn handle(
            &mut self,
            now: Nanos,
            input: Input,
            _rng: &mut DeviceRng,
            out: &mut Vec<Output>,
        ) {
            let Input::Frame { port, frame } = input else {
                return;
            };
            let to = if port == 2 {
                match parse_udp_frame(&frame) {
                    Ok(i) if i.dst_ip == self.ips[0] => 0,
                    Ok(i) if i.dst_ip == self.ips[1] => 1,
                    _ => return,
                }
            } else {
                2
            };
            out.push(Output::Transmit {
                at: now + 1_000,
                port: to,
                frame,
            });
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

    fn link(
        sim: &mut Simulation,
        name: &str,
        a: (inca_sim::engine::NodeId, u16),
        b: (inca_sim::engine::NodeId, u16),
    ) {
        let c = ChannelConfig {
            delay: 2_000,
            ..ChannelConfig::default()
        };
        sim.connect(name, a, b, c, c).unwrap();
    }

    /// Switch A serves VLAN 1, replicating to a real store; it crashes; the
    /// traffic moves to switch B, which gets the partition once A's lease
    /// lapses at the store, restored from A's last committed snapshot: an
    /// exact state of A's at a flip no older than ε + T_snap before the
    /// crash. B then carries on counting and replicating from there.
    #[test]
    fn crashed_switch_partition_restores_on_another_switch() {
        const LEASE: Nanos = 200_000_000;
        const CRASH: Nanos = 100_000_000;
        const END: Nanos = 450_000_000;
        let rec = SnapshotRecorder::new();
        let store_ip = Ipv4Addr::new(10, 0, 200, 1);
        let mk = |n: u8| SnapshotConfig {
            lease_period: LEASE,
            switch_ip: Ipv4Addr::new(10, 0, 100, n),
            switch_mac: [2, 0, 0, 0, 0x64, n],
            store_ip,
            ..cfg()
        };
        let (ca, cb) = (mk(1), mk(2));
        let app = HeavyHitterSketch::new(3, vec![1], 1_000_000);
        let a = BoundedSwitch::new(app.clone(), ca.clone()).with_recorder(rec.clone());
        let b = BoundedSwitch::new(app, cb.clone()).with_recorder(rec.clone());
        let mut store_cfg = StoreConfig::new(
            store_ip,
            vec![WorkerConfig {
                worker: 1,
                app: AppConfig::HeavyHitter {
                    rows: 3,
                    entries: 64,
                },
                shard: 0,
                shards: 1,
            }],
        );
        store_cfg.lease_period = LEASE;
        store_cfg.mac = ca.store_mac;
        let store = StoreServer::new(store_cfg).unwrap();
        let mut frames = Vec::new();
        let mut t = 1_000_000;
        let mut i = 0u16;
        while t < END - 20_000_000 {
            let port = if t < CRASH { 0 } else { 1 };
            frames.push((t, port, data_frame(1, 1000 + i % 40)));
            i = i.wrapping_add(1);
            t += 50_000;
        }
        let mut sim = Simulation::new(11, 1_000_000);
        let inj = sim.add_node("inject", Box::new(Script { frames, next: 0 }));
        let sa = sim.add_node("a", Box::new(Switch::new(Profile::tofino(), a).unwrap()));
        let sb = sim.add_node("b", Box::new(Switch::new(Profile::tofino(), b).unwrap()));
        let hub = sim.add_node(
            "hub",
            Box::new(Hub {
                ips: [ca.switch_ip, cb.switch_ip],
            }),
        );
        let st = sim.add_node("store", Box::new(store));
        link(&mut sim, "inj-a", (inj, 0), (sa, 0));
        link(&mut sim, "inj-b", (inj, 1), (sb, 0));
        link(&mut sim, "a-out", (inj, 2), (sa, 1));
        link(&mut sim, "b-out", (inj, 3), (sb, 1));
        link(&mut sim, "a-hub", (sa, STORE_PORT), (hub, 0));
        link(&mut sim, "b-hub", (sb, STORE_PORT), (hub, 1));
        link(&mut sim, "hub-store", (hub, 2), (st, 0));
        sim.schedule(CRASH, Fault::Crash(sa));
        rec.failure(ca.switch_ip, CRASH);
        sim.run_until(END, |_| {});

        let sb_sw = sim
            .node::<Switch<BoundedSwitch<HeavyHitterSketch>>>(sb)
            .unwrap();
        let bs = sb_sw.program().stats().clone();
        assert!(sb_sw.violations().is_empty(), "{:?}", sb_sw.violations());
        assert_eq!(
            bs.restores, 1,
            "B got the partition once, never rolled back: {bs:?}"
        );
        assert!(
            bs.partition_commits > 10,
            "B replicates after the restore: {bs:?}"
        );
        assert_eq!(bs.epsilon_fired, 0, "{bs:?}");
        let events = rec.events();
        let a_commits: Vec<u16> = events
            .iter()
            .filter_map(|e| match e {
                SnapEvent::Committed { switch, epoch, .. } if *switch == ca.switch_ip => {
                    Some(*epoch)
                }
                _ => None,
            })
            .collect();
        assert!(
            a_commits.len() > 50,
            "A replicated before the crash: {}",
            a_commits.len()
        );
        let b_restore = events
            .iter()
            .find_map(|e| match e {
                SnapEvent::Restored {
                    switch,
                    epoch,
                    at,
                    values,
                    ..
                } if *switch == cb.switch_ip => Some((*epoch, *at, values.clone())),
                _ => None,
            })
            .unwrap();
        assert!(
            b_restore.1 >= CRASH + LEASE / 2,
            "the store waited for A's lease to lapse"
        );
        assert!(
            rpw_le(*a_commits.last().unwrap(), b_restore.0) && b_restore.2.iter().any(|&v| v > 0),
            "B restored A's latest commit (epoch {}) with A's counts",
            b_restore.0
        );
        eprintln!(
            "A's last commit {:?}; B restored epoch {} at {} ns; B: {bs:?}",
            a_commits.last(),
            b_restore.0,
            b_restore.1
        );
        let check = check_snapshots(&events, cb.epsilon, cb.t_snap);
        assert!(check.violations.is_empty(), "{:?}", check.violations);
        assert!(check.from_commits >= 1, "{check:?}");
        // B continued A's epoch numbering.
        let b_first = events.iter().find_map(|e| match e {
            SnapEvent::Committed { switch, epoch, .. } if *switch == cb.switch_ip => Some(*epoch),
            _ => None,
        });
        assert_eq!(b_first, Some(b_restore.0.wrapping_add(1)));
    }

    fn rpw_le(a: u16, b: u16) -> bool {
        inca_wire::redplane::serial_le(a, b)
    }
}

// ---------------------------------------------------------------------------
// Catalog, placement, the heavy-hitter report
// ---------------------------------------------------------------------------

#[test]
fn catalog_builds_by_name_and_programs_fit_a_tofino() {
    use inca_apps::params::Params;
    use inca_redplane::snapshot::catalog;
    let tofino = Profile::tofino();
    for rows in [3, 4, 5] {
        let p = Params::parse([format!("rows={rows}").as_str(), "vlans=16"]).unwrap();
        let node = catalog::build("redplane_hh", &p, &tofino).unwrap();
        assert_eq!(node.kind(), "switch");
        assert!(node
            .report(0)
            .counters
            .contains_key("snap_partition_commits"));
        let mut prog = catalog::program_hh(&p, &tofino).unwrap();
        let placement = inca_switch::check(&tofino, &mut prog).unwrap();
        assert!(placement.object("snap_row0_pair").is_some(), "rows {rows}");
    }
    let node = catalog::build("redplane_async_counter", &Params::default(), &tofino).unwrap();
    assert_eq!(node.kind(), "switch");
    let e = catalog::build("redplane_nope", &Params::default(), &tofino)
        .err()
        .unwrap();
    assert!(e.contains("redplane_hh"), "{e}");
    let bad = Params::parse(["rows=9"]).unwrap();
    assert!(catalog::build("redplane_hh", &bad, &tofino).is_err());
    let typo = Params::parse(["t_snap=5"]).unwrap();
    assert!(catalog::build("redplane_hh", &typo, &tofino).is_err());
    let act = Params::parse(["epsilon_action=alarm", "t_snap_us=2000"]).unwrap();
    let p = catalog::program_hh(&act, &tofino).unwrap();
    assert_eq!(p.config().action, EpsilonAction::Alarm);
    assert_eq!(p.config().epsilon, 6_000_000);
}

#[test]
fn heavy_hitter_reports_a_flow_once_at_the_threshold() {
    let c = cfg();
    let app = HeavyHitterSketch::new(3, vec![1, 2], 20);
    let mut h = Harness::new(
        Switch::new(Profile::tofino(), BoundedSwitch::new(app, c.clone())).unwrap(),
        5,
    );
    // Lease VLAN 1 with an empty restore.
    h.send(100_000, 0, data_frame(1, 7));
    h.advance_to(110_000);
    let req = requests(&h.take(), 3, 12).pop().unwrap();
    for j in 0..64u8 {
        h.send(
            120_000 + u64::from(j) * 100,
            STORE_PORT,
            ack_frame(
                &c,
                AckType::SnapshotRestore,
                0,
                &[0, 1, j],
                &[0; 12],
                &[],
                req.ident,
            ),
        );
    }
    h.advance_to(15_000_000);
    let mut t = h.now();
    for _ in 0..30 {
        t += 1_000;
        h.send(t, 0, data_frame(1, 7));
    }
    for _ in 0..5 {
        t += 1_000;
        h.send(t, 0, data_frame(1, 8));
    }
    h.advance_to(t + 1_000_000);
    let prog = h.device.program();
    assert_eq!(prog.stats().updates, 35);
    assert_eq!(prog.reports().len(), 1, "{:?}", prog.reports());
    assert_eq!(prog.reports()[0].vlan, 1);
    let out: Vec<_> = h
        .take()
        .into_iter()
        .filter(|t| t.port == c.out_port)
        .collect();
    assert_eq!(out.len(), 35, "measured packets are forwarded");
}

// ---------------------------------------------------------------------------
// Snapshot bandwidth (§8 item 4), short version
// ---------------------------------------------------------------------------

#[test]
fn snapshot_bandwidth_is_linear_in_frequency_and_grows_with_rows() {
    use inca_redplane::snapshot::experiments::snapshot_bandwidth;
    let dur = 250_000_000;
    let p64 = snapshot_bandwidth(3, 64, dur, 10_000).unwrap();
    let p128 = snapshot_bandwidth(3, 128, dur, 10_000).unwrap();
    let r5 = snapshot_bandwidth(5, 128, dur, 10_000).unwrap();
    eprintln!("{p64:?}\n{p128:?}\n{r5:?}");
    for p in [&p64, &p128, &r5] {
        assert_eq!(p.retransmissions, 0, "{p:?}");
        // 16 partitions × 64 entries per snapshot.
        let expect = (p.hz * 1024) as f64;
        assert!((p.requests_per_sec - expect).abs() / expect < 0.1, "{p:?}");
    }
    let ratio = p128.request_mbps / p64.request_mbps;
    assert!((ratio - 2.0).abs() < 0.2, "ratio {ratio}");
    assert!(
        r5.request_mbps > p128.request_mbps * 1.1,
        "{r5:?} vs {p128:?}"
    );
}

#[test]
fn epsilon_drop_partition_gives_the_partition_back() {
    let c = SnapshotConfig {
        action: EpsilonAction::DropPartition,
        ..cfg()
    };
    let mut h = leased_switch(c.clone(), None);
    let t0 = h.now();
    h.advance_to(t0 + 6 * c.t_snap);
    assert_eq!(h.device.program().stats().epsilon_fired, 1);
    assert!(!h.messages.iter().any(|m| m.kind == MSG_WITHDRAW));
    h.take();
    // The lease is gone: the next packet asks the store again.
    h.send(h.now() + 1000, 0, data_frame(1, 999));
    h.advance_to(h.now() + 10_000);
    let reqs = requests(&h.take(), 3, 12);
    assert!(reqs
        .iter()
        .any(|r| r.t == ReqType::LeaseNew && r.key == vec![0, 1, 0]));
}

/// The short version of the fault campaign (the CLI runs more seeds).
#[test]
fn crash_restore_campaign_short() {
    use inca_redplane::snapshot::campaign::crash_restore_run;
    // One seed at up to 0.1 % loss: lossier runs take minutes in a debug
    // build (see `crash_restore_run`); `crash_restore_campaign` does more.
    for seed in 0..1 {
        let run = crash_restore_run(seed, 0.001).unwrap();
        eprintln!("{run:?}");
        assert!(run.ok(), "seed {seed}: {run:?}");
        assert!(run.a_commits > 10, "seed {seed}: {run:?}");
        assert!(run.b_commits > 10, "seed {seed}: {run:?}");
    }
}

/// The long campaign: `SNAP_SEEDS` seeds (default 20) at every loss rate.
/// Run with `cargo test --release -p inca-redplane --test snapshot -- --ignored`.
#[test]
#[ignore]
fn crash_restore_campaign_long() {
    use inca_redplane::snapshot::campaign::crash_restore_campaign;
    let seeds = std::env::var("SNAP_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20);
    let runs = crash_restore_campaign(seeds);
    let mut bad = Vec::new();
    for r in runs {
        let r = r.unwrap();
        eprintln!("{r:?}");
        if !r.ok() {
            bad.push(r);
        }
    }
    assert!(bad.is_empty(), "{bad:#?}");
}
