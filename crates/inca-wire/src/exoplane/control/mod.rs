//! ExoPlane's control protocol (specs/exoplane.md §4.6): the messages the hub
//! (switch control plane) and the device daemons exchange over TCP port
//! [`HUB_PORT`](super::HUB_PORT).
//!
//! Every message is one frame: a 16-byte header (`magic` 0x4558 "EX",
//! `version` 1, `type`, body `length`, `req_id`) and a body whose layout the
//! type decides. Variable-length keys and values are `len` 8 ‖ bytes, so a
//! key is at most 255 bytes; an `Entry` is `obj` 16 ‖ Key ‖ Val ‖ `version`
//! 64. Byte layouts are in docs/wire.md, "ExoPlane control protocol";
//! WRITE_REQ, DUMP and the SYNC and REJOIN items carry fields §4.6 lacks
//! (see [`message`]).
//!
//! - [`header`] — the zero-copy [`FrameHeader`] view and its [`HeaderRepr`].
//! - [`message`] — [`Message`], one variant per type of the §4.6 table, and
//!   [`Frame`] (`req_id` + message) with checked `decode` and `encode`.
//! - [`stream`] — [`FrameDecoder`], the bounded decoder for a TCP byte
//!   stream: frames split across reads, at most [`MAX_BODY_LEN`] body bytes.
//! - [`report`] — the device's REPORT digest body (§4.5), which a daemon
//!   turns into PROMOTE_REPORT.
//!
//! Parsing is strict so encoding is canonical: every byte string `decode`
//! accepts re-encodes to itself (unknown enum values, booleans other than
//! 0/1 and trailing body bytes are errors), which the fuzz target checks.

mod codec;
pub mod header;
pub mod message;
pub mod report;
pub mod stream;
#[cfg(test)]
mod tests;

pub use header::{FrameHeader, HeaderRepr};
pub use message::{
    AckStatus, AppliedStatus, Entry, Frame, LdevRole, Message, MsgType, OpEntry, RejoinItem, Role,
    SyncItem, Write, WriteOp, WriteResult, DUMP_FIXED_LEN, REJOIN_FIXED_LEN, SYNC_FIXED_LEN,
};
pub use report::ReportDigest;
pub use stream::FrameDecoder;

use crate::error::WireError;

/// `magic`: "EX".
pub const MAGIC: u16 = 0x4558;
/// The protocol version this module speaks.
pub const VERSION: u8 = 1;
/// Bytes of the frame header.
pub const HEADER_LEN: usize = 16;
/// The largest body a frame may declare [our choice]: 1 MiB, room for
/// about 2,000 entries with 255-byte keys and values or tens of thousands of
/// typical ones. Senders split DUMP and SYNC batches to fit (DUMP's `last`
/// flag marks the final chunk); receivers refuse larger frames before
/// buffering them.
pub const MAX_BODY_LEN: usize = 1 << 20;
/// The longest key or value (`len` is one byte).
pub const MAX_KEY_LEN: usize = 255;
/// How often each side PINGs (§4.6 [spec's choice]): 250 ms.
pub const PING_INTERVAL_NS: u64 = 250_000_000;
/// PINGs without a PONG after which the peer is declared dead (§4.6).
pub const PING_MISSES: u32 = 3;

/// Why control bytes could not be decoded or a message could not be encoded.
///
/// Stream-level errors ([`ControlError::is_fatal`]) mean the byte stream has
/// lost frame sync and the connection must be reset; the others concern one
/// frame whose bounds are known, so a [`FrameDecoder`] skips it and goes on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ControlError {
    /// The bytes end before a field does.
    #[error("short: {field} needs {need} bytes, {have} left")]
    Short {
        /// The field being read.
        field: &'static str,
        /// Bytes it needs.
        need: usize,
        /// Bytes left.
        have: usize,
    },
    /// The first two header bytes are not 0x4558.
    #[error("bad magic {0:#06x} (want 0x4558)")]
    BadMagic(u16),
    /// A version this module does not speak.
    #[error("bad version {0} (want 1)")]
    BadVersion(u8),
    /// A type byte that is not in the §4.6 table.
    #[error("unknown message type {0:#04x}")]
    UnknownType(u8),
    /// The header's `length` differs from the body bytes given, or the body
    /// has bytes after its last field.
    #[error("length mismatch: header says {declared} body bytes, the message has {actual}")]
    LengthMismatch {
        /// Body length in the header.
        declared: usize,
        /// Body bytes present (or used by the fields).
        actual: usize,
    },
    /// An item count (or EVENT_FWD's frame length) that cannot fit in what
    /// is left of the body, even at the smallest item size.
    #[error("{field} = {count} items of at least {min_item} bytes exceeds the {remaining} body bytes left")]
    CountExceedsBody {
        /// The count field.
        field: &'static str,
        /// Its value.
        count: u64,
        /// Smallest encoding of one item.
        min_item: usize,
        /// Body bytes left after the count.
        remaining: usize,
    },
    /// A body over [`MAX_BODY_LEN`] (declared by a header, or built).
    #[error("frame body of {0} bytes exceeds the maximum {max}", max = MAX_BODY_LEN)]
    FrameTooLong(usize),
    /// A key or value longer than 255 bytes given to the encoder.
    #[error("{field} of {len} bytes is longer than 255")]
    KeyTooLong {
        /// "key" or "val".
        field: &'static str,
        /// Its length.
        len: usize,
    },
    /// More items than the count field can hold, given to the encoder.
    #[error("{field}: {count} items do not fit the count field")]
    TooManyItems {
        /// The count field.
        field: &'static str,
        /// Items given.
        count: usize,
    },
    /// An enumerated or boolean field with a value outside its set.
    #[error("{field} has undefined value {value}")]
    BadValue {
        /// The field.
        field: &'static str,
        /// The byte found.
        value: u8,
    },
}

impl ControlError {
    /// Whether the error breaks frame sync on a byte stream (bad magic,
    /// version or a length over the maximum): the connection must be reset.
    /// Other errors concern one frame and leave the stream usable.
    pub fn is_fatal(&self) -> bool {
        matches!(
            self,
            ControlError::BadMagic(_) | ControlError::BadVersion(_) | ControlError::FrameTooLong(_)
        )
    }
}

impl From<ControlError> for WireError {
    fn from(e: ControlError) -> Self {
        match e {
            ControlError::Short { .. } => WireError::Truncated,
            ControlError::UnknownType(_) => {
                WireError::Unsupported("unknown ExoPlane control message type")
            }
            ControlError::BadVersion(_) => {
                WireError::Unsupported("unknown ExoPlane control version")
            }
            ControlError::KeyTooLong { .. } | ControlError::TooManyItems { .. } => {
                WireError::OutOfRange("ExoPlane control field")
            }
            _ => WireError::Malformed("ExoPlane control frame"),
        }
    }
}
