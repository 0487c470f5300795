//! NAT fast path through the switch model, in process, on one core.
//!
//! A NAT on the `tofino` profile with 1,024 installed flows; each iteration
//! pushes packets of those flows (64-byte TCP frames, 10 ns apart, below the
//! 100 Gbps line rate of the outside port) through parse, ingress (exact
//! match, rewrite, incremental checksums), the traffic manager and egress.
//! Frame buffers are recycled as a real driver's would be, so the figure is
//! the model's cost per packet, not the allocator's. Throughput is reported
//! in packets (elements) per second.

use std::net::Ipv4Addr;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use inca_apps::nat::Nat;
use inca_switch::device::device_rng;
use inca_switch::harness::Harness;
use inca_switch::{Device, Input, Output, Profile, Switch};
use inca_wire::{build_tcp_frame, Endpoints, TcpFlags, TcpRepr};

const FLOWS: u16 = 1024;
const GAP_NS: u64 = 10;

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

/// A NAT switch with every flow installed, and the time it got there.
fn warmed_switch() -> (Switch<Nat>, u64) {
    let sw = Switch::new(Profile::tofino(), Nat::new(65_536, 0, [198, 51, 100, 1])).unwrap();
    let mut h = Harness::new(sw, 1);
    for f in 0..FLOWS {
        h.send(u64::from(f) * 1_000, 1, frame(10_000 + f));
    }
    h.advance_to(1_000_000_000);
    assert_eq!(h.transmit_count, u64::from(FLOWS), "every flow installed");
    let now = h.now();
    (h.device, now)
}

fn bench(c: &mut Criterion) {
    let templates: Vec<Vec<u8>> = (0..FLOWS).map(|f| frame(10_000 + f)).collect();
    let (mut sw, mut now) = warmed_switch();
    let mut rng = device_rng(1, 0);
    let mut out: Vec<Output> = Vec::with_capacity(64);
    let mut pool: Vec<Vec<u8>> = Vec::with_capacity(256);
    let mut timer: Option<u64> = None;
    let mut sent: u64 = 0;
    const BATCH: u64 = 10_000;

    let mut group = c.benchmark_group("nat_fast_path");
    group.throughput(Throughput::Elements(BATCH));
    group.bench_function("tofino_1024_flows", |b| {
        b.iter(|| {
            for i in 0..BATCH {
                now += GAP_NS;
                while let Some(t) = timer.filter(|&t| t <= now) {
                    timer = None;
                    sw.handle(t, Input::Timer { token: 0 }, &mut rng, &mut out);
                    drain(&mut out, &mut timer, &mut pool, &mut sent);
                }
                let template = &templates[(i % u64::from(FLOWS)) as usize];
                let mut buf = pool.pop().unwrap_or_default();
                buf.clear();
                buf.extend_from_slice(template);
                sw.handle(
                    now,
                    Input::Frame {
                        port: 1,
                        frame: buf,
                    },
                    &mut rng,
                    &mut out,
                );
                drain(&mut out, &mut timer, &mut pool, &mut sent);
            }
        })
    });
    group.finish();
    let s = sw.stats();
    assert_eq!(
        s.punts,
        u64::from(FLOWS),
        "the measured packets all took the fast path"
    );
    assert_eq!(s.ports[0].tm_drops, 0);
    assert!(sent > 0);
}

fn drain(out: &mut Vec<Output>, timer: &mut Option<u64>, pool: &mut Vec<Vec<u8>>, sent: &mut u64) {
    for o in out.drain(..) {
        match o {
            Output::Timer { at, .. } => *timer = Some(at),
            Output::Transmit { frame, .. } => {
                *sent += 1;
                if pool.len() < 256 {
                    pool.push(frame);
                }
            }
            Output::Control(_) => {}
        }
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
