//! The named topologies the rigs build (specs/swish.md §8.1) and the link
//! model between replicas, shared by every protocol's rig.
//!
//! [our choice] A replica is one pipe, modelled as its own switch device
//! (crate docs), so two pipes of one switch are joined by a link of
//! [`PIPE_LINK_DELAY`] — the internal path between pipes, tens of
//! nanoseconds (the correction of the spec's 0.5 µs loopback) —
//! and pipes of different switches by [`SWITCH_LINK_DELAY`] (spec §8.1:
//! 100 Gbps, 0.5 µs, [our choice] there).
//!
//! Two more for the ablation and the scale-out (§8.2 experiments 7, 11):
//!
//! - **leaf-spine-4** [our choice of layout; §8.1 says only "asymmetric, 4
//!   pipes"]: one spine switch with two replica pipes (replicas 2 and 3,
//!   joined by the internal link) and two leaf switches with one replica
//!   pipe each (replicas 0 and 1). Each leaf is cabled to each spine pipe
//!   ([`SWITCH_LINK_DELAY`]); the two leaves have no cable of their own,
//!   so their path crosses the spine: two links and one pipeline pass
//!   ([`SPINE_PASS`]). Replication paths are thus 40 ns, 0.5 µs and
//!   1.5 µs long. Every path is still its own 100 Gb/s channel in the
//!   pairwise rigs (the leaves' shared uplink is not modelled).
//! - **star-N** (`Star(n)`): n replicas, each one pipe of its own switch,
//!   every one cabled ([`SWITCH_LINK_DELAY`]) to one L3-forwarding switch
//!   that routes by destination IP; a replica reaches every peer through
//!   its one uplink. Rigs that build it with the forwarding device (the
//!   SDW rig) check [`Topology::forwarded`]; [`Topology::delay`] gives the
//!   path length for rigs that join replicas pairwise.

use inca_switch::Nanos;

/// Delay of the internal path between two pipes of one switch.
pub const PIPE_LINK_DELAY: Nanos = 40;
/// Delay of a link between switches (spec §8.1).
pub const SWITCH_LINK_DELAY: Nanos = 500;
/// Rate of every replication link (spec §8.1).
pub const LINK_RATE_BPS: u64 = 100_000_000_000;
/// One pass through a forwarding switch's pipeline on a path that crosses
/// it (specs/swish.md §8.1: "Pipeline pass 0.5 µs").
pub const SPINE_PASS: Nanos = 500;
/// Replicas in the scale-out star of §8.2 experiment 11.
pub const STAR_REPLICAS: usize = 32;

/// Which replicas share a switch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Topology {
    /// Two pipes of one switch (local-2).
    Local2,
    /// Two switches, two pipes each, a link between every pair of pipes
    /// (symmetric-4): replicas 0 and 1 on one switch, 2 and 3 on the other.
    Symmetric4,
    /// One spine switch with two replica pipes (replicas 2, 3) and two
    /// leaves with one each (replicas 0, 1); leaf to leaf crosses the
    /// spine (leaf-spine-4, module docs).
    LeafSpine4,
    /// `n` replicas around one L3-forwarding switch (star-n, module docs).
    Star(usize),
    /// Two switches, one NF pipe each, a dedicated link between them
    /// (symmetric-2, spec §8.1).
    Symmetric2,
}

impl Topology {
    /// Replicas it has.
    pub fn replicas(self) -> usize {
        match self {
            Topology::Local2 => 2,
            Topology::Symmetric4 | Topology::LeafSpine4 => 4,
            Topology::Symmetric2 => 2,
            Topology::Star(n) => n,
        }
    }

    /// Whether replicas reach each other through a forwarding switch (one
    /// uplink each) instead of a link per pair.
    pub fn forwarded(self) -> bool {
        matches!(self, Topology::Star(_))
    }

    /// The name used in descriptors and reports.
    pub fn name(self) -> String {
        match self {
            Topology::Local2 => "local-2".into(),
            Topology::Symmetric4 => "symmetric-4".into(),
            Topology::Symmetric2 => "symmetric-2".into(),
            Topology::LeafSpine4 => "leaf-spine-4".into(),
            Topology::Star(n) => format!("star-{n}"),
        }
    }

    /// The topology named `s` (`local-2`, `symmetric-4`, `symmetric-2`, `leaf-spine-4`,
    /// `star-N` with 2 ≤ N ≤ 4,096).
    pub fn parse(s: &str) -> Option<Topology> {
        match s {
            "local-2" => Some(Topology::Local2),
            "symmetric-4" => Some(Topology::Symmetric4),
            "symmetric-2" => Some(Topology::Symmetric2),
            "leaf-spine-4" => Some(Topology::LeafSpine4),
            _ => {
                let n: usize = s.strip_prefix("star-")?.parse().ok()?;
                (2..=4_096).contains(&n).then_some(Topology::Star(n))
            }
        }
    }

    /// Whether replicas `a` and `b` (0-based) are pipes of one switch.
    pub fn same_switch(self, a: usize, b: usize) -> bool {
        match self {
            Topology::Local2 => true,
            Topology::Symmetric4 => a / 2 == b / 2,
            Topology::LeafSpine4 => a >= 2 && b >= 2,
            Topology::Star(_) => a == b,
            Topology::Symmetric2 => a == b,
        }
    }

    /// The delay of the path between replicas `a` and `b`: the link
    /// between them, or (leaves of leaf-spine-4, any two of a star) two
    /// links and the forwarding switch's pass.
    pub fn delay(self, a: usize, b: usize) -> Nanos {
        let through = 2 * SWITCH_LINK_DELAY + SPINE_PASS;
        match self {
            _ if self.same_switch(a, b) => PIPE_LINK_DELAY,
            Topology::LeafSpine4 if a < 2 && b < 2 => through,
            Topology::Star(_) => through,
            _ => SWITCH_LINK_DELAY,
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

    #[test]
    fn leaf_spine_paths_have_three_lengths() {
        let t = Topology::LeafSpine4;
        assert_eq!(t.delay(2, 3), PIPE_LINK_DELAY);
        assert_eq!(t.delay(0, 2), SWITCH_LINK_DELAY);
        assert_eq!(t.delay(1, 3), SWITCH_LINK_DELAY);
        assert_eq!(t.delay(0, 1), 2 * SWITCH_LINK_DELAY + SPINE_PASS);
        assert!(!t.forwarded() && Topology::Star(32).forwarded());
    }

    #[test]
    fn names_parse_back() {
        for t in [
            Topology::Local2,
            Topology::Symmetric4,
            Topology::Symmetric2,
            Topology::LeafSpine4,
            Topology::Star(STAR_REPLICAS),
        ] {
            assert_eq!(Topology::parse(&t.name()), Some(t));
        }
        assert_eq!(Topology::parse("star-1"), None);
        assert_eq!(Topology::parse("ring-4"), None);
    }
}
