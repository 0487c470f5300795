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

/// Most ranks a [`Zipf`] keeps a CDF table for (8 bytes a rank): up to
/// here draws are by inversion of the exact table (the sampler scenarios
/// have always used, so their draws are unchanged); above, by
/// rejection-inversion in O(1) memory.
pub const ZIPF_TABLE_MAX: usize = 1_000_000;

/// Zipf-distributed ranks `0..n` (rank `k` has probability
/// `(k+1)^-alpha / H(n, alpha)`). `alpha = 0` is uniform.
///
/// Up to [`ZIPF_TABLE_MAX`] ranks a CDF computed once is searched in
/// O(log n); above, [`RejectionInversion`] samples in O(1) expected time
/// and O(1) memory, so 10^8 flows cost no table.
#[derive(Debug, Clone)]
pub struct Zipf {
    how: ZipfSampler,
    alpha: f64,
}

#[derive(Debug, Clone)]
enum ZipfSampler {
    Table(Vec<f64>),
    Rejection(RejectionInversion),
}

impl Zipf {
    /// The distribution over `n` ranks (`n >= 1`) with skew `alpha`
    /// (finite, `>= 0`); `None` otherwise.
    pub fn new(n: usize, alpha: f64) -> Option<Zipf> {
        if n <= ZIPF_TABLE_MAX {
            Zipf::table(n, alpha)
        } else {
            Zipf::rejection(n, alpha)
        }
    }

    /// The table sampler whatever `n` (tests compare it with
    /// [`Zipf::rejection`]).
    pub fn table(n: usize, alpha: f64) -> Option<Zipf> {
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
        Some(Zipf {
            how: ZipfSampler::Table(cdf),
            alpha,
        })
    }

    /// The O(1)-memory sampler whatever `n`.
    pub fn rejection(n: usize, alpha: f64) -> Option<Zipf> {
        Some(Zipf {
            how: ZipfSampler::Rejection(RejectionInversion::new(n, alpha)?),
            alpha,
        })
    }

    /// Number of ranks.
    pub fn len(&self) -> usize {
        match &self.how {
            ZipfSampler::Table(cdf) => cdf.len(),
            ZipfSampler::Rejection(r) => r.n as usize,
        }
    }

    /// Always false (a Zipf has at least one rank).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The skew.
    pub fn alpha(&self) -> f64 {
        self.alpha
    }

    /// Heap bytes the sampler holds (0 for rejection-inversion).
    pub fn heap_bytes(&self) -> usize {
        match &self.how {
            ZipfSampler::Table(cdf) => cdf.capacity() * std::mem::size_of::<f64>(),
            ZipfSampler::Rejection(_) => 0,
        }
    }

    /// Probability of rank `k` (0-based); 0 outside the range.
    pub fn probability(&self, k: usize) -> f64 {
        match &self.how {
            ZipfSampler::Table(cdf) => match k {
                0 => cdf.first().copied().unwrap_or(0.0),
                _ if k < cdf.len() => cdf[k] - cdf[k - 1],
                _ => 0.0,
            },
            ZipfSampler::Rejection(r) if (k as u64) < r.n => {
                ((k + 1) as f64).powf(-self.alpha) / r.norm
            }
            ZipfSampler::Rejection(_) => 0.0,
        }
    }

    /// One rank.
    pub fn sample(&self, rng: &mut impl Rng) -> usize {
        match &self.how {
            ZipfSampler::Table(cdf) => {
                let u: f64 = rng.gen();
                cdf.partition_point(|&c| c <= u).min(cdf.len() - 1)
            }
            ZipfSampler::Rejection(r) => r.sample(rng),
        }
    }
}

/// Rejection-inversion sampling of Zipf ranks (W. Hörmann, G. Derflinger,
/// "Rejection-inversion to generate variates from monotone discrete
/// distributions", ACM TOMACS 6(3), 1996), in the formulation of Apache
/// Commons RNG's `RejectionInversionZipfSampler`: invert the integral of
/// the hat `h(x) = x^-s` over `[1.5, n + 0.5]`, round, accept unless the
/// point falls in the hat's excess over the pmf. The acceptance rate is
/// above 90 % for every `s >= 0`, and nothing depends on `n` but constants.
#[derive(Debug, Clone, Copy)]
pub struct RejectionInversion {
    n: u64,
    s: f64,
    h_integral_x1: f64,
    h_integral_n: f64,
    threshold: f64,
    /// `H(n, s)`, for [`Zipf::probability`] (not used to sample).
    norm: f64,
}

impl RejectionInversion {
    fn new(n: usize, s: f64) -> Option<RejectionInversion> {
        if n == 0 || !s.is_finite() || s < 0.0 {
            return None;
        }
        let n = n as u64;
        let h_integral_x1 = h_integral(1.5, s) - 1.0;
        let h_integral_n = h_integral(n as f64 + 0.5, s);
        let threshold = 2.0 - h_integral_inverse(h_integral(2.5, s) - h(2.0, s), s);
        Some(RejectionInversion {
            n,
            s,
            h_integral_x1,
            h_integral_n,
            threshold,
            norm: harmonic(n, s),
        })
    }

    /// One rank, 0-based.
    fn sample(&self, rng: &mut impl Rng) -> usize {
        loop {
            let v: f64 = rng.gen();
            let u = self.h_integral_n + v * (self.h_integral_x1 - self.h_integral_n);
            let x = h_integral_inverse(u, self.s);
            // `x` lies in [1.5, n + 0.5] up to rounding: clamp the rank.
            let k = ((x + 0.5) as u64).clamp(1, self.n);
            let kf = k as f64;
            if kf - x <= self.threshold || u >= h_integral(kf + 0.5, self.s) - h(kf, self.s) {
                return (k - 1) as usize;
            }
        }
    }
}

/// The hat `x^-s`.
fn h(x: f64, s: f64) -> f64 {
    (-s * x.ln()).exp()
}

/// An antiderivative of the hat, `(x^(1-s) - 1) / (1 - s)` (`ln x` at
/// `s = 1`), written to stay accurate near `s = 1`.
fn h_integral(x: f64, s: f64) -> f64 {
    let log_x = x.ln();
    expm1_over_x((1.0 - s) * log_x) * log_x
}

/// The inverse of [`h_integral`].
fn h_integral_inverse(x: f64, s: f64) -> f64 {
    // Rounding may push t below -1, where log1p is undefined.
    let t = (x * (1.0 - s)).max(-1.0);
    (log1p_over_x(t) * x).exp()
}

/// `expm1(x) / x`, 1 at 0.
fn expm1_over_x(x: f64) -> f64 {
    if x.abs() > 1e-8 {
        x.exp_m1() / x
    } else {
        1.0 + x * 0.5 * (1.0 + x / 3.0 * (1.0 + 0.25 * x))
    }
}

/// `ln(1 + x) / x`, 1 at 0.
fn log1p_over_x(x: f64) -> f64 {
    if x.abs() > 1e-8 {
        x.ln_1p() / x
    } else {
        1.0 - x * (0.5 - x * (1.0 / 3.0 - 0.25 * x))
    }
}

/// `H(n, s) = sum_{k=1..n} k^-s`: the first terms exactly, the tail by
/// Euler–Maclaurin (integral, end-point halves, first derivative term),
/// whose error is far below f64 resolution once the terms are smooth.
fn harmonic(n: u64, s: f64) -> f64 {
    const EXACT: u64 = 10_000;
    let head: f64 = (1..=n.min(EXACT)).map(|k| (k as f64).powf(-s)).sum();
    if n <= EXACT {
        return head;
    }
    let (a, b) = (EXACT as f64, n as f64);
    let f = |x: f64| x.powf(-s);
    let df = |x: f64| -s * x.powf(-s - 1.0);
    let integral = if (s - 1.0).abs() < 1e-12 {
        (b / a).ln()
    } else {
        (b.powf(1.0 - s) - a.powf(1.0 - s)) / (1.0 - s)
    };
    // sum_{k=a..b} f(k) ≈ ∫ + (f(a)+f(b))/2 + (f'(b)-f'(a))/12; `head`
    // already holds f(a).
    head + integral + (f(b) - f(a)) / 2.0 + (df(b) - df(a)) / 12.0
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
/// which the next send time is computed exactly. A speed-up (a workload
/// storm, [`crate::workload_control`]) re-bases the clock: packets
/// after `base_sent` are paced from `origin` at `speed` times the rate.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Clock {
    pub(crate) origin: Nanos,
    pub(crate) sent: u64,
    pub(crate) bits: u128,
    /// Packets and bits sent before `origin` was last set.
    base_sent: u64,
    base_bits: u128,
    /// Multiple of the schedule's rate (1: as configured).
    speed: u32,
}

impl Clock {
    /// A clock whose first packet is due at `origin`.
    pub(crate) fn at(origin: Nanos) -> Clock {
        Clock {
            origin,
            sent: 0,
            bits: 0,
            base_sent: 0,
            base_bits: 0,
            speed: 1,
        }
    }

    pub(crate) fn next(&self, s: &Schedule) -> Option<Nanos> {
        if s.count.is_some_and(|c| self.sent >= c) {
            return None;
        }
        let t = self.due(s);
        (s.stop.is_none_or(|stop| t < stop) && t != Nanos::MAX).then_some(t)
    }

    /// When the next packet is due, ignoring the schedule's stop and count.
    fn due(&self, s: &Schedule) -> Nanos {
        let offset = s
            .pace
            .offset(self.sent - self.base_sent, self.bits - self.base_bits)
            / Nanos::from(self.speed.max(1));
        self.origin.saturating_add(offset)
    }

    pub(crate) fn advance(&mut self, len: usize) {
        self.sent += 1;
        self.bits += wire_bits(len);
    }

    /// From `at` on, sends at `speed` times the schedule's rate (1: back to
    /// the rate configured). The packet in progress keeps its phase: what
    /// was left of its gap at the old speed is scaled to the new one (and
    /// one due before `at`, late, is due at `at`; before the first packet,
    /// it stays due at the workload's start).
    pub(crate) fn rebase(&mut self, at: Nanos, speed: u32, s: &Schedule) {
        let speed = speed.max(1);
        let due = self.due(s);
        if self.sent > 0 {
            let left = u128::from(due.saturating_sub(at)) * u128::from(self.speed);
            let left = Nanos::try_from(left / u128::from(speed)).unwrap_or(Nanos::MAX);
            self.origin = at.saturating_add(left);
        } else {
            // Nothing sent yet: the first packet stays due at the start.
            self.origin = due;
        }
        self.base_sent = self.sent;
        self.base_bits = self.bits;
        self.speed = speed;
    }
}

/// Most random flows kept as a table of drawn 5-tuples; above, flows are
/// a keyed permutation of the source space ([`FlowSet::Permuted`]).
pub const FLOW_TABLE_MAX: usize = 1_000_000;

/// The random flows of a generator: flow `i`'s (source address, source
/// port).
#[derive(Debug, Clone)]
pub(crate) enum FlowSet {
    /// Drawn one by one (the scenarios' flows up to [`FLOW_TABLE_MAX`],
    /// unchanged).
    Table(Vec<(Ipv4Addr, u16)>),
    /// Flow `i` is point `(a * i + b) mod space` of the source space, with
    /// `a` coprime to `space`: distinct for distinct `i`, in O(1) memory.
    Permuted {
        a: u64,
        b: u64,
        space: u64,
        ports: (u16, u16),
        prefix: Option<(u32, u8)>,
        ip: Ipv4Addr,
    },
}

impl FlowSet {
    /// `n` distinct random flows (`n` at most the space, as validated).
    pub(crate) fn draw(
        n: usize,
        ports: (u16, u16),
        prefix: Option<(u32, u8)>,
        ip: Ipv4Addr,
        rng: &mut DeviceRng,
    ) -> FlowSet {
        if n <= FLOW_TABLE_MAX {
            return FlowSet::Table(draw_flows(n, ports, prefix, ip, rng));
        }
        let space = source_space(ports, prefix);
        let a = loop {
            let a = rng.gen_range(1..space.max(2));
            if gcd(a, space) == 1 {
                break a;
            }
        };
        FlowSet::Permuted {
            a,
            b: rng.gen_range(0..space),
            space,
            ports,
            prefix,
            ip,
        }
    }

    /// Flow `i`.
    pub(crate) fn get(&self, i: usize) -> Option<(Ipv4Addr, u16)> {
        match self {
            FlowSet::Table(t) => t.get(i).copied(),
            FlowSet::Permuted {
                a,
                b,
                space,
                ports,
                prefix,
                ip,
            } => {
                let k = (u128::from(*a) * i as u128 + u128::from(*b)) % u128::from(*space);
                Some(space_point(k as u64, *ports, *prefix, *ip))
            }
        }
    }

    /// Heap bytes held (0 when permuted).
    #[cfg(test)]
    pub(crate) fn heap_bytes(&self) -> usize {
        match self {
            FlowSet::Table(t) => t.capacity() * std::mem::size_of::<(Ipv4Addr, u16)>(),
            FlowSet::Permuted { .. } => 0,
        }
    }
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// Number of (source address, source port) points.
pub(crate) fn source_space(ports: (u16, u16), prefix: Option<(u32, u8)>) -> u64 {
    u64::from(ports.1 - ports.0 + 1) * prefix.map_or(1, |(_, len)| 1u64 << (32 - u32::from(len)))
}

/// Point `k` of the source space: ports vary fastest.
fn space_point(
    k: u64,
    ports: (u16, u16),
    prefix: Option<(u32, u8)>,
    ip: Ipv4Addr,
) -> (Ipv4Addr, u16) {
    let nports = u64::from(ports.1 - ports.0 + 1);
    let port = ports.0 + (k % nports) as u16;
    let addr = match prefix {
        Some((net, len)) => Ipv4Addr::from(net | ((k / nports) as u32 & !prefix_mask(len))),
        None => ip,
    };
    (addr, port)
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
    let space = source_space(ports, prefix);
    // Rejection sampling terminates quickly unless n is close to the space
    // (validated <= space); the cap is a guard, and the (rare) remainder is
    // filled by walking the space in order.
    let cap = (n as u64).saturating_mul(64).saturating_add(1 << 16);
    let mut tries = 0u64;
    let pick = |k: u64| space_point(k, ports, prefix, ip);
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
