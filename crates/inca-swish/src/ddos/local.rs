//! A baseline switch of the DDoS detector (specs/swish.md §7, "Baselines"):
//! the same sketch, local and unreplicated, and a controller that blocks.
//!
//! Per traffic packet, in stage order `block → row0 → row1 → row2 →
//! reported → ring_head → ring`:
//! - a source in the exact-match `block` table (written by the controller)
//!   is dropped;
//! - a sampled packet ors its bit into each row; the rows' new popcounts
//!   give the local estimate (the minimum over rows);
//! - at a local estimate ≥ 500 (popcount ≥ 20 in every row) the source is
//!   *suspicious*: if its bit in the 64K-bit `reported` array was clear
//!   it is set and the source reported — **pull**: appended `{src, est}`
//!   to the 65,536-entry ring the controller reads; **push**: a mirror copy
//!   becomes a digest (§4.5) to the controller;
//! - everything not blocked leaves on `out_port`.
//!
//! The controller's RPCs arrive on the management session
//! ([`super::rpc`]): ring reads and block-entry adds, each costed by the
//! switch's control-plane timing (the tofino profile).

use std::net::Ipv4Addr;

use inca_apps::params::{ParamError, Params};
use inca_switch::control::ControlPlane;
use inca_switch::device::{SessionEvent, SessionId};
use inca_switch::register::Pair;
use inca_switch::tm::MirrorSession;
use inca_switch::{
    AccessError, ArrayDecl, CheckHints, ControlEvent, DataPlane, Declare, DeclareError, Gress,
    MatchKind, MatchSpec, PacketCtx, PacketKind, ParseError, PortId, Program, ProgramReport,
    RegisterHandle, TableDecl, TableHandle,
};
use inca_wire::builder::{build_udp_frame, Endpoints};
use inca_wire::swish::ddos::{DigestRepr, DIGEST_PORT};

use super::rpc::{Reply, Request};
use crate::detector;

/// Entries of the pull ring (spec §7).
pub const RING: u64 = 65_536;
/// Bits of the already-reported array (spec §7: 64K).
pub const REPORTED_BITS: u32 = 65_536;
/// Block-table entries [our choice: one per source the controller may
/// block in a run].
pub const BLOCK_ENTRIES: usize = 65_536;
/// The mirror session of push digests [our choice].
pub const DIGEST_SESSION: u16 = 1;
/// Controller RPCs awaiting their values, at most (more are refused).
pub const PENDING_MAX: usize = 1_024;

/// How suspicious sources reach the controller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Report {
    /// Appended to the ring, which the controller polls.
    Pull,
    /// A digest per source, pushed to the controller.
    Push,
}

/// A baseline switch's configuration.
#[derive(Debug, Clone)]
pub struct LocalConfig {
    /// Pull or push.
    pub report: Report,
    /// Columns per row.
    pub cols: u32,
    /// This switch's id in digests.
    pub rid: u16,
    /// Where passing traffic leaves.
    pub out_port: PortId,
    /// The port toward the controller (push digests).
    pub ctrl_port: PortId,
    /// The controller's address (push digests).
    pub ctrl_ip: Ipv4Addr,
    /// This switch's address (push digests' source).
    pub self_ip: Ipv4Addr,
}

/// Counters.
#[derive(Debug, Clone, Default)]
pub struct LocalCounters {
    /// Traffic packets sampled.
    pub sampled: u64,
    /// Traffic packets forwarded.
    pub passed: u64,
    /// Traffic packets dropped by the block table.
    pub blocked: u64,
    /// Sources reported (ring entries or digests).
    pub reported: u64,
    /// Suspicious packets whose reported bit was already set.
    pub already_reported: u64,
    /// Frames that were neither traffic nor ours.
    pub malformed: u64,
    /// Controller RPCs refused (malformed, or too many pending).
    pub rpc_refused: u64,
}

#[derive(Debug, Clone, Copy)]
struct Handles {
    block: TableHandle<()>,
    rows: [RegisterHandle<u32>; 3],
    reported: RegisterHandle<u32>,
    ring_head: RegisterHandle<u32>,
    ring: RegisterHandle<Pair>,
}

/// Per-packet metadata.
#[derive(Debug, Clone, Copy, Default)]
pub struct LocalMeta {
    /// (src, dst) of a traffic packet.
    traffic: Option<(u32, u32)>,
    /// Bridged to a digest copy: the estimate.
    est: u32,
}

/// The baseline switch program.
#[derive(Debug, Clone)]
pub struct DdosLocal {
    cfg: LocalConfig,
    h: Option<Handles>,
    /// Counters.
    pub counters: LocalCounters,
    /// RPCs in flight: (control request id, session, tag).
    pending: Vec<(u64, SessionId, u32)>,
}

/// 16-bit index of a source in the reported array [our choice of hash].
fn reported_index(src: u32) -> u32 {
    detector::column(0, src ^ 0xA5A5_5A5A, REPORTED_BITS)
}

impl DdosLocal {
    /// A baseline switch.
    pub fn new(cfg: LocalConfig) -> Result<Self, String> {
        if cfg.cols == 0 {
            return Err("ddos local: cols must be at least 1".into());
        }
        Ok(DdosLocal {
            cfg,
            h: None,
            counters: LocalCounters::default(),
            pending: Vec::new(),
        })
    }

    /// The parameters [`DdosLocal::from_params`] takes.
    pub const PARAMS: &'static [&'static str] = &["report", "cols", "rid"];

    /// A baseline switch from named parameters (`inca check
    /// swish_ddos_local`): `report` (`pull` or `push`), `cols` (32,768),
    /// `rid` (1); traffic leaves on port 10, digests on port 11.
    pub fn from_params(p: &Params) -> Result<Self, ParamError> {
        p.check_known("swish_ddos_local", Self::PARAMS)?;
        let report = match p.text("report").unwrap_or("pull") {
            "pull" => Report::Pull,
            "push" => Report::Push,
            _ => {
                return Err(ParamError::Value {
                    name: "report".into(),
                    reason: "pull or push".into(),
                })
            }
        };
        let rid = p.number("rid", 1, 1, 0xFFFE)? as u16;
        let cfg = LocalConfig {
            report,
            cols: p.count("cols", u64::from(detector::COLS), 1 << 24)? as u32,
            rid,
            out_port: 10,
            ctrl_port: 11,
            ctrl_ip: Ipv4Addr::new(10, 47, 255, 254),
            self_ip: crate::addr::ReplicaAddr::conventional(rid, 0).ip,
        };
        DdosLocal::new(cfg).map_err(|reason| ParamError::Value {
            name: "swish_ddos_local".into(),
            reason,
        })
    }

    fn handles(&self) -> Result<Handles, AccessError> {
        self.h.ok_or(AccessError::WrongHandle)
    }

    fn digest_frame(&self, est: u32, src: u32) -> Vec<u8> {
        let d = DigestRepr {
            src_ip: src,
            local_est: est,
            rid: self.cfg.rid,
        };
        let ep = Endpoints::new(
            [0x02, 0x44, 0, 0, 0, self.cfg.rid as u8],
            self.cfg.self_ip,
            [0x02, 0x44, 0, 0, 0, 0xFE],
            self.cfg.ctrl_ip,
        );
        build_udp_frame(&ep, DIGEST_PORT, DIGEST_PORT, &d.to_bytes(), false).unwrap_or_default()
    }

    fn on_rpc(&mut self, session: SessionId, body: &[u8], cp: &mut ControlPlane<'_>) {
        let Some(h) = self.h else {
            return;
        };
        let Some(req) = Request::decode(body) else {
            self.counters.rpc_refused += 1;
            return;
        };
        if self.pending.len() >= PENDING_MAX {
            self.counters.rpc_refused += 1;
            return;
        }
        let (tag, id) = match req {
            Request::ReadHead { tag } => (tag, cp.register_read(h.ring_head, 0, 1)),
            Request::ReadRing { tag, first, count } => {
                let count = u64::from(count).min(RING - u64::from(first).min(RING));
                (tag, cp.register_read(h.ring, u64::from(first), count))
            }
            Request::Block { tag, src } => {
                cp.table_add(h.block, MatchSpec::Exact(src.to_be_bytes().into()), ());
                // The channel is serial: this read completes after the
                // write, so its answer says the entry is in.
                (tag, cp.register_read(h.ring_head, 0, 1))
            }
        };
        self.pending.push((id, session, tag));
    }
}

impl Program for DdosLocal {
    type Meta = LocalMeta;
    type Digest = ();

    fn name(&self) -> &str {
        "swish_ddos_local"
    }

    fn declare(&mut self, d: &mut Declare) -> Result<(), DeclareError> {
        let c = self.cfg.cols as usize;
        let block = d.table::<()>(TableDecl::new(
            "ddos_block",
            MatchKind::Exact,
            4,
            0,
            BLOCK_ENTRIES,
        ))?;
        let r0 = d.register::<u32>(ArrayDecl::new("ddos_row0", c).after(&[block.id()]))?;
        let r1 = d.register::<u32>(ArrayDecl::new("ddos_row1", c).after(&[block.id()]))?;
        let r2 = d.register::<u32>(ArrayDecl::new("ddos_row2", c).after(&[block.id()]))?;
        let reported = d.register::<u32>(
            ArrayDecl::new("ddos_reported", (REPORTED_BITS / 32) as usize).after(&[
                r0.id(),
                r1.id(),
                r2.id(),
            ]),
        )?;
        let ring_head =
            d.register::<u32>(ArrayDecl::new("ddos_ring_head", 1).after(&[reported.id()]))?;
        let ring = d.register::<Pair>(
            ArrayDecl::new("ddos_ring", RING as usize).after(&[ring_head.id()]),
        )?;
        self.h = Some(Handles {
            block,
            rows: [r0, r1, r2],
            reported,
            ring_head,
            ring,
        });
        Ok(())
    }

    fn parse(&self, _g: Gress, header: &[u8], meta: &mut LocalMeta) -> Result<(), ParseError> {
        meta.traffic = detector::parse_traffic(header);
        Ok(())
    }

    fn ingress(
        &mut self,
        pkt: &mut PacketCtx<LocalMeta, ()>,
        dp: &mut DataPlane<'_>,
    ) -> Result<(), AccessError> {
        let h = self.handles()?;
        let Some((src, dst)) = pkt.meta.traffic else {
            self.counters.malformed += 1;
            pkt.drop_packet();
            return Ok(());
        };
        if dp.lookup(h.block, &src.to_be_bytes())?.is_some() {
            self.counters.blocked += 1;
            pkt.drop_packet();
            return Ok(());
        }
        if detector::sampled(src, dst) {
            self.counters.sampled += 1;
            let cols = self.cfg.cols;
            let mut pc = u32::MAX;
            for (row, r) in h.rows.iter().enumerate() {
                let c = u64::from(detector::column(row, src, cols));
                let b = detector::bit(row, dst);
                let v = dp.register(*r, c, |x| {
                    *x |= b;
                    *x
                })?;
                pc = pc.min(detector::popcount(v));
            }
            if pc >= detector::suspicious_popcount() {
                let i = reported_index(src);
                let fresh = dp.register(h.reported, u64::from(i / 32), |x| {
                    let m = 1u32 << (i % 32);
                    let f = *x & m == 0;
                    *x |= m;
                    f
                })?;
                if fresh {
                    self.counters.reported += 1;
                    let est = detector::estimate(pc);
                    match self.cfg.report {
                        Report::Pull => {
                            let at = dp.register(h.ring_head, 0, |x| {
                                let at = *x;
                                *x = x.wrapping_add(1);
                                at
                            })?;
                            dp.register(h.ring, u64::from(at) % RING, |e| {
                                *e = Pair { lo: src, hi: est }
                            })?;
                        }
                        Report::Push => {
                            pkt.meta.est = est;
                            pkt.mirror(DIGEST_SESSION);
                        }
                    }
                } else {
                    self.counters.already_reported += 1;
                }
            }
        }
        self.counters.passed += 1;
        pkt.forward(self.cfg.out_port);
        Ok(())
    }

    fn egress(
        &mut self,
        pkt: &mut PacketCtx<LocalMeta, ()>,
        _dp: &mut DataPlane<'_>,
    ) -> Result<(), AccessError> {
        if let PacketKind::Mirrored { .. } = pkt.kind() {
            let src = pkt.meta.traffic.map_or(0, |t| t.0);
            let f = self.digest_frame(pkt.meta.est, src);
            if f.is_empty() || f.len() > pkt.len() {
                pkt.drop_packet();
                return Ok(());
            }
            pkt.truncate(f.len());
            let hd = pkt.header_mut();
            if hd.len() == f.len() {
                hd.copy_from_slice(&f);
            } else {
                pkt.drop_packet();
            }
        }
        Ok(())
    }

    fn control(&mut self, event: ControlEvent<()>, cp: &mut ControlPlane<'_>) {
        match event {
            ControlEvent::Start => {
                self.pending.clear();
                if self.cfg.report == Report::Push {
                    cp.mirror_session(
                        DIGEST_SESSION,
                        MirrorSession {
                            port: self.cfg.ctrl_port,
                            truncate: None,
                        },
                    );
                }
            }
            ControlEvent::Session(SessionEvent::Message { session, body }) => {
                self.on_rpc(session, &body, cp)
            }
            ControlEvent::RegisterValues { request, values } => {
                if let Some(k) = self.pending.iter().position(|p| p.0 == request) {
                    let (_, session, tag) = self.pending.swap_remove(k);
                    cp.session_send(session, Reply { tag, values }.encode());
                }
            }
            _ => {}
        }
    }

    fn report(&self) -> ProgramReport {
        let c = &self.counters;
        ProgramReport {
            counters: vec![
                ("ddos_sampled".into(), c.sampled),
                ("ddos_passed".into(), c.passed),
                ("ddos_blocked".into(), c.blocked),
                ("ddos_reported".into(), c.reported),
                ("ddos_already_reported".into(), c.already_reported),
                ("ddos_malformed".into(), c.malformed),
                ("ddos_rpc_refused".into(), c.rpc_refused),
            ],
            series: Vec::new(),
        }
    }

    fn check_hints(&self) -> CheckHints {
        let samples = (0..4)
            .map(|k| {
                (
                    0,
                    detector::traffic_frame(detector::source_ip(k), detector::dest_ip(k * 3)),
                )
            })
            .collect();
        CheckHints {
            samples,
            known: Vec::new(),
        }
    }
}
