//! The `inca` command's shared pieces (the binary is `src/main.rs`).
//!
//! - [`systems`] — THE list of registered systems: every command reaches
//!   programs, servers, campaigns and benchmarks through it.

pub mod systems;

pub use systems::{factory, registry};
