//! The simulator's devices: programmable switches (any `inca_switch::Program`
//! on any profile), routers, and hosts, with the adversarial host
//! workloads in [`attack`].

pub mod attack;
pub mod encap;
pub mod host;
pub mod router;
pub mod switch;
