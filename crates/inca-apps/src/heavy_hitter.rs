//! Heavy-hitter detection per tenant with count-min sketches.
//!
//! Each tenant (802.1Q VLAN id modulo `vlans`) has its own count-min sketch
//! of `rows` rows × `slots` 32-bit counters. Row `r` is one register array
//! of `vlans × slots` entries with its own hash unit; a flow's counter in
//! row `r` is entry `tenant · slots + h_r(5-tuple)`. Every IPv4 packet adds
//! one to its flow's counter in every row (one register action per row
//! array, which returns the new value); the minimum over the rows is the
//! estimate, which never undercounts and, with `w = slots`, exceeds the
//! true count by at most `ε·N` (`ε = e/w`, `N` the tenant's packets) with
//! probability at least `1 − δ` (`δ = e^−rows`).
//!
//! When the estimate reaches `threshold` the packet tests-and-sets its key
//! (VLAN + 5-tuple) in a Bloom filter of two 32-bit bitset arrays
//! ([`BloomDedup`]); a key not yet in the filter is reported to the control
//! plane in a digest ([`HeavyReport`]). So a key is reported once per epoch
//! (a Bloom false positive can suppress a report; with the default 65,536
//! bits per array and a few hundred heavy keys that is rare).
//!
//! The control plane records reported keys ([`HeavyHitter::reports`]) and,
//! every `epoch_ms` milliseconds (0: never), clears the rows and the filter
//! with `register_clear` (which takes effect after the register-operation
//! latency, one array after the other, as on a switch).
//!
//! Row hashes: the model's hash units offer CRC-16/32/64 only, and CRC is
//! linear, so salting one polynomial with a per-row constant would make
//! every row collide on the same keys. Row `r` therefore uses CRC-32 (even
//! rows) or CRC-64 (odd rows) over the key with its bytes rotated by
//! `3·⌊r/2⌋` — a different polynomial or field order per row, which is what
//! P4 programs on Tofino do. These are [`RowHashes::Rotated`] of
//! [`crate::core::sketch`], whose cell updates and minimum the detector
//! applies too; the other sketch apps share them.
//!
//! Parameters: `vlans` (tenants, power of two, default 64), `slots`
//! (columns per tenant and row, power of two, default 64), `rows` (1..=8,
//! default 3), `threshold` (packets, default 1,000), `epoch_ms` (default
//! 1,000; 0 never resets), `bloom_bits` (bits per filter array, power of two,
//! default 65,536), `in_port`/`out_port` (forwarding, see
//! [`MonitorPath`]). Non-IPv4 frames are forwarded unmeasured.

use std::collections::BTreeSet;

use inca_switch::objects::Objects;
use inca_switch::{
    AccessError, ArrayDecl, ControlEvent, ControlPlane, DataPlane, Declare, DeclareError, Gress,
    Handle, Nanos, ObjectId, PacketCtx, ParseError, Program, RegisterHandle,
};

use crate::core::sketch::{self, set_bit, RowHashes};
use crate::counters::{index_bits, pow2_param, MonitorPath};
use crate::headers::{parse_ingress_only, Parsed};
use crate::params::{ParamError, Params};

/// Control-plane timer token of the epoch reset.
pub const TOKEN_EPOCH: u64 = 1;

/// The row hashes of the plain sketch apps (heavy hitter, UnivMon,
/// super-spreader, the report filter): [`RowHashes::Rotated`].
pub const ROW_HASHES: RowHashes = RowHashes::Rotated;

/// Declares the hash unit of sketch row `r` with `bits` output bits.
pub fn declare_row_hash(
    d: &mut Declare,
    name: &str,
    r: usize,
    bits: u8,
) -> Result<Handle, DeclareError> {
    d.hash(name, ROW_HASHES.algorithm(r), bits, Gress::Ingress, &[])
}

/// A two-array Bloom filter of 32-bit bitsets used to report a key once:
/// [`BloomDedup::insert`] sets the key's bit in each array (one register
/// action per array) and says whether any of them was clear.
#[derive(Debug, Clone, Copy)]
pub struct BloomDedup {
    words: usize,
    bits: u8,
    hashes: [Handle; 2],
    regs: [RegisterHandle<u32>; 2],
}

impl BloomDedup {
    /// Declares a filter of `bits` bits per array (a power of two, at least
    /// 32), named `{prefix}0`/`{prefix}1`, placed after `after`.
    pub fn declare(
        d: &mut Declare,
        prefix: &str,
        bits: usize,
        after: &[ObjectId],
    ) -> Result<BloomDedup, DeclareError> {
        let bits = bits.max(32).next_power_of_two();
        let words = bits / 32;
        let hbits = index_bits(bits);
        let mut hashes = Vec::new();
        let mut regs = Vec::new();
        for i in 0..2 {
            let h = declare_row_hash(d, &format!("{prefix}_hash{i}"), i + 4, hbits)?;
            let mut deps = after.to_vec();
            deps.push(h.id());
            regs.push(
                d.register::<u32>(ArrayDecl::new(&format!("{prefix}{i}"), words).after(&deps))?,
            );
            hashes.push(h);
        }
        Ok(BloomDedup {
            words,
            bits: hbits,
            hashes: [hashes[0], hashes[1]],
            regs: [regs[0], regs[1]],
        })
    }

    /// Sets `key` in the filter; true if it was not there before.
    pub fn insert(&self, dp: &mut DataPlane<'_>, key: &[u8]) -> Result<bool, AccessError> {
        let mut fresh = false;
        for i in 0..2 {
            let h = ROW_HASHES.with_input(i + 4, key, |input| dp.hash(self.hashes[i], input))?;
            let word = (h >> 5) & (self.words as u64 - 1);
            let (before, after) = dp.register(self.regs[i], word, |w| set_bit(w, h as u32))?;
            fresh |= after != before;
        }
        Ok(fresh)
    }

    /// Whether `key` is in the filter, read from the store (tests).
    pub fn contains(&self, objects: &Objects, key: &[u8]) -> bool {
        (0..2).all(|i| {
            let h = ROW_HASHES.hash(i + 4, self.bits, key);
            let word = (h >> 5) & (self.words as u64 - 1);
            objects
                .register_peek(self.regs[i], word)
                .is_ok_and(|w| w & (1u32 << (h & 31)) != 0)
        })
    }

    /// Clears both arrays through the control plane.
    pub fn clear(&self, cp: &mut ControlPlane<'_>) {
        for r in self.regs {
            cp.register_clear(r, self.words as u64);
        }
    }
}

/// What the data plane reports about a heavy key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeavyReport {
    /// The VLAN id (the tenant).
    pub vlan: u16,
    /// The flow's 5-tuple (src, dst, proto, sport, dport).
    pub key: [u8; 13],
    /// The sketch's estimate when it was reported.
    pub estimate: u32,
}

/// A report as the control plane recorded it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reported {
    /// The epoch it belongs to (counts resets from 0).
    pub epoch: u64,
    /// When the control plane handled it.
    pub at: Nanos,
    /// The report.
    pub report: HeavyReport,
}

/// The heavy-hitter detector. See the module documentation.
#[derive(Debug, Clone)]
pub struct HeavyHitter {
    vlans: usize,
    slots: usize,
    rows: usize,
    threshold: u32,
    epoch: Nanos,
    bloom_bits: usize,
    path: MonitorPath,
    hashes: Vec<Handle>,
    regs: Vec<RegisterHandle<u32>>,
    dedup: Option<BloomDedup>,
    epoch_no: u64,
    seen: BTreeSet<(u64, u16, [u8; 13])>,
    reports: Vec<Reported>,
    /// Digests for a key already recorded in the same epoch (Bloom filter
    /// cleared late, or a crash of the control plane's view).
    pub duplicate_reports: u64,
}

impl HeavyHitter {
    /// Parameter names.
    pub const PARAMS: &'static [&'static str] = &[
        "vlans",
        "slots",
        "rows",
        "threshold",
        "epoch_ms",
        "bloom_bits",
        "in_port",
        "out_port",
    ];

    /// A detector for `vlans` tenants with `rows` × `slots` counters each
    /// (both powers of two), reporting keys at `threshold` packets,
    /// resetting every `epoch` ns (0: never).
    pub fn new(
        vlans: usize,
        slots: usize,
        rows: usize,
        threshold: u32,
        epoch: Nanos,
        path: MonitorPath,
    ) -> Self {
        HeavyHitter {
            vlans,
            slots,
            rows: rows.max(1),
            threshold,
            epoch,
            bloom_bits: 65_536,
            path,
            hashes: Vec::new(),
            regs: Vec::new(),
            dedup: None,
            epoch_no: 0,
            seen: BTreeSet::new(),
            reports: Vec::new(),
            duplicate_reports: 0,
        }
    }

    /// A detector from parameters (see the module documentation).
    pub fn from_params(p: &Params) -> Result<Self, ParamError> {
        p.check_known("heavy_hitter", Self::PARAMS)?;
        let mut h = HeavyHitter::new(
            pow2_param(p, "vlans", 64, 4096)?,
            pow2_param(p, "slots", 64, 1 << 24)?,
            p.number("rows", 3, 1, 8)? as usize,
            p.count("threshold", 1000, u64::from(u32::MAX))? as u32,
            p.number("epoch_ms", 1000, 0, 86_400_000)? * 1_000_000,
            MonitorPath::from_params(p)?,
        );
        h.bloom_bits = pow2_param(p, "bloom_bits", 65_536, 1 << 24)?;
        Ok(h)
    }

    /// Sets the bits per Bloom-filter array (a power of two, at least 32).
    pub fn with_bloom_bits(mut self, bits: usize) -> Self {
        self.bloom_bits = bits;
        self
    }

    /// The tenant slot of VLAN `vlan`.
    fn tenant(&self, vlan: u16) -> u64 {
        u64::from(vlan) & (self.vlans as u64 - 1)
    }

    /// The entry of `(vlan, key)` in row `r`.
    pub fn index(&self, r: usize, vlan: u16, key: &[u8; 13]) -> u64 {
        let h = ROW_HASHES.hash(r, index_bits(self.slots), key) & (self.slots as u64 - 1);
        self.tenant(vlan) * self.slots as u64 + h
    }

    /// The sketch's current estimate for `(vlan, key)`, read from the store
    /// (tests; the control plane would read the rows with `register_read`).
    pub fn estimate(&self, objects: &Objects, vlan: u16, key: &[u8; 13]) -> Option<u32> {
        let counts: Option<Vec<u32>> = (0..self.regs.len())
            .map(|r| {
                objects
                    .register_peek(self.regs[r], self.index(r, vlan, key))
                    .ok()
            })
            .collect();
        sketch::min(counts?)
    }

    /// Reports recorded by the control plane, in arrival order.
    pub fn reports(&self) -> &[Reported] {
        &self.reports
    }

    /// The current epoch (number of resets issued).
    pub fn epoch_number(&self) -> u64 {
        self.epoch_no
    }

    /// Counters per row and tenant (`slots`).
    pub fn slots(&self) -> usize {
        self.slots
    }

    /// The report threshold.
    pub fn threshold(&self) -> u32 {
        self.threshold
    }
}

impl Program for HeavyHitter {
    type Meta = Parsed;
    type Digest = HeavyReport;

    fn name(&self) -> &str {
        "heavy_hitter"
    }

    fn declare(&mut self, d: &mut Declare) -> Result<(), DeclareError> {
        let entries = self
            .vlans
            .checked_mul(self.slots)
            .ok_or_else(|| DeclareError::Invalid {
                name: "cm_row0".into(),
                reason: "vlans × slots overflows".into(),
            })?;
        self.hashes.clear();
        self.regs.clear();
        let bits = index_bits(self.slots);
        for r in 0..self.rows {
            let h = declare_row_hash(d, &format!("cm_hash{r}"), r, bits)?;
            let reg =
                d.register::<u32>(ArrayDecl::new(&format!("cm_row{r}"), entries).after(&[h.id()]))?;
            self.hashes.push(h);
            self.regs.push(reg);
        }
        let ids: Vec<ObjectId> = self.regs.iter().map(|r| r.id()).collect();
        let over = d.gateway("over_threshold", Gress::Ingress, &ids)?;
        self.dedup = Some(BloomDedup::declare(
            d,
            "reported",
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
        pkt: &mut PacketCtx<Parsed, HeavyReport>,
        dp: &mut DataPlane<'_>,
    ) -> Result<(), AccessError> {
        pkt.forward(self.path.egress(pkt.ingress_port()));
        let p = pkt.meta;
        if !p.ipv4 || self.regs.is_empty() {
            return Ok(());
        }
        let key = p.five_tuple();
        let base = self.tenant(p.vlan) * self.slots as u64;
        let mask = self.slots as u64 - 1;
        let mut est = u32::MAX;
        for r in 0..self.regs.len() {
            let h = ROW_HASHES.with_input(r, &key, |input| dp.hash(self.hashes[r], input))?;
            est = est.min(dp.register(self.regs[r], base + (h & mask), sketch::count)?);
        }
        if est < self.threshold {
            return Ok(());
        }
        let Some(dedup) = self.dedup else {
            return Ok(());
        };
        let mut dkey = [0u8; 15];
        dkey[..2].copy_from_slice(&p.vlan.to_be_bytes());
        dkey[2..].copy_from_slice(&key);
        if dedup.insert(dp, &dkey)? {
            pkt.digest(HeavyReport {
                vlan: p.vlan,
                key,
                estimate: est,
            });
        }
        Ok(())
    }

    fn control(&mut self, event: ControlEvent<HeavyReport>, cp: &mut ControlPlane<'_>) {
        match event {
            ControlEvent::Start if self.epoch > 0 => {
                cp.set_timer(cp.now() + self.epoch, TOKEN_EPOCH);
            }
            ControlEvent::Digest(report) => {
                if self.seen.insert((self.epoch_no, report.vlan, report.key)) {
                    self.reports.push(Reported {
                        epoch: self.epoch_no,
                        at: cp.now(),
                        report,
                    });
                } else {
                    self.duplicate_reports += 1;
                }
            }
            ControlEvent::Timer { token: TOKEN_EPOCH } => {
                let entries = (self.vlans * self.slots) as u64;
                for &r in &self.regs {
                    cp.register_clear(r, entries);
                }
                if let Some(d) = self.dedup {
                    d.clear(cp);
                }
                self.epoch_no += 1;
                if self.epoch > 0 {
                    cp.set_timer(cp.now() + self.epoch, TOKEN_EPOCH);
                }
            }
            _ => {}
        }
    }
}
