//! The rate limiter on SDW (specs/swish.md §7; SwiSh §4.2, §9.1): the
//! collection is 1 row × `users` columns, Sum merge, B unbounded; user u
//! is column u [our choice: no hash, every user has its own cell].
//!
//! - A user's data packet adds 1 to R_u[u] (the SDW update path of
//!   handler 1: `winreg`, then TQ/Q), adds 1 to a local counter
//!   `rl_local[u]`, and takes a token from `rl_quota[u]` or is dropped.
//! - One generator stream, every `period` (1 ms, model input), emits one
//!   packet per user that estimates and refills at once: the global rate
//!   is the delta of R_r[u] (every replica's packets up to window W−2),
//!   the local rate the delta of `rl_local[u]`, and
//!   `quota := L·period × local / global` by [`crate::limiter::share`].
//!
//! Registers come after the collection's (Q, then P), so both packet kinds
//! keep the global stage order of §5.5 and add three stages' worth of
//! accesses at its end.

use inca_switch::pktgen::{StreamConfig, Trigger};
use inca_switch::register::Pair;
use inca_switch::{AccessError, ArrayDecl, DataPlane, Declare, DeclareError, PacketCtx};
use inca_switch::{ControlPlane, PortId, RegisterHandle};
use inca_wire::builder::{build_udp_frame, Endpoints};

use super::config::{ConfigError, Merge, SdwConfig};
use super::frames::{internal_frame, T_TIMER};
use super::handlers::{set_tag, tag};
use super::program::{ep8, half, set_half, SdwMeta, SdwProgram};
use crate::limiter::{self, UserLimit};

/// The limiter's registers.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Regs {
    local: RegisterHandle<u32>,
    prev: RegisterHandle<Pair>,
    quota: RegisterHandle<u32>,
}

/// Checks that the collection can hold the limiter's counters.
pub(crate) fn validate(cfg: &SdwConfig, l: &UserLimit) -> Result<(), ConfigError> {
    let bad = |reason: String| ConfigError::Field {
        field: "limiter",
        reason,
    };
    l.validate().map_err(bad)?;
    if cfg.merge != Merge::Sum || cfg.cols < l.users {
        return Err(bad(format!(
            "needs a Sum collection of at least {} columns (has {:?}, {})",
            l.users, cfg.merge, cfg.cols
        )));
    }
    Ok(())
}

impl SdwProgram {
    /// Declares the limiter's registers after the collection's.
    pub(crate) fn limiter_declare(&mut self, d: &mut Declare) -> Result<(), DeclareError> {
        let (Some(l), Some(h)) = (self.cfg.limiter, self.h.as_ref()) else {
            return Ok(());
        };
        let m = l.users as usize;
        let local = d.register(ArrayDecl::new("rl_local", m).after(&[h.q[0].id()]))?;
        let prev = d.register(ArrayDecl::new("rl_prev", m).after(&[local.id(), h.p[0].id()]))?;
        let quota = d.register(ArrayDecl::new("rl_quota", m).after(&[prev.id()]))?;
        self.limiter_regs = Some(Regs { local, prev, quota });
        Ok(())
    }

    /// The estimator's generator stream: the one after the collection's.
    pub(crate) fn limiter_stream(&self) -> Option<u8> {
        self.cfg.limiter?;
        Some(self.cfg.first_stream + self.cfg.streams())
    }

    /// Installs the estimator stream (control plane, at start).
    pub(crate) fn limiter_start(&self, cp: &mut ControlPlane<'_>) {
        let (Some(l), Some(s)) = (self.cfg.limiter, self.limiter_stream()) else {
            return;
        };
        let me = self.cfg.members[self.me];
        let template = internal_frame(&me, self.cfg.group_id, T_TIMER, 0, self.cfg.coll_id);
        cp.packet_generator(
            s,
            Some(StreamConfig {
                trigger: Trigger::Timer { period: l.period },
                template,
                batch_size: l.users as u16,
            }),
        );
    }

    /// The user a data frame belongs to, if the limiter is on.
    pub(crate) fn limiter_user(&self, header: &[u8]) -> Option<u32> {
        self.cfg.limiter?.user_of(header)
    }

    /// Its report counters (none without a limiter).
    pub(crate) fn limiter_counters(&self) -> Vec<(String, u64)> {
        if self.cfg.limiter.is_none() {
            return Vec::new();
        }
        let s = self.limiter_stats;
        vec![
            ("rl_passed".into(), s.passed),
            ("rl_dropped".into(), s.dropped),
            ("rl_estimates".into(), s.estimates),
        ]
    }

    /// Sample frames for `inca check`: the first and last user's packets.
    pub(crate) fn limiter_samples(&self) -> Vec<(PortId, Vec<u8>)> {
        let Some(l) = self.cfg.limiter else {
            return Vec::new();
        };
        let me = self.cfg.members[self.me];
        [0, l.users - 1]
            .into_iter()
            .filter_map(|u| {
                let src = std::net::Ipv4Addr::from(u32::from(l.first_user).wrapping_add(u));
                let ep = Endpoints::new([2, 0x4a, 0, 0, 0, 1], src, me.mac, me.ip);
                let f = build_udp_frame(&ep, 5000, 9, &[0; 18], false).ok()?;
                Some((me.port, f))
            })
            .collect()
    }

    /// A user's data packet: R_u[user] += 1, the local count, the bucket.
    pub(crate) fn on_user(
        &mut self,
        pkt: &mut PacketCtx<SdwMeta, ()>,
        dp: &mut DataPlane<'_>,
        user: u32,
    ) -> Result<(), AccessError> {
        pkt.drop_packet();
        let (Some(l), Some(regs)) = (self.cfg.limiter, self.limiter_regs) else {
            return Ok(());
        };
        let h = self.handles()?.clone();
        let b = self.cfg.b;
        let (w, ok) = dp.register(h.winreg, 0, |e| {
            let ok = e.hi < b;
            if ok {
                e.hi = e.hi.wrapping_add(1);
            }
            (e.lo, ok)
        })?;
        let c = u64::from(user);
        if ok {
            // Handler 1's update: R_u lazily reset by its tag.
            let fresh = dp.register(h.tq[0], c, |t| {
                let f = tag(*t, w) != ep8(w);
                if f {
                    set_tag(t, w, ep8(w));
                }
                f
            })?;
            dp.register(h.q[0], c, |e| {
                let cur = if fresh { 0 } else { half(*e, w) };
                set_half(e, w, cur.wrapping_add(1));
            })?;
        } else {
            self.counters.rejected += 1;
        }
        dp.register(regs.local, c, |x| *x = x.wrapping_add(1))?;
        if dp.register(regs.quota, c, limiter::take)? {
            self.limiter_stats.passed += 1;
            pkt.forward(l.out_port);
        } else {
            self.limiter_stats.dropped += 1;
        }
        Ok(())
    }

    /// Estimator packet for `user`: global = R_r[user], local =
    /// `rl_local[user]`; the bucket gets this replica's share of L·period.
    pub(crate) fn on_estimate(
        &mut self,
        pkt: &mut PacketCtx<SdwMeta, ()>,
        dp: &mut DataPlane<'_>,
        user: u32,
    ) -> Result<(), AccessError> {
        pkt.drop_packet();
        let (Some(l), Some(regs)) = (self.cfg.limiter, self.limiter_regs) else {
            return Ok(());
        };
        if user >= l.users {
            return Ok(());
        }
        let h = self.handles()?.clone();
        let c = u64::from(user);
        let w = dp.register(h.winreg, 0, |e| e.lo)?;
        let global = dp.register(h.p[0], c, |e| half(*e, w.wrapping_add(1)))?;
        let local = dp.register(regs.local, c, |x| *x)?;
        let (dl, dg) = dp.register(regs.prev, c, |p| limiter::advance(p, local, global))?;
        let tokens = limiter::share(l.per_period(), dl, dg);
        dp.register(regs.quota, c, |q| *q = tokens as u32)?;
        self.limiter_stats.estimates += 1;
        Ok(())
    }
}
