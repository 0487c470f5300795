//! `inca sweep`: experiment descriptors ([`descriptor`]), their runner
//! ([`runner`]) and the `sweep.json` index both the runner and `inca
//! report` use ([`file`]).

pub mod descriptor;
pub mod file;
pub mod runner;
