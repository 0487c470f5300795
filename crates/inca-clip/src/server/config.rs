//! The server runtime's configuration (spec §3.2, §5.3, §5.7): the server's
//! id, the flow expiry time and every bound, with the spec's defaults.

use inca_switch::device::Nanos;
use serde::{Deserialize, Serialize};

/// Most flow records a core may be given [our choice: 2^24, far above any
/// experiment's flow count; it bounds a typo, not a workload].
pub const MAX_FLOW_RECORDS: usize = 1 << 24;
/// Most top-N candidates a core may keep.
pub const MAX_CANDIDATES: usize = 65_536;
/// Most entries a report queue may hold.
pub const MAX_QUEUE: usize = 1 << 24;
/// Highest server id (ids are 7 bits on the switch; 0 is the controller's
/// sender id in CLIP-CTL).
pub const MAX_SERVER_ID: u8 = 127;

/// The server runtime's configuration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RuntimeConfig {
    /// This server's id (1..=127): requests naming another are served but
    /// counted `misdelivered`.
    pub server_id: u8,
    /// T_exp: a flow record idle this long is expired unless offloaded
    /// (§5.7: 10 s).
    pub t_exp_ns: Nanos,
    /// Flow records per core [our choice: 262,144, so 8 cores hold two
    /// million flows]; a new flow beyond it is served without a record and
    /// counted `record_overflow`.
    pub flow_records: usize,
    /// Top-N candidates per core (§3.2: bounded by N_top, 256); beyond it
    /// the lowest-ranked candidate gives way.
    pub candidates: usize,
    /// Handler-created entries waiting for ENTRY_CREATED [our choice:
    /// 65,536]; beyond it they are counted `created_overflow` and lost to
    /// the controller.
    pub created_queue: usize,
    /// Expired flows waiting for FLOW_EXPIRED [our choice: 65,536]; beyond
    /// it counted `expired_overflow`.
    pub expired_queue: usize,
    /// How often created entries are batched (§4.5: 10 ms); also the
    /// housekeeping interval the server runs.
    pub batch_interval_ns: Nanos,
    /// How often flow records are expired (§5.3: 100 ms); runs at the first
    /// housekeeping at or after it is due.
    pub expiry_interval_ns: Nanos,
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        RuntimeConfig {
            server_id: 1,
            t_exp_ns: 10_000_000_000,
            flow_records: 262_144,
            candidates: 256,
            created_queue: 65_536,
            expired_queue: 65_536,
            batch_interval_ns: 10_000_000,
            expiry_interval_ns: 100_000_000,
        }
    }
}

impl RuntimeConfig {
    /// Checks every field's range.
    pub fn check(&self) -> Result<(), String> {
        if !(1..=MAX_SERVER_ID).contains(&self.server_id) {
            return Err(format!(
                "server_id must be from 1 to {MAX_SERVER_ID}, not {}",
                self.server_id
            ));
        }
        let positive = [
            ("t_exp_ns", self.t_exp_ns),
            ("batch_interval_ns", self.batch_interval_ns),
            ("expiry_interval_ns", self.expiry_interval_ns),
        ];
        for (name, v) in positive {
            if v == 0 {
                return Err(format!("{name} must be positive"));
            }
        }
        let bounded = [
            ("flow_records", self.flow_records, MAX_FLOW_RECORDS),
            ("candidates", self.candidates, MAX_CANDIDATES),
            ("created_queue", self.created_queue, MAX_QUEUE),
            ("expired_queue", self.expired_queue, MAX_QUEUE),
        ];
        for (name, v, max) in bounded {
            if !(1..=max).contains(&v) {
                return Err(format!("{name} must be from 1 to {max}, not {v}"));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_the_spec_s_and_fields_are_checked() {
        let c = RuntimeConfig::default();
        assert_eq!(c.t_exp_ns, 10_000_000_000);
        assert_eq!(c.candidates, 256);
        assert_eq!(c.check(), Ok(()));
        let parsed: RuntimeConfig = toml::from_str("server_id = 5\nt_exp_ns = 1000").unwrap();
        assert_eq!((parsed.server_id, parsed.t_exp_ns), (5, 1000));
        assert_eq!(parsed.flow_records, c.flow_records);
        assert!(toml::from_str::<RuntimeConfig>("serverid = 5").is_err());
        for bad in [
            RuntimeConfig {
                server_id: 0,
                ..c.clone()
            },
            RuntimeConfig {
                server_id: 128,
                ..c.clone()
            },
            RuntimeConfig {
                t_exp_ns: 0,
                ..c.clone()
            },
            RuntimeConfig {
                candidates: 0,
                ..c.clone()
            },
            RuntimeConfig {
                flow_records: MAX_FLOW_RECORDS + 1,
                ..c.clone()
            },
        ] {
            assert!(bad.check().is_err(), "{bad:?}");
        }
    }
}
