//! Super-spreader (scanner, DDoS source) detection and blocking.
//!
//! Distinct destinations per source are estimated with a sketch of 32-bit
//! bitsets: `rows` register arrays of `flows` entries, row `r` indexed by
//! its own hash of the source address. A packet sets bit
//! `h(destination) mod 32` in its source's bitset in every row (one register
//! action per row, which returns the popcount before and after). The
//! minimum popcount over the rows is the source's estimate; a bitset holding
//! `b` bits stands for about `−32·ln(1 − b/32)` distinct destinations
//! (linear counting), so the sketch tells sources apart up to about 100
//! destinations per epoch.
//!
//! `threshold` is given in distinct destinations (default 20) and turned
//! into the popcount a source with that many destinations is expected to
//! reach, `32·(1 − (31/32)^threshold)` rounded
//! ([`popcount_threshold`](crate::core::sketch::popcount_threshold); 15 for
//! 20). The bitset update, the minimum and linear counting are
//! [`crate::core::sketch`]'s. When a packet takes its source's minimum popcount to the threshold
//! the data plane sends a digest ([`SpreadReport`]); after that, one in 64
//! packets over the threshold digests again (so a source whose bitsets were
//! already full through collisions, or whose digest was lost, is still
//! reported), until the block is in place.
//!
//! The control plane installs an exact-match entry `source → block slot`
//! in `blocked` (`blocks` entries); later packets from the source hit it and
//! are dropped and counted in the `blocked_drops` counter array (per block
//! slot). Every `epoch_ms` milliseconds (0: never) the control plane clears
//! the bitsets; blocks are permanent in this version (a block table that
//! fills up refuses further sources, counted in `refused`).
//!
//! Parameters: `flows` (bitsets per row, power of two, default 4,096),
//! `rows` (1..=8, default 3), `threshold` (distinct destinations, 1..=100,
//! default 20), `blocks` (block-table entries, default 1,024), `epoch_ms`
//! (default 1,000), `in_port`/`out_port` (forwarding, see
//! [`MonitorPath`]). Non-IPv4 frames are forwarded unmeasured.

use std::collections::BTreeMap;

use inca_switch::hash::HashAlgorithm;
use inca_switch::objects::Objects;
use inca_switch::{
    AccessError, ArrayDecl, ControlEvent, ControlPlane, DataPlane, Declare, DeclareError, Gress,
    Handle, MatchKind, MatchSpec, Nanos, ObjectId, PacketCtx, ParseError, Program, RegisterHandle,
    TableDecl, TableHandle,
};

use crate::core::sketch::{self, popcount_threshold, set_bit};
use crate::counters::{index_bits, pow2_param, MonitorPath};
use crate::headers::{parse_ingress_only, Parsed};
use crate::heavy_hitter::{declare_row_hash, ROW_HASHES};
use crate::params::{ParamError, Params};

/// Control-plane timer token of the epoch reset.
pub const TOKEN_EPOCH: u64 = 1;
/// After a source crossed the threshold, one in this many of its packets
/// over the threshold digests again.
pub const REPORT_AGAIN_ONE_IN: u32 = 64;

/// What the data plane reports about a source over the threshold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpreadReport {
    /// The source address.
    pub src: [u8; 4],
    /// Its minimum popcount over the rows.
    pub popcount: u8,
}

/// A source the control plane blocked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Block {
    /// Its slot (the index of its drop counter).
    pub slot: u32,
    /// When the control plane issued the block.
    pub at: Nanos,
    /// The popcount reported.
    pub popcount: u8,
}

/// The super-spreader detector. See the module documentation.
#[derive(Debug, Clone)]
pub struct SuperSpreader {
    flows: usize,
    rows: usize,
    threshold: u32,
    blocks: usize,
    epoch: Nanos,
    path: MonitorPath,
    blocked: Option<TableHandle<u32>>,
    drops: Option<Handle>,
    dst_hash: Option<Handle>,
    hashes: Vec<Handle>,
    regs: Vec<RegisterHandle<u32>>,
    blocked_sources: BTreeMap<[u8; 4], Block>,
    /// Reports received (including repeats for sources already blocked).
    pub reports: u64,
    /// Sources not blocked because the block table was full.
    pub refused: u64,
}

impl SuperSpreader {
    /// Parameter names.
    pub const PARAMS: &'static [&'static str] = &[
        "flows",
        "rows",
        "threshold",
        "blocks",
        "epoch_ms",
        "in_port",
        "out_port",
    ];

    /// A detector with `rows` × `flows` bitsets (`flows` a power of two),
    /// blocking sources with `threshold` distinct destinations, with room
    /// for `blocks` blocked sources, clearing the bitsets every `epoch` ns
    /// (0: never).
    pub fn new(
        flows: usize,
        rows: usize,
        threshold: u32,
        blocks: usize,
        epoch: Nanos,
        path: MonitorPath,
    ) -> Self {
        SuperSpreader {
            flows,
            rows: rows.max(1),
            threshold: popcount_threshold(f64::from(threshold)),
            blocks,
            epoch,
            path,
            blocked: None,
            drops: None,
            dst_hash: None,
            hashes: Vec::new(),
            regs: Vec::new(),
            blocked_sources: BTreeMap::new(),
            reports: 0,
            refused: 0,
        }
    }

    /// A detector from parameters (see the module documentation).
    pub fn from_params(p: &Params) -> Result<Self, ParamError> {
        p.check_known("superspreader", Self::PARAMS)?;
        Ok(SuperSpreader::new(
            pow2_param(p, "flows", 4096, 1 << 24)?,
            p.number("rows", 3, 1, 8)? as usize,
            p.number("threshold", 20, 1, 100)? as u32,
            p.count("blocks", 1024, 1 << 24)? as usize,
            p.number("epoch_ms", 1000, 0, 86_400_000)? * 1_000_000,
            MonitorPath::from_params(p)?,
        ))
    }

    /// The popcount at which a source is reported.
    pub fn popcount_threshold(&self) -> u32 {
        self.threshold
    }

    /// Sources the control plane has blocked.
    pub fn blocked(&self) -> &BTreeMap<[u8; 4], Block> {
        &self.blocked_sources
    }

    /// The bitset entry of `src` in row `r`.
    pub fn index(&self, r: usize, src: [u8; 4]) -> u64 {
        ROW_HASHES.hash(r, index_bits(self.flows), &src) & (self.flows as u64 - 1)
    }

    /// The minimum popcount of `src` over the rows, read from the store.
    pub fn popcount(&self, objects: &Objects, src: [u8; 4]) -> Option<u32> {
        let counts: Option<Vec<u32>> = (self.regs.iter().enumerate())
            .map(|(r, &reg)| {
                Some(
                    objects
                        .register_peek(reg, self.index(r, src))
                        .ok()?
                        .count_ones(),
                )
            })
            .collect();
        sketch::min(counts?)
    }

    /// (packets, bytes) dropped for blocked source `src`, read from the
    /// store.
    pub fn dropped(&self, objects: &Objects, src: [u8; 4]) -> Option<(u64, u64)> {
        let b = self.blocked_sources.get(&src)?;
        objects.counter_read(self.drops?, u64::from(b.slot)).ok()
    }
}

impl Program for SuperSpreader {
    type Meta = Parsed;
    type Digest = SpreadReport;

    fn name(&self) -> &str {
        "superspreader"
    }

    fn declare(&mut self, d: &mut Declare) -> Result<(), DeclareError> {
        let is_ipv4 = d.gateway("is_ipv4", Gress::Ingress, &[])?;
        // Action data: the block slot, 16..24 bits; charge 24.
        let blocked = d.table(
            TableDecl::new("blocked", MatchKind::Exact, 4, 24, self.blocks).after(&[is_ipv4.id()]),
        )?;
        self.drops =
            Some(d.counter(ArrayDecl::new("blocked_drops", self.blocks).after(&[blocked.id()]))?);
        self.blocked = Some(blocked);
        let dst_hash = d.hash("dst_bit_hash", HashAlgorithm::Crc32, 5, Gress::Ingress, &[])?;
        self.dst_hash = Some(dst_hash);
        self.hashes.clear();
        self.regs.clear();
        let bits = index_bits(self.flows);
        for r in 0..self.rows {
            let h = declare_row_hash(d, &format!("spread_hash{r}"), r, bits)?;
            let reg = d.register::<u32>(
                ArrayDecl::new(&format!("spread_row{r}"), self.flows).after(&[
                    h.id(),
                    dst_hash.id(),
                    blocked.id(),
                ]),
            )?;
            self.hashes.push(h);
            self.regs.push(reg);
        }
        let ids: Vec<ObjectId> = self.regs.iter().map(|r| r.id()).collect();
        d.gateway("over_threshold", Gress::Ingress, &ids)?;
        Ok(())
    }

    fn parse(&self, gress: Gress, header: &[u8], meta: &mut Parsed) -> Result<(), ParseError> {
        parse_ingress_only(gress, header, meta)
    }

    fn ingress(
        &mut self,
        pkt: &mut PacketCtx<Parsed, SpreadReport>,
        dp: &mut DataPlane<'_>,
    ) -> Result<(), AccessError> {
        pkt.forward(self.path.egress(pkt.ingress_port()));
        let p = pkt.meta;
        let (Some(blocked), Some(drops), Some(dst_hash)) =
            (self.blocked, self.drops, self.dst_hash)
        else {
            return Ok(());
        };
        if !p.ipv4 {
            return Ok(());
        }
        if let Some(slot) = dp.lookup(blocked, &p.src)? {
            pkt.drop_packet();
            return dp.count(drops, u64::from(slot), pkt.len() as u64);
        }
        let bit = dp.hash(dst_hash, &p.dst)? as u32;
        let mask = self.flows as u64 - 1;
        let (mut old_min, mut new_min) = (u32::MAX, u32::MAX);
        for r in 0..self.regs.len() {
            let i =
                ROW_HASHES.with_input(r, &p.src, |input| dp.hash(self.hashes[r], input))? & mask;
            let (old, new) = dp.register(self.regs[r], i, |w| set_bit(w, bit))?;
            old_min = old_min.min(old);
            new_min = new_min.min(new);
        }
        if new_min >= self.threshold
            && (old_min < self.threshold || dp.random().is_multiple_of(REPORT_AGAIN_ONE_IN))
        {
            pkt.digest(SpreadReport {
                src: p.src,
                popcount: new_min as u8,
            });
        }
        Ok(())
    }

    fn control(&mut self, event: ControlEvent<SpreadReport>, cp: &mut ControlPlane<'_>) {
        match event {
            ControlEvent::Start if self.epoch > 0 => {
                cp.set_timer(cp.now() + self.epoch, TOKEN_EPOCH);
            }
            ControlEvent::Digest(rep) => {
                self.reports += 1;
                let Some(table) = self.blocked else {
                    return;
                };
                if self.blocked_sources.contains_key(&rep.src) {
                    return;
                }
                if self.blocked_sources.len() >= self.blocks {
                    self.refused += 1;
                    return;
                }
                let slot = self.blocked_sources.len() as u32;
                cp.table_add(table, MatchSpec::Exact(rep.src.to_vec().into()), slot);
                self.blocked_sources.insert(
                    rep.src,
                    Block {
                        slot,
                        at: cp.now(),
                        popcount: rep.popcount,
                    },
                );
            }
            ControlEvent::Timer { token: TOKEN_EPOCH } => {
                for &r in &self.regs {
                    cp.register_clear(r, self.flows as u64);
                }
                if self.epoch > 0 {
                    cp.set_timer(cp.now() + self.epoch, TOKEN_EPOCH);
                }
            }
            _ => {}
        }
    }
}
