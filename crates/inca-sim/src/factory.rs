//! What a scenario needs from whoever runs it: a [`SwitchFactory`] builds
//! the nodes the simulator does not know (switch programs, system servers,
//! crafted keys, system workloads). The simulator sits below the apps and
//! the systems, so they come in through this trait (the System plug-in
//! interface implements it).

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use inca_switch::Profile;

use crate::engine::Node;
use crate::nodes::host::workload::{BuildContext, Workload, WorkloadRegistry};
use crate::nodes::host::HostError;

/// Builds programmable switches and system devices for a scenario: the
/// simulator does not know the apps or the systems (they sit beside it, not
/// below it), so whoever runs the scenario supplies this.
pub trait SwitchFactory {
    /// A node running `program` with `params` on `profile`.
    fn build(
        &self,
        program: &str,
        params: &[(String, String)],
        profile: Profile,
    ) -> Result<Box<dyn Node>, FactoryError>;

    /// A `[[server]]` node of `kind` (a state-store server, a DRAM server).
    fn build_server(&self, kind: &str, setup: &ServerSetup) -> Result<Box<dyn Node>, FactoryError> {
        let _ = setup;
        Err(FactoryError::UnknownServerKind {
            kind: kind.to_string(),
            known: String::new(),
        })
    }

    /// Sources for a `tuples` workload's `craft` (adversarial keys aimed at
    /// the hash units of the switch program in `request`; see
    /// [`crate::nodes::attack`]).
    fn craft_sources(
        &self,
        request: &crate::nodes::attack::CraftRequest,
    ) -> Result<Vec<std::net::SocketAddrV4>, FactoryError> {
        Err(FactoryError::NoCraftedKeys {
            program: request.program.clone(),
        })
    }

    /// A host workload of a `kind` the simulator does not build in
    /// ([`crate::nodes::host::workload`]): its `[[host.workload]]` table as
    /// written (without `kind`) and where it sits. `None` (the default):
    /// this factory does not know the kind, and the scenario fails naming
    /// it. This is where a system registers its clients (the System plug-in
    /// interface forwards here).
    fn workload(
        &self,
        kind: &str,
        table: &toml::Table,
        cx: &mut BuildContext<'_>,
    ) -> Option<Result<Box<dyn Workload>, HostError>> {
        let _ = (kind, table, cx);
        None
    }
}

/// Why a factory could not build what a scenario asks for. The scenario
/// reports it at the field that asked (`switch`, `server`, `host`).
#[derive(Debug, thiserror::Error)]
pub enum FactoryError {
    /// No server of this kind here.
    #[error("unknown server kind {kind:?}{}", if known.is_empty() { String::new() } else { format!("; the kinds are: {known}") })]
    UnknownServerKind {
        /// The kind asked for.
        kind: String,
        /// The kinds this factory builds (empty if it builds none).
        known: String,
    },
    /// Crafted keys asked of a program nobody crafts keys for.
    #[error("program {program:?} has no crafted keys (no registered system crafts keys for it)")]
    NoCraftedKeys {
        /// The target program.
        program: String,
    },
    /// The systems' own typed error (`inca_system::SystemError`: an
    /// unknown program, a bad parameter, a program that does not fit, a
    /// device that refused its configuration), kept whole for callers that
    /// downcast.
    #[error(transparent)]
    System(Box<dyn std::error::Error + Send + Sync>),
    /// A factory's plain message (test factories).
    #[error("{0}")]
    Other(String),
}

impl From<String> for FactoryError {
    fn from(message: String) -> Self {
        FactoryError::Other(message)
    }
}

impl From<&str> for FactoryError {
    fn from(message: &str) -> Self {
        FactoryError::Other(message.to_string())
    }
}

/// A factory seen as a workload registry (hosts are built with the
/// scenario's factory, and `inca node`'s with the binary's).
pub struct FactoryWorkloads<'a>(pub &'a dyn SwitchFactory);

impl WorkloadRegistry for FactoryWorkloads<'_> {
    fn workload(
        &self,
        kind: &str,
        table: &toml::Table,
        cx: &mut BuildContext<'_>,
    ) -> Option<Result<Box<dyn Workload>, HostError>> {
        self.0.workload(kind, table, cx)
    }
}

/// What a factory gets to build a `[[server]]` node.
#[derive(Debug, Clone)]
pub struct ServerSetup {
    /// The server's name in the scenario.
    pub name: String,
    /// Its IPv4 address.
    pub ip: Ipv4Addr,
    /// The MAC of each of its ports (index = port number).
    pub macs: Vec<[u8; 6]>,
    /// The MAC at the other end of each port's link (`ff:..` if unlinked).
    pub neighbour_macs: Vec<[u8; 6]>,
    /// The server's `params` table as written (the factory deserialises it
    /// into the device's own configuration).
    pub params: toml::Table,
    /// The names and addresses of every node with an address (hosts,
    /// servers) and of every switch with its announced prefixes, so a device
    /// can refer to its peers by name.
    pub addresses: BTreeMap<String, Ipv4Addr>,
}
