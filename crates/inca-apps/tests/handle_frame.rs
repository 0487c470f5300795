//! `Device::handle_frame` is `handle(Input::Frame)`: the switch's own
//! version (the per-packet path the drivers use, which skips building the
//! input enum) gives byte-identical outputs to the general path on the same
//! random traffic — known flows, new flows the control plane installs,
//! inbound replies, garbage — with timers fired on time in both.

use inca_apps::fixtures::{flow_frame, installed_nat, nat_tcp_flows, FlowProto};
use inca_switch::device::{device_rng, Device, Input, Nanos, Output, PortId};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

/// Drives a device, firing its timers in time order before each frame.
struct Driver<D: Device> {
    dev: D,
    rng: inca_switch::device::DeviceRng,
    timers: Vec<(u64, Nanos)>,
    log: Vec<Output>,
    via_handle_frame: bool,
}

impl<D: Device> Driver<D> {
    fn new(dev: D, via_handle_frame: bool) -> Self {
        Driver {
            dev,
            rng: device_rng(7, 0),
            timers: Vec::new(),
            log: Vec::new(),
            via_handle_frame,
        }
    }

    fn fire_until(&mut self, now: Nanos) {
        while let Some(i) = (0..self.timers.len())
            .filter(|&i| self.timers[i].1 <= now)
            .min_by_key(|&i| (self.timers[i].1, self.timers[i].0))
        {
            let (token, at) = self.timers.swap_remove(i);
            let mut out = Vec::new();
            self.dev
                .handle(at, Input::Timer { token }, &mut self.rng, &mut out);
            self.record(out);
        }
    }

    fn frame(&mut self, now: Nanos, port: PortId, frame: Vec<u8>) {
        self.fire_until(now);
        let mut out = Vec::new();
        if self.via_handle_frame {
            self.dev
                .handle_frame(now, port, frame, &mut self.rng, &mut out);
        } else {
            self.dev
                .handle(now, Input::Frame { port, frame }, &mut self.rng, &mut out);
        }
        self.record(out);
    }

    fn record(&mut self, out: Vec<Output>) {
        for o in out {
            if let Output::Timer { at, token } = o {
                match self.timers.iter_mut().find(|t| t.0 == token) {
                    Some(t) => t.1 = at,
                    None => self.timers.push((token, at)),
                }
            }
            self.log.push(o);
        }
    }
}

/// One random frame: a known flow, a new flow, an inbound packet, or bytes.
fn frame_strategy() -> impl Strategy<Value = (PortId, Vec<u8>)> {
    prop_oneof![
        (0u16..64).prop_map(|f| (1, nat_tcp_flows(64)[usize::from(f)].clone())),
        (1024u16..u16::MAX).prop_map(|sport| (
            1,
            flow_frame(FlowProto::Udp, [10, 0, 0, 9], sport, [8, 8, 8, 8], 53)
        )),
        (1024u16..u16::MAX).prop_map(|dport| (
            0,
            flow_frame(
                FlowProto::Tcp(0x10),
                [8, 8, 8, 8],
                80,
                [198, 51, 100, 1],
                dport
            )
        )),
        prop::collection::vec(any::<u8>(), 0..80).prop_map(|b| (1, b)),
    ]
}

#[test]
fn switch_handle_frame_equals_handle() {
    let seed = std::env::var("SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1u64);
    eprintln!("seed {seed}");
    let config = Config {
        cases: 24,
        rng_algorithm: proptest::test_runner::RngAlgorithm::ChaCha,
        ..Config::default()
    };
    let mut bytes = [0u8; 32];
    bytes[..8].copy_from_slice(&seed.to_le_bytes());
    let mut runner = TestRunner::new_with_rng(
        config,
        proptest::test_runner::TestRng::from_seed(
            proptest::test_runner::RngAlgorithm::ChaCha,
            &bytes,
        ),
    );
    let traffic = prop::collection::vec((0u64..2_000, frame_strategy()), 1..300);
    runner
        .run(&traffic, |events| {
            // The set-up is deterministic: two runs give the same switch.
            let (a, start) = installed_nat(&nat_tcp_flows(64), 1, 0).expect("NAT set-up");
            let (b, _) = installed_nat(&nat_tcp_flows(64), 1, 0).expect("NAT set-up");
            let mut general = Driver::new(a, false);
            let mut direct = Driver::new(b, true);
            let mut now = start;
            for (gap, (port, frame)) in events {
                now += gap;
                general.frame(now, port, frame.clone());
                direct.frame(now, port, frame);
            }
            let end = now + 1_000_000_000;
            general.fire_until(end);
            direct.fire_until(end);
            prop_assert!(!general.log.is_empty());
            prop_assert_eq!(&general.log, &direct.log);
            prop_assert_eq!(general.dev.stats(), direct.dev.stats());
            Ok(())
        })
        .unwrap();
}
