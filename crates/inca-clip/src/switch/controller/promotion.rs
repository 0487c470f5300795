//! Heavy-flow promotion (spec §5.5): every `T_report` the controller asks
//! every live server for its top `N_top` flows of the period and clears
//! the sketch; when every report is in, it merges them (per flow the
//! largest estimate), drops flows already in the switch and flows whose
//! entry it does not know, and installs the rest in order while the
//! switch table has room or holds an entry idle for `T_age` (= T_exp; the
//! longest idle is evicted, its owner told ENTRY_EXPIRED). Once an insert
//! took effect the owner is told ENTRY_OFFLOADED (it freezes the flow's
//! expiry: it will not see its packets any more). Idle times come from
//! polling every installed entry each second.
//!
//! The random policy (the paper's comparison) picks `N_top` known entries
//! not in the switch uniformly instead of the reported ones.

use std::collections::BTreeMap;

use inca_switch::device::Nanos;
use inca_wire::clip::ctl::{CtlBody, CtlMessage, MirrorEntry};
use rand::seq::IteratorRandom;
use rand::SeedableRng;

use super::{Controller, Out, TOKEN_REPORT};
use crate::app::Entry;
use crate::flow::{FlowKey, FLOW_KEY_LEN};
use crate::switch::Command;

/// Which flows get promoted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Policy {
    /// None: the switch table stays as the experimenter left it.
    #[default]
    Off,
    /// The servers' count-min reports (w/ S).
    Sketch,
    /// Uniformly random known entries (w/ R).
    Random,
}

/// Promotion's parameters.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Promotion {
    /// The policy.
    pub policy: Policy,
    /// T_report (250 ms).
    pub t_report_ns: Nanos,
    /// N_top (256).
    pub n_top: u16,
    /// The switch table's capacity (the app's).
    pub capacity: usize,
    /// Idle-time poll period (1 s).
    pub poll_ns: Nanos,
    /// Seed of the random policy.
    pub seed: u64,
}

impl Default for Promotion {
    fn default() -> Self {
        Promotion {
            policy: Policy::Off,
            t_report_ns: 250_000_000,
            n_top: 256,
            capacity: 1024,
            poll_ns: 1_000_000_000,
            seed: 1,
        }
    }
}

/// A switch-table entry the controller installed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Installed {
    /// Who to tell when it goes (0: every live server).
    owner: u8,
    /// Idle time at the last poll, and when that poll was.
    idle: Nanos,
    polled_at: Nanos,
}

/// Promotion's state.
#[derive(Debug, Clone, Default)]
pub(super) struct State {
    /// Promotable entries known, with their owner (0: replicated).
    known: BTreeMap<FlowKey, (Entry, u8)>,
    installed: BTreeMap<FlowKey, Installed>,
    period: u32,
    /// The round being collected: txn → server, and the merged estimates.
    waiting: BTreeMap<u32, u8>,
    merged: BTreeMap<FlowKey, (u32, u8)>,
    /// Installs awaiting their barrier: token → (flow, server to tell).
    offload: BTreeMap<u64, Vec<(FlowKey, u8)>>,
    next_poll: Nanos,
    /// The last round's merged reports, in promotion order (for checks).
    last_round: Vec<(FlowKey, u32)>,
    rounds: u64,
    promoted: u64,
    /// Of `promoted`, those a transition pushed (§5.6 step 5).
    pushed: u64,
    evicted: u64,
    /// Idle-time polls issued.
    polls: u64,
    rng_draws: u64,
}

/// Promotion's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PromotionStats {
    /// Rounds completed.
    pub rounds: u64,
    /// Entries installed in the switch.
    pub promoted: u64,
    /// Of those, entries a transition pushed (§5.6 step 5).
    pub pushed: u64,
    /// Aged entries evicted.
    pub evicted: u64,
    /// Idle-time polls issued.
    pub polls: u64,
    /// Entries in the switch now.
    pub installed: u64,
    /// Entries known.
    pub known: u64,
}

fn key_of(k: &[u8]) -> Option<FlowKey> {
    <[u8; FLOW_KEY_LEN]>::try_from(k).ok().map(FlowKey)
}

impl Controller {
    /// Promotion's counters.
    pub fn promotion_stats(&self) -> PromotionStats {
        PromotionStats {
            rounds: self.promotion.rounds,
            promoted: self.promotion.promoted,
            pushed: self.promotion.pushed,
            evicted: self.promotion.evicted,
            polls: self.promotion.polls,
            installed: self.promotion.installed.len() as u64,
            known: self.promotion.known.len() as u64,
        }
    }

    /// The last sketch round's merged reports, in promotion order: per
    /// flow the largest estimate, by estimate descending, ties by key.
    pub fn last_round(&self) -> &[(FlowKey, u32)] {
        &self.promotion.last_round
    }

    /// Flows whose entry is in the switch table.
    pub fn promoted(&self) -> impl Iterator<Item = &FlowKey> {
        self.promotion.installed.keys()
    }

    pub(super) fn promotion_start(&mut self, now: Nanos) -> Vec<Out> {
        if self.config.promotion.policy == Policy::Off {
            return Vec::new();
        }
        self.promotion.next_poll = now + self.config.promotion.poll_ns;
        vec![Out::Timer(
            now + self.config.promotion.t_report_ns,
            TOKEN_REPORT,
        )]
    }

    /// A mirrored entry the experimenter installs on every server
    /// (MIRROR_INSERT), known for promotion.
    pub fn mirror(&mut self, now: Nanos, entry: Entry) -> Vec<Out> {
        let mut out = Vec::new();
        let body = CtlBody::MirrorInsert {
            table_id: entry.table,
            entries: vec![MirrorEntry {
                key: entry.key.clone(),
                action_id: entry.action,
                data: entry.data.clone(),
            }],
        };
        for s in self.live() {
            self.request(now, s, body.clone(), &mut out);
        }
        if let Some(f) = key_of(&entry.key) {
            self.promotion.known.insert(f, (entry, 0));
        }
        out
    }

    pub(super) fn promotion_created(&mut self, sender: u8, table: u8, entries: &[MirrorEntry]) {
        for e in entries {
            if let Some(f) = key_of(&e.key) {
                let entry = Entry {
                    table,
                    key: e.key.clone(),
                    action: e.action_id,
                    data: e.data.clone(),
                };
                self.promotion.known.insert(f, (entry, sender));
            }
        }
    }

    pub(super) fn promotion_round(&mut self, now: Nanos) -> Vec<Out> {
        let mut out = Vec::new();
        let cfg = self.config.promotion.clone();
        if cfg.policy == Policy::Off {
            return out;
        }
        out.push(Out::Timer(now + cfg.t_report_ns, TOKEN_REPORT));
        if now >= self.promotion.next_poll {
            self.poll_installed(now, &mut out);
        }
        if cfg.policy == Policy::Random {
            let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(
                cfg.seed ^ self.promotion.rng_draws.wrapping_mul(0x9E37_79B9_7F4A_7C15),
            );
            self.promotion.rng_draws += 1;
            let installed = &self.promotion.installed;
            let picks: Vec<FlowKey> = self
                .promotion
                .known
                .keys()
                .filter(|f| !installed.contains_key(f))
                .copied()
                .choose_multiple(&mut rng, usize::from(cfg.n_top));
            let picks = picks.into_iter().map(|f| (f, 0)).collect();
            self.promote(now, picks, &mut out);
            self.promotion.rounds += 1;
            return out;
        }
        // A round still waiting is abandoned: the servers cleared their
        // maps with the request.
        self.promotion.waiting.clear();
        self.promotion.merged.clear();
        self.promotion.period = self.promotion.period.wrapping_add(1);
        let body = CtlBody::TopnRequest {
            period_id: self.promotion.period,
            n: cfg.n_top,
        };
        for s in self.live() {
            for txn in self.request(now, s, body.clone(), &mut out) {
                self.promotion.waiting.insert(txn, s);
            }
        }
        out.push(Out::Cmd(Command::ClearCms));
        out
    }

    pub(super) fn promotion_reply(&mut self, now: Nanos, msg: &CtlMessage, out: &mut Vec<Out>) {
        let Some(&s) = self.promotion.waiting.get(&msg.txn_id) else {
            return;
        };
        if let CtlBody::TopnReport { period_id, items } = &msg.body {
            if *period_id == self.promotion.period {
                for (f, est) in items {
                    let e = self.promotion.merged.entry(FlowKey(*f)).or_insert((0, s));
                    if *est > e.0 {
                        *e = (*est, s);
                    }
                }
            }
        }
        if !msg.more {
            self.promotion.waiting.remove(&msg.txn_id);
            self.round_done(now, out);
        }
    }

    pub(super) fn promotion_lost(
        &mut self,
        now: Nanos,
        _to: u8,
        msg: &CtlMessage,
        out: &mut Vec<Out>,
    ) {
        if self.promotion.waiting.remove(&msg.txn_id).is_some() {
            self.round_done(now, out);
        }
    }

    fn round_done(&mut self, now: Nanos, out: &mut Vec<Out>) {
        if !self.promotion.waiting.is_empty() {
            return;
        }
        let mut list: Vec<(FlowKey, (u32, u8))> = std::mem::take(&mut self.promotion.merged)
            .into_iter()
            .collect();
        // Estimate descending, ties by the smaller flow key.
        list.sort_by(|a, b| b.1 .0.cmp(&a.1 .0).then(a.0.cmp(&b.0)));
        self.promotion.last_round = list.iter().map(|(f, (e, _))| (*f, *e)).collect();
        let picks = list.into_iter().map(|(f, (_, s))| (f, s)).collect();
        self.promote(now, picks, out);
        self.promotion.rounds += 1;
    }

    /// Whether `flow`'s entry is in the switch table (installed by the
    /// controller, the install possibly not yet acked).
    pub(super) fn is_promoted(&self, flow: &FlowKey) -> bool {
        self.promotion.installed.contains_key(flow)
    }

    /// Polls every installed entry's idle time; the next poll is due a
    /// poll period later.
    fn poll_installed(&mut self, now: Nanos, out: &mut Vec<Out>) {
        self.promotion.next_poll = now + self.config.promotion.poll_ns;
        for f in self.promotion.installed.keys() {
            self.promotion.polls += 1;
            out.push(Out::Cmd(Command::AppPoll {
                table: 0,
                key: f.0.to_vec(),
            }));
        }
    }

    /// The controller's tick with periodic promotion off: entries a
    /// transition pushed are still polled each poll period, so an eviction
    /// for a later push judges fresh idle times rather than the time since
    /// install (which would make every live entry look aged after T_exp,
    /// and a translation change under a live flow). With promotion on,
    /// the rounds poll.
    pub(super) fn promotion_tick(&mut self, now: Nanos, out: &mut Vec<Out>) {
        if self.config.promotion.policy == Policy::Off
            && !self.promotion.installed.is_empty()
            && now >= self.promotion.next_poll
        {
            self.poll_installed(now, out);
        }
    }

    /// A transition's push (§5.6 step 5): installs the entries of `flows`
    /// (each with the server that reported it) that are known and
    /// promotable, in order, while the switch table admits them (§5.5
    /// step 4); the flows installed.
    pub(super) fn push_flows(
        &mut self,
        now: Nanos,
        flows: Vec<(FlowKey, u8)>,
        out: &mut Vec<Out>,
    ) -> Vec<FlowKey> {
        let pushed = self.promote(now, flows, out);
        self.promotion.pushed += pushed.len() as u64;
        pushed
    }

    /// Installs `picks` in order (reporter given for replicated entries)
    /// while there is room or an aged entry to evict (§5.5 step 4); the
    /// flows installed.
    fn promote(
        &mut self,
        now: Nanos,
        picks: Vec<(FlowKey, u8)>,
        out: &mut Vec<Out>,
    ) -> Vec<FlowKey> {
        let t_age = self.t_exp_ns;
        let cap = self.config.promotion.capacity;
        let mut told = Vec::new();
        for (f, reporter) in picks {
            if self.promotion.installed.contains_key(&f) {
                continue;
            }
            let Some((entry, owner)) = self.promotion.known.get(&f).cloned() else {
                continue;
            };
            if self.promotion.installed.len() >= cap {
                // The longest-idle aged entry, if any.
                let aged = self
                    .promotion
                    .installed
                    .iter()
                    .map(|(g, i)| {
                        (
                            *g,
                            i.idle.saturating_add(now - i.polled_at.min(now)),
                            i.owner,
                        )
                    })
                    .filter(|(_, idle, _)| *idle >= t_age)
                    .max_by_key(|(g, idle, _)| (*idle, std::cmp::Reverse(*g)));
                let Some((g, _, g_owner)) = aged else {
                    break;
                };
                self.promotion.installed.remove(&g);
                self.promotion.evicted += 1;
                out.push(Out::Cmd(Command::AppUninstall {
                    table: 0,
                    key: g.0.to_vec(),
                }));
                let body = CtlBody::EntryExpired {
                    table_id: 0,
                    keys: vec![g.0.to_vec()],
                };
                let to: Vec<u8> = if g_owner == 0 {
                    self.live()
                } else {
                    vec![g_owner]
                };
                for s in to {
                    self.request(now, s, body.clone(), out);
                }
            }
            let owner = if owner == 0 { reporter } else { owner };
            self.promotion.installed.insert(
                f,
                Installed {
                    owner,
                    idle: 0,
                    polled_at: now,
                },
            );
            self.promotion.promoted += 1;
            out.push(Out::Cmd(Command::AppInstall(entry)));
            told.push((f, owner));
        }
        let installed = told.iter().map(|(f, _)| *f).collect();
        if !told.is_empty() {
            let (token, cmd) = self.barrier();
            out.push(cmd);
            self.promotion.offload.insert(token, told);
        }
        installed
    }

    pub(super) fn promotion_barrier(&mut self, now: Nanos, token: u64) -> Vec<Out> {
        let mut out = Vec::new();
        let Some(told) = self.promotion.offload.remove(&token) else {
            return out;
        };
        let mut by: BTreeMap<u8, Vec<Vec<u8>>> = BTreeMap::new();
        for (f, owner) in told {
            let to: Vec<u8> = if owner == 0 { self.live() } else { vec![owner] };
            for s in to {
                by.entry(s).or_default().push(f.0.to_vec());
            }
        }
        for (s, keys) in by {
            self.request(
                now,
                s,
                CtlBody::EntryOffloaded { table_id: 0, keys },
                &mut out,
            );
        }
        out
    }

    pub(super) fn promotion_activity(&mut self, now: Nanos, key: Vec<u8>, idle: Nanos) {
        let Some(f) = key_of(&key) else {
            return;
        };
        if idle == Nanos::MAX {
            // The entry is not in the switch any more.
            self.promotion.installed.remove(&f);
        } else if let Some(i) = self.promotion.installed.get_mut(&f) {
            i.idle = idle;
            i.polled_at = now;
        }
    }
}
