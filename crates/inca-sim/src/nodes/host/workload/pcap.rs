//! `pcap`: replays a capture with its original timing, sped up, looped.

use std::sync::Arc;

use inca_switch::device::{DeviceRng, Nanos};

use super::{BuildContext, HostInfo, StepContext, Workload};
use crate::nodes::host::schema::{invalid, parse_time_field, HostError, PcapConfig};

/// A `pcap` workload.
#[derive(Debug)]
pub(crate) struct PcapWorkload {
    frames: Arc<Vec<Vec<u8>>>,
    /// Send offset of each frame within a pass, already divided by speedup.
    offsets: Arc<Vec<Nanos>>,
    /// Length of one pass (scaled), > the last offset.
    period: Nanos,
    looped: bool,
    start: Nanos,
    stop: Option<Nanos>,
    count: Option<u64>,
    life: Option<Life>,
}

/// Where a replay is (one life).
#[derive(Debug)]
struct Life {
    origin: Nanos,
    pass: u64,
    idx: usize,
    sent: u64,
}

/// Builds a `pcap` workload (reads the whole capture now).
pub(crate) fn build_pcap(
    c: &PcapConfig,
    cx: &mut BuildContext<'_>,
) -> Result<Box<dyn Workload>, HostError> {
    let (field, name) = (cx.field.as_str(), cx.name.as_str());
    let notes: &mut Vec<String> = cx.notes;
    let frames = inca_wire::read_capture(&c.file).map_err(|source| HostError::Capture {
        field: format!("{field}.file"),
        path: c.file.clone(),
        source,
    })?;
    if frames.is_empty() {
        return Err(invalid(
            &format!("{field}.file"),
            format!("{:?} holds no frames", c.file),
        ));
    }
    let speedup = c.speedup.unwrap_or(1.0);
    if !(speedup.is_finite() && speedup > 0.0) {
        return Err(invalid(
            &format!("{field}.speedup"),
            format!("{speedup} is not > 0"),
        ));
    }
    let first = frames.iter().map(|f| f.0).min().unwrap_or(0);
    // Captures are normally in time order; one that is not is
    // replayed in file order with each frame no earlier than
    // the one before (times on a port never go backwards).
    let mut raw = Vec::with_capacity(frames.len());
    let mut last = 0;
    for (t, _) in &frames {
        last = last.max(t - first);
        raw.push(last);
    }
    let span = last;
    let n = frames.len() as u64;
    let gap = if n > 1 { span / (n - 1) } else { 0 }.max(1);
    let scale = |v: Nanos| (v as f64 / speedup) as Nanos;
    let offsets: Vec<Nanos> = raw.iter().map(|&v| scale(v)).collect();
    let last_off = offsets.last().copied().unwrap_or(0);
    let period = scale(span.saturating_add(gap)).max(last_off.saturating_add(1));
    let start = match &c.start {
        Some(q) => parse_time_field(q, &format!("{field}.start"))?,
        None => 0,
    };
    let stop = match &c.stop {
        Some(q) => Some(parse_time_field(q, &format!("{field}.stop"))?),
        None => None,
    };
    notes.push(format!(
        "{name}: replaying {} frames from {} at speedup {speedup}{}",
        frames.len(),
        c.file.display(),
        if c.looped { ", looped" } else { "" }
    ));
    Ok(Box::new(PcapWorkload {
        frames: Arc::new(frames.into_iter().map(|f| f.1).collect()),
        offsets: Arc::new(offsets),
        period,
        looped: c.looped,
        start,
        stop,
        count: c.count,
        life: None,
    }))
}

impl Workload for PcapWorkload {
    fn begin(&mut self, _host: &HostInfo, anchor: Nanos, _rng: &mut DeviceRng) {
        self.life = Some(Life {
            origin: self.start.max(anchor),
            pass: 0,
            idx: 0,
            sent: 0,
        });
    }

    fn end(&mut self) {
        self.life = None;
    }

    fn next_at(&self) -> Option<Nanos> {
        let Life {
            origin,
            pass,
            idx,
            sent,
        } = self.life.as_ref()?;
        if self.count.is_some_and(|c| *sent >= c) || (*pass > 0 && !self.looped) {
            return None;
        }
        let off = self.offsets.get(*idx)?;
        let t = origin
            .saturating_add(pass.saturating_mul(self.period))
            .saturating_add(*off);
        (self.stop.is_none_or(|s| t < s) && t != Nanos::MAX).then_some(t)
    }

    fn step(&mut self, cx: &mut StepContext<'_>) -> Option<Vec<u8>> {
        let Life {
            pass, idx, sent, ..
        } = self.life.as_mut()?;
        let i = *idx;
        *sent += 1;
        *idx += 1;
        if *idx >= self.frames.len() {
            *idx = 0;
            *pass += 1;
        }
        if !cx.send {
            return None;
        }
        let mut frame = self.frames.get(i)?.clone();
        if frame.len() >= 12 {
            frame[0..6].copy_from_slice(&cx.host.gateway_mac);
            frame[6..12].copy_from_slice(&cx.host.mac);
        }
        Some(frame)
    }
}
