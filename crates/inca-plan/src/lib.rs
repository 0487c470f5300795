//! The ExoPlane planner (ExoPlane spec §5.9, Thesis §4.4): how much of each
//! app lives on the switch and on each smart NIC, and the one switch program
//! that results.
//!
//! - [`profile`]: each app's resource use per quantum of keys on each
//!   device profile, from the program's declarations and the platform's
//!   placement model; compatibility from what the program needs.
//! - [`model`]: the ILP's instance and solution; [`check`] verifies a
//!   solution independently.
//! - [`naive`] and [`reform`]: the ILP of §5.9 on HiGHS, as written and
//!   reformulated (an integer switch prefix per app, counted device
//!   quanta); [`brute`]
//!   the brute-force oracle of the tests.
//! - [`merge`]: the chosen apps as one classified composite with the planned
//!   sizes, placed by the stage allocator, shrunk and re-solved on failure.
//! - [`plan`]: the whole run behind `inca plan`.

pub mod args;
pub mod brute;
pub mod check;
mod elastic;
pub mod experiments;
pub mod merge;
pub mod model;
pub mod naive;
pub mod plan;
pub mod profile;
pub mod reform;
pub mod solver;

pub use model::{Affinity, AppModel, Assignment, DeviceCost, DeviceType, Instance, Loc};
pub use plan::{plan, AppSpec, PlanInputs, PlanReport};
pub use solver::{Solution, SolveError, SolveOptions};
