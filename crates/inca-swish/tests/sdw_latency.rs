//! SDW window-advance latency (spec §8.2 exp. 5): the p99 inter-advance
//! time grows with C once a window's DATA outweighs one round trip.

use inca_swish::sdw::rig::{advance_intervals, percentile, Topology};

fn p99(t: Topology, rows: u8, cols: u32, ready: bool, n: usize) -> u64 {
    let gaps = advance_intervals(t, rows, cols, ready, n, 1).unwrap();
    assert!(
        gaps.len() >= n.min(10),
        "{t:?} C={cols}: only {} advances",
        gaps.len()
    );
    percentile(&gaps, 99.0)
}

/// Small C is flat (a round trip), large C linear in C.
#[test]
fn advance_latency_grows_with_columns() {
    let small = p99(Topology::Local2, 3, 1, true, 200);
    let mid = p99(Topology::Local2, 3, 64, true, 100);
    let big = p99(Topology::Local2, 3, 4_096, true, 10);
    println!("local-2 p99 inter-advance: C=1 {small} ns, C=64 {mid} ns, C=4K {big} ns");
    assert!(small < 10_000 && mid < 3 * small, "flat for small C");
    assert!(big > 10 * mid, "linear for large C");
}

/// The table of the report: `cargo test --release -p inca-swish --test
/// sdw_latency -- --ignored --nocapture`.
#[test]
#[ignore]
fn advance_latency_table() {
    for t in [Topology::Local2, Topology::Symmetric4] {
        for ready in [true, false] {
            for (cols, n) in [(1u32, 2_000usize), (64, 1_000), (4_096, 50), (65_536, 8)] {
                // 3 × 64K does not place on the tofino profile; rows do not
                // change the packet count, so 64K runs with 2 rows.
                let rows = if cols > 32_768 { 2 } else { 3 };
                let gaps = advance_intervals(t, rows, cols, ready, n, 1).unwrap();
                println!(
                    "{t:?} ready={ready} C={cols} rows={rows}: {} advances, p50 {} ns, p99 {} ns",
                    gaps.len(),
                    percentile(&gaps, 50.0),
                    percentile(&gaps, 99.0)
                );
            }
        }
    }
}
