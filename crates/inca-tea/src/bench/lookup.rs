//! `tea-lookup`: the TEA NAT with its cache off, so every packet takes the
//! DRAM path: the request pass (sketch, resolvers, flow control, WRITE and
//! READ with ICRC), the DRAM server's NIC answering, and the response pass
//! (the READ RESPONSE parsed, the translation applied, the packet sent
//! on), in packets per second on one core. The switch and two DRAM servers
//! are nodes of one test fabric ([`TeaNet`]) joined by zero-latency wires,
//! so the figure is the work of all three per packet; baseline: the plain
//! NAT with the same flows (an SRAM lookup, [`inca_apps::fixtures::fed_nat`]).

use std::net::Ipv4Addr;

use anyhow::{ensure, Context};
use inca_apps::fixtures::{check_fed_nat, fed_nat};
use inca_apps::headers::parse;
use inca_switch::device::{Nanos, PortId, SECONDS};
use inca_switch::fabric::{Fabric, NodeIx, Wire};
use inca_switch::{Profile, Switch};
use inca_system::bench::{profiled, timed_rate, Baseline, Ctx, Measured};
use inca_wire::{build_udp_frame, Endpoints};

use crate::nf::TeaNat;
use crate::rig::{server_ip, server_mac};
use crate::server::{DramServer, DramServerConfig};
use crate::switch::{ServerSpec, TeaConfig, TeaSwitch};

/// Flows (as crates/inca-tea/benches/lookup.rs).
const FLOWS: u32 = 512;
/// Virtual time between packets: [our choice] 5 M packets/s offered,
/// within what two servers' links, QPs and NICs carry in the model, so
/// flow control never refuses a packet and each packet is a full round
/// trip.
const GAP_NS: Nanos = 200;
/// Virtual time between packets of the plain-NAT baseline (as the `nat`
/// benchmark's).
const NAT_GAP_NS: Nanos = 10;
/// Inside port of the TEA NAT; servers sit on ports 2 and 3.
const INSIDE: PortId = 0;
const OUTSIDE: PortId = 1;
const SERVERS: usize = 2;
/// The switch's node in the fabric (servers follow).
const SWITCH: NodeIx = 0;

type TeaSw = Switch<TeaSwitch<TeaNat>>;

/// A UDP frame of TEA flow `i`.
pub fn udp_frame(i: u32) -> Vec<u8> {
    let ep = Endpoints::new(
        [2, 0, 0, 0, 1, 1],
        Ipv4Addr::new(10, 1, (i >> 8) as u8, i as u8),
        [2, 0, 0, 0, 1, 2],
        Ipv4Addr::new(8, 8, 8, 8),
    );
    build_udp_frame(&ep, 1000 + i as u16, 53, &[0; 18], true).expect("a valid UDP frame")
}

/// The TEA NAT switch (node 0) and its DRAM servers (node 1 + i, on switch
/// port 2 + i) in one fabric, fed the flows on the inside port; what the
/// switch sends on its other ports leaves the fabric and is counted.
pub struct TeaNet {
    fabric: Fabric,
}

impl TeaNet {
    /// A TEA NAT with `FLOWS` preloaded translations and its cache off,
    /// set up against two DRAM servers until its control plane is ready.
    pub fn new() -> anyhow::Result<TeaNet> {
        let specs = (0..SERVERS)
            .map(|i| ServerSpec {
                port: 2 + i as u16,
                mac: server_mac(i),
                ip: server_ip(i),
            })
            .collect();
        let mut cfg = TeaConfig::new(13, 6, 12, specs);
        // Every packet goes to DRAM.
        cfg.cache_cap = 0;
        let templates: Vec<Vec<u8>> = (0..FLOWS).map(udp_frame).collect();
        let mut entries = Vec::new();
        for (i, f) in templates.iter().enumerate() {
            let p = parse(f).map_err(|e| anyhow::anyhow!("TEA flow: {e:?}"))?;
            entries.extend(TeaNat::entries(&p, [198, 51, 100, 1], 2000 + i as u16));
        }
        let nat = TeaNat::new(OUTSIDE, INSIDE, [198, 51, 100, 1], 1 << 20);
        let prog = TeaSwitch::new(nat, cfg.clone())
            .map_err(|e| anyhow::anyhow!("TEA config: {e}"))?
            .with_preload(entries);
        let sw = Switch::new(Profile::tofino(), prog).map_err(|e| anyhow::anyhow!("{e}"))?;
        let mut fabric = Fabric::new(1);
        let switch = fabric.add_any(sw);
        for i in 0..SERVERS {
            let c = DramServerConfig {
                server_id: i as u16,
                ip: server_ip(i),
                mac: server_mac(i),
                dram_offered: 1 << 30,
                controller_ip: cfg.switch_ip,
                controller_mac: cfg.switch_mac,
                ..DramServerConfig::default()
            };
            let s = DramServer::new(c).map_err(|e| anyhow::anyhow!("DRAM server: {e}"))?;
            let node = fabric.add_any(s);
            fabric.connect((switch, 2 + i as PortId), (node, 0), Wire::default())?;
        }
        fabric.start_all();
        let mut net = TeaNet { fabric };
        // Set-up: HELLOs, QPs, table layout, the preload written to DRAM.
        let mut t = 0;
        while !net.switch().program().is_ready() {
            t += 1_000_000;
            ensure!(
                t <= 2 * SECONDS,
                "TEA set-up did not finish: {}",
                net.switch().program().cp_state()
            );
            net.fabric.run_until(t);
        }
        net.fabric.run_until(t + 50_000_000);
        net.fabric.set_stream(switch, INSIDE, GAP_NS, templates);
        Ok(net)
    }

    fn switch(&self) -> &TeaSw {
        self.fabric
            .get::<TeaSw>(SWITCH)
            .expect("node 0 is the TEA switch")
    }

    /// Injects `n` packets of the flows, `GAP_NS` apart, running the
    /// fabric as it goes; returns `n`.
    pub fn push(&mut self, n: u64) -> u64 {
        self.fabric.push(n)
    }

    /// Lets the packets in flight finish.
    pub fn settle(&mut self) {
        let t = self.fabric.now() + 1_000_000;
        self.fabric.run_until(t);
    }

    /// Checks that the packets took the DRAM path and came back: no SRAM
    /// hit, and at most 1% not forwarded.
    pub fn check(&self) -> anyhow::Result<String> {
        let s = self.switch().program().dp_stats();
        let injected = self.fabric.stats().injected;
        let forwarded = self.fabric.left_on(SWITCH, OUTSIDE);
        ensure!(
            s.sram_hits == 0,
            "TEA: {} SRAM hits with the cache off",
            s.sram_hits
        );
        ensure!(
            forwarded * 100 >= injected * 99,
            "TEA: {forwarded} of {injected} packets forwarded ({s:?})"
        );
        Ok(format!(
            "{injected} packets in, {forwarded} translated out, {} DRAM lookups, {} responses",
            s.dram_lookups, s.responses
        ))
    }
}

/// Packets per timed run and per warm-up.
fn sizes(ctx: &Ctx) -> (u64, u64) {
    (ctx.size(1_000_000, 50_000), ctx.size(200_000, 10_000))
}

/// `tea-lookup`: the DRAM round trip per packet against the plain NAT.
pub fn tea_lookup(ctx: &Ctx) -> anyhow::Result<Measured> {
    let (n, warm) = sizes(ctx);
    // A DRAM round trip costs several times a NAT packet: fewer of them.
    let n = n / 5;
    let mut tea = TeaNet::new().context("TEA set-up")?;
    let templates: Vec<Vec<u8>> = (0..FLOWS).map(udp_frame).collect();
    let mut nat = fed_nat(&templates, INSIDE, OUTSIDE, NAT_GAP_NS).map_err(anyhow::Error::msg)?;
    tea.push(warm / 5);
    nat.push(warm);
    let (mut samples, mut base) = (Vec::new(), Vec::new());
    for _ in 0..ctx.runs {
        samples.push(timed_rate(|| tea.push(n)));
        base.push(timed_rate(|| nat.push(n)));
    }
    tea.settle();
    let checked = tea.check()?;
    check_fed_nat(&mut nat, u64::from(FLOWS)).map_err(anyhow::Error::msg)?;
    Ok(Measured {
        samples,
        baseline: Baseline::Measured {
            what: "the plain inca-apps NAT (SRAM lookup), same flows".into(),
            samples: base,
        },
        notes: vec![
            format!("{n} packets per run, 512 flows, cache off, 2 DRAM servers in the same loop"),
            checked,
        ],
    })
}

/// `tea-lookup --profile-iterations N`.
pub fn profile_tea_lookup(n: u64) -> anyhow::Result<String> {
    let mut tea = TeaNet::new()?;
    tea.push(2_000);
    profiled(|| tea.push(n));
    tea.settle();
    tea.check()
}
