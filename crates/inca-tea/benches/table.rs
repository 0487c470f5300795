//! TEA-Table insert throughput (spec §3.2 sizing, §5.4 Insert).
//!
//! One-shot runs, because a 10 M-entry fill is far too long for criterion's
//! sampling loop: 10 M IPv4 NAT entries into the smallest table at load ≤ 0.9,
//! (1) with the spec's C = 2 and STASH_CAP = 32768, (2) with C = 4, (3) with
//! C = 2 and 2^24 buckets (load ≈ 0.3). Each prints
//! insert calls/s, load, stash fraction, displacements and inserts refused
//! because the stash was full. A small criterion group measures a 64 K fill.
//! `INCA_TEA_BENCH_ENTRIES` overrides the 10 M.

use criterion::{criterion_group, criterion_main, Criterion};
use inca_tea::table::offline::{insert_benchmark, InsertBenchConfig};

fn one_shot(label: &str, cfg: InsertBenchConfig) {
    match insert_benchmark(&cfg) {
        Ok(r) => println!(
            "table/{label}: {} insert calls in {:.2} s = {:.3} M/s; C {} buckets {} cells {} load {:.3}; stash {} ({:.3e} of entries); displacements {}; refused (stash full) {}",
            cfg.entries,
            r.seconds,
            r.inserts_per_s / 1e6,
            cfg.cells,
            r.buckets,
            r.cells,
            r.load_factor,
            r.stash_entries,
            r.stash_fraction,
            r.displacements,
            r.refused_stash_full
        ),
        Err(e) => println!("table/{label}: failed: {e}"),
    }
}

fn bench(c: &mut Criterion) {
    let entries: u64 = std::env::var("INCA_TEA_BENCH_ENTRIES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10_000_000);
    let spec = InsertBenchConfig {
        entries,
        ..InsertBenchConfig::default()
    };
    one_shot("insert_10m_c2", spec);
    one_shot("insert_10m_c4", InsertBenchConfig { cells: 4, ..spec });
    // The spec's C = 2 with twice the buckets (load ≈ 0.3): does 10 M fit
    // the 32 K stash when the table is sized for the stash, not the load?
    one_shot(
        "insert_10m_c2_2^24",
        InsertBenchConfig {
            log2_buckets: Some(24),
            ..spec
        },
    );
    c.bench_function("table/insert_64k_into_2^16x2", |b| {
        b.iter(|| {
            insert_benchmark(&InsertBenchConfig {
                entries: 65_536,
                log2_buckets: Some(16),
                ..InsertBenchConfig::default()
            })
            .map(|r| r.stash_entries)
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
