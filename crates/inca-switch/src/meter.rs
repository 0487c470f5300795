//! Meters: the RFC 2698 two-rate three-colour marker (trTCM), as a Tofino
//! `Meter` extern in bytes mode.
//!
//! A [`Meter`] has two token buckets: the committed bucket C (rate CIR, depth
//! CBS) and the peak bucket P (rate PIR, depth PBS). [`Meter::mark`] colours a
//! packet exactly as RFC 2698 §3 says, in colour-blind mode (no pre-colour) or
//! colour-aware mode (the packet's previous colour is given).
//!
//! Token arithmetic is exact: bucket levels are kept in units of
//! byte·(1/10⁹), i.e. "bytes times nanoseconds per second", in `u128`. Adding
//! `rate·Δt` (bytes/s × ns) to such a level is then an exact integer step with
//! no rounding, so a meter never drifts, two runs agree bit for bit, and over
//! a long constant stream the green byte count is `CIR·t` give or take one
//! bucket. `u128` is wide enough that no product of two `u64`s overflows, and
//! additions saturate before the cap is applied.
//!
//! [`MeterArray`] is an indexed array of meters, each configured separately
//! by the control plane. Like the other stateful objects here it is pure
//! data: the pipeline wrapper enforces one access per packet pass.

use crate::counter::IndexError;
use crate::device::Nanos;
use thiserror::Error;

/// Nanoseconds per second: the scale of bucket levels (see module docs).
const SCALE: u128 = 1_000_000_000;

/// A packet's colour.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum Color {
    /// Within the committed rate.
    Green,
    /// Above the committed rate but within the peak rate.
    Yellow,
    /// Above the peak rate.
    Red,
}

/// The parameters of one RFC 2698 meter. Rates are in bytes per second,
/// bursts (bucket depths) in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct MeterConfig {
    /// Committed information rate, bytes per second.
    pub cir: u64,
    /// Committed burst size, bytes (> 0).
    pub cbs: u64,
    /// Peak information rate, bytes per second (>= `cir`).
    pub pir: u64,
    /// Peak burst size, bytes (> 0).
    pub pbs: u64,
}

impl MeterConfig {
    /// Checks the RFC 2698 constraints: `pir >= cir` and both bursts > 0.
    ///
    /// RFC 2698 also asks bursts to be at least the largest packet; we do not
    /// enforce that (a larger packet is simply never green or never
    /// non-red), since the meter does not know the MTU.
    pub fn validate(&self) -> Result<(), MeterError> {
        if self.pir < self.cir {
            return Err(MeterError::PirBelowCir {
                cir: self.cir,
                pir: self.pir,
            });
        }
        if self.cbs == 0 {
            return Err(MeterError::ZeroBurst { bucket: "CBS" });
        }
        if self.pbs == 0 {
            return Err(MeterError::ZeroBurst { bucket: "PBS" });
        }
        Ok(())
    }
}

/// A meter configuration was invalid, or a meter index was out of range.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum MeterError {
    /// RFC 2698 requires PIR >= CIR.
    #[error("meter peak rate {pir} B/s is below its committed rate {cir} B/s")]
    PirBelowCir {
        /// The committed rate given.
        cir: u64,
        /// The peak rate given.
        pir: u64,
    },
    /// A bucket depth was zero.
    #[error("meter {bucket} must be greater than 0 bytes")]
    ZeroBurst {
        /// Which bucket: "CBS" or "PBS".
        bucket: &'static str,
    },
    /// The meter index is outside the array.
    #[error(transparent)]
    Index(#[from] IndexError),
}

/// One RFC 2698 two-rate three-colour marker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Meter {
    config: MeterConfig,
    // Bucket levels in byte·(1/SCALE) units, and their caps (CBS·SCALE,
    // PBS·SCALE) precomputed so the hot path only multiplies by Δt.
    tc: u128,
    tp: u128,
    tc_max: u128,
    tp_max: u128,
    // Time of the last refill; never moves backwards.
    last: Nanos,
}

impl Meter {
    /// Makes a meter with both buckets full at time `now` (RFC 2698 §3:
    /// "the token buckets P and C are initially full").
    pub fn new(config: MeterConfig, now: Nanos) -> Result<Self, MeterError> {
        config.validate()?;
        let tc_max = u128::from(config.cbs) * SCALE;
        let tp_max = u128::from(config.pbs) * SCALE;
        Ok(Meter {
            config,
            tc: tc_max,
            tp: tp_max,
            tc_max,
            tp_max,
            last: now,
        })
    }

    /// The meter's configuration.
    pub fn config(&self) -> &MeterConfig {
        &self.config
    }

    /// Whole bytes in the (committed, peak) buckets as of the last
    /// [`mark`](Self::mark) (fractional tokens are not shown).
    pub fn tokens(&self) -> (u64, u64) {
        // Levels are capped at u64::MAX·SCALE, so the quotient fits a u64.
        ((self.tc / SCALE) as u64, (self.tp / SCALE) as u64)
    }

    /// Fills both buckets to their burst sizes, as a meter built at `now`.
    pub fn reset(&mut self, now: Nanos) {
        self.tc = self.tc_max;
        self.tp = self.tp_max;
        self.last = now;
    }

    /// Adds the tokens earned since the last refill. A `now` before the last
    /// refill (time going backwards) counts as no time passing.
    #[inline]
    fn refill(&mut self, now: Nanos) {
        if now <= self.last {
            return;
        }
        let dt = u128::from(now - self.last);
        self.last = now;
        // u64 × u64 always fits u128; the add saturates before capping.
        let add_c = u128::from(self.config.cir) * dt;
        let add_p = u128::from(self.config.pir) * dt;
        self.tc = self.tc.saturating_add(add_c).min(self.tc_max);
        self.tp = self.tp.saturating_add(add_p).min(self.tp_max);
    }

    /// Colours a packet of `bytes` bytes arriving at `now`, per RFC 2698 §3.
    ///
    /// With `pre_color == None` (colour-blind): Red if `Tp < B`; else Yellow
    /// if `Tc < B` (and `Tp -= B`); else Green (`Tp -= B`, `Tc -= B`).
    /// With `Some(c)` (colour-aware): Red if `c` is Red or `Tp < B`; else
    /// Yellow if `c` is Yellow or `Tc < B` (and `Tp -= B`); else Green (both
    /// decremented). A red packet takes no tokens.
    #[inline]
    pub fn mark(&mut self, now: Nanos, bytes: u64, pre_color: Option<Color>) -> Color {
        self.refill(now);
        let b = u128::from(bytes) * SCALE;
        let pre = pre_color.unwrap_or(Color::Green);
        if pre == Color::Red || self.tp < b {
            Color::Red
        } else if pre == Color::Yellow || self.tc < b {
            self.tp -= b;
            Color::Yellow
        } else {
            self.tp -= b;
            self.tc -= b;
            Color::Green
        }
    }
}

/// An array of independently configured meters.
///
/// An index that was never configured marks every packet with its
/// pre-colour, or Green when colour-blind — BMv2's behaviour for an
/// unconfigured meter: it does not police.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MeterArray {
    meters: Box<[Option<Meter>]>,
}

impl MeterArray {
    /// Makes an array of `size` unconfigured meters.
    pub fn new(size: usize) -> Self {
        MeterArray {
            meters: vec![None; size].into_boxed_slice(),
        }
    }

    /// Makes an array of `size` meters all configured with `config`, with
    /// full buckets at `now`.
    pub fn with_config(size: usize, config: MeterConfig, now: Nanos) -> Result<Self, MeterError> {
        let m = Meter::new(config, now)?;
        Ok(MeterArray {
            meters: vec![Some(m); size].into_boxed_slice(),
        })
    }

    /// Number of meters in the array.
    pub fn len(&self) -> usize {
        self.meters.len()
    }

    /// Whether the array has no meters at all.
    pub fn is_empty(&self) -> bool {
        self.meters.is_empty()
    }

    /// (Re)configures the meter at `index`, with both buckets full at `now`.
    pub fn configure(
        &mut self,
        index: u64,
        config: MeterConfig,
        now: Nanos,
    ) -> Result<(), MeterError> {
        let i = IndexError::check(index, self.meters.len())?;
        self.meters[i] = Some(Meter::new(config, now)?);
        Ok(())
    }

    /// Removes the configuration at `index`; it stops policing.
    pub fn unconfigure(&mut self, index: u64) -> Result<(), IndexError> {
        let i = IndexError::check(index, self.meters.len())?;
        self.meters[i] = None;
        Ok(())
    }

    /// The configuration at `index`, `None` if unconfigured.
    pub fn config(&self, index: u64) -> Result<Option<&MeterConfig>, IndexError> {
        let i = IndexError::check(index, self.meters.len())?;
        Ok(self.meters[i].as_ref().map(Meter::config))
    }

    /// Puts a meter's state back (the load-time check undoing a traced
    /// pass); out of range does nothing.
    pub(crate) fn restore(&mut self, index: u64, meter: Option<Meter>) {
        if let Ok(i) = IndexError::check(index, self.meters.len()) {
            self.meters[i] = meter;
        }
    }

    /// The meter at `index`, `None` if unconfigured (for inspection).
    pub fn get(&self, index: u64) -> Result<Option<&Meter>, IndexError> {
        let i = IndexError::check(index, self.meters.len())?;
        Ok(self.meters[i].as_ref())
    }

    /// Colours a packet with the meter at `index`; see [`Meter::mark`].
    #[inline]
    pub fn mark(
        &mut self,
        index: u64,
        now: Nanos,
        bytes: u64,
        pre_color: Option<Color>,
    ) -> Result<Color, IndexError> {
        let i = IndexError::check(index, self.meters.len())?;
        Ok(match &mut self.meters[i] {
            Some(m) => m.mark(now, bytes, pre_color),
            None => pre_color.unwrap_or(Color::Green),
        })
    }

    /// Refills every configured meter's buckets to full at `now`, as if just
    /// configured; configurations are kept.
    pub fn reset(&mut self, now: Nanos) {
        for m in self.meters.iter_mut().flatten() {
            m.reset(now);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::{MILLIS, SECONDS};
    use proptest::prelude::*;

    fn cfg(cir: u64, cbs: u64, pir: u64, pbs: u64) -> MeterConfig {
        MeterConfig { cir, cbs, pir, pbs }
    }

    /// Sends `bytes`-sized packets at `rate` bytes/s for `duration`, from
    /// time `start`, colour-blind; returns bytes per colour (G, Y, R).
    fn stream(m: &mut Meter, start: Nanos, rate: u64, bytes: u64, duration: Nanos) -> [u64; 3] {
        let gap = bytes * SECONDS / rate;
        let mut out = [0u64; 3];
        let mut t = start;
        while t < start + duration {
            let c = m.mark(t, bytes, None);
            out[c as usize] += bytes;
            t += gap;
        }
        out
    }

    #[test]
    fn config_validation() {
        assert!(cfg(100, 10, 100, 10).validate().is_ok());
        assert_eq!(
            cfg(200, 10, 100, 10).validate(),
            Err(MeterError::PirBelowCir { cir: 200, pir: 100 })
        );
        assert!(matches!(
            cfg(1, 0, 2, 10).validate(),
            Err(MeterError::ZeroBurst { bucket: "CBS" })
        ));
        assert!(matches!(
            cfg(1, 10, 2, 0).validate(),
            Err(MeterError::ZeroBurst { bucket: "PBS" })
        ));
        assert!(Meter::new(cfg(2, 1, 1, 1), 0).is_err());
        // Zero rates are allowed: the buckets just never refill.
        assert!(cfg(0, 1, 0, 1).validate().is_ok());
    }

    #[test]
    fn burst_allowances_at_start() {
        // Buckets start full: CBS of green, then PBS-CBS of yellow, then red.
        let mut m = Meter::new(cfg(1, 1000, 1, 3000), 0).unwrap();
        assert_eq!(m.tokens(), (1000, 3000));
        let colors: Vec<Color> = (0..40).map(|_| m.mark(0, 100, None)).collect();
        assert!(colors[..10].iter().all(|&c| c == Color::Green));
        // The peak bucket also paid for the 10 greens: 2000 bytes remain.
        assert!(colors[10..30].iter().all(|&c| c == Color::Yellow));
        assert!(colors[30..].iter().all(|&c| c == Color::Red));
        assert_eq!(m.tokens(), (0, 0));
    }

    #[test]
    fn packet_larger_than_bucket() {
        let mut m = Meter::new(cfg(1000, 100, 1000, 500), 0).unwrap();
        assert_eq!(m.mark(0, 200, None), Color::Yellow);
        assert_eq!(m.mark(0, 600, None), Color::Red);
    }

    #[test]
    fn below_cir_all_green() {
        let mut m = Meter::new(cfg(1_000_000, 3000, 2_000_000, 6000), 0).unwrap();
        let [g, y, r] = stream(&mut m, 0, 900_000, 1000, 2 * SECONDS);
        assert!(g > 0);
        assert_eq!((y, r), (0, 0));
    }

    #[test]
    fn between_cir_and_pir_mostly_yellow() {
        let mut m = Meter::new(cfg(1_000_000, 3000, 4_000_000, 6000), 0).unwrap();
        let [g, y, r] = stream(&mut m, 0, 3_500_000, 1000, 2 * SECONDS);
        assert_eq!(r, 0, "below PIR nothing is red");
        assert!(y > g, "g={g} y={y}");
        // Green is the committed rate (plus the initial burst).
        assert!(g.abs_diff(2_000_000) <= 3000, "g={g}");
    }

    #[test]
    fn above_pir_mostly_red() {
        let mut m = Meter::new(cfg(1_000_000, 3000, 2_000_000, 6000), 0).unwrap();
        let [g, y, r] = stream(&mut m, 0, 10_000_000, 1000, 2 * SECONDS);
        assert!(r > g + y, "g={g} y={y} r={r}");
        // Green at CIR, yellow at PIR-CIR, each within a burst.
        assert!(g.abs_diff(2_000_000) <= 3000, "g={g}");
        assert!(y.abs_diff(2_000_000) <= 6000, "y={y}");
    }

    #[test]
    fn long_run_green_rate_is_cir() {
        // A rate that does not divide evenly into nanoseconds checks that
        // fractional tokens are carried, not dropped.
        let cir = 1_234_567;
        let cbs = 10_000;
        let mut m = Meter::new(cfg(cir, cbs, 10 * cir, 4 * cbs), 0).unwrap();
        let secs = 20;
        let [g, _, _] = stream(&mut m, 0, 5 * cir, 1000, secs * SECONDS);
        let expect = cir * secs;
        assert!(g.abs_diff(expect) <= cbs, "green {g} expected {expect}");
    }

    #[test]
    fn refill_is_exact() {
        // 1 byte/s: one byte of tokens after exactly one second, not before.
        let mut m = Meter::new(cfg(1, 1, 1, 1), 0).unwrap();
        assert_eq!(m.mark(0, 1, None), Color::Green);
        assert_eq!(m.mark(SECONDS - 1, 1, None), Color::Red);
        assert_eq!(m.mark(SECONDS, 1, None), Color::Green);
        // 3 bytes/s: a byte every 1/3 s, which is not a whole number of
        // nanoseconds. The sub-byte remainder is carried, so the 3rd byte
        // after the start is earned at exactly 1 s, with no drift.
        // (Buckets of 2 bytes so that the cap never clips a remainder.)
        let mut m = Meter::new(cfg(3, 2, 3, 2), 0).unwrap();
        assert_eq!(m.mark(0, 2, None), Color::Green);
        assert_eq!(m.mark(333_333_333, 1, None), Color::Red); // 0.999999999 B
        assert_eq!(m.mark(333_333_334, 1, None), Color::Green); // 1.000000002 B
        assert_eq!(m.mark(666_666_666, 1, None), Color::Red); // 0.999999998 B
        assert_eq!(m.mark(666_666_667, 1, None), Color::Green); // 1.000000001 B
        assert_eq!(m.mark(SECONDS - 1, 1, None), Color::Red); // 0.999999997 B
        assert_eq!(m.mark(SECONDS, 1, None), Color::Green); // exactly 1 B
        assert_eq!(m.tokens(), (0, 0));
    }

    #[test]
    fn buckets_cap_at_burst() {
        let mut m = Meter::new(cfg(1000, 100, 2000, 300), 0).unwrap();
        m.mark(0, 300, None);
        assert_eq!(m.tokens(), (100, 0));
        m.mark(1000 * SECONDS, 0, None);
        assert_eq!(m.tokens(), (100, 300));
        // Extreme values saturate rather than overflow.
        let mut m = Meter::new(cfg(u64::MAX, u64::MAX, u64::MAX, u64::MAX), 0).unwrap();
        assert_eq!(m.mark(u64::MAX, u64::MAX, None), Color::Green);
        assert_eq!(m.mark(u64::MAX, u64::MAX, None), Color::Red);
    }

    #[test]
    fn time_going_backwards_adds_nothing() {
        let mut m = Meter::new(cfg(1000, 100, 1000, 100), 10 * SECONDS).unwrap();
        assert_eq!(m.mark(10 * SECONDS, 100, None), Color::Green);
        assert_eq!(m.mark(0, 1, None), Color::Red);
        assert_eq!(m.mark(5 * SECONDS, 1, None), Color::Red);
        // Refill resumes from the latest time seen, not the earlier one.
        assert_eq!(m.mark(10 * SECONDS + MILLIS, 1, None), Color::Green);
    }

    #[test]
    fn color_aware_rfc_cases() {
        let c = cfg(1000, 1000, 2000, 2000);
        // Pre-red stays red even with full buckets, and takes no tokens.
        let mut m = Meter::new(c, 0).unwrap();
        assert_eq!(m.mark(0, 100, Some(Color::Red)), Color::Red);
        assert_eq!(m.tokens(), (1000, 2000));
        // Pre-yellow with full buckets: yellow, only Tp is charged.
        assert_eq!(m.mark(0, 100, Some(Color::Yellow)), Color::Yellow);
        assert_eq!(m.tokens(), (1000, 1900));
        // Pre-green behaves as colour-blind: green, both charged.
        assert_eq!(m.mark(0, 100, Some(Color::Green)), Color::Green);
        assert_eq!(m.tokens(), (900, 1800));
        // Pre-green but Tc < B: yellow.
        assert_eq!(m.mark(0, 950, Some(Color::Green)), Color::Yellow);
        assert_eq!(m.tokens(), (900, 850));
        // Pre-yellow but Tp < B: red (peak check comes first).
        assert_eq!(m.mark(0, 900, Some(Color::Yellow)), Color::Red);
        // Pre-green but Tp < B although Tc >= B: red.
        assert_eq!(m.mark(0, 860, Some(Color::Green)), Color::Red);
        assert_eq!(m.tokens(), (900, 850));
    }

    #[test]
    fn array_index_config_and_reset() {
        let mut a = MeterArray::new(4);
        assert_eq!(a.len(), 4);
        assert!(!a.is_empty());
        // Unconfigured: passes the pre-colour through.
        assert_eq!(a.mark(0, 0, 1_000_000, None), Ok(Color::Green));
        assert_eq!(a.mark(0, 0, 1, Some(Color::Yellow)), Ok(Color::Yellow));
        assert_eq!(a.config(0), Ok(None));
        let c = cfg(100, 100, 200, 200);
        a.configure(2, c, 0).unwrap();
        assert_eq!(a.config(2), Ok(Some(&c)));
        assert_eq!(a.mark(2, 0, 150, None), Ok(Color::Yellow));
        assert_eq!(a.mark(2, 0, 100, None), Ok(Color::Red));
        // Reset refills at the given time and keeps configurations.
        a.reset(1000 * SECONDS);
        assert_eq!(a.get(2).unwrap().unwrap().tokens(), (100, 200));
        assert_eq!(a.mark(2, 1000 * SECONDS, 100, None), Ok(Color::Green));
        assert_eq!(a.mark(4, 0, 1, None), Err(IndexError { index: 4, size: 4 }));
        assert!(a.get(u64::MAX).is_err());
        assert_eq!(
            a.configure(9, c, 0),
            Err(MeterError::Index(IndexError { index: 9, size: 4 }))
        );
        assert!(matches!(
            a.configure(1, cfg(2, 1, 1, 1), 0),
            Err(MeterError::PirBelowCir { .. })
        ));
        a.unconfigure(2).unwrap();
        assert_eq!(a.config(2), Ok(None));
        assert!(a.unconfigure(4).is_err());
    }

    #[test]
    fn array_with_config() {
        let c = cfg(100, 100, 200, 200);
        let mut a = MeterArray::with_config(3, c, 0).unwrap();
        assert!((0..3).all(|i| a.config(i) == Ok(Some(&c))));
        // Each index has its own buckets.
        assert_eq!(a.mark(1, 0, 150, None), Ok(Color::Yellow));
        assert_eq!(a.mark(2, 0, 100, None), Ok(Color::Green));
        assert!(MeterArray::with_config(3, cfg(2, 1, 1, 1), 0).is_err());
        assert!(MeterArray::with_config(0, c, 0).unwrap().is_empty());
    }

    proptest! {
        /// Token conservation: whatever the arrivals and pre-colours, green
        /// bytes never exceed CBS + CIR·t, green+yellow never exceed
        /// PBS + PIR·t, and colour-aware marking never improves a colour.
        #[test]
        fn never_exceeds_rates(
            cir in 0u64..10_000, extra in 0u64..10_000,
            cbs in 1u64..5_000, pbs in 1u64..5_000,
            pkts in proptest::collection::vec((0u64..10 * MILLIS, 0u64..2_000, 0u8..5), 1..200),
        ) {
            let c = cfg(cir, cbs, cir + extra, pbs);
            let mut m = Meter::new(c, 0).unwrap();
            let (mut t, mut g, mut gy) = (0u64, 0u128, 0u128);
            for (dt, b, sel) in pkts {
                // Selector 4 steps back in time, to check that it is harmless.
                let now = if sel == 4 { t.saturating_sub(dt) } else { t += dt; t };
                let pre = [None, Some(Color::Green), Some(Color::Yellow), Some(Color::Red), None][sel as usize];
                let color = m.mark(now, b, pre);
                if let Some(p) = pre {
                    prop_assert!(color as u8 >= p as u8, "{:?} -> {:?}", p, color);
                }
                match color {
                    Color::Green => { g += u128::from(b); gy += u128::from(b); }
                    Color::Yellow => gy += u128::from(b),
                    Color::Red => {}
                }
            }
            let tt = u128::from(t);
            prop_assert!(g * SCALE <= u128::from(cbs) * SCALE + u128::from(cir) * tt);
            prop_assert!(gy * SCALE <= u128::from(pbs) * SCALE + u128::from(cir + extra) * tt);
        }
    }
}
