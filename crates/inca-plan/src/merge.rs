//! The merger (spec §5.9): the apps with a switch share become one
//! classified composite ([`inca_switch::Composite`], built by the catalog's
//! `composite` program so names are prefixed by the app as blocks already
//! do) with each app's key-scaled objects sized `n_p·Q_p`, plus a flow
//! manager `fm_<app>` of `n_p·Q_p` entries for each app that is not HIGH,
//! placed together by the platform's stage allocator.
//!
//! The flow managers are placed (they take switch resources) but their
//! logic is the runtime's (`inca-exoplane`), not this crate's.

use inca_apps::catalog::composite;
use inca_apps::params::Params;
use inca_switch::block_report::BlockUsage;
use inca_switch::objects::Declare;
use inca_switch::placement::{place, Location, Placement, PlacementError};
use inca_switch::{Composite, Profile, Program};

use crate::profile::flow_manager;

/// One app of the merged program.
#[derive(Debug, Clone)]
pub struct MergeApp {
    /// Instance name (object prefix).
    pub name: String,
    /// Catalog app.
    pub app: String,
    /// Its parameters, with the key parameter set to the planned size.
    pub params: Params,
    /// Flow-manager entries (`None`: a HIGH app, no flow manager).
    pub fm_entries: Option<u64>,
    /// Union-key width of the flow manager.
    pub fm_key_bits: u32,
}

/// Why the merge failed.
#[derive(Debug, thiserror::Error)]
pub enum MergeError {
    /// The catalog refused the composite.
    #[error("building the merged program: {0}")]
    Build(String),
    /// The stage allocator refused it.
    #[error("placing the merged program: {0}")]
    Place(#[from] PlacementError),
}

impl MergeError {
    /// The app whose object the placement error names, if any: objects are
    /// `app/object` or `fm_app`.
    pub fn app(&self) -> Option<String> {
        let MergeError::Place(e) = self else {
            return None;
        };
        let object = match e {
            PlacementError::DoesNotFit(s) => s.object.clone(),
            PlacementError::ExceedsStage { object, .. }
            | PlacementError::DramExhausted { object, .. }
            | PlacementError::MissingFeature { object, .. }
            | PlacementError::UnknownDependency { object, .. } => object.clone(),
            PlacementError::DependencyChainTooLong { chain, .. } => chain.last()?.clone(),
            PlacementError::Cycle { cycle } => cycle.first()?.clone(),
        };
        if let Some(app) = object.strip_prefix("fm_") {
            return Some(app.to_string());
        }
        object.split_once('/').map(|(a, _)| a.to_string())
    }
}

/// The catalog parameters of the composite of `apps` (with `classify`
/// rules, possibly empty).
pub fn composite_params(apps: &[MergeApp], classify: &str) -> Params {
    let mut p = Params::default();
    let list: Vec<String> = apps
        .iter()
        .map(|a| format!("{}:{}", a.name, a.app))
        .collect();
    p.set("apps", list.join(","));
    if !classify.is_empty() {
        p.set("classify", classify);
    }
    for a in apps {
        for (k, v) in a.params.entries() {
            p.set(&format!("{}.{k}", a.name), v);
        }
    }
    p
}

/// Builds the merged composite.
pub fn build(apps: &[MergeApp], classify: &str) -> Result<Composite, MergeError> {
    composite::from_params(&composite_params(apps, classify))
        .map_err(|e| MergeError::Build(e.to_string()))
}

/// Builds and places the merged program on `profile`: the resource report
/// with one block per app and one per flow manager.
pub fn merge(
    apps: &[MergeApp],
    classify: &str,
    profile: &Profile,
) -> Result<(Composite, Placement), MergeError> {
    let mut program = build(apps, classify)?;
    let mut decl = Declare::default();
    program
        .declare(&mut decl)
        .map_err(|e| MergeError::Build(e.to_string()))?;
    let mut decls = decl.decls();
    let first_fm = decls.len();
    let mut fms = Vec::new();
    for a in apps {
        if let Some(n) = a.fm_entries {
            decls.push(flow_manager(&a.name, a.fm_key_bits, n));
            fms.push(format!("fm_{}", a.name));
        }
    }
    let mut placement = place(profile, &decls)?;
    let usage = |objs: &[inca_switch::placement::PlacedObject], name: &str| {
        BlockUsage::of(
            name,
            objs.iter().map(|o| {
                let dram = match o.location {
                    Location::Dram { bytes } => bytes,
                    Location::Stages { .. } => 0,
                };
                (
                    o.stage_use.as_slice(),
                    dram,
                    (o.first_stage(), o.last_stage()),
                )
            }),
        )
    };
    let mut blocks: Vec<BlockUsage> = decl
        .blocks()
        .iter()
        .map(|b| {
            usage(
                &placement.objects[b.objects.start as usize..b.objects.end as usize],
                &b.name,
            )
        })
        .collect();
    for (k, name) in fms.iter().enumerate() {
        let i = first_fm + k;
        blocks.push(usage(&placement.objects[i..=i], name));
    }
    placement.blocks = blocks;
    Ok((program, placement))
}
