//! Differential tests: the plain monitors through the switch model and
//! references built from `inca_apps::core::{sketch, counter}` alone agree
//! on random packet sequences — the heavy-hitter detector's per-tenant
//! count-min estimates and reports, UnivMon's level-0 count-min, the
//! super-spreader's bitset popcounts and the flow counter's counts.

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;

use inca_apps::core::counter::{self, Overflow};
use inca_apps::core::sketch::{BitsetSketch, CountMin, RowHashes};
use inca_apps::counters::{FlowCounter, MonitorPath};
use inca_apps::headers::parse;
use inca_apps::heavy_hitter::HeavyHitter;
use inca_apps::superspreader::SuperSpreader;
use inca_apps::univmon::UnivMon;
use inca_switch::harness::Harness;
use inca_switch::{Profile, Program, Switch};
use inca_wire::ethernet::VlanTag;
use inca_wire::{build_udp_frame, Endpoints};
use proptest::prelude::*;

const SEED: u64 = 13;
const STEP: u64 = 1_000;

/// A random UDP packet: a few tenants, sources, destinations and ports.
fn packet(op: (u8, u8, u8, u8)) -> Vec<u8> {
    let (vlan, src, dst, port) = op;
    let mut ep = Endpoints::new(
        [2, 0, 0, 0, 0, 1],
        Ipv4Addr::new(10, 0, 0, src % 5),
        [2, 0, 0, 0, 0, 2],
        Ipv4Addr::new(192, 0, 2, dst % 40),
    );
    if vlan % 3 != 0 {
        ep.vlan = Some(VlanTag {
            pcp: 0,
            dei: false,
            vid: u16::from(vlan % 3) * 7,
        });
    }
    build_udp_frame(&ep, 1000 + u16::from(port % 3), 80, b"x", true).unwrap()
}

/// Runs `prog` on the packets of `ops`, calling `check` after each with
/// the frame and the switch.
fn run<P: Program>(prog: P, ops: &[(u8, u8, u8, u8)], mut check: impl FnMut(&[u8], &Switch<P>)) {
    println!("seed {SEED}");
    let mut h = Harness::new(Switch::new(Profile::tofino(), prog).unwrap(), SEED);
    for (i, &op) in ops.iter().enumerate() {
        let f = packet(op);
        let t = i as u64 * STEP;
        h.send(t, 0, f.clone());
        h.advance_to(t + STEP - 1);
        let out = h.take();
        assert_eq!(out.len(), 1, "a monitor forwards every packet");
        assert_eq!(out[0].frame, f, "unchanged");
        check(&f, &h.device);
    }
}

fn ops() -> impl Strategy<Value = Vec<(u8, u8, u8, u8)>> {
    prop::collection::vec(any::<(u8, u8, u8, u8)>(), 1..120)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(16))]

    #[test]
    fn heavy_hitter_matches_a_count_min_per_tenant(ops in ops()) {
        let (vlans, rows, bits, threshold) = (4usize, 3usize, 3u8, 6u32);
        let hh = HeavyHitter::new(vlans, 1 << bits, rows, threshold, 0, MonitorPath::default());
        let mut reference: BTreeMap<u16, CountMin> = BTreeMap::new();
        let mut reached = BTreeSet::new();
        run(hh, &ops, |f, sw| {
            let p = parse(f).unwrap();
            let key = p.five_tuple();
            let tenant = p.vlan & (vlans as u16 - 1);
            let cm = reference
                .entry(tenant)
                .or_insert_with(|| CountMin::new(RowHashes::Rotated, rows, bits));
            if cm.add(&key) >= threshold {
                reached.insert((p.vlan, key));
            }
            let got = sw.program().estimate(sw.objects(), p.vlan, &key);
            assert_eq!(got, Some(cm.estimate(&key)));
            let reported: BTreeSet<_> = sw
                .program()
                .reports()
                .iter()
                .map(|r| (r.report.vlan, r.report.key))
                .collect();
            // The control plane hears of a report a little later.
            assert!(reported.is_subset(&reached), "{reported:?} ⊄ {reached:?}");
        });
    }

    #[test]
    fn univmon_level_zero_is_a_count_min(ops in ops()) {
        let (rows, bits) = (3usize, 4u8);
        let um = UnivMon::new(4, rows, 1 << bits, 1000, 0, MonitorPath::default());
        let mut cm = CountMin::new(RowHashes::Rotated, rows, bits);
        run(um, &ops, |f, sw| {
            let key = parse(f).unwrap().five_tuple();
            cm.add(&key);
            assert_eq!(sw.program().peek(sw.objects(), &key), Some(cm.estimate(&key)));
        });
    }

    #[test]
    fn superspreader_matches_a_bitset_sketch(ops in ops()) {
        let (rows, bits) = (3usize, 2u8);
        let ss = SuperSpreader::new(1 << bits, rows, 100, 16, 0, MonitorPath::default());
        let mut sk = BitsetSketch::new(RowHashes::Rotated, rows, bits);
        run(ss, &ops, |f, sw| {
            let p = parse(f).unwrap();
            let bit = counter::index(&p.dst, 32) as u32;
            sk.insert(&p.src, bit);
            for s in 0..5u8 {
                let src = [10, 0, 0, s];
                assert_eq!(sw.program().popcount(sw.objects(), src), Some(sk.popcount(&src)));
            }
        });
    }

    #[test]
    fn flow_counter_matches_the_counter_core(ops in ops()) {
        let entries = 8usize;
        let fc = FlowCounter::new(entries, 16, 4, MonitorPath::default());
        let mut counts = vec![0u32; entries];
        run(fc, &ops, |f, sw| {
            let key = counter::flow_key(&parse(f).unwrap()).expect("IPv4");
            let i = counter::index(&key, entries) as usize;
            counter::add(&mut counts[i], 1, Overflow::Wrap);
            assert_eq!(sw.program().flow_index(&key), i as u64);
            assert_eq!(sw.program().flow_count(sw.objects(), &key), Some(counts[i]));
        });
    }
}
