//! inca-apps: network functions written once against the switch program API
//! (`inca_switch::Program`), loadable on any device profile.
//!
//! What lives where:
//! - [`headers`] — the parse step the apps share: Ethernet (with an optional
//!   802.1Q tag), IPv4 and TCP/UDP ports, as offsets and fields in metadata.
//! - [`params`] — named size parameters (`--set flows=65536`) with checking.
//! - [`l2l3`] — L2 (MAC table) and L3 (LPM route, next hop) forwarding.
//! - [`nat`] — source NAT with an exact-match translation table per
//!   direction; new flows go to the control plane, which allocates a port.
//! - [`acl`] — an access-control list of 5-tuple ternary permit/deny rules.
//! - [`composite`] — several apps on one switch behind a classifier.
//! - [`core`] — each NF's pure core (state transition and rewrite), which
//!   the apps here, RedPlane's and TEA's adapt.
//! - [`pingpong`] — a control-plane-only test device for control sessions.
//! - [`catalog`] — the apps by name, for `inca check`.

pub mod acl;
pub mod catalog;
pub use catalog::composite;
pub mod core;
pub mod counters;
pub mod epc;
pub mod firewall;
pub mod fixtures;
pub mod headers;
pub mod heavy_hitter;
pub mod kvstore;
pub mod l2l3;
pub mod lb;
pub mod nat;
pub mod netcache;
pub mod params;
pub mod pingpong;
pub mod ratelimit;
pub mod superspreader;
pub mod synproxy;
pub mod univmon;
pub mod vpn;
