//! inca-tea: TEA (specs/tea.md) — exact-match tables far larger than switch
//! SRAM, kept in servers' DRAM and read by the switch data plane with
//! one-sided RoCEv2 RDMA, one round trip per lookup.
//!
//! What lives where:
//! - [`server`] — the DRAM server: RoCEv2 RC responder NIC model, server agent and its protocol.
//! - [`table`] — the TEA-Table: DRAM layout, range partitioning, BLP insert/delete/update as step plans, cache policy.
//! - [`switch`] — the TEA switch: data-plane lookup blocks as a switch program over a `TeaNf`, and its control plane.
//! - [`catalog`] — the TEA NFs by name ("tea_nat", ...) for scenarios and `inca check`.
//! - [`system`] — TEA as an inca system (`inca_system::System`).
//! - [`bench`] — its rows of `inca bench`: the DRAM lookup round trip and
//!   the DRAM server's NIC.
//! - [`campaign`] — the randomized lookup-correctness campaign (spec §6 item 3 end to end).
//! - [`attack`] — keys crafted to collide in the sketch, the Bloom filter and the buckets (issue 8).
//! - [`rig`] — a small simulated TEA topology (switch, DRAM servers, probes) for tests and campaigns (in `inca-sim`, with link rates, queues and faults).
//! - [`nf`] — TEA NAT, stateful firewall, L4 load balancer and VPN gateway as `TeaNf`s.

pub mod attack;
pub mod bench;
pub mod campaign;
pub mod catalog;
pub mod nf;
pub mod rig;
pub mod server;
pub mod switch;
pub mod system;
pub mod table;
