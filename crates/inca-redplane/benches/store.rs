//! RedPlane state store: replication requests per second per core, in
//! process (DESIGN.md performance budget: at least 1 M/s).
//!
//! - `chain_off`: LEASE_RENEW writes over 1,024 owned keys into one store
//!   device (one worker), 300 ns apart (above the 250 ns service time, so no
//!   queue builds up); each write is parsed, fenced, applied, committed and
//!   acked with its piggybacked 64-byte packet.
//! - `chain3`: the same writes into the head of a 3-node chain, the three
//!   devices driven by a minimal in-process event loop that routes frames by
//!   IPv4 destination with zero delay; each write costs the head, the middle
//!   and the tail (update, forward, ack) and the reply.
//!
//! Throughput is in client writes (elements) per second.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};
use std::net::Ipv4Addr;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use inca_redplane::store::{AppConfig, StoreConfig, StoreServer, WorkerConfig};
use inca_switch::device::{device_rng, Device, DeviceRng, Input, Nanos, Output};
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

/// A frame in flight: (time, order, destination node, frame).
type Event = Reverse<(Nanos, u64, usize, Vec<u8>)>;

/// Devices with their timers, frames routed by destination IP.
struct Net {
    nodes: Vec<(Ipv4Addr, StoreServer, DeviceRng)>,
    /// Pending timers: (node, token) → time; the heap may hold stale entries.
    timers: BTreeMap<(usize, u64), Nanos>,
    timer_heap: BinaryHeap<Reverse<(Nanos, usize, u64)>>,
    events: BinaryHeap<Event>,
    seq: u64,
    out: Vec<Output>,
    acks: u64,
}

impl Net {
    fn new(chain: bool) -> Self {
        let ips: Vec<Ipv4Addr> = if chain {
            CHAIN.to_vec()
        } else {
            vec![CHAIN[0]]
        };
        let mut n = Net {
            nodes: Vec::new(),
            timers: BTreeMap::new(),
            timer_heap: BinaryHeap::new(),
            events: BinaryHeap::new(),
            seq: 0,
            out: Vec::new(),
            acks: 0,
        };
        for (i, ip) in ips.into_iter().enumerate() {
            let s = StoreServer::new(cfg(ip, chain)).unwrap();
            n.nodes.push((ip, s, device_rng(1, i as u64)));
        }
        for i in 0..n.nodes.len() {
            let mut out = std::mem::take(&mut n.out);
            let (_, dev, rng) = &mut n.nodes[i];
            dev.start(0, rng, &mut out);
            n.collect(i, out);
        }
        n
    }

    fn collect(&mut self, i: usize, mut out: Vec<Output>) {
        for o in out.drain(..) {
            match o {
                Output::Transmit { at, frame, .. } => {
                    let dst = parse_udp_frame(&frame).map(|f| f.dst_ip).ok();
                    match self.nodes.iter().position(|n| Some(n.0) == dst) {
                        Some(j) => {
                            self.seq += 1;
                            self.events.push(Reverse((at, self.seq, j, frame)));
                        }
                        None => self.acks += 1,
                    }
                }
                Output::Timer { at, token } => {
                    self.timers.insert((i, token), at);
                    self.timer_heap.push(Reverse((at, i, token)));
                }
                Output::Control(_) | Output::Session { .. } => {}
            }
        }
        self.out = out;
    }

    fn input(&mut self, i: usize, now: Nanos, input: Input) {
        let mut out = std::mem::take(&mut self.out);
        let (_, dev, rng) = &mut self.nodes[i];
        dev.handle(now, input, rng, &mut out);
        self.collect(i, out);
    }

    /// Runs everything due up to `t` (frames and timers, in time order).
    fn run_until(&mut self, t: Nanos) {
        loop {
            let frame_at = self.events.peek().map(|Reverse(e)| e.0);
            // Drop stale heap entries (a timer set again replaces the old one).
            while let Some(&Reverse((at, i, tok))) = self.timer_heap.peek() {
                if self.timers.get(&(i, tok)) == Some(&at) {
                    break;
                }
                self.timer_heap.pop();
            }
            let timer = self.timer_heap.peek().map(|&Reverse(e)| e);
            match (frame_at, timer) {
                (_, Some((at, i, tok))) if at <= t && frame_at.is_none_or(|f| at <= f) => {
                    self.timer_heap.pop();
                    self.timers.remove(&(i, tok));
                    self.input(i, at, Input::Timer { token: tok });
                }
                (Some(at), _) if at <= t => {
                    let Reverse((at, _, j, frame)) = self.events.pop().unwrap();
                    self.input(j, at, Input::Frame { port: 0, frame });
                }
                _ => break,
            }
        }
    }
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
                    let mut net = Net::new(chain);
                    for k in 0..KEYS {
                        net.seq += 1;
                        net.events.push(Reverse((
                            1000,
                            net.seq,
                            0,
                            request(ReqType::LeaseNew, 0, k),
                        )));
                    }
                    net.run_until(10_000_000);
                    (net, writes.clone())
                },
                |(mut net, writes)| {
                    let start = 20_000_000;
                    for (i, w) in writes.into_iter().enumerate() {
                        let t = start + i as Nanos * GAP;
                        net.run_until(t);
                        net.input(0, t, Input::Frame { port: 0, frame: w });
                    }
                    net.run_until(start + u64::from(batch) * GAP + 5_000_000);
                    assert!(net.acks >= u64::from(KEYS + batch), "acks {}", net.acks);
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
