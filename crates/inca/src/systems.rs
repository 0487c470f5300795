//! The systems inca hosts, registered in one place ([`all`]).
//!
//! Adding a system is one line here (and a dependency in Cargo.toml): its
//! programs appear in `inca check --list`, scenarios can use its programs
//! and server kinds, `inca campaign` runs its built-in campaigns and checks,
//! `inca bench` lists its benchmarks. See docs/architecture.md, "How to add
//! a system".

use std::fmt::Write as _;
use std::path::Path;
use std::sync::Arc;

use inca_system::{Registry, System, SystemFactory};

/// Every system inca hosts, in listing order.
pub fn all() -> Vec<Arc<dyn System>> {
    vec![
        Arc::new(inca_system::apps::AppsSystem),
        Arc::new(inca_redplane::system::RedPlaneSystem),
        Arc::new(inca_tea::system::TeaSystem),
        Arc::new(inca_exoplane::system::ExoPlaneSystem),
        Arc::new(inca_swish::system::SwishSystem),
        Arc::new(inca_clip::system::ClipSystem),
    ]
}

/// The registry of [`all`].
pub fn registry() -> Registry {
    Registry::new(all()).expect("the registered systems' names are distinct (tested)")
}

/// A plain-run factory over every registered system.
pub fn factory() -> SystemFactory {
    SystemFactory::new(registry())
}

/// The registered systems' built-in experiments, for `inca sweep`
/// descriptors that name one.
pub struct RegisteredExperiments(pub Registry);

impl RegisteredExperiments {
    fn find(&self, name: &str) -> anyhow::Result<inca_system::BuiltinExperiment> {
        self.0.experiment(name).ok_or_else(|| {
            let known: Vec<&str> = self.0.experiments().iter().map(|e| e.name).collect();
            anyhow::anyhow!(
                "no built-in experiment {name:?} (known: {})",
                known.join(", ")
            )
        })
    }
}

impl inca_report::sweep::runner::Experiments for RegisteredExperiments {
    fn check(&self, name: &str, set: &[String]) -> anyhow::Result<()> {
        let e = self.find(name)?;
        let params = inca_system::experiment::params_from_overrides(set)
            .map_err(|m| anyhow::anyhow!("{name}: {m}"))?;
        e.check(&params).map_err(|m| anyhow::anyhow!("{m}"))
    }

    fn run(&self, name: &str, set: &[String], seed: u64, dir: &Path) -> anyhow::Result<f64> {
        let e = self.find(name)?;
        let params = inca_system::experiment::params_from_overrides(set)
            .map_err(|m| anyhow::anyhow!("{name}: {m}"))?;
        e.run_into(&params, seed, dir)
            .map_err(|m| anyhow::anyhow!("{name}: {m}"))
    }
}

/// `inca check --list`: every system's programs, a paragraph per system,
/// with their parameters.
pub fn list_programs(registry: &Registry) -> String {
    let mut out = String::new();
    for (i, system) in registry.systems().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        for p in system.programs() {
            let _ = write!(out, "{:22} {}", p.name, p.about);
            if !p.params.is_empty() {
                let _ = write!(out, " (parameters: {})", p.params.join(", "));
            }
            out.push('\n');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn registered_names_are_distinct() {
        let r = inca_system::Registry::new(super::all()).unwrap();
        assert!(r.programs().len() > 20);
        assert!(r.campaigns().len() >= 3);
    }
}
