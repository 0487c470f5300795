//! CLIP's rows of `inca bench` ([`inca_system::System::benches`]):
//!
//! - [`switch_pass`] — `clip-switch-pass` and `clip-switch-flight`: one
//!   pass of the CLIP switch program (SNAT) per packet, on the fast path
//!   (a `nat_table` hit) and on the flight path (a miss: sketch, server
//!   selection, shim push), each against inca-apps' plain NAT on the same
//!   frames.
//! - [`server_core`] — `clip-server-core` and `clip-server-snat`: the
//!   server runtime's cost per request on one core
//!   (`ClipRuntime::process_at`) with the MFWD and the SNAT handler, each
//!   against the same runtime with the NULL handler (the framework alone).
//!
//! The timing helpers and the row shapes are `inca_system::bench`'s; the
//! switches are driven by the test fabric (`inca_switch::fabric`) as the
//! `nat` row is.

pub mod server_core;
pub mod switch_pass;

use inca_system::bench::{Bench, BenchError, Budget};

/// The rows, in table order.
pub fn benches() -> Vec<Bench> {
    vec![
        Bench {
            name: "clip-switch-pass",
            what: "CLIP switch (SNAT), fast path: nat_table hit, post, forward",
            unit: "packets/s",
            budget: Budget::None,
            budget_text: "",
            run: Some(|c| switch_pass::fast(c).map_err(BenchError::new)),
            profile: Some(|n| switch_pass::profile_fast(n).map_err(BenchError::new)),
        },
        Bench {
            name: "clip-switch-flight",
            what: "CLIP switch (SNAT), flight path: miss, CMS, select, shim push",
            unit: "packets/s",
            budget: Budget::None,
            budget_text: "",
            run: Some(|c| switch_pass::flight(c).map_err(BenchError::new)),
            profile: None,
        },
        Bench {
            name: "clip-server-core",
            what: "CLIP server runtime, MFWD handler (mirrored-table hit), 1 core",
            unit: "requests/s",
            budget: Budget::None,
            budget_text: "",
            run: Some(|c| server_core::mfwd(c).map_err(BenchError::new)),
            profile: Some(|n| server_core::profile_mfwd(n).map_err(BenchError::new)),
        },
        Bench {
            name: "clip-server-snat",
            what: "CLIP server runtime, SNAT handler (translation hit), 1 core",
            unit: "requests/s",
            budget: Budget::None,
            budget_text: "",
            run: Some(|c| server_core::snat(c).map_err(BenchError::new)),
            profile: None,
        },
    ]
}
