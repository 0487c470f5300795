//! The serial executor's state (spec §5.4): operations queued as *intents*,
//! turned into a plan only when they start, and the one plan running with
//! what it waits for.
//!
//! Invariants: at most one plan runs; plan sequence numbers increase; the
//! intent queue holds at most [`MAX_INTENTS`].

use std::collections::{BTreeSet, VecDeque};

use inca_switch::{Nanos, PortId};

use crate::table::Plan;

/// Bound on queued operations; more are refused and counted.
pub const MAX_INTENTS: usize = 65_536;

/// An operation waiting for its turn.
#[derive(Debug, Clone)]
pub(crate) enum Intent {
    Insert {
        key: Vec<u8>,
        value: Vec<u8>,
        reinject: Option<(Vec<u8>, PortId)>,
    },
    Update {
        key: Vec<u8>,
        value: Vec<u8>,
    },
    Delete {
        key: Vec<u8>,
    },
    Digest {
        key: Vec<u8>,
        est: u64,
    },
    Drain,
}

impl Intent {
    /// Whether it changes the committed key → value map.
    fn commits(&self) -> bool {
        matches!(
            self,
            Intent::Insert { .. } | Intent::Update { .. } | Intent::Delete { .. }
        )
    }
}

/// A plan about to start: the plan, the key's value once it completes,
/// whether it changes the committed map, and a packet to re-inject.
pub(crate) type Started = (Plan, Option<Vec<u8>>, bool, Option<(Vec<u8>, PortId)>);

/// What the running plan waits for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Wait {
    /// Nothing: run the next step.
    Ready,
    /// A barrier read (all earlier channel operations in effect).
    Barrier(u64),
    /// The grace timer with this token.
    Grace(u64),
    /// WRITE_BATCH acknowledgments (agent request ids).
    Writes(BTreeSet<u32>),
}

/// The plan being executed.
#[derive(Debug, Clone)]
pub(crate) struct Running {
    pub plan: Plan,
    pub next: usize,
    pub wait: Wait,
    pub started: Nanos,
    pub seq: u64,
    /// Value the key has once the plan completes (for the observer).
    pub result: Option<Vec<u8>>,
    /// Whether the plan changes the committed key → value map (inserts,
    /// updates, deletes; not drains or cache installs).
    pub commits: bool,
    pub reinject: Option<(Vec<u8>, PortId)>,
}

/// Queued intents and the running plan.
#[derive(Debug, Clone, Default)]
pub(crate) struct Executor {
    intents: VecDeque<Intent>,
    /// The plan running, if any.
    pub running: Option<Running>,
    seq: u64,
}

impl Executor {
    /// True when no plan runs (nothing made from an intent is pending).
    pub(crate) fn quiescent(&self) -> bool {
        self.running.is_none()
    }

    /// Inserts, updates and deletes queued or running.
    pub(crate) fn pending_commits(&self) -> usize {
        self.intents.iter().filter(|i| i.commits()).count()
            + usize::from(self.running.as_ref().is_some_and(|r| r.commits))
    }

    /// Operations queued or running.
    pub(crate) fn pending_ops(&self) -> usize {
        self.intents.len() + usize::from(self.running.is_some())
    }

    /// Intents queued.
    pub(crate) fn queued(&self) -> usize {
        self.intents.len()
    }

    /// Queues an intent; the queue's new length, or `None` if it is full.
    pub(crate) fn push(&mut self, i: Intent) -> Option<usize> {
        if self.intents.len() >= MAX_INTENTS {
            return None;
        }
        self.intents.push_back(i);
        Some(self.intents.len())
    }

    /// Whether a drain is queued.
    pub(crate) fn drain_queued(&self) -> bool {
        self.intents.iter().any(|i| matches!(i, Intent::Drain))
    }

    /// Where the next intent to plan is: table operations first; the drain
    /// runs when nothing else waits [our choice: a drain can be long and
    /// must not starve them].
    fn next_index(&self) -> usize {
        self.intents
            .iter()
            .position(|i| !matches!(i, Intent::Drain))
            .unwrap_or(0)
    }

    /// Whether the intent planned next is a hot-key digest.
    pub(crate) fn digest_next(&self) -> bool {
        self.next_index() == 0 && matches!(self.intents.front(), Some(Intent::Digest { .. }))
    }

    /// Takes the intent to plan next.
    pub(crate) fn take_next(&mut self) -> Option<Intent> {
        let i = self.next_index();
        self.intents.remove(i)
    }

    /// Starts `plan` at `now` (no plan may be running).
    pub(crate) fn start(&mut self, (plan, result, commits, reinject): Started, now: Nanos) {
        debug_assert!(self.running.is_none(), "a plan is already running");
        self.seq += 1;
        self.running = Some(Running {
            plan,
            next: 0,
            wait: Wait::Ready,
            started: now,
            seq: self.seq,
            result,
            commits,
            reinject,
        });
    }

    /// The running plan waits for WRITE_BATCH `id` too.
    pub(crate) fn await_write(&mut self, id: u32) {
        if let Some(Running {
            wait: Wait::Writes(ids),
            ..
        }) = &mut self.running
        {
            ids.insert(id);
        }
    }

    /// WRITE_BATCH `id` was acknowledged (or its server went down).
    pub(crate) fn write_done(&mut self, id: u32) {
        if let Some(r) = &mut self.running {
            if let Wait::Writes(ids) = &mut r.wait {
                ids.remove(&id);
                if ids.is_empty() {
                    r.wait = Wait::Ready;
                }
            }
        }
    }

    /// The running plan's wait `w` is over (a barrier read or grace timer).
    /// True if it was waiting for it.
    pub(crate) fn wake(&mut self, w: &Wait) -> bool {
        match &mut self.running {
            Some(r) if &r.wait == w => {
                r.wait = Wait::Ready;
                true
            }
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::{OpKind, Outcome};

    fn plan(key: &[u8]) -> Plan {
        Plan {
            op: OpKind::Cache,
            key: key.to_vec(),
            outcome: Outcome::Cached,
            steps: Vec::new(),
        }
    }

    fn delete(k: u8) -> Intent {
        Intent::Delete { key: vec![k] }
    }

    #[test]
    fn table_operations_go_before_the_drain_and_the_queue_is_bounded() {
        let mut e = Executor::default();
        assert_eq!(e.push(Intent::Drain), Some(1));
        assert_eq!(
            e.push(Intent::Digest {
                key: vec![1],
                est: 3
            }),
            Some(2)
        );
        assert_eq!(e.push(delete(2)), Some(3));
        assert!(e.drain_queued() && !e.digest_next());
        assert_eq!((e.pending_commits(), e.pending_ops()), (1, 3));
        assert!(matches!(e.take_next(), Some(Intent::Digest { .. })));
        assert!(matches!(e.take_next(), Some(Intent::Delete { .. })));
        assert!(matches!(e.take_next(), Some(Intent::Drain)));
        assert!(e.take_next().is_none());
        for _ in 0..MAX_INTENTS {
            e.push(Intent::Drain);
        }
        assert_eq!(e.push(delete(1)), None, "full");
        assert_eq!(e.queued(), MAX_INTENTS);
    }

    #[test]
    fn a_plan_waits_for_every_write_then_runs_on() {
        let mut e = Executor::default();
        e.start((plan(b"k"), None, true, None), 5);
        assert!(!e.quiescent());
        assert_eq!(e.pending_commits(), 1);
        let seq = e.running.as_ref().map(|r| r.seq);
        if let Some(r) = &mut e.running {
            r.wait = Wait::Writes(BTreeSet::new());
        }
        e.await_write(1);
        e.await_write(2);
        e.write_done(1);
        assert!(matches!(&e.running, Some(r) if r.wait == Wait::Writes([2].into())));
        e.write_done(2);
        assert!(matches!(&e.running, Some(r) if r.wait == Wait::Ready));
        assert!(!e.wake(&Wait::Grace(9)), "not waiting for it");
        if let Some(r) = &mut e.running {
            r.wait = Wait::Grace(9);
        }
        assert!(e.wake(&Wait::Grace(9)));
        e.running = None;
        e.start((plan(b"j"), None, false, None), 6);
        assert_eq!(e.running.as_ref().map(|r| r.seq), seq.map(|s| s + 1));
        assert_eq!(e.pending_commits(), 0);
    }
}
