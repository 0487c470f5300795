//! Checks of the two quantitative properties of spec §6 that are about how
//! well ExoPlane places flows rather than whether it is safe:
//!
//! - [`promotion`] — P11 promotion quality: after 10 s of a stationary
//!   Zipf(0.99) workload the switch-resident flows (the hub's PRESENT set)
//!   overlap the true top `n_p·Q_p` by ≥ 80 %; and the scaling rule that
//!   lets a small test stand for the thesis-scale workload.
//! - [`balance`] — P12 load balance: with the top `c·N·ln N` keys on the
//!   switch, the max/mean load over the `N` devices is lower than with
//!   none, using the real shard function and key projection.
//!
//! Both are measurements with a threshold, so they return the measured
//! figure and a [`Violation`](crate::hub::check::Violation) when it misses
//! the threshold; the drivers (tests now, campaigns later) print it.

pub mod balance;
pub mod promotion;
