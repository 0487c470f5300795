//! The runner of `inca sweep EXPERIMENT.toml`: runs every configuration of an experiment
//! descriptor ([`super::descriptor`]) under every seed, one results folder each,
//! then writes `sweep.json` and draws the descriptor's plots
//! ([`crate::sweep::plots`]).
//!
//! Runs are independent simulations handed out to `--jobs` threads; each
//! writes only its own folder, and everything written afterwards is in
//! configuration order, so the results do not depend on the number of
//! jobs (except the `wall_seconds` of each `summary.json`).
//!
//! A descriptor runs a scenario file (each configuration's overrides
//! applied to it) or a system's built-in experiment (the overrides are its
//! parameters), through [`Experiments`]; either way every run writes the
//! same kind of results folder.
//!
//! Layout of the output folder DIR:
//! ```text
//! DIR/sweep.json              the sweep: axes, configurations, their folders
//! DIR/NN-LABEL-sSEED/         one results folder per configuration and seed
//! DIR/plots/NAME.{png,svg,csv} the descriptor's plots and their data
//! ```

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use anyhow::{anyhow, bail, Context, Result};
use inca_sim::scenario::{Loaded, SwitchFactory};

use super::descriptor::{value_label, Descriptor, Source};
use super::file::{ConfigOut, RunOut, SweepFile};

/// Options of `inca sweep`.
pub struct Options {
    /// Output folder (default `out/<descriptor stem>`).
    pub out: Option<PathBuf>,
    /// Threads.
    pub jobs: usize,
    /// Apply the descriptor's `quick` overrides and seeds.
    pub quick: bool,
    /// Image formats (`--format`).
    pub formats: Vec<String>,
    /// No progress lines.
    pub quiet: bool,
    /// Makes the scenario factory for one run (each run gets its own).
    pub factory: FactoryFn,
    /// The registered systems' built-in experiments.
    pub experiments: Arc<dyn Experiments>,
}

/// The built-in experiments a sweep can name (`experiment = "..."`).
pub trait Experiments: Send + Sync {
    /// Checks that experiment `name` exists and takes the parameters
    /// `set` (`KEY=VALUE`) gives, without running it.
    fn check(&self, name: &str, set: &[String]) -> Result<()>;
    /// Runs experiment `name` with the parameters of `set` and `seed`,
    /// writing its results folder into `dir`; returns the wall seconds.
    fn run(&self, name: &str, set: &[String], seed: u64, dir: &Path) -> Result<f64>;
}

/// No built-in experiments (a sweep of scenarios only).
pub struct NoExperiments;

impl Experiments for NoExperiments {
    fn check(&self, name: &str, _set: &[String]) -> Result<()> {
        bail!("no built-in experiment {name:?}")
    }
    fn run(&self, name: &str, _set: &[String], _seed: u64, _dir: &Path) -> Result<f64> {
        bail!("no built-in experiment {name:?}")
    }
}

/// What one configuration runs: its scenario, loaded with its overrides,
/// or an experiment with its parameters.
enum Prepared {
    Scenario(Box<Loaded>),
    Experiment(String, Vec<String>),
}

/// Makes a scenario factory (the registered systems, say) for one run.
pub type FactoryFn = Arc<dyn Fn() -> Box<dyn SwitchFactory> + Send + Sync>;

/// A folder name for configuration `index` with `label`, run with `seed`.
/// [our choice] The index comes first so folders sort in run order, and the
/// label is cut to 60 file-safe characters.
fn run_dir_name(index: usize, label: &str, seed: u64) -> String {
    let safe: String = label
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .take(60)
        .collect();
    format!("{index:03}-{safe}-s{seed}")
}

/// Runs the sweep described by `path`.
pub fn run(path: &Path, opts: &Options) -> Result<()> {
    let formats = crate::plot::parse_formats(&opts.formats)?;
    let d = Descriptor::load(path)?;
    let out = opts.out.clone().unwrap_or_else(|| {
        PathBuf::from("out").join(
            path.file_stem()
                .map_or("sweep".into(), |s| s.to_string_lossy().into_owned()),
        )
    });

    // Parse every configuration's scenario (or check its experiment's
    // parameters) before running anything, so a bad override fails at once
    // and names its configuration.
    let mut prepared = Vec::with_capacity(d.configs.len());
    let mut sets = Vec::with_capacity(d.configs.len());
    for c in &d.configs {
        let mut set = c.set.clone();
        if opts.quick {
            set.extend(d.quick.iter().cloned());
        }
        let p = match &d.source {
            Source::Scenario(path) => Prepared::Scenario(Box::new(
                Loaded::from_file(path, &set)
                    .map_err(|e| anyhow!("configuration {:?}: {e}", c.label))?,
            )),
            Source::Experiment(name) => {
                opts.experiments
                    .check(name, &set)
                    .map_err(|e| anyhow!("configuration {:?}: {e}", c.label))?;
                Prepared::Experiment(name.clone(), set.clone())
            }
        };
        prepared.push(p);
        sets.push(set);
    }
    let default_seed = match prepared.first() {
        Some(Prepared::Scenario(l)) => l.scenario.seed,
        _ => 1,
    };
    let seeds: Vec<u64> = match (opts.quick, &d.quick_seeds, &d.seeds) {
        (true, Some(q), _) => q.clone(),
        (true, None, Some(s)) => vec![s[0]],
        (_, _, Some(s)) => s.clone(),
        (_, _, None) => vec![default_seed],
    };
    // Fail on a configuration that does not build before starting threads.
    for (c, p) in d.configs.iter().zip(&prepared) {
        if let Prepared::Scenario(l) = p {
            drop(
                l.build((opts.factory)().as_ref(), Some(seeds[0]), None)
                    .map_err(|e| anyhow!("configuration {:?}: {e}", c.label))?,
            );
        }
    }

    std::fs::create_dir_all(&out).with_context(|| format!("{}: cannot create", out.display()))?;
    let tasks: Vec<(usize, u64)> = (0..d.configs.len())
        .flat_map(|c| seeds.iter().map(move |&s| (c, s)))
        .collect();
    let next = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    let error: Mutex<Option<anyhow::Error>> = Mutex::new(None);
    let wall = std::time::Instant::now();
    if !opts.quiet {
        eprintln!(
            "{}: {} configurations × {} seeds = {} runs on {} threads, into {}",
            d.name,
            d.configs.len(),
            seeds.len(),
            tasks.len(),
            opts.jobs.max(1),
            out.display()
        );
    }
    std::thread::scope(|s| {
        for _ in 0..opts.jobs.max(1).min(tasks.len().max(1)) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= tasks.len() || error.lock().map_or(true, |e| e.is_some()) {
                    break;
                }
                let (c, seed) = tasks[i];
                let label = &d.configs[c].label;
                let dir = out.join(run_dir_name(c, label, seed));
                match run_one(&prepared[c], seed, &dir, opts) {
                    Ok(wall) => {
                        let n = done.fetch_add(1, Ordering::Relaxed) + 1;
                        if !opts.quiet {
                            eprintln!(
                                "[{n}/{}] {label} (seed {seed}): {wall:.2} s wall",
                                tasks.len()
                            );
                        }
                    }
                    Err(e) => {
                        if let Ok(mut slot) = error.lock() {
                            slot.get_or_insert(
                                e.context(format!("configuration {label:?}, seed {seed}")),
                            );
                        }
                        break;
                    }
                }
            });
        }
    });
    if let Some(e) = error.into_inner().ok().flatten() {
        return Err(e);
    }
    if !opts.quiet {
        eprintln!(
            "{} runs in {:.1} s wall",
            tasks.len(),
            wall.elapsed().as_secs_f64()
        );
    }

    let file = SweepFile {
        name: d.name.clone(),
        description: d.description.clone(),
        descriptor: std::fs::canonicalize(&d.path)
            .unwrap_or_else(|_| d.path.clone())
            .display()
            .to_string(),
        descriptor_text: d.text.clone(),
        scenario: d.source.describe(),
        quick: opts.quick,
        seeds: seeds.clone(),
        axes: d.axes.clone(),
        configurations: d
            .configs
            .iter()
            .zip(sets)
            .enumerate()
            .map(|(i, (c, set))| ConfigOut {
                label: c.label.clone(),
                params: d
                    .axes
                    .iter()
                    .zip(&c.coords)
                    .map(|(a, &k)| (a.name.clone(), value_label(&a.values[k])))
                    .collect(),
                coords: c.coords.clone(),
                set,
                runs: seeds
                    .iter()
                    .map(|&s| RunOut {
                        seed: s,
                        dir: run_dir_name(i, &c.label, s),
                    })
                    .collect(),
            })
            .collect(),
    };
    let json = serde_json::to_string_pretty(&file)?;
    let sweep_json = out.join("sweep.json");
    std::fs::write(&sweep_json, json + "\n")
        .with_context(|| format!("{}: cannot write", sweep_json.display()))?;
    println!("sweep {}: results in {}", d.name, out.display());
    super::plots::draw(&out, &file, &d.plots, &formats)
}

/// Runs one configuration with `seed` into `dir` (emptied first, so no
/// file of an earlier run survives). Returns the wall seconds.
fn run_one(prepared: &Prepared, seed: u64, dir: &Path, opts: &Options) -> Result<f64> {
    if dir.exists() {
        if !dir.join("summary.json").is_file() {
            bail!(
                "{}: exists and is not a results folder; not overwriting it",
                dir.display()
            );
        }
        std::fs::remove_dir_all(dir).with_context(|| format!("{}: cannot clear", dir.display()))?;
    }
    match prepared {
        Prepared::Scenario(loaded) => {
            let factory: Box<dyn SwitchFactory> = (opts.factory)();
            let built = loaded.build(factory.as_ref(), Some(seed), Some(dir))?;
            let name = loaded.scenario.name.clone();
            let r = inca_sim::run::run(built, &name, Some(dir), |_| {})?;
            Ok(r.summary.wall_seconds)
        }
        Prepared::Experiment(name, set) => {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("{}: cannot create", dir.display()))?;
            opts.experiments.run(name, set, seed, dir)
        }
    }
}
