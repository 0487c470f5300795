//! Switch-model pipelines in process, on one core, in packets per second:
//!
//! - `nat`: the inca-apps NAT on the `tofino` profile with 1,024 installed
//!   flows, 64-byte TCP frames 10 ns apart (below the outside port's line
//!   rate, so no queue builds), as crates/inca-apps/benches/nat_fast_path.rs.
//! - `redplane-read`: the RedPlane NAT on its read path (a lease granted for
//!   every flow by NEW_ACKs the benchmark plays as the store, no write
//!   outstanding), as crates/inca-redplane/benches/switch.rs; baseline: the
//!   plain NAT with the same flows on the same profile, alternating runs.
//! - `tea-lookup`: the TEA NAT with its cache off, so every packet takes the
//!   DRAM path: the request pass (sketch, resolvers, flow control, WRITE and
//!   READ with ICRC), the DRAM server's NIC answering, and the response pass
//!   (the READ RESPONSE parsed, the translation applied, the packet sent
//!   on). Switch and two DRAM servers are driven by one zero-delay event
//!   loop ([`TeaNet`]), so the figure is the work of all three per packet;
//!   baseline: the plain NAT with the same flows (an SRAM lookup).
//!
//! The NAT and RedPlane set-ups ([`inca_apps::fixtures`],
//! [`inca_redplane::fixtures`]) and the driver ([`Feeder`]) are the ones the
//! criterion benches use. Frame buffers are recycled as a real driver's
//! would be, so the figures are the model's cost, not the allocator's.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::net::Ipv4Addr;

use anyhow::{ensure, Context};
use inca_apps::fixtures::{installed_nat, nat_tcp_flows};
use inca_apps::headers::parse;
use inca_apps::nat::Nat;
use inca_redplane::apps::nat::RpNat;
use inca_redplane::fixtures::leased_nat;
use inca_redplane::switch::RedPlane;
use inca_switch::device::{device_rng, DeviceRng, Nanos, PortId, SECONDS};
use inca_switch::feeder::Feeder;
use inca_switch::{Device, Input, Output, Profile, Switch};
use inca_tea::nf::TeaNat;
use inca_tea::rig::{server_ip, server_mac};
use inca_tea::server::{DramServer, DramServerConfig};
use inca_tea::switch::{ServerSpec, TeaConfig, TeaSwitch};
use inca_wire::{build_udp_frame, Endpoints};

use super::measure::{profiled, timed_rate};
use super::{Baseline, Ctx, Measured};

/// Flows of the NAT and RedPlane pipelines.
const FLOWS: u16 = 1024;
/// Flows of the TEA pipeline (as crates/inca-tea/benches/lookup.rs).
const TEA_FLOWS: u32 = 512;
/// Virtual time between packets of the NAT and RedPlane pipelines.
const GAP_NS: Nanos = 10;
/// Virtual time between packets of the TEA pipeline: [our choice] 5 M
/// packets/s offered, within what two servers' links, QPs and NICs carry in
/// the model, so flow control never refuses a packet and each packet is a
/// full round trip.
const TEA_GAP_NS: Nanos = 200;
/// Recycled frame buffers kept by the TEA loop.
const POOL: usize = 256;

/// Packets per timed run and per warm-up.
fn sizes(ctx: &Ctx) -> (u64, u64) {
    (ctx.size(1_000_000, 50_000), ctx.size(200_000, 10_000))
}

fn tcp_templates() -> Vec<Vec<u8>> {
    nat_tcp_flows(FLOWS)
}

/// The plain NAT with every flow installed through its control plane:
/// flows arrive on `inside`, leave on `outside`.
fn plain_nat(
    templates: &[Vec<u8>],
    inside: PortId,
    outside: PortId,
) -> anyhow::Result<Feeder<Switch<Nat>>> {
    let (sw, now) = installed_nat(templates, inside, outside).map_err(anyhow::Error::msg)?;
    Ok(Feeder::new(sw, now, inside, GAP_NS, templates.to_vec()))
}

/// Checks after a NAT run: every measured packet took the fast path and
/// left (after the last ones have crossed the pipeline).
fn check_nat(f: &mut Feeder<Switch<Nat>>, flows: u64) -> anyhow::Result<()> {
    f.advance_to(f.now() + 1_000_000);
    ensure!(
        f.transmitted == f.pushed,
        "NAT sent {} of {} packets",
        f.transmitted,
        f.pushed
    );
    let s = f.dev.stats();
    ensure!(
        s.punts == flows,
        "NAT punted {} packets, expected {flows} (set-up only)",
        s.punts
    );
    ensure!(s.ports.iter().all(|p| p.tm_drops == 0), "NAT queue drops");
    Ok(())
}

/// `nat`: the NAT fast path.
pub fn nat(ctx: &Ctx) -> anyhow::Result<Measured> {
    let (n, warm) = sizes(ctx);
    let mut f = plain_nat(&tcp_templates(), 1, 0)?;
    f.push(warm);
    let mut samples = Vec::new();
    for _ in 0..ctx.runs {
        samples.push(timed_rate(|| f.push(n)));
    }
    check_nat(&mut f, u64::from(FLOWS))?;
    Ok(Measured {
        samples,
        baseline: Baseline::None,
        notes: vec![format!("{n} packets per run, 1,024 flows, tofino profile")],
    })
}

/// `nat --profile-iterations N`.
pub fn profile_nat(n: u64) -> anyhow::Result<String> {
    let mut f = plain_nat(&tcp_templates(), 1, 0)?;
    f.push(10_000);
    profiled(|| f.push(n));
    check_nat(&mut f, u64::from(FLOWS))?;
    Ok(format!("{n} packets through the NAT fast path"))
}

/// The RedPlane NAT with a lease for every flow (see
/// [`inca_redplane::fixtures::leased_nat`]).
fn redplane_nat(templates: &[Vec<u8>]) -> anyhow::Result<Feeder<Switch<RedPlane<RpNat>>>> {
    let (sw, now) = leased_nat(templates).map_err(anyhow::Error::msg)?;
    Ok(Feeder::new(sw, now, 1, GAP_NS, templates.to_vec()))
}

fn check_redplane(f: &mut Feeder<Switch<RedPlane<RpNat>>>) -> anyhow::Result<()> {
    f.advance_to(f.now() + 1_000_000);
    ensure!(
        f.transmitted == f.pushed,
        "RedPlane NAT sent {} of {} packets",
        f.transmitted,
        f.pushed
    );
    let s = f.dev.program().stats();
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
        f.dev.stats().ports.iter().all(|p| p.tm_drops == 0),
        "RedPlane queue drops"
    );
    Ok(())
}

/// `redplane-read`: the RedPlane NAT's read path against the plain NAT.
pub fn redplane_read(ctx: &Ctx) -> anyhow::Result<Measured> {
    let (n, warm) = sizes(ctx);
    let templates = tcp_templates();
    let mut rp = redplane_nat(&templates)?;
    let mut nat = plain_nat(&templates, 1, 0)?;
    rp.push(warm);
    nat.push(warm);
    let (mut samples, mut base) = (Vec::new(), Vec::new());
    for _ in 0..ctx.runs {
        samples.push(timed_rate(|| rp.push(n)));
        base.push(timed_rate(|| nat.push(n)));
    }
    check_redplane(&mut rp)?;
    check_nat(&mut nat, u64::from(FLOWS))?;
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
    let mut rp = redplane_nat(&tcp_templates())?;
    rp.push(10_000);
    profiled(|| rp.push(n));
    check_redplane(&mut rp)?;
    Ok(format!("{n} packets through the RedPlane NAT read path"))
}

// ---------------------------------------------------------------------------
// TEA: a switch and two DRAM servers in one event loop.

type TeaSw = Switch<TeaSwitch<TeaNat>>;

/// Inside port of the TEA NAT; servers sit on ports 2 and 3.
const TEA_INSIDE: PortId = 0;
const TEA_OUTSIDE: PortId = 1;
const TEA_SERVERS: usize = 2;

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

/// A frame in flight: (time, order, node, port, frame).
type Event = Reverse<(Nanos, u64, usize, PortId, Vec<u8>)>;

/// The TEA NAT switch (node 0) and its DRAM servers (node 1 + i, on switch
/// port 2 + i), joined by zero-delay links; frames the switch sends on any
/// other port leave the loop and are counted.
pub struct TeaNet {
    sw: TeaSw,
    servers: Vec<DramServer>,
    rngs: Vec<DeviceRng>,
    now: Nanos,
    events: BinaryHeap<Event>,
    seq: u64,
    /// Pending timers (node, token, time).
    timers: Vec<(usize, u64, Nanos)>,
    out: Vec<Output>,
    pool: Vec<Vec<u8>>,
    templates: Vec<Vec<u8>>,
    next: usize,
    /// Packets injected on the inside port.
    pub injected: u64,
    /// Packets the switch sent out of the TEA loop (translated).
    pub forwarded: u64,
}

impl TeaNet {
    /// A TEA NAT with `TEA_FLOWS` preloaded translations and its cache off,
    /// set up against two DRAM servers until its control plane is ready.
    pub fn new() -> anyhow::Result<TeaNet> {
        let specs = (0..TEA_SERVERS)
            .map(|i| ServerSpec {
                port: 2 + i as u16,
                mac: server_mac(i),
                ip: server_ip(i),
            })
            .collect();
        let mut cfg = TeaConfig::new(13, 6, 12, specs);
        // Every packet goes to DRAM.
        cfg.cache_cap = 0;
        let templates: Vec<Vec<u8>> = (0..TEA_FLOWS).map(udp_frame).collect();
        let mut entries = Vec::new();
        for (i, f) in templates.iter().enumerate() {
            let p = parse(f).map_err(|e| anyhow::anyhow!("TEA flow: {e:?}"))?;
            entries.extend(TeaNat::entries(&p, [198, 51, 100, 1], 2000 + i as u16));
        }
        let nat = TeaNat::new(TEA_OUTSIDE, TEA_INSIDE, [198, 51, 100, 1], 1 << 20);
        let prog = TeaSwitch::new(nat, cfg.clone())
            .map_err(|e| anyhow::anyhow!("TEA config: {e}"))?
            .with_preload(entries);
        let sw = Switch::new(Profile::tofino(), prog).map_err(|e| anyhow::anyhow!("{e}"))?;
        let mut servers = Vec::new();
        for i in 0..TEA_SERVERS {
            let c = DramServerConfig {
                server_id: i as u16,
                ip: server_ip(i),
                mac: server_mac(i),
                dram_offered: 1 << 30,
                controller_ip: cfg.switch_ip,
                controller_mac: cfg.switch_mac,
                ..DramServerConfig::default()
            };
            servers.push(DramServer::new(c).map_err(|e| anyhow::anyhow!("DRAM server: {e}"))?);
        }
        let mut net = TeaNet {
            sw,
            servers,
            rngs: (0..=TEA_SERVERS as u64).map(|i| device_rng(1, i)).collect(),
            now: 0,
            events: BinaryHeap::new(),
            seq: 0,
            timers: Vec::new(),
            out: Vec::with_capacity(64),
            pool: Vec::with_capacity(POOL),
            templates,
            next: 0,
            injected: 0,
            forwarded: 0,
        };
        for node in 0..=TEA_SERVERS {
            let mut out = std::mem::take(&mut net.out);
            let rng = &mut net.rngs[node];
            match node {
                0 => net.sw.start(0, rng, &mut out),
                i => net.servers[i - 1].start(0, rng, &mut out),
            }
            net.route(node, &mut out);
            net.out = out;
        }
        // Set-up: HELLOs, QPs, table layout, the preload written to DRAM.
        let mut t = 0;
        while !net.sw.program().is_ready() {
            t += 1_000_000;
            ensure!(
                t <= 2 * SECONDS,
                "TEA set-up did not finish: {}",
                net.sw.program().cp_state()
            );
            net.run_until(t);
        }
        net.run_until(t + 50_000_000);
        Ok(net)
    }

    /// Routes `out` of `node`: frames onto links, timers into the list.
    fn route(&mut self, node: usize, out: &mut Vec<Output>) {
        for o in out.drain(..) {
            match o {
                Output::Transmit { at, port, frame } => {
                    let to = match node {
                        0 => usize::from(port)
                            .checked_sub(2)
                            .filter(|&s| s < TEA_SERVERS)
                            .map(|s| (s + 1, 0)),
                        s => Some((0, 2 + (s - 1) as PortId)),
                    };
                    match to {
                        Some((dst, dport)) => {
                            self.seq += 1;
                            self.events.push(Reverse((at, self.seq, dst, dport, frame)));
                        }
                        None => {
                            if port == TEA_OUTSIDE {
                                self.forwarded += 1;
                            }
                            if self.pool.len() < POOL {
                                self.pool.push(frame);
                            }
                        }
                    }
                }
                Output::Timer { at, token } => {
                    match self.timers.iter_mut().find(|t| (t.0, t.1) == (node, token)) {
                        Some(t) => t.2 = at,
                        None => self.timers.push((node, token, at)),
                    }
                }
                Output::Control(_) | Output::Session { .. } => {}
            }
        }
    }

    fn input(&mut self, node: usize, at: Nanos, input: Input) {
        let mut out = std::mem::take(&mut self.out);
        let rng = &mut self.rngs[node];
        match node {
            0 => self.sw.handle(at, input, rng, &mut out),
            i => self.servers[i - 1].handle(at, input, rng, &mut out),
        }
        self.route(node, &mut out);
        self.out = out;
    }

    /// Delivers frames and fires timers due up to `t`, in time order
    /// (frames before timers at the same instant).
    fn run_until(&mut self, t: Nanos) {
        loop {
            let frame_at = self.events.peek().map(|Reverse(e)| e.0);
            let timer = self
                .timers
                .iter()
                .enumerate()
                .min_by_key(|(_, &(n, tok, at))| (at, n, tok))
                .map(|(i, &(_, _, at))| (i, at));
            match (frame_at, timer) {
                (Some(f), _) if f <= t && timer.is_none_or(|(_, at)| f <= at) => {
                    let Some(Reverse((at, _, node, port, frame))) = self.events.pop() else {
                        break;
                    };
                    self.input(node, at, Input::Frame { port, frame });
                }
                (_, Some((i, at))) if at <= t => {
                    let (node, token, _) = self.timers.swap_remove(i);
                    self.input(node, at, Input::Timer { token });
                }
                _ => break,
            }
        }
        self.now = self.now.max(t);
    }

    /// Injects `n` packets of the flows, `TEA_GAP_NS` apart, running the
    /// loop as it goes; returns `n`.
    pub fn push(&mut self, n: u64) -> u64 {
        for _ in 0..n {
            let t = self.now + TEA_GAP_NS;
            self.run_until(t);
            let mut buf = self.pool.pop().unwrap_or_default();
            buf.clear();
            buf.extend_from_slice(&self.templates[self.next]);
            self.next = (self.next + 1) % self.templates.len();
            self.injected += 1;
            self.input(
                0,
                t,
                Input::Frame {
                    port: TEA_INSIDE,
                    frame: buf,
                },
            );
        }
        n
    }

    /// Lets the packets in flight finish.
    pub fn settle(&mut self) {
        let t = self.now + 1_000_000;
        self.run_until(t);
    }

    /// Checks that the packets took the DRAM path and came back: no SRAM
    /// hit, and at most 1% not forwarded.
    pub fn check(&self) -> anyhow::Result<String> {
        let s = self.sw.program().dp_stats();
        ensure!(
            s.sram_hits == 0,
            "TEA: {} SRAM hits with the cache off",
            s.sram_hits
        );
        ensure!(
            self.forwarded * 100 >= self.injected * 99,
            "TEA: {} of {} packets forwarded ({s:?})",
            self.forwarded,
            self.injected
        );
        Ok(format!(
            "{} packets in, {} translated out, {} DRAM lookups, {} responses",
            self.injected, self.forwarded, s.dram_lookups, s.responses
        ))
    }
}

/// `tea-lookup`: the DRAM round trip per packet against the plain NAT.
pub fn tea_lookup(ctx: &Ctx) -> anyhow::Result<Measured> {
    let (n, warm) = sizes(ctx);
    // A DRAM round trip costs several times a NAT packet: fewer of them.
    let n = n / 5;
    let mut tea = TeaNet::new().context("TEA set-up")?;
    let templates: Vec<Vec<u8>> = (0..TEA_FLOWS).map(udp_frame).collect();
    let mut nat = plain_nat(&templates, TEA_INSIDE, TEA_OUTSIDE)?;
    tea.push(warm / 5);
    nat.push(warm);
    let (mut samples, mut base) = (Vec::new(), Vec::new());
    for _ in 0..ctx.runs {
        samples.push(timed_rate(|| tea.push(n)));
        base.push(timed_rate(|| nat.push(n)));
    }
    tea.settle();
    let checked = tea.check()?;
    check_nat(&mut nat, u64::from(TEA_FLOWS))?;
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
