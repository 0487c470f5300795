//! The device contract: every device in inca is a sans-IO state machine.
//!
//! A device is handed one [`Input`] at a time — a frame that arrived on one of
//! its ports, a timer it set earlier that has now fired, a control message or
//! an event of one of its control sessions — together with the current time
//! in integer nanoseconds. It answers by pushing [`Output`]s: frames to
//! transmit on its ports, timers to set and messages to send on a session. It never
//! reads a clock, a socket or a global RNG; randomness comes from the
//! [`DeviceRng`] the driver seeded and handed to it. The simulator and the live
//! runtime are two drivers of the same device code (DESIGN.md, principle 1).
//!
//! Rules a driver relies on:
//! - Every output time is `>= now` of the call that produced it. Drivers
//!   check this one: an output in the past is carried out at `now` and
//!   counted as a contract violation (it fails a campaign), never clamped
//!   silently.
//! - Frames a device transmits on one port carry non-decreasing times.
//! - A timer is identified by the device's own `token`; setting a timer with a
//!   token that is already pending replaces the pending one (the driver keeps
//!   at most one pending timer per token). Drivers deliver a fired timer with
//!   [`Input::Timer`] at exactly its time in simulation, as soon as possible
//!   after it in live mode.
//!
//! Control sessions ([`SessionId`], [`SessionEvent`]) are reliable, ordered,
//! message-oriented channels between two nodes over a management network
//! (TCP between `inca node` processes live; a modelled stream in the
//! simulator). The driver, not the device, declares them and keeps them up:
//! a device learns a session is usable from [`SessionEvent::Up`], gets the
//! peer's messages in the order they were sent, exactly once, and hears of a
//! reset ([`SessionEvent::Reset`]) at both ends, after which nothing it sent
//! before is delivered. A message sent while the session is not up, or that
//! does not fit the bounded send buffer, is refused
//! ([`SessionEvent::Refused`]), never dropped silently.

use rand::SeedableRng;

/// Time in integer nanoseconds since the start of a run.
pub type Nanos = u64;

/// One microsecond, in [`Nanos`].
pub const MICROS: Nanos = 1_000;
/// One millisecond, in [`Nanos`].
pub const MILLIS: Nanos = 1_000_000;
/// One second, in [`Nanos`].
pub const SECONDS: Nanos = 1_000_000_000;

/// A device's port number, counted from 0.
pub type PortId = u16;

/// The per-device random number generator. Seeded by the driver from the run
/// seed, so a run is reproducible bit for bit.
pub type DeviceRng = rand_chacha::ChaCha8Rng;

/// Makes a device RNG from a run seed and a device index, so that each device
/// gets an independent stream that does not change when devices are added
/// after it.
pub fn device_rng(run_seed: u64, device_index: u64) -> DeviceRng {
    let mut rng = DeviceRng::seed_from_u64(run_seed);
    rng.set_stream(device_index);
    rng
}

/// A message between a device and whatever controls it from outside the data
/// path (an experiment script, a management network, a test).
///
/// The payload is opaque bytes so the contract stays independent of any one
/// system; each system documents its own control messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ControlMessage {
    /// Which kind of message this is, in the receiving device's vocabulary.
    pub kind: u32,
    /// The message body.
    pub body: Vec<u8>,
}

/// A control session, by the number its declaration gives it (both ends
/// use the same number; see the module documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub struct SessionId(pub u32);

impl std::fmt::Display for SessionId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "session {}", self.0)
    }
}

/// Bound on one session message's body, both drivers (a larger one is
/// refused): 16 MiB, far above any control message.
pub const SESSION_MESSAGE_LIMIT: usize = 16 << 20;

/// Something that happened on one of a device's control sessions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionEvent {
    /// The session is established: messages can be sent on it.
    Up {
        /// The session.
        session: SessionId,
    },
    /// A message from the peer, in the order the peer sent it.
    Message {
        /// The session.
        session: SessionId,
        /// The message body.
        body: Vec<u8>,
    },
    /// The session was reset (cut too long, reset by a fault, the peer
    /// crashed, the connection dropped). Both ends hear it. Messages this
    /// end had sent and the peer had not yet received are lost: `lost`
    /// counts them. The driver re-establishes the session and says so with
    /// [`SessionEvent::Up`].
    Reset {
        /// The session.
        session: SessionId,
        /// This end's messages lost with the reset.
        lost: u64,
    },
    /// A message this device sent was not accepted: the session is not up,
    /// unknown here, the send buffer is full, or the body is over
    /// [`SESSION_MESSAGE_LIMIT`].
    Refused {
        /// The session.
        session: SessionId,
        /// The refused message's length.
        len: usize,
        /// Why.
        reason: Refusal,
    },
}

impl SessionEvent {
    /// The session the event is about.
    pub fn session(&self) -> SessionId {
        match self {
            SessionEvent::Up { session }
            | SessionEvent::Message { session, .. }
            | SessionEvent::Reset { session, .. }
            | SessionEvent::Refused { session, .. } => *session,
        }
    }
}

/// Why a session message was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// No session with that id at this node.
    Unknown,
    /// The session is not up (not yet established, or reset).
    Down,
    /// The send buffer has no room for it.
    BufferFull,
    /// The body is over [`SESSION_MESSAGE_LIMIT`].
    TooLarge,
}

/// What a device is handed.
#[derive(Debug)]
pub enum Input {
    /// An Ethernet frame (without FCS) arrived on `port`.
    Frame { port: PortId, frame: Vec<u8> },
    /// A timer this device set with `token` has fired.
    Timer { token: u64 },
    /// A control message from outside the data path.
    Control(ControlMessage),
    /// The link on `port` went down (`up == false`) or came back up.
    LinkState { port: PortId, up: bool },
    /// Something happened on one of the device's control sessions.
    Session(SessionEvent),
}

/// What a device answers with.
#[derive(Debug, PartialEq, Eq)]
pub enum Output {
    /// Start transmitting `frame` on `port` at time `at`.
    Transmit {
        at: Nanos,
        port: PortId,
        frame: Vec<u8>,
    },
    /// Deliver [`Input::Timer`] with `token` at time `at`.
    Timer { at: Nanos, token: u64 },
    /// A control message for whoever drives the device (an experiment, a test).
    Control(ControlMessage),
    /// Send `body` to the peer on `session` at time `at` (after what the
    /// device sent on it before).
    Session {
        at: Nanos,
        session: SessionId,
        body: Vec<u8>,
    },
}

/// Appends the output `make` builds to `out`, built in place.
///
/// `out.push(Output::Transmit { .. })` builds the output in a temporary
/// with narrow stores and copies it into the vector with wide loads, which
/// the CPU cannot forward from the narrow stores: on the per-packet path
/// that stall was a fifth of the NAT fast path's time (docs/performance.md).
/// Writing the value straight into the vector's spare slot avoids the copy.
#[inline(always)]
pub fn push_output(out: &mut Vec<Output>, make: impl FnOnce() -> Output) {
    out.reserve(1);
    let slot = out.spare_capacity_mut();
    slot[0].write(make());
    // SAFETY: `reserve(1)` left room for one element past `len`, and
    // `slot[0]` (that element) was just initialised.
    unsafe { out.set_len(out.len() + 1) };
}

/// A sans-IO device. See the module documentation for the contract.
pub trait Device {
    /// Boots the device at time `now` (called once by the driver, before any
    /// input), pushing its first outputs (timers, say). `rng` is the device's
    /// RNG, the same stream [`Device::handle`] gets.
    fn start(&mut self, _now: Nanos, _rng: &mut DeviceRng, _out: &mut Vec<Output>) {}

    /// Handles one input at time `now`, pushing any outputs onto `out`.
    fn handle(&mut self, now: Nanos, input: Input, rng: &mut DeviceRng, out: &mut Vec<Output>);

    /// Handles a frame that arrived on `port`: exactly
    /// `handle(now, Input::Frame { port, frame }, rng, out)`, which is what
    /// it does unless a device overrides it. Drivers deliver frames through
    /// it so that a device on the per-packet path (the switch) can take the
    /// frame without an [`Input`] being built and moved: those moves cost
    /// store-forwarding stalls (docs/performance.md).
    fn handle_frame(
        &mut self,
        now: Nanos,
        port: PortId,
        frame: Vec<u8>,
        rng: &mut DeviceRng,
        out: &mut Vec<Output>,
    ) {
        self.handle(now, Input::Frame { port, frame }, rng, out)
    }

    /// Loses all volatile state, as a device does when it crashes and restarts
    /// (registers and tables cleared, queues emptied, timers forgotten).
    /// Persistent configuration (the loaded program, the profile) is kept.
    /// Outputs the restarted device produces at time `now` (as [`Device::start`]
    /// does) go onto `out`. `rng` is the device's RNG, which a crash does not
    /// rewind: a restarted device draws fresh values (initial sequence
    /// numbers, say), not its first boot's again.
    fn restart(&mut self, now: Nanos, rng: &mut DeviceRng, out: &mut Vec<Output>);
}

/// A boxed device is a device (drivers hold devices chosen at run time as
/// `Box<dyn ...>`).
impl<D: Device + ?Sized> Device for Box<D> {
    fn start(&mut self, now: Nanos, rng: &mut DeviceRng, out: &mut Vec<Output>) {
        (**self).start(now, rng, out)
    }

    fn handle(&mut self, now: Nanos, input: Input, rng: &mut DeviceRng, out: &mut Vec<Output>) {
        (**self).handle(now, input, rng, out)
    }

    fn handle_frame(
        &mut self,
        now: Nanos,
        port: PortId,
        frame: Vec<u8>,
        rng: &mut DeviceRng,
        out: &mut Vec<Output>,
    ) {
        (**self).handle_frame(now, port, frame, rng, out)
    }

    fn restart(&mut self, now: Nanos, rng: &mut DeviceRng, out: &mut Vec<Output>) {
        (**self).restart(now, rng, out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::RngCore;

    #[test]
    fn device_rngs_are_reproducible_and_independent() {
        let a1 = device_rng(7, 0).next_u64();
        let a2 = device_rng(7, 0).next_u64();
        let b = device_rng(7, 1).next_u64();
        assert_eq!(a1, a2);
        assert_ne!(a1, b);
    }
}
