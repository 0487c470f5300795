//! The runtime's control API, sans-IO: one typed method per CLIP-CTL
//! message a server handles or sends (spec §4.5), for the codec glue to
//! call, plus read access for reports and tests. No method encodes a
//! frame.
//!
//! | Message | Method |
//! |---|---|
//! | TOPN_REQUEST → TOPN_REPORT | [`ClipRuntime::topn_report`] |
//! | FLOW_QUERY → FLOW_QUERY_REPLY | [`ClipRuntime::flow_query`] |
//! | ENTRY_OFFLOADED | [`ClipRuntime::mark_offloaded`] |
//! | ENTRY_EXPIRED | [`ClipRuntime::entry_expired`] |
//! | MIRROR_INSERT / MIRROR_DELETE | [`ClipRuntime::mirror_insert`] / [`ClipRuntime::mirror_delete`] |
//! | POOL_ASSIGN | [`ClipRuntime::pool_assign`] |
//! | ENTRY_CREATED (batched every 10 ms) | [`ClipRuntime::take_created`] |
//! | FLOW_EXPIRED | [`ClipRuntime::take_expired_flows`] |
//! | CONN_NEW (TRD) | created entries the handler's `conn_new_of` names |
//! | CONN_RELEASE / its reply | [`ClipRuntime::take_conn_release`] / [`ClipRuntime::conn_released`] |

use inca_switch::device::Nanos;

use super::config::RuntimeConfig;
use super::flows::{FlowInfo, FlowRecord};
use super::runtime::ClipRuntime;
use super::stats::RuntimeStats;
use super::topn::top_n;
use crate::app::{Entry, RemoteHandler};
use crate::flow::{FlowKey, FLOW_KEY_LEN};

impl<H: RemoteHandler> ClipRuntime<H> {
    /// TOPN_REQUEST(n): the top `n` flows by the highest estimate each
    /// carried since the last report, merged over the cores (a flow seen
    /// on two cores counts its higher estimate), ties by the smaller key
    /// (§5.3). Clears the candidate maps: a new period starts. Each core
    /// holds at most `config.candidates` flows, so a report has at most
    /// that many per core.
    pub fn topn_report(&mut self, n: usize) -> Vec<(FlowKey, u32)> {
        self.stats.topn_reports += 1;
        let all: Vec<(FlowKey, u32)> = self
            .cores
            .iter_mut()
            .flat_map(|c| c.candidates.drain())
            .collect();
        top_n(all, n)
    }

    /// FLOW_QUERY(grp_ver) at `now`: the live flows assigned to group
    /// version `grp_ver`, sorted by key. A flow is assigned a version by
    /// the request that created its record, when the switch chose the
    /// server through a group slot (PREV or CUR); records created through
    /// a pin or a hint have version 0 and never match (nor does a query
    /// for 0, the empty slot's version). Later selections do not
    /// matter: a flow the pin cache now serves (§5.6 step 11) must still
    /// be found. Live: offloaded, or idle for less than T_exp.
    pub fn flow_query(&self, grp_ver: u16, now: Nanos) -> Vec<FlowInfo> {
        if grp_ver == 0 {
            return Vec::new();
        }
        let mut v = Vec::new();
        for c in &self.cores {
            c.flows.query(grp_ver, now, self.config.t_exp_ns, &mut v);
        }
        v.sort_unstable();
        v
    }

    /// ENTRY_OFFLOADED for `flow`: its entry is now in the switch, so the
    /// server stops expiring its record (it no longer sees the packets).
    /// False, and counted, if the flow has no record here.
    pub fn mark_offloaded(&mut self, flow: &FlowKey) -> bool {
        let mut found = false;
        for c in &mut self.cores {
            found |= c.flows.set_offloaded(flow);
        }
        if !found {
            self.stats.offload_unknown += 1;
        }
        found
    }

    /// ENTRY_EXPIRED for `key` of `table`: the switch copy aged out. The
    /// flow's record is dropped (for a flow key: every CLIP table is keyed
    /// by one) and the handler frees what the entry held.
    pub fn entry_expired(&mut self, table: u8, key: &[u8]) {
        if let Ok(k) = <[u8; FLOW_KEY_LEN]>::try_from(key) {
            let flow = FlowKey(k);
            for c in &mut self.cores {
                c.flows.remove(&flow);
            }
        }
        self.handler.expire(table, key);
    }

    /// CONN_RELEASE's reply: the controller deleted `flow`'s switch
    /// entry, so index `idx` is freed and the flow's record dropped.
    /// False, and nothing changes, if the handler was not releasing `idx`
    /// for it.
    pub fn conn_released(&mut self, flow: &FlowKey, idx: u16) -> bool {
        if !self.handler.release_acked(idx) {
            return false;
        }
        for c in &mut self.cores {
            c.flows.remove(flow);
        }
        true
    }

    /// CONN_RELEASE at `now`: the handler's connections due for release.
    pub fn take_conn_release(&mut self, now: Nanos) -> Vec<(FlowKey, u16)> {
        self.handler.take_conn_release(now)
    }

    /// MIRROR_INSERT: the controller installs `entry` (replicated on
    /// every server).
    pub fn mirror_insert(&mut self, entry: Entry) {
        self.handler.mirror_insert(entry);
    }

    /// MIRROR_DELETE of `key` from `table`.
    pub fn mirror_delete(&mut self, table: u8, key: &[u8]) {
        self.handler.mirror_delete(table, key);
    }

    /// POOL_ASSIGN: this server's slice of pool `kind` (1 SNAT ports, 2
    /// TRD indices), `base_ip` and `lo..=hi`.
    pub fn pool_assign(&mut self, kind: u8, base_ip: [u8; 4], lo: u32, hi: u32) {
        self.handler.pool_assign(kind, base_ip, lo, hi);
    }

    /// The entries handlers created, in creation order, for ENTRY_CREATED:
    /// those of batches closed by housekeeping (every
    /// `batch_interval_ns`), not the still-open one.
    pub fn take_created(&mut self) -> Vec<Entry> {
        std::mem::take(&mut self.created_ready)
    }

    /// The flows expired since the last call, for FLOW_EXPIRED (each
    /// sweep's in key order).
    pub fn take_expired_flows(&mut self) -> Vec<FlowKey> {
        std::mem::take(&mut self.expired)
    }

    /// The server crashed: flow records, candidates, queued reports and
    /// the handler's state are lost; counters survive.
    pub fn reset(&mut self) {
        for c in &mut self.cores {
            c.flows.clear();
            c.candidates.clear();
        }
        self.created_pending.clear();
        self.created_ready.clear();
        self.expired.clear();
        self.next_expiry = 0;
        self.handler.reset();
    }

    /// The latest time the runtime was handed.
    pub fn now(&self) -> Nanos {
        self.now
    }

    /// The configuration.
    pub fn config(&self) -> &RuntimeConfig {
        &self.config
    }

    /// The handler.
    pub fn handler(&self) -> &H {
        &self.handler
    }

    /// The handler, to change.
    pub fn handler_mut(&mut self) -> &mut H {
        &mut self.handler
    }

    /// The counters.
    pub fn stats(&self) -> &RuntimeStats {
        &self.stats
    }

    /// Flow records held, over all cores.
    pub fn flow_records(&self) -> usize {
        self.cores.iter().map(|c| c.flows.len()).sum()
    }

    /// Top-N candidates held, over all cores.
    pub fn candidates(&self) -> usize {
        self.cores.iter().map(|c| c.candidates.len()).sum()
    }

    /// The record of `flow` and the core holding it (the first, should
    /// several: see [`ClipRuntime::cores_of`]).
    pub fn record(&self, flow: &FlowKey) -> Option<(usize, FlowRecord)> {
        self.cores
            .iter()
            .enumerate()
            .find_map(|(i, c)| c.flows.get(flow).map(|r| (i, *r)))
    }

    /// Every core holding a record of `flow` (one, if RSS kept the flow on
    /// one core).
    pub fn cores_of(&self, flow: &FlowKey) -> Vec<usize> {
        (0..self.cores.len())
            .filter(|&i| self.cores[i].flows.get(flow).is_some())
            .collect()
    }
}
