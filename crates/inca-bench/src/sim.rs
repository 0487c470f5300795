//! Simulator speed: experiments/two-switches-load.toml (66-byte UDP at 100
//! Gbps line rate through two NAT switches in series to a sink, 15 ms of
//! virtual time; `--quick`: 7 ms) on one core, in events per second. The
//! scenario is compiled in, so `inca bench` needs no checkout.
//! crates/inca/benches/simulator.rs measures the same runs with criterion.

use std::sync::Arc;

use anyhow::ensure;
use inca_sim::nodes::host::Host;
use inca_sim::scenario::{Built, Loaded};
use inca_system::apps::AppsSystem;
use inca_system::{Registry, System, SystemFactory};

use super::{Baseline, Ctx, Measured};
use inca_system::bench::{profiled, rate};

/// The scenario's text.
pub const SCENARIO: &str = include_str!("../../../experiments/two-switches-load.toml");

/// The scenario, with `overrides` (`key=value`).
pub fn scenario(overrides: &[String]) -> anyhow::Result<Loaded> {
    Ok(Loaded::from_str(
        SCENARIO,
        "experiments/two-switches-load.toml",
        overrides,
    )?)
}

/// A fresh simulation of `loaded`.
pub fn build(loaded: &Loaded) -> anyhow::Result<Built> {
    // The scenario's switches run the plain NAT: the apps system suffices.
    let apps: Vec<Arc<dyn System>> = vec![Arc::new(AppsSystem)];
    let factory = SystemFactory::new(Registry::new(apps)?);
    Ok(loaded.build(&factory, None, None)?)
}

/// Runs `built` to its end: (events, packets delivered to the sink).
pub fn run(mut built: Built) -> anyhow::Result<(u64, u64)> {
    let sink = built
        .sim
        .node_id("sink")
        .ok_or_else(|| anyhow::anyhow!("no sink"))?;
    built.sim.run_until(built.duration, |_| {});
    let delivered = built
        .sim
        .node::<Host>(sink)
        .ok_or_else(|| anyhow::anyhow!("sink is not a host"))?
        .stats()
        .rx_packets;
    Ok((built.sim.stats().events, delivered))
}

fn overrides(quick: bool) -> Vec<String> {
    // The load starts at 5 ms; 7 ms keeps 2 ms of it.
    if quick {
        vec!["duration=\"7ms\"".into()]
    } else {
        Vec::new()
    }
}

/// `sim`: events per second over whole runs (building each run's
/// simulation is not timed). The first run is the warm-up.
pub fn events(ctx: &Ctx) -> anyhow::Result<Measured> {
    let loaded = scenario(&overrides(ctx.quick))?;
    let (events, packets) = run(build(&loaded)?)?;
    ensure!(packets > 0, "no packet reached the sink");
    let mut samples = Vec::new();
    for _ in 0..ctx.runs {
        let built = build(&loaded)?;
        let start = std::time::Instant::now();
        let (e, p) = run(built)?;
        samples.push(rate(e, start.elapsed()));
        ensure!(
            (e, p) == (events, packets),
            "the simulation is not deterministic: {e} events, {p} packets, then {events}, {packets}"
        );
    }
    Ok(Measured {
        samples,
        baseline: Baseline::None,
        notes: vec![format!(
            "{events} events and {packets} packets end to end per run (the same every run)"
        )],
    })
}

/// `sim --profile-iterations N`: N runs of the quick scenario.
pub fn profile(n: u64) -> anyhow::Result<String> {
    let loaded = scenario(&overrides(true))?;
    let mut events = 0;
    for _ in 0..n {
        let built = build(&loaded)?;
        events += profiled(|| run(built))?.0;
    }
    Ok(format!("{n} runs of the 7 ms scenario, {events} events"))
}
