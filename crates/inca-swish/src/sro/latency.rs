//! The NAT latency trend of specs/swish.md §8.2 exp. 2: per-packet
//! latency (inside host to sink) of the NAT on one switch (a chain of one:
//! the CPU allocates, installs and releases locally) against SRO on a
//! chain, split into *update* packets — sent before their connection's
//! entry committed, so held at an origin or tunnelled to the tail — and
//! *read* packets, sent after it. Expected: reads unchanged, updates
//! markedly slower (held until the tail acknowledges). A sweep wraps
//! [`nat_latency`].

use std::collections::BTreeMap;

use inca_switch::Nanos;

use crate::sro::facts::Fact;
use crate::sro::rig::{Rig, RigConfig};

/// Latencies of one run, each sorted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LatencySplit {
    /// Packets sent after their connection committed.
    pub read: Vec<Nanos>,
    /// Packets sent before (the connection's first packets).
    pub update: Vec<Nanos>,
}

/// The `q`-quantile (0..=1) of sorted `v` (0 if empty).
pub fn quantile(v: &[Nanos], q: f64) -> Nanos {
    if v.is_empty() {
        return 0;
    }
    let i = ((v.len() - 1) as f64 * q.clamp(0.0, 1.0)).round() as usize;
    v[i]
}

/// Runs `flows` connections over `traffic` ns through `replicas` NAT
/// switches (1: single switch) without impairments and splits the
/// per-packet latencies. About one packet in five opens a connection.
pub fn nat_latency(
    replicas: usize,
    seed: u64,
    flows: u32,
    traffic: Nanos,
) -> Result<LatencySplit, String> {
    let cfg = RigConfig {
        replicas,
        seed,
        flows,
        traffic,
        ..RigConfig::default()
    };
    let mut rig = Rig::new(&cfg)?;
    rig.run_until(cfg.start + traffic + 20_000_000);
    let mut committed: BTreeMap<_, Nanos> = BTreeMap::new();
    for f in rig.facts.snapshot().facts {
        if let Fact::Release { t, key, .. } = f {
            let e = committed.entry(key).or_insert(t);
            *e = (*e).min(t);
        }
    }
    let mut out = LatencySplit::default();
    for o in rig.observations() {
        let l = o.received.saturating_sub(o.sent);
        match committed.get(&o.key) {
            Some(&c) if o.sent >= c => out.read.push(l),
            _ => out.update.push(l),
        }
    }
    out.read.sort_unstable();
    out.update.sort_unstable();
    Ok(out)
}
