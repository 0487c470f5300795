//! The EWO replica program from `name=value` parameters (the catalog and
//! `inca check`): one or more variables of one merge kind on one replica.

use inca_apps::params::{ParamError, Params};
use inca_wire::swish::ewo::MergeKind;

use crate::addr::ReplicaAddr;
use crate::ewo::config::{Broken, EwoConfig, Propagation, VarSpec, T_AE};
use crate::ewo::limiter::LimiterConfig;
use crate::ewo::merge::N_MAX;
use crate::ewo::program::EwoProgram;

/// The program's parameter names.
pub const PARAMS: &[&str] = &[
    "rid",
    "slot",
    "slots",
    "kind",
    "vars",
    "entries",
    "propagation",
    "period_us",
    "t_ae_us",
    "broken",
    "limiter",
];

fn bad(name: &str, reason: impl Into<String>) -> ParamError {
    ParamError::Value {
        name: name.to_string(),
        reason: reason.into(),
    }
}

/// `rid` (default 1), `slot` (0), `slots` (N_max, 8), `kind`
/// (lww|gcnt|pncnt|gset|max, default gcnt), `vars` (variables of that
/// kind, ids 1.., default 1), `entries` (M, default 1024), `propagation`
/// (per_write|periodic), `period_us` (1000), `t_ae_us` (10000), `broken`
/// (none|add_merge|no_anti_entropy), `limiter` (0|1: SwiSh §9.1's rate
/// limiter on variable 1, which must then be a G-counter of 40 entries —
/// `kind=gcnt entries=40 propagation=periodic`).
pub fn from_params(p: &Params) -> Result<EwoProgram, ParamError> {
    p.check_known("swish_ewo", PARAMS)?;
    let rid = p.number("rid", 1, 0, 0xFFFE)? as u16;
    let slot = p.number("slot", 0, 0, N_MAX as u64 - 1)? as u8;
    let slots = p.number("slots", N_MAX as u64, 1, N_MAX as u64)? as u8;
    let kind = match p.text("kind").unwrap_or("gcnt") {
        "lww" => MergeKind::Lww,
        "gcnt" => MergeKind::Gcnt,
        "pncnt" => MergeKind::Pncnt,
        "gset" => MergeKind::Gset,
        "max" => MergeKind::Max,
        other => {
            return Err(bad(
                "kind",
                format!("{other:?}: lww, gcnt, pncnt, gset or max"),
            ))
        }
    };
    let period = p.number("period_us", 1_000, 1, 10_000_000)? * 1_000;
    let propagation = match p.text("propagation").unwrap_or("per_write") {
        "per_write" => Propagation::PerWrite,
        "periodic" => Propagation::Periodic(period),
        other => {
            return Err(bad(
                "propagation",
                format!("{other:?}: per_write or periodic"),
            ))
        }
    };
    let entries = p.number("entries", 1024, 1, 65_535)? as u32;
    let vars = p.number("vars", 1, 1, 8)? as u16;
    let mut c = EwoConfig::new(ReplicaAddr::conventional(rid, 0), slot);
    c.slots = slots;
    c.t_ae = p.number("t_ae_us", T_AE / 1_000, 1, 10_000_000)? * 1_000;
    c.broken = match p.text("broken").unwrap_or("none") {
        "none" => Broken::None,
        "add_merge" => Broken::AddMerge,
        "no_anti_entropy" => Broken::NoAntiEntropy,
        other => {
            return Err(bad(
                "broken",
                format!("{other:?}: none, add_merge or no_anti_entropy"),
            ))
        }
    };
    c.vars = (1..=vars)
        .map(|var_id| VarSpec {
            var_id,
            kind,
            entries,
            propagation,
        })
        .collect();
    if p.number("limiter", 0, 0, 1)? == 1 {
        c.limiter = Some(LimiterConfig::new(
            1,
            std::net::Ipv4Addr::new(10, 49, 0, 0),
            0,
        ));
    }
    EwoProgram::new(c).map_err(|e| bad("vars", e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use inca_switch::loadcheck::{load_check, LoadCheckOptions};
    use inca_switch::{check, Profile};

    fn params(items: &[&str]) -> Params {
        Params::parse(items.iter().copied()).unwrap()
    }

    #[test]
    fn programs_from_params_place_on_tofino_and_bad_values_are_named() {
        for kind in ["lww", "gcnt", "pncnt", "gset", "max"] {
            let mut prog =
                from_params(&params(&[&format!("kind={kind}"), "entries=4096"])).unwrap();
            check(&Profile::tofino(), &mut prog).unwrap_or_else(|e| panic!("{kind}: {e}"));
            let r = load_check(&Profile::tofino(), prog, LoadCheckOptions::default()).unwrap();
            println!("{r}");
            assert!(r.passed() && r.packets > 0, "{kind}: {r}");
        }
        let rl = [
            "kind=gcnt",
            "entries=40",
            "propagation=periodic",
            "limiter=1",
        ];
        let mut prog = from_params(&params(&rl)).unwrap();
        check(&Profile::tofino(), &mut prog).unwrap();
        let e = from_params(&params(&["limiter=1"])).unwrap_err();
        assert!(e.to_string().contains("40 entries"), "{e}");
        let e = from_params(&params(&["kind=sum"])).unwrap_err();
        assert!(e.to_string().contains("kind"), "{e}");
        // Five batched variables need ten streams: refused.
        let e = from_params(&params(&["vars=5", "propagation=periodic"])).unwrap_err();
        assert!(e.to_string().contains("generator streams"), "{e}");
        assert!(from_params(&params(&["colour=red"])).is_err());
    }
}
