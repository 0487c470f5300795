//! A live testbed brought up for a test and taken down whatever happens
//! (the live failover tests share it).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use super::text;

const INCA: &str = env!("CARGO_BIN_EXE_inca");

/// A scenario copied to a temporary folder and brought up; taken down on
/// drop whatever happened.
pub struct Testbed {
    dir: PathBuf,
    scenario: PathBuf,
    state: serde_json::Value,
}

impl Testbed {
    /// Copies `source` as `<stem>.toml` and brings it up, with captures of
    /// every port if `captures` (kept with the logs when a test fails;
    /// they grow by the bytes moved, hundreds of MB a second).
    pub fn up(stem: &str, source: &Path, captures: bool) -> Testbed {
        let dir = std::env::temp_dir().join(format!("inca-testbed-{stem}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(format!("{stem}.toml"));
        std::fs::copy(source, &path).unwrap();
        let mut tb = Testbed {
            dir,
            scenario: path,
            state: serde_json::Value::Null,
        };
        let dir = tb.dir.join("captures").to_string_lossy().into_owned();
        let out = if captures {
            tb.inca(&["up", "--capture-dir", &dir])
        } else {
            tb.inca(&["up"])
        };
        assert!(out.status.success(), "testbed up failed:\n{}", text(&out));
        let state = tb.dir.join("state").join(format!("{stem}.json"));
        tb.state = serde_json::from_str(&std::fs::read_to_string(state).unwrap()).unwrap();
        tb
    }

    /// Runs `inca testbed <action> <scenario> <rest...>` on this testbed.
    pub fn inca(&self, args: &[&str]) -> Output {
        let (action, rest) = args.split_first().unwrap();
        Command::new(INCA)
            .args(["testbed", action, &self.scenario.to_string_lossy()])
            .args(rest)
            .env("INCA_TESTBED_DIR", self.dir.join("state"))
            .output()
            .unwrap()
    }

    /// The namespace of host `host`.
    pub fn namespace(&self, host: &str) -> String {
        self.state["namespaces"]
            .as_array()
            .unwrap()
            .iter()
            .find(|n| n["host"] == host)
            .and_then(|n| n["name"].as_str())
            .unwrap_or_else(|| panic!("no namespace for host {host}"))
            .to_string()
    }

    fn process(&self, node: &str) -> &serde_json::Value {
        self.state["processes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["node"] == node)
            .unwrap_or_else(|| panic!("no process for node {node}"))
    }

    /// The root-namespace interfaces node `node` holds (from its
    /// configuration file).
    pub fn interfaces(&self, node: &str) -> Vec<String> {
        let config =
            std::fs::read_to_string(self.process(node)["config"].as_str().unwrap()).unwrap();
        let config = inca_live::config::NodeConfig::from_toml(&config).unwrap();
        config
            .ports
            .iter()
            .filter_map(|p| p.interface.clone())
            .collect()
    }

    /// Bytes node `node`'s interfaces have received and sent so far.
    pub fn bytes(&self, node: &str) -> u64 {
        self.interfaces(node)
            .iter()
            .flat_map(|i| ["rx_bytes", "tx_bytes"].map(|c| (i.clone(), c)))
            .map(|(i, c)| {
                std::fs::read_to_string(format!("/sys/class/net/{i}/statistics/{c}"))
                    .ok()
                    .and_then(|s| s.trim().parse::<u64>().ok())
                    .unwrap_or(0)
            })
            .sum()
    }

    /// Node `node`'s metrics (the Prometheus text of its endpoint, which
    /// the state file records), as `metric name → value` with the labels
    /// dropped but a `port` label kept as a `:port` suffix; None if the
    /// node does not answer.
    pub fn metrics(&self, node: &str) -> Option<std::collections::BTreeMap<String, f64>> {
        metrics_at(self.metrics_addr(node)?)
    }

    /// Node `node`'s metrics endpoint, as the state file records it.
    pub fn metrics_addr(&self, node: &str) -> Option<std::net::SocketAddr> {
        self.process(node)["metrics"].as_str()?.parse().ok()
    }
}

/// The metrics a node serves at `addr` (see [`Testbed::metrics`]).
pub fn metrics_at(addr: std::net::SocketAddr) -> Option<std::collections::BTreeMap<String, f64>> {
    {
        use std::io::{Read, Write};
        let mut conn =
            std::net::TcpStream::connect_timeout(&addr, std::time::Duration::from_secs(1)).ok()?;
        conn.set_read_timeout(Some(std::time::Duration::from_secs(2)))
            .ok()?;
        conn.write_all(b"GET /metrics HTTP/1.0\r\n\r\n").ok()?;
        let mut body = String::new();
        conn.read_to_string(&mut body).ok()?;
        let (_, body) = body.split_once("\r\n\r\n")?;
        let mut out = std::collections::BTreeMap::new();
        for line in body.lines() {
            let Some((name, value)) = line.rsplit_once(' ') else {
                continue;
            };
            let (metric, labels) = name.split_once('{').unwrap_or((name, ""));
            let key = match labels.split("port=\"").nth(1) {
                Some(p) => format!("{metric}:{}", p.trim_end_matches(['"', '}'])),
                None => metric.to_string(),
            };
            if let Ok(v) = value.parse() {
                out.insert(key, v);
            }
        }
        Some(out)
    }
}

impl Drop for Testbed {
    fn drop(&mut self) {
        let _ = self.inca(&["down"]);
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        } else {
            eprintln!("left {} for inspection", self.dir.display());
        }
    }
}
