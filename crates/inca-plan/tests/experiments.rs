//! E1 and E12 (ExoPlane spec §8), quick versions asserting the expected
//! shapes: E1's SRAM need grows about linearly with flows and crosses the
//! switch's SRAM, the sketch adding an almost flow-independent amount;
//! E12's model grows with apps and flows and its time with apps (a loose
//! trend, not timings).

use inca_plan::experiments::{e1, e12, FRONT_END};
use inca_switch::Profile;

#[test]
fn e1_sram_need_grows_linearly_with_flows_and_crosses_the_switch() {
    let pts = e1(
        &Profile::tofino(),
        &[10_000, 100_000, 1_000_000, 10_000_000],
    )
    .unwrap();
    let a: Vec<_> = pts.iter().filter(|p| p.part == 'a').collect();
    for p in &a {
        println!("E1(a) {} flows: {:.3}", p.flows, p.ratio);
    }
    // Crosses 1 between 100 K and 1 M flows per app.
    assert!(
        a[1].ratio < 1.0 && a[2].ratio > 1.0,
        "{:?}",
        a.iter().map(|p| p.ratio).collect::<Vec<_>>()
    );
    // ~Linear: ten times the flows, about ten times the (flow-dependent) need.
    for w in a[1..].windows(2) {
        let k = w[1].ratio / w[0].ratio;
        assert!(
            (7.0..=11.0).contains(&k),
            "{} → {}: ×{k:.2}",
            w[0].flows,
            w[1].flows
        );
    }
    // The sketch monitor's need does not depend on the flows.
    let um = FRONT_END.iter().position(|a| *a == "univmon").unwrap();
    let um_need: Vec<u64> = a.iter().map(|p| p.per_app[um].1).collect();
    assert!(
        um_need.iter().all(|&n| n == um_need[0] && n > 0),
        "{um_need:?}"
    );
    // (b): each app added needs more; UnivMon adds a small amount at 1 M.
    let b: Vec<_> = pts.iter().filter(|p| p.part == 'b').collect();
    assert_eq!(b.len(), 4);
    assert!(b.windows(2).all(|w| w[1].ratio > w[0].ratio));
    assert!(b[3].ratio - b[2].ratio < 0.05 * b[3].ratio);
}

#[test]
fn e12_the_model_and_its_time_grow_with_apps_and_flows() {
    let pts = e12(&[1, 8], 1_000_000, &[100_000, 3_000_000]).unwrap();
    for p in &pts {
        println!(
            "E12({}) apps {} flows {}: {} columns, profile+ILP {:.3} s",
            p.part,
            p.apps,
            p.flows,
            p.columns,
            p.profile_seconds + p.solve_seconds
        );
    }
    let (a1, a8) = (&pts[0], &pts[1]);
    assert!(a8.columns > 4 * a1.columns);
    assert!(a8.profile_seconds + a8.solve_seconds > a1.profile_seconds + a1.solve_seconds);
    let (b1, b2) = (&pts[2], &pts[3]);
    assert_eq!(b1.apps, 4);
    assert!(b2.profile_seconds > 0.0 && b1.solve_seconds > 0.0);
}
