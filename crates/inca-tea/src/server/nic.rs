//! A RoCEv2 RC responder NIC for the subset TEA uses (spec §3.4, §5.3):
//! RDMA WRITE (ONLY, FIRST/MIDDLE/LAST) and RDMA READ (answered with ONLY or
//! FIRST/MIDDLE/LAST), ACK/NAK, on queue pairs connected to the switch.
//!
//! Sans-IO and simulator-free: [`Nic::handle_roce`] takes a frame and the
//! time and pushes the frames to transmit, with the times the modelled NIC
//! sends them. The same code serves the simulator and a live process.
//!
//! Every request runs the rules of spec §5.3 in order: QP state, ICRC, PSN
//! (NAK 0x60 once per gap, duplicates), opcode sequence and lengths (NAK
//! 0x61), the READ limit `max_dest_rd_atomic` (NAK 0x61, and the QP breaks as
//! a real NIC's does), access (NAK 0x62), then execution. A request that
//! fails a check leaves memory untouched.
//!
//! Timing (§8.1, model inputs in [`NicConfig`]): a request waits for the
//! NIC's packet engine (about 34 Mpps, an [`inca_server::ServiceQueue`] whose
//! backlog is bounded by `max_backlog_ns`), then takes RX, DMA (base plus
//! bytes at the DMA rate) and TX time. Requests of one QP are answered in
//! arrival order, and the port never sends out of time order (an
//! [`inca_server::TxPort`]). A READ counts in
//! `rd_inflight` until its last response packet starts on the wire.

use std::collections::{BTreeMap, VecDeque};
use std::net::Ipv4Addr;

use inca_server::{QueueBound, ServiceQueue, TxPort};
use inca_switch::device::{Nanos, Output, PortId};
use inca_wire::ethernet::{ethertype, EthernetRepr, MacAddr, HEADER_LEN as ETH_HEADER_LEN};
use inca_wire::ipv4::{protocol, Ipv4Repr};
use inca_wire::roce::{
    syndrome, AethRepr, Bth, BthRepr, Opcode, RocePacket, RoceRepr, AETH_LEN, BTH_LEN, ICRC_LEN,
};
use inca_wire::udp::{UdpDatagram, HEADER_LEN as UDP_HEADER_LEN};
use inca_wire::{checksum, EthernetFrame, Ipv4Packet, ROCEV2_UDP_PORT};
use serde::{Deserialize, Serialize};

use super::agent_proto::{CreateQp, ErrorCode, QpState};
use super::memory::Memory;

/// QPNs are `QPN_BASE + qp_idx` [our choice: QPNs below 0x100 look like the
/// special QPs 0 and 1 to tools].
pub const QPN_BASE: u32 = 0x100;
/// The PMTUs a RoCE QP may use.
pub const VALID_PMTUS: [u16; 5] = [256, 512, 1024, 2048, 4096];
const PSN_MASK: u32 = 0x00FF_FFFF;
const IPV4_HEADER_LEN: usize = 20;

/// The NIC model's inputs (spec §3.4, §5.3, §8.1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct NicConfig {
    /// Responder receive processing, ns.
    pub rx_ns: u64,
    /// Fixed part of a DMA, ns.
    pub dma_base_ns: u64,
    /// DMA rate, bytes per second (6.5 GB/s).
    pub dma_bytes_per_sec: u64,
    /// Transmit processing, ns.
    pub tx_ns: u64,
    /// Raw packet rate of the NIC's engine (about 34 Mpps, TEA §6.2).
    pub max_pps: u64,
    /// The longest backlog the engine holds before it drops [our choice:
    /// about a 512 KB RX buffer drained at 40 Gbps].
    pub max_backlog_ns: u64,
    /// Outstanding READs per QP before the QP breaks (16).
    pub max_dest_rd_atomic: u8,
    /// The largest PMTU a QP may use (4096).
    pub pmtu: u16,
    /// Drop packets whose ICRC is wrong (default true, §9 item 6).
    pub verify_icrc: bool,
    /// Tolerate a payload on a READ request, TEA's trailer mode (default true).
    pub accept_read_trailer: bool,
    /// ACK every WRITE, not only those with AckReq (default false).
    pub ack_every_write: bool,
    /// The most QPs the NIC holds [our choice: 1024].
    pub max_qps: usize,
    /// The longest RDMA message, bytes [our choice: 1 MiB, the NIC's
    /// max_msg_sz; IBA allows up to 2^31, which would let one READ make
    /// gigabytes of responses].
    pub max_message_bytes: u32,
    /// IPv4 TOS of the frames the NIC sends (DSCP 26, ECN 0 as in §4.1).
    pub tos: u8,
}

impl Default for NicConfig {
    fn default() -> Self {
        NicConfig {
            rx_ns: 350,
            dma_base_ns: 450,
            dma_bytes_per_sec: 6_500_000_000,
            tx_ns: 200,
            max_pps: 34_000_000,
            max_backlog_ns: 105_000,
            max_dest_rd_atomic: 16,
            pmtu: 4096,
            verify_icrc: true,
            accept_read_trailer: true,
            ack_every_write: false,
            max_qps: 1024,
            max_message_bytes: 1 << 20,
            tos: 0x68,
        }
    }
}

impl NicConfig {
    /// DMA time for `bytes`.
    pub fn dma_ns(&self, bytes: u64) -> u64 {
        let rate = u128::from(self.dma_bytes_per_sec.max(1));
        self.dma_base_ns + (u128::from(bytes) * 1_000_000_000 / rate) as u64
    }

    /// Time the packet engine spends on one packet.
    pub fn packet_ns(&self) -> u64 {
        1_000_000_000 / self.max_pps.max(1)
    }
}

/// Why the NIC dropped a frame without answering.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum DropReason {
    /// Not Ethernet/IPv4/UDP, or shorter than a BTH.
    Malformed,
    /// Not addressed to this NIC's IP, or not UDP port 4791.
    NotForUs,
    /// DestQP names no QP.
    UnknownQp,
    /// The QP is not in RTR or RTS (rule 1).
    QpNotReady,
    /// The ICRC is wrong (rule 2).
    BadIcrc,
    /// A response, ACK or CNP: the model has no requester side.
    NotARequest,
    /// PSN ahead of ePSN (rule 3); NAK 0x60 at most once per gap.
    OutOfSequence,
    /// A duplicate that is neither WRITE nor READ.
    DuplicateOther,
    /// The packet engine's backlog is full.
    RxOverflow,
}

impl DropReason {
    /// Every reason, for reports.
    pub const ALL: [DropReason; 9] = [
        DropReason::Malformed,
        DropReason::NotForUs,
        DropReason::UnknownQp,
        DropReason::QpNotReady,
        DropReason::BadIcrc,
        DropReason::NotARequest,
        DropReason::OutOfSequence,
        DropReason::DuplicateOther,
        DropReason::RxOverflow,
    ];

    /// A short name for counters.
    pub fn name(self) -> &'static str {
        match self {
            DropReason::Malformed => "malformed",
            DropReason::NotForUs => "not_for_us",
            DropReason::UnknownQp => "unknown_qp",
            DropReason::QpNotReady => "qp_not_ready",
            DropReason::BadIcrc => "bad_icrc",
            DropReason::NotARequest => "not_a_request",
            DropReason::OutOfSequence => "out_of_sequence",
            DropReason::DuplicateOther => "duplicate_other",
            DropReason::RxOverflow => "rx_overflow",
        }
    }
}

/// The NIC's counters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NicStats {
    /// Frames handed to [`Nic::handle_roce`].
    pub rx_frames: u64,
    /// Requests that passed the ICRC check, by opcode byte.
    pub requests: BTreeMap<u8, u64>,
    /// READ RESPONSE packets sent.
    pub read_response_packets: u64,
    /// Positive ACKs sent.
    pub acks: u64,
    /// NAKs sent, by syndrome.
    pub naks: BTreeMap<u8, u64>,
    /// Drops, by reason.
    pub drops: BTreeMap<DropReason, u64>,
    /// Duplicate WRITEs re-acknowledged.
    pub duplicate_writes: u64,
    /// Duplicate READs executed again.
    pub duplicate_reads: u64,
    /// Times a QP entered ERROR.
    pub qp_errors: u64,
    /// Most READs in flight on one QP at once.
    pub rd_inflight_max: u32,
    /// Bytes placed by WRITEs.
    pub bytes_written: u64,
    /// Bytes returned by READs.
    pub bytes_read: u64,
}

impl NicStats {
    /// All counters with stable names, for reports.
    pub fn counters(&self) -> BTreeMap<String, u64> {
        let mut c = BTreeMap::new();
        c.insert("nic_rx_frames".into(), self.rx_frames);
        for (&op, &n) in &self.requests {
            let name = Opcode::from_u8(op).map_or_else(|| format!("op_{op:#04x}"), op_name);
            c.insert(format!("nic_requests_{name}"), n);
        }
        c.insert(
            "nic_read_response_packets".into(),
            self.read_response_packets,
        );
        c.insert("nic_acks".into(), self.acks);
        for (&s, &n) in &self.naks {
            c.insert(format!("nic_naks_{s:#04x}"), n);
        }
        for r in DropReason::ALL {
            c.insert(
                format!("nic_drops_{}", r.name()),
                self.drops.get(&r).copied().unwrap_or(0),
            );
        }
        c.insert("nic_duplicate_writes".into(), self.duplicate_writes);
        c.insert("nic_duplicate_reads".into(), self.duplicate_reads);
        c.insert("nic_qp_errors".into(), self.qp_errors);
        c.insert(
            "nic_rd_inflight_max".into(),
            u64::from(self.rd_inflight_max),
        );
        c.insert("nic_bytes_written".into(), self.bytes_written);
        c.insert("nic_bytes_read".into(), self.bytes_read);
        c
    }
}

fn op_name(op: Opcode) -> String {
    match op {
        Opcode::RdmaWriteFirst => "write_first",
        Opcode::RdmaWriteMiddle => "write_middle",
        Opcode::RdmaWriteLast => "write_last",
        Opcode::RdmaWriteOnly => "write_only",
        Opcode::RdmaReadRequest => "read_request",
        Opcode::RdmaReadResponseFirst => "read_response_first",
        Opcode::RdmaReadResponseMiddle => "read_response_middle",
        Opcode::RdmaReadResponseLast => "read_response_last",
        Opcode::RdmaReadResponseOnly => "read_response_only",
        Opcode::Acknowledge => "acknowledge",
        Opcode::Cnp => "cnp",
    }
    .to_string()
}

/// A multi-packet WRITE in progress.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct WriteCtx {
    va: u64,
    remaining: u64,
}

/// A responder queue pair.
#[derive(Debug, Clone)]
struct Qp {
    qpn: u32,
    state: QpState,
    epsn: u32,
    msn: u32,
    nak_seq_sent: bool,
    /// Times the last response packet of each READ in flight starts on the
    /// wire, oldest first; never longer than `max_rd_atomic`.
    reads: VecDeque<Nanos>,
    remote_qpn: u32,
    remote_mac: MacAddr,
    remote_ip: Ipv4Addr,
    pmtu: u16,
    max_rd_atomic: u8,
    write: Option<WriteCtx>,
    head: Option<ResponseHead>,
}

impl Qp {
    fn rd_inflight(&mut self, now: Nanos) -> usize {
        while self.reads.front().is_some_and(|&t| t <= now) {
            self.reads.pop_front();
        }
        self.reads.len()
    }
}

/// A QP's state as QP_STATUS reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QpSnapshot {
    /// The NIC's QPN.
    pub qpn: u32,
    /// State.
    pub state: QpState,
    /// Expected PSN.
    pub epsn: u32,
    /// Message sequence number.
    pub msn: u32,
    /// READs in flight.
    pub rd_inflight: usize,
    /// The NAK-sent flag.
    pub nak_seq_sent: bool,
}

/// Where the pieces of a RoCE frame lie.
struct Located {
    ip: core::ops::Range<usize>,
    roce: core::ops::Range<usize>,
    src_port: u16,
}

/// What a request asks for, once its headers are parsed.
enum Work {
    Write {
        va: u64,
        data_at: usize,
        len: usize,
        completes: bool,
        next: Option<WriteCtx>,
    },
    Read {
        va: u64,
        len: u32,
    },
}

/// A failed check: the NAK syndrome to send.
struct Nak(u8);

/// The responder NIC of one server.
#[derive(Debug, Clone)]
pub struct Nic {
    cfg: NicConfig,
    mac: MacAddr,
    ip: Ipv4Addr,
    port: TxPort,
    mem: Memory,
    qps: BTreeMap<u16, Qp>,
    stats: NicStats,
    /// The packet engine: every packet of the NIC passes it in turn.
    engine: ServiceQueue,
}

impl Nic {
    /// A NIC with no QPs and empty memory of `dram` bytes; `generation` makes
    /// R_Keys differ across restarts (see [`Memory::new`]).
    pub fn new(
        cfg: NicConfig,
        mac: MacAddr,
        ip: Ipv4Addr,
        port: PortId,
        dram: u64,
        generation: u32,
    ) -> Nic {
        let engine = ServiceQueue::new(QueueBound::Backlog(cfg.max_backlog_ns));
        Nic {
            cfg,
            mac,
            ip,
            port: TxPort::new(port),
            mem: Memory::new(dram, generation),
            qps: BTreeMap::new(),
            stats: NicStats::default(),
            engine,
        }
    }

    /// Its configuration.
    pub fn config(&self) -> &NicConfig {
        &self.cfg
    }

    /// Its MAC.
    pub fn mac(&self) -> MacAddr {
        self.mac
    }

    /// Its IP.
    pub fn ip(&self) -> Ipv4Addr {
        self.ip
    }

    /// Its counters.
    pub fn stats(&self) -> &NicStats {
        &self.stats
    }

    /// The registered memory.
    pub fn memory(&self) -> &Memory {
        &self.mem
    }

    /// The registered memory, for the agent's local writes.
    pub fn memory_mut(&mut self) -> &mut Memory {
        &mut self.mem
    }

    /// Creates (or re-creates) the QP `c.qp_idx` and moves it through INIT and
    /// RTR to RTS, as the agent's ibv_modify_qp calls would.
    pub fn create_qp(&mut self, c: &CreateQp) -> Result<(u32, QpState), ErrorCode> {
        if !VALID_PMTUS.contains(&c.pmtu)
            || c.pmtu > self.cfg.pmtu
            || c.max_rd_atomic == 0
            || c.max_rd_atomic > self.cfg.max_dest_rd_atomic
            || c.remote_qpn > PSN_MASK
            || c.init_psn > PSN_MASK
        {
            return Err(ErrorCode::BadParameter);
        }
        if !self.qps.contains_key(&c.qp_idx) && self.qps.len() >= self.cfg.max_qps {
            return Err(ErrorCode::BadParameter);
        }
        let qpn = QPN_BASE + u32::from(c.qp_idx);
        self.qps.insert(
            c.qp_idx,
            Qp {
                qpn,
                state: QpState::Rts,
                epsn: c.init_psn,
                msn: 0,
                nak_seq_sent: false,
                reads: VecDeque::new(),
                remote_qpn: c.remote_qpn,
                remote_mac: c.remote_mac,
                remote_ip: c.remote_ip,
                pmtu: c.pmtu,
                max_rd_atomic: c.max_rd_atomic,
                write: None,
                head: None,
            },
        );
        Ok((qpn, QpState::Rts))
    }

    /// Resets QP `qp_idx` and brings it back to RTS with a new first PSN and
    /// the switch's new pseudo QPN; READs in flight are forgotten.
    pub fn reset_qp(
        &mut self,
        qp_idx: u16,
        init_psn: u32,
        remote_qpn: u32,
    ) -> Result<(u32, QpState), ErrorCode> {
        if init_psn > PSN_MASK || remote_qpn > PSN_MASK {
            return Err(ErrorCode::BadParameter);
        }
        let qp = self.qps.get_mut(&qp_idx).ok_or(ErrorCode::UnknownQp)?;
        qp.state = QpState::Rts;
        qp.epsn = init_psn;
        qp.msn = 0;
        qp.nak_seq_sent = false;
        qp.reads.clear();
        qp.remote_qpn = remote_qpn;
        qp.write = None;
        qp.head = None;
        Ok((qp.qpn, qp.state))
    }

    /// QP `qp_idx` as of `now`.
    pub fn qp_status(&mut self, qp_idx: u16, now: Nanos) -> Option<QpSnapshot> {
        let qp = self.qps.get_mut(&qp_idx)?;
        let rd_inflight = qp.rd_inflight(now);
        Some(QpSnapshot {
            qpn: qp.qpn,
            state: qp.state,
            epsn: qp.epsn,
            msn: qp.msn,
            rd_inflight,
            nak_seq_sent: qp.nak_seq_sent,
        })
    }

    /// Sends `frame` on the NIC's port no earlier than `at` and no earlier
    /// than the previous frame (the port sends in time order).
    pub fn transmit(&mut self, at: Nanos, frame: Vec<u8>, out: &mut Vec<Output>) -> Nanos {
        self.port.send(at, frame, out)
    }

    /// The QP's response headers for `src_port`, from its cache.
    fn head(&mut self, qp_idx: u16, src_port: u16) -> ResponseHead {
        let (mac, ip, tos) = (self.mac, self.ip, self.cfg.tos);
        let qp = self.qps.get_mut(&qp_idx).expect("caller checked");
        match qp.head {
            Some(h) if h.src_port == src_port => h,
            _ => {
                let h = ResponseHead::new(qp, mac, ip, tos, src_port);
                qp.head = Some(h);
                h
            }
        }
    }

    fn drop(&mut self, r: DropReason) {
        *self.stats.drops.entry(r).or_insert(0) += 1;
    }

    /// True when `frame` is IPv4/UDP to port 4791 (the device's dispatch test).
    pub fn is_roce(frame: &[u8]) -> bool {
        locate(frame).is_some()
    }

    /// Handles one frame that arrived at time `now`, pushing the responses.
    pub fn handle_roce(&mut self, now: Nanos, frame: &[u8], out: &mut Vec<Output>) {
        self.stats.rx_frames += 1;
        let Some(loc) = locate(frame) else {
            self.drop(DropReason::Malformed);
            return;
        };
        let dst_ip = Ipv4Packet::new_unchecked(&frame[loc.ip.clone()]).dst_addr();
        if dst_ip != self.ip {
            self.drop(DropReason::NotForUs);
            return;
        }
        // The packet engine serialises all packets of the NIC.
        let Ok(engine) = self.engine.admit(now, self.cfg.packet_ns()) else {
            self.drop(DropReason::RxOverflow);
            return;
        };
        let start = engine.start;

        let roce = &frame[loc.roce.clone()];
        let Ok(bth) = Bth::new_checked(roce) else {
            self.drop(DropReason::Malformed);
            return;
        };
        let qp_idx = bth
            .dest_qp()
            .checked_sub(QPN_BASE)
            .and_then(|i| u16::try_from(i).ok());
        let Some(qp_idx) = qp_idx.filter(|i| self.qps.contains_key(i)) else {
            self.drop(DropReason::UnknownQp);
            return;
        };
        // Rule 1.
        let state = self.qps[&qp_idx].state;
        if state != QpState::Rtr && state != QpState::Rts {
            self.drop(DropReason::QpNotReady);
            return;
        }
        // Rule 2.
        if self.cfg.verify_icrc && !icrc_ok(&frame[loc.ip.clone()], &frame[loc.roce.clone()]) {
            self.drop(DropReason::BadIcrc);
            return;
        }
        let op_raw = bth.opcode_raw();
        if matches!(
            Opcode::from_u8(op_raw),
            Some(
                Opcode::RdmaReadResponseFirst
                    | Opcode::RdmaReadResponseMiddle
                    | Opcode::RdmaReadResponseLast
                    | Opcode::RdmaReadResponseOnly
                    | Opcode::Acknowledge
                    | Opcode::Cnp
            )
        ) {
            self.drop(DropReason::NotARequest);
            return;
        }
        *self.stats.requests.entry(op_raw).or_insert(0) += 1;
        let psn = bth.psn();
        let ack_req = bth.ack_req();
        let t_rx = start + self.cfg.rx_ns;

        // Rule 3.
        let qp = self.qps.get_mut(&qp_idx).expect("checked above");
        let d = psn.wrapping_sub(qp.epsn) & PSN_MASK;
        let duplicate = d >= 1 << 23;
        if d == 0 {
            qp.nak_seq_sent = false;
        } else if !duplicate {
            let send = !qp.nak_seq_sent;
            qp.nak_seq_sent = true;
            let epsn = qp.epsn;
            self.drop(DropReason::OutOfSequence);
            if send {
                self.send_ack(
                    qp_idx,
                    loc.src_port,
                    epsn,
                    syndrome::NAK_PSN_SEQ_ERROR,
                    t_rx,
                    out,
                );
            }
            return;
        } else {
            match Opcode::from_u8(op_raw) {
                Some(
                    Opcode::RdmaWriteFirst
                    | Opcode::RdmaWriteMiddle
                    | Opcode::RdmaWriteLast
                    | Opcode::RdmaWriteOnly,
                ) => {
                    self.stats.duplicate_writes += 1;
                    let p = qp.epsn.wrapping_sub(1) & PSN_MASK;
                    self.send_ack(
                        qp_idx,
                        loc.src_port,
                        p,
                        syndrome::ACK_CREDITS_INVALID,
                        t_rx,
                        out,
                    );
                    return;
                }
                Some(Opcode::RdmaReadRequest) => self.stats.duplicate_reads += 1,
                _ => {
                    self.drop(DropReason::DuplicateOther);
                    return;
                }
            }
        }

        // Rules 4 to 6.
        let work = match self.check(qp_idx, roce, duplicate, now) {
            Ok(w) => w,
            Err(Nak(s)) => {
                self.send_ack(qp_idx, loc.src_port, psn, s, t_rx, out);
                self.break_qp(qp_idx);
                return;
            }
        };

        // Rule 7.
        match work {
            Work::Write {
                va,
                data_at,
                len,
                completes,
                next,
            } => {
                self.mem.write(va, &roce[data_at..data_at + len]);
                self.stats.bytes_written += len as u64;
                let qp = self.qps.get_mut(&qp_idx).expect("checked above");
                qp.write = next;
                qp.epsn = (qp.epsn + 1) & PSN_MASK;
                if completes {
                    qp.msn = (qp.msn + 1) & PSN_MASK;
                }
                if ack_req || self.cfg.ack_every_write {
                    let t = t_rx + self.cfg.dma_ns(len as u64);
                    let s = syndrome::ACK_CREDITS_INVALID;
                    self.send_ack(qp_idx, loc.src_port, psn, s, t, out);
                }
            }
            Work::Read { va, len } => {
                self.execute_read(qp_idx, loc.src_port, psn, va, len, duplicate, t_rx, out)
            }
        }
    }

    /// Rules 4 (opcode sequence, lengths), 5 (READ limit) and 6 (access).
    fn check(
        &mut self,
        qp_idx: u16,
        roce: &[u8],
        duplicate: bool,
        now: Nanos,
    ) -> Result<Work, Nak> {
        let invalid = Nak(syndrome::NAK_INVALID_REQUEST);
        let pkt = RocePacket::new_checked(roce).map_err(|_| Nak(syndrome::NAK_INVALID_REQUEST))?;
        let max_msg = self.cfg.max_message_bytes;
        let accept_trailer = self.cfg.accept_read_trailer;
        let qp = self.qps.get_mut(&qp_idx).expect("caller checked");
        let pmtu = usize::from(qp.pmtu);
        let payload_len = pkt.payload().len();
        let data_at = pkt.payload_offset();
        let reth = pkt
            .reth()
            .map(|r| (r.virtual_addr(), r.rkey(), r.dma_len()));
        // (va, rkey, len, needs write right) to check against a region.
        let (work, access) = match pkt.opcode() {
            Opcode::RdmaWriteOnly => {
                let (va, rkey, len) = reth.ok_or(Nak(syndrome::NAK_INVALID_REQUEST))?;
                if qp.write.is_some() || payload_len != len as usize || payload_len > pmtu {
                    return Err(invalid);
                }
                let w = Work::Write {
                    va,
                    data_at,
                    len: payload_len,
                    completes: true,
                    next: None,
                };
                (w, Some((va, rkey, u64::from(len), true)))
            }
            Opcode::RdmaWriteFirst => {
                let (va, rkey, len) = reth.ok_or(Nak(syndrome::NAK_INVALID_REQUEST))?;
                if qp.write.is_some()
                    || payload_len != pmtu
                    || len as usize <= pmtu
                    || len > max_msg
                {
                    return Err(invalid);
                }
                let next = WriteCtx {
                    // Wrapping: an absurd VA is refused by the access check below.
                    va: va.wrapping_add(pmtu as u64),
                    remaining: u64::from(len) - pmtu as u64,
                };
                let w = Work::Write {
                    va,
                    data_at,
                    len: payload_len,
                    completes: false,
                    next: Some(next),
                };
                (w, Some((va, rkey, u64::from(len), true)))
            }
            Opcode::RdmaWriteMiddle => {
                let ctx = qp.write.ok_or(Nak(syndrome::NAK_INVALID_REQUEST))?;
                if payload_len != pmtu || ctx.remaining <= pmtu as u64 {
                    return Err(invalid);
                }
                let next = WriteCtx {
                    va: ctx.va + pmtu as u64,
                    remaining: ctx.remaining - pmtu as u64,
                };
                let w = Work::Write {
                    va: ctx.va,
                    data_at,
                    len: payload_len,
                    completes: false,
                    next: Some(next),
                };
                (w, None)
            }
            Opcode::RdmaWriteLast => {
                let ctx = qp.write.ok_or(Nak(syndrome::NAK_INVALID_REQUEST))?;
                if payload_len == 0 || payload_len > pmtu || payload_len as u64 != ctx.remaining {
                    return Err(invalid);
                }
                let w = Work::Write {
                    va: ctx.va,
                    data_at,
                    len: payload_len,
                    completes: true,
                    next: None,
                };
                (w, None)
            }
            Opcode::RdmaReadRequest => {
                let (va, rkey, len) = reth.ok_or(Nak(syndrome::NAK_INVALID_REQUEST))?;
                // A duplicate READ may arrive in the middle of a new WRITE
                // sequence; it is not part of that sequence.
                if (!duplicate && qp.write.is_some())
                    || (payload_len > 0 && !accept_trailer)
                    || len > max_msg
                {
                    return Err(invalid);
                }
                // Rule 5.
                if qp.rd_inflight(now) >= usize::from(qp.max_rd_atomic) {
                    return Err(invalid);
                }
                (
                    Work::Read { va, len },
                    Some((va, rkey, u64::from(len), false)),
                )
            }
            // Responses were filtered out before; anything else (SEND,
            // atomics, ...) is not supported by this responder.
            _ => return Err(invalid),
        };
        // Rule 6.
        if let Some((va, rkey, len, write)) = access {
            if len > 0 {
                let ok = self.mem.region_by_rkey(rkey).is_some_and(|r| {
                    r.contains(va, len)
                        && if write {
                            r.access.remote_write
                        } else {
                            r.access.remote_read
                        }
                });
                if !ok {
                    return Err(Nak(syndrome::NAK_REMOTE_ACCESS));
                }
            }
        }
        Ok(work)
    }

    fn break_qp(&mut self, qp_idx: u16) {
        if let Some(qp) = self.qps.get_mut(&qp_idx) {
            if qp.state != QpState::Error {
                self.stats.qp_errors += 1;
            }
            qp.state = QpState::Error;
            qp.write = None;
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn execute_read(
        &mut self,
        qp_idx: u16,
        src_port: u16,
        psn: u32,
        va: u64,
        len: u32,
        duplicate: bool,
        t_rx: Nanos,
        out: &mut Vec<Output>,
    ) {
        let qp = self.qps.get_mut(&qp_idx).expect("caller checked");
        let pmtu = u32::from(qp.pmtu);
        let k = len.div_ceil(pmtu).max(1);
        if !duplicate {
            qp.epsn = (qp.epsn + k) & PSN_MASK;
            qp.msn = (qp.msn + 1) & PSN_MASK;
        }
        let msn = qp.msn;
        let head = self.head(qp_idx, src_port);
        let aeth = AethRepr {
            syndrome: syndrome::ACK_CREDITS_INVALID,
            msn,
        };
        let mut last_at = t_rx;
        for i in 0..k {
            let off = i * pmtu;
            let n = (len - off).min(pmtu);
            let op = match (k, i) {
                (1, _) => Opcode::RdmaReadResponseOnly,
                (_, 0) => Opcode::RdmaReadResponseFirst,
                (_, i) if i == k - 1 => Opcode::RdmaReadResponseLast,
                _ => Opcode::RdmaReadResponseMiddle,
            };
            let with_aeth = op != Opcode::RdmaReadResponseMiddle;
            let mem = &self.mem;
            let frame = head.build(
                op,
                (psn + i) & PSN_MASK,
                with_aeth.then_some(aeth),
                n as usize,
                |b| mem.read(va + u64::from(off), b),
            );
            let at = t_rx + self.cfg.dma_ns(u64::from(off + n)) + self.cfg.tx_ns;
            last_at = self.transmit(at, frame, out);
            self.stats.read_response_packets += 1;
        }
        self.stats.bytes_read += u64::from(len);
        let qp = self.qps.get_mut(&qp_idx).expect("caller checked");
        qp.reads.push_back(last_at);
        let n = qp.reads.len() as u32;
        self.stats.rd_inflight_max = self.stats.rd_inflight_max.max(n);
    }

    /// Sends an ACKNOWLEDGE with `syn` (ACK or NAK) for `psn` at `t` + TX.
    fn send_ack(
        &mut self,
        qp_idx: u16,
        src_port: u16,
        psn: u32,
        syn: u8,
        t: Nanos,
        out: &mut Vec<Output>,
    ) {
        let qp = &self.qps[&qp_idx];
        let aeth = AethRepr {
            syndrome: syn,
            msn: qp.msn,
        };
        let head = self.head(qp_idx, src_port);
        let frame = head.build(Opcode::Acknowledge, psn, Some(aeth), 0, |_| {});
        if syn == syndrome::ACK_CREDITS_INVALID {
            self.stats.acks += 1;
        } else {
            *self.stats.naks.entry(syn).or_insert(0) += 1;
        }
        self.transmit(t + self.cfg.tx_ns, frame, out);
    }
}

/// Finds IPv4 and the UDP payload of a frame to UDP port 4791.
fn locate(frame: &[u8]) -> Option<Located> {
    let eth = EthernetFrame::new_checked(frame).ok()?;
    if eth.ethertype() != ethertype::IPV4 {
        return None;
    }
    let ip_at = eth.header_len();
    let ip = Ipv4Packet::new_checked(&frame[ip_at..]).ok()?;
    if ip.protocol() != protocol::UDP || ip.more_frags() || ip.frag_offset() != 0 {
        return None;
    }
    let ip_end = ip_at + usize::from(ip.total_len());
    let udp_at = ip_at + ip.header_len();
    let udp = UdpDatagram::new_checked(&frame[udp_at..ip_end]).ok()?;
    if udp.dst_port() != ROCEV2_UDP_PORT {
        return None;
    }
    let udp_end = udp_at + usize::from(udp.len());
    Some(Located {
        ip: ip_at..ip_end,
        roce: udp_at + UDP_HEADER_LEN..udp_end,
        src_port: udp.src_port(),
    })
}

/// The addressing of the frames a QP sends: its Ethernet, IPv4 and UDP
/// headers prepared once (lengths and IPv4 checksum left to fill), cached in
/// the QP for the UDP source port last answered.
#[derive(Debug, Clone, Copy)]
struct ResponseHead {
    hdr: [u8; HEAD_LEN],
    /// One's-complement sum of the IPv4 header without length and checksum.
    ip_sum: u32,
    src_port: u16,
    dest_qp: u32,
}

/// Ethernet + IPv4 + UDP.
const HEAD_LEN: usize = ETH_HEADER_LEN + IPV4_HEADER_LEN + UDP_HEADER_LEN;

impl ResponseHead {
    fn new(qp: &Qp, mac: MacAddr, ip: Ipv4Addr, tos: u8, src_port: u16) -> ResponseHead {
        let mut hdr = [0u8; HEAD_LEN];
        let eth = EthernetRepr {
            dst: qp.remote_mac,
            src: mac,
            vlan: None,
            ethertype: ethertype::IPV4,
        };
        let ipr = Ipv4Repr {
            src: ip,
            dst: qp.remote_ip,
            protocol: protocol::UDP,
            payload_len: 0,
            ttl: 64,
            tos,
            ident: 0,
            dont_frag: true,
            more_frags: false,
            frag_offset: 0,
        };
        // Both fit the buffer and hold in-range fields, so neither fails.
        let _ = eth.emit(&mut hdr);
        let _ = ipr.emit(&mut hdr[ETH_HEADER_LEN..]);
        let ip_hdr = &mut hdr[ETH_HEADER_LEN..ETH_HEADER_LEN + IPV4_HEADER_LEN];
        ip_hdr[2..4].fill(0); // total length, set per frame
        ip_hdr[10..12].fill(0); // checksum, set per frame
        let ip_sum = checksum::sum(ip_hdr);
        let udp_at = ETH_HEADER_LEN + IPV4_HEADER_LEN;
        hdr[udp_at..udp_at + 2].copy_from_slice(&src_port.to_be_bytes());
        hdr[udp_at + 2..udp_at + 4].copy_from_slice(&ROCEV2_UDP_PORT.to_be_bytes());
        ResponseHead {
            hdr,
            ip_sum,
            src_port,
            dest_qp: qp.remote_qpn,
        }
    }

    /// One frame: headers, `payload_len` bytes written by `fill`, zero pad,
    /// ICRC. Writes straight into one buffer (this is the NIC's hot path).
    fn build(
        &self,
        op: Opcode,
        psn: u32,
        aeth: Option<AethRepr>,
        payload_len: usize,
        fill: impl FnOnce(&mut [u8]),
    ) -> Vec<u8> {
        let pad = RoceRepr::pad_for(payload_len);
        let ext = if aeth.is_some() { AETH_LEN } else { 0 };
        let roce_len = BTH_LEN + ext + payload_len + usize::from(pad) + ICRC_LEN;
        let udp_len = UDP_HEADER_LEN + roce_len;
        let ip_at = ETH_HEADER_LEN;
        let udp_at = ip_at + IPV4_HEADER_LEN;
        let bth_at = udp_at + UDP_HEADER_LEN;
        let mut f = vec![0u8; bth_at + roce_len];
        f[..HEAD_LEN].copy_from_slice(&self.hdr);
        let total = (IPV4_HEADER_LEN + udp_len) as u16;
        f[ip_at + 2..ip_at + 4].copy_from_slice(&total.to_be_bytes());
        let ck = !checksum::fold(checksum::combine(self.ip_sum, u32::from(total)));
        f[ip_at + 10..ip_at + 12].copy_from_slice(&ck.to_be_bytes());
        f[udp_at + 4..udp_at + 6].copy_from_slice(&(udp_len as u16).to_be_bytes());
        let bth = BthRepr {
            pad_count: pad,
            ..BthRepr::new(op, self.dest_qp & PSN_MASK, psn & PSN_MASK)
        };
        let _ = bth.emit(&mut f[bth_at..]);
        if let Some(a) = aeth {
            let _ = a.emit(&mut f[bth_at + BTH_LEN..]);
        }
        let data_at = bth_at + BTH_LEN + ext;
        fill(&mut f[data_at..data_at + payload_len]);
        let n = f.len();
        if let Ok(c) = inca_wire::compute_icrc(&f[ip_at..]) {
            f[n - ICRC_LEN..].copy_from_slice(&c.to_le_bytes());
        }
        f
    }
}

/// True when the ICRC stored at the end of `roce` (the UDP payload) matches
/// the one computed over `ip` (the IPv4 packet holding it).
fn icrc_ok(ip: &[u8], roce: &[u8]) -> bool {
    match (
        inca_wire::compute_icrc(ip),
        roce.len().checked_sub(ICRC_LEN),
    ) {
        (Ok(c), Some(at)) => roce[at..] == c.to_le_bytes(),
        _ => false,
    }
}
