//! The named topologies the rigs build (specs/swish.md §8.1) and the link
//! model between replicas, shared by every protocol's rig.
//!
//! [our choice] A replica is one pipe, modelled as its own switch device
//! (crate docs), so two pipes of one switch are joined by a link of
//! [`PIPE_LINK_DELAY`] — the internal path between pipes, tens of
//! nanoseconds (the correction of the spec's 0.5 µs loopback) —
//! and pipes of different switches by [`SWITCH_LINK_DELAY`] (spec §8.1:
//! 100 Gbps, 0.5 µs, [our choice] there).

use inca_switch::Nanos;

/// Delay of the internal path between two pipes of one switch.
pub const PIPE_LINK_DELAY: Nanos = 40;
/// Delay of a link between switches (spec §8.1).
pub const SWITCH_LINK_DELAY: Nanos = 500;
/// Rate of every replication link (spec §8.1).
pub const LINK_RATE_BPS: u64 = 100_000_000_000;

/// Which replicas share a switch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Topology {
    /// Two pipes of one switch (local-2).
    Local2,
    /// Two switches, two pipes each, a link between every pair of pipes
    /// (symmetric-4): replicas 0 and 1 on one switch, 2 and 3 on the other.
    Symmetric4,
    /// Two switches, one NF pipe each, a dedicated link between them
    /// (symmetric-2, spec §8.1).
    Symmetric2,
}

impl Topology {
    /// Replicas it has.
    pub fn replicas(self) -> usize {
        match self {
            Topology::Local2 => 2,
            Topology::Symmetric4 => 4,
            Topology::Symmetric2 => 2,
        }
    }

    /// Whether replicas `a` and `b` (0-based) are pipes of one switch.
    pub fn same_switch(self, a: usize, b: usize) -> bool {
        match self {
            Topology::Local2 => true,
            Topology::Symmetric4 => a / 2 == b / 2,
            Topology::Symmetric2 => a == b,
        }
    }

    /// The delay of the link between replicas `a` and `b`.
    pub fn delay(self, a: usize, b: usize) -> Nanos {
        if self.same_switch(a, b) {
            PIPE_LINK_DELAY
        } else {
            SWITCH_LINK_DELAY
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pipes_of_one_switch_are_close_and_switches_far() {
        assert_eq!(Topology::Local2.delay(0, 1), PIPE_LINK_DELAY);
        assert_eq!(Topology::Symmetric4.delay(0, 1), PIPE_LINK_DELAY);
        assert_eq!(Topology::Symmetric4.delay(2, 3), PIPE_LINK_DELAY);
        assert_eq!(Topology::Symmetric4.delay(1, 2), SWITCH_LINK_DELAY);
        assert_eq!(Topology::Symmetric4.replicas(), 4);
        assert_eq!(Topology::Symmetric2.delay(0, 1), SWITCH_LINK_DELAY);
        assert_eq!(Topology::Symmetric2.replicas(), 2);
    }
}
