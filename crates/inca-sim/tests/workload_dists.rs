//! The generators' distributions at scale, each against its target with
//! the seed printed: Zipf over 10 M flows (rank frequencies against the
//! pmf by chi-square, O(1) memory), and the O(1) sampler against the table
//! sampler at small n.

use inca_sim::nodes::host::Zipf;
use inca_switch::device::DeviceRng;
use rand::SeedableRng;

/// Chi-square of `counts` (the first `counts.len() - 1` ranks one bin each,
/// the last bin every other rank) against `z`'s pmf.
fn chi_square(z: &Zipf, counts: &[u64], samples: u64) -> f64 {
    let top = counts.len() - 1;
    let mut p_top = 0.0;
    let mut chi2 = 0.0;
    for (k, &c) in counts[..top].iter().enumerate() {
        let p = z.probability(k);
        p_top += p;
        let e = p * samples as f64;
        chi2 += (c as f64 - e).powi(2) / e;
    }
    let e = (1.0 - p_top) * samples as f64;
    chi2 + (counts[top] as f64 - e).powi(2) / e
}

fn histogram(z: &Zipf, bins: usize, samples: u64, seed: u64) -> Vec<u64> {
    let mut rng = DeviceRng::seed_from_u64(seed);
    let mut counts = vec![0u64; bins + 1];
    for _ in 0..samples {
        let k = z.sample(&mut rng);
        assert!(k < z.len());
        counts[k.min(bins)] += 1;
    }
    counts
}

#[test]
fn zipf_over_ten_million_flows_matches_the_pmf_in_constant_memory() {
    let seed = 0x00a1_f10e;
    println!("seed {seed:#x}");
    let n = 10_000_000;
    let samples = 1_000_000;
    for alpha in [0.99, 1.0, 1.2, 0.5] {
        let z = Zipf::new(n, alpha).unwrap();
        assert_eq!(z.len(), n);
        // O(1) in flows: no heap, and a small fixed struct.
        assert_eq!(z.heap_bytes(), 0);
        assert!(std::mem::size_of::<Zipf>() <= 64);
        // The pmf sums to 1 (the normaliser is H(n, alpha) by
        // Euler–Maclaurin; checked against the direct sum).
        let direct: f64 = (1..=n).map(|k| (k as f64).powf(-alpha)).sum();
        let p0 = z.probability(0);
        assert!((p0 * direct - 1.0).abs() < 1e-9, "alpha {alpha}: H off");
        // 50 top ranks one bin each, the rest one bin: 50 degrees of
        // freedom, whose 99.9 % quantile is 86.7.
        let counts = histogram(&z, 50, samples, seed);
        let chi2 = chi_square(&z, &counts, samples);
        println!(
            "alpha {alpha}: chi2 {chi2:.1} (50 dof), rank 1 {} vs {:.0}",
            counts[0],
            p0 * samples as f64
        );
        assert!(chi2 < 86.7, "alpha {alpha}: chi2 {chi2}");
    }
}

#[test]
fn constant_memory_sampler_agrees_with_the_table_sampler() {
    let seed = 0x0007_ab1e;
    println!("seed {seed:#x}");
    let n = 1000;
    let samples = 400_000;
    for alpha in [0.0, 0.7, 0.99, 1.0, 1.5] {
        let table = Zipf::table(n, alpha).unwrap();
        let rej = Zipf::rejection(n, alpha).unwrap();
        for k in [0, 1, 9, 999] {
            let (a, b) = (table.probability(k), rej.probability(k));
            assert!(
                (a - b).abs() / a < 1e-9,
                "alpha {alpha} rank {k}: {a} vs {b}"
            );
        }
        // Every rank a bin: 999 degrees of freedom (mean 999, σ ≈ 45).
        let counts = histogram(&rej, n - 1, samples, seed);
        let chi2 = chi_square(&table, &counts, samples);
        println!("alpha {alpha}: rejection-inversion vs table pmf chi2 {chi2:.1} (999 dof)");
        assert!(chi2 < 1180.0, "alpha {alpha}: chi2 {chi2}");
    }
}
