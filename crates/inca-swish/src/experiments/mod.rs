//! SwiSh's built-in experiments (specs/swish.md §8.2) for `inca sweep`:
//! each runs one of the protocol rigs with named parameters and reports
//! what the sweep's plots read ([`inca_system::experiment`]).

pub mod e8_ddos;

use inca_system::BuiltinExperiment;

pub mod rate_limiter;
pub mod sdw_full_load;
pub mod sdw_recovery;
pub mod sdw_windows;
pub mod sro;

/// Rows of the SDW sketch when an experiment is not told: 3, or 2 above
/// 32K columns, where 3 rows do not place on the tofino profile (12 stages;
/// docs/experiments.md, "Placement of the SDW program") [our choice, as
/// E5].
pub fn default_rows(cols: u32) -> u8 {
    if cols > 32_768 {
        2
    } else {
        3
    }
}

/// Every SwiSh experiment, in the order of §8.2.
pub fn all() -> Vec<BuiltinExperiment> {
    #[allow(unused_mut)]
    let mut v: Vec<BuiltinExperiment> = Vec::new();
    v.extend(sro::experiments());
    v.extend(e8_ddos::experiments());
    v.extend(rate_limiter::experiments());
    v.extend(sdw_windows::experiments());
    v.extend(sdw_full_load::experiments());
    v.extend(sdw_recovery::experiments());
    v
}
