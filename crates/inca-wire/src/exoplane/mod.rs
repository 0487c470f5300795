//! ExoPlane's wire formats (specs/exoplane.md §4; docs/wire.md "ExoPlane").
//!
//! Numbers that identify ExoPlane traffic on a link are fixed here once so
//! that every part (switch and device programs, hub, daemons, dissector)
//! agrees on them.

/// EtherType of the EXO shim (§4.1) [our choice]: IEEE 802 Local
/// Experimental EtherType 2. The spec's 0x88B5 (Local Experimental 1) is
/// taken by CLIP (specs/clip.md §4) and by the LB app's marker frames.
pub const ETHERTYPE: u16 = 0x88B6;

/// TCP port the hub listens on for device daemons (§4.6) [our choice].
pub const HUB_PORT: u16 = 7700;

pub mod merge;
pub mod shim;

pub use merge::{MergeOp, MergeRepr, MERGE_LEN};
pub use shim::{Shim, ShimRepr, ShimType, FLAG_FAILOVER, SHIM_LEN};
