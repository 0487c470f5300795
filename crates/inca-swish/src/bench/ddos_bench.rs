//! `swish-sdw-ddos` (see [`super`]): the detector's per-packet path on an
//! SDW replica against the same detector on a local sketch.

use inca_switch::device::Nanos;
use inca_switch::fabric::Fabric;
use inca_switch::{Profile, Switch};
use inca_system::bench::{timed_rate, Baseline, Ctx, Measured};

use crate::addr::ReplicaAddr;
use crate::ddos::local::{DdosLocal, LocalConfig, Report};
use crate::detector;
use crate::sdw::config::{Merge, SdwApp, SdwConfig};
use crate::sdw::program::SdwProgram;

/// Virtual time between packets.
const GAP_NS: Nanos = 10;
/// Sources and destinations per source in the frames fed [our choice:
/// enough that about 1 in 16 pairs is sampled and no source is blocked].
const SOURCES: u32 = 64;
const DSTS: u32 = 64;
/// Where traffic leaves (a port without a wire: the fabric counts it).
const OUT: u16 = 10;

fn frames() -> Vec<Vec<u8>> {
    (0..SOURCES * DSTS)
        .map(|i| detector::traffic_frame(detector::source_ip(i % SOURCES), detector::dest_ip(i)))
        .collect()
}

fn sdw() -> Result<Fabric<Switch<SdwProgram>>, String> {
    let members: Vec<ReplicaAddr> = (1..=2).map(|r| ReplicaAddr::conventional(r, r)).collect();
    let mut c = SdwConfig::new(1, members, 30);
    c.cols = detector::COLS;
    c.merge = Merge::Or;
    c.app = SdwApp::Ddos { out_port: OUT };
    let prog = SdwProgram::new(c).map_err(|e| e.to_string())?;
    let sw = Switch::new(Profile::tofino(), prog).map_err(|e| e.to_string())?;
    let mut f = Fabric::new(1);
    let n = f.add(sw);
    f.set_stream(n, 0, GAP_NS, frames());
    Ok(f)
}

fn local() -> Result<Fabric<Switch<DdosLocal>>, String> {
    let prog = DdosLocal::new(LocalConfig {
        report: Report::Pull,
        cols: detector::COLS,
        rid: 1,
        out_port: OUT,
        ctrl_port: 11,
        ctrl_ip: std::net::Ipv4Addr::new(10, 47, 255, 254),
        self_ip: std::net::Ipv4Addr::new(10, 47, 0, 1),
    })?;
    let sw = Switch::new(Profile::tofino(), prog).map_err(|e| e.to_string())?;
    let mut f = Fabric::new(1);
    let n = f.add(sw);
    f.set_stream(n, 0, GAP_NS, frames());
    Ok(f)
}

/// Every packet pushed must have left (none blocked, none dropped).
fn check<D: inca_switch::Device>(f: &mut Fabric<D>, what: &str) -> Result<(), String> {
    f.run_until(f.now() + 1_000_000);
    let (pushed, left) = (f.stats().injected, f.stats().left);
    if left != pushed {
        return Err(format!("{what}: {left} of {pushed} packets left"));
    }
    Ok(())
}

pub(super) fn run(c: &Ctx) -> Result<Measured, String> {
    let (n, warm) = (c.size(1_000_000, 50_000), c.size(100_000, 10_000));
    let (mut a, mut b) = (sdw()?, local()?);
    a.push(warm);
    b.push(warm);
    let (mut samples, mut base) = (Vec::new(), Vec::new());
    for _ in 0..c.runs.max(1) {
        samples.push(timed_rate(|| a.push(n)));
        base.push(timed_rate(|| b.push(n)));
    }
    check(&mut a, "SDW detector")?;
    check(&mut b, "local detector")?;
    Ok(Measured {
        samples,
        baseline: Baseline::Measured {
            what: "the same detector on a local sketch without SwiSh (pull baseline switch)".into(),
            samples: base,
        },
        notes: vec![format!(
            "{n} packets per run, {SOURCES} sources x {DSTS} destinations, 3 x {} columns, tofino profile",
            detector::COLS
        )],
    })
}
