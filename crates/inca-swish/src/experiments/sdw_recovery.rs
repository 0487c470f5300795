//! Spec §8.2 experiment 10 (SwiSh Fig. 6): SDW recovery time. On
//! symmetric-4, `f` pipes chosen at random from the seed lose every
//! replication port at once, at a random phase of a window; T_detect
//! later the controller runs §5.6 ([`crate::sdw::recovery::recover`]);
//! the run ends when every survivor has advanced a window past the
//! restart. The time from the failure until then is the recovery time.
//!
//! [our choice] A failed pipe is killed (fail-stop, its links go dark):
//! what the survivors see is the spec's "disabling their ports". A pipe
//! left running behind dead ports would only retransmit into them (and
//! cost the simulator millions of events per run at C = 256) without
//! changing anything a survivor sees.

use inca_apps::params::Params;
use inca_sim::engine::Fault;
use inca_sim::metrics::NodeReport;
use inca_switch::Nanos;
use inca_system::{BuiltinExperiment, ExperimentRun};

use super::default_rows;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::sdw::recovery::{recover, T_DETECT};
use crate::sdw::rig::{Rig, RigConfig, Topology};

/// The experiment's parameters.
/// `col_shift` divides `cols` by 2^shift (at least 1 column): a quick
/// sweep keeps the full sweep's axis and runs a smaller sketch; the
/// columns actually run are reported (`result/cols`).
pub const PARAMS: &[&str] = &["cols", "rows", "f", "t_detect", "col_shift"];

/// E10's registration.
pub fn experiments() -> Vec<BuiltinExperiment> {
    vec![BuiltinExperiment {
        name: "swish-sdw-recovery-time",
        about: "SDW recovery on symmetric-4 (spec §8.2 exp. 10): f random pipes lose \
                their ports, the controller recovers T_detect later; time from the \
                failure until every survivor advances a window again",
        params: PARAMS,
        run,
    }]
}

/// Windows every replica completes before the failure [our choice: past
/// start-up, so the failure hits a running protocol].
const WARM_ADVANCES: usize = 3;
/// How long a run may take in simulated time before it is called stuck.
const RUN_LIMIT: Nanos = 600_000_000_000;

/// What one recovery measured.
#[derive(Debug, Clone, Copy, Default)]
pub struct Recovery {
    /// Failed pipes.
    pub f: usize,
    /// From the failure to the last survivor's first advance after the
    /// restart.
    pub total: Nanos,
    /// The controller's procedure: detection to the last START.
    pub controller: Nanos,
    /// From the last START to the last survivor's first advance.
    pub restart: Nanos,
    /// Survivors that lagged a window at the pause.
    pub lagging: usize,
}

/// Runs one recovery: symmetric-4 with `rows` × `cols`, `f` failed pipes,
/// detection `t_detect` after the failure.
pub fn measure(
    rows: u8,
    cols: u32,
    f: usize,
    t_detect: Nanos,
    seed: u64,
) -> Result<(Rig, Recovery), String> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x4531_3052);
    let mut order: Vec<usize> = (0..4).collect();
    order.shuffle(&mut rng);
    let victims = &order[..f.min(3)];
    let mut cfg = RigConfig {
        topology: Topology::Symmetric4,
        seed,
        t_detect,
        ..RigConfig::default()
    };
    cfg.base.rows = rows;
    cfg.base.cols = cols;
    let mut rig = Rig::build(&cfg, &[])?;
    // Warm up, then fail at a random phase of the next window.
    let step = 10_000;
    let mut t = cfg.start_at;
    let advanced = |rig: &Rig| {
        (0..4).all(|i| {
            rig.switch(i)
                .is_some_and(|s| s.program().advances.len() > WARM_ADVANCES)
        })
    };
    while !advanced(&rig) {
        if t > RUN_LIMIT {
            return Err(format!("cols={cols}: no {WARM_ADVANCES} windows by {t} ns"));
        }
        t += step;
        rig.sim.run_until(t, |_| {});
    }
    let log = &rig.switch(0).ok_or("no replica")?.program().advances;
    let window = log[log.len() - 1].1 - log[log.len() - 2].1;
    let t_fail = t + rng.gen_range(0..window.max(1));
    for &i in victims {
        rig.sim.schedule(t_fail, Fault::Crash(rig.replicas[i]));
    }
    rig.sim.run_until(t_fail + t_detect, |_| {});
    let report = recover(&mut rig, victims)?;
    let again = report.wmax.wrapping_add(2);
    let survivors: Vec<usize> = (0..4).filter(|i| !victims.contains(i)).collect();
    let mut t = report.resumed;
    let first_after = |rig: &Rig, i: usize| {
        rig.switch(i).and_then(|s| {
            s.program()
                .advances
                .iter()
                .find(|(w, at)| *w == again && *at >= report.resumed)
                .map(|a| a.1)
        })
    };
    let last = loop {
        let firsts: Option<Vec<Nanos>> = survivors.iter().map(|&i| first_after(&rig, i)).collect();
        if let Some(v) = firsts {
            break v.into_iter().max().unwrap_or(t);
        }
        if t > report.resumed + RUN_LIMIT {
            return Err(format!("no advance to window {again} after the recovery"));
        }
        t += step;
        rig.sim.run_until(t, |_| {});
    };
    let m = Recovery {
        f: victims.len(),
        total: last - t_fail,
        controller: report.resumed - report.started,
        restart: last - report.resumed,
        lagging: report.lagging.len(),
    };
    Ok((rig, m))
}

fn run(p: &Params, seed: u64) -> Result<ExperimentRun, String> {
    let name = "swish-sdw-recovery-time";
    p.check_known(name, PARAMS).map_err(|e| e.to_string())?;
    let cols = p.count("cols", 64, 1 << 20).map_err(|e| e.to_string())? as u32;
    let shift = p.number("col_shift", 0, 0, 20).map_err(|e| e.to_string())?;
    let cols = (cols >> shift).max(1);
    let rows = p
        .number("rows", default_rows(cols).into(), 1, 3)
        .map_err(|e| e.to_string())? as u8;
    let f = p.number("f", 1, 1, 3).map_err(|e| e.to_string())? as usize;
    let t_detect = p
        .number("t_detect", T_DETECT, 0, 10_000_000_000)
        .map_err(|e| e.to_string())?;
    let (rig, m) = measure(rows, cols, f, t_detect, seed)?;
    let mut r = NodeReport::default();
    for (k, v) in [
        ("recovery_ns", m.total),
        ("detect_ns", t_detect),
        ("controller_ns", m.controller),
        ("restart_ns", m.restart),
        ("lagging", m.lagging as u64),
        ("failed", m.f as u64),
        ("cols", u64::from(cols)),
    ] {
        r.counters.insert(k.into(), v);
    }
    let now = rig.sim.now();
    let mut run = ExperimentRun::from_sim(&rig.sim, now).with_result("result", r);
    run.highlights.push(format!(
        "f={f} C={cols}: recovered in {:.3} ms (detect {:.3} ms, controller {:.3} ms, \
         restart {:.1} us)",
        m.total as f64 / 1e6,
        t_detect as f64 / 1e6,
        m.controller as f64 / 1e6,
        m.restart as f64 / 1e3
    ));
    Ok(run)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recovery_is_measured_and_bad_params_are_named() {
        let seed = 3;
        println!("seed {seed}");
        let p = Params::parse(["cols=4", "f=2"]).unwrap();
        let r = run(&p, seed).unwrap();
        let res = &r.nodes.iter().find(|n| n.0 == "result").unwrap().2;
        let total = res.counters["recovery_ns"];
        assert!(total > T_DETECT, "{total}");
        assert_eq!(res.counters["failed"], 2);
        let e = run(&Params::parse(["f=4"]).unwrap(), 1).unwrap_err();
        assert!(e.contains('f'), "{e}");
        let e = run(&Params::parse(["bogus=1"]).unwrap(), 1).unwrap_err();
        assert!(e.contains("bogus"), "{e}");
    }
}
