//! Synthetic trace presets: named stand-ins for public traces the papers
//! used, each a `udp` workload with its defaults filled in, so every
//! experiment that names one draws the same traffic from the same
//! generator (Zipf ranks, random 5-tuples, size mix of [`super::dist`]).
//!
//! `kind = "backbone"` — the ExoPlane evaluation's substitute for the
//! CAIDA backbone traces (specs/exoplane.md §8: "backbone-like" = at least
//! 6 M flows, Zipf α = 0.99, sizes 40 % 64 B / 10 % 576 B / 50 % 1,500 B
//! [the spec's choice]). Any `udp` field may be given and wins over the
//! preset; `dst` and `rate` or `pps` are still required:
//!
//! ```toml
//! [[workload]]
//! kind = "backbone"
//! dst = "10.0.1.1:5000"
//! rate = "line"
//! tenant = { count = 64 }   # optional: front-end tenants by 5-tuple hash
//! ```
//!
//! Sources are drawn from `10.0.0.0/8` × ports 1024–65535 [our choice: the
//! 6 M distinct 5-tuples need more than one address's 64,512 ports]. The
//! 64 B share is raised to the smallest frame that carries the probe
//! (66 B), as for any `udp` workload.

use std::net::SocketAddrV4;

use super::schema::{Quantity, SizeSpec, UdpConfig};

/// Flows of the backbone-like trace (spec §8: "≥ 6M flows").
pub const BACKBONE_FLOWS: u64 = 6_000_000;
/// Zipf skew of its flow popularity (spec §8).
pub const BACKBONE_ZIPF: f64 = 0.99;
/// Its frame sizes and weights in percent (spec §8).
pub const BACKBONE_SIZES: [(u64, u64); 3] = [(64, 40), (576, 10), (1500, 50)];
/// Where its random sources come from [our choice].
pub const BACKBONE_SRC_PREFIX: &str = "10.0.0.0/8";

/// The preset names, for errors and lists.
pub const PRESETS: [&str; 1] = ["backbone"];

/// Fills the backbone preset's defaults into a workload table as written
/// (fields given keep their values) and returns it as a `udp` table.
pub(crate) fn backbone_defaults(mut table: toml::Table) -> toml::Table {
    let mut set = |k: &str, v: toml::Value| {
        table.entry(k.to_string()).or_insert(v);
    };
    set("flows", toml::Value::Integer(BACKBONE_FLOWS as i64));
    set("zipf", toml::Value::Float(BACKBONE_ZIPF));
    set(
        "src_prefix",
        toml::Value::String(BACKBONE_SRC_PREFIX.to_string()),
    );
    let mix = BACKBONE_SIZES
        .iter()
        .map(|&(s, w)| {
            toml::Value::Array(vec![
                toml::Value::Integer(s as i64),
                toml::Value::Integer(w as i64),
            ])
        })
        .collect();
    let mut size = toml::Table::new();
    size.insert("mix".to_string(), toml::Value::Array(mix));
    set("size", toml::Value::Table(size));
    table
}

/// The backbone-like trace as a `udp` configuration, to `dst` at `rate`
/// (a rate as a scenario writes it: `"10Gbps"`, `"line"`), with `flows`
/// flows (the preset's 6 M when `None`).
pub fn backbone_like(dst: SocketAddrV4, rate: &str, flows: Option<u64>) -> UdpConfig {
    UdpConfig {
        dst: Some(dst),
        rate: Some(Quantity::Text(rate.to_string())),
        size: Some(SizeSpec::Mix(
            BACKBONE_SIZES
                .iter()
                .map(|&(s, w)| (Quantity::Int(s), w))
                .collect(),
        )),
        flows: Some(flows.unwrap_or(BACKBONE_FLOWS)),
        src_prefix: Some(BACKBONE_SRC_PREFIX.to_string()),
        zipf: Some(BACKBONE_ZIPF),
        ..UdpConfig::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nodes::host::{HostConfig, WorkloadConfig};

    #[test]
    fn the_backbone_kind_is_a_udp_workload_with_the_preset_and_overrides() {
        let text = "ip = \"10.0.0.1\"\n[[workload]]\nkind = \"backbone\"\ndst = \"10.0.1.1:5000\"\nrate = \"line\"\nflows = 1000\n";
        let c = HostConfig::from_toml(text).unwrap();
        let WorkloadConfig::Udp(u) = &c.workloads[0] else {
            panic!("backbone is a udp preset: {:?}", c.workloads[0]);
        };
        assert_eq!(u.flows, Some(1000), "a given field wins");
        assert_eq!(u.zipf, Some(BACKBONE_ZIPF));
        assert_eq!(u.src_prefix.as_deref(), Some(BACKBONE_SRC_PREFIX));
        let code = backbone_like(u.dst.unwrap(), "line", Some(1000));
        assert_eq!(code.size, u.size, "code and scenario presets agree");
        // A bad field is refused as in any `udp` table (line and type).
        let bad = text.replace("flows = 1000", "zipf = \"x\"");
        let e = HostConfig::from_toml(&bad).unwrap_err().to_string();
        assert!(e.contains("line 2") && e.contains("expected f64"), "{e}");
    }
}
