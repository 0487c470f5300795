//! P12 load balance (spec §5.7, §6 P12): hashing alone leaves the hottest
//! keys' devices overloaded; caching the top O(N log N) keys in front of N
//! hash-partitioned back-ends bounds the imbalance (Fan et al., "Small
//! Cache, Big Effect", SoCC'11). ExoPlane's FM entries are that cache. P12
//! asks that with the top `c·N·ln N` keys on the switch the max/mean
//! device load is lower than with none (Zipf 0.99, averaged over 10 runs).
//!
//! [`measure`] draws random IPv4 5-tuples, projects each through the app's
//! union key (the caller passes the real projection, e.g.
//! [`AppSpec::union_key`](crate::app::AppSpec::union_key)), gives the key
//! drawn `k`-th the Zipf probability of rank `k`, and sends every key not
//! on the switch to the primary of its shard (`shard`, then
//! [`placement`]). A device's load is the probability mass it serves: the
//! expected share of packets, so no packet sampling noise enters [our
//! choice]. [`check_p12`] compares the averages.

use inca_apps::headers::Parsed;
use inca_sim::nodes::host::Zipf;
use inca_switch::device::{device_rng, DeviceRng};
use rand::Rng;

use crate::hub::app::placement;
use crate::hub::check::Violation;
use crate::ids::{AppId, LogicalId, UnionKey};

/// `c` of the cache rule `Σ n_p·Q_p ≥ c·N·ln N` (spec §5.7: 4 [our
/// choice there]).
pub const CACHE_FACTOR: f64 = 4.0;
/// Runs P12 averages over (spec §6 P12).
pub const P12_RUNS: usize = 10;
/// Most keys a measurement draws per run [our choice: the evaluation's
/// 1M flows per app (spec §8) ×10].
pub const MAX_KEYS: usize = 10_000_000;

/// A shard function: the logical id of a flow among `n` (the real one is
/// [`crate::hub::app::shard`]).
pub type ShardFn = fn(AppId, &UnionKey, u8) -> LogicalId;

/// Keys on the switch by the cache rule: `⌈c·N·ln N⌉` [our choice: round
/// up, so the rule is met]; 0 for one device (nothing to balance).
pub fn cache_size(n_devices: u8, c: f64) -> usize {
    let n = f64::from(n_devices);
    if n_devices <= 1 {
        return 0;
    }
    (c * n * n.ln()).ceil() as usize
}

/// A random TCP or UDP IPv4 flow's parsed headers.
pub fn random_flow(rng: &mut DeviceRng) -> Parsed {
    Parsed {
        ipv4: true,
        proto: if rng.gen() { 6 } else { 17 },
        src: rng.gen(),
        dst: rng.gen(),
        sport: rng.gen(),
        dport: rng.gen(),
        has_ports: true,
        ..Parsed::default()
    }
}

/// Load per device: key `keys[k]` weighs `zipf.probability(k)`; the first
/// `cached` keys are served by the switch, every other one by the primary
/// device of `shard(app, key, n)`.
pub fn device_loads(
    app: AppId,
    keys: &[UnionKey],
    zipf: &Zipf,
    cached: usize,
    n: u8,
    shard: ShardFn,
) -> Vec<f64> {
    let mut loads = vec![0.0; usize::from(n.max(1))];
    for (k, key) in keys.iter().enumerate().skip(cached) {
        let (primary, _) = placement(shard(app, key, n), n);
        if let Some(l) = loads.get_mut(usize::from(primary.0)) {
            *l += zipf.probability(k);
        }
    }
    loads
}

/// Max over mean of `loads` (1 when all are equal; 0 with no load).
pub fn max_over_mean(loads: &[f64]) -> f64 {
    let total: f64 = loads.iter().sum();
    if loads.is_empty() || total <= 0.0 {
        return 0.0;
    }
    let max = loads.iter().copied().fold(0.0, f64::max);
    max / (total / loads.len() as f64)
}

/// What to measure.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BalanceSetup {
    /// The app whose id the shard hash covers.
    pub app: AppId,
    /// Devices `N` (= logical ids).
    pub n_devices: u8,
    /// Keys drawn per run.
    pub keys: usize,
    /// Zipf exponent of their popularity.
    pub alpha: f64,
    /// Keys on the switch (see [`cache_size`]).
    pub cached: usize,
    /// Runs, each with fresh keys.
    pub runs: usize,
    /// Seed; run `r` draws from `device_rng(seed, r)`.
    pub seed: u64,
}

impl BalanceSetup {
    /// The spec's P12 setup for `n_devices`: Zipf 0.99, top
    /// `4·N·ln N` cached, [`P12_RUNS`] runs of `keys` keys.
    pub fn p12(app: AppId, n_devices: u8, keys: usize, seed: u64) -> Self {
        BalanceSetup {
            app,
            n_devices,
            keys,
            alpha: 0.99,
            cached: cache_size(n_devices, CACHE_FACTOR),
            runs: P12_RUNS,
            seed,
        }
    }
}

/// Max/mean device load of one run without and with the cache.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BalanceRun {
    /// No key on the switch.
    pub without: f64,
    /// The top `cached` keys on the switch.
    pub with: f64,
}

/// A measurement: its setup and each run.
#[derive(Clone, Debug, PartialEq)]
pub struct Balance {
    /// What was measured.
    pub setup: BalanceSetup,
    /// Each run.
    pub runs: Vec<BalanceRun>,
}

impl Balance {
    /// Mean max/mean load over the runs without the cache.
    pub fn mean_without(&self) -> f64 {
        mean(self.runs.iter().map(|r| r.without))
    }

    /// Mean max/mean load over the runs with the cache.
    pub fn mean_with(&self) -> f64 {
        mean(self.runs.iter().map(|r| r.with))
    }
}

fn mean(xs: impl ExactSizeIterator<Item = f64>) -> f64 {
    let n = xs.len();
    if n == 0 {
        return 0.0;
    }
    xs.sum::<f64>() / n as f64
}

/// A setup that cannot be measured.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BalanceError {
    /// `n_devices` is 0.
    #[error("n_devices = 0: need at least one device")]
    NoDevices,
    /// `keys` is 0 or over [`MAX_KEYS`].
    #[error("keys = {0}: must be 1..={MAX_KEYS}")]
    Keys(usize),
    /// `alpha` is negative or not finite.
    #[error("alpha = {0}: must be finite and >= 0")]
    Alpha(f64),
    /// `cached` is over `keys`.
    #[error("cached = {cached}: more than the {keys} keys")]
    Cached {
        /// Keys cached.
        cached: usize,
        /// Keys drawn.
        keys: usize,
    },
}

/// Measures `setup`: per run, fresh random flows projected by `project`,
/// sharded by `shard`, max/mean load without and with the cache.
pub fn measure(
    setup: BalanceSetup,
    project: &dyn Fn(&Parsed) -> UnionKey,
    shard: ShardFn,
) -> Result<Balance, BalanceError> {
    if setup.n_devices == 0 {
        return Err(BalanceError::NoDevices);
    }
    if setup.keys == 0 || setup.keys > MAX_KEYS {
        return Err(BalanceError::Keys(setup.keys));
    }
    if setup.cached > setup.keys {
        return Err(BalanceError::Cached {
            cached: setup.cached,
            keys: setup.keys,
        });
    }
    let zipf = Zipf::new(setup.keys, setup.alpha).ok_or(BalanceError::Alpha(setup.alpha))?;
    let runs = (0..setup.runs)
        .map(|r| {
            let mut rng = device_rng(setup.seed, r as u64);
            let keys: Vec<UnionKey> = (0..setup.keys)
                .map(|_| project(&random_flow(&mut rng)))
                .collect();
            let n = setup.n_devices;
            let app = setup.app;
            BalanceRun {
                without: max_over_mean(&device_loads(app, &keys, &zipf, 0, n, shard)),
                with: max_over_mean(&device_loads(app, &keys, &zipf, setup.cached, n, shard)),
            }
        })
        .collect();
    Ok(Balance { setup, runs })
}

/// P12: the mean max/mean load with the cache is below the mean without.
pub fn check_p12(b: &Balance) -> Result<(), Violation> {
    let (with, without) = (b.mean_with(), b.mean_without());
    if b.runs.is_empty() || with >= without {
        return Err(Violation {
            at: 0,
            what: format!(
                "P12 (N = {}, {} keys cached, {} runs): max/mean load {with:.4} with the cache, not below {without:.4} without",
                b.setup.n_devices,
                b.setup.cached,
                b.runs.len()
            ),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_rule_and_ratio() {
        assert_eq!(cache_size(1, CACHE_FACTOR), 0);
        // 4·2·ln 2 = 5.55, 4·4·ln 4 = 22.2, 4·16·ln 16 = 177.4
        assert_eq!(cache_size(2, CACHE_FACTOR), 6);
        assert_eq!(cache_size(4, CACHE_FACTOR), 23);
        assert_eq!(cache_size(16, CACHE_FACTOR), 178);
        assert_eq!(max_over_mean(&[1.0, 1.0, 1.0]), 1.0);
        assert_eq!(max_over_mean(&[3.0, 1.0, 0.0, 0.0]), 3.0);
        assert_eq!(max_over_mean(&[0.0, 0.0]), 0.0);
    }

    #[test]
    fn loads_skip_the_cached_keys() {
        let zipf = Zipf::new(4, 0.0).unwrap();
        let keys: Vec<UnionKey> = (0..4u8).map(|i| UnionKey(vec![i])).collect();
        let by_byte: ShardFn = |_, uk, n| LogicalId(uk.0[0] % n);
        let l = device_loads(AppId(1), &keys, &zipf, 0, 2, by_byte);
        assert_eq!(l, vec![0.5, 0.5]);
        let l = device_loads(AppId(1), &keys, &zipf, 1, 2, by_byte);
        assert_eq!(l, vec![0.25, 0.5]);
    }

    #[test]
    fn bad_setups_are_refused() {
        let project = |p: &Parsed| UnionKey(p.src.to_vec());
        let shard = crate::hub::app::shard;
        let mut s = BalanceSetup::p12(AppId(1), 4, 100, 1);
        s.n_devices = 0;
        assert_eq!(measure(s, &project, shard), Err(BalanceError::NoDevices));
        let mut s = BalanceSetup::p12(AppId(1), 4, 10, 1);
        assert!(matches!(
            measure(s, &project, shard),
            Err(BalanceError::Cached { .. })
        ));
        s.keys = 0;
        assert_eq!(measure(s, &project, shard), Err(BalanceError::Keys(0)));
        let mut s = BalanceSetup::p12(AppId(1), 4, 100, 1);
        s.alpha = f64::NAN;
        assert!(matches!(
            measure(s, &project, shard),
            Err(BalanceError::Alpha(_))
        ));
    }
}
