//! The TEA control plane on the switch CPU (spec §3.3, §5.4, §5.5, §5.8):
//! event dispatch, the serial executor of table-operation plans (H5's
//! [`crate::table::TeaTable`] step plans, with the §5.4 costs: each table
//! entry change through the switch's control-plane channel, `T_GRACE` waits,
//! WRITE_BATCHes to the agents), the stash drain, cache management from
//! digests with sketch epochs, and the NF slow path.
//!
//! Server setup, recovery, QP resets, heartbeats and the watchdog live in
//! `cp_servers.rs`; the agent link (requests, retransmission) in
//! `cp_agent.rs`.
//!
//! Operations are queued as *intents* and turned into plans only when they
//! start [our choice], so the master mirror is never ahead of the data plane
//! by more than the running plan; a recovering server is reloaded from the
//! mirror only between plans.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use inca_switch::device::ControlMessage;
use inca_switch::{ControlEvent, ControlPlane, MatchSpec, Nanos, PacketOutDest, PortId};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use crate::table::{Plan, Step, TeaTable};

use super::config::TeaConfig;
use super::cp_agent::AgentLink;
use super::cp_servers::ServerRec;
use super::dataplane::{CacheEntry, TeaSwitch, CPU_HEADER, REASON_AGENT, REASON_NF};
use super::nf_api::TeaNf;
use super::observer::CommitRecord;
use super::punts::PendingPunts;
use super::wire::TeaDigest;

/// Control message kind: insert `key ‖ value` (the `TeaTable::insert` of
/// spec §5.11, for experiments and tests).
pub const MSG_INSERT: u32 = 0x7EA0_0001;
/// Control message kind: delete `key`.
pub const MSG_DELETE: u32 = 0x7EA0_0002;
/// Control message kind: update `key ‖ value`.
pub const MSG_UPDATE: u32 = 0x7EA0_0003;
/// Bound on queued operations; more are refused and counted.
pub const MAX_INTENTS: usize = 65_536;
/// Stash entries the drain task tries per tick [our choice: few, so one
/// drain plan stays short].
pub const DRAIN_BATCH: usize = 8;

pub(crate) const TOKEN_HEARTBEAT: u64 = 1;
pub(crate) const TOKEN_WATCHDOG: u64 = 2;
pub(crate) const TOKEN_EPOCH: u64 = 3;
pub(crate) const TOKEN_DRAIN: u64 = 4;
/// Register entries one sketch-clear operation zeroes [our choice]: the
/// epoch's clear (spec §5.5, 1 ms per 64K slots) is issued in slices of
/// this many entries, one at a time, so table operations queued on the
/// FIFO channel wait at most one slice (15.6 µs) instead of the whole
/// clear (13 ms for 4 sketch rows and 2 Bloom-filter arrays).
pub const CLEAR_SLICE: u64 = 1024;
/// Cost of clearing one register entry at the spec's 1 ms per 64K slots.
const CLEAR_NS_PER_64K: u64 = 1_000_000;
/// Oldest cache hit counts an eviction may be judged on [our choice]: a
/// digest that would evict reads the hit counters again if the copy is
/// older than this (spec §5.5: "the entry with the fewest hits this epoch").
pub const HITS_MAX_AGE: Nanos = 1_000_000;
/// Grace timers: base + plan sequence number.
pub(crate) const TOKEN_GRACE: u64 = 1 << 32;
/// Agent retransmission timers: base + request id.
pub(crate) const TOKEN_AGENT: u64 = 1 << 40;

/// A control message asking the TEA control plane to insert an entry.
pub fn insert_message(key: &[u8], value: &[u8]) -> ControlMessage {
    ControlMessage {
        kind: MSG_INSERT,
        body: [key, value].concat(),
    }
}

/// A control message asking for a delete.
pub fn delete_message(key: &[u8]) -> ControlMessage {
    ControlMessage {
        kind: MSG_DELETE,
        body: key.to_vec(),
    }
}

/// A control message asking for an update.
pub fn update_message(key: &[u8], value: &[u8]) -> ControlMessage {
    ControlMessage {
        kind: MSG_UPDATE,
        body: [key, value].concat(),
    }
}

/// One slice of the epoch's sketch clear: (array, first entry).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ClearSlice {
    Cms(usize, u64),
    Bf(usize, u64),
}

/// An operation waiting for its turn.
#[derive(Debug, Clone)]
pub(crate) enum Intent {
    Insert {
        key: Vec<u8>,
        value: Vec<u8>,
        reinject: Option<(Vec<u8>, PortId)>,
    },
    Update {
        key: Vec<u8>,
        value: Vec<u8>,
    },
    Delete {
        key: Vec<u8>,
    },
    Digest {
        key: Vec<u8>,
        est: u64,
    },
    Drain,
}

/// A plan about to start: the plan, the key's value once it completes,
/// whether it changes the committed map, and a packet to re-inject.
type Started = (Plan, Option<Vec<u8>>, bool, Option<(Vec<u8>, PortId)>);

/// What the running plan waits for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Wait {
    /// Nothing: run the next step.
    Ready,
    /// A barrier read (all earlier channel operations in effect).
    Barrier(u64),
    /// The grace timer with this token.
    Grace(u64),
    /// WRITE_BATCH acknowledgments (agent request ids).
    Writes(BTreeSet<u32>),
}

/// The plan being executed.
#[derive(Debug, Clone)]
pub(crate) struct Running {
    pub plan: Plan,
    pub next: usize,
    pub wait: Wait,
    pub started: Nanos,
    pub seq: u64,
    /// Value the key has once the plan completes (for the observer).
    pub result: Option<Vec<u8>>,
    /// Whether the plan changes the committed key → value map (inserts,
    /// updates, deletes; not drains or cache installs).
    pub commits: bool,
    pub reinject: Option<(Vec<u8>, PortId)>,
}

/// Control-plane counters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CpStats {
    /// Plans completed.
    pub plans_done: u64,
    /// Operations refused (queue full, stash full, bad widths, not found).
    pub ops_refused: u64,
    /// Agent requests retransmitted.
    pub agent_retransmits: u64,
    /// NAK reports received.
    pub naks: u64,
    /// QP resets (NAK 0x61–0x63, watchdog on ERROR).
    pub qp_resets: u64,
    /// Watchdog PSN re-programs.
    pub watchdog_fixes: u64,
    /// Watchdog PSN fixes not made: the QP made progress meanwhile.
    pub watchdog_skips: u64,
    /// Server recoveries completed.
    pub recoveries: u64,
    /// Servers declared down.
    pub server_downs: u64,
    /// Hot-key digests handled.
    pub hot_digests: u64,
    /// Cache installs or replacements.
    pub cache_changes: u64,
    /// Sketch epochs.
    pub epochs: u64,
    /// Epochs that began before the previous epoch's sliced clear finished
    /// (its remaining slices were abandoned for the new clear).
    pub epoch_overruns: u64,
    /// Reads of the cache hit counters made for an eviction decision.
    pub hit_reads: u64,
    /// Most intents queued at once.
    pub intents_max: u64,
    /// Malformed agent messages or punts.
    pub malformed: u64,
    /// NF punts that waited behind their key's pending insert.
    pub punts_queued: u64,
    /// NF punts dropped: the wait queue was full.
    pub punts_dropped: u64,
}

/// The control plane's state. See the module documentation.
#[derive(Debug, Clone)]
pub(crate) struct ControlState {
    pub servers: Vec<ServerRec>,
    pub table: Option<TeaTable>,
    pub ready: bool,
    pub intents: VecDeque<Intent>,
    pub plans: VecDeque<Plan>,
    pub running: Option<Running>,
    pub seq: u64,
    pub agent: AgentLink,
    pub rng: ChaCha8Rng,
    /// Keys installed in the data-plane stash.
    pub dp_stash: BTreeSet<Vec<u8>>,
    /// Keys installed in the data-plane cache, with their hit-counter slot.
    pub dp_cache: BTreeMap<Vec<u8>, u16>,
    pub free_slots: Vec<u16>,
    /// Cache hits per slot, as last read from the data plane.
    pub hits: Vec<u64>,
    /// When `hits` was read (`None`: never, or an install reset a slot).
    pub hits_at: Option<Nanos>,
    /// A pending read of the hit counters an eviction waits for.
    pub hits_read: Option<u64>,
    pub epoch_read: Option<u64>,
    /// When the pending watchdog read was issued.
    pub watchdog_issued: Nanos,
    /// Sketch and Bloom-filter slices still to clear this epoch.
    pub clear_slices: VecDeque<ClearSlice>,
    /// The barrier read that says the slice in flight is done.
    pub clear_barrier: Option<u64>,
    pub watchdog_read: Option<u64>,
    /// Barrier read → server whose setup it completes.
    pub setup_barriers: BTreeMap<u64, usize>,
    /// Entries to preload once every server is set up.
    pub preload: Vec<(Vec<u8>, Vec<u8>)>,
    /// Keys whose slow-path insert is pending, and packets waiting on them.
    pub punts: PendingPunts,
    pub stats: CpStats,
}

impl ControlState {
    pub(crate) fn new(cfg: &TeaConfig) -> Self {
        ControlState {
            servers: cfg.servers.iter().map(ServerRec::new).collect(),
            table: None,
            ready: false,
            intents: VecDeque::new(),
            plans: VecDeque::new(),
            running: None,
            seq: 0,
            agent: AgentLink::default(),
            rng: ChaCha8Rng::seed_from_u64(0x7EA),
            dp_stash: BTreeSet::new(),
            dp_cache: BTreeMap::new(),
            free_slots: (0..cfg.cache_cap.min(usize::from(u16::MAX)) as u16)
                .rev()
                .collect(),
            hits: vec![0; cfg.cache_cap],
            hits_at: None,
            hits_read: None,
            epoch_read: None,
            watchdog_issued: 0,
            clear_slices: VecDeque::new(),
            clear_barrier: None,
            watchdog_read: None,
            setup_barriers: BTreeMap::new(),
            preload: Vec::new(),
            punts: PendingPunts::default(),
            stats: CpStats::default(),
        }
    }

    /// True when no plan runs and none is queued.
    pub(crate) fn quiescent(&self) -> bool {
        self.running.is_none() && self.plans.is_empty()
    }
}

impl<N: TeaNf> TeaSwitch<N> {
    /// Seeds the control plane's RNG (displacement choices, initial PSNs).
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.cp.rng = ChaCha8Rng::seed_from_u64(seed);
        self
    }

    /// Entries installed when the table is first set up, before traffic
    /// (experiments' preloaded keys) [our choice: written straight to DRAM,
    /// without the stash, since nothing can look them up yet].
    pub fn with_preload(mut self, entries: Vec<(Vec<u8>, Vec<u8>)>) -> Self {
        self.cp.preload = entries;
        self
    }

    /// Control-plane counters.
    pub fn cp_stats(&self) -> &CpStats {
        &self.cp.stats
    }

    /// The master mirror (once every server has said HELLO).
    pub fn table(&self) -> Option<&TeaTable> {
        self.cp.table.as_ref()
    }

    /// Whether setup is complete and lookups can reach DRAM.
    pub fn is_ready(&self) -> bool {
        self.cp.ready
    }

    /// A one-line description of the executor's state, for diagnostics.
    pub fn cp_state(&self) -> String {
        let phases: Vec<String> = self
            .cp
            .servers
            .iter()
            .map(|s| format!("{:?}", s.phase))
            .collect();
        format!(
            "ready {} running {:?} intents {} plans {} servers {:?} pending agent {}",
            self.cp.ready,
            self.cp.running.as_ref().map(|r| (
                r.plan.op,
                r.next,
                r.plan.steps.len(),
                r.wait.clone()
            )),
            self.cp.intents.len(),
            self.cp.plans.len(),
            phases,
            self.cp.agent.pending.len()
        )
    }

    /// Inserts, updates and deletes queued or running (not the periodic
    /// drain or cache work, which never ends while the stash is not empty).
    pub fn pending_commits(&self) -> usize {
        self.cp
            .intents
            .iter()
            .filter(|i| {
                matches!(
                    i,
                    Intent::Insert { .. } | Intent::Update { .. } | Intent::Delete { .. }
                )
            })
            .count()
            + usize::from(self.cp.running.as_ref().is_some_and(|r| r.commits))
    }

    /// NF punts waiting for their key's pending insert.
    pub fn punts_waiting(&self) -> usize {
        self.cp.punts.waiting()
    }

    /// Operations queued or running.
    pub fn pending_ops(&self) -> usize {
        self.cp.intents.len() + self.cp.plans.len() + usize::from(self.cp.running.is_some())
    }

    pub(crate) fn control_event(
        &mut self,
        event: ControlEvent<TeaDigest>,
        cp: &mut ControlPlane<'_>,
    ) {
        match event {
            ControlEvent::Start => self.on_start(cp),
            ControlEvent::Timer { token } => self.on_timer(token, cp),
            ControlEvent::RegisterValues { request, values } => {
                self.on_register_values(request, values, cp)
            }
            ControlEvent::PacketIn { reason, frame, .. } if reason == REASON_AGENT => {
                self.on_agent_frame(&frame, cp)
            }
            ControlEvent::PacketIn { reason, frame, .. } if reason == REASON_NF => {
                self.on_nf_punt(frame, cp)
            }
            // TEA issues no entry or counter reads.
            ControlEvent::PacketIn { .. }
            | ControlEvent::IdleTimeout { .. }
            | ControlEvent::EntryActivity { .. }
            | ControlEvent::CounterValues { .. } => {}
            ControlEvent::Digest(d) => self.on_digest(d, cp),
            ControlEvent::OpFailed { .. } => self.cp.stats.malformed += 1,
            ControlEvent::PortStatus { port, up } => self.on_port_status(port, up, cp),
            ControlEvent::Message(m) => self.on_message(m, cp),
        }
        self.pump(cp);
    }

    fn on_start(&mut self, cp: &mut ControlPlane<'_>) {
        let now = cp.now();
        cp.set_timer(now + self.cfg.t_heartbeat, TOKEN_HEARTBEAT);
        cp.set_timer(now + self.cfg.t_watchdog, TOKEN_WATCHDOG);
        cp.set_timer(now + self.cfg.t_epoch, TOKEN_EPOCH);
        cp.set_timer(now + self.cfg.t_drain, TOKEN_DRAIN);
        self.install_static(cp);
    }

    fn on_timer(&mut self, token: u64, cp: &mut ControlPlane<'_>) {
        let now = cp.now();
        match token {
            TOKEN_HEARTBEAT => {
                self.heartbeat(cp);
                cp.set_timer(now + self.cfg.t_heartbeat, TOKEN_HEARTBEAT);
            }
            TOKEN_WATCHDOG => {
                if let (Some(h), true) = (self.h, self.cp.ready) {
                    let n = self.cfg.qp_count() as u64;
                    self.cp.watchdog_issued = now;
                    self.cp.watchdog_read = Some(cp.register_read(h.outstanding, 0, n));
                }
                cp.set_timer(now + self.cfg.t_watchdog, TOKEN_WATCHDOG);
            }
            TOKEN_EPOCH => {
                self.epoch(cp);
                cp.set_timer(now + self.cfg.t_epoch, TOKEN_EPOCH);
            }
            TOKEN_DRAIN => {
                if self.cp.table.as_ref().is_some_and(|t| t.stash_len() > 0)
                    && !self.cp.intents.iter().any(|i| matches!(i, Intent::Drain))
                {
                    self.push_intent(Intent::Drain);
                }
                cp.set_timer(now + self.cfg.t_drain, TOKEN_DRAIN);
            }
            t if t >= TOKEN_AGENT => self.agent_timer((t - TOKEN_AGENT) as u32, cp),
            t if t >= TOKEN_GRACE => {
                if let Some(r) = &mut self.cp.running {
                    if r.wait == Wait::Grace(t) {
                        r.wait = Wait::Ready;
                    }
                }
            }
            _ => {}
        }
    }

    fn on_register_values(&mut self, request: u64, values: Vec<u64>, cp: &mut ControlPlane<'_>) {
        if let Some(r) = &mut self.cp.running {
            if r.wait == Wait::Barrier(request) {
                r.wait = Wait::Ready;
                if let Some(p) = r.reinject.take() {
                    // The key is in the stash now: the re-injected packets
                    // find it in SRAM.
                    let key = r.plan.key.clone();
                    self.reinject(&key, p, cp);
                }
                return;
            }
        }
        if self.cp.clear_barrier == Some(request) {
            self.cp.clear_barrier = None;
            self.clear_next_slice(cp);
            return;
        }
        if let Some(sid) = self.cp.setup_barriers.remove(&request) {
            self.setup_installed(sid, cp);
            return;
        }
        if self.cp.watchdog_read == Some(request) {
            self.cp.watchdog_read = None;
            let issued = self.cp.watchdog_issued;
            self.watchdog(&values, issued, cp);
            return;
        }
        if self.watchdog_fix_read(request, &values, cp) {
            return;
        }
        if self.cp.epoch_read == Some(request) || self.cp.hits_read == Some(request) {
            if self.cp.hits_read == Some(request) {
                self.cp.hits_read = None;
            } else {
                self.cp.epoch_read = None;
            }
            for (slot, v) in values.into_iter().enumerate() {
                if let Some(h) = self.cp.hits.get_mut(slot) {
                    *h = v;
                }
            }
            self.cp.hits_at = Some(cp.now());
        }
    }

    fn on_message(&mut self, m: ControlMessage, _cp: &mut ControlPlane<'_>) {
        let (k, v) = (self.cfg.key_len, self.cfg.value_len);
        let intent = match m.kind {
            MSG_INSERT if m.body.len() == k + v => Intent::Insert {
                key: m.body[..k].to_vec(),
                value: m.body[k..].to_vec(),
                reinject: None,
            },
            MSG_UPDATE if m.body.len() == k + v => Intent::Update {
                key: m.body[..k].to_vec(),
                value: m.body[k..].to_vec(),
            },
            MSG_DELETE if m.body.len() == k => Intent::Delete {
                key: m.body.clone(),
            },
            _ => {
                self.cp.stats.malformed += 1;
                return;
            }
        };
        self.push_intent(intent);
    }

    fn on_digest(&mut self, d: TeaDigest, cp: &mut ControlPlane<'_>) {
        match d {
            TeaDigest::HotKey { key, est, .. } => {
                self.cp.stats.hot_digests += 1;
                if self.cfg.cache_cap > 0 && !self.cp.dp_cache.contains_key(&key) {
                    self.push_intent(Intent::Digest {
                        key,
                        est: u64::from(est),
                    });
                }
            }
            TeaDigest::Learn { key, value } => {
                self.push_intent(Intent::Insert {
                    key,
                    value,
                    reinject: None,
                });
            }
            TeaDigest::Nak { qp, syndrome, .. } => {
                self.cp.stats.naks += 1;
                if syndrome != inca_wire::roce::syndrome::NAK_PSN_SEQ_ERROR {
                    self.reset_qp(qp, cp);
                }
            }
            TeaDigest::BadOpcode { .. } => self.cp.stats.malformed += 1,
        }
    }

    fn on_nf_punt(&mut self, frame: Vec<u8>, _cp: &mut ControlPlane<'_>) {
        if frame.len() < CPU_HEADER {
            self.cp.stats.malformed += 1;
            return;
        }
        let port = u16::from_be_bytes([frame[0], frame[1]]);
        let reason = u16::from_be_bytes([frame[2], frame[3]]);
        let frame = frame[CPU_HEADER..].to_vec();
        let Ok(parsed) = inca_apps::headers::parse(&frame) else {
            self.cp.stats.malformed += 1;
            return;
        };
        // A packet of a key whose insert is already pending waits for it
        // rather than running the slow path (and queueing inserts) again.
        let own = self.nf.key(&frame, &parsed, port);
        if let Some(k) = &own {
            if self.cp.punts.is_pending(k) {
                self.cp.punts.wait(k, (frame, port));
                self.sync_punt_stats();
                return;
            }
        }
        let action = self.nf.on_punt(&frame, &parsed, port, reason);
        // The packet goes back as soon as the first entry (its own key, by
        // the `PuntAction` contract) is in the stash.
        let mut reinject = action.reinject.then_some((frame, port));
        for (key, value) in action.inserts {
            let r = reinject.take();
            let carries = r.is_some() && own.as_deref() == Some(key.as_slice());
            let k = carries.then(|| key.clone());
            if self.push_intent(Intent::Insert {
                key,
                value,
                reinject: r,
            }) {
                if let Some(k) = k {
                    self.cp.punts.open(k);
                }
            }
        }
    }

    /// Sends `first` and every packet that waited for `key` back to
    /// ingress (the key's insert is in effect, or was refused).
    pub(crate) fn reinject(
        &mut self,
        key: &[u8],
        first: (Vec<u8>, PortId),
        cp: &mut ControlPlane<'_>,
    ) {
        cp.packet_out(first.0, PacketOutDest::Ingress(first.1));
        for (f, port) in self.cp.punts.release(key) {
            cp.packet_out(f, PacketOutDest::Ingress(port));
        }
    }

    fn sync_punt_stats(&mut self) {
        self.cp.stats.punts_queued = self.cp.punts.queued;
        self.cp.stats.punts_dropped = self.cp.punts.dropped;
    }

    /// Queues an intent; false (and counted) if the queue is full.
    pub(crate) fn push_intent(&mut self, i: Intent) -> bool {
        if self.cp.intents.len() >= MAX_INTENTS {
            self.cp.stats.ops_refused += 1;
            return false;
        }
        self.cp.intents.push_back(i);
        self.cp.stats.intents_max = self.cp.stats.intents_max.max(self.cp.intents.len() as u64);
        true
    }

    /// Sketch epoch (spec §5.5): clear the sketch and the Bloom filter, read
    /// and reset the cache hit counters.
    fn epoch(&mut self, cp: &mut ControlPlane<'_>) {
        let Some(h) = self.h else {
            return;
        };
        self.cp.stats.epochs += 1;
        if !self.cp.clear_slices.is_empty() || self.cp.clear_barrier.is_some() {
            self.cp.stats.epoch_overruns += 1;
            self.cp.clear_slices.clear();
        }
        // The sketch and the Bloom filter are cleared in slices (see
        // `CLEAR_SLICE`); the first goes out now, each next one once the
        // previous is done (a barrier read after it), so the channel is
        // never more than one slice behind and table operations interleave.
        let cols = super::dataplane::CMS_COLS as u64;
        let bits = super::dataplane::BF_BITS as u64;
        for r in 0..h.cms.len() {
            for first in (0..cols).step_by(CLEAR_SLICE as usize) {
                self.cp.clear_slices.push_back(ClearSlice::Cms(r, first));
            }
        }
        for j in 0..h.bf.len() {
            for first in (0..bits).step_by(CLEAR_SLICE as usize) {
                self.cp.clear_slices.push_back(ClearSlice::Bf(j, first));
            }
        }
        if self.cfg.cache_cap > 0 {
            let n = self.cfg.cache_cap as u64;
            self.cp.epoch_read = Some(cp.register_read(h.cache_hits, 0, n));
            cp.register_clear_timed(h.cache_hits, clear_cost(n));
        }
        if self.cp.clear_barrier.is_none() {
            self.clear_next_slice(cp);
        }
        if let Some(t) = &mut self.cp.table {
            t.end_epoch();
        }
    }

    /// Issues the next slice of the epoch's sketch clear.
    fn clear_next_slice(&mut self, cp: &mut ControlPlane<'_>) {
        let (Some(h), Some(slice)) = (self.h, self.cp.clear_slices.pop_front()) else {
            return;
        };
        let cost = clear_cost(CLEAR_SLICE);
        match slice {
            ClearSlice::Cms(r, first) => {
                cp.register_clear_range_timed(h.cms[r], first, CLEAR_SLICE, cost)
            }
            ClearSlice::Bf(j, first) => {
                cp.register_clear_range_timed(h.bf[j], first, CLEAR_SLICE, cost)
            }
        };
        self.cp.clear_barrier = Some(cp.register_read(h.barrier, 0, 1));
    }

    /// Whether the next intent is a digest that may evict and must first
    /// see fresh hit counts; issues the read if none is pending.
    fn digest_needs_hits(&mut self, cp: &mut ControlPlane<'_>) -> bool {
        let Some(Intent::Digest { .. }) = self.cp.intents.front() else {
            return false;
        };
        let full = self
            .cp
            .table
            .as_ref()
            .is_some_and(|t| t.cache().len() >= self.cfg.cache_cap);
        if !full {
            return false;
        }
        if self.cp.hits_read.is_some() {
            return true;
        }
        let fresh = self
            .cp
            .hits_at
            .is_some_and(|t| cp.now().saturating_sub(t) <= HITS_MAX_AGE);
        if fresh {
            return false;
        }
        let Some(h) = self.h else {
            return false;
        };
        self.cp.stats.hit_reads += 1;
        self.cp.hits_read = Some(cp.register_read(h.cache_hits, 0, self.cfg.cache_cap as u64));
        true
    }

    /// Turns the next intent into plans (at most one intent per call).
    fn plan_next(&mut self, cp: &mut ControlPlane<'_>) -> Option<Started> {
        if let Some(p) = self.cp.plans.pop_front() {
            return Some((p, None, false, None));
        }
        // Table operations first; the drain runs when nothing else waits
        // [our choice: a drain can be long and must not starve them].
        let next = self
            .cp
            .intents
            .iter()
            .position(|i| !matches!(i, Intent::Drain))
            .unwrap_or(0);
        if next == 0 && self.digest_needs_hits(cp) {
            return None;
        }
        let intent = self.cp.intents.remove(next)?;
        let table = self.cp.table.as_mut()?;
        let hits = &self.cp.hits;
        let slots = &self.cp.dp_cache;
        let plan = match intent {
            Intent::Insert {
                key,
                value,
                reinject,
            } => match table.insert(&key, &value, &mut self.cp.rng) {
                Ok(p) => Some((p, Some(value), true, reinject)),
                Err(_) => {
                    self.cp.stats.ops_refused += 1;
                    // The NF's packet goes back anyway: it is dropped as a
                    // re-injected miss, not looped.
                    if let Some(p) = reinject {
                        self.reinject(&key, p, cp);
                    }
                    None
                }
            },
            Intent::Update { key, value } => match table.update(&key, &value) {
                Ok(p) => Some((p, Some(value), true, None)),
                Err(_) => {
                    self.cp.stats.ops_refused += 1;
                    None
                }
            },
            Intent::Delete { key } => match table.delete(&key) {
                Ok(p) => Some((p, None, true, None)),
                Err(_) => {
                    self.cp.stats.ops_refused += 1;
                    None
                }
            },
            Intent::Digest { key, est } => table
                .on_digest(&key, est, |k| {
                    slots
                        .get(k)
                        .and_then(|&s| hits.get(usize::from(s)).copied())
                        .unwrap_or(0)
                })
                .map(|p| (p, None, false, None)),
            Intent::Drain => table
                .drain(DRAIN_BATCH, &mut self.cp.rng)
                .map(|p| (p, None, false, None)),
        };
        // An empty result still consumed the intent; the caller loops.
        plan.or_else(|| Some((empty_plan(), None, false, None)))
    }

    /// Runs plans until one has to wait.
    pub(crate) fn pump(&mut self, cp: &mut ControlPlane<'_>) {
        // A bounded number of rounds per event: a long queue of no-op
        // intents must not monopolise one CPU event.
        for _ in 0..4096 {
            if self.cp.running.is_none() {
                if !self.cp.ready {
                    return;
                }
                // While a server waits to be reloaded, only plans already
                // made (drain moves, which the mirror holds) may run.
                let blocked = self.recovery_pending();
                if self.cp.plans.is_empty() && (blocked || self.cp.intents.is_empty()) {
                    return;
                }
                let Some((plan, result, commits, reinject)) = self.plan_next(cp) else {
                    return;
                };
                self.cp.seq += 1;
                self.cp.running = Some(Running {
                    plan,
                    next: 0,
                    wait: Wait::Ready,
                    started: cp.now(),
                    seq: self.cp.seq,
                    result,
                    commits,
                    reinject,
                });
            }
            let Some(r) = &self.cp.running else {
                return;
            };
            if r.wait != Wait::Ready {
                return;
            }
            if r.next >= r.plan.steps.len() {
                self.finish_plan(cp);
                continue;
            }
            self.run_step(cp);
        }
    }

    fn finish_plan(&mut self, cp: &mut ControlPlane<'_>) {
        let Some(r) = self.cp.running.take() else {
            return;
        };
        self.cp.stats.plans_done += 1;
        if let Some(p) = r.reinject {
            let key = r.plan.key.clone();
            self.reinject(&key, p, cp);
        }
        if r.commits && !r.plan.key.is_empty() {
            if let Some(o) = &self.observer {
                o.commit(CommitRecord {
                    at: cp.now(),
                    started: r.started,
                    key: r.plan.key.clone(),
                    value: r.result.clone(),
                });
            }
        }
        // A recovery waiting for quiescence may go on now.
        self.maybe_resume_recovery(cp);
    }

    fn run_step(&mut self, cp: &mut ControlPlane<'_>) {
        let Some(h) = self.h else {
            return;
        };
        let Some(r) = &mut self.cp.running else {
            return;
        };
        let step = r.plan.steps[r.next].clone();
        r.next += 1;
        let seq = r.seq;
        let wait = match step {
            Step::StashAdd { key, value } => {
                let spec = MatchSpec::Exact(key.clone().into_boxed_slice());
                if self.cp.dp_stash.contains(&key) {
                    cp.table_modify(h.stash, spec, value.into_boxed_slice());
                } else {
                    self.cp.dp_stash.insert(key);
                    cp.table_add(h.stash, spec, value.into_boxed_slice());
                }
                Wait::Barrier(cp.register_read(h.barrier, 0, 1))
            }
            Step::StashRemove { key } => {
                if self.cp.dp_stash.remove(&key) {
                    cp.table_delete(h.stash, MatchSpec::Exact(key.into_boxed_slice()));
                }
                Wait::Barrier(cp.register_read(h.barrier, 0, 1))
            }
            Step::CacheModify { key, value } => {
                let spec = MatchSpec::Exact(key.clone().into_boxed_slice());
                if let Some(&slot) = self.cp.dp_cache.get(&key) {
                    cp.table_modify(
                        h.cache,
                        spec,
                        CacheEntry {
                            value: value.into_boxed_slice(),
                            slot,
                        },
                    );
                } else if let Some(slot) = self.cp.free_slots.pop() {
                    self.cp.stats.cache_changes += 1;
                    self.cp.dp_cache.insert(key, slot);
                    if let Some(x) = self.cp.hits.get_mut(usize::from(slot)) {
                        *x = 0;
                    }
                    // The copy no longer says how the new entry compares.
                    self.cp.hits_at = None;
                    cp.register_write(h.cache_hits, u64::from(slot), 0u32);
                    cp.table_add(
                        h.cache,
                        spec,
                        CacheEntry {
                            value: value.into_boxed_slice(),
                            slot,
                        },
                    );
                }
                Wait::Barrier(cp.register_read(h.barrier, 0, 1))
            }
            Step::CacheRemove { key } => {
                if let Some(slot) = self.cp.dp_cache.remove(&key) {
                    self.cp.free_slots.push(slot);
                    cp.table_delete(h.cache, MatchSpec::Exact(key.into_boxed_slice()));
                }
                Wait::Barrier(cp.register_read(h.barrier, 0, 1))
            }
            Step::WaitGrace => {
                let token = TOKEN_GRACE + (seq & 0xFFFF_FFFF);
                cp.set_timer(cp.now() + self.cfg.t_grace, token);
                Wait::Grace(token)
            }
            Step::WriteCells(batches) => {
                // `send_writes` records every WRITE_BATCH id in the wait set.
                if let Some(r) = &mut self.cp.running {
                    r.wait = Wait::Writes(BTreeSet::new());
                }
                for b in batches {
                    self.send_writes(usize::from(b.server), b.writes, cp);
                }
                match self.cp.running.as_ref().map(|r| &r.wait) {
                    Some(Wait::Writes(ids)) if !ids.is_empty() => Wait::Writes(ids.clone()),
                    _ => Wait::Ready,
                }
            }
        };
        if let Some(r) = &mut self.cp.running {
            r.wait = wait;
        }
    }

    /// A WRITE_BATCH was acknowledged (or its server went down).
    pub(crate) fn write_done(&mut self, req_id: u32) {
        if let Some(r) = &mut self.cp.running {
            if let Wait::Writes(ids) = &mut r.wait {
                ids.remove(&req_id);
                if ids.is_empty() {
                    r.wait = Wait::Ready;
                }
            }
        }
    }
}

/// Cost of clearing `entries` register entries (spec §5.5: 1 ms per 64K).
fn clear_cost(entries: u64) -> Nanos {
    (entries * CLEAR_NS_PER_64K).div_ceil(65_536)
}

fn empty_plan() -> Plan {
    Plan {
        op: crate::table::OpKind::Cache,
        key: Vec::new(),
        outcome: crate::table::Outcome::Cached,
        steps: Vec::new(),
    }
}
