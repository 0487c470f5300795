//! `inca plan`: the ExoPlane planner (crates/inca-plan) on the command
//! line. Glue only: words in, report out.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use inca_plan::args::{inputs, PlanArgs};

/// The arguments of `inca plan`.
#[derive(Args)]
pub struct PlanCmd {
    /// Apps to plan: `app` or `instance:app` (e.g. vpn nat acl univmon).
    #[arg(required_unless_present = "experiment")]
    apps: Vec<String>,
    /// Run an experiment of spec §8 instead (CSV and plots into --out).
    #[arg(long, value_enum)]
    experiment: Option<Experiment>,
    /// The experiment's output folder (default out/exoplane-plan).
    #[arg(long)]
    out: Option<PathBuf>,
    /// The experiment's short sweep (a smoke test).
    #[arg(long)]
    quick: bool,
    /// External devices (smart NICs).
    #[arg(long, default_value_t = 4)]
    devices: usize,
    /// Flows (keys) per app.
    #[arg(long, default_value_t = 1_000_000)]
    flows: u64,
    /// Per-app setting: instance.flows, instance.weight,
    /// instance.affinity=high|medium|low, or an app parameter (repeatable).
    #[arg(long = "set", value_name = "INSTANCE.NAME=VALUE")]
    set: Vec<String>,
    /// Keys per quantum (Q_p).
    #[arg(long)]
    quantum: Option<u64>,
    /// Zipf exponent of key popularity.
    #[arg(long)]
    zipf: Option<f64>,
    /// Cap on all flow managers' entries (the thesis evaluated 10,240).
    #[arg(long)]
    fm_cap: Option<u64>,
    /// Classifier rules of the merged program (as `inca check composite`).
    #[arg(long)]
    classify: Option<String>,
    /// Solve the naive formulation (one binary per quantum per device).
    #[arg(long)]
    naive: bool,
    /// Print the plan as JSON.
    #[arg(long)]
    json: bool,
}

/// Runs `inca plan`.
pub fn run(cmd: PlanCmd) -> ExitCode {
    if let Some(e) = cmd.experiment {
        return match experiment(e, cmd.out, cmd.quick) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("inca plan: {e:#}");
                ExitCode::FAILURE
            }
        };
    }
    let args = PlanArgs {
        apps: cmd.apps,
        devices: cmd.devices,
        flows: cmd.flows,
        set: cmd.set,
        quantum: cmd.quantum,
        zipf: cmd.zipf,
        fm_cap: cmd.fm_cap,
        classify: cmd.classify,
        naive: cmd.naive,
    };
    let result = inputs(&args)
        .map_err(|e| e.to_string())
        .and_then(|i| inca_plan::plan(&i).map_err(|e| e.to_string()));
    match result {
        Ok(report) => {
            let text = match cmd.json {
                true => serde_json::to_string_pretty(&report).map(|s| s + "\n"),
                false => Ok(report.to_string()),
            };
            // A closed pipe (`| head`) ends the output quietly.
            match text {
                Ok(t) => {
                    let _ = std::io::Write::write_all(&mut std::io::stdout(), t.as_bytes());
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("inca plan: {e}");
                    ExitCode::FAILURE
                }
            }
        }
        Err(e) => {
            eprintln!("inca plan: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Which planner experiment (spec §8).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Experiment {
    /// SRAM the front-end apps need on the switch alone vs flows and apps.
    E1,
    /// Planner solve time vs apps (1…32) and vs flows (up to 10 M).
    E12,
}

/// Runs E1 or E12: CSV and plots into `out` (default out/exoplane-plan).
pub fn experiment(e: Experiment, out: Option<PathBuf>, quick: bool) -> anyhow::Result<()> {
    use inca_plan::experiments as x;
    use inca_report::figures::{bar_plot, line_plot};
    let out = out.unwrap_or_else(|| PathBuf::from("out/exoplane-plan"));
    std::fs::create_dir_all(&out)?;
    let formats = inca_report::plot::parse_formats(&[])?;
    let (e1_flows, apps, flows) = x::sweeps(quick);
    match e {
        Experiment::E1 => {
            let tofino = inca_switch::Profile::tofino();
            let sram = inca_plan::profile::switch_capacity(&tofino)[0];
            let pts = x::e1(&tofino, &e1_flows)?;
            std::fs::write(out.join("e1.csv"), x::e1_csv(&pts, sram))?;
            let a: Vec<_> = pts.iter().filter(|p| p.part == 'a').collect();
            let mut lines = vec![(
                "all four".to_string(),
                a.iter()
                    .map(|p| ((p.flows as f64).log10(), p.ratio))
                    .collect(),
            )];
            for (i, app) in x::FRONT_END.iter().enumerate() {
                let pts = a
                    .iter()
                    .map(|p| ((p.flows as f64).log10(), p.per_app[i].1 as f64 / sram));
                lines.push((app.to_string(), pts.collect()));
            }
            line_plot(
                &out.join("e1a"),
                &formats,
                "E1(a): SRAM needed / switch SRAM",
                "log10 flows per app",
                "ratio",
                lines,
                true,
            )?;
            let b: Vec<_> = pts.iter().filter(|p| p.part == 'b').collect();
            let groups = b.iter().map(|p| x::FRONT_END[..p.apps].join("+")).collect();
            let segs = x::FRONT_END.iter().map(|s| s.to_string()).collect();
            let values = b
                .iter()
                .map(|p| {
                    (0..4)
                        .map(|i| p.per_app.get(i).map_or(0.0, |v| v.1 as f64 / sram))
                        .collect()
                })
                .collect();
            bar_plot(
                &out.join("e1b"),
                &formats,
                "E1(b): 1 M flows per app, apps added",
                "SRAM needed / switch SRAM",
                groups,
                segs,
                values,
            )?;
            for p in &pts {
                println!(
                    "E1({}) flows {} apps {}: SRAM ratio {:.2}",
                    p.part, p.flows, p.apps, p.ratio
                );
            }
        }
        Experiment::E12 => {
            let pts = x::e12(&apps, 1_000_000, &flows)?;
            std::fs::write(out.join("e12.csv"), x::e12_csv(&pts))?;
            let line = |part: char, xf: &dyn Fn(&x::E12Point) -> f64| {
                let sel: Vec<_> = pts.iter().filter(|p| p.part == part).collect();
                vec![
                    (
                        "profile + ILP".to_string(),
                        sel.iter()
                            .map(|p| (xf(p), p.profile_seconds + p.solve_seconds))
                            .collect(),
                    ),
                    (
                        "HiGHS".to_string(),
                        sel.iter().map(|p| (xf(p), p.highs_seconds)).collect(),
                    ),
                ]
            };
            line_plot(
                &out.join("e12a"),
                &formats,
                "E12(a): 16 devices, 1 M flows/app",
                "apps",
                "seconds",
                line('a', &|p| p.apps as f64),
                false,
            )?;
            line_plot(
                &out.join("e12b"),
                &formats,
                "E12(b): 4 apps, 16 devices",
                "M flows per app",
                "seconds",
                line('b', &|p| p.flows as f64 / 1e6),
                false,
            )?;
            for p in &pts {
                println!("E12({}) apps {} flows {}: profile {:.3} s, ILP {:.3} s (HiGHS {:.3} s), {} columns", p.part, p.apps, p.flows, p.profile_seconds, p.solve_seconds, p.highs_seconds, p.columns);
            }
        }
    }
    println!("wrote {}", out.display());
    Ok(())
}
