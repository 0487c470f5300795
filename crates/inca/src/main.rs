//! The `inca` command.
//!
//! - `inca check` loads a program onto a device profile and prints the
//!   resource report, or why the program does not fit (exit status 1).
//! - `inca run` simulates a scenario and writes its results folder.
//! - `inca report` renders plots and a summary from results.
//!
//! Later issues add `node` and `testbed` (live mode), `plan` and `bench`.

mod report;
mod run;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use inca_apps::catalog::{check_app, CatalogError, APPS};
use inca_apps::params::Params;
use inca_switch::Profile;

#[derive(Parser)]
#[command(
    name = "inca",
    version,
    about = "Elastic and resilient in-network computing, modelled and measured"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Load a program onto a device profile and print its resource report.
    Check {
        /// Device profile: tofino, smartnic or server.
        #[arg(long, default_value = "tofino")]
        profile: String,
        /// Program name (see --list).
        #[arg(required_unless_present = "list")]
        program: Option<String>,
        /// Program parameter, e.g. --set flows=65536 (repeatable).
        #[arg(long = "set", value_name = "NAME=VALUE")]
        set: Vec<String>,
        /// Profile model input, e.g. --profile-set stages=20 (repeatable).
        #[arg(long = "profile-set", value_name = "NAME=VALUE")]
        profile_set: Vec<String>,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
        /// List the programs and their parameters.
        #[arg(long)]
        list: bool,
    },
    /// Simulate a scenario: print a summary, write results (JSON, CSV).
    Run {
        /// The scenario file (TOML).
        scenario: PathBuf,
        /// Run seed (overrides the scenario's).
        #[arg(long)]
        seed: Option<u64>,
        /// Results folder (default out/<scenario name>).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Override a scenario value, e.g. --set duration=2s or
        /// --set agg1.params.flows=1000 (repeatable).
        #[arg(long = "set", value_name = "KEY=VALUE")]
        set: Vec<String>,
        /// No progress bar.
        #[arg(long, short)]
        quiet: bool,
    },
    /// Plots (PNG/SVG, into DIR/plots) and a text summary from a results
    /// folder, or from a folder of results folders (one per configuration).
    Report {
        /// The results folder.
        dir: PathBuf,
        /// Image format: png or svg (repeatable; default both).
        #[arg(long)]
        format: Vec<String>,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Run {
            scenario,
            seed,
            out,
            set,
            quiet,
        } => match run::run(&scenario, seed, out, &set, quiet) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("inca run: {e:#}");
                ExitCode::FAILURE
            }
        },
        Command::Check {
            profile,
            program,
            set,
            profile_set,
            json,
            list,
        } => {
            if list {
                for (name, about, params) in APPS {
                    println!("{name:8} {about} (parameters: {})", params.join(", "));
                }
                return ExitCode::SUCCESS;
            }
            let program = program.unwrap_or_default();
            match check(&profile, &program, &set, &profile_set, json) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("inca check: {e:#}");
                    ExitCode::FAILURE
                }
            }
        }
        Command::Report { dir, format } => match report::run(&dir, &format) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("inca report: {e:#}");
                ExitCode::FAILURE
            }
        },
    }
}

fn check(
    profile: &str,
    program: &str,
    set: &[String],
    profile_set: &[String],
    json: bool,
) -> anyhow::Result<()> {
    let mut prof = Profile::by_name(profile)?;
    for item in profile_set {
        let (k, v) = item
            .split_once('=')
            .ok_or_else(|| anyhow::anyhow!("--profile-set expects NAME=VALUE, got {item:?}"))?;
        prof.set(k.trim(), v.trim())?;
    }
    let params = Params::parse(set.iter().map(String::as_str))?;
    match check_app(program, &params, &prof) {
        Ok(report) => {
            if json {
                println!("{}", serde_json::to_string_pretty(&report)?);
            } else {
                println!("{program} on {profile}: fits\n\n{report}");
            }
            Ok(())
        }
        Err(CatalogError::Load(e)) => {
            Err(anyhow::anyhow!("{program} does not fit on {profile}: {e}"))
        }
        Err(e) => Err(e.into()),
    }
}
