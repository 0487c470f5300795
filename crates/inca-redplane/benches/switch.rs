//! Per-packet cost of the RedPlane NAT on its read path (lease valid, no
//! write outstanding) against the plain inca-apps NAT, side by side in one
//! run, on the `tofino` profile with 1,024 flows of 64-byte TCP frames 10 ns
//! apart. The set-ups ([`inca_apps::fixtures`],
//! [`inca_redplane::fixtures`]: leases of 100 s granted by NEW_ACKs played
//! as the store) and the driver ([`inca_switch::feeder::Feeder`]) are those
//! of `inca bench redplane-read`. Medians: target/criterion/nat_read_path/*.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use inca_apps::fixtures::{installed_nat, nat_tcp_flows};
use inca_redplane::fixtures::leased_nat;
use inca_switch::feeder::Feeder;

const FLOWS: u16 = 1024;
const GAP_NS: u64 = 10;
const BATCH: u64 = 10_000;

fn bench(c: &mut Criterion) {
    let templates = nat_tcp_flows(FLOWS);
    let (nat, t0) = installed_nat(&templates, 1, 0).expect("the NAT set-up");
    let (rp, t1) = leased_nat(&templates).expect("the RedPlane set-up");
    let mut nat = Feeder::new(nat, t0, 1, GAP_NS, templates.clone());
    let mut rp = Feeder::new(rp, t1, 1, GAP_NS, templates);
    let mut group = c.benchmark_group("nat_read_path");
    group.throughput(Throughput::Elements(BATCH));
    group.bench_function("plain_nat", |b| b.iter(|| nat.push(BATCH)));
    group.bench_function("redplane_nat", |b| b.iter(|| rp.push(BATCH)));
    group.finish();
    let s = rp.dev.program().stats();
    assert_eq!(
        s.lease_new,
        u64::from(FLOWS),
        "the measured packets all took the read path"
    );
    assert_eq!((s.renewals, s.buf_reads), (0, 0));
    assert!(s.reads_forwarded > 0);
    assert_eq!(rp.dev.stats().ports[0].tm_drops, 0);
    assert_eq!(nat.dev.stats().punts, u64::from(FLOWS));
}

criterion_group!(benches, bench);
criterion_main!(benches);
