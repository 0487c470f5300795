//! The NAT latency trend of specs/swish.md §8.2 exp. 2: per-packet
//! latency (inside host to sink) of the NAT on one switch (a chain of one:
//! the CPU allocates, installs and releases locally) against SRO on a
//! chain, split into *update* packets — sent before their connection's
//! entry committed, so held at an origin or tunnelled to the tail — and
//! *read* packets, sent after it. Expected: reads unchanged, updates
//! markedly slower (held until the tail acknowledges). A sweep wraps
//! [`nat_latency`] and, over the CAIDA-like trace, [`trace_latency`].
//!
//! Also exp. 4's update-rate sweep point, [`update_rate`]: every packet a
//! new connection at an offered rate; the latency of each connection's
//! packet and the rate writes commit at.

use std::collections::BTreeMap;

use inca_switch::Nanos;

use crate::sro::facts::Fact;
use crate::sro::rig::{rid_of, Rig, RigConfig};
use crate::sro::trace::{new_connections, CaidaLike, Trace};

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
    Ok(split(&rig))
}

/// Splits a finished run's per-packet latencies: a packet is a read if
/// it was sent after its connection's write released at the origin.
pub fn split(rig: &Rig) -> LatencySplit {
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
    out
}

/// Replays `trace` through `replicas` NAT switches (1: single switch),
/// lossless, and splits the per-packet latencies; also returns the rig.
pub fn trace_latency(
    replicas: usize,
    seed: u64,
    trace: &CaidaLike,
) -> Result<(Rig, Trace, LatencySplit), String> {
    let cfg = RigConfig {
        replicas,
        seed,
        ..RigConfig::default()
    };
    let tr = trace.build(replicas, seed)?;
    let mut rig = Rig::with_scripts(&cfg, tr.scripts.clone())?;
    rig.run_until(tr.end + 20_000_000);
    let s = split_delivered(&rig);
    Ok((rig, tr, s))
}

/// Splits a finished run's per-packet latencies by when the connection's
/// first packet reached a sink: a packet sent after that is a read. The
/// origin's release (its packet-out) follows every table write of the
/// write in the control channel's FIFO, and the tail's WRITE_ACK follows
/// the tail's, so by then the entry is installed wherever the write has
/// been applied; [`split`]'s release time is the CPU's decision, up to a
/// control-channel backlog earlier, and counts packets that still miss
/// (and are punted) as reads.
pub fn split_delivered(rig: &Rig) -> LatencySplit {
    let obs = rig.observations();
    let mut first: BTreeMap<_, Nanos> = BTreeMap::new();
    for o in &obs {
        let e = first.entry(o.key).or_insert(o.received);
        *e = (*e).min(o.received);
    }
    let mut out = LatencySplit::default();
    for o in obs {
        let l = o.received.saturating_sub(o.sent);
        match first.get(&o.key) {
            Some(&c) if o.sent >= c => out.read.push(l),
            _ => out.update.push(l),
        }
    }
    out.read.sort_unstable();
    out.update.sort_unstable();
    out
}

/// One point of exp. 4's sweep.
#[derive(Debug, Clone, Default)]
pub struct UpdateRun {
    /// Connections offered.
    pub offered: u64,
    /// Latency of each connection's packet that reached its sink, sorted.
    pub latency: Vec<Nanos>,
    /// Of those, delivered inside the offered window (the goodput).
    pub in_window: u64,
    /// Connections dropped at an origin: `held` full (bounded, spec §5.2).
    pub held_full: u64,
    /// Write requests refused at the head: its log full.
    pub refused: u64,
    /// WRITE_REQ retransmissions (the origin's T_sro timer).
    pub retransmits: u64,
    /// Events the switch CPUs handled (punts), over all switches.
    pub cpu_events: u64,
    /// Control-channel operations applied, over all switches.
    pub cp_ops: u64,
    /// Of those, at the head (replica 1; the only switch when single).
    pub head_cp_ops: u64,
    /// Events the head's CPU handled.
    pub head_cpu_events: u64,
    /// Writes the head sequenced.
    pub sequenced: u64,
}

/// Offers `rate` new connections a second for `duration` ns to `replicas`
/// NAT switches (1: single switch), then lets them drain for `drain` ns.
pub fn update_rate(
    replicas: usize,
    seed: u64,
    rate: f64,
    duration: Nanos,
    drain: Nanos,
) -> Result<(Rig, UpdateRun), String> {
    let cfg = RigConfig {
        replicas,
        seed,
        ..RigConfig::default()
    };
    let start = cfg.start;
    let tr = new_connections(replicas, rate, start, duration, seed)?;
    let mut rig = Rig::with_scripts(&cfg, tr.scripts)?;
    rig.run_until(start + duration + drain);
    let mut run = UpdateRun {
        offered: tr.packets,
        ..UpdateRun::default()
    };
    for o in rig.observations() {
        run.latency.push(o.received.saturating_sub(o.sent));
        if o.received < start + duration {
            run.in_window += 1;
        }
    }
    run.latency.sort_unstable();
    for i in 0..replicas {
        if let Some(sw) = rig.switch(rid_of(i)) {
            let c = &sw.program().cpu().counters;
            run.held_full += c.held_full;
            run.refused += c.refused;
            run.sequenced += c.sequenced;
            run.retransmits += c.retransmits;
            let st = sw.stats();
            run.cpu_events += st.cpu_events;
            run.cp_ops += st.cp_ops;
            if i == 0 {
                run.head_cp_ops = st.cp_ops;
                run.head_cpu_events = st.cpu_events;
            }
        }
    }
    Ok((rig, run))
}
