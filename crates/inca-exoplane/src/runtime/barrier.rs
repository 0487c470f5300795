//! What the hub's and daemons' drivers share for carrying out operations
//! on a control plane.
//!
//! [`OpBarrier`]: the hub and a daemon want each switch or device
//! operation acknowledged once it has taken effect. Operations run in
//! issue order on the control channel, and so do reads; after a batch the
//! driver issues one one-entry register read, whose answer acknowledges
//! every operation before it. An operation that failed said so with
//! `OpFailed` first [our choice: BfRt's batch-then-sync idiom].
//!
//! [`Wakeup`]: the one control-plane timer a driver keeps armed for its
//! state machine's next deadline.

use std::collections::{HashMap, HashSet};

use inca_switch::device::Nanos;
use inca_switch::ControlPlane;

/// How an operation's acknowledgement is decided at its barrier.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Ack {
    /// By whether this control request failed.
    Request(u64),
    /// Nothing to wait for (a counter cell exists from the start).
    Done,
    /// Refused before it was issued.
    Refused,
}

/// Operations waiting for their barrier read. `I` is the state machine's
/// operation id.
pub(crate) struct OpBarrier<I> {
    /// Operations since the last barrier.
    unacked: Vec<(I, Ack)>,
    /// Barrier read request → the operations it acknowledges.
    barriers: HashMap<u64, Vec<(I, Ack)>>,
    /// Control requests inside an unanswered barrier.
    awaiting: HashSet<u64>,
    /// Those of them that failed.
    failed: HashSet<u64>,
}

impl<I> Default for OpBarrier<I> {
    fn default() -> Self {
        OpBarrier {
            unacked: Vec::new(),
            barriers: HashMap::new(),
            awaiting: HashSet::new(),
            failed: HashSet::new(),
        }
    }
}

impl<I> OpBarrier<I> {
    /// Operation `id` was issued (or refused, or needs nothing).
    pub fn push(&mut self, id: I, ack: Ack) {
        self.unacked.push((id, ack));
    }

    /// Ends the batch: `issue` issues the barrier read and returns its
    /// request id. Without operations since the last barrier nothing is
    /// issued; if no read can be issued (`None`), the batch's operations
    /// come back at once, failed.
    pub fn close(&mut self, issue: impl FnOnce() -> Option<u64>) -> Vec<(I, bool)> {
        if self.unacked.is_empty() {
            return Vec::new();
        }
        let ops = std::mem::take(&mut self.unacked);
        match issue() {
            Some(r) => {
                for &(_, a) in &ops {
                    if let Ack::Request(q) = a {
                        self.awaiting.insert(q);
                    }
                }
                self.barriers.insert(r, ops);
                Vec::new()
            }
            None => ops.into_iter().map(|(id, _)| (id, false)).collect(),
        }
    }

    /// Control request `request` failed; false if it is not one of ours.
    pub fn op_failed(&mut self, request: u64) -> bool {
        let ours = self.awaiting.contains(&request);
        if ours {
            self.failed.insert(request);
        }
        ours
    }

    /// Read `request` was answered: if it is a barrier, its operations
    /// with whether each succeeded.
    pub fn answered(&mut self, request: u64) -> Option<Vec<(I, bool)>> {
        let ops = self.barriers.remove(&request)?;
        Some(
            ops.into_iter()
                .map(|(id, a)| {
                    let ok = match a {
                        Ack::Request(q) => {
                            self.awaiting.remove(&q);
                            !self.failed.remove(&q)
                        }
                        Ack::Done => true,
                        Ack::Refused => false,
                    };
                    (id, ok)
                })
                .collect(),
        )
    }
}

/// A driver's control-plane timer for its state machine's next deadline.
#[derive(Debug, Default)]
pub(crate) struct Wakeup {
    at: Option<Nanos>,
}

impl Wakeup {
    /// The timer fired.
    pub fn fired(&mut self) {
        self.at = None;
    }

    /// Arms the timer (`token`) for `next` unless one is set no later.
    pub fn arm(&mut self, cp: &mut ControlPlane<'_>, next: Option<Nanos>, token: u64) {
        let Some(t) = next else { return };
        if self.at.is_none_or(|at| t < at) {
            let t = t.max(cp.now());
            self.at = Some(t);
            cp.set_timer(t, token);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_barrier_acknowledges_its_batch_with_each_failure() {
        let mut b: OpBarrier<u32> = OpBarrier::default();
        assert!(b.close(|| panic!("no batch, no read")).is_empty());
        b.push(1, Ack::Request(10));
        b.push(2, Ack::Done);
        b.push(3, Ack::Refused);
        b.push(4, Ack::Request(11));
        assert!(b.close(|| Some(99)).is_empty());
        assert!(b.op_failed(11));
        assert!(!b.op_failed(12), "not one of ours");
        assert_eq!(b.answered(98), None);
        assert_eq!(
            b.answered(99),
            Some(vec![(1, true), (2, true), (3, false), (4, false)])
        );
        assert!(!b.op_failed(10), "answered, no longer awaited");
        b.push(5, Ack::Request(12));
        assert_eq!(b.close(|| None), vec![(5, false)]);
    }
}
