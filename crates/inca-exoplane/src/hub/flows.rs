//! The flow directory and the promotion/eviction engine (spec §5.5).
//!
//! A flow is ABSENT (not in the directory), INSERTING, PRESENT or
//! EVICTING. Promotion is two-phase: phase 1 makes the switch hold every
//! object entry the flow's packets look up (install, or refcount + 1 when
//! another flow already installed it) and waits for every install's
//! acknowledgement; phase 2 adds the FM entry. Eviction mirrors it: delete
//! the FM entry, wait for the acknowledgement and `T_flush`, then drop the
//! flow's references and remove entries whose refcount reached 0. So a
//! packet that hits the FM always finds its entries (Invariant 1).
//!
//! Reports wait in a bounded queue drained at most once per
//! `promotion_interval`; a full FM admits a report only if its rate beats
//! the slowest PRESENT flow's by the hysteresis factor.

use std::collections::{BTreeMap, HashSet, VecDeque};

use inca_switch::device::Nanos;

use super::app::register_bytes;
use super::entries::{SwitchCopy, SWITCH_BIT};
use super::oplog::{EntryKey, Op};
use super::timers::Timer;
use super::{Breakage, Hub, SwitchOp, HYSTERESIS_PERCENT};
use crate::ids::{AppId, UnionKey};

/// A flow's state; ABSENT flows are not stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum FlowState {
    Inserting,
    Present,
    Evicting,
}

pub(super) struct Flow {
    state: FlowState,
    entries: Vec<EntryKey>,
    /// Phase-1 installs not yet acknowledged.
    waiting: u32,
    /// An install failed or an entry is being deleted: undo, do not add.
    abort: bool,
    fm_added: bool,
    /// Packets per second: the report's estimate until the second poll,
    /// then the FM counter's rate between the last two.
    rate: f64,
    /// The FM counter at the last poll; None until the first poll after
    /// the flow became PRESENT (its slot's counter may still hold a
    /// predecessor's packets, so the first reading is only a baseline).
    sample: Option<u32>,
    sample_at: Nanos,
}

/// One app's flows.
#[derive(Default)]
pub(super) struct FlowDir {
    flows: BTreeMap<UnionKey, Flow>,
    /// FM entries on the switch or being added.
    fm_installed: u32,
    /// INSERTING + PRESENT flows, kept as the states change.
    occupied: u32,
    /// Flows whose phase 1 is done, waiting for FM room (an eviction's FM
    /// delete not yet acknowledged).
    fm_wait: VecDeque<UnionKey>,
}

impl FlowDir {
    pub fn present(&self) -> Vec<UnionKey> {
        self.flows
            .iter()
            .filter(|(_, f)| f.state == FlowState::Present)
            .map(|(uk, _)| uk.clone())
            .collect()
    }

    /// INSERTING + PRESENT flows: what the FM capacity limits.
    pub fn occupancy(&self) -> u32 {
        self.occupied
    }

    fn insert(&mut self, uk: UnionKey, flow: Flow) {
        debug_assert_eq!(flow.state, FlowState::Inserting);
        self.occupied += 1;
        self.flows.insert(uk, flow);
    }

    fn remove(&mut self, uk: &UnionKey) -> Option<Flow> {
        let f = self.flows.remove(uk)?;
        if f.state != FlowState::Evicting {
            self.occupied -= 1;
        }
        Some(f)
    }

    fn victim(&self) -> Option<(UnionKey, f64)> {
        let mut best: Option<(&UnionKey, f64)> = None;
        for (uk, f) in &self.flows {
            if f.state == FlowState::Present && best.is_none_or(|(_, r)| f.rate < r) {
                best = Some((uk, f.rate));
            }
        }
        best.map(|(uk, r)| (uk.clone(), r))
    }
}

/// Reports waiting for the promotion rate limit.
#[derive(Default)]
pub(super) struct PromotionQueue {
    queue: VecDeque<(AppId, UnionKey, f64)>,
    queued: HashSet<(AppId, UnionKey)>,
    next_at: Nanos,
    armed: bool,
}

impl Hub {
    pub(super) fn on_report(
        &mut self,
        now: Nanos,
        app: AppId,
        uk: UnionKey,
        estimate: u32,
        elapsed_us: u32,
    ) {
        let Some(state) = self.apps.get(&app) else {
            self.stats.unknown += 1;
            return;
        };
        if state.flows.flows.contains_key(&uk)
            || self.promo.queue.len() >= self.config.promotion_queue
            || self.promo.queued.contains(&(app, uk.clone()))
        {
            self.stats.reports_dropped += 1;
            return;
        }
        let rate = f64::from(estimate) * 1e6 / f64::from(elapsed_us.max(1));
        self.promo.queued.insert((app, uk.clone()));
        self.promo.queue.push_back((app, uk, rate));
        self.drain_promotions(now);
    }

    pub(super) fn drain_promotions(&mut self, now: Nanos) {
        self.promo.armed = false;
        while !self.promo.queue.is_empty() {
            if now < self.promo.next_at {
                self.promo.armed = true;
                self.timers.set(self.promo.next_at, Timer::Promote);
                return;
            }
            let (app, uk, rate) = self.promo.queue.pop_front().expect("non-empty");
            self.promo.queued.remove(&(app, uk.clone()));
            if self.try_promote(now, app, uk, rate) {
                self.promo.next_at = now + self.config.promotion_interval;
            } else {
                self.stats.reports_dropped += 1;
            }
        }
    }

    /// Starts promoting `uk` if it is ABSENT, promotable and fits (maybe
    /// by evicting the victim). True if an insert started.
    fn try_promote(&mut self, now: Nanos, app: AppId, uk: UnionKey, rate: f64) -> bool {
        let state = &self.apps[&app];
        if state.flows.flows.contains_key(&uk) {
            return false;
        }
        // Only flows with an entry in every object they touch (§5.5).
        let mut entries = Vec::new();
        let mut need: BTreeMap<crate::ids::ObjId, u32> = BTreeMap::new();
        for o in state.keys.objects() {
            let Some(key) = state.keys.object_key(o.obj, &uk) else {
                continue;
            };
            let ek = EntryKey {
                app,
                obj: o.obj,
                key,
            };
            match self.dir.map.get(&ek) {
                Some(e) if !e.deleting => {
                    if e.switch == SwitchCopy::Absent {
                        *need.entry(o.obj).or_default() += 1;
                    }
                }
                _ => return false,
            }
            entries.push(ek);
        }
        let mut victim = None;
        if state.flows.occupancy() >= state.fm_capacity {
            let Some((v, victim_rate)) = state.flows.victim() else {
                return false;
            };
            if rate * 100.0 <= victim_rate * HYSTERESIS_PERCENT as f64 {
                return false;
            }
            victim = Some(v);
        }
        // Slots: free now, freed by removals in flight, or freed by the
        // victim's entries that no other flow uses; installs beyond what is
        // free wait for those (an object sized exactly n_p·Q_p is full
        // whenever the FM is).
        let mut freed: BTreeMap<crate::ids::ObjId, u32> = BTreeMap::new();
        if let Some(v) = &victim {
            for e in &state.flows.flows[v].entries {
                if self.dir.map.get(e).is_some_and(|x| x.refcount() == 1) {
                    *freed.entry(e.obj).or_default() += 1;
                }
            }
        }
        let short = need.iter().any(|(obj, n)| {
            let extra = freed.get(obj).copied().unwrap_or(0);
            state
                .slots
                .get(obj)
                .is_none_or(|p| p.obtainable() + extra < *n)
        });
        if short {
            return false;
        }
        if let Some(v) = victim {
            self.start_evict(now, app, v);
        }
        self.start_insert(now, app, uk, entries, rate);
        true
    }

    fn start_insert(
        &mut self,
        now: Nanos,
        app: AppId,
        uk: UnionKey,
        entries: Vec<EntryKey>,
        rate: f64,
    ) {
        let mut waiting = 0;
        for e in &entries {
            if !self.acquire(now, e, &uk) {
                waiting += 1;
            }
        }
        let flow = Flow {
            state: FlowState::Inserting,
            entries,
            waiting,
            abort: false,
            fm_added: false,
            rate,
            sample: None,
            sample_at: now,
        };
        self.apps
            .get_mut(&app)
            .expect("known")
            .flows
            .insert(uk.clone(), flow);
        if self.config.breakage == Some(Breakage::FmInsertBeforeObjectAcks) {
            self.fm_add(now, app, &uk);
        }
        if waiting == 0 {
            self.phase2(now, app, uk);
        }
    }

    /// Takes a reference on the switch copy of `e` for `uk`; true if the
    /// copy is already installed and acknowledged.
    fn acquire(&mut self, now: Nanos, e: &EntryKey, uk: &UnionKey) -> bool {
        let entry = self.dir.map.get_mut(e).expect("checked promotable");
        entry.users.insert(uk.clone());
        match entry.switch {
            SwitchCopy::Installed => true,
            SwitchCopy::Installing | SwitchCopy::Removing | SwitchCopy::WaitingSlot => false,
            SwitchCopy::Absent => {
                self.install(now, e);
                false
            }
        }
    }

    fn install(&mut self, now: Nanos, e: &EntryKey) {
        // A register starts at the hub's copy S_cp if synchronisation
        // tracks it, else at 0̸ (§5.6 lifecycle); taken only once a slot is
        // there, so a waiting install reads S_cp when it goes.
        let merge = self.merge_of(e);
        let slot = self
            .apps
            .get_mut(&e.app)
            .and_then(|a| a.slots.get_mut(&e.obj))
            .and_then(|p| p.take());
        let entry = self.dir.map.get_mut(e).expect("present");
        let Some(slot) = slot else {
            entry.switch = SwitchCopy::WaitingSlot;
            if let Some(p) = self
                .apps
                .get_mut(&e.app)
                .and_then(|a| a.slots.get_mut(&e.obj))
            {
                p.waiters.push_back(e.clone());
            }
            return;
        };
        entry.slot = Some(slot);
        entry.switch = SwitchCopy::Installing;
        entry.holders |= SWITCH_BIT;
        let mut value = entry.value.clone();
        if let Some(m) = merge {
            match self.sync.switch_install(e, m) {
                Ok(v) => value = register_bytes(v, m.width().bits() / 8),
                Err(_) => self.stats.sync_refused += 1,
            }
        }
        self.log.push(
            now,
            Op::ObjectInstall {
                entry: e.clone(),
                slot,
            },
        );
        self.switch_op(SwitchOp::InstallEntry {
            entry: e.clone(),
            slot,
            value,
        });
    }

    pub(super) fn install_acked(&mut self, now: Nanos, e: EntryKey, ok: bool) {
        let Some(entry) = self.dir.map.get_mut(&e) else {
            return;
        };
        if ok {
            entry.switch = SwitchCopy::Installed;
            self.log
                .push(now, Op::ObjectInstallAcked { entry: e.clone() });
        } else {
            entry.switch = SwitchCopy::Absent;
            entry.holders &= !SWITCH_BIT;
            let slot = entry.slot.take();
            self.sync.switch_install_failed(now, &e);
            if let Some(slot) = slot {
                self.free_slot(now, &e, slot);
            }
        }
        let users: Vec<UnionKey> = self.dir.map[&e].users.iter().cloned().collect();
        let mut ready = Vec::new();
        if let Some(app) = self.apps.get_mut(&e.app) {
            for uk in users {
                if let Some(f) = app.flows.flows.get_mut(&uk) {
                    if f.state == FlowState::Inserting && f.waiting > 0 {
                        f.waiting -= 1;
                        f.abort |= !ok;
                        if f.waiting == 0 {
                            ready.push(uk);
                        }
                    }
                }
            }
        }
        for uk in ready {
            self.phase2(now, e.app, uk);
        }
    }

    /// Phase 1 is done: add the FM entry (or undo if aborted).
    fn phase2(&mut self, now: Nanos, app: AppId, uk: UnionKey) {
        let deleting = {
            let f = &self.apps[&app].flows.flows[&uk];
            f.abort
                || f.entries
                    .iter()
                    .any(|e| self.dir.map.get(e).is_none_or(|x| x.deleting))
        };
        let f = &self.apps[&app].flows.flows[&uk];
        if deleting {
            if f.fm_added {
                self.start_evict(now, app, uk);
            } else {
                self.release(now, app, uk);
            }
            return;
        }
        if f.fm_added {
            return;
        }
        let dir = &self.apps[&app].flows;
        if dir.fm_installed >= self.apps[&app].fm_capacity {
            self.apps
                .get_mut(&app)
                .expect("known")
                .flows
                .fm_wait
                .push_back(uk);
            return;
        }
        self.fm_add(now, app, &uk);
    }

    fn fm_add(&mut self, now: Nanos, app: AppId, uk: &UnionKey) {
        let a = self.apps.get_mut(&app).expect("known");
        a.flows.fm_installed += 1;
        let f = a.flows.flows.get_mut(uk).expect("inserting");
        f.fm_added = true;
        let entries = f.entries.clone();
        self.stats.promotions += 1;
        self.log.push(
            now,
            Op::FmInsert {
                app,
                uk: uk.clone(),
                entries,
            },
        );
        self.switch_op(SwitchOp::FmAdd {
            app,
            uk: uk.clone(),
        });
    }

    pub(super) fn fm_add_acked(&mut self, now: Nanos, app: AppId, uk: UnionKey, ok: bool) {
        let Some(f) = self
            .apps
            .get_mut(&app)
            .and_then(|a| a.flows.flows.get_mut(&uk))
        else {
            return;
        };
        if !ok {
            f.fm_added = false;
            self.apps.get_mut(&app).expect("known").flows.fm_installed -= 1;
            self.release(now, app, uk);
            return;
        }
        self.log.push(
            now,
            Op::FmInsertAcked {
                app,
                uk: uk.clone(),
            },
        );
        if f.state != FlowState::Inserting || f.waiting > 0 {
            // Broken variant: added before phase 1 finished; phase2 will
            // find it added.
            return;
        }
        f.state = FlowState::Present;
        f.sample = None;
        f.sample_at = now;
        let deleting = f
            .entries
            .iter()
            .any(|e| self.dir.map.get(e).is_none_or(|x| x.deleting));
        if deleting {
            self.start_evict(now, app, uk);
        }
    }

    /// Phase 1 of eviction: delete the FM entry.
    fn start_evict(&mut self, now: Nanos, app: AppId, uk: UnionKey) {
        let Some(dir) = self.apps.get_mut(&app).map(|a| &mut a.flows) else {
            return;
        };
        let Some(f) = dir.flows.get_mut(&uk) else {
            return;
        };
        if f.state == FlowState::Evicting {
            return;
        }
        f.state = FlowState::Evicting;
        dir.occupied -= 1;
        self.stats.evictions += 1;
        self.log.push(
            now,
            Op::FmDelete {
                app,
                uk: uk.clone(),
            },
        );
        self.switch_op(SwitchOp::FmDelete { app, uk });
    }

    /// A DELETE needs the switch copy gone: evict PRESENT users now;
    /// INSERTING ones abort when their phase 1 ends.
    pub(super) fn evict_for_delete(&mut self, now: Nanos, app: AppId, uk: UnionKey) {
        let state = self
            .apps
            .get(&app)
            .and_then(|a| a.flows.flows.get(&uk))
            .map(|f| f.state);
        if state == Some(FlowState::Present) {
            self.start_evict(now, app, uk);
        }
    }

    pub(super) fn fm_delete_acked(&mut self, now: Nanos, app: AppId, uk: UnionKey) {
        self.log.push(
            now,
            Op::FmDeleteAcked {
                app,
                uk: uk.clone(),
            },
        );
        let a = self.apps.get_mut(&app).expect("known");
        a.flows.fm_installed -= 1;
        self.timers
            .set(now + self.config.t_flush, Timer::Flush(app, uk));
        // FM room freed: add flows that finished phase 1 meanwhile.
        while self.apps[&app].flows.fm_installed < self.apps[&app].fm_capacity {
            let Some(next) = self
                .apps
                .get_mut(&app)
                .expect("known")
                .flows
                .fm_wait
                .pop_front()
            else {
                break;
            };
            let ready =
                self.apps[&app].flows.flows.get(&next).is_some_and(|f| {
                    f.state == FlowState::Inserting && f.waiting == 0 && !f.fm_added
                });
            if ready {
                self.phase2(now, app, next);
            }
        }
    }

    pub(super) fn flush_done(&mut self, now: Nanos, app: AppId, uk: UnionKey) {
        let evicting = self
            .apps
            .get(&app)
            .and_then(|a| a.flows.flows.get(&uk))
            .is_some_and(|f| f.state == FlowState::Evicting);
        if evicting {
            self.release(now, app, uk);
        }
    }

    /// Phase 2 of eviction (or undo of an aborted insert): drop the flow's
    /// references; entries at refcount 0 leave the switch. Flow ABSENT.
    fn release(&mut self, now: Nanos, app: AppId, uk: UnionKey) {
        let Some(f) = self.apps.get_mut(&app).and_then(|a| a.flows.remove(&uk)) else {
            return;
        };
        for e in f.entries {
            let Some(entry) = self.dir.map.get_mut(&e) else {
                continue;
            };
            entry.users.remove(&uk);
            if !entry.users.is_empty() {
                continue;
            }
            match entry.switch {
                SwitchCopy::Installed => {
                    entry.switch = SwitchCopy::Removing;
                    entry.holders &= !SWITCH_BIT;
                    let refcount = entry.refcount();
                    if let Some(p) = self
                        .apps
                        .get_mut(&e.app)
                        .and_then(|a| a.slots.get_mut(&e.obj))
                    {
                        p.removing += 1;
                    }
                    self.log.push(
                        now,
                        Op::ObjectRemove {
                            entry: e.clone(),
                            refcount,
                        },
                    );
                    // A tracked register is first folded into S_cp (§5.6):
                    // the sync part reads it once no MERGE is pending and
                    // asks for the removal (RemoveSwitchSlot) after.
                    let folded = self.sync.switch_holds(&e) && {
                        let r = self.sync.switch_evict(now, &e);
                        if r.is_err() {
                            self.stats.sync_refused += 1;
                        }
                        r.is_ok()
                    };
                    if !folded {
                        self.remove_switch_copy(&e);
                    }
                }
                SwitchCopy::Absent if entry.deleting => self.unblock_delete(now, &e),
                _ => {}
            }
        }
    }

    /// Removes the switch copy of `e` (already marked `Removing`).
    pub(super) fn remove_switch_copy(&mut self, e: &EntryKey) {
        let Some(slot) = self.dir.map.get(e).and_then(|x| x.slot) else {
            return;
        };
        self.switch_op(SwitchOp::RemoveEntry {
            entry: e.clone(),
            slot,
        });
    }

    /// Returns `slot` of `e`'s object; an entry waiting for a slot gets it.
    fn free_slot(&mut self, now: Nanos, e: &EntryKey, slot: u32) {
        let Some(pool) = self
            .apps
            .get_mut(&e.app)
            .and_then(|a| a.slots.get_mut(&e.obj))
        else {
            return;
        };
        pool.put(slot);
        if let Some(waiter) = pool.waiters.pop_front() {
            self.install(now, &waiter);
        }
    }

    pub(super) fn remove_acked(&mut self, now: Nanos, e: EntryKey) {
        let Some(entry) = self.dir.map.get_mut(&e) else {
            return;
        };
        entry.switch = SwitchCopy::Absent;
        let slot = entry.slot.take();
        if let Some(pool) = self
            .apps
            .get_mut(&e.app)
            .and_then(|a| a.slots.get_mut(&e.obj))
        {
            pool.removing = pool.removing.saturating_sub(1);
        }
        if let Some(slot) = slot {
            self.free_slot(now, &e, slot);
        }
        let entry = &self.dir.map[&e];
        if !entry.users.is_empty() {
            // A flow took a reference while the removal was in flight.
            self.install(now, &e);
        } else if entry.deleting {
            self.unblock_delete(now, &e);
        }
    }

    pub(super) fn on_idle(&mut self, now: Nanos, app: AppId, uk: UnionKey) {
        let present = self
            .apps
            .get(&app)
            .and_then(|a| a.flows.flows.get(&uk))
            .is_some_and(|f| f.state == FlowState::Present);
        if present {
            self.start_evict(now, app, uk);
        }
    }

    pub(super) fn on_counters(&mut self, now: Nanos, app: AppId, counters: Vec<(UnionKey, u32)>) {
        let Some(a) = self.apps.get_mut(&app) else {
            self.stats.unknown += 1;
            return;
        };
        for (uk, count) in counters {
            if let Some(f) = a.flows.flows.get_mut(&uk) {
                if f.state == FlowState::Present && now > f.sample_at {
                    if let Some(sample) = f.sample {
                        let dt = (now - f.sample_at) as f64 / 1e9;
                        f.rate = f64::from(count.wrapping_sub(sample)) / dt;
                    }
                    f.sample = Some(count);
                    f.sample_at = now;
                }
            }
        }
    }
}
