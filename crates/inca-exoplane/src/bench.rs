//! ExoPlane's row of `inca bench` ([`inca_system::System::benches`]):
//! `exoplane-fm`, the switch's per-packet cost with ExoPlane's flow
//! manager in front of four apps (UnivMon, NAT, firewall, VPN: the
//! `exoplane_switch` program's `apps=um,nat,fw,vpn`), every packet a NAT
//! flow the flow manager holds (served on the switch), against the same
//! four apps as a plain classified composite without ExoPlane (the
//! catalog's `composite`, the NAT's flows installed by its own control
//! plane). Both on the `tofino` profile, 1,024 flows of 64-byte TCP frames
//! 10 ns apart, driven by the test fabric as the `nat` row is.

use anyhow::{ensure, Context};
use inca_apps::catalog::composite;
use inca_apps::fixtures::nat_tcp_flows;
use inca_apps::headers::parse;
use inca_apps::nat::Translate;
use inca_apps::params::Params;
use inca_switch::device::{Nanos, PortId, SECONDS};
use inca_switch::fabric::Fabric;
use inca_switch::{Composite, Profile, Switch};
use inca_system::bench::{
    profiled, timed_rate, Baseline, Bench, BenchError, Budget, Ctx, Measured,
};

use crate::app::catalog::encode_translate;
use crate::manual;
use crate::programs::switch_from_params;
use crate::switch::ExoSwitch;

/// Flows (as the `nat` row).
const FLOWS: u16 = 1024;
/// Virtual time between packets (as the `nat` row).
const GAP_NS: Nanos = 10;
const INSIDE: PortId = 0;
const OUTSIDE: PortId = 1;
/// The apps, in the same order on both sides (UnivMon first: the stage
/// allocator places in declaration order, see `programs`).
const EXO_APPS: &str = "apps=um,nat,fw,vpn";
const PLAIN_APPS: &str = "apps=univmon,nat,firewall,vpn";

/// The rows, in table order.
pub fn benches() -> Vec<Bench> {
    vec![Bench {
        name: "exoplane-fm",
        what: "ExoPlane switch, FM in front of 4 apps (NAT flows switch-served)",
        unit: "packets/s",
        budget: Budget::None,
        budget_text: "",
        run: Some(|c| run(c).map_err(BenchError::new)),
        profile: Some(|n| profile(n).map_err(BenchError::new)),
    }]
}

/// The ExoPlane switch with every flow in the NAT's table and flow manager
/// (installed by hand, as the hub's promotion would), fed the flows.
fn exo_fed() -> anyhow::Result<Fabric<Switch<ExoSwitch>>> {
    let params = Params::parse([EXO_APPS]).map_err(anyhow::Error::msg)?;
    let program = switch_from_params(&params).context("the ExoPlane switch")?;
    let nat = program
        .config()
        .apps
        .iter()
        .find(|a| a.spec.name == "nat")
        .map(|a| a.spec.clone())
        .context("the ExoPlane switch has a NAT")?;
    let mut f = Fabric::new(1);
    let node = f.add(Switch::new(Profile::tofino(), program)?);
    f.start_all();
    let templates = nat_tcp_flows(FLOWS);
    for (i, frame) in templates.iter().enumerate() {
        let p = parse(frame).map_err(|e| anyhow::anyhow!("NAT flow: {e:?}"))?;
        let t = f.now();
        for (obj, key) in nat.needs(&p, frame, INSIDE) {
            let value = encode_translate(&Translate {
                ip: [198, 51, 100, 1],
                port: 20_000 + i as u16,
                egress: OUTSIDE,
            });
            let m = manual::write(nat.id.0, obj.0, &key, Some(&value)).context("NAT entry")?;
            f.control(t, node, m);
        }
        let uk = nat.union_key(&p, frame);
        let m = manual::fm(nat.id.0, Some(i as u32), &uk.0).context("flow-manager entry")?;
        f.control(t, node, m);
    }
    // The control plane's serial writes take effect over time.
    f.run_until(f.now() + SECONDS);
    f.set_stream(node, INSIDE, GAP_NS, templates);
    Ok(f)
}

/// The same apps as a plain composite; the NAT's control plane installs
/// each flow from its first packet.
fn plain_fed() -> anyhow::Result<Fabric<Switch<Composite>>> {
    let params = Params::parse([
        PLAIN_APPS,
        "classify=univmon:dport=7777;firewall:dport=5353;vpn:dport=4789",
        "default=nat",
        "nat.outside_port=1",
        "firewall.outside_port=1",
        "vpn.outside_port=1",
    ])
    .map_err(anyhow::Error::msg)?;
    let program = composite::from_params(&params).map_err(|e| anyhow::anyhow!("{e}"))?;
    let mut f = Fabric::new(1);
    let node = f.add(Switch::new(Profile::tofino(), program)?);
    f.start_all();
    let templates = nat_tcp_flows(FLOWS);
    for frame in &templates {
        let t = f.now() + 1_000;
        f.inject(t, node, INSIDE, frame.clone());
    }
    f.run_until(f.now() + SECONDS);
    f.set_stream(node, INSIDE, GAP_NS, templates);
    Ok(f)
}

/// Every packet pushed left, and (ExoPlane) every one hit the flow manager.
fn check_exo(f: &mut Fabric<Switch<ExoSwitch>>, pushed: u64) -> anyhow::Result<()> {
    f.run_until(f.now() + 1_000_000);
    let (injected, left) = (f.stats().injected, f.stats().left);
    ensure!(
        left == injected,
        "ExoPlane sent {left} of {injected} packets"
    );
    let c = f.device(0).program().counters();
    ensure!(
        c.fm_hits == pushed && c.fm_misses == 0 && c.to_dev == 0,
        "ExoPlane: {} flow-manager hits, {} misses, {} to devices for {pushed} packets",
        c.fm_hits,
        c.fm_misses,
        c.to_dev
    );
    Ok(())
}

fn check_plain(f: &mut Fabric<Switch<Composite>>) -> anyhow::Result<()> {
    f.run_until(f.now() + 1_000_000);
    let (injected, left) = (f.stats().injected, f.stats().left);
    ensure!(
        left == injected,
        "the composite sent {left} of {injected} packets"
    );
    let punts = f.device(0).stats().punts;
    ensure!(
        punts == u64::from(FLOWS),
        "the composite punted {punts} packets, expected {FLOWS} (set-up only)"
    );
    Ok(())
}

fn run(ctx: &Ctx) -> anyhow::Result<Measured> {
    let (n, warm) = (ctx.size(1_000_000, 50_000), ctx.size(200_000, 10_000));
    let mut exo = exo_fed()?;
    let mut plain = plain_fed()?;
    exo.push(warm);
    plain.push(warm);
    let (mut samples, mut base) = (Vec::new(), Vec::new());
    // Interleaved, so both see the same machine.
    for _ in 0..ctx.runs {
        samples.push(timed_rate(|| exo.push(n)));
        base.push(timed_rate(|| plain.push(n)));
    }
    check_exo(&mut exo, warm + n * ctx.runs as u64)?;
    check_plain(&mut plain)?;
    Ok(Measured {
        samples,
        baseline: Baseline::Measured {
            what: "the same 4 apps as a plain composite (no ExoPlane)".into(),
            samples: base,
        },
        notes: vec![format!(
            "{n} packets per run, {FLOWS} NAT flows in the flow manager, tofino profile"
        )],
    })
}

fn profile(n: u64) -> anyhow::Result<String> {
    let mut f = exo_fed()?;
    f.push(10_000);
    profiled(|| f.push(n));
    check_exo(&mut f, 10_000 + n)?;
    Ok(format!(
        "{n} packets through the ExoPlane switch's flow manager"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The row runs and its checks hold: every ExoPlane packet hit the flow
    /// manager and left translated, the composite punted only the set-up.
    #[test]
    fn the_row_runs_with_its_checks() {
        let m = run(&Ctx {
            runs: 1,
            quick: true,
        })
        .unwrap();
        assert_eq!(m.samples.len(), 1);
        assert!(m.samples[0] > 0.0);
        assert!(m.baseline.median().is_some_and(|b| b > 0.0));
    }

    /// The ExoPlane side's packets are translated by the NAT on the switch.
    #[test]
    fn switch_served_packets_are_translated() {
        let mut f = exo_fed().unwrap();
        f.keep_egress(true);
        f.push(FLOWS.into());
        f.run_until(f.now() + 1_000_000);
        let out = f.take_egress();
        assert_eq!(out.len(), usize::from(FLOWS));
        for s in &out {
            assert_eq!(s.port, OUTSIDE);
            let p = parse(&s.frame).unwrap();
            assert_eq!(p.src, [198, 51, 100, 1], "source translated");
            assert!((20_000..20_000 + FLOWS).contains(&p.sport));
        }
    }
}
