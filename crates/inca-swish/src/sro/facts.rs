//! What an SRO run records for the property checks (specs/swish.md §6):
//! each replica's requests, applies and releases as they happen, with the
//! time. The checks read these and the hosts' observations, never the
//! protocol's own bookkeeping. A [`Facts`] handle is cheap to clone; clones
//! share one bounded log.

use std::sync::{Arc, Mutex};

use inca_switch::Nanos;
use inca_wire::swish::sro::{NatKey, NatValue};

use crate::addr::Rid;

/// Bound on the facts a run keeps; beyond it they are counted, not kept.
pub const FACTS_LIMIT: usize = 1 << 22;

/// One recorded event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fact {
    /// An origin opened a write for a NAT miss.
    Request {
        /// When.
        t: Nanos,
        /// The origin.
        rid: Rid,
        /// Its request id.
        req: u32,
        /// The flow's key.
        key: NatKey,
        /// The value it proposed (a port from its range).
        proposed: NatValue,
    },
    /// A replica applied write `seq` in order (the CPU issued the table
    /// writes now; they take effect in issue order after their latency).
    Applied {
        /// When.
        t: Nanos,
        /// The replica.
        rid: Rid,
        /// Whether it applied it as the tail.
        at_tail: bool,
        /// The write's sequence number.
        seq: u32,
        /// Key.
        key: NatKey,
        /// Value.
        value: NatValue,
        /// A NOOP (the key existed; nothing installed).
        noop: bool,
    },
    /// A replica took up its place in a chain (at start, and when its CPU
    /// handled the controller's new chain).
    Role {
        /// When.
        t: Nanos,
        /// The replica.
        rid: Rid,
        /// The chain, head first.
        chain: Vec<Rid>,
    },
    /// A joiner's state copy starts after write `seq` (it applies live
    /// writes from `seq + 1`).
    Snapshot {
        /// When.
        t: Nanos,
        /// The joiner.
        rid: Rid,
        /// The snapshot's seq.
        seq: u32,
    },
    /// An origin released held packets with the committed value.
    Release {
        /// When.
        t: Nanos,
        /// The origin.
        rid: Rid,
        /// Its request id.
        req: u32,
        /// Key.
        key: NatKey,
        /// The committed value the packets were translated with.
        value: NatValue,
        /// Packets released.
        packets: u32,
    },
}

/// The shared log.
#[derive(Debug, Clone, Default)]
pub struct Facts(Arc<Mutex<FactLog>>);

/// The log's contents.
#[derive(Debug, Clone, Default)]
pub struct FactLog {
    /// Facts in record order.
    pub facts: Vec<Fact>,
    /// Facts not kept (over [`FACTS_LIMIT`]).
    pub lost: u64,
}

impl Facts {
    /// Records `f`.
    pub fn record(&self, f: Fact) {
        let Ok(mut log) = self.0.lock() else { return };
        if log.facts.len() < FACTS_LIMIT {
            log.facts.push(f);
        } else {
            log.lost += 1;
        }
    }

    /// A copy of the log.
    pub fn snapshot(&self) -> FactLog {
        self.0.lock().map(|l| l.clone()).unwrap_or_default()
    }
}
