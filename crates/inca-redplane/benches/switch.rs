//! Per-packet cost of the RedPlane NAT on its read path (lease valid, no
//! write outstanding) against the plain inca-apps NAT, side by side in one
//! run, on the `tofino` profile with 1,024 flows of 64-byte TCP frames 10 ns
//! apart. The set-ups ([`inca_apps::fixtures`],
//! [`inca_redplane::fixtures`]: leases of 100 s granted by NEW_ACKs played
//! as the store) and the driver (the test fabric,
//! [`inca_switch::fabric::Fabric`]) are those of `inca bench
//! redplane-read`. Medians: target/criterion/nat_read_path/*.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use inca_apps::fixtures::{check_fed_nat, fed_nat, nat_tcp_flows};
use inca_redplane::fixtures::leased_nat;
use inca_switch::fabric::Fabric;

const FLOWS: u16 = 1024;
const GAP_NS: u64 = 10;
const BATCH: u64 = 10_000;

fn bench(c: &mut Criterion) {
    let templates = nat_tcp_flows(FLOWS);
    let mut nat = fed_nat(&templates, 1, 0, GAP_NS).expect("the NAT set-up");
    let (rp, t1) = leased_nat(&templates).expect("the RedPlane set-up");
    let mut rp = {
        let mut f = Fabric::new(1);
        let node = f.add(rp);
        f.run_until(t1);
        f.set_stream(node, 1, GAP_NS, templates);
        f
    };
    let mut group = c.benchmark_group("nat_read_path");
    group.throughput(Throughput::Elements(BATCH));
    group.bench_function("plain_nat", |b| b.iter(|| nat.push(BATCH)));
    group.bench_function("redplane_nat", |b| b.iter(|| rp.push(BATCH)));
    group.finish();
    let s = rp.device(0).program().stats();
    assert_eq!(
        s.lease_new,
        u64::from(FLOWS),
        "the measured packets all took the read path"
    );
    assert_eq!((s.renewals, s.buf_reads), (0, 0));
    assert!(s.reads_forwarded > 0);
    assert_eq!(rp.device(0).stats().ports[0].tm_drops, 0);
    check_fed_nat(&mut nat, u64::from(FLOWS)).unwrap();
}

criterion_group!(benches, bench);
criterion_main!(benches);
