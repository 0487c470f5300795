//! The hub's, daemons' and sync part's messages on the wire: conversion
//! between this crate's message types ([`HubMsg`], [`DaemonMsg`],
//! [`SyncReq`], [`SyncResp`], [`Rejoin`]) and inca-wire's control protocol
//! ([`Message`](inca_wire::exoplane::control::Message), specs/exoplane.md §4.6), batch splitting, and sans-IO
//! framing of a TCP session.
//!
//! The two directions each get one enum, so a receiver decodes into
//! exactly what its peer may send: [`HubToDaemon`] (HELLO_ACK, WRITE_APPLY,
//! WRITE_ACK, EVENT_FWD, SYNC_REQ, DUMP, REJOIN, PING, PONG) and
//! [`DaemonToHub`] (HELLO, WRITE_REQ, WRITE_APPLIED, PROMOTE_REPORT,
//! SYNC_RESP, REJOIN_DONE, PING, PONG). A frame of the other direction is
//! [`CodecError::WrongDirection`].
//!
//! - [`convert`] — both directions' enums to and from `Message`, refusing
//!   with a typed [`CodecError`] what the wire cannot carry (keys over 255
//!   bytes, counts over their field, a `pdev` no holders bitmap can name).
//! - [`split`] — DUMP, SYNC and REJOIN batches cut to the body limit, each
//!   item in exactly one part, in order.
//! - [`session`] — [`Session`]: frames out with a `req_id`, bytes in through
//!   a bounded [`FrameDecoder`](inca_wire::exoplane::control::FrameDecoder),
//!   typed messages out, bad frames counted and skipped.
//!
//! The wire bodies carry every field these types have: WRITE_REQ's union
//! key, DUMP's app and the SYNC and REJOIN items' apps are inca's additions
//! to §4.6 (docs/wire.md). The sync part's SYNC_REQ, REJOIN and SYNC_RESP
//! travel inside the hub's and daemon's own enums (`HubMsg::SyncReq`,
//! `HubMsg::Rejoin`, `DaemonMsg::SyncResp`), so a decoded message goes
//! straight to the component's handler.

pub mod convert;
pub mod session;
pub mod split;
#[cfg(test)]
mod tests;

use inca_wire::exoplane::control::ControlError;

use crate::hub::msg::{DaemonMsg, HubMsg};
use crate::ids::AppId;

pub use session::{DaemonSession, HubSession, Session, SessionError, SessionStats};
pub use split::{split_dump, split_rejoin, split_sync_req, split_sync_resp};

/// A message the hub sends a daemon.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HubToDaemon {
    /// The hub's messages (HELLO_ACK, WRITE_APPLY, WRITE_ACK, DUMP,
    /// SYNC_REQ, REJOIN, PING, PONG).
    Hub(HubMsg),
    /// EVENT_FWD: a frame that raised a control event on the switch.
    EventFwd {
        /// The app whose packet it was.
        app: AppId,
        /// The Ethernet frame (at most 65,535 bytes).
        frame: Vec<u8>,
    },
}

/// A message a daemon sends the hub.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DaemonToHub {
    /// The daemon's messages (SYNC_RESP among them).
    Daemon(DaemonMsg),
}

/// Why a message could not be converted, encoded or decoded.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CodecError {
    /// A key, union key or value over 255 bytes (`len` is 8 bits).
    #[error("{field} of {len} bytes is longer than 255")]
    KeyTooLong {
        /// Which field.
        field: &'static str,
        /// Its length.
        len: usize,
    },
    /// More items than the message's count field holds.
    #[error("{field}: {count} items, the count field holds at most {max}")]
    TooManyItems {
        /// The count field.
        field: &'static str,
        /// Items given.
        count: usize,
        /// The field's maximum.
        max: usize,
    },
    /// An id or code outside what the receiver can use.
    #[error("{field} = {value} is out of range (at most {max})")]
    OutOfRange {
        /// The field.
        field: &'static str,
        /// The value.
        value: u64,
        /// The largest allowed.
        max: u64,
    },
    /// A message whose fields the wire cannot carry.
    #[error("cannot be sent: {0}")]
    Unrepresentable(&'static str),
    /// A frame the receiving side's peer never sends.
    #[error("{msg} is not a {direction} message")]
    WrongDirection {
        /// The §4.6 name.
        msg: &'static str,
        /// "hub→daemon" or "daemon→hub".
        direction: &'static str,
    },
    /// One item larger than the body limit a splitter was given.
    #[error("one item of {len} bytes does not fit a body of {max}")]
    ItemTooLarge {
        /// Item bytes plus the message's fixed fields.
        len: usize,
        /// The body limit.
        max: usize,
    },
    /// The wire codec refused the bytes or the message.
    #[error(transparent)]
    Wire(#[from] ControlError),
}
