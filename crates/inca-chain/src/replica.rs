//! The chain roles of classic chain replication (van Renesse & Schneider,
//! OSDI'04), sans-IO and generic over what is replicated: the head orders
//! updates into a log and sends them down the chain, middles apply and
//! forward, the tail commits and acknowledges cumulatively to every
//! predecessor, outputs wait for their update to commit, and a member that
//! joins as the new tail installs a copy of the state before it takes part.
//!
//! Choices, all [our choice] where the sources are silent (RedPlane,
//! specs/redplane.md §5.7; SwiSh SRO, specs/swish.md §5.2):
//! - Updates carry a per-chain `id` (1, 2, …) assigned by the head. Replicas
//!   apply strictly in id order (go-back-N): a duplicate (id ≤ applied) is
//!   passed on again (the tail may have missed it) or re-acknowledged at the
//!   tail; one ahead of a gap is kept, bounded by `max_early` and within
//!   `max_early` of the applied id, so one resend round repairs every hole.
//! - The tail's ack is cumulative and goes to every predecessor, so middles
//!   trim their logs too and can take over as head or tail knowing exactly
//!   the committed prefix.
//! - The head resends its whole uncommitted log after `rto` without an ack
//!   ([`Replica::resend_at`] says when; the system arms the timer), and on a
//!   change of successor.
//! - A node that becomes tail commits everything it applied.
//! - A joiner ([`Replica::await_state`]) keeps the updates that reach it
//!   aside (bounded by `max_early`) until the system has installed the state
//!   copy ([`ChainNode::install`]); it commits nothing before, so a copy that
//!   fails loses no committed update.
//!
//! What stays with the system: the entry type and its wire encoding
//! ([`ChainNode::decode`], [`ChainNode::ack_bytes`]), what applying and
//! committing an entry means ([`ChainNode::apply`], [`ChainNode::commit`]),
//! what is held until commit ([`ChainNode::Held`]), and the transport and
//! counters ([`ChainIo`]). The protocol is written once in the provided
//! methods of [`ChainNode`], which the system calls from its handlers.

use std::collections::{BTreeMap, VecDeque};
use std::net::Ipv4Addr;

use inca_switch::device::Nanos;

/// One update in a node's log: its id, the system's entry, and its bytes as
/// sent down the chain (resent verbatim).
#[derive(Debug, Clone)]
pub struct Logged<E> {
    /// The update id.
    pub id: u32,
    /// What the system replicates.
    pub entry: E,
    /// The update as it goes on the wire.
    pub bytes: Vec<u8>,
}

/// Which node(s) a commit is reported at: the system decides what each
/// reports (RedPlane's observer reports commits at the tail, where they
/// happen, and lease grants at the head, which knows their kind).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Commit {
    /// This node is the tail (the commit happens here).
    pub at_tail: bool,
    /// This node is the head (it learns of the commit here).
    pub at_head: bool,
}

/// What a chain frame is, for the transport (timing, counters).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Traffic {
    /// A new update from the head to its successor.
    Update,
    /// An update passed on by a middle (or a duplicate passed on again).
    Forward,
    /// An update resent from the log (go-back-N); it leaves now.
    Resend,
    /// A cumulative ack from the tail to a predecessor.
    Ack,
}

/// Protocol events a system may count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChainEvent {
    /// A chain frame that did not decode.
    Malformed,
    /// The head's log is at its window: the chain is not keeping up.
    WindowFull,
    /// An update received again.
    Duplicate,
    /// An update ahead of a gap (or one a joiner had no room for).
    Gap,
    /// An update applied in order at a replica.
    Applied,
    /// An ack for nothing outstanding.
    AckIgnored,
    /// The tail acknowledged (once per ack, whatever the predecessors).
    AckSent,
}

/// The system's side of one call: the clock, this node's neighbours, the
/// transport, the counters.
pub trait ChainIo {
    /// The current time.
    fn now(&self) -> Nanos;
    /// When this node finishes the current input (frames sent in this call
    /// leave then).
    fn done(&self) -> Nanos;
    /// Where updates go (none at the tail).
    fn successor(&self) -> Option<Ipv4Addr>;
    /// Every live member before this node (acks go to all).
    fn predecessors(&self) -> &[Ipv4Addr];
    /// Updates the head's log holds before it counts [`ChainEvent::WindowFull`].
    fn window(&self) -> usize;
    /// Sends `bytes` to `to` on the chain channel.
    fn send(&mut self, to: Ipv4Addr, bytes: &[u8], traffic: Traffic);
    /// Counts a protocol event.
    fn count(&mut self, event: ChainEvent);
}

/// One node's replication state: the ids, the log, updates ahead of a gap,
/// outputs waiting for a commit, a joiner's stash.
#[derive(Debug, Clone)]
pub struct Replica<E, O> {
    applied: u32,
    committed: u32,
    log: VecDeque<Logged<E>>,
    early: BTreeMap<u32, Vec<u8>>,
    max_early: usize,
    sent_at: Nanos,
    waiting: BTreeMap<u32, Vec<O>>,
    joining: Option<BTreeMap<u32, Vec<u8>>>,
}

impl<E, O> Replica<E, O> {
    /// An empty replica keeping at most `max_early` updates ahead of a gap
    /// (and as many while joining).
    pub fn new(max_early: usize) -> Self {
        Replica {
            applied: 0,
            committed: 0,
            log: VecDeque::new(),
            early: BTreeMap::new(),
            max_early,
            sent_at: 0,
            waiting: BTreeMap::new(),
            joining: None,
        }
    }

    /// The last update id applied here (at the head: assigned).
    pub fn applied(&self) -> u32 {
        self.applied
    }

    /// The last update id known committed here.
    pub fn committed(&self) -> u32 {
        self.committed
    }

    /// Updates applied here but not known committed, in id order.
    pub fn log(&self) -> impl Iterator<Item = &Logged<E>> {
        self.log.iter()
    }

    /// Assigns the next update id (the head orders an update). The system
    /// then builds the entry and calls [`ChainNode::append`], or
    /// [`ChainNode::commit_alone`] without a chain.
    pub fn next_id(&mut self) -> u32 {
        self.applied += 1;
        self.applied
    }

    /// Holds `out` until update `wait` commits; gives it back if there is
    /// nothing to wait for (`None`, or committed already).
    pub fn hold(&mut self, wait: Option<u32>, out: O) -> Option<O> {
        match wait {
            Some(id) if id > self.committed => {
                self.waiting.entry(id).or_default().push(out);
                None
            }
            _ => Some(out),
        }
    }

    /// The uncommitted id a key last changed in, if `last_update` is one.
    pub fn uncommitted(&self, last_update: u32) -> Option<u32> {
        (last_update > self.committed).then_some(last_update)
    }

    /// When the log is due for a resend (the head arms a timer then), if
    /// it holds anything.
    pub fn resend_at(&self, rto: Nanos) -> Option<Nanos> {
        (!self.log.is_empty()).then(|| self.sent_at + rto)
    }

    /// This node is out of its chain and will be copied the state: updates
    /// that reach it are kept aside until [`ChainNode::install`].
    pub fn await_state(&mut self) {
        self.joining = Some(BTreeMap::new());
    }

    /// Whether this node waits for (or receives) a state copy.
    pub fn joining(&self) -> bool {
        self.joining.is_some()
    }

    fn released(&mut self) -> Vec<O> {
        let mut out = Vec::new();
        while let Some(entry) = self.waiting.first_entry() {
            if *entry.key() > self.committed {
                break;
            }
            out.extend(entry.remove());
        }
        out
    }
}

/// A system's node in a chain: what an entry is and means. The protocol is
/// in the provided methods; see the module documentation.
pub trait ChainNode<X: ChainIo> {
    /// What one update carries.
    type Entry;
    /// What waits for a commit (a reply frame, a held packet).
    type Held;

    /// This node's replication state.
    fn replica(&mut self) -> &mut Replica<Self::Entry, Self::Held>;
    /// The same, shared.
    fn replica_ref(&self) -> &Replica<Self::Entry, Self::Held>;
    /// Parses an update frame: its id and entry (`None`: malformed).
    fn decode(&self, payload: &[u8]) -> Option<(u32, Self::Entry)>;
    /// The cumulative ack for everything up to `id`.
    fn ack_bytes(&self, id: u32) -> Vec<u8>;
    /// Applies an update at a replica (in id order; before it is
    /// forwarded or committed).
    fn apply(&mut self, x: &mut X, id: u32, entry: &Self::Entry, payload: &[u8]);
    /// The effects of an update committing, as seen at this node.
    fn commit(&mut self, x: &mut X, entry: &Self::Entry, at: Commit);
    /// An output whose update has committed.
    fn release(&mut self, x: &mut X, held: Self::Held);

    /// Head: logs update `id` (from [`Replica::next_id`]) and sends it to
    /// the successor.
    fn append(&mut self, x: &mut X, id: u32, entry: Self::Entry, bytes: Vec<u8>) {
        if self.replica_ref().log.len() >= x.window() {
            // Applied at the head, but its outputs will wait.
            x.count(ChainEvent::WindowFull);
        }
        if let Some(succ) = x.successor() {
            x.send(succ, &bytes, Traffic::Update);
        }
        let done = x.done();
        let r = self.replica();
        if r.log.is_empty() {
            r.sent_at = done;
        }
        r.log.push_back(Logged { id, entry, bytes });
    }

    /// A chain of one: update `id` commits at once.
    fn commit_alone(&mut self, x: &mut X, id: u32, entry: Self::Entry) {
        self.commit(
            x,
            &entry,
            Commit {
                at_tail: true,
                at_head: true,
            },
        );
        self.replica().committed = id;
        self.release_committed(x);
    }

    /// An update frame from the predecessor: applied in id order,
    /// forwarded, and at the tail committed and acknowledged.
    fn receive_update(&mut self, x: &mut X, payload: &[u8], is_tail: bool) {
        let Some((id, entry)) = self.decode(payload) else {
            x.count(ChainEvent::Malformed);
            return;
        };
        let r = self.replica();
        if let Some(stash) = &mut r.joining {
            // Kept until the state copy is installed; the head's resends
            // bring back whatever there is no room for.
            if stash.len() < r.max_early || stash.contains_key(&id) {
                stash.entry(id).or_insert_with(|| payload.to_vec());
            } else {
                x.count(ChainEvent::Gap);
            }
            return;
        }
        if id <= r.applied {
            x.count(ChainEvent::Duplicate);
            if is_tail {
                self.ack_up(x);
            } else if let Some(succ) = x.successor() {
                x.send(succ, payload, Traffic::Forward);
            }
            return;
        }
        if id != r.applied + 1 {
            x.count(ChainEvent::Gap);
            if r.early.len() < r.max_early && id - r.applied <= r.max_early as u32 {
                r.early.entry(id).or_insert_with(|| payload.to_vec());
            }
            return;
        }
        self.apply_in_order(x, id, entry, payload, is_tail);
        self.drain_early(x, is_tail);
    }

    /// Applies the kept updates that are next in order.
    fn drain_early(&mut self, x: &mut X, is_tail: bool) {
        loop {
            let r = self.replica();
            let Some(next) = r.early.remove(&(r.applied + 1)) else {
                break;
            };
            if let Some((id, e)) = self.decode(&next) {
                self.apply_in_order(x, id, e, &next, is_tail);
            }
        }
        let r = self.replica();
        let applied = r.applied;
        r.early.retain(|&k, _| k > applied);
    }

    /// Update `id`, next in order: applied, then committed and acknowledged
    /// at the tail, or forwarded and logged.
    fn apply_in_order(
        &mut self,
        x: &mut X,
        id: u32,
        entry: Self::Entry,
        payload: &[u8],
        is_tail: bool,
    ) {
        self.replica().applied = id;
        x.count(ChainEvent::Applied);
        self.apply(x, id, &entry, payload);
        if is_tail {
            self.replica().committed = id;
            self.commit(
                x,
                &entry,
                Commit {
                    at_tail: true,
                    at_head: false,
                },
            );
            self.ack_up(x);
        } else {
            if let Some(succ) = x.successor() {
                x.send(succ, payload, Traffic::Forward);
            }
            self.replica().log.push_back(Logged {
                id,
                entry,
                bytes: payload.to_vec(),
            });
        }
    }

    /// The tail's cumulative ack to every predecessor.
    fn ack_up(&mut self, x: &mut X) {
        let ack = self.ack_bytes(self.replica_ref().applied);
        let preds = x.predecessors().to_vec();
        for p in preds {
            x.send(p, &ack, Traffic::Ack);
        }
        x.count(ChainEvent::AckSent);
    }

    /// The tail's ack at the head or a middle: everything up to `id`
    /// committed.
    fn receive_ack(&mut self, x: &mut X, id: u32, is_head: bool) {
        let r = self.replica_ref();
        if id <= r.committed || id > r.applied {
            x.count(ChainEvent::AckIgnored);
            return;
        }
        self.replica().committed = id;
        while self.replica_ref().log.front().is_some_and(|e| e.id <= id) {
            if let Some(e) = self.replica().log.pop_front() {
                self.commit(
                    x,
                    &e.entry,
                    Commit {
                        at_tail: false,
                        at_head: is_head,
                    },
                );
            }
        }
        let now = x.now();
        self.replica().sent_at = now;
        if is_head {
            self.release_committed(x);
        }
    }

    /// Releases every held output whose update has committed.
    fn release_committed(&mut self, x: &mut X) {
        for o in self.replica().released() {
            self.release(x, o);
        }
    }

    /// This node just became the tail: everything it applied is committed
    /// (a joiner acknowledges only once its copy is installed).
    fn take_over_tail(&mut self, x: &mut X, is_head: bool) {
        if self.replica_ref().joining() {
            return;
        }
        let id = self.replica_ref().applied;
        if id > self.replica_ref().committed {
            self.replica().committed = id;
            while let Some(e) = self.replica().log.pop_front() {
                self.commit(
                    x,
                    &e.entry,
                    Commit {
                        at_tail: true,
                        at_head: is_head,
                    },
                );
            }
            if is_head {
                self.release_committed(x);
            }
        }
        if !is_head {
            self.ack_up(x);
        }
    }

    /// Resends the whole log to the successor (go-back-N); it leaves now.
    fn resend(&mut self, x: &mut X) {
        let now = x.now();
        self.replica().sent_at = now;
        let Some(succ) = x.successor() else { return };
        for e in &self.replica_ref().log {
            x.send(succ, &e.bytes, Traffic::Resend);
        }
    }

    /// A joiner's state copy, as of update `session`, has been installed by
    /// the system: this node continues from `session`, applies the updates
    /// it kept aside in order and, as the tail, acknowledges.
    fn install(&mut self, x: &mut X, session: u32, is_tail: bool) {
        let r = self.replica();
        let stash = r.joining.take().unwrap_or_default();
        r.applied = session;
        r.committed = session;
        r.log.clear();
        r.waiting.clear();
        r.early.clear();
        r.early
            .extend(stash.into_iter().filter(|&(id, _)| id > session));
        self.drain_early(x, is_tail);
        if is_tail {
            self.ack_up(x);
        }
    }
}
