//! The TEA lookup path through the switch model, in process, on one core,
//! next to the plain inca-apps NAT (the SRAM-only baseline):
//!
//! - `tea_nat/sram_hit`: 512 flows whose translations are in the TEA cache;
//!   parse, sketch update (4 register arrays), stash and cache match, NAT
//!   rewrite, traffic manager, egress.
//! - `tea_nat/dram_request`: 512 preloaded flows, cache off; parse, sketch,
//!   SRAM miss, ServerResolver, flow control, MemResolver, PRE replication
//!   and the LookupRequestor building a WRITE ONLY and a READ REQUEST with
//!   ICRC. Responses are not fed back (the request path only), so the
//!   leak timeout `T_STALE` is 0 for the run: flow control admits every
//!   packet (and the meters are set far above the offered load).
//! - `nat/sram_only`: `inca_apps::nat::Nat` with the same flows installed.
//!
//! Throughput is in packets (elements) per second. The TEA switches are
//! first set up against two simulated DRAM servers (H4's `DramServer`),
//! shuttling frames between harnesses.

use std::net::Ipv4Addr;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use inca_apps::headers::parse;
use inca_apps::nat::Nat;
use inca_switch::device::device_rng;
use inca_switch::harness::Harness;
use inca_switch::{Device, Input, Output, Profile, Switch};
use inca_tea::nf::TeaNat;
use inca_tea::rig::{server_ip, server_mac};
use inca_tea::server::{DramServer, DramServerConfig};
use inca_tea::switch::{ServerSpec, TeaConfig, TeaSwitch};
use inca_wire::{build_udp_frame, Endpoints};

const FLOWS: u32 = 512;
const GAP_NS: u64 = 10;
type TeaSw = Switch<TeaSwitch<TeaNat>>;

fn frame(i: u32) -> Vec<u8> {
    let ep = Endpoints::new(
        [2, 0, 0, 0, 1, 1],
        Ipv4Addr::new(10, 1, (i >> 8) as u8, i as u8),
        [2, 0, 0, 0, 1, 2],
        Ipv4Addr::new(8, 8, 8, 8),
    );
    build_udp_frame(&ep, 1000 + i as u16, 53, &[0; 18], true).unwrap()
}

fn entries() -> Vec<(Vec<u8>, Vec<u8>)> {
    (0..FLOWS)
        .flat_map(|i| {
            let p = parse(&frame(i)).unwrap();
            TeaNat::entries(&p, [198, 51, 100, 1], 2000 + i as u16).to_vec()
        })
        .collect()
}

/// A TEA NAT switch set up against two DRAM servers; `warm` flows are sent
/// once each (with the servers answering) before it is handed back.
fn tea_switch(tweak: impl Fn(&mut TeaConfig), warm: bool) -> (TeaSw, u64) {
    let specs = (0..2)
        .map(|i| ServerSpec {
            port: 2 + i as u16,
            mac: server_mac(i),
            ip: server_ip(i),
        })
        .collect();
    let mut cfg = TeaConfig::new(13, 6, 12, specs);
    tweak(&mut cfg);
    let prog = TeaSwitch::new(TeaNat::new(1, 0, [198, 51, 100, 1], 1 << 20), cfg.clone())
        .unwrap()
        .with_preload(entries());
    let mut sw = Harness::new(Switch::new(Profile::tofino(), prog).unwrap(), 1);
    let mut servers: Vec<Harness<DramServer>> = (0..2)
        .map(|i| {
            let c = DramServerConfig {
                server_id: i as u16,
                ip: server_ip(i),
                mac: server_mac(i),
                dram_offered: 1 << 30,
                controller_ip: cfg.switch_ip,
                controller_mac: cfg.switch_mac,
                ..DramServerConfig::default()
            };
            Harness::new(DramServer::new(c).unwrap(), 2 + i as u64)
        })
        .collect();
    let mut t = 0;
    let mut next_flow = 0;
    while t < 200_000_000 {
        t += 500;
        sw.advance_to(t);
        for s in servers.iter_mut() {
            s.advance_to(t);
        }
        for f in sw.take() {
            if let Some(s) = f
                .port
                .checked_sub(2)
                .and_then(|i| servers.get_mut(usize::from(i)))
            {
                s.send(t, 0, f.frame);
            }
        }
        for (i, s) in servers.iter_mut().enumerate() {
            for f in s.take() {
                sw.send(t, 2 + i as u16, f.frame);
            }
        }
        if sw.device.program().is_ready() && warm && next_flow < FLOWS && t % 5_000 == 0 {
            sw.send(t, 0, frame(next_flow));
            next_flow += 1;
        }
        if sw.device.program().is_ready() && (!warm || next_flow == FLOWS) && t > 150_000_000 {
            break;
        }
    }
    assert!(sw.device.program().is_ready(), "TEA switch set up");
    (sw.device, t)
}

fn run<D: Device>(c: &mut Criterion, group: &str, name: &str, sw: &mut D, mut now: u64, port: u16) {
    let templates: Vec<Vec<u8>> = (0..FLOWS).map(frame).collect();
    let mut rng = device_rng(1, 0);
    let mut out: Vec<Output> = Vec::with_capacity(64);
    let mut pool: Vec<Vec<u8>> = Vec::with_capacity(256);
    let mut timer: Option<u64> = None;
    const BATCH: u64 = 10_000;
    let mut g = c.benchmark_group(group);
    g.throughput(Throughput::Elements(BATCH));
    g.bench_function(name, |b| {
        b.iter(|| {
            for i in 0..BATCH {
                now += GAP_NS;
                while let Some(t) = timer.filter(|&t| t <= now) {
                    timer = None;
                    sw.handle(t, Input::Timer { token: 0 }, &mut rng, &mut out);
                    drain(&mut out, &mut timer, &mut pool);
                }
                let mut buf = pool.pop().unwrap_or_default();
                buf.clear();
                buf.extend_from_slice(&templates[(i % u64::from(FLOWS)) as usize]);
                sw.handle(now, Input::Frame { port, frame: buf }, &mut rng, &mut out);
                drain(&mut out, &mut timer, &mut pool);
            }
        })
    });
    g.finish();
}

fn drain(out: &mut Vec<Output>, timer: &mut Option<u64>, pool: &mut Vec<Vec<u8>>) {
    for o in out.drain(..) {
        match o {
            Output::Timer { at, .. } => *timer = Some(at),
            Output::Transmit { frame, .. } => {
                if pool.len() < 256 {
                    pool.push(frame);
                }
            }
            Output::Control(_) | Output::Session { .. } => {}
        }
    }
}

fn bench(c: &mut Criterion) {
    // SRAM hits: every flow promoted to the cache on its first packet.
    let (mut sw, now) = tea_switch(|c| c.t_hot = 1, true);
    let cached = sw.program().cache_entries(sw.objects()).len();
    assert_eq!(cached, FLOWS as usize, "every flow cached before the run");
    let dram_before = sw.program().dp_stats().dram_lookups;
    run(c, "tea_nat", "sram_hit", &mut sw, now, 0);
    let s = sw.program().dp_stats();
    assert_eq!(
        s.dram_lookups, dram_before,
        "the measured packets all hit SRAM"
    );

    // DRAM requests: cache off, flow control out of the way.
    let (mut sw, now) = tea_switch(
        |c| {
            c.cache_cap = 0;
            // Every full QP counts as leaked at once, and the meters never
            // turn RED: no packet is refused.
            c.t_stale = 0;
            c.server_link_bps = u64::MAX / 16;
        },
        false,
    );
    run(c, "tea_nat", "dram_request", &mut sw, now, 0);
    let s = sw.program().dp_stats();
    assert!(s.dram_lookups > 0 && s.sram_hits == 0, "{s:?}");
    assert!(s.drops.iter().sum::<u64>() < s.dram_lookups / 100, "{s:?}");

    // The plain NAT with the same flows installed.
    let mut h = Harness::new(
        Switch::new(Profile::tofino(), Nat::new(65_536, 1, [198, 51, 100, 1])).unwrap(),
        1,
    );
    for i in 0..FLOWS {
        h.send(u64::from(i) * 1_000, 0, frame(i));
    }
    h.advance_to(1_000_000_000);
    let now = h.now();
    run(c, "nat", "sram_only", &mut h.device, now, 0);
    assert_eq!(h.device.stats().punts, u64::from(FLOWS));
}

criterion_group!(benches, bench);
criterion_main!(benches);
