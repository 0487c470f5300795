//! The DDoS detector (specs/swish.md §7) on SDW and as the pull and push
//! baselines, on a few sources: the mechanisms block, the SDW detector
//! near the 1,000-destination line.

use std::time::Instant;

use inca_swish::ddos::rig::{DdosRig, DdosRigConfig, Detector};

fn run(detector: Detector, sources: u32, rate: u64) -> (f64, Vec<f64>) {
    let seed = 1;
    let cfg = DdosRigConfig {
        detector,
        seed,
        rate,
        sources,
        pkts: 3_000,
        cols: 64,
        ..DdosRigConfig::default()
    };
    let t = Instant::now();
    let mut rig = DdosRig::build(&cfg).unwrap();
    let out = rig.run().unwrap();
    let mut r = out.ratios();
    r.sort_by(f64::total_cmp);
    println!(
        "seed {seed} {} sources {sources} rate {rate}: mean {:.4} min {:.4} max {:.4} events {} wall {:?}",
        detector.name(),
        out.mean_ratio(),
        r[0],
        r[r.len() - 1],
        rig.sim.stats().events,
        t.elapsed()
    );
    (out.mean_ratio(), r)
}

#[test]
fn every_detector_blocks_its_sources() {
    for d in [Detector::Sdw, Detector::Pull, Detector::Push] {
        let (mean, r) = run(d, 4, 1_000);
        // 3,000 packets to distinct destinations at 10 Kpps: blocking near
        // 1,000 of them passes about a third (pull: at the poll after
        // detection, 100 ms later, about two thirds); none would pass all.
        assert!(r[r.len() - 1] < 0.9, "{} blocked nothing: {r:?}", d.name());
        assert!(mean > 0.15, "{} blocked too early: {r:?}", d.name());
    }
}

/// Paced windows (`SdwConfig::min_window`, used by experiment 8): every
/// window lasts at least the pace, windows keep advancing, and the two
/// replicas stay within one window of each other (D1).
#[test]
fn paced_sdw_windows_last_at_least_the_pace() {
    use inca_swish::sdw::rig::{Rig, RigConfig};
    let seed = 3;
    let mut cfg = RigConfig {
        seed,
        ..RigConfig::default()
    };
    cfg.base.cols = 4;
    cfg.base.min_window = 200_000;
    cfg.base.t_chk = 10_000;
    let mut rig = Rig::build(&cfg, &[]).unwrap();
    let end = cfg.start_at + 5_000_000;
    let mut t = cfg.start_at;
    while t < end {
        t += 50_000;
        rig.sim.run_until(t, |_| {});
        let (a, b) = (rig.window(0).unwrap(), rig.window(1).unwrap());
        assert!(
            a.abs_diff(b) <= 1,
            "seed {seed}: windows {a} and {b} at {t}"
        );
    }
    let adv = &rig.switch(0).unwrap().program().advances;
    println!("seed {seed}: {} advances in 5 ms", adv.len());
    // 5 ms / (200 µs + a round trip and the 10 µs timer) ≈ 23.
    assert!((15..=25).contains(&adv.len()), "{} advances", adv.len());
    for w in adv.windows(2) {
        assert!(
            w[1].1 - w[0].1 >= 200_000,
            "a window shorter than the pace: {w:?}"
        );
    }
}
