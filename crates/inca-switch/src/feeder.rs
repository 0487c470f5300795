//! A benchmark driver: feeds one device a stream of frames cut from
//! templates at a fixed gap of virtual time, fires its timers in time
//! order, and recycles the buffers it transmits as a real driver would, so
//! a benchmark measures the device's cost per frame, not the allocator's.
//!
//! Every benchmark of one device uses it — the criterion benches of the
//! crates and `inca bench` — so their figures come from the same loop.

use crate::device::{device_rng, Device, DeviceRng, Input, Nanos, Output, PortId};

/// Recycled frame buffers kept.
const POOL: usize = 256;

/// Feeds one device a stream of frames from templates, firing its timers
/// in time order and recycling the buffers it transmits.
pub struct Feeder<D: Device> {
    /// The device.
    pub dev: D,
    now: Nanos,
    gap: Nanos,
    port: PortId,
    rng: DeviceRng,
    out: Vec<Output>,
    pool: Vec<Vec<u8>>,
    /// Pending timers (token, time); a device has a handful.
    timers: Vec<(u64, Nanos)>,
    templates: Vec<Vec<u8>>,
    next: usize,
    /// Frames pushed in.
    pub pushed: u64,
    /// Frames the device transmitted.
    pub transmitted: u64,
}

impl<D: Device> Feeder<D> {
    /// Frames from `templates`, in turn, on `port`, `gap` apart after `now`.
    pub fn new(dev: D, now: Nanos, port: PortId, gap: Nanos, templates: Vec<Vec<u8>>) -> Self {
        Feeder {
            dev,
            now,
            gap,
            port,
            rng: device_rng(1, 0),
            out: Vec::with_capacity(64),
            pool: Vec::with_capacity(POOL),
            timers: Vec::new(),
            templates,
            next: 0,
            pushed: 0,
            transmitted: 0,
        }
    }

    /// Pushes `n` frames; returns `n`.
    pub fn push(&mut self, n: u64) -> u64 {
        for _ in 0..n {
            self.now += self.gap;
            self.fire_timers();
            let t = &self.templates[self.next];
            // A recycled buffer too small for the frame would be grown by a
            // realloc (a copy): a fresh one is cheaper (the store's acks
            // are shorter than its requests; this was 17% of the `store`
            // profile).
            let mut buf = match self.pool.pop() {
                Some(b) if b.capacity() >= t.len() => b,
                _ => Vec::with_capacity(t.len()),
            };
            buf.clear();
            buf.extend_from_slice(t);
            self.next = (self.next + 1) % self.templates.len();
            self.pushed += 1;
            let input = Input::Frame {
                port: self.port,
                frame: buf,
            };
            self.dev
                .handle(self.now, input, &mut self.rng, &mut self.out);
            self.drain();
        }
        n
    }

    /// Boots the device (`Device::start`) at the current time.
    pub fn start(&mut self) {
        self.dev.start(self.now, &mut self.rng, &mut self.out);
        self.drain();
    }

    /// The current virtual time.
    pub fn now(&self) -> Nanos {
        self.now
    }

    /// Fires the timers due up to `t` and moves the clock there.
    pub fn advance_to(&mut self, t: Nanos) {
        self.now = self.now.max(t);
        self.fire_timers();
    }

    /// Feeds `templates` from now on, `gap` apart, from time `now`.
    pub fn set_stream(&mut self, now: Nanos, gap: Nanos, templates: Vec<Vec<u8>>) {
        self.now = self.now.max(now);
        self.gap = gap;
        self.templates = templates;
        self.next = 0;
    }

    fn fire_timers(&mut self) {
        loop {
            let due = self
                .timers
                .iter()
                .enumerate()
                .filter(|(_, &(_, at))| at <= self.now)
                .min_by_key(|(_, &(tok, at))| (at, tok))
                .map(|(i, _)| i);
            let Some(i) = due else { break };
            let (token, at) = self.timers.swap_remove(i);
            self.dev
                .handle(at, Input::Timer { token }, &mut self.rng, &mut self.out);
            self.drain();
        }
    }

    fn drain(&mut self) {
        for o in self.out.drain(..) {
            match o {
                Output::Timer { at, token } => {
                    match self.timers.iter_mut().find(|t| t.0 == token) {
                        Some(t) => t.1 = at,
                        None => self.timers.push((token, at)),
                    }
                }
                Output::Transmit { frame, .. } => {
                    self.transmitted += 1;
                    if self.pool.len() < POOL {
                        self.pool.push(frame);
                    }
                }
                Output::Control(_) | Output::Session { .. } => {}
            }
        }
    }
}
