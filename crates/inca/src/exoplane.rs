//! `inca exoplane`: ExoPlane's experiments that are commands rather than
//! sweeps (spec §8 E2, E9, E11), from `inca_exoplane::experiments`. Glue
//! only.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

/// The arguments of `inca exoplane`.
#[derive(Args)]
pub struct ExoCmd {
    /// Which experiment.
    #[arg(long, value_enum)]
    experiment: Experiment,
    /// Output folder (default out/exoplane-<experiment>).
    #[arg(long)]
    out: Option<PathBuf>,
    /// The short run (a smoke test).
    #[arg(long)]
    quick: bool,
}

/// Which experiment (spec §8).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Experiment {
    /// Union-key skew per epoch of the backbone-like trace.
    E2,
    /// Switch and NIC copies of a synchronised counter after each merge.
    E9,
    /// Hub memory, sync bandwidth and switch share at 10,240 FM entries.
    E11,
}

/// An experiment: output folder and quick flag in, summary lines out.
type Runner = fn(&std::path::Path, bool) -> anyhow::Result<Vec<String>>;

/// Runs `inca exoplane`.
pub fn run(cmd: ExoCmd) -> ExitCode {
    use inca_exoplane::experiments as x;
    let (name, f): (&str, Runner) = match cmd.experiment {
        Experiment::E2 => ("e2", x::run_e2),
        Experiment::E9 => ("e9", x::run_e9),
        Experiment::E11 => ("e11", x::run_e11),
    };
    let out = cmd
        .out
        .unwrap_or_else(|| PathBuf::from(format!("out/exoplane-{name}")));
    match f(&out, cmd.quick) {
        Ok(lines) => {
            for l in lines {
                println!("{l}");
            }
            println!("wrote {}", out.display());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("inca exoplane: {e:#}");
            ExitCode::FAILURE
        }
    }
}
