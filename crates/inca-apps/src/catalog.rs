//! The apps by name: what `inca check` and scenarios load.

use inca_switch::placement::Placement;
use inca_switch::{check, LoadError, Profile};

use crate::l2l3::L2L3;
use crate::nat::Nat;
use crate::params::{ParamError, Params};

/// An app that could not be checked.
#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    /// No app of that name.
    #[error("unknown program {name:?}; the programs are: {known}")]
    Unknown {
        /// The name given.
        name: String,
        /// The names known.
        known: String,
    },
    /// A parameter was wrong.
    #[error(transparent)]
    Param(#[from] ParamError),
    /// It does not load (does not fit, or a bad declaration).
    #[error(transparent)]
    Load(#[from] LoadError),
}

/// Every app name with a one-line description and its parameters.
pub const APPS: &[(&str, &str, &[&str])] = &[
    ("l2l3", "L2 bridging and L3 LPM routing", L2L3::PARAMS),
    (
        "nat",
        "source NAT, exact-match table per direction",
        Nat::PARAMS,
    ),
];

/// Declares app `name` with `params` and places it on `profile`.
pub fn check_app(
    name: &str,
    params: &Params,
    profile: &Profile,
) -> Result<Placement, CatalogError> {
    match name {
        "l2l3" => Ok(check(profile, &mut L2L3::from_params(params)?)?),
        "nat" => Ok(check(profile, &mut Nat::from_params(params)?)?),
        _ => Err(CatalogError::Unknown {
            name: name.to_string(),
            known: APPS.iter().map(|a| a.0).collect::<Vec<_>>().join(", "),
        }),
    }
}
