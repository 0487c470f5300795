//! E2 (specs/exoplane.md §8, Thesis Fig. 4.6): how skewed the union keys
//! of a backbone-like trace are, epoch by epoch.
//!
//! The trace is the simulator's `backbone` preset
//! ([`inca_sim::nodes::host::traces`]) run by a real [`Host`] device: the
//! host is woken at each of its timers, as the simulator would, and every
//! frame it transmits is parsed ([`inca_apps::headers::parse`]) and keyed
//! with the app model's [`key_of`] — the leaf scenario's union key is the
//! 5-tuple (NAT, FW and the SYN proxy all key by it, [`leaf_fields`]), the
//! front-end's is VLAN id + 5-tuple (per-tenant NAT and ACL, §7), the
//! tenant VLAN being the generator's `1 + hash(5-tuple) mod 64`.
//!
//! Per epoch and scenario: keys seen, and the CDF of traffic (packets and
//! bytes) over keys ranked by their own traffic, at fixed key fractions
//! ([`GRID`]). The fraction of keys is of the keys *seen in the epoch* [our
//! choice: a trace has no notion of unseen keys]. Stability is measured as
//! the largest vertical distance between any epoch's curve and the first
//! epoch's, and as the overlap of consecutive epochs' top-1 % key sets.

use std::collections::{HashMap, HashSet};
use std::net::{Ipv4Addr, SocketAddrV4};

use inca_sim::nodes::host::traces::backbone_like;
use inca_sim::nodes::host::{Host, WAKE_TOKEN};
use inca_sim::nodes::host::{HostConfig, TenantConfig, WorkloadConfig};
use inca_switch::device::{Device, DeviceRng, Input, Nanos, Output};
use rand::SeedableRng;
use serde::Serialize;

use crate::app::{key_of, KeyField, FIVE_TUPLE};
use crate::ids::UnionKey;

/// Key fractions at which each CDF is sampled (log-spaced 10⁻⁵ … 1).
pub const GRID: [f64; 21] = [
    1e-5, 2e-5, 5e-5, 1e-4, 2e-4, 5e-4, 1e-3, 2e-3, 5e-3, 0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.4,
    0.5, 0.6, 0.7, 0.8, 1.0,
];

/// Tenants of the front-end scenario (spec §8: tenant = hash(5-tuple) mod
/// 64).
pub const TENANTS: u16 = 64;

/// What to run.
#[derive(Clone, Debug)]
pub struct E2Config {
    /// Flows of the trace (the preset's 6 M in the full run).
    pub flows: u64,
    /// Its rate, as a scenario writes it.
    pub rate: String,
    /// Epochs.
    pub epochs: u32,
    /// Epoch length.
    pub epoch: Nanos,
    /// The host's RNG seed.
    pub seed: u64,
}

impl E2Config {
    /// The full run: 6 M flows at 10 Gb/s [our choice: a 10GbE backbone
    /// link, as CAIDA's monitors are — "The CAIDA Anonymized Internet
    /// Traces Dataset", caida.org/catalog/datasets/passive_dataset], ten
    /// 1 s epochs.
    pub fn full() -> Self {
        E2Config {
            flows: inca_sim::nodes::host::traces::BACKBONE_FLOWS,
            rate: "10Gbps".into(),
            epochs: 10,
            epoch: 1_000_000_000,
            seed: 2,
        }
    }

    /// The quick run: 100 K flows at 1 Gb/s, four 100 ms epochs.
    pub fn quick() -> Self {
        E2Config {
            flows: 100_000,
            rate: "1Gbps".into(),
            epochs: 4,
            epoch: 100_000_000,
            seed: 2,
        }
    }
}

/// One epoch's CDF for one scenario.
#[derive(Clone, Debug, Serialize)]
pub struct EpochCdf {
    /// `leaf` or `front-end`.
    pub scenario: &'static str,
    /// The epoch, from 0.
    pub epoch: u32,
    /// Distinct union keys seen.
    pub keys: usize,
    /// Packets.
    pub packets: u64,
    /// Frame bytes.
    pub bytes: u64,
    /// Per [`GRID`] fraction: share of packets carried by that fraction of
    /// keys (keys ranked by packets).
    pub packet_share: Vec<f64>,
    /// The same for bytes (keys ranked by bytes).
    pub byte_share: Vec<f64>,
    /// The top 1 % of keys by packets.
    #[serde(skip)]
    pub top: HashSet<UnionKey>,
}

/// The run's summary: per scenario, how skewed and how stable.
#[derive(Clone, Debug, Serialize)]
pub struct E2Summary {
    /// The scenario.
    pub scenario: &'static str,
    /// Mean over epochs of the packet share of the top 1 % of keys.
    pub top1_packets: f64,
    /// … and of bytes.
    pub top1_bytes: f64,
    /// Mean over epochs of the packet share of the top 10 % of keys.
    pub top10_packets: f64,
    /// Largest |share_e(x) − share_0(x)| over epochs e and grid points x
    /// (packets and bytes).
    pub max_distance: f64,
    /// Smallest overlap (|A ∩ B| / |A|) of consecutive epochs' top-1 %
    /// key sets.
    pub min_top1_overlap: f64,
}

/// The leaf scenario's union key fields (the 5-tuple).
pub fn leaf_fields() -> Vec<KeyField> {
    FIVE_TUPLE.to_vec()
}

/// The front-end scenario's (VLAN id + 5-tuple).
pub fn front_end_fields() -> Vec<KeyField> {
    let mut f = vec![KeyField::Vid];
    f.extend_from_slice(FIVE_TUPLE);
    f
}

/// The backbone-like host: the preset with `cfg`'s flows and rate, 64
/// tenant VLANs.
fn host(cfg: &E2Config) -> anyhow::Result<Host> {
    let mut udp = backbone_like(
        SocketAddrV4::new(Ipv4Addr::new(192, 0, 2, 1), 5000),
        &cfg.rate,
        Some(cfg.flows),
    );
    udp.tenant = Some(TenantConfig {
        count: TENANTS,
        base: Some(1),
    });
    let text = "ip = \"10.255.0.1\"\nprefix_len = 8\n";
    let mut config = HostConfig::from_toml(text)?;
    config.workloads = vec![WorkloadConfig::Udp(udp)];
    Ok(Host::new(
        config,
        [2, 0, 0, 0, 0, 1],
        [2, 0, 0, 0, 0, 2],
        100_000_000_000,
    )?)
}

type Counts = HashMap<UnionKey, (u64, u64)>;

/// Runs E2.
pub fn run(cfg: &E2Config) -> anyhow::Result<Vec<EpochCdf>> {
    let mut h = host(cfg)?;
    let mut rng = DeviceRng::seed_from_u64(cfg.seed);
    let scenarios: [(&'static str, Vec<KeyField>); 2] =
        [("leaf", leaf_fields()), ("front-end", front_end_fields())];
    let mut counts: Vec<Counts> = vec![Counts::new(), Counts::new()];
    let mut out = Vec::new();
    let mut outputs = Vec::new();
    h.start(0, &mut rng, &mut outputs);
    let end = cfg.epoch * Nanos::from(cfg.epochs);
    let mut epoch = 0u32;
    let mut unparsed = 0u64;
    let mut next_wake = Some(0);
    while let Some(now) = next_wake.take() {
        if now >= end {
            break;
        }
        let e = (now / cfg.epoch) as u32;
        if e != epoch {
            for (i, (name, _)) in scenarios.iter().enumerate() {
                out.push(cdf(name, epoch, std::mem::take(&mut counts[i])));
            }
            epoch = e;
        }
        outputs.clear();
        h.handle(
            now,
            Input::Timer { token: WAKE_TOKEN },
            &mut rng,
            &mut outputs,
        );
        for o in outputs.drain(..) {
            match o {
                Output::Transmit { frame, .. } => {
                    let Ok(p) = inca_apps::headers::parse(&frame) else {
                        unparsed += 1;
                        continue;
                    };
                    for (i, (_, fields)) in scenarios.iter().enumerate() {
                        let c = counts[i].entry(key_of(fields, &p, &frame)).or_default();
                        c.0 += 1;
                        c.1 += frame.len() as u64;
                    }
                }
                Output::Timer { at, .. } => {
                    next_wake = Some(next_wake.map_or(at, |t: Nanos| t.min(at)))
                }
                _ => {}
            }
        }
    }
    for (i, (name, _)) in scenarios.iter().enumerate() {
        out.push(cdf(name, epoch, std::mem::take(&mut counts[i])));
    }
    anyhow::ensure!(unparsed == 0, "{unparsed} generated frames did not parse");
    Ok(out)
}

/// Share of the total carried by the top `frac` of `sorted` (descending).
fn share_at(sorted: &[u64], prefix: &[u64], frac: f64) -> f64 {
    let total = *prefix.last().unwrap_or(&0);
    if sorted.is_empty() || total == 0 {
        return 0.0;
    }
    let k = ((frac * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    prefix[k - 1] as f64 / total as f64
}

fn shares(mut v: Vec<u64>) -> Vec<f64> {
    v.sort_unstable_by(|a, b| b.cmp(a));
    let prefix: Vec<u64> = v
        .iter()
        .scan(0u64, |s, &x| {
            *s += x;
            Some(*s)
        })
        .collect();
    GRID.iter().map(|&f| share_at(&v, &prefix, f)).collect()
}

fn cdf(scenario: &'static str, epoch: u32, counts: Counts) -> EpochCdf {
    let packets = counts.values().map(|c| c.0).sum();
    let bytes = counts.values().map(|c| c.1).sum();
    let mut ranked: Vec<(&UnionKey, u64)> = counts.iter().map(|(k, c)| (k, c.0)).collect();
    // Ties broken by key, so the top set is reproducible.
    ranked.sort_unstable_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(b.0)));
    let n_top = (ranked.len() / 100).max(1).min(ranked.len());
    let top = ranked[..n_top].iter().map(|(k, _)| (*k).clone()).collect();
    EpochCdf {
        scenario,
        epoch,
        keys: counts.len(),
        packets,
        bytes,
        packet_share: shares(counts.values().map(|c| c.0).collect()),
        byte_share: shares(counts.values().map(|c| c.1).collect()),
        top,
    }
}

/// The share at key fraction `frac` (a [`GRID`] point).
pub fn share(c: &EpochCdf, frac: f64, bytes: bool) -> f64 {
    let i = GRID
        .iter()
        .position(|&g| (g - frac).abs() < 1e-12)
        .unwrap_or(0);
    if bytes {
        c.byte_share[i]
    } else {
        c.packet_share[i]
    }
}

/// Per scenario: skew and stability.
pub fn summarise(cdfs: &[EpochCdf]) -> Vec<E2Summary> {
    let mut out = Vec::new();
    for scenario in ["leaf", "front-end"] {
        let s: Vec<&EpochCdf> = cdfs.iter().filter(|c| c.scenario == scenario).collect();
        let Some(first) = s.first() else { continue };
        let n = s.len() as f64;
        let mean = |f: &dyn Fn(&EpochCdf) -> f64| s.iter().map(|c| f(c)).sum::<f64>() / n;
        let mut max_distance = 0.0f64;
        for c in &s {
            for (a, b) in c.packet_share.iter().zip(&first.packet_share) {
                max_distance = max_distance.max((a - b).abs());
            }
            for (a, b) in c.byte_share.iter().zip(&first.byte_share) {
                max_distance = max_distance.max((a - b).abs());
            }
        }
        let min_top1_overlap = s
            .windows(2)
            .map(|w| {
                let common = w[0].top.intersection(&w[1].top).count();
                common as f64 / w[0].top.len().max(1) as f64
            })
            .fold(1.0f64, f64::min);
        out.push(E2Summary {
            scenario,
            top1_packets: mean(&|c| share(c, 0.01, false)),
            top1_bytes: mean(&|c| share(c, 0.01, true)),
            top10_packets: mean(&|c| share(c, 0.1, false)),
            max_distance,
            min_top1_overlap,
        });
    }
    out
}

/// The CSV: one row per scenario, epoch and grid point.
pub fn csv(cdfs: &[EpochCdf]) -> String {
    let mut s =
        String::from("scenario,epoch,keys,packets,bytes,key_fraction,packet_share,byte_share\n");
    for c in cdfs {
        for (i, f) in GRID.iter().enumerate() {
            s += &format!(
                "{},{},{},{},{},{f},{:.5},{:.5}\n",
                c.scenario, c.epoch, c.keys, c.packets, c.bytes, c.packet_share[i], c.byte_share[i]
            );
        }
    }
    s
}
