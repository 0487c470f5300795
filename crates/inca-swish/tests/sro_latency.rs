//! Spec §8.2 exp. 2's trend: SRO leaves read packets' latency as on one
//! switch and makes update packets markedly slower.

use inca_swish::sro::latency::{nat_latency, quantile};

#[test]
fn reads_keep_their_latency_and_updates_pay_for_the_chain() {
    let seed = 5;
    println!("seed {seed}");
    let one = nat_latency(1, seed, 60, 30_000_000).unwrap();
    let two = nat_latency(2, seed, 60, 30_000_000).unwrap();
    let m = |v: &[u64]| quantile(v, 0.5);
    println!(
        "single: read p50 {} ns ({} pkts), update p50 {} ns ({}); SRO on 2: read p50 {} ns ({}), update p50 {} ns ({})",
        m(&one.read), one.read.len(), m(&one.update), one.update.len(),
        m(&two.read), two.read.len(), m(&two.update), two.update.len()
    );
    assert!(one.read.len() > 50 && two.read.len() > 50 && !two.update.is_empty());
    // Reads: the same path (lookup, rewrite) on either; within 1 µs.
    assert!(m(&two.read).abs_diff(m(&one.read)) < 1_000);
    // Updates: at least one more control-plane round on another switch.
    assert!(m(&two.update) > m(&one.update) + 50_000);
}
