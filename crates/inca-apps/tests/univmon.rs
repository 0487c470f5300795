//! The UnivMon-style sketch through the switch model with real frames: the
//! control plane reads the sketch (with the register-read latency) and
//! estimates total packets, distinct flows and heavy hitters per level;
//! timed reads clear it; forwarding, other profiles, random bytes and the
//! resource check.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use inca_apps::counters::MonitorPath;
use inca_apps::params::Params;
use inca_apps::univmon::{UnivMon, MSG_READ};
use inca_switch::device::{ControlMessage, MILLIS};
use inca_switch::harness::Harness;
use inca_switch::{check, Profile, Switch};
use inca_wire::{build_udp_frame, Endpoints};
use proptest::prelude::*;

const SEED: u64 = 13;

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

/// Flow `i`: 10.x.y.z → 192.0.2.(i mod 200), UDP 1024+i → 53.
fn flow(i: u32) -> ([u8; 13], Vec<u8>) {
    let b = i.to_be_bytes();
    let (src, dst) = ([10, b[1], b[2], b[3]], [192, 0, 2, (i % 200) as u8]);
    let sport = 1024 + (i % 60_000) as u16;
    let ep = Endpoints::new(
        [2, 0, 0, 0, 0, 1],
        Ipv4Addr::from(src),
        [2, 0, 0, 0, 0, 2],
        Ipv4Addr::from(dst),
    );
    let frame = build_udp_frame(&ep, sport, 53, b"q", true).unwrap();
    let mut k = [0u8; 13];
    k[0..4].copy_from_slice(&src);
    k[4..8].copy_from_slice(&dst);
    k[8] = 17;
    k[9..11].copy_from_slice(&sport.to_be_bytes());
    k[11..13].copy_from_slice(&53u16.to_be_bytes());
    (k, frame)
}

fn read() -> ControlMessage {
    ControlMessage {
        kind: MSG_READ,
        body: Vec::new(),
    }
}

/// 4,000 light flows (1–3 packets) and 5 heavy ones (1,500 packets each),
/// shuffled: (stream of flow numbers, exact counts).
fn workload() -> (Vec<u32>, BTreeMap<u32, u32>) {
    let mut stream = Vec::new();
    for i in 0..4000u32 {
        stream.extend(std::iter::repeat_n(i, 1 + (i % 3) as usize));
    }
    for i in 0..5u32 {
        stream.extend(std::iter::repeat_n(100_000 + i, 1500));
    }
    let mut rng = Rng(SEED);
    for i in (1..stream.len()).rev() {
        stream.swap(i, (rng.next() % (i as u64 + 1)) as usize);
    }
    let mut exact = BTreeMap::new();
    for &f in &stream {
        *exact.entry(f).or_insert(0u32) += 1;
    }
    (stream, exact)
}

#[test]
fn estimates_total_distinct_flows_and_heavy_hitters() {
    let um = UnivMon::new(8, 3, 1024, 1000, 0, MonitorPath::default());
    println!("seed {SEED}");
    let mut h = Harness::new(Switch::new(Profile::tofino(), um).unwrap(), SEED);
    let (stream, exact) = workload();
    let frames: BTreeMap<u32, Vec<u8>> = exact.keys().map(|&i| (i, flow(i).1)).collect();
    for (n, f) in stream.iter().enumerate() {
        h.send(n as u64 * 100, 0, frames[f].clone());
    }
    h.control(5 * MILLIS, read());
    // 24 reads of 1,024 entries: 24 × (50 µs + 1,024 × 2.58 µs) ≈ 65 ms.
    h.advance_to(60 * MILLIS);
    assert!(h.device.program().estimates().is_empty(), "reads take time");
    h.advance_to(1_000 * MILLIS);
    assert_eq!(h.take().len(), stream.len(), "everything is forwarded");
    assert!(h.device.violations().is_empty());
    let um = h.device.program();
    let est = &um.estimates()[0];
    println!(
        "total {} distinct {:.0} (level {}) per-level packets {:?}; {} candidates; heavy per level {:?}",
        est.total,
        est.distinct,
        est.distinct_level,
        est.level_packets,
        um.candidates().len(),
        est.heavy.iter().map(Vec::len).collect::<Vec<_>>()
    );
    assert!(est.at >= 65 * MILLIS);
    assert_eq!(est.total, stream.len() as u64, "total packets are exact");
    assert!(est.level_packets.windows(2).all(|w| w[0] >= w[1]));
    // Distinct flows: within 15 % (the estimator's error is ~5 % here).
    let d = exact.len() as f64;
    assert!(
        (est.distinct - d).abs() <= 0.15 * d,
        "distinct {:.0} vs {d}",
        est.distinct
    );
    // Level-0 heavy hitters: exactly the five heavy flows, never undercounted
    // and within ε·N (ε = e/1,024).
    let eps_n = std::f64::consts::E / 1024.0 * stream.len() as f64;
    let mut heavy: Vec<[u8; 13]> = est.heavy[0].iter().map(|(k, _)| *k).collect();
    heavy.sort();
    let mut want: Vec<[u8; 13]> = (0..5).map(|i| flow(100_000 + i).0).collect();
    want.sort();
    assert_eq!(heavy, want);
    for (_, e) in &est.heavy[0] {
        assert!(
            *e >= 1500 && f64::from(*e) <= 1500.0 + eps_n,
            "estimate {e}"
        );
    }
    // Deeper levels: each level's heavy hitters include the heavy flows
    // sampled into it, and every key listed belongs to the level.
    for (j, list) in est.heavy.iter().enumerate() {
        for &k in &want {
            if um.level_of(&k) >= j {
                assert!(
                    list.iter().any(|(x, _)| *x == k),
                    "level {j} misses a heavy flow"
                );
            }
        }
        for (k, e) in list {
            assert!(um.level_of(k) >= j);
            assert!(*e >= um.level_threshold(j));
        }
    }
}

#[test]
fn a_timed_read_estimates_then_clears_the_sketch() {
    let um = UnivMon::new(4, 2, 256, 100, 50 * MILLIS, MonitorPath::default());
    let mut h = Harness::new(Switch::new(Profile::tofino(), um).unwrap(), SEED);
    let (k, f) = flow(7);
    for n in 0..1000u64 {
        h.send(n * 1000, 0, f.clone());
    }
    h.advance_to(49 * MILLIS);
    assert_eq!(h.device.program().peek(h.device.objects(), &k), Some(1000));
    // Eight reads of 256 entries (~0.7 ms each), then eight clears.
    h.advance_to(70 * MILLIS);
    let um = h.device.program();
    assert_eq!(um.estimates().len(), 1);
    assert_eq!(um.estimates()[0].total, 1000);
    assert_eq!(um.estimates()[0].heavy[0], vec![(k, 1000)]);
    assert!((um.estimates()[0].distinct - 1.0).abs() < 0.1);
    assert_eq!(um.peek(h.device.objects(), &k), Some(0), "cleared");
    assert!(um.candidates().is_empty());
    h.advance_to(120 * MILLIS);
    let um = h.device.program();
    assert_eq!(um.estimates().len(), 2);
    assert_eq!(um.estimates()[1].total, 0);
}

#[test]
fn forwards_both_ways_and_passes_non_ip_frames() {
    let um = UnivMon::from_params(&Params::default()).unwrap();
    let mut h = Harness::new(Switch::new(Profile::tofino(), um).unwrap(), SEED);
    let f = flow(1).1;
    h.send(0, 0, f.clone());
    h.send(1000, 1, f);
    let mut arp = vec![0xff; 6];
    arp.extend_from_slice(&[2, 0, 0, 0, 0, 1, 0x08, 0x06]);
    arp.extend_from_slice(&[0; 28]);
    h.send(2000, 7, arp);
    h.advance_to(MILLIS);
    let ports: Vec<u16> = h.take().iter().map(|t| t.port).collect();
    assert_eq!(ports, vec![1, 0, 1]);
}

#[test]
fn loads_and_estimates_on_a_smartnic_and_a_server() {
    for profile in [Profile::smartnic(), Profile::server()] {
        let name = profile.name.clone();
        let defaults = UnivMon::from_params(&Params::default()).unwrap();
        assert!(
            Switch::new(profile.clone(), defaults).is_ok(),
            "{name}: defaults"
        );
        let um = UnivMon::new(8, 3, 1024, 1000, 0, MonitorPath::default());
        let mut h = Harness::new(Switch::new(profile, um).unwrap(), SEED);
        for i in 0..300u32 {
            h.send(u64::from(i) * 10_000, 0, flow(i).1);
        }
        h.control(10 * MILLIS, read());
        h.advance_to(2_000 * MILLIS);
        let est = &h.device.program().estimates()[0];
        assert_eq!(est.total, 300, "{name}");
        assert!(
            (est.distinct - 300.0).abs() < 30.0,
            "{name}: {}",
            est.distinct
        );
        assert!(h.device.violations().is_empty(), "{name}");
    }
}

#[test]
fn parameters_are_checked() {
    assert!(UnivMon::from_params(&Params::parse(["levels=9"]).unwrap()).is_err());
    assert!(UnivMon::from_params(&Params::parse(["flows=1000"]).unwrap()).is_err());
    assert!(
        UnivMon::from_params(&Params::parse(["levels=4", "rows=2", "flows=4096"]).unwrap()).is_ok()
    );
}

#[test]
fn resource_check_finds_the_largest_sketch() {
    let tofino = Profile::tofino();
    for (levels, rows) in [(8, 3), (4, 3)] {
        let fits = |flows: usize| {
            let mut um = UnivMon::new(levels, rows, flows, 1000, 0, MonitorPath::default());
            check(&tofino, &mut um)
        };
        let mut flows = 1024;
        while fits(flows * 2).is_ok() {
            flows *= 2;
        }
        println!(
            "{levels} levels × {rows} rows: largest {flows} counters per row\n{}",
            fits(flows).unwrap()
        );
        println!("{}", fits(flows * 2).unwrap_err());
        assert!(flows >= 8192);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    #[test]
    fn random_frames_never_panic_and_are_all_counted(
        frames in proptest::collection::vec((0u16..32, proptest::collection::vec(any::<u8>(), 0..600)), 1..60)
    ) {
        let um = UnivMon::new(8, 3, 64, 2, 0, MonitorPath::default());
        let mut h = Harness::new(Switch::new(Profile::tofino(), um).unwrap(), SEED);
        for (i, (port, f)) in frames.iter().enumerate() {
            h.send(i as u64 * 100, *port, f.clone());
        }
        h.control(frames.len() as u64 * 100 + 1000, read());
        h.advance_to(500 * MILLIS);
        let s = h.device.stats();
        prop_assert_eq!(s.fates(), frames.len() as u64, "{:?}", s);
        prop_assert_eq!(s.violation_drops, 0);
        let tx: u64 = s.ports.iter().map(|p| p.tx_packets).sum();
        prop_assert_eq!(h.transmit_count, tx);
        prop_assert_eq!(h.device.program().estimates().len(), 1);
    }
}
