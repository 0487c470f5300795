//! inca-switch: a Tofino-class programmable switch model.
pub mod device;
pub mod profile;
pub mod resources;
pub mod placement;
pub mod table;
