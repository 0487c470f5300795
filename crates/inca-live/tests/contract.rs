//! The live runner checks the device contract: an output before the `now`
//! the device was called with is counted in `RunnerStats`.

use std::time::{Duration, Instant};

use inca_live::port::Port;
use inca_live::runner::{Runner, RunnerConfig};
use inca_switch::device::{Device, DeviceRng, Input, Nanos, Output};

/// Asks for a timer 1 µs after start; when it fires, outputs a timer and a
/// transmission at time 0, long past.
struct Late {
    fired: bool,
}

impl Device for Late {
    fn start(&mut self, now: Nanos, _rng: &mut DeviceRng, out: &mut Vec<Output>) {
        out.push(Output::Timer {
            at: now + 1_000,
            token: 1,
        });
    }

    fn handle(&mut self, _now: Nanos, input: Input, _rng: &mut DeviceRng, out: &mut Vec<Output>) {
        if matches!(input, Input::Timer { token: 1 }) && !self.fired {
            self.fired = true;
            out.push(Output::Timer { at: 0, token: 2 });
            out.push(Output::Transmit {
                at: 0,
                port: 0,
                frame: vec![0; 60],
            });
        }
    }

    fn restart(&mut self, now: Nanos, rng: &mut DeviceRng, out: &mut Vec<Output>) {
        self.start(now, rng, out);
    }
}

#[test]
fn outputs_in_the_past_are_counted() {
    let ports: Vec<Box<dyn Port>> = Vec::new();
    let config = RunnerConfig {
        busy_poll: true,
        ..RunnerConfig::default()
    };
    let mut r = Runner::new(Late { fired: false }, ports, 1, config);
    let deadline = Instant::now() + Duration::from_secs(5);
    while !r.device().fired && Instant::now() < deadline {
        r.step().unwrap();
    }
    r.step().unwrap();
    assert!(r.device().fired);
    assert_eq!(r.stats().contract_violations, 2);
}
