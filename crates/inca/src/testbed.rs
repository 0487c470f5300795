//! `inca testbed up|down|status|crash|restart SCENARIO`: the subcommands, over
//! `inca_live::testbed` (which builds the topology) with the registered
//! systems as its factory.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Subcommand;
use inca_live::testbed;

/// `inca testbed` subcommands.
#[derive(Subcommand, Debug)]
pub enum TestbedAction {
    /// Create the scenario's namespaces, veth pairs and node processes.
    Up {
        /// The scenario file (TOML).
        scenario: PathBuf,
        /// Have every node write a pcap per port into this folder
        /// (`<node>-port<id>.pcap`).
        #[arg(long, value_name = "DIR")]
        capture_dir: Option<PathBuf>,
    },
    /// Stop the processes and delete the namespaces and interfaces `up`
    /// recorded.
    Down {
        /// The scenario file (only its name is used).
        scenario: PathBuf,
    },
    /// Crash one node as a power failure would: SIGKILL its process group
    /// and set its interfaces down, so its neighbours lose carrier (inca
    /// routers withdraw it after their `detect_delay`).
    Crash {
        /// The scenario file (only its name is used).
        scenario: PathBuf,
        /// The node (switch, router or server) to crash.
        node: String,
    },
    /// Restart a crashed node: its interfaces up again, `inca node` started
    /// afresh with its configuration (its state is gone, as after a power
    /// cycle).
    Restart {
        /// The scenario file (only its name is used).
        scenario: PathBuf,
        /// The node to restart.
        node: String,
    },
    /// Say what is up and whether each process is alive (exit status 1 if
    /// anything is missing).
    Status {
        /// The scenario file (only its name is used).
        scenario: PathBuf,
    },
}

/// Runs a testbed subcommand.
pub fn run(action: TestbedAction) -> anyhow::Result<ExitCode> {
    match action {
        TestbedAction::Up {
            scenario,
            capture_dir,
        } => {
            testbed::need_root()?;
            testbed::up(&scenario, capture_dir.as_deref(), &inca::factory())?;
        }
        TestbedAction::Down { scenario } => {
            testbed::need_root()?;
            testbed::down(&scenario)?;
        }
        TestbedAction::Crash { scenario, node } => {
            testbed::need_root()?;
            testbed::crash(&scenario, &node)?;
        }
        TestbedAction::Restart { scenario, node } => {
            testbed::need_root()?;
            testbed::restart(&scenario, &node)?;
        }
        TestbedAction::Status { scenario } => {
            if !testbed::status(&scenario)? {
                return Ok(ExitCode::FAILURE);
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
