//! A UnivMon-style universal sketch (Liu et al., "One Sketch to Rule Them
//! All", SIGCOMM 2016): nested, sampled count-min sketches whose contents
//! the control plane turns into several statistics.
//!
//! Data plane. A sampling hash of the flow key (the 5-tuple) puts a flow in
//! levels `0..=d`, where `d` is the number of trailing one bits of the hash
//! (capped at `levels − 1`): level 0 sees every flow, level `j` about a
//! `2^−j` sample of the flows, level `j + 1 ⊂` level `j`. Each level has a
//! count-min sketch of `rows` rows × `flows` 32-bit counters, each row its
//! own register array (so `levels × rows` arrays, one stateful ALU each);
//! row `r` of every level is indexed by the same row hash unit `r` (the
//! sampling hash makes the levels' flow sets differ; the hash units are
//! the ones [`crate::heavy_hitter`] uses). A packet adds one to its flow's
//! counter in every row of every level it belongs to.
//!
//! Heavy-hitter candidates: the estimate at the flow's deepest level `d`
//! (the minimum over every counter the packet touched, all upper bounds of
//! the flow's count) is compared with `threshold >> d` (at least 1) — the
//! same fraction of that level's sampled substream. A flow reaching it is
//! tested-and-set in a Bloom filter ([`BloomDedup`]) and, if new, reported
//! in a digest ([`Candidate`]) with its level.
//!
//! Control plane. On a [`MSG_READ`] control message, or every `epoch_ms`
//! milliseconds (0: only on request; a timed read also clears the sketch
//! and the filter afterwards), it reads every array with `register_read`
//! (the profile's latency applies: `register_op + register_per_entry ×
//! flows` each) and, once all values are in, computes an [`Estimate`]:
//!
//! - **total packets**: the sum of level 0, row 0 (exact, each packet adds
//!   one to exactly one of its counters; saturation aside);
//! - **heavy hitters per level**: the reported candidates that belong to
//!   level `j` and whose estimate (the minimum over their counters in levels
//!   `0..=d`, all rows) reaches `threshold >> j`;
//! - **distinct flows**, by multi-resolution linear counting: level `j`,
//!   row `r` holds `n̂ = −w·ln(z/w)` distinct flows (`z` zero counters of
//!   `w`); the estimate is `2^j` times the mean over rows of the first level
//!   whose mean load `n̂/w` is at most 2 (the deepest level if none is), so
//!   the relative error is about `√(2^j/D)` from sampling plus a few percent
//!   from linear counting (`w = 1,024`: about 3 % at load 1).
//!   Entropy is not estimated.
//!
//! Parameters: `levels` (1..=8, default 8), `rows` (1..=4, default 3),
//! `flows` (counters per row, power of two, default 1,024), `threshold`
//! (packets for a level-0 heavy hitter, default 1,000), `bloom_bits`
//! (default 65,536), `epoch_ms` (default 0), `in_port`/`out_port`
//! (forwarding, see [`MonitorPath`]). Non-IPv4 frames are forwarded
//! unmeasured.

use std::collections::BTreeMap;

use inca_switch::objects::Objects;
use inca_switch::{
    AccessError, ArrayDecl, ControlEvent, ControlPlane, DataPlane, Declare, DeclareError, Gress,
    Handle, Nanos, ObjectId, PacketCtx, ParseError, Program, RegisterHandle,
};

use crate::core::sketch;
use crate::counters::{index_bits, pow2_param, MonitorPath};
use crate::headers::{parse_ingress_only, Parsed};
use crate::heavy_hitter::{declare_row_hash, BloomDedup, ROW_HASHES};
use crate::params::{ParamError, Params};

/// Control message kind: read the sketch and compute an estimate.
pub const MSG_READ: u32 = 1;
/// Control-plane timer token of the periodic read.
pub const TOKEN_EPOCH: u64 = 1;
/// Row number whose hash family and rotation the sampling hash uses
/// (distinct from every row and from the Bloom filter's).
const SAMPLE_ROW: usize = 9;

/// A heavy-hitter candidate the data plane reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Candidate {
    /// The flow's 5-tuple.
    pub key: [u8; 13],
    /// Its deepest level.
    pub level: u8,
    /// Its estimate when reported.
    pub estimate: u32,
}

/// What the control plane computed from one read of the sketch.
#[derive(Debug, Clone, PartialEq)]
pub struct Estimate {
    /// When the last value arrived.
    pub at: Nanos,
    /// Total packets counted.
    pub total: u64,
    /// Packets counted per level.
    pub level_packets: Vec<u64>,
    /// Estimated distinct flows.
    pub distinct: f64,
    /// The level the distinct estimate came from.
    pub distinct_level: usize,
    /// Heavy hitters per level: (key, estimate), largest first.
    pub heavy: Vec<Vec<([u8; 13], u32)>>,
}

/// The universal sketch. See the module documentation.
#[derive(Debug, Clone)]
pub struct UnivMon {
    levels: usize,
    rows: usize,
    flows: usize,
    threshold: u32,
    bloom_bits: usize,
    epoch: Nanos,
    path: MonitorPath,
    sample: Option<Handle>,
    hashes: Vec<Handle>,
    /// `regs[level][row]`.
    regs: Vec<Vec<RegisterHandle<u32>>>,
    dedup: Option<BloomDedup>,
    candidates: BTreeMap<[u8; 13], Candidate>,
    pending: BTreeMap<u64, (usize, usize)>,
    values: Vec<Vec<Vec<u32>>>,
    clear_after: bool,
    estimates: Vec<Estimate>,
}

impl UnivMon {
    /// Parameter names.
    pub const PARAMS: &'static [&'static str] = &[
        "levels",
        "rows",
        "flows",
        "threshold",
        "bloom_bits",
        "epoch_ms",
        "in_port",
        "out_port",
    ];

    /// A sketch of `levels` levels of `rows` × `flows` counters (`flows` a
    /// power of two), with heavy-hitter threshold `threshold`, read every
    /// `epoch` ns (0: on request only).
    pub fn new(
        levels: usize,
        rows: usize,
        flows: usize,
        threshold: u32,
        epoch: Nanos,
        path: MonitorPath,
    ) -> Self {
        UnivMon {
            levels: levels.clamp(1, 8),
            rows: rows.clamp(1, 8),
            flows,
            threshold,
            bloom_bits: 65_536,
            epoch,
            path,
            sample: None,
            hashes: Vec::new(),
            regs: Vec::new(),
            dedup: None,
            candidates: BTreeMap::new(),
            pending: BTreeMap::new(),
            values: Vec::new(),
            clear_after: false,
            estimates: Vec::new(),
        }
    }

    /// A sketch from parameters (see the module documentation).
    pub fn from_params(p: &Params) -> Result<Self, ParamError> {
        p.check_known("univmon", Self::PARAMS)?;
        let mut u = UnivMon::new(
            p.number("levels", 8, 1, 8)? as usize,
            p.number("rows", 3, 1, 4)? as usize,
            pow2_param(p, "flows", 1024, 1 << 24)?,
            p.count("threshold", 1000, u64::from(u32::MAX))? as u32,
            p.number("epoch_ms", 0, 0, 86_400_000)? * 1_000_000,
            MonitorPath::from_params(p)?,
        );
        u.bloom_bits = pow2_param(p, "bloom_bits", 65_536, 1 << 24)?;
        Ok(u)
    }

    /// The deepest level of flow `key`.
    pub fn level_of(&self, key: &[u8; 13]) -> usize {
        let h = ROW_HASHES.hash(SAMPLE_ROW, self.sample_bits(), key);
        (h.trailing_ones() as usize).min(self.levels - 1)
    }

    fn sample_bits(&self) -> u8 {
        (self.levels.saturating_sub(1) as u8).max(1)
    }

    /// The counter of `key` in row `r` (of every level).
    pub fn index(&self, r: usize, key: &[u8; 13]) -> u64 {
        ROW_HASHES.hash(r, index_bits(self.flows), key) & (self.flows as u64 - 1)
    }

    /// Level `j`'s heavy-hitter threshold.
    pub fn level_threshold(&self, j: usize) -> u32 {
        (self.threshold >> j.min(31)).max(1)
    }

    /// Estimates computed so far, oldest first.
    pub fn estimates(&self) -> &[Estimate] {
        &self.estimates
    }

    /// Candidates reported so far (since the last clear).
    pub fn candidates(&self) -> &BTreeMap<[u8; 13], Candidate> {
        &self.candidates
    }

    /// The count-min estimate of `key` at level 0, read from the store.
    pub fn peek(&self, objects: &Objects, key: &[u8; 13]) -> Option<u32> {
        let level = self.regs.first()?;
        let counts: Option<Vec<u32>> = level
            .iter()
            .enumerate()
            .map(|(r, &reg)| objects.register_peek(reg, self.index(r, key)).ok())
            .collect();
        sketch::min(counts?)
    }

    fn start_read(&mut self, cp: &mut ControlPlane<'_>, clear_after: bool) {
        if !self.pending.is_empty() {
            return; // a read is under way
        }
        self.clear_after = clear_after;
        self.values = vec![vec![Vec::new(); self.rows]; self.levels];
        for (j, level) in self.regs.iter().enumerate() {
            for (r, &reg) in level.iter().enumerate() {
                let id = cp.register_read(reg, 0, self.flows as u64);
                self.pending.insert(id, (j, r));
            }
        }
    }

    fn finish_read(&mut self, now: Nanos, cp: &mut ControlPlane<'_>) {
        let w = self.flows as f64;
        let level_packets: Vec<u64> = self
            .values
            .iter()
            .map(|l| l[0].iter().map(|&v| u64::from(v)).sum())
            .collect();
        // Distinct flows: multi-resolution linear counting.
        let mut distinct = (f64::NAN, self.levels - 1);
        for (j, level) in self.values.iter().enumerate() {
            let n: f64 = level
                .iter()
                .map(|row| {
                    let z = row.iter().filter(|&&v| v == 0).count() as f64;
                    sketch::linear_count(z, w)
                })
                .sum::<f64>()
                / level.len() as f64;
            if n / w <= 2.0 || j == self.levels - 1 {
                distinct = (n * (1u64 << j) as f64, j);
                break;
            }
        }
        // Heavy hitters per level.
        let mut heavy = vec![Vec::new(); self.levels];
        for (key, c) in &self.candidates {
            let d = usize::from(c.level).min(self.levels - 1);
            let mut est = u32::MAX;
            for l in 0..=d {
                for r in 0..self.rows {
                    let i = self.index(r, key) as usize;
                    est = est.min(self.values[l][r].get(i).copied().unwrap_or(0));
                }
            }
            for (j, list) in heavy.iter_mut().enumerate().take(d + 1) {
                if est >= self.level_threshold(j) {
                    list.push((*key, est));
                }
            }
        }
        for list in &mut heavy {
            list.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        }
        self.estimates.push(Estimate {
            at: now,
            total: level_packets.first().copied().unwrap_or(0),
            level_packets,
            distinct: distinct.0,
            distinct_level: distinct.1,
            heavy,
        });
        self.values.clear();
        if self.clear_after {
            for level in &self.regs {
                for &reg in level {
                    cp.register_clear(reg, self.flows as u64);
                }
            }
            if let Some(d) = self.dedup {
                d.clear(cp);
            }
            self.candidates.clear();
        }
    }
}

impl Program for UnivMon {
    type Meta = Parsed;
    type Digest = Candidate;

    fn name(&self) -> &str {
        "univmon"
    }

    fn declare(&mut self, d: &mut Declare) -> Result<(), DeclareError> {
        let sample = declare_row_hash(d, "um_sample_hash", SAMPLE_ROW, self.sample_bits())?;
        self.sample = Some(sample);
        self.hashes.clear();
        self.regs.clear();
        let bits = index_bits(self.flows);
        for r in 0..self.rows {
            self.hashes
                .push(declare_row_hash(d, &format!("um_hash{r}"), r, bits)?);
        }
        for j in 0..self.levels {
            let mut level = Vec::new();
            for r in 0..self.rows {
                level.push(
                    d.register::<u32>(
                        ArrayDecl::new(&format!("um_l{j}_row{r}"), self.flows)
                            .after(&[sample.id(), self.hashes[r].id()]),
                    )?,
                );
            }
            self.regs.push(level);
        }
        let ids: Vec<ObjectId> = self.regs.iter().flatten().map(|r| r.id()).collect();
        let over = d.gateway("um_over_threshold", Gress::Ingress, &ids)?;
        self.dedup = Some(BloomDedup::declare(
            d,
            "um_reported",
            self.bloom_bits,
            &[over.id()],
        )?);
        Ok(())
    }

    fn parse(&self, gress: Gress, header: &[u8], meta: &mut Parsed) -> Result<(), ParseError> {
        parse_ingress_only(gress, header, meta)
    }

    fn ingress(
        &mut self,
        pkt: &mut PacketCtx<Parsed, Candidate>,
        dp: &mut DataPlane<'_>,
    ) -> Result<(), AccessError> {
        pkt.forward(self.path.egress(pkt.ingress_port()));
        let p = pkt.meta;
        let (Some(sample), Some(dedup)) = (self.sample, self.dedup) else {
            return Ok(());
        };
        if !p.ipv4 {
            return Ok(());
        }
        let key = p.five_tuple();
        let s = ROW_HASHES.with_input(SAMPLE_ROW, &key, |input| dp.hash(sample, input))?;
        let d = (s.trailing_ones() as usize).min(self.levels - 1);
        let mask = self.flows as u64 - 1;
        let mut idx = [0u64; 8];
        for (r, (i, &h)) in idx.iter_mut().zip(&self.hashes).enumerate() {
            *i = ROW_HASHES.with_input(r, &key, |input| dp.hash(h, input))? & mask;
        }
        let mut est = u32::MAX;
        for level in &self.regs[..=d] {
            for (r, &reg) in level.iter().enumerate() {
                est = est.min(dp.register(reg, idx[r], sketch::count)?);
            }
        }
        if est >= self.level_threshold(d) && dedup.insert(dp, &key)? {
            pkt.digest(Candidate {
                key,
                level: d as u8,
                estimate: est,
            });
        }
        Ok(())
    }

    fn control(&mut self, event: ControlEvent<Candidate>, cp: &mut ControlPlane<'_>) {
        match event {
            ControlEvent::Start if self.epoch > 0 => {
                cp.set_timer(cp.now() + self.epoch, TOKEN_EPOCH);
            }
            ControlEvent::Digest(c) => {
                self.candidates.entry(c.key).or_insert(c);
            }
            ControlEvent::Message(m) if m.kind == MSG_READ => self.start_read(cp, false),
            ControlEvent::Timer { token: TOKEN_EPOCH } => {
                self.start_read(cp, true);
                if self.epoch > 0 {
                    cp.set_timer(cp.now() + self.epoch, TOKEN_EPOCH);
                }
            }
            ControlEvent::RegisterValues { request, values } => {
                if let Some((j, r)) = self.pending.remove(&request) {
                    self.values[j][r] = values.into_iter().map(|v| v as u32).collect();
                    if self.pending.is_empty() {
                        self.finish_read(cp.now(), cp);
                    }
                }
            }
            ControlEvent::OpFailed { request, .. } if self.pending.contains_key(&request) => {
                self.pending.remove(&request);
                if self.pending.is_empty() {
                    self.finish_read(cp.now(), cp);
                }
            }
            _ => {}
        }
    }
}
