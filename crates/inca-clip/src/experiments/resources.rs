//! E7, resource usage (spec §8.2, the paper's Table II): the CLIP program
//! (NULL app, so no app objects) placed alone on the Tofino-class profile,
//! each placed object attributed to its module ([`crate::modules`]), and
//! one module's share of the whole device reported. Nothing is simulated:
//! the numbers are the placement's, as `inca check clip_null` computes it.
//!
//! Parameters: `module` (`selecting`, `scalability` or `forwarding`) and
//! `resource` (`crossbar`, `sram`, `tcam`, `vliw`, `hash_bits`, `salu`
//! or `stages`; default `sram`), the one `share_bp` reports, so a sweep
//! can put resources on an axis.
//!
//! Reports under `result`, in basis points (1/100 %) of the device:
//! `crossbar_bp`, `sram_bp`, `tcam_bp`, `vliw_bp`, `hash_bits_bp`,
//! `salu_bp`, `stages_bp`, and `share_bp` (the chosen resource's).

use inca_apps::params::Params;
use inca_switch::Profile;
use inca_system::{BuiltinExperiment, ExperimentRun};

use super::param_err;
use super::rig::counters;
use crate::modules::{placement, shares, table, Module, ModuleShare};

/// The experiment's name.
pub const NAME: &str = "clip-resources";
const PARAMS: &[&str] = &["module", "resource"];
/// The resources, as `resource` names them.
pub const RESOURCES: [&str; 7] = [
    "crossbar",
    "sram",
    "tcam",
    "vliw",
    "hash_bits",
    "salu",
    "stages",
];

/// E7.
pub fn experiment() -> BuiltinExperiment {
    BuiltinExperiment {
        name: NAME,
        about: "CLIP §8.2 E7 (Table II): a CLIP module's share of a Tofino-class switch (crossbar, SRAM, TCAM, VLIW, hash bits, stateful ALUs, stages) from the placement of the CLIP program alone (module=selecting|scalability|forwarding; resource picks share_bp)",
        params: PARAMS,
        run,
    }
}

/// A resource's share in a row, in percent.
fn share(row: &ModuleShare, resource: &str) -> Option<f64> {
    Some(match resource {
        "crossbar" => row.crossbar,
        "sram" => row.sram,
        "tcam" => row.tcam,
        "vliw" => row.vliw,
        "hash_bits" => row.hash_bits,
        "salu" => row.salu,
        "stages" => row.stages,
        _ => return None,
    })
}

/// Percent as basis points (counters are integers).
fn bp(pct: f64) -> u64 {
    (pct * 100.0).round() as u64
}

/// One run (the seed plays no part: the placement is deterministic).
pub fn run(p: &Params, _seed: u64) -> Result<ExperimentRun, String> {
    p.check_known(NAME, PARAMS).map_err(param_err)?;
    let name = p.text("module").unwrap_or("selecting");
    let module = Module::ALL
        .into_iter()
        .find(|m| m.name().eq_ignore_ascii_case(name))
        .ok_or_else(|| {
            format!("module: {name:?} is not one of selecting, scalability, forwarding")
        })?;
    let resource = p.text("resource").unwrap_or("sram");
    let placed = placement(&Profile::tofino())
        .map_err(|e| format!("the CLIP program does not fit the Tofino profile: {e}"))?;
    let rows = shares(&placed);
    let row = rows
        .iter()
        .find(|r| r.module == module)
        .ok_or_else(|| format!("no row for {}", module.name()))?;
    let chosen = share(row, resource).ok_or_else(|| {
        format!(
            "resource: {resource:?} is not one of {}",
            RESOURCES.join(", ")
        )
    })?;
    let mut pairs: Vec<(String, u64)> = RESOURCES
        .iter()
        .map(|r| (format!("{r}_bp"), share(row, r).map_or(0, bp)))
        .collect();
    pairs.push(("share_bp".into(), bp(chosen)));
    let borrowed: Vec<(&str, u64)> = pairs.iter().map(|(k, v)| (k.as_str(), *v)).collect();
    let mut run = ExperimentRun::default().with_result("result", counters(&borrowed));
    run.highlights.push(format!(
        "{}: {resource} {chosen:.2} % of the device; the whole table:\n{}",
        module.name(),
        table(&rows)
    ));
    Ok(run)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(items: &[&str]) -> Params {
        Params::parse(items.iter().copied()).unwrap()
    }

    fn result(items: &[&str]) -> std::collections::BTreeMap<String, u64> {
        let run = run(&params(items), 1).expect("runs");
        run.nodes[0].2.counters.clone()
    }

    #[test]
    fn share_is_the_chosen_resource_of_the_chosen_module() {
        let r = result(&["module=forwarding", "resource=tcam"]);
        assert_eq!(r["share_bp"], r["tcam_bp"]);
        assert!(r["tcam_bp"] > 0, "LPM is TCAM");
        let s = result(&["module=Selecting", "resource=salu"]);
        assert_eq!(s["share_bp"], s["salu_bp"]);
        assert_eq!(s["tcam_bp"], 0);
    }

    #[test]
    fn unknown_module_or_resource_is_named() {
        let e = run(&params(&["module=parser"]), 1).unwrap_err();
        assert!(e.contains("module") && e.contains("parser"), "{e}");
        let e = run(&params(&["resource=power"]), 1).unwrap_err();
        assert!(e.contains("resource") && e.contains("power"), "{e}");
    }
}
