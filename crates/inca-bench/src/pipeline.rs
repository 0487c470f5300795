//! `nat`: the inca-apps NAT fast path in the switch model, in process, on
//! one core, in packets per second: the `tofino` profile with 1,024
//! installed flows, 64-byte TCP frames 10 ns apart (below the outside
//! port's line rate, so no queue builds), as
//! crates/inca-apps/benches/nat_fast_path.rs.
//!
//! The set-up and its driver ([`inca_apps::fixtures::fed_nat`]: the test
//! fabric, which recycles frame buffers as a real driver's would, so the
//! figure is the model's cost, not the allocator's) are the ones the
//! criterion bench and the RedPlane and TEA baselines use.

use inca_apps::fixtures::{check_fed_nat, fed_nat, nat_tcp_flows};
use inca_apps::nat::Nat;
use inca_switch::device::Nanos;
use inca_switch::fabric::Fabric;
use inca_switch::Switch;
use inca_system::bench::{profiled, timed_rate};

use super::{Baseline, Ctx, Measured};

/// Flows.
const FLOWS: u16 = 1024;
/// Virtual time between packets.
const GAP_NS: Nanos = 10;

/// Packets per timed run and per warm-up.
fn sizes(ctx: &Ctx) -> (u64, u64) {
    (ctx.size(1_000_000, 50_000), ctx.size(200_000, 10_000))
}

fn fed() -> anyhow::Result<Fabric<Switch<Nat>>> {
    fed_nat(&nat_tcp_flows(FLOWS), 1, 0, GAP_NS).map_err(anyhow::Error::msg)
}

fn check(f: &mut Fabric<Switch<Nat>>) -> anyhow::Result<()> {
    check_fed_nat(f, u64::from(FLOWS)).map_err(anyhow::Error::msg)
}

/// `nat`: the NAT fast path.
pub fn nat(ctx: &Ctx) -> anyhow::Result<Measured> {
    let (n, warm) = sizes(ctx);
    let mut f = fed()?;
    f.push(warm);
    let mut samples = Vec::new();
    for _ in 0..ctx.runs {
        samples.push(timed_rate(|| f.push(n)));
    }
    check(&mut f)?;
    Ok(Measured {
        samples,
        baseline: Baseline::None,
        notes: vec![format!("{n} packets per run, 1,024 flows, tofino profile")],
    })
}

/// `nat --profile-iterations N`.
pub fn profile_nat(n: u64) -> anyhow::Result<String> {
    let mut f = fed()?;
    f.push(10_000);
    profiled(|| f.push(n));
    check(&mut f)?;
    Ok(format!("{n} packets through the NAT fast path"))
}
