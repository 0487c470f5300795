//! The server agent (spec §3.4, §4.3): announces the server to the switch
//! control plane with HELLO, registers DRAM regions, creates and resets QPs,
//! applies the control plane's table writes and answers status queries.
//!
//! It speaks the protocol of [`super::agent_proto`] over UDP port
//! [`AGENT_UDP_PORT`]. The control plane retransmits on timeout, so every
//! request is executed once: the reply is remembered by (source IP, source
//! port, req_id) and a repeat gets the same bytes again. The memory of
//! replies is bounded ([`AgentConfig::reply_cache`]); the oldest are
//! forgotten first.

use std::collections::{BTreeMap, VecDeque};
use std::net::Ipv4Addr;

use inca_switch::device::{Nanos, Output, MICROS, MILLIS};
use inca_wire::{Endpoints, MacAddr};

use super::agent_proto::{
    build_datagram, Body, ErrorCode, Hello, Message, ProtoError, Reply, Request, UdpMeta,
    WriteEntry, AGENT_UDP_PORT, HEADER_LEN,
};
use super::memory::{Access, MemError};
use super::nic::Nic;

/// The timer token the agent uses for HELLO retransmission.
pub const HELLO_TIMER: u64 = 1;

/// The agent's inputs.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentConfig {
    /// This server's id in HELLO.
    pub server_id: u16,
    /// DRAM offered to TEA, bytes.
    pub dram_offered: u64,
    /// The switch control plane's IP (HELLO goes there).
    pub controller_ip: Ipv4Addr,
    /// The switch's MAC on this server's link.
    pub controller_mac: MacAddr,
    /// Time from a request's arrival to its reply [our choice: 1 µs; the
    /// spec's 20 µs agent round trip is the control plane's cost model].
    pub service_ns: Nanos,
    /// First HELLO retransmission interval [our choice: 1 ms, doubling].
    pub hello_retry_ns: Nanos,
    /// Longest HELLO retransmission interval [our choice: 100 ms, the
    /// heartbeat period].
    pub hello_retry_max_ns: Nanos,
    /// Replies remembered for retransmitted requests [our choice: 1024].
    pub reply_cache: usize,
}

impl Default for AgentConfig {
    fn default() -> Self {
        AgentConfig {
            server_id: 0,
            dram_offered: 64 << 30,
            controller_ip: Ipv4Addr::new(10, 0, 0, 254),
            controller_mac: [0x02, 0, 0, 0, 0x0a, 0xfe],
            service_ns: MICROS,
            hello_retry_ns: MILLIS,
            hello_retry_max_ns: 100 * MILLIS,
            reply_cache: 1024,
        }
    }
}

/// The agent's counters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AgentStats {
    /// Requests executed, by type byte.
    pub requests: BTreeMap<u8, u64>,
    /// Requests answered from the reply cache instead of executed again.
    pub retransmitted: u64,
    /// Requests that failed (ERROR reply or a non-zero WRITE_BATCH status).
    pub failed: u64,
    /// Datagrams that were not a message, or not one the agent takes.
    pub malformed: u64,
    /// HELLOs sent, first and retransmitted.
    pub hellos_sent: u64,
    /// True once the control plane acknowledged HELLO.
    pub hello_acked: bool,
    /// Cells written by WRITE_BATCH.
    pub writes: u64,
}

type ReplyKey = (Ipv4Addr, u16, u32);

/// The agent of one server incarnation.
#[derive(Debug, Clone)]
pub struct Agent {
    cfg: AgentConfig,
    hello_req_id: u32,
    hello_acked: bool,
    hello_interval: Nanos,
    replies: BTreeMap<ReplyKey, Message>,
    reply_order: VecDeque<ReplyKey>,
    stats: AgentStats,
}

impl Agent {
    /// The agent of boot number `boot`. HELLO's req_id is the boot number
    /// [our choice], so the control plane can tell a restarted server's
    /// HELLO from a retransmission of the previous one.
    pub fn new(cfg: AgentConfig, boot: u32) -> Agent {
        let hello_interval = cfg.hello_retry_ns.max(1);
        Agent {
            cfg,
            hello_req_id: boot,
            hello_acked: false,
            hello_interval,
            replies: BTreeMap::new(),
            reply_order: VecDeque::new(),
            stats: AgentStats::default(),
        }
    }

    /// Its counters.
    pub fn stats(&self) -> &AgentStats {
        &self.stats
    }

    /// Boots: sends HELLO and arms its retransmission.
    pub fn start(&mut self, now: Nanos, nic: &mut Nic, out: &mut Vec<Output>) {
        self.send_hello(now, nic, out);
    }

    /// A timer fired.
    pub fn on_timer(&mut self, now: Nanos, token: u64, nic: &mut Nic, out: &mut Vec<Output>) {
        if token == HELLO_TIMER && !self.hello_acked {
            self.hello_interval = (self.hello_interval * 2).min(self.cfg.hello_retry_max_ns);
            self.send_hello(now, nic, out);
        }
    }

    fn send_hello(&mut self, now: Nanos, nic: &mut Nic, out: &mut Vec<Output>) {
        let hello = Hello {
            server_id: self.cfg.server_id,
            dram_offered: self.cfg.dram_offered,
            mac: nic.mac(),
            ip: nic.ip(),
            max_rd_atomic: nic.config().max_dest_rd_atomic,
            pmtu: nic.config().pmtu,
        };
        let msg = Message::request(self.hello_req_id, Request::Hello(hello));
        let ep = Endpoints::new(
            nic.mac(),
            nic.ip(),
            self.cfg.controller_mac,
            self.cfg.controller_ip,
        );
        if let Ok(frame) = build_datagram(&ep, AGENT_UDP_PORT, AGENT_UDP_PORT, &msg) {
            nic.transmit(now, frame, out);
            self.stats.hellos_sent += 1;
        }
        out.push(Output::Timer {
            at: now + self.hello_interval,
            token: HELLO_TIMER,
        });
    }

    /// A UDP datagram to the agent's port arrived.
    pub fn handle_datagram(
        &mut self,
        now: Nanos,
        d: &UdpMeta<'_>,
        nic: &mut Nic,
        out: &mut Vec<Output>,
    ) {
        let msg = match Message::decode(d.payload) {
            Ok(m) => m,
            Err(e) => {
                self.stats.malformed += 1;
                // With a readable header the sender learns what went wrong.
                if !matches!(e, ProtoError::Truncated | ProtoError::BadLength)
                    && d.payload.len() >= HEADER_LEN
                {
                    let p = d.payload;
                    let req_id = u32::from_be_bytes([p[5], p[6], p[7], p[8]]);
                    let reply = Message::reply(req_id, Reply::Error(ErrorCode::BadRequest));
                    self.send_reply(now, d, &reply, nic, out);
                }
                return;
            }
        };
        let req = match msg.body {
            Body::Reply(Reply::HelloOk) if msg.req_id == self.hello_req_id => {
                self.hello_acked = true;
                self.stats.hello_acked = true;
                return;
            }
            Body::Reply(_) | Body::Request(Request::Hello(_)) => {
                self.stats.malformed += 1;
                return;
            }
            Body::Request(r) => r,
        };
        let key = (d.src_ip, d.src_port, msg.req_id);
        if let Some(reply) = self.replies.get(&key).cloned() {
            self.stats.retransmitted += 1;
            self.send_reply(now, d, &reply, nic, out);
            return;
        }
        *self.stats.requests.entry(req.msg_type()).or_insert(0) += 1;
        let reply = Message::reply(msg.req_id, self.execute(now, req, nic));
        if matches!(
            reply.body,
            Body::Reply(Reply::Error(_) | Reply::WriteDone(Some(_)))
        ) {
            self.stats.failed += 1;
        }
        self.remember(key, reply.clone());
        self.send_reply(now, d, &reply, nic, out);
    }

    fn remember(&mut self, key: ReplyKey, reply: Message) {
        if self.cfg.reply_cache == 0 {
            return;
        }
        while self.reply_order.len() >= self.cfg.reply_cache {
            if let Some(old) = self.reply_order.pop_front() {
                self.replies.remove(&old);
            }
        }
        self.replies.insert(key, reply);
        self.reply_order.push_back(key);
    }

    fn send_reply(
        &mut self,
        now: Nanos,
        d: &UdpMeta<'_>,
        reply: &Message,
        nic: &mut Nic,
        out: &mut Vec<Output>,
    ) {
        let ep = Endpoints::new(nic.mac(), nic.ip(), d.src_mac, d.src_ip);
        if let Ok(frame) = build_datagram(&ep, AGENT_UDP_PORT, d.src_port, reply) {
            nic.transmit(now + self.cfg.service_ns, frame, out);
        }
    }

    fn execute(&mut self, now: Nanos, req: Request, nic: &mut Nic) -> Reply {
        match req {
            Request::Hello(_) => Reply::Error(ErrorCode::BadRequest),
            Request::AllocRegion { region_id, bytes } => {
                match nic
                    .memory_mut()
                    .register(region_id, bytes, Access::READ_WRITE)
                {
                    Ok(r) => Reply::Region {
                        base_va: r.base_va,
                        rkey: r.rkey,
                    },
                    Err(MemError::IdInUse) => Reply::Error(ErrorCode::BadParameter),
                    Err(_) => Reply::Error(ErrorCode::NoMemory),
                }
            }
            Request::CreateQp(c) => match nic.create_qp(&c) {
                Ok((qpn, state)) => Reply::QpCreated { qpn, state },
                Err(e) => Reply::Error(e),
            },
            Request::WriteBatch(entries) => Reply::WriteDone(self.write_batch(&entries, nic).err()),
            Request::ReadMem {
                region,
                offset,
                len,
            } => match Self::resolve(nic, region, offset, usize::from(len)) {
                Ok(va) => {
                    let mut b = vec![0u8; usize::from(len)];
                    nic.memory().read(va, &mut b);
                    Reply::Mem(b)
                }
                Err(e) => Reply::Error(e),
            },
            Request::ResetQp {
                qp_idx,
                init_psn,
                remote_qpn,
            } => match nic.reset_qp(qp_idx, init_psn, remote_qpn) {
                Ok((qpn, state)) => Reply::QpReset { qpn, state },
                Err(e) => Reply::Error(e),
            },
            Request::QpStatus { qp_idx } => match nic.qp_status(qp_idx, now) {
                Some(s) => Reply::QpStatus {
                    state: s.state,
                    epsn: s.epsn,
                    rd_inflight: u8::try_from(s.rd_inflight).unwrap_or(u8::MAX),
                },
                None => Reply::Error(ErrorCode::UnknownQp),
            },
            Request::Heartbeat => Reply::HeartbeatOk,
        }
    }

    fn resolve(nic: &Nic, region: u16, offset: u64, len: usize) -> Result<u64, ErrorCode> {
        if nic.memory().region(region).is_none() {
            return Err(ErrorCode::UnknownRegion);
        }
        nic.memory()
            .region_va(region, offset, len as u64)
            .map_err(|_| ErrorCode::OutOfBounds)
    }

    /// Applies a batch whole or not at all. Each entry starts at a cell's
    /// flags byte (§4.3): a write that sets flags puts the body first and
    /// the flags byte last, a write that clears them (a delete) clears the
    /// flags byte first, so the NIC never serves a valid flag over a torn
    /// body. In this model the batch lands between two NIC packets anyway;
    /// the order is kept for a live NIC that runs concurrently.
    fn write_batch(&mut self, entries: &[WriteEntry], nic: &mut Nic) -> Result<(), ErrorCode> {
        let mut vas = Vec::with_capacity(entries.len());
        for e in entries {
            vas.push(Self::resolve(nic, e.region, e.offset, e.data.len())?);
        }
        let mem = nic.memory_mut();
        for (e, va) in entries.iter().zip(vas) {
            let Some((&flags, body)) = e.data.split_first() else {
                continue;
            };
            if flags != 0 {
                mem.write(va + 1, body);
                std::sync::atomic::fence(std::sync::atomic::Ordering::Release);
                mem.write(va, &[flags]);
            } else {
                mem.write(va, &[flags]);
                std::sync::atomic::fence(std::sync::atomic::Ordering::Release);
                mem.write(va + 1, body);
            }
            self.stats.writes += 1;
        }
        Ok(())
    }
}
