//! CLIP's built-in experiments (specs/clip.md §8.2) for `inca sweep`:
//! each runs the testbed scenario (experiments/clip/testbed.toml) with
//! overrides from its parameters and measures in a window after a warm-up
//! ([`inca_system::experiment`]); experiments/clip/ has the descriptors.
//!
//! - [`forwarding`] — E1, forwarding capacity (`clip-forwarding`).
//! - [`flow_selection`] — E3, flow-selection efficiency (`clip-flow-selection`).
//! - [`capacity`] — E4, capacity adjustment (`clip-capacity`).
//! - [`snat_latency`] — E5, SNAT latency (`clip-snat-latency`).
//! - [`snat_throughput`] — E6, SNAT throughput with traces
//!   (`clip-snat-throughput`).
//! - [`resources`] — E7, each module's share of the switch
//!   (`clip-resources`; a placement, nothing simulated).
//! - [`trd`] — E8, the TRD check (`clip-trd`).
//! - [`rig`] — the testbed, windows over the sink's counters and latency.
//!
//! E2 (latency distribution) needs no harness: it is a plain scenario
//! sweep over the testbed (experiments/clip/e2-latency.toml).
//!
//! The system registers them (`ClipSystem::experiments`) and hands each run
//! the CLIP system to build its devices with.

pub mod capacity;
pub mod flow_selection;
pub mod forwarding;
pub mod resources;
pub mod rig;
pub mod snat_latency;
pub mod snat_throughput;
pub mod trd;

use inca_apps::params::{ParamError, Params};

fn param_err(e: ParamError) -> String {
    e.to_string()
}

/// A real-valued parameter in `min..=max` (the parameter list has
/// integers only).
fn number(p: &Params, name: &str, default: f64, min: f64, max: f64) -> Result<f64, String> {
    let Some(t) = p.text(name) else {
        return Ok(default);
    };
    match t.trim().parse::<f64>() {
        Ok(v) if (min..=max).contains(&v) => Ok(v),
        _ => Err(format!("{name}: {t:?} is not a number from {min} to {max}")),
    }
}
