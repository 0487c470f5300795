//! Live forwarding over UDP on loopback, frames per second, as
//! crates/inca-live/benches/forwarding.rs:
//!
//! - the inca path: a sender runner with a `Host` generating 66-byte UDP
//!   frames faster than they can go (3 M/s offered), and a receiver runner
//!   with a sink `Host` counting them, each on its own thread (as two
//!   processes would be), linked by a `UdpPort` pair;
//! - the baseline: the same two ports with no runner and no device: one
//!   thread sends the same pre-built frame in batches of [`BATCH`], the
//!   other receives and counts: the machine's limit for the same sockets
//!   and the same batching.
//!
//! `live` runs both with UDP GSO/GRO (the ports' default), `live-mmsg` both
//! with `sendmmsg`/`recvmmsg` batching only. Each run is a 0.2 s warm-up
//! and 1 s of counting (`--quick`: 0.2 s), the two alternating.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use inca_live::port::{Port, BATCH};
use inca_live::runner::{Runner, RunnerConfig};
use inca_live::udp::UdpPort;
use inca_sim::nodes::host::{Host, HostConfig, SizeSpec, UdpConfig, WorkloadConfig};

use super::{Baseline, Ctx, Measured};
use inca_system::bench::count_over;

const WARMUP: Duration = Duration::from_millis(200);
/// The generator's frame size (raised to 66 B, the smallest with a probe
/// header).
const FRAME: u64 = 64;
/// Offered load: above what the path carries, so the sender is never idle.
const PPS: u64 = 3_000_000;

fn secs(ctx: &Ctx) -> Duration {
    Duration::from_secs_f64(if ctx.quick { 0.2 } else { 1.0 })
}

fn ports(offload: bool) -> anyhow::Result<(UdpPort, UdpPort)> {
    let (mut a, mut b) = UdpPort::loopback_pair().context("loopback sockets")?;
    a.set_offload(offload);
    b.set_offload(offload);
    Ok((a, b))
}

/// Frames per second from a sender runner to a sink runner.
fn inca_once(measure: Duration, offload: bool) -> anyhow::Result<(f64, String)> {
    let (pa, pb) = ports(offload)?;
    let mac_a = [2, 0, 0, 0, 0, 1];
    let mac_b = [2, 0, 0, 0, 0, 2];
    let mut cfg = HostConfig::new("10.0.0.1".parse()?);
    cfg.workloads.push(WorkloadConfig::Udp(UdpConfig {
        dst: Some("10.0.0.2:5000".parse()?),
        pps: Some(PPS),
        size: Some(SizeSpec::from(FRAME)),
        ..UdpConfig::default()
    }));
    let sender = Host::new(cfg, mac_a, mac_b, 100_000_000_000)
        .map_err(|e| anyhow::anyhow!("sender host: {e}"))?;
    let sink = Host::new(
        HostConfig::new("10.0.0.2".parse()?),
        mac_b,
        mac_a,
        100_000_000_000,
    )
    .map_err(|e| anyhow::anyhow!("sink host: {e}"))?;
    let config = RunnerConfig {
        busy_poll: true,
        ..RunnerConfig::default()
    };
    let stop = Arc::new(AtomicBool::new(false));
    let stop_tx = stop.clone();
    let tx = std::thread::spawn(move || {
        let ports: Vec<Box<dyn Port>> = vec![Box::new(pa)];
        let mut r = Runner::new(sender, ports, 1, config);
        let res = r.run(&stop_tx);
        (res, r.ports()[0].stats())
    });
    let mut r = Runner::new(sink, vec![Box::new(pb) as Box<dyn Port>], 2, config);
    let mut err = None;
    let rate = count_over(WARMUP, measure, || {
        if let Err(e) = r.step() {
            err.get_or_insert(e);
        }
        r.device().stats().rx_packets
    });
    stop.store(true, Ordering::Relaxed);
    let (res, tx_stats) = tx
        .join()
        .map_err(|_| anyhow::anyhow!("sender thread panicked"))?;
    res.context("sender runner")?;
    if let Some(e) = err {
        return Err(e).context("sink runner");
    }
    let rx_stats = r.ports()[0].stats();
    Ok((
        rate,
        format!(
            "sent {}, {} dropped at send, received {}, {} malformed",
            tx_stats.tx_frames, tx_stats.tx_dropped, rx_stats.rx_frames, rx_stats.rx_malformed
        ),
    ))
}

/// Frames per second between the two bare ports.
fn ports_once(measure: Duration, offload: bool) -> anyhow::Result<f64> {
    let (mut pa, mut pb) = ports(offload)?;
    // The same 66-byte frame the host sends (content does not matter to
    // the sockets).
    let frame = vec![0x5a_u8; FRAME as usize + 2];
    let stop = Arc::new(AtomicBool::new(false));
    let stop_tx = stop.clone();
    let tx = std::thread::spawn(move || -> std::io::Result<()> {
        let mut batch: Vec<Vec<u8>> = Vec::with_capacity(BATCH);
        while !stop_tx.load(Ordering::Relaxed) {
            batch.extend((0..BATCH).map(|_| frame.clone()));
            pa.send_batch(&mut batch)?;
        }
        Ok(())
    });
    let mut rx: Vec<Vec<u8>> = Vec::with_capacity(BATCH);
    let mut total = 0u64;
    let mut err = None;
    let rate = count_over(WARMUP, measure, || {
        match pb.recv_batch(&mut rx, BATCH) {
            Ok(n) => total += n as u64,
            Err(e) => {
                err.get_or_insert(e);
            }
        }
        rx.clear();
        total
    });
    stop.store(true, Ordering::Relaxed);
    tx.join()
        .map_err(|_| anyhow::anyhow!("sender thread panicked"))?
        .context("baseline sender")?;
    if let Some(e) = err {
        return Err(e).context("baseline receiver");
    }
    Ok(rate)
}

fn forwarding(ctx: &Ctx, offload: bool) -> anyhow::Result<Measured> {
    let secs = secs(ctx);
    let (mut samples, mut base) = (Vec::new(), Vec::new());
    let mut last = String::new();
    for _ in 0..ctx.runs {
        base.push(ports_once(secs, offload)?);
        let (rate, note) = inca_once(secs, offload)?;
        samples.push(rate);
        last = note;
    }
    let batching = if offload {
        "UDP GSO/GRO"
    } else {
        "sendmmsg/recvmmsg only"
    };
    Ok(Measured {
        samples,
        baseline: Baseline::Measured {
            what: format!(
                "the same UdpPort pair, no runner or device ({batching}, batches of {BATCH})"
            ),
            samples: base,
        },
        notes: vec![format!(
            "{:.1} s per run, 66-byte frames offered at {} M/s; last run: {last}",
            secs.as_secs_f64(),
            PPS / 1_000_000
        )],
    })
}

/// `live`: with the ports' default offload.
pub fn offload(ctx: &Ctx) -> anyhow::Result<Measured> {
    forwarding(ctx, true)
}

/// `live-mmsg`: batching only.
pub fn mmsg(ctx: &Ctx) -> anyhow::Result<Measured> {
    forwarding(ctx, false)
}
