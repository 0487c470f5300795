//! TEA's rows of `inca bench` ([`inca_system::System::benches`]):
//!
//! - [`lookup`] — `tea-lookup`: a packet's DRAM lookup round trip through
//!   the switch model and two DRAM servers, against the plain NAT.
//! - [`dram`] — `dram`: the DRAM server's NIC answering READs, against a
//!   copy of the same bytes.
//!
//! The timing helpers and the row shapes are `inca_system::bench`'s; the
//! switch and servers are driven by the test fabric (`inca_switch::fabric`).

pub mod dram;
pub mod lookup;

use inca_system::bench::{Bench, BenchError, Budget};

/// The rows, in table order.
pub fn benches() -> Vec<Bench> {
    vec![
        Bench {
            name: "tea-lookup",
            what: "TEA NAT DRAM lookup: request, server, response pass",
            unit: "packets/s",
            budget: Budget::None,
            budget_text: "",
            run: Some(|c| lookup::tea_lookup(c).map_err(BenchError::new)),
            profile: Some(|n| lookup::profile_tea_lookup(n).map_err(BenchError::new)),
        },
        Bench {
            name: "dram",
            what: "TEA DRAM server: READ -> READ RESPONSE",
            unit: "responses/s",
            budget: Budget::AtLeast(5e6),
            budget_text: ">= 5 M responses/s per core",
            run: Some(|c| dram::reads(c).map_err(BenchError::new)),
            profile: Some(|n| dram::profile(n).map_err(BenchError::new)),
        },
    ]
}
