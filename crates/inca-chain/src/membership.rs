//! Chain membership from heartbeats (specs/redplane.md §5.7 "Node
//! failure", and replica rejoin; the same detector serves SwiSh's strong
//! mode, specs/swish.md §5.2). The "configuration master" is modelled as
//! logic replicated in every node [our choice]: each node knows the static
//! member list, hears a heartbeat from every member every
//! `heartbeat_interval`, and removes a member it has not heard from for
//! `misses` intervals. The system carries the heartbeats (its own wire
//! format; [`Membership::encode_entries`] is the view extension) and feeds
//! them in; this module only decides.
//!
//! The view is a grow-only map, merged by maximum, so every live node
//! converges on the same view and computes the same head and tail: per
//! static member an [`Entry`] `(epoch, stamp)`. An even epoch means "in the
//! chain", an odd one "out"; removal moves an even epoch to the next odd one,
//! a rejoin moves an odd epoch to the next even one. Entries merge by
//! lexicographic maximum, so a removal or a rejoin, once seen, is never
//! undone by an older view. The live chain is the members with even epochs
//! ordered by `(stamp, position)`: original members have stamp 0, and a
//! member that rejoins gets the view version of its admission as its stamp,
//! which is larger than every earlier stamp, so it joins as the new tail
//! (classic chain replication). The view version is the sum of the epochs:
//! it grows with every change and is equal on nodes with equal views.
//!
//! A node that restarted has lost its view as well as its state; until a
//! heartbeat tells it that the others count it as out ([`Membership::learning`]),
//! it is not in the chain whatever its own entry says, and its heartbeats
//! carry the "restarted" flag, which makes receivers remove it.
//!
//! **Who may change the view, and who may serve** [our choice].
//! Heartbeats cannot tell a crashed member from a partitioned one, so two
//! sides of a partition that each removed the other would each run a chain
//! of their own: two heads, both granting and committing. A node therefore
//! removes silent members, and a tail admits a joiner, only while it hears
//! a quorum of the *configured* chain ([`Membership::quorum_within`]: more
//! than half of it, or exactly half with its first configured member; itself
//! and a restarted member count as heard). Counting against the current
//! view was not enough: views change on both sides (RedPlane campaign seed
//! 17 with partitions ran [st1] and [st3, st2], each a majority of its own
//! view). A head should also serve only while it hears a quorum (a leader
//! lease: RedPlane's `StoreServer::serving`). The side without a quorum
//! stalls until the partition heals, when the merged view tells its members
//! that they are out; they drop their state and rejoin as the tail through
//! the state copy. The price is liveness: with one member of three left,
//! or a 2-node chain without its first member, the chain waits until a
//! member restarts (once the restarted member has learned the view, it
//! supports the survivor, holds nothing and commits nothing, so the
//! survivor may then remove the dead and admit it). And a
//! member's view is merged only while that member is live in this node's
//! view: a node that was removed but has not heard of it yet must not
//! spread removals it decided on a stale view.

use std::net::Ipv4Addr;

use inca_switch::device::Nanos;

/// One member's place in the view: `epoch` even = in the chain.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Entry {
    /// Even: in the chain; odd: out. Only grows.
    pub epoch: u32,
    /// Order among live members (0 for original members).
    pub stamp: u32,
}

impl Entry {
    /// Whether the member is in the chain.
    pub fn live(self) -> bool {
        self.epoch.is_multiple_of(2)
    }
}

/// Bytes one [`Entry`] takes in a heartbeat's view extension.
pub const ENTRY_LEN: usize = 8;

/// One node's view of its chain.
#[derive(Debug, Clone)]
pub struct Membership {
    members: Vec<Ipv4Addr>,
    me: usize,
    entries: Vec<Entry>,
    last_heard: Vec<Nanos>,
    /// Whether each member's latest heartbeat counted this node as in the
    /// chain (a restarted member still learning the view counts nobody).
    supports: Vec<bool>,
    learning: bool,
}

impl Membership {
    /// The static chain `members` (head first), seen by the member `me`,
    /// starting at `now` (everyone counts as just heard).
    pub fn new(members: Vec<Ipv4Addr>, me: Ipv4Addr, now: Nanos) -> Self {
        let idx = members.iter().position(|&m| m == me).unwrap_or(0);
        let n = members.len();
        Membership {
            members,
            me: idx,
            entries: vec![Entry::default(); n],
            last_heard: vec![now; n],
            supports: vec![true; n],
            learning: false,
        }
    }

    /// The same after a restart: the view is unknown and this node is out
    /// until it has learned the others' view and rejoined.
    pub fn restarted(members: Vec<Ipv4Addr>, me: Ipv4Addr, now: Nanos) -> Self {
        Membership {
            learning: true,
            ..Membership::new(members, me, now)
        }
    }

    /// This node's address.
    pub fn me(&self) -> Ipv4Addr {
        self.members[self.me]
    }

    /// Whether this node restarted and has not yet heard that it is out.
    pub fn learning(&self) -> bool {
        self.learning
    }

    /// The removed-member bitmap (bit i: static member i is out).
    pub fn removed(&self) -> u32 {
        let mut r = 0u32;
        for (i, e) in self.entries.iter().enumerate().take(32) {
            if !e.live() || (i == self.me && self.learning) {
                r |= 1 << i;
            }
        }
        r
    }

    /// The view version: grows with every change, equal for equal views.
    pub fn version(&self) -> u32 {
        self.entries
            .iter()
            .fold(0u32, |a, e| a.wrapping_add(e.epoch))
    }

    /// Every member's entry, in static order.
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// Whether this node is in the chain.
    pub fn in_chain(&self) -> bool {
        !self.learning && self.entries[self.me].live()
    }

    /// Whether static member `ip` is in the chain in this view.
    pub fn is_live(&self, ip: Ipv4Addr) -> bool {
        self.index(ip)
            .is_some_and(|i| self.entries[i].live() && !(i == self.me && self.learning))
    }

    fn index(&self, ip: Ipv4Addr) -> Option<usize> {
        self.members.iter().position(|&m| m == ip)
    }

    /// Takes this node out of the chain (it lost its state, or gave up a
    /// state transfer). Returns whether the view changed.
    pub fn leave(&mut self) -> bool {
        let me = self.me;
        self.remove(me)
    }

    fn remove(&mut self, i: usize) -> bool {
        let e = &mut self.entries[i];
        if e.live() {
            e.epoch = e.epoch.wrapping_add(1);
            true
        } else {
            false
        }
    }

    /// Admits `ip` (out in this view) as the new tail. Returns whether it
    /// was admitted.
    pub fn admit(&mut self, ip: Ipv4Addr) -> bool {
        let Some(i) = self.index(ip) else {
            return false;
        };
        if i == self.me || self.entries[i].live() {
            return false;
        }
        self.entries[i].epoch = self.entries[i].epoch.wrapping_add(1);
        self.entries[i].stamp = self.version();
        true
    }

    fn order(&self) -> Vec<usize> {
        let mut live: Vec<usize> = (0..self.members.len())
            .filter(|&i| self.entries[i].live() && !(i == self.me && self.learning))
            .collect();
        live.sort_by_key(|&i| (self.entries[i].stamp, i));
        live
    }

    /// The live chain, head first.
    pub fn chain(&self) -> Vec<Ipv4Addr> {
        self.order().into_iter().map(|i| self.members[i]).collect()
    }

    /// The current head.
    pub fn head(&self) -> Option<Ipv4Addr> {
        self.order().first().map(|&i| self.members[i])
    }

    /// The current tail.
    pub fn tail(&self) -> Option<Ipv4Addr> {
        self.order().last().map(|&i| self.members[i])
    }

    fn my_position(&self) -> Option<(Vec<usize>, usize)> {
        if !self.in_chain() {
            return None;
        }
        let order = self.order();
        let pos = order.iter().position(|&i| i == self.me)?;
        Some((order, pos))
    }

    /// This node's successor, if it is in the chain and not the tail.
    pub fn successor(&self) -> Option<Ipv4Addr> {
        let (order, pos) = self.my_position()?;
        order.get(pos + 1).map(|&i| self.members[i])
    }

    /// This node's predecessor, if it is in the chain and not the head.
    pub fn predecessor(&self) -> Option<Ipv4Addr> {
        let (order, pos) = self.my_position()?;
        pos.checked_sub(1).map(|p| self.members[order[p]])
    }

    /// Every live member before this node (they keep logs to trim).
    pub fn predecessors(&self) -> Vec<Ipv4Addr> {
        match self.my_position() {
            Some((order, pos)) => order[..pos].iter().map(|&i| self.members[i]).collect(),
            None => Vec::new(),
        }
    }

    /// Whether `ip` is in the static chain.
    pub fn is_member(&self, ip: Ipv4Addr) -> bool {
        self.members.contains(&ip)
    }

    /// Every other member (heartbeat destinations), in static order.
    pub fn others(&self) -> Vec<Ipv4Addr> {
        self.members
            .iter()
            .enumerate()
            .filter(|&(i, _)| i != self.me)
            .map(|(_, &a)| a)
            .collect()
    }

    /// The view extension of a heartbeat: every entry, epoch then stamp,
    /// big-endian, in static order.
    pub fn encode_entries(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(self.entries.len() * ENTRY_LEN);
        for e in &self.entries {
            b.extend_from_slice(&e.epoch.to_be_bytes());
            b.extend_from_slice(&e.stamp.to_be_bytes());
        }
        b
    }

    /// Parses a view extension for this chain (`None` if it has the wrong
    /// length).
    pub fn decode_entries(&self, b: &[u8]) -> Option<Vec<Entry>> {
        if b.len() != self.members.len() * ENTRY_LEN {
            return None;
        }
        Some(
            b.chunks_exact(ENTRY_LEN)
                .map(|c| Entry {
                    epoch: u32::from_be_bytes([c[0], c[1], c[2], c[3]]),
                    stamp: u32::from_be_bytes([c[4], c[5], c[6], c[7]]),
                })
                .collect(),
        )
    }

    /// A heartbeat from `from`: its removed bitmap, its restart flag and, if
    /// it sent one, its full view. Returns whether the view changed.
    pub fn on_heartbeat(
        &mut self,
        now: Nanos,
        from: Ipv4Addr,
        removed: u32,
        restarted: bool,
        view: Option<&[Entry]>,
    ) -> bool {
        let Some(f) = self.index(from) else {
            return false;
        };
        self.last_heard[f] = now;
        // A member still learning the view after its restart supports
        // nobody: heard by both sides of a one-way cut it would give each
        // a quorum (partition seed 160). Once it has learned the view, its
        // view says whom it supports.
        self.supports[f] = !restarted
            && match view {
                Some(v) => v.get(self.me).is_some_and(|e| e.live()),
                None => removed & (1u32.checked_shl(self.me as u32).unwrap_or(0)) == 0,
            };
        let before = (self.entries.clone(), self.learning);
        // A member that is out in this view (and not this node) decides
        // nothing: its removals may come from a view in which it was still
        // in. What it knows that matters reaches us from live members.
        let trusted = f == self.me || self.entries[f].live();
        match view {
            _ if !trusted => {}
            Some(v) if v.len() == self.entries.len() => {
                for (i, e) in v.iter().enumerate() {
                    // A restarted sender does not know its own entry.
                    if i == f && restarted {
                        continue;
                    }
                    self.entries[i] = self.entries[i].max(*e);
                }
            }
            _ => {
                // A heartbeat without a view: only its removals are known.
                for i in 0..self.members.len().min(32) {
                    if removed & (1 << i) != 0 {
                        self.remove(i);
                    }
                }
            }
        }
        if restarted {
            // It lost its state: it must not be counted as a replica.
            self.remove(f);
        }
        if self.learning && !self.entries[self.me].live() {
            // The others count this node as out: its view is current enough
            // to ask for a rejoin.
            self.learning = false;
        }
        (self.entries.clone(), self.learning) != before
    }

    /// Removes members of the live chain not heard from for `misses ×
    /// interval`, if the members heard in the last interval and a half hold
    /// the quorum (see the module documentation). Returns whether the view
    /// changed.
    pub fn tick(&mut self, now: Nanos, interval: Nanos, misses: u32) -> bool {
        if !self.in_chain() {
            return false;
        }
        let limit = interval.saturating_mul(u64::from(misses));
        let order = self.order();
        let silent: Vec<usize> = order
            .iter()
            .copied()
            .filter(|&i| i != self.me && now.saturating_sub(self.last_heard[i]) > limit)
            .collect();
        // The quorum counts only members heard in the last interval and a
        // half, not every member short of the limit: members cut off at
        // the same instant cross the limit up to an interval apart, and
        // counting the later one as heard let a node cut off alone remove
        // them one at a time (a majority, then half with the head) and
        // commit as a chain of one (campaign-nat seed 82 with partitions).
        if silent.is_empty() || !self.quorum_within(now, interval + interval / 2) {
            return false;
        }
        let mut changed = false;
        for i in silent {
            changed |= self.remove(i);
        }
        changed
    }

    /// Whether the configured members heard within `window` of `now` whose
    /// views count this node in (and this node) are a quorum: more than half of the configured chain,
    /// or exactly half with its first configured member (a fixed tie-break).
    /// Counted against the configuration, not the current view: views
    /// change on both sides of a partition (one removes, the other admits
    /// a restarted member), and a majority of two different views can be
    /// disjoint — campaign seed 17 with partitions ran two chains, [st1]
    /// and [st3, st2], each a "majority" of its own view. Two disjoint
    /// groups cannot both hold a quorum of the same configuration.
    pub fn quorum_within(&self, now: Nanos, window: Nanos) -> bool {
        if !self.in_chain() {
            return false;
        }
        // A member counts if heard lately and its view has this node in
        // the chain: one that removed this node serves another chain
        // (campaign seed 17 with partitions: a cut-off head, hearing again
        // only a member of the new chain, counted it and went on alone).
        let heard = |i: usize| {
            i == self.me || (self.supports[i] && now.saturating_sub(self.last_heard[i]) <= window)
        };
        let total = self.members.len();
        let n = (0..total).filter(|&i| heard(i)).count();
        2 * n > total || (2 * n == total && heard(0))
    }

    /// Whether `ip` was heard from within `limit` of `now`.
    pub fn heard_within(&self, ip: Ipv4Addr, now: Nanos, limit: Nanos) -> bool {
        self.index(ip)
            .is_some_and(|i| now.saturating_sub(self.last_heard[i]) <= limit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(n: u8) -> Ipv4Addr {
        Ipv4Addr::new(10, 9, 0, n)
    }

    #[test]
    fn roles_follow_removals() {
        let mut m = Membership::new(vec![ip(1), ip(2), ip(3)], ip(2), 0);
        assert_eq!(m.head(), Some(ip(1)));
        assert_eq!(m.successor(), Some(ip(3)));
        assert_eq!(m.predecessor(), Some(ip(1)));
        m.on_heartbeat(25, ip(3), 0, false, None);
        assert!(!m.tick(30, 10, 3));
        assert!(m.tick(31, 10, 3)); // ip(1) not heard for > 30
        assert_eq!(m.head(), Some(ip(2)));
        assert_eq!(m.predecessor(), None);
        assert_eq!(m.version(), 1);
        // A restarted member is removed at once, and removals spread.
        let mut n = Membership::new(vec![ip(1), ip(2), ip(3)], ip(3), 0);
        assert!(n.on_heartbeat(5, ip(2), 0b001, false, None));
        assert_eq!(n.head(), Some(ip(2)));
        assert!(n.on_heartbeat(6, ip(2), 0b001, true, None));
        assert_eq!(n.chain(), vec![ip(3)]);
    }

    /// Partition seeds 82, 17 and 160: the quorum is counted against the
    /// configured chain, from members heard lately whose views count this
    /// node in; a member still learning after its restart counts for
    /// nobody.
    #[test]
    fn only_recent_supporters_of_the_configured_chain_make_a_quorum() {
        let three = vec![ip(1), ip(2), ip(3)];
        let w = 15;
        // Alone: no quorum, whatever its own view says.
        let mut a = Membership::new(three.clone(), ip(1), 0);
        assert!(!a.quorum_within(100, w));
        // A member heard 1 ago whose view has us in: a quorum.
        let b = Membership::new(three.clone(), ip(2), 0);
        a.on_heartbeat(99, ip(2), b.removed(), false, Some(b.entries()));
        assert!(a.quorum_within(100, w));
        // Heard long ago: not counted (seed 82: it crossed no limit yet, but
        // is not heard either).
        assert!(!a.quorum_within(99 + w + 1, w));
        // A member whose view removed us: not counted (seed 17).
        let mut b2 = Membership::new(three.clone(), ip(2), 0);
        b2.remove(0);
        let mut a = Membership::new(three.clone(), ip(1), 0);
        a.on_heartbeat(99, ip(2), b2.removed(), false, Some(b2.entries()));
        assert!(!a.quorum_within(100, w));
        // A restarted member still learning the view: not counted (seed
        // 160: heard by both sides, it gave each a quorum).
        let fresh = Membership::restarted(three.clone(), ip(3), 90);
        let mut a = Membership::new(three.clone(), ip(1), 0);
        a.on_heartbeat(99, ip(3), fresh.removed(), true, Some(fresh.entries()));
        assert!(!a.quorum_within(100, w));
        // Out of the chain: never a quorum.
        let mut out = Membership::new(three.clone(), ip(1), 0);
        out.on_heartbeat(99, ip(2), b2.removed(), false, Some(b2.entries()));
        assert!(!out.in_chain());
        assert!(!out.quorum_within(100, w));
    }

    #[test]
    fn of_two_sides_only_the_one_with_the_quorum_removes_the_other() {
        // Two members that stop hearing each other: the head goes on alone,
        // the tail keeps the head in its view (and is not the head).
        let two = vec![ip(1), ip(2)];
        let mut a = Membership::new(two.clone(), ip(1), 0);
        let mut b = Membership::new(two.clone(), ip(2), 0);
        assert!(a.tick(31, 10, 3));
        assert!(!b.tick(31, 10, 3));
        assert_eq!(a.chain(), vec![ip(1)]);
        assert_eq!(b.chain(), two);
        // The heal: the tail learns it is out; the head ignores the view
        // of a member it removed.
        let av = a.entries().to_vec();
        let bv = b.entries().to_vec();
        assert!(!a.on_heartbeat(40, ip(2), b.removed(), false, Some(&bv)));
        assert!(b.on_heartbeat(40, ip(1), a.removed(), false, Some(&av)));
        assert!(!b.in_chain() && b.chain() == vec![ip(1)]);
        // A head that really died: the tail takes over once the head's
        // restarted heartbeat proves it holds nothing.
        let mut b = Membership::new(two.clone(), ip(2), 0);
        assert!(!b.tick(100, 10, 3));
        let fresh = Membership::restarted(two.clone(), ip(1), 100);
        assert!(b.on_heartbeat(101, ip(1), fresh.removed(), true, Some(fresh.entries())));
        assert_eq!(b.chain(), vec![ip(2)]);
        // Three members: one cut off alone removes nobody; the two others
        // remove it.
        let three = vec![ip(1), ip(2), ip(3)];
        let mut c = Membership::new(three.clone(), ip(3), 0);
        assert!(!c.tick(31, 10, 3));
        let mut h = Membership::new(three.clone(), ip(1), 0);
        h.on_heartbeat(30, ip(2), 0, false, None);
        assert!(h.tick(31, 10, 3));
        assert_eq!(h.chain(), vec![ip(1), ip(2)]);
        // A removed member's stale removals are not adopted: ip(3), still
        // believing itself in, tells ip(2) that ip(1) is out.
        let mut m = Membership::new(three.clone(), ip(2), 0);
        let hv = h.entries().to_vec();
        m.on_heartbeat(32, ip(1), h.removed(), false, Some(&hv));
        let stale = vec![
            Entry { epoch: 1, stamp: 0 },
            Entry::default(),
            Entry::default(),
        ];
        assert!(!m.on_heartbeat(33, ip(3), 0b001, false, Some(&stale)));
        assert_eq!(m.chain(), vec![ip(1), ip(2)]);
    }

    #[test]
    fn a_rejoined_member_is_the_new_tail_and_views_converge() {
        let chain = vec![ip(1), ip(2), ip(3)];
        let mut a = Membership::new(chain.clone(), ip(1), 0);
        let mut c = Membership::new(chain.clone(), ip(3), 0);
        // ip(2) restarts: it knows nothing and is out until told so.
        let mut b = Membership::restarted(chain.clone(), ip(2), 0);
        assert!(!b.in_chain() && b.learning());
        assert!(c.on_heartbeat(1, ip(2), b.removed(), true, Some(b.entries())));
        assert_eq!(c.chain(), vec![ip(1), ip(3)]);
        let cv = c.entries().to_vec();
        assert!(b.on_heartbeat(2, ip(3), c.removed(), false, Some(&cv)));
        assert!(!b.learning() && !b.in_chain());
        assert_eq!(b.tail(), Some(ip(3)));
        // The tail admits it behind itself.
        assert!(c.admit(ip(2)));
        assert!(!c.admit(ip(2)), "admitted twice");
        assert_eq!(c.chain(), vec![ip(1), ip(3), ip(2)]);
        assert_eq!(c.successor(), Some(ip(2)));
        let cv = c.entries().to_vec();
        assert!(a.on_heartbeat(3, ip(3), c.removed(), false, Some(&cv)));
        assert!(b.on_heartbeat(3, ip(3), c.removed(), false, Some(&cv)));
        assert_eq!(a.chain(), c.chain());
        assert_eq!(b.chain(), c.chain());
        assert_eq!(b.predecessor(), Some(ip(3)));
        assert_eq!((a.version(), b.version()), (c.version(), c.version()));
        // An older view (ip(2) out) does not undo the rejoin.
        let stale = vec![
            Entry::default(),
            Entry { epoch: 1, stamp: 0 },
            Entry::default(),
        ];
        assert!(!a.on_heartbeat(4, ip(1), 0b010, false, Some(&stale)));
        assert_eq!(a.chain(), vec![ip(1), ip(3), ip(2)]);
        // The head dies: the rejoined member stays the tail.
        c.on_heartbeat(99, ip(2), 0, false, Some(b.entries()));
        assert!(c.tick(100, 10, 3));
        assert_eq!(c.chain(), vec![ip(3), ip(2)]);
        assert_eq!(c.predecessor(), None);
    }
}
