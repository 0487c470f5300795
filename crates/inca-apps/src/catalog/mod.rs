//! The apps by name: what `inca check` and scenarios load.

pub mod composite;

use inca_switch::composite::ClassifyRuleError;
use inca_switch::loadcheck::{load_check, LoadCheckOptions, LoadCheckReport};
use inca_switch::placement::Placement;
use inca_switch::{check, CompositeError, LoadError, Profile, Program};

use crate::acl::Acl;
use crate::counters::{FlowCounter, TenantCounters};
use crate::epc::ServingGateway;
use crate::firewall::Firewall;
use crate::heavy_hitter::HeavyHitter;
use crate::kvstore::KvStore;
use crate::l2l3::L2L3;
use crate::lb::LoadBalancer;
use crate::nat::Nat;
use crate::netcache::NetCache;
use crate::params::{ParamError, Params};
use crate::pingpong::PingPong;
use crate::ratelimit::RateLimiter;
use crate::superspreader::SuperSpreader;
use crate::synproxy::SynProxy;
use crate::univmon::UnivMon;
use crate::vpn::VpnGateway;

/// An app that could not be checked.
#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    /// No app of that name.
    #[error("unknown program {name:?}; the programs are: {known}")]
    Unknown {
        /// The name given.
        name: String,
        /// The names known.
        known: String,
    },
    /// A parameter was wrong.
    #[error(transparent)]
    Param(#[from] ParamError),
    /// It does not load (does not fit, or a bad declaration).
    #[error(transparent)]
    Load(#[from] LoadError),
    /// A composite's blocks or classifier do not go together.
    #[error(transparent)]
    Composite(#[from] CompositeError),
    /// A composite's classifier rule is malformed.
    #[error(transparent)]
    Classify(#[from] ClassifyRuleError),
    /// One app of a composite could not be built.
    #[error("app {app:?}: {source}")]
    InApp {
        /// The app's instance name.
        app: String,
        /// What went wrong.
        source: Box<CatalogError>,
    },
}

/// Every app name with a one-line description and its parameters.
pub const APPS: &[(&str, &str, &[&str])] = &[
    ("l2l3", "L2 bridging and L3 LPM routing", L2L3::PARAMS),
    (
        "nat",
        "source NAT, exact-match table per direction",
        Nat::PARAMS,
    ),
    (
        "firewall",
        "stateful firewall: connections opened from inside",
        Firewall::PARAMS,
    ),
    (
        "lb",
        "L4 load balancer with per-connection affinity",
        LoadBalancer::PARAMS,
    ),
    ("vpn", "VPN gateway (VXLAN tunnels)", VpnGateway::PARAMS),
    ("epc", "EPC serving gateway (GTP-U)", ServingGateway::PARAMS),
    ("synproxy", "SYN proxy with SYN cookies", SynProxy::PARAMS),
    (
        "heavy_hitter",
        "heavy-hitter detector (count-min sketch)",
        HeavyHitter::PARAMS,
    ),
    ("univmon", "UnivMon universal sketch", UnivMon::PARAMS),
    (
        "superspreader",
        "superspreader detector",
        SuperSpreader::PARAMS,
    ),
    (
        "flow_counter",
        "per-flow packet counters",
        FlowCounter::PARAMS,
    ),
    (
        "tenant_counters",
        "per-tenant counters",
        TenantCounters::PARAMS,
    ),
    ("kvstore", "in-switch key-value store", KvStore::PARAMS),
    (
        "netcache",
        "NetCache: hot-key cache for a server KV store",
        NetCache::PARAMS,
    ),
    ("ratelimit", "per-flow rate limiter", RateLimiter::PARAMS),
    (
        "acl",
        "access-control list: 5-tuple ternary rules, permit/deny",
        Acl::PARAMS,
    ),
    (
        composite::NAME,
        "several apps on one switch behind a classifier",
        composite::PARAMS,
    ),
    (
        "session_pingpong",
        "control-session test device: pings and pongs over a session",
        PingPong::PARAMS,
    ),
];

/// Something to do with an app once its concrete type is known: the catalog
/// resolves a name to a program and hands it to `visit`, so callers (the
/// resource check, the simulator) need no match over app names of their own.
pub trait AppVisitor {
    /// What the visit produces.
    type Output;
    /// Called with the program built from the parameters.
    fn visit<P: Program>(self, program: P) -> Self::Output;
}

/// Builds app `name` from `params` and hands it to `visitor`.
pub fn with_app<V: AppVisitor>(
    name: &str,
    params: &Params,
    visitor: V,
) -> Result<V::Output, CatalogError> {
    match name {
        "l2l3" => Ok(visitor.visit(L2L3::from_params(params)?)),
        "nat" => Ok(visitor.visit(Nat::from_params(params)?)),
        "firewall" => Ok(visitor.visit(Firewall::from_params(params)?)),
        "lb" => Ok(visitor.visit(LoadBalancer::from_params(params)?)),
        "vpn" => Ok(visitor.visit(VpnGateway::from_params(params)?)),
        "epc" => Ok(visitor.visit(ServingGateway::from_params(params)?)),
        "synproxy" => Ok(visitor.visit(SynProxy::from_params(params)?)),
        "heavy_hitter" => Ok(visitor.visit(HeavyHitter::from_params(params)?)),
        "univmon" => Ok(visitor.visit(UnivMon::from_params(params)?)),
        "superspreader" => Ok(visitor.visit(SuperSpreader::from_params(params)?)),
        "flow_counter" => Ok(visitor.visit(FlowCounter::from_params(params)?)),
        "tenant_counters" => Ok(visitor.visit(TenantCounters::from_params(params)?)),
        "kvstore" => Ok(visitor.visit(KvStore::from_params(params)?)),
        "netcache" => Ok(visitor.visit(NetCache::from_params(params)?)),
        "ratelimit" => Ok(visitor.visit(RateLimiter::from_params(params)?)),
        "acl" => Ok(visitor.visit(Acl::from_params(params)?)),
        composite::NAME => Ok(visitor.visit(composite::from_params(params)?)),
        "session_pingpong" => Ok(visitor.visit(PingPong::from_params(params)?)),
        _ => Err(CatalogError::Unknown {
            name: name.to_string(),
            known: APPS.iter().map(|a| a.0).collect::<Vec<_>>().join(", "),
        }),
    }
}

/// Declares app `name` with `params` and places it on `profile`.
pub fn check_app(
    name: &str,
    params: &Params,
    profile: &Profile,
) -> Result<Placement, CatalogError> {
    struct Check<'a>(&'a Profile);
    impl AppVisitor for Check<'_> {
        type Output = Result<Placement, LoadError>;
        fn visit<P: Program>(self, mut program: P) -> Self::Output {
            check(self.0, &mut program)
        }
    }
    Ok(with_app(name, params, Check(profile))??)
}

/// Runs the load-time check of app `name` with `params` on `profile`
/// ([`inca_switch::loadcheck`]).
pub fn load_check_app(
    name: &str,
    params: &Params,
    profile: &Profile,
    opts: LoadCheckOptions,
) -> Result<LoadCheckReport, CatalogError> {
    struct Run<'a>(&'a Profile, LoadCheckOptions);
    impl AppVisitor for Run<'_> {
        type Output = Result<LoadCheckReport, LoadError>;
        fn visit<P: Program>(self, program: P) -> Self::Output {
            load_check(self.0, program, self.1)
        }
    }
    Ok(with_app(name, params, Run(profile, opts))??)
}
