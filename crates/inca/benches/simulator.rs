//! Simulator speed: experiments/two-switches-load.toml (line-rate 66-byte
//! UDP through two NAT switches in series, 15 ms of virtual time) on one
//! core. Reported twice from the same runs: simulator events per second, and
//! packets that crossed the whole path (generator to sink) per second.

use std::path::Path;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use inca::factory::AppFactory;
use inca_sim::nodes::host::Host;
use inca_sim::scenario::{Built, Loaded};

fn scenario() -> Loaded {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../experiments/two-switches-load.toml");
    Loaded::from_file(&path, &[]).expect("benchmark scenario loads")
}

fn build(loaded: &Loaded) -> Built {
    loaded
        .build(&AppFactory::default(), None, None)
        .expect("benchmark scenario builds")
}

/// (events, packets delivered to the sink) of one run.
fn run(mut built: Built) -> (u64, u64) {
    let sink = built.sim.node_id("sink").expect("sink");
    built.sim.run_until(built.duration, |_| {});
    let delivered = built
        .sim
        .node::<Host>(sink)
        .expect("host")
        .stats()
        .rx_packets;
    (built.sim.stats().events, delivered)
}

fn bench(c: &mut Criterion) {
    let loaded = scenario();
    let (events, packets) = run(build(&loaded));
    println!("one run: {events} events, {packets} packets end to end");
    let mut group = c.benchmark_group("simulator_two_switches");
    group.sample_size(10);
    group.throughput(Throughput::Elements(events));
    group.bench_function("events", |b| {
        b.iter_batched(|| build(&loaded), run, BatchSize::PerIteration)
    });
    group.throughput(Throughput::Elements(packets));
    group.bench_function("end_to_end_packets", |b| {
        b.iter_batched(|| build(&loaded), run, BatchSize::PerIteration)
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
