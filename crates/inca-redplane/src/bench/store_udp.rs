//! `store-udp`: the RedPlane state store over UDP on loopback, in requests
//! per second: the store of [`super::store`] in a live runner thread on a
//! `UdpPort` (busy polling), and a client thread on the other end of the
//! link keeping [`WINDOW`] writes outstanding (4 clients × pipeline 64),
//! sent in batches of 64 (`sendmmsg`, UDP GSO) and acked through
//! `recvmmsg`/GRO. Baseline: redis-server with `redis-benchmark -t set -c
//! 4 -P 64 -d 64 -r 1024` on loopback, started by the benchmark
//! ([`super::redis`]).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{ensure, Context};
use inca_live::port::{Port, BATCH};
use inca_live::runner::{Runner, RunnerConfig};
use inca_live::udp::UdpPort;
use inca_system::bench::{count_over, Baseline, Ctx, Measured};
use inca_wire::redplane::{seq_next, ReqType};

use super::redis;
use super::store::{config, request, KEYS, PIGGYBACK};
use crate::store::StoreServer;

/// Concurrent clients of the baseline; the UDP client keeps as many
/// pipelines' worth outstanding.
pub const CLIENTS: usize = 4;
/// Requests per pipeline (and per send batch).
pub const PIPELINE: usize = 64;
/// Writes the UDP client keeps outstanding.
pub const WINDOW: usize = CLIENTS * PIPELINE;

/// What the UDP client saw in one run.
struct UdpSample {
    rate: f64,
    acks: u64,
    lost: u64,
    /// Where lost requests went, for the notes.
    detail: String,
}

/// How long the client waits for a batch's acks before it counts the
/// rest as lost and reopens the window: [our choice] 1 ms, ten times the
/// round trip on an idle machine; acks that come later still count.
const ACK_TIMEOUT: Duration = Duration::from_millis(1);

/// The client end of the link: keeps `WINDOW` writes outstanding.
struct Client {
    port: UdpPort,
    seq: Vec<u16>,
    next_key: u32,
    /// Batches in flight, oldest first: (sent at, writes not yet acked).
    /// Acks are matched to the oldest batch (the store answers in order).
    in_flight: VecDeque<(Instant, usize)>,
    outstanding: usize,
    acks: u64,
    /// Writes given up after `ACK_TIMEOUT` (request or ack lost).
    lost: u64,
    tx: Vec<Vec<u8>>,
    rx: Vec<Vec<u8>>,
}

impl Client {
    fn new(port: UdpPort) -> Client {
        Client {
            port,
            seq: vec![0; KEYS as usize],
            next_key: 0,
            in_flight: VecDeque::with_capacity(WINDOW / PIPELINE + 1),
            outstanding: 0,
            acks: 0,
            lost: 0,
            tx: Vec::with_capacity(PIPELINE),
            rx: Vec::with_capacity(BATCH),
        }
    }

    /// LEASE_NEW for every key, a batch at a time, each batch acked before
    /// the next (at most 5 s in all).
    fn lease_all(&mut self) -> anyhow::Result<()> {
        let start = Instant::now();
        let (mut sent, mut got) = (0, 0);
        for k in 0..KEYS {
            self.tx.push(request(ReqType::LeaseNew, 0, k));
            if self.tx.len() == PIPELINE || k + 1 == KEYS {
                sent += self.tx.len();
                self.port.send_batch(&mut self.tx)?;
                while got < sent {
                    got += self.recv()?;
                    ensure!(
                        start.elapsed() < Duration::from_secs(5),
                        "{got} of {sent} NEW_ACKs from the store after 5 s"
                    );
                }
            }
        }
        Ok(())
    }

    fn recv(&mut self) -> anyhow::Result<usize> {
        let n = self.port.recv_batch(&mut self.rx, BATCH)?;
        self.rx.clear();
        Ok(n)
    }

    /// One turn: fill the window, take in acks, give up on old batches;
    /// returns acks so far.
    fn step(&mut self) -> anyhow::Result<u64> {
        while self.outstanding + PIPELINE <= WINDOW {
            for _ in 0..PIPELINE {
                let k = self.next_key;
                self.next_key = (k + 1) % KEYS;
                let s = seq_next(self.seq[k as usize]);
                self.seq[k as usize] = s;
                self.tx.push(request(ReqType::LeaseRenew, s, k));
            }
            self.port.send_batch(&mut self.tx)?;
            self.outstanding += PIPELINE;
            self.in_flight.push_back((Instant::now(), PIPELINE));
        }
        let mut n = self.recv()?;
        self.acks += n as u64;
        while n > 0 {
            let Some(front) = self.in_flight.front_mut() else {
                break;
            };
            let take = n.min(front.1);
            front.1 -= take;
            n -= take;
            self.outstanding -= take;
            if front.1 == 0 {
                self.in_flight.pop_front();
            }
        }
        while let Some(&(at, left)) = self.in_flight.front() {
            if at.elapsed() < ACK_TIMEOUT {
                break;
            }
            self.in_flight.pop_front();
            self.outstanding -= left;
            self.lost += left as u64;
        }
        Ok(self.acks)
    }
}

fn udp_once(measure: Duration) -> anyhow::Result<UdpSample> {
    let (client_port, store_port) = UdpPort::loopback_pair().context("loopback sockets")?;

    let stop = Arc::new(AtomicBool::new(false));
    let stop_store = stop.clone();
    type StoreEnd = (crate::store::Stats, inca_live::port::PortStats, u64);
    let server = std::thread::spawn(move || -> anyhow::Result<StoreEnd> {
        // [our choice] 1 ns of modelled service time: the figure is the
        // real process's cost, not the model's capacity (250 ns, 4 M/s).
        // Built here: a store holds a non-Send observer slot.
        let store = StoreServer::new(config(1)).map_err(|e| anyhow::anyhow!("store: {e}"))?;
        let ports: Vec<Box<dyn Port>> = vec![Box::new(store_port)];
        let config = RunnerConfig {
            busy_poll: true,
            ..RunnerConfig::default()
        };
        let mut r = Runner::new(store, ports, 1, config);
        r.run(&stop_store)?;
        Ok((
            *r.device().stats(),
            r.ports()[0].stats(),
            r.stats().delayed_drops,
        ))
    });
    let mut client = Client::new(client_port);
    let result = client.lease_all().and_then(|()| {
        let mut err = None;
        let rate = count_over(Duration::from_millis(200), measure, || {
            match client.step() {
                Ok(a) => a,
                Err(e) => {
                    err.get_or_insert(e);
                    client.acks
                }
            }
        });
        err.map_or(Ok(rate), Err)
    });
    stop.store(true, Ordering::Relaxed);
    let (stats, port, delayed_drops) = server
        .join()
        .map_err(|_| anyhow::anyhow!("store thread panicked"))??;
    let cp = client.port.stats();
    let detail = format!(
        "client sent {} ({} dropped at send), got {}; store got {} ({} malformed), {} writes, {} acks, {} queue drops, {} held back, sent {} ({} dropped at send)",
        cp.tx_frames,
        cp.tx_dropped,
        cp.rx_frames,
        port.rx_frames,
        port.rx_malformed,
        stats.rx_write,
        stats.tx_renew_ack,
        stats.queue_drops,
        delayed_drops,
        port.tx_frames,
        port.tx_dropped
    );
    let rate = result?;
    ensure!(
        stats.fenced_or_not_owner == 0,
        "store fenced {} writes",
        stats.fenced_or_not_owner
    );
    Ok(UdpSample {
        rate,
        acks: client.acks,
        lost: client.lost,
        detail,
    })
}

/// `store-udp`: writes per second over UDP, against redis SET.
pub fn over_udp(ctx: &Ctx) -> anyhow::Result<Measured> {
    let secs = Duration::from_secs_f64(if ctx.quick { 0.2 } else { 1.0 });
    let redis_n = ctx.size(1_000_000, 100_000);
    let mut server = redis::Server::start();
    let (mut samples, mut base) = (Vec::new(), Vec::new());
    let (mut acks, mut lost) = (0, 0);
    let mut detail = String::new();
    let mut missing: Option<String> = None;
    for _ in 0..ctx.runs {
        let s = udp_once(secs)?;
        samples.push(s.rate);
        acks += s.acks;
        lost += s.lost;
        detail = s.detail;
        match server.as_mut() {
            Ok(srv) => match srv.benchmark_set(CLIENTS, PIPELINE, PIGGYBACK, KEYS, redis_n) {
                Ok(r) => base.push(r),
                Err(e) => missing = Some(format!("{e:#}")),
            },
            Err(e) => missing = Some(format!("{e:#}")),
        }
    }
    let what = format!(
        "redis-server + redis-benchmark -t set -c {CLIENTS} -P {PIPELINE} -d {PIGGYBACK} -r {KEYS}"
    );
    let baseline = match missing {
        Some(why) => Baseline::Missing { what, why },
        None => Baseline::Measured {
            what,
            samples: base,
        },
    };
    Ok(Measured {
        samples,
        baseline,
        notes: vec![format!(
            "{:.1} s per run; client keeps {WINDOW} writes outstanding ({CLIENTS} x pipeline {PIPELINE}), {PIGGYBACK}-byte piggyback; {acks} acks, {lost} writes without an ack after 1 ms (lost in a socket buffer; window reopened)",
            secs.as_secs_f64()
        ), format!("last run: {detail}")],
    })
}
