//! [`FrameDecoder`]: control frames out of a TCP byte stream, sans-IO.
//!
//! The caller pushes what it read from the socket and pulls whole frames.
//! A frame may arrive in any number of reads, and a read may hold several
//! frames. The decoder holds at most [`DECODER_CAPACITY`] unconsumed bytes:
//! [`FrameDecoder::push`] takes only what fits and says how much, so the
//! caller stops reading from the socket (TCP flow control pushes back on
//! the sender) until it has pulled frames. Because the capacity holds one
//! frame of the largest allowed size, a full buffer always yields a frame
//! or an error: the decoder cannot wedge.
//!
//! Errors: a header that breaks sync (bad magic or version, a length over
//! [`MAX_BODY_LEN`]) poisons the decoder: every later pull returns the same
//! error and the caller resets the connection. A frame with valid bounds
//! but an unknown type or bad body is consumed and its error returned once;
//! the caller counts it and pulls again.

use super::{ControlError, Frame, FrameHeader, Message, HEADER_LEN, MAX_BODY_LEN};

/// The most bytes a decoder buffers: one frame of the largest size.
pub const DECODER_CAPACITY: usize = HEADER_LEN + MAX_BODY_LEN;

/// Splits a byte stream into control frames. See the module docs.
#[derive(Debug, Clone, Default)]
pub struct FrameDecoder {
    buf: Vec<u8>,
    /// Bytes of `buf` before this are consumed.
    start: usize,
    /// Set on a stream-level error; returned by every later pull.
    failed: Option<ControlError>,
}

impl FrameDecoder {
    /// An empty decoder.
    pub fn new() -> Self {
        Self::default()
    }

    /// Unconsumed bytes held.
    pub fn buffered(&self) -> usize {
        self.buf.len() - self.start
    }

    /// Bytes [`push`](Self::push) would take now.
    pub fn room(&self) -> usize {
        DECODER_CAPACITY - self.buffered()
    }

    /// The stream-level error that stopped the decoder, if any.
    pub fn failure(&self) -> Option<&ControlError> {
        self.failed.as_ref()
    }

    /// Appends as much of `data` as fits and returns how many bytes it took
    /// (0 when full: pull frames first). A failed decoder takes everything
    /// and drops it, so a caller draining a socket before closing it does
    /// not stall.
    pub fn push(&mut self, data: &[u8]) -> usize {
        if self.failed.is_some() {
            return data.len();
        }
        let take = data.len().min(self.room());
        // Compact when half the buffer is consumed or the bytes would not
        // fit behind the consumed part: amortised O(1) per byte, and the
        // vector never grows past the capacity.
        if self.start > 0
            && (self.start >= self.buffered() || self.buf.len() + take > DECODER_CAPACITY)
        {
            self.buf.drain(..self.start);
            self.start = 0;
        }
        self.buf.extend_from_slice(&data[..take]);
        take
    }

    /// The next whole frame, `Ok(None)` if more bytes are needed, or the
    /// error of a malformed frame (see the module docs for which are fatal).
    pub fn next_frame(&mut self) -> Result<Option<Frame>, ControlError> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        let avail = &self.buf[self.start..];
        if avail.len() < HEADER_LEN {
            return Ok(None);
        }
        let h = match FrameHeader::new_checked(avail) {
            Ok(h) => h,
            Err(e) => {
                self.failed = Some(e.clone());
                self.buf = Vec::new();
                self.start = 0;
                return Err(e);
            }
        };
        let len = h.frame_len();
        if avail.len() < len {
            return Ok(None);
        }
        let (t, req_id) = (h.msg_type(), h.req_id());
        let body = &avail[HEADER_LEN..len];
        let msg = t.and_then(|t| Message::decode(t, body));
        self.start += len;
        if self.start == self.buf.len() {
            self.buf.clear();
            self.start = 0;
        }
        msg.map(|msg| Some(Frame { req_id, msg }))
    }
}
