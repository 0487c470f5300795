//! Simulator speed: experiments/two-switches-load.toml (line-rate 66-byte
//! UDP through two NAT switches in series, 15 ms of virtual time) on one
//! core. Reported twice from the same runs: simulator events per second, and
//! packets that crossed the whole path (generator to sink) per second.

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use inca_bench::sim::{build, run, scenario};
use inca_sim::scenario::{Built, Loaded};

// The scenario and the run are `inca bench sim`'s (crates/inca-bench/src/sim.rs).
fn setup(loaded: &Loaded) -> Built {
    build(loaded).expect("benchmark scenario builds")
}

fn run_once(built: Built) -> (u64, u64) {
    run(built).expect("benchmark scenario runs")
}

fn bench(c: &mut Criterion) {
    let loaded = scenario(&[]).expect("benchmark scenario loads");
    let (events, packets) = run_once(setup(&loaded));
    println!("one run: {events} events, {packets} packets end to end");
    let mut group = c.benchmark_group("simulator_two_switches");
    group.sample_size(10);
    group.throughput(Throughput::Elements(events));
    group.bench_function("events", |b| {
        b.iter_batched(|| setup(&loaded), run_once, BatchSize::PerIteration)
    });
    group.throughput(Throughput::Elements(packets));
    group.bench_function("end_to_end_packets", |b| {
        b.iter_batched(|| setup(&loaded), run_once, BatchSize::PerIteration)
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
