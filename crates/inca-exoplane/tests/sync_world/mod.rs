//! A deterministic model world for ExoPlane synchronisation (specs/exoplane.md
//! §5.6, §6 P5–P8): a switch register store, N devices' register stores and
//! daemons, the hub, packets adding random contributions at random copies,
//! and a seeded channel between hub and daemons that delays, reorders,
//! duplicates and (in lossy mode) drops SYNC messages. Devices crash (losing
//! registers, `I` and pending merges) and are rebuilt via DUMP + REJOIN; the
//! switch evicts and re-installs entries; device MERGE injection stalls
//! ("daemon pause") in lossy mode.
//!
//! The checker keeps its own books from the world's facts, not from the
//! algorithms' state: the true total A(t) per entry, each copy's own
//! contributions, the device's own total at every snapshot read (so at a
//! crash `Lost` = own − own-at-the-read-of-the-last-round-the-hub-processed).

use std::collections::{BTreeMap, BTreeSet};

use inca_exoplane::ids::{AppId, ObjId, Pdev, Round};
use inca_exoplane::sync::hub::HubConfig;
use inca_exoplane::sync::{
    Algebra, Daemon, DaemonOutput, DeviceStatus, EntryKey, HubOutput, Limits, Merge, MergeOp,
    Rejoin, SyncError, SyncHub, SyncReq, SyncResp, Variant, Width, T_C, T_RT,
};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

pub type Nanos = u64;
pub const US: Nanos = 1_000;
pub const MS: Nanos = 1_000_000;
pub const S: Nanos = 1_000_000_000;

/// Switch register read, 5 µs per entry (specs/exoplane.md §2.1 [our choice]).
const SW_READ: Nanos = 5 * US;
/// Switch CPU injection 2 µs + one pipeline pass (~0.3 µs, §2.1).
const SW_MERGE: Nanos = 3 * US;
/// Device register batch read, 1 ms per 1,000 entries (§2.1): a batch.
const DEV_READ: Nanos = MS;
/// Device CPU → pipeline injection, 20 µs (§2.1).
const DEV_MERGE: Nanos = 20 * US;

/// What a run injects.
#[derive(Clone, Copy, Debug)]
pub struct Faults {
    /// Drop SYNC_REQ/SYNC_RESP (at most one failed exchange per device in
    /// any two consecutive rounds, so the lag stays bounded).
    pub drops: bool,
    /// Device MERGE injection stalls up to `PAUSE_MAX` (same budget).
    pub pauses: bool,
    /// Crash devices (and some right after a reply, before its merge).
    pub crashes: bool,
}

/// Longest daemon pause: long enough that the next round's read would
/// overtake the stalled MERGE.
pub const PAUSE_MAX: Nanos = 1_400 * MS;
/// One-way management-network delay range (§2.1: 20 µs; we add jitter up
/// to 150 ms so messages reorder, still inside `T_rt` for a round trip).
const NET_MIN: Nanos = 20 * US;
const NET_MAX: Nanos = 150 * MS;

const TRAFFIC_UNTIL: Nanos = 6 * S;
const END: Nanos = TRAFFIC_UNTIL + PAUSE_MAX + NET_MAX + 3 * T_C + 100 * MS;

impl Faults {
    /// The lag bound B of P5 for this fault set: the spec's
    /// 2·(T_c + T_rt) + merge latency, plus one lost round per hop (2·T_c)
    /// and the longest pause when exchanges may fail.
    pub fn bound(self) -> Nanos {
        let base = 2 * (T_C + T_RT) + DEV_MERGE + SW_MERGE;
        if self.drops || self.pauses {
            base + 2 * T_C + PAUSE_MAX
        } else {
            base
        }
    }
}

#[derive(Clone, Debug)]
enum ToDev {
    Req(SyncReq),
    Rejoin(Rejoin),
}

#[derive(Clone, Debug)]
enum ToHub {
    Resp(SyncResp),
    RejoinDone,
}

#[derive(Clone, Debug)]
enum Ev {
    Packet,
    HubTimer,
    ToDev {
        d: usize,
        inc: u32,
        msg: ToDev,
    },
    ToHub {
        d: usize,
        inc: u32,
        msg: ToHub,
    },
    SwRead(usize),
    SwMerge(usize, u64),
    DevRead {
        d: usize,
        inc: u32,
        k: usize,
        round: Round,
    },
    DevMerge {
        d: usize,
        inc: u32,
        k: usize,
        delta: u64,
    },
    Crash(usize),
    Restart(usize),
    Toggle(usize),
    AddHolder(usize),
}

struct Ent {
    key: EntryKey,
    m: Merge,
    holders: Vec<usize>,
    /// True total (group) or join (semilattice) of every contribution.
    total: u64,
    /// `(t, total)` after each contribution, for A(t − B).
    hist: Vec<(Nanos, u64)>,
    lost: u64,
    /// Semilattice: contributions of crashed incarnations the hub covered.
    retired: u64,
    sw_own: u64,
    /// When the switch copy's lower bound is due (see `note_shared`).
    sw_due_from: Nanos,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum St {
    Up,
    Down,
    Rebuilding,
}

struct Dev {
    st: St,
    inc: u32,
    regs: BTreeMap<usize, u64>,
    daemon: Option<Daemon>,
    /// Own contributions per entry (what this device added and has not lost).
    own: BTreeMap<usize, u64>,
    /// Own contributions at the start of this incarnation (restored by REJOIN).
    base: BTreeMap<usize, u64>,
    /// Own contributions at each round's snapshot read, this incarnation.
    at_read: BTreeMap<(usize, Round), u64>,
    /// New copies (entry → time the lower bound is due): a copy created at
    /// `0̸` (a new holder) or at `H` (REJOIN) at time t is checked from t + B.
    due_from: BTreeMap<usize, Nanos>,
    pause_until: Nanos,
    last_fault_round: Option<Round>,
}

/// A copy of an entry, for messages.
#[derive(Clone, Copy, Debug)]
enum Copy {
    /// The switch register, or `S_cp` while the switch does not hold it.
    Switch,
    Device(usize),
}

impl std::fmt::Display for Copy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Copy::Switch => write!(f, "switch"),
            Copy::Device(d) => write!(f, "device {d}"),
        }
    }
}

/// Facts a run reports.
#[derive(Clone, Debug, Default)]
pub struct RunStats {
    pub checks: u64,
    pub max_lag: Nanos,
    pub crashes: u64,
    pub rejoins: u64,
    pub evictions: u64,
    pub drops: u64,
    pub dups: u64,
    pub pauses: u64,
    pub rounds: u64,
    pub lost: u64,
    /// Hub: SYNC_RESPs discarded as stale, duplicate or unasked; rounds timed out.
    pub resp_discarded: u64,
    pub rounds_timed_out: u64,
    /// Daemons (last incarnation only): stale requests, abandoned jobs.
    pub req_stale: u64,
    pub abandoned: u64,
}

pub struct World {
    rng: ChaCha8Rng,
    now: Nanos,
    seq: u64,
    q: BTreeMap<(Nanos, u64), Ev>,
    hub: SyncHub,
    hub_timer: Option<Nanos>,
    ents: Vec<Ent>,
    sw: BTreeMap<usize, u64>,
    serving: BTreeSet<usize>,
    devs: Vec<Dev>,
    faults: Faults,
    variant: Variant,
    /// Check P8 directly at REJOIN_DONE (off: leave it to P5/P6).
    p8: bool,
    pub stats: RunStats,
}

fn pdev(d: usize) -> Pdev {
    Pdev(d as u16)
}

impl World {
    pub fn new(seed: u64, faults: Faults, variant: Variant) -> World {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let n = rng.gen_range(2..=4usize);
        let hub = SyncHub::new(
            0,
            HubConfig {
                variant,
                ..HubConfig::default()
            },
        );
        let devs = (0..n)
            .map(|d| Dev {
                st: St::Up,
                inc: 0,
                regs: BTreeMap::new(),
                daemon: Some(Daemon::new(pdev(d), 0, Limits::default()).with_variant(variant)),
                own: BTreeMap::new(),
                base: BTreeMap::new(),
                at_read: BTreeMap::new(),
                due_from: BTreeMap::new(),
                pause_until: 0,
                last_fault_round: None,
            })
            .collect();
        let mut w = World {
            rng,
            now: 0,
            seq: 0,
            q: BTreeMap::new(),
            hub,
            hub_timer: None,
            ents: Vec::new(),
            sw: BTreeMap::new(),
            serving: BTreeSet::new(),
            devs,
            faults,
            variant,
            p8: true,
            stats: RunStats::default(),
        };
        let kinds = [
            Merge::new(MergeOp::Add, Width::W32),
            Merge::new(MergeOp::Add, Width::W32),
            Merge::new(MergeOp::Add, Width::W8),
            Merge::new(MergeOp::Or, Width::W16),
            Merge::new(MergeOp::Max, Width::W64),
        ];
        for (k, m) in kinds.into_iter().enumerate() {
            let key = EntryKey {
                app: AppId(1 + (k % 2) as u8),
                obj: ObjId(k as u16),
                key: vec![k as u8, 0xab],
            };
            let mut holders: Vec<usize> = (0..n).filter(|_| w.rng.gen_bool(0.6)).collect();
            if holders.is_empty() {
                holders.push(w.rng.gen_range(0..n));
            }
            let on_switch = holders.len() < 2 || w.rng.gen_bool(0.5);
            for &d in &holders {
                w.hub.add_holder(&key, m, pdev(d)).unwrap();
                w.devs[d].regs.insert(k, 0);
                w.devs[d].own.insert(k, 0);
                w.devs[d].base.insert(k, 0);
                let daemon = w.devs[d].daemon.as_mut().unwrap();
                daemon.add_entry(&key, m).unwrap();
            }
            w.ents.push(Ent {
                key,
                m,
                holders,
                total: 0,
                hist: vec![(0, 0)],
                lost: 0,
                retired: 0,
                sw_own: 0,
                sw_due_from: 0,
            });
            if on_switch {
                w.install(k);
            }
            let t = w.rng.gen_range(300 * MS..2 * S);
            w.at(t, Ev::Toggle(k));
        }
        // An entry on one device that becomes shared when a second device
        // gains a copy (§5.6 lifecycle); the switch may take it later.
        let k = w.ents.len();
        let key = EntryKey {
            app: AppId(3),
            obj: ObjId(9),
            key: vec![0xcc],
        };
        let m = Merge::new(MergeOp::Add, Width::W32);
        let d = w.rng.gen_range(0..n);
        w.hub.add_holder(&key, m, pdev(d)).unwrap();
        assert!(!w.hub.is_shared(&key));
        w.devs[d].regs.insert(k, 0);
        w.devs[d].own.insert(k, 0);
        w.devs[d].base.insert(k, 0);
        w.devs[d]
            .daemon
            .as_mut()
            .unwrap()
            .add_entry(&key, m)
            .unwrap();
        w.ents.push(Ent {
            key,
            m,
            holders: vec![d],
            total: 0,
            hist: vec![(0, 0)],
            lost: 0,
            retired: 0,
            sw_own: 0,
            sw_due_from: 0,
        });
        let t = w.rng.gen_range(200 * MS..3 * S);
        w.at(t, Ev::AddHolder(k));
        w.at(MS, Ev::Packet);
        if faults.crashes {
            for _ in 0..w.rng.gen_range(1..=3) {
                let d = w.rng.gen_range(0..n);
                let t = w.rng.gen_range(500 * MS..TRAFFIC_UNTIL - 3 * S);
                w.at(t, Ev::Crash(d));
            }
        }
        w
    }

    fn at(&mut self, t: Nanos, ev: Ev) {
        self.seq += 1;
        self.q.insert((t, self.seq), ev);
    }

    /// Runs to the end; the first violated property as an error.
    pub fn run(mut self) -> Result<RunStats, String> {
        self.sync_timer();
        while let Some(((t, _), ev)) = self.q.pop_first() {
            if t > END {
                break;
            }
            self.now = t;
            self.step(ev)?;
            self.drain()?;
            self.sync_timer();
            self.check_bounds()?;
        }
        self.now = END;
        self.check_converged()?;
        let h = self.hub.stats();
        self.stats.rounds = h.rounds;
        self.stats.resp_discarded = h.resp_stale + h.resp_duplicate + h.resp_not_asked;
        self.stats.rounds_timed_out = h.rounds_timed_out;
        for x in self.devs.iter().filter_map(|d| d.daemon.as_ref()) {
            self.stats.req_stale += x.stats().req_stale;
            self.stats.abandoned += x.stats().abandoned;
        }
        self.stats.lost = self.ents.iter().map(|e| e.lost).sum();
        Ok(self.stats)
    }

    fn sync_timer(&mut self) {
        let t = self.hub.poll_timeout().max(self.now);
        if self.hub_timer != Some(t) {
            self.hub_timer = Some(t);
            self.at(t, Ev::HubTimer);
        }
    }

    fn faults_on(&self) -> bool {
        self.now < TRAFFIC_UNTIL
    }

    /// May device `d` suffer a failed exchange now (one per two rounds)?
    fn fault_budget(&mut self, d: usize) -> bool {
        let r = self.hub.round();
        match self.devs[d].last_fault_round {
            Some(f) if r <= f + 1 => false,
            _ => {
                self.devs[d].last_fault_round = Some(r + 1);
                true
            }
        }
    }

    fn delay(&mut self) -> Nanos {
        self.rng.gen_range(NET_MIN..NET_MAX)
    }

    fn send_dev(&mut self, d: usize, msg: ToDev) {
        let inc = self.devs[d].inc;
        if matches!(msg, ToDev::Req(_))
            && self.faults.drops
            && self.faults_on()
            && self.rng.gen_bool(0.1)
            && self.fault_budget(d)
        {
            self.stats.drops += 1;
            return;
        }
        let t = self.now + self.delay();
        if matches!(msg, ToDev::Req(_)) && self.rng.gen_bool(0.1) {
            self.stats.dups += 1;
            let t2 = self.now + self.delay() + self.delay();
            self.at(
                t2,
                Ev::ToDev {
                    d,
                    inc,
                    msg: msg.clone(),
                },
            );
        }
        self.at(t, Ev::ToDev { d, inc, msg });
    }

    fn send_hub(&mut self, d: usize, msg: ToHub) {
        let inc = self.devs[d].inc;
        if matches!(msg, ToHub::Resp(_))
            && self.faults.drops
            && self.faults_on()
            && self.rng.gen_bool(0.1)
            && self.fault_budget(d)
        {
            self.stats.drops += 1;
            return;
        }
        let t = self.now + self.delay();
        if matches!(msg, ToHub::Resp(_)) && self.rng.gen_bool(0.1) {
            self.stats.dups += 1;
            let t2 = self.now + self.delay();
            self.at(
                t2,
                Ev::ToHub {
                    d,
                    inc,
                    msg: msg.clone(),
                },
            );
        }
        self.at(t, Ev::ToHub { d, inc, msg });
    }

    fn install(&mut self, k: usize) {
        let (key, m) = (self.ents[k].key.clone(), self.ents[k].m);
        let was_shared = self.hub.is_shared(&key);
        match self.hub.switch_install(&key, m) {
            Ok(v) => {
                self.sw.insert(k, v);
                self.serving.insert(k);
                self.note_shared(k, was_shared);
            }
            Err(SyncError::Evicting) => {}
            Err(e) => panic!("install refused: {e}"),
        }
    }

    fn step(&mut self, ev: Ev) -> Result<(), String> {
        match ev {
            Ev::Packet => {
                self.packet();
                if self.now < TRAFFIC_UNTIL {
                    let t = self.now + self.rng.gen_range(MS..15 * MS);
                    self.at(t, Ev::Packet);
                }
            }
            Ev::HubTimer => {
                self.hub_timer = None;
                self.hub.handle_timeout(self.now);
            }
            Ev::ToDev { d, inc, msg } => {
                if self.devs[d].inc != inc {
                    return Ok(()); // the connection of a dead incarnation
                }
                if let Some(daemon) = self.devs[d].daemon.as_mut() {
                    match msg {
                        ToDev::Req(req) => daemon.handle_sync_req(&req),
                        ToDev::Rejoin(rj) => daemon.handle_rejoin(&rj),
                    }
                }
            }
            Ev::ToHub { d, inc, msg } => {
                if self.devs[d].inc != inc {
                    return Ok(());
                }
                match msg {
                    ToHub::Resp(resp) => self.hub.handle_sync_resp(self.now, pdev(d), &resp),
                    ToHub::RejoinDone => {
                        self.hub.rejoin_done(pdev(d));
                        self.devs[d].st = St::Up;
                        let due = self.now + self.faults.bound();
                        for k in self.devs[d].regs.keys().copied().collect::<Vec<_>>() {
                            self.devs[d].due_from.insert(k, due);
                        }
                    }
                }
            }
            Ev::SwRead(k) => {
                let v = self
                    .sw
                    .get(&k)
                    .copied()
                    .ok_or("switch read of a removed slot")?;
                let key = self.ents[k].key.clone();
                self.hub.handle_switch_read(self.now, &key, v);
            }
            Ev::SwMerge(k, delta) => {
                let m = self.ents[k].m;
                let reg = self
                    .sw
                    .get_mut(&k)
                    .ok_or("MERGE into a removed switch slot")?;
                *reg = m.combine(*reg, delta);
                let key = self.ents[k].key.clone();
                self.hub.handle_merge_ack(self.now, &key);
            }
            Ev::DevRead { d, inc, k, round } => {
                let dev = &mut self.devs[d];
                if dev.inc != inc {
                    return Ok(());
                }
                let v = dev.regs[&k];
                dev.at_read.insert((k, round), dev.own[&k]);
                let key = self.ents[k].key.clone();
                if let Some(daemon) = dev.daemon.as_mut() {
                    daemon.handle_register_read(&key, round, v);
                }
            }
            Ev::DevMerge { d, inc, k, delta } => {
                let m = self.ents[k].m;
                let dev = &mut self.devs[d];
                if dev.inc != inc {
                    return Ok(());
                }
                let reg = dev
                    .regs
                    .get_mut(&k)
                    .ok_or("device MERGE into a missing slot")?;
                *reg = m.combine(*reg, delta);
                let key = self.ents[k].key.clone();
                if let Some(daemon) = dev.daemon.as_mut() {
                    daemon.handle_merge_ack(&key);
                }
            }
            Ev::AddHolder(k) => self.add_holder(k),
            Ev::Crash(d) => self.crash(d),
            Ev::Restart(d) => self.restart(d),
            Ev::Toggle(k) => {
                if self.serving.contains(&k) {
                    // FM entry deleted and T_flush passed: no packet uses it now.
                    self.serving.remove(&k);
                    self.stats.evictions += 1;
                    let key = self.ents[k].key.clone();
                    self.hub
                        .switch_evict(self.now, &key)
                        .map_err(|e| e.to_string())?;
                } else if !self.sw.contains_key(&k) {
                    self.install(k);
                }
                if self.faults_on() {
                    let t = self.now + self.rng.gen_range(300 * MS..2 * S);
                    self.at(t, Ev::Toggle(k));
                }
            }
        }
        Ok(())
    }

    /// One packet: a contribution at a random copy that serves the entry.
    fn packet(&mut self) {
        let k = self.rng.gen_range(0..self.ents.len());
        let mut sites: Vec<Option<usize>> = Vec::new();
        if self.serving.contains(&k) {
            sites.push(None);
        }
        for &d in &self.ents[k].holders {
            if self.devs[d].st == St::Up {
                sites.push(Some(d));
            }
        }
        if sites.is_empty() {
            return;
        }
        let site = sites[self.rng.gen_range(0..sites.len())];
        let e = &mut self.ents[k];
        let x = match e.m.op() {
            MergeOp::Add => self.rng.gen_range(1..=3),
            MergeOp::Or => 1 << self.rng.gen_range(0..e.m.width().bits()),
            MergeOp::Max => self.rng.gen_range(0..1_000_000),
        };
        let m = e.m;
        e.total = m.combine(e.total, x);
        e.hist.push((self.now, e.total));
        match site {
            None => {
                e.sw_own = m.combine(e.sw_own, x);
                let reg = self.sw.get_mut(&k).expect("serving implies a slot");
                *reg = m.combine(*reg, x);
            }
            Some(d) => {
                let dev = &mut self.devs[d];
                let own = dev.own.get_mut(&k).expect("holder has own");
                *own = m.combine(*own, x);
                let reg = dev.regs.get_mut(&k).expect("up holder has a slot");
                *reg = m.combine(*reg, x);
            }
        }
    }

    /// An entry that just became shared has a new hub copy `S_cp = 0̸`
    /// (or a switch register installed at it): checked from now + B.
    fn note_shared(&mut self, k: usize, was_shared: bool) {
        if !was_shared && self.hub.is_shared(&self.ents[k].key) {
            self.ents[k].sw_due_from = self.now + self.faults.bound();
        }
    }

    /// A device that is UP gains a copy of `k` at 0̸ (WRITE_APPLY of a new
    /// flow on its shard); it is behind until its first round.
    fn add_holder(&mut self, k: usize) {
        let e = &self.ents[k];
        let up: Vec<usize> = (0..self.devs.len())
            .filter(|d| !e.holders.contains(d) && self.devs[*d].st == St::Up)
            .collect();
        if up.is_empty() {
            self.at(self.now + 100 * MS, Ev::AddHolder(k));
            return;
        }
        let d = up[self.rng.gen_range(0..up.len())];
        let (key, m) = (e.key.clone(), e.m);
        let was_shared = self.hub.is_shared(&key);
        self.hub.add_holder(&key, m, pdev(d)).unwrap();
        self.ents[k].holders.push(d);
        let dev = &mut self.devs[d];
        dev.regs.insert(k, 0);
        dev.own.insert(k, 0);
        dev.base.insert(k, 0);
        dev.daemon.as_mut().unwrap().add_entry(&key, m).unwrap();
        dev.due_from.insert(k, self.now + self.faults.bound());
        self.note_shared(k, was_shared);
        let t = self.now + self.rng.gen_range(300 * MS..2 * S);
        self.at(t, Ev::Toggle(k));
    }

    fn crash(&mut self, d: usize) {
        if self.devs[d].st == St::Down {
            return;
        }
        self.stats.crashes += 1;
        let processed = self.hub.last_processed_round(pdev(d));
        for k in 0..self.ents.len() {
            let Some(&own) = self.devs[d].own.get(&k) else {
                continue;
            };
            let dev = &self.devs[d];
            let covered = processed
                .and_then(|r| dev.at_read.get(&(k, r)).copied())
                .unwrap_or(dev.base[&k]);
            let e = &mut self.ents[k];
            match e.m.algebra() {
                Algebra::Group => {
                    e.lost = e.lost.wrapping_add(own.wrapping_sub(covered));
                    self.devs[d].own.insert(k, covered);
                }
                Algebra::Semilattice => {
                    e.retired = e.m.combine(e.retired, covered);
                    self.devs[d].own.insert(k, 0);
                }
            }
        }
        let dev = &mut self.devs[d];
        dev.st = St::Down;
        dev.inc += 1;
        dev.regs.clear();
        dev.daemon = None;
        dev.at_read.clear();
        dev.due_from.clear();
        dev.pause_until = 0;
        self.hub.device_down(self.now, pdev(d));
        if self.rng.gen_bool(0.8) {
            let t = self.now + self.rng.gen_range(50 * MS..1_500 * MS);
            self.at(t, Ev::Restart(d));
        }
    }

    fn restart(&mut self, d: usize) {
        if self.devs[d].st != St::Down {
            return;
        }
        self.stats.rejoins += 1;
        let mut daemon =
            Daemon::new(pdev(d), self.hub.round(), Limits::default()).with_variant(self.variant);
        let dev = &mut self.devs[d];
        dev.st = St::Rebuilding;
        // DUMP: every entry the device holds, slots at 0̸.
        for (k, e) in self.ents.iter().enumerate() {
            if e.holders.contains(&d) {
                dev.regs.insert(k, 0);
                daemon.add_entry(&e.key, e.m).unwrap();
                dev.base.insert(k, dev.own[&k]);
            }
        }
        dev.daemon = Some(daemon);
        let rejoin = self.hub.begin_rejoin(self.now, pdev(d));
        let t = self.now + self.delay();
        let inc = self.devs[d].inc;
        self.at(
            t,
            Ev::ToDev {
                d,
                inc,
                msg: ToDev::Rejoin(rejoin),
            },
        );
    }

    /// Carry out every output of the hub and the daemons.
    fn drain(&mut self) -> Result<(), String> {
        loop {
            let mut progressed = false;
            while let Some(o) = self.hub.poll_output() {
                progressed = true;
                self.hub_output(o)?;
            }
            for d in 0..self.devs.len() {
                while let Some(o) = self.devs[d].daemon.as_mut().and_then(|x| x.poll_output()) {
                    progressed = true;
                    self.daemon_output(d, o)?;
                }
            }
            if !progressed {
                return Ok(());
            }
        }
    }

    fn index(&self, key: &EntryKey) -> usize {
        self.ents
            .iter()
            .position(|e| &e.key == key)
            .expect("known entry")
    }

    fn hub_output(&mut self, o: HubOutput) -> Result<(), String> {
        match o {
            HubOutput::ReadSwitch { entry } => {
                let k = self.index(&entry);
                self.at(self.now + SW_READ, Ev::SwRead(k));
            }
            HubOutput::Merge(cmd) => {
                let k = self.index(&cmd.entry);
                self.at(self.now + SW_MERGE, Ev::SwMerge(k, cmd.delta));
            }
            HubOutput::RemoveSwitchSlot { entry } => {
                let k = self.index(&entry);
                self.sw.remove(&k).ok_or("removing a slot twice")?;
            }
            HubOutput::SyncReq { pdev, req } => self.send_dev(pdev.0 as usize, ToDev::Req(req)),
        }
        Ok(())
    }

    fn daemon_output(&mut self, d: usize, o: DaemonOutput) -> Result<(), String> {
        let inc = self.devs[d].inc;
        match o {
            DaemonOutput::ReadRegister { entry, round } => {
                let k = self.index(&entry);
                self.at(self.now + DEV_READ, Ev::DevRead { d, inc, k, round });
            }
            DaemonOutput::Merge(cmd) => {
                let k = self.index(&cmd.entry);
                let mut t = (self.now + DEV_MERGE).max(self.devs[d].pause_until);
                if self.faults.pauses && self.faults_on() && self.rng.gen_bool(0.1) && {
                    let r = self.hub.round();
                    // The stall also fails the next round's exchange.
                    self.fault_budget(d) && {
                        self.devs[d].last_fault_round = Some(r + 2);
                        true
                    }
                } {
                    self.stats.pauses += 1;
                    t = self.now + self.rng.gen_range(DEV_MERGE..PAUSE_MAX);
                    self.devs[d].pause_until = t;
                }
                self.at(
                    t,
                    Ev::DevMerge {
                        d,
                        inc,
                        k,
                        delta: cmd.delta,
                    },
                );
            }
            DaemonOutput::SetRegister { entry, value } => {
                let k = self.index(&entry);
                self.devs[d].regs.insert(k, value);
            }
            DaemonOutput::SyncResp(resp) => {
                let pending = self.devs[d]
                    .daemon
                    .as_ref()
                    .map_or(0, |x| x.pending_merges());
                self.send_hub(d, ToHub::Resp(resp));
                // P7: a device failing between its reply and its merge.
                if self.faults.crashes
                    && pending > 0
                    && self.now + 3 * S < TRAFFIC_UNTIL
                    && self.rng.gen_bool(0.03)
                {
                    self.at(self.now + 5 * US, Ev::Crash(d));
                }
            }
            DaemonOutput::RejoinDone => {
                // P8: the rebuilt device's registers hold its past contributions.
                for (k, e) in self.ents.iter().enumerate().filter(|_| self.p8) {
                    let dev = &self.devs[d];
                    if e.m.algebra() == Algebra::Group && e.holders.contains(&d) {
                        let (reg, base) = (dev.regs[&k], e.m.canon(dev.base[&k]));
                        if reg != base {
                            return Err(format!(
                                "P8: device {d} rejoined entry {k} at {reg}, its contributions are {base}"
                            ));
                        }
                    }
                }
                let t = self.now + self.delay();
                self.at(
                    t,
                    Ev::ToHub {
                        d,
                        inc,
                        msg: ToHub::RejoinDone,
                    },
                );
            }
        }
        Ok(())
    }

    /// Every copy's value: the switch register or `S_cp`, and each UP holder.
    fn copies(&self, k: usize) -> Vec<(Copy, u64, bool)> {
        let e = &self.ents[k];
        let sw = match self.sw.get(&k) {
            Some(&v) => v,
            None => self.hub.s_cp(&e.key).unwrap_or(0),
        };
        if !self.hub.is_shared(&e.key) {
            // One copy only: nothing to synchronise, the device's is exact.
            return self.ents[k]
                .holders
                .iter()
                .filter(|&&d| self.devs[d].st == St::Up)
                .map(|&d| (Copy::Device(d), self.devs[d].regs[&k], true))
                .collect();
        }
        let mut v = vec![(Copy::Switch, sw, self.now >= e.sw_due_from)];
        for &d in &e.holders {
            let dev = &self.devs[d];
            if dev.st == St::Up && self.hub.status(pdev(d)) == DeviceStatus::Up {
                let due = dev.due_from.get(&k).is_none_or(|&t| self.now >= t);
                v.push((Copy::Device(d), dev.regs[&k], due));
            }
        }
        v
    }

    /// P5 for ADD counters wide enough not to wrap in a run.
    fn check_bounds(&mut self) -> Result<(), String> {
        let b = self.faults.bound();
        for k in 0..self.ents.len() {
            let e = &self.ents[k];
            if e.m.op() != MergeOp::Add || e.m.width().bits() < 32 {
                continue;
            }
            let a_now = e.total;
            let a_then = total_at(&e.hist, self.now.saturating_sub(b));
            for (name, v, lower_due) in self.copies(k) {
                self.stats.checks += 1;
                if v > a_now {
                    return Err(format!(
                        "P5 over-count: {name} holds {v} of entry {k}, true total {a_now} at t={}",
                        self.now
                    ));
                }
                let e = &self.ents[k];
                if lower_due {
                    if v + e.lost < a_then {
                        return Err(format!(
                            "P5 lag: {name} holds {v} of entry {k} (lost {}), total was {a_then} at t-B={} (t={})",
                            e.lost,
                            self.now.saturating_sub(b),
                            self.now
                        ));
                    }
                    if let Some(t) = first_time_above(&e.hist, v + e.lost) {
                        self.stats.max_lag = self.stats.max_lag.max(self.now - t);
                    }
                }
            }
        }
        Ok(())
    }

    /// P6: two complete rounds after traffic and faults stop, every copy
    /// equals the total of the surviving contributions.
    fn check_converged(&self) -> Result<(), String> {
        for (k, e) in self.ents.iter().enumerate() {
            let m = e.m;
            let mut want = m.combine(e.sw_own, e.retired);
            for &d in &e.holders {
                want = m.combine(want, self.devs[d].own[&k]);
            }
            if m.algebra() == Algebra::Group && want != m.canon(e.total.wrapping_sub(e.lost)) {
                return Err(format!(
                    "world books: entry {k} sums to {want}, total − lost differs"
                ));
            }
            for (name, v, _) in self.copies(k) {
                if v != want {
                    return Err(format!(
                        "P6: {name} holds {v} of entry {k} ({:?}), surviving total {want} (total {}, lost {})",
                        m, e.total, e.lost
                    ));
                }
            }
        }
        Ok(())
    }
}

/// A(t): the total after the last contribution at or before `t`.
fn total_at(hist: &[(Nanos, u64)], t: Nanos) -> u64 {
    let i = hist.partition_point(|&(at, _)| at <= t);
    hist[i.saturating_sub(1)].1
}

/// The time the total first exceeded `v`, if it has: since then a copy
/// holding `v` has been behind.
fn first_time_above(hist: &[(Nanos, u64)], v: u64) -> Option<Nanos> {
    let i = hist.partition_point(|&(_, a)| a <= v);
    hist.get(i).map(|&(t, _)| t)
}

/// Runs `seeds` and returns the first failure with its seed.
pub fn run_seeds(
    seeds: std::ops::Range<u64>,
    faults: Faults,
    variant: Variant,
    p8: bool,
) -> Result<RunStats, (u64, String)> {
    let mut sum = RunStats::default();
    for seed in seeds {
        let mut w = World::new(seed, faults, variant);
        w.p8 = p8;
        let s = w.run().map_err(|e| (seed, e))?;
        sum.checks += s.checks;
        sum.max_lag = sum.max_lag.max(s.max_lag);
        sum.crashes += s.crashes;
        sum.rejoins += s.rejoins;
        sum.evictions += s.evictions;
        sum.drops += s.drops;
        sum.dups += s.dups;
        sum.pauses += s.pauses;
        sum.rounds += s.rounds;
        sum.lost += s.lost;
        sum.resp_discarded += s.resp_discarded;
        sum.rounds_timed_out += s.rounds_timed_out;
        sum.req_stale += s.req_stale;
        sum.abandoned += s.abandoned;
    }
    Ok(sum)
}
