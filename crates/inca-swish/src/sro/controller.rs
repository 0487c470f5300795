//! The SwiSh controller's part in SRO (specs/swish.md §5.1, §5.2): a
//! reliable, accurate failure detector that learns of a fail-stop
//! T_detect after it happens (1 ms, [our choice], a model input) and then
//! sends every surviving replica the new chain (control message
//! [`SET_CHAIN`]). The replicas do the rest: the successor of a failed head
//! becomes head, a failed middle's predecessor resends its unacked log to
//! the new successor, a failed tail's predecessor takes over as tail and
//! acknowledges everything it applied. A replica left out of the chain
//! stops (fencing).
//!
//! [our choice]: the controller's messages reach the switch CPUs over the
//! management network as `ControlMessage`s at detection time; their
//! transport is not modelled.

use inca_sim::engine::Fault;
use inca_switch::device::{ControlMessage, Nanos};

use crate::addr::Rid;
use crate::sro::cpu::{SET_CHAIN, SHADOW};
use crate::sro::rig::Rig;

/// Failure detection delay T_detect (spec §5.1: 1 ms, [our choice]).
pub const T_DETECT: Nanos = 1_000_000;
/// How often the controller polls a join's progress, and how long its
/// message takes to reach a switch: the spec's controller RPC RTT, 100 µs
/// (§8.1, [our choice]), and half of it.
pub const POLL: Nanos = 100_000;

/// The SET_CHAIN message for `chain` (rids, head first).
pub fn set_chain(chain: &[Rid]) -> ControlMessage {
    ControlMessage {
        kind: SET_CHAIN,
        body: chain.iter().flat_map(|r| r.to_be_bytes()).collect(),
    }
}

impl Rig {
    /// Spare `rid` starts joining at the tail at `at` (§5.2): the
    /// controller tells the tail to shadow it; [`Rig::run_with_controller`]
    /// hands the tail over once the joiner has caught up.
    pub fn start_join(&mut self, rid: Rid, at: Nanos) -> Result<(), String> {
        if self.switch(rid).is_none() {
            return Err(format!("no replica {rid}"));
        }
        if self.chain.contains(&rid) || self.joining.is_some() {
            return Err(format!("replica {rid} is in the chain or a join is on"));
        }
        let Some(&tail) = self.chain.last() else {
            return Err("no chain to join".into());
        };
        let m = ControlMessage {
            kind: SHADOW,
            body: rid.to_be_bytes().to_vec(),
        };
        let t = self.switches[usize::from(tail) - 1];
        self.sim.schedule(at, Fault::Message(t, m));
        self.joining = Some((rid, tail));
        Ok(())
    }

    /// Runs until `end`, polling a join every [`POLL`]: once the tail
    /// reports the joiner caught up, the controller appends it to the chain
    /// and tells every member.
    pub fn run_with_controller(&mut self, end: Nanos) {
        while self.sim.now() < end {
            let Some((j, tail)) = self.joining else {
                self.sim.run_until(end, |_| {});
                return;
            };
            let t = (self.sim.now() + POLL).min(end);
            self.sim.run_until(t, |_| {});
            let done = self
                .switch(tail)
                .is_some_and(|s| s.program().cpu().shadow_done());
            if done && self.chain.last() == Some(&tail) {
                self.chain.push(j);
                let at = t + POLL / 2;
                self.history.push((at, self.chain.clone()));
                let m = set_chain(&self.chain);
                for &r in &self.chain {
                    let n = self.switches[usize::from(r) - 1];
                    self.sim.schedule(at, Fault::Message(n, m.clone()));
                }
                self.joining = None;
            }
        }
    }

    /// Replica `rid` fails (crashes) at `at`; `t_detect` later the
    /// controller removes it from the chain and tells every survivor.
    /// Refused for a replica not in the chain or the last one left.
    pub fn fail_stop(&mut self, rid: Rid, at: Nanos, t_detect: Nanos) -> Result<(), String> {
        if !self.chain.contains(&rid) {
            return Err(format!(
                "replica {rid} is not in the chain {:?}",
                self.chain
            ));
        }
        if self.chain.len() < 2 {
            return Err("the last replica cannot fail".into());
        }
        let node = self.switches[usize::from(rid) - 1];
        self.sim.schedule(at, Fault::Crash(node));
        self.chain.retain(|&r| r != rid);
        self.failed.push((rid, at));
        self.history.push((at + t_detect, self.chain.clone()));
        let m = set_chain(&self.chain);
        for &r in &self.chain {
            let n = self.switches[usize::from(r) - 1];
            self.sim
                .schedule(at + t_detect, Fault::Message(n, m.clone()));
        }
        Ok(())
    }
}
