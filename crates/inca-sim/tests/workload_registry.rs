//! A workload kind the simulator does not know, registered by whoever loads
//! the scenario (here a toy "beacon": `count` probes to `dst`, one every
//! `gap_us`): a new system's client is a `Workload` impl and a
//! `SwitchFactory::workload` arm, never an edit of the host.

use std::net::SocketAddrV4;

use inca_sim::engine::Node;
use inca_sim::nodes::host::workload::{probe_frame, BuildContext, StepContext, Workload};
use inca_sim::nodes::host::{Host, HostError};
use inca_sim::scenario::{FactoryError, Loaded, SwitchFactory};
use inca_switch::device::{DeviceRng, Nanos, MICROS};
use inca_switch::Profile;
use inca_wire::Probe;

/// The toy workload: its configuration, and how far this life got.
#[derive(Debug)]
struct Beacon {
    dst: SocketAddrV4,
    count: u64,
    gap: Nanos,
    src_port: u16,
    /// (first send time, sent) of this life.
    life: Option<(Nanos, u64)>,
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct BeaconConfig {
    #[allow(dead_code)]
    name: Option<String>,
    dst: SocketAddrV4,
    count: u64,
    gap_us: u64,
}

impl Workload for Beacon {
    fn begin(
        &mut self,
        _host: &inca_sim::nodes::host::workload::HostInfo,
        anchor: Nanos,
        _rng: &mut DeviceRng,
    ) {
        self.life = Some((anchor, 0));
    }

    fn end(&mut self) {
        self.life = None;
    }

    fn next_at(&self) -> Option<Nanos> {
        let (origin, sent) = self.life?;
        (sent < self.count).then_some(origin + sent * self.gap)
    }

    fn step(&mut self, cx: &mut StepContext<'_>) -> Option<Vec<u8>> {
        let (_, sent) = self.life.as_mut()?;
        let seq = *sent;
        *sent += 1;
        if !cx.send {
            return None;
        }
        let probe = Probe {
            flow: 0,
            seq,
            tx_time: cx.now,
        };
        let ep = cx.host.endpoints(cx.host.ip, *self.dst.ip());
        probe_frame(&ep, self.src_port, self.dst.port(), 100, probe, cx.scratch)
    }
}

struct Beacons;

impl SwitchFactory for Beacons {
    fn build(
        &self,
        program: &str,
        _: &[(String, String)],
        _: Profile,
    ) -> Result<Box<dyn Node>, FactoryError> {
        Err(format!("no switches here (asked for {program})").into())
    }

    fn workload(
        &self,
        kind: &str,
        table: &toml::Table,
        cx: &mut BuildContext<'_>,
    ) -> Option<Result<Box<dyn Workload>, HostError>> {
        if kind != "beacon" {
            return None;
        }
        let built = toml::Value::Table(table.clone())
            .try_into::<BeaconConfig>()
            .map_err(|e| cx.invalid("", e.message().to_string()))
            .and_then(|c| {
                if c.gap_us == 0 {
                    return Err(cx.invalid("gap_us", "must be > 0"));
                }
                Ok(Box::new(Beacon {
                    dst: c.dst,
                    count: c.count,
                    gap: c.gap_us * MICROS,
                    src_port: cx.default_port(),
                    life: None,
                }) as Box<dyn Workload>)
            });
        Some(built)
    }
}

const SCENARIO: &str = r#"name = "beacon"
duration = "10ms"
[[host]]
name = "a"
ip = "10.0.0.1"
[[host.workload]]
kind = "beacon"
name = "b1"
dst = "10.0.0.2:9"
count = 50
gap_us = 100
[[host]]
name = "b"
ip = "10.0.0.2"
[[link]]
a = "a:0"
b = "b:0"
"#;

#[test]
fn a_registered_kind_runs_like_a_built_in_one() {
    let loaded = Loaded::from_str(SCENARIO, "beacon.toml", &[]).unwrap();
    let mut built = loaded.build(&Beacons, Some(1), None).unwrap();
    built.sim.run_until(built.duration, |_| {});
    let a = built.sim.node_id("a").unwrap();
    let b = built.sim.node_id("b").unwrap();
    let sender = built.sim.node::<Host>(a).unwrap();
    assert_eq!(sender.workload_stats("b1").unwrap().tx_packets, 50);
    let report = sender.report(built.sim.now());
    assert_eq!(report.counters["b1.tx_packets"], 50);
    let receiver = built.sim.node::<Host>(b).unwrap();
    assert_eq!(receiver.stats().rx_probes, 50);
    assert_eq!(receiver.latency().count(), 50);
}

#[test]
fn an_unregistered_kind_fails_naming_it_and_a_bad_table_names_the_field() {
    struct Nothing;
    impl SwitchFactory for Nothing {
        fn build(
            &self,
            _: &str,
            _: &[(String, String)],
            _: Profile,
        ) -> Result<Box<dyn Node>, FactoryError> {
            Err("none".into())
        }
    }
    let loaded = Loaded::from_str(SCENARIO, "beacon.toml", &[]).unwrap();
    let e = loaded
        .build(&Nothing, Some(1), None)
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("unknown workload kind \"beacon\""), "{e}");
    assert!(e.contains("workload[0] \"b1\" (beacon).kind"), "{e}");
    let bad = Loaded::from_str(SCENARIO, "beacon.toml", &["a.workload.0.gap_us=0".into()]).unwrap();
    let e = bad
        .build(&Beacons, Some(1), None)
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("(beacon).gap_us: must be > 0"), "{e}");
}
