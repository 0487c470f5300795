//! The rate limiter's pieces every variant shares (specs/swish.md §7;
//! SwiSh §4.2, §9.1): each user (by source IP) may send L packets per
//! second across the whole network; each switch holds a token bucket per
//! user, refilled every period with its share of L:
//! `local_limit = L × local_rate / global_rate`.
//!
//! - [`UserLimit`] — who the users are, L, the period, where admitted
//!   packets go;
//! - [`take`] — a data packet takes a token or is dropped;
//! - [`advance`] — the estimator's `prev` = {local, global} counts and the
//!   deltas since the last estimate;
//! - [`share`] — the division, through log2/exp2 lookup tables as a
//!   switch ALU would do it (spec §7 [our choice]);
//! - [`pull`] — the control-plane baseline: a switch program with local
//!   counters and buckets, and the controller that rebalances them every
//!   T_ctrl;
//! - [`hosts`] — the traffic source and the per-user receiving sink the
//!   experiment (§8.2 E9) runs the variants between.
//!
//! The EWO variant is `crate::ewo::limiter`, the SDW variant
//! `crate::sdw::limiter`.

use std::net::Ipv4Addr;
use std::sync::OnceLock;

use inca_switch::register::Pair;
use inca_switch::{Nanos, PortId};

pub mod hosts;
pub mod pull;

/// Users (SwiSh §9.1).
pub const USERS: u32 = 40;
/// Limit per user across the network, packets per second (SwiSh §9.1,
/// model input).
pub const LIMIT_PPS: u64 = 2_000_000;
/// Estimator and refill period (SwiSh §9.1, model input).
pub const PERIOD: Nanos = 1_000_000;

/// The users and their limit, as a switch's limiter sees them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UserLimit {
    /// Users: source IPs `first_user .. first_user + users`.
    pub users: u32,
    /// The first user's IP.
    pub first_user: Ipv4Addr,
    /// L, packets per second per user.
    pub limit_pps: u64,
    /// Estimator and refill period.
    pub period: Nanos,
    /// Where admitted packets go.
    pub out_port: PortId,
}

impl UserLimit {
    /// SwiSh §9.1's limiter for users from `first_user`.
    pub fn new(first_user: Ipv4Addr, out_port: PortId) -> Self {
        UserLimit {
            users: USERS,
            first_user,
            limit_pps: LIMIT_PPS,
            period: PERIOD,
            out_port,
        }
    }

    /// Tokens per period at the whole network: L × period.
    pub fn per_period(&self) -> u64 {
        self.limit_pps.saturating_mul(self.period) / 1_000_000_000
    }

    /// The user a frame's IPv4 source is, if it is one.
    pub fn user_of(&self, header: &[u8]) -> Option<u32> {
        let u = inca_wire::parse_udp_frame(header).ok()?;
        let k = u32::from(u.src_ip).wrapping_sub(u32::from(self.first_user));
        (k < self.users).then_some(k)
    }

    /// Checks the shape: 1..=65,535 users, a period, and L × period of
    /// 1..2^32 tokens (a bucket is a u32 register).
    pub fn validate(&self) -> Result<(), String> {
        if self.users == 0 || self.users > u32::from(u16::MAX) {
            return Err(format!("limiter: {} users (1..=65535)", self.users));
        }
        if self.period == 0 {
            return Err("limiter: the period must be positive".into());
        }
        let t = self.per_period();
        if t == 0 || t > u64::from(u32::MAX) {
            return Err(format!("limiter: L × period = {t} tokens (1..2^32)"));
        }
        Ok(())
    }
}

/// What a switch's limiter counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LimiterStats {
    /// Packets admitted.
    pub passed: u64,
    /// Packets dropped for want of a token.
    pub dropped: u64,
    /// Estimates made.
    pub estimates: u64,
}

/// A data packet at bucket `q`: takes a token if one is left.
pub fn take(q: &mut u32) -> bool {
    let ok = *q > 0;
    if ok {
        *q -= 1;
    }
    ok
}

/// The estimator's step on `prev` = {lo: local, hi: global} (the counts
/// at the last estimate): stores the current counts and returns the
/// deltas (local, global), wrapping like the 32-bit registers.
pub fn advance(prev: &mut Pair, local: u32, global: u32) -> (u64, u64) {
    let old = *prev;
    *prev = Pair {
        lo: local,
        hi: global,
    };
    (
        u64::from(local.wrapping_sub(old.lo)),
        u64::from(global.wrapping_sub(old.hi)),
    )
}

/// Fraction bits of the fixed-point logarithm.
const FRAC: u32 = 8;

struct Tables {
    /// `log[m] = round(2^FRAC · log2(1 + m / 2^FRAC))`.
    log: [u32; 1 << FRAC],
    /// `exp[f] = round(2^16 · 2^(f / 2^FRAC))`.
    exp: [u32; 1 << FRAC],
}

/// The two exact-match tables the control plane loads [our choice: 256
/// entries each, an 8-bit mantissa].
fn tables() -> &'static Tables {
    static T: OnceLock<Tables> = OnceLock::new();
    T.get_or_init(|| {
        let n = (1u32 << FRAC) as f64;
        let mut t = Tables {
            log: [0; 1 << FRAC],
            exp: [0; 1 << FRAC],
        };
        for i in 0..1usize << FRAC {
            t.log[i] = (n * (1.0 + i as f64 / n).log2()).round() as u32;
            t.exp[i] = (65_536.0 * (i as f64 / n).exp2()).round() as u32;
        }
        t
    })
}

/// log2(x) in 1/2^FRAC units for x ≥ 1: the exponent is the position of
/// the leading one (a TCAM lookup in hardware), the fraction the table's
/// entry for the next 8 bits.
fn log2_fixed(x: u64) -> u32 {
    let k = 63 - x.leading_zeros();
    let m = if k >= FRAC {
        (x >> (k - FRAC)) as usize & ((1 << FRAC) - 1)
    } else {
        (x << (FRAC - k)) as usize & ((1 << FRAC) - 1)
    };
    (k << FRAC) + tables().log[m]
}

/// 2^(y / 2^FRAC), rounded down.
fn exp2_fixed(y: u32) -> u64 {
    let k = y >> FRAC;
    let f = tables().exp[(y & ((1 << FRAC) - 1)) as usize];
    if k >= 48 {
        return u64::MAX;
    }
    (u64::from(f) << k) >> 16
}

/// This switch's tokens for the next period: `full × dl / dg` (full =
/// L × period, dl and dg the local and global deltas), by
/// `exp2(log2 full + log2 dl − log2 dg)` through the tables; the whole of
/// `full` while the user was idle everywhere, and never more than it.
/// Error: the 8-bit mantissa truncates each operand by < 1/256, so the
/// result is within about ±1 % of the exact quotient.
pub fn share(full: u64, dl: u64, dg: u64) -> u64 {
    if dg == 0 {
        return full;
    }
    if dl == 0 || full == 0 {
        return 0;
    }
    if dl >= dg {
        return full;
    }
    let up = log2_fixed(full) + log2_fixed(dl);
    let down = log2_fixed(dg);
    if up < down {
        return 0;
    }
    exp2_fixed(up - down).min(full)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_division_is_within_one_percent() {
        for full in [2_000u64, 200, 65_535, 1 << 20] {
            for (dl, dg) in [
                (1, 2),
                (9, 10),
                (1, 10),
                (777, 1_000),
                (3, 7),
                (1_800, 2_000),
            ] {
                let exact = full as f64 * dl as f64 / dg as f64;
                let got = share(full, dl, dg) as f64;
                assert!(
                    (got - exact).abs() <= 0.01 * exact + 1.0,
                    "{full}·{dl}/{dg}: {got} vs {exact}"
                );
            }
        }
        assert_eq!(share(2_000, 5, 0), 2_000);
        assert_eq!(share(2_000, 0, 5), 0);
        assert_eq!(share(2_000, 7, 5), 2_000);
        assert_eq!(share(2_000, 1, 1 << 30), 0);
    }

    #[test]
    fn buckets_and_estimates() {
        let mut q = 1;
        assert!(take(&mut q));
        assert!(!take(&mut q));
        let mut p = Pair {
            lo: u32::MAX,
            hi: 10,
        };
        assert_eq!(advance(&mut p, 4, 30), (5, 20));
        assert_eq!(p, Pair { lo: 4, hi: 30 });
    }

    #[test]
    fn users_come_from_the_source_address() {
        use inca_wire::builder::{build_udp_frame, Endpoints};
        let l = UserLimit::new(Ipv4Addr::new(10, 49, 0, 0), 3);
        let ep = Endpoints::new(
            [2; 6],
            Ipv4Addr::new(10, 49, 0, 39),
            [4; 6],
            [10, 0, 0, 1].into(),
        );
        let f = build_udp_frame(&ep, 5000, 9, &[0; 18], false).unwrap();
        assert_eq!(l.user_of(&f), Some(39));
        let ep = Endpoints::new(
            [2; 6],
            Ipv4Addr::new(10, 49, 0, 40),
            [4; 6],
            [10, 0, 0, 1].into(),
        );
        let f = build_udp_frame(&ep, 5000, 9, &[0; 18], false).unwrap();
        assert_eq!(l.user_of(&f), None);
        assert!(l.validate().is_ok());
        assert!(UserLimit { users: 0, ..l }.validate().is_err());
    }
}
