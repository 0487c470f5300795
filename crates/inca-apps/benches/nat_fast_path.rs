//! NAT fast path through the switch model, in process, on one core.
//!
//! A NAT on the `tofino` profile with 1,024 installed flows; each iteration
//! pushes packets of those flows (64-byte TCP frames, 10 ns apart, below the
//! 100 Gbps line rate of the outside port) through parse, ingress (exact
//! match, rewrite, incremental checksums), the traffic manager and egress.
//! The set-up ([`inca_apps::fixtures`]) and the driver
//! ([`inca_switch::feeder::Feeder`], which recycles frame buffers as a real
//! driver would) are those of `inca bench nat`. Throughput is reported in
//! packets (elements) per second.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use inca_apps::fixtures::{installed_nat, nat_tcp_flows};
use inca_switch::feeder::Feeder;

const FLOWS: u16 = 1024;
const GAP_NS: u64 = 10;
const BATCH: u64 = 10_000;

fn bench(c: &mut Criterion) {
    let templates = nat_tcp_flows(FLOWS);
    let (sw, now) = installed_nat(&templates, 1, 0).expect("the NAT set-up");
    let mut f = Feeder::new(sw, now, 1, GAP_NS, templates);
    let mut group = c.benchmark_group("nat_fast_path");
    group.throughput(Throughput::Elements(BATCH));
    group.bench_function("tofino_1024_flows", |b| b.iter(|| f.push(BATCH)));
    group.finish();
    f.advance_to(f.now() + 1_000_000);
    let s = f.dev.stats();
    assert_eq!(
        s.punts,
        u64::from(FLOWS),
        "the measured packets all took the fast path"
    );
    assert_eq!(s.ports[0].tm_drops, 0);
    assert_eq!(f.transmitted, f.pushed);
}

criterion_group!(benches, bench);
criterion_main!(benches);
