//! Chain membership (specs/redplane.md §5.7 "Node failure"). The "store
//! configuration master" is modelled as logic replicated in every node
//! [our choice]: each node knows the static chain order, hears a heartbeat
//! from every member every `heartbeat_interval`, and removes a member it has
//! not heard from for `misses` intervals. Removal is sticky and spreads:
//! heartbeats carry the sender's removed-member bitmap, which receivers
//! OR into their own, so every live node converges on the same view and
//! computes the same head and tail. A node that finds itself removed (or
//! restarted without its state) leaves the chain: it serves nothing until a
//! rejoin, which is not modelled.

use std::net::Ipv4Addr;

use inca_switch::device::Nanos;

/// One node's view of its chain.
#[derive(Debug, Clone)]
pub struct Membership {
    members: Vec<Ipv4Addr>,
    me: usize,
    removed: u32,
    last_heard: Vec<Nanos>,
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
            removed: 0,
            last_heard: vec![now; n],
        }
    }

    /// The removed-member bitmap.
    pub fn removed(&self) -> u32 {
        self.removed
    }

    /// How many membership changes this view has seen (the same number on
    /// every node with the same view).
    pub fn version(&self) -> u32 {
        self.removed.count_ones()
    }

    /// Whether this node is still in the chain.
    pub fn in_chain(&self) -> bool {
        self.removed & (1 << self.me) == 0
    }

    /// Takes this node out of the chain (it restarted without its state).
    pub fn leave(&mut self) {
        self.removed |= 1 << self.me;
    }

    fn alive(&self) -> impl Iterator<Item = (usize, Ipv4Addr)> + '_ {
        self.members
            .iter()
            .copied()
            .enumerate()
            .filter(|(i, _)| self.removed & (1 << i) == 0)
    }

    /// The live chain, head first.
    pub fn chain(&self) -> Vec<Ipv4Addr> {
        self.alive().map(|(_, a)| a).collect()
    }

    /// The current head.
    pub fn head(&self) -> Option<Ipv4Addr> {
        self.alive().next().map(|(_, a)| a)
    }

    /// This node's successor, if it is in the chain and not the tail.
    pub fn successor(&self) -> Option<Ipv4Addr> {
        if !self.in_chain() {
            return None;
        }
        self.alive().find(|&(i, _)| i > self.me).map(|(_, a)| a)
    }

    /// This node's predecessor, if it is in the chain and not the head.
    pub fn predecessor(&self) -> Option<Ipv4Addr> {
        if !self.in_chain() {
            return None;
        }
        self.alive()
            .filter(|&(i, _)| i < self.me)
            .last()
            .map(|(_, a)| a)
    }

    /// Every live member before this node (they keep logs to trim).
    pub fn predecessors(&self) -> Vec<Ipv4Addr> {
        self.alive()
            .filter(|&(i, _)| i < self.me)
            .map(|(_, a)| a)
            .collect()
    }

    /// The current tail.
    pub fn tail(&self) -> Option<Ipv4Addr> {
        self.alive().last().map(|(_, a)| a)
    }

    /// Whether `ip` is in the static chain.
    pub fn is_member(&self, ip: Ipv4Addr) -> bool {
        self.members.contains(&ip)
    }

    /// Every other member (heartbeat destinations), in chain order.
    pub fn others(&self) -> Vec<Ipv4Addr> {
        self.members
            .iter()
            .enumerate()
            .filter(|&(i, _)| i != self.me)
            .map(|(_, &a)| a)
            .collect()
    }

    /// A heartbeat from `from` with its removed bitmap and restart flag.
    /// Returns whether the view changed.
    pub fn on_heartbeat(
        &mut self,
        now: Nanos,
        from: Ipv4Addr,
        removed: u32,
        restarted: bool,
    ) -> bool {
        let Some(i) = self.members.iter().position(|&m| m == from) else {
            return false;
        };
        let before = self.removed;
        self.last_heard[i] = now;
        let mask = if self.members.len() >= 32 {
            u32::MAX
        } else {
            (1u32 << self.members.len()) - 1
        };
        self.removed |= removed & mask;
        if restarted {
            // It lost its state: it must not be counted as a replica.
            self.removed |= 1 << i;
        }
        self.removed != before
    }

    /// Removes members not heard from for `misses × interval`. Returns
    /// whether the view changed.
    pub fn tick(&mut self, now: Nanos, interval: Nanos, misses: u32) -> bool {
        let before = self.removed;
        if !self.in_chain() {
            return false;
        }
        let limit = interval.saturating_mul(u64::from(misses));
        for i in 0..self.members.len() {
            if i != self.me && now.saturating_sub(self.last_heard[i]) > limit {
                self.removed |= 1 << i;
            }
        }
        self.removed != before
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
        m.on_heartbeat(25, ip(3), 0, false);
        assert!(!m.tick(30, 10, 3));
        assert!(m.tick(31, 10, 3)); // ip(1) not heard for > 30
        assert_eq!(m.head(), Some(ip(2)));
        assert_eq!(m.predecessor(), None);
        assert_eq!(m.version(), 1);
        // A restarted member is removed at once, and removals spread.
        let mut n = Membership::new(vec![ip(1), ip(2), ip(3)], ip(3), 0);
        assert!(n.on_heartbeat(5, ip(2), 0b001, false));
        assert_eq!(n.head(), Some(ip(2)));
        assert!(n.on_heartbeat(6, ip(2), 0b001, true));
        assert_eq!(n.chain(), vec![ip(3)]);
    }
}
