//! `redplane-read`: the RedPlane NAT on its read path (a lease granted for
//! every flow by NEW_ACKs the set-up plays as the store, no write
//! outstanding), in packets per second on one core, as
//! crates/inca-redplane/benches/switch.rs; baseline: the plain NAT with the
//! same flows on the same profile ([`inca_apps::fixtures::fed_nat`]),
//! alternating runs. Both are fed by the test fabric, which recycles frame
//! buffers as a real driver would, so the figures are the model's cost,
//! not the allocator's.

use anyhow::ensure;
use inca_apps::fixtures::{check_fed_nat, fed_nat, nat_tcp_flows};
use inca_switch::device::Nanos;
use inca_switch::fabric::Fabric;
use inca_switch::Switch;
use inca_system::bench::{profiled, timed_rate, Baseline, Ctx, Measured};

use crate::apps::nat::RpNat;
use crate::fixtures::leased_nat;
use crate::switch::RedPlane;

/// Flows (as the `nat` benchmark).
const FLOWS: u16 = 1024;
/// Virtual time between packets.
const GAP_NS: Nanos = 10;

/// Packets per timed run and per warm-up.
fn sizes(ctx: &Ctx) -> (u64, u64) {
    (ctx.size(1_000_000, 50_000), ctx.size(200_000, 10_000))
}

type RpSwitch = Switch<RedPlane<RpNat>>;

/// The RedPlane NAT with a lease for every flow (see
/// [`crate::fixtures::leased_nat`]), fed the flows on port 1.
fn fed_redplane(templates: &[Vec<u8>]) -> anyhow::Result<Fabric<RpSwitch>> {
    let (sw, now) = leased_nat(templates).map_err(anyhow::Error::msg)?;
    let mut f = Fabric::new(1);
    let node = f.add(sw);
    f.run_until(now);
    f.set_stream(node, 1, GAP_NS, templates.to_vec());
    Ok(f)
}

fn check_redplane(f: &mut Fabric<RpSwitch>) -> anyhow::Result<()> {
    f.run_until(f.now() + 1_000_000);
    let (pushed, left) = (f.stats().injected, f.stats().left);
    ensure!(
        left == pushed,
        "RedPlane NAT sent {left} of {pushed} packets"
    );
    let sw = f.device(0);
    let s = sw.program().stats();
    ensure!(
        s.lease_new == u64::from(FLOWS),
        "RedPlane: {} leases",
        s.lease_new
    );
    ensure!(
        (s.renewals, s.buf_reads) == (0, 0),
        "RedPlane left the read path: {} renewals, {} buffered reads",
        s.renewals,
        s.buf_reads
    );
    ensure!(s.reads_forwarded > 0, "RedPlane forwarded nothing");
    ensure!(
        sw.stats().ports.iter().all(|p| p.tm_drops == 0),
        "RedPlane queue drops"
    );
    Ok(())
}

/// `redplane-read`: the RedPlane NAT's read path against the plain NAT.
pub fn redplane_read(ctx: &Ctx) -> anyhow::Result<Measured> {
    let (n, warm) = sizes(ctx);
    let templates = nat_tcp_flows(FLOWS);
    let mut rp = fed_redplane(&templates)?;
    let mut nat = fed_nat(&templates, 1, 0, GAP_NS).map_err(anyhow::Error::msg)?;
    rp.push(warm);
    nat.push(warm);
    let (mut samples, mut base) = (Vec::new(), Vec::new());
    for _ in 0..ctx.runs {
        samples.push(timed_rate(|| rp.push(n)));
        base.push(timed_rate(|| nat.push(n)));
    }
    check_redplane(&mut rp)?;
    check_fed_nat(&mut nat, u64::from(FLOWS)).map_err(anyhow::Error::msg)?;
    Ok(Measured {
        samples,
        baseline: Baseline::Measured {
            what: "the plain inca-apps NAT, same flows and profile".into(),
            samples: base,
        },
        notes: vec![format!(
            "{n} packets per run; every packet a read with a valid lease"
        )],
    })
}

/// `redplane-read --profile-iterations N`.
pub fn profile_redplane_read(n: u64) -> anyhow::Result<String> {
    let mut rp = fed_redplane(&nat_tcp_flows(FLOWS))?;
    rp.push(10_000);
    profiled(|| rp.push(n));
    check_redplane(&mut rp)?;
    Ok(format!("{n} packets through the RedPlane NAT read path"))
}
