//! Chain replication and heartbeat membership, sans-IO and generic over
//! what is replicated. RedPlane's state store replicates its records through
//! them (specs/redplane.md §5.7), and SwiSh's strong mode (SRO,
//! specs/swish.md §5.2) is the next user; a system keeps its own entry type,
//! wire encoding and transport, and drives these from its handlers.
//!
//! - [`membership`] — [`Membership`]: a node's view of its chain from
//!   heartbeats (removal after missed heartbeats, epochs, quorum rules,
//!   rejoin as the new tail).
//! - [`role`] — [`Role`]: head, tail, neighbours, from a view.
//! - [`replica`] — [`Replica`] and [`ChainNode`]: ordering, forwarding,
//!   cumulative acks, go-back-N resends, outputs held until commit, a
//!   joiner's stash and install.
//! - [`transfer`] — [`Transfer`] and [`Intake`]: the state copy to a
//!   joining tail as a go-back-N transfer of the system's chunks.
//!
//! The crate sits beside `inca-server` rather than in it because its users
//! are not all servers: SwiSh runs the chain on switch CPUs.
//!
//! Module dependencies point one way: `membership` ← `role`; `replica` and
//! `transfer` use neither (a system hands them the neighbours of its
//! current [`Role`]).

pub mod membership;
pub mod replica;
pub mod role;
pub mod transfer;

pub use membership::{Entry, Membership, ENTRY_LEN};
pub use replica::{ChainEvent, ChainIo, ChainNode, Commit, Logged, Replica, Traffic};
pub use role::Role;
pub use transfer::{Acked, Intake, Offer, Transfer};
