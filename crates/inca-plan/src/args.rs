//! The planner's inputs from command-line words (what `inca plan` passes
//! on), so the binary holds no planner logic.

use inca_apps::params::Params;
use inca_switch::Profile;

use crate::model::Affinity;
use crate::plan::{AppSpec, PlanInputs};

/// `inca plan`'s arguments, as words.
#[derive(Debug, Clone, Default)]
pub struct PlanArgs {
    /// Apps: `app` or `instance:app`.
    pub apps: Vec<String>,
    /// Devices.
    pub devices: usize,
    /// Flows (keys) per app.
    pub flows: u64,
    /// `instance.param=value` (app parameters; `instance.flows` overrides
    /// the flows of one app, `instance.weight` its `W_p`,
    /// `instance.affinity` high|medium|low).
    pub set: Vec<String>,
    /// `Q_p`.
    pub quantum: Option<u64>,
    /// Zipf exponent.
    pub zipf: Option<f64>,
    /// Flow-manager cap, keys.
    pub fm_cap: Option<u64>,
    /// Classifier rules of the merged program.
    pub classify: Option<String>,
    /// Solve the naive formulation.
    pub naive: bool,
}

/// A bad argument, naming it.
#[derive(Debug, thiserror::Error)]
#[error("{arg}: {reason}")]
pub struct ArgError {
    /// The argument.
    pub arg: String,
    /// What is wrong.
    pub reason: String,
}

fn bad(arg: &str, reason: impl Into<String>) -> ArgError {
    ArgError {
        arg: arg.to_string(),
        reason: reason.into(),
    }
}

/// Turns `a` into planner inputs.
pub fn inputs(a: &PlanArgs) -> Result<PlanInputs, ArgError> {
    if a.apps.is_empty() {
        return Err(bad("APPS", "name at least one app"));
    }
    let mut specs: Vec<AppSpec> = Vec::new();
    for item in &a.apps {
        let (name, app) = item.split_once(':').unwrap_or((item, item));
        if name.is_empty() || name.contains('/') || name.contains('.') {
            return Err(bad(
                item,
                "an instance name must be non-empty, without '/' or '.'",
            ));
        }
        if specs.iter().any(|s| s.name == name) {
            return Err(bad(
                item,
                format!("two apps named {name:?}; name them inst:app"),
            ));
        }
        if !inca_apps::catalog::APPS.iter().any(|x| x.0 == app) || app == "composite" {
            return Err(bad(item, format!("unknown app {app:?}")));
        }
        specs.push(AppSpec {
            name: name.to_string(),
            app: app.to_string(),
            params: Params::default(),
            flows: a.flows,
            weight: None,
            affinity: None,
        });
    }
    for kv in &a.set {
        let (key, value) = kv
            .split_once('=')
            .ok_or_else(|| bad(kv, "expected instance.param=value"))?;
        let (inst, param) = key
            .split_once('.')
            .ok_or_else(|| bad(kv, "expected instance.param=value"))?;
        let spec = specs
            .iter_mut()
            .find(|s| s.name == inst)
            .ok_or_else(|| bad(kv, format!("no app instance {inst:?}")))?;
        match param {
            "flows" => {
                spec.flows = value
                    .replace('_', "")
                    .parse()
                    .map_err(|_| bad(kv, "flows must be a whole number"))?
            }
            "weight" => {
                let w: f64 = value
                    .parse()
                    .map_err(|_| bad(kv, "weight must be a number"))?;
                if !(w.is_finite() && w >= 0.0) {
                    return Err(bad(kv, "weight must be finite and ≥ 0"));
                }
                spec.weight = Some(w);
            }
            "affinity" => {
                spec.affinity = Some(
                    Affinity::parse(value)
                        .ok_or_else(|| bad(kv, "affinity is high, medium or low"))?,
                )
            }
            _ => {
                spec.params.set(param, value);
            }
        }
    }
    for s in &specs {
        if s.flows == 0 {
            return Err(bad(&s.name, "flows must be at least 1"));
        }
    }
    let mut inputs = PlanInputs::new(specs, a.devices);
    inputs.switch = Profile::tofino();
    if let Some(q) = a.quantum {
        if q == 0 {
            return Err(bad("--quantum", "must be at least 1"));
        }
        inputs.quantum = q;
    }
    if let Some(z) = a.zipf {
        if !(z.is_finite() && z > 0.0) {
            return Err(bad("--zipf", "must be a positive number"));
        }
        inputs.zipf = z;
    }
    inputs.fm_cap = a.fm_cap;
    inputs.classify = a.classify.clone().unwrap_or_default();
    inputs.naive = a.naive;
    Ok(inputs)
}
