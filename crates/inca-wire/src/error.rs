//! The one error type shared by every header view, builder and checksum helper.

/// Why a buffer could not be parsed or a header could not be emitted.
///
/// Parsers never panic: every short, inconsistent or unsupported input ends
/// up here, so callers can count and drop malformed frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    /// The buffer ends before the header, or before a length the header declares.
    #[error("truncated: buffer shorter than the header or its declared length")]
    Truncated,
    /// A field holds a value that makes the header meaningless (e.g. IHL < 5).
    #[error("malformed header: {0}")]
    Malformed(&'static str),
    /// A checksum or CRC does not match the bytes it covers.
    #[error("bad checksum")]
    BadChecksum,
    /// Well-formed, but outside what this crate models (e.g. an IPv4 fragment
    /// for the ICRC, an unknown RoCE opcode).
    #[error("unsupported: {0}")]
    Unsupported(&'static str),
    /// A value given to an emitter does not fit its wire field.
    #[error("value out of range for its field: {0}")]
    OutOfRange(&'static str),
    /// The output buffer given to an emitter is too small.
    #[error("output buffer too small")]
    BufferTooSmall,
}

/// Shorthand used throughout the crate.
pub type Result<T> = core::result::Result<T, WireError>;
