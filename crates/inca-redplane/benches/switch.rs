//! Per-packet cost of the RedPlane NAT on its read path (lease valid, no
//! write outstanding) against the plain inca-apps NAT, side by side in one
//! run, on the `tofino` profile with 1,024 flows of 64-byte TCP frames 10 ns
//! apart (as `inca-apps/benches/nat_fast_path.rs`). The RedPlane flows get
//! their leases from a store played by the benchmark during warm-up; the
//! lease is made long (100 s) so the measured packets all take the read
//! path without renewals. Medians: target/criterion/nat_read_path/*.

use std::net::Ipv4Addr;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use inca_apps::nat::Nat;
use inca_redplane::apps::nat::RpNat;
use inca_redplane::switch::{RedPlane, RedPlaneConfig, Route};
use inca_switch::device::{device_rng, SECONDS};
use inca_switch::harness::Harness;
use inca_switch::{Device, Input, Output, Profile, Program, Switch};
use inca_wire::redplane::{build_ack_frame, parse_udp_frame, AckRepr, AckType, Request};
use inca_wire::{build_tcp_frame, Endpoints, TcpFlags, TcpRepr};

const FLOWS: u16 = 1024;
const GAP_NS: u64 = 10;
const BATCH: u64 = 10_000;

fn frame(sport: u16) -> Vec<u8> {
    let ep = Endpoints::new(
        [2, 0, 0, 0, 0, 1],
        Ipv4Addr::new(10, 0, 0, 5),
        [2, 0, 0, 0, 0, 2],
        Ipv4Addr::new(203, 0, 113, 9),
    );
    let tcp = TcpRepr {
        src_port: sport,
        dst_port: 80,
        seq: 1,
        ack: 0,
        flags: TcpFlags::ACK,
        window: 1000,
        urgent: 0,
        options: &[],
        payload: &[0; 6],
    };
    build_tcp_frame(&ep, &tcp).unwrap()
}

/// The plain NAT with every flow installed through its control plane.
fn plain() -> (Switch<Nat>, u64) {
    let sw = Switch::new(Profile::tofino(), Nat::new(65_536, 0, [198, 51, 100, 1])).unwrap();
    let mut h = Harness::new(sw, 1);
    for f in 0..FLOWS {
        h.send(u64::from(f) * 1_000, 1, frame(10_000 + f));
    }
    h.advance_to(SECONDS);
    assert_eq!(h.transmit_count, u64::from(FLOWS), "every flow installed");
    let now = h.now();
    (h.device, now)
}

/// The RedPlane NAT with a lease for every flow, granted by NEW_ACKs the
/// benchmark sends as the store.
fn redplane() -> (Switch<RedPlane<RpNat>>, u64) {
    let cfg = RedPlaneConfig {
        routes: vec![Route {
            net: [0; 4],
            len: 0,
            port: 0,
        }],
        lease_period: 100 * SECONDS,
        renew_interval: 50 * SECONDS,
        slots: 65_536,
        ..RedPlaneConfig::default()
    };
    // Outbound to a fixed outside port, as the plain NAT's.
    let mut app = RpNat::new([198, 51, 100, 1], 1024, 64_512, 1);
    app.outside_port = Some(0);
    let sw = Switch::new(Profile::tofino(), RedPlane::new(app, cfg)).unwrap();
    let mut h = Harness::new(sw, 1);
    let mut t = 10_000_000;
    for f in 0..FLOWS {
        t += 1_000;
        h.send(t, 1, frame(10_000 + f));
    }
    h.advance_to(t + 100_000);
    let store = Endpoints::new(
        [3; 6],
        Ipv4Addr::new(10, 254, 0, 1),
        [4; 6],
        Ipv4Addr::new(10, 255, 0, 1),
    );
    for (i, tx) in h.take().into_iter().enumerate() {
        let info = parse_udp_frame(&tx.frame).unwrap();
        let r = Request::new_checked(info.payload, 6, 6).unwrap();
        let mut e = store;
        e.ident = info.ident;
        let port = 1024 + i as u16;
        let mut value = [198, 51, 100, 1, 0, 0];
        value[4..].copy_from_slice(&port.to_be_bytes());
        let ack = AckRepr {
            ack_type: AckType::LeaseNew,
            seq: 0,
            key: r.key(),
            value: &value,
            piggyback: r.piggyback(),
        };
        t += 2_000;
        h.send(t, 2, build_ack_frame(&e, 8001, &ack).unwrap());
    }
    h.advance_to(t + SECONDS);
    assert_eq!(
        h.device.program().keys(),
        usize::from(FLOWS),
        "every flow granted"
    );
    let now = h.now();
    (h.device, now)
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
            Output::Control(_) => {}
        }
    }
}

/// Runs batches of the flows' packets through `sw` from `now`.
fn run<P: Program>(
    c: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    name: &str,
    sw: &mut Switch<P>,
    mut now: u64,
) {
    let templates: Vec<Vec<u8>> = (0..FLOWS).map(|f| frame(10_000 + f)).collect();
    let mut rng = device_rng(1, 0);
    let mut out: Vec<Output> = Vec::with_capacity(64);
    let mut pool: Vec<Vec<u8>> = Vec::with_capacity(256);
    let mut timer: Option<u64> = None;
    c.bench_function(name, |b| {
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
                sw.handle(
                    now,
                    Input::Frame {
                        port: 1,
                        frame: buf,
                    },
                    &mut rng,
                    &mut out,
                );
                drain(&mut out, &mut timer, &mut pool);
            }
        })
    });
}

fn bench(c: &mut Criterion) {
    let (mut nat, t0) = plain();
    let (mut rp, t1) = redplane();
    let mut group = c.benchmark_group("nat_read_path");
    group.throughput(Throughput::Elements(BATCH));
    run(&mut group, "plain_nat", &mut nat, t0);
    run(&mut group, "redplane_nat", &mut rp, t1);
    group.finish();
    let s = rp.program().stats();
    assert_eq!(
        s.lease_new,
        u64::from(FLOWS),
        "the measured packets all took the read path"
    );
    assert_eq!((s.renewals, s.buf_reads), (0, 0));
    assert!(s.reads_forwarded > 0);
    assert_eq!(rp.stats().ports[0].tm_drops, 0);
    assert_eq!(nat.stats().punts, u64::from(FLOWS));
}

criterion_group!(benches, bench);
criterion_main!(benches);
