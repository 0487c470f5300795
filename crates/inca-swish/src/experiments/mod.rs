//! SwiSh's built-in experiments (specs/swish.md §8.2) for `inca sweep`:
//! each runs one of the protocol rigs with named parameters and reports
//! what the sweep's plots read ([`inca_system::experiment`]).

pub mod e8_ddos;

use inca_system::BuiltinExperiment;

pub mod rate_limiter;
pub mod sdw_windows;
pub mod sro;

/// Every SwiSh experiment, in the order of §8.2.
pub fn all() -> Vec<BuiltinExperiment> {
    #[allow(unused_mut)]
    let mut v: Vec<BuiltinExperiment> = Vec::new();
    v.extend(sro::experiments());
    v.extend(e8_ddos::experiments());
    v.extend(rate_limiter::experiments());
    v.extend(sdw_windows::experiments());
    v
}
