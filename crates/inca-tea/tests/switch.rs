//! The TEA switch in simulation against H4's DRAM servers: spec §6 items 1,
//! 4, 5, 6, 7, 9, 10, 12, 13 and 16, end to end.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::path::PathBuf;

use inca_apps::headers::{parse, rewrite_end, End};
use inca_sim::engine::Fault;
use inca_sim::link::LossModel;
use inca_tea::nf::TeaNat;
use inca_tea::rig::{Probe, Rig, RigConfig, FIRST_SERVER_PORT};
use inca_tea::switch::{insert_message, update_message, DropReason, LookupPath, MAX_PUNTS_WAITING};
use inca_wire::{build_udp_frame, Endpoints};

const US: u64 = 1_000;
const MS: u64 = 1_000_000;
const PUBLIC: [u8; 4] = [198, 51, 100, 1];

fn udp(src: [u8; 4], sport: u16, dst: [u8; 4], dport: u16, payload: &[u8]) -> Vec<u8> {
    let ep = Endpoints::new(
        [2, 0, 0, 0, 1, 1],
        Ipv4Addr::from(src),
        [2, 0, 0, 0, 1, 2],
        Ipv4Addr::from(dst),
    );
    build_udp_frame(&ep, sport, dport, payload, true).unwrap()
}

/// Inside flow `i`: 10.1.x.y:(1000+i) → 8.8.8.8:53, mapped to PUBLIC:(2000+i).
fn flow(i: u32, payload: &[u8]) -> Vec<u8> {
    let b = i.to_be_bytes();
    udp(
        [10, 1, b[2], b[3]],
        1000 + (i % 60000) as u16,
        [8, 8, 8, 8],
        53,
        payload,
    )
}

fn mapping(i: u32) -> Vec<(Vec<u8>, Vec<u8>)> {
    let p = parse(&flow(i, b"x")).unwrap();
    TeaNat::entries(&p, PUBLIC, 2000 + (i % 60000) as u16).to_vec()
}

fn ready(cfg: &RigConfig) -> Rig {
    let mut rig = Rig::nat(cfg, Probe::default(), Probe::default()).unwrap();
    assert!(
        rig.run_until_ready(20 * MS),
        "TEA control plane never got ready"
    );
    rig
}

fn tmp(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("tea-{}-{name}", std::process::id()))
}

/// A TEA request as seen on a server link.
#[derive(Debug, Clone, Copy)]
struct Req {
    dst: [u8; 4],
    opcode: u8,
    qp: u32,
    psn: u32,
}

/// The frames the switch sent to servers (in wire order per link): RoCE
/// requests, and `None` for anything else (agent datagrams).
fn requests(frames: &[(u64, Vec<u8>)]) -> Vec<Option<Req>> {
    frames
        .iter()
        .filter(|(_, f)| f.len() > 34 && f[26..30] == [10, 0, 0, 254])
        .map(|(_, f)| {
            let p = parse(f).unwrap();
            (p.dport == 4791).then(|| Req {
                dst: p.dst,
                opcode: f[42],
                qp: u32::from_be_bytes([0, f[47], f[48], f[49]]),
                psn: u32::from_be_bytes([0, f[51], f[52], f[53]]),
            })
        })
        .collect()
}

#[test]
fn new_flow_is_allocated_and_translated_both_ways() {
    let mut rig = ready(&RigConfig::default());
    let t0 = rig.sim.now();
    let out = udp([10, 1, 0, 5], 1234, [8, 8, 8, 8], 53, b"hello tea");
    rig.send(t0 + US, rig.inside, out.clone());
    rig.run_until(t0 + 2 * MS);
    let got = rig.probe(rig.outside).received.clone();
    assert_eq!(got.len(), 1, "the first packet leaves after the slow path");
    let p = parse(&got[0].1).unwrap();
    assert_eq!((p.src, p.sport), (PUBLIC, 1024));
    assert_eq!((p.dst, p.dport), ([8, 8, 8, 8], 53));
    let t1 = rig.sim.now();
    rig.send(t1, rig.inside, out.clone());
    let back = udp([8, 8, 8, 8], 53, PUBLIC, 1024, b"answer");
    rig.send(t1 + 100 * US, rig.outside, back);
    rig.run_until(t1 + MS);
    assert_eq!(rig.probe(rig.outside).received.len(), 2);
    let inside = rig.probe(rig.inside).received.clone();
    assert_eq!(inside.len(), 1);
    let p = parse(&inside[0].1).unwrap();
    assert_eq!((p.dst, p.dport), ([10, 1, 0, 5], 1234));
    let (lookups, commits) = rig.observer.drain();
    assert_eq!(commits.len(), 2, "both directions committed: {commits:?}");
    assert!(lookups
        .iter()
        .any(|l| l.path == LookupPath::Dram && l.value.is_some()));
    // Loop freedom (item 16): the new flow's packet made one DRAM lookup
    // (its miss); its re-injection was served by the stash.
    let s = rig.tea().dp_stats();
    assert_eq!((s.remote_misses, s.dram_lookups, s.sram_hits), (1, 3, 1));
}

#[test]
fn one_round_trip_psn_discipline_and_integrity() {
    // Items 1, 4, 6: 300 packets over 100 preloaded flows, sizes 60..1514.
    let flows = 100u32;
    let cfg = RigConfig {
        preload: (0..flows).flat_map(mapping).collect(),
        cache_cap: 0,
        ..RigConfig::default()
    };
    let mut rig = ready(&cfg);
    let caps: Vec<PathBuf> = (0..2).map(|i| tmp(&format!("rt{i}.pcap"))).collect();
    for (i, p) in caps.iter().enumerate() {
        let l = rig.server_links[i];
        rig.sim.capture(l, p).unwrap();
    }
    let t0 = rig.sim.now();
    let mut expected = Vec::new();
    for n in 0..300u32 {
        let i = (n * 37) % flows;
        let size = 18 + (n as usize * 97) % 1455;
        let payload: Vec<u8> = (0..size).map(|b| (b as u32 ^ n) as u8).collect();
        let f = flow(i, &payload);
        let mut want = f.clone();
        let p = parse(&f).unwrap();
        rewrite_end(&mut want, &p, End::Source, PUBLIC, 2000 + i as u16);
        expected.push(want);
        rig.send(t0 + u64::from(n) * 2 * US, rig.inside, f);
    }
    rig.run_until(t0 + 5 * MS);
    rig.sim.finish_captures().unwrap();
    let got: Vec<Vec<u8>> = rig
        .probe(rig.outside)
        .received
        .iter()
        .map(|(_, f)| f.clone())
        .collect();
    assert_eq!(got.len(), 300, "every packet comes back once");
    // Item 4: byte-identical apart from the NAT's fields, same order.
    for (g, w) in got.iter().zip(&expected) {
        assert_eq!(g, w);
    }
    let s = rig.tea().dp_stats().clone();
    assert_eq!(s.dram_lookups, 300, "no SRAM path: stash empty, cache off");
    // Items 1 and 6 on the wire.
    let mut writes = 0;
    let mut next_psn: BTreeMap<([u8; 4], u32), u32> = BTreeMap::new();
    for p in &caps {
        let reqs = requests(&inca_wire::pcap::read_capture(p).unwrap());
        let mut i = 0;
        while i < reqs.len() {
            let Some(w) = reqs[i] else {
                i += 1;
                continue;
            };
            assert_eq!(w.opcode, 0x0A, "a request run starts with a WRITE");
            let r = reqs
                .get(i + 1)
                .copied()
                .flatten()
                .expect("READ right after WRITE");
            assert_eq!(r.opcode, 0x0C);
            assert_eq!((r.dst, r.qp), (w.dst, w.qp), "same QP");
            assert_eq!(r.psn, (w.psn + 1) & 0xFF_FFFF);
            if let Some(&n) = next_psn.get(&(w.dst, w.qp)) {
                assert_eq!(w.psn, n, "PSNs contiguous per QP");
            }
            next_psn.insert((w.dst, w.qp), (r.psn + 1) & 0xFF_FFFF);
            writes += 1;
            i += 2;
        }
    }
    assert_eq!(writes, 300, "exactly one WRITE+READ pair per DRAM lookup");
    assert!(rig.switch().violations().is_empty());
}

#[test]
fn same_bucket_burst_returns_each_packet_once() {
    // Item 5: reply keys that all hash to one bucket, looked up at once.
    let layout = inca_tea::table::layout::Layout::new(13, 6, 2, 10).unwrap();
    let mut same = Vec::new();
    let mut target = None;
    for port in 1..u16::MAX {
        let f = udp([9, 9, 9, 9], port, PUBLIC, 5000, b"");
        let k = parse(&f).unwrap().five_tuple();
        let b = layout.bucket_of(&k);
        if *target.get_or_insert(b) == b {
            same.push(port);
            if same.len() == 8 {
                break;
            }
        }
    }
    // Reply key (9.9.9.9:port → PUBLIC:5000) → inside 10.2.0.k:(100+k).
    let preload: Vec<(Vec<u8>, Vec<u8>)> = same
        .iter()
        .enumerate()
        .map(|(k, &port)| {
            let key = parse(&udp([9, 9, 9, 9], port, PUBLIC, 5000, b""))
                .unwrap()
                .five_tuple();
            let mut v = vec![10, 2, 0, k as u8];
            v.extend_from_slice(&(100 + k as u16).to_be_bytes());
            (key.to_vec(), v)
        })
        .collect();
    let cfg = RigConfig {
        preload,
        cache_cap: 0,
        ..RigConfig::default()
    };
    let mut rig = ready(&cfg);
    let t0 = rig.sim.now();
    for round in 0..2u8 {
        for (k, &port) in same.iter().enumerate() {
            let f = udp([9, 9, 9, 9], port, PUBLIC, 5000, &[k as u8, round]);
            rig.send(t0 + US, rig.outside, f);
        }
    }
    rig.run_until(t0 + 2 * MS);
    let got = &rig.probe(rig.inside).received;
    assert_eq!(got.len(), 16, "each packet exactly once");
    let mut seen = BTreeMap::new();
    for (_, f) in got {
        let p = parse(f).unwrap();
        let l4 = usize::from(p.l4);
        let (k, round) = (f[l4 + 8], f[l4 + 9]);
        assert_eq!(
            (p.dst, p.dport),
            ([10, 2, 0, k], 100 + u16::from(k)),
            "the value of its own key"
        );
        *seen.entry((k, round)).or_insert(0) += 1;
    }
    assert!(seen.values().all(|&n| n == 1) && seen.len() == 16);
}

#[test]
fn flow_control_keeps_reads_within_the_nic_limit() {
    // Item 7: a line-rate burst of distinct keys (all remote misses from the
    // outside, so nothing else happens).
    let mut rig = ready(&RigConfig::default());
    let t0 = rig.sim.now();
    for n in 0..2000u32 {
        let f = udp([7, 7, (n >> 8) as u8, n as u8], 4000, PUBLIC, 6000, b"");
        rig.send(t0 + u64::from(n) * 17, rig.outside, f);
    }
    rig.run_until(t0 + 2 * MS);
    let s = rig.tea().dp_stats().clone();
    assert!(
        s.drops[DropReason::FcReject as usize] > 0,
        "the burst hits the limit: {s:?}"
    );
    // The burst offers several times a server link, so the meters also
    // turn RED (spec §5.7) and some lookups find no usable replica.
    assert_eq!(
        s.dram_lookups
            + s.drops[DropReason::FcReject as usize]
            + s.drops[DropReason::NoServer as usize],
        2000,
        "{s:?} {:?} {:?}",
        rig.server(0).counters(),
        rig.server(1).counters()
    );
    for i in 0..2 {
        let c = rig.server(i).counters();
        assert!(c["nic_rd_inflight_max"] <= 16, "server {i}: {c:?}");
        assert_eq!(c["nic_qp_errors"], 0);
    }
    for q in 0..4 {
        assert!(rig.tea().outstanding(rig.switch().objects(), q).0 <= 16);
    }
}

#[test]
fn failover_after_port_down_stops_requests_to_that_port() {
    // Item 10: server 0's link goes down; R = 2, so server 1 takes all
    // lookups and none is dropped for want of a server.
    let flows = 50u32;
    let cfg = RigConfig {
        preload: (0..flows).flat_map(mapping).collect(),
        cache_cap: 0,
        ..RigConfig::default()
    };
    let mut rig = ready(&cfg);
    let t0 = rig.sim.now();
    for n in 0..400u32 {
        rig.send(
            t0 + u64::from(n) * 5 * US,
            rig.inside,
            flow(n % flows, b"payload"),
        );
    }
    let down = t0 + 500 * US;
    rig.sim.schedule(down, Fault::LinkDown(rig.server_links[0]));
    rig.run_until(down + 2 * US);
    let port = usize::from(FIRST_SERVER_PORT);
    let tx_at_cut = rig.switch().stats().ports[port].tx_packets;
    rig.run_until(t0 + 3 * MS);
    let s = rig.tea().dp_stats().clone();
    assert_eq!(s.drops[DropReason::NoServer as usize], 0);
    assert_eq!(
        rig.switch().stats().ports[port].tx_packets,
        tx_at_cut,
        "nothing sent to the dead port after T_LINKDOWN + T_PKTGEN + a pass"
    );
    // Lookups in flight to server 0 when it died are lost; all later ones
    // come back.
    let got = rig.probe(rig.outside).received.len();
    assert!(got >= 400 - 20, "{got} of 400");
    for r in 0..2 {
        assert_eq!(
            rig.tea().active_replica(rig.switch().objects(), r),
            if r == 0 { 1 } else { 0 }
        );
    }
}

#[test]
fn loss_duplication_and_reordering_are_recovered() {
    // Item 9: impair the server links, then heal them; every QP makes
    // progress again within the watchdog period + an RTT, and no lookup
    // ever returns another key's value.
    let flows = 64u32;
    let mut cfg = RigConfig {
        preload: (0..flows).flat_map(mapping).collect(),
        cache_cap: 0,
        seed: 7,
        ..RigConfig::default()
    };
    cfg.server_link.loss = LossModel::Bernoulli { p: 0.05 };
    cfg.server_link.duplicate = 0.05;
    cfg.server_link.reorder = 0.05;
    cfg.server_link.reorder_delay = 3 * US;
    let mut rig = Rig::nat(&cfg, Probe::default(), Probe::default()).unwrap();
    assert!(
        rig.run_until_ready(200 * MS),
        "setup survives the impairments"
    );
    let t0 = rig.sim.now();
    for n in 0..2000u32 {
        rig.send(
            t0 + u64::from(n) * 2 * US,
            rig.inside,
            flow(n % flows, &n.to_be_bytes()),
        );
    }
    let heal = t0 + 4 * MS;
    for &l in &rig.server_links.clone() {
        rig.sim.schedule(heal, Fault::SetLoss(l, LossModel::None));
    }
    rig.run_until(heal + 3 * MS);
    // After healing (dup/reorder stay on), traffic again: all of it served.
    let t1 = rig.sim.now();
    let before = rig.probe(rig.outside).received.len();
    for n in 0..200u32 {
        rig.send(
            t1 + u64::from(n) * 5 * US,
            rig.inside,
            flow(n % flows, b"after"),
        );
    }
    rig.run_until(t1 + 3 * MS);
    let after = rig.probe(rig.outside).received.len() - before;
    assert!(
        after >= 190,
        "QPs make progress after recovery: {after} of 200; {:?} {:?}",
        rig.tea().dp_stats(),
        rig.tea().cp_stats()
    );
    // Every delivered packet carries its own flow's translation.
    for (_, f) in &rig.probe(rig.outside).received {
        let p = parse(f).unwrap();
        let i = u32::from(p.sport - 2000);
        let orig = parse(&flow(i, b"")).unwrap();
        assert_eq!(p.src, PUBLIC);
        assert_eq!(p.dst, orig.dst);
    }
    let (lookups, _) = rig.observer.drain();
    let map: BTreeMap<Vec<u8>, Vec<u8>> = cfg.preload.iter().cloned().collect();
    for l in lookups {
        assert_eq!(l.value.as_ref(), map.get(&l.key), "lookup {l:?}");
    }
    for q in 0..4 {
        assert!(rig.tea().outstanding(rig.switch().objects(), q).0 <= 16);
    }
    // The run exercised the recovery paths it claims to check.
    let (dp, cp) = (rig.tea().dp_stats(), rig.tea().cp_stats());
    assert!(
        dp.naks > 0 && dp.drops[DropReason::DupResponse as usize] > 0,
        "{dp:?}"
    );
    assert!(cp.naks > 0, "{cp:?}");
}

#[test]
fn hot_key_is_cached_and_stays_coherent_through_an_update() {
    // Items 12 and 13.
    let cfg = RigConfig {
        preload: mapping(1),
        ..RigConfig::default()
    };
    let mut rig = ready(&cfg);
    let t0 = rig.sim.now();
    let key = parse(&flow(1, b"")).unwrap().five_tuple().to_vec();
    for n in 0..400u64 {
        rig.send(t0 + n * 2 * US, rig.inside, flow(1, b"hot"));
    }
    rig.run_until(t0 + 900 * US);
    let o = rig.switch().objects();
    assert!(
        rig.tea().sketch_estimate(o, &key) >= 400,
        "est >= true count"
    );
    assert_eq!(
        rig.tea().dp_stats().hot_digests,
        1,
        "one digest per key per epoch"
    );
    rig.run_until(t0 + 2 * MS);
    assert!(rig
        .tea()
        .cache_entries(rig.switch().objects())
        .iter()
        .any(|(k, _)| *k == key));
    // Update the cached key; after it completes, SRAM matches the master.
    let t1 = rig.sim.now();
    rig.control(t1, update_message(&key, &[198, 51, 100, 9, 0, 77]));
    rig.control(t1, insert_message(&mapping(2)[0].0, &mapping(2)[0].1));
    for n in 0..100u64 {
        rig.send(t1 + n * 10 * US, rig.inside, flow(1, b"hot"));
    }
    rig.run_until(t1 + 3 * MS);
    assert_eq!(rig.tea().pending_ops(), 0);
    rig.tea().check_coherence(rig.switch().objects()).unwrap();
    let last = &rig.probe(rig.outside).received.last().unwrap().1;
    let p = parse(last).unwrap();
    assert_eq!(
        (p.src, p.sport),
        ([198, 51, 100, 9], 77),
        "the updated value is served"
    );
    // Every lookup returned the old value before the update completed or
    // the new one after it started.
    let (lookups, commits) = rig.observer.drain();
    let upd = commits.iter().find(|c| c.key == key).unwrap();
    for l in lookups.iter().filter(|l| l.key == key) {
        let v = l.value.as_deref().unwrap();
        if l.checked_at < upd.started {
            assert_eq!(v, &mapping(1)[0].1[..]);
        } else if l.at > upd.at {
            assert_eq!(v, &[198, 51, 100, 9, 0, 77]);
        }
    }
}

#[test]
fn a_red_meter_moves_a_range_to_its_secondary() {
    // Item 10, the overload half: lookups of range 0 (primary server 0)
    // offered faster than the meters' rate (set to 10 Gbps here, a model
    // input) turn server 0's port RED, and the range's active replica flips
    // to server 1.
    let layout = inca_tea::table::layout::Layout::new(13, 6, 2, 10).unwrap();
    let flows: Vec<u32> = (0..4000u32)
        .filter(|&i| layout.bucket_of(&parse(&flow(i, b"")).unwrap().five_tuple()) < 400)
        .take(64)
        .collect();
    let cfg = RigConfig {
        preload: flows.iter().flat_map(|&i| mapping(i)).collect(),
        cache_cap: 0,
        tweak: |t| t.server_link_bps = 10_000_000_000,
        ..RigConfig::default()
    };
    let mut rig = ready(&cfg);
    let o = rig.switch().objects();
    assert_eq!(rig.tea().active_replica(o, 0), 0);
    let t0 = rig.sim.now();
    for n in 0..600u64 {
        let i = flows[n as usize % flows.len()];
        rig.send(t0 + n * 300, rig.inside, flow(i, &[0u8; 1400]));
    }
    rig.run_until(t0 + 2 * MS);
    let (lookups, _) = rig.observer.drain();
    let on = |q: u16| {
        lookups
            .iter()
            .filter(|l| l.path == LookupPath::Dram && l.qp == q)
            .count()
    };
    // Range 0: primary QP 0 (server 0), secondary QP 3 (server 1, role 1).
    assert!(
        on(0) > 0 && on(3) > 0,
        "served by both replicas: {} / {}",
        on(0),
        on(3)
    );
    // The first lookups (before the meter turned) went to the primary.
    let first = lookups.iter().find(|l| l.path == LookupPath::Dram).unwrap();
    assert_eq!(first.qp, 0);
}

#[test]
fn same_seed_same_run() {
    // Item 15: determinism, down to every lookup and commit.
    let run = || {
        let mut cfg = RigConfig {
            preload: (0..20).flat_map(mapping).collect(),
            seed: 99,
            ..RigConfig::default()
        };
        cfg.server_link.loss = LossModel::Bernoulli { p: 0.02 };
        let mut rig = ready(&cfg);
        let t0 = rig.sim.now();
        for n in 0..300u32 {
            rig.send(t0 + u64::from(n) * 3 * US, rig.inside, flow(n % 40, b"det"));
        }
        rig.run_until(t0 + 5 * MS);
        let (l, c) = rig.observer.drain();
        (
            format!("{l:?}{c:?}"),
            rig.tea().dp_stats().clone(),
            rig.switch().stats(),
        )
    };
    assert_eq!(run(), run());
}

#[test]
fn missed_heartbeats_take_a_server_down_and_its_answer_brings_it_back() {
    // Spec §5.7: three missed heartbeats (100 ms period) = down; the
    // server is recovered (QPs reset, regions reloaded) when it answers.
    let cfg = RigConfig {
        preload: (0..20).flat_map(mapping).collect(),
        ..RigConfig::default()
    };
    let mut rig = ready(&cfg);
    let t0 = rig.sim.now();
    let s0 = rig.servers[0];
    rig.sim.schedule(
        t0,
        Fault::Pause {
            node: s0,
            duration: 450 * MS,
        },
    );
    rig.run_until(t0 + 420 * MS);
    assert_eq!(
        rig.tea().cp_stats().server_downs,
        1,
        "{:?}",
        rig.tea().cp_stats()
    );
    // While it is down, every lookup goes to server 1.
    let t1 = rig.sim.now();
    for n in 0..20u32 {
        rig.send(t1 + u64::from(n) * 10 * US, rig.inside, flow(n, b"x"));
    }
    rig.run_until(t1 + MS);
    assert_eq!(rig.probe(rig.outside).received.len(), 20);
    let (lookups, _) = rig.observer.drain();
    assert!(
        lookups
            .iter()
            .all(|l| l.path == LookupPath::Dram && l.qp >= 2),
        "server 1's QPs only"
    );
    rig.run_until(t0 + 700 * MS);
    assert_eq!(
        rig.tea().cp_stats().recoveries,
        1,
        "{} {:?} {:?}",
        rig.tea().cp_state(),
        rig.server(0).counters(),
        rig.switch().stats().punts
    );
    rig.tea().check_coherence(rig.switch().objects()).unwrap();
}

#[test]
fn offered_overload_at_link_rate_turns_the_meter_red() {
    // Item 10 with the meters at the real link rate (spec §5.7: PIR = link
    // rate): lookups of range 0 offered at about twice what server 0's link
    // carries. Flow control caps the admitted lookups near the link rate,
    // so only a meter of offered load (spec §9 item 10) can turn RED.
    let layout = inca_tea::table::layout::Layout::new(13, 6, 2, 10).unwrap();
    let flows: Vec<u32> = (0..4000u32)
        .filter(|&i| layout.bucket_of(&parse(&flow(i, b"")).unwrap().five_tuple()) < 400)
        .take(64)
        .collect();
    let cfg = RigConfig {
        preload: flows.iter().flat_map(|&i| mapping(i)).collect(),
        cache_cap: 0,
        ..RigConfig::default()
    };
    let mut rig = ready(&cfg);
    assert_eq!(rig.tea().active_replica(rig.switch().objects(), 0), 0);
    let t0 = rig.sim.now();
    // A 1400 B lookup puts ~3 kB on the server link (WRITE + READ with the
    // packet as trailer): ~600 ns at 40 Gbps; offered every 300 ns.
    for n in 0..2000u64 {
        let i = flows[n as usize % flows.len()];
        rig.send(t0 + n * 300, rig.inside, flow(i, &[0u8; 1400]));
    }
    rig.run_until(t0 + 2 * MS);
    // Both replicas end up overloaded in turn (the load follows the range),
    // so the active replica may flip back; what matters is that it moved.
    let (lookups, _) = rig.observer.drain();
    let on = |q: u16| {
        lookups
            .iter()
            .filter(|l| l.path == LookupPath::Dram && l.qp == q)
            .count()
    };
    assert!(
        on(0) > 0 && on(3) > 0,
        "served by both replicas: {} / {}, {:?}",
        on(0),
        on(3),
        rig.tea().dp_stats()
    );
    let first = lookups.iter().find(|l| l.path == LookupPath::Dram).unwrap();
    assert_eq!(first.qp, 0);
}

#[test]
fn packets_of_a_flow_with_a_pending_insert_wait_instead_of_inserting_again() {
    // Many packets of each new flow arrive before its entries are in
    // effect: they must not queue the flow's inserts again, and they must
    // be delivered once the entries are in.
    let (flows, packets) = (256u32, 10_000u64);
    let cfg = RigConfig {
        cache_cap: 0,
        ..RigConfig::default()
    };
    let mut rig = ready(&cfg);
    let t0 = rig.sim.now();
    for n in 0..packets {
        rig.send(
            t0 + n * US,
            rig.inside,
            flow((n % u64::from(flows)) as u32, b"p"),
        );
    }
    // The switch CPU spends 20 µs per event (tofino profile): the 10,000
    // punts alone keep it busy for 200 ms, and the agents' replies queue
    // behind them.
    rig.run_until(t0 + 500 * MS);
    let cs = rig.tea().cp_stats().clone();
    let got = rig.probe(rig.outside).received.len() as u64;
    assert_eq!(rig.tea().nf().allocated(), flows as usize);
    // Two entries per flow, each inserted once.
    let (_, commits) = rig.observer.drain();
    assert_eq!(
        commits.len(),
        2 * flows as usize,
        "{cs:?} {}",
        rig.tea().cp_state()
    );
    assert_eq!(cs.ops_refused, 0, "{cs:?}");
    // Every packet of the burst punts before any entry is in: one per flow
    // starts the insert, the wait queue takes its bound, the rest are
    // dropped and counted; everything that waited is delivered.
    assert_eq!(rig.tea().punts_waiting(), 0);
    assert_eq!(cs.punts_queued, MAX_PUNTS_WAITING as u64, "{cs:?}");
    assert_eq!(
        got + cs.punts_dropped,
        packets,
        "delivered {got} of {packets}: {cs:?} {:?}",
        rig.tea().dp_stats()
    );
    assert!(got >= u64::from(flows) + MAX_PUNTS_WAITING as u64, "{got}");
}

#[test]
fn a_large_preload_is_reloaded_without_flooding_the_agents() {
    // 100,000 preloaded flows: the setup reload is thousands of
    // WRITE_BATCHes per server. Sent all at once they outran the agents and
    // the retransmission timer, the server was declared down and the setup
    // started over, so the table never became ready.
    let cfg = RigConfig {
        log2_buckets: 19,
        cache_cap: 0,
        preload: (0..50_000u32).flat_map(mapping).collect(),
        ..RigConfig::default()
    };
    let mut rig = Rig::nat(&cfg, Probe::default(), Probe::default()).unwrap();
    let ready = rig.run_until_ready(2_000 * MS);
    let cs = rig.tea().cp_stats().clone();
    assert!(
        ready,
        "not ready at {} ns: {cs:?} {}",
        rig.sim.now(),
        rig.tea().cp_state()
    );
    let batches: u64 = (0..2)
        .map(|i| rig.server(i).counters()["agent_requests_0x04"])
        .sum();
    eprintln!("ready at {} ns, {batches} batches, {cs:?}", rig.sim.now());
    // A few retransmissions remain: a sketch epoch holds the control
    // channel for milliseconds.
    assert_eq!(cs.server_downs, 0, "{cs:?}");
    assert!(
        cs.agent_retransmits * 20 < batches,
        "{batches} batches: {cs:?}"
    );
    // A preloaded flow is translated at once.
    let t0 = rig.sim.now();
    rig.send(t0, rig.inside, flow(12_345, b"x"));
    rig.run_until(t0 + MS);
    assert_eq!(rig.probe(rig.outside).received.len(), 1);
}

#[test]
fn background_traffic_to_a_server_turns_its_port_red_and_lookups_move() {
    // Spec §5.7 and E5: traffic addressed to server 0 itself (not
    // lookups) shares its link; with the lookups of range 0 on top the
    // offered load exceeds the link, the port turns RED, range 0 moves to
    // server 1 and stays there (selection is sticky, server 1 is not
    // overloaded).
    let layout = inca_tea::table::layout::Layout::new(13, 6, 2, 10).unwrap();
    let probe = |n: u32| udp([7, 7, (n >> 8) as u8, n as u8], 4000, PUBLIC, 6000, b"");
    let keys: Vec<u32> = (0..20_000u32)
        .filter(|&n| layout.bucket_of(&parse(&probe(n)).unwrap().five_tuple()) < 400)
        .take(256)
        .collect();
    let cfg = RigConfig {
        cache_cap: 0,
        ..RigConfig::default()
    };
    let mut rig = ready(&cfg);
    assert_eq!(rig.tea().active_replica(rig.switch().objects(), 0), 0);
    let t0 = rig.sim.now();
    let server0 = inca_tea::rig::server_ip(0).octets();
    for n in 0..3_000u64 {
        // 1442 B every 300 ns: 38.5 Gbit/s toward server 0.
        rig.send(
            t0 + n * 300,
            rig.inside,
            udp([10, 1, 0, 1], 7, server0, 9, &[0u8; 1400]),
        );
    }
    for n in 0..4_500u64 {
        // Remote misses of range 0, one per 200 ns: ~13 Gbit/s of requests.
        let k = keys[n as usize % keys.len()];
        rig.send(t0 + n * 200, rig.outside, probe(k));
    }
    rig.run_until(t0 + 2 * MS);
    let port = usize::from(FIRST_SERVER_PORT);
    assert!(
        rig.switch().stats().ports[port].tx_packets >= 3_000,
        "the background went to server 0"
    );
    let s = rig.tea().dp_stats().clone();
    assert_eq!(
        rig.tea().active_replica(rig.switch().objects(), 0),
        1,
        "range 0 moved to server 1: {s:?}"
    );
    assert!(s.failovers >= 1, "{s:?}");
    assert_eq!(s.drops[DropReason::NoServer as usize], 0, "{s:?}");
}
