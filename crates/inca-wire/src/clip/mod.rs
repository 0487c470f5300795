//! CLIP's wire formats (specs/clip.md §4; docs/wire.md "CLIP").
//!
//! Numbers that identify CLIP traffic are fixed here once so that every
//! part (switch program, server runtime, controller, dissector) agrees on
//! them.
//!
//! - [`shim`] — the data-plane shim (§4.2): the 16-byte common header of
//!   requests and responses, its push/pop on a whole frame, and the
//!   bit-packed params region (§4.2, per-app sizes §4.3).
//! - [`ctl`] — CLIP-CTL, the controller ↔ server control protocol over UDP
//!   (§4.5).
//! - [`digest`] — the switch's pin-overflow digest 0xC1 (§4.4).
//!
//! A [`FlowKey`] (§4.1) is 16 bytes: `ctx` 24 ‖ `proto` 8 ‖ `src_ip` 32 ‖
//! `dst_ip` 32 ‖ `src_port` 16 ‖ `dst_port` 16. Which header fields feed it
//! is the app's business; on the wire it is always these 16 bytes.

pub mod ctl;
pub mod digest;
pub mod shim;

pub use ctl::{CtlBody, CtlMessage, FlowInfo, MirrorEntry, MsgType, PoolKind};
pub use digest::PinOverflow;
pub use shim::{params, ClipHeader, ClipRepr, Kind, Sel, Status, COMMON_LEN};

/// EtherType of the CLIP shim [our choice].
///
/// The spec (§4.2) names 0x88B5, IEEE 802 Local Experimental EtherType 1,
/// but inca already uses it for the LB app's marker frames
/// (`inca_apps::lb::MARKER_ETHERTYPE`), and Local Experimental 2 (0x88B6)
/// is the ExoPlane shim's. 0xC11C ("CLIC") is used by no other inca format
/// (docs/wire.md lists them all), and Wireshark knows no protocol for it:
/// tshark 4.0.17 shows a frame with EtherType 0xC11C as
/// `Type: Unknown (0xc11c)` followed by `data`, so the dissector in
/// contrib/wireshark/clip.lua is the only one to claim it. Like every
/// value ≥ 0x0600 in Ethernet II it is read as a type, not a length.
pub const ETHERTYPE: u16 = 0xC11C;

/// Bytes of a [`FlowKey`].
pub const FLOW_KEY_LEN: usize = 16;

/// A flow key as it travels (§4.1): `ctx` 24 ‖ `proto` 8 ‖ `src_ip` 32 ‖
/// `dst_ip` 32 ‖ `src_port` 16 ‖ `dst_port` 16, big-endian.
pub type FlowKey = [u8; FLOW_KEY_LEN];
