//! [`ClipServer`]: a CLIP server as its host sees it — the runtime's data
//! path ([`ClipRuntime`]) plus its CLIP-CTL endpoint toward the
//! controller (spec §4.5): answers to the controller's requests (top-N,
//! flow queries, mirror and pool writes, offload and expiry notices), the
//! server's own reports (ENTRY_CREATED batches, FLOW_EXPIRED, a HEARTBEAT
//! every 100 ms), retransmission of unanswered reports and a duplicate
//! filter. Control datagrams arrive on the server link like requests and
//! are told apart by their UDP port.
//!
//! TRD's connections (spec §7.2) go through CLIP-CTL too: a created entry
//! the handler names a connection ([`RemoteHandler::conn_new_of`]) leaves
//! as CONN_NEW instead of ENTRY_CREATED; the handler's due releases leave
//! as CONN_RELEASE, and the controller's reply (sent once the switch's
//! delete is done) frees the index ([`ClipRuntime::conn_released`]). A
//! CONN_RELEASE given up on is sent again [our choice]: the index must not
//! be freed before the delete is known done, and freeing it never would
//! leak it. Sending a connection's CONN_RELEASE stops retransmitting its
//! CONN_NEW, so a late CONN_NEW cannot re-install a released connection.
//!
//! [our choice] Servers are configured statically (the switch driver's
//! `servers`), so REGISTER is not sent; liveness is the heartbeat.

use inca_server::{NfOutput, SoftwareNf};
use inca_switch::device::{Nanos, PortId};
use inca_wire::clip::ctl::{
    split, CtlBody, CtlMessage, FlowInfo as WireFlowInfo, MirrorEntry, MAX_DATAGRAM, SERVER_PORT,
};

use super::runtime::{ClipRuntime, RuntimeError};
use super::RuntimeConfig;
use crate::app::{Entry, RemoteHandler};
use crate::ctl::{self, Dedup, Reliable};
use crate::flow::{FlowKey, FLOW_KEY_LEN};

/// Heartbeat period (§5.7).
pub const HEARTBEAT_NS: Nanos = 100_000_000;

/// What the endpoint did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EndpointStats {
    /// Control datagrams received.
    pub ctl_in: u64,
    /// Control datagrams refused (malformed, not for this server).
    pub ctl_bad: u64,
    /// Control messages sent (replies, reports, heartbeats).
    pub ctl_out: u64,
    /// CONN_NEWs sent (TRD).
    pub conn_new: u64,
    /// CONN_RELEASEs sent, retries included.
    pub conn_release: u64,
    /// CONN_RELEASEs given up on (no reply) or refused (too many pending),
    /// to be sent again.
    pub conn_release_retry: u64,
    /// Indices freed by CONN_RELEASE replies.
    pub conn_released: u64,
    /// CONN_RELEASE replies for an index not being released here.
    pub conn_release_stale: u64,
}

/// A CLIP server: runtime and control endpoint. See the module
/// documentation.
#[derive(Debug)]
pub struct ClipServer<H: RemoteHandler> {
    runtime: ClipRuntime<H>,
    reliable: Reliable,
    dedup: Dedup,
    next_heartbeat: Nanos,
    /// The port the controller is reached on (the switch link).
    uplink: PortId,
    /// Unanswered CONN_NEWs: connection → txn (as many as connections).
    conn_new: std::collections::BTreeMap<FlowKey, u32>,
    /// CONN_RELEASEs to send again.
    release_backlog: Vec<(FlowKey, u16)>,
    stats: EndpointStats,
}

impl<H: RemoteHandler> ClipServer<H> {
    /// A server for `cores` cores running `handler`.
    pub fn new(config: RuntimeConfig, cores: usize, handler: H) -> Result<Self, RuntimeError> {
        Ok(ClipServer {
            runtime: ClipRuntime::new(config, cores, handler)?,
            reliable: Reliable::default(),
            dedup: Dedup::default(),
            next_heartbeat: 0,
            uplink: 0,
            conn_new: Default::default(),
            release_backlog: Vec::new(),
            stats: EndpointStats::default(),
        })
    }

    /// The runtime.
    pub fn runtime(&self) -> &ClipRuntime<H> {
        &self.runtime
    }

    /// The runtime, mutably.
    pub fn runtime_mut(&mut self) -> &mut ClipRuntime<H> {
        &mut self.runtime
    }

    /// The endpoint's counters.
    pub fn stats(&self) -> &EndpointStats {
        &self.stats
    }

    fn id(&self) -> u8 {
        self.runtime.config().server_id
    }

    fn send(&mut self, msg: &CtlMessage, out: &mut Vec<NfOutput>) {
        self.stats.ctl_out += 1;
        out.push((self.uplink, ctl::frame(msg, self.id(), 0)));
    }

    fn report(&mut self, now: Nanos, body: CtlBody, out: &mut Vec<NfOutput>) {
        let parts = split(body, MAX_DATAGRAM);
        let n = parts.len();
        for (i, part) in parts.into_iter().enumerate() {
            let id = self.id();
            if let Some(m) = self.reliable.request(now, id, 0, part, i + 1 < n) {
                self.send(&m, out);
            }
        }
    }

    /// Sends one request reliably; its txn (None: too many pending).
    fn request(&mut self, now: Nanos, body: CtlBody, out: &mut Vec<NfOutput>) -> Option<u32> {
        let id = self.id();
        let m = self.reliable.request(now, id, 0, body, false)?;
        self.send(&m, out);
        Some(m.txn_id)
    }

    /// CONN_RELEASE of `flow`'s `idx`; kept for the next housekeeping if
    /// too many requests are pending.
    fn conn_release(&mut self, now: Nanos, flow: FlowKey, idx: u16, out: &mut Vec<NfOutput>) {
        if let Some(txn) = self.conn_new.remove(&flow) {
            self.reliable.replied(txn);
        }
        let body = CtlBody::ConnRelease { flow: flow.0, idx };
        if self.request(now, body, out).is_some() {
            self.stats.conn_release += 1;
        } else {
            self.stats.conn_release_retry += 1;
            self.release_backlog.push((flow, idx));
        }
    }

    /// A reply to one of this server's requests.
    fn replied(&mut self, txn: u32) {
        match self.reliable.replied(txn).map(|(_, m)| m.body) {
            Some(CtlBody::ConnNew { flow, .. }) => {
                self.conn_new.remove(&FlowKey(flow));
            }
            Some(CtlBody::ConnRelease { flow, idx }) => {
                if self.runtime.conn_released(&FlowKey(flow), idx) {
                    self.stats.conn_released += 1;
                } else {
                    self.stats.conn_release_stale += 1;
                }
            }
            _ => {}
        }
    }

    fn control(&mut self, now: Nanos, port: PortId, frame: &[u8], out: &mut Vec<NfOutput>) {
        self.stats.ctl_in += 1;
        self.uplink = port;
        let Some(msg) = ctl::parse(frame, SERVER_PORT).filter(|m| m.sender == 0) else {
            self.stats.ctl_bad += 1;
            return;
        };
        if msg.reply {
            self.replied(msg.txn_id);
            return;
        }
        if let Some(cached) = self.dedup.lookup(msg.sender, msg.txn_id) {
            for m in cached {
                self.send(&m, out);
            }
            return;
        }
        let id = self.id();
        let key = |k: &[u8]| <[u8; FLOW_KEY_LEN]>::try_from(k).ok().map(FlowKey);
        let answer: Vec<CtlBody> = match &msg.body {
            CtlBody::MirrorInsert { table_id, entries } => {
                for e in entries {
                    self.runtime.mirror_insert(Entry {
                        table: *table_id,
                        key: e.key.clone(),
                        action: e.action_id,
                        data: e.data.clone(),
                    });
                }
                Vec::new()
            }
            CtlBody::MirrorDelete { table_id, keys } => {
                for k in keys {
                    self.runtime.mirror_delete(*table_id, k);
                }
                Vec::new()
            }
            CtlBody::EntryOffloaded { keys, .. } => {
                for k in keys.iter().filter_map(|k| key(k)) {
                    self.runtime.mark_offloaded(&k);
                }
                Vec::new()
            }
            CtlBody::EntryExpired { table_id, keys } => {
                for k in keys {
                    self.runtime.entry_expired(*table_id, k);
                }
                Vec::new()
            }
            CtlBody::PoolAssign {
                kind,
                base_ip,
                lo,
                hi,
                ..
            } => {
                self.runtime.pool_assign(*kind as u8, *base_ip, *lo, *hi);
                Vec::new()
            }
            CtlBody::TopnRequest { period_id, n } => {
                let items = self
                    .runtime
                    .topn_report(usize::from(*n))
                    .into_iter()
                    .map(|(f, e)| (f.0, e))
                    .collect();
                split(
                    CtlBody::TopnReport {
                        period_id: *period_id,
                        items,
                    },
                    MAX_DATAGRAM,
                )
            }
            CtlBody::FlowQuery { grp_ver } => {
                let items = self
                    .runtime
                    .flow_query(*grp_ver, now)
                    .into_iter()
                    .map(|f| WireFlowInfo {
                        flow: f.flow.0,
                        first_seen: f.first_seen,
                        last_seen: f.last_seen,
                        offloaded: f.offloaded,
                    })
                    .collect();
                split(CtlBody::FlowQueryReply { items }, MAX_DATAGRAM)
            }
            CtlBody::Heartbeat { .. } => return,
            _ => {
                self.stats.ctl_bad += 1;
                return;
            }
        };
        let replies: Vec<CtlMessage> = if answer.is_empty() {
            vec![ctl::reply(&msg, id, None)]
        } else {
            let n = answer.len();
            answer
                .into_iter()
                .enumerate()
                .map(|(i, b)| CtlMessage {
                    more: i + 1 < n,
                    ..ctl::reply(&msg, id, Some(b))
                })
                .collect()
        };
        for m in &replies {
            self.send(m, out);
        }
        self.dedup.remember(msg.sender, msg.txn_id, replies);
    }
}

impl<H: RemoteHandler> SoftwareNf for ClipServer<H> {
    fn name(&self) -> &str {
        "clip_server"
    }

    /// Without a time: the runtime's latest (the server always calls
    /// `process_at`).
    fn process(&mut self, core: usize, port: PortId, frame: Vec<u8>, out: &mut Vec<NfOutput>) {
        let now = self.runtime.now();
        self.process_at(now, core, port, frame, out);
    }

    fn process_at(
        &mut self,
        now: Nanos,
        core: usize,
        port: PortId,
        frame: Vec<u8>,
        out: &mut Vec<NfOutput>,
    ) {
        if ctl::is_to_port(&frame, SERVER_PORT) {
            self.control(now, port, &frame, out);
        } else {
            self.uplink = port;
            self.runtime.process_at(now, core, port, frame, out);
        }
    }

    fn rss_input(&self, frame: &[u8]) -> Option<Vec<u8>> {
        self.runtime.rss_input(frame)
    }

    fn housekeeping_interval(&self) -> Option<Nanos> {
        self.runtime.housekeeping_interval()
    }

    fn housekeeping(&mut self, now: Nanos, out: &mut Vec<NfOutput>) {
        self.runtime.tick(now);
        let created = self.runtime.take_created();
        let mut by_table: std::collections::BTreeMap<u8, Vec<MirrorEntry>> = Default::default();
        for e in created {
            if let Some((flow, idx)) = self.runtime.handler().conn_new_of(&e) {
                if let Some(txn) = self.request(now, CtlBody::ConnNew { flow: flow.0, idx }, out) {
                    self.stats.conn_new += 1;
                    self.conn_new.insert(flow, txn);
                }
                continue;
            }
            by_table.entry(e.table).or_default().push(MirrorEntry {
                key: e.key,
                action_id: e.action,
                data: e.data,
            });
        }
        for (table_id, entries) in by_table {
            self.report(now, CtlBody::EntryCreated { table_id, entries }, out);
        }
        let expired = self.runtime.take_expired_flows();
        if !expired.is_empty() {
            let flows = expired.into_iter().map(|f| f.0).collect();
            self.report(now, CtlBody::FlowExpired { flows }, out);
        }
        let mut releases = std::mem::take(&mut self.release_backlog);
        let (resend, lost) = self.reliable.due(now);
        for (_, m) in resend {
            self.send(&m, out);
        }
        for (_, m) in lost {
            match m.body {
                CtlBody::ConnNew { flow, .. } => {
                    self.conn_new.remove(&FlowKey(flow));
                }
                CtlBody::ConnRelease { flow, idx } => {
                    self.stats.conn_release_retry += 1;
                    releases.push((FlowKey(flow), idx));
                }
                _ => {}
            }
        }
        releases.extend(self.runtime.take_conn_release(now));
        for (flow, idx) in releases {
            self.conn_release(now, flow, idx, out);
        }
        if now >= self.next_heartbeat {
            self.next_heartbeat = now + HEARTBEAT_NS;
            let hb = CtlMessage {
                txn_id: 0,
                sender: self.id(),
                reply: false,
                more: false,
                body: CtlBody::Heartbeat { timestamp_ns: now },
            };
            self.send(&hb, out);
        }
    }

    fn counters(&self) -> Vec<(String, u64)> {
        let mut v = self.runtime.counters();
        v.extend([
            ("ctl_in".to_string(), self.stats.ctl_in),
            ("ctl_bad".to_string(), self.stats.ctl_bad),
            ("ctl_out".to_string(), self.stats.ctl_out),
            ("ctl_dup".to_string(), self.dedup.duplicates),
            ("ctl_gave_up".to_string(), self.reliable.gave_up),
            ("ctl_conn_new".to_string(), self.stats.conn_new),
            ("ctl_conn_release".to_string(), self.stats.conn_release),
            (
                "ctl_conn_release_retry".to_string(),
                self.stats.conn_release_retry,
            ),
            ("ctl_conn_released".to_string(), self.stats.conn_released),
            (
                "ctl_conn_release_stale".to_string(),
                self.stats.conn_release_stale,
            ),
        ]);
        v
    }

    fn reset(&mut self) {
        self.runtime.reset();
        self.reliable.clear();
        self.dedup.clear();
        self.next_heartbeat = 0;
        self.conn_new.clear();
        self.release_backlog.clear();
    }
}
