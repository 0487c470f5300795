//! SwiSh's row of `inca bench` ([`inca_system::System::benches`]):
//! `swish-sro-write`, the simulator's rate of NAT connections whose first
//! packet's write commits through SRO on a chain of two switches (origin
//! hold, head sequencing on the switch CPU, the chain, the tail's
//! WRITE_ACK), against the same NAT program on a chain of one (the head is
//! the tail: the write is sequenced and installed on its own CPU with no
//! replication). Both in the SRO rig (`sro::rig`, lossless links), the
//! same seed and connection count; a unit is one committed write.
//!
//! `swish-sdw-ddos`: the DDoS detector's per-packet path (§7) on an SDW
//! replica — sampled update into R_u through the epoch tags, query of
//! R_r, the block decision — against the same detector on a local sketch
//! without SwiSh (the pull baseline's switch: one register per row and the
//! block table). Both on one `tofino` switch in the test fabric, fed the
//! same 60-byte traffic frames 10 ns apart; a unit is one packet.
//! [our choice] The replica is not started: window sync is its own
//! traffic, not the per-packet path, and both programs see only traffic.

use std::collections::BTreeSet;

use inca_system::bench::{timed_rate, Baseline, Bench, BenchError, Budget, Ctx, Measured};

mod ddos_bench;

use crate::sro::facts::Fact;
use crate::sro::rig::{Rig, RigConfig};

/// Simulated time the connections open over.
const TRAFFIC_NS: u64 = 30_000_000;

/// The rows, in table order.
pub fn benches() -> Vec<Bench> {
    vec![
        Bench {
            name: "swish-sro-write",
            what:
                "NAT connection whose first packet's write commits through SwiSh SRO on 2 switches",
            unit: "writes/s",
            budget: Budget::None,
            budget_text: "",
            run: Some(|c| run(c).map_err(BenchError::new)),
            profile: None,
        },
        Bench {
            name: "swish-sdw-ddos",
            what:
                "packet through the DDoS detector on an SDW replica (update R_u, query R_r, block)",
            unit: "pkts/s",
            budget: Budget::None,
            budget_text: "",
            run: Some(|c| ddos_bench::run(c).map_err(BenchError::new)),
            profile: None,
        },
    ]
}

/// Runs the rig with `replicas` switches and `flows` connections; the
/// writes committed (distinct keys released).
fn writes(replicas: usize, flows: u32) -> Result<u64, String> {
    let cfg = RigConfig {
        replicas,
        seed: 7,
        flows,
        traffic: TRAFFIC_NS,
        ..RigConfig::default()
    };
    let mut rig = Rig::new(&cfg)?;
    rig.run_until(cfg.start + TRAFFIC_NS + 100_000_000);
    let keys: BTreeSet<_> = rig
        .facts
        .snapshot()
        .facts
        .into_iter()
        .filter_map(|f| match f {
            Fact::Release { key, .. } => Some(key),
            _ => None,
        })
        .collect();
    Ok(keys.len() as u64)
}

fn run(c: &Ctx) -> Result<Measured, String> {
    // 200 connections over 30 ms (6,700 a second) stays under the head's
    // control-channel write rate (about 10,000 a second), so every write
    // commits; above it the run measures a backlog.
    let flows = c.size(200, 40) as u32;
    let mut samples = Vec::new();
    let mut base = Vec::new();
    let (mut done, mut done_base) = (0, 0);
    // Warm-up, then timed runs side by side.
    writes(2, flows)?;
    writes(1, flows)?;
    for _ in 0..c.runs.max(1) {
        let mut err = None;
        samples.push(timed_rate(|| match writes(2, flows) {
            Ok(n) => {
                done = n;
                n
            }
            Err(e) => {
                err = Some(e);
                0
            }
        }));
        base.push(timed_rate(|| match writes(1, flows) {
            Ok(n) => {
                done_base = n;
                n
            }
            Err(e) => {
                err = Some(e);
                0
            }
        }));
        if let Some(e) = err {
            return Err(e);
        }
    }
    if done == 0 || done_base == 0 {
        return Err(format!(
            "no write committed ({done} with SRO, {done_base} without)"
        ));
    }
    Ok(Measured {
        samples,
        baseline: Baseline::Measured {
            what: "the same NAT program on a chain of one switch (no replication)".into(),
            samples: base,
        },
        notes: vec![format!(
            "{flows} connections over {} ms simulated; {done} writes committed with SRO, {done_base} without",
            TRAFFIC_NS / 1_000_000
        )],
    })
}
