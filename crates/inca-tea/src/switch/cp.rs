//! The TEA control plane on the switch CPU (spec §3.3, §5.4, §5.5, §5.8):
//! event dispatch, the serial executor of table-operation plans (H5's
//! [`crate::table::TeaTable`] step plans, with the §5.4 costs: each table
//! entry change through the switch's control-plane channel, `T_GRACE` waits,
//! WRITE_BATCHes to the agents), the stash drain, cache management from
//! digests with sketch epochs, and the NF slow path.
//!
//! [`ControlState`] composes owning parts, each in its own module with its
//! invariants: the executor's intents and running plan (`cp_plans.rs`), the
//! cache slots, hit counts and sketch clear (`cp_cache.rs`), the servers
//! (`cp_servers.rs`: setup, recovery, QP resets, heartbeats, watchdog) and
//! the agent link (`cp_agent.rs`: requests, retransmission). Displacement
//! choices and initial PSNs draw from the switch's device RNG
//! (`ControlPlane::rng`), so a restarted switch does not repeat them.
//!
//! Operations are queued as *intents* and turned into plans only when they
//! start [our choice], so the master mirror is never ahead of the data plane
//! by more than the running plan; a recovering server is reloaded from the
//! mirror only between plans.

use std::collections::BTreeSet;

use inca_switch::device::ControlMessage;
use inca_switch::{ControlEvent, ControlPlane, MatchSpec, Nanos, PacketOutDest, PortId};

use crate::table::{Plan, Step, TeaTable};

use super::config::TeaConfig;
use super::cp_agent::{agent_link, AgentLink};
use super::cp_cache::{CacheState, ClearSlice, HitsNeed, SketchClear};
use super::cp_plans::{Executor, Intent, Started, Wait};
use super::cp_servers::Servers;
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
    /// Table writes that exhausted their retries (each marks its server
    /// down).
    pub write_give_ups: u64,
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
    pub servers: Servers,
    /// The master mirror (once every server has said HELLO).
    pub table: Option<TeaTable>,
    pub ready: bool,
    pub exec: Executor,
    pub agent: AgentLink,
    /// Keys installed in the data-plane stash.
    pub dp_stash: BTreeSet<Vec<u8>>,
    pub cache: CacheState,
    pub clear: SketchClear,
    /// Entries to preload once every server is set up.
    pub preload: Vec<(Vec<u8>, Vec<u8>)>,
    /// Keys whose slow-path insert is pending, and packets waiting on them.
    pub punts: PendingPunts,
    pub stats: CpStats,
}

impl ControlState {
    pub(crate) fn new(cfg: &TeaConfig) -> Self {
        ControlState {
            servers: Servers::new(&cfg.servers),
            table: None,
            ready: false,
            exec: Executor::default(),
            agent: agent_link(cfg),
            dp_stash: BTreeSet::new(),
            cache: CacheState::new(cfg.cache_cap),
            clear: SketchClear::default(),
            preload: Vec::new(),
            punts: PendingPunts::default(),
            stats: CpStats::default(),
        }
    }

    /// True when no plan runs and none is queued.
    pub(crate) fn quiescent(&self) -> bool {
        self.exec.quiescent()
    }
}

impl<N: TeaNf> TeaSwitch<N> {
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
            "ready {} running {:?} intents {} servers {:?} pending agent {}",
            self.cp.ready,
            self.cp.exec.running.as_ref().map(|r| (
                r.plan.op,
                r.next,
                r.plan.steps.len(),
                r.wait.clone()
            )),
            self.cp.exec.queued(),
            phases,
            self.cp.agent.len()
        )
    }

    /// Inserts, updates and deletes queued or running (not the periodic
    /// drain or cache work, which never ends while the stash is not empty).
    pub fn pending_commits(&self) -> usize {
        self.cp.exec.pending_commits()
    }

    /// NF punts waiting for their key's pending insert.
    pub fn punts_waiting(&self) -> usize {
        self.cp.punts.waiting()
    }

    /// Operations queued or running.
    pub fn pending_ops(&self) -> usize {
        self.cp.exec.pending_ops()
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
            | ControlEvent::CounterValues { .. }
            | ControlEvent::Session(_) => {}
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
                    let request = cp.register_read(h.outstanding, 0, n);
                    self.cp.servers.watchdog_issued(request, now);
                }
                cp.set_timer(now + self.cfg.t_watchdog, TOKEN_WATCHDOG);
            }
            TOKEN_EPOCH => {
                self.epoch(cp);
                cp.set_timer(now + self.cfg.t_epoch, TOKEN_EPOCH);
            }
            TOKEN_DRAIN => {
                if self.cp.table.as_ref().is_some_and(|t| t.stash_len() > 0)
                    && !self.cp.exec.drain_queued()
                {
                    self.push_intent(Intent::Drain);
                }
                cp.set_timer(now + self.cfg.t_drain, TOKEN_DRAIN);
            }
            t if t >= TOKEN_AGENT => self.agent_timer((t - TOKEN_AGENT) as u32, cp),
            t if t >= TOKEN_GRACE => {
                self.cp.exec.wake(&Wait::Grace(t));
            }
            _ => {}
        }
    }

    fn on_register_values(&mut self, request: u64, values: Vec<u64>, cp: &mut ControlPlane<'_>) {
        if self.cp.exec.wake(&Wait::Barrier(request)) {
            let r = self.cp.exec.running.as_mut();
            if let Some((key, p)) = r.and_then(|r| Some((r.plan.key.clone(), r.reinject.take()?))) {
                // The key is in the stash now: the re-injected packets
                // find it in SRAM.
                self.reinject(&key, p, cp);
            }
            return;
        }
        if self.cp.clear.on_barrier(request) {
            self.clear_next_slice(cp);
            return;
        }
        if let Some(sid) = self.cp.servers.take_setup_barrier(request) {
            self.setup_installed(sid, cp);
            return;
        }
        if let Some(issued) = self.cp.servers.take_watchdog_read(request) {
            self.watchdog(&values, issued, cp);
            return;
        }
        if self.watchdog_fix_read(request, &values, cp) {
            return;
        }
        self.cp.cache.on_read(request, values, cp.now());
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
                if self.cfg.cache_cap > 0 && !self.cp.cache.contains(&key) {
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
        let Some(len) = self.cp.exec.push(i) else {
            self.cp.stats.ops_refused += 1;
            return false;
        };
        self.cp.stats.intents_max = self.cp.stats.intents_max.max(len as u64);
        true
    }

    /// Sketch epoch (spec §5.5): clear the sketch and the Bloom filter, read
    /// and reset the cache hit counters.
    fn epoch(&mut self, cp: &mut ControlPlane<'_>) {
        let Some(h) = self.h else {
            return;
        };
        self.cp.stats.epochs += 1;
        // The sketch and the Bloom filter are cleared in slices (see
        // `CLEAR_SLICE`); the first goes out now, each next one once the
        // previous is done (a barrier read after it), so the channel is
        // never more than one slice behind and table operations interleave.
        let cols = super::dataplane::CMS_COLS as u64;
        let bits = super::dataplane::BF_BITS as u64;
        let step = CLEAR_SLICE as usize;
        let cms = (0..h.cms.len())
            .flat_map(|r| (0..cols).step_by(step).map(move |f| ClearSlice::Cms(r, f)));
        let bf = (0..h.bf.len())
            .flat_map(|j| (0..bits).step_by(step).map(move |f| ClearSlice::Bf(j, f)));
        if self.cp.clear.restart(cms.chain(bf)) {
            self.cp.stats.epoch_overruns += 1;
        }
        if self.cfg.cache_cap > 0 {
            let n = self.cfg.cache_cap as u64;
            self.cp
                .cache
                .expect_epoch(cp.register_read(h.cache_hits, 0, n));
            cp.register_clear_timed(h.cache_hits, clear_cost(n));
        }
        if !self.cp.clear.in_flight() {
            self.clear_next_slice(cp);
        }
        if let Some(t) = &mut self.cp.table {
            t.end_epoch();
        }
    }

    /// Issues the next slice of the epoch's sketch clear.
    fn clear_next_slice(&mut self, cp: &mut ControlPlane<'_>) {
        let Some(h) = self.h else {
            return;
        };
        let Some(slice) = self.cp.clear.next() else {
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
        self.cp.clear.issued(cp.register_read(h.barrier, 0, 1));
    }

    /// Whether the next intent is a digest that may evict and must first
    /// see fresh hit counts; issues the read if none is pending.
    fn digest_needs_hits(&mut self, cp: &mut ControlPlane<'_>) -> bool {
        if !self.cp.exec.digest_next() {
            return false;
        }
        let full = self
            .cp
            .table
            .as_ref()
            .is_some_and(|t| t.cache().len() >= self.cfg.cache_cap);
        if !full {
            return false;
        }
        match self.cp.cache.hits_need(cp.now()) {
            HitsNeed::Pending => true,
            HitsNeed::Fresh => false,
            HitsNeed::Read => {
                let Some(h) = self.h else {
                    return false;
                };
                self.cp.stats.hit_reads += 1;
                let n = self.cfg.cache_cap as u64;
                self.cp
                    .cache
                    .expect_hits(cp.register_read(h.cache_hits, 0, n));
                true
            }
        }
    }

    /// Turns the next intent into a plan (at most one intent per call).
    fn plan_next(&mut self, cp: &mut ControlPlane<'_>) -> Option<Started> {
        if self.digest_needs_hits(cp) {
            return None;
        }
        let intent = self.cp.exec.take_next()?;
        let table = self.cp.table.as_mut()?;
        let cache = &self.cp.cache;
        let plan = match intent {
            Intent::Insert {
                key,
                value,
                reinject,
            } => match table.insert(&key, &value, cp.rng()) {
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
                .on_digest(&key, est, |k| cache.hits_of(k))
                .map(|p| (p, None, false, None)),
            Intent::Drain => table
                .drain(DRAIN_BATCH, cp.rng())
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
            if self.cp.exec.running.is_none() {
                if !self.cp.ready {
                    return;
                }
                // While a server waits to be reloaded, no new plan starts.
                if self.recovery_pending() || self.cp.exec.queued() == 0 {
                    return;
                }
                let Some(started) = self.plan_next(cp) else {
                    return;
                };
                self.cp.exec.start(started, cp.now());
            }
            let Some(r) = &self.cp.exec.running else {
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
        let Some(r) = self.cp.exec.running.take() else {
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
        let Some(r) = &mut self.cp.exec.running else {
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
                if let Some(slot) = self.cp.cache.slot(&key) {
                    cp.table_modify(
                        h.cache,
                        spec,
                        CacheEntry {
                            value: value.into_boxed_slice(),
                            slot,
                        },
                    );
                } else if let Some(slot) = self.cp.cache.install(key) {
                    self.cp.stats.cache_changes += 1;
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
                if self.cp.cache.remove(&key).is_some() {
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
                if let Some(r) = &mut self.cp.exec.running {
                    r.wait = Wait::Writes(BTreeSet::new());
                }
                for b in batches {
                    self.send_writes(usize::from(b.server), b.writes, cp);
                }
                match self.cp.exec.running.as_ref().map(|r| &r.wait) {
                    Some(Wait::Writes(ids)) if !ids.is_empty() => Wait::Writes(ids.clone()),
                    _ => Wait::Ready,
                }
            }
        };
        if let Some(r) = &mut self.cp.exec.running {
            r.wait = wait;
        }
    }

    /// A WRITE_BATCH was acknowledged (or its server went down).
    pub(crate) fn write_done(&mut self, req_id: u32) {
        self.cp.exec.write_done(req_id);
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
