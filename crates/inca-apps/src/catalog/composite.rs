//! Several apps on one switch: the catalog's `composite` program.
//!
//! Each app of the catalog becomes a block ([`inca_switch::Block`]) of a
//! classified composite ([`inca_switch::Composite`]): the `classify` table
//! picks the app of each packet, and each app keeps its own objects
//! (declared as `app/object`), metadata, digests and control logic.
//!
//! Parameters:
//! - `apps` — the apps, comma-separated, each `app` or `instance:app` (the
//!   instance name prefixes its objects and parameters; two instances of one
//!   app need two names). Default: [`DEFAULT_APPS`].
//! - `classify` — classifier rules, `app:field=value[,...]` separated by
//!   `;`, earlier rules winning (fields `port`, `vlan`, `dst`, `dport`; see
//!   [`inca_switch::composite::classifier`]). Default: none.
//! - `default` — the instance that gets packets no rule matches. Default:
//!   none, such packets are dropped (and counted as
//!   `composite/unclassified`).
//! - `<instance>.<param>` — parameter `<param>` of that instance's app,
//!   e.g. `nat.flows=4096`.
//!
//! Example: `apps=nat,firewall,univmon,acl
//! classify=nat:port=1;nat:port=2;firewall:port=3;... nat.outside_port=2`.

use std::collections::BTreeMap;

use inca_switch::composite::ClassifyRule;
use inca_switch::{Block, Composite, Program};

use super::{with_app, AppVisitor, CatalogError};
use crate::params::{ParamError, Params};

/// The catalog name of the composite program.
pub const NAME: &str = "composite";

/// Parameter names of the composite itself (the rest are `instance.param`).
pub const PARAMS: &[&str] = &["apps", "classify", "default", "<app>.<param>"];

/// The apps of a composite whose `apps` parameter is not given.
pub const DEFAULT_APPS: &str = "nat,firewall,acl";

struct ToBlock<'a>(&'a str);

impl AppVisitor for ToBlock<'_> {
    type Output = Block;
    fn visit<P: Program>(self, program: P) -> Block {
        Block::new(self.0, program)
    }
}

/// Builds the composite from `p` (see the module documentation).
pub fn from_params(p: &Params) -> Result<Composite, CatalogError> {
    let apps = p.text("apps").unwrap_or(DEFAULT_APPS);
    let mut instances: Vec<(String, String)> = Vec::new();
    for item in apps.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (inst, app) = item.split_once(':').unwrap_or((item, item));
        if app == NAME {
            return Err(ParamError::Value {
                name: "apps".into(),
                reason: "a composite cannot hold a composite".into(),
            }
            .into());
        }
        instances.push((inst.trim().to_string(), app.trim().to_string()));
    }
    let mut per_app: BTreeMap<&str, Params> = BTreeMap::new();
    for (key, value) in p.entries() {
        if matches!(key, "apps" | "classify" | "default") {
            continue;
        }
        let known = || ParamError::Unknown {
            name: key.to_string(),
            app: NAME.to_string(),
            known: "apps, classify, default, <instance>.<param>".into(),
        };
        let (inst, param) = key.split_once('.').ok_or_else(known)?;
        let Some((inst, _)) = instances.iter().find(|(i, _)| i == inst) else {
            return Err(known().into());
        };
        per_app.entry(inst).or_default().set(param, value);
    }
    let mut blocks = Vec::new();
    for (inst, app) in &instances {
        let params = per_app.remove(inst.as_str()).unwrap_or_default();
        blocks.push(
            with_app(app, &params, ToBlock(inst)).map_err(|e| CatalogError::InApp {
                app: inst.clone(),
                source: Box::new(e),
            })?,
        );
    }
    let rules = ClassifyRule::parse_list(p.text("classify").unwrap_or(""))?;
    Ok(Composite::classified(
        NAME,
        blocks,
        rules,
        p.text("default"),
    )?)
}
