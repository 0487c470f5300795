//! Match-action tables: exact, ternary, longest-prefix and range match.
//!
//! A [`MatchTable`] maps [`MatchSpec`]s (the match half of an entry) to
//! actions of any type `A`. It is a pure data structure: the pipeline wrapper
//! enforces that only the control plane writes it, with modelled latency.
//!
//! Search structures, chosen so the data-plane [`MatchTable::lookup`] is fast
//! and never allocates:
//! - **Exact**: a hash table keyed by the key bytes, with a fixed-seed hasher
//!   (deterministic, and looked up by `&[u8]` without copying the key).
//! - **LPM**: one hash table per prefix length in use, probed longest first;
//!   the first hit is the longest match. Keys are hashed on their first
//!   `prefix_len` bits in place, so no masked copy of the key is made.
//! - **Ternary / Range**: a vector sorted by priority (descending) then
//!   insertion order, scanned until the first match — what a TCAM's priority
//!   encoder computes. TCAM tables are small, so a scan is adequate.
//!
//! Every entry also sits in one slab linked in insertion order, which gives a
//! deterministic order for listing and idle-timeout reports regardless of
//! hash-table layout.

/// How a table matches its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MatchKind {
    /// The whole key must equal the entry's key (SRAM, hashed).
    Exact,
    /// Value/mask with a priority (TCAM).
    Ternary,
    /// Longest prefix of the key, in bits from its first byte (TCAM).
    Lpm,
    /// The key, read as a big-endian unsigned number, within `lo..=hi` (TCAM
    /// with range match units).
    Range,
}

use crate::device::Nanos;
use foldhash::fast::FixedState;
use hashbrown::HashTable;
use std::hash::{BuildHasher, Hasher};
use thiserror::Error;

/// The match half of a table entry. Each variant goes with the
/// [`MatchKind`] of the same name; every byte string is exactly the table's
/// key width.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum MatchSpec {
    /// Matches a key equal to these bytes.
    Exact(Box<[u8]>),
    /// Matches a key with `key & mask == value & mask`. Among matching
    /// entries the highest `priority` wins; ties go to the earlier-inserted
    /// entry. The table stores `value & mask` (bits outside the mask do not
    /// matter, so specs differing only there are the same entry).
    Ternary {
        /// The bits to compare against, where `mask` is set.
        value: Box<[u8]>,
        /// Which bits of the key are compared.
        mask: Box<[u8]>,
        /// Larger wins.
        priority: u32,
    },
    /// Matches a key whose first `prefix_len` bits (counted from the most
    /// significant bit of the first byte) equal those of `value`; the longest
    /// matching prefix wins. The table stores `value` with the bits past the
    /// prefix cleared, so specs differing only there are the same entry.
    Lpm {
        /// The prefix, in the first `prefix_len` bits.
        value: Box<[u8]>,
        /// Prefix length in bits, at most 8 × key width.
        prefix_len: u16,
    },
    /// Matches a key that, read as a big-endian unsigned number, lies in
    /// `lo..=hi`. Among matching entries the highest `priority` wins; ties go
    /// to the earlier-inserted entry.
    Range {
        /// Lowest matching key, big-endian.
        lo: Box<[u8]>,
        /// Highest matching key, big-endian.
        hi: Box<[u8]>,
        /// Larger wins.
        priority: u32,
    },
}

impl MatchSpec {
    /// The kind of table this spec belongs in.
    pub fn kind(&self) -> MatchKind {
        match self {
            MatchSpec::Exact(_) => MatchKind::Exact,
            MatchSpec::Ternary { .. } => MatchKind::Ternary,
            MatchSpec::Lpm { .. } => MatchKind::Lpm,
            MatchSpec::Range { .. } => MatchKind::Range,
        }
    }
}

/// A table's declaration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableConfig {
    /// Name, for reports and errors.
    pub name: String,
    /// How the key is matched.
    pub kind: MatchKind,
    /// Key width in bytes; every spec and lookup key must have this width.
    pub key_bytes: usize,
    /// Maximum number of entries.
    pub size: usize,
    /// With `Some(t)`, entries not hit for `t` are reported by
    /// [`MatchTable::expire_idle`] (Tofino idle-timeout / TTL aging).
    pub idle_timeout: Option<Nanos>,
}

/// Why a table operation was refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum TableError {
    /// The table already holds `size` entries.
    #[error("table full ({size} entries)")]
    Full {
        /// The table's capacity.
        size: usize,
    },
    /// An entry with the same match spec exists.
    #[error("an entry with the same match already exists")]
    Duplicate,
    /// The spec is for a different kind of table.
    #[error("{got:?} match spec given to a {expected:?} table")]
    KindMismatch {
        /// The table's kind.
        expected: MatchKind,
        /// The spec's kind.
        got: MatchKind,
    },
    /// A byte string in the spec is not the table's key width.
    #[error("match field is {got} bytes wide, the table key is {expected} bytes")]
    KeyWidth {
        /// The table's key width.
        expected: usize,
        /// The width given.
        got: usize,
    },
    /// An LPM prefix is longer than the key.
    #[error("prefix length {prefix_len} exceeds the {max_bits}-bit key")]
    BadPrefix {
        /// The prefix length given.
        prefix_len: u16,
        /// The key width in bits.
        max_bits: usize,
    },
    /// A range's `lo` is above its `hi`.
    #[error("range low bound is above its high bound")]
    BadRange,
    /// No entry has this match spec.
    #[error("no entry with this match")]
    NotFound,
}

/// End of the insertion-order list.
const NIL: usize = usize::MAX;

/// Fixed-seed hasher: identical hashes in every run and process, so nothing
/// observable can depend on a random seed (DESIGN.md, principle 4). The
/// hash tables here are never iterated for output anyway; listing follows
/// insertion order.
const HASHER: FixedState = FixedState::with_seed(0x1ca5_7ab1e);

/// What the control plane reads of one entry's activity
/// ([`MatchTable::read_activity`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EntryActivity {
    /// Hit by the data plane since the previous read (or the insert).
    pub hit: bool,
    /// Time since the last hit, or since the insert if never hit.
    pub idle: Nanos,
}

/// One stored entry, linked into the insertion-order list.
#[derive(Debug, Clone)]
struct Entry<A> {
    /// The normalised spec.
    spec: MatchSpec,
    action: A,
    /// Time of the last hit, or of the insert.
    last_hit: Nanos,
    /// Already reported idle since the last hit.
    idle_reported: bool,
    /// Hit since the control plane last read the entry's activity.
    hit: bool,
    prev: usize,
    next: usize,
}

/// A TCAM row: ternary `value & mask ‖ mask`, or range `lo ‖ hi`, kept
/// inline so a scan touches one allocation per row.
#[derive(Debug, Clone)]
struct Row {
    priority: u32,
    slot: usize,
    data: Box<[u8]>,
}

/// The data-plane search structure, one per kind.
#[derive(Debug, Clone)]
enum Index {
    /// Slots hashed by key bytes. Each element keeps the key's hash and its
    /// first 16 bytes inline, so a lookup of a key up to 16 bytes (a 5-tuple
    /// is 13) never leaves the hash table; longer keys are compared in full
    /// from the entry.
    Exact(HashTable<ExactSlot>),
    /// One hash table per prefix length (slots hashed by their first
    /// `prefix_len` bits), plus the lengths in use, longest first, so a lookup
    /// probes only populated lengths and stops at the first (longest) hit.
    Lpm {
        by_len: Vec<HashTable<usize>>,
        lens: Vec<u16>,
    },
    /// Rows sorted by priority descending, then insertion order: the first
    /// matching row is the winner, as in a TCAM.
    Ternary(Vec<Row>),
    /// As `Ternary`.
    Range(Vec<Row>),
}

/// A match-action table mapping [`MatchSpec`]s to actions of type `A`.
///
/// Capacity is modelled as a plain entry count: inserting beyond
/// `config.size` fails with [`TableError::Full`]. A real exact-match table is
/// a cuckoo hash and can fail to place an entry somewhat before it is full;
/// that effect is not modelled.
///
/// The data-plane operations ([`lookup`](Self::lookup)) never allocate; a key
/// of the wrong width is a miss. Control-plane operations (insert, modify,
/// delete) may allocate. Listing ([`entries`](Self::entries),
/// [`expire_idle`](Self::expire_idle)) follows insertion order.
#[derive(Debug, Clone)]
pub struct MatchTable<A> {
    config: TableConfig,
    /// Entry slab; freed slots are reused via `free`.
    slots: Vec<Option<Entry<A>>>,
    free: Vec<usize>,
    /// Insertion-order doubly linked list through `slots`.
    head: usize,
    tail: usize,
    len: usize,
    index: Index,
    default_action: Option<A>,
}

/// Hash of a whole key.
#[inline]
fn hash_bytes(b: &[u8]) -> u64 {
    let mut h = HASHER.build_hasher();
    h.write(b);
    h.finish()
}

/// Mask of the top `bits` (1..=7) bits of a byte.
#[inline]
fn top_bits(bits: u16) -> u8 {
    0xFFu8 << (8 - bits)
}

/// Hash of the first `plen` bits of `key`, without copying it. `key` must
/// have at least `plen` bits (checked by callers).
#[inline]
fn hash_prefix(key: &[u8], plen: u16) -> u64 {
    let full = usize::from(plen / 8);
    let rem = plen % 8;
    let mut h = HASHER.build_hasher();
    h.write(key.get(..full).unwrap_or(key));
    if rem > 0 {
        h.write_u8(key.get(full).copied().unwrap_or(0) & top_bits(rem));
    }
    h.finish()
}

/// Whether `a` and `b` agree on their first `plen` bits.
#[inline]
fn prefix_eq(a: &[u8], b: &[u8], plen: u16) -> bool {
    let full = usize::from(plen / 8);
    let rem = plen % 8;
    let (Some(pa), Some(pb)) = (a.get(..full), b.get(..full)) else {
        return false;
    };
    if pa != pb {
        return false;
    }
    rem == 0
        || match (a.get(full), b.get(full)) {
            (Some(x), Some(y)) => (x ^ y) & top_bits(rem) == 0,
            _ => false,
        }
}

/// An exact-match index element. See [`Index::Exact`].
#[derive(Debug, Clone, Copy)]
struct ExactSlot {
    hash: u64,
    head: u128,
    slot: usize,
}

/// The first 16 bytes of a key as a number (zero-padded).
#[inline]
fn key_head(key: &[u8]) -> u128 {
    let mut b = [0u8; 16];
    let n = key.len().min(16);
    b[..n].copy_from_slice(&key[..n]);
    u128::from_be_bytes(b)
}

impl ExactSlot {
    #[inline]
    fn matches<A>(&self, key: &[u8], head: u128, slots: &[Option<Entry<A>>]) -> bool {
        self.head == head && (key.len() <= 16 || entry_key(slots, self.slot) == key)
    }
}

/// The key bytes an exact or LPM entry is hashed by.
#[inline]
fn entry_key<A>(slots: &[Option<Entry<A>>], slot: usize) -> &[u8] {
    match slots.get(slot).and_then(Option::as_ref).map(|e| &e.spec) {
        Some(MatchSpec::Exact(k)) | Some(MatchSpec::Lpm { value: k, .. }) => k,
        // Unreachable: the index only holds live slots of its own kind.
        _ => &[],
    }
}

/// Whether a ternary row matches `key` (same width, checked by the caller).
#[inline]
fn ternary_hit(data: &[u8], key: &[u8]) -> bool {
    let (value, mask) = data.split_at(key.len().min(data.len()));
    key.iter()
        .zip(mask)
        .zip(value)
        .all(|((k, m), v)| k & m == *v)
}

/// Whether a range row matches `key`. Same-width big-endian byte strings
/// compare as numbers when compared lexicographically.
#[inline]
fn range_hit(data: &[u8], key: &[u8]) -> bool {
    let (lo, hi) = data.split_at(key.len().min(data.len()));
    lo <= key && key <= hi
}

/// Rows with priority `p`: a sub-slice range of the sorted row vector.
fn priority_band(rows: &[Row], p: u32) -> std::ops::Range<usize> {
    let start = rows.partition_point(|r| r.priority > p);
    let end = rows.partition_point(|r| r.priority >= p);
    start..end
}

impl<A> MatchTable<A> {
    /// Makes an empty table with no default action. Nothing is
    /// preallocated for `size`, so a large declared size costs nothing until
    /// it is filled.
    pub fn new(config: TableConfig) -> Self {
        let index = match config.kind {
            MatchKind::Exact => Index::Exact(HashTable::new()),
            MatchKind::Ternary => Index::Ternary(Vec::new()),
            MatchKind::Lpm => Index::Lpm {
                by_len: Vec::new(),
                lens: Vec::new(),
            },
            MatchKind::Range => Index::Range(Vec::new()),
        };
        MatchTable {
            config,
            slots: Vec::new(),
            free: Vec::new(),
            head: NIL,
            tail: NIL,
            len: 0,
            index,
            default_action: None,
        }
    }

    /// The table's declaration.
    pub fn config(&self) -> &TableConfig {
        &self.config
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the table has no entries.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Sets (or with `None`, removes) the action the program applies on a
    /// miss. The table only stores it; [`lookup`](Self::lookup) reports a miss
    /// as `None` and the caller falls back to this.
    pub fn set_default_action(&mut self, action: Option<A>) {
        self.default_action = action;
    }

    /// The default (miss) action, if any.
    pub fn default_action(&self) -> Option<&A> {
        self.default_action.as_ref()
    }

    /// Checks a spec against the table's kind and widths.
    fn validate(&self, spec: &MatchSpec) -> Result<(), TableError> {
        let expected = self.config.kind;
        let got = spec.kind();
        if got != expected {
            return Err(TableError::KindMismatch { expected, got });
        }
        let w = self.config.key_bytes;
        let width = |b: &[u8]| {
            if b.len() == w {
                Ok(())
            } else {
                Err(TableError::KeyWidth {
                    expected: w,
                    got: b.len(),
                })
            }
        };
        match spec {
            MatchSpec::Exact(k) => width(k),
            MatchSpec::Ternary { value, mask, .. } => width(value).and(width(mask)),
            MatchSpec::Lpm { value, prefix_len } => {
                width(value)?;
                let max_bits = w.saturating_mul(8);
                if usize::from(*prefix_len) > max_bits {
                    return Err(TableError::BadPrefix {
                        prefix_len: *prefix_len,
                        max_bits,
                    });
                }
                Ok(())
            }
            MatchSpec::Range { lo, hi, .. } => {
                width(lo)?;
                width(hi)?;
                if lo > hi {
                    return Err(TableError::BadRange);
                }
                Ok(())
            }
        }
    }

    /// The slot of the entry with this (validated, possibly unnormalised)
    /// spec.
    fn find_spec(&self, spec: &MatchSpec) -> Option<usize> {
        match (&self.index, spec) {
            (Index::Exact(t), MatchSpec::Exact(k)) => {
                let head = key_head(k);
                t.find(hash_bytes(k), |e| e.matches(k, head, &self.slots))
                    .map(|e| e.slot)
            }
            (Index::Lpm { by_len, .. }, MatchSpec::Lpm { value, prefix_len }) => by_len
                .get(usize::from(*prefix_len))?
                .find(hash_prefix(value, *prefix_len), |&s| {
                    prefix_eq(entry_key(&self.slots, s), value, *prefix_len)
                })
                .copied(),
            (
                Index::Ternary(rows),
                MatchSpec::Ternary {
                    value,
                    mask,
                    priority,
                },
            ) => {
                let w = value.len();
                rows[priority_band(rows, *priority)]
                    .iter()
                    .find(|r| {
                        let (rv, rm) = r.data.split_at(w.min(r.data.len()));
                        rm == &mask[..]
                            && rv
                                .iter()
                                .zip(value.iter().zip(mask.iter()))
                                .all(|(a, (v, m))| *a == v & m)
                    })
                    .map(|r| r.slot)
            }
            (Index::Range(rows), MatchSpec::Range { lo, hi, priority }) => {
                let w = lo.len();
                rows[priority_band(rows, *priority)]
                    .iter()
                    .find(|r| {
                        let (rl, rh) = r.data.split_at(w.min(r.data.len()));
                        rl == &lo[..] && rh == &hi[..]
                    })
                    .map(|r| r.slot)
            }
            _ => None,
        }
    }

    /// The slot of the entry `key` matches, without side effects.
    #[inline]
    fn find_key(&self, key: &[u8]) -> Option<usize> {
        if key.len() != self.config.key_bytes {
            return None;
        }
        match &self.index {
            Index::Exact(t) => {
                let head = key_head(key);
                t.find(hash_bytes(key), |e| e.matches(key, head, &self.slots))
                    .map(|e| e.slot)
            }
            Index::Lpm { by_len, lens } => lens.iter().find_map(|&plen| {
                by_len
                    .get(usize::from(plen))?
                    .find(hash_prefix(key, plen), |&s| {
                        prefix_eq(entry_key(&self.slots, s), key, plen)
                    })
                    .copied()
            }),
            Index::Ternary(rows) => rows
                .iter()
                .find(|r| ternary_hit(&r.data, key))
                .map(|r| r.slot),
            Index::Range(rows) => rows
                .iter()
                .find(|r| range_hit(&r.data, key))
                .map(|r| r.slot),
        }
    }

    fn entry(&self, slot: usize) -> Option<&Entry<A>> {
        self.slots.get(slot).and_then(Option::as_ref)
    }

    fn entry_mut(&mut self, slot: usize) -> Option<&mut Entry<A>> {
        self.slots.get_mut(slot).and_then(Option::as_mut)
    }

    /// Adds an entry. Fails if the spec does not fit the table, an entry
    /// with the same (normalised) spec exists, or the table is full. The
    /// entry's idle timer starts at `now`.
    pub fn insert(&mut self, spec: MatchSpec, action: A, now: Nanos) -> Result<(), TableError> {
        self.validate(&spec)?;
        if self.find_spec(&spec).is_some() {
            return Err(TableError::Duplicate);
        }
        if self.len >= self.config.size {
            return Err(TableError::Full {
                size: self.config.size,
            });
        }
        let spec = normalize(spec);
        // Data-plane view of the entry, built before the spec moves.
        let row_data: Option<(u32, Box<[u8]>)> = match &spec {
            MatchSpec::Ternary {
                value,
                mask,
                priority,
            } => Some((*priority, [&value[..], &mask[..]].concat().into())),
            MatchSpec::Range { lo, hi, priority } => {
                Some((*priority, [&lo[..], &hi[..]].concat().into()))
            }
            _ => None,
        };
        let lpm_len = match &spec {
            MatchSpec::Lpm { prefix_len, .. } => *prefix_len,
            _ => 0,
        };
        let hash = match &spec {
            MatchSpec::Exact(k) => hash_bytes(k),
            MatchSpec::Lpm { value, prefix_len } => hash_prefix(value, *prefix_len),
            _ => 0,
        };

        // Allocate a slot and append it to the insertion-order list.
        let entry = Entry {
            spec,
            action,
            last_hit: now,
            idle_reported: false,
            hit: false,
            prev: self.tail,
            next: NIL,
        };
        let slot = match self.free.pop() {
            Some(s) => {
                self.slots[s] = Some(entry);
                s
            }
            None => {
                self.slots.push(Some(entry));
                self.slots.len() - 1
            }
        };
        let tail = self.tail;
        match self.entry_mut(tail) {
            Some(t) => t.next = slot,
            None => self.head = slot,
        }
        self.tail = slot;
        self.len += 1;

        // Add to the search structure. Rehash closures read keys from the
        // slab, a field disjoint from the index.
        let slots = &self.slots;
        match &mut self.index {
            Index::Exact(t) => {
                let head = key_head(entry_key(slots, slot));
                t.insert_unique(hash, ExactSlot { hash, head, slot }, |e| e.hash);
            }
            Index::Lpm { by_len, lens } => {
                let l = usize::from(lpm_len);
                if by_len.len() <= l {
                    by_len.resize_with(l + 1, HashTable::new);
                }
                let t = &mut by_len[l];
                if t.is_empty() {
                    let pos = lens.partition_point(|&x| x > lpm_len);
                    lens.insert(pos, lpm_len);
                }
                t.insert_unique(hash, slot, |&s| hash_prefix(entry_key(slots, s), lpm_len));
            }
            Index::Ternary(rows) | Index::Range(rows) => {
                if let Some((priority, data)) = row_data {
                    // After every row of equal or higher priority: equal
                    // priorities stay in insertion order.
                    let pos = rows.partition_point(|r| r.priority >= priority);
                    rows.insert(
                        pos,
                        Row {
                            priority,
                            slot,
                            data,
                        },
                    );
                }
            }
        }
        Ok(())
    }

    /// Replaces the action of the entry with this spec. The idle timer is
    /// not touched (a control-plane write is not a hit).
    pub fn modify(&mut self, spec: &MatchSpec, action: A) -> Result<(), TableError> {
        self.validate(spec)?;
        let slot = self.find_spec(spec).ok_or(TableError::NotFound)?;
        let e = self.entry_mut(slot).ok_or(TableError::NotFound)?;
        e.action = action;
        Ok(())
    }

    /// The action of the entry with exactly this spec (a control-plane
    /// read; no idle-timer effect).
    pub fn get(&self, spec: &MatchSpec) -> Result<&A, TableError> {
        self.validate(spec)?;
        let slot = self.find_spec(spec).ok_or(TableError::NotFound)?;
        self.entry(slot)
            .map(|e| &e.action)
            .ok_or(TableError::NotFound)
    }

    /// Removes the entry with this spec and returns its action.
    pub fn delete(&mut self, spec: &MatchSpec) -> Result<A, TableError> {
        self.validate(spec)?;
        let slot = self.find_spec(spec).ok_or(TableError::NotFound)?;

        // Out of the search structure.
        let slots = &self.slots;
        match &mut self.index {
            Index::Exact(t) => {
                if let Ok(o) = t.find_entry(hash_bytes(entry_key(slots, slot)), |e| e.slot == slot)
                {
                    o.remove();
                }
            }
            Index::Lpm { by_len, lens } => {
                if let MatchSpec::Lpm { value, prefix_len } = spec {
                    if let Some(t) = by_len.get_mut(usize::from(*prefix_len)) {
                        if let Ok(o) = t.find_entry(hash_prefix(value, *prefix_len), |&s| s == slot)
                        {
                            o.remove();
                        }
                        if t.is_empty() {
                            lens.retain(|&l| l != *prefix_len);
                        }
                    }
                }
            }
            Index::Ternary(rows) | Index::Range(rows) => {
                if let Some(pos) = rows.iter().position(|r| r.slot == slot) {
                    rows.remove(pos);
                }
            }
        }

        // Out of the slab and the insertion-order list.
        let e = self
            .slots
            .get_mut(slot)
            .and_then(Option::take)
            .ok_or(TableError::NotFound)?;
        match self.entry_mut(e.prev) {
            Some(p) => p.next = e.next,
            None => self.head = e.next,
        }
        match self.entry_mut(e.next) {
            Some(n) => n.prev = e.prev,
            None => self.tail = e.prev,
        }
        self.free.push(slot);
        self.len -= 1;
        Ok(e.action)
    }

    /// Removes every entry. The default action is kept.
    pub fn clear(&mut self) {
        self.slots.clear();
        self.free.clear();
        self.head = NIL;
        self.tail = NIL;
        self.len = 0;
        match &mut self.index {
            Index::Exact(t) => t.clear(),
            Index::Lpm { by_len, lens } => {
                by_len.clear();
                lens.clear();
            }
            Index::Ternary(rows) | Index::Range(rows) => rows.clear(),
        }
    }

    /// Data-plane lookup: the matched entry's action, or `None` on a miss
    /// (including a key of the wrong width). A hit restarts the entry's
    /// idle timer and re-arms its idle report. Never allocates.
    #[inline]
    pub fn lookup(&mut self, key: &[u8], now: Nanos) -> Option<&A> {
        let slot = self.find_key(key)?;
        let e = self.entry_mut(slot)?;
        // max: a late-delivered earlier time must not shorten the idle age.
        e.last_hit = e.last_hit.max(now);
        e.idle_reported = false;
        e.hit = true;
        Some(&e.action)
    }

    /// The control plane's read of one entry's activity: whether it was
    /// hit since the previous such read (or its insert) — the read resets
    /// that flag, as Tofino's hit-state poll mode does — and how long ago
    /// its last hit (or insert) was.
    pub fn read_activity(
        &mut self,
        spec: &MatchSpec,
        now: Nanos,
    ) -> Result<EntryActivity, TableError> {
        self.validate(spec)?;
        let slot = self.find_spec(spec).ok_or(TableError::NotFound)?;
        let e = self.entry_mut(slot).ok_or(TableError::NotFound)?;
        Ok(EntryActivity {
            hit: std::mem::replace(&mut e.hit, false),
            idle: now.saturating_sub(e.last_hit),
        })
    }

    /// The same match as [`lookup`](Self::lookup) without touching idle
    /// state (for the control plane and tests).
    pub fn peek(&self, key: &[u8]) -> Option<&A> {
        self.find_key(key)
            .and_then(|s| self.entry(s))
            .map(|e| &e.action)
    }

    /// Idle-timeout aging. With `idle_timeout: Some(t)`, appends to `out`
    /// the spec of every entry whose last hit (or insert) is at least `t`
    /// before `now` and that has not been reported since; each idle period
    /// is reported once. Entries are not deleted — the control plane
    /// decides. A later hit re-arms the report. Order: insertion order.
    /// Without an idle timeout this does nothing.
    pub fn expire_idle(&mut self, now: Nanos, out: &mut Vec<MatchSpec>) {
        let Some(timeout) = self.config.idle_timeout else {
            return;
        };
        let mut cur = self.head;
        while let Some(e) = self.slots.get_mut(cur).and_then(Option::as_mut) {
            if !e.idle_reported && now.saturating_sub(e.last_hit) >= timeout {
                e.idle_reported = true;
                out.push(e.spec.clone());
            }
            cur = e.next;
        }
    }

    /// Every entry's (normalised) spec and action, in insertion order.
    pub fn entries(&self) -> impl Iterator<Item = (&MatchSpec, &A)> + '_ {
        let mut cur = self.head;
        std::iter::from_fn(move || {
            let e = self.entry(cur)?;
            cur = e.next;
            Some((&e.spec, &e.action))
        })
    }
}

/// Brings a validated spec to its canonical stored form: ternary values
/// masked, LPM bits past the prefix cleared.
fn normalize(spec: MatchSpec) -> MatchSpec {
    match spec {
        MatchSpec::Ternary {
            mut value,
            mask,
            priority,
        } => {
            for (v, m) in value.iter_mut().zip(mask.iter()) {
                *v &= m;
            }
            MatchSpec::Ternary {
                value,
                mask,
                priority,
            }
        }
        MatchSpec::Lpm {
            mut value,
            prefix_len,
        } => {
            let full = usize::from(prefix_len / 8);
            let rem = prefix_len % 8;
            for (i, v) in value.iter_mut().enumerate() {
                if i == full && rem > 0 {
                    *v &= top_bits(rem);
                } else if i >= full {
                    *v = 0;
                }
            }
            MatchSpec::Lpm { value, prefix_len }
        }
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn b(x: &[u8]) -> Box<[u8]> {
        x.into()
    }

    fn table<A>(kind: MatchKind, key_bytes: usize, size: usize) -> MatchTable<A> {
        MatchTable::new(TableConfig {
            name: "t".into(),
            kind,
            key_bytes,
            size,
            idle_timeout: None,
        })
    }

    fn tern(v: &[u8], m: &[u8], priority: u32) -> MatchSpec {
        MatchSpec::Ternary {
            value: b(v),
            mask: b(m),
            priority,
        }
    }

    fn lpm(v: &[u8], prefix_len: u16) -> MatchSpec {
        MatchSpec::Lpm {
            value: b(v),
            prefix_len,
        }
    }

    fn range(lo: &[u8], hi: &[u8], priority: u32) -> MatchSpec {
        MatchSpec::Range {
            lo: b(lo),
            hi: b(hi),
            priority,
        }
    }

    #[test]
    fn exact_insert_lookup_modify_delete() {
        let mut t = table(MatchKind::Exact, 4, 10);
        assert!(t.is_empty());
        t.insert(MatchSpec::Exact(b(&[10, 0, 0, 1])), 1u32, 0)
            .unwrap();
        t.insert(MatchSpec::Exact(b(&[10, 0, 0, 2])), 2, 0).unwrap();
        assert_eq!(t.len(), 2);
        assert_eq!(t.lookup(&[10, 0, 0, 1], 5), Some(&1));
        assert_eq!(t.peek(&[10, 0, 0, 2]), Some(&2));
        assert_eq!(t.peek(&[10, 0, 0, 3]), None);
        assert_eq!(
            t.insert(MatchSpec::Exact(b(&[10, 0, 0, 1])), 9, 0),
            Err(TableError::Duplicate)
        );
        t.modify(&MatchSpec::Exact(b(&[10, 0, 0, 1])), 11).unwrap();
        assert_eq!(t.peek(&[10, 0, 0, 1]), Some(&11));
        assert_eq!(t.get(&MatchSpec::Exact(b(&[10, 0, 0, 1]))), Ok(&11));
        assert_eq!(t.delete(&MatchSpec::Exact(b(&[10, 0, 0, 1]))), Ok(11));
        assert_eq!(t.peek(&[10, 0, 0, 1]), None);
        assert_eq!(
            t.delete(&MatchSpec::Exact(b(&[10, 0, 0, 1]))),
            Err(TableError::NotFound)
        );
        assert_eq!(
            t.modify(&MatchSpec::Exact(b(&[1, 2, 3, 4])), 0),
            Err(TableError::NotFound)
        );
        assert_eq!(t.len(), 1);
        t.clear();
        assert!(t.is_empty());
        assert_eq!(t.peek(&[10, 0, 0, 2]), None);
        t.insert(MatchSpec::Exact(b(&[10, 0, 0, 2])), 2, 0).unwrap();
        assert_eq!(t.peek(&[10, 0, 0, 2]), Some(&2));
    }

    #[test]
    fn default_action_is_stored_not_matched() {
        let mut t = table::<&str>(MatchKind::Exact, 1, 4);
        assert_eq!(t.default_action(), None);
        t.set_default_action(Some("drop"));
        assert_eq!(t.default_action(), Some(&"drop"));
        assert_eq!(t.lookup(&[1], 0), None);
        t.clear();
        assert_eq!(t.default_action(), Some(&"drop"));
        t.set_default_action(None);
        assert_eq!(t.default_action(), None);
    }

    #[test]
    fn wrong_widths_and_kinds() {
        let mut t = table(MatchKind::Exact, 4, 10);
        t.insert(MatchSpec::Exact(b(&[1, 2, 3, 4])), 1u8, 0)
            .unwrap();
        // A wrong-width key is a miss, never a panic.
        assert_eq!(t.lookup(&[1, 2, 3], 0), None);
        assert_eq!(t.lookup(&[1, 2, 3, 4, 5], 0), None);
        assert_eq!(t.lookup(&[], 0), None);
        assert_eq!(
            t.insert(MatchSpec::Exact(b(&[1, 2])), 1, 0),
            Err(TableError::KeyWidth {
                expected: 4,
                got: 2
            })
        );
        assert_eq!(
            t.insert(lpm(&[1, 2, 3, 4], 8), 1, 0),
            Err(TableError::KindMismatch {
                expected: MatchKind::Exact,
                got: MatchKind::Lpm
            })
        );
        assert!(matches!(
            t.delete(&tern(&[0; 4], &[0; 4], 0)),
            Err(TableError::KindMismatch { .. })
        ));

        let mut t = table::<u8>(MatchKind::Ternary, 2, 10);
        assert!(matches!(
            t.insert(tern(&[0, 0], &[0], 0), 1, 0),
            Err(TableError::KeyWidth {
                expected: 2,
                got: 1
            })
        ));
        assert_eq!(t.peek(&[0]), None);

        let mut t = table::<u8>(MatchKind::Lpm, 2, 10);
        assert_eq!(
            t.insert(lpm(&[0, 0], 17), 1, 0),
            Err(TableError::BadPrefix {
                prefix_len: 17,
                max_bits: 16
            })
        );
        assert!(t.insert(lpm(&[0, 0], 16), 1, 0).is_ok());
        assert_eq!(t.peek(&[0, 0, 0]), None);

        let mut t = table::<u8>(MatchKind::Range, 2, 10);
        assert_eq!(
            t.insert(range(&[0, 2], &[0, 1], 0), 1, 0),
            Err(TableError::BadRange)
        );
        assert!(matches!(
            t.insert(range(&[0, 2], &[0, 1, 2], 0), 1, 0),
            Err(TableError::KeyWidth { .. })
        ));
        assert!(t.insert(range(&[0, 1], &[0, 1], 0), 1, 0).is_ok());
        assert_eq!(t.peek(&[1]), None);
    }

    #[test]
    fn full_table() {
        let mut t = table(MatchKind::Exact, 1, 2);
        t.insert(MatchSpec::Exact(b(&[1])), (), 0).unwrap();
        t.insert(MatchSpec::Exact(b(&[2])), (), 0).unwrap();
        assert_eq!(
            t.insert(MatchSpec::Exact(b(&[3])), (), 0),
            Err(TableError::Full { size: 2 })
        );
        // A duplicate is reported as such even when full.
        assert_eq!(
            t.insert(MatchSpec::Exact(b(&[1])), (), 0),
            Err(TableError::Duplicate)
        );
        t.delete(&MatchSpec::Exact(b(&[1]))).unwrap();
        t.insert(MatchSpec::Exact(b(&[3])), (), 0).unwrap();
        let mut z = table(MatchKind::Ternary, 1, 0);
        assert_eq!(
            z.insert(tern(&[0], &[0], 0), (), 0),
            Err(TableError::Full { size: 0 })
        );
    }

    #[test]
    fn ternary_priorities_and_ties() {
        let mut t = table(MatchKind::Ternary, 2, 10);
        t.insert(tern(&[0x0A, 0x00], &[0xFF, 0x00], 10), "a", 0)
            .unwrap();
        t.insert(tern(&[0x0A, 0x01], &[0xFF, 0xFF], 5), "b", 0)
            .unwrap();
        t.insert(tern(&[0, 0], &[0, 0], 0), "any", 0).unwrap();
        // Both a and b match 0x0A01: a has the higher priority.
        assert_eq!(t.peek(&[0x0A, 0x01]), Some(&"a"));
        assert_eq!(t.peek(&[0x0B, 0x01]), Some(&"any"));
        // Equal priority: the earlier-inserted entry wins.
        t.insert(tern(&[0x0B, 0x00], &[0xFF, 0x00], 0), "late", 0)
            .unwrap();
        assert_eq!(t.peek(&[0x0B, 0x01]), Some(&"any"));
        // Higher priority inserted later still wins.
        t.insert(tern(&[0x0A, 0x01], &[0xFF, 0xFF], 20), "c", 0)
            .unwrap();
        assert_eq!(t.peek(&[0x0A, 0x01]), Some(&"c"));
        // Bits outside the mask are normalised: this is a duplicate of "a".
        assert_eq!(
            t.insert(tern(&[0x0A, 0x77], &[0xFF, 0x00], 10), "dup", 0),
            Err(TableError::Duplicate)
        );
        // Same value/mask at another priority is a different entry.
        t.insert(tern(&[0x0A, 0x00], &[0xFF, 0x00], 11), "a2", 0)
            .unwrap();
        assert_eq!(t.peek(&[0x0A, 0x02]), Some(&"a2"));
        assert_eq!(t.delete(&tern(&[0x0A, 0x55], &[0xFF, 0x00], 11)), Ok("a2"));
        assert_eq!(t.peek(&[0x0A, 0x02]), Some(&"a"));
        // Listed normalised, in insertion order.
        let specs: Vec<_> = t.entries().map(|(s, a)| (s.clone(), *a)).collect();
        assert_eq!(specs[0], (tern(&[0x0A, 0x00], &[0xFF, 0x00], 10), "a"));
        assert_eq!(specs.len(), 5);
    }

    #[test]
    fn lpm_longest_prefix_wins() {
        let mut t = table(MatchKind::Lpm, 4, 10);
        t.insert(lpm(&[10, 0, 0, 0], 8), "/8", 0).unwrap();
        t.insert(lpm(&[10, 1, 0, 0], 16), "/16", 0).unwrap();
        t.insert(lpm(&[10, 1, 2, 0], 24), "/24", 0).unwrap();
        t.insert(lpm(&[0, 0, 0, 0], 0), "default", 0).unwrap();
        t.insert(lpm(&[10, 1, 2, 128], 25), "/25", 0).unwrap();
        assert_eq!(t.peek(&[10, 1, 2, 3]), Some(&"/24"));
        assert_eq!(t.peek(&[10, 1, 2, 200]), Some(&"/25"));
        assert_eq!(t.peek(&[10, 1, 3, 3]), Some(&"/16"));
        assert_eq!(t.peek(&[10, 2, 3, 3]), Some(&"/8"));
        assert_eq!(t.peek(&[11, 1, 2, 3]), Some(&"default"));
        // Bits past the prefix are ignored, so this is a duplicate of /16.
        assert_eq!(
            t.insert(lpm(&[10, 1, 99, 99], 16), "x", 0),
            Err(TableError::Duplicate)
        );
        // Non-byte-aligned prefix: 10.1.0.0/15 covers 10.0/16 and 10.1/16.
        t.insert(lpm(&[10, 1, 0, 0], 15), "/15", 0).unwrap();
        assert_eq!(t.peek(&[10, 0, 9, 9]), Some(&"/15"));
        assert_eq!(
            t.entries()
                .find(|(_, a)| **a == "/15")
                .map(|(s, _)| s.clone()),
            Some(lpm(&[10, 0, 0, 0], 15))
        );
        assert_eq!(t.delete(&lpm(&[10, 1, 2, 7], 24)), Ok("/24"));
        assert_eq!(t.peek(&[10, 1, 2, 3]), Some(&"/16"));
        assert_eq!(t.delete(&lpm(&[1, 2, 3, 4], 0)), Ok("default"));
        assert_eq!(t.peek(&[11, 1, 2, 3]), None);
        assert_eq!(t.delete(&lpm(&[1, 2, 3, 4], 0)), Err(TableError::NotFound));
        // Full-width prefix is an exact host route.
        t.insert(lpm(&[10, 1, 3, 4], 32), "host", 0).unwrap();
        assert_eq!(t.peek(&[10, 1, 3, 4]), Some(&"host"));
        assert_eq!(t.peek(&[10, 1, 3, 5]), Some(&"/16"));
    }

    #[test]
    fn range_priorities() {
        let mut t = table(MatchKind::Range, 2, 10);
        t.insert(range(&[0, 0], &[0x03, 0xFF], 1), "low", 0)
            .unwrap();
        t.insert(range(&[0x01, 0xBB], &[0x01, 0xBB], 5), "443", 0)
            .unwrap();
        t.insert(range(&[0, 0], &[0xFF, 0xFF], 1), "all", 0)
            .unwrap();
        assert_eq!(t.peek(&[0x01, 0xBB]), Some(&"443"));
        assert_eq!(t.peek(&[0x01, 0xBC]), Some(&"low"));
        assert_eq!(t.peek(&[0x03, 0xFF]), Some(&"low"));
        assert_eq!(t.peek(&[0x04, 0x00]), Some(&"all"));
        // Big-endian: 0x00FF < 0x0100 even though 0xFF > 0x01 byte-wise last.
        t.insert(range(&[0x00, 0xFF], &[0x01, 0x00], 9), "edge", 0)
            .unwrap();
        assert_eq!(t.peek(&[0x00, 0xFF]), Some(&"edge"));
        assert_eq!(t.peek(&[0x01, 0x00]), Some(&"edge"));
        assert_eq!(t.peek(&[0x01, 0x01]), Some(&"low"));
        assert_eq!(
            t.insert(range(&[0, 0], &[0xFF, 0xFF], 1), "dup", 0),
            Err(TableError::Duplicate)
        );
        assert_eq!(t.delete(&range(&[0, 0], &[0x03, 0xFF], 1)), Ok("low"));
        assert_eq!(t.peek(&[0x01, 0x01]), Some(&"all"));
    }

    #[test]
    fn activity_reads_reset_the_hit_flag() {
        let mut t = MatchTable::new(TableConfig {
            name: "polled".into(),
            kind: MatchKind::Exact,
            key_bytes: 1,
            size: 4,
            idle_timeout: None,
        });
        let spec = MatchSpec::Exact(b(&[1]));
        t.insert(spec.clone(), 10u8, 100).unwrap();
        let read = |t: &mut MatchTable<u8>, now| t.read_activity(&spec, now).unwrap();
        assert_eq!(
            read(&mut t, 150),
            EntryActivity {
                hit: false,
                idle: 50
            }
        );
        t.peek(&[1]);
        assert!(!read(&mut t, 160).hit, "a peek is not a hit");
        t.lookup(&[1], 200);
        assert_eq!(
            read(&mut t, 230),
            EntryActivity {
                hit: true,
                idle: 30
            }
        );
        assert_eq!(
            read(&mut t, 240),
            EntryActivity {
                hit: false,
                idle: 40
            }
        );
        assert_eq!(
            t.read_activity(&MatchSpec::Exact(b(&[2])), 0),
            Err(TableError::NotFound)
        );
        assert!(t.read_activity(&MatchSpec::Exact(b(&[1, 2])), 0).is_err());
    }

    #[test]
    fn idle_timeout_reports_once_and_rearms() {
        let mut t = MatchTable::new(TableConfig {
            name: "aged".into(),
            kind: MatchKind::Exact,
            key_bytes: 1,
            size: 8,
            idle_timeout: Some(100),
        });
        t.insert(MatchSpec::Exact(b(&[1])), 1, 0).unwrap();
        t.insert(MatchSpec::Exact(b(&[2])), 2, 80).unwrap();
        t.insert(MatchSpec::Exact(b(&[3])), 3, 10).unwrap();
        let mut out = Vec::new();
        t.expire_idle(99, &mut out);
        assert!(out.is_empty());
        // Entry 3 was hit at 80; peek does not count as a hit.
        assert_eq!(t.lookup(&[3], 80), Some(&3));
        assert_eq!(t.peek(&[1]), Some(&1));
        t.expire_idle(100, &mut out);
        assert_eq!(out, vec![MatchSpec::Exact(b(&[1]))]);
        // Reported once only.
        out.clear();
        t.expire_idle(179, &mut out);
        assert!(out.is_empty());
        t.expire_idle(180, &mut out);
        // Insertion order: 2 (inserted second) before 3.
        assert_eq!(
            out,
            vec![MatchSpec::Exact(b(&[2])), MatchSpec::Exact(b(&[3]))]
        );
        out.clear();
        // A hit re-arms: idle again 100 after the hit, reported again.
        assert_eq!(t.lookup(&[1], 200), Some(&1));
        t.expire_idle(299, &mut out);
        assert!(out.is_empty());
        t.expire_idle(300, &mut out);
        assert_eq!(out, vec![MatchSpec::Exact(b(&[1]))]);
        // A lookup with an earlier time does not move the timer backwards.
        out.clear();
        t.lookup(&[2], 500);
        t.lookup(&[2], 10);
        t.expire_idle(599, &mut out);
        assert!(out.is_empty());
        // Entries are not deleted by aging.
        assert_eq!(t.len(), 3);
        // Without an idle timeout nothing is ever reported.
        let mut t = table(MatchKind::Exact, 1, 8);
        t.insert(MatchSpec::Exact(b(&[1])), 1, 0).unwrap();
        t.expire_idle(u64::MAX, &mut out);
        assert!(out.is_empty());
    }

    #[test]
    fn entries_in_insertion_order_with_slot_reuse() {
        let mut t = table(MatchKind::Exact, 1, 8);
        for k in [5u8, 3, 9, 1] {
            t.insert(MatchSpec::Exact(b(&[k])), k, 0).unwrap();
        }
        t.delete(&MatchSpec::Exact(b(&[3]))).unwrap();
        t.delete(&MatchSpec::Exact(b(&[5]))).unwrap();
        t.insert(MatchSpec::Exact(b(&[7])), 7, 0).unwrap();
        t.insert(MatchSpec::Exact(b(&[2])), 2, 0).unwrap();
        let order: Vec<u8> = t.entries().map(|(_, a)| *a).collect();
        assert_eq!(order, vec![9, 1, 7, 2]);
        t.delete(&MatchSpec::Exact(b(&[2]))).unwrap();
        t.delete(&MatchSpec::Exact(b(&[9]))).unwrap();
        let order: Vec<u8> = t.entries().map(|(_, a)| *a).collect();
        assert_eq!(order, vec![1, 7]);
    }

    #[test]
    fn zero_width_keys_do_not_panic() {
        for kind in [
            MatchKind::Exact,
            MatchKind::Ternary,
            MatchKind::Lpm,
            MatchKind::Range,
        ] {
            let mut t = table(kind, 0, 4);
            let spec = match kind {
                MatchKind::Exact => MatchSpec::Exact(b(&[])),
                MatchKind::Ternary => tern(&[], &[], 0),
                MatchKind::Lpm => lpm(&[], 0),
                MatchKind::Range => range(&[], &[], 0),
            };
            t.insert(spec.clone(), 1, 0).unwrap();
            assert_eq!(t.lookup(&[], 0), Some(&1));
            assert_eq!(t.lookup(&[0], 0), None);
            assert_eq!(t.delete(&spec), Ok(1));
        }
    }

    #[test]
    fn many_exact_entries() {
        // Enough entries to force several rehashes of the index.
        let mut t = table(MatchKind::Exact, 4, 100_000);
        for i in 0u32..20_000 {
            t.insert(MatchSpec::Exact(b(&i.to_be_bytes())), i, 0)
                .unwrap();
        }
        for i in (0u32..20_000).step_by(2) {
            t.delete(&MatchSpec::Exact(b(&i.to_be_bytes()))).unwrap();
        }
        for i in 0u32..20_000 {
            let want = (i % 2 == 1).then_some(i);
            assert_eq!(t.peek(&i.to_be_bytes()).copied(), want);
        }
    }

    // ---- Property test against a naive reference model. ----

    /// A reference table: a list in insertion order, searched naively bit by
    /// bit, sharing no code with the real one.
    struct Reference {
        kind: MatchKind,
        size: usize,
        entries: Vec<(MatchSpec, u32)>,
    }

    fn bit(bytes: &[u8], i: usize) -> bool {
        bytes[i / 8] >> (7 - i % 8) & 1 == 1
    }

    fn be(bytes: &[u8]) -> u64 {
        bytes.iter().fold(0, |a, &x| a << 8 | u64::from(x))
    }

    impl Reference {
        fn canon(s: &MatchSpec) -> MatchSpec {
            match s {
                MatchSpec::Ternary {
                    value,
                    mask,
                    priority,
                } => {
                    let v: Vec<u8> = value.iter().zip(mask.iter()).map(|(v, m)| v & m).collect();
                    tern(&v, mask, *priority)
                }
                MatchSpec::Lpm { value, prefix_len } => {
                    let mut v = vec![0u8; value.len()];
                    for i in 0..usize::from(*prefix_len) {
                        if bit(value, i) {
                            v[i / 8] |= 0x80 >> (i % 8);
                        }
                    }
                    lpm(&v, *prefix_len)
                }
                other => other.clone(),
            }
        }

        /// The only validation failure the generated specs can hit.
        fn validate(s: &MatchSpec) -> Result<(), TableError> {
            match s {
                MatchSpec::Range { lo, hi, .. } if be(lo) > be(hi) => Err(TableError::BadRange),
                _ => Ok(()),
            }
        }

        fn insert(&mut self, s: &MatchSpec, a: u32) -> Result<(), TableError> {
            Self::validate(s)?;
            let c = Self::canon(s);
            if self.entries.iter().any(|(e, _)| *e == c) {
                return Err(TableError::Duplicate);
            }
            if self.entries.len() >= self.size {
                return Err(TableError::Full { size: self.size });
            }
            self.entries.push((c, a));
            Ok(())
        }

        fn delete(&mut self, s: &MatchSpec) -> Result<u32, TableError> {
            Self::validate(s)?;
            let c = Self::canon(s);
            let i = self
                .entries
                .iter()
                .position(|(e, _)| *e == c)
                .ok_or(TableError::NotFound)?;
            Ok(self.entries.remove(i).1)
        }

        fn lookup(&self, key: &[u8]) -> Option<u32> {
            // (score, action): higher score wins, earlier entry wins ties.
            let mut best: Option<(u64, u32)> = None;
            for (s, a) in &self.entries {
                let score = match s {
                    MatchSpec::Exact(k) => (**k == *key).then_some(0),
                    MatchSpec::Ternary {
                        value,
                        mask,
                        priority,
                    } => (0..key.len() * 8)
                        .all(|i| !bit(mask, i) || bit(key, i) == bit(value, i))
                        .then_some(u64::from(*priority)),
                    MatchSpec::Lpm { value, prefix_len } => (0..usize::from(*prefix_len))
                        .all(|i| bit(key, i) == bit(value, i))
                        .then_some(u64::from(*prefix_len)),
                    MatchSpec::Range { lo, hi, priority } => {
                        (be(lo) <= be(key) && be(key) <= be(hi)).then_some(u64::from(*priority))
                    }
                };
                // Strictly greater: an equal score keeps the earlier entry.
                match (score, best) {
                    (Some(sc), Some((b, _))) if sc <= b => {}
                    (Some(sc), _) => best = Some((sc, *a)),
                    (None, _) => {}
                }
            }
            best.map(|(_, a)| a)
        }
    }

    #[derive(Debug, Clone)]
    enum Op {
        Insert(MatchSpec, u32),
        Delete(MatchSpec),
        Lookup(Vec<u8>),
    }

    const W: usize = 2;

    /// Bytes from a small alphabet, so that entries overlap and collide.
    fn byte() -> impl Strategy<Value = u8> {
        prop_oneof![Just(0u8), Just(0xFF), Just(0xF0), 0u8..4, any::<u8>()]
    }

    fn bytes() -> impl Strategy<Value = Vec<u8>> {
        proptest::collection::vec(byte(), W)
    }

    fn spec(kind: MatchKind) -> BoxedStrategy<MatchSpec> {
        match kind {
            MatchKind::Exact => bytes().prop_map(|k| MatchSpec::Exact(k.into())).boxed(),
            MatchKind::Ternary => (bytes(), bytes(), 0u32..3)
                .prop_map(|(v, m, p)| tern(&v, &m, p))
                .boxed(),
            MatchKind::Lpm => (bytes(), 0u16..=(W as u16 * 8))
                .prop_map(|(v, l)| lpm(&v, l))
                .boxed(),
            MatchKind::Range => (bytes(), bytes(), 0u32..3)
                .prop_map(|(lo, hi, p)| range(&lo, &hi, p))
                .boxed(),
        }
    }

    fn ops(kind: MatchKind) -> impl Strategy<Value = Vec<Op>> {
        let op = prop_oneof![
            3 => (spec(kind), any::<u32>()).prop_map(|(s, a)| Op::Insert(s, a)),
            1 => spec(kind).prop_map(Op::Delete),
            4 => bytes().prop_map(Op::Lookup),
        ];
        proptest::collection::vec(op, 1..150)
    }

    fn check_against_reference(kind: MatchKind, ops: Vec<Op>) -> Result<(), TestCaseError> {
        let size = 24;
        let mut t = table(kind, W, size);
        let mut r = Reference {
            kind,
            size,
            entries: Vec::new(),
        };
        for (now, op) in ops.into_iter().enumerate() {
            match op {
                Op::Insert(s, a) => {
                    prop_assert_eq!(
                        t.insert(s.clone(), a, now as u64),
                        r.insert(&s, a),
                        "{:?}",
                        s
                    )
                }
                Op::Delete(s) => prop_assert_eq!(t.delete(&s), r.delete(&s), "{:?}", s),
                Op::Lookup(k) => {
                    prop_assert_eq!(t.lookup(&k, now as u64).copied(), r.lookup(&k), "{:?}", k);
                    prop_assert_eq!(t.peek(&k).copied(), r.lookup(&k));
                }
            }
            prop_assert_eq!(t.len(), r.entries.len());
        }
        prop_assert_eq!(r.kind, t.config().kind);
        let listed: Vec<(MatchSpec, u32)> = t.entries().map(|(s, a)| (s.clone(), *a)).collect();
        prop_assert_eq!(listed, r.entries.clone());
        // Keys built from boundary bytes of the generator's alphabet agree
        // after the whole sequence (random keys were checked along the way).
        const EDGES: [u8; 12] = [0, 1, 2, 3, 4, 0x7F, 0x80, 0xEF, 0xF0, 0xF1, 0xFE, 0xFF];
        for k0 in EDGES {
            for k1 in EDGES {
                let k = [k0, k1];
                prop_assert_eq!(t.peek(&k).copied(), r.lookup(&k), "{:?}", k);
            }
        }
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn exact_matches_reference(ops in ops(MatchKind::Exact)) {
            check_against_reference(MatchKind::Exact, ops)?;
        }

        #[test]
        fn ternary_matches_reference(ops in ops(MatchKind::Ternary)) {
            check_against_reference(MatchKind::Ternary, ops)?;
        }

        #[test]
        fn lpm_matches_reference(ops in ops(MatchKind::Lpm)) {
            check_against_reference(MatchKind::Lpm, ops)?;
        }

        #[test]
        fn range_matches_reference(ops in ops(MatchKind::Range)) {
            check_against_reference(MatchKind::Range, ops)?;
        }

        /// Arbitrary specs and keys of any width never panic.
        #[test]
        fn arbitrary_input_never_panics(
            kind in prop_oneof![Just(MatchKind::Exact), Just(MatchKind::Ternary), Just(MatchKind::Lpm), Just(MatchKind::Range)],
            key_bytes in 0usize..4,
            specs in proptest::collection::vec((0u8..4, proptest::collection::vec(any::<u8>(), 0..5), proptest::collection::vec(any::<u8>(), 0..5), any::<u16>()), 0..20),
            keys in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..5), 0..20),
        ) {
            let mut t = table(kind, key_bytes, 8);
            for (i, (k, a, m, n)) in specs.into_iter().enumerate() {
                let s = match k {
                    0 => MatchSpec::Exact(a.into()),
                    1 => tern(&a, &m, u32::from(n)),
                    2 => lpm(&a, n % 40),
                    _ => range(&a, &m, u32::from(n)),
                };
                let _ = t.insert(s.clone(), i, i as u64);
                let _ = t.modify(&s, i);
                if n % 3 == 0 { let _ = t.delete(&s); }
            }
            for k in keys {
                let _ = t.lookup(&k, 1);
            }
            let mut out = Vec::new();
            t.expire_idle(u64::MAX, &mut out);
        }
    }
}
