//! What the ExoPlane switch program is built from (§3.1, §5.2, §5.8): the
//! apps with their flow-manager sizes, the classifier rules, the external
//! devices' ports and the number of logical devices.

use inca_switch::composite::ClassifyRule;
use inca_switch::device::SECONDS;
use inca_switch::{Nanos, PortId};

use crate::app::{AppError, AppSpec};

/// Idle time after which a flow-manager entry raises an aging callback,
/// `T_idle` = 5 s (model input, Thesis §4.5).
pub const T_IDLE: Nanos = 5 * SECONDS;
/// Physical devices the `pdev_*` objects hold (§3.1: 64 entries).
pub const MAX_PDEVS: usize = 64;
/// Entries of the `shard` table: the low 10 bits of the CRC-32 (§3.1).
pub const SHARD_ENTRIES: usize = 1 << SHARD_BITS;
/// Bits of the shard hash.
pub const SHARD_BITS: u8 = 10;

/// One app on the switch.
#[derive(Debug, Clone)]
pub struct SwitchApp {
    /// The app, its switch instance sized by the plan.
    pub spec: AppSpec,
    /// Flow-manager entries `n_p·Q_p` (MEDIUM apps; ignored otherwise).
    pub fm_entries: usize,
}

/// The switch program's configuration.
#[derive(Debug, Clone)]
pub struct SwitchConfig {
    /// The apps, in classifier order of their names.
    pub apps: Vec<SwitchApp>,
    /// Classifier rules (earlier wins); each names an app.
    pub rules: Vec<ClassifyRule>,
    /// Physical device `i`'s switch port is `devices[i]`.
    pub devices: Vec<PortId>,
    /// Logical devices `N_L` (0: as many as physical devices).
    pub logical: u8,
    /// Where packets no rule classifies go [our choice: the spec's
    /// "ordinary L2/L3 forwarding" is one port here]; None: dropped.
    pub default_port: Option<PortId>,
    /// Flow-manager idle timeout.
    pub idle_timeout: Nanos,
    /// App-pinning (§5.1, §8 E6's baseline): LOW apps whose every packet
    /// goes to one physical device, by app name, instead of to its shard's
    /// (no flow manager, no hash). Empty in ExoPlane's own runs.
    pub pinned: Vec<(String, u8)>,
}

impl SwitchConfig {
    /// A configuration with no default port and the spec's idle timeout.
    pub fn new(apps: Vec<SwitchApp>, rules: Vec<ClassifyRule>, devices: Vec<PortId>) -> Self {
        SwitchConfig {
            apps,
            rules,
            devices,
            logical: 0,
            default_port: None,
            idle_timeout: T_IDLE,
            pinned: Vec::new(),
        }
    }

    /// `N_L`.
    pub fn logical_devices(&self) -> usize {
        if self.logical == 0 {
            self.devices.len()
        } else {
            usize::from(self.logical)
        }
    }
}

/// A configuration the switch program refuses.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// An app's declaration is wrong.
    #[error(transparent)]
    App(#[from] AppError),
    /// Two apps with one id or one name.
    #[error("two apps share id or name {0:?}")]
    DuplicateApp(String),
    /// A rule names no app.
    #[error("classifier rule names app {0:?}, which is not configured")]
    UnknownApp(String),
    /// More rules than `classify` holds.
    #[error("{0} classifier rules; classify holds 256")]
    TooManyRules(usize),
    /// Devices out of range: MEDIUM or LOW apps need at least one, the
    /// `pdev_*` objects hold 64.
    #[error("{got} devices; MEDIUM/LOW apps need 1 to {MAX_PDEVS}")]
    Devices {
        /// Devices given.
        got: usize,
    },
    /// Something else out of range (named in the message).
    #[error("{0}")]
    Invalid(String),
    /// A MEDIUM app with no flow-manager entries.
    #[error("app {0:?} is MEDIUM but has no flow-manager entries")]
    EmptyFm(String),
}

impl SwitchConfig {
    /// Checks the configuration (apps, rules, devices).
    pub fn validate(&self) -> Result<(), ConfigError> {
        use crate::app::Affinity;
        for (i, a) in self.apps.iter().enumerate() {
            a.spec.validate()?;
            if self.apps[..i]
                .iter()
                .any(|b| b.spec.id == a.spec.id || b.spec.name == a.spec.name)
            {
                return Err(ConfigError::DuplicateApp(a.spec.name.clone()));
            }
            if a.spec.affinity == Affinity::Medium && a.fm_entries == 0 {
                return Err(ConfigError::EmptyFm(a.spec.name.clone()));
            }
        }
        if self.rules.len() > inca_switch::composite::classifier::CLASSIFY_ENTRIES {
            return Err(ConfigError::TooManyRules(self.rules.len()));
        }
        if let Some(r) = self
            .rules
            .iter()
            .find(|r| !self.apps.iter().any(|a| a.spec.name == r.app))
        {
            return Err(ConfigError::UnknownApp(r.app.clone()));
        }
        let tail = self.apps.iter().any(|a| a.spec.affinity != Affinity::High);
        let n = self.devices.len();
        if n > MAX_PDEVS || (tail && n == 0) || self.logical_devices() > 255 {
            return Err(ConfigError::Devices { got: n });
        }
        for (name, pdev) in &self.pinned {
            let low = self
                .apps
                .iter()
                .any(|a| &a.spec.name == name && a.spec.affinity == Affinity::Low);
            if !low {
                return Err(ConfigError::Invalid(format!(
                    "app {name:?} is pinned to a device but is not a LOW app here"
                )));
            }
            // The pinned device is taken as its logical id (dev_map[d] has
            // primary d while N_L = N).
            if usize::from(*pdev) >= n.min(self.logical_devices()) {
                return Err(ConfigError::Invalid(format!(
                    "app {name:?} is pinned to device {pdev}, of {n}"
                )));
            }
        }
        Ok(())
    }
}
