//! [`BoundedSwitch`]: a bounded-inconsistency RedPlane switch (spec §5.9) —
//! an app's snapshotted rows ([`LazyArray`]) composed with snapshot
//! replication, per-partition leases and restore, and the ε monitor, as one
//! `inca_switch::Program`.
//!
//! Packets and what each touches (one register action per array per pass,
//! §5.10):
//! - **Data** (IPv4 of a partition this switch serves): partition table →
//!   `part_lease[p]` → per row: hash → `active` → `last_upd` → `pair`
//!   (+1). No valid lease: the packet becomes a LEASE_NEW request carrying
//!   itself (§5.2 step 2). A withdrawn partition's packets are dropped.
//! - **Snapshot** (generator packet k of a burst, p = k / n, j = k % n):
//!   per row `active` (packet 0 flips) → `last_upd` → `pair`; `snap_epoch`
//!   (packet 0 increments); `gen_next` (burst order check); `part_lease[p]`
//!   (send or not); at j = 0 `part_commit[p]` (ε monitor) and `snap_cnt`;
//!   at the last packet `snap_cnt` and `last_commit_ts`. A sent packet
//!   becomes SNAPSHOT_REQ(seq = partition epoch, key = (partition, j),
//!   value = all rows) to the store port, where egress transmits it and
//!   mirrors a copy into the retransmission loop.
//! - **SNAPSHOT_ACK**: partition table → `part_lease[p]` (renewal, §5.4)
//!   → `part_commit[p]` (the partition's newest committed epoch: any ack
//!   proves the store committed the whole partition epoch) → `snap_epoch` →
//!   `snap_cnt` → `last_commit_ts`; then to the store-port egress, where it
//!   raises `eg_committed[p]` so loop copies stop, and is dropped.
//! - **SNAPSHOT_RESTORE**: partition table → `part_lease[p]`; punted to the
//!   CPU (§4.6 punt header) unless the partition already has a valid lease.
//! - **LEASE_REJECT**: `part_lease[p]` = 0.
//! - **Loop copy** (egress, store port): `eg_committed[p]`; drop when
//!   committed, give up after MAX_RETX (digest), retransmit after RTO, else
//!   go around again.
//!
//! Partition epochs [our choice]: the switch has one `snap_epoch` counter,
//! but a partition's snapshots continue the epoch numbering of the snapshot
//! it was restored from (another switch's, or this one's before a crash),
//! so the store's "staged if epoch ≥ committed" rule holds across owners.
//! `part_lease[p].hi` keeps the offset between the two. After a restore the
//! partition skips one burst ("aligning") so that every snapshot it sends
//! was taken after the restore took effect.
//!
//! Global commit [our choice]: `snap_cnt[e & 1]` counts, for switch epoch e,
//! the partitions sent (lo, with a "burst complete" flag) and the partitions
//! committed (hi); when they meet after the burst, `last_commit_ts = now`.
//! Counting partitions rather than entries makes the count immune to
//! duplicate acks from retransmissions, and lets partitions owned by other
//! switches be left out. The ε monitor is per partition (`part_commit[p]`),
//! so the action can name the partition; with one partition (Async-Counter)
//! it is the global check of §5.9.

use std::collections::VecDeque;
use std::net::Ipv4Addr;

use inca_apps::headers::{self, Parsed};
use inca_switch::register::Pair;
use inca_switch::{
    AccessError, ArrayDecl, ControlEvent, ControlPlane, DataPlane, Declare, DeclareError, Gress,
    Nanos, ObjectId, PacketCtx, PacketKind, ParseError, Profile, Program, RegisterHandle,
};
use inca_wire::redplane::{self as rpw, build_request_frame, rp_endpoints, ReqType, RequestRepr};

use super::apps::{BoundedApp, HeavyReport};
use super::config::{send_stamp, validate_generator, GeneratorPlan, SnapshotConfig};
use super::lazy::LazyArray;
use super::observer::{SnapEvent, SnapshotRecorder};

/// Punt reason of a SNAPSHOT_RESTORE.
pub const PUNT_RESTORE: u16 = 0x0506;
/// EtherType of the CPU punt header (§4.6).
pub const ETHERTYPE_PUNT: u16 = 0xBF01;
/// Bytes of the generator header before a generated packet's Ethernet
/// header (§4.6).
pub const PKTGEN_HEADER_LEN: usize = 6;
/// Control message kind: the ε action fired (body: slot 16, partition key
/// 16, action 8).
pub const MSG_EPSILON: u32 = 0x5e01;
/// Control message kind: the switch withdraws from ECMP for a partition
/// (body: partition key 16).
pub const MSG_WITHDRAW: u32 = 0x5e02;
/// Control message kind the switch accepts: serve a withdrawn partition
/// again (body: partition key 16).
pub const MSG_REINSTATE: u32 = 0x5e03;

/// `part_lease.hi`: the partition is withdrawn (DeclareFailed).
pub(super) const WITHDRAWN: u32 = 1 << 31;
/// `part_lease.hi`: restored, offset not yet aligned (low 16 bits hold the
/// restored epoch).
pub(super) const ARMED: u32 = 1 << 30;
/// `part_lease.hi`: aligned, skipping the current burst.
pub(super) const ALIGNING: u32 = 1 << 29;
/// `part_lease.hi`: no lease, a LEASE_NEW is out (low 16 bits: when, in
/// 65.536 µs units).
pub(super) const REQUESTED: u32 = 1 << 28;
/// LEASE_RETRY: at most one LEASE_NEW per partition per 1 ms (in 65.536 µs
/// units) [our choice; §5.2 sends one per packet, which for a partition
/// means thousands while the restore is installed].
pub(super) const LEASE_RETRY_UNITS: u16 = 16;
/// `part_commit.lo`: a commit has been recorded.
pub(super) const COMMITTED: u32 = 1 << 31;
/// `snap_cnt.lo`: every packet of the burst has passed.
pub(super) const BURST_DONE: u32 = 1 << 31;
/// Commit timestamps are kept in units of 1.024 µs (ε is a few ms).
pub(super) const COMMIT_UNIT_SHIFT: u32 = 10;
/// Bound on data packets waiting for a restore at the control plane.
pub(super) const MAX_WAITING: usize = 256;

pub(super) fn commit_units(t: Nanos) -> u32 {
    (t >> COMMIT_UNIT_SHIFT) as u32
}

/// The role of a packet, decided in ingress and carried to egress.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Role {
    /// Anything else.
    #[default]
    Other,
    /// A SNAPSHOT_REQ on its first pass (or a loop copy, by packet kind).
    SnapReq {
        /// Partition slot.
        slot: u16,
        /// Partition epoch (the request's seq).
        epoch: u16,
    },
    /// A SNAPSHOT_ACK on its way to the store-port egress bookkeeping.
    AckCopy {
        /// Partition slot.
        slot: u16,
        /// Partition epoch.
        epoch: u16,
    },
}

/// Per-packet metadata (bridged and mirror metadata, §4.6).
#[derive(Debug, Clone, Copy, Default)]
pub struct SnapMeta {
    /// Parsed headers (ingress).
    pub parsed: Parsed,
    /// What the packet is.
    pub role: Role,
    /// Loop: when the copy was last transmitted.
    pub tx_ts: Nanos,
    /// Loop: retransmissions so far.
    pub retx: u8,
}

/// What the data plane tells the control plane.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SnapDigest {
    /// A partition's last commit is older than ε.
    Stale {
        /// Partition slot.
        slot: u16,
        /// Age of the last commit in ns.
        age: Nanos,
    },
    /// A snapshot request hit MAX_RETX.
    GaveUp {
        /// Partition slot.
        slot: u16,
        /// Partition epoch.
        epoch: u16,
    },
    /// The app's report.
    Report(HeavyReport),
}

/// Counters of the bounded-mode blocks.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SnapStats {
    /// Bursts started (packet 0 seen).
    pub bursts: u64,
    /// Generator packets out of order or of another app (§9 item 15).
    pub generator_errors: u64,
    /// SNAPSHOT_REQs sent (first transmissions).
    pub requests: u64,
    /// Loop retransmissions.
    pub retransmissions: u64,
    /// Requests given up after MAX_RETX.
    pub gave_up: u64,
    /// SNAPSHOT_ACKs received.
    pub acks: u64,
    /// Partition epochs newly committed.
    pub partition_commits: u64,
    /// Switch epochs fully committed (`last_commit_ts` set).
    pub epoch_commits: u64,
    /// LEASE_NEW requests sent.
    pub lease_requests: u64,
    /// Restores completed (leases installed).
    pub restores: u64,
    /// Restore entries ignored (duplicates, stale epochs).
    pub restore_ignored: u64,
    /// LEASE_REJECTs.
    pub rejects: u64,
    /// ε monitor firings acted on.
    pub epsilon_fired: u64,
    /// Data packets dropped for a withdrawn partition.
    pub withdrawn_drops: u64,
    /// Measured data packets.
    pub updates: u64,
    /// Malformed RedPlane messages dropped.
    pub malformed: u64,
    /// Heavy-hitter reports.
    pub reports: u64,
    /// Data packets dropped waiting for a restore (queue full).
    pub waiting_drops: u64,
    /// Complete restores not installed because their lease was nearly over.
    pub short_lease_restores: u64,
    /// Data packets dropped because a LEASE_NEW for their partition is
    /// already out.
    pub awaiting_lease_drops: u64,
}

/// A restore in progress at the control plane.
#[derive(Debug, Clone)]
pub(super) enum Grant {
    Idle,
    Collecting {
        epoch: u16,
        got: Vec<bool>,
        remaining: usize,
        /// Row-major: values[r * n + j].
        values: Vec<u32>,
        end: u32,
    },
    /// Install issued; waiting for the read-back that proves the lease
    /// write took effect.
    Installing {
        confirm: u64,
    },
    Installed {
        /// When the install was confirmed in effect (65.536 µs units).
        since: u16,
    },
}

/// Sim-only ground truth for the observer: the arrays as a plain reference
/// model, and their contents at the last flip.
#[derive(Debug, Clone)]
pub(super) struct Truth {
    /// values[r][slot * n + j].
    pub(super) rows: Vec<Vec<u32>>,
    pub(super) at_flip: Vec<Vec<u32>>,
    pub(super) flip_at: Nanos,
}

/// A bounded-mode RedPlane switch running app `A`. See the module
/// documentation.
#[derive(Debug, Clone)]
pub struct BoundedSwitch<A: BoundedApp> {
    pub(super) app: A,
    pub(super) cfg: SnapshotConfig,
    pub(super) rows: Vec<LazyArray>,
    pub(super) snap_epoch: Option<RegisterHandle<u16>>,
    pub(super) gen_next: Option<RegisterHandle<u16>>,
    pub(super) part_lease: Option<RegisterHandle<Pair>>,
    pub(super) part_commit: Option<RegisterHandle<Pair>>,
    pub(super) snap_cnt: Option<RegisterHandle<Pair>>,
    pub(super) last_commit_ts: Option<RegisterHandle<u32>>,
    pub(super) eg_committed: Option<RegisterHandle<u16>>,
    pub(super) grants: Vec<Grant>,
    pub(super) waiting: VecDeque<(u16, Vec<u8>)>,
    /// Partitions whose ε action has fired since their last install.
    pub(super) fired: Vec<bool>,
    pub(super) truth: Option<Truth>,
    pub(super) recorder: Option<SnapshotRecorder>,
    pub(super) stats: SnapStats,
    pub(super) reports: Vec<HeavyReport>,
    pub(super) config_error: Option<String>,
    /// The generator validator's verdict for the profile (§9 item 15).
    pub(super) plan: Result<GeneratorPlan, String>,
}

pub(super) fn reg<T>(h: Option<T>) -> Result<T, AccessError> {
    h.ok_or(AccessError::WrongHandle)
}

impl<A: BoundedApp> BoundedSwitch<A> {
    /// `app` with bounded-mode parameters `cfg`.
    pub fn new(app: A, cfg: SnapshotConfig) -> Self {
        let p = app.partitions();
        BoundedSwitch {
            app,
            cfg,
            rows: Vec::new(),
            snap_epoch: None,
            gen_next: None,
            part_lease: None,
            part_commit: None,
            snap_cnt: None,
            last_commit_ts: None,
            eg_committed: None,
            grants: vec![Grant::Idle; p],
            waiting: VecDeque::new(),
            fired: vec![false; p],
            truth: None,
            recorder: None,
            stats: SnapStats::default(),
            reports: Vec::new(),
            config_error: None,
            plan: Err("not validated".into()),
        }
        .for_profile(&Profile::tofino())
    }

    /// Validates the generator plan for the profile the program will run on
    /// (the snapshot stream is not started if it fails; see
    /// [`BoundedSwitch::config_error`]).
    pub fn for_profile(mut self, profile: &Profile) -> Self {
        let len = self.template().len();
        self.plan = validate_generator(profile, &self.cfg, self.n(), self.app.partitions(), len);
        self
    }

    /// The generator validator's verdict.
    pub fn plan(&self) -> Result<GeneratorPlan, String> {
        self.plan.clone()
    }

    /// Attaches the verification observer (and keeps the ground truth it
    /// needs). The recorder is shared, so it survives a crash.
    pub fn with_recorder(mut self, recorder: SnapshotRecorder) -> Self {
        let n = self.app.entries() * self.app.partitions();
        let rows = vec![vec![0; n]; self.app.rows()];
        self.truth = Some(Truth {
            at_flip: rows.clone(),
            rows,
            flip_at: 0,
        });
        self.recorder = Some(recorder);
        self
    }

    /// The app.
    pub fn app(&self) -> &A {
        &self.app
    }

    /// The configuration.
    pub fn config(&self) -> &SnapshotConfig {
        &self.cfg
    }

    /// Counters.
    pub fn stats(&self) -> &SnapStats {
        &self.stats
    }

    /// Heavy-hitter reports the control plane received.
    pub fn reports(&self) -> &[HeavyReport] {
        &self.reports
    }

    /// Why the snapshot stream was not started, if it was refused.
    pub fn config_error(&self) -> Option<&str> {
        self.config_error.as_deref()
    }

    /// The snapshotted rows (tests read them with [`LazyArray::current`]).
    pub fn rows(&self) -> &[LazyArray] {
        &self.rows
    }

    /// The partition-lease register (tests).
    pub fn lease_register(&self) -> Option<RegisterHandle<Pair>> {
        self.part_lease
    }

    /// The `last_commit_ts` register (units of 1.024 µs).
    pub fn last_commit_register(&self) -> Option<RegisterHandle<u32>> {
        self.last_commit_ts
    }

    pub(super) fn n(&self) -> usize {
        self.app.entries()
    }

    pub(super) fn record(&self, e: SnapEvent) {
        if let Some(r) = &self.recorder {
            r.push(e);
        }
    }

    /// The generator template: the §4.6 generator header, then a SNAPSHOT_REQ
    /// frame with zero fields (ingress fills them in).
    pub fn template(&self) -> Vec<u8> {
        let mut t = vec![0u8; PKTGEN_HEADER_LEN];
        t[0] = self.cfg.app_id & 0x7;
        t.extend(self.request_frame(ReqType::Snapshot, 0, 0, &[], &[], &[]));
        t
    }

    /// A request frame to the store with `key`, `value` and `piggyback`.
    pub(super) fn request_frame(
        &self,
        t: ReqType,
        seq: u16,
        ident: u16,
        key: &[u8],
        value: &[u8],
        piggyback: &[u8],
    ) -> Vec<u8> {
        let k = vec![0u8; self.app.key_len()];
        let v = vec![0u8; self.app.value_len()];
        let ep = rp_endpoints(
            self.cfg.switch_mac,
            self.cfg.switch_ip,
            self.cfg.store_mac,
            self.cfg.store_ip,
            ident,
        );
        let req = RequestRepr {
            req_type: t,
            seq,
            key: if key.is_empty() { &k } else { key },
            value: if value.is_empty() { &v } else { value },
            piggyback,
        };
        build_request_frame(&ep, self.cfg.store_udp, &req).unwrap_or_default()
    }

    pub(super) fn replace_frame(pkt: &mut PacketCtx<SnapMeta, SnapDigest>, frame: &[u8]) -> bool {
        let len = pkt.header().len();
        pkt.remove_header(0, len) && pkt.insert_header(0, frame)
    }
}

impl<A: BoundedApp> Program for BoundedSwitch<A> {
    type Meta = SnapMeta;
    type Digest = SnapDigest;

    fn name(&self) -> &str {
        self.app.name()
    }

    fn declare(&mut self, d: &mut Declare) -> Result<(), DeclareError> {
        let deps = self.app.declare(d)?;
        let p = self.app.partitions();
        let n = self.n();
        let lease = d.register::<Pair>(ArrayDecl::new("part_lease", p).after(&deps))?;
        self.part_lease = Some(lease);
        self.rows.clear();
        let mut after = vec![lease.id()];
        after.extend(&deps);
        for r in 0..self.app.rows() {
            self.rows.push(LazyArray::declare(
                d,
                &format!("snap_row{r}"),
                n * p,
                &after,
            )?);
        }
        let last: Vec<ObjectId> = self.rows.iter().map(|r| r.last_id()).collect();
        let epoch = d.register::<u16>(ArrayDecl::new("snap_epoch", 1).after(&last))?;
        let gen = d.register::<u16>(ArrayDecl::new("snap_gen_next", 1))?;
        let commit = d.register::<Pair>(ArrayDecl::new("part_commit", p).after(&[lease.id()]))?;
        let cnt = d.register::<Pair>(
            ArrayDecl::new("snap_ack_cnt", 2).after(&[epoch.id(), commit.id()]),
        )?;
        let ts = d.register::<u32>(ArrayDecl::new("last_commit_ts", 1).after(&[cnt.id()]))?;
        let eg = d.register::<u16>(ArrayDecl::new("eg_committed", p).egress())?;
        self.snap_epoch = Some(epoch);
        self.gen_next = Some(gen);
        self.part_commit = Some(commit);
        self.snap_cnt = Some(cnt);
        self.last_commit_ts = Some(ts);
        self.eg_committed = Some(eg);
        Ok(())
    }

    fn parse(&self, gress: Gress, header: &[u8], meta: &mut SnapMeta) -> Result<(), ParseError> {
        if gress == Gress::Ingress {
            meta.parsed = headers::parse(header)?;
        }
        Ok(())
    }

    fn ingress(
        &mut self,
        pkt: &mut PacketCtx<SnapMeta, SnapDigest>,
        dp: &mut DataPlane<'_>,
    ) -> Result<(), AccessError> {
        if let PacketKind::Generated {
            stream, packet_id, ..
        } = pkt.kind()
        {
            if stream == self.cfg.pktgen_stream {
                return self.generated(pkt, dp, packet_id);
            }
            pkt.drop_packet();
            return Ok(());
        }
        let p = pkt.meta.parsed;
        let is_ack = p.ipv4
            && p.proto == headers::PROTO_UDP
            && p.has_ports
            && p.dport == rpw::SWITCH_PORT
            && rpw::is_store_port(p.sport);
        if is_ack {
            return self.ack(pkt, dp);
        }
        self.data(pkt, dp)
    }

    fn egress(
        &mut self,
        pkt: &mut PacketCtx<SnapMeta, SnapDigest>,
        dp: &mut DataPlane<'_>,
    ) -> Result<(), AccessError> {
        let now = dp.now();
        let mirrored = matches!(pkt.kind(), PacketKind::Mirrored { .. });
        match pkt.meta.role {
            Role::Other => Ok(()),
            Role::AckCopy { slot, epoch } => {
                dp.register(reg(self.eg_committed)?, u64::from(slot), |c: &mut u16| {
                    *c = rpw::serial_max(*c, epoch);
                })?;
                pkt.drop_packet();
                Ok(())
            }
            Role::SnapReq { .. } if !mirrored => {
                // First pass: transmit, and start the loop (§5.5 step 1).
                pkt.meta.tx_ts = now;
                pkt.meta.retx = 0;
                pkt.mirror_loop(self.cfg.mirror_session);
                Ok(())
            }
            Role::SnapReq { slot, epoch } => {
                let done =
                    dp.register(reg(self.eg_committed)?, u64::from(slot), |c: &mut u16| {
                        rpw::serial_le(epoch, *c)
                    })?;
                if done {
                    pkt.drop_packet();
                    return Ok(());
                }
                if now.saturating_sub(pkt.meta.tx_ts) >= self.cfg.rto {
                    if pkt.meta.retx >= self.cfg.max_retx {
                        self.stats.gave_up += 1;
                        pkt.digest(SnapDigest::GaveUp { slot, epoch });
                        pkt.drop_packet();
                        return Ok(());
                    }
                    pkt.meta.retx += 1;
                    pkt.meta.tx_ts = now;
                    self.stats.retransmissions += 1;
                } else {
                    pkt.drop_packet();
                }
                pkt.mirror_loop(self.cfg.mirror_session);
                Ok(())
            }
        }
    }

    fn control(&mut self, event: ControlEvent<SnapDigest>, cp: &mut ControlPlane<'_>) {
        match event {
            ControlEvent::Start => self.start(cp),
            ControlEvent::Digest(SnapDigest::Stale { slot, .. }) => self.epsilon(slot, cp),
            ControlEvent::Digest(SnapDigest::GaveUp { .. }) => {}
            ControlEvent::RegisterValues { request, .. } => {
                let since = send_stamp(cp.now());
                for g in &mut self.grants {
                    if matches!(g, Grant::Installing { confirm } if *confirm == request) {
                        *g = Grant::Installed { since };
                    }
                }
            }
            ControlEvent::Digest(SnapDigest::Report(r)) => {
                self.stats.reports += 1;
                if self.reports.len() < 65_536 {
                    self.reports.push(r);
                }
            }
            ControlEvent::PacketIn {
                reason: PUNT_RESTORE,
                frame,
                ..
            } => self.restore_entry(&frame, cp),
            ControlEvent::Message(m) if m.kind == MSG_REINSTATE => {
                let key = m.body.get(..2).map(|b| u16::from_be_bytes([b[0], b[1]]));
                if let (Some(slot), Some(h)) =
                    (key.and_then(|k| self.app.slot_of(k)), self.part_lease)
                {
                    cp.register_write(h, u64::from(slot), Pair::default());
                    self.grants[usize::from(slot)] = Grant::Idle;
                }
            }
            _ => {}
        }
    }
}

/// The switch IP a recorder event names.
pub type SwitchId = Ipv4Addr;
