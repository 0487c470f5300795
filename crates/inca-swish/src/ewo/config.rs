//! An EWO replica's configuration: its identity, its variables, the timers
//! (§5.3; the spec's [our choice] values are the defaults), the initial
//! group, and the broken variants the campaign must catch. `validate`
//! refuses what the hardware cannot hold (slots beyond N_max, more
//! generator streams than the 8 a pipe has, §2).

use inca_switch::Nanos;
use inca_wire::swish::ewo::MergeKind;

use crate::addr::{ReplicaAddr, Rid};
use crate::ewo::limiter::LimiterConfig;
use crate::ewo::merge::N_MAX;

/// Generator streams a pipe has (specs/swish.md §2).
pub const STREAMS_PER_PIPE: usize = 8;
/// Anti-entropy period T_ae (§5.3, [our choice, model input]).
pub const T_AE: Nanos = 10_000_000;
/// What a mirrored update copy is cut to (§5.3 [our choice]).
pub const MIRROR_TRUNCATE: usize = 128;

/// How local writes reach the other replicas (§5.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Propagation {
    /// Every write is mirrored, recirculated and multicast at once.
    PerWrite,
    /// A generator stream multicasts every entry once per period.
    Periodic(Nanos),
}

/// One shared variable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VarSpec {
    /// Its id on the wire.
    pub var_id: u16,
    /// How its cells merge.
    pub kind: MergeKind,
    /// Entries (M).
    pub entries: u32,
    /// How writes propagate.
    pub propagation: Propagation,
}

/// A deliberately broken replica, for showing the checks catch it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Broken {
    /// The protocol as specified.
    #[default]
    None,
    /// Counter slots merge by adding instead of max (not idempotent).
    AddMerge,
    /// No anti-entropy stream (lost updates are never repaired).
    NoAntiEntropy,
}

/// An EWO replica (one pipe).
#[derive(Debug, Clone)]
pub struct EwoConfig {
    /// This replica.
    pub me: ReplicaAddr,
    /// Its counter slot (assigned per rid, never reused).
    pub slot: u8,
    /// Counter slots per counter (N_max ≤ 8).
    pub slots: u8,
    /// The replica group id (common header `group_id`).
    pub group_id: u8,
    /// The multicast group id the group's updates use on this switch.
    pub mcast_group: u16,
    /// The mirror session of update copies.
    pub mirror_session: u16,
    /// The variables.
    pub vars: Vec<VarSpec>,
    /// Anti-entropy period.
    pub t_ae: Nanos,
    /// Mirror truncation, bytes.
    pub mirror_truncate: usize,
    /// The other members at start (the controller changes them later).
    pub peers: Vec<ReplicaAddr>,
    /// Whether it serves application operations from the start (a joiner
    /// does not until the controller says so).
    pub serving: bool,
    /// A broken variant, or none.
    pub broken: Broken,
    /// The rate limiter on one of the G-counters, or none.
    pub limiter: Option<LimiterConfig>,
}

impl EwoConfig {
    /// A replica `me` with slot `slot`, the spec's defaults and no
    /// variables.
    pub fn new(me: ReplicaAddr, slot: u8) -> Self {
        EwoConfig {
            me,
            slot,
            slots: N_MAX as u8,
            group_id: 1,
            mcast_group: 1,
            mirror_session: 1,
            vars: Vec::new(),
            t_ae: T_AE,
            mirror_truncate: MIRROR_TRUNCATE,
            peers: Vec::new(),
            serving: true,
            broken: Broken::None,
            limiter: None,
        }
    }

    /// Generator streams it needs: one anti-entropy stream per variable
    /// (none in the no-anti-entropy variant), one more per batched one.
    pub fn streams(&self) -> Vec<(usize, StreamRole)> {
        let mut s = Vec::new();
        for (i, v) in self.vars.iter().enumerate() {
            if self.broken != Broken::NoAntiEntropy {
                s.push((i, StreamRole::AntiEntropy));
            }
            if let Propagation::Periodic(_) = v.propagation {
                s.push((i, StreamRole::Batch));
            }
            if self.limiter.is_some_and(|l| l.var_id == v.var_id) {
                s.push((i, StreamRole::Estimator));
            }
        }
        s
    }

    /// Checks what the hardware can hold.
    pub fn validate(&self) -> Result<(), String> {
        if self.slots == 0 || usize::from(self.slots) > N_MAX {
            return Err(format!("slots = {}: must be 1..={N_MAX}", self.slots));
        }
        if self.slot >= self.slots {
            return Err(format!("slot {} beyond {} slots", self.slot, self.slots));
        }
        if self.t_ae == 0 {
            return Err("t_ae must be positive".into());
        }
        // The eager PN-counter update (headers + 2 values) must survive it.
        if self.mirror_truncate < 80 {
            return Err(format!(
                "mirror_truncate {} < 80 bytes",
                self.mirror_truncate
            ));
        }
        let streams = self.streams().len();
        if streams > STREAMS_PER_PIPE {
            return Err(format!(
                "{streams} generator streams needed, a pipe has {STREAMS_PER_PIPE}"
            ));
        }
        for (i, v) in self.vars.iter().enumerate() {
            if v.entries == 0 || v.entries > u32::from(u16::MAX) {
                return Err(format!("variable {}: entries must be 1..=65535", v.var_id));
            }
            if self.vars[..i].iter().any(|w| w.var_id == v.var_id) {
                return Err(format!("variable {} declared twice", v.var_id));
            }
            if v.propagation == Propagation::Periodic(0) {
                return Err(format!("variable {}: period must be positive", v.var_id));
            }
        }
        if let Some(l) = self.limiter {
            let Some(v) = self.vars.iter().find(|v| v.var_id == l.var_id) else {
                return Err(format!("limiter: no variable {}", l.var_id));
            };
            if v.kind != MergeKind::Gcnt || v.entries != l.users {
                return Err(format!(
                    "limiter: variable {} must be a G-counter of {} entries",
                    l.var_id, l.users
                ));
            }
            if l.period == 0 || l.per_period() == 0 || l.per_period() > u64::from(u32::MAX) {
                return Err("limiter: L × period must be 1..2^32 packets".into());
            }
        }
        Ok(())
    }

    /// This replica's rid.
    pub fn rid(&self) -> Rid {
        self.me.rid
    }
}

/// What a generator stream does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamRole {
    /// Entry k of every array → SYNC to a random other member.
    AntiEntropy,
    /// Entry k → UPDATE to the group (batched propagation).
    Batch,
    /// The rate limiter's estimate and refill for user k.
    Estimator,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn var(id: u16, p: Propagation) -> VarSpec {
        VarSpec {
            var_id: id,
            kind: MergeKind::Gcnt,
            entries: 4,
            propagation: p,
        }
    }

    #[test]
    fn the_stream_budget_is_enforced() {
        let mut c = EwoConfig::new(ReplicaAddr::conventional(1, 0), 0);
        c.vars = (0..4)
            .map(|i| var(i, Propagation::Periodic(1_000_000)))
            .collect();
        assert_eq!(c.streams().len(), 8);
        assert!(c.validate().is_ok());
        c.vars.push(var(9, Propagation::PerWrite));
        let e = c.validate().unwrap_err();
        assert!(e.contains("9 generator streams"), "{e}");
        c.vars.pop();
        c.slot = 8;
        assert!(c.validate().is_err());
    }
}
