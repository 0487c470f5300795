//! The `[[smartnic]]` table of a scenario file (the scenario loader
//! turns each into a programmable device after the switches).

use std::collections::BTreeMap;

use serde::Deserialize;
use toml::Spanned;

/// A smart NIC: a programmable device on the `smartnic` profile, with its
/// own ports (port 0 towards the switch, port 1 towards its server, by
/// convention), program, parameters and DRAM. It runs on the same switch
/// model as a `[[switch]]` (the profile makes it run to completion and
/// places tables that outgrow its SRAM in DRAM), so on loading it becomes
/// one, after the scenario's switches; its report says kind `smartnic`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SmartNicSpec {
    /// Unique name.
    pub name: Spanned<String>,
    /// The program.
    pub program: Spanned<String>,
    /// Program parameters.
    #[serde(default)]
    pub params: BTreeMap<String, toml::Value>,
    /// Its DRAM (`"4GiB"`), the profile's when absent.
    #[serde(default)]
    pub dram: Option<Spanned<toml::Value>>,
    /// Profile model inputs to override.
    #[serde(default)]
    pub profile_set: BTreeMap<String, toml::Value>,
    /// Prefixes reachable through this NIC.
    #[serde(default)]
    pub announce: Vec<Spanned<String>>,
    /// Stamps the probe frames that pass it (per-hop telemetry).
    #[serde(default)]
    pub telemetry: bool,
}
