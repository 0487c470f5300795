//! [`Session`]: one end of a hub–daemon TCP connection, sans-IO.
//!
//! The caller encodes outgoing messages into frames with
//! [`Session::encode`] and writes them to the socket; it hands what it read
//! to [`Session::push`] (or [`Session::feed`]) and pulls typed messages with
//! [`Session::poll`]. Bytes go through a bounded
//! [`FrameDecoder`], so a peer
//! cannot make the session buffer more than one maximum frame.
//!
//! A frame with valid bounds but a bad body (unknown type, bad value, short
//! field) or one the session cannot use (the wrong direction, a `pdev` out
//! of range) is counted in [`SessionStats`] and skipped: the stream is
//! still in sync. A header that breaks sync (bad magic or version, a length
//! over the maximum) ends the session: [`Session::poll`] returns
//! [`SessionError::LostSync`] from then on and the caller resets the
//! connection.

use std::marker::PhantomData;

use inca_wire::exoplane::control::{ControlError, Frame, FrameDecoder, Message};

use super::{CodecError, DaemonToHub, HubToDaemon};

/// The messages one end receives and sends.
pub trait Direction {
    /// What this end receives.
    type In;
    /// What this end sends.
    type Out;
    /// The received message of a frame.
    fn decode(m: Message) -> Result<Self::In, CodecError>;
    /// The frame message of one to send.
    fn encode(m: &Self::Out) -> Result<Message, CodecError>;
}

/// The hub's end: receives [`DaemonToHub`], sends [`HubToDaemon`].
#[derive(Debug, Clone, Copy, Default)]
pub struct HubEnd;

/// A daemon's end: receives [`HubToDaemon`], sends [`DaemonToHub`].
#[derive(Debug, Clone, Copy, Default)]
pub struct DaemonEnd;

impl Direction for HubEnd {
    type In = DaemonToHub;
    type Out = HubToDaemon;
    fn decode(m: Message) -> Result<DaemonToHub, CodecError> {
        DaemonToHub::from_wire(m)
    }
    fn encode(m: &HubToDaemon) -> Result<Message, CodecError> {
        m.to_wire()
    }
}

impl Direction for DaemonEnd {
    type In = HubToDaemon;
    type Out = DaemonToHub;
    fn decode(m: Message) -> Result<HubToDaemon, CodecError> {
        HubToDaemon::from_wire(m)
    }
    fn encode(m: &DaemonToHub) -> Result<Message, CodecError> {
        m.to_wire()
    }
}

/// The hub's end of a session.
pub type HubSession = Session<HubEnd>;
/// A daemon's end of a session.
pub type DaemonSession = Session<DaemonEnd>;

/// What a session counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SessionStats {
    /// Frames encoded for sending.
    pub frames_out: u64,
    /// Messages that could not be encoded (refused, nothing sent).
    pub encode_errors: u64,
    /// Frames decoded into messages.
    pub frames_in: u64,
    /// Frames skipped for a malformed body or unknown type.
    pub malformed: u64,
    /// Well-formed frames skipped because this end cannot use them (wrong
    /// direction, id out of range).
    pub unusable: u64,
    /// Streams that lost frame sync (0 or 1 per session).
    pub lost_sync: u64,
}

/// Why [`Session::poll`] stopped.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SessionError {
    /// The byte stream lost frame sync; reset the connection.
    #[error("control stream lost frame sync: {0}")]
    LostSync(ControlError),
}

/// One end of a control session; see the module docs.
#[derive(Debug, Clone)]
pub struct Session<D: Direction> {
    decoder: FrameDecoder,
    stats: SessionStats,
    end: PhantomData<D>,
}

impl<D: Direction> Default for Session<D> {
    fn default() -> Self {
        Session {
            decoder: FrameDecoder::new(),
            stats: SessionStats::default(),
            end: PhantomData,
        }
    }
}

impl<D: Direction> Session<D> {
    /// A session with nothing buffered.
    pub fn new() -> Self {
        Self::default()
    }

    /// The counters.
    pub fn stats(&self) -> SessionStats {
        self.stats
    }

    /// Whether the stream lost sync (the connection must be reset).
    pub fn is_lost(&self) -> bool {
        self.decoder.failure().is_some()
    }

    /// The frame bytes of `msg` with `req_id`, or why it cannot be sent.
    pub fn encode(&mut self, req_id: u64, msg: &D::Out) -> Result<Vec<u8>, CodecError> {
        let r = D::encode(msg).and_then(|msg| Ok(Frame { req_id, msg }.encode()?));
        match r {
            Ok(_) => self.stats.frames_out += 1,
            Err(_) => self.stats.encode_errors += 1,
        }
        r
    }

    /// Takes as much of `data` as the decoder has room for and returns how
    /// many bytes it took (0 when full: [`poll`](Self::poll) first).
    pub fn push(&mut self, data: &[u8]) -> usize {
        self.decoder.push(data)
    }

    /// The next message with its `req_id`; `Ok(None)` when more bytes are
    /// needed. Bad frames are counted and skipped.
    pub fn poll(&mut self) -> Result<Option<(u64, D::In)>, SessionError> {
        loop {
            match self.decoder.next_frame() {
                Ok(None) => return Ok(None),
                Ok(Some(f)) => match D::decode(f.msg) {
                    Ok(m) => {
                        self.stats.frames_in += 1;
                        return Ok(Some((f.req_id, m)));
                    }
                    Err(_) => self.stats.unusable += 1,
                },
                Err(e) if e.is_fatal() => {
                    if self.stats.lost_sync == 0 {
                        self.stats.lost_sync = 1;
                    }
                    return Err(SessionError::LostSync(e));
                }
                Err(_) => self.stats.malformed += 1,
            }
        }
    }

    /// Pushes all of `data`, pulling messages into `out` as room is needed;
    /// stops at a loss of sync (the rest of `data` is dropped).
    pub fn feed(
        &mut self,
        mut data: &[u8],
        out: &mut Vec<(u64, D::In)>,
    ) -> Result<(), SessionError> {
        loop {
            let took = self.push(data);
            data = &data[took..];
            let held = self.decoder.buffered();
            while let Some(m) = self.poll()? {
                out.push(m);
            }
            // A full decoder always yields a frame or an error (inca-wire's
            // stream module), so a round that took nothing frees room; the
            // check only guards the loop.
            if data.is_empty() || (took == 0 && self.decoder.buffered() == held) {
                return Ok(());
            }
        }
    }
}
