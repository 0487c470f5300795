//! The `inca` command.
//!
//! - `inca check` loads a program onto a device profile and prints the
//!   resource report, or why the program does not fit (exit status 1); then
//!   runs the load-time check (`inca_switch::loadcheck`) and refuses a
//!   program whose data plane reaches an object twice in a pass or whose
//!   declared dependencies contradict its data flow (exit status 1).
//! - `inca run` simulates a scenario and writes its results folder.
//! - `inca report` renders plots and a summary from results.
//! - `inca sweep` runs an experiment descriptor's configurations and draws
//!   its plots.
//! - `inca node` runs one device as a live process.
//! - `inca testbed` builds a scenario's topology live (namespaces, veth,
//!   node processes).
//!
//! - `inca bench` runs the benchmarks with their baselines and prints one
//!   table (written as JSON too).
//!
//! - `inca plan` runs the ExoPlane planner: per app its switch share,
//!   devices and switch-served traffic, the merged switch program.
//! - `inca exoplane --experiment e2|e11` runs ExoPlane's experiments that
//!   need no full-scenario simulation (CSVs and plots into --out).

mod campaign;
mod exoplane;
mod node;
mod plan;
mod run;
mod tea_offline;
mod testbed;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use inca_apps::params::Params;
use inca_switch::Profile;
use inca_system::CheckError;

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
        /// Device profile: tofino, smartnic or server (default: the one the
        /// program is meant for, tofino for most).
        #[arg(long)]
        profile: Option<String>,
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
        /// Find the largest value of this parameter (e.g. flows) that fits,
        /// and say what runs out first beyond it.
        #[arg(long, value_name = "PARAM")]
        largest: Option<String>,
        /// Only place the program: skip the load-time check (double
        /// accesses, dependencies against the data flow).
        #[arg(long)]
        no_load_check: bool,
        /// Seed of the load-time check's random packets.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Refuse the program for known violations too (those a program
        /// declares accepted, with its reason).
        #[arg(long)]
        strict: bool,
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
    /// Run a scenario under many seeds with its randomised faults and check
    /// every run: devices' invariants and each system's checks (RedPlane
    /// linearizability, TEA lookups). A failing seed is printed with its
    /// fault schedule; `inca run --seed` reproduces it.
    Campaign {
        /// The scenario file (TOML), or a built-in campaign: tea-lookup,
        /// redplane-snapshot.
        scenario: PathBuf,
        /// How many seeds.
        #[arg(long, default_value_t = 100)]
        seeds: u64,
        /// The first seed.
        #[arg(long, default_value_t = 1)]
        first_seed: u64,
        /// Threads (default: the machine's cores).
        #[arg(long)]
        jobs: Option<usize>,
        /// Override a scenario value (repeatable).
        #[arg(long = "set", value_name = "KEY=VALUE")]
        set: Vec<String>,
        /// Also write the summary as JSON here.
        #[arg(long)]
        json: Option<PathBuf>,
        /// No progress bar.
        #[arg(long, short)]
        quiet: bool,
    },
    /// Run one device as a live process (switch or router), its ports bound
    /// to UDP links or Linux interfaces, until SIGTERM.
    Node {
        /// The node's configuration (TOML; see inca_live::config).
        #[arg(long)]
        config: PathBuf,
    },
    /// Build a scenario's topology live (root): a network namespace per
    /// host, an `inca node` process per switch and router, veth pairs.
    Testbed {
        #[command(subcommand)]
        action: testbed::TestbedAction,
    },
    /// Run every configuration of an experiment descriptor (a scenario
    /// swept over named configurations and axes, under several seeds), one
    /// results folder each, then draw the descriptor's plots into DIR/plots.
    Sweep {
        /// The experiment descriptor (TOML; see docs/experiments.md).
        experiment: PathBuf,
        /// Output folder (default out/<descriptor stem>).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Runs at once (default: the machine's cores).
        #[arg(long)]
        jobs: Option<usize>,
        /// Apply the descriptor's `quick` overrides and seeds (a smoke test).
        #[arg(long)]
        quick: bool,
        /// Image format: png or svg (repeatable; default both).
        #[arg(long)]
        format: Vec<String>,
        /// No progress lines.
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
    /// Run the benchmarks (default all) with their baselines side by side;
    /// print one table and write it as JSON.
    Bench {
        /// Benchmarks to run (see `inca bench --list`).
        names: Vec<String>,
        /// Timed runs of each (the table shows their median).
        #[arg(long, default_value_t = 5)]
        runs: usize,
        /// Where to write the JSON (default target/inca-bench.json).
        #[arg(long)]
        json: Option<PathBuf>,
        /// Smaller amounts of work (a smoke test; noisier figures).
        #[arg(long)]
        quick: bool,
        /// List the benchmarks.
        #[arg(long)]
        list: bool,
        /// Run N iterations of each named benchmark's measured work once,
        /// untimed, for a profiler: valgrind --tool=callgrind
        /// --collect-atstart=no --toggle-collect='*bench*profiled*'.
        #[arg(long, value_name = "N")]
        profile_iterations: Option<u64>,
    },
    /// ExoPlane's planner: split each app between the switch and the smart
    /// NICs (an ILP on HiGHS) and merge the switch program.
    Plan(plan::PlanCmd),
    /// ExoPlane's experiments without a full simulation: e2 (union-key
    /// skew per epoch), e11 (hub memory, sync bandwidth, switch share).
    Exoplane(exoplane::ExoCmd),
    /// TEA's offline experiments (no simulation): e10 BLP vs cuckoo, e11
    /// range rules, e12 cost calculator; a CSV and a plot into --out.
    TeaOffline {
        /// Which experiment.
        #[arg(value_enum)]
        experiment: tea_offline::Experiment,
        /// E12: per-server DRAM lookups/s, as measured in E4.
        #[arg(long)]
        capacity: Option<f64>,
        /// Output folder (default out/tea-offline).
        #[arg(long)]
        out: Option<PathBuf>,
        /// A smaller E10 table, for smoke tests.
        #[arg(long)]
        quick: bool,
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
            largest,
            no_load_check,
            seed,
            strict,
        } => {
            if list {
                print!("{}", inca::systems::list_programs(&inca::registry()));
                return ExitCode::SUCCESS;
            }
            let program = program.unwrap_or_default();
            let profile =
                profile.unwrap_or_else(|| inca::registry().default_profile(&program).to_string());
            let result = match &largest {
                Some(param) => find_largest(&profile, &program, &set, &profile_set, param),
                None => check(&profile, &program, &set, &profile_set, json).and_then(|()| {
                    match no_load_check {
                        true => Ok(()),
                        false => {
                            let how = LoadCheckHow { seed, json, strict };
                            load_check(&profile, &program, &set, &profile_set, how)
                        }
                    }
                }),
            };
            match result {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("inca check: {e:#}");
                    ExitCode::FAILURE
                }
            }
        }
        Command::Campaign {
            scenario,
            seeds,
            first_seed,
            jobs,
            set,
            json,
            quiet,
        } => {
            let jobs =
                jobs.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
            match campaign::run(&scenario, &set, first_seed, seeds, jobs, quiet) {
                Ok((summary, builtin)) => {
                    campaign::print(&summary, &scenario, builtin);
                    if let Some(path) = json {
                        let text = serde_json::to_string_pretty(&summary).unwrap_or_default();
                        if let Err(e) = std::fs::write(&path, text) {
                            eprintln!("error: {}: {e}", path.display());
                            return ExitCode::FAILURE;
                        }
                    }
                    if summary.passed() {
                        ExitCode::SUCCESS
                    } else {
                        ExitCode::FAILURE
                    }
                }
                Err(e) => {
                    eprintln!("error: {e:#}");
                    ExitCode::FAILURE
                }
            }
        }
        Command::Plan(cmd) => plan::run(cmd),
        Command::Exoplane(cmd) => exoplane::run(cmd),
        Command::Node { config } => match node::run(&config) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("inca node: {e:#}");
                ExitCode::FAILURE
            }
        },
        Command::Testbed { action } => match testbed::run(action) {
            Ok(code) => code,
            Err(e) => {
                eprintln!("inca testbed: {e:#}");
                ExitCode::FAILURE
            }
        },
        Command::Sweep {
            experiment,
            out,
            jobs,
            quick,
            format,
            quiet,
        } => {
            let jobs =
                jobs.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
            let opts = inca_report::sweep::runner::Options {
                out,
                jobs,
                quick,
                formats: format,
                quiet,
                factory: std::sync::Arc::new(|| Box::new(inca::factory())),
                experiments: std::sync::Arc::new(inca::systems::RegisteredExperiments(
                    inca::registry(),
                )),
            };
            match inca_report::sweep::runner::run(&experiment, &opts) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("inca sweep: {e:#}");
                    ExitCode::FAILURE
                }
            }
        }
        Command::Report { dir, format } => match inca_report::report::run(&dir, &format) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("inca report: {e:#}");
                ExitCode::FAILURE
            }
        },
        Command::Bench {
            names,
            runs,
            json,
            quick,
            list,
            profile_iterations,
        } => match bench_cmd(names, runs, json, quick, list, profile_iterations) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("inca bench: {e:#}");
                ExitCode::FAILURE
            }
        },
        Command::TeaOffline {
            experiment,
            capacity,
            out,
            quick,
            format,
        } => {
            let opts = tea_offline::Options {
                experiment,
                capacity,
                out,
                quick,
                formats: format,
            };
            match tea_offline::run(&opts) {
                Ok(files) => {
                    for f in files {
                        println!("wrote {}", f.display());
                    }
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("inca tea-offline: {e:#}");
                    ExitCode::FAILURE
                }
            }
        }
    }
}

/// `inca bench`: the table on stdout, progress on stderr, JSON to a file.
fn bench_cmd(
    names: Vec<String>,
    runs: usize,
    json: Option<PathBuf>,
    quick: bool,
    list: bool,
    profile_iterations: Option<u64>,
) -> anyhow::Result<()> {
    use inca_bench as bench;
    let systems = inca::registry().benches();
    if list {
        for b in bench::all(systems) {
            println!("{:14} {} ({})", b.name, b.what, b.unit);
        }
        return Ok(());
    }
    if let Some(n) = profile_iterations {
        for line in bench::profile(&names, systems, n)? {
            println!("{line}");
        }
        return Ok(());
    }
    let opts = bench::Options {
        names,
        runs,
        quick,
        systems,
    };
    let report = bench::run(&opts, |name| eprintln!("inca bench: {name}..."))?;
    print!("{}", report.render());
    let path = json.unwrap_or_else(|| PathBuf::from("target/inca-bench.json"));
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(&path, serde_json::to_string_pretty(&report)?)
        .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    println!("wrote {}", path.display());
    if report.rows.iter().any(|r| r.status.starts_with("failed")) {
        anyhow::bail!("a benchmark failed (see its row)");
    }
    Ok(())
}

fn load_profile(profile: &str, profile_set: &[String]) -> anyhow::Result<Profile> {
    let mut prof = Profile::by_name(profile)?;
    for item in profile_set {
        let (k, v) = item
            .split_once('=')
            .ok_or_else(|| anyhow::anyhow!("--profile-set expects NAME=VALUE, got {item:?}"))?;
        prof.set(k.trim(), v.trim())?;
    }
    Ok(prof)
}

fn check(
    profile: &str,
    program: &str,
    set: &[String],
    profile_set: &[String],
    json: bool,
) -> anyhow::Result<()> {
    let prof = load_profile(profile, profile_set)?;
    let params = Params::parse(set.iter().map(String::as_str))?;
    match inca::registry().check(program, &params, &prof) {
        Ok(report) => {
            if json {
                println!("{}", serde_json::to_string_pretty(&report)?);
            } else {
                println!("{program} on {profile}: fits\n\n{report}");
            }
            Ok(())
        }
        Err(e @ (CheckError::DoesNotFit(_) | CheckError::Refused(_))) => {
            Err(anyhow::anyhow!("{program} does not fit on {profile}: {e}"))
        }
        Err(e) => Err(e.into()),
    }
}

/// How `inca check` runs its load-time check.
struct LoadCheckHow {
    seed: u64,
    json: bool,
    /// Known violations refuse too.
    strict: bool,
}

/// The load-time check after placement: its report on stdout; an error
/// naming every finding if any refuses the program.
fn load_check(
    profile: &str,
    program: &str,
    set: &[String],
    profile_set: &[String],
    how: LoadCheckHow,
) -> anyhow::Result<()> {
    use inca_switch::loadcheck::LoadCheckOptions;
    let LoadCheckHow { seed, json, strict } = how;
    let prof = load_profile(profile, profile_set)?;
    let params = Params::parse(set.iter().map(String::as_str))?;
    let report = inca::registry().load_check(program, &params, &prof, LoadCheckOptions { seed })?;
    // With --json, stdout is the resource report alone.
    match json {
        true => eprint!("{report}"),
        false => print!("\n{report}"),
    }
    let known = report.known.iter().filter(|_| strict);
    let list: Vec<String> = report
        .findings
        .iter()
        .map(|f| f.to_string())
        .chain(known.map(|(f, why)| format!("{f} (known: {why})")))
        .collect();
    if list.is_empty() {
        return Ok(());
    }
    Err(anyhow::anyhow!(
        "{program} refused by the load-time check:\n{}",
        list.join("\n")
    ))
}

/// `inca check --largest`: the search is `inca_system::largest`.
fn find_largest(
    profile: &str,
    program: &str,
    set: &[String],
    profile_set: &[String],
    param: &str,
) -> anyhow::Result<()> {
    use inca_system::largest::{largest, Largest, LargestError};
    let prof = load_profile(profile, profile_set)?;
    let params = Params::parse(set.iter().map(String::as_str))?;
    match largest(&inca::registry(), program, &params, param, &prof) {
        Ok(Largest::AtLeast(lo)) => {
            println!("{program} on {profile}: fits with {param} up to at least {lo}");
        }
        Ok(Largest::Exact { value, beyond }) => {
            println!("{program} on {profile}: largest {param} that fits: {value}");
            match beyond {
                Some((v, why)) => println!("at {param}={v}: {why}"),
                None => println!("(beyond it the parameter takes no larger value)"),
            }
        }
        Err(LargestError::NoneFits { param, why }) => {
            anyhow::bail!("{program} does not fit on {profile} even with {param}=1: {why}")
        }
        Err(e) => return Err(e.into()),
    }
    Ok(())
}
