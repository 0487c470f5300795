//! The EWO replica as a switch program (specs/swish.md §5.3): local reads
//! and writes at line rate, updates carried by the data plane and the
//! packet generator, no control plane in steady state.
//!
//! Packet paths:
//! - **application op** ([`crate::ewo::app`]): one register action per
//!   array (own slot, LWW pair, OR, max; a counter read sums every slot
//!   array once); answered at once out of its port. A write under
//!   `PerWrite` bridges its absolute new values; egress mirrors the answer
//!   to a loopback session truncated to 128 B, and the copy comes back to
//!   ingress, becomes an UPDATE and is multicast to the group (self is not
//!   a member of its own switch's group: each pipe is its own device
//!   [our choice], so pruning is static); egress rewrites each copy's
//!   destination from the peer table keyed by the copy's rid;
//! - **UPDATE / SYNC** from a peer: every value merged into its array,
//!   each array touched once; malformed or foreign bodies counted, dropped;
//! - **generator** packet k of the anti-entropy stream (every T_ae): entry
//!   k of every array → SYNC to `peers[rand16 mod (N−1)]`; of a batch
//!   stream (`Periodic(T)`): entry k's own values → UPDATE to the group.
//!
//! The control plane (`crate::ewo::control`) installs the peer tables,
//! multicast group, mirror session and streams, and applies the
//! controller's membership changes, array copies and serving flag.

use inca_switch::register::Pair;
use inca_switch::{
    AccessError, ArrayDecl, CheckHints, ControlEvent, ControlPlane, DataPlane, Declare,
    DeclareError, Gress, MatchKind, PacketCtx, PacketKind, ParseError, Program, ProgramReport,
    RegisterHandle, TableDecl, TableHandle,
};
use inca_wire::parse_udp_frame;
use inca_wire::swish::ewo::{BodyRepr, MergeKind, MsgType};
use inca_wire::swish::{HeaderRepr, Proto, GROUP_RID, HEADER_LEN, UDP_PORT};

use crate::addr::{udp_frame, ReplicaAddr};
use crate::ewo::app::{self, AppOp, Op, APP_PORT};
use crate::ewo::config::{Broken, EwoConfig, Propagation, StreamRole};
use crate::ewo::limiter::{self, LimiterRegs, LimiterStats};
use crate::ewo::merge;

/// The register arrays of one variable.
#[derive(Debug, Clone, Default)]
pub(crate) struct VarRegs {
    /// LWW: the {value (lo), version (hi)} pairs.
    pub lww: Option<RegisterHandle<Pair>>,
    /// Counters: slot arrays (PN: the P slots, then the Nn slots); G-set
    /// and max: one array.
    pub words: Vec<RegisterHandle<u32>>,
}

/// Values a write bridges to its mirror copy.
#[derive(Debug, Clone, Copy, Default)]
pub struct Bridged {
    var: usize,
    index: u32,
    slot_base: u16,
    nvals: u8,
    vals: [u32; 2],
}

/// What the parser found.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
enum Parsed {
    #[default]
    Other,
    App,
    Repl,
}

/// Per-packet metadata.
#[derive(Debug, Clone, Default)]
pub struct EwoMeta {
    parsed: Parsed,
    /// A write's new values, for its mirror copy.
    bridge: Option<Bridged>,
    /// A multicast UPDATE copy whose destination egress sets.
    retarget: bool,
}

/// What the replica counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EwoStats {
    /// Application operations answered OK.
    pub ops: u64,
    /// Operations refused (not serving, unknown variable or entry).
    pub refused: u64,
    /// Updates multicast (eager or batched).
    pub updates_sent: u64,
    /// SYNCs sent.
    pub syncs_sent: u64,
    /// UPDATE/SYNC bodies merged.
    pub merged: u64,
    /// Malformed or foreign replication frames dropped.
    pub malformed: u64,
    /// Frames that are none of the above, dropped.
    pub other: u64,
    /// Control messages refused.
    pub bad_control: u64,
}

/// The EWO replica program. See the module documentation.
#[derive(Debug, Clone)]
pub struct EwoProgram {
    pub(crate) cfg: EwoConfig,
    pub(crate) vars: Vec<VarRegs>,
    pub(crate) streams: Vec<(usize, StreamRole)>,
    pub(crate) peer_idx: Option<TableHandle<ReplicaAddr>>,
    pub(crate) peer_rid: Option<TableHandle<ReplicaAddr>>,
    pub(crate) npeers: Option<RegisterHandle<u32>>,
    pub(crate) serving: Option<RegisterHandle<u32>>,
    /// Control-plane software state: the peers installed.
    pub(crate) installed: Vec<ReplicaAddr>,
    pub(crate) stats: EwoStats,
    pub(crate) limiter_regs: Option<LimiterRegs>,
    pub(crate) limiter_stats: LimiterStats,
}

/// Peers a replica's tables hold [our choice: N_max − 1].
pub const PEER_TABLE: usize = merge::N_MAX;

impl EwoProgram {
    /// A replica with configuration `cfg` (validated).
    pub fn new(cfg: EwoConfig) -> Result<Self, String> {
        cfg.validate()?;
        Ok(EwoProgram {
            streams: cfg.streams(),
            cfg,
            vars: Vec::new(),
            peer_idx: None,
            peer_rid: None,
            npeers: None,
            serving: None,
            installed: Vec::new(),
            stats: EwoStats::default(),
            limiter_regs: None,
            limiter_stats: LimiterStats::default(),
        })
    }

    /// Its configuration.
    pub fn config(&self) -> &EwoConfig {
        &self.cfg
    }

    /// What it counted.
    pub fn stats(&self) -> EwoStats {
        self.stats
    }

    /// What its rate limiter counted.
    pub fn limiter_stats(&self) -> LimiterStats {
        self.limiter_stats
    }

    /// The register arrays of variable `var_id`, in wire order (LWW: one
    /// pair array; counters: slots, PN: P then Nn; else one word array),
    /// for reading a replica's state back.
    pub fn arrays(&self, var_id: u16) -> Option<VarArrays> {
        let i = self.cfg.vars.iter().position(|v| v.var_id == var_id)?;
        let r = &self.vars.get(i)?;
        Some(VarArrays {
            lww: r.lww,
            words: r.words.clone(),
        })
    }

    fn var_index(&self, var_id: u16) -> Option<usize> {
        self.cfg.vars.iter().position(|v| v.var_id == var_id)
    }

    fn n(&self) -> usize {
        usize::from(self.cfg.slots)
    }
}

/// A variable's arrays (see [`EwoProgram::arrays`]).
#[derive(Debug, Clone)]
pub struct VarArrays {
    /// LWW pairs.
    pub lww: Option<RegisterHandle<Pair>>,
    /// Word arrays.
    pub words: Vec<RegisterHandle<u32>>,
}

/// Replaces a packet's bytes (the deparser emitting new headers).
fn replace<M, D>(pkt: &mut PacketCtx<M, D>, frame: &[u8]) {
    pkt.truncate(0);
    pkt.insert_header(0, frame);
}

impl EwoProgram {
    /// An application operation: the local read-modify-write, answered in
    /// place; a PerWrite write bridges its new values.
    fn app(
        &mut self,
        pkt: &mut PacketCtx<EwoMeta, ()>,
        dp: &mut DataPlane<'_>,
    ) -> Result<(), AccessError> {
        let Ok(u) = parse_udp_frame(pkt.header()) else {
            self.stats.other += 1;
            pkt.drop_packet();
            return Ok(());
        };
        let Some(mut op) = AppOp::parse(u.payload) else {
            self.stats.malformed += 1;
            pkt.drop_packet();
            return Ok(());
        };
        let (src, dst) = (
            ReplicaAddr {
                rid: 0,
                ip: u.dst_ip,
                mac: u.dst_mac,
                port: 0,
            },
            (u.src_mac, u.src_ip, u.src_port),
        );
        let serving = match self.serving {
            Some(h) => dp.register(h, 0, |v| *v)? != 0,
            None => false,
        };
        let var = self.var_index(op.var_id);
        op.status = app::status::REFUSED;
        if !serving {
            op.status = app::status::NOT_SERVING;
        } else if let Some(v) = var.filter(|&v| op.index < self.cfg.vars[v].entries) {
            if let Some(b) = self.local_op(v, &mut op, dp)? {
                if self.cfg.vars[v].propagation == Propagation::PerWrite {
                    pkt.meta.bridge = Some(b);
                }
            }
        }
        if op.status == app::status::OK {
            self.stats.ops += 1;
        } else {
            self.stats.refused += 1;
        }
        let ep = inca_wire::builder::Endpoints::new(src.mac, src.ip, dst.0, dst.1);
        let Ok(frame) =
            inca_wire::builder::build_udp_frame(&ep, APP_PORT, dst.2, &op.to_bytes(), false)
        else {
            pkt.drop_packet();
            return Ok(());
        };
        replace(pkt, &frame);
        let port = pkt.ingress_port();
        pkt.forward(port);
        Ok(())
    }

    /// The operation on variable `v`: sets the result and status; returns
    /// the values to propagate if it wrote.
    fn local_op(
        &mut self,
        v: usize,
        op: &mut AppOp,
        dp: &mut DataPlane<'_>,
    ) -> Result<Option<Bridged>, AccessError> {
        let spec = self.cfg.vars[v];
        let regs = self.vars[v].clone();
        let (i, arg, me) = (u64::from(op.index), op.arg, self.cfg.slot);
        let rid = self.cfg.rid();
        let n = self.n();
        let mut out = Bridged {
            var: v,
            index: op.index,
            slot_base: u16::from(me),
            nvals: 1,
            vals: [0; 2],
        };
        let wrote = match (spec.kind, op.op) {
            (MergeKind::Lww, Op::Write | Op::Read) => {
                let Some(h) = regs.lww else { return Ok(None) };
                let write = op.op == Op::Write;
                let c = dp.register(h, i, |p| {
                    if write {
                        let (value, ver) = merge::lww_write((p.lo, p.hi), arg, rid);
                        *p = Pair { lo: value, hi: ver };
                    }
                    *p
                })?;
                (op.result, op.result2) = (c.lo, c.hi);
                out.nvals = 2;
                out.vals = [c.lo, c.hi];
                out.slot_base = 0;
                write
            }
            (MergeKind::Gset | MergeKind::Max, Op::Write | Op::Read) => {
                let write = op.op == Op::Write;
                let gset = spec.kind == MergeKind::Gset;
                let w = dp.register(regs.words[0], i, |x| {
                    if write {
                        *x = if gset {
                            merge::gset(*x, arg)
                        } else {
                            merge::max(*x, arg)
                        };
                    }
                    *x
                })?;
                op.result = w;
                out.vals[0] = w;
                out.slot_base = 0;
                write
            }
            (MergeKind::Gcnt, Op::Inc | Op::Read)
            | (MergeKind::Pncnt, Op::Inc | Op::Dec | Op::Read) => {
                let pn = spec.kind == MergeKind::Pncnt;
                let (mut p_sum, mut n_sum) = (0u32, 0u32);
                let halves = if pn { 2 } else { 1 };
                for half in 0..halves {
                    for s in 0..n {
                        let own = s == usize::from(me);
                        let add = own
                            && ((half == 0 && op.op == Op::Inc) || (half == 1 && op.op == Op::Dec));
                        let x = dp.register(regs.words[half * n + s], i, |x| {
                            if add {
                                *x = x.wrapping_add(arg);
                            }
                            *x
                        })?;
                        if own {
                            out.vals[half] = x;
                        }
                        if half == 0 {
                            p_sum = p_sum.wrapping_add(x);
                        } else {
                            n_sum = n_sum.wrapping_add(x);
                        }
                    }
                }
                op.result = p_sum.wrapping_sub(n_sum);
                out.nvals = halves as u8;
                op.op != Op::Read
            }
            _ => return Ok(None),
        };
        op.status = app::status::OK;
        Ok(wrote.then_some(out))
    }

    /// Builds an EWO frame from this replica to `dst` (or the group).
    fn frame(&self, dst: &ReplicaAddr, msg: MsgType, body: &BodyRepr) -> Option<Vec<u8>> {
        let h = HeaderRepr {
            proto: Proto::Ewo,
            msg_type: msg as u8,
            flags: 0,
            group_id: self.cfg.group_id,
            src_rid: self.cfg.rid(),
            dst_rid: dst.rid,
        };
        let mut payload = h.to_bytes().to_vec();
        payload.extend_from_slice(&body.to_vec().ok()?);
        udp_frame(&self.cfg.me, dst, &payload).ok()
    }

    fn group_addr(&self) -> ReplicaAddr {
        ReplicaAddr {
            rid: GROUP_RID,
            ..self.cfg.me
        }
    }

    /// A mirror copy back from the loopback: the bridged values as an
    /// UPDATE to the group.
    fn eager_update(&mut self, pkt: &mut PacketCtx<EwoMeta, ()>, b: Bridged) {
        let spec = self.cfg.vars[b.var];
        let body = BodyRepr {
            var_id: spec.var_id,
            kind: spec.kind,
            index: b.index,
            slot_base: b.slot_base,
            values: b.vals[..usize::from(b.nvals)].to_vec(),
        };
        self.multicast_update(pkt, &body);
    }

    fn multicast_update(&mut self, pkt: &mut PacketCtx<EwoMeta, ()>, body: &BodyRepr) {
        match self.frame(&self.group_addr(), MsgType::Update, body) {
            Some(f) => {
                replace(pkt, &f);
                pkt.meta.bridge = None;
                pkt.meta.retarget = true;
                pkt.multicast(self.cfg.mcast_group);
                self.stats.updates_sent += 1;
            }
            None => pkt.drop_packet(),
        }
    }

    /// Generator packet `k` of stream `stream`.
    fn generated(
        &mut self,
        pkt: &mut PacketCtx<EwoMeta, ()>,
        dp: &mut DataPlane<'_>,
        stream: u8,
        k: u16,
    ) -> Result<(), AccessError> {
        pkt.drop_packet();
        let Some(&(v, role)) = self.streams.get(usize::from(stream)) else {
            return Ok(());
        };
        let spec = self.cfg.vars[v];
        if u32::from(k) >= spec.entries {
            return Ok(());
        }
        if role == StreamRole::Estimator {
            return self.estimate(pkt, dp, u32::from(k));
        }
        let regs = self.vars[v].clone();
        let (i, n, me) = (u64::from(k), self.n(), usize::from(self.cfg.slot));
        let all = role == StreamRole::AntiEntropy;
        let (slot_base, values) = match spec.kind {
            MergeKind::Lww => {
                let Some(h) = regs.lww else { return Ok(()) };
                let p = dp.register(h, i, |p| *p)?;
                (0, vec![p.lo, p.hi])
            }
            MergeKind::Gset | MergeKind::Max => (0, vec![dp.register(regs.words[0], i, |x| *x)?]),
            MergeKind::Gcnt | MergeKind::Pncnt => {
                let halves = if spec.kind == MergeKind::Pncnt { 2 } else { 1 };
                let mut vals = Vec::new();
                for half in 0..halves {
                    for s in 0..n {
                        if all || s == me {
                            vals.push(dp.register(regs.words[half * n + s], i, |x| *x)?);
                        }
                    }
                }
                (if all { 0 } else { me as u16 }, vals)
            }
        };
        let body = BodyRepr {
            var_id: spec.var_id,
            kind: spec.kind,
            index: u32::from(k),
            slot_base,
            values,
        };
        if role == StreamRole::Batch {
            self.multicast_update(pkt, &body);
            return Ok(());
        }
        let peers = match self.npeers {
            Some(h) => dp.register(h, 0, |x| *x)?,
            None => 0,
        };
        if peers == 0 {
            return Ok(());
        }
        let pick = (dp.random() & 0xFFFF) % peers;
        let Some(t) = self.peer_idx else {
            return Ok(());
        };
        let Some(dst) = dp.lookup(t, &[pick as u8])? else {
            return Ok(());
        };
        if let Some(f) = self.frame(&dst, MsgType::Sync, &body) {
            replace(pkt, &f);
            pkt.forward(dst.port);
            self.stats.syncs_sent += 1;
        }
        Ok(())
    }

    /// An UPDATE or SYNC from a peer: merge every value, each array once.
    fn receive(
        &mut self,
        pkt: &mut PacketCtx<EwoMeta, ()>,
        dp: &mut DataPlane<'_>,
    ) -> Result<(), AccessError> {
        pkt.drop_packet();
        let body = parse_udp_frame(pkt.header()).ok().and_then(|u| {
            let h = HeaderRepr::parse(u.payload).ok()?;
            if h.proto != Proto::Ewo || MsgType::from_u8(h.msg_type).is_err() {
                return None;
            }
            BodyRepr::parse(&u.payload[HEADER_LEN..]).ok()
        });
        let Some(b) = body else {
            self.stats.malformed += 1;
            return Ok(());
        };
        let Some(v) = self.var_index(b.var_id) else {
            self.stats.malformed += 1;
            return Ok(());
        };
        let spec = self.cfg.vars[v];
        let (n, nv, base) = (self.n(), b.values.len(), usize::from(b.slot_base));
        let fits = b.kind == spec.kind
            && b.index < spec.entries
            && match spec.kind {
                MergeKind::Lww => nv == 2,
                MergeKind::Gset | MergeKind::Max => nv == 1,
                MergeKind::Gcnt => nv >= 1 && base + nv <= n,
                MergeKind::Pncnt => nv >= 2 && nv.is_multiple_of(2) && base + nv / 2 <= n,
            };
        if !fits {
            self.stats.malformed += 1;
            return Ok(());
        }
        let regs = self.vars[v].clone();
        let i = u64::from(b.index);
        let add = self.cfg.broken == Broken::AddMerge;
        let slot_merge = if add { merge::slot_broken } else { merge::slot };
        match spec.kind {
            MergeKind::Lww => {
                if let Some(h) = regs.lww {
                    let theirs = (b.values[0], b.values[1]);
                    dp.register(h, i, |p| {
                        let (lo, hi) = merge::lww((p.lo, p.hi), theirs);
                        *p = Pair { lo, hi };
                    })?;
                }
            }
            MergeKind::Gset => {
                dp.register(regs.words[0], i, |x| *x = merge::gset(*x, b.values[0]))?;
            }
            MergeKind::Max => {
                dp.register(regs.words[0], i, |x| *x = merge::max(*x, b.values[0]))?;
            }
            MergeKind::Gcnt | MergeKind::Pncnt => {
                let halves = if spec.kind == MergeKind::Pncnt { 2 } else { 1 };
                let per = nv / halves;
                for half in 0..halves {
                    for j in 0..per {
                        let val = b.values[half * per + j];
                        dp.register(regs.words[half * n + base + j], i, |x| {
                            *x = slot_merge(*x, val)
                        })?;
                    }
                }
            }
        }
        self.stats.merged += 1;
        Ok(())
    }
}

impl Program for EwoProgram {
    type Meta = EwoMeta;
    type Digest = ();

    fn name(&self) -> &str {
        "swish_ewo"
    }

    fn declare(&mut self, d: &mut Declare) -> Result<(), DeclareError> {
        self.vars.clear();
        let n = self.n();
        // Whether an operation touches a variable depends on the serving
        // flag: the flag's stage comes first.
        let serving = d.register(ArrayDecl::new("ewo_serving", 1))?;
        self.serving = Some(serving);
        let after = [serving.id()];
        for v in &self.cfg.vars {
            let m = v.entries as usize;
            let name = |s: &str| format!("ewo{}_{s}", v.var_id);
            let mut regs = VarRegs::default();
            match v.kind {
                MergeKind::Lww => {
                    regs.lww = Some(d.register(ArrayDecl::new(&name("lww"), m).after(&after))?)
                }
                MergeKind::Gset | MergeKind::Max => regs
                    .words
                    .push(d.register(ArrayDecl::new(&name("word"), m).after(&after))?),
                MergeKind::Gcnt | MergeKind::Pncnt => {
                    let halves: &[&str] = if v.kind == MergeKind::Pncnt {
                        &["p", "n"]
                    } else {
                        &["slot"]
                    };
                    for h in halves {
                        for s in 0..n {
                            regs.words.push(d.register(
                                ArrayDecl::new(&name(&format!("{h}{s}")), m).after(&after),
                            )?);
                        }
                    }
                }
            }
            self.vars.push(regs);
        }
        if let Some(l) = self.cfg.limiter {
            let slots = self
                .var_index(l.var_id)
                .map(|v| self.vars[v].words.clone())
                .unwrap_or_default();
            self.limiter_regs = Some(limiter::declare(d, &l, &slots)?);
        }
        let bits = 16 + 32 + 48 + 16;
        self.npeers = Some(d.register(ArrayDecl::new("ewo_npeers", 1))?);
        let npeers = self.npeers.map(|h| h.id());
        self.peer_idx = Some(
            d.table(
                TableDecl::new("ewo_peer_by_index", MatchKind::Exact, 1, bits, PEER_TABLE)
                    .after(&npeers.into_iter().collect::<Vec<_>>()),
            )?,
        );
        self.peer_rid = Some(d.table(
            TableDecl::new("ewo_peer_by_rid", MatchKind::Exact, 2, bits, PEER_TABLE).egress(),
        )?);
        Ok(())
    }

    fn parse(&self, _g: Gress, header: &[u8], meta: &mut EwoMeta) -> Result<(), ParseError> {
        meta.parsed = match parse_udp_frame(header) {
            Ok(u) if u.dst_port == APP_PORT => Parsed::App,
            Ok(u) if u.dst_port == UDP_PORT => Parsed::Repl,
            _ => Parsed::Other,
        };
        Ok(())
    }

    fn ingress(
        &mut self,
        pkt: &mut PacketCtx<EwoMeta, ()>,
        dp: &mut DataPlane<'_>,
    ) -> Result<(), AccessError> {
        match pkt.kind() {
            PacketKind::Generated {
                stream, packet_id, ..
            } => return self.generated(pkt, dp, stream, packet_id),
            PacketKind::Recirculated { .. } => {
                if let Some(b) = pkt.meta.bridge {
                    self.eager_update(pkt, b);
                } else {
                    self.stats.other += 1;
                    pkt.drop_packet();
                }
                return Ok(());
            }
            _ => {}
        }
        match pkt.meta.parsed {
            Parsed::App => self.app(pkt, dp),
            Parsed::Repl => self.receive(pkt, dp),
            Parsed::Other => {
                if let Some(user) = self.user_of(pkt.header()) {
                    return self.limit(pkt, dp, user);
                }
                self.stats.other += 1;
                pkt.drop_packet();
                Ok(())
            }
        }
    }

    fn egress(
        &mut self,
        pkt: &mut PacketCtx<EwoMeta, ()>,
        dp: &mut DataPlane<'_>,
    ) -> Result<(), AccessError> {
        if pkt.meta.retarget {
            let rid = pkt.egress_meta().rid;
            let Some(t) = self.peer_rid else {
                return Ok(());
            };
            let Some(dst) = dp.lookup(t, &rid.to_be_bytes())? else {
                pkt.drop_packet();
                return Ok(());
            };
            let f = parse_udp_frame(pkt.header())
                .ok()
                .and_then(|u| {
                    let mut payload = u.payload.to_vec();
                    payload
                        .get_mut(6..8)?
                        .copy_from_slice(&dst.rid.to_be_bytes());
                    Some(payload)
                })
                .and_then(|p| udp_frame(&self.cfg.me, &dst, &p).ok());
            match f {
                Some(f) => replace(pkt, &f),
                None => pkt.drop_packet(),
            }
            return Ok(());
        }
        if pkt.meta.bridge.is_some() && !matches!(pkt.kind(), PacketKind::Mirrored { .. }) {
            pkt.mirror(self.cfg.mirror_session);
        }
        Ok(())
    }

    fn control(&mut self, event: ControlEvent<()>, cp: &mut ControlPlane<'_>) {
        crate::ewo::control::handle(self, event, cp);
    }

    /// Frames for the load-time check: an operation of each kind on the
    /// first variable, and an UPDATE and a SYNC for it from a peer.
    fn check_hints(&self) -> CheckHints {
        let mut samples = Vec::new();
        let Some(v) = self.cfg.vars.first() else {
            return CheckHints::default();
        };
        let peer = ReplicaAddr::conventional(self.cfg.rid().wrapping_add(1), 1);
        let ep =
            inca_wire::builder::Endpoints::new(peer.mac, peer.ip, self.cfg.me.mac, self.cfg.me.ip);
        for (k, op) in [Op::Write, Op::Inc, Op::Dec, Op::Read]
            .into_iter()
            .enumerate()
        {
            let a = AppOp::request(op, v.var_id, 0, 1, k as u32);
            if let Ok(f) =
                inca_wire::builder::build_udp_frame(&ep, 40000, APP_PORT, &a.to_bytes(), false)
            {
                samples.push((0, f));
            }
        }
        let n = match v.kind {
            MergeKind::Lww => 2,
            MergeKind::Gset | MergeKind::Max => 1,
            MergeKind::Gcnt => self.n(),
            MergeKind::Pncnt => 2 * self.n(),
        };
        for msg in [MsgType::Update, MsgType::Sync] {
            let h = HeaderRepr {
                proto: Proto::Ewo,
                msg_type: msg as u8,
                flags: 0,
                group_id: self.cfg.group_id,
                src_rid: peer.rid,
                dst_rid: self.cfg.rid(),
            };
            let body = BodyRepr {
                var_id: v.var_id,
                kind: v.kind,
                index: 0,
                slot_base: 0,
                values: vec![7; n],
            };
            let mut payload = h.to_bytes().to_vec();
            payload.extend_from_slice(&body.to_vec().unwrap_or_default());
            if let Ok(f) = udp_frame(&peer, &self.cfg.me, &payload) {
                samples.push((1, f));
            }
        }
        CheckHints {
            samples,
            known: Vec::new(),
        }
    }

    fn report(&self) -> ProgramReport {
        let s = self.stats;
        ProgramReport {
            counters: [
                ("ewo_ops", s.ops),
                ("ewo_refused", s.refused),
                ("ewo_updates_sent", s.updates_sent),
                ("ewo_syncs_sent", s.syncs_sent),
                ("ewo_merged", s.merged),
                ("ewo_malformed", s.malformed),
                ("ewo_other", s.other),
                ("ewo_bad_control", s.bad_control),
                ("rl_passed", self.limiter_stats.passed),
                ("rl_dropped", self.limiter_stats.dropped),
                ("rl_estimates", self.limiter_stats.estimates),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
            series: Vec::new(),
        }
    }
}
