//! `clip-switch-pass` and `clip-switch-flight` (see [`super`]): packets
//! per second through the CLIP switch program with the SNAT app
//! (`clip_snat`, two server links, a default route), against inca-apps'
//! plain NAT (the `nat` row's set-up: 65,536 mappings installed through
//! its control plane) on the same 1,024 flows of 64-byte TCP frames
//! 10 ns apart on the `tofino` profile.
//!
//! - Fast path: every flow's translation installed in `nat_table`
//!   (`AppInstall`, as promotion would): server-port check, parse,
//!   `pre_processing` hit, `post_processing` rewrite, regular forwarding.
//! - Flight path: `nat_table` empty: the miss, FH_A, both CMS rows, the
//!   pin table, `cur`, the Bloom filters, the slot, member and pin-cache
//!   lookups, the shim push, out to a server port (no wire: the fabric
//!   counts it as gone).
//!
//! The NAT is the same translation on the same frames with none of
//! CLIP's blocks, so the ratio is what the CLIP framework costs the model
//! per pass.

use inca_apps::core::Endpoint;
use inca_apps::fixtures::{check_fed_nat, fed_nat, nat_tcp_flows, PUBLIC};
use inca_apps::headers::parse;
use inca_apps::params::Params;
use inca_switch::device::{Nanos, PortId, SECONDS};
use inca_switch::fabric::Fabric;
use inca_switch::{Profile, Switch};
use inca_system::bench::{profiled, timed_rate, Baseline, Ctx, Measured};

use crate::apps::snat::{SnatHandler, SnatSwitch};
use crate::flow::FlowKey;
use crate::params::{build, Built};
use crate::switch::{ClipSwitch, Command};

/// Flows (as the `nat` row).
const FLOWS: u16 = 1024;
/// Virtual time between packets (as the `nat` row).
const GAP_NS: Nanos = 10;
/// The network ports (in, routed out) and the server links.
const NET_IN: PortId = 0;
const NET_OUT: PortId = 1;
const SERVERS: &str = "1:2,2:3";

type ClipFabric = Fabric<Switch<ClipSwitch<SnatSwitch>>>;

/// Packets per timed run and per warm-up.
fn sizes(ctx: &Ctx) -> (u64, u64) {
    (ctx.size(1_000_000, 50_000), ctx.size(200_000, 10_000))
}

/// The CLIP switch fed the flows; with `install`, every flow's translation
/// in `nat_table`.
fn clip(install: bool) -> Result<ClipFabric, String> {
    let mut p = Params::default();
    p.set("servers", SERVERS).set("route_port", NET_OUT);
    let prog = match build("clip_snat", &p) {
        Some(Ok(Built::Snat(prog))) => *prog,
        _ => return Err("clip_snat does not build".into()),
    };
    let mut f = Fabric::new(1);
    let node = f.add(Switch::new(Profile::tofino(), prog).map_err(|e| e.to_string())?);
    f.start_all();
    let templates = nat_tcp_flows(FLOWS);
    if install {
        for (i, frame) in templates.iter().enumerate() {
            let p = parse(frame).map_err(|e| format!("flow frame: {e:?}"))?;
            let public = Endpoint::new(PUBLIC, 20_000 + i as u16);
            let e = SnatHandler::entry(FlowKey::of_parsed(&p, 0), public);
            let t = f.now();
            f.control(t, node, Command::AppInstall(e).message());
        }
    }
    // The control plane's serial writes take effect over time.
    f.run_until(f.now() + SECONDS);
    f.set_stream(node, NET_IN, GAP_NS, templates);
    Ok(f)
}

/// Every packet pushed left, each on the path expected, none dropped.
fn check_clip(f: &mut ClipFabric, pushed: u64, fast: bool) -> Result<(), String> {
    f.run_until(f.now() + 1_000_000);
    let (injected, left) = (f.stats().injected, f.stats().left);
    if left != injected {
        return Err(format!("CLIP sent {left} of {injected} packets"));
    }
    let sw = f.device(0);
    let s = sw.program().stats;
    let (on, off) = if fast {
        (s.fast, s.flight)
    } else {
        (s.flight, s.fast)
    };
    if on != pushed || off != 0 {
        return Err(format!(
            "CLIP: {} fast, {} flight for {pushed} packets",
            s.fast, s.flight
        ));
    }
    if sw.stats().ports.iter().any(|p| p.tm_drops != 0) {
        return Err("CLIP queue drops".into());
    }
    Ok(())
}

fn run(ctx: &Ctx, fast: bool) -> Result<Measured, String> {
    let (n, warm) = sizes(ctx);
    let mut a = clip(fast)?;
    let mut b = fed_nat(&nat_tcp_flows(FLOWS), 1, 0, GAP_NS)?;
    a.push(warm);
    b.push(warm);
    let (mut samples, mut base) = (Vec::new(), Vec::new());
    // Interleaved, so both see the same machine.
    for _ in 0..ctx.runs.max(1) {
        samples.push(timed_rate(|| a.push(n)));
        base.push(timed_rate(|| b.push(n)));
    }
    check_clip(&mut a, warm + n * ctx.runs.max(1) as u64, fast)?;
    check_fed_nat(&mut b, u64::from(FLOWS))?;
    let path = if fast {
        "fast path, every flow in nat_table"
    } else {
        "flight path, nat_table empty, requests to 2 server ports"
    };
    Ok(Measured {
        samples,
        baseline: Baseline::Measured {
            what: "inca-apps' plain NAT on the same frames (the nat row)".into(),
            samples: base,
        },
        notes: vec![format!(
            "{n} packets per run, {FLOWS} flows, 64-byte TCP, tofino profile; CLIP {path}"
        )],
    })
}

/// `clip-switch-pass`: the fast path.
pub fn fast(ctx: &Ctx) -> Result<Measured, String> {
    run(ctx, true)
}

/// `clip-switch-flight`: the flight path.
pub fn flight(ctx: &Ctx) -> Result<Measured, String> {
    run(ctx, false)
}

/// `clip-switch-pass --profile-iterations N`.
pub fn profile_fast(n: u64) -> Result<String, String> {
    let mut f = clip(true)?;
    f.push(10_000);
    profiled(|| f.push(n));
    check_clip(&mut f, 10_000 + n, true)?;
    Ok(format!("{n} packets through the CLIP switch's fast path"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Both rows run and their checks hold.
    #[test]
    fn the_rows_run_with_their_checks() {
        let ctx = Ctx {
            runs: 1,
            quick: true,
        };
        for m in [fast(&ctx).unwrap(), flight(&ctx).unwrap()] {
            assert_eq!(m.samples.len(), 1);
            assert!(m.samples[0] > 0.0);
            assert!(m.baseline.median().is_some_and(|b| b > 0.0));
        }
    }

    /// Fast-path packets leave translated, flight packets with the shim.
    #[test]
    fn the_paths_are_what_they_say() {
        let mut f = clip(true).unwrap();
        f.keep_egress(true);
        f.push(u64::from(FLOWS));
        f.run_until(f.now() + 1_000_000);
        let out = f.take_egress();
        assert_eq!(out.len(), usize::from(FLOWS));
        for s in &out {
            assert_eq!(s.port, NET_OUT);
            let p = parse(&s.frame).unwrap();
            assert_eq!(p.src, PUBLIC, "source translated");
        }
        let mut f = clip(false).unwrap();
        f.keep_egress(true);
        f.push(u64::from(FLOWS));
        f.run_until(f.now() + 1_000_000);
        let out = f.take_egress();
        assert_eq!(out.len(), usize::from(FLOWS));
        assert!(out.iter().all(|s| s.port == 2 || s.port == 3));
        assert!(out
            .iter()
            .all(|s| inca_wire::clip::shim::shim_of(&s.frame).unwrap().is_some()));
    }
}
