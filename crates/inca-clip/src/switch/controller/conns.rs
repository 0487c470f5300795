//! TRD's connections (spec §7.2, §4.5): the controller's side of
//! POOL_ASSIGN kind 2, CONN_NEW and CONN_RELEASE, and the idle aging of
//! `conn_idx`.
//!
//! - POOL_ASSIGN: when the switch starts, every configured server gets its
//!   slice of the R indices (reliably; sent again if given up on while the
//!   server lives). [our choice] Servers do not REGISTER (static set-up,
//!   see [`crate::server::endpoint`]), so the start stands in for
//!   registration. The slices are `conns.slices` if given, else R split
//!   evenly over the configured servers in id order (disjoint, index
//!   0xFFFF excluded: it means "none").
//! - CONN_NEW(flow, idx): `conn_idx[flow] = idx` is installed at once —
//!   pushed, not promoted through the sketch; the table is sized to R and
//!   indices are unique, so it always fits — and the sender is acked; once
//!   the install took effect (a driver barrier) the owner gets
//!   ENTRY_OFFLOADED. Refused (acked, counted, nothing installed): an index
//!   at or above R, outside the sender's slice, or live under another
//!   connection. A duplicate (same flow and index) is acked again.
//! - CONN_RELEASE(flow, idx): the entry is deleted and the reply sent only
//!   once the driver's delete is done (a barrier). A release of an entry
//!   not (or no longer) installed with that index is answered at once: its
//!   delete is already done. A duplicate while the delete is in flight is
//!   dropped (the reply follows the delete).
//! - Aging: every `poll_ns` each live entry's idle time is read; one idle
//!   for T_exp or more (the switch's idle timer is authoritative for
//!   offloaded entries, §5.5) is deleted and, after the delete, its owner
//!   gets ENTRY_EXPIRED, which frees the index. Aging is decided on a fresh
//!   reading only, never on an estimate, so a connection hit since the last
//!   poll is not aged.

use std::collections::{BTreeMap, BTreeSet};

use inca_switch::device::Nanos;
use inca_wire::clip::ctl::{CtlBody, CtlMessage, PoolKind};

use super::{Controller, Mutation, Out};
use crate::apps::trd::{self, TABLE_CONN_IDX};
use crate::ctl;
use crate::flow::{FlowKey, FLOW_KEY_LEN};
use crate::switch::{Command, DriverConfig};

/// TRD's connection parameters.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Conns {
    /// R: `conn_idx` entries and register cells (0: the app has no
    /// connections; no slice is assigned and CONN_NEW is refused).
    pub r: u32,
    /// Each server's index slice, `(id, lo, hi)`; empty: R split evenly
    /// over the configured servers.
    pub slices: Vec<(u8, u32, u32)>,
    /// Idle-time poll period (1 s, as promotion's, §5.5).
    pub poll_ns: Nanos,
}

impl Default for Conns {
    fn default() -> Self {
        Conns {
            r: 0,
            slices: Vec::new(),
            poll_ns: 1_000_000_000,
        }
    }
}

impl Conns {
    /// The slices as assigned: `slices`, or R split evenly over the
    /// servers of `driver` in id order (hi ≤ 0xFFFE, empty slices left
    /// out).
    pub fn assignment(&self, driver: &DriverConfig) -> BTreeMap<u8, (u32, u32)> {
        if self.r == 0 {
            return BTreeMap::new();
        }
        if !self.slices.is_empty() {
            return self
                .slices
                .iter()
                .map(|(s, lo, hi)| (*s, (*lo, *hi)))
                .collect();
        }
        let mut ids: Vec<u8> = driver.servers.iter().map(|s| s.id).collect();
        ids.sort_unstable();
        ids.dedup();
        let n = ids.len() as u64;
        let usable = u64::from(self.r.min(u32::from(trd::NO_IDX)));
        let mut out = BTreeMap::new();
        for (i, id) in ids.into_iter().enumerate() {
            let lo = usable * i as u64 / n;
            let hi = usable * (i as u64 + 1) / n;
            if hi > lo {
                out.insert(id, (lo as u32, hi as u32 - 1));
            }
        }
        out
    }
}

/// A `conn_idx` entry the controller installed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Conn {
    idx: u16,
    owner: u8,
    /// When CONN_NEW came.
    installed_at: Nanos,
}

/// What the controller did with connections.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ConnStats {
    /// POOL_ASSIGN kind 2 sent (retries after a give-up included).
    pub pools_sent: u64,
    /// CONN_NEWs received (duplicates included).
    pub conn_new: u64,
    /// Of those, entries installed.
    pub installed: u64,
    /// Of those, duplicates of an installed entry.
    pub duplicate: u64,
    /// Of those, refused (bad index, another server's, in use).
    pub refused: u64,
    /// ENTRY_OFFLOADEDs sent (one per install that took effect).
    pub offloaded: u64,
    /// CONN_RELEASEs received (duplicates included).
    pub conn_release: u64,
    /// Entries deleted on CONN_RELEASE.
    pub deleted: u64,
    /// CONN_RELEASE replies sent after the delete.
    pub release_replied: u64,
    /// CONN_RELEASEs of entries not installed (answered at once).
    pub release_stale: u64,
    /// Entries aged out (idle ≥ T_exp) and deleted.
    pub aged: u64,
    /// ENTRY_EXPIREDs sent for them.
    pub expired: u64,
}

/// The connections' state.
#[derive(Debug, Clone, Default)]
pub(super) struct State {
    slices: BTreeMap<u8, (u32, u32)>,
    /// Installed (or being installed) entries; at most R (indices are
    /// unique and below R).
    live: BTreeMap<FlowKey, Conn>,
    by_idx: BTreeMap<u16, FlowKey>,
    /// Installs awaiting their barrier: token → (flow, idx, owner).
    installs: BTreeMap<u64, Vec<(FlowKey, u16, u8)>>,
    /// Release deletes awaiting their barrier: token → (flow, server,
    /// reply).
    deletes: BTreeMap<u64, (FlowKey, u8, CtlMessage)>,
    /// Flows whose release delete is in flight (at most R).
    releasing: BTreeSet<FlowKey>,
    /// Aging deletes awaiting their barrier: token → (flow, owner).
    aging: BTreeMap<u64, (FlowKey, u8)>,
    next_poll: Nanos,
    stats: ConnStats,
}

impl Controller {
    /// The connections' counters.
    pub fn conn_stats(&self) -> ConnStats {
        self.conns.stats
    }

    /// The `conn_idx` entries installed: (flow, idx, owner, when its
    /// CONN_NEW came), by flow.
    pub fn conns_live(&self) -> Vec<(FlowKey, u16, u8, Nanos)> {
        self.conns
            .live
            .iter()
            .map(|(f, c)| (*f, c.idx, c.owner, c.installed_at))
            .collect()
    }

    /// The index slices assigned.
    pub fn conn_slices(&self) -> &BTreeMap<u8, (u32, u32)> {
        &self.conns.slices
    }

    pub(super) fn conn_counters(&self) -> Vec<(&'static str, u64)> {
        let s = &self.conns.stats;
        vec![
            ("conn_pools_sent", s.pools_sent),
            ("conn_new", s.conn_new),
            ("conn_installed", s.installed),
            ("conn_duplicate", s.duplicate),
            ("conn_refused", s.refused),
            ("conn_offloaded", s.offloaded),
            ("conn_release", s.conn_release),
            ("conn_deleted", s.deleted),
            ("conn_release_replied", s.release_replied),
            ("conn_release_stale", s.release_stale),
            ("conn_aged", s.aged),
            ("conn_expired", s.expired),
            ("conn_live", self.conns.live.len() as u64),
        ]
    }

    /// The switch (re)started: every server gets its slice.
    pub(super) fn conns_start(&mut self, now: Nanos, driver: &DriverConfig, out: &mut Vec<Out>) {
        let stats = self.conns.stats;
        self.conns = State {
            slices: self.config.conns.assignment(driver),
            next_poll: now + self.config.conns.poll_ns,
            stats,
            ..State::default()
        };
        let slices: Vec<(u8, (u32, u32))> =
            self.conns.slices.iter().map(|(s, r)| (*s, *r)).collect();
        for (s, (lo, hi)) in slices {
            self.pool_assign(now, s, lo, hi, out);
        }
    }

    fn pool_assign(&mut self, now: Nanos, to: u8, lo: u32, hi: u32, out: &mut Vec<Out>) {
        let body = CtlBody::PoolAssign {
            app_id: trd::APP_ID,
            kind: PoolKind::TrdIndices,
            base_ip: [0; 4],
            lo,
            hi,
        };
        self.conns.stats.pools_sent += 1;
        self.request(now, to, body, out);
    }

    /// A request given up on: a live server's POOL_ASSIGN is sent again.
    pub(super) fn conns_lost(&mut self, now: Nanos, to: u8, msg: &CtlMessage, out: &mut Vec<Out>) {
        let live = self.servers.get(&to).is_some_and(|s| !s.failed);
        if let (CtlBody::PoolAssign { lo, hi, .. }, true) = (&msg.body, live) {
            if self.conns.slices.get(&to) == Some(&(*lo, *hi)) {
                self.pool_assign(now, to, *lo, *hi, out);
            }
        }
    }

    /// CONN_NEW from `sender`: installs the entry. The sender is acked
    /// by the caller.
    pub(super) fn conn_new(
        &mut self,
        now: Nanos,
        sender: u8,
        flow: FlowKey,
        idx: u16,
        out: &mut Vec<Out>,
    ) {
        self.conns.stats.conn_new += 1;
        if let Some(c) = self.conns.live.get(&flow) {
            if c.idx == idx && c.owner == sender {
                self.conns.stats.duplicate += 1;
            } else {
                self.conns.stats.refused += 1;
            }
            return;
        }
        let in_slice = self
            .conns
            .slices
            .get(&sender)
            .is_some_and(|(lo, hi)| (*lo..=*hi).contains(&u32::from(idx)));
        if u32::from(idx) >= self.config.conns.r
            || !in_slice
            || self.conns.by_idx.contains_key(&idx)
            || self.conns.releasing.contains(&flow)
        {
            self.conns.stats.refused += 1;
            return;
        }
        if self.config.mutation == Mutation::NoConnInstall {
            return;
        }
        self.conns.live.insert(
            flow,
            Conn {
                idx,
                owner: sender,
                installed_at: now,
            },
        );
        self.conns.by_idx.insert(idx, flow);
        self.conns.stats.installed += 1;
        out.push(Out::Cmd(Command::AppInstall(trd::TrdHandler::entry(
            flow, idx,
        ))));
        let (token, cmd) = self.barrier();
        out.push(cmd);
        self.conns.installs.insert(token, vec![(flow, idx, sender)]);
    }

    /// CONN_RELEASE `msg` from `sender`: deletes the entry; true if the
    /// caller acks now (nothing to delete), false if the reply waits for
    /// the delete (or a delete in flight will answer).
    pub(super) fn conn_release(
        &mut self,
        sender: u8,
        msg: &CtlMessage,
        flow: FlowKey,
        idx: u16,
        out: &mut Vec<Out>,
    ) -> bool {
        self.conns.stats.conn_release += 1;
        if self.conns.releasing.contains(&flow) {
            return false;
        }
        let owned = self
            .conns
            .live
            .get(&flow)
            .is_some_and(|c| c.idx == idx && c.owner == sender);
        if !owned {
            self.conns.stats.release_stale += 1;
            return true;
        }
        self.forget_conn(&flow);
        if self.config.mutation == Mutation::ReleaseWithoutDelete {
            return true;
        }
        self.conns.releasing.insert(flow);
        self.conns.stats.deleted += 1;
        out.push(Out::Cmd(Command::AppUninstall {
            table: TABLE_CONN_IDX,
            key: flow.0.to_vec(),
        }));
        let (token, cmd) = self.barrier();
        out.push(cmd);
        self.conns
            .deletes
            .insert(token, (flow, sender, ctl::reply(msg, 0, None)));
        false
    }

    fn forget_conn(&mut self, flow: &FlowKey) -> Option<Conn> {
        let c = self.conns.live.remove(flow)?;
        if self.conns.by_idx.get(&c.idx) == Some(flow) {
            self.conns.by_idx.remove(&c.idx);
        }
        Some(c)
    }

    /// A barrier: installs tell their owner ENTRY_OFFLOADED, release
    /// deletes are answered, aged deletes tell their owner ENTRY_EXPIRED.
    pub(super) fn conns_barrier(&mut self, now: Nanos, token: u64, out: &mut Vec<Out>) {
        if let Some(done) = self.conns.installs.remove(&token) {
            let mut by: BTreeMap<u8, Vec<Vec<u8>>> = BTreeMap::new();
            for (f, idx, owner) in done {
                // Released or aged meanwhile: nothing to tell.
                if self.conns.live.get(&f).is_some_and(|c| c.idx == idx) {
                    by.entry(owner).or_default().push(f.0.to_vec());
                }
            }
            for (s, keys) in by {
                self.conns.stats.offloaded += keys.len() as u64;
                let body = CtlBody::EntryOffloaded {
                    table_id: TABLE_CONN_IDX,
                    keys,
                };
                self.request(now, s, body, out);
            }
        }
        if let Some((flow, to, reply)) = self.conns.deletes.remove(&token) {
            self.conns.stats.release_replied += 1;
            self.conns.releasing.remove(&flow);
            self.send(to, &reply, out);
        }
        if let Some((flow, owner)) = self.conns.aging.remove(&token) {
            self.conns.stats.expired += 1;
            let body = CtlBody::EntryExpired {
                table_id: TABLE_CONN_IDX,
                keys: vec![flow.0.to_vec()],
            };
            self.request(now, owner, body, out);
        }
    }

    /// The periodic tick: polls every live entry's idle time when due.
    pub(super) fn conns_tick(&mut self, now: Nanos, out: &mut Vec<Out>) {
        if self.config.conns.r == 0 || now < self.conns.next_poll {
            return;
        }
        self.conns.next_poll = now + self.config.conns.poll_ns;
        for f in self.conns.live.keys() {
            out.push(Out::Cmd(Command::AppPoll {
                table: TABLE_CONN_IDX,
                key: f.0.to_vec(),
            }));
        }
    }

    /// An entry's idle time: one idle for T_exp (or gone) is aged.
    pub(super) fn conns_activity(&mut self, key: &[u8], idle: Nanos, out: &mut Vec<Out>) {
        let Ok(k) = <[u8; FLOW_KEY_LEN]>::try_from(key) else {
            return;
        };
        let flow = FlowKey(k);
        if idle < self.t_exp_ns || self.conns.releasing.contains(&flow) {
            return;
        }
        let Some(c) = self.forget_conn(&flow) else {
            return;
        };
        self.conns.stats.aged += 1;
        if idle != Nanos::MAX {
            out.push(Out::Cmd(Command::AppUninstall {
                table: TABLE_CONN_IDX,
                key: flow.0.to_vec(),
            }));
        }
        let (token, cmd) = self.barrier();
        out.push(cmd);
        self.conns.aging.insert(token, (flow, c.owner));
    }
}
