//! NAT fast path through the switch model, in process, on one core.
//!
//! A NAT on the `tofino` profile with 1,024 installed flows; each iteration
//! pushes packets of those flows (64-byte TCP frames, 10 ns apart, below the
//! 100 Gbps line rate of the outside port) through parse, ingress (exact
//! match, rewrite, incremental checksums), the traffic manager and egress.
//! The set-up and its driver ([`inca_apps::fixtures::fed_nat`]: the
//! test fabric, which recycles frame buffers as a real driver would) are
//! those of `inca bench nat`. Throughput is reported in
//! packets (elements) per second.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use inca_apps::fixtures::{check_fed_nat, fed_nat, nat_tcp_flows};

const FLOWS: u16 = 1024;
const GAP_NS: u64 = 10;
const BATCH: u64 = 10_000;

fn bench(c: &mut Criterion) {
    let templates = nat_tcp_flows(FLOWS);
    let mut f = fed_nat(&templates, 1, 0, GAP_NS).expect("the NAT set-up");
    let mut group = c.benchmark_group("nat_fast_path");
    group.throughput(Throughput::Elements(BATCH));
    group.bench_function("tofino_1024_flows", |b| b.iter(|| f.push(BATCH)));
    group.finish();
    // Every measured packet took the fast path and left.
    check_fed_nat(&mut f, u64::from(FLOWS)).unwrap();
}

criterion_group!(benches, bench);
criterion_main!(benches);
