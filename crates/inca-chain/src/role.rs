//! A node's place in its chain, computed from a [`Membership`] view:
//! whether it is in, head or tail, and its neighbours. Systems keep one and
//! recompute it on every view change, comparing old and new to drive the
//! role changes ([`crate::replica::ChainNode::became_tail`], resends to a
//! new successor, their own head take-over).

use std::net::Ipv4Addr;

use crate::membership::Membership;

/// This node's place in its chain.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Role {
    /// In the chain (not removed, not learning after a restart).
    pub in_chain: bool,
    /// Orders updates and answers clients.
    pub is_head: bool,
    /// Commits updates and acknowledges them.
    pub is_tail: bool,
    /// The current head, as this node sees it.
    pub head: Option<Ipv4Addr>,
    /// The current tail, as this node sees it.
    pub tail: Option<Ipv4Addr>,
    /// Where updates are forwarded (none at the tail).
    pub successor: Option<Ipv4Addr>,
    /// Where updates come from (none at the head).
    pub predecessor: Option<Ipv4Addr>,
    /// Every live member before this node (cumulative acks go to all of
    /// them, so each can trim its log).
    pub predecessors: Vec<Ipv4Addr>,
}

impl Role {
    /// A node without a chain: head and tail of itself.
    pub fn alone(me: Ipv4Addr) -> Role {
        Role {
            in_chain: true,
            is_head: true,
            is_tail: true,
            head: Some(me),
            tail: Some(me),
            ..Role::default()
        }
    }

    /// This node's role in the view `m`.
    pub fn of(m: &Membership) -> Role {
        let (head, tail) = (m.head(), m.tail());
        let me = Some(m.me());
        Role {
            in_chain: m.in_chain(),
            is_head: m.in_chain() && head == me,
            is_tail: m.in_chain() && tail == me,
            head,
            tail,
            successor: m.successor(),
            predecessor: m.predecessor(),
            predecessors: m.predecessors(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_of_a_three_node_chain() {
        let ip = |n| Ipv4Addr::new(10, 0, 0, n);
        let chain = vec![ip(1), ip(2), ip(3)];
        let head = Role::of(&Membership::new(chain.clone(), ip(1), 0));
        let mid = Role::of(&Membership::new(chain.clone(), ip(2), 0));
        let tail = Role::of(&Membership::new(chain.clone(), ip(3), 0));
        assert!(head.is_head && !head.is_tail && head.successor == Some(ip(2)));
        assert!(!mid.is_head && !mid.is_tail && mid.predecessors == vec![ip(1)]);
        assert!(tail.is_tail && tail.successor.is_none());
        assert_eq!(tail.predecessors, vec![ip(1), ip(2)]);
        let out = Role::of(&Membership::restarted(chain, ip(2), 0));
        assert!(!out.in_chain && !out.is_head && !out.is_tail);
        assert!(Role::alone(ip(9)).is_head && Role::alone(ip(9)).is_tail);
    }
}
