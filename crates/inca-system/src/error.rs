//! The typed errors at the System seams. A system's own internals may still
//! report a message (most of today's catalogs do); it is carried in the
//! variant that says which step refused it, so callers can tell a bad
//! parameter from a program that does not fit from a name nobody offers.

use inca_apps::params::ParamError;
use inca_switch::LoadError;

/// Building a device (switch program or server) through a system failed.
#[derive(Debug, thiserror::Error)]
pub enum SystemError {
    /// No registered system offers this program.
    #[error("unknown program {program:?}; the programs are: {known}")]
    UnknownProgram {
        /// The name given.
        program: String,
        /// Every registered program name.
        known: String,
    },
    /// No registered system offers this server kind.
    #[error("unknown server kind {kind:?}; the kinds are: {known}")]
    UnknownServerKind {
        /// The kind given.
        kind: String,
        /// Every registered server kind.
        known: String,
    },
    /// A parameter was wrong.
    #[error(transparent)]
    Param(#[from] ParamError),
    /// The program was built but does not load onto the profile.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// The system refused to build it, saying why.
    #[error("{0}")]
    Refused(String),
    /// The device refused its configuration; its own typed error is kept
    /// (a `StoreError` of RedPlane's store, say), so callers can downcast.
    #[error(transparent)]
    Device(Box<dyn std::error::Error + Send + Sync>),
    /// Crafted keys were asked of a program whose system has none.
    #[error("program {program:?} has no crafted keys (no registered system crafts keys for it)")]
    NoCraftedKeys {
        /// The target program.
        program: String,
    },
}

/// `inca check` of a program failed.
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    /// No registered system offers this program.
    #[error("unknown program {program:?}; the programs are: {known}")]
    UnknownProgram {
        /// The name given.
        program: String,
        /// Every registered program name.
        known: String,
    },
    /// A parameter was wrong (a value out of range, say): not a matter of
    /// room, so `inca check --largest` narrows its search past it.
    #[error(transparent)]
    Param(#[from] ParamError),
    /// It does not fit (or its declarations do not load).
    #[error(transparent)]
    DoesNotFit(#[from] LoadError),
    /// The system refused it, saying why (systems whose catalogs report
    /// messages rather than typed errors).
    #[error("{0}")]
    Refused(String),
}

/// A campaign could not run (as opposed to a run that found violations,
/// which is a result).
#[derive(Debug, thiserror::Error)]
pub enum CampaignError {
    /// Neither a scenario file nor a registered built-in campaign.
    #[error("{name} is neither a scenario file nor a built-in campaign ({known})")]
    Unknown {
        /// What was asked for.
        name: String,
        /// The built-in campaigns.
        known: String,
    },
    /// The scenario does not load or build.
    #[error(transparent)]
    Scenario(#[from] inca_sim::scenario::ScenarioError),
    /// One seed of a built-in campaign could not run.
    #[error("seed {seed}: {message}")]
    Seed {
        /// The seed.
        seed: u64,
        /// Why.
        message: String,
    },
}

impl From<SystemError> for inca_sim::factory::FactoryError {
    fn from(e: SystemError) -> Self {
        match e {
            SystemError::UnknownServerKind { kind, known } => {
                inca_sim::factory::FactoryError::UnknownServerKind { kind, known }
            }
            SystemError::NoCraftedKeys { program } => {
                inca_sim::factory::FactoryError::NoCraftedKeys { program }
            }
            other => inca_sim::factory::FactoryError::System(Box::new(other)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use inca_sim::factory::FactoryError;

    #[test]
    fn system_errors_reach_the_scenario_typed_and_with_their_messages() {
        let kind = SystemError::UnknownServerKind {
            kind: "dram".into(),
            known: "redplane_store, tea_dram".into(),
        };
        let text = kind.to_string();
        let f = FactoryError::from(kind);
        assert!(matches!(&f, FactoryError::UnknownServerKind { kind, .. } if kind == "dram"));
        assert_eq!(f.to_string(), text);
        let refused = SystemError::Device(Box::new(std::fmt::Error));
        let text = refused.to_string();
        let f = FactoryError::from(refused);
        let FactoryError::System(inner) = &f else {
            panic!("{f:?}")
        };
        assert!(matches!(
            inner.downcast_ref::<SystemError>(),
            Some(SystemError::Device(_))
        ));
        assert_eq!(f.to_string(), text);
    }
}
