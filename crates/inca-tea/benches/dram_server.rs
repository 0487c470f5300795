//! The DRAM server's NIC in process: TEA-sized RDMA READ REQUEST → READ
//! RESPONSE ONLY per second on one core (DESIGN.md budget: at least 5 M/s),
//! next to a plain memory-copy loop over the same bytes as the machine's
//! baseline. Compare the two medians; their ratio is what the NIC costs over
//! moving the bytes.
//!
//! A TEA READ (spec §4.2, trailer mode) of the IPv4 NAT table: DMALength =
//! KV_LEN 80 + shim 8 + a 60-byte frame, and the request carries the same
//! 68 bytes as its trailer. The NIC and the requests come from
//! `inca_tea::bench::dram::read_rig`, the set-up `inca bench dram` uses.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use inca_switch::device::Output;

const KV_LEN: u32 = 80;
const TRAILER: usize = 8 + 60;

fn bench(c: &mut Criterion) {
    let (mut nic, frames, base_va) = inca_tea::bench::dram::read_rig().unwrap();
    let mut g = c.benchmark_group("dram_server");
    g.throughput(Throughput::Elements(1));

    let mut out: Vec<Output> = Vec::with_capacity(4);
    let mut now = 0u64;
    let mut i = 0usize;
    g.bench_function("read_request_to_response_only", |bch| {
        bch.iter(|| {
            if i == frames.len() {
                // A new lap of PSNs: bring the QP back to PSN 0.
                nic.reset_qp(0, 0, 0x0001).unwrap();
                i = 0;
            }
            // 100 ns apart: well under the NIC's 34 Mpps, and about 12
            // READs in flight, under max_dest_rd_atomic.
            now += 100;
            nic.handle_roce(now, black_box(&frames[i]), &mut out);
            i += 1;
            let sent = out.len();
            out.clear();
            sent
        })
    });
    let errors = nic.stats().qp_errors;
    assert_eq!(errors, 0, "the benchmark must not break its QP");
    assert!(nic.stats().read_response_packets > 0);

    // Baseline: the same bytes moved with no protocol work: read the
    // request, copy the row out of memory into a new response-sized frame.
    let mut row = vec![0u8; (KV_LEN as usize) + TRAILER];
    nic.memory().read(base_va, &mut row);
    let resp_len = 14 + 20 + 8 + 12 + 4 + row.len() + 4;
    let mut j = 0usize;
    g.bench_function("memcpy_baseline_same_bytes", |bch| {
        bch.iter(|| {
            let req = black_box(&frames[j % frames.len()]);
            j += 1;
            let mut f = Vec::with_capacity(resp_len);
            f.extend_from_slice(&req[..resp_len - row.len()]);
            f.extend_from_slice(black_box(&row));
            black_box(f)
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
