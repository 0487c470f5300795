//! The TEA network functions (spec §7) as [`crate::switch::TeaNf`]s, all
//! over IPv4 keys [our choice: the `inca_apps::headers` parser is IPv4, and
//! the evaluation's workloads are IPv4 5-tuples], so keys are smaller than
//! the spec's IPv6 sizes.
//!
//! Each is an adapter over its NF's core in `inca_apps::core` (shared with
//! the plain apps and RedPlane's): what stays here is TEA's hooks and the
//! key and value bytes of the DRAM table.
//!
//! - [`nat`] — NAT (K = 13, V = 6).
//! - [`firewall`] — stateful firewall (K = 13, V = 1).
//! - [`lb`] — L4 load balancer (K = 13, V = 6).
//! - [`vpn`] — VPN gateway (K = 8, V = 8).

pub mod firewall;
pub mod lb;
pub mod nat;
pub mod vpn;

pub use firewall::TeaFirewall;
pub use lb::TeaLb;
pub use nat::TeaNat;
pub use vpn::TeaVpn;
