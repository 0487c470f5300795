//! The heavy-hitter detector through the switch model with real frames:
//! count-min accuracy against exact counts on a Zipf-like workload, one
//! report per heavy key per epoch, tenant isolation, epoch resets,
//! forwarding, other profiles, random bytes, and the resource check.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use inca_apps::counters::MonitorPath;
use inca_apps::heavy_hitter::HeavyHitter;
use inca_apps::params::Params;
use inca_switch::device::MILLIS;
use inca_switch::harness::Harness;
use inca_switch::{check, Profile, Switch};
use inca_wire::ethernet::VlanTag;
use inca_wire::{build_udp_frame, Endpoints};
use proptest::prelude::*;

const SEED: u64 = 7;

/// SplitMix64: a small deterministic generator for workloads.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// A UDP flow: (vlan, src, dst, sport, dport).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Flow(u16, [u8; 4], [u8; 4], u16, u16);

impl Flow {
    fn nth(vlan: u16, i: u32) -> Flow {
        let b = i.to_be_bytes();
        Flow(
            vlan,
            [10, b[1], b[2], b[3]],
            [192, 0, 2, (i % 200) as u8 + 1],
            1024 + (i % 5000) as u16,
            80,
        )
    }
    fn frame(&self) -> Vec<u8> {
        let mut ep = Endpoints::new(
            [2, 0, 0, 0, 0, 1],
            Ipv4Addr::from(self.1),
            [2, 0, 0, 0, 0, 2],
            Ipv4Addr::from(self.2),
        );
        if self.0 != 0 {
            ep.vlan = Some(VlanTag {
                pcp: 0,
                dei: false,
                vid: self.0,
            });
        }
        build_udp_frame(&ep, self.3, self.4, b"payload", true).unwrap()
    }
    fn key(&self) -> [u8; 13] {
        let mut k = [0u8; 13];
        k[0..4].copy_from_slice(&self.1);
        k[4..8].copy_from_slice(&self.2);
        k[8] = 17;
        k[9..11].copy_from_slice(&self.3.to_be_bytes());
        k[11..13].copy_from_slice(&self.4.to_be_bytes());
        k
    }
}

fn switch(hh: HeavyHitter) -> Harness<Switch<HeavyHitter>> {
    println!("seed {SEED}");
    Harness::new(Switch::new(Profile::tofino(), hh).unwrap(), SEED)
}

/// Sends `flows` in order, 100 ns apart from `t0`, on port 0; returns the
/// exact count per flow.
fn send_all(h: &mut Harness<Switch<HeavyHitter>>, t0: u64, flows: &[Flow]) -> BTreeMap<Flow, u32> {
    let mut exact = BTreeMap::new();
    for (i, f) in flows.iter().enumerate() {
        h.send(t0 + 100 * i as u64, 0, f.frame());
        *exact.entry(*f).or_insert(0) += 1;
    }
    exact
}

#[test]
fn estimates_never_undercount_and_stay_within_the_count_min_bound() {
    let (slots, rows) = (64usize, 3usize);
    let hh = HeavyHitter::new(4, slots, rows, u32::MAX, 0, MonitorPath::default());
    let mut h = switch(hh);
    // Zipf(1.1) over 400 flows in VLAN 7, plus a uniform tenant in VLAN 9.
    let weights: Vec<f64> = (0..400)
        .map(|i| 1.0 / f64::powf(i as f64 + 1.0, 1.1))
        .collect();
    let total: f64 = weights.iter().sum();
    let mut rng = Rng(SEED);
    let mut stream = Vec::new();
    for _ in 0..20_000 {
        let mut u = (rng.next() >> 11) as f64 / (1u64 << 53) as f64 * total;
        let mut i = 0;
        while i + 1 < weights.len() && u >= weights[i] {
            u -= weights[i];
            i += 1;
        }
        stream.push(Flow::nth(7, i as u32));
    }
    for _ in 0..5_000 {
        stream.push(Flow::nth(9, 1000 + rng.below(100) as u32));
    }
    // Interleave the tenants.
    for i in (1..stream.len()).rev() {
        stream.swap(i, rng.below(i as u64 + 1) as usize);
    }
    let exact = send_all(&mut h, 0, &stream);
    h.advance_to(100 * MILLIS);
    assert_eq!(h.take().len(), stream.len(), "every packet is forwarded");
    assert!(h.device.violations().is_empty());

    let hh = h.device.program();
    let objects = h.device.objects();
    for vlan in [7u16, 9] {
        let n: u32 = exact
            .iter()
            .filter(|(f, _)| f.0 == vlan)
            .map(|(_, c)| c)
            .sum();
        let eps = std::f64::consts::E / slots as f64;
        let bound = eps * f64::from(n);
        let delta = (-(rows as f64)).exp();
        let mut over = 0;
        let mut keys = 0;
        for (f, &c) in exact.iter().filter(|(f, _)| f.0 == vlan) {
            let est = hh.estimate(objects, vlan, &f.key()).unwrap();
            assert!(est >= c, "{f:?}: estimate {est} < exact {c}");
            keys += 1;
            if f64::from(est - c) > bound {
                over += 1;
            }
        }
        println!(
            "vlan {vlan}: N {n}, {keys} keys, εN {bound:.0}, {over} over the bound, δ {delta:.3}"
        );
        assert!(
            f64::from(over) <= (2.0 * delta * keys as f64).ceil(),
            "vlan {vlan}: {over} of {keys} keys exceed εN = {bound:.0}"
        );
    }
}

#[test]
fn heavy_keys_are_reported_once_and_light_keys_never() {
    let threshold = 500;
    let hh = HeavyHitter::new(64, 64, 3, threshold, 0, MonitorPath::default());
    let mut h = switch(hh);
    let mut rng = Rng(SEED + 1);
    let heavy: Vec<Flow> = (0..4).map(|i| Flow::nth(10, 50_000 + i)).collect();
    let mut stream = Vec::new();
    for f in &heavy {
        stream.extend(std::iter::repeat_n(*f, 1500));
    }
    // The same 5-tuple as a heavy key, in another tenant, below the threshold.
    let other_tenant = Flow(20, heavy[0].1, heavy[0].2, heavy[0].3, heavy[0].4);
    stream.extend(std::iter::repeat_n(other_tenant, 300));
    for i in 0..300 {
        let f = Flow::nth(10, i);
        stream.extend(std::iter::repeat_n(f, 1 + rng.below(5) as usize));
    }
    for i in (1..stream.len()).rev() {
        stream.swap(i, rng.below(i as u64 + 1) as usize);
    }
    let exact = send_all(&mut h, 0, &stream);
    h.advance_to(100 * MILLIS);

    let hh = h.device.program();
    let mut reported: Vec<Flow> = hh
        .reports()
        .iter()
        .map(|r| {
            let k = r.report.key;
            Flow(
                r.report.vlan,
                k[0..4].try_into().unwrap(),
                k[4..8].try_into().unwrap(),
                u16::from_be_bytes([k[9], k[10]]),
                u16::from_be_bytes([k[11], k[12]]),
            )
        })
        .collect();
    reported.sort();
    let mut want = heavy.clone();
    want.sort();
    assert_eq!(reported, want, "exactly the heavy keys");
    assert_eq!(h.device.stats().digests, 4, "one digest per heavy key");
    assert_eq!(hh.duplicate_reports, 0);
    for r in hh.reports() {
        assert!(r.report.estimate >= threshold);
        assert!(r.at >= Profile::tofino().control_plane.digest_latency);
        assert_eq!(r.epoch, 0);
    }
    let objects = h.device.objects();
    let est = hh.estimate(objects, 20, &other_tenant.key()).unwrap();
    assert!(
        est >= 300 && est < threshold,
        "the other tenant's sketch: {est}"
    );
    assert_eq!(exact[&other_tenant], 300);
}

#[test]
fn an_epoch_reset_clears_the_sketch_and_reports_again() {
    let hh =
        HeavyHitter::new(4, 64, 3, 100, 50 * MILLIS, MonitorPath::default()).with_bloom_bits(4096);
    let mut h = switch(hh);
    let f = Flow::nth(3, 1);
    send_all(&mut h, 0, &vec![f; 200]);
    h.advance_to(45 * MILLIS);
    assert_eq!(h.device.program().reports().len(), 1);
    assert_eq!(
        h.device.program().estimate(h.device.objects(), 3, &f.key()),
        Some(200)
    );
    // The reset at 50 ms: five clears of (50 µs + 2.58 µs per entry) each.
    h.advance_to(58 * MILLIS);
    let hh = h.device.program();
    assert_eq!(hh.epoch_number(), 1);
    assert_eq!(hh.estimate(h.device.objects(), 3, &f.key()), Some(0));
    send_all(&mut h, 60 * MILLIS, &vec![f; 150]);
    h.advance_to(70 * MILLIS);
    let reports = h.device.program().reports();
    assert_eq!(reports.len(), 2, "reported again in the new epoch");
    assert_eq!(reports[1].epoch, 1);
    assert_eq!(reports[1].report.estimate, 100);
}

#[test]
fn forwards_both_ways_and_passes_non_ip_frames() {
    let mut h = switch(HeavyHitter::from_params(&Params::default()).unwrap());
    let f = Flow::nth(0, 1).frame();
    h.send(0, 0, f.clone());
    h.send(1000, 1, f.clone());
    h.send(2000, 5, f.clone());
    let mut arp = vec![0xff; 6];
    arp.extend_from_slice(&[2, 0, 0, 0, 0, 1, 0x08, 0x06]);
    arp.extend_from_slice(&[0; 28]);
    h.send(3000, 0, arp);
    h.advance_to(MILLIS);
    let ports: Vec<u16> = h.take().iter().map(|t| t.port).collect();
    assert_eq!(ports, vec![1, 0, 1, 1]);
    let p = Params::parse(["in_port=2", "out_port=3"]).unwrap();
    let mut h = switch(HeavyHitter::from_params(&p).unwrap());
    h.send(0, 3, f.clone());
    h.send(1000, 0, f);
    h.advance_to(MILLIS);
    let ports: Vec<u16> = h.take().iter().map(|t| t.port).collect();
    assert_eq!(ports, vec![2, 3]);
}

#[test]
fn loads_and_reports_on_a_smartnic_and_a_server() {
    for profile in [Profile::smartnic(), Profile::server()] {
        let name = profile.name.clone();
        let defaults = HeavyHitter::from_params(&Params::default()).unwrap();
        assert!(
            Switch::new(profile.clone(), defaults).is_ok(),
            "{name}: defaults"
        );
        let hh = HeavyHitter::new(64, 64, 3, 50, 0, MonitorPath::default());
        let mut h = Harness::new(Switch::new(profile, hh).unwrap(), SEED);
        let f = Flow::nth(1, 9);
        for i in 0..60u64 {
            h.send(i * 10_000, 0, f.frame());
        }
        h.advance_to(1_000 * MILLIS);
        assert_eq!(h.take().len(), 60, "{name}");
        assert_eq!(h.device.program().reports().len(), 1, "{name}");
        assert!(h.device.violations().is_empty(), "{name}");
    }
}

#[test]
fn parameters_are_checked() {
    assert!(HeavyHitter::from_params(&Params::parse(["slots=100"]).unwrap()).is_err());
    assert!(HeavyHitter::from_params(&Params::parse(["flows=100"]).unwrap()).is_err());
    assert!(HeavyHitter::from_params(&Params::parse(["rows=9"]).unwrap()).is_err());
    let p = Params::parse(["vlans=16", "slots=1024", "rows=4", "threshold=10"]).unwrap();
    assert!(HeavyHitter::from_params(&p).is_ok());
}

/// The largest power-of-two `slots` per tenant (64 tenants) that fits, and
/// the error one step beyond.
#[test]
fn resource_check_finds_the_largest_sketch() {
    let tofino = Profile::tofino();
    let fits = |slots: usize| {
        let mut hh = HeavyHitter::new(64, slots, 3, 1000, 0, MonitorPath::default());
        check(&tofino, &mut hh)
    };
    let mut slots = 64;
    while fits(slots * 2).is_ok() {
        slots *= 2;
    }
    let report = fits(slots).unwrap();
    println!("largest: 64 VLANs × {slots} slots × 3 rows\n{report}");
    let err = fits(slots * 2).unwrap_err().to_string();
    println!("{err}");
    assert!(err.contains("cm_row"), "names the row: {err}");
    assert_eq!(slots, 2048, "64 × 2,048 × 32 bit = 32 SRAM blocks per row");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    #[test]
    fn random_frames_never_panic_and_are_all_counted(
        frames in proptest::collection::vec((0u16..32, proptest::collection::vec(any::<u8>(), 0..600)), 1..60)
    ) {
        let hh = HeavyHitter::new(8, 64, 3, 2, 0, MonitorPath::default());
        let mut h = switch(hh);
        for (i, (port, f)) in frames.iter().enumerate() {
            h.send(i as u64 * 100, *port, f.clone());
        }
        h.advance_to(100 * MILLIS);
        let s = h.device.stats();
        prop_assert_eq!(s.fates(), frames.len() as u64, "{:?}", s);
        prop_assert_eq!(s.violation_drops, 0);
        let tx: u64 = s.ports.iter().map(|p| p.tx_packets).sum();
        prop_assert_eq!(h.transmit_count, tx);
    }
}
