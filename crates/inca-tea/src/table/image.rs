//! A byte-level model of what the data plane and the servers hold, for tests
//! and experiments only: every server region's KV bytes, the switch stash and
//! the switch cache. Plans are applied step by step (or write by write) and
//! the spec §6 properties are checked against the table's master mirror:
//! item 2 (placement, shadow equality), 11 (replica equality), 12 (SRAM
//! coherence) and, with [`VisibilityChecker`], item 3 (no false miss).
//!
//! Only the KV part of each row is stored (the scratchpad belongs to the data
//! plane), so a region costs rows × KV_LEN bytes.

use super::layout::Layout;
use super::partition::{Partition, RegionWrite, ServerId};
use super::{OpKind, Plan, Step, TeaTable};
use std::collections::{BTreeMap, VecDeque};
use std::fmt;

/// A property that does not hold, with what was seen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation(pub String);

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}
impl std::error::Error for Violation {}

fn violation<T>(msg: String) -> Result<T, Violation> {
    Err(Violation(msg))
}

/// The smallest unit of change: one SRAM step, one region write, or a grace wait.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Micro {
    Sram(Step),
    Write {
        server: ServerId,
        write: RegionWrite,
    },
    Grace,
}

/// Split a plan into micro-steps. Each region write inside a WRITE_BATCH is
/// its own micro-step: the NIC may serve READs between the agent's writes.
pub fn micro_steps(plan: &Plan) -> Vec<Micro> {
    let mut out = Vec::new();
    for step in &plan.steps {
        match step {
            Step::WaitGrace => out.push(Micro::Grace),
            Step::WriteCells(batches) => {
                for b in batches {
                    for w in &b.writes {
                        out.push(Micro::Write {
                            server: b.server,
                            write: w.clone(),
                        });
                    }
                }
            }
            other => out.push(Micro::Sram(other.clone())),
        }
    }
    out
}

/// What a lookup would return on the path it takes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LookupView {
    /// Stash, else cache (the stash wins).
    pub sram: Option<Vec<u8>>,
    /// Result of reading row h(K) on each replica (primary first): the value
    /// of a VALID cell holding K, or `None` (a remote miss).
    pub dram: Vec<Option<Vec<u8>>>,
}

/// Every server region's KV bytes plus the switch stash and cache.
#[derive(Debug, Clone)]
pub struct DramImage {
    layout: Layout,
    partition: Partition,
    regions: BTreeMap<(ServerId, u16), Vec<u8>>,
    stash: BTreeMap<Vec<u8>, Vec<u8>>,
    cache: BTreeMap<Vec<u8>, Vec<u8>>,
}

impl DramImage {
    /// Empty (freshly allocated, zeroed) regions for every (server, range).
    pub fn new(partition: &Partition) -> Self {
        let layout = *partition.layout();
        let regions = partition
            .regions()
            .into_iter()
            .map(|r| {
                (
                    (r.server, r.region_id),
                    vec![0u8; r.rows as usize * layout.kv_len()],
                )
            })
            .collect();
        Self {
            layout,
            partition: partition.clone(),
            regions,
            stash: BTreeMap::new(),
            cache: BTreeMap::new(),
        }
    }

    /// Apply one region write. Writes must stay inside a row's KV part.
    pub fn write(&mut self, server: ServerId, w: &RegionWrite) -> Result<(), Violation> {
        let kv = self.layout.kv_len();
        let log2_row = self.layout.log2_row_bytes();
        let Some(region) = self.regions.get_mut(&(server, w.region)) else {
            return violation(format!(
                "write to unknown region {} on server {server}",
                w.region
            ));
        };
        let row = (w.offset >> log2_row) as usize;
        let within = (w.offset & ((1u64 << log2_row) - 1)) as usize;
        if within + w.bytes.len() > kv {
            return violation(format!(
                "write at offset {} spills out of the KV part",
                w.offset
            ));
        }
        let start = row * kv + within;
        let Some(dst) = region.get_mut(start..start + w.bytes.len()) else {
            return violation(format!(
                "write at offset {} past region {}",
                w.offset, w.region
            ));
        };
        dst.copy_from_slice(&w.bytes);
        Ok(())
    }

    fn apply_sram(&mut self, step: &Step) {
        match step {
            Step::StashAdd { key, value } => {
                self.stash.insert(key.clone(), value.clone());
            }
            Step::StashRemove { key } => {
                self.stash.remove(key);
            }
            Step::CacheModify { key, value } => {
                self.cache.insert(key.clone(), value.clone());
            }
            Step::CacheRemove { key } => {
                self.cache.remove(key);
            }
            Step::WaitGrace | Step::WriteCells(_) => {}
        }
    }

    pub fn apply_micro(&mut self, m: &Micro) -> Result<(), Violation> {
        match m {
            Micro::Sram(s) => {
                self.apply_sram(s);
                Ok(())
            }
            Micro::Write { server, write } => self.write(*server, write),
            Micro::Grace => Ok(()),
        }
    }

    /// Apply a whole plan at once.
    pub fn apply_plan(&mut self, plan: &Plan) -> Result<(), Violation> {
        for m in micro_steps(plan) {
            self.apply_micro(&m)?;
        }
        Ok(())
    }

    /// The KV bytes of row i as held by `server` (`None` if it does not hold i).
    pub fn row(&self, server: ServerId, i: u32) -> Option<&[u8]> {
        let range = self.partition.range_of(i);
        let rule = &self.partition.ranges()[range];
        let region = self.regions.get(&(server, rule.range))?;
        let kv = self.layout.kv_len();
        let start = (i - rule.lo) as usize * kv;
        region.get(start..start + kv)
    }

    /// What the data plane does for `key`: stash, then cache, then the READ
    /// of row h(K) on each replica, matching K among the VALID cells.
    pub fn lookup(&self, key: &[u8]) -> LookupView {
        let sram = self.stash.get(key).or_else(|| self.cache.get(key)).cloned();
        let i = self.layout.bucket_of(key);
        let dram = self
            .partition
            .replicas(self.partition.range_of(i))
            .map(|(s, _)| {
                self.row(s, i)
                    .and_then(|kv| self.layout.match_row(kv, key))
                    .map(<[u8]>::to_vec)
            })
            .collect();
        LookupView { sram, dram }
    }

    /// Spec §6 item 2 on the mirror and on every replica's bytes.
    pub fn check_placement(&self, table: &TeaTable) -> Result<(), Violation> {
        let l = &self.layout;
        let mut seen: BTreeMap<Vec<u8>, u32> = BTreeMap::new();
        for b in 0..l.buckets() {
            for c in 0..l.cells() {
                if let Some((k, _)) = table.cell(b, c) {
                    let h = l.bucket_of(k);
                    if b != h && b != l.next_bucket(h) {
                        return violation(format!("key {k:02x?} in bucket {b}, home {h}"));
                    }
                    if table.stash().any(|(sk, _)| sk == k) {
                        return violation(format!("key {k:02x?} both stashed and in bucket {b}"));
                    }
                    *seen.entry(k.to_vec()).or_default() += 1;
                }
            }
        }
        if let Some((k, n)) = seen.iter().find(|(_, &n)| n > 1) {
            return violation(format!("key {k:02x?} in {n} cells"));
        }
        for (range, rule) in self.partition.ranges().iter().enumerate() {
            for (server, _) in self.partition.replicas(range) {
                for i in rule.lo..=rule.hi {
                    let Some(row) = self.row(server, i) else {
                        return violation(format!("server {server} lacks row {i}"));
                    };
                    let (main, shadow) = row.split_at(l.bucket_bytes());
                    if main != table.bucket_bytes(i) {
                        return violation(format!(
                            "server {server} row {i}: main bucket differs from the mirror"
                        ));
                    }
                    let next = l.next_bucket(i);
                    if shadow != table.bucket_bytes(next) {
                        return violation(format!(
                            "server {server} row {i}: shadow differs from bucket {next}"
                        ));
                    }
                }
            }
        }
        Ok(())
    }

    /// Spec §6 item 11: both replicas of every range are byte-identical.
    pub fn check_replicas(&self) -> Result<(), Violation> {
        for (range, rule) in self.partition.ranges().iter().enumerate() {
            let copies: Vec<(ServerId, &Vec<u8>)> = self
                .partition
                .replicas(range)
                .filter_map(|(s, _)| self.regions.get(&(s, rule.range)).map(|r| (s, r)))
                .collect();
            for w in copies.windows(2) {
                if w[0].1 != w[1].1 {
                    return violation(format!(
                        "range {range}: servers {} and {} differ",
                        w[0].0, w[1].0
                    ));
                }
            }
        }
        Ok(())
    }

    /// Spec §6 item 12: stash and cache equal the master, cache ≤ its capacity.
    pub fn check_sram(&self, table: &TeaTable) -> Result<(), Violation> {
        let mirror: BTreeMap<Vec<u8>, Vec<u8>> = table
            .stash()
            .map(|(k, v)| (k.to_vec(), v.to_vec()))
            .collect();
        if mirror != self.stash {
            return violation(format!(
                "stash has {} entries, mirror {} (or values differ)",
                self.stash.len(),
                mirror.len()
            ));
        }
        if self.cache.len() > table.cache().capacity() {
            return violation(format!("cache holds {} entries", self.cache.len()));
        }
        for (k, v) in &self.cache {
            if table.get(k) != Some(v.as_slice()) || table.cache().get(k) != Some(v.as_slice()) {
                return violation(format!("cache entry {k:02x?} differs from the master"));
            }
        }
        if self.cache.len() != table.cache().len() {
            return violation("cache mirror and data-plane cache differ".into());
        }
        Ok(())
    }

    /// Items 2, 11 and 12 together (after a completed operation).
    pub fn check_all(&self, table: &TeaTable) -> Result<(), Violation> {
        self.check_placement(table)?;
        self.check_replicas()?;
        self.check_sram(table)
    }
}

/// What a lookup of a key may return, as the operations on it progress.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Ref {
    Absent,
    Present(Vec<u8>),
    /// Being deleted: the old value or a miss.
    Leaving(Vec<u8>),
}

impl Ref {
    fn allows(&self, r: Option<&[u8]>) -> bool {
        match (self, r) {
            (Ref::Absent, None) | (Ref::Leaving(_), None) => true,
            (Ref::Present(v), Some(x)) | (Ref::Leaving(v), Some(x)) => v.as_slice() == x,
            _ => false,
        }
    }
}

/// From state `from` on (until the next entry), the key was served by SRAM
/// (`hit`) and had reference version `ver`.
#[derive(Debug, Clone, Copy)]
struct Mark {
    from: u64,
    hit: bool,
    ver: u32,
}

struct Watched {
    key: Vec<u8>,
    /// Every reference value this key has had; the index is its version.
    hist: Vec<Ref>,
    last: Option<LookupView>,
    trail: VecDeque<Mark>,
}

/// Longest lookup flight counted in completed steps. [our choice] Each step
/// costs at least 20 µs (a table-entry write or an agent round trip, spec
/// §5.4) and T_GRACE is 100 µs, so a lookup in flight for less than T_GRACE
/// cannot span more than 5 steps.
pub const MAX_FLIGHT_STEPS: u64 = 5;

/// Spec §6 item 3 checker.
///
/// States are the moments between micro-steps. A lookup may check SRAM in
/// one state and read DRAM in the same or a later one, as long as no grace
/// wait lies between them and it spans at most [`MAX_FLIGHT_STEPS`] steps.
/// Its result must be allowed by the key's reference value at the SRAM check
/// or a later one; a present key must never miss.
///
/// Cost control without losing coverage: a micro-step changes what a lookup
/// of key K sees only if it is an SRAM step on K or a write to row h(K) (the
/// only row a lookup of K reads). Other keys see exactly what they saw in the
/// previous state, so every lookup that could start or end in this state was
/// already checked; the checker therefore re-evaluates, per micro-step, the
/// keys it touches, and all watched keys at every plan boundary.
pub struct VisibilityChecker {
    image: DramImage,
    watched: Vec<Watched>,
    slot: BTreeMap<Vec<u8>, usize>,
    by_row: BTreeMap<u32, Vec<usize>>,
    /// (state, step) of the states a lookup in flight may have started from.
    window: VecDeque<(u64, u64)>,
    state: u64,
    step: u64,
    /// Lookups evaluated (instantaneous, plus in-flight SRAM-check/DRAM-read pairs).
    pub lookups: u64,
    pub plans: u64,
    pub micro_steps: u64,
}

impl VisibilityChecker {
    pub fn new(partition: &Partition) -> Self {
        let mut window = VecDeque::new();
        window.push_back((0, 0));
        Self {
            image: DramImage::new(partition),
            watched: Vec::new(),
            slot: BTreeMap::new(),
            by_row: BTreeMap::new(),
            window,
            state: 0,
            step: 0,
            lookups: 0,
            plans: 0,
            micro_steps: 0,
        }
    }
    pub fn image(&self) -> &DramImage {
        &self.image
    }

    fn slot_of(&mut self, key: &[u8]) -> usize {
        if let Some(&s) = self.slot.get(key) {
            return s;
        }
        let s = self.watched.len();
        let mut trail = VecDeque::new();
        // Until now the key was absent and not in SRAM.
        trail.push_back(Mark {
            from: 0,
            hit: false,
            ver: 0,
        });
        self.watched.push(Watched {
            key: key.to_vec(),
            hist: vec![Ref::Absent],
            last: None,
            trail,
        });
        self.slot.insert(key.to_vec(), s);
        let row = self.image.layout.bucket_of(key);
        self.by_row.entry(row).or_default().push(s);
        s
    }

    fn set_ref(&mut self, slot: usize, r: Ref) {
        let w = &mut self.watched[slot];
        if w.hist.last() != Some(&r) {
            w.hist.push(r);
            w.last = None; // re-check lookups in flight against the new reference
        }
    }

    /// Check every lookup of `slot`'s key that can end in the current state.
    fn observe_slot(&mut self, slot: usize) -> Result<(), Violation> {
        let view = self.image.lookup(&self.watched[slot].key);
        let window_start = self.window.front().map_or(self.state, |w| w.0);
        let (state, step, plans) = (self.state, self.step, self.plans);
        let w = &mut self.watched[slot];
        let ver = (w.hist.len() - 1) as u32;
        let now = &w.hist[ver as usize];
        self.lookups += 1;
        let instant: Vec<Option<&[u8]>> = match &view.sram {
            Some(v) => vec![Some(v.as_slice())],
            None => view.dram.iter().map(|d| d.as_deref()).collect(),
        };
        if let Some(bad) = instant.iter().find(|r| !now.allows(**r)) {
            return violation(format!(
                "key {:02x?}: lookup returned {:02x?}, expected {:?} (plan {plans}, step {step})",
                w.key, bad, now
            ));
        }
        if w.last.as_ref() != Some(&view) {
            // Lookups that missed SRAM earlier in the window and read DRAM now.
            while w.trail.len() > 1 && w.trail[1].from <= window_start {
                w.trail.pop_front();
            }
            for m in w.trail.iter().filter(|m| !m.hit) {
                self.lookups += 1;
                let allowed = &w.hist[m.ver as usize..=ver as usize];
                for d in &view.dram {
                    if !allowed.iter().any(|r| r.allows(d.as_deref())) {
                        return violation(format!(
                            "key {:02x?}: a lookup that missed SRAM at state {} read {:02x?} from DRAM at step {step}, expected one of {:?} (plan {plans})",
                            w.key, m.from.max(window_start), d, allowed
                        ));
                    }
                }
            }
        }
        let hit = view.sram.is_some();
        if w.trail.back().is_none_or(|m| m.hit != hit || m.ver != ver) {
            w.trail.push_back(Mark {
                from: state,
                hit,
                ver,
            });
        }
        w.last = Some(view);
        Ok(())
    }

    /// Enter a new state after a micro-step that may have changed `touched`.
    fn advance(&mut self, touched: &[usize]) -> Result<(), Violation> {
        self.state += 1;
        while self
            .window
            .front()
            .is_some_and(|&(_, step)| step + MAX_FLIGHT_STEPS < self.step)
        {
            self.window.pop_front();
        }
        self.window.push_back((self.state, self.step));
        for &slot in touched {
            self.observe_slot(slot)?;
        }
        Ok(())
    }

    fn observe_all(&mut self) -> Result<(), Violation> {
        (0..self.watched.len()).try_for_each(|s| self.observe_slot(s))
    }

    /// The watched keys a micro-step can affect.
    fn touched_by(&self, m: &Micro) -> Vec<usize> {
        match m {
            Micro::Sram(
                Step::StashAdd { key, .. }
                | Step::StashRemove { key }
                | Step::CacheModify { key, .. }
                | Step::CacheRemove { key },
            ) => self.slot.get(key).copied().into_iter().collect(),
            Micro::Write { server, write } => {
                let Some(lo) = self
                    .image
                    .partition
                    .ranges()
                    .iter()
                    .find(|r| r.range == write.region)
                    .map(|r| r.lo)
                else {
                    return Vec::new();
                };
                let _ = server;
                let row = lo + (write.offset >> self.image.layout.log2_row_bytes()) as u32;
                self.by_row.get(&row).cloned().unwrap_or_default()
            }
            _ => Vec::new(),
        }
    }

    /// Run one plan made by `table` (whose mirror already reflects it),
    /// checking lookups at every intermediate state, then items 2, 11 and 12.
    pub fn run_plan(&mut self, plan: &Plan, table: &TeaTable) -> Result<(), Violation> {
        self.plans += 1;
        let keyed = matches!(plan.op, OpKind::Insert | OpKind::Update | OpKind::Delete);
        let target = if keyed {
            Some(self.slot_of(&plan.key))
        } else {
            None
        };
        let new_value = table.get(&plan.key).map(<[u8]>::to_vec);
        if let (Some(target), OpKind::Delete) = (target, plan.op) {
            if let Some(Ref::Present(old)) = self.watched[target].hist.last().cloned() {
                self.set_ref(target, Ref::Leaving(old));
                self.observe_slot(target)?;
            }
        }
        let mut prev_was_write = false;
        for m in micro_steps(plan) {
            self.micro_steps += 1;
            if let Micro::Grace = m {
                // Nothing in flight before the wait is still in flight after it.
                self.step += 1;
                self.state += 1;
                self.window.clear();
                self.window.push_back((self.state, self.step));
                prev_was_write = false;
                continue;
            }
            self.image.apply_micro(&m)?;
            let mut touched = self.touched_by(&m);
            if let (Some(target), Micro::Sram(Step::StashAdd { key, value })) = (target, &m) {
                if plan.op != OpKind::Delete
                    && *key == plan.key
                    && new_value.as_deref() == Some(value.as_slice())
                {
                    self.set_ref(target, Ref::Present(value.clone()));
                    touched.push(target);
                }
            }
            // The writes of one WriteCells share a step; every SRAM step is one.
            let is_write = matches!(m, Micro::Write { .. });
            if !(is_write && prev_was_write) {
                self.step += 1;
            }
            prev_was_write = is_write;
            self.advance(&touched)?;
        }
        if let Some(target) = target {
            let end_ref = match &new_value {
                Some(v) => Ref::Present(v.clone()),
                None => Ref::Absent,
            };
            self.set_ref(target, end_ref);
        }
        self.step += 1;
        self.advance(&[])?;
        self.observe_all()?;
        self.image.check_all(table)
    }
}
