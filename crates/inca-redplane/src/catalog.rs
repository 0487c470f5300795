//! The RedPlane switch programs by name, built as simulator nodes: each app
//! of spec §7 composed with the RedPlane blocks (`crate::switch`), for
//! `inca run` scenarios and `inca check`.
//!
//! Parameters are the RedPlane ones (`switch::config::PARAMS`) plus the
//! app's own; an unknown name is an error.

use std::sync::Arc;

use inca_apps::params::Params;
use inca_sim::engine::Node;
use inca_switch::placement::Placement;
use inca_switch::{check, Profile, Switch};

use crate::apps::epc::RpEpc;
use crate::apps::firewall::RpFirewall;
use crate::apps::kv::RpKv;
use crate::apps::lb::RpLb;
use crate::apps::nat::RpNat;
use crate::apps::sync_counter::SyncCounter;
use crate::apps::SpecModel;
use crate::switch::{config, Observer, RedPlane, RedPlaneApp, RedPlaneConfig};

/// Every program name with a one-line description.
pub const PROGRAMS: &[(&str, &str)] = &[
    (
        "redplane_nat",
        "NAT with per-connection state replicated by RedPlane",
    ),
    ("redplane_firewall", "stateful firewall with RedPlane"),
    ("redplane_lb", "L4 load balancer with RedPlane"),
    ("redplane_epc", "EPC serving gateway (GTP-U) with RedPlane"),
    (
        "redplane_sync_counter",
        "per-flow counter, every packet a replicated write",
    ),
    ("redplane_kv", "key-value store on UDP 5000 with RedPlane"),
];

/// The parameters program `name` takes: the RedPlane ones and its app's
/// (`None` for a name that is not a RedPlane program).
pub fn params_of(name: &str) -> Option<Vec<&'static str>> {
    let app_params: &[&'static str] = match name {
        "redplane_nat" => RpNat::PARAMS,
        "redplane_firewall" => RpFirewall::PARAMS,
        "redplane_lb" => RpLb::PARAMS,
        "redplane_epc" => RpEpc::PARAMS,
        "redplane_sync_counter" | "redplane_kv" => &[],
        _ => return None,
    };
    Some([config::PARAMS, app_params].concat())
}

/// Something to do with a RedPlane program once its app type is known.
pub trait RpVisitor {
    /// What the visit produces.
    type Output;
    /// Called with the program.
    fn visit<A: RedPlaneApp + SpecModel>(self, program: RedPlane<A>) -> Self::Output;
}

/// Builds program `name` from `params` (with an optional recording hook)
/// and hands it to `visitor`.
pub fn with_program<V: RpVisitor>(
    name: &str,
    params: &Params,
    observer: Option<Arc<dyn Observer>>,
    visitor: V,
) -> Result<V::Output, String> {
    let Some(known) = params_of(name) else {
        let names: Vec<&str> = PROGRAMS.iter().map(|p| p.0).collect();
        return Err(format!(
            "unknown program {name:?}; the RedPlane programs are: {}",
            names.join(", ")
        ));
    };
    params
        .check_known(name, &known)
        .map_err(|e| e.to_string())?;
    let cfg = RedPlaneConfig::from_params(params).map_err(|e| e.to_string())?;
    let shards = cfg.shards.len() as u32;
    fn wrap<A: RedPlaneApp>(
        app: A,
        cfg: RedPlaneConfig,
        obs: Option<Arc<dyn Observer>>,
    ) -> RedPlane<A> {
        let p = RedPlane::new(app, cfg);
        match obs {
            Some(o) => p.with_observer(o),
            None => p,
        }
    }
    let e = |e: inca_apps::params::ParamError| e.to_string();
    Ok(match name {
        "redplane_nat" => visitor.visit(wrap(
            RpNat::from_params(params, shards).map_err(e)?,
            cfg,
            observer,
        )),
        "redplane_firewall" => visitor.visit(wrap(
            RpFirewall::from_params(params).map_err(e)?,
            cfg,
            observer,
        )),
        "redplane_lb" => visitor.visit(wrap(RpLb::from_params(params).map_err(e)?, cfg, observer)),
        "redplane_epc" => {
            visitor.visit(wrap(RpEpc::from_params(params).map_err(e)?, cfg, observer))
        }
        "redplane_sync_counter" => visitor.visit(wrap(SyncCounter::new(), cfg, observer)),
        _ => visitor.visit(wrap(RpKv::new(), cfg, observer)),
    })
}

/// Builds program `name` on `profile` as a simulator node.
pub fn build(program: &str, params: &Params, profile: &Profile) -> Result<Box<dyn Node>, String> {
    build_observed(program, params, profile, None)
}

/// [`build`] with a recording hook.
pub fn build_observed(
    program: &str,
    params: &Params,
    profile: &Profile,
    observer: Option<Arc<dyn Observer>>,
) -> Result<Box<dyn Node>, String> {
    struct Build<'a>(&'a Profile);
    impl RpVisitor for Build<'_> {
        type Output = Result<Box<dyn Node>, String>;
        fn visit<A: RedPlaneApp + SpecModel>(self, program: RedPlane<A>) -> Self::Output {
            Switch::new(self.0.clone(), program)
                .map(|s| Box::new(s) as Box<dyn Node>)
                .map_err(|e| e.to_string())
        }
    }
    with_program(program, params, observer, Build(profile))?
}

/// The load-time check of program `name` on `profile`
/// ([`inca_switch::loadcheck`]).
pub fn load_check_program(
    program: &str,
    params: &Params,
    profile: &Profile,
    opts: inca_switch::loadcheck::LoadCheckOptions,
) -> Result<inca_switch::loadcheck::LoadCheckReport, String> {
    use inca_switch::loadcheck::{load_check, LoadCheckOptions, LoadCheckReport};
    struct Run<'a>(&'a Profile, LoadCheckOptions);
    impl RpVisitor for Run<'_> {
        type Output = Result<LoadCheckReport, String>;
        fn visit<A: RedPlaneApp + SpecModel>(self, program: RedPlane<A>) -> Self::Output {
            load_check(self.0, program, self.1).map_err(|e| e.to_string())
        }
    }
    with_program(program, params, None, Run(profile, opts))?
}

/// Places program `name` on `profile` (the resource report of `inca check`).
pub fn check_program(
    program: &str,
    params: &Params,
    profile: &Profile,
) -> Result<Placement, String> {
    struct Check<'a>(&'a Profile);
    impl RpVisitor for Check<'_> {
        type Output = Result<Placement, String>;
        fn visit<A: RedPlaneApp>(self, mut program: RedPlane<A>) -> Self::Output {
            check(self.0, &mut program).map_err(|e| e.to_string())
        }
    }
    with_program(program, params, None, Check(profile))?
}
