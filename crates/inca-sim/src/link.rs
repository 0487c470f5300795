//! Links: two independent directions ("channels") between two device ports.
//!
//! A channel serialises frames at its rate (frame + 24 bytes of FCS,
//! preamble and inter-frame gap), holds at most `queue_bytes` waiting behind
//! the one on the wire (tail drop), and delivers each frame a propagation
//! delay after its last bit leaves. On top of that, impairments: loss
//! (Bernoulli, or bursty Gilbert–Elliott), duplication, reordering (a frame
//! held back by an extra delay), and uniform delay jitter. A link can be
//! down (everything sent is lost). An [`Impairment`] is what a fault lays
//! over a link's configured impairments for a window.

use inca_switch::device::Nanos;
use inca_switch::line::LineClock;
use rand::Rng;

use inca_switch::units::{format_bytes, format_rate, format_time};

/// Bytes a frame occupies on the wire beyond its own length.
pub const WIRE_OVERHEAD_BYTES: u64 = 24;

/// How a channel loses frames.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum LossModel {
    /// No loss.
    None,
    /// Each frame is lost independently with probability `p`.
    Bernoulli {
        /// Loss probability.
        p: f64,
    },
    /// Gilbert–Elliott: a two-state Markov chain per frame; in the good
    /// state frames are lost with `loss_good`, in the bad state with
    /// `loss_bad`.
    GilbertElliott {
        /// Probability of going from good to bad, per frame.
        p_good_to_bad: f64,
        /// Probability of going from bad to good, per frame.
        p_bad_to_good: f64,
        /// Loss probability in the good state.
        loss_good: f64,
        /// Loss probability in the bad state.
        loss_bad: f64,
    },
}

/// Configuration of one direction of a link.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ChannelConfig {
    /// Bits per second.
    pub rate_bps: u64,
    /// Propagation delay.
    pub delay: Nanos,
    /// Bytes that may wait behind the frame on the wire.
    pub queue_bytes: u64,
    /// Loss model.
    pub loss: LossModel,
    /// Probability a frame is delivered twice.
    pub duplicate: f64,
    /// Probability a frame is held back by `reorder_delay` (so later frames
    /// overtake it).
    pub reorder: f64,
    /// Extra delay of a reordered frame.
    pub reorder_delay: Nanos,
    /// Each frame's delay grows by a uniform amount in `0..=jitter`.
    pub jitter: Nanos,
}

impl Default for ChannelConfig {
    fn default() -> Self {
        ChannelConfig {
            rate_bps: 100_000_000_000,
            delay: 1_000,
            queue_bytes: 1 << 20,
            loss: LossModel::None,
            duplicate: 0.0,
            reorder: 0.0,
            reorder_delay: 10_000,
            jitter: 0,
        }
    }
}

impl std::fmt::Display for ChannelConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {} ns queue {}",
            format_rate(self.rate_bps),
            self.delay,
            format_bytes(self.queue_bytes)
        )
    }
}

/// Impairments a fault imposes on a link for a window: each field that is
/// set replaces the configured value while the window is open (unset ones
/// keep it).
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct Impairment {
    /// Loss model.
    pub loss: Option<LossModel>,
    /// Duplication probability.
    pub duplicate: Option<f64>,
    /// Reordering probability.
    pub reorder: Option<f64>,
    /// Extra delay of a reordered frame.
    pub reorder_delay: Option<Nanos>,
    /// Uniform delay jitter bound.
    pub jitter: Option<Nanos>,
}

impl Impairment {
    /// Whether it changes nothing.
    pub fn is_empty(&self) -> bool {
        *self == Impairment::default()
    }

    /// Every impairment field of `config` (for saying what a link is back
    /// to).
    pub fn of(config: &ChannelConfig) -> Impairment {
        Impairment {
            loss: Some(config.loss),
            duplicate: Some(config.duplicate),
            reorder: Some(config.reorder),
            reorder_delay: Some(config.reorder_delay),
            jitter: Some(config.jitter),
        }
    }

    /// `config` with this impairment's fields laid over it.
    pub fn over(&self, mut config: ChannelConfig) -> ChannelConfig {
        if let Some(l) = self.loss {
            config.loss = l;
        }
        if let Some(p) = self.duplicate {
            config.duplicate = p;
        }
        if let Some(p) = self.reorder {
            config.reorder = p;
        }
        if let Some(d) = self.reorder_delay {
            config.reorder_delay = d;
        }
        if let Some(j) = self.jitter {
            config.jitter = j;
        }
        config
    }
}

impl std::fmt::Display for Impairment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut parts = Vec::new();
        if let Some(l) = self.loss {
            parts.push(format!("loss {l}"));
        }
        if let Some(p) = self.duplicate {
            parts.push(format!("duplicate {}", percent(p)));
        }
        if let Some(p) = self.reorder {
            parts.push(format!("reorder {}", percent(p)));
        }
        if let Some(d) = self.reorder_delay {
            parts.push(format!("reorder delay {}", format_time(d)));
        }
        if let Some(j) = self.jitter {
            parts.push(format!("jitter {}", format_time(j)));
        }
        if parts.is_empty() {
            return f.write_str("no change");
        }
        f.write_str(&parts.join(", "))
    }
}

impl std::fmt::Display for LossModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            LossModel::None => f.write_str("none"),
            LossModel::Bernoulli { p } => f.write_str(&percent(p)),
            LossModel::GilbertElliott {
                p_good_to_bad,
                p_bad_to_good,
                loss_good,
                loss_bad,
            } => write!(
                f,
                "Gilbert-Elliott (good→bad {}, bad→good {}, loss {} / {})",
                percent(p_good_to_bad),
                percent(p_bad_to_good),
                percent(loss_good),
                percent(loss_bad)
            ),
        }
    }
}

/// A probability as a percentage with up to two decimals (`1.25 %`).
fn percent(p: f64) -> String {
    let s = format!("{:.2}", p * 100.0);
    let s = s.trim_end_matches('0').trim_end_matches('.');
    format!("{s} %")
}

/// Counters of one channel. Read back from `links.json` too, where a
/// counter an older results folder lacks reads as 0.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct ChannelStats {
    /// Frames handed to the channel.
    pub offered: u64,
    /// Frames delivered (duplicates counted).
    pub delivered: u64,
    /// Bytes delivered.
    pub delivered_bytes: u64,
    /// Frames dropped because the queue was full.
    pub queue_drops: u64,
    /// Frames lost to the loss model.
    pub lost: u64,
    /// Frames lost because the link was down.
    pub down_drops: u64,
    /// Frames duplicated.
    pub duplicated: u64,
    /// Frames held back (reordered).
    pub reordered: u64,
    /// Largest queue occupancy seen, bytes.
    pub max_queue_bytes: u64,
}

/// What became of a frame offered to a channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fate {
    /// Delivered at these times (two with duplication).
    Deliver {
        /// When the first copy arrives.
        first: Nanos,
        /// When a duplicate arrives, if any.
        duplicate: Option<Nanos>,
    },
    /// Dropped (counted).
    Dropped,
}

/// One direction of a link. See the module documentation.
#[derive(Debug, Clone)]
pub struct Channel {
    /// Its configuration (faults may change it mid-run).
    pub config: ChannelConfig,
    /// Counters.
    pub stats: ChannelStats,
    /// The transmitter (when the last frame accepted finishes).
    line: LineClock,
    /// (start of serialisation, bytes) of frames not yet on the wire, in
    /// order; those whose start has passed are pruned lazily.
    waiting: std::collections::VecDeque<(Nanos, u64)>,
    waiting_bytes: u64,
    /// Gilbert–Elliott state: in the bad state.
    bad: bool,
    /// The link is up.
    pub up: bool,
}

impl Channel {
    /// A channel with `config`, up and idle.
    pub fn new(config: ChannelConfig) -> Self {
        Channel {
            config,
            stats: ChannelStats::default(),
            line: LineClock::new(config.rate_bps),
            waiting: std::collections::VecDeque::new(),
            waiting_bytes: 0,
            bad: false,
            up: true,
        }
    }

    /// Serialisation time of `bytes` (frame length) at the channel's rate.
    pub fn serialisation(&self, bytes: usize) -> Nanos {
        inca_switch::control::serialisation(
            bytes + WIRE_OVERHEAD_BYTES as usize,
            self.config.rate_bps,
        )
    }

    /// Bytes waiting behind the frame on the wire at `now`.
    pub fn queued_bytes(&mut self, now: Nanos) -> u64 {
        while let Some(&(start, len)) = self.waiting.front() {
            if start > now {
                break;
            }
            self.waiting.pop_front();
            self.waiting_bytes -= len;
        }
        self.waiting_bytes
    }

    /// Offers a frame of `len` bytes at `now`; decides its fate with `rng`.
    pub fn offer(&mut self, now: Nanos, len: usize, rng: &mut impl Rng) -> Fate {
        self.stats.offered += 1;
        if !self.up {
            self.stats.down_drops += 1;
            return Fate::Dropped;
        }
        let queued = self.queued_bytes(now);
        let on_wire = self.line.free_at() > now;
        if on_wire && queued + len as u64 > self.config.queue_bytes {
            self.stats.queue_drops += 1;
            return Fate::Dropped;
        }
        // The frame occupies the wire whether or not it survives it.
        let (start, end) = self.line.send(now, len as u64 + WIRE_OVERHEAD_BYTES);
        if start > now {
            self.waiting.push_back((start, len as u64));
            self.waiting_bytes += len as u64;
            self.stats.max_queue_bytes = self.stats.max_queue_bytes.max(self.waiting_bytes);
        }
        if self.lose(rng) {
            self.stats.lost += 1;
            return Fate::Dropped;
        }
        let mut arrival = end + self.config.delay;
        if self.config.jitter > 0 {
            arrival += rng.gen_range(0..=self.config.jitter);
        }
        if self.config.reorder > 0.0 && rng.gen_bool(self.config.reorder.clamp(0.0, 1.0)) {
            self.stats.reordered += 1;
            arrival += self.config.reorder_delay;
        }
        let duplicate = (self.config.duplicate > 0.0
            && rng.gen_bool(self.config.duplicate.clamp(0.0, 1.0)))
        .then(|| {
            self.stats.duplicated += 1;
            arrival + self.serialisation(len)
        });
        self.stats.delivered += 1 + u64::from(duplicate.is_some());
        self.stats.delivered_bytes += len as u64 * (1 + u64::from(duplicate.is_some()));
        Fate::Deliver {
            first: arrival,
            duplicate,
        }
    }

    fn lose(&mut self, rng: &mut impl Rng) -> bool {
        match self.config.loss {
            LossModel::None => false,
            LossModel::Bernoulli { p } => p > 0.0 && rng.gen_bool(p.clamp(0.0, 1.0)),
            LossModel::GilbertElliott {
                p_good_to_bad,
                p_bad_to_good,
                loss_good,
                loss_bad,
            } => {
                let flip = if self.bad {
                    p_bad_to_good
                } else {
                    p_good_to_bad
                };
                if rng.gen_bool(flip.clamp(0.0, 1.0)) {
                    self.bad = !self.bad;
                }
                let p = if self.bad { loss_bad } else { loss_good };
                rng.gen_bool(p.clamp(0.0, 1.0))
            }
        }
    }

    /// Drops everything queued (the link went down, or its sender crashed).
    pub fn flush(&mut self, now: Nanos) {
        self.waiting.clear();
        self.waiting_bytes = 0;
        self.line.reset(now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn rng() -> rand_chacha::ChaCha8Rng {
        rand_chacha::ChaCha8Rng::seed_from_u64(1)
    }

    #[test]
    fn a_1500_byte_frame_on_100g_takes_120ns_plus_propagation() {
        let mut c = Channel::new(ChannelConfig {
            delay: 500,
            ..ChannelConfig::default()
        });
        // 1476 bytes of frame + 24 of overhead = 1500 bytes on the wire.
        assert_eq!(
            c.offer(1_000, 1476, &mut rng()),
            Fate::Deliver {
                first: 1_000 + 120 + 500,
                duplicate: None
            }
        );
        // The next frame waits for the wire.
        assert_eq!(
            c.offer(1_000, 1476, &mut rng()),
            Fate::Deliver {
                first: 1_000 + 240 + 500,
                duplicate: None
            }
        );
        assert_eq!(c.queued_bytes(1_000), 1476);
        assert_eq!(c.queued_bytes(1_120), 0);
    }

    #[test]
    fn a_full_queue_drops_the_tail() {
        let mut c = Channel::new(ChannelConfig {
            queue_bytes: 3000,
            ..ChannelConfig::default()
        });
        let mut r = rng();
        let fates: Vec<bool> = (0..5)
            .map(|_| c.offer(0, 1476, &mut r) != Fate::Dropped)
            .collect();
        // One on the wire, two waiting (2952 bytes), the rest dropped.
        assert_eq!(fates, vec![true, true, true, false, false]);
        assert_eq!(c.stats.queue_drops, 2);
    }

    #[test]
    fn bernoulli_loss_matches_its_rate() {
        let mut c = Channel::new(ChannelConfig {
            loss: LossModel::Bernoulli { p: 0.1 },
            queue_bytes: u64::MAX,
            ..ChannelConfig::default()
        });
        let mut r = rng();
        let n = 100_000;
        for i in 0..n {
            c.offer(i * 1_000, 100, &mut r);
        }
        let rate = c.stats.lost as f64 / n as f64;
        assert!((rate - 0.1).abs() < 0.005, "loss rate {rate}");
    }

    #[test]
    fn gilbert_elliott_loss_is_bursty() {
        let mut c = Channel::new(ChannelConfig {
            loss: LossModel::GilbertElliott {
                p_good_to_bad: 0.01,
                p_bad_to_good: 0.1,
                loss_good: 0.0,
                loss_bad: 1.0,
            },
            queue_bytes: u64::MAX,
            ..ChannelConfig::default()
        });
        let mut r = rng();
        let lost: Vec<bool> = (0..100_000u64)
            .map(|i| c.offer(i * 1_000, 100, &mut r) == Fate::Dropped)
            .collect();
        // Stationary bad-state share: 0.01 / (0.01 + 0.1) ≈ 9.1%; mean burst 10.
        let rate = lost.iter().filter(|&&l| l).count() as f64 / lost.len() as f64;
        assert!((rate - 0.0909).abs() < 0.015, "loss rate {rate}");
        let bursts = lost.windows(2).filter(|w| !w[0] && w[1]).count();
        let mean_burst = lost.iter().filter(|&&l| l).count() as f64 / bursts as f64;
        assert!(
            mean_burst > 7.0 && mean_burst < 13.0,
            "mean burst {mean_burst}"
        );
    }

    #[test]
    fn down_links_lose_everything_and_duplicates_arrive_later() {
        let mut c = Channel::new(ChannelConfig {
            duplicate: 1.0,
            ..ChannelConfig::default()
        });
        let mut r = rng();
        match c.offer(0, 1476, &mut r) {
            Fate::Deliver {
                first,
                duplicate: Some(d),
            } => assert!(d > first),
            other => panic!("{other:?}"),
        }
        c.up = false;
        assert_eq!(c.offer(10_000, 64, &mut r), Fate::Dropped);
        assert_eq!(c.stats.down_drops, 1);
    }
}
