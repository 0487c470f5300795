//! A driver for one device on its own, for tests: a one-node
//! [`crate::fabric`] whose every port is open, recording what the device
//! transmits and the control and session messages it sends. It fires the device's
//! timers in time order as virtual time advances, and panics when the
//! device breaks the contract (an output in the past): in a test that is
//! the bug to see. The simulator (`inca-sim`) is the general driver.

use crate::device::{ControlMessage, Device, Nanos, PortId, SessionEvent, SessionId};
use crate::fabric::Core;

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
    core: Core,
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
    pub fn new(device: D, seed: u64) -> Self {
        let mut core = Core::new(seed);
        core.add_node();
        let mut h = Harness {
            device,
            core,
            transmitted: Vec::new(),
            messages: Vec::new(),
            session_sent: Vec::new(),
            keep_frames: true,
            transmit_count: 0,
        };
        h.step(|core, dev| core.start(dev, 0));
        h
    }

    /// The current virtual time.
    pub fn now(&self) -> Nanos {
        self.core.now()
    }

    /// Runs `f` on the fabric, then moves what the device sent into the
    /// public fields.
    fn step(&mut self, f: impl FnOnce(&mut Core, &mut [D])) {
        self.core.keep_egress = self.keep_frames;
        f(&mut self.core, std::slice::from_mut(&mut self.device));
        assert!(
            self.core.stats.contract_violations == 0,
            "device transmitted or set a timer in the past"
        );
        self.transmit_count = self.core.stats.left;
        self.transmitted
            .extend(self.core.egress.drain(..).map(|s| Transmitted {
                at: s.at,
                port: s.port,
                frame: s.frame,
            }));
        self.messages
            .extend(self.core.messages.drain(..).map(|(_, _, m)| m));
        self.session_sent.extend(
            self.core
                .session_sent
                .drain(..)
                .map(|s| (s.at, s.session, s.body)),
        );
    }

    /// Advances virtual time to `t`, firing every timer due by then in time
    /// order.
    pub fn advance_to(&mut self, t: Nanos) {
        self.step(|core, dev| core.run_until(dev, t));
    }

    /// Delivers `frame` on `port` at time `at` (after firing earlier timers).
    pub fn send(&mut self, at: Nanos, port: PortId, frame: Vec<u8>) {
        self.step(|core, dev| core.inject(dev, at, 0, port, frame));
    }

    /// Delivers a control message at time `at`.
    pub fn control(&mut self, at: Nanos, message: ControlMessage) {
        self.step(|core, dev| core.control(dev, at, 0, message));
    }

    /// Hands the device a control-session event at time `at`.
    pub fn session(&mut self, at: Nanos, event: SessionEvent) {
        self.step(|core, dev| core.session(dev, at, 0, event));
    }

    /// Tells the device its link on `port` went down or up at time `at`.
    pub fn link(&mut self, at: Nanos, port: PortId, up: bool) {
        self.step(|core, dev| core.link(dev, at, 0, port, up));
    }

    /// Crashes and restarts the device at time `at`: its pending timers are
    /// forgotten.
    pub fn restart(&mut self, at: Nanos) {
        self.step(|core, dev| core.restart(dev, at, 0));
    }

    /// Takes the frames transmitted so far.
    pub fn take(&mut self) -> Vec<Transmitted> {
        std::mem::take(&mut self.transmitted)
    }
}
