//! The TEA-Table (spec §3.2, §3.3, §5.4–§5.6): the control plane's master
//! mirror of the table in server DRAM and the plans that change it.
//!
//! What lives where:
//! - [`layout`] — byte layout of cells, buckets and rows; bucket hash; VA formula; §5.9 layout checks.
//! - [`partition`] — range partitioning, replica placement, per-(server, range) regions, cell → byte writes.
//! - [`ops`] — Insert / Delete / Update / drain with bounded linear probing and the DRAM mutation shield.
//! - [`cache`] — the §5.5 cache policy.
//! - [`image`] — a byte-level model of every server region plus the SRAM tables, and the §6 checkers (tests/experiments).
//! - [`offline`] — experiments E10, E11, E12 and the insert benchmark.
//!
//! # The step-plan contract
//!
//! [`TeaTable`] is sans-IO: every operation updates the master mirror at once
//! and returns a [`Plan`], the ordered [`Step`]s that bring the data plane's
//! stash and cache and the servers' DRAM to the same state. The driver (the
//! switch control plane) must:
//! 1. execute plans one at a time, in the order the table produced them, and
//!    the steps of a plan strictly in order;
//! 2. consider a `StashAdd`/`StashRemove`/`CacheModify`/`CacheRemove` step done
//!    only when the data-plane table entry is in effect;
//! 3. at [`Step::WaitGrace`], wait at least `T_GRACE` (100 µs) after the
//!    previous step is done (the stash entries that protect the next write were
//!    installed by the steps just before it);
//! 4. at [`Step::WriteCells`], send one WRITE_BATCH per [`ServerBatch`] and wait
//!    for every acknowledgment before the next step.
//!
//! Under this contract no lookup of a present key misses (spec §6 item 3);
//! `tests/table.rs` checks it against [`image::DramImage`].

pub mod cache;
pub mod image;
pub mod layout;
pub mod offline;
pub mod ops;
pub mod partition;

use cache::Cache;
use layout::Layout;
use partition::{Partition, Region, RegionWrite, ServerBatch};
use serde::Serialize;
use std::collections::BTreeMap;
use thiserror::Error;

/// Stash capacity (spec §3.1).
pub const STASH_CAP: usize = 32768;
/// Displacement bound per insert (spec §5.4).
pub const MAX_TRIES: u32 = 500;
/// Mutation-shield grace period in ns (spec §5.4); the driver enforces it.
pub const T_GRACE_NS: u64 = 100_000;
/// Stash-drain period in ns (spec §5.4).
pub const DRAIN_PERIOD_NS: u64 = 10_000_000;

/// Where a key lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub enum Loc {
    Dram { bucket: u32, cell: usize },
    Stash,
}

/// One thing the driver does to the data plane or the servers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum Step {
    /// Add the stash entry, or modify it if the key is already stashed.
    StashAdd {
        key: Vec<u8>,
        value: Vec<u8>,
    },
    StashRemove {
        key: Vec<u8>,
    },
    /// Add the cache entry, or modify it if the key is already cached.
    CacheModify {
        key: Vec<u8>,
        value: Vec<u8>,
    },
    CacheRemove {
        key: Vec<u8>,
    },
    /// Wait ≥ T_GRACE after the previous step is in effect.
    WaitGrace,
    /// One WRITE_BATCH per server; wait for all acknowledgments.
    WriteCells(Vec<ServerBatch>),
}

/// Which operation produced a plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum OpKind {
    Insert,
    Update,
    Delete,
    Drain,
    Cache,
}

/// How an operation ended in the mirror.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum Outcome {
    /// Every key touched is in DRAM; `displacements` entries were moved.
    Placed {
        displacements: u32,
    },
    /// `key` (the inserted key or the last victim) stays in the stash.
    Stashed {
        key: Vec<u8>,
        displacements: u32,
    },
    Updated,
    Deleted,
    /// A cache install or replacement.
    Cached,
    /// A stash drain: entries placed, entries tried and left in the stash.
    Drained {
        placed: u32,
        still_stashed: u32,
        displacements: u32,
    },
}

/// An operation's effect as ordered steps (see the module docs for the contract).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Plan {
    pub op: OpKind,
    /// The key operated on (empty for a drain).
    pub key: Vec<u8>,
    pub outcome: Outcome,
    pub steps: Vec<Step>,
}

/// Why an operation was refused (the mirror is unchanged).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum TableError {
    #[error("key is {got} bytes, the table's keys are {expected}")]
    KeyLen { expected: usize, got: usize },
    #[error("value is {got} bytes, the table's values are {expected}")]
    ValueLen { expected: usize, got: usize },
    #[error("stash full ({0} entries)")]
    StashFull(usize),
    #[error("key not in the table")]
    NotFound,
}

/// Tunables (spec defaults in [`TableConfig::default`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct TableConfig {
    pub stash_cap: usize,
    pub max_tries: u32,
    pub cache_cap: usize,
}

impl Default for TableConfig {
    fn default() -> Self {
        Self {
            stash_cap: STASH_CAP,
            max_tries: MAX_TRIES,
            cache_cap: cache::CACHE_CAP,
        }
    }
}

/// The order in which insert emits its steps. Only [`InsertOrder::Shielded`]
/// is correct; the others exist so tests can show the checkers catch them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum InsertOrder {
    /// Spec §5.4 with the DRAM mutation shield.
    Shielded,
    /// Thesis Alg. 1 (spec §9 item 1): stash entry dropped before the shadow
    /// write, victim overwritten before it is stashed, no shadow update while
    /// displacing.
    ThesisAlg1,
    /// The shield's ordering without the grace wait.
    NoGrace,
}

/// Table statistics (`TeaTable::stats`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Stats {
    pub entries: u64,
    pub dram_entries: u64,
    pub stash_entries: u64,
    pub cache_entries: u64,
    pub cells: u64,
    /// DRAM entries / cells.
    pub load_factor: f64,
    /// Stashed entries / entries.
    pub stash_fraction: f64,
    pub inserts: u64,
    pub displacements: u64,
    /// Insert or drain plans that ended with an entry left in the stash.
    pub stashed_outcomes: u64,
    /// Displacement chains not started or cut short because every
    /// occupant of both candidate buckets shared the key's bucket.
    pub hopeless: u64,
}

/// The control plane's master mirror of one TEA-Table.
#[derive(Debug, Clone)]
pub struct TeaTable {
    layout: Layout,
    partition: Partition,
    config: TableConfig,
    order: InsertOrder,
    /// n × C encoded cells, exactly the bytes of every main bucket in DRAM.
    cells: Vec<u8>,
    stash: BTreeMap<Vec<u8>, Vec<u8>>,
    cache: Cache,
    dram_entries: u64,
    inserts: u64,
    displacements: u64,
    stashed_outcomes: u64,
    pub(crate) hopeless: u64,
}

impl TeaTable {
    pub fn new(partition: Partition, config: TableConfig) -> Self {
        let layout = *partition.layout();
        Self {
            layout,
            partition,
            config,
            order: InsertOrder::Shielded,
            cells: vec![0u8; layout.total_cells() * layout.cell_bytes()],
            stash: BTreeMap::new(),
            cache: Cache::new(config.cache_cap),
            dram_entries: 0,
            inserts: 0,
            displacements: 0,
            stashed_outcomes: 0,
            hopeless: 0,
        }
    }

    pub fn layout(&self) -> &Layout {
        &self.layout
    }
    pub fn partition(&self) -> &Partition {
        &self.partition
    }
    pub fn config(&self) -> &TableConfig {
        &self.config
    }
    pub fn cache(&self) -> &Cache {
        &self.cache
    }
    /// Stashed entries in key order.
    pub fn stash(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        self.stash.iter().map(|(k, v)| (k.as_slice(), v.as_slice()))
    }
    pub fn stash_len(&self) -> usize {
        self.stash.len()
    }
    /// Test hook: emit insert steps in a (possibly wrong) order.
    #[doc(hidden)]
    pub fn set_insert_order(&mut self, order: InsertOrder) {
        self.order = order;
    }

    fn cell_range(&self, bucket: u32, cell: usize) -> std::ops::Range<usize> {
        let cb = self.layout.cell_bytes();
        let start = (bucket as usize * self.layout.cells() + cell) * cb;
        start..start + cb
    }
    /// The mirror's bytes of one cell.
    pub fn cell_bytes(&self, bucket: u32, cell: usize) -> &[u8] {
        &self.cells[self.cell_range(bucket, cell)]
    }
    /// The mirror's bytes of one bucket (C cells).
    pub fn bucket_bytes(&self, bucket: u32) -> &[u8] {
        let bb = self.layout.bucket_bytes();
        let start = bucket as usize * bb;
        &self.cells[start..start + bb]
    }
    /// (key, value) of a VALID cell.
    pub fn cell(&self, bucket: u32, cell: usize) -> Option<(&[u8], &[u8])> {
        self.layout.decode_cell(self.cell_bytes(bucket, cell))
    }

    /// Where `key` lives. [our choice] The index is implicit: the placement
    /// invariant confines a DRAM key to the 2C cells of h(K) and h(K)+1, so a
    /// scan of those replaces a per-key hash map (which at 10 M keys would
    /// cost more memory than the mirror itself).
    pub fn locate(&self, key: &[u8]) -> Option<Loc> {
        if self.stash.contains_key(key) {
            return Some(Loc::Stash);
        }
        self.find_dram(key)
            .map(|(bucket, cell)| Loc::Dram { bucket, cell })
    }
    fn find_dram(&self, key: &[u8]) -> Option<(u32, usize)> {
        if key.len() != self.layout.key_len() {
            return None;
        }
        let i = self.layout.bucket_of(key);
        let j = self.layout.next_bucket(i);
        [i, j].into_iter().find_map(|b| {
            (0..self.layout.cells())
                .find(|&c| matches!(self.cell(b, c), Some((k, _)) if k == key))
                .map(|c| (b, c))
        })
    }
    /// The master value of `key`.
    pub fn get(&self, key: &[u8]) -> Option<&[u8]> {
        if let Some(v) = self.stash.get(key) {
            return Some(v);
        }
        let (b, c) = self.find_dram(key)?;
        self.cell(b, c).map(|(_, v)| v)
    }
    /// Every entry with its location: stash first, then DRAM in bucket order.
    pub fn entries(&self) -> Vec<(Vec<u8>, Vec<u8>, Loc)> {
        let mut out: Vec<_> = self
            .stash
            .iter()
            .map(|(k, v)| (k.clone(), v.clone(), Loc::Stash))
            .collect();
        for b in 0..self.layout.buckets() {
            for c in 0..self.layout.cells() {
                if let Some((k, v)) = self.cell(b, c) {
                    out.push((k.to_vec(), v.to_vec(), Loc::Dram { bucket: b, cell: c }));
                }
            }
        }
        out
    }

    pub fn stats(&self) -> Stats {
        let stash = self.stash.len() as u64;
        let entries = stash + self.dram_entries;
        let cells = self.layout.total_cells() as u64;
        Stats {
            entries,
            dram_entries: self.dram_entries,
            stash_entries: stash,
            cache_entries: self.cache.len() as u64,
            cells,
            load_factor: self.dram_entries as f64 / cells as f64,
            stash_fraction: if entries == 0 {
                0.0
            } else {
                stash as f64 / entries as f64
            },
            inserts: self.inserts,
            displacements: self.displacements,
            stashed_outcomes: self.stashed_outcomes,
            hopeless: self.hopeless,
        }
    }

    /// The KV part (main bucket + shadow) of rows `rows` of `region`, as writes
    /// for loading a *freshly registered* region from the mirror (server
    /// setup, or recovery after a restart, spec §5.7). All-zero rows are
    /// skipped: a freshly registered region is zero.
    pub fn region_kv_writes(
        &self,
        region: &Region,
        rows: std::ops::Range<u32>,
    ) -> Vec<RegionWrite> {
        self.kv_writes(region, rows, true)
    }

    /// Like [`TeaTable::region_kv_writes`], but every row, all-zero ones
    /// included: for reloading a region the server *kept* (a link or
    /// partition outage, a repeated setup), whose rows may still hold cells
    /// the mirror emptied while the server took no writes.
    pub fn region_kv_rewrites(
        &self,
        region: &Region,
        rows: std::ops::Range<u32>,
    ) -> Vec<RegionWrite> {
        self.kv_writes(region, rows, false)
    }

    fn kv_writes(
        &self,
        region: &Region,
        rows: std::ops::Range<u32>,
        skip_zero: bool,
    ) -> Vec<RegionWrite> {
        let end = rows.end.min(region.rows);
        (rows.start..end)
            .filter_map(|r| {
                let i = region.lo + r;
                let mut bytes = self.bucket_bytes(i).to_vec();
                bytes.extend_from_slice(self.bucket_bytes(self.layout.next_bucket(i)));
                let keep = !skip_zero || bytes.iter().any(|&x| x != 0);
                keep.then(|| RegionWrite {
                    region: region.region_id,
                    offset: self.layout.row_offset(region.lo, i),
                    bytes,
                })
            })
            .collect()
    }

    fn check_kv(&self, key: &[u8], value: Option<&[u8]>) -> Result<(), TableError> {
        if key.len() != self.layout.key_len() {
            return Err(TableError::KeyLen {
                expected: self.layout.key_len(),
                got: key.len(),
            });
        }
        if let Some(v) = value {
            if v.len() != self.layout.value_len() {
                return Err(TableError::ValueLen {
                    expected: self.layout.value_len(),
                    got: v.len(),
                });
            }
        }
        Ok(())
    }
}
