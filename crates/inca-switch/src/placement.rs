//! The resource model: placing a program's objects into pipeline stages.
//!
//! Two steps:
//!
//! 1. [`demand`] says what one object needs: memory blocks (SRAM, TCAM, map
//!    RAM), stateful ALUs, hash bits, crossbar bytes, gateways, logical tables
//!    and, from its [`ObjectDecl`], VLIW slots; plus the bytes of state it
//!    holds (which is what counts on a device that keeps state in DRAM).
//! 2. [`place`] assigns every object of a program to stages of a
//!    [`Profile`] (or to DRAM on run-to-completion devices) and returns a
//!    [`Placement`], whose `Display` is the resource report `inca check`
//!    prints, or a [`PlacementError`] that names the object, the resource and
//!    the shortfall.
//!
//! The model follows the RMT architecture (Bosshart et al., "Forwarding
//! Metamorphosis: Fast Programmable Match-Action Processing in Hardware for
//! SDN", SIGCOMM 2013) and its compiler (Jose et al., "Compiling Packet
//! Programs to Reconfigurable Switches", NSDI 2015): each stage has its own
//! match memories, crossbars, hash units and action ALUs; a table that needs
//! the result of another must sit in a later stage; a large table may be
//! spread over consecutive stages. Numbers that come from no source are
//! marked "[our choice]" where they are defined.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fmt;

use serde::Serialize;

use crate::profile::Profile;
use crate::resources::{
    Resource, ResourceVec, MAP_RAM_BLOCK_WORDS, SRAM_BLOCK_WORDS, SRAM_WORD_BITS, TCAM_BLOCK_WORDS,
    TCAM_WORD_BITS,
};
use crate::table::MatchKind;

/// Which pipeline an object belongs to. On a Tofino-class switch the two
/// share the physical stages, but a register used in ingress cannot be
/// reached from egress, and dependency chains are per pipeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Gress {
    /// The ingress pipeline (before the traffic manager).
    Ingress,
    /// The egress pipeline (after the traffic manager).
    Egress,
}

/// What kind of object, with the sizes that decide its resource needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ObjectKind {
    /// A match-action table.
    Table {
        /// How it matches.
        kind: MatchKind,
        /// Width of the match key, bits.
        key_bits: u32,
        /// Width of the action data stored per entry, bits.
        action_data_bits: u32,
        /// Maximum number of entries.
        entries: u64,
        /// Idle-timeout aging is enabled (costs map RAM).
        idle_timeout: bool,
    },
    /// A register array driven by a stateful ALU.
    Register {
        /// Width of one entry: 8, 16, 32, or 64 (a pair of 32-bit values).
        value_bits: u32,
        /// Number of entries.
        entries: u64,
    },
    /// A packet-and-byte counter array.
    Counter {
        /// Number of entries.
        entries: u64,
    },
    /// An RFC 2698 meter array.
    Meter {
        /// Number of entries.
        entries: u64,
    },
    /// A hash unit producing `output_bits` bits (CRC16/32/64).
    Hash {
        /// Width of the output used by the program.
        output_bits: u32,
    },
    /// A condition evaluated by a gateway (an `if` in the control flow).
    Gateway,
}

/// An object as a program declares it for placement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectDecl {
    /// The object's name, unique within the program (used in reports and
    /// errors).
    pub name: String,
    /// What it is and how big.
    pub kind: ObjectKind,
    /// The pipeline it is used in.
    pub gress: Gress,
    /// Indices (into the same declaration list) of objects whose result this
    /// one needs: it must be placed in a later stage than all of them.
    pub after: Vec<usize>,
    /// VLIW instruction slots its actions use.
    pub vliw_slots: u32,
}

// ---------------------------------------------------------------------------
// Demand
// ---------------------------------------------------------------------------

/// Bits of per-entry overhead in an exact-match word: a valid bit and
/// version bits [our choice: 4 bits; RMT and Tofino store a few such bits per
/// entry, the exact number depends on the layout].
pub const EXACT_ENTRY_OVERHEAD_BITS: u64 = 4;
/// Action data up to this width is stored inline in the match word; wider
/// action data goes to separate action-data SRAM words [our choice].
pub const INLINE_ACTION_DATA_MAX_BITS: u64 = 64;
/// Number of cuckoo-hash ways of an exact-match table (RMT's exact-match
/// tables are 4-way cuckoo hash tables, Bosshart et al. SIGCOMM 2013).
pub const CUCKOO_WAYS: u64 = 4;
/// Hash bits that select a word within one SRAM block (log2 of 1,024 words;
/// `RAM_LINE_SELECT_BITS = 10` in the Tofino compiler source).
pub const ROW_SELECT_BITS: u64 = 10;
/// Idle-timeout entries whose state one map-RAM word holds [our choice: 2
/// bits of idle state per entry, 4 entries per word].
pub const IDLE_ENTRIES_PER_MAP_WORD: u64 = 4;
/// Meter colours one map-RAM word holds [our choice: 2-bit colour, 4 per
/// word].
pub const METER_COLOURS_PER_MAP_WORD: u64 = 4;
/// Bits of SRAM per counter entry: 64-bit packet count + 64-bit byte count.
pub const COUNTER_ENTRY_BITS: u64 = 128;
/// Bits of SRAM per meter entry (RFC 2698 two buckets with their rates and
/// timestamps) [our choice: one 128-bit word].
pub const METER_ENTRY_BITS: u64 = 128;
/// Range keys are widened by this factor in TCAM (Tofino encodes ranges
/// nibble by nibble; we charge twice the key width) [our choice].
pub const RANGE_KEY_EXPANSION: u64 = 2;

/// What one object needs.
///
/// `memory` holds only SRAM, TCAM and map-RAM blocks; a table may split
/// those across consecutive stages. `per_stage` holds everything else
/// (stateful ALUs, hash bits, crossbar bytes, VLIW slots, gateways, logical
/// tables), which the object pays in *every* stage it occupies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Demand {
    /// SRAM, TCAM and map-RAM blocks in total.
    pub memory: ResourceVec,
    /// Costs paid in each stage the object occupies.
    pub per_stage: ResourceVec,
    /// Bytes of state (what the object takes in DRAM on a run-to-completion
    /// device).
    pub bytes: u64,
    /// Whether the memory may be split across consecutive stages (match
    /// tables yes; register, counter and meter arrays no, because a stateful
    /// ALU reaches only its own stage's memory).
    pub splittable: bool,
}

impl Demand {
    /// What the object needs when it sits in one stage.
    pub fn in_one_stage(&self) -> ResourceVec {
        self.memory + self.per_stage
    }
}

fn div_ceil(a: u64, b: u64) -> u64 {
    if b == 0 {
        0
    } else {
        a.div_ceil(b)
    }
}

/// ⌈log2(n)⌉ (0 for n ≤ 1).
fn ceil_log2(n: u64) -> u64 {
    if n <= 1 {
        0
    } else {
        64 - u64::from((n - 1).leading_zeros())
    }
}

/// SRAM blocks for `entries` entries of `width` bits packed into
/// 128-bit words: ⌊128/width⌋ entries per word when an entry fits in a word,
/// else ⌈width/128⌉ words per entry; blocks = ⌈entries / (1,024 ·
/// entries_per_word)⌉ · words_per_entry. Returns `(rows, words_per_entry)`,
/// where `rows` is the number of blocks one word-column needs.
fn sram_packing(entries: u64, width_bits: u64) -> (u64, u64) {
    if entries == 0 || width_bits == 0 {
        return (0, 0);
    }
    let (per_word, words_per_entry) = if width_bits <= SRAM_WORD_BITS {
        (SRAM_WORD_BITS / width_bits, 1)
    } else {
        (1, div_ceil(width_bits, SRAM_WORD_BITS))
    };
    (
        div_ceil(entries, SRAM_BLOCK_WORDS * per_word),
        words_per_entry,
    )
}

fn sram_blocks(entries: u64, width_bits: u64) -> u64 {
    let (rows, words) = sram_packing(entries, width_bits);
    rows * words
}

/// What one object of kind `kind` needs on `profile`, without its VLIW slots
/// (those come from the declaration: see [`ObjectDecl::demand`]).
///
/// The block geometry is global ([`SRAM_BLOCK_WORDS`] × [`SRAM_WORD_BITS`],
/// [`TCAM_BLOCK_WORDS`] × [`TCAM_WORD_BITS`]), so the demand is the same on
/// every profile; `profile` is taken so that a profile-specific geometry can
/// be added without changing callers. Formulas:
///
/// **Exact table** (SRAM, hashed). Entry width
/// `w = key_bits + 4 (overhead) + action_data_bits` when the action data is
/// at most 64 bits (stored inline), else `w = key_bits + 4` and the action
/// data lives in separate SRAM words packed the same way. Packing into
/// 128-bit words: `⌊128/w⌋` entries per word if `w ≤ 128`, else `⌈w/128⌉`
/// words per entry. `rows = ⌈entries / (1,024 · entries_per_word)⌉`; because
/// RMT exact-match tables are 4-way cuckoo hash tables, `rows` is rounded up
/// to a multiple of 4 when it exceeds 1 (one block per way at least);
/// `SRAM = rows · words_per_entry (+ action-data blocks)`.
/// Hash bits: per way, 10 bits to select a word in a block plus
/// `⌈log2(rows/ways)⌉` to select the block of that way, where
/// `ways = min(4, rows)`. Exact crossbar: `⌈key_bits/8⌉` bytes. Idle
/// timeout: `⌈entries / (1,024 · 4)⌉` map-RAM blocks. One logical table.
///
/// **Ternary / LPM table** (TCAM). `TCAM = ⌈entries/512⌉ · ⌈key_bits/44⌉`;
/// action data in SRAM, `⌈entries / (1,024 · ⌊128/ad⌋)⌉` blocks (wide action
/// data: `⌈ad/128⌉` words per entry); ternary crossbar `⌈key_bits/8⌉` bytes;
/// idle timeout as for exact; one logical table. **Range**: as ternary with
/// the key widened ×2 in TCAM (range expansion [our choice]); the crossbar
/// still carries the raw key.
///
/// **Register** (`value_bits` × `entries`): `SRAM = ⌈entries · value_bits /
/// (1,024 · 128)⌉ + 1` — the extra block stands for the spare RAM a stateful
/// table needs for read-modify-write at line rate [our choice: one spare per
/// array, not taken from a public document]; map RAM = the same number of
/// blocks [our choice]; 1 stateful ALU; `⌈log2(entries)⌉` hash bits for the
/// index. Must sit in one stage.
///
/// **Counter**: 128 bits (64-bit packets + 64-bit bytes) per entry in SRAM,
/// `⌈entries/1,024⌉` blocks; no stateful ALU (counters use the stage's
/// statistics ALUs, which the model does not count); `⌈log2(entries)⌉` hash
/// bits for the index. One stage.
///
/// **Meter**: 128 bits per entry in SRAM (`⌈entries/1,024⌉` blocks), one
/// stateful (meter) ALU, `⌈entries / (1,024 · 4)⌉` map-RAM blocks for the
/// colours, `⌈log2(entries)⌉` hash bits. One stage.
///
/// **Hash**: `output_bits` hash bits. **Gateway**: one gateway.
///
/// Registers, counters, meters, hashes and gateways take no logical table of
/// their own: they are reached from a table's action or attach to a table
/// [our choice].
///
/// `bytes` is the raw state: exact `entries · ⌈(key + 4 + ad)/8⌉`; ternary
/// and range `entries · ⌈(2·key + ad)/8⌉` (value and mask, or low and high
/// bound); register `⌈entries · value_bits / 8⌉`; counter and meter
/// `16 · entries`; hash and gateway 0.
pub fn demand(kind: &ObjectKind, profile: &Profile) -> Demand {
    let _ = profile;
    let mut memory = ResourceVec::ZERO;
    let mut per_stage = ResourceVec::ZERO;
    let bytes;
    let mut splittable = false;
    match *kind {
        ObjectKind::Table {
            kind: mk,
            key_bits,
            action_data_bits,
            entries,
            idle_timeout,
        } => {
            let key = u64::from(key_bits);
            let ad = u64::from(action_data_bits);
            splittable = true;
            per_stage[Resource::LogicalTables] = 1;
            if idle_timeout {
                memory[Resource::MapRamBlocks] =
                    div_ceil(entries, MAP_RAM_BLOCK_WORDS * IDLE_ENTRIES_PER_MAP_WORD);
            }
            match mk {
                MatchKind::Exact => {
                    let inline = ad <= INLINE_ACTION_DATA_MAX_BITS;
                    let width = key + EXACT_ENTRY_OVERHEAD_BITS + if inline { ad } else { 0 };
                    let (mut rows, words) = sram_packing(entries, width);
                    if rows > 1 {
                        rows = rows.next_multiple_of(CUCKOO_WAYS);
                    }
                    let action_blocks = if inline { 0 } else { sram_blocks(entries, ad) };
                    memory[Resource::SramBlocks] = rows * words + action_blocks;
                    if rows > 0 {
                        let ways = rows.min(CUCKOO_WAYS);
                        per_stage[Resource::HashBits] =
                            ways * (ROW_SELECT_BITS + ceil_log2(div_ceil(rows, ways)));
                    }
                    per_stage[Resource::ExactXbarBytes] = div_ceil(key, 8);
                    bytes =
                        entries.saturating_mul(div_ceil(key + EXACT_ENTRY_OVERHEAD_BITS + ad, 8));
                }
                MatchKind::Ternary | MatchKind::Lpm | MatchKind::Range => {
                    let tcam_key = if mk == MatchKind::Range {
                        key * RANGE_KEY_EXPANSION
                    } else {
                        key
                    };
                    memory[Resource::TcamBlocks] = div_ceil(entries, TCAM_BLOCK_WORDS)
                        * div_ceil(tcam_key.max(1), TCAM_WORD_BITS);
                    memory[Resource::SramBlocks] = sram_blocks(entries, ad);
                    per_stage[Resource::TernaryXbarBytes] = div_ceil(key, 8);
                    bytes = entries.saturating_mul(div_ceil(2 * key + ad, 8));
                }
            }
        }
        ObjectKind::Register {
            value_bits,
            entries,
        } => {
            let bits = entries.saturating_mul(u64::from(value_bits));
            let blocks = div_ceil(bits, SRAM_BLOCK_WORDS * SRAM_WORD_BITS) + 1;
            memory[Resource::SramBlocks] = blocks;
            memory[Resource::MapRamBlocks] = blocks;
            per_stage[Resource::StatefulAlus] = 1;
            per_stage[Resource::HashBits] = ceil_log2(entries);
            bytes = div_ceil(bits, 8);
        }
        ObjectKind::Counter { entries } => {
            memory[Resource::SramBlocks] = sram_blocks(entries, COUNTER_ENTRY_BITS);
            per_stage[Resource::HashBits] = ceil_log2(entries);
            bytes = entries.saturating_mul(COUNTER_ENTRY_BITS / 8);
        }
        ObjectKind::Meter { entries } => {
            memory[Resource::SramBlocks] = sram_blocks(entries, METER_ENTRY_BITS);
            memory[Resource::MapRamBlocks] =
                div_ceil(entries, MAP_RAM_BLOCK_WORDS * METER_COLOURS_PER_MAP_WORD);
            per_stage[Resource::StatefulAlus] = 1;
            per_stage[Resource::HashBits] = ceil_log2(entries);
            bytes = entries.saturating_mul(METER_ENTRY_BITS / 8);
        }
        ObjectKind::Hash { output_bits } => {
            per_stage[Resource::HashBits] = u64::from(output_bits);
            bytes = 0;
        }
        ObjectKind::Gateway => {
            per_stage[Resource::Gateways] = 1;
            bytes = 0;
        }
    }
    Demand {
        memory,
        per_stage,
        bytes,
        splittable,
    }
}

impl ObjectDecl {
    /// [`demand`] of this object's kind plus its VLIW slots.
    pub fn demand(&self, profile: &Profile) -> Demand {
        let mut d = demand(&self.kind, profile);
        d.per_stage[Resource::VliwSlots] += u64::from(self.vliw_slots);
        d
    }
}

impl ObjectKind {
    /// The noun used in reports and errors: "table", "register", …
    pub fn noun(&self) -> &'static str {
        match self {
            ObjectKind::Table { .. } => "table",
            ObjectKind::Register { .. } => "register",
            ObjectKind::Counter { .. } => "counter",
            ObjectKind::Meter { .. } => "meter",
            ObjectKind::Hash { .. } => "hash",
            ObjectKind::Gateway => "gateway",
        }
    }

    /// The number of entries, for kinds that have one.
    pub fn entries(&self) -> Option<u64> {
        match *self {
            ObjectKind::Table { entries, .. }
            | ObjectKind::Register { entries, .. }
            | ObjectKind::Counter { entries }
            | ObjectKind::Meter { entries } => Some(entries),
            ObjectKind::Hash { .. } | ObjectKind::Gateway => None,
        }
    }

    /// The same kind with `n` entries (unchanged for kinds without entries).
    pub fn with_entries(&self, n: u64) -> ObjectKind {
        let mut k = self.clone();
        match &mut k {
            ObjectKind::Table { entries, .. }
            | ObjectKind::Register { entries, .. }
            | ObjectKind::Counter { entries }
            | ObjectKind::Meter { entries } => *entries = n,
            ObjectKind::Hash { .. } | ObjectKind::Gateway => {}
        }
        k
    }

    /// A one-line summary: `exact table, 104 b key, 48 b data, 65,536 entries`.
    pub fn summary(&self) -> String {
        match *self {
            ObjectKind::Table {
                kind,
                key_bits,
                action_data_bits,
                entries,
                idle_timeout,
            } => {
                let mk = match kind {
                    MatchKind::Exact => "exact",
                    MatchKind::Ternary => "ternary",
                    MatchKind::Lpm => "LPM",
                    MatchKind::Range => "range",
                };
                format!(
                    "{mk} table, {key_bits} b key, {action_data_bits} b data, {} entries{}",
                    thousands(entries),
                    if idle_timeout { ", idle timeout" } else { "" }
                )
            }
            ObjectKind::Register {
                value_bits,
                entries,
            } => format!("register, {} × {value_bits} b", thousands(entries)),
            ObjectKind::Counter { entries } => format!("counter, {} entries", thousands(entries)),
            ObjectKind::Meter { entries } => format!("meter, {} entries", thousands(entries)),
            ObjectKind::Hash { output_bits } => format!("hash, {output_bits} b output"),
            ObjectKind::Gateway => "gateway".to_string(),
        }
    }
}

/// `1234567` → `"1,234,567"`.
pub fn thousands(n: u64) -> String {
    let s = n.to_string();
    let groups: Vec<&str> = s
        .as_bytes()
        .rchunks(3)
        .rev()
        .map(|g| std::str::from_utf8(g).expect("ASCII digits"))
        .collect();
    groups.join(",")
}

fn stage_range(first: u32, last: u32) -> String {
    if first == last {
        format!("stage {first}")
    } else {
        format!("stages {first}–{last}")
    }
}

// ---------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------

/// An object that needs more of a resource than is free.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Shortfall {
    /// The object's name.
    pub object: String,
    /// Its noun ("table", "register", …).
    pub noun: &'static str,
    /// The resource it is short of.
    pub resource: Resource,
    /// How much of it the object needs (in one stage if `single_stage`).
    pub needed: u64,
    /// How much is free (in the best single stage if `single_stage`, else in
    /// the stages `first_stage..=last_stage` together).
    pub free: u64,
    /// First stage the object could have used (its dependencies allow no
    /// earlier one).
    pub first_stage: u32,
    /// Last stage of the device.
    pub last_stage: u32,
    /// The amount is needed within one stage (a stateful object, or a cost
    /// paid in every stage).
    pub single_stage: bool,
    /// The largest size that would have fitted, if the object has a size.
    pub max_entries: Option<u64>,
}

impl fmt::Display for Shortfall {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let short = self.needed.saturating_sub(self.free);
        let pct = if self.free == 0 {
            String::from("none free")
        } else {
            format!("{:.0}%", 100.0 * self.needed as f64 / self.free as f64)
        };
        write!(
            f,
            "{} \"{}\" does not fit: it needs {} {}",
            self.noun,
            self.object,
            thousands(self.needed),
            self.resource
        )?;
        if self.single_stage {
            write!(
                f,
                " in one stage but the most any of {} has free is {} (short by {} {}, {})",
                stage_range(self.first_stage, self.last_stage),
                thousands(self.free),
                thousands(short),
                self.resource,
                pct
            )?;
        } else {
            let verb = if self.first_stage == self.last_stage {
                "has"
            } else {
                "have"
            };
            write!(
                f,
                " but {} {verb} {} free (short by {} {}, {})",
                stage_range(self.first_stage, self.last_stage),
                thousands(self.free),
                thousands(short),
                self.resource,
                pct
            )?;
        }
        if let Some(n) = self.max_entries {
            write!(f, "; reduce its size to at most {} entries", thousands(n))?;
        }
        Ok(())
    }
}

/// Why a program could not be placed. `Display` is the explanation shown to
/// the user.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize)]
pub enum PlacementError {
    /// Not enough of a resource free where the object could go.
    #[error("{0}")]
    DoesNotFit(Shortfall),
    /// A stateful object (register, counter, meter) needs more than a whole
    /// empty stage holds.
    #[error(
        "{noun} \"{object}\" needs {} {resource} but one stage holds only {}: a {noun} array must sit in a single stage, because its ALU reaches only its own stage's memory{}",
        thousands(*.needed), thousands(*.capacity),
        .max_entries.map(|n| format!("; reduce it to at most {} entries", thousands(n))).unwrap_or_default()
    )]
    ExceedsStage {
        /// The object's name.
        object: String,
        /// Its noun.
        noun: &'static str,
        /// The resource.
        resource: Resource,
        /// What it needs.
        needed: u64,
        /// What one empty stage has.
        capacity: u64,
        /// The largest size that would fit in one stage.
        max_entries: Option<u64>,
    },
    /// A chain of dependent objects needs more stages than the device has.
    #[error(
        "dependency chain {} needs {needed} stages but profile \"{profile}\" has {stages}",
        .chain.join(" → ")
    )]
    DependencyChainTooLong {
        /// The objects of the chain, first to last.
        chain: Vec<String>,
        /// Stages the chain needs.
        needed: u32,
        /// Stages the device has.
        stages: u32,
        /// The profile's name.
        profile: String,
    },
    /// An `after` index points past the declaration list.
    #[error("object \"{object}\" depends on object #{index}, but the program declares only {count} objects")]
    UnknownDependency {
        /// The object with the bad dependency.
        object: String,
        /// The bad index.
        index: usize,
        /// Number of declared objects.
        count: usize,
    },
    /// The dependencies form a cycle.
    #[error("dependency cycle: {} → {}", .cycle.join(" → "), .cycle.first().map(String::as_str).unwrap_or(""))]
    Cycle {
        /// The objects of the cycle, each depending on the previous one.
        cycle: Vec<String>,
    },
    /// The object needs a feature the device lacks.
    #[error("{noun} \"{object}\" needs {feature}, which profile \"{profile}\" does not have")]
    MissingFeature {
        /// The object's name.
        object: String,
        /// Its noun.
        noun: &'static str,
        /// The feature (e.g. "ternary/LPM/range matching").
        feature: &'static str,
        /// The profile's name.
        profile: String,
    },
    /// Not enough DRAM left for the object.
    #[error(
        "{noun} \"{object}\" does not fit: it needs {} bytes of DRAM but only {} of {} are free (short by {} bytes){}",
        thousands(*.needed), thousands(*.free), thousands(*.total), thousands(.needed.saturating_sub(*.free)),
        .max_entries.map(|n| format!("; reduce its size to at most {} entries", thousands(n))).unwrap_or_default()
    )]
    DramExhausted {
        /// The object's name.
        object: String,
        /// Its noun.
        noun: &'static str,
        /// Bytes it needs.
        needed: u64,
        /// Bytes free.
        free: u64,
        /// The device's DRAM.
        total: u64,
        /// The largest size that would fit.
        max_entries: Option<u64>,
    },
}

// ---------------------------------------------------------------------------
// Placement result
// ---------------------------------------------------------------------------

/// Where an object ended up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Location {
    /// In pipeline stages `first..=last` (on-chip memory).
    Stages {
        /// First stage.
        first: u32,
        /// Last stage.
        last: u32,
    },
    /// Its state is in DRAM (run-to-completion devices); its per-stage costs
    /// are in stage 0.
    Dram {
        /// Bytes of DRAM it takes.
        bytes: u64,
    },
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Location::Stages { first, last } => f.write_str(&stage_range(first, last)),
            Location::Dram { bytes } => write!(f, "DRAM ({} B)", thousands(bytes)),
        }
    }
}

/// One placed object.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PlacedObject {
    /// Its name.
    pub name: String,
    /// A one-line summary of its kind and size.
    pub kind: String,
    /// Its pipeline.
    pub gress: Gress,
    /// Where it is.
    pub location: Location,
    /// What it needs.
    pub demand: Demand,
    /// What it takes in each stage it occupies: `(stage, amounts)`.
    pub stage_use: Vec<(u32, ResourceVec)>,
}

impl PlacedObject {
    /// The first stage it occupies (0 for objects in DRAM).
    pub fn first_stage(&self) -> u32 {
        match self.location {
            Location::Stages { first, .. } => first,
            Location::Dram { .. } => 0,
        }
    }

    /// The last stage it occupies (0 for objects in DRAM).
    pub fn last_stage(&self) -> u32 {
        match self.location {
            Location::Stages { last, .. } => last,
            Location::Dram { .. } => 0,
        }
    }
}

/// A program placed on a profile: the resource report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Placement {
    /// The profile's name.
    pub profile: String,
    /// Number of stages.
    pub stages: u32,
    /// Whether the device runs packets to completion (one "stage", DRAM).
    pub run_to_completion: bool,
    /// The objects, in declaration order.
    pub objects: Vec<PlacedObject>,
    /// The budget of one stage.
    pub stage_budget: ResourceVec,
    /// What is used in each stage.
    pub stage_usage: Vec<ResourceVec>,
    /// Total used over all stages.
    pub used: ResourceVec,
    /// Total available over all stages (budget × stages).
    pub available: ResourceVec,
    /// DRAM bytes used.
    pub dram_used: u64,
    /// DRAM bytes of the device.
    pub dram_bytes: u64,
    /// What each block of a composite program uses (empty for a program
    /// without blocks); see [`crate::block_report`].
    pub blocks: Vec<crate::block_report::BlockUsage>,
}

impl Placement {
    /// Fraction (0..=1) of resource `r` used over the whole device (0 when
    /// the device has none of it).
    pub fn utilisation(&self, r: Resource) -> f64 {
        if self.available[r] == 0 {
            0.0
        } else {
            self.used[r] as f64 / self.available[r] as f64
        }
    }

    /// Fraction of the device's DRAM used.
    pub fn dram_utilisation(&self) -> f64 {
        if self.dram_bytes == 0 {
            0.0
        } else {
            self.dram_used as f64 / self.dram_bytes as f64
        }
    }

    /// The object named `name`.
    pub fn object(&self, name: &str) -> Option<&PlacedObject> {
        self.objects.iter().find(|o| o.name == name)
    }
}

fn pct(used: u64, avail: u64) -> String {
    if avail == 0 {
        "-".to_string()
    } else {
        format!("{:.1}", 100.0 * used as f64 / avail as f64)
    }
}

fn big(n: u64) -> String {
    if n >= u64::MAX / 8 {
        "unlimited".to_string()
    } else {
        thousands(n)
    }
}

impl fmt::Display for Placement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "Resource report: profile \"{}\", {} {}",
            self.profile,
            self.stages,
            if self.run_to_completion {
                "stage (run to completion)"
            } else {
                "stages (pipelined)"
            }
        )?;
        writeln!(f)?;
        writeln!(
            f,
            "{:<24} {:>14} {:>14} {:>7}",
            "resource", "used", "available", "%"
        )?;
        for r in Resource::ALL {
            writeln!(
                f,
                "{:<24} {:>14} {:>14} {:>7}",
                r.name(),
                thousands(self.used[r]),
                big(self.available[r]),
                pct(self.used[r], self.available[r])
            )?;
        }
        if self.run_to_completion {
            writeln!(
                f,
                "{:<24} {:>14} {:>14} {:>7}",
                "DRAM bytes",
                thousands(self.dram_used),
                thousands(self.dram_bytes),
                pct(self.dram_used, self.dram_bytes)
            )?;
        }
        writeln!(f)?;
        write!(f, "{:<6}", "stage")?;
        for r in Resource::ALL {
            write!(f, " {:>7}", r.short_name())?;
        }
        writeln!(f)?;
        for (s, u) in self.stage_usage.iter().enumerate() {
            write!(f, "{:<6}", s)?;
            for r in Resource::ALL {
                write!(f, " {:>7}", u[r])?;
            }
            writeln!(f)?;
        }
        write!(f, "{:<6}", "budget")?;
        for r in Resource::ALL {
            let b = self.stage_budget[r];
            if b >= u64::MAX / 8 {
                write!(f, " {:>7}", "-")?;
            } else {
                write!(f, " {:>7}", b)?;
            }
        }
        writeln!(f)?;
        writeln!(f)?;
        if !self.blocks.is_empty() {
            let table = crate::block_report::BlockTable(&self.blocks, self.run_to_completion);
            write!(f, "{table}")?;
            writeln!(f)?;
        }
        let w = self
            .objects
            .iter()
            .map(|o| o.name.len())
            .max()
            .unwrap_or(4)
            .max(6);
        writeln!(f, "{:<w$}  {:<8} {:<22} kind", "object", "gress", "where")?;
        for o in &self.objects {
            let g = match o.gress {
                Gress::Ingress => "ingress",
                Gress::Egress => "egress",
            };
            writeln!(
                f,
                "{:<w$}  {:<8} {:<22} {}",
                o.name,
                g,
                o.location.to_string(),
                o.kind
            )?;
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------
// Placement algorithm
// ---------------------------------------------------------------------------

/// Places `decls` on `profile`. See the module documentation and
/// [`demand`]. Pipelined profiles: objects are taken in topological order of
/// `after` (ties in declaration order); each goes to the earliest stage after
/// all its dependencies where it fits the remaining per-stage budget; a
/// match table may spread its memory over consecutive stages, paying its
/// per-stage costs in each; registers, counters and meters sit in one stage.
/// Ingress and egress objects share the stages; every declared dependency is
/// honoured, whatever the gress of its two ends [our choice: conservative].
/// Run-to-completion profiles: one stage; dependencies impose nothing; an
/// object's memory stays on chip while it fits, else its `bytes` go to DRAM.
pub fn place(profile: &Profile, decls: &[ObjectDecl]) -> Result<Placement, PlacementError> {
    let order = topological_order(decls)?;
    let demands: Vec<Demand> = decls.iter().map(|d| d.demand(profile)).collect();
    for d in decls {
        check_features(profile, d)?;
    }
    let stages = if profile.run_to_completion {
        1
    } else {
        profile.stages
    };
    let mut st = State {
        usage: vec![ResourceVec::ZERO; stages as usize],
        budget: profile.stage_budget,
        dram_used: 0,
    };
    let mut placed: Vec<Option<PlacedObject>> = vec![None; decls.len()];
    if profile.run_to_completion {
        for &i in &order {
            placed[i] = Some(place_rtc(profile, &mut st, &decls[i], &demands[i])?);
        }
    } else {
        check_chain_length(profile, decls, &order)?;
        // For each object, the dependency that fixed its earliest stage
        // (to name the chain when it runs past the last stage).
        let mut pushed_by: Vec<Option<usize>> = vec![None; decls.len()];
        for &i in &order {
            let d = &decls[i];
            let mut earliest = 0u32;
            for &j in &d.after {
                let p = placed[j].as_ref().expect("dependencies are placed first");
                let after_dep = p.last_stage() + 1;
                if pushed_by[i].is_none() || after_dep > earliest {
                    pushed_by[i] = Some(j);
                    earliest = earliest.max(after_dep);
                }
            }
            if earliest >= stages {
                let mut chain = vec![d.name.clone()];
                let mut cur = i;
                while let Some(j) = pushed_by[cur] {
                    chain.push(decls[j].name.clone());
                    cur = j;
                }
                chain.reverse();
                return Err(PlacementError::DependencyChainTooLong {
                    chain,
                    needed: earliest + 1,
                    stages,
                    profile: profile.name.clone(),
                });
            }
            placed[i] = Some(place_pipelined(profile, &mut st, d, &demands[i], earliest)?);
        }
    }
    let objects: Vec<PlacedObject> = placed.into_iter().map(|p| p.expect("all placed")).collect();
    let used: ResourceVec = st.usage.iter().copied().sum();
    Ok(Placement {
        profile: profile.name.clone(),
        stages,
        run_to_completion: profile.run_to_completion,
        objects,
        stage_budget: profile.stage_budget,
        stage_usage: st.usage,
        used,
        available: profile.stage_budget * u64::from(stages),
        dram_used: st.dram_used,
        dram_bytes: profile.dram_bytes,
        blocks: Vec::new(),
    })
}

struct State {
    usage: Vec<ResourceVec>,
    budget: ResourceVec,
    dram_used: u64,
}

impl State {
    fn free(&self, stage: usize) -> ResourceVec {
        self.budget - self.usage[stage]
    }
}

fn check_features(profile: &Profile, d: &ObjectDecl) -> Result<(), PlacementError> {
    if let ObjectKind::Table { kind, .. } = d.kind {
        if kind != MatchKind::Exact && !profile.features.ternary_match {
            return Err(PlacementError::MissingFeature {
                object: d.name.clone(),
                noun: d.kind.noun(),
                feature: "ternary/LPM/range matching (features.ternary_match)",
                profile: profile.name.clone(),
            });
        }
    }
    Ok(())
}

/// Kahn's algorithm, smallest index first among the ready ones.
fn topological_order(decls: &[ObjectDecl]) -> Result<Vec<usize>, PlacementError> {
    let n = decls.len();
    let mut indeg = vec![0usize; n];
    let mut users: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (i, d) in decls.iter().enumerate() {
        for &j in &d.after {
            if j >= n {
                return Err(PlacementError::UnknownDependency {
                    object: d.name.clone(),
                    index: j,
                    count: n,
                });
            }
            indeg[i] += 1;
            users[j].push(i);
        }
    }
    let mut ready: BinaryHeap<Reverse<usize>> =
        (0..n).filter(|&i| indeg[i] == 0).map(Reverse).collect();
    let mut order = Vec::with_capacity(n);
    while let Some(Reverse(i)) = ready.pop() {
        order.push(i);
        for &u in &users[i] {
            indeg[u] -= 1;
            if indeg[u] == 0 {
                ready.push(Reverse(u));
            }
        }
    }
    if order.len() == n {
        return Ok(order);
    }
    // Some objects remain: walk `after` edges among them until one repeats.
    let start = (0..n).find(|&i| indeg[i] > 0).expect("a remaining object");
    let mut path = vec![start];
    let mut cur = start;
    loop {
        let next = *decls[cur]
            .after
            .iter()
            .find(|&&j| indeg[j] > 0)
            .expect("an object left by Kahn's algorithm has a remaining dependency");
        if let Some(pos) = path.iter().position(|&p| p == next) {
            // path[pos..] each depends on the next; report in dependency
            // order (each depending on the previous one).
            let mut cycle: Vec<String> =
                path[pos..].iter().map(|&k| decls[k].name.clone()).collect();
            cycle.reverse();
            return Err(PlacementError::Cycle { cycle });
        }
        path.push(next);
        cur = next;
    }
}

/// Rejects a dependency chain with more objects than stages, naming it.
fn check_chain_length(
    profile: &Profile,
    decls: &[ObjectDecl],
    order: &[usize],
) -> Result<(), PlacementError> {
    let n = decls.len();
    let mut len = vec![1u32; n];
    let mut prev: Vec<Option<usize>> = vec![None; n];
    for &i in order {
        for &j in &decls[i].after {
            if len[j] + 1 > len[i] {
                len[i] = len[j] + 1;
                prev[i] = Some(j);
            }
        }
    }
    if let Some(end) = (0..n).max_by_key(|&i| (len[i], Reverse(i))) {
        if len[end] > profile.stages {
            let mut chain = vec![decls[end].name.clone()];
            let mut cur = end;
            while let Some(j) = prev[cur] {
                chain.push(decls[j].name.clone());
                cur = j;
            }
            chain.reverse();
            return Err(PlacementError::DependencyChainTooLong {
                chain,
                needed: len[end],
                stages: profile.stages,
                profile: profile.name.clone(),
            });
        }
    }
    Ok(())
}

/// Tries to put an object with demand `dm` into the stages from `earliest`
/// on, given the current usage. Returns the per-stage allocation.
fn try_fit(st: &State, dm: &Demand, earliest: u32) -> Option<Vec<(u32, ResourceVec)>> {
    let stages = st.usage.len() as u32;
    let whole = dm.in_one_stage();
    if !dm.splittable || dm.memory.is_zero() {
        return (earliest..stages)
            .find(|&s| whole.fits_in(&st.free(s as usize)))
            .map(|s| vec![(s, whole)]);
    }
    // A whole-table fit in one stage is preferred over a split only by being
    // earliest: a split starting earlier wins [our choice: earliest start].
    'start: for s in earliest..stages {
        let mut left = dm.memory;
        let mut alloc = Vec::new();
        for t in s..stages {
            let free = st.free(t as usize);
            if !dm.per_stage.fits_in(&free) {
                continue 'start;
            }
            let take = left.min(&free.memory_part());
            if take.is_zero() {
                continue 'start;
            }
            left -= take;
            alloc.push((t, take + dm.per_stage));
            if left.is_zero() {
                return Some(alloc);
            }
        }
        return None;
    }
    None
}

/// The largest entry count (below the current one) for which `fits` holds.
fn max_entries(kind: &ObjectKind, fits: impl Fn(&ObjectKind) -> bool) -> Option<u64> {
    let n = kind.entries()?;
    if n == 0 || !fits(&kind.with_entries(1)) {
        return None;
    }
    let (mut lo, mut hi) = (1u64, n); // fits(lo), !fits(hi) assumed
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if fits(&kind.with_entries(mid)) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Some(lo)
}

fn place_pipelined(
    profile: &Profile,
    st: &mut State,
    d: &ObjectDecl,
    dm: &Demand,
    earliest: u32,
) -> Result<PlacedObject, PlacementError> {
    if let Some(alloc) = try_fit(st, dm, earliest) {
        for &(s, v) in &alloc {
            st.usage[s as usize] += v;
        }
        let first = alloc.first().map(|a| a.0).unwrap_or(earliest);
        let last = alloc.last().map(|a| a.0).unwrap_or(earliest);
        return Ok(PlacedObject {
            name: d.name.clone(),
            kind: d.kind.summary(),
            gress: d.gress,
            location: Location::Stages { first, last },
            demand: *dm,
            stage_use: alloc,
        });
    }
    Err(explain_pipelined(profile, st, d, dm, earliest))
}

fn explain_pipelined(
    profile: &Profile,
    st: &State,
    d: &ObjectDecl,
    dm: &Demand,
    earliest: u32,
) -> PlacementError {
    let stages = st.usage.len() as u32;
    let last_stage = stages - 1;
    let noun = d.kind.noun();
    let demand_with = |k: &ObjectKind| {
        let mut x = d.clone();
        x.kind = k.clone();
        x.demand(profile)
    };
    let fits_now = |k: &ObjectKind| try_fit(st, &demand_with(k), earliest).is_some();
    let whole = dm.in_one_stage();
    let single = !dm.splittable || dm.memory.is_zero();

    // 1. Something one stage must hold exceeds even an empty stage.
    let one_stage_need = if single { whole } else { dm.per_stage };
    if let Some(&(r, needed, capacity)) = one_stage_need.excess_over(&st.budget).first() {
        let max = max_entries(&d.kind, |k| {
            let dm2 = demand_with(k);
            let need = if single {
                dm2.in_one_stage()
            } else {
                dm2.per_stage
            };
            need.fits_in(&st.budget)
        });
        if single && r.is_memory() {
            return PlacementError::ExceedsStage {
                object: d.name.clone(),
                noun,
                resource: r,
                needed,
                capacity,
                max_entries: max,
            };
        }
        return PlacementError::DoesNotFit(Shortfall {
            object: d.name.clone(),
            noun,
            resource: r,
            needed,
            free: capacity,
            first_stage: earliest,
            last_stage,
            single_stage: true,
            max_entries: max,
        });
    }
    let max = max_entries(&d.kind, fits_now);

    // 2. A table whose memory exceeds what all usable stages have free.
    if !single {
        let mut worst: Option<(Resource, u64, u64)> = None;
        for r in Resource::MEMORY {
            let free: u64 = (earliest..stages).map(|s| st.free(s as usize)[r]).sum();
            let need = dm.memory[r];
            if need > free {
                let ratio = |n: u64, f: u64| {
                    if f == 0 {
                        f64::INFINITY
                    } else {
                        n as f64 / f as f64
                    }
                };
                let worse = match worst {
                    None => true,
                    Some((_, n, f)) => ratio(need, free) > ratio(n, f),
                };
                if worse {
                    worst = Some((r, need, free));
                }
            }
        }
        if let Some((r, needed, free)) = worst {
            return PlacementError::DoesNotFit(Shortfall {
                object: d.name.clone(),
                noun,
                resource: r,
                needed,
                free,
                first_stage: earliest,
                last_stage,
                single_stage: false,
                max_entries: max,
            });
        }
    }

    // 3. Otherwise: the resource that blocks the most stages, reported as a
    // single-stage shortfall against the best stage.
    let need = if single { whole } else { dm.per_stage };
    let mut best: Option<(Resource, usize, u64)> = None;
    for r in Resource::ALL {
        if need[r] == 0 {
            continue;
        }
        let blocked = (earliest..stages)
            .filter(|&s| st.free(s as usize)[r] < need[r])
            .count();
        let max_free = (earliest..stages)
            .map(|s| st.free(s as usize)[r])
            .max()
            .unwrap_or(0);
        let more = match best {
            None => true,
            Some((_, b, _)) => blocked > b,
        };
        if blocked > 0 && more {
            best = Some((r, blocked, max_free));
        }
    }
    let (resource, needed, free) = match best {
        Some((r, _, f)) => (r, need[r], f),
        // Each resource fits somewhere, but never all together (or, for a
        // split table, never in consecutive stages): blame the memory.
        None => {
            let r = Resource::MEMORY
                .into_iter()
                .max_by_key(|&r| dm.memory[r])
                .unwrap_or(Resource::SramBlocks);
            let free = (earliest..stages)
                .map(|s| st.free(s as usize)[r])
                .max()
                .unwrap_or(0);
            (r, whole[r], free)
        }
    };
    PlacementError::DoesNotFit(Shortfall {
        object: d.name.clone(),
        noun,
        resource,
        needed,
        free,
        first_stage: earliest,
        last_stage,
        single_stage: true,
        max_entries: max,
    })
}

fn place_rtc(
    profile: &Profile,
    st: &mut State,
    d: &ObjectDecl,
    dm: &Demand,
) -> Result<PlacedObject, PlacementError> {
    let noun = d.kind.noun();
    let free = st.free(0);
    if let Some(&(r, needed, f)) = dm.per_stage.excess_over(&free).first() {
        let max = max_entries(&d.kind, |k| {
            let mut x = d.clone();
            x.kind = k.clone();
            x.demand(profile).per_stage.fits_in(&free)
        });
        return Err(PlacementError::DoesNotFit(Shortfall {
            object: d.name.clone(),
            noun,
            resource: r,
            needed,
            free: f,
            first_stage: 0,
            last_stage: 0,
            single_stage: true,
            max_entries: max,
        }));
    }
    let mk = |location, used: ResourceVec| PlacedObject {
        name: d.name.clone(),
        kind: d.kind.summary(),
        gress: d.gress,
        location,
        demand: *dm,
        stage_use: vec![(0, used)],
    };
    if dm.memory.fits_in(&free) {
        let used = dm.in_one_stage();
        st.usage[0] += used;
        return Ok(mk(Location::Stages { first: 0, last: 0 }, used));
    }
    let dram_free = profile.dram_bytes.saturating_sub(st.dram_used);
    if dm.bytes <= dram_free {
        st.usage[0] += dm.per_stage;
        st.dram_used += dm.bytes;
        return Ok(mk(Location::Dram { bytes: dm.bytes }, dm.per_stage));
    }
    let max = max_entries(&d.kind, |k| demand(k, profile).bytes <= dram_free);
    Err(PlacementError::DramExhausted {
        object: d.name.clone(),
        noun,
        needed: dm.bytes,
        free: dram_free,
        total: profile.dram_bytes,
        max_entries: max,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn exact(name: &str, key: u32, ad: u32, entries: u64, after: Vec<usize>) -> ObjectDecl {
        ObjectDecl {
            name: name.into(),
            kind: ObjectKind::Table {
                kind: MatchKind::Exact,
                key_bits: key,
                action_data_bits: ad,
                entries,
                idle_timeout: false,
            },
            gress: Gress::Ingress,
            after,
            vliw_slots: 2,
        }
    }

    fn decl(name: &str, kind: ObjectKind, after: Vec<usize>) -> ObjectDecl {
        ObjectDecl {
            name: name.into(),
            kind,
            gress: Gress::Ingress,
            after,
            vliw_slots: 1,
        }
    }

    fn ternary(kind: MatchKind, key: u32, ad: u32, entries: u64) -> ObjectKind {
        ObjectKind::Table {
            kind,
            key_bits: key,
            action_data_bits: ad,
            entries,
            idle_timeout: false,
        }
    }

    fn nat(entries: u64) -> ObjectDecl {
        exact("nat_fwd", 104, 48, entries, vec![])
    }

    fn check_invariants(p: &Placement, decls: &[ObjectDecl], profile: &Profile) {
        // Per-stage usage is the sum of the objects' allocations, within
        // budget, and totals are the per-stage sums.
        let mut sum = vec![ResourceVec::ZERO; p.stage_usage.len()];
        for o in &p.objects {
            for &(s, v) in &o.stage_use {
                sum[s as usize] += v;
            }
        }
        assert_eq!(sum, p.stage_usage);
        for u in &p.stage_usage {
            assert!(
                u.fits_in(&profile.stage_budget),
                "{u} over {}",
                profile.stage_budget
            );
        }
        assert_eq!(p.used, p.stage_usage.iter().copied().sum::<ResourceVec>());
        for r in Resource::ALL {
            let expect = p.used[r] as f64 / (profile.stage_budget[r] * u64::from(p.stages)) as f64;
            if profile.stage_budget[r] > 0 {
                assert!((p.utilisation(r) - expect).abs() < 1e-12);
            }
        }
        // Each object got all of its memory, and dependencies are respected.
        for (o, d) in p.objects.iter().zip(decls) {
            if let Location::Stages { first, last } = o.location {
                let mem: ResourceVec = o.stage_use.iter().map(|&(_, v)| v.memory_part()).sum();
                assert_eq!(mem, o.demand.memory, "{}", o.name);
                let stages: Vec<u32> = o.stage_use.iter().map(|a| a.0).collect();
                assert_eq!(
                    stages,
                    (first..=last).collect::<Vec<_>>(),
                    "{} not consecutive",
                    o.name
                );
                if !p.run_to_completion {
                    for &j in &d.after {
                        assert!(
                            p.objects[j].last_stage() < first,
                            "{} vs dep {}",
                            o.name,
                            p.objects[j].name
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn demand_formulas() {
        let t = Profile::tofino();
        // NAT: 104 + 48 + 4 = 156 b → 2 words per entry; 65,536 entries →
        // 64 rows (multiple of 4) → 128 blocks; hash 4 × (10 + log2 16).
        let d = nat(65_536).demand(&t);
        assert_eq!(d.memory[Resource::SramBlocks], 128);
        assert_eq!(d.per_stage[Resource::HashBits], 4 * 14);
        assert_eq!(d.per_stage[Resource::ExactXbarBytes], 13);
        assert_eq!(d.per_stage[Resource::LogicalTables], 1);
        assert_eq!(d.per_stage[Resource::VliwSlots], 2);
        assert_eq!(d.bytes, 65_536 * 20);
        // A narrow table: 16 + 8 + 4 = 28 b → 4 per word; 1,000 entries in one block.
        let d = demand(&ternary(MatchKind::Exact, 16, 8, 1_000), &t);
        assert_eq!(d.memory[Resource::SramBlocks], 1);
        assert_eq!(d.per_stage[Resource::HashBits], 10);
        // 5 rows round up to 8.
        let d = demand(&ternary(MatchKind::Exact, 16, 8, 4 * 1024 * 5), &t);
        assert_eq!(d.memory[Resource::SramBlocks], 8);
        // Ternary: ⌈1,000/512⌉ · ⌈32/44⌉ = 2 TCAM blocks; 16 b action data 8/word.
        let d = demand(&ternary(MatchKind::Ternary, 32, 16, 1_000), &t);
        assert_eq!(d.memory[Resource::TcamBlocks], 2);
        assert_eq!(d.memory[Resource::SramBlocks], 1);
        assert_eq!(d.per_stage[Resource::TernaryXbarBytes], 4);
        // Range: key widened ×2 → ⌈64/44⌉ = 2 columns.
        let d = demand(&ternary(MatchKind::Range, 32, 0, 512), &t);
        assert_eq!(d.memory[Resource::TcamBlocks], 2);
        // Register: 65,536 × 32 b = 16 blocks + 1 spare; 16 index bits.
        let d = demand(
            &ObjectKind::Register {
                value_bits: 32,
                entries: 65_536,
            },
            &t,
        );
        assert_eq!(d.memory[Resource::SramBlocks], 17);
        assert_eq!(d.memory[Resource::MapRamBlocks], 17);
        assert_eq!(d.per_stage[Resource::StatefulAlus], 1);
        assert_eq!(d.per_stage[Resource::HashBits], 16);
        assert!(!d.splittable);
        let d = demand(&ObjectKind::Counter { entries: 2048 }, &t);
        assert_eq!(d.memory[Resource::SramBlocks], 2);
        assert_eq!(d.per_stage[Resource::StatefulAlus], 0);
        let d = demand(&ObjectKind::Meter { entries: 4096 }, &t);
        assert_eq!(d.memory[Resource::SramBlocks], 4);
        assert_eq!(d.memory[Resource::MapRamBlocks], 1);
        assert_eq!(d.per_stage[Resource::StatefulAlus], 1);
        assert_eq!(
            demand(&ObjectKind::Hash { output_bits: 32 }, &t).per_stage[Resource::HashBits],
            32
        );
        assert_eq!(
            demand(&ObjectKind::Gateway, &t).per_stage[Resource::Gateways],
            1
        );
        // Idle timeout: 65,536 / 4,096 = 16 map-RAM blocks.
        let mut k = nat(65_536).kind;
        if let ObjectKind::Table { idle_timeout, .. } = &mut k {
            *idle_timeout = true;
        }
        assert_eq!(demand(&k, &t).memory[Resource::MapRamBlocks], 16);
    }

    #[test]
    fn l2_l3_program_fits_tofino() {
        let t = Profile::tofino();
        let decls = vec![
            exact("port_vlan", 16, 12, 4_096, vec![]),
            exact("l2_fwd", 60, 9, 32_768, vec![0]),
            decl("ipv4_lpm", ternary(MatchKind::Lpm, 32, 16, 16_384), vec![0]),
            exact("nexthop", 16, 57, 4_096, vec![2]),
            decl("is_routed", ObjectKind::Gateway, vec![1]),
            decl("ecmp_hash", ObjectKind::Hash { output_bits: 16 }, vec![]),
            decl("port_pkts", ObjectKind::Counter { entries: 512 }, vec![3]),
            decl("acl", ternary(MatchKind::Ternary, 120, 8, 2_048), vec![3]),
        ];
        let p = place(&t, &decls).expect("fits");
        check_invariants(&p, &decls, &t);
        let text = p.to_string();
        assert!(text.contains("SRAM blocks"), "{text}");
        assert!(text.contains("ipv4_lpm"));
        // The LPM table: 32 TCAM blocks, more than a stage's 24, so it spans.
        let lpm = p.object("ipv4_lpm").unwrap();
        assert!(lpm.last_stage() > lpm.first_stage());
        let sram = p.utilisation(Resource::SramBlocks);
        assert!(sram > 0.0 && sram < 1.0);
    }

    #[test]
    fn nat_table_fits_and_ten_million_does_not() {
        let t = Profile::tofino();
        let p = place(&t, &[nat(65_536)]).expect("65,536 entries fit");
        check_invariants(&p, &[nat(65_536)], &t);
        assert_eq!(p.used[Resource::SramBlocks], 128);
        assert_eq!(
            p.objects[0].location,
            Location::Stages { first: 0, last: 1 }
        );
        let e = place(&t, &[nat(10_000_000)]).unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("\"nat_fwd\""), "{msg}");
        assert!(msg.contains("SRAM"), "{msg}");
        assert!(msg.contains("short by"), "{msg}");
        match e {
            PlacementError::DoesNotFit(s) => {
                assert_eq!(s.resource, Resource::SramBlocks);
                assert_eq!(s.needed, 19_536);
                assert_eq!(s.free, 960);
                let n = s.max_entries.unwrap();
                assert!(place(&t, &[nat(n)]).is_ok());
                assert!(place(&t, &[nat(n + 1)]).is_err());
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn chain_longer_than_stages_fails() {
        let t = Profile::tofino();
        let decls: Vec<ObjectDecl> = (0..13)
            .map(|i| {
                decl(
                    &format!("g{i}"),
                    ObjectKind::Gateway,
                    if i == 0 { vec![] } else { vec![i - 1] },
                )
            })
            .collect();
        let e = place(&t, &decls).unwrap_err();
        assert!(
            matches!(
                e,
                PlacementError::DependencyChainTooLong {
                    needed: 13,
                    stages: 12,
                    ..
                }
            ),
            "{e}"
        );
        assert!(e.to_string().contains("g0 → g1"), "{e}");
        assert!(place(&t, &decls[..12]).is_ok());
        // A chain of 11 where one table spans two stages also runs out.
        let mut decls: Vec<ObjectDecl> = vec![nat(65_536)];
        for i in 1..12 {
            decls.push(decl(&format!("g{i}"), ObjectKind::Gateway, vec![i - 1]));
        }
        let e = place(&t, &decls).unwrap_err();
        match &e {
            PlacementError::DependencyChainTooLong { chain, needed, .. } => {
                assert_eq!(chain.first().map(String::as_str), Some("nat_fwd"));
                assert_eq!(chain.len(), 12);
                assert_eq!(*needed, 13);
            }
            other => panic!("{other}"),
        }
    }

    #[test]
    fn register_must_fit_one_stage() {
        let t = Profile::tofino();
        let big = decl(
            "flows",
            ObjectKind::Register {
                value_bits: 32,
                entries: 4 << 20,
            },
            vec![],
        );
        let e = place(&t, &[big]).unwrap_err();
        let msg = e.to_string();
        assert!(
            matches!(
                e,
                PlacementError::ExceedsStage {
                    resource: Resource::SramBlocks,
                    ..
                }
            ),
            "{msg}"
        );
        assert!(msg.contains("single stage"), "{msg}");
        assert!(msg.contains("\"flows\""), "{msg}");
        if let PlacementError::ExceedsStage {
            max_entries: Some(n),
            ..
        } = e
        {
            let ok = decl(
                "flows",
                ObjectKind::Register {
                    value_bits: 32,
                    entries: n,
                },
                vec![],
            );
            assert!(place(&t, &[ok]).is_ok());
        } else {
            panic!("no hint");
        }
        // Five registers in one stage exceed the 4 stateful ALUs: the fifth
        // goes to stage 1.
        let decls: Vec<ObjectDecl> = (0..5)
            .map(|i| {
                decl(
                    &format!("r{i}"),
                    ObjectKind::Register {
                        value_bits: 32,
                        entries: 1024,
                    },
                    vec![],
                )
            })
            .collect();
        let p = place(&t, &decls).unwrap();
        assert_eq!(p.objects[4].first_stage(), 1);
        check_invariants(&p, &decls, &t);
    }

    #[test]
    fn errors_for_bad_dependencies() {
        let t = Profile::tofino();
        let e = place(&t, &[decl("a", ObjectKind::Gateway, vec![3])]).unwrap_err();
        assert!(matches!(
            e,
            PlacementError::UnknownDependency { index: 3, .. }
        ));
        assert!(e.to_string().contains("\"a\""));
        let e = place(
            &t,
            &[
                decl("a", ObjectKind::Gateway, vec![2]),
                decl("b", ObjectKind::Gateway, vec![0]),
                decl("c", ObjectKind::Gateway, vec![1]),
            ],
        )
        .unwrap_err();
        assert!(matches!(e, PlacementError::Cycle { .. }), "{e}");
        let msg = e.to_string();
        assert!(
            msg.contains('a') && msg.contains('b') && msg.contains('c'),
            "{msg}"
        );
        let e = place(&t, &[decl("self", ObjectKind::Gateway, vec![0])]).unwrap_err();
        assert_eq!(e.to_string(), "dependency cycle: self → self");
    }

    #[test]
    fn smartnic_spills_to_dram() {
        let s = Profile::smartnic();
        let decls = vec![exact("small", 32, 16, 1_000, vec![]), nat(1_000_000)];
        let p = place(&s, &decls).unwrap();
        check_invariants(&p, &decls, &s);
        assert_eq!(
            p.objects[0].location,
            Location::Stages { first: 0, last: 0 }
        );
        assert_eq!(p.objects[1].location, Location::Dram { bytes: 20_000_000 });
        assert_eq!(p.dram_used, 20_000_000);
        assert!(p.to_string().contains("DRAM"));
        // Too big for DRAM as well.
        let e = place(&s, &[nat(200_000_000)]).unwrap_err();
        assert!(matches!(e, PlacementError::DramExhausted { .. }), "{e}");
        assert!(e.to_string().contains("\"nat_fwd\""));
    }

    #[test]
    fn server_puts_everything_in_dram() {
        let v = Profile::server();
        // 3 × 1 G entries of 20 B = 60 GB ≤ 64 GiB.
        let decls: Vec<ObjectDecl> = (0..3)
            .map(|i| exact(&format!("t{i}"), 104, 48, 1_000_000_000, vec![]))
            .collect();
        let p = place(&v, &decls).unwrap();
        assert!(p
            .objects
            .iter()
            .all(|o| matches!(o.location, Location::Dram { .. })));
        assert!(p.dram_utilisation() > 0.8);
        let mut more = decls.clone();
        more.push(exact("t3", 104, 48, 1_000_000_000, vec![]));
        let e = place(&v, &more).unwrap_err();
        assert!(
            matches!(e, PlacementError::DramExhausted { ref object, .. } if object == "t3"),
            "{e}"
        );
        // A hash unit has no memory and stays "on chip".
        let p = place(
            &v,
            &[decl("h", ObjectKind::Hash { output_bits: 32 }, vec![])],
        )
        .unwrap();
        assert_eq!(
            p.objects[0].location,
            Location::Stages { first: 0, last: 0 }
        );
    }

    #[test]
    fn ternary_needs_the_feature() {
        let mut s = Profile::smartnic();
        s.features.ternary_match = false;
        let e = place(
            &s,
            &[decl("acl", ternary(MatchKind::Range, 16, 8, 100), vec![])],
        )
        .unwrap_err();
        assert!(matches!(e, PlacementError::MissingFeature { .. }));
        assert!(e.to_string().contains("\"acl\""), "{e}");
        assert!(place(&s, &[exact("ok", 16, 8, 100, vec![])]).is_ok());
    }

    #[test]
    fn nat_report_text() {
        let t = Profile::tofino();
        let p = place(&t, &[nat(65_536)]).unwrap();
        let text = p.to_string();
        println!("{text}");
        println!("{}", place(&t, &[nat(10_000_000)]).unwrap_err());
        let sram_line = text.lines().find(|l| l.starts_with("SRAM blocks")).unwrap();
        let cols: Vec<&str> = sram_line.split_whitespace().collect();
        assert_eq!(cols[2..], ["128", "960", "13.3"], "{text}");
        assert!(text.contains("nat_fwd"));
        assert!(text.contains("stages 0–1"));
    }

    #[test]
    fn thousands_separators() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1_000), "1,000");
        assert_eq!(thousands(3_880_000), "3,880,000");
    }

    fn arb_kind() -> impl Strategy<Value = ObjectKind> {
        prop_oneof![
            (8u32..160, 0u32..96, 1u64..200_000).prop_map(|(k, a, e)| ternary(
                MatchKind::Exact,
                k,
                a,
                e
            )),
            (8u32..128, 0u32..32, 1u64..20_000).prop_map(|(k, a, e)| ternary(
                MatchKind::Ternary,
                k,
                a,
                e
            )),
            (
                prop_oneof![Just(8u32), Just(16), Just(32), Just(64)],
                1u64..300_000
            )
                .prop_map(|(v, e)| ObjectKind::Register {
                    value_bits: v,
                    entries: e
                }),
            (1u64..50_000).prop_map(|e| ObjectKind::Counter { entries: e }),
            (1u64..50_000).prop_map(|e| ObjectKind::Meter { entries: e }),
            (1u32..64).prop_map(|b| ObjectKind::Hash { output_bits: b }),
            Just(ObjectKind::Gateway),
        ]
    }

    fn arb_program() -> impl Strategy<Value = Vec<ObjectDecl>> {
        (1usize..14)
            .prop_flat_map(|n| {
                (
                    proptest::collection::vec((arb_kind(), any::<bool>(), 0u32..8), n),
                    proptest::collection::vec(
                        proptest::collection::vec(any::<prop::sample::Index>(), 0..3),
                        n,
                    ),
                    Just((0..n).collect::<Vec<usize>>()).prop_shuffle(),
                )
            })
            .prop_map(|(objs, deps, perm)| {
                // Object at position p depends on earlier positions; position
                // p is declared at index perm[p].
                let n = objs.len();
                let mut decls: Vec<Option<ObjectDecl>> = vec![None; n];
                for (p, ((kind, egress, vliw), ds)) in objs.into_iter().zip(deps).enumerate() {
                    let mut after: Vec<usize> = if p == 0 {
                        vec![]
                    } else {
                        ds.iter().map(|ix| perm[ix.index(p)]).collect()
                    };
                    after.sort_unstable();
                    after.dedup();
                    decls[perm[p]] = Some(ObjectDecl {
                        name: format!("o{}", perm[p]),
                        kind,
                        gress: if egress {
                            Gress::Egress
                        } else {
                            Gress::Ingress
                        },
                        after,
                        vliw_slots: vliw,
                    });
                }
                decls.into_iter().map(Option::unwrap).collect()
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]
        #[test]
        fn placements_respect_dependencies_and_budgets(decls in arb_program()) {
            for profile in [Profile::tofino(), Profile::smartnic()] {
                match place(&profile, &decls) {
                    Ok(p) => check_invariants(&p, &decls, &profile),
                    Err(e) => {
                        let msg = e.to_string();
                        prop_assert!(!msg.is_empty());
                        let structural = matches!(e, PlacementError::Cycle { .. } | PlacementError::UnknownDependency { .. });
                        prop_assert!(!structural, "{}", msg);
                    }
                }
            }
        }
    }
}
