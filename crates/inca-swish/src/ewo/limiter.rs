//! The rate limiter on EWO (specs/swish.md §7; SwiSh §4.2, §9.1): each
//! user (by source IP) may send L packets per second across the whole
//! network. Each replica keeps, per user:
//! - an EWO G-counter entry of packets offered (own slot +1 per packet,
//!   every 1 ms all own slots go out as UPDATEs: `Periodic(1 ms)`);
//! - a token bucket `quota`: a data packet takes a token or is dropped;
//! - `prev` = {local (lo), global (hi)} counts at the last estimate.
//!
//! One generator stream, every `period` (1 ms, model input), emits one
//! packet per user that estimates and refills at once [our choice: one
//! stream for both]: local = own-slot delta, global = Σ-slots delta, and
//! `quota := L·period × local / global` (the whole L·period while the
//! user is idle everywhere). The bucket, the estimate and the division
//! (log2/exp2 tables, spec §7 [our choice]) are [`crate::limiter`]'s,
//! shared with the SDW variant.

use std::net::Ipv4Addr;

use inca_switch::register::Pair;
use inca_switch::{AccessError, ArrayDecl, DataPlane, Declare, DeclareError, Nanos, PacketCtx};
use inca_switch::{PortId, RegisterHandle};
use inca_wire::parse_udp_frame;

use crate::ewo::merge;
use crate::ewo::program::{EwoMeta, EwoProgram};

pub use crate::limiter::{LimiterStats, LIMIT_PPS, PERIOD, USERS};

/// The limiter's configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LimiterConfig {
    /// The G-counter variable counting offered packets per user (must be
    /// a G-counter with `users` entries).
    pub var_id: u16,
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

impl LimiterConfig {
    /// SwiSh §9.1's limiter on variable `var_id`, users from `first_user`.
    pub fn new(var_id: u16, first_user: Ipv4Addr, out_port: PortId) -> Self {
        LimiterConfig {
            var_id,
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
}

/// The limiter's registers.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LimiterRegs {
    quota: RegisterHandle<u32>,
    prev: RegisterHandle<Pair>,
}

/// Declares the limiter's registers (after the counter's slot arrays,
/// whose values its estimates need).
pub(crate) fn declare(
    d: &mut Declare,
    cfg: &LimiterConfig,
    slots: &[RegisterHandle<u32>],
) -> Result<LimiterRegs, DeclareError> {
    let ids: Vec<_> = slots.iter().map(|h| h.id()).collect();
    let m = cfg.users as usize;
    let prev = d.register(ArrayDecl::new("rl_prev", m).after(&ids))?;
    let quota = d.register(ArrayDecl::new("rl_quota", m).after(&[prev.id()]))?;
    Ok(LimiterRegs { quota, prev })
}

impl EwoProgram {
    fn limiter_slots(&self) -> Option<(LimiterConfig, LimiterRegs, Vec<RegisterHandle<u32>>)> {
        let cfg = self.cfg.limiter?;
        let regs = self.limiter_regs?;
        Some((cfg, regs, self.arrays(cfg.var_id)?.words))
    }

    /// A data packet: whose user it is, if it is a user's.
    pub(crate) fn user_of(&self, header: &[u8]) -> Option<u32> {
        let cfg = self.cfg.limiter?;
        let u = parse_udp_frame(header).ok()?;
        let k = u32::from(u.src_ip).wrapping_sub(u32::from(cfg.first_user));
        (k < cfg.users).then_some(k)
    }

    /// A user's data packet: counted in the own slot, then admitted if a
    /// token is left.
    pub(crate) fn limit(
        &mut self,
        pkt: &mut PacketCtx<EwoMeta, ()>,
        dp: &mut DataPlane<'_>,
        user: u32,
    ) -> Result<(), AccessError> {
        pkt.drop_packet();
        let Some((cfg, regs, slots)) = self.limiter_slots() else {
            return Ok(());
        };
        let i = u64::from(user);
        let own = slots[usize::from(self.cfg.slot)];
        dp.register(own, i, |x| *x = x.wrapping_add(1))?;
        let pass = dp.register(regs.quota, i, crate::limiter::take)?;
        if pass {
            self.limiter_stats.passed += 1;
            pkt.forward(cfg.out_port);
        } else {
            self.limiter_stats.dropped += 1;
        }
        Ok(())
    }

    /// Estimator packet for user `user`: rates from the counter deltas,
    /// then the bucket refilled with this replica's share of L.
    pub(crate) fn estimate(
        &mut self,
        pkt: &mut PacketCtx<EwoMeta, ()>,
        dp: &mut DataPlane<'_>,
        user: u32,
    ) -> Result<(), AccessError> {
        pkt.drop_packet();
        let Some((cfg, regs, slots)) = self.limiter_slots() else {
            return Ok(());
        };
        if user >= cfg.users {
            return Ok(());
        }
        let i = u64::from(user);
        let mut vals = Vec::with_capacity(slots.len());
        for h in &slots {
            vals.push(dp.register(*h, i, |x| *x)?);
        }
        let local = vals[usize::from(self.cfg.slot)];
        let global = merge::counter_value(&vals);
        let (dl, dg) = dp.register(regs.prev, i, |p| crate::limiter::advance(p, local, global))?;
        let share = crate::limiter::share(cfg.per_period(), dl, dg);
        dp.register(regs.quota, i, |q| *q = share as u32)?;
        self.limiter_stats.estimates += 1;
        Ok(())
    }
}
