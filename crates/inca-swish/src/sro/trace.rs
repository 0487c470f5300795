//! Traffic for the SRO experiments (specs/swish.md §8.1, §8.2 exp. 2–4),
//! as inside-host scripts for [`crate::sro::rig::Rig::with_scripts`]:
//!
//! - [`CaidaLike`]: the spec's "CAIDA-like" synthetic trace (§8.1):
//!   Pareto(α = 1.2) flow sizes, 64–1500 B packets, a given share of
//!   packets opening a connection (§8.2 exp. 2's 21 %, a model input).
//! - [`new_connections`]: every packet a new connection, Poisson arrivals
//!   at an offered rate (exp. 4).
//! - [`handshakes_then_blast`]: every connection opened first, then
//!   64-byte packets of those connections at line rate (exp. 3).
//!
//! Choices where the spec is silent, all [our choice]:
//! - A flow enters at one switch (the leaf's ECMP pins it, §8.1's
//!   leaf-spine topology), picked uniformly per flow.
//! - Connections start as a Poisson process at `conn_rate`; a flow's
//!   packets are `gap` apart (uniform), as in the rig's default traffic.
//! - Flow sizes are a discretised Pareto, `⌈x_m · U^(−1/α)⌉` packets
//!   capped at `max_flow`, with x_m solved so the mean flow is
//!   1 / `new_fraction` packets: the 21 % holds in expectation by
//!   construction, and the run reports the share it got.
//! - Packet sizes are uniform in 64..=1500 bytes on the wire (with FCS);
//!   the rig's tag needs 78, so smaller packets are sent as 78.

use inca_switch::Nanos;
use rand::Rng;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use crate::sro::rig::{flow_filler, flow_packet_sized, MIN_RIG_FRAME};

/// One inside host's script: (send time, frame).
pub type Script = Vec<(Nanos, Vec<u8>)>;

/// Line rate of a host port (specs/swish.md §8.1: 100 Gbps).
pub const LINE_RATE_BPS: u64 = crate::topology::LINK_RATE_BPS;

/// Scripts for every switch's inside host, and what went into them.
#[derive(Debug, Clone, Default)]
pub struct Trace {
    /// One script per switch.
    pub scripts: Vec<Script>,
    /// Packets scripted.
    pub packets: u64,
    /// Connections (flows) opened.
    pub flows: u32,
    /// The last send time.
    pub end: Nanos,
}

/// The CAIDA-like trace of §8.1.
#[derive(Debug, Clone)]
pub struct CaidaLike {
    /// Packets in the trace (exp. 2: 10,000).
    pub packets: u64,
    /// Share of packets that open a connection (exp. 2: 0.21, model input).
    pub new_fraction: f64,
    /// Pareto shape of flow sizes (§8.1: 1.2).
    pub alpha: f64,
    /// Largest flow, packets [our choice].
    pub max_flow: u32,
    /// New connections per second [our choice].
    pub conn_rate: f64,
    /// Gap between a flow's packets, uniform in this range.
    pub gap: (Nanos, Nanos),
    /// The first connection starts after this.
    pub start: Nanos,
    /// Packet sizes on the wire, bytes (§8.1: 64–1500).
    pub sizes: (usize, usize),
}

impl Default for CaidaLike {
    fn default() -> Self {
        CaidaLike {
            packets: 10_000,
            new_fraction: 0.21,
            alpha: 1.2,
            max_flow: 1_000,
            // A tenth of the head's control-channel ceiling (~10K writes/s,
            // docs/experiments.md E4): updates see the chain, not a queue.
            conn_rate: 1_000.0,
            gap: (10_000, 300_000),
            start: 1_000_000,
            sizes: (64, 1500),
        }
    }
}

/// Mean of `min(⌈x_m · U^(−1/α)⌉, cap)`: Σ_k P(K ≥ k), and P(K ≥ k) =
/// P(X > k − 1) = min(1, (x_m / (k − 1))^α).
fn mean_flow(x_m: f64, alpha: f64, cap: u32) -> f64 {
    1.0 + (2..=cap)
        .map(|k| (x_m / f64::from(k - 1)).powf(alpha).min(1.0))
        .sum::<f64>()
}

/// The Pareto scale whose capped flows average `mean` packets.
pub fn pareto_scale(mean: f64, alpha: f64, cap: u32) -> Result<f64, String> {
    if !(1.0..=f64::from(cap)).contains(&mean) {
        return Err(format!(
            "a mean flow of {mean:.2} packets is outside 1..={cap} (new_fraction too small or max_flow too low)"
        ));
    }
    let (mut lo, mut hi) = (1e-9, f64::from(cap));
    for _ in 0..100 {
        let mid = (lo + hi) / 2.0;
        if mean_flow(mid, alpha, cap) < mean {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Ok((lo + hi) / 2.0)
}

/// An exponential gap with mean `1e9 / rate` ns.
fn exp_gap(rng: &mut ChaCha8Rng, rate: f64) -> Nanos {
    let u: f64 = rng.gen_range(f64::EPSILON..1.0);
    (-u.ln() * 1e9 / rate) as Nanos
}

impl CaidaLike {
    /// The trace for `switches` inside hosts.
    pub fn build(&self, switches: usize, seed: u64) -> Result<Trace, String> {
        if switches == 0 {
            return Err("a trace needs at least one switch".into());
        }
        if !(self.conn_rate > 0.0 && self.conn_rate.is_finite()) {
            return Err(format!(
                "conn_rate {} is not a positive rate",
                self.conn_rate
            ));
        }
        if self.new_fraction <= 0.0 || self.new_fraction > 1.0 {
            return Err(format!(
                "new_fraction {} is outside (0, 1]",
                self.new_fraction
            ));
        }
        let x_m = pareto_scale(1.0 / self.new_fraction, self.alpha, self.max_flow)?;
        let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x6361_6964);
        let mut tr = Trace {
            scripts: vec![Vec::new(); switches],
            ..Trace::default()
        };
        let mut t0 = self.start;
        while tr.packets < self.packets {
            t0 += exp_gap(&mut rng, self.conn_rate);
            let f = tr.flows;
            tr.flows += 1;
            let u: f64 = rng.gen_range(f64::EPSILON..1.0);
            let k = ((x_m * u.powf(-1.0 / self.alpha)).ceil() as u64)
                .clamp(1, u64::from(self.max_flow))
                .min(self.packets - tr.packets);
            let at = rng.gen::<u32>() as usize % switches;
            let mut t = t0;
            for p in 0..k {
                let size = rng.gen_range(self.sizes.0..=self.sizes.1.max(self.sizes.0));
                let frame = (size.saturating_sub(4)).max(MIN_RIG_FRAME);
                tr.scripts[at].push((t, flow_packet_sized(f, p as u32, t, frame)));
                tr.end = tr.end.max(t);
                tr.packets += 1;
                t += rng.gen_range(self.gap.0..=self.gap.1.max(self.gap.0));
            }
        }
        Ok(tr)
    }
}

/// Every packet a new connection: Poisson arrivals at `rate` a second in
/// `[start, start + duration)`, each at a uniformly chosen switch.
pub fn new_connections(
    switches: usize,
    rate: f64,
    start: Nanos,
    duration: Nanos,
    seed: u64,
) -> Result<Trace, String> {
    if switches == 0 || !(rate > 0.0 && rate.is_finite()) {
        return Err(format!(
            "rate {rate} on {switches} switches: nothing to offer"
        ));
    }
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x6e65_7773);
    let mut tr = Trace {
        scripts: vec![Vec::new(); switches],
        ..Trace::default()
    };
    let mut t = start + exp_gap(&mut rng, rate);
    while t < start + duration {
        let at = rng.gen::<u32>() as usize % switches;
        tr.scripts[at].push((t, flow_packet_sized(tr.flows, 0, t, MIN_RIG_FRAME)));
        tr.flows += 1;
        tr.packets += 1;
        tr.end = t;
        t += exp_gap(&mut rng, rate);
    }
    Ok(tr)
}

/// On switch 0's inside port: `flows` connections opened `gap` apart from
/// `start` (one tagged packet each), then from `blast_at` a `window` of
/// `frame_len`-byte frames (without FCS) of those flows, round-robin, back
/// to back at [`LINE_RATE_BPS`].
pub fn handshakes_then_blast(
    switches: usize,
    flows: u32,
    start: Nanos,
    gap: Nanos,
    blast_at: Nanos,
    window: Nanos,
    frame_len: usize,
) -> Result<Trace, String> {
    if switches == 0 || flows == 0 {
        return Err("a blast needs a switch and at least one flow".into());
    }
    let mut tr = Trace {
        scripts: vec![Vec::new(); switches],
        flows,
        ..Trace::default()
    };
    let s = &mut tr.scripts[0];
    for f in 0..flows {
        let t = start + u64::from(f) * gap;
        s.push((t, flow_packet_sized(f, 0, t, MIN_RIG_FRAME)));
    }
    // Wire bits per frame: frame + FCS, preamble and gap (inca-sim's
    // WIRE_OVERHEAD_BYTES); send times in picoseconds to keep the rate.
    let bits = (frame_len.max(60) as u64 + inca_sim::link::WIRE_OVERHEAD_BYTES) * 8;
    let ps_per_frame = bits * 1_000_000_000_000 / LINE_RATE_BPS;
    let n = window * 1_000 / ps_per_frame;
    let frames: Vec<Vec<u8>> = (0..flows).map(|f| flow_filler(f, frame_len)).collect();
    for i in 0..n {
        let t = blast_at + i * ps_per_frame / 1_000;
        s.push((t, frames[(i % u64::from(flows)) as usize].clone()));
        tr.end = t;
    }
    tr.packets = u64::from(flows) + n;
    Ok(tr)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pareto_scale_gives_the_asked_mean_flow() {
        let x_m = pareto_scale(1.0 / 0.21, 1.2, 1_000).unwrap();
        assert!((mean_flow(x_m, 1.2, 1_000) - 1.0 / 0.21).abs() < 1e-6);
        assert!(pareto_scale(0.5, 1.2, 1_000).is_err());
        assert!(pareto_scale(2_000.0, 1.2, 1_000).is_err());
    }

    #[test]
    fn a_caida_like_trace_opens_about_the_asked_share_of_connections() {
        let t = CaidaLike::default().build(2, 3).unwrap();
        assert_eq!(t.packets, 10_000);
        assert_eq!(t.scripts.iter().map(Vec::len).sum::<usize>(), 10_000);
        // Heavy-tailed sizes: the share moves between seeds, not far.
        let share = f64::from(t.flows) / t.packets as f64;
        assert!((0.17..0.25).contains(&share), "{share}");
        // The same flows whatever the number of switches.
        assert_eq!(CaidaLike::default().build(1, 3).unwrap().flows, t.flows);
    }

    #[test]
    fn the_blast_is_at_line_rate_for_64_byte_packets() {
        let t = handshakes_then_blast(1, 4, 0, 1_000, 10_000, 100_000, 60).unwrap();
        // 100 µs at 6.72 ns a packet.
        assert_eq!(t.packets - 4, 14_880);
        assert!(t.scripts[0].iter().skip(4).all(|(_, f)| f.len() == 60));
    }

    #[test]
    fn new_connections_arrive_at_about_the_offered_rate() {
        let t = new_connections(2, 10_000.0, 0, 100_000_000, 1).unwrap();
        assert!((900..1_100).contains(&t.packets), "{}", t.packets);
        assert_eq!(u64::from(t.flows), t.packets);
        assert!(new_connections(2, 0.0, 0, 1, 1).is_err());
    }
}
