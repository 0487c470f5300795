//! Invariants: checks of what only a programmer error can break.
//!
//! [`invariant!`](crate::invariant!) states something the code relies on
//! (queue accounting adds up, an agenda never goes back in time). Where it
//! fails the state is already wrong, so what to do depends on the mode of
//! the thread it runs on:
//! - strict (tests, debug builds, the simulator): panic with the message and,
//!   when a simulation has said which, the run seed, so the failure can be
//!   replayed;
//! - counting (the live runner): count it in [`violations`] (the live node
//!   reports the count) and carry on, as a switch in production would
//!   rather limp than stop forwarding.
//!
//! Input from outside (frames, control messages, configuration) is never
//! checked with this: bad input gets a typed error and a counter.

use std::cell::Cell;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};

static VIOLATIONS: AtomicU64 = AtomicU64::new(0);

thread_local! {
    static STRICT: Cell<bool> = const { Cell::new(cfg!(debug_assertions)) };
    static SEED: Cell<Option<u64>> = const { Cell::new(None) };
}

/// Makes invariant failures on this thread panic (`true`) or count.
pub fn set_strict(strict: bool) {
    STRICT.with(|s| s.set(strict));
}

/// Whether invariant failures on this thread panic.
pub fn strict() -> bool {
    STRICT.with(Cell::get)
}

/// Names the run seed a panic on this thread reports (a simulation sets
/// it while it runs).
pub fn set_seed(seed: Option<u64>) {
    SEED.with(|s| s.set(seed));
}

/// Invariant failures counted (in counting mode) by this process so far.
pub fn violations() -> u64 {
    VIOLATIONS.load(Ordering::Relaxed)
}

/// What a failed [`invariant!`](crate::invariant!) does. Not for direct use.
#[doc(hidden)]
#[cold]
pub fn violated(what: fmt::Arguments<'_>) {
    if strict() {
        match SEED.with(Cell::get) {
            Some(seed) => panic!("invariant violated (seed {seed}): {what}"),
            None => panic!("invariant violated: {what}"),
        }
    }
    VIOLATIONS.fetch_add(1, Ordering::Relaxed);
}

/// Checks an invariant: `invariant!(cond, "format", args..)`. See
/// [`crate::invariant`] for what a failure does.
#[macro_export]
macro_rules! invariant {
    ($cond:expr, $($arg:tt)+) => {
        if !$cond {
            $crate::invariant::violated(format_args!($($arg)+));
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strict_panics_with_the_seed_and_counting_counts() {
        set_seed(Some(42));
        set_strict(true);
        let p = std::panic::catch_unwind(|| crate::invariant!(1 + 1 == 3, "sum {}", 2))
            .expect_err("strict mode panics");
        let msg = p.downcast_ref::<String>().cloned().unwrap_or_default();
        assert_eq!(msg, "invariant violated (seed 42): sum 2");
        set_strict(false);
        let before = violations();
        crate::invariant!(false, "counted");
        crate::invariant!(true, "not counted");
        assert_eq!(violations(), before + 1);
        set_strict(true);
        set_seed(None);
    }
}
