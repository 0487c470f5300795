//! The simulator's devices: programmable switches (any `inca_switch::Program`
//! on any profile), routers, and hosts.

pub mod host;
pub mod router;
pub mod switch;
