//! Packet schedules and the distributions generators draw from: exact
//! pacing from the packet index ([`Pace`]), packet sizes ([`SizeDist`]),
//! flow popularity ([`Zipf`]), random 5-tuples. Every draw takes the
//! device's RNG, so a workload's draws happen in the order it makes them.

use std::collections::HashSet;
use std::net::Ipv4Addr;

use inca_switch::device::{DeviceRng, Nanos};
use inca_switch::units;
use rand::Rng;

use super::schema::{
    invalid, parse_time_field, HostError, Quantity, SizeSpec, MAX_FRAME, MAX_PPS, MAX_RATE_BPS,
    MIN_PROBE_FRAME,
};
use crate::link::WIRE_OVERHEAD_BYTES;

/// Zipf-distributed ranks `0..n` (rank `k` has probability
/// `(k+1)^-alpha / H(n, alpha)`), sampled in O(log n) by binary search in a
/// CDF computed once. `alpha = 0` is uniform.
#[derive(Debug, Clone)]
pub struct Zipf {
    cdf: Vec<f64>,
    alpha: f64,
}

impl Zipf {
    /// The distribution over `n` ranks (`n >= 1`) with skew `alpha`
    /// (finite, `>= 0`); `None` otherwise.
    pub fn new(n: usize, alpha: f64) -> Option<Zipf> {
        if n == 0 || !alpha.is_finite() || alpha < 0.0 {
            return None;
        }
        let mut cdf = Vec::with_capacity(n);
        let mut sum = 0.0f64;
        for k in 1..=n {
            sum += (k as f64).powf(-alpha);
            cdf.push(sum);
        }
        for c in &mut cdf {
            *c /= sum;
        }
        // Rounding may leave the last entry a hair under 1; a sample of
        // 0.9999999 must still land on a rank.
        if let Some(last) = cdf.last_mut() {
            *last = 1.0;
        }
        Some(Zipf { cdf, alpha })
    }

    /// Number of ranks.
    pub fn len(&self) -> usize {
        self.cdf.len()
    }

    /// Always false (a Zipf has at least one rank).
    pub fn is_empty(&self) -> bool {
        self.cdf.is_empty()
    }

    /// The skew.
    pub fn alpha(&self) -> f64 {
        self.alpha
    }

    /// Probability of rank `k` (0-based); 0 outside the range.
    pub fn probability(&self, k: usize) -> f64 {
        match k {
            0 => self.cdf.first().copied().unwrap_or(0.0),
            _ if k < self.cdf.len() => self.cdf[k] - self.cdf[k - 1],
            _ => 0.0,
        }
    }

    /// One rank.
    pub fn sample(&self, rng: &mut impl Rng) -> usize {
        let u: f64 = rng.gen();
        self.cdf
            .partition_point(|&c| c <= u)
            .min(self.cdf.len() - 1)
    }
}

/// A resolved packet-size distribution (frame bytes without FCS).
#[derive(Debug, Clone, PartialEq)]
pub enum SizeDist {
    /// Always this size.
    Fixed(usize),
    /// Uniform in `lo..=hi`.
    Uniform(usize, usize),
    /// `sizes[i]` with probability `weights[i] / total`; `cum` holds the
    /// running sums.
    Mix {
        /// The sizes.
        sizes: Vec<usize>,
        /// Running sums of the weights.
        cum: Vec<u64>,
    },
}

impl SizeDist {
    /// One size.
    pub fn sample(&self, rng: &mut impl Rng) -> usize {
        match self {
            SizeDist::Fixed(s) => *s,
            SizeDist::Uniform(lo, hi) => rng.gen_range(*lo..=*hi),
            SizeDist::Mix { sizes, cum } => {
                let total = cum.last().copied().unwrap_or(0);
                if total == 0 {
                    return sizes.first().copied().unwrap_or(MIN_PROBE_FRAME);
                }
                let x = rng.gen_range(0..total);
                let i = cum.partition_point(|&c| c <= x);
                sizes.get(i).copied().unwrap_or(MIN_PROBE_FRAME)
            }
        }
    }

    /// Smallest size.
    pub fn min(&self) -> usize {
        match self {
            SizeDist::Fixed(s) | SizeDist::Uniform(s, _) => *s,
            SizeDist::Mix { sizes, .. } => sizes.iter().copied().min().unwrap_or(MIN_PROBE_FRAME),
        }
    }

    /// Mean size.
    pub fn mean(&self) -> f64 {
        match self {
            SizeDist::Fixed(s) => *s as f64,
            SizeDist::Uniform(lo, hi) => (*lo + *hi) as f64 / 2.0,
            SizeDist::Mix { sizes, cum } => {
                let total = cum.last().copied().unwrap_or(0).max(1) as f64;
                let mut prev = 0;
                let mut m = 0.0;
                for (s, &c) in sizes.iter().zip(cum) {
                    m += *s as f64 * (c - prev) as f64 / total;
                    prev = c;
                }
                m
            }
        }
    }

    /// Resolves a configured distribution; sizes below [`MIN_PROBE_FRAME`]
    /// are raised to it (the returned flag says whether any was).
    pub(crate) fn resolve(spec: &SizeSpec, field: &str) -> Result<(SizeDist, bool), HostError> {
        let mut raised = false;
        let mut one = |q: &Quantity| -> Result<usize, HostError> {
            let v = q.parse(units::parse_size).ok_or_else(|| {
                invalid(
                    field,
                    format!("invalid size {q}: write e.g. 1000, 1500B, 9KiB"),
                )
            })?;
            if v == 0 || v > MAX_FRAME as u64 {
                return Err(invalid(
                    field,
                    format!("size {v} B is outside 1..={MAX_FRAME} B"),
                ));
            }
            let v = v as usize;
            if v < MIN_PROBE_FRAME {
                raised = true;
            }
            Ok(v.max(MIN_PROBE_FRAME))
        };
        let dist = match spec {
            SizeSpec::Fixed(q) => SizeDist::Fixed(one(q)?),
            SizeSpec::Uniform(lo, hi) => {
                let (lo, hi) = (one(lo)?, one(hi)?);
                if lo > hi {
                    return Err(invalid(field, format!("uniform [{lo}, {hi}]: lo > hi")));
                }
                SizeDist::Uniform(lo, hi)
            }
            SizeSpec::Mix(entries) => {
                if entries.is_empty() {
                    return Err(invalid(field, "mix is empty"));
                }
                let mut sizes = Vec::with_capacity(entries.len());
                let mut cum = Vec::with_capacity(entries.len());
                let mut total = 0u64;
                for (q, w) in entries {
                    sizes.push(one(q)?);
                    total = total
                        .checked_add(*w)
                        .ok_or_else(|| invalid(field, "mix weights overflow"))?;
                    cum.push(total);
                }
                if total == 0 {
                    return Err(invalid(field, "mix weights are all 0"));
                }
                SizeDist::Mix { sizes, cum }
            }
        };
        Ok((dist, raised))
    }
}

/// How a generator spaces its packets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Pace {
    /// Wire bits per second.
    Bits(u64),
    /// Packets per second.
    Pps(u64),
}

impl Pace {
    /// Offset from the generator's origin of packet `i`, the packets before
    /// it having `bits_before` wire bits: exact, from `i`, never accumulated.
    pub(crate) fn offset(self, i: u64, bits_before: u128) -> Nanos {
        let v = match self {
            Pace::Bits(bps) => bits_before * 1_000_000_000 / u128::from(bps.max(1)),
            Pace::Pps(pps) => u128::from(i) * 1_000_000_000 / u128::from(pps.max(1)),
        };
        u64::try_from(v).unwrap_or(Nanos::MAX)
    }
}

/// Wire bits of a frame of `len` bytes.
pub(crate) fn wire_bits(len: usize) -> u128 {
    (len as u128 + u128::from(WIRE_OVERHEAD_BYTES)) * 8
}

/// When, how fast and how many: the schedule shared by `udp` and `request`.
#[derive(Debug, Clone)]
pub(crate) struct Schedule {
    pub(crate) pace: Pace,
    pub(crate) size: SizeDist,
    pub(crate) start: Nanos,
    pub(crate) stop: Option<Nanos>,
    pub(crate) count: Option<u64>,
}
pub(crate) fn parse_prefix(s: &str) -> Option<(u32, u8)> {
    let (ip, len) = s.split_once('/')?;
    let ip: Ipv4Addr = ip.trim().parse().ok()?;
    let len: u8 = len.trim().parse().ok()?;
    if len > 32 {
        return None;
    }
    let mask = prefix_mask(len);
    Some((u32::from(ip) & mask, len))
}

pub(crate) fn prefix_mask(len: u8) -> u32 {
    if len == 0 {
        0
    } else {
        u32::MAX << (32 - u32::from(len.min(32)))
    }
}

#[allow(clippy::too_many_arguments)]
pub(crate) fn resolve_schedule(
    field: &str,
    rate: &Option<Quantity>,
    pps: Option<u64>,
    size: &Option<SizeSpec>,
    start: &Option<Quantity>,
    stop: &Option<Quantity>,
    count: Option<u64>,
    link_rate: u64,
    notes: &mut Vec<String>,
) -> Result<Schedule, HostError> {
    let pace = match (rate, pps) {
        (Some(_), Some(_)) => return Err(invalid(field, "give rate or pps, not both")),
        (None, None) => return Err(invalid(field, "needs rate (\"10Gbps\", \"line\") or pps")),
        (Some(q), None) => {
            let f = format!("{field}.rate");
            let bps = match q {
                Quantity::Text(s) if s.trim() == "line" => {
                    if link_rate == 0 {
                        return Err(invalid(&f, "\"line\" but the host's link rate is 0"));
                    }
                    link_rate
                }
                _ => q.parse(units::parse_rate).ok_or_else(|| {
                    invalid(
                        &f,
                        format!("invalid rate {q}: write e.g. 10Gbps, 400M, \"line\""),
                    )
                })?,
            };
            if bps == 0 || bps > MAX_RATE_BPS {
                return Err(invalid(
                    &f,
                    format!("rate {bps} bps is outside 1..={MAX_RATE_BPS}"),
                ));
            }
            Pace::Bits(bps)
        }
        (None, Some(p)) => {
            if p == 0 || p > MAX_PPS {
                return Err(invalid(
                    &format!("{field}.pps"),
                    format!("{p} is outside 1..={MAX_PPS}"),
                ));
            }
            Pace::Pps(p)
        }
    };
    let (size, raised) = match size {
        Some(s) => SizeDist::resolve(s, &format!("{field}.size"))?,
        None => (SizeDist::Fixed(1000), false),
    };
    if raised {
        notes.push(format!(
            "{field}: sizes below {MIN_PROBE_FRAME} B raised to {MIN_PROBE_FRAME} B (headers + probe)"
        ));
    }
    let start = match start {
        Some(q) => parse_time_field(q, &format!("{field}.start"))?,
        None => 0,
    };
    let stop = match stop {
        Some(q) => Some(parse_time_field(q, &format!("{field}.stop"))?),
        None => None,
    };
    Ok(Schedule {
        pace,
        size,
        start,
        stop,
        count,
    })
}

/// Progress of a paced generator: packets sent and their wire bits, from
/// which the next send time is computed exactly.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Clock {
    pub(crate) origin: Nanos,
    pub(crate) sent: u64,
    pub(crate) bits: u128,
}

impl Clock {
    /// A clock whose first packet is due at `origin`.
    pub(crate) fn at(origin: Nanos) -> Clock {
        Clock {
            origin,
            sent: 0,
            bits: 0,
        }
    }

    pub(crate) fn next(&self, s: &Schedule) -> Option<Nanos> {
        if s.count.is_some_and(|c| self.sent >= c) {
            return None;
        }
        let t = self
            .origin
            .saturating_add(s.pace.offset(self.sent, self.bits));
        (s.stop.is_none_or(|stop| t < stop) && t != Nanos::MAX).then_some(t)
    }

    pub(crate) fn advance(&mut self, len: usize) {
        self.sent += 1;
        self.bits += wire_bits(len);
    }
}

/// Draws `n` distinct random (source address, source port) pairs.
pub(crate) fn draw_flows(
    n: usize,
    ports: (u16, u16),
    prefix: Option<(u32, u8)>,
    ip: Ipv4Addr,
    rng: &mut DeviceRng,
) -> Vec<(Ipv4Addr, u16)> {
    let mut seen = HashSet::with_capacity(n);
    let mut flows = Vec::with_capacity(n);
    let space = u64::from(ports.1 - ports.0 + 1)
        * prefix.map_or(1, |(_, len)| 1u64 << (32 - u32::from(len)));
    // Rejection sampling terminates quickly unless n is close to the space
    // (validated <= space); the cap is a guard, and the (rare) remainder is
    // filled by walking the space in order.
    let cap = (n as u64).saturating_mul(64).saturating_add(1 << 16);
    let mut tries = 0u64;
    let pick = |k: u64| -> (Ipv4Addr, u16) {
        let nports = u64::from(ports.1 - ports.0 + 1);
        let port = ports.0 + (k % nports) as u16;
        let addr = match prefix {
            Some((net, len)) => Ipv4Addr::from(net | ((k / nports) as u32 & !prefix_mask(len))),
            None => ip,
        };
        (addr, port)
    };
    while flows.len() < n && tries < cap {
        tries += 1;
        let k = rng.gen_range(0..space);
        if seen.insert(k) {
            flows.push(pick(k));
        }
    }
    let mut k = 0;
    while flows.len() < n && k < space {
        if seen.insert(k) {
            flows.push(pick(k));
        }
        k += 1;
    }
    flows
}
