//! The SDW replica as an `inca_switch::Program` (specs/swish.md §3.3,
//! §5.5): the registers of §3.3 in the global stage order of §5.5, the
//! multicast groups and generator streams it installs at start, the
//! parser, the egress (per-copy addressing and `retx_mask` pruning) and
//! the control plane (START, the controller's RPCs as control messages or
//! as §4.5 frames on a control session). The ingress handlers are in
//! [`super::handlers`].
//!
//! Register encodings [our choice]: an epoch tag stores `window + 1` (8 bits
//! for TQ/TP, 32 for the pair registers), so the all-zero state registers
//! start in means "window −1" (the spec's 0xFF) without a start-up write of
//! every entry. `send_state.lo` is `phase << 24 | data_win (24 bits)`,
//! `send_state.hi` the time of the last send in µs.

use inca_apps::params::{ParamError, Params};
use inca_switch::control::ControlPlane;
use inca_switch::device::{SessionEvent, SessionId};
use inca_switch::objects::{AccessError, Objects};
use inca_switch::pktgen::{StreamConfig, Trigger};
use inca_switch::register::Pair;
use inca_switch::{
    ArrayDecl, CheckHints, ControlEvent, DataPlane, Declare, DeclareError, Gress, Nanos, PacketCtx,
    PacketOutDest, ParseError, Program, ProgramReport, RegisterHandle,
};
use inca_wire::swish::ctl::Rpc;
use inca_wire::swish::sdw::MsgType;
use inca_wire::swish::{HeaderRepr, Proto};

use super::app::{AppRequest, APP_PORT};
use super::config::{ConfigError, SdwConfig};
use super::frames::{self, internal_frame, trigger_match, SWISH_AT, T_START, T_TIMER};

/// Control-message kind that makes the control plane inject START (body:
/// the window as a big-endian u32, or empty for 0).
pub const MSG_START: u32 = 0x5344_0001;
/// Control-message kind (controller → switch CPU): PAUSED := body[0]
/// (§5.6 step 1). The §4.5 RPC ops are modelled as control messages;
/// each costs the profile's register-operation time [our choice].
pub const MSG_PAUSE: u32 = 0x5344_0002;
/// Control-message kind: READ_REG — body `tag:u32, array:u8, first:u32,
/// count:u32`; answered by [`MSG_VALUES`].
pub const MSG_READ: u32 = 0x5344_0003;
/// Control-message kind: WRITE_REG — body `tag:u32, array:u8,
/// first:u32`, then one u64 per entry (pairs `hi << 32 | lo`); answered by
/// [`MSG_VALUES`] (no values) once the writes are done.
pub const MSG_WRITE: u32 = 0x5344_0004;
/// Control-message kind: the failed members — body: their rids (u16
/// each); the multicast groups and masks are rebuilt without them.
pub const MSG_MEMBERS: u32 = 0x5344_0005;
/// Control-message kind (switch CPU → controller): `tag:u32`, then the
/// values read (u64 each).
pub const MSG_VALUES: u32 = 0x5344_0006;
/// Register codes of READ/WRITE: `winreg`.
pub const ARR_WINREG: u8 = 0;
/// Register code: `status`.
pub const ARR_STATUS: u8 = 1;
/// Register code: `ready_cnt` (2 entries).
pub const ARR_READY: u8 = 2;
/// Register code: `ready_from`, the first window whose queries are ready
/// (a joining replica's, §5.6; 0 for a member from the start).
pub const ARR_READY_FROM: u8 = 3;
/// Register code: `P_r` is `ARR_P + r`.
pub const ARR_P: u8 = 10;
/// Register code: `Q_r` is `ARR_Q + r`.
pub const ARR_Q: u8 = 20;
/// Register code: `TQ_r` is `ARR_TQ + r`.
pub const ARR_TQ: u8 = 30;
/// Register code: `TP_r` is `ARR_TP + r`.
pub const ARR_TP: u8 = 40;
/// SET_CFG item (§4.5, on a session): PAUSED := value[0] (as
/// [`MSG_PAUSE`]).
pub const CFG_PAUSED: u8 = 1;
/// SET_CFG item: the failed members, u16 rids (as [`MSG_MEMBERS`]).
pub const CFG_FAILED: u8 = 2;
/// Control reads awaiting their values, at most.
pub const PENDING_MAX: usize = 1_024;

/// Multicast group: every member, self through the loopback port.
pub const G_DATA: u16 = 1;
/// Multicast group: every member but self.
pub const G_READY: u16 = 2;
/// Multicast groups `G_ACK_ADV + j`: member j's port and the loopback
/// (the ACK to j, and ADVANCE to self, from one completing packet).
pub const G_ACK_ADV: u16 = 16;
/// The multicast rid of the loopback copy in a `G_ACK_ADV` group.
pub const RID_ADVANCE: u16 = 0x4000;
/// Advances kept in the log (more are counted, not kept).
pub const ADV_LOG_MAX: usize = 1 << 20;

/// Send phases (`send_state.lo >> 24`).
pub mod phase {
    /// Not started (or paused).
    pub const IDLE: u32 = 0;
    /// Waiting for READY from every peer.
    pub const READY: u32 = 1;
    /// Sending the window's DATA.
    pub const DATA: u32 = 2;
    /// Retransmitting the window's DATA.
    pub const RETX: u32 = 3;
    /// A paced window before its READY (`min_window`, [our choice, scale]).
    pub const HOLD: u32 = 4;
}

/// What a packet is, from the parser.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Parsed {
    /// Not ours.
    #[default]
    Other,
    /// An application request.
    App(AppRequest),
    /// Traffic the DDoS detector watches (IPv4 source and destination).
    Traffic {
        /// Source address.
        src: u32,
        /// Destination address.
        dst: u32,
    },
    /// An SDW packet (type byte raw: internal types included).
    Sdw {
        /// Type byte.
        ty: u8,
        /// Flags.
        flags: u8,
        /// Sender.
        src: u16,
        /// Window.
        win: u32,
        /// Column.
        col: u32,
        /// Columns of the window.
        ncols: u32,
        /// Cells.
        vals: [u32; 3],
    },
}

/// How egress treats a copy.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Out {
    /// As it is.
    #[default]
    Plain,
    /// A DATA multicast copy: prune by the bridged mask, address to its
    /// member.
    Data,
    /// A READY multicast copy: address to its member.
    Ready,
    /// A `G_ACK_ADV` copy: the loopback one becomes ADVANCE.
    AckAdvance,
}

/// Per-packet metadata.
#[derive(Debug, Clone, Copy, Default)]
pub struct SdwMeta {
    /// The parse.
    pub parsed: Parsed,
    /// Bridged: the `retx_mask` a DATA copy is pruned by.
    pub mask: u32,
    /// Bridged: what egress does.
    pub out: Out,
}

/// Counters of §5.5 and the facts a run is judged by.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SdwCounters {
    /// DATA for W+1 dropped.
    pub early: u64,
    /// DATA for another window dropped.
    pub stale: u64,
    /// DATA the filter refused as already seen.
    pub dup: u64,
    /// DATA the counter filter refused as out of order.
    pub gap: u64,
    /// DATA packets sent as retransmissions.
    pub retx: u64,
    /// READY messages sent (first and repeated).
    pub ready_sent: u64,
    /// Frames that were not well-formed SDW or app packets.
    pub malformed: u64,
    /// Updates rejected (count = B).
    pub rejected: u64,
    /// Advances not kept in the log.
    pub log_overflow: u64,
    /// DDoS detector: traffic packets sampled into the sketch.
    pub ddos_sampled: u64,
    /// DDoS detector: traffic packets forwarded.
    pub ddos_passed: u64,
    /// DDoS detector: traffic packets dropped as from a blocked source.
    pub ddos_blocked: u64,
    /// Controller RPCs received on a session.
    pub rpc_in: u64,
    /// Session messages that were not an RPC this program serves
    /// (malformed, an unknown op, MCAST_SET or a table op), or answers
    /// that could not be encoded.
    pub rpc_refused: u64,
}

#[derive(Debug, Clone)]
pub(crate) struct Handles {
    pub paused: RegisterHandle<u32>,
    pub winreg: RegisterHandle<Pair>,
    pub ready_from: RegisterHandle<u32>,
    pub flags_r: RegisterHandle<u32>,
    pub ready_cnt: RegisterHandle<Pair>,
    pub next_col: Option<RegisterHandle<Pair>>,
    pub colmask: Option<RegisterHandle<Pair>>,
    pub recv_cols: Option<RegisterHandle<Pair>>,
    pub flags_a: Option<RegisterHandle<Pair>>,
    pub tq: Vec<RegisterHandle<u16>>,
    pub q: Vec<RegisterHandle<Pair>>,
    pub tp: Vec<RegisterHandle<u8>>,
    pub p: Vec<RegisterHandle<Pair>>,
    pub status: RegisterHandle<Pair>,
    pub send_state: RegisterHandle<Pair>,
    pub retx_mask: RegisterHandle<u32>,
}

/// One SDW replica (one pipe).
#[derive(Debug, Clone)]
pub struct SdwProgram {
    pub(crate) cfg: SdwConfig,
    pub(crate) me: usize,
    pub(crate) h: Option<Handles>,
    /// Counters.
    pub counters: SdwCounters,
    /// Every advance: (new window, time). The run's record of D6.
    pub advances: Vec<(u32, Nanos)>,
    pub(crate) limiter_regs: Option<super::limiter::Regs>,
    pub(crate) limiter_stats: crate::limiter::LimiterStats,
    /// Control reads in flight: (request, controller's tag, the session
    /// the RPC came on; None: a control message).
    pending: Vec<(u64, u32, Option<SessionId>)>,
}

impl SdwProgram {
    /// A replica with configuration `cfg` (validated).
    pub fn new(cfg: SdwConfig) -> Result<Self, ConfigError> {
        cfg.validate()?;
        let me = cfg.self_index().unwrap_or(0);
        Ok(SdwProgram {
            cfg,
            me,
            h: None,
            counters: SdwCounters::default(),
            advances: Vec::new(),
            pending: Vec::new(),
            limiter_regs: None,
            limiter_stats: Default::default(),
        })
    }

    /// The parameters [`SdwProgram::from_params`] takes.
    pub const PARAMS: &'static [&'static str] = SdwConfig::PARAMS;

    /// A replica from named parameters ([`SdwConfig::from_params`]).
    pub fn from_params(p: &Params) -> Result<Self, ParamError> {
        let cfg = SdwConfig::from_params(p)?;
        SdwProgram::new(cfg).map_err(|e| ParamError::Value {
            name: "swish_sdw".into(),
            reason: e.to_string(),
        })
    }

    /// What its rate limiter counted.
    pub fn limiter_stats(&self) -> crate::limiter::LimiterStats {
        self.limiter_stats
    }

    /// The configuration.
    pub fn config(&self) -> &SdwConfig {
        &self.cfg
    }

    /// The window register as the data plane holds it (for the rig's D1
    /// samples): None before the program is loaded.
    pub fn peek_window(&self, objects: &Objects) -> Option<u32> {
        let h = self.h.as_ref()?;
        objects.register_peek(h.winreg, 0).ok().map(|p| p.lo)
    }

    /// R_r of cell (`row`, `col`) in window `win` (P half (win+1) mod 2).
    pub fn peek_query(&self, objects: &Objects, row: usize, col: u32, win: u32) -> Option<u32> {
        let h = self.h.as_ref()?;
        let e = objects.register_peek(*h.p.get(row)?, u64::from(col)).ok()?;
        Some(half(e, win.wrapping_add(1)))
    }

    /// The sync registers as the data plane holds them (`winreg`,
    /// `status`, `send_state`, `ready_cnt[0..2]`, `flagsR`), for
    /// diagnosing a stuck run.
    pub fn describe_sync(&self, objects: &Objects) -> String {
        let Some(h) = self.h.as_ref() else {
            return "not loaded".into();
        };
        let p = |r: RegisterHandle<Pair>, i: u64| objects.register_peek(r, i).ok();
        let fr: Vec<_> = (0..self.n() as u64)
            .map(|i| objects.register_peek(h.flags_r, i).ok())
            .collect();
        format!(
            "paused {:?} winreg {:?} status {:?} send_state {:?} ready_cnt {:?} {:?} flagsR {fr:?} failed {:?}",
            objects.register_peek(h.paused, 0).ok(),
            p(h.winreg, 0),
            p(h.status, 0),
            p(h.send_state, 0),
            p(h.ready_cnt, 0),
            p(h.ready_cnt, 1),
            self.cfg.failed
        )
    }

    pub(crate) fn handles(&self) -> Result<&Handles, AccessError> {
        self.h.as_ref().ok_or(AccessError::WrongHandle)
    }

    pub(crate) fn n(&self) -> usize {
        self.cfg.members.len()
    }

    /// Status counts instead of bitmaps (N > 32).
    pub(crate) fn count_status(&self) -> bool {
        self.n() > 32
    }

    pub(crate) fn log_advance(&mut self, win: u32, now: Nanos) {
        if self.advances.len() < ADV_LOG_MAX {
            self.advances.push((win, now));
        } else {
            self.counters.log_overflow += 1;
        }
    }

    /// The multicast groups of the live members.
    fn install_groups(&self, cp: &mut ControlPlane<'_>) {
        let live: Vec<usize> = (0..self.n()).filter(|&k| self.cfg.is_live(k)).collect();
        let peers: Vec<(u16, u16)> = live
            .iter()
            .filter(|&&k| k != self.me)
            .map(|&k| (self.cfg.members[k].port, k as u16 + 1))
            .collect();
        let mut all = peers.clone();
        all.push((self.cfg.loop_port, self.me as u16 + 1));
        cp.multicast_group(G_DATA, all);
        cp.multicast_group(G_READY, peers);
        for k in (0..self.n()).filter(|&k| k != self.me) {
            let members = if self.cfg.is_live(k) {
                vec![
                    (self.cfg.members[k].port, 1),
                    (self.cfg.loop_port, RID_ADVANCE),
                ]
            } else {
                Vec::new()
            };
            cp.multicast_group(G_ACK_ADV + k as u16, members);
        }
    }

    /// A controller RPC (§4.5) on control session `session`: the same
    /// handling as its control-message form (the bodies of READ_REG and
    /// WRITE_REG are the control messages' bodies); answers go back on the
    /// session as VALUES. Anything else is counted and ignored.
    fn session_rpc(&mut self, session: SessionId, body: &[u8], cp: &mut ControlPlane<'_>) {
        let Ok(rpc) = Rpc::parse(body) else {
            self.counters.rpc_refused += 1;
            return;
        };
        self.counters.rpc_in += 1;
        let tag = rpc.tag();
        match rpc {
            Rpc::ReadReg { .. } | Rpc::WriteReg { .. } => {
                let kind = if rpc.op() == inca_wire::swish::ctl::op::READ_REG {
                    MSG_READ
                } else {
                    MSG_WRITE
                };
                // The frame's body after its header is the control body.
                let body = &body[inca_wire::swish::ctl::HEADER_LEN..];
                let before = self.pending.len();
                self.controller_message(kind, body, Some(session), cp);
                if self.pending.len() == before {
                    // An array this replica does not have (the
                    // controller's rows differ), or too many in flight.
                    self.counters.rpc_refused += 1;
                }
            }
            Rpc::SetCfg { name, value, .. } => match name {
                CFG_PAUSED => self.controller_message(MSG_PAUSE, &value, None, cp),
                CFG_FAILED => self.controller_message(MSG_MEMBERS, &value, None, cp),
                _ => self.counters.rpc_refused += 1,
            },
            Rpc::Inject { frame, .. } => {
                // Through the CPU port into ingress, as START is injected
                // (the loopback port marks it internal).
                cp.packet_out(frame, PacketOutDest::Ingress(self.cfg.loop_port));
            }
            Rpc::Heartbeat { .. } => self.answer(Some(session), tag, Vec::new(), cp),
            Rpc::McastSet { .. }
            | Rpc::TableAdd { .. }
            | Rpc::TableDel { .. }
            | Rpc::Values { .. } => self.counters.rpc_refused += 1,
        }
    }

    /// The answer to the RPC `tag`: a control message, or VALUES on the
    /// session it came on.
    fn answer(
        &mut self,
        session: Option<SessionId>,
        tag: u32,
        values: Vec<u64>,
        cp: &mut ControlPlane<'_>,
    ) {
        match session {
            Some(s) => match (Rpc::Values { tag, values }).to_vec() {
                Ok(b) => cp.session_send(s, b),
                Err(_) => self.counters.rpc_refused += 1,
            },
            None => {
                let mut body = tag.to_be_bytes().to_vec();
                for v in values {
                    body.extend_from_slice(&v.to_be_bytes());
                }
                cp.send(inca_switch::device::ControlMessage {
                    kind: MSG_VALUES,
                    body,
                });
            }
        }
    }

    /// A controller RPC (§4.5, §5.6) as a control message; malformed
    /// ones are ignored (the controller times out). `session`: where the
    /// answer goes (None: a control message back).
    fn controller_message(
        &mut self,
        kind: u32,
        body: &[u8],
        session: Option<SessionId>,
        cp: &mut ControlPlane<'_>,
    ) {
        let me = self.cfg.members[self.me];
        let Some(h) = self.h.clone() else {
            return;
        };
        let u32_at = |at: usize| {
            body.get(at..at + 4)
                .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
        };
        match kind {
            MSG_START => {
                let win = u32_at(0).unwrap_or(0);
                let f = internal_frame(&me, self.cfg.group_id, T_START, win, self.cfg.coll_id);
                cp.packet_out(f, PacketOutDest::Ingress(self.cfg.loop_port));
            }
            MSG_PAUSE => {
                cp.register_write(h.paused, 0, u32::from(body.first().copied().unwrap_or(1)));
            }
            MSG_MEMBERS => {
                self.cfg.failed = body
                    .chunks_exact(2)
                    .map(|c| u16::from_be_bytes([c[0], c[1]]))
                    .collect();
                self.install_groups(cp);
            }
            MSG_READ | MSG_WRITE => {
                let (Some(tag), Some(&arr), Some(first)) = (u32_at(0), body.get(4), u32_at(5))
                else {
                    return;
                };
                if self.pending.len() >= PENDING_MAX {
                    return;
                }
                let first = u64::from(first);
                let rows = usize::from(self.cfg.rows);
                let row = |base: u8| {
                    let r = usize::from(arr.wrapping_sub(base));
                    (arr >= base && r < rows).then_some(r)
                };
                let req = if kind == MSG_READ {
                    let count = u64::from(u32_at(9).unwrap_or(0));
                    match arr {
                        ARR_WINREG => cp.register_read(h.winreg, first, count),
                        ARR_STATUS => cp.register_read(h.status, first, count),
                        ARR_READY => cp.register_read(h.ready_cnt, first, count),
                        ARR_READY_FROM => cp.register_read(h.ready_from, first, count),
                        _ => match (row(ARR_P), row(ARR_Q), row(ARR_TQ), row(ARR_TP)) {
                            (Some(r), _, _, _) => cp.register_read(h.p[r], first, count),
                            (_, Some(r), _, _) => cp.register_read(h.q[r], first, count),
                            (_, _, Some(r), _) => cp.register_read(h.tq[r], first, count),
                            (_, _, _, Some(r)) => cp.register_read(h.tp[r], first, count),
                            _ => return,
                        },
                    }
                } else {
                    let vals: Vec<u64> = body[9..]
                        .chunks_exact(8)
                        .map(|c| {
                            u64::from_be_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]])
                        })
                        .collect();
                    // One batched write per array: spec §8.1 charges a
                    // write of n entries 50 µs + 2.58 µs × n, as a read.
                    match arr {
                        ARR_WINREG => cp.register_write_range(h.winreg, first, vals),
                        ARR_STATUS => cp.register_write_range(h.status, first, vals),
                        ARR_READY => cp.register_write_range(h.ready_cnt, first, vals),
                        ARR_READY_FROM => cp.register_write_range(h.ready_from, first, vals),
                        // A joining replica's tags (§5.6 join).
                        _ => match (row(ARR_P), row(ARR_TQ), row(ARR_TP)) {
                            (Some(r), _, _) => cp.register_write_range(h.p[r], first, vals),
                            (_, Some(r), _) => cp.register_write_range(h.tq[r], first, vals),
                            (_, _, Some(r)) => cp.register_write_range(h.tp[r], first, vals),
                            _ => return,
                        },
                    };
                    // The channel is serial: this read completes after the
                    // writes, so its answer says they are done.
                    cp.register_read(h.paused, 0, 1)
                };
                self.pending.push((req, tag, session));
            }
            _ => {}
        }
    }

    fn data_streams(&self) -> std::ops::Range<u8> {
        let first = self.cfg.first_stream + 1;
        first..self.cfg.first_stream + self.cfg.streams()
    }
}

/// The half of a pair register that window parity `w` selects.
pub(crate) fn half(e: Pair, w: u32) -> u32 {
    if w.is_multiple_of(2) {
        e.lo
    } else {
        e.hi
    }
}

/// Sets the half of `e` that parity `w` selects.
pub(crate) fn set_half(e: &mut Pair, w: u32, v: u32) {
    if w.is_multiple_of(2) {
        e.lo = v
    } else {
        e.hi = v
    }
}

/// The 32-bit epoch stored for window `w` (0 is window −1).
pub(crate) fn ep(w: u32) -> u32 {
    w.wrapping_add(1)
}

/// The 8-bit tag stored for window `w` (0 is window −1, the spec's 0xFF).
pub(crate) fn ep8(w: u32) -> u8 {
    w.wrapping_add(1) as u8
}

impl Program for SdwProgram {
    type Meta = SdwMeta;
    type Digest = ();

    fn name(&self) -> &str {
        "swish_sdw"
    }

    fn declare(&mut self, d: &mut Declare) -> Result<(), DeclareError> {
        let n = self.n();
        let c = self.cfg.cols as usize;
        let reg = |name: &str, size: usize| ArrayDecl::new(&format!("sdw_{name}"), size);
        // PAUSED (a config register the controller writes, §3.3) decides
        // whether a sync packet touches anything, so it comes first.
        let paused = d.register::<u32>(reg("paused", 1))?;
        let winreg = d.register::<Pair>(reg("winreg", 1).after(&[paused.id()]))?;
        // A query reads it right after the window (§5.6 join: not_ready
        // until the replica's first window completes).
        let ready_from = d.register::<u32>(reg("ready_from", 1).after(&[winreg.id()]))?;
        let flags_r = d.register::<u32>(reg("flagsR", n).after(&[winreg.id()]))?;
        let ready_cnt = d.register::<Pair>(reg("ready_cnt", 2).after(&[flags_r.id()]))?;
        // No packet touches both the ready counters and the duplicate
        // filter, so the filter needs only the window before it.
        let (next_col, colmask, recv_cols, last_dedup) = match self.cfg.dedup {
            super::config::Dedup::CounterPerSwitch => {
                let nc = d.register::<Pair>(reg("next_col", n).after(&[winreg.id()]))?;
                (Some(nc), None, None, nc.id())
            }
            super::config::Dedup::BitmapPerColumn => {
                let cm = d.register::<Pair>(reg("colmask", c).after(&[winreg.id()]))?;
                let rc = d.register::<Pair>(reg("recv_cols", n).after(&[cm.id()]))?;
                (None, Some(cm), Some(rc), rc.id())
            }
        };
        let flags_a = if self.count_status() {
            // READY's implicit ACK reaches flagsA after flagsR and ready_cnt.
            Some(d.register::<Pair>(reg("flagsA", n).after(&[last_dedup, ready_cnt.id()]))?)
        } else {
            None
        };
        let before_q = flags_a.map(|f| f.id()).unwrap_or(last_dedup);
        let rows = usize::from(self.cfg.rows);
        let (mut tq, mut q) = (Vec::new(), Vec::new());
        for r in 0..rows {
            let t =
                d.register::<u16>(reg(&format!("TQ{r}"), c).after(&[before_q, ready_from.id()]))?;
            q.push(d.register::<Pair>(reg(&format!("Q{r}"), c).after(&[t.id()]))?);
            tq.push(t);
        }
        // Per row TQ → Q → TP → P: no packet reaches one row's Q and
        // another row's TP/P in a dependent way, so rows need not wait for
        // each other and three rows of 64K spread over the stages.
        let (mut tp, mut p) = (Vec::new(), Vec::new());
        for (r, qr) in q.iter().enumerate() {
            let t = d.register::<u8>(reg(&format!("TP{r}"), c).after(&[qr.id()]))?;
            p.push(d.register::<Pair>(reg(&format!("P{r}"), c).after(&[t.id()]))?);
            tp.push(t);
        }
        let mut before_status: Vec<_> = p.iter().map(|h| h.id()).collect();
        before_status.push(ready_cnt.id());
        let status = d.register::<Pair>(reg("status", 1).after(&before_status))?;
        let send_state = d.register::<Pair>(reg("send_state", 1).after(&[status.id()]))?;
        let retx_mask = d.register::<u32>(reg("retx_mask", 1).after(&[send_state.id()]))?;
        self.h = Some(Handles {
            paused,
            winreg,
            ready_from,
            flags_r,
            ready_cnt,
            next_col,
            colmask,
            recv_cols,
            flags_a,
            tq,
            q,
            tp,
            p,
            status,
            send_state,
            retx_mask,
        });
        self.limiter_declare(d)
    }

    fn parse(&self, _gress: Gress, header: &[u8], meta: &mut SdwMeta) -> Result<(), ParseError> {
        meta.parsed = Parsed::Other;
        let Ok(u) = inca_wire::parse_udp_frame(header) else {
            return Ok(());
        };
        if u.dst_port == APP_PORT {
            if let Some(r) = AppRequest::parse(u.payload) {
                meta.parsed = Parsed::App(r);
            }
            return Ok(());
        }
        if u.dst_port == crate::detector::TRAFFIC_PORT
            && matches!(self.cfg.app, super::config::SdwApp::Ddos { .. })
        {
            meta.parsed = Parsed::Traffic {
                src: u32::from(u.src_ip),
                dst: u32::from(u.dst_ip),
            };
            return Ok(());
        }
        if u.dst_port != inca_wire::swish::UDP_PORT {
            return Ok(());
        }
        let at = u.payload.as_ptr() as usize - header.as_ptr() as usize;
        let Ok(h) = HeaderRepr::parse(u.payload) else {
            return Err(ParseError("bad SwiSh header"));
        };
        if at != SWISH_AT || h.proto != Proto::Sdw || h.group_id != self.cfg.group_id {
            return Err(ParseError("not this SDW collection"));
        }
        // Internal types carry a DATA-sized body; wire types their own.
        let ty = MsgType::from_u8(h.msg_type).unwrap_or(MsgType::Data);
        let b = inca_wire::swish::sdw::BodyRepr::parse(&u.payload[8..], ty)
            .map_err(|_| ParseError("bad SDW body"))?;
        meta.parsed = Parsed::Sdw {
            ty: h.msg_type,
            flags: h.flags,
            src: h.src_rid,
            win: b.win,
            col: b.col,
            ncols: b.ncols,
            vals: b.vals,
        };
        Ok(())
    }

    fn ingress(
        &mut self,
        pkt: &mut PacketCtx<SdwMeta, ()>,
        dp: &mut DataPlane<'_>,
    ) -> Result<(), AccessError> {
        self.dispatch(pkt, dp)
    }

    fn egress(
        &mut self,
        pkt: &mut PacketCtx<SdwMeta, ()>,
        _dp: &mut DataPlane<'_>,
    ) -> Result<(), AccessError> {
        let rid = pkt.egress_meta().rid;
        let meta = pkt.meta;
        let me = self.cfg.members[self.me];
        match meta.out {
            Out::Plain => {}
            Out::Data | Out::Ready => {
                let k = usize::from(rid.wrapping_sub(1));
                let Some(to) = self.cfg.members.get(k).copied() else {
                    pkt.drop_packet();
                    return Ok(());
                };
                // Pruning: a member that already acknowledged gets no
                // retransmission (bitmap status only; none above 32).
                if meta.out == Out::Data
                    && k < 32
                    && !self.count_status()
                    && meta.mask & (1 << k) == 0
                {
                    pkt.drop_packet();
                    return Ok(());
                }
                frames::address(pkt.header_mut(), &me, Some(&to));
            }
            Out::AckAdvance => {
                if rid == RID_ADVANCE {
                    let h = pkt.header_mut();
                    let win = h
                        .get(frames::BODY_AT..frames::BODY_AT + 4)
                        .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
                        .unwrap_or(0);
                    frames::address(h, &me, None);
                    frames::set_kind(h, frames::T_ADVANCE, 0, win);
                }
            }
        }
        Ok(())
    }

    fn control(&mut self, event: ControlEvent<()>, cp: &mut ControlPlane<'_>) {
        let me = self.cfg.members[self.me];
        match event {
            ControlEvent::Start => {
                self.pending.clear();
                // Loaded paused: no sync packet touches anything before
                // START clears PAUSED in its own pass. A peer's DATA(0)
                // taken before this replica's START was ACKed and then
                // forgotten when START reset `status`, and without the
                // ready phase the pair stalled (E7 START skew). The write
                // precedes every answer on the serial control channel, so
                // it lands before the controller's START.
                if let Some(h) = &self.h {
                    cp.register_write(h.paused, 0, 1);
                }
                self.install_groups(cp);
                let g = self.cfg.group_id;
                let timer = internal_frame(&me, g, T_TIMER, 0, self.cfg.coll_id);
                cp.packet_generator(
                    self.cfg.first_stream,
                    Some(StreamConfig {
                        trigger: Trigger::Timer {
                            period: self.cfg.t_chk,
                        },
                        template: timer,
                        batch_size: 1,
                    }),
                );
                let mut data = internal_frame(&me, g, MsgType::Data as u8, 0, self.cfg.coll_id);
                frames::address(&mut data, &me, None);
                let per = self.cfg.cols_per_stream();
                for (i, s) in self.data_streams().enumerate() {
                    let first = per * i as u32;
                    let size = per.min(self.cfg.cols.saturating_sub(first)).max(1);
                    let (value, mask) = trigger_match(g);
                    cp.packet_generator(
                        s,
                        Some(StreamConfig {
                            trigger: Trigger::Recirculation { value, mask },
                            template: data.clone(),
                            batch_size: size.min(super::config::BATCH_MAX) as u16,
                        }),
                    );
                }
                self.limiter_start(cp);
            }
            ControlEvent::Message(m) => self.controller_message(m.kind, &m.body, None, cp),
            ControlEvent::Session(SessionEvent::Message { session, body }) => {
                self.session_rpc(session, &body, cp)
            }
            ControlEvent::Session(SessionEvent::Reset { session, .. }) => {
                // Its answers can never arrive: the controller re-asks.
                self.pending.retain(|p| p.2 != Some(session));
            }
            ControlEvent::RegisterValues { request, values } => {
                if let Some(k) = self.pending.iter().position(|p| p.0 == request) {
                    let (_, tag, session) = self.pending.swap_remove(k);
                    self.answer(session, tag, values, cp);
                }
            }
            _ => {}
        }
    }

    fn report(&self) -> ProgramReport {
        let c = &self.counters;
        ProgramReport {
            counters: vec![
                ("sdw_early".into(), c.early),
                ("sdw_stale".into(), c.stale),
                ("sdw_dup".into(), c.dup),
                ("sdw_gap".into(), c.gap),
                ("sdw_retx".into(), c.retx),
                ("sdw_ready_sent".into(), c.ready_sent),
                ("sdw_malformed".into(), c.malformed),
                ("sdw_rejected".into(), c.rejected),
                ("sdw_advances".into(), self.advances.len() as u64),
                ("ddos_sampled".into(), c.ddos_sampled),
                ("ddos_passed".into(), c.ddos_passed),
                ("ddos_blocked".into(), c.ddos_blocked),
                (
                    "sdw_window".into(),
                    self.advances.last().map_or(0, |a| u64::from(a.0)),
                ),
                ("sdw_rpc_in".into(), c.rpc_in),
                ("sdw_rpc_refused".into(), c.rpc_refused),
            ]
            .into_iter()
            .chain(self.limiter_counters())
            .collect(),
            series: Vec::new(),
        }
    }

    fn check_hints(&self) -> CheckHints {
        let me = self.cfg.members[self.me];
        let peer = self.cfg.members[(self.me + 1) % self.n()];
        let g = self.cfg.group_id;
        let mut samples = Vec::new();
        for ty in [1u8, 2, 3] {
            for win in [0u32, 1] {
                let mut f = internal_frame(&peer, g, ty, win, self.cfg.coll_id);
                frames::address(&mut f, &peer, Some(&me));
                frames::set_data(
                    &mut f,
                    self.cfg.cols - 1,
                    self.cfg.cols,
                    self.cfg.rows,
                    [1, 2, 3],
                );
                samples.push((peer.port, f));
            }
        }
        let host = crate::addr::ReplicaAddr::conventional(0xFFF0, 0);
        for op in [1u8, 2, 3] {
            let r = AppRequest {
                op,
                req_id: 1,
                key: 7,
                value: 1,
            };
            samples.push((peer.port, r.frame(&host, &me)));
        }
        if let super::config::SdwApp::Ddos { .. } = self.cfg.app {
            for k in 0..4 {
                let f = crate::detector::traffic_frame(
                    crate::detector::source_ip(k),
                    crate::detector::dest_ip(k * 7),
                );
                samples.push((0, f));
            }
        }
        for ty in [frames::T_ADVANCE, frames::T_START] {
            samples.push((
                self.cfg.loop_port + 1,
                internal_frame(&me, g, ty, 0, self.cfg.coll_id),
            ));
        }
        samples.extend(self.limiter_samples());
        CheckHints {
            samples,
            known: Vec::new(),
        }
    }
}
