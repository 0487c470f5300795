//! RedPlane's rows of `inca bench` ([`inca_system::System::benches`]):
//!
//! - [`read`] — `redplane-read`: the RedPlane NAT's read path in the
//!   switch model, against the plain NAT.
//! - [`store`] — `store`: the state store's writes in process.
//! - [`store_udp`] — `store-udp`: the same store over UDP on loopback in a
//!   live runner, against redis-server ([`redis`]).
//!
//! The timing helpers and the row shapes are `inca_system::bench`'s; the
//! in-process benchmarks drive their devices with the test fabric
//! (`inca_switch::fabric`).

pub mod read;
pub mod redis;
pub mod store;
pub mod store_udp;

use inca_system::bench::{Bench, BenchError, Budget};

/// The rows, in table order.
pub fn benches() -> Vec<Bench> {
    vec![
        Bench {
            name: "redplane-read",
            what: "RedPlane NAT read path, lease held",
            unit: "packets/s",
            budget: Budget::None,
            budget_text: "",
            run: Some(|c| read::redplane_read(c).map_err(BenchError::new)),
            profile: Some(|n| read::profile_redplane_read(n).map_err(BenchError::new)),
        },
        Bench {
            name: "store",
            what: "RedPlane store LEASE_RENEW writes, in process",
            unit: "requests/s",
            budget: Budget::AtLeast(1e6),
            budget_text: ">= 1 M requests/s per core",
            run: Some(|c| store::in_process(c).map_err(BenchError::new)),
            profile: Some(|n| store::profile(n).map_err(BenchError::new)),
        },
        Bench {
            name: "store-udp",
            what: "RedPlane store writes over UDP loopback",
            unit: "requests/s",
            budget: Budget::AboveBaseline,
            budget_text: "more than redis SET",
            run: Some(|c| store_udp::over_udp(c).map_err(BenchError::new)),
            profile: None,
        },
    ]
}
