//! The RedPlane state store in requests per second, in process:
//!
//! - `store` (one core): LEASE_RENEW writes over 1,024 owned
//!   keys, each carrying a 64-byte piggybacked packet, fed as frames into
//!   one `StoreServer` (chain off, one worker) 300 ns apart in virtual time
//!   (above its 250 ns modelled service time, so no queue builds); each
//!   write is parsed, fenced, applied, committed and acked with its packet.
//!   As crates/inca-redplane/benches/store.rs `chain_off`. A fresh store
//!   per run, its leases granted before the clock starts.
//!
//! The UDP variant (`store-udp`) is [`super::store_udp`]; both send the
//! same [`request`] frames.

use std::net::Ipv4Addr;

use anyhow::ensure;
use inca_switch::device::{Nanos, SECONDS};
use inca_switch::fabric::Fabric;
use inca_system::bench::{profiled, timed_rate, Baseline, Ctx, Measured};
use inca_wire::redplane::{build_request_frame, rp_endpoints, seq_next, ReqType, RequestRepr};

use crate::store::{AppConfig, StoreConfig, StoreServer, WorkerConfig};

/// Keys the client owns.
pub const KEYS: u32 = 1024;
/// Bytes of the packet piggybacked on each write (the baseline's value
/// size).
pub const PIGGYBACK: usize = 64;
/// Virtual time between writes in process.
const GAP: Nanos = 300;
const SWITCH: Ipv4Addr = Ipv4Addr::new(10, 1, 0, 1);
const STORE: Ipv4Addr = Ipv4Addr::new(10, 9, 0, 1);
const WORKER_PORT: u16 = 8001;

pub(super) fn config(service_time: Nanos) -> StoreConfig {
    let mut c = StoreConfig::new(
        STORE,
        vec![WorkerConfig {
            worker: 1,
            app: AppConfig::Kv,
            shard: 0,
            shards: 1,
        }],
    );
    c.lease_period = 100 * SECONDS;
    c.service_time = service_time;
    c
}

/// A request frame from the switch for `key`.
pub fn request(t: ReqType, seq: u16, key: u32) -> Vec<u8> {
    let ep = rp_endpoints([2, 0, 0, 0, 0, 1], SWITCH, [2, 0, 0, 0, 0, 9], STORE, 7);
    let r = RequestRepr {
        req_type: t,
        seq,
        key: &key.to_be_bytes(),
        value: &seq.to_be_bytes().repeat(2),
        piggyback: &[0x45; PIGGYBACK],
    };
    build_request_frame(&ep, WORKER_PORT, &r).expect("a valid request frame")
}

/// A store with a lease on every key, ready for writes.
fn leased_store() -> anyhow::Result<Fabric<StoreServer>> {
    let store = StoreServer::new(config(250)).map_err(|e| anyhow::anyhow!("store: {e}"))?;
    let news = (0..KEYS)
        .map(|k| request(ReqType::LeaseNew, 0, k))
        .collect();
    let mut f = Fabric::new(1);
    let node = f.add(store);
    f.start(node);
    f.set_stream(node, 0, 1_000, news);
    f.push(u64::from(KEYS));
    f.run_until(f.now() + 10_000_000);
    let s = *f.device(node).stats();
    ensure!(
        s.tx_new_ack == u64::from(KEYS),
        "store set-up: {} NEW_ACKs",
        s.tx_new_ack
    );
    Ok(f)
}

/// `rounds` writes to every key, seq 1, 2, …
fn writes(rounds: u32) -> Vec<Vec<u8>> {
    let mut seq = 0;
    let mut v = Vec::with_capacity((rounds * KEYS) as usize);
    for _ in 0..rounds {
        seq = seq_next(seq);
        v.extend((0..KEYS).map(|k| request(ReqType::LeaseRenew, seq, k)));
    }
    v
}

/// Feeds `writes` into a freshly leased store; returns it.
fn run_writes(writes: &[Vec<u8>], rate_out: &mut f64) -> anyhow::Result<Fabric<StoreServer>> {
    let mut f = leased_store()?;
    f.set_stream(0, 0, GAP, writes.to_vec());
    let n = writes.len() as u64;
    *rate_out = timed_rate(|| f.push(n));
    f.run_until(f.now() + 10_000_000);
    Ok(f)
}

fn check_writes(f: &Fabric<StoreServer>, n: u64) -> anyhow::Result<()> {
    let s = f.device(0).stats();
    ensure!(s.rx_write == n, "store saw {} writes of {n}", s.rx_write);
    ensure!(
        s.tx_renew_ack == n && s.fenced_or_not_owner == 0 && s.queue_drops == 0,
        "store: {} acks, {} fenced, {} queue drops for {n} writes",
        s.tx_renew_ack,
        s.fenced_or_not_owner,
        s.queue_drops
    );
    Ok(())
}

/// `store`: writes per second in process.
pub fn in_process(ctx: &Ctx) -> anyhow::Result<Measured> {
    let rounds = ctx.size(256, 16) as u32;
    let w = writes(rounds);
    let n = w.len() as u64;
    let mut warm = 0.0;
    run_writes(&w[..w.len() / 4], &mut warm)?;
    let mut samples = Vec::new();
    for _ in 0..ctx.runs {
        let mut r = 0.0;
        let f = run_writes(&w, &mut r)?;
        check_writes(&f, n)?;
        samples.push(r);
    }
    Ok(Measured {
        samples,
        baseline: Baseline::None,
        notes: vec![format!(
            "{n} LEASE_RENEW writes per run over {KEYS} keys, chain off, one worker"
        )],
    })
}

/// `store --profile-iterations N`: N writes (rounded up to whole rounds
/// over the keys).
pub fn profile(n: u64) -> anyhow::Result<String> {
    let rounds = n.div_ceil(u64::from(KEYS)).max(1) as u32;
    let w = writes(rounds);
    let mut f = leased_store()?;
    f.set_stream(0, 0, GAP, w.clone());
    profiled(|| f.push(w.len() as u64));
    f.run_until(f.now() + 10_000_000);
    check_writes(&f, w.len() as u64)?;
    Ok(format!("{} writes into the store", w.len()))
}
