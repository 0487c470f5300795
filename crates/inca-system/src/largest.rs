//! `inca check --largest PARAM`: the largest value of a size parameter for
//! which a program fits a profile, by doubling then bisection (fitting is
//! monotone in a size), and what runs out just beyond it.
//!
//! Values the parameter refuses (a size that must be a power of two, say)
//! narrow the search but are not what "runs out": the answer names the
//! smallest value that failed for lack of resources.

use inca_apps::params::Params;
use inca_switch::{LoadError, Profile};

use crate::error::CheckError;
use crate::registry::Registry;

/// Searched up to this value; a program that still fits is reported as
/// fitting "at least" up to it.
pub const SEARCH_LIMIT: u64 = 1 << 40;

/// The outcome of the search.
#[derive(Debug)]
pub enum Largest {
    /// It fits with every value tried, up to this one.
    AtLeast(u64),
    /// The largest value that fits, and the smallest that did not for lack
    /// of room with what ran out (`None`: beyond it the parameter takes no
    /// larger value).
    Exact {
        /// The largest value that fits.
        value: u64,
        /// The smallest value known not to fit, and why.
        beyond: Option<(u64, LoadError)>,
    },
}

/// Why the search could not answer.
#[derive(Debug, thiserror::Error)]
pub enum LargestError {
    /// Checking failed for another reason than room (an unknown program, a
    /// parameter refused at the smallest value, a system's refusal).
    #[error(transparent)]
    Check(#[from] CheckError),
    /// Even the value 1 does not fit.
    #[error("does not fit even with {param}=1: {why}")]
    NoneFits {
        /// The parameter searched.
        param: String,
        /// What runs out.
        why: LoadError,
    },
}

enum Fit {
    Yes,
    NoRoom(LoadError),
    BadValue,
}

/// The largest value of `param` (over `base`'s other parameters) for which
/// `program` fits `profile`.
pub fn largest(
    registry: &Registry,
    program: &str,
    base: &Params,
    param: &str,
    profile: &Profile,
) -> Result<Largest, LargestError> {
    let fits = |v: u64| -> Result<Fit, CheckError> {
        let mut params = base.clone();
        params.set(param, v);
        match registry.check(program, &params, profile) {
            Ok(_) => Ok(Fit::Yes),
            Err(CheckError::DoesNotFit(e)) => Ok(Fit::NoRoom(e)),
            Err(CheckError::Param(_)) if v > 1 => Ok(Fit::BadValue),
            Err(e) => Err(e),
        }
    };
    match fits(1)? {
        Fit::Yes => {}
        Fit::NoRoom(why) => {
            return Err(LargestError::NoneFits {
                param: param.to_string(),
                why,
            })
        }
        // `fits(1)` reports a refused parameter as an error, above.
        Fit::BadValue => {}
    }
    let (mut lo, mut hi) = (1u64, 2u64);
    // The smallest value known not to fit for lack of room, and why.
    let mut no_room: Option<(u64, LoadError)> = None;
    while hi <= SEARCH_LIMIT {
        match fits(hi)? {
            Fit::Yes => {
                lo = hi;
                hi *= 2;
            }
            Fit::NoRoom(w) => {
                no_room = Some((hi, w));
                break;
            }
            Fit::BadValue => break,
        }
    }
    if hi > SEARCH_LIMIT {
        return Ok(Largest::AtLeast(lo));
    }
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        match fits(mid)? {
            Fit::Yes => lo = mid,
            Fit::NoRoom(w) => {
                hi = mid;
                no_room = Some((mid, w));
            }
            Fit::BadValue => hi = mid,
        }
    }
    Ok(Largest::Exact {
        value: lo,
        beyond: no_room,
    })
}
