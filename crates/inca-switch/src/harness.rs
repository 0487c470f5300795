//! A driver for one device on its own, for tests and benchmarks.
//!
//! It keeps the device's timers, fires them in time order as virtual time
//! advances, and records what the device transmits. It is the smallest
//! correct driver of the device contract ([`crate::device`]); the simulator
//! (`inca-sim`) is the general one.

use std::collections::BTreeMap;

use crate::device::{
    device_rng, ControlMessage, Device, DeviceRng, Input, Nanos, Output, PortId, SessionEvent,
    SessionId,
};

/// A frame a device transmitted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transmitted {
    /// When transmission starts.
    pub at: Nanos,
    /// The port.
    pub port: PortId,
    /// The frame.
    pub frame: Vec<u8>,
}

/// Drives one device in virtual time. See the module documentation.
pub struct Harness<D: Device> {
    /// The device under test.
    pub device: D,
    rng: DeviceRng,
    now: Nanos,
    /// Pending timers: token → time.
    timers: BTreeMap<u64, Nanos>,
    out: Vec<Output>,
    /// Frames transmitted so far (tests take them with [`Harness::take`]).
    pub transmitted: Vec<Transmitted>,
    /// Control messages the device sent out.
    pub messages: Vec<ControlMessage>,
    /// Messages the device sent on control sessions: (time, session, body).
    pub session_sent: Vec<(Nanos, SessionId, Vec<u8>)>,
    /// When false, transmitted frames are counted but not kept (benchmarks).
    pub keep_frames: bool,
    /// Number of frames transmitted.
    pub transmit_count: u64,
}

impl<D: Device> Harness<D> {
    /// Starts `device` at time 0 with an RNG from `seed`.
    pub fn new(mut device: D, seed: u64) -> Self {
        let mut out = Vec::new();
        let mut rng = device_rng(seed, 0);
        device.start(0, &mut rng, &mut out);
        let mut h = Harness {
            device,
            rng,
            now: 0,
            timers: BTreeMap::new(),
            out: Vec::new(),
            transmitted: Vec::new(),
            messages: Vec::new(),
            session_sent: Vec::new(),
            keep_frames: true,
            transmit_count: 0,
        };
        h.collect(out);
        h
    }

    /// The current virtual time.
    pub fn now(&self) -> Nanos {
        self.now
    }

    fn collect(&mut self, mut out: Vec<Output>) {
        for o in out.drain(..) {
            match o {
                Output::Transmit { at, port, frame } => {
                    assert!(at >= self.now, "device transmitted in the past");
                    self.transmit_count += 1;
                    if self.keep_frames {
                        self.transmitted.push(Transmitted { at, port, frame });
                    }
                }
                Output::Timer { at, token } => {
                    assert!(at >= self.now, "device set a timer in the past");
                    self.timers.insert(token, at);
                }
                Output::Control(m) => self.messages.push(m),
                Output::Session { at, session, body } => {
                    assert!(at >= self.now, "device sent on a session in the past");
                    self.session_sent.push((at, session, body));
                }
            }
        }
        self.out = out;
    }

    fn input(&mut self, input: Input) {
        let mut out = std::mem::take(&mut self.out);
        self.device.handle(self.now, input, &mut self.rng, &mut out);
        self.collect(out);
    }

    /// Advances virtual time to `t`, firing every timer due by then in time
    /// order.
    pub fn advance_to(&mut self, t: Nanos) {
        loop {
            let next = self.timers.iter().map(|(&token, &at)| (at, token)).min();
            match next {
                Some((at, token)) if at <= t => {
                    self.timers.remove(&token);
                    self.now = self.now.max(at);
                    self.input(Input::Timer { token });
                }
                _ => break,
            }
        }
        self.now = self.now.max(t);
    }

    /// Delivers `frame` on `port` at time `at` (after firing earlier timers).
    pub fn send(&mut self, at: Nanos, port: PortId, frame: Vec<u8>) {
        self.advance_to(at);
        self.input(Input::Frame { port, frame });
    }

    /// Delivers a control message at time `at`.
    pub fn control(&mut self, at: Nanos, message: ControlMessage) {
        self.advance_to(at);
        self.input(Input::Control(message));
    }

    /// Hands the device a control-session event at time `at`.
    pub fn session(&mut self, at: Nanos, event: SessionEvent) {
        self.advance_to(at);
        self.input(Input::Session(event));
    }

    /// Tells the device its link on `port` went down or up at time `at`.
    pub fn link(&mut self, at: Nanos, port: PortId, up: bool) {
        self.advance_to(at);
        self.input(Input::LinkState { port, up });
    }

    /// Crashes and restarts the device at time `at`: its pending timers are
    /// forgotten.
    pub fn restart(&mut self, at: Nanos) {
        self.advance_to(at);
        self.timers.clear();
        let mut out = std::mem::take(&mut self.out);
        self.device.restart(self.now, &mut self.rng, &mut out);
        self.collect(out);
    }

    /// Takes the frames transmitted so far.
    pub fn take(&mut self) -> Vec<Transmitted> {
        std::mem::take(&mut self.transmitted)
    }
}
