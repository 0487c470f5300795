//! `inca sweep`: experiment descriptors ([`descriptor`]), their runner
//! ([`runner`]), the `sweep.json` index both the runner and `inca
//! report` use ([`file`]), and the sweep plots ([`plots`]).

pub mod descriptor;
pub mod file;
pub mod plots;
pub mod runner;
