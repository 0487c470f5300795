//! Helpers for systems that build `[[server]]` devices from a scenario.

use inca_sim::scenario::ServerSetup;

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
