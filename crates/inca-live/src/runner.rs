//! The live driver: one sans-IO device, its ports bound to real transports,
//! wall-clock time.
//!
//! Time is nanoseconds since the runner started (a monotonic clock). Each
//! step fires the timers that are due, hands the device every frame its
//! ports have received (in batches), and sends what the device transmitted.
//! A transmission the device schedules for later is held until its time —
//! unless it is due within `slack` (100 µs by default): the model's
//! sub-microsecond pipeline latencies are below what a process can time, so
//! those frames go at once. When nothing is due, the runner sleeps in
//! `poll(2)` on the ports until a frame arrives or the next timer is near.
//!
//! Every `link_poll` the runner asks each port whether its link is up
//! ([`Port::link_up`]) and hands every change to the device as
//! `Input::LinkState`, as the simulator does when a link fails: a router
//! then withdraws the dead next hop after its detection delay. Links start
//! up (the simulator's assumption); a port whose link is down when the
//! runner starts is reported at the first poll.
//!
//! A runner given control sessions ([`crate::session`]) polls their TCP
//! connections each step and hands their events to the device as
//! `Input::Session`; a message the device sends on a session is written at
//! once (its time is at most a CPU handler's cost away, below what the
//! runner can time, as with `slack`), and a refusal comes back as an
//! event in the next step.
//!
//! A port given a link model ([`Runner::with_links`], a scenario link's
//! `rate`, `delay`, `loss`… in the node's configuration) sends through it
//! ([`crate::link`]): what the device transmits on that port is offered to
//! the port's channel, dropped or held until the channel says it arrives,
//! and sent then. A port may also model what its peer sends
//! ([`Runner::with_ingress_links`], for a peer that is not a runner): what
//! it receives is offered to that channel and handed to the device when
//! due. A port without either pays nothing per frame.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::Instant;

use inca_switch::device::{
    device_rng, ControlMessage, Device, DeviceRng, Input, Nanos, Output, PortId, Refusal,
    SessionEvent,
};

use crate::link::LiveLink;
use crate::port::{Port, BATCH};
use crate::session::LiveSessions;

/// Bound on frames held for a later transmission; more are dropped (counted).
pub const DELAYED_LIMIT: usize = 1 << 16;
/// Bound on control messages kept from the device.
pub const MESSAGE_LIMIT: usize = 1 << 12;

/// A transmission held for later: (time, order, port, frame).
type Held = Reverse<(Nanos, u64, PortId, Vec<u8>)>;

/// How the runner behaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunnerConfig {
    /// Transmissions due within this much are sent at once.
    pub slack: Nanos,
    /// Longest sleep in `poll(2)` when idle (so a stop request is seen).
    pub max_sleep_ms: i32,
    /// Never sleep: spin on the ports (lowest latency, one core at 100%).
    pub busy_poll: bool,
    /// How often each port's link state is polled (0: never; polling stops
    /// by itself when no port can report its link, as with UDP ports).
    pub link_poll: Nanos,
}

impl Default for RunnerConfig {
    fn default() -> Self {
        RunnerConfig {
            slack: 100_000,
            max_sleep_ms: 10,
            busy_poll: false,
            // [our choice] 5 ms: a sysfs read per port, far below the
            // routers' detection delays (tens of ms), cheap at this rate.
            link_poll: 5_000_000,
        }
    }
}

/// Counters of the runner itself.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RunnerStats {
    /// Frames handed to the device.
    pub frames_in: u64,
    /// Frames the device transmitted.
    pub frames_out: u64,
    /// Frames sent on a port the device does not have here.
    pub no_port_drops: u64,
    /// Frames dropped because too many were held for later.
    pub delayed_drops: u64,
    /// Timers fired.
    pub timers: u64,
    /// Link-state changes handed to the device.
    pub link_changes: u64,
    /// Outputs that broke the device contract ([`inca_switch::device`]): a
    /// transmission or a timer before the `now` the device was called with.
    /// Carried out at once (as the simulator does, at `now`) and counted.
    pub contract_violations: u64,
    /// Invariant failures counted in this process
    /// ([`inca_switch::invariant`]; live mode counts instead of panicking).
    pub invariant_violations: u64,
}

/// The live driver of one device. See the module documentation.
pub struct Runner<D: Device> {
    device: D,
    ports: Vec<Box<dyn Port>>,
    config: RunnerConfig,
    rng: DeviceRng,
    start: Instant,
    started: bool,
    /// Pending timers: token → time.
    timers: BTreeMap<u64, Nanos>,
    /// Transmissions held for later: (time, order, port, frame).
    delayed: BinaryHeap<Held>,
    seq: u64,
    /// Frames to send, per port.
    outbox: Vec<Vec<Vec<u8>>>,
    out: Vec<Output>,
    rx: Vec<Vec<u8>>,
    control: mpsc::Receiver<ControlMessage>,
    control_tx: mpsc::Sender<ControlMessage>,
    /// Control messages the device sent out (most recent last; bounded).
    pub messages: Vec<(Nanos, ControlMessage)>,
    stats: RunnerStats,
    /// What the device was last told about each port's link.
    link_up: Vec<bool>,
    /// When the links are next polled.
    next_link_poll: Nanos,
    /// The node's control sessions, if it has any.
    sessions: Option<LiveSessions>,
    /// Session events waiting for the device (refusals, polled events).
    session_events: Vec<SessionEvent>,
    /// Each port's link model, if any (empty: none has one).
    links: Vec<Option<LiveLink>>,
    /// Each port's model of what its peer sends, if any (empty: none).
    ingress: Vec<Option<LiveLink>>,
    /// Frames a link model passes on in this step (reused).
    link_out: Vec<Vec<u8>>,
}

impl<D: Device> Runner<D> {
    /// A runner for `device` with `ports` (port i of the device is
    /// `ports[i]`) and an RNG from `seed`.
    pub fn new(device: D, ports: Vec<Box<dyn Port>>, seed: u64, config: RunnerConfig) -> Self {
        let (control_tx, control) = mpsc::channel();
        Runner {
            device,
            outbox: (0..ports.len())
                .map(|_| Vec::with_capacity(BATCH))
                .collect(),
            ports,
            config,
            rng: device_rng(seed, 0),
            start: Instant::now(),
            started: false,
            timers: BTreeMap::new(),
            delayed: BinaryHeap::new(),
            seq: 0,
            out: Vec::new(),
            rx: Vec::with_capacity(BATCH),
            control,
            control_tx,
            messages: Vec::new(),
            stats: RunnerStats::default(),
            link_up: Vec::new(),
            next_link_poll: 0,
            sessions: None,
            session_events: Vec::new(),
            links: Vec::new(),
            ingress: Vec::new(),
            link_out: Vec::with_capacity(BATCH),
        }
    }

    /// The same runner with link models: `links[i]` on port `i`'s egress
    /// (`None`, or a port past the end: none).
    pub fn with_links(mut self, links: Vec<Option<LiveLink>>) -> Self {
        self.links = self.per_port(links);
        self
    }

    /// The same runner with models of what each port's peer sends:
    /// `links[i]` on port `i`'s ingress.
    pub fn with_ingress_links(mut self, links: Vec<Option<LiveLink>>) -> Self {
        self.ingress = self.per_port(links);
        self
    }

    /// `links` cut to the ports, or empty if none has a model (so the
    /// per-step loops over them cost nothing).
    fn per_port(&self, mut links: Vec<Option<LiveLink>>) -> Vec<Option<LiveLink>> {
        links.truncate(self.ports.len());
        if links.iter().all(Option::is_none) {
            links.clear();
        }
        links
    }

    /// Port `i`'s link model, if it has one.
    pub fn link(&self, port: usize) -> Option<&LiveLink> {
        self.links.get(port).and_then(Option::as_ref)
    }

    /// Port `i`'s model of what its peer sends, if it has one.
    pub fn ingress_link(&self, port: usize) -> Option<&LiveLink> {
        self.ingress.get(port).and_then(Option::as_ref)
    }

    /// The same runner with control sessions.
    pub fn with_sessions(mut self, sessions: LiveSessions) -> Self {
        self.sessions = Some(sessions);
        self
    }

    /// The control sessions, if any.
    pub fn sessions(&self) -> Option<&LiveSessions> {
        self.sessions.as_ref()
    }

    /// A sender for control messages to the device (from another thread).
    pub fn control_sender(&self) -> mpsc::Sender<ControlMessage> {
        self.control_tx.clone()
    }

    /// The device.
    pub fn device(&self) -> &D {
        &self.device
    }

    /// The ports.
    pub fn ports(&self) -> &[Box<dyn Port>] {
        &self.ports
    }

    /// Runner counters.
    pub fn stats(&self) -> RunnerStats {
        RunnerStats {
            invariant_violations: inca_switch::invariant::violations(),
            ..self.stats
        }
    }

    /// Nanoseconds since the runner started.
    pub fn now(&self) -> Nanos {
        self.start.elapsed().as_nanos() as Nanos
    }

    fn apply(&mut self, now: Nanos) {
        let mut out = std::mem::take(&mut self.out);
        for o in out.drain(..) {
            match o {
                Output::Transmit { at, port, frame } => {
                    self.stats.frames_out += 1;
                    if at < now {
                        self.stats.contract_violations += 1;
                    }
                    if usize::from(port) >= self.outbox.len() {
                        self.stats.no_port_drops += 1;
                    } else if at <= now + self.config.slack {
                        self.outbox[usize::from(port)].push(frame);
                    } else if self.delayed.len() < DELAYED_LIMIT {
                        self.seq += 1;
                        self.delayed.push(Reverse((at, self.seq, port, frame)));
                    } else {
                        self.stats.delayed_drops += 1;
                    }
                }
                Output::Timer { at, token } => {
                    if at < now {
                        self.stats.contract_violations += 1;
                    }
                    self.timers.insert(token, at);
                }
                Output::Control(m) => {
                    if self.messages.len() >= MESSAGE_LIMIT {
                        self.messages.remove(0);
                    }
                    self.messages.push((now, m));
                }
                Output::Session { at, session, body } => {
                    if at < now {
                        self.stats.contract_violations += 1;
                    }
                    let result = match &mut self.sessions {
                        Some(s) => s.send(session, &body),
                        None => Err(Refusal::Unknown),
                    };
                    if let Err(reason) = result {
                        self.session_events.push(SessionEvent::Refused {
                            session,
                            len: body.len(),
                            reason,
                        });
                    }
                }
            }
        }
        self.out = out;
    }

    fn input(&mut self, now: Nanos, input: Input) {
        let mut out = std::mem::take(&mut self.out);
        self.device.handle(now, input, &mut self.rng, &mut out);
        self.out = out;
        self.apply(now);
    }

    /// Polls every port's link and tells the device about changes.
    fn poll_links(&mut self, now: Nanos) -> bool {
        if self.config.link_poll == 0 || now < self.next_link_poll {
            return false;
        }
        self.next_link_poll = now + self.config.link_poll;
        if self.link_up.len() != self.ports.len() {
            self.link_up = vec![true; self.ports.len()];
        }
        let mut changed = false;
        let mut any = false;
        for p in 0..self.ports.len() {
            let Some(up) = self.ports[p].link_up() else {
                continue;
            };
            any = true;
            if up != self.link_up[p] {
                self.link_up[p] = up;
                self.stats.link_changes += 1;
                changed = true;
                self.input(
                    now,
                    Input::LinkState {
                        port: p as PortId,
                        up,
                    },
                );
            }
        }
        if !any {
            // No port can tell (all UDP): stop asking, and stop waking up
            // for it.
            self.config.link_poll = 0;
        }
        changed
    }

    /// One round: due timers, received frames, control messages, sends.
    /// Returns whether anything happened.
    pub fn step(&mut self) -> io::Result<bool> {
        let now = self.now();
        if !self.started {
            self.started = true;
            // Live, a broken invariant is counted (and reported by the
            // node), not a reason to stop forwarding.
            inca_switch::invariant::set_strict(false);
            let mut out = std::mem::take(&mut self.out);
            self.device.start(now, &mut self.rng, &mut out);
            self.out = out;
            self.apply(now);
        }
        let mut worked = self.poll_links(now);
        // Timers due, earliest first.
        while let Some((&token, &at)) = self.timers.iter().min_by_key(|(_, &at)| at) {
            if at > now {
                break;
            }
            self.timers.remove(&token);
            self.stats.timers += 1;
            self.input(now, Input::Timer { token });
            worked = true;
        }
        while let Ok(m) = self.control.try_recv() {
            self.input(now, Input::Control(m));
            worked = true;
        }
        if let Some(s) = &mut self.sessions {
            s.poll(now, &mut self.session_events);
        }
        // Events the device's answers add are handled in the next step.
        for e in std::mem::take(&mut self.session_events) {
            self.input(now, Input::Session(e));
            worked = true;
        }
        if let Some(s) = &mut self.sessions {
            // Write what the device just sent.
            s.poll(now, &mut self.session_events);
        }
        for p in 0..self.ports.len() {
            self.rx.clear();
            let n = self.ports[p].recv_batch(&mut self.rx, BATCH)?;
            if n > 0 {
                worked = true;
            }
            if let Some(Some(link)) = self.ingress.get_mut(p) {
                // What arrived joins the channel; what is due goes on.
                let mut due = std::mem::take(&mut self.link_out);
                link.release(now, self.config.slack, &mut due);
                for frame in self.rx.drain(..) {
                    link.offer(now, frame, self.config.slack, &mut due);
                }
                std::mem::swap(&mut self.rx, &mut due);
                self.link_out = due;
                worked |= !self.rx.is_empty();
            }
            // Take the batch out (the device needs `self`), then put the
            // empty vector back so its capacity is kept.
            let mut frames = std::mem::take(&mut self.rx);
            for frame in frames.drain(..) {
                self.stats.frames_in += 1;
                self.input(
                    now,
                    Input::Frame {
                        port: p as PortId,
                        frame,
                    },
                );
            }
            self.rx = frames;
        }
        let now = self.now();
        while let Some(Reverse((at, _, _, _))) = self.delayed.peek() {
            if *at > now + self.config.slack {
                break;
            }
            let Some(Reverse((_, _, port, frame))) = self.delayed.pop() else {
                break;
            };
            self.outbox[usize::from(port)].push(frame);
        }
        self.through_links(now);
        for (port, batch) in self.ports.iter_mut().zip(self.outbox.iter_mut()) {
            if !batch.is_empty() {
                worked = true;
                port.send_batch(batch)?;
            }
        }
        Ok(worked)
    }

    /// Passes each linked port's outbox through its link model: what the
    /// device sent is offered, what is due (of it or held before) stays.
    fn through_links(&mut self, now: Nanos) {
        let slack = self.config.slack;
        for (link, batch) in self.links.iter_mut().zip(self.outbox.iter_mut()) {
            let Some(link) = link else { continue };
            let mut out = std::mem::take(&mut self.link_out);
            link.release(now, slack, &mut out);
            for frame in batch.drain(..) {
                link.offer(now, frame, slack, &mut out);
            }
            // `batch` is empty: swap so both keep their capacity.
            std::mem::swap(batch, &mut out);
            self.link_out = out;
        }
    }

    /// When the runner next has something to do on its own (a timer, a
    /// held transmission, a frame a link model holds), if anything.
    fn next_due(&self) -> Option<Nanos> {
        let mut t = self.timers.values().copied().min();
        let links = self.links.iter().chain(&self.ingress).flatten();
        for due in links.filter_map(LiveLink::next_due) {
            t = Some(t.map_or(due, |t| t.min(due)));
        }
        if self.config.link_poll > 0 {
            t = Some(t.map_or(self.next_link_poll, |t| t.min(self.next_link_poll)));
        }
        if let Some(s) = &self.sessions {
            if s.busy() || !self.session_events.is_empty() {
                return Some(0);
            }
            if let Some(due) = s.next_due() {
                t = Some(t.map_or(due, |t| t.min(due)));
            }
        }
        let d = self
            .delayed
            .peek()
            .map(|Reverse((at, ..))| at.saturating_sub(self.config.slack));
        match (t, d) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Sleeps until a port is readable or the next due time is near (at
    /// most `max_sleep_ms`). For drivers that interleave their own work.
    pub fn wait(&self) -> io::Result<()> {
        if self.config.busy_poll {
            return Ok(());
        }
        let now = self.now();
        let timeout_ms = match self.next_due() {
            Some(due) if due <= now => return Ok(()),
            Some(due) => (((due - now) / 1_000_000) as i32).min(self.config.max_sleep_ms),
            None => self.config.max_sleep_ms,
        };
        if timeout_ms == 0 {
            // Due within a millisecond: poll(2) cannot sleep that finely.
            std::thread::yield_now();
            return Ok(());
        }
        let session_fds = self.sessions.as_ref().map(|s| s.fds()).unwrap_or_default();
        let mut fds: Vec<libc::pollfd> = self
            .ports
            .iter()
            .map(|p| p.fd())
            .chain(session_fds)
            .map(|fd| libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        // SAFETY: `fds` is a valid, exclusively borrowed array of pollfd of
        // the length passed; poll only writes the revents fields.
        let r = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout_ms) };
        if r < 0 {
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
        Ok(())
    }

    /// Runs until `stop` is set.
    pub fn run(&mut self, stop: &AtomicBool) -> io::Result<()> {
        while !stop.load(Ordering::Relaxed) {
            if !self.step()? {
                self.wait()?;
            }
        }
        Ok(())
    }
}
