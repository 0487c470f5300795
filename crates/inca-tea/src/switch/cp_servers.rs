//! Server management in the TEA control plane (spec §5.6–§5.8): setup from
//! HELLO (regions, QPs, data-plane entries), recovery with new QP
//! incarnations and a reload from the master mirror, port-down and
//! heartbeat failure detection, QP resets after NAKs, and the 1 ms
//! watchdog for lost NAKs.
//!
//! Setup and recovery are one path [our choice]: allocate the server's
//! regions, create (or reset) its QPs, wait until no table operation is
//! running, write its regions from the mirror, then install its table
//! entries and registers and mark its port up.
//!
//! [`Servers`] owns the server records and the register reads that report
//! on them (setup barriers, the watchdog's read). Its membership is fixed
//! at configuration: it derefs to a slice, never to a growable list.

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;
use std::ops::{Deref, DerefMut};

use inca_switch::pktgen::{StreamConfig, Trigger};
use inca_switch::register::Pair;
use inca_switch::{ControlPlane, MatchSpec, Nanos, PortId};
use rand::Rng;

use crate::server::agent_proto::{CreateQp, Hello, QpState, Reply, Request};
use crate::table::layout::Layout;
use crate::table::partition::{Partition, Role, ServerOffer};
use crate::table::{TableConfig, TeaTable};

use super::config::{ServerSpec, PMTU};
use super::cp_agent::{chunk_writes, AgentTag, Purpose};
use super::dataplane::{MemEntry, QpEntry, RangeEntry, TeaSwitch};
use super::nf_api::TeaNf;
use super::wire::port_down_template;

/// Where a server is in its life cycle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Phase {
    /// No HELLO yet.
    Unknown,
    /// Regions and QPs being created; `pending` replies outstanding.
    Setup { pending: usize },
    /// Ready to reload, waiting for the running table operation to end.
    AwaitQuiet,
    /// Region contents being written.
    Reload { pending: BTreeSet<u32> },
    /// Table entries being installed (a barrier read outstanding).
    Install,
    /// Serving lookups.
    Up,
    /// Failed (port down or heartbeats missed).
    Down,
}

/// One QP as the control plane knows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct QpRec {
    pub incarnation: u8,
    pub qpn: u32,
    pub init_psn: u32,
    /// The switch-side pseudo QPN installed in `rsp_qp_tbl`, if any.
    pub installed_pseudo: Option<u32>,
    pub status_pending: bool,
    pub reset_pending: bool,
    /// The `outstanding.hi` (last progress) the watchdog saw silent.
    pub silent_hi: u32,
    /// A re-read of `outstanding` before a PSN fix: (request, ePSN).
    pub fix_read: Option<(u64, u32)>,
}

/// One DRAM server's record (spec §3.3).
#[derive(Debug, Clone)]
pub(crate) struct ServerRec {
    pub spec: ServerSpec,
    pub hello: Option<Hello>,
    pub phase: Phase,
    /// region id → (base_va, rkey).
    pub regions: BTreeMap<u16, (u64, u32)>,
    /// Regions the agent handed back at the last setup with the base VA and
    /// R_Key they had before: it kept their memory (a link or partition
    /// outage, not a restart), so a reload must also clear the rows the
    /// mirror emptied meanwhile.
    pub kept_regions: BTreeSet<u16>,
    pub qps: BTreeMap<u16, QpRec>,
    /// Its entries are in the data-plane tables (modify rather than add).
    pub installed: bool,
    pub hb_outstanding: bool,
    pub missed: u32,
    /// Reload WRITE_BATCHes not sent yet (at most [`RELOAD_WINDOW`] are
    /// in flight).
    pub reload_queue: std::collections::VecDeque<Vec<crate::server::agent_proto::WriteEntry>>,
}

/// Most reload WRITE_BATCHes in flight per server [our choice]. Sent all
/// at once, a reload of thousands of batches (a large preload) queued
/// behind one another in the switch CPU's packet-out path and the agent,
/// every one outlived the retransmission timer, and the retransmissions
/// kept the backlog from draining. Each batch costs the CPU two events
/// (the reply, and its retransmission timer), 20 µs each on the tofino
/// profile: four in flight keep a reply's wait well under `t_agent_retx`.
pub const RELOAD_WINDOW: usize = 4;

impl ServerRec {
    pub(crate) fn new(spec: &ServerSpec) -> Self {
        ServerRec {
            spec: spec.clone(),
            hello: None,
            phase: Phase::Unknown,
            regions: Default::default(),
            kept_regions: Default::default(),
            qps: Default::default(),
            installed: false,
            hb_outstanding: false,
            missed: 0,
            reload_queue: Default::default(),
        }
    }

    /// Whether table operations write to it now (writes to a server being
    /// set up would race its reload; the reload carries them).
    pub(crate) fn takes_writes(&self) -> bool {
        matches!(self.phase, Phase::Up | Phase::Install)
    }

    pub(crate) fn is_down(&self) -> bool {
        matches!(self.phase, Phase::Down | Phase::Unknown)
    }

    /// Its install barrier completed: it serves lookups, with a clean
    /// heartbeat record. False if it was not installing.
    fn installed(&mut self) -> bool {
        if self.phase != Phase::Install {
            return false;
        }
        self.phase = Phase::Up;
        self.missed = 0;
        self.hb_outstanding = false;
        true
    }

    /// It failed: no heartbeat expected, no reload to go on with. False if
    /// it was already down.
    fn go_down(&mut self) -> bool {
        if self.phase == Phase::Down {
            return false;
        }
        self.phase = Phase::Down;
        self.hb_outstanding = false;
        self.reload_queue.clear();
        true
    }

    /// A heartbeat tick (spec §5.7): an up server whose last heartbeat went
    /// unanswered misses one, and three missed make it dead; an up server,
    /// or a down one that said HELLO, gets a heartbeat.
    fn heartbeat_tick(&mut self) -> Beat {
        match self.phase {
            Phase::Up if self.hb_outstanding => {
                self.missed += 1;
                if self.missed >= 3 {
                    return Beat::Dead;
                }
            }
            Phase::Up => {}
            Phase::Down if self.hello.is_some() => {}
            _ => return Beat::Skip,
        }
        self.hb_outstanding = true;
        Beat::Send
    }
}

/// What a heartbeat tick means for one server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Beat {
    /// Not heartbeated (being set up, or never heard from).
    Skip,
    /// Send it a heartbeat.
    Send,
    /// Three heartbeats missed: it is down.
    Dead,
}

/// The DRAM servers as the control plane knows them.
#[derive(Debug, Clone)]
pub(crate) struct Servers {
    list: Vec<ServerRec>,
    /// Barrier read → server whose setup it completes.
    setup_barriers: BTreeMap<u64, usize>,
    /// The watchdog's pending read of `outstanding`, and when it was issued.
    watchdog_read: Option<(u64, Nanos)>,
}

impl Servers {
    /// One record per configured server, none heard from yet.
    pub(crate) fn new(specs: &[ServerSpec]) -> Self {
        Servers {
            list: specs.iter().map(ServerRec::new).collect(),
            setup_barriers: BTreeMap::new(),
            watchdog_read: None,
        }
    }

    /// The server with address `ip`, else the one numbered `server_id`.
    pub(crate) fn by_ip(&self, ip: Ipv4Addr, server_id: u16) -> Option<usize> {
        self.list.iter().position(|s| s.spec.ip == ip).or_else(|| {
            (usize::from(server_id) < self.list.len()).then_some(usize::from(server_id))
        })
    }

    /// The server on switch port `port`.
    pub(crate) fn by_port(&self, port: PortId) -> Option<usize> {
        self.list.iter().position(|s| s.spec.port == port)
    }

    /// Whether every server serves lookups.
    pub(crate) fn all_up(&self) -> bool {
        self.list.iter().all(|s| s.phase == Phase::Up)
    }

    /// Whether a server waits to be reloaded or is being reloaded.
    pub(crate) fn recovering(&self) -> bool {
        self.list
            .iter()
            .any(|s| matches!(s.phase, Phase::AwaitQuiet | Phase::Reload { .. }))
    }

    /// Barrier read `request` completes server `sid`'s setup.
    pub(crate) fn await_setup(&mut self, request: u64, sid: usize) {
        self.setup_barriers.insert(request, sid);
    }

    /// The server whose setup barrier read `request` is, if any.
    pub(crate) fn take_setup_barrier(&mut self, request: u64) -> Option<usize> {
        self.setup_barriers.remove(&request)
    }

    /// The watchdog's read of `outstanding` went out as `request` at `at`.
    pub(crate) fn watchdog_issued(&mut self, request: u64, at: Nanos) {
        self.watchdog_read = Some((request, at));
    }

    /// When the watchdog read `request` was issued, if it is that read.
    pub(crate) fn take_watchdog_read(&mut self, request: u64) -> Option<Nanos> {
        let (r, at) = self.watchdog_read?;
        (r == request).then(|| {
            self.watchdog_read = None;
            at
        })
    }
}

impl Deref for Servers {
    type Target = [ServerRec];
    fn deref(&self) -> &[ServerRec] {
        &self.list
    }
}

impl DerefMut for Servers {
    fn deref_mut(&mut self) -> &mut [ServerRec] {
        &mut self.list
    }
}

impl<N: TeaNf> TeaSwitch<N> {
    /// The pseudo QPN of `qp` at incarnation `inc` (spec §4.2).
    fn pseudo_qpn(qp: u16, inc: u8) -> u32 {
        (u32::from(qp) << 8) | u32::from(inc)
    }

    pub(crate) fn server_by_ip(&self, ip: Ipv4Addr, server_id: u16) -> Option<usize> {
        self.cp.servers.by_ip(ip, server_id)
    }

    /// Per-server multicast groups and port-down generator streams.
    pub(crate) fn install_static(&mut self, cp: &mut ControlPlane<'_>) {
        for (sid, s) in self.cfg.servers.iter().enumerate() {
            cp.multicast_group(group_of(sid), vec![(s.port, 1), (s.port, 2)]);
            // Tofino has 8 generator streams; more servers rely on the CPU's
            // port-status event alone.
            if sid < 8 {
                cp.packet_generator(
                    sid as u8,
                    Some(StreamConfig {
                        trigger: Trigger::PortDown { port: s.port },
                        template: port_down_template(self.cfg.switch_mac, s.port),
                        batch_size: 1,
                    }),
                );
            }
        }
    }

    pub(crate) fn on_hello(&mut self, sid: usize, h: Hello, cp: &mut ControlPlane<'_>) {
        let fresh = self.cp.servers[sid].hello.is_none();
        let same = self.cp.servers[sid].hello == Some(h);
        let phase = self.cp.servers[sid].phase.clone();
        // A retransmitted HELLO while setting up changes nothing.
        if same && !matches!(phase, Phase::Up | Phase::Down) {
            return;
        }
        self.cp.servers[sid].hello = Some(h);
        if self.cp.table.is_none() {
            if fresh && self.cp.servers.iter().all(|s| s.hello.is_some()) {
                if let Err(e) = self.build_table(cp) {
                    // Nothing to do but report: the configuration cannot run.
                    self.cp.stats.malformed += 1;
                    let _ = e;
                    return;
                }
                for s in 0..self.cp.servers.len() {
                    self.start_setup(s, true, cp);
                }
            }
            return;
        }
        // A HELLO from a known server: it restarted and lost its DRAM.
        self.server_down(sid, cp);
        self.start_setup(sid, true, cp);
    }

    fn build_table(&mut self, cp: &mut ControlPlane<'_>) -> Result<(), String> {
        let layout = Layout::new(
            self.cfg.key_len,
            self.cfg.value_len,
            self.cfg.cells,
            self.cfg.log2_buckets,
        )
        .map_err(|e| e.to_string())?;
        let offers: Vec<ServerOffer> = self
            .cp
            .servers
            .iter()
            .enumerate()
            .map(|(i, s)| ServerOffer {
                id: i as u16,
                dram_bytes: s.hello.map_or(0, |h| h.dram_offered),
            })
            .collect();
        let part =
            Partition::new(layout, &offers, self.cfg.replication).map_err(|e| e.to_string())?;
        let mut table = TeaTable::new(
            part,
            TableConfig {
                stash_cap: self.cfg.stash_cap,
                cache_cap: self.cfg.cache_cap,
                max_tries: self.cfg.max_tries,
            },
        );
        table.set_insert_order(self.cfg.insert_order);
        // Preloaded entries go straight into the mirror; the reload writes
        // them, and the ones left stashed are installed with the server.
        for (k, v) in std::mem::take(&mut self.cp.preload) {
            if table.insert(&k, &v, cp.rng()).is_err() {
                self.cp.stats.ops_refused += 1;
            }
        }
        self.cp.table = Some(table);
        Ok(())
    }

    /// Allocates the server's regions and creates (`create`) or resets its
    /// QPs with a new incarnation.
    pub(crate) fn start_setup(&mut self, sid: usize, create: bool, cp: &mut ControlPlane<'_>) {
        let Some(table) = &self.cp.table else {
            return;
        };
        let regions = table.partition().regions_of(sid as u16);
        let mut pending = 0;
        for r in regions {
            let req = Request::AllocRegion {
                region_id: r.region_id,
                bytes: r.bytes,
            };
            if self
                .send_agent(
                    sid,
                    req,
                    Purpose::Alloc {
                        sid,
                        region: r.region_id,
                    },
                    cp,
                )
                .is_some()
            {
                pending += 1;
            }
        }
        let per = self.cfg.qps_per_server;
        for role in 0..2u8 {
            let base = self.cfg.qp_base(sid, role);
            for q in base..base + per {
                let init_psn = cp.rng().gen::<u32>() & 0xFF_FFFF;
                let rec = self.cp.servers[sid].qps.entry(q).or_default();
                rec.incarnation = rec.incarnation.wrapping_add(1);
                rec.init_psn = init_psn;
                if self.send_setup_qp(sid, q, create, cp) {
                    pending += 1;
                }
            }
        }
        self.cp.servers[sid].phase = Phase::Setup { pending };
        if pending == 0 {
            self.setup_replies_done(sid, cp);
        }
    }

    /// Sends CREATE_QP (`create`) or RESET_QP for `q` at its current
    /// incarnation and initial PSN.
    fn send_setup_qp(
        &mut self,
        sid: usize,
        q: u16,
        create: bool,
        cp: &mut ControlPlane<'_>,
    ) -> bool {
        let Some(rec) = self.cp.servers[sid].qps.get(&q).copied() else {
            return false;
        };
        let pseudo = Self::pseudo_qpn(q, rec.incarnation);
        let req = if create {
            Request::CreateQp(CreateQp {
                qp_idx: q,
                remote_qpn: pseudo,
                remote_mac: self.cfg.switch_mac,
                remote_ip: self.cfg.switch_ip,
                init_psn: rec.init_psn,
                pmtu: PMTU as u16,
                max_rd_atomic: self.cfg.max_rd_atomic as u8,
            })
        } else {
            Request::ResetQp {
                qp_idx: q,
                init_psn: rec.init_psn,
                remote_qpn: pseudo,
            }
        };
        self.send_agent(sid, req, Purpose::SetupQp { sid, qp: q, create }, cp)
            .is_some()
    }

    fn setup_reply(&mut self, sid: usize, cp: &mut ControlPlane<'_>) {
        if let Phase::Setup { pending } = &mut self.cp.servers[sid].phase {
            *pending = pending.saturating_sub(1);
            if *pending == 0 {
                self.setup_replies_done(sid, cp);
            }
        }
    }

    fn setup_replies_done(&mut self, sid: usize, cp: &mut ControlPlane<'_>) {
        self.cp.servers[sid].phase = Phase::AwaitQuiet;
        self.maybe_resume_recovery(cp);
    }

    /// True while a server's reload must not interleave with table
    /// operations.
    pub(crate) fn recovery_pending(&self) -> bool {
        self.cp.servers.recovering()
    }

    /// Starts the reload of every server waiting for quiescence, if no
    /// table operation is running.
    pub(crate) fn maybe_resume_recovery(&mut self, cp: &mut ControlPlane<'_>) {
        if !self.cp.quiescent() {
            return;
        }
        for sid in 0..self.cp.servers.len() {
            if self.cp.servers[sid].phase != Phase::AwaitQuiet {
                continue;
            }
            let Some(table) = &self.cp.table else {
                return;
            };
            // A kept region may hold cells deleted or moved away while the
            // server took no writes (the plan skipped it): rewrite every row.
            // A fresh one is zero: its empty rows need no write.
            let mut writes = Vec::new();
            let kept = &self.cp.servers[sid].kept_regions;
            for r in table.partition().regions_of(sid as u16) {
                if kept.contains(&r.region_id) {
                    writes.extend(table.region_kv_rewrites(&r, 0..r.rows));
                } else {
                    writes.extend(table.region_kv_writes(&r, 0..r.rows));
                }
            }
            self.cp.servers[sid].reload_queue = chunk_writes(writes).into();
            self.cp.servers[sid].phase = Phase::Reload {
                pending: BTreeSet::new(),
            };
            self.reload_more(sid, cp);
        }
    }

    /// Keeps up to [`RELOAD_WINDOW`] reload batches in flight to `sid`;
    /// installs the server once the last one is acknowledged.
    fn reload_more(&mut self, sid: usize, cp: &mut ControlPlane<'_>) {
        loop {
            let in_flight = match &self.cp.servers[sid].phase {
                Phase::Reload { pending } => pending.len(),
                _ => return,
            };
            if in_flight >= RELOAD_WINDOW {
                return;
            }
            let Some(chunk) = self.cp.servers[sid].reload_queue.pop_front() else {
                if in_flight == 0 {
                    self.install_server(sid, cp);
                }
                return;
            };
            let id = self.send_agent(sid, Request::WriteBatch(chunk), Purpose::Reload { sid }, cp);
            if let (Some(id), Phase::Reload { pending }) = (id, &mut self.cp.servers[sid].phase) {
                pending.insert(id);
            }
        }
    }

    /// Installs the server's table entries and registers, then a barrier.
    fn install_server(&mut self, sid: usize, cp: &mut ControlPlane<'_>) {
        let (Some(h), Some(table)) = (self.h, &self.cp.table) else {
            return;
        };
        let first_ever = !self.cp.servers.iter().any(|s| s.installed);
        let installed = self.cp.servers[sid].installed;
        let spec = self.cp.servers[sid].spec.clone();
        let hello = self.cp.servers[sid].hello;
        let (mac, ip) = hello.map_or((spec.mac, spec.ip), |h| (h.mac, h.ip));
        // Ranges: once, with the first server (they name ports and QP
        // bases, which do not change).
        if first_ever {
            for rule in table.partition().ranges() {
                let p = usize::from(rule.primary);
                let e = RangeEntry {
                    range: rule.range,
                    port_p: self.cfg.servers[p].port,
                    qp_p: self.cfg.qp_base(p, 0),
                    secondary: rule.secondary.map(|s| {
                        let s = usize::from(s);
                        (self.cfg.servers[s].port, self.cfg.qp_base(s, 1))
                    }),
                };
                let spec = MatchSpec::Range {
                    lo: rule.lo.to_be_bytes().to_vec().into(),
                    hi: rule.hi.to_be_bytes().to_vec().into(),
                    priority: 0,
                };
                cp.table_add(h.range_tbl, spec, e);
            }
            // Entries left in the stash by the preload.
            let stashed: Vec<(Vec<u8>, Vec<u8>)> = table
                .stash()
                .map(|(k, v)| (k.to_vec(), v.to_vec()))
                .collect();
            for (k, v) in stashed {
                if self.cp.dp_stash.insert(k.clone()) {
                    cp.table_add(h.stash, MatchSpec::Exact(k.into()), v.into_boxed_slice());
                }
            }
        }
        let Some(table) = &self.cp.table else {
            return;
        };
        for r in table.partition().regions_of(sid as u16) {
            let Some(&(base_va, rkey)) = self.cp.servers[sid].regions.get(&r.region_id) else {
                continue;
            };
            let mut key = r.range.to_be_bytes().to_vec();
            key.push(u8::from(r.role == Role::Secondary));
            let e = MemEntry {
                base_va,
                lo: r.lo,
                rkey,
            };
            if installed {
                cp.table_modify(h.mem_tbl, MatchSpec::Exact(key.into()), e);
            } else {
                cp.table_add(h.mem_tbl, MatchSpec::Exact(key.into()), e);
            }
        }
        let qps: Vec<u16> = self.cp.servers[sid].qps.keys().copied().collect();
        for q in qps {
            self.install_qp(sid, q, mac, ip, installed, cp);
        }
        cp.register_write(h.port_up_a, u64::from(spec.port), 1u8);
        cp.register_write(h.port_up_b, u64::from(spec.port), 1u8);
        self.cp.servers[sid].installed = true;
        self.cp.servers[sid].phase = Phase::Install;
        let b = cp.register_read(h.barrier, 0, 1);
        self.cp.servers.await_setup(b, sid);
    }

    /// Programs one QP's data-plane state for its current incarnation.
    fn install_qp(
        &mut self,
        sid: usize,
        q: u16,
        mac: inca_wire::MacAddr,
        ip: Ipv4Addr,
        modify: bool,
        cp: &mut ControlPlane<'_>,
    ) {
        let Some(h) = self.h else {
            return;
        };
        let port = self.cp.servers[sid].spec.port;
        let Some(rec) = self.cp.servers[sid].qps.get_mut(&q) else {
            return;
        };
        let pseudo = Self::pseudo_qpn(q, rec.incarnation);
        let e = QpEntry {
            mac,
            ip,
            qpn: rec.qpn,
            sport: 0xC000 | (q & 0x3FFF),
            port,
            group: group_of(sid),
        };
        let qkey: Box<[u8]> = q.to_be_bytes().to_vec().into();
        if modify {
            cp.table_modify(h.qp_tbl, MatchSpec::Exact(qkey), e);
        } else {
            cp.table_add(h.qp_tbl, MatchSpec::Exact(qkey), e);
        }
        if let Some(old) = rec.installed_pseudo.take() {
            cp.table_delete(
                h.rsp_qp_tbl,
                MatchSpec::Exact(old.to_be_bytes()[1..].to_vec().into()),
            );
        }
        cp.table_add(
            h.rsp_qp_tbl,
            MatchSpec::Exact(pseudo.to_be_bytes()[1..].to_vec().into()),
            q,
        );
        rec.installed_pseudo = Some(pseudo);
        let psn = rec.init_psn;
        cp.register_write(h.next_psn, u64::from(q), psn);
        cp.register_write(
            h.last_rsp_psn,
            u64::from(q),
            psn.wrapping_sub(1) & 0xFF_FFFF,
        );
        cp.register_write(h.outstanding, u64::from(q), Pair::default());
        cp.register_write(h.qp_ok_a, u64::from(q), 1u8);
        cp.register_write(h.qp_ok_b, u64::from(q), 1u8);
    }

    /// The install barrier of server `sid` completed: it serves lookups.
    pub(crate) fn setup_installed(&mut self, sid: usize, _cp: &mut ControlPlane<'_>) {
        if !self.cp.servers[sid].installed() {
            return;
        }
        if self.cp.ready {
            self.cp.stats.recoveries += 1;
        } else if self.cp.servers.all_up() {
            self.cp.ready = true;
        }
    }

    /// Marks a server down: its ports stop taking lookups, its pending
    /// requests are dropped.
    pub(crate) fn server_down(&mut self, sid: usize, cp: &mut ControlPlane<'_>) {
        if !self.cp.servers[sid].go_down() {
            return;
        }
        self.cp.stats.server_downs += 1;
        if let Some(h) = self.h {
            let port = u64::from(self.cp.servers[sid].spec.port);
            cp.register_write(h.port_up_a, port, 0u8);
            cp.register_write(h.port_up_b, port, 0u8);
        }
        self.abandon_server_requests(sid);
    }

    pub(crate) fn on_port_status(&mut self, port: PortId, up: bool, cp: &mut ControlPlane<'_>) {
        let Some(sid) = self.cp.servers.by_port(port) else {
            return;
        };
        if up {
            // The generator's port-down trigger fired once and latched;
            // re-arm it for the next failure.
            cp.pktgen_clear_port_down(port);
        }
        if !up {
            self.server_down(sid, cp);
        } else if self.cp.servers[sid].phase == Phase::Down && self.cp.table.is_some() {
            // The link came back; the server kept its DRAM but may have
            // missed writes: reset its QPs and reload it [our choice].
            self.start_setup(sid, false, cp);
        }
    }

    /// Heartbeat tick (spec §5.7): three missed replies mark a server down;
    /// a down server that answers is recovered.
    pub(crate) fn heartbeat(&mut self, cp: &mut ControlPlane<'_>) {
        for sid in 0..self.cp.servers.len() {
            match self.cp.servers[sid].heartbeat_tick() {
                Beat::Skip => {}
                Beat::Dead => self.server_down(sid, cp),
                Beat::Send => {
                    self.send_agent(sid, Request::Heartbeat, Purpose::Heartbeat { sid }, cp);
                }
            }
        }
    }

    /// Watchdog (spec §5.8): QPs with reads outstanding and no response for
    /// `t_watchdog_silence` get a QP_STATUS.
    /// The watchdog's `outstanding` read came back (issued at `issued`):
    /// ask the NIC for the state of every QP silent for too long.
    ///
    /// Silence is judged against the read's issue time, not the reply's:
    /// the reply can wait long behind a busy channel or CPU (a new-flow
    /// flood), and judging by it took busy QPs for stalled ones (issue 8).
    pub(crate) fn watchdog(&mut self, values: &[u64], issued: Nanos, cp: &mut ControlPlane<'_>) {
        let now32 = issued as u32;
        for (q, &v) in values.iter().enumerate() {
            let p = Pair {
                lo: v as u32,
                hi: (v >> 32) as u32,
            };
            // Signed: progress after the issue time (the value was sampled
            // later) is not silence.
            let silent = now32.wrapping_sub(p.hi) as i32;
            if p.lo == 0 || silent <= 0 || silent as Nanos <= self.cfg.t_watchdog_silence {
                continue;
            }
            let q = q as u16;
            let (sid, _) = self.cfg.qp_owner(q);
            let Some(s) = self.cp.servers.get_mut(sid) else {
                continue;
            };
            if s.phase != Phase::Up {
                continue;
            }
            let Some(rec) = s.qps.get_mut(&q) else {
                continue;
            };
            if rec.status_pending || rec.reset_pending {
                continue;
            }
            rec.status_pending = true;
            rec.silent_hi = p.hi;
            self.send_agent(
                sid,
                Request::QpStatus { qp_idx: q },
                Purpose::QpStatus { qp: q },
                cp,
            );
        }
    }

    /// The re-read of a QP's `outstanding` before a watchdog PSN fix
    /// (see `on_agent_reply`): the fix is made only if `hi` (last progress)
    /// has not moved since the watchdog saw the QP silent. False if
    /// `request` is not such a read.
    pub(crate) fn watchdog_fix_read(
        &mut self,
        request: u64,
        values: &[u64],
        cp: &mut ControlPlane<'_>,
    ) -> bool {
        let Some(h) = self.h else {
            return false;
        };
        let found = self.cp.servers.iter_mut().find_map(|s| {
            s.qps.iter_mut().find_map(|(&q, r)| match r.fix_read {
                Some((req, epsn)) if req == request => {
                    r.fix_read = None;
                    Some((q, epsn, r.silent_hi))
                }
                _ => None,
            })
        });
        let Some((qp, epsn, silent_hi)) = found else {
            return false;
        };
        let hi = values.first().map_or(0, |&v| (v >> 32) as u32);
        if hi != silent_hi {
            self.cp.stats.watchdog_skips += 1;
            return true;
        }
        self.cp.stats.watchdog_fixes += 1;
        cp.register_write(h.next_psn, u64::from(qp), epsn & 0xFF_FFFF);
        cp.register_write(
            h.last_rsp_psn,
            u64::from(qp),
            epsn.wrapping_sub(1) & 0xFF_FFFF,
        );
        cp.register_write(h.outstanding, u64::from(qp), Pair::default());
        true
    }

    /// Rebuilds a QP that went to ERROR (spec §5.8): new incarnation and PSN.
    pub(crate) fn reset_qp(&mut self, q: u16, cp: &mut ControlPlane<'_>) {
        let (sid, _) = self.cfg.qp_owner(q);
        let init_psn = cp.rng().gen::<u32>() & 0xFF_FFFF;
        let Some(s) = self.cp.servers.get_mut(sid) else {
            return;
        };
        if s.phase != Phase::Up {
            return;
        }
        let Some(rec) = s.qps.get_mut(&q) else {
            return;
        };
        if rec.reset_pending {
            return;
        }
        rec.reset_pending = true;
        rec.incarnation = rec.incarnation.wrapping_add(1);
        rec.init_psn = init_psn;
        let pseudo = Self::pseudo_qpn(q, rec.incarnation);
        self.cp.stats.qp_resets += 1;
        self.send_agent(
            sid,
            Request::ResetQp {
                qp_idx: q,
                init_psn,
                remote_qpn: pseudo,
            },
            Purpose::ResetQp { qp: q },
            cp,
        );
    }

    pub(crate) fn on_agent_reply(
        &mut self,
        id: u32,
        p: AgentTag,
        r: Reply,
        cp: &mut ControlPlane<'_>,
    ) {
        let sid = p.sid;
        match (p.purpose, r) {
            (Purpose::Alloc { region, .. }, Reply::Region { base_va, rkey }) => {
                // [our choice] Same VA and R_Key as before means the same
                // registration, memory kept: R_Keys differ across restarts
                // (a restarted NIC registers anew), so a fresh region never
                // looks kept. A kept region taken for fresh would skip rows
                // that must be cleared; the other way round only costs writes.
                let s = &mut self.cp.servers[sid];
                if s.regions.insert(region, (base_va, rkey)) == Some((base_va, rkey)) {
                    s.kept_regions.insert(region);
                } else {
                    s.kept_regions.remove(&region);
                }
                self.setup_reply(sid, cp);
            }
            (
                Purpose::SetupQp { qp, .. },
                Reply::QpCreated { qpn, .. } | Reply::QpReset { qpn, .. },
            ) => {
                if let Some(rec) = self.cp.servers[sid].qps.get_mut(&qp) {
                    rec.qpn = qpn;
                }
                self.setup_reply(sid, cp);
            }
            (
                Purpose::SetupQp {
                    qp, create: false, ..
                },
                Reply::Error(_),
            ) => {
                // The agent lost its QPs (it restarted and its HELLO has
                // not arrived yet): create the QP instead.
                if !self.send_setup_qp(sid, qp, true, cp) {
                    self.server_down(sid, cp);
                }
            }
            (Purpose::Alloc { .. } | Purpose::SetupQp { .. }, _) => {
                // The agent refused: leave the server down; a later HELLO
                // or link-up retries.
                self.cp.stats.malformed += 1;
                self.server_down(sid, cp);
            }
            (Purpose::Write, _) => self.write_done(id),
            (Purpose::Reload { .. }, _) => {
                if let Phase::Reload { pending } = &mut self.cp.servers[sid].phase {
                    pending.remove(&id);
                    self.reload_more(sid, cp);
                }
            }
            (Purpose::Heartbeat { .. }, _) => {
                let s = &mut self.cp.servers[sid];
                s.hb_outstanding = false;
                s.missed = 0;
                if s.phase == Phase::Down && self.cp.table.is_some() {
                    self.start_setup(sid, false, cp);
                }
            }
            (Purpose::QpStatus { qp }, Reply::QpStatus { state, epsn, .. }) => {
                if let Some(rec) = self.cp.servers[sid].qps.get_mut(&qp) {
                    rec.status_pending = false;
                }
                if state == QpState::Error {
                    self.reset_qp(qp, cp);
                } else if let Some(h) = self.h {
                    // Rewinding `next_psn` to the NIC's ePSN is safe only if
                    // the QP is still stalled: a QP that made progress
                    // since has requests beyond that ePSN in flight, and
                    // rewinding would make the NIC take later lookups for
                    // duplicates (WRITEs not executed, READs answered with
                    // an older packet parked in the row). Re-read first.
                    let req = cp.register_read(h.outstanding, u64::from(qp), 1);
                    if let Some(rec) = self.cp.servers[sid].qps.get_mut(&qp) {
                        rec.fix_read = Some((req, epsn));
                    }
                }
            }
            (Purpose::QpStatus { qp }, _) => {
                if let Some(rec) = self.cp.servers[sid].qps.get_mut(&qp) {
                    rec.status_pending = false;
                }
            }
            (Purpose::ResetQp { qp }, reply) => {
                let (mac, ip) = self.cp.servers[sid].hello.map_or(
                    (self.cp.servers[sid].spec.mac, self.cp.servers[sid].spec.ip),
                    |h| (h.mac, h.ip),
                );
                if let Some(rec) = self.cp.servers[sid].qps.get_mut(&qp) {
                    rec.reset_pending = false;
                    if let Reply::QpReset { qpn, .. } = reply {
                        rec.qpn = qpn;
                    } else {
                        return;
                    }
                }
                self.install_qp(sid, qp, mac, ip, true, cp);
            }
        }
    }
}

/// The multicast group of server `sid` (two replicas to its port).
fn group_of(sid: usize) -> u16 {
    1 + sid as u16
}

#[cfg(test)]
mod tests {
    use super::*;

    fn servers() -> Servers {
        let spec = |i: u8| ServerSpec {
            port: PortId::from(2 + i),
            mac: [2, 0, 0, 0, 0, i],
            ip: Ipv4Addr::new(10, 0, 0, i),
        };
        Servers::new(&[spec(1), spec(2)])
    }

    #[test]
    fn three_missed_heartbeats_make_an_up_server_dead() {
        let mut s = servers();
        assert_eq!(s[0].heartbeat_tick(), Beat::Skip, "never heard from");
        s[0].phase = Phase::Install;
        assert!(s[0].installed() && !s[0].installed());
        assert!(!s.all_up());
        s[1].phase = Phase::Up;
        assert!(s.all_up());
        // Sent, then unanswered twice: still up; the third miss kills it.
        for _ in 0..3 {
            assert_eq!(s[0].heartbeat_tick(), Beat::Send);
        }
        assert_eq!(s[0].heartbeat_tick(), Beat::Dead);
        assert!(s[0].go_down() && !s[0].go_down());
        assert!(!s[0].hb_outstanding && s[0].is_down());
        assert_eq!(s[0].heartbeat_tick(), Beat::Skip, "down and no HELLO");
    }

    #[test]
    fn members_are_found_by_address_port_and_reads() {
        let mut s = servers();
        assert_eq!(s.by_ip(Ipv4Addr::new(10, 0, 0, 2), 0), Some(1));
        assert_eq!(s.by_ip(Ipv4Addr::new(10, 9, 9, 9), 1), Some(1), "by id");
        assert_eq!(s.by_ip(Ipv4Addr::new(10, 9, 9, 9), 2), None);
        assert_eq!((s.by_port(3), s.by_port(9)), (Some(0), None));
        s.await_setup(7, 1);
        assert_eq!(
            (s.take_setup_barrier(7), s.take_setup_barrier(7)),
            (Some(1), None)
        );
        s.watchdog_issued(8, 100);
        assert_eq!(s.take_watchdog_read(9), None);
        assert_eq!(s.take_watchdog_read(8), Some(100));
        assert_eq!(s.take_watchdog_read(8), None);
        s[1].phase = Phase::AwaitQuiet;
        assert!(s.recovering());
    }
}
