//! Helpers for systems that build `[[server]]` devices from a scenario,
//! and [`ServerNode`], a multi-core server as a simulator node.

use inca_server::{MultiCoreServer, SoftwareNf};
use inca_sim::engine::Node;
use inca_sim::metrics::NodeReport;
use inca_sim::scenario::ServerSetup;
use inca_switch::device::{Device, DeviceRng, Input, Nanos, Output};

/// A server's `params` with what the scenario already knows filled in
/// where the file leaves it out: its address (`ip`), its MAC (`mac`) and
/// the MAC of the device at the other end of port 0 (under the name
/// `neighbour_field`), ready to deserialise into the server's config.
pub fn params_with_addresses(setup: &ServerSetup, neighbour_field: &str) -> toml::Table {
    let mac = |m: [u8; 6]| toml::Value::Array(m.iter().map(|&b| i64::from(b).into()).collect());
    let mut t = setup.params.clone();
    t.entry("ip")
        .or_insert_with(|| toml::Value::String(setup.ip.to_string()));
    if let Some(&m) = setup.macs.first() {
        t.entry("mac").or_insert_with(|| mac(m));
    }
    if let Some(&m) = setup.neighbour_macs.first() {
        t.entry(neighbour_field).or_insert_with(|| mac(m));
    }
    t
}

/// A multi-core server ([`inca_server::MultiCoreServer`]) running NF `N`,
/// as a simulator node: its report has the NIC's, PCIe's, each core's
/// (`core3_packets`, `core3_busy_ns`, `core3_rx_ring_drops`, ...) and the
/// NF's (`nf_...`) counters.
#[derive(Debug)]
pub struct ServerNode<N: SoftwareNf>(pub MultiCoreServer<N>);

impl<N: SoftwareNf> Device for ServerNode<N> {
    fn start(&mut self, now: Nanos, rng: &mut DeviceRng, out: &mut Vec<Output>) {
        self.0.start(now, rng, out)
    }

    fn handle(&mut self, now: Nanos, input: Input, rng: &mut DeviceRng, out: &mut Vec<Output>) {
        self.0.handle(now, input, rng, out)
    }

    fn restart(&mut self, now: Nanos, rng: &mut DeviceRng, out: &mut Vec<Output>) {
        self.0.restart(now, rng, out)
    }
}

impl<N: SoftwareNf + 'static> Node for ServerNode<N> {
    fn kind(&self) -> &'static str {
        "server"
    }

    fn report(&self, _now: Nanos) -> NodeReport {
        NodeReport {
            counters: self.0.counters(),
            notes: vec![format!(
                "{} on {} core(s)",
                self.0.nf().name(),
                self.0.config().cores
            )],
            ..NodeReport::default()
        }
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}
