//! The observer hook: how a state-store server tells a verifier (the
//! linearizability checker, specs/redplane.md §6.3 Checker B) what it
//! committed and which leases it granted.
//!
//! Set it with [`super::StoreServer::with_observer`]; it is `None` by default
//! and costs nothing then. A commit is reported by the chain's tail when
//! it applies the update (that is the commit point: every member has it),
//! or by a chain of one at once; a member that becomes tail reports the
//! updates in its log then. So every commit is reported, in commit order
//! per worker, with its commit time; an update the old tail reported just
//! before it died is reported again by the new tail (same key, version and
//! value — a verifier should ignore the repeat). Lease grants are reported
//! by the head when the tail's ack reaches it (only the head knows a
//! grant's kind): a grant whose ack the head never saw is not reported.

use std::net::Ipv4Addr;

use inca_switch::device::Nanos;

/// One committed mutation of a key (a write, a grant's fence, a new record).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CommitEvent<'a> {
    /// The reporting (tail) node.
    pub node: Ipv4Addr,
    /// Worker number (port 8000 + worker).
    pub worker: u16,
    /// The key.
    pub key: &'a [u8],
    /// The key's fence after the update.
    pub fence: u16,
    /// The key's last_seq after the update.
    pub seq: u16,
    /// The key's value after the update.
    pub value: &'a [u8],
    /// The key's owner after the update (`None` for ownerless records).
    pub owner: Option<Ipv4Addr>,
    /// When it committed.
    pub time: Nanos,
}

/// How a lease was granted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GrantKind {
    /// The key was new (NEW_ACK).
    New,
    /// An existing key, with a new fence (MIGRATE_ACK).
    Migrate,
}

/// A lease grant, reported when its update commits (just before the reply).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GrantEvent<'a> {
    /// The reporting (head) node.
    pub node: Ipv4Addr,
    /// Worker number.
    pub worker: u16,
    /// The lease key.
    pub key: &'a [u8],
    /// The new owner.
    pub owner: Ipv4Addr,
    /// The base sequence number the owner continues from (= the fence).
    pub base: u16,
    /// New or migrated.
    pub kind: GrantKind,
    /// Commit time.
    pub time: Nanos,
}

/// The head's lease record of a key changed: a grant, a join, or an
/// accepted request that extended it, or this node became head (reported
/// once per owned record). Reported at once, not at commit: this is the
/// head's view that a switch's lease must nest in (spec §6.2.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseEvent<'a> {
    /// The reporting (head) node.
    pub node: Ipv4Addr,
    /// Worker number.
    pub worker: u16,
    /// The lease key.
    pub key: &'a [u8],
    /// The owner (`None`: no owner).
    pub owner: Option<Ipv4Addr>,
    /// Lease expiry, local time.
    pub expiry: Nanos,
    /// When.
    pub time: Nanos,
}

/// Receives store events. All methods have empty defaults.
pub trait StoreObserver {
    /// A mutation committed.
    fn committed(&mut self, _event: &CommitEvent<'_>) {}
    /// A lease grant committed.
    fn lease_granted(&mut self, _event: &GrantEvent<'_>) {}
    /// The head's lease record of a key changed (see [`LeaseEvent`]).
    fn lease_changed(&mut self, _event: &LeaseEvent<'_>) {}
    /// A snapshot epoch of a partition (identified by its lease key) committed.
    fn snapshot_committed(&mut self, _worker: u16, _partition: &[u8], _epoch: u16, _time: Nanos) {}
}
