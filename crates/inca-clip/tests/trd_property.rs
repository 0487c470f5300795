//! Property 14 (spec §6, §7.2) and E8 (§8.2) on the switch and one CLIP
//! server in the test fabric: TCP connections — plain, and in VXLAN with
//! the same inner 5-tuple under several VNIs — start on the slow path,
//! move to the fast path when the test (standing in for the controller)
//! installs their `conn_idx` entry on CONN_NEW, and close with FIN; their
//! indices are released T_release later, once the switch acks the delete.
//!
//! Checked, per connection: an in-order stream (with or without its SYN,
//! with pure ACKs) reports no retransmission across the slow→fast
//! handover; each injected retransmission (data, SYN or FIN, sent at least
//! 300 µs after the original: TCP resends after an RTO or duplicate ACKs,
//! never within the slow path's few-µs round trip) is reported exactly
//! once, by the switch register or, for a connection without an index, by
//! the server; indices are unique among live connections and reused only
//! after T_release and the delete ack. A segment overtaken by a later one
//! (reordering, injected on the fast path) is reported once too: the
//! max-end rule cannot tell a late segment from a resent one, by design.
//!
//! The server's slice (48 indices) is smaller than the first wave (64
//! connections), so 16 connections run software-only; the second wave
//! starts after the first's indices were released and reuses them.

use std::collections::BTreeMap;

use inca_apps::l2l3::{Entry as L3Entry, NextHop, L2L3};
use inca_clip::apps::trd::{
    ConnInfo, TrdHandler, TrdSwitch, POOL_INDICES, TABLE_CONN_IDX, T_RELEASE_NS,
};
use inca_clip::experiments::trd::frame;
use inca_clip::server::{ClipRuntime, RuntimeConfig};
use inca_clip::switch::scalability::ScaleSizes;
use inca_clip::switch::{ClipSwitch, Command, Driver, DriverConfig, Report, ServerLink};
use inca_clip::FlowKey;
use inca_server::{MultiCoreServer, PortMacs, ServerConfig};
use inca_switch::device::Nanos;
use inca_switch::fabric::{Fabric, NodeIx, Wire};
use inca_switch::{Profile, Switch};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

type Server = MultiCoreServer<ClipRuntime<TrdHandler>>;
type TrdSw = Switch<ClipSwitch<TrdSwitch>>;

const SEEDS: [u64; 3] = [0x7D0E_0001, 0x7D0E_0002, 0x7D0E_0003];
const NET_IN: u16 = 0;
const NET_OUT: u16 = 1;
const SRV_PORT: u16 = 2;
const US: Nanos = 1_000;
const MS: Nanos = 1_000_000;
/// The controller's step, which is also its reaction time (about the
/// one-way CLIP-CTL latency, §4.5: 50 µs).
const STEP: Nanos = 50 * US;
/// R, and the server's slice.
const R: u32 = 4096;
const SLICE: (u32, u32) = (100, 147);
/// Connections per wave, and when the waves start.
const PER_WAVE: usize = 64;
const WAVES: [Nanos; 2] = [MS, 2_300 * MS];

const SYN: u8 = 0x02;
const FIN: u8 = 0x01;
const ACK: u8 = 0x10;
const PSH: u8 = 0x08;

/// What a connection's stream holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// SYN, data in order, FIN.
    InOrder,
    /// No SYN: the first packet is data.
    MidStream,
    /// In order plus resent segments.
    Retx,
    /// In order but adjacent data segments swapped on the fast path.
    Reorder,
}

/// One connection of the workload.
#[derive(Debug, Clone)]
struct Conn {
    flow: FlowKey,
    kind: Kind,
    /// (time, flags, seq, payload length).
    sends: Vec<(Nanos, u8, u32, usize)>,
    /// Reports expected.
    expected: u64,
    fin_at: Nanos,
}

/// Connection `i` of wave `w`: its key (VXLAN: VNIs 10 and 11 share inner
/// 5-tuples pairwise) and its stream.
fn conn(rng: &mut ChaCha8Rng, w: usize, i: usize, vxlan: bool, start: Nanos) -> Conn {
    let n = (w * PER_WAVE + i) as u16;
    let flow = if vxlan {
        let vni = 10 + u32::from(n % 2);
        FlowKey::new(vni, 6, [10, 1, 0, 1], [10, 2, 0, 1], 20_000 + n / 2, 443)
    } else {
        FlowKey::new(
            0,
            6,
            [10, 1, 0, (n % 200) as u8],
            [10, 2, 0, 1],
            20_000 + n,
            80,
        )
    };
    let kind = match rng.gen_range(0..20) {
        0..=7 => Kind::InOrder,
        8..=10 => Kind::MidStream,
        11..=16 => Kind::Retx,
        _ => Kind::Reorder,
    };
    let mut t = start + rng.gen_range(0..5 * MS);
    let isn: u32 = rng.gen();
    let mut sends = Vec::new();
    let mut seq = isn;
    if kind != Kind::MidStream {
        sends.push((t, SYN, isn, 0));
        seq = isn.wrapping_add(1);
    }
    // 50-75 ms of data: the handover (CONN_NEW batched within 10 ms, then
    // the install) falls early in it.
    for _ in 0..rng.gen_range(170..250) {
        t += rng.gen_range(150 * US..450 * US);
        let len = if rng.gen_bool(0.1) {
            0
        } else {
            rng.gen_range(1..1400)
        };
        sends.push((t, ACK | PSH, seq, len));
        seq = seq.wrapping_add(len as u32);
    }
    t += 300 * US;
    let fin_at = t;
    sends.push((t, FIN | ACK, seq, 0));
    let mut expected = 0;
    match kind {
        Kind::Retx => {
            // Resend 1-4 segments that occupy sequence space (data, SYN,
            // FIN), each 0.3-3 ms after its original.
            let candidates: Vec<usize> = (0..sends.len())
                .filter(|&j| sends[j].3 > 0 || sends[j].1 & (SYN | FIN) != 0)
                .collect();
            for _ in 0..rng.gen_range(1..=4) {
                let j = candidates[rng.gen_range(0..candidates.len())];
                let (at, flags, s, len) = sends[j];
                sends.push((at + rng.gen_range(300 * US..3 * MS), flags, s, len));
                expected += 1;
            }
        }
        Kind::Reorder => {
            // Swap 1-3 pairs of adjacent data segments, 35 ms or more into
            // the stream (long after the handover).
            let from = sends[0].0 + 35 * MS;
            let pairs: Vec<usize> = (1..sends.len() - 2)
                .filter(|&j| sends[j].0 >= from && sends[j].3 > 0 && sends[j + 1].3 > 0)
                .collect();
            let mut used: Vec<usize> = Vec::new();
            for _ in 0..rng.gen_range(1..=3) {
                let j = pairs[rng.gen_range(0..pairs.len())];
                if used.iter().any(|&u| u.abs_diff(j) < 2) {
                    continue;
                }
                used.push(j);
                // j+1 leaves at j's time, j 5 µs later: j is late.
                let tj = sends[j].0;
                sends[j + 1].0 = tj;
                sends[j].0 = tj + 5 * US;
                expected += 1;
            }
        }
        _ => {}
    }
    sends.sort_by_key(|s| s.0);
    Conn {
        flow,
        kind,
        sends,
        expected,
        fin_at,
    }
}

fn l3() -> L2L3 {
    let mut l = L2L3::new(64, 64, 16);
    l.entries = vec![
        L3Entry::NextHop {
            id: 1,
            hop: NextHop {
                port: NET_OUT,
                dst_mac: [0xEE; 6],
                src_mac: [0x5A; 6],
            },
        },
        L3Entry::Route {
            prefix: [0, 0, 0, 0],
            len: 0,
            nexthop: 1,
        },
    ];
    l
}

fn server() -> Server {
    let mut rt = ClipRuntime::new(
        RuntimeConfig {
            server_id: 1,
            ..RuntimeConfig::default()
        },
        2,
        TrdHandler::default(),
    )
    .unwrap();
    rt.pool_assign(POOL_INDICES, [0; 4], SLICE.0, SLICE.1);
    let macs = PortMacs {
        mac: [2, 0, 0, 0, 7, 1],
        neighbour: [2, 0, 0, 0, 8, 1],
    };
    MultiCoreServer::new(
        ServerConfig {
            cores: 2,
            ..ServerConfig::default()
        },
        vec![macs],
        rt,
    )
    .unwrap()
}

/// The test's controller: CONN_NEW → install (and ENTRY_OFFLOADED),
/// CONN_RELEASE → delete and barrier, barrier → the delete ack.
#[derive(Default)]
struct Controller {
    /// Live indices and their connections.
    live: BTreeMap<u16, FlowKey>,
    /// When each index's last delete was acked.
    acked: BTreeMap<u16, Nanos>,
    /// Outstanding deletes: barrier token → (flow, idx).
    pending: BTreeMap<u64, (FlowKey, u16)>,
    /// Every CONN_NEW: (time, flow, idx).
    conn_new: Vec<(Nanos, FlowKey, u16)>,
    /// Indices handed out again.
    reused: u64,
    next_token: u64,
}

impl Controller {
    fn step(
        &mut self,
        fab: &mut Fabric,
        sw: NodeIx,
        srv: NodeIx,
        fin_at: &BTreeMap<FlowKey, Nanos>,
    ) {
        let now = fab.now();
        let rt = fab.get_mut::<Server>(srv).unwrap().nf_mut();
        let created = rt.take_created();
        let releases = rt.handler_mut().take_conn_release(now);
        for e in &created {
            let (flow, idx) = TrdHandler::conn_new_of(e).expect("only conn_idx entries");
            assert!(
                self.live.insert(idx, flow).is_none(),
                "index {idx} handed to {flow} while live"
            );
            if let Some(&ack) = self.acked.get(&idx) {
                self.reused += 1;
                assert!(ack <= now, "index {idx} reused before its delete ack");
            }
            self.conn_new.push((now, flow, idx));
            rt.mark_offloaded(&flow);
        }
        for (flow, idx) in &releases {
            let fin = fin_at.get(flow).copied().unwrap_or(0);
            assert!(
                now >= fin + T_RELEASE_NS,
                "{flow} released {} ns after its FIN",
                now - fin
            );
            assert_eq!(self.live.get(idx), Some(flow));
        }
        for e in created {
            fab.control(now, sw, Command::AppInstall(e).message());
        }
        for (flow, idx) in releases {
            let key = flow.0.to_vec();
            let table = TABLE_CONN_IDX;
            fab.control(
                now + STEP,
                sw,
                Command::AppUninstall { table, key }.message(),
            );
            self.next_token += 1;
            fab.control(now, sw, Command::Barrier(self.next_token).message());
            self.pending.insert(self.next_token, (flow, idx));
        }
        let acks: Vec<u64> = fab
            .take_messages()
            .into_iter()
            .filter_map(|(_, _, m)| match Report::decode(&m.body) {
                Some(Report::Barrier(t)) => Some(t),
                Some(Report::Failed(e)) => panic!("the switch refused: {e}"),
                _ => None,
            })
            .collect();
        let rt = fab.get_mut::<Server>(srv).unwrap().nf_mut();
        for t in acks {
            let Some((flow, idx)) = self.pending.remove(&t) else {
                continue;
            };
            assert!(rt.handler_mut().release_acked(idx), "{flow}: ack of {idx}");
            // The switch entry is gone: the runtime's record goes too.
            rt.entry_expired(TABLE_CONN_IDX, &flow.0);
            self.live.remove(&idx);
            self.acked.insert(idx, now);
        }
    }
}

/// Retransmissions reported for `flow`: its register (if it has an
/// index) plus the server's software-only count.
fn reported(fab: &Fabric, sw: NodeIx, srv: NodeIx, flow: &FlowKey) -> (Option<ConnInfo>, u64) {
    let s: &TrdSw = fab.get(sw).unwrap();
    let info = fab.get::<Server>(srv).unwrap().nf().handler().conn(flow);
    let Some(info) = info else {
        return (None, 0);
    };
    let mut n = info.software;
    if let Some(idx) = info.idx {
        let (_, retx) = s.program().app().registers().unwrap();
        n += u64::from(s.objects().register_peek(retx, u64::from(idx)).unwrap());
    }
    (Some(info), n)
}

fn run(seed: u64, vxlan: bool) {
    println!("seed {seed:#x} vxlan {vxlan}");
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let cfg = DriverConfig {
        servers: vec![ServerLink {
            id: 1,
            port: SRV_PORT,
        }],
        initial_group: vec![1],
        ..DriverConfig::default()
    };
    let prog = ClipSwitch::new(
        TrdSwitch::new(R),
        l3(),
        ScaleSizes::default(),
        Driver::new(cfg),
    );
    let mut fab: Fabric = Fabric::new(seed);
    let sw = fab.add_any(Switch::new(Profile::tofino(), prog).unwrap());
    let srv = fab.add_any(server());
    fab.connect((sw, SRV_PORT), (srv, 0), Wire::with_latency(10))
        .unwrap();
    fab.tap(sw, NET_OUT).unwrap();
    fab.start_all();
    fab.run_until(MS / 2);

    let waves: Vec<Vec<Conn>> = WAVES
        .iter()
        .enumerate()
        .map(|(w, &start)| {
            (0..PER_WAVE)
                .map(|i| conn(&mut rng, w, i, vxlan, start))
                .collect()
        })
        .collect();
    let mut fin_at = BTreeMap::new();
    // Every send in time order (injecting runs the fabric up to the
    // frame's time, so frames go in step by step, in order).
    let mut schedule: Vec<(Nanos, FlowKey, u8, u32, usize)> = Vec::new();
    for c in waves.iter().flatten() {
        fin_at.insert(c.flow, c.fin_at);
        for &(t, flags, seq, len) in &c.sends {
            schedule.push((t, c.flow, flags, seq, len));
        }
    }
    schedule.sort_by_key(|s| s.0);
    let sent = schedule.len();
    let mut next = 0;
    let mut ctl = Controller::default();
    let mut advance = |fab: &mut Fabric, ctl: &mut Controller, until: Nanos| {
        while fab.now() < until {
            let t = fab.now() + STEP;
            while let Some(&(at, flow, flags, seq, len)) = schedule.get(next).filter(|s| s.0 < t) {
                fab.inject(at, sw, NET_IN, frame(&flow, flags, seq, len));
                next += 1;
            }
            fab.run_until(t);
            ctl.step(fab, sw, srv, &fin_at);
        }
    };
    let check_wave = |fab: &mut Fabric, ctl: &Controller, w: usize| {
        let mut by_kind: BTreeMap<String, (u64, u64)> = BTreeMap::new();
        let mut software_only = 0;
        for c in &waves[w] {
            let (info, got) = reported(fab, sw, srv, &c.flow);
            let info = info.unwrap_or_else(|| panic!("{} ({:?}) is tracked", c.flow, c.kind));
            software_only += u64::from(info.idx.is_none());
            if info.idx.is_some() {
                // The handover happened inside the stream: data segments
                // went both ways, server-judged then switch-judged.
                let (new_at, _, _) = ctl.conn_new.iter().find(|n| n.1 == c.flow).unwrap();
                let data = |slow: bool| {
                    c.sends
                        .iter()
                        .filter(|s| s.3 > 0 && (s.0 < *new_at) == slow)
                        .count()
                };
                assert!(data(true) > 0 && data(false) > 0, "{}: no handover", c.flow);
            }
            assert_eq!(
                got, c.expected,
                "seed {seed:#x}: {} ({:?}, index {:?}) reported {got}, expected {}",
                c.flow, c.kind, info.idx, c.expected
            );
            let e = by_kind.entry(format!("{:?}", c.kind)).or_default();
            e.0 += 1;
            e.1 += got;
        }
        println!(
            "  wave {w}: (connections, reports) by kind {by_kind:?}; {software_only} software-only"
        );
        software_only
    };
    // Wave 1, read before any index is released (T_release is 2 s).
    advance(&mut fab, &mut ctl, WAVES[0] + 200 * MS);
    let sw_only = check_wave(&mut fab, &ctl, 0);
    assert_eq!(
        sw_only,
        (PER_WAVE as u64).saturating_sub(u64::from(SLICE.1 - SLICE.0 + 1)),
        "connections beyond the slice are software-only"
    );
    // Releases after T_release; wave 2 reuses the indices.
    advance(&mut fab, &mut ctl, WAVES[1] + 200 * MS);
    let sw_only = check_wave(&mut fab, &ctl, 1);
    assert!(sw_only > 0);
    assert!(ctl.reused > 0, "indices were reused");
    // Everything released in the end.
    advance(
        &mut fab,
        &mut ctl,
        WAVES[1] + 200 * MS + T_RELEASE_NS + 100 * MS,
    );
    assert_eq!(next, sent, "every send injected");
    let rt = fab.get::<Server>(srv).unwrap().nf();
    let h = rt.handler();
    assert!(h.is_empty(), "{} connections left", h.len());
    assert!(ctl.live.is_empty() && ctl.pending.is_empty());
    let st = *h.stats();
    assert_eq!(st.allocated, ctl.conn_new.len() as u64);
    assert_eq!((st.released, st.freed), (st.allocated, st.allocated));
    assert_eq!((st.ack_unknown, st.malformed), (0, 0));
    let s: &TrdSw = fab.get(sw).unwrap();
    let ss = s.program().stats;
    assert_eq!(ss.flight, ss.response, "{ss:?}");
    assert_eq!(
        (ss.invalid_drop, ss.status_drop, ss.no_server_drop),
        (0, 0, 0)
    );
    assert!(
        ss.fast as usize > sent / 4 && ss.flight as usize > sent / 10,
        "both paths carried traffic: {ss:?}"
    );
    assert!(s.violations().is_empty(), "{:?}", s.violations());
    let delivered = fab.take_tapped();
    assert_eq!(delivered.len(), sent, "every packet delivered once");
    assert!(delivered
        .iter()
        .all(|d| inca_wire::clip::shim::shim_of(&d.frame).unwrap().is_none()));
    println!(
        "  {sent} packets: {} fast, {} flight; {} CONN_NEW, {} indices reused",
        ss.fast,
        ss.flight,
        ctl.conn_new.len(),
        ctl.reused
    );
}

#[test]
fn property_14_plain_tcp() {
    for seed in SEEDS {
        run(seed, false);
    }
}

#[test]
fn property_14_vxlan_e8() {
    for seed in SEEDS {
        run(seed ^ 0xE8, true);
    }
}
