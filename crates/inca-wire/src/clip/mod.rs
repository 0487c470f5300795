//! CLIP (specs/clip.md §4): the data-plane shim between a switch and its
//! servers.
//!
//! - [`shim`] — the 16-byte common header of requests and responses, the
//!   params region behind it, push and pop on whole frames.

pub mod shim;

/// The EtherType of CLIP requests and responses. The spec names 0x88B5
/// (IEEE local experimental 1), which inca already uses (inca-apps' load
/// balancer marker; ExoPlane took 0x88B6) [our choice: 0xC11C, used by no
/// other inca format].
pub const ETHERTYPE: u16 = 0xC11C;
