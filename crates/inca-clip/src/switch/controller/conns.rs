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

/// Most driver operations (installs, release deletes, aging deletes)
/// awaiting their barrier [our choice: barriers return within
/// microseconds, so this binds only a driver that stopped answering].
/// Beyond it a CONN_NEW is refused (the connection stays on the slow
/// path, still judged) and a CONN_RELEASE goes unanswered (the server
/// sends it again).
pub const MAX_OUTSTANDING: usize = 65_536;

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
    /// ENTRY_EXPIREDs sent again after their retransmissions ran out.
    pub expired_resent: u64,
    /// CONN_NEWs refused and CONN_RELEASEs left unanswered because
    /// [`MAX_OUTSTANDING`] operations awaited their barrier.
    pub backlogged: u64,
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
            ("conn_expired_resent", s.expired_resent),
            ("conn_backlogged", s.backlogged),
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

    /// A request given up on: a live server's POOL_ASSIGN is sent again,
    /// and so is its ENTRY_EXPIRED of `conn_idx` entries. [our choice]
    /// The server frees an aged connection's index only when it hears of
    /// the expiry, so a lost one would leak the index for as long as the
    /// server lives; a failed server's indices go with it.
    pub(super) fn conns_lost(&mut self, now: Nanos, to: u8, msg: &CtlMessage, out: &mut Vec<Out>) {
        if self.servers.get(&to).is_none_or(|s| s.failed) {
            return;
        }
        match &msg.body {
            CtlBody::PoolAssign { lo, hi, .. }
                if self.conns.slices.get(&to) == Some(&(*lo, *hi)) =>
            {
                self.pool_assign(now, to, *lo, *hi, out);
            }
            CtlBody::EntryExpired { table_id, .. } if *table_id == TABLE_CONN_IDX => {
                self.conns.stats.expired_resent += 1;
                self.request(now, to, msg.body.clone(), out);
            }
            _ => {}
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
        if self.backlogged() {
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
        if self.backlogged() {
            return false;
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

    /// Whether [`MAX_OUTSTANDING`] operations await their barrier
    /// (counted).
    fn backlogged(&mut self) -> bool {
        let n = self.conns.installs.len() + self.conns.deletes.len() + self.conns.aging.len();
        let full = n >= MAX_OUTSTANDING;
        if full {
            self.conns.stats.backlogged += 1;
        }
        full
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
        // Aged at a later poll when the driver answers again.
        if !self.conns.live.contains_key(&flow) || self.backlogged() {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::switch::controller::ControllerConfig;
    use crate::switch::{Report, ServerLink};
    use inca_wire::clip::ctl::{CONTROLLER_PORT, SERVER_PORT};

    const T_EXP: Nanos = 10_000_000_000;

    fn controller() -> Controller {
        let driver = DriverConfig {
            servers: vec![ServerLink { id: 1, port: 2 }, ServerLink { id: 2, port: 3 }],
            initial_group: vec![1, 2],
            t_exp_ns: T_EXP,
        };
        let cfg = ControllerConfig {
            conns: Conns {
                r: 64,
                ..Conns::default()
            },
            ..ControllerConfig::default()
        };
        Controller::new(cfg, &driver)
    }

    /// The CLIP-CTL messages in `outs`: (port, message).
    fn sent(outs: &[Out]) -> Vec<(u16, CtlMessage)> {
        outs.iter()
            .filter_map(|o| match o {
                Out::Cmd(Command::PacketOut { port, frame }) => {
                    Some((*port, ctl::parse(frame, SERVER_PORT)?))
                }
                _ => None,
            })
            .collect()
    }

    fn cmds(outs: &[Out]) -> Vec<&Command> {
        outs.iter()
            .filter_map(|o| match o {
                Out::Cmd(c) if !matches!(c, Command::PacketOut { .. }) => Some(c),
                _ => None,
            })
            .collect()
    }

    fn barrier(outs: &[Out]) -> u64 {
        cmds(outs)
            .iter()
            .find_map(|c| match c {
                Command::Barrier(t) => Some(*t),
                _ => None,
            })
            .expect("a barrier")
    }

    fn from(c: &mut Controller, now: Nanos, server: u8, txn: u32, body: CtlBody) -> Vec<Out> {
        let msg = CtlMessage {
            txn_id: txn,
            sender: server,
            reply: false,
            more: false,
            body,
        };
        let frame = ctl::frame(&msg, server, 0);
        assert!(
            ctl::parse(&frame, CONTROLLER_PORT).is_some(),
            "to the controller"
        );
        let port = 1 + u16::from(server);
        c.on_report(now, Report::Ctl { port, frame })
    }

    fn flow(n: u8) -> FlowKey {
        FlowKey::new(10, 6, [10, 1, 0, n], [10, 2, 0, 1], 20_000, 443)
    }

    #[test]
    fn slices_new_connections_releases_and_aging_follow_clip_ctl() {
        let mut c = controller();
        let driver = DriverConfig {
            servers: vec![ServerLink { id: 1, port: 2 }, ServerLink { id: 2, port: 3 }],
            initial_group: vec![1, 2],
            t_exp_ns: T_EXP,
        };
        let outs = c.start(0, &driver);
        let pools: Vec<(u16, u32, u32)> = sent(&outs)
            .into_iter()
            .filter_map(|(p, m)| match m.body {
                CtlBody::PoolAssign {
                    kind: PoolKind::TrdIndices,
                    lo,
                    hi,
                    ..
                } => Some((p, lo, hi)),
                _ => None,
            })
            .collect();
        assert_eq!(pools, vec![(2, 0, 31), (3, 32, 63)], "R split evenly");

        // CONN_NEW: installed at once, acked; ENTRY_OFFLOADED after the
        // barrier.
        let new = |f: u8, idx: u16| CtlBody::ConnNew {
            flow: flow(f).0,
            idx,
        };
        let outs = from(&mut c, 10, 1, 1, new(1, 5));
        assert!(matches!(cmds(&outs)[0], Command::AppInstall(e) if e.data == vec![0, 5]));
        let acks = sent(&outs);
        assert!(acks.len() == 1 && acks[0].1.reply && acks[0].1.txn_id == 1);
        let outs = c.on_report(20, Report::Barrier(barrier(&outs)));
        assert!(
            matches!(&sent(&outs)[0], (2, m) if matches!(&m.body, CtlBody::EntryOffloaded { keys, .. } if keys == &vec![flow(1).0.to_vec()]))
        );

        // Refused, acked, nothing installed: another server's index, past
        // R, an index in use; a duplicate is acked again.
        for (f, idx) in [(2, 40), (3, 200), (4, 5), (1, 5)] {
            let outs = from(&mut c, 30, 1, 10 + u32::from(f), new(f, idx));
            assert!(cmds(&outs).is_empty(), "{f} {idx}");
            assert_eq!(sent(&outs).len(), 1, "acked");
        }
        let s = c.conn_stats();
        assert_eq!((s.installed, s.refused, s.duplicate), (1, 3, 1));

        // CONN_RELEASE: deleted; the reply waits for the delete; a
        // duplicate meanwhile is dropped.
        let rel = CtlBody::ConnRelease {
            flow: flow(1).0,
            idx: 5,
        };
        let outs = from(&mut c, 40, 1, 20, rel.clone());
        assert!(matches!(cmds(&outs)[0], Command::AppUninstall { .. }));
        assert!(sent(&outs).is_empty(), "no reply before the delete");
        let token = barrier(&outs);
        assert!(from(&mut c, 41, 1, 20, rel.clone()).is_empty());
        let outs = c.on_report(50, Report::Barrier(token));
        let r = sent(&outs);
        assert!(r.len() == 1 && r[0].1.reply && r[0].1.txn_id == 20);
        // A release of an entry gone is answered at once.
        let outs = from(&mut c, 60, 1, 21, rel);
        assert!(cmds(&outs).is_empty() && sent(&outs)[0].1.reply);
        assert_eq!(c.conn_stats().release_stale, 1);

        // Aging: a fresh reading of T_exp idleness deletes the entry, then
        // ENTRY_EXPIRED; a shorter one or an unknown key does nothing.
        let outs = from(&mut c, 70, 2, 1, new(9, 40));
        c.on_report(80, Report::Barrier(barrier(&outs)));
        let key = flow(9).0.to_vec();
        assert!(c
            .on_report(
                90,
                Report::Activity {
                    key: key.clone(),
                    idle: T_EXP - 1
                }
            )
            .is_empty());
        let stray = flow(77).0.to_vec();
        assert!(c
            .on_report(
                90,
                Report::Activity {
                    key: stray,
                    idle: T_EXP
                }
            )
            .is_empty());
        let outs = c.on_report(100, Report::Activity { key, idle: T_EXP });
        assert!(matches!(cmds(&outs)[0], Command::AppUninstall { .. }));
        let outs = c.on_report(110, Report::Barrier(barrier(&outs)));
        assert!(
            matches!(&sent(&outs)[0], (3, m) if matches!(m.body, CtlBody::EntryExpired { .. }))
        );
        assert!(c.conns_live().is_empty());

        // Garbage and a request from a port that is not the sender's are
        // counted, never acted on.
        let bad = c.stats.ctl_bad;
        assert!(c
            .on_report(
                120,
                Report::Ctl {
                    port: 2,
                    frame: vec![0; 30]
                }
            )
            .is_empty());
        let msg = CtlMessage {
            txn_id: 99,
            sender: 2,
            reply: false,
            more: false,
            body: new(5, 41),
        };
        let frame = ctl::frame(&msg, 2, 0);
        assert!(c.on_report(120, Report::Ctl { port: 2, frame }).is_empty());
        assert_eq!(c.stats.ctl_bad, bad + 2);
    }

    #[test]
    fn an_entry_expired_given_up_on_is_sent_again_while_its_server_lives() {
        let mut c = controller();
        let driver = DriverConfig {
            servers: vec![ServerLink { id: 1, port: 2 }, ServerLink { id: 2, port: 3 }],
            initial_group: vec![1, 2],
            t_exp_ns: T_EXP,
        };
        c.start(0, &driver);
        let outs = from(
            &mut c,
            10,
            2,
            1,
            CtlBody::ConnNew {
                flow: flow(9).0,
                idx: 40,
            },
        );
        c.on_report(20, Report::Barrier(barrier(&outs)));
        let key = flow(9).0.to_vec();
        let outs = c.on_report(30, Report::Activity { key, idle: T_EXP });
        let outs = c.on_report(40, Report::Barrier(barrier(&outs)));
        let expired = |outs: &[Out]| -> Vec<u32> {
            sent(outs)
                .into_iter()
                .filter(|(p, m)| *p == 3 && matches!(m.body, CtlBody::EntryExpired { .. }))
                .map(|(_, m)| m.txn_id)
                .collect()
        };
        let mut txns: Vec<u32> = expired(&outs);
        assert_eq!(txns.len(), 1);
        // Server 2 keeps its heartbeats but never answers: the expiry is
        // retransmitted, given up on, and sent again as a new request.
        let mut now = 40;
        for i in 0..12 {
            now += super::super::TICK_NS;
            let hb = CtlBody::Heartbeat { timestamp_ns: now };
            from(&mut c, now, 2, 1_000 + i, hb);
            txns.extend(expired(&c.on_timer(now, super::super::TOKEN_TICK)));
        }
        txns.dedup();
        assert!(txns.len() >= 2, "sent again under a new txn: {txns:?}");
        assert!(c.conn_stats().expired_resent >= 1);
        // Server 1, silent, is declared failed; nothing goes to it.
        assert!(c.servers.get(&1).is_some_and(|s| s.failed));
    }
}
