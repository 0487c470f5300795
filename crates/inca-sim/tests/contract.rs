//! The device contract is checked, not assumed: an output before the `now`
//! of the call that produced it is counted as a contract violation (and
//! carried out at `now`), never silently clamped.

use std::any::Any;

use inca_sim::engine::Node;
use inca_sim::metrics::NodeReport;
use inca_sim::{ChannelConfig, Simulation};
use inca_switch::device::{Device, DeviceRng, Input, Nanos, Output};

/// Sets a timer at 1 ms; when it fires, transmits "in the past" (at 0) and
/// sets a timer in the past too, if `late`.
struct Clock {
    late: bool,
    fired: u32,
}

impl Device for Clock {
    fn start(&mut self, _now: Nanos, _rng: &mut DeviceRng, out: &mut Vec<Output>) {
        out.push(Output::Timer {
            at: 1_000_000,
            token: 1,
        });
    }

    fn handle(&mut self, now: Nanos, input: Input, _rng: &mut DeviceRng, out: &mut Vec<Output>) {
        if !matches!(input, Input::Timer { token: 1 }) {
            return;
        }
        self.fired += 1;
        if self.fired > 1 {
            return;
        }
        let at = if self.late { now - 500 } else { now };
        out.push(Output::Transmit {
            at,
            port: 0,
            frame: vec![0; 60],
        });
        out.push(Output::Timer { at, token: 1 });
    }

    fn restart(&mut self, now: Nanos, rng: &mut DeviceRng, out: &mut Vec<Output>) {
        self.start(now, rng, out);
    }
}

impl Node for Clock {
    fn kind(&self) -> &'static str {
        "clock"
    }
    fn report(&self, _now: Nanos) -> NodeReport {
        NodeReport::default()
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

fn run(late: bool) -> Simulation {
    let mut sim = Simulation::new(1, 1_000_000);
    let a = sim.add_node("a", Box::new(Clock { late, fired: 0 }));
    let b = sim.add_node(
        "b",
        Box::new(Clock {
            late: false,
            fired: 0,
        }),
    );
    let c = ChannelConfig::default();
    sim.connect("ab", (a, 0), (b, 0), c, c).unwrap();
    sim.run_until(10_000_000, |_| {});
    sim
}

#[test]
fn outputs_in_the_past_are_counted_and_named() {
    let sim = run(true);
    assert_eq!(sim.contract_violations(), 2, "a transmission and a timer");
    assert_eq!(sim.stats().contract_violations, 2);
    let first = sim.first_contract_violation().unwrap();
    assert!(
        first.contains("a (clock): transmission at 999500 ns"),
        "{first}"
    );
    // Carried out at now: the frame still went, the timer still fired.
    assert_eq!(sim.stats().frames_delivered, 2);
    let a = sim.node_id("a").unwrap();
    assert_eq!(sim.node::<Clock>(a).unwrap().fired, 2);
}

#[test]
fn a_device_that_keeps_the_contract_has_no_violation() {
    let sim = run(false);
    assert_eq!(sim.contract_violations(), 0);
    assert!(sim.first_contract_violation().is_none());
}
