//! ExoPlane's run checks (§6), over a finished simulation: what a
//! campaign asks of every seed ([`inca_system::RunCheck`]).
//!
//! - **P1** — counted by the switch program on every flow-manager hit
//!   (an entry the packet needs is missing); any count fails the run.
//! - **P3** — the hub's op log: a flow's FM insert follows the acks of
//!   all its object inserts, object removals follow the FM delete by at
//!   least `T_flush`, nothing in use is removed ([`check_p3`]).
//! - **P4** (hub side) — every completed write heard each targeted
//!   holder's WRITE_APPLIED or its death ([`check_p4_log`]); the daemons
//!   apply a key's writes only in version order (their stale applies are
//!   skipped, never applied).
//! - **P6** (copies agree) — when the scenario asks for it (switch
//!   parameter `converged = 1`: its traffic and faults end at least three
//!   `T_c` before its end), every synchronised counter cell has one value
//!   on the switch (if installed there) and on every live device holding
//!   it. [our choice] This is P6's "every copy equals the same total"
//!   without the total itself, which no device observes; the exact total
//!   and the `Lost` bound are checked in the sans-IO sync tests
//!   (tests/sync_properties.rs, tests/hub_random.rs).
//! - **Back up** [our choice] — in the same quiescent runs, every device is
//!   UP at the hub again: whatever took it down (crash, pause, link flap,
//!   session loss) has healed, so it must have been rebuilt and failed
//!   back (§5.8).

use inca_sim::engine::{NodeId, Simulation};
use inca_switch::Switch;
use inca_system::{Judgement, RunCheck};

use crate::device::ExoDevice;
use crate::hub::check::{check_p3, check_p4_log};
use crate::hub::entries::{pdev_bit, SwitchCopy};
use crate::hub::{DeviceStatus, Hub};
use crate::ids::Pdev;
use crate::switch::ExoSwitch;

/// The checks of one checked run.
#[derive(Debug, Default)]
pub struct ExoChecks;

impl RunCheck for ExoChecks {
    fn judge(&self, sim: &Simulation) -> Judgement {
        let mut j = Judgement::default();
        let mut out = Vec::new();
        let mut devices = Vec::new();
        for i in 0..sim.node_count() as u32 {
            if let Some(d) = sim.node::<Switch<ExoDevice>>(NodeId(i)) {
                if let Some(p) = d.program().pdev() {
                    devices.push((p, d));
                }
            }
        }
        for i in 0..sim.node_count() as u32 {
            let Some(sw) = sim.node::<Switch<ExoSwitch>>(NodeId(i)) else {
                continue;
            };
            let name = sim.node_name(NodeId(i));
            let p = sw.program();
            j.count("exoplane: flow-manager hits (P1)", p.counters().fm_hits);
            let p1 = p.counters().p1_violations;
            if p1 > 0 {
                out.push(format!("{name}: {p1} P1 violations"));
                out.extend(p.p1_notes().iter().map(|n| format!("{name}: {n}")));
            }
            let Some(hub) = p.hub() else { continue };
            let log = hub.op_log();
            j.count(
                "exoplane: hub op-log entries (P3, P4)",
                log.records().count() as u64,
            );
            // A bounded log forgets its oldest records: say how many went
            // unjudged.
            j.count("exoplane: op-log entries evicted unjudged", log.evicted());
            if let Err(v) = check_p3(log, p.t_flush()) {
                out.push(format!("{name}: P3 at {} ns: {}", v.at, v.what));
            }
            if let Err(v) = check_p4_log(log) {
                out.push(format!("{name}: P4 at {} ns: {}", v.at, v.what));
            }
            if p.converged_check() {
                back_up(name, hub, &devices, &mut out);
                let cells = converged(name, sw, hub, &devices, &mut out);
                j.count("exoplane: counter cells compared (P6)", cells);
            }
        }
        j.violations = out;
        j
    }
}

/// Liveness after quiescence: every device of the run is UP at the hub
/// again (its faults healed seconds ago; a device left DOWN never serves
/// its shards again, and its replica's failure would lose them).
fn back_up(name: &str, hub: &Hub, devices: &[(Pdev, &Switch<ExoDevice>)], out: &mut Vec<String>) {
    for (pdev, _) in devices {
        let status = hub.device_status(*pdev);
        if status != Some(DeviceStatus::Up) {
            out.push(format!(
                "{name}: pdev {} is {status:?} at the hub after quiescence, not Up (never rebuilt)",
                pdev.0
            ));
        }
    }
}

/// P6 as the module documentation states it; the cells found on two
/// copies or more (the ones compared).
fn converged(
    name: &str,
    sw: &Switch<ExoSwitch>,
    hub: &Hub,
    devices: &[(Pdev, &Switch<ExoDevice>)],
    out: &mut Vec<String>,
) -> u64 {
    let mut compared = 0;
    for (key, e) in hub.entries() {
        if e.deleting {
            continue;
        }
        let mut values = Vec::new();
        if e.switch == SwitchCopy::Installed {
            if let Some(v) = sw.program().cell_value(sw.objects(), key) {
                values.push(("switch".to_string(), v));
            }
        }
        for (pdev, d) in devices {
            if e.holders & pdev_bit(*pdev) == 0
                || hub.device_status(*pdev) != Some(DeviceStatus::Up)
            {
                continue;
            }
            if let Some(v) = d.program().cell_value(d.objects(), key) {
                values.push((format!("pdev {}", pdev.0), v));
            }
        }
        // Tables have no cell: only counter cells get here with values.
        compared += u64::from(values.len() >= 2);
        if values.windows(2).any(|w| w[0].1 != w[1].1) {
            out.push(format!(
                "{name}: P6: copies of app {} object {} cell {:02x?} disagree after quiescence: {values:?}",
                key.app.0, key.obj.0, key.key
            ));
        }
    }
    compared
}
