//! The smallest useful device: it sends every frame back out of the port it
//! came in on, `delay` nanoseconds later, and every `period` reports how many
//! frames it reflected. It shows the whole device contract: frames and
//! timers in, transmissions and timers out, no clock, no socket.

use inca_switch::device::{ControlMessage, Device, DeviceRng, Input, Nanos, Output};
use inca_switch::harness::Harness;

/// Timer token of the periodic report.
const REPORT: u64 = 1;

pub struct Reflector {
    delay: Nanos,
    period: Nanos,
    reflected: u64,
}

impl Device for Reflector {
    fn start(&mut self, now: Nanos, _rng: &mut DeviceRng, out: &mut Vec<Output>) {
        out.push(Output::Timer {
            at: now + self.period,
            token: REPORT,
        });
    }

    fn handle(&mut self, now: Nanos, input: Input, _rng: &mut DeviceRng, out: &mut Vec<Output>) {
        match input {
            Input::Frame { port, frame } => {
                self.reflected += 1;
                out.push(Output::Transmit {
                    at: now + self.delay,
                    port,
                    frame,
                });
            }
            Input::Timer { token: REPORT } => {
                let body = self.reflected.to_be_bytes().to_vec();
                out.push(Output::Control(ControlMessage { kind: 0, body }));
                out.push(Output::Timer {
                    at: now + self.period,
                    token: REPORT,
                });
            }
            Input::Timer { .. }
            | Input::Control(_)
            | Input::LinkState { .. }
            | Input::Session(_) => {}
        }
    }

    fn restart(&mut self, now: Nanos, rng: &mut DeviceRng, out: &mut Vec<Output>) {
        self.reflected = 0;
        self.start(now, rng, out);
    }
}

fn main() {
    let mut h = Harness::new(
        Reflector {
            delay: 100,
            period: 1_000,
            reflected: 0,
        },
        7,
    );
    h.send(10, 3, vec![0xab; 60]);
    h.send(20, 1, vec![0xcd; 60]);
    h.advance_to(2_500);
    for t in h.take() {
        println!("t={} ns port {} {} bytes", t.at, t.port, t.frame.len());
    }
    println!("{} reports", h.messages.len());
    assert_eq!(h.messages.len(), 2);
}
