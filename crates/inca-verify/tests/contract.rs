//! A campaign fails a run in which a device broke the device contract (an
//! output timed before the call that made it), naming the breach.

use std::any::Any;

use inca_sim::engine::Node;
use inca_sim::metrics::NodeReport;
use inca_sim::Simulation;
use inca_switch::device::{Device, DeviceRng, Input, Nanos, Output};
use inca_verify::run_check::device_violations;

/// Sets a timer at 1 ms; when it fires, sets the next one `late` ns in the
/// past (0: on time) until it has fired three times.
struct Ticker {
    late: Nanos,
    fired: u32,
}

impl Device for Ticker {
    fn start(&mut self, _now: Nanos, _rng: &mut DeviceRng, out: &mut Vec<Output>) {
        out.push(Output::Timer {
            at: 1_000_000,
            token: 7,
        });
    }

    fn handle(&mut self, now: Nanos, _input: Input, _rng: &mut DeviceRng, out: &mut Vec<Output>) {
        self.fired += 1;
        if self.fired < 3 {
            out.push(Output::Timer {
                at: now - self.late,
                token: 7,
            });
        }
    }

    fn restart(&mut self, now: Nanos, rng: &mut DeviceRng, out: &mut Vec<Output>) {
        self.start(now, rng, out);
    }
}

impl Node for Ticker {
    fn kind(&self) -> &'static str {
        "ticker"
    }
    fn report(&self, _now: Nanos) -> NodeReport {
        NodeReport::default()
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

fn violations(late: Nanos) -> Vec<String> {
    let mut sim = Simulation::new(1, 1_000_000);
    sim.add_node("t", Box::new(Ticker { late, fired: 0 }));
    sim.run_until(10_000_000, |_| {});
    device_violations(&sim)
}

#[test]
fn a_contract_breach_fails_the_run_and_is_named() {
    let v = violations(10);
    assert_eq!(v.len(), 1, "{v:?}");
    assert!(v[0].starts_with("contract_violation: 2 outputs"), "{v:?}");
    assert!(v[0].contains("t (ticker)"), "{v:?}");
    assert!(violations(0).is_empty());
}
