//! P11-style promotion quality (spec §6 P11): a stationary Zipf(0.99)
//! stream over 10,000 flows of one app, 200,000 packets per simulated
//! second. Switch-resident flows count on the fake switch's FM counters;
//! the rest reach their shard's device, where a first packet sets the flow
//! up through the hub and later ones count in the daemon's count-min
//! sketch, whose reports drive the hub's promotions. After 10 s the FM set
//! must overlap the true top `n_p·Q_p` by ≥ 80 %.

mod hub_rig;

use std::collections::BTreeSet;

use hub_rig::{Rig, TestApp, MS};
use inca_exoplane::daemon::DaemonInput;
use inca_exoplane::hub::check::check_p3;
use inca_exoplane::hub::{HubConfig, T_FLUSH};
use inca_exoplane::ids::AppId;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const FLOWS: u32 = 10_000;
const CAPACITY: u32 = 128;
const PER_MS: u32 = 200;

fn one_app() -> Vec<TestApp> {
    vec![TestApp::new(1, CAPACITY, 0)]
}

/// Cumulative Zipf(s) over ranks 1..=n; flow i has rank i + 1.
fn zipf_cdf(n: u32, s: f64) -> Vec<f64> {
    let mut acc = 0.0;
    let mut cdf: Vec<f64> = (1..=n)
        .map(|r| {
            acc += 1.0 / f64::from(r).powf(s);
            acc
        })
        .collect();
    let total = acc;
    cdf.iter_mut().for_each(|c| *c /= total);
    cdf
}

fn overlap(rig: &Rig) -> f64 {
    let top: BTreeSet<_> = (0..CAPACITY).map(Rig::uk).collect();
    let fm: BTreeSet<_> = rig.switch.fm.keys().map(|(_, uk)| uk.clone()).collect();
    top.intersection(&fm).count() as f64 / f64::from(CAPACITY)
}

#[test]
fn zipf_099_promotion_overlaps_top_n() {
    let seed = 11;
    println!("seed {seed}");
    let app = AppId(1);
    let mut rig = Rig::new(seed, 4, HubConfig::new(4), one_app, vec![CAPACITY]);
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let cdf = zipf_cdf(FLOWS, 0.99);
    for ms in 0..10_000u64 {
        for _ in 0..PER_MS {
            let u: f64 = rng.gen();
            let flow = cdf.partition_point(|&c| c < u).min(FLOWS as usize - 1) as u32;
            let uk = Rig::uk(flow);
            if let Some(c) = rig.switch.fm.get_mut(&(app, uk.clone())) {
                *c += 1;
                continue;
            }
            let Some(p) = rig.route(app, &uk) else {
                continue;
            };
            let d = rig.daemons[usize::from(p.0)].as_mut().unwrap();
            if d.applied_version(app, hub_rig::FLOW_OBJ, &uk.0).is_some() {
                d.handle(rig.now, DaemonInput::TailPacket { app, uk });
            } else {
                d.handle(
                    rig.now,
                    DaemonInput::Miss {
                        app,
                        uk,
                        frame: vec![0, 0],
                    },
                );
            }
            rig.drain_daemon(p);
        }
        rig.run_until((ms + 1) * MS);
        if (ms + 1) % 1000 == 0 {
            println!(
                "t={} s overlap {:.3} fm {} promotions {} evictions {}",
                (ms + 1) / 1000,
                overlap(&rig),
                rig.switch.fm.len(),
                rig.hub.stats().promotions,
                rig.hub.stats().evictions
            );
        }
    }
    assert!(rig.violations.is_empty(), "{:?}", rig.violations.first());
    check_p3(rig.hub.op_log(), T_FLUSH).expect("P3");
    let o = overlap(&rig);
    assert!(
        o >= 0.8,
        "overlap with the true top {CAPACITY} is {o:.3} < 0.8"
    );
}
