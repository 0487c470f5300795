//! The super-spreader detector through the switch model with real frames: a
//! scanner is blocked after the threshold and its later packets are dropped
//! and counted; normal sources are not blocked; forwarding, other profiles,
//! random bytes and the resource check.

use std::net::Ipv4Addr;

use inca_apps::core::sketch::{destinations_of, popcount_threshold};
use inca_apps::counters::MonitorPath;
use inca_apps::params::Params;
use inca_apps::superspreader::SuperSpreader;
use inca_switch::device::MILLIS;
use inca_switch::harness::Harness;
use inca_switch::{check, Profile, Switch};
use inca_wire::{build_udp_frame, Endpoints};
use proptest::prelude::*;

const SEED: u64 = 11;

fn frame(src: [u8; 4], dst: [u8; 4], dport: u16) -> Vec<u8> {
    let ep = Endpoints::new(
        [2, 0, 0, 0, 0, 1],
        Ipv4Addr::from(src),
        [2, 0, 0, 0, 0, 2],
        Ipv4Addr::from(dst),
    );
    build_udp_frame(&ep, 40_000, dport, b"probe", true).unwrap()
}

fn switch(s: SuperSpreader) -> Harness<Switch<SuperSpreader>> {
    println!("seed {SEED}");
    Harness::new(Switch::new(Profile::tofino(), s).unwrap(), SEED)
}

fn detector() -> SuperSpreader {
    SuperSpreader::new(4096, 3, 20, 1024, 0, MonitorPath::default())
}

const SCANNER: [u8; 4] = [10, 0, 0, 66];

#[test]
fn the_threshold_maps_destinations_to_bits() {
    assert_eq!(popcount_threshold(20.0), 15);
    assert_eq!(popcount_threshold(1.0), 1);
    assert_eq!(popcount_threshold(1000.0), 32);
    assert!((destinations_of(15) - 20.3).abs() < 0.5);
}

#[test]
fn a_scanner_is_blocked_after_the_threshold_and_then_dropped() {
    let mut h = switch(detector());
    let threshold = h.device.program().popcount_threshold();
    // The scanner probes 300 destinations, one every 2 µs (600 µs in all);
    // a normal source talks to 3 servers all the time.
    let mut sent_scanner = 0u64;
    for i in 0..300u32 {
        let t = u64::from(i) * 2_000;
        let dst = [192, 0, 2 + (i / 250) as u8, (i % 250) as u8 + 1];
        h.send(t, 0, frame(SCANNER, dst, 22));
        sent_scanner += 1;
        h.send(
            t + 1_000,
            0,
            frame([10, 0, 0, 5], [192, 0, 2, (i % 3) as u8 + 1], 443),
        );
    }
    h.advance_to(100 * MILLIS);
    let out = h.take();
    let sw = &h.device;
    let ss = sw.program();
    assert_eq!(
        ss.blocked().len(),
        1,
        "only the scanner: {:?}",
        ss.blocked()
    );
    let block = ss.blocked()[&SCANNER];
    assert!(u32::from(block.popcount) >= threshold);
    let scanner_out = out.iter().filter(|t| t.frame[26..30] == SCANNER).count() as u64;
    let normal_out = out.len() as u64 - scanner_out;
    assert_eq!(normal_out, 300, "the normal source is never dropped");
    // At least `threshold` distinct destinations before the detection, then
    // the block takes the digest, the CPU and one table write to arrive.
    let cp = Profile::tofino().control_plane;
    let reaction = cp.digest_latency + cp.cpu_per_event + cp.table_write;
    assert!(
        scanner_out >= u64::from(threshold),
        "{scanner_out} forwarded"
    );
    assert!(
        scanner_out <= 80 + reaction / 2_000 + 2,
        "blocked soon after the threshold: {scanner_out} forwarded"
    );
    let (pkts, bytes) = ss.dropped(sw.objects(), SCANNER).unwrap();
    assert_eq!(
        pkts,
        sent_scanner - scanner_out,
        "dropped packets are counted"
    );
    assert_eq!(bytes, pkts * frame(SCANNER, [1; 4], 22).len() as u64);
    assert_eq!(sw.stats().program_drops, pkts);
    println!(
        "scanner: {scanner_out} forwarded, {pkts} dropped; {} reports; popcount {}",
        ss.reports,
        ss.popcount(sw.objects(), SCANNER).unwrap()
    );
    assert!(ss.popcount(sw.objects(), [10, 0, 0, 5]).unwrap() <= 3);
}

#[test]
fn many_normal_sources_are_not_blocked() {
    let mut h = switch(detector());
    let mut n = 0u64;
    for s in 0..500u32 {
        let src = [10, 1, (s >> 8) as u8, s as u8];
        for k in 0..8u32 {
            let dst = [192, 0, 2, ((s + k) % 5) as u8 + 1];
            h.send(n * 200, 0, frame(src, dst, 80));
            n += 1;
        }
    }
    h.advance_to(100 * MILLIS);
    assert_eq!(h.take().len() as u64, n);
    assert!(h.device.program().blocked().is_empty());
    assert_eq!(h.device.stats().digests, 0);
}

#[test]
fn the_epoch_clears_the_bitsets_but_keeps_blocks() {
    let s = SuperSpreader::new(256, 3, 20, 16, 10 * MILLIS, MonitorPath::default());
    let mut h = switch(s);
    for i in 0..100u32 {
        h.send(
            u64::from(i) * 1_000,
            0,
            frame(SCANNER, [192, 0, 2, i as u8 + 1], 22),
        );
        h.send(
            u64::from(i) * 1_000 + 500,
            0,
            frame([10, 0, 0, 9], [192, 0, 3, (i % 10) as u8 + 1], 22),
        );
    }
    h.advance_to(9 * MILLIS);
    let other = h
        .device
        .program()
        .popcount(h.device.objects(), [10, 0, 0, 9])
        .unwrap();
    assert!(other > 0);
    h.advance_to(15 * MILLIS);
    assert_eq!(
        h.device
            .program()
            .popcount(h.device.objects(), [10, 0, 0, 9]),
        Some(0)
    );
    h.take();
    h.send(16 * MILLIS, 0, frame(SCANNER, [192, 0, 2, 1], 22));
    h.advance_to(17 * MILLIS);
    assert!(h.take().is_empty(), "still blocked after the reset");
}

#[test]
fn a_full_block_table_refuses_more_sources() {
    let s = SuperSpreader::new(4096, 3, 5, 1, 0, MonitorPath::default());
    let mut h = switch(s);
    for k in 0..3u8 {
        for i in 0..40u32 {
            let t = (u64::from(k) * 40 + u64::from(i)) * 1_000;
            h.send(t, 0, frame([10, 9, 9, k], [192, 0, 2, i as u8 + 1], 22));
        }
    }
    h.advance_to(100 * MILLIS);
    let ss = h.device.program();
    assert_eq!(ss.blocked().len(), 1);
    assert!(ss.refused >= 2);
}

#[test]
fn forwards_both_ways_and_passes_non_ip_frames() {
    let mut h = switch(SuperSpreader::from_params(&Params::default()).unwrap());
    let f = frame([10, 0, 0, 1], [10, 0, 0, 2], 80);
    h.send(0, 0, f.clone());
    h.send(1000, 1, f.clone());
    let mut arp = vec![0xff; 6];
    arp.extend_from_slice(&[2, 0, 0, 0, 0, 1, 0x08, 0x06]);
    arp.extend_from_slice(&[0; 28]);
    h.send(2000, 1, arp);
    h.advance_to(MILLIS);
    let ports: Vec<u16> = h.take().iter().map(|t| t.port).collect();
    assert_eq!(ports, vec![1, 0, 0]);
}

#[test]
fn loads_and_blocks_on_a_smartnic_and_a_server() {
    for profile in [Profile::smartnic(), Profile::server()] {
        let name = profile.name.clone();
        let defaults = SuperSpreader::from_params(&Params::default()).unwrap();
        assert!(
            Switch::new(profile.clone(), defaults).is_ok(),
            "{name}: defaults"
        );
        let mut h = Harness::new(Switch::new(profile, detector()).unwrap(), SEED);
        // 50 ms of probes: longer than a smart NIC's 20 ms table write.
        for i in 0..500u32 {
            let dst = [192, 0, (i >> 8) as u8, i as u8];
            h.send(u64::from(i) * 100_000, 0, frame(SCANNER, dst, 22));
        }
        h.advance_to(2_000 * MILLIS);
        let sw = &h.device;
        assert!(sw.program().blocked().contains_key(&SCANNER), "{name}");
        let (pkts, _) = sw.program().dropped(sw.objects(), SCANNER).unwrap();
        assert!(pkts > 0, "{name}");
        assert!(sw.violations().is_empty(), "{name}");
    }
}

#[test]
fn parameters_are_checked() {
    assert!(SuperSpreader::from_params(&Params::parse(["flows=1000"]).unwrap()).is_err());
    assert!(SuperSpreader::from_params(&Params::parse(["threshold=101"]).unwrap()).is_err());
    assert!(SuperSpreader::from_params(&Params::parse(["flows=65536", "rows=4"]).unwrap()).is_ok());
}

#[test]
fn resource_check_finds_the_largest_sketch() {
    let tofino = Profile::tofino();
    let fits = |flows: usize| {
        let mut s = SuperSpreader::new(flows, 3, 20, 1024, 0, MonitorPath::default());
        check(&tofino, &mut s)
    };
    let mut flows = 4096;
    while fits(flows * 2).is_ok() {
        flows *= 2;
    }
    println!("largest: {flows} bitsets per row\n{}", fits(flows).unwrap());
    let err = fits(flows * 2).unwrap_err().to_string();
    println!("{err}");
    assert!(err.contains("spread_row"), "{err}");
    assert_eq!(flows, 131_072);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    #[test]
    fn random_frames_never_panic_and_are_all_counted(
        frames in proptest::collection::vec((0u16..32, proptest::collection::vec(any::<u8>(), 0..600)), 1..60)
    ) {
        let s = SuperSpreader::new(64, 3, 2, 8, 0, MonitorPath::default());
        let mut h = switch(s);
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
