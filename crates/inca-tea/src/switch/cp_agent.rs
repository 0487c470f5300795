//! The control plane's side of the agent protocol (spec §4.3, H4's codec in
//! [`crate::server::agent_proto`]): requests go out as UDP datagrams through
//! packet-out on the server's port, replies come back punted by the parser
//! extension. Requests are idempotent by `req_id` at the agent, so a request
//! without a reply after `t_agent_retx` is sent again (heartbeats excepted:
//! a missing heartbeat reply is the signal).
//!
//! The link itself — request ids, the pending map, retransmission with
//! backoff — is the switch library's [`inca_switch::rpc::Requests`], each
//! request tagged with its server and [`Purpose`]; what a reply or a
//! give-up means is decided here.

use inca_switch::rpc::{Requests, Retransmit, Timeout};
use inca_switch::{ControlPlane, PacketOutDest};
use inca_wire::Endpoints;

use crate::server::agent_proto::{
    build_datagram, parse_udp, Body, Message, Reply, Request, WriteEntry, AGENT_UDP_PORT,
    MAX_MESSAGE_LEN,
};
use crate::table::partition::RegionWrite;

use super::config::TeaConfig;
use super::cp::TOKEN_AGENT;
use super::dataplane::TeaSwitch;
use super::nf_api::TeaNf;

/// Retransmissions of one request before the control plane gives up on it
/// (about 200 ms with the backoff; the server is then left to the
/// heartbeat) [our choice].
pub const MAX_RETRIES: u32 = 64;
/// The wait doubles per retransmission up to 16 × the first timeout: a
/// control channel busy with a sketch epoch delays packet-outs by
/// milliseconds, and each retransmission costs CPU time.
const MAX_DOUBLINGS: u32 = 4;
/// Bytes of WRITE_BATCH payload per message, leaving room for headers.
const BATCH_BYTES: usize = MAX_MESSAGE_LEN - 64;

/// Why a request was sent: what its reply means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Purpose {
    /// ALLOC_REGION during setup or recovery.
    Alloc { sid: usize, region: u16 },
    /// CREATE_QP (`create`) or RESET_QP during setup or recovery.
    SetupQp { sid: usize, qp: u16, create: bool },
    /// A table operation's WRITE_BATCH.
    Write,
    /// A region reload during setup or recovery.
    Reload { sid: usize },
    /// QP_STATUS from the watchdog.
    QpStatus { qp: u16 },
    /// RESET_QP after a NAK 0x61–0x63 or a watchdog ERROR.
    ResetQp { qp: u16 },
    /// HEARTBEAT.
    Heartbeat { sid: usize },
}

/// Whom a request went to and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct AgentTag {
    pub sid: usize,
    pub purpose: Purpose,
}

/// Outstanding agent requests.
pub(crate) type AgentLink = Requests<AgentTag>;

/// An agent link with no requests, retransmitting as `cfg` says.
pub(crate) fn agent_link(cfg: &TeaConfig) -> AgentLink {
    Requests::new(
        TOKEN_AGENT,
        Retransmit {
            first: cfg.t_agent_retx,
            max_doublings: MAX_DOUBLINGS,
            max_retries: MAX_RETRIES,
        },
    )
}

impl<N: TeaNf> TeaSwitch<N> {
    fn endpoints(&self, sid: usize) -> Option<Endpoints> {
        let s = self.cp.servers.get(sid)?;
        let (mac, ip) = match &s.hello {
            Some(h) => (h.mac, h.ip),
            None => (s.spec.mac, s.spec.ip),
        };
        Some(Endpoints::new(
            self.cfg.switch_mac,
            self.cfg.switch_ip,
            mac,
            ip,
        ))
    }

    /// Sends a request to server `sid`; its id, or `None` if it could not be
    /// encoded.
    pub(crate) fn send_agent(
        &mut self,
        sid: usize,
        req: Request,
        purpose: Purpose,
        cp: &mut ControlPlane<'_>,
    ) -> Option<u32> {
        let ep = self.endpoints(sid)?;
        let dest = PacketOutDest::Port(self.cp.servers[sid].spec.port);
        let retransmit = !matches!(purpose, Purpose::Heartbeat { .. });
        let tag = AgentTag { sid, purpose };
        self.cp.agent.send(cp, dest, tag, retransmit, |id| {
            build_datagram(
                &ep,
                AGENT_UDP_PORT,
                AGENT_UDP_PORT,
                &Message::request(id, req),
            )
            .ok()
        })
    }

    /// Sends `writes` to server `sid` as one or more WRITE_BATCHes; returns
    /// the id of the last one for a table operation (all are tracked), or
    /// `None` if the server is not taking writes.
    pub(crate) fn send_writes(
        &mut self,
        sid: usize,
        writes: Vec<RegionWrite>,
        cp: &mut ControlPlane<'_>,
    ) -> Option<u32> {
        if !self.cp.servers.get(sid).is_some_and(|s| s.takes_writes()) {
            return None;
        }
        let mut last = None;
        for chunk in chunk_writes(writes) {
            last = self.send_agent(sid, Request::WriteBatch(chunk), Purpose::Write, cp);
            if let Some(id) = last {
                self.cp.exec.await_write(id);
            }
        }
        last
    }

    pub(crate) fn agent_timer(&mut self, id: u32, cp: &mut ControlPlane<'_>) {
        let servers = &self.cp.servers;
        // A write to a server that went down is not retried: recovery
        // reloads the server from the mirror.
        let down_write = |t: &AgentTag| {
            t.purpose == Purpose::Write && servers.get(t.sid).is_some_and(|s| s.is_down())
        };
        let t = match self.cp.agent.on_timer(cp, id, down_write) {
            Timeout::Stale => return,
            Timeout::Resent { .. } => {
                self.cp.stats.agent_retransmits += 1;
                return;
            }
            Timeout::GaveUp(t) => t,
        };
        match t.purpose {
            // The server may have missed the write (its link silently
            // losing frames for longer than the retry budget, shorter than
            // three heartbeats): mark it down, so that it is reloaded from
            // the mirror when it answers again, and count the write done
            // as a down server's writes are (issue 20 item 5).
            Purpose::Write => {
                self.cp.stats.write_give_ups += 1;
                self.write_done(id);
                self.server_down(t.sid, cp);
            }
            // A setup or reload that cannot finish: the server is down
            // until it answers a heartbeat or says HELLO again.
            Purpose::Alloc { .. } | Purpose::SetupQp { .. } | Purpose::Reload { .. } => {
                self.server_down(t.sid, cp)
            }
            Purpose::QpStatus { qp } | Purpose::ResetQp { qp } => {
                if let Some(r) = self.cp.servers[t.sid].qps.get_mut(&qp) {
                    r.status_pending = false;
                    r.reset_pending = false;
                }
            }
            Purpose::Heartbeat { .. } => {}
        }
    }

    /// Drops every pending request of a server that went down (its writes
    /// count as done: recovery reloads the server from the mirror).
    pub(crate) fn abandon_server_requests(&mut self, sid: usize) {
        for (id, t) in self.cp.agent.abandon(|t| t.sid == sid) {
            if t.purpose == Purpose::Write {
                self.write_done(id);
            }
        }
    }

    /// An agent datagram reached the CPU.
    pub(crate) fn on_agent_frame(&mut self, frame: &[u8], cp: &mut ControlPlane<'_>) {
        let Some(udp) = parse_udp(frame) else {
            self.cp.stats.malformed += 1;
            return;
        };
        let Ok(msg) = Message::decode(udp.payload) else {
            self.cp.stats.malformed += 1;
            return;
        };
        match msg.body {
            Body::Request(Request::Hello(h)) => {
                let ep = Endpoints::new(
                    self.cfg.switch_mac,
                    self.cfg.switch_ip,
                    udp.src_mac,
                    udp.src_ip,
                );
                let reply = Message::reply(msg.req_id, Reply::HelloOk);
                if let (Ok(f), Some(sid)) = (
                    build_datagram(&ep, AGENT_UDP_PORT, udp.src_port, &reply),
                    self.server_by_ip(h.ip, h.server_id),
                ) {
                    cp.packet_out(f, PacketOutDest::Port(self.cp.servers[sid].spec.port));
                    self.on_hello(sid, h, cp);
                }
            }
            Body::Request(_) => self.cp.stats.malformed += 1,
            Body::Reply(r) => {
                let Some(p) = self.cp.agent.complete(msg.req_id) else {
                    return; // a duplicate reply to a retransmission
                };
                self.on_agent_reply(msg.req_id, p.tag, r, cp);
            }
        }
    }
}

/// Splits writes into WRITE_BATCH bodies that fit one message.
pub(crate) fn chunk_writes(writes: Vec<RegionWrite>) -> Vec<Vec<WriteEntry>> {
    let mut out = Vec::new();
    let mut cur: Vec<WriteEntry> = Vec::new();
    let mut bytes = 0;
    for w in writes {
        let need = crate::server::agent_proto::WRITE_ENTRY_HEADER_LEN + w.bytes.len();
        if !cur.is_empty() && bytes + need > BATCH_BYTES {
            out.push(std::mem::take(&mut cur));
            bytes = 0;
        }
        bytes += need;
        cur.push(WriteEntry {
            region: w.region,
            offset: w.offset,
            data: w.bytes,
        });
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}
