//! `exoplane-plan`: one whole planner run (profile, ILP on HiGHS, merge)
//! of the front-end scenario, 4 apps on 16 smart NICs with 1 M flows per
//! app (issue 17). The figure is plans per second, so the "< 1 s" budget
//! reads as at least 1 plan/s; the notes carry HiGHS's own solve time.

use inca_plan::plan::{front_end, plan};
use inca_system::bench::{median, Baseline, Ctx, Measured};

/// Runs the benchmark.
pub fn exoplane_plan(ctx: &Ctx) -> anyhow::Result<Measured> {
    let flows = ctx.size(1_000_000, 100_000);
    let inputs = front_end(16, flows);
    plan(&inputs)?;
    let mut samples = Vec::new();
    let mut highs = Vec::new();
    let mut last = None;
    for _ in 0..ctx.runs {
        let t = std::time::Instant::now();
        let r = plan(&inputs)?;
        samples.push(1.0 / t.elapsed().as_secs_f64());
        highs.push(r.highs_seconds);
        last = Some(r);
    }
    let r = last.ok_or_else(|| anyhow::anyhow!("no runs"))?;
    let shares: Vec<String> = r
        .apps
        .iter()
        .map(|a| format!("{} n_p={}", a.name, a.switch_quanta))
        .collect();
    Ok(Measured {
        samples,
        baseline: Baseline::None,
        notes: vec![
            format!("4 apps x {flows} flows, 16 smartnic devices, Q_p = 1,024"),
            format!(
                "HiGHS median {:.3} s; ILP {} columns x {} rows; {}",
                median(&highs),
                r.columns,
                r.rows,
                shares.join(", ")
            ),
        ],
    })
}
