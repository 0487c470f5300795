//! RedPlane state store: replication requests per second per core, in
//! process (DESIGN.md performance budget: at least 1 M/s).
//!
//! - `chain_off`: LEASE_RENEW writes over 1,024 owned keys into one store
//!   device (one worker), 300 ns apart (above the 250 ns service time, so no
//!   queue builds up); each write is parsed, fenced, applied, committed and
//!   acked with its piggybacked 64-byte packet.
//! - `chain3`: the same writes into the head of a 3-node chain, the three
//!   devices behind a zero-latency router (inca-sim's, forwarding by IPv4
//!   destination) in one test fabric; each write costs the head, the
//!   middle and the tail (update, forward, ack), the reply, and the
//!   router's hops.
//!
//! Throughput is in client writes (elements) per second.

use std::net::Ipv4Addr;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use inca_redplane::store::{AppConfig, StoreConfig, StoreServer, WorkerConfig};
use inca_sim::nodes::router::{Router, RouterConfig};
use inca_switch::device::{Nanos, PortId};
use inca_switch::fabric::{Fabric, Wire};
use inca_wire::redplane::*;

const KEYS: u32 = 1024;
const GAP: Nanos = 300;
const SWITCH: Ipv4Addr = Ipv4Addr::new(10, 1, 0, 1);
const CHAIN: [Ipv4Addr; 3] = [
    Ipv4Addr::new(10, 9, 0, 1),
    Ipv4Addr::new(10, 9, 0, 2),
    Ipv4Addr::new(10, 9, 0, 3),
];

fn cfg(ip: Ipv4Addr, chain: bool) -> StoreConfig {
    let mut c = StoreConfig::new(
        ip,
        vec![WorkerConfig {
            worker: 1,
            app: AppConfig::Kv,
            shard: 0,
            shards: 1,
        }],
    );
    if chain {
        c.chain = CHAIN.to_vec();
    }
    c
}

fn request(t: ReqType, seq: u16, key: u32) -> Vec<u8> {
    let ep = rp_endpoints([2, 0, 0, 0, 0, 1], SWITCH, [2, 0, 0, 0, 0, 9], CHAIN[0], 7);
    let r = RequestRepr {
        req_type: t,
        seq,
        key: &key.to_be_bytes(),
        value: &seq.to_be_bytes().repeat(2),
        piggyback: &[0x45; 64],
    };
    build_request_frame(&ep, 8001, &r).unwrap()
}

/// The port of node 0 towards the switch; behind a router, store i is on
/// its port 1 + i.
const CLIENT_PORT: PortId = 0;

/// The store alone (`chain_off`), or the chain behind a router (inca-sim's,
/// zero latency) that forwards by IPv4 destination, in one test fabric:
/// node 0 the router, node 1 + i store i. Requests go in on node 0's
/// client port; acks leave the fabric there.
fn net(chain: bool) -> Fabric {
    let mut f = Fabric::new(1);
    if !chain {
        f.add_any(StoreServer::new(cfg(CHAIN[0], false)).unwrap());
        f.start_all();
        return f;
    }
    let ips = CHAIN.to_vec();
    let ports = ips.len() + 1;
    let mut router = Router::new(
        RouterConfig {
            latency: 0,
            ..RouterConfig::default()
        },
        vec![[2, 0, 0, 0, 0, 0xfe]; ports],
        vec![[2, 0, 0, 0, 0, 9]; ports],
    );
    router
        .add_route(SWITCH.octets(), 32, vec![CLIENT_PORT])
        .unwrap();
    for (i, ip) in ips.iter().enumerate() {
        router
            .add_route(ip.octets(), 32, vec![1 + i as PortId])
            .unwrap();
    }
    let r = f.add_any(router);
    for (i, ip) in ips.into_iter().enumerate() {
        let s = f.add_any(StoreServer::new(cfg(ip, chain)).unwrap());
        f.connect((r, 1 + i as PortId), (s, 0), Wire::default())
            .unwrap();
    }
    f.start_all();
    f
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("redplane_store");
    g.sample_size(10);
    g.measurement_time(std::time::Duration::from_secs(3));
    for (name, chain) in [("chain_off", false), ("chain3", true)] {
        // Requests are pre-built: the figure is the store's cost.
        let batch = 4096u32;
        let writes: Vec<Vec<u8>> = (0..batch)
            .map(|i| request(ReqType::LeaseRenew, (i / KEYS + 1) as u16, i % KEYS))
            .collect();
        g.throughput(Throughput::Elements(u64::from(batch)));
        g.bench_function(name, |b| {
            b.iter_batched(
                || {
                    let mut net = net(chain);
                    for k in 0..KEYS {
                        net.inject(1000, 0, CLIENT_PORT, request(ReqType::LeaseNew, 0, k));
                    }
                    net.run_until(10_000_000);
                    (net, writes.clone())
                },
                |(mut net, writes)| {
                    let start = 20_000_000;
                    for (i, w) in writes.into_iter().enumerate() {
                        net.inject(start + i as Nanos * GAP, 0, CLIENT_PORT, w);
                    }
                    net.run_until(start + u64::from(batch) * GAP + 5_000_000);
                    let acks = net.left_on(0, CLIENT_PORT);
                    assert!(acks >= u64::from(KEYS + batch), "acks {acks}");
                    net
                },
                criterion::BatchSize::LargeInput,
            )
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
