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
