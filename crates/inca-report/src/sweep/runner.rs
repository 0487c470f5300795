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

use super::descriptor::{value_label, Descriptor};
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

    // Parse every configuration's scenario before running anything, so a bad
    // override fails at once and names its configuration.
    let mut loaded = Vec::with_capacity(d.configs.len());
    let mut sets = Vec::with_capacity(d.configs.len());
    for c in &d.configs {
        let mut set = c.set.clone();
        if opts.quick {
            set.extend(d.quick.iter().cloned());
        }
        let l = Loaded::from_file(&d.scenario, &set)
            .map_err(|e| anyhow!("configuration {:?}: {e}", c.label))?;
        loaded.push(l);
        sets.push(set);
    }
    let seeds: Vec<u64> = match (opts.quick, &d.quick_seeds, &d.seeds) {
        (true, Some(q), _) => q.clone(),
        (true, None, Some(s)) => vec![s[0]],
        (_, _, Some(s)) => s.clone(),
        (_, _, None) => vec![loaded.first().map_or(1, |l| l.scenario.seed)],
    };
    // Fail on a configuration that does not build before starting threads.
    for (c, l) in d.configs.iter().zip(&loaded) {
        drop(
            l.build((opts.factory)().as_ref(), Some(seeds[0]), None)
                .map_err(|e| anyhow!("configuration {:?}: {e}", c.label))?,
        );
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
                match run_one(&loaded[c], seed, &dir, (opts.factory)().as_ref()) {
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
        scenario: d.scenario.display().to_string(),
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
fn run_one(loaded: &Loaded, seed: u64, dir: &Path, factory: &dyn SwitchFactory) -> Result<f64> {
    if dir.exists() {
        if !dir.join("summary.json").is_file() {
            bail!(
                "{}: exists and is not a results folder; not overwriting it",
                dir.display()
            );
        }
        std::fs::remove_dir_all(dir).with_context(|| format!("{}: cannot clear", dir.display()))?;
    }
    let built = loaded.build(factory, Some(seed), Some(dir))?;
    let name = loaded.scenario.name.clone();
    let r = inca_sim::run::run(built, &name, Some(dir), |_| {})?;
    Ok(r.summary.wall_seconds)
}
