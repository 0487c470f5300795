//! The runtime on its own, with request frames built by the shim's `push`
//! over real IPv4/TCP frames: the in-place response, validation counters,
//! the affinity detector, expiry and the offloaded freeze, top-N, queries
//! and a crash.

use std::net::Ipv4Addr;

use inca_server::{NfOutput, SoftwareNf};
use inca_wire::clip::shim::{self, ClipRepr, Kind, Sel, Status, FLAG_CMS_VALID};
use inca_wire::ethernet::VlanTag;
use inca_wire::{build_tcp_frame, Endpoints, TcpFlags, TcpRepr};

use super::*;
use crate::app::{Entry, HandlerCtx, HandlerStatus, RemoteHandler};
use crate::apps::mfwd::MfwdHandler;
use crate::apps::snat::{SnatHandler, POOL_PORTS};
use crate::flow::FlowKey;

const PAYLOAD: &[u8] = &[0x5A; 100];

/// An original TCP frame of flow `sport` (10.0.0.1:sport → 10.0.1.1:80).
fn tcp(sport: u16, vlan: bool) -> Vec<u8> {
    let mut ep = Endpoints::new(
        [2, 0, 0, 0, 0, 1],
        Ipv4Addr::new(10, 0, 0, 1),
        [2, 0, 0, 0, 0, 2],
        Ipv4Addr::new(10, 0, 1, 1),
    );
    if vlan {
        ep.vlan = Some(VlanTag {
            pcp: 0,
            dei: false,
            vid: 7,
        });
    }
    let t = TcpRepr {
        src_port: sport,
        dst_port: 80,
        seq: 1,
        ack: 0,
        flags: TcpFlags::ACK,
        window: 1000,
        urgent: 0,
        options: &[],
        payload: PAYLOAD,
    };
    build_tcp_frame(&ep, &t).unwrap()
}

fn key(sport: u16) -> FlowKey {
    FlowKey::new(0, 6, [10, 0, 0, 1], [10, 0, 1, 1], sport, 80)
}

/// How a request is made.
#[derive(Clone, Copy)]
struct Req {
    sport: u16,
    app_id: u8,
    p: usize,
    sel: Sel,
    ver: u16,
    est: Option<u32>,
    server: u8,
    vlan: bool,
}

impl Req {
    fn new(sport: u16, app_id: u8, p: usize) -> Self {
        Req {
            sport,
            app_id,
            p,
            sel: Sel::Cur,
            ver: 1,
            est: None,
            server: 1,
            vlan: false,
        }
    }

    /// The request frame: params = the flow key, zero padded.
    fn frame(self) -> Vec<u8> {
        let mut f = tcp(self.sport, self.vlan);
        let mut params = vec![0u8; self.p];
        let k = key(self.sport).0;
        let n = k.len().min(self.p);
        params[..n].copy_from_slice(&k[..n]);
        let repr = ClipRepr {
            kind: Kind::Request,
            flags: if self.est.is_some() {
                FLAG_CMS_VALID
            } else {
                0
            },
            load_type: 0,
            app_id: self.app_id,
            hdr_words: 0,
            parsed_len: 40,
            server_id: self.server,
            sel: self.sel,
            status: Status::Ok,
            grp_ver: if self.sel.is_group() { self.ver } else { 0 },
            cms_est: self.est.unwrap_or(0),
        };
        shim::push(&mut f, repr, &params).unwrap();
        f
    }
}

/// A handler that records what it is given and answers as told.
#[derive(Debug, Default)]
struct Probe {
    calls: Vec<(FlowKey, usize, Vec<u8>)>,
    expired: Vec<FlowKey>,
    entry_expired: Vec<(u8, Vec<u8>)>,
    answer: Option<HandlerStatus>,
    resets: u64,
}

const PROBE_APP: u8 = 9;

impl RemoteHandler for Probe {
    fn app_id(&self) -> u8 {
        PROBE_APP
    }
    fn params_len(&self) -> usize {
        16
    }
    fn handle(&mut self, ctx: &mut HandlerCtx<'_>, params: &mut [u8]) -> HandlerStatus {
        self.calls.push((ctx.flow, ctx.core, ctx.payload.to_vec()));
        params.fill(0xAB);
        ctx.created.push(Entry {
            table: 0,
            key: ctx.flow.0.to_vec(),
            action: 1,
            data: vec![ctx.core as u8],
        });
        self.answer.unwrap_or(HandlerStatus::Ok)
    }
    fn expire(&mut self, table: u8, key: &[u8]) {
        self.entry_expired.push((table, key.to_vec()));
    }
    fn flow_expired(&mut self, flow: &FlowKey) {
        self.expired.push(*flow);
    }
    fn reset(&mut self) {
        self.resets += 1;
    }
}

fn probe(config: RuntimeConfig) -> ClipRuntime<Probe> {
    ClipRuntime::new(config, 4, Probe::default()).unwrap()
}

fn preq(sport: u16) -> Req {
    Req::new(sport, PROBE_APP, 16)
}

/// Serves one frame at `now` on `core`, arriving on port 3.
fn serve<H: RemoteHandler>(
    rt: &mut ClipRuntime<H>,
    now: u64,
    core: usize,
    frame: Vec<u8>,
) -> Vec<NfOutput> {
    let mut out = Vec::new();
    rt.process_at(now, core, 3, frame, &mut out);
    out
}

fn counter<H: RemoteHandler>(rt: &ClipRuntime<H>, name: &str) -> u64 {
    rt.counters()
        .into_iter()
        .find(|(k, _)| k == name)
        .unwrap_or_else(|| panic!("no counter {name}"))
        .1
}

#[test]
fn the_response_is_the_request_rewritten_in_place() {
    for vlan in [false, true] {
        let mut rt = ClipRuntime::new(RuntimeConfig::default(), 2, MfwdHandler::default()).unwrap();
        rt.mirror_insert(MfwdHandler::entry(key(7), 0x0102));
        let req = Req {
            vlan,
            est: Some(12),
            ..Req::new(7, 2, 16)
        }
        .frame();
        let out = serve(&mut rt, 1_000, 1, req.clone());
        assert_eq!(out.len(), 1);
        let (port, resp) = &out[0];
        assert_eq!(*port, 3, "on the arrival port");
        assert_eq!(resp.len(), req.len(), "response length == request length");
        let (at, r) = shim::shim_of(resp).unwrap().unwrap();
        assert_eq!((r.kind, r.status), (Kind::Response, Status::Ok));
        let params = shim::params_range(resp).unwrap();
        assert_eq!(&resp[params.clone()][..3], &[0x01, 0x02, 1]);
        // Only the kind, the status and the params region changed.
        for i in 0..req.len() {
            if i != at && i != at + 9 && !params.contains(&i) {
                assert_eq!(resp[i], req[i], "byte {i} (vlan {vlan})");
            }
        }
        // Popping the shim gives back the original frame.
        let mut back = resp.clone();
        shim::pop(&mut back).unwrap();
        assert_eq!(back, tcp(7, vlan));
        assert_eq!(counter(&rt, "responses"), 1);
        assert_eq!(counter(&rt, "app_hits"), 1);
    }
}

#[test]
fn the_handler_gets_the_flow_the_core_and_the_unparsed_payload() {
    let mut rt = probe(RuntimeConfig::default());
    rt.handler_mut().answer = Some(HandlerStatus::Drop);
    let f = preq(9).frame();
    let original = tcp(9, false);
    let p = inca_apps::headers::parse(&original).unwrap();
    assert_eq!(
        rt.rss_input(&f),
        Some(FlowKey::of_parsed(&p, 0).0.to_vec()),
        "RSS hashes the original's flow key"
    );
    let out = serve(&mut rt, 5, 2, f);
    let (flow, core, payload) = &rt.handler().calls[0];
    assert_eq!((*flow, *core), (key(9), 2));
    assert_eq!(payload.as_slice(), PAYLOAD, "from parsed_len (40) on");
    let (_, r) = shim::shim_of(&out[0].1).unwrap().unwrap();
    assert_eq!(r.status, Status::Drop, "a DROP verdict still answers");
    assert_eq!(counter(&rt, "status_drop"), 1);
    assert_eq!(rt.record(&key(9)).map(|(c, _)| c), Some(2));
}

#[test]
fn invalid_frames_are_counted_and_dropped() {
    let mut rt = probe(RuntimeConfig::default());
    let good = preq(1).frame();
    let at = 14;
    let with = |i: usize, v: u8| {
        let mut g = good.clone();
        g[i] = v;
        g
    };
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (tcp(1, false), "invalid_ethertype"),
        (vec![1, 2, 3], "invalid_ethertype"),
        (with(at, 0x21), "invalid_version"),
        (with(at, 0x12), "invalid_kind"),
        (with(at, 0x13), "invalid_kind"),
        (good[..at + 10].to_vec(), "invalid_header"),
        (with(at + 9, 6 << 5), "invalid_header"),
        (with(at + 4, 2), "invalid_app"),
        (with(at + 5, 5), "invalid_length"),
        (good[..at + 20].to_vec(), "invalid_length"),
        (with(at + 6, 0xFF), "invalid_parsed_len"),
    ];
    for (f, _) in &cases {
        assert!(serve(&mut rt, 0, 0, f.clone()).is_empty());
    }
    for (_, name) in &cases {
        let expected = cases.iter().filter(|(_, n)| n == name).count() as u64;
        assert_eq!(counter(&rt, name), expected, "{name}");
    }
    assert_eq!(counter(&rt, "invalid"), cases.len() as u64);
    assert_eq!((counter(&rt, "requests"), rt.flow_records()), (0, 0));
    assert!(rt.handler().calls.is_empty());
    assert_eq!(rt.rss_input(&tcp(1, false)), None, "unkeyable: queue 0");
    assert_eq!(rt.rss_input(&good[..at + 20]), None);
    // A request for another server is served and counted.
    let other = Req {
        server: 2,
        ..preq(1)
    };
    assert_eq!(serve(&mut rt, 0, 0, other.frame()).len(), 1);
    assert_eq!(counter(&rt, "misdelivered"), 1);
    // A core the runtime was not built for: counted, never a panic.
    assert!(serve(&mut rt, 0, 99, good).is_empty());
    assert_eq!(counter(&rt, "bad_core"), 1);
}

#[test]
fn a_flow_changing_group_version_is_a_mismatch() {
    let mut rt = probe(RuntimeConfig::default());
    let at = |sel: Sel, ver: u16| {
        Req {
            sel,
            ver,
            ..preq(1)
        }
        .frame()
    };
    serve(&mut rt, 0, 0, at(Sel::Cur, 1));
    serve(&mut rt, 1, 0, at(Sel::Prev, 1)); // the same group after a flip
    serve(&mut rt, 2, 0, at(Sel::PinTable, 0)); // pinned
    serve(&mut rt, 3, 0, at(Sel::PinCache, 0));
    assert_eq!(counter(&rt, "ver_mismatch"), 0);
    serve(&mut rt, 4, 0, at(Sel::Cur, 2)); // moved to the new group
    assert_eq!(counter(&rt, "ver_mismatch"), 1);
    let (_, r) = rt.record(&key(1)).unwrap();
    assert_eq!((r.assigned_ver, r.first_seen, r.last_seen), (1, 0, 4));
    assert_eq!(r.last_sel, Sel::Cur);
    // A flow first seen through a pin is assigned version 0.
    serve(
        &mut rt,
        5,
        1,
        Req {
            sel: Sel::Hint,
            ..preq(2)
        }
        .frame(),
    );
    assert_eq!(rt.record(&key(2)).unwrap().1.assigned_ver, 0);
}

#[test]
fn records_are_bounded_per_core() {
    let mut rt = probe(RuntimeConfig {
        flow_records: 2,
        ..RuntimeConfig::default()
    });
    for s in 0..3 {
        assert_eq!(serve(&mut rt, 0, 0, preq(s).frame()).len(), 1);
    }
    serve(&mut rt, 0, 1, preq(3).frame());
    assert_eq!(counter(&rt, "record_overflow"), 1);
    assert_eq!(counter(&rt, "flow_records"), 3);
    assert_eq!(counter(&rt, "responses"), 4, "overflowing flows are served");
}

#[test]
fn idle_flows_expire_unless_offloaded() {
    const SEC: u64 = 1_000_000_000;
    let mut rt = ClipRuntime::new(
        RuntimeConfig {
            t_exp_ns: SEC,
            ..RuntimeConfig::default()
        },
        2,
        SnatHandler::default(),
    )
    .unwrap();
    rt.pool_assign(POOL_PORTS, [198, 51, 100, 1], 2000, 2009);
    for s in 1..=3 {
        serve(&mut rt, 0, usize::from(s % 2), Req::new(s, 3, 16).frame());
    }
    serve(&mut rt, SEC / 2, 1, Req::new(3, 3, 16).frame());
    assert!(rt.mark_offloaded(&key(1)));
    assert!(!rt.mark_offloaded(&key(99)));
    assert_eq!(rt.handler().ports_in_use(), 3);
    // Sweeps at 10 ms and just before 1 s find nothing idle long enough;
    // the next is due 100 ms after the last, so flow 2, idle for T_exp
    // from 1 s on, waits for it.
    rt.tick(10_000_000);
    rt.tick(SEC - 1);
    rt.tick(SEC + 50_000_000);
    assert!(rt.take_expired_flows().is_empty());
    rt.tick(SEC + 99_999_999);
    assert_eq!(rt.take_expired_flows(), vec![key(2)]);
    assert_eq!(rt.handler().ports_in_use(), 2, "flow 2's port is free");
    assert_eq!(rt.handler().lookup(&key(1)).map(|e| e.port), Some(2000));
    assert_eq!(counter(&rt, "flows_expired"), 1);
    rt.tick(10 * SEC);
    assert_eq!(rt.take_expired_flows(), vec![key(3)]);
    assert_eq!(rt.cores_of(&key(1)), vec![1], "offloaded: frozen");
    // The switch copy ages out: record and translation go.
    rt.entry_expired(0, &key(1).0);
    assert_eq!(rt.flow_records(), 0);
    assert_eq!(rt.handler().ports_in_use(), 0);
}

#[test]
fn created_entries_are_reported_in_batches() {
    let mut rt = probe(RuntimeConfig {
        created_queue: 3,
        ..RuntimeConfig::default()
    });
    serve(&mut rt, 1, 2, preq(1).frame());
    serve(&mut rt, 2, 1, preq(2).frame());
    assert!(rt.take_created().is_empty(), "the batch is still open");
    rt.tick(10_000_000);
    serve(&mut rt, 3, 0, preq(3).frame());
    let got = rt.take_created();
    assert_eq!(got.len(), 2);
    assert_eq!(
        (got[0].key.clone(), got[0].data.clone()),
        (key(1).0.to_vec(), vec![2])
    );
    assert_eq!(got[1].key, key(2).0.to_vec());
    serve(&mut rt, 4, 0, preq(4).frame());
    serve(&mut rt, 5, 0, preq(5).frame());
    serve(&mut rt, 6, 0, preq(6).frame());
    assert_eq!(counter(&rt, "created_overflow"), 1);
    rt.tick(20_000_000);
    assert_eq!(rt.take_created().len(), 3);
}

#[test]
fn the_top_n_report_ranks_by_estimate_then_key_and_starts_a_new_period() {
    let mut rt = probe(RuntimeConfig {
        candidates: 3,
        ..RuntimeConfig::default()
    });
    let est = |sport: u16, e: u32| {
        Req {
            est: Some(e),
            ..preq(sport)
        }
        .frame()
    };
    // Core 0: flows 1..=4; the map keeps 3.
    serve(&mut rt, 0, 0, est(1, 10));
    serve(&mut rt, 0, 0, est(2, 30));
    serve(&mut rt, 0, 0, est(3, 20));
    serve(&mut rt, 0, 0, est(4, 5)); // refused: the worst
    serve(&mut rt, 0, 0, est(1, 25)); // the maximum counts
                                      // Core 1: a tie with flow 3 (smaller key wins) and a flow without a
                                      // valid estimate.
    serve(&mut rt, 0, 1, est(0, 20));
    serve(&mut rt, 0, 1, preq(9).frame());
    assert_eq!(counter(&rt, "candidates"), 4);
    assert_eq!(counter(&rt, "candidate_refusals"), 1);
    assert_eq!(
        rt.topn_report(3),
        vec![(key(2), 30), (key(1), 25), (key(0), 20)]
    );
    assert_eq!(rt.candidates(), 0, "the maps are cleared");
    assert!(rt.topn_report(3).is_empty());
    serve(&mut rt, 0, 3, est(4, 1));
    assert_eq!(rt.topn_report(10), vec![(key(4), 1)]);
}

#[test]
fn flow_query_returns_live_flows_of_one_group_version() {
    const T: u64 = 1_000_000;
    let mut rt = probe(RuntimeConfig {
        t_exp_ns: T,
        ..RuntimeConfig::default()
    });
    let go = |sel: Sel, ver: u16, sport: u16| {
        Req {
            sel,
            ver,
            ..preq(sport)
        }
        .frame()
    };
    serve(&mut rt, 0, 0, go(Sel::Cur, 1, 6)); // idle at query time
    serve(&mut rt, 0, 2, go(Sel::Cur, 1, 7)); // idle but offloaded
    rt.mark_offloaded(&key(7));
    serve(&mut rt, 900_000, 0, go(Sel::Cur, 1, 1));
    serve(&mut rt, 900_000, 1, go(Sel::Prev, 1, 2));
    serve(&mut rt, 900_000, 1, go(Sel::Cur, 2, 3));
    serve(&mut rt, 900_000, 2, go(Sel::PinTable, 0, 4));
    serve(&mut rt, 900_000, 3, go(Sel::Cur, 1, 5));
    serve(&mut rt, 950_000, 3, go(Sel::PinCache, 0, 5)); // now pin-cached
    let q = rt.flow_query(1, 1_500_000);
    let flows: Vec<FlowKey> = q.iter().map(|i| i.flow).collect();
    assert_eq!(flows, vec![key(1), key(2), key(5), key(7)]);
    assert_eq!((q[2].first_seen, q[2].last_seen), (900_000, 950_000));
    assert!(q[3].offloaded && !q[0].offloaded);
    assert_eq!(
        rt.flow_query(2, 1_500_000)
            .iter()
            .map(|i| i.flow)
            .collect::<Vec<_>>(),
        vec![key(3)]
    );
    assert!(rt.flow_query(0, 1_500_000).is_empty());
    assert!(rt.flow_query(3, 1_500_000).is_empty());
}

#[test]
fn a_crash_loses_volatile_state_and_keeps_counters() {
    let mut rt = probe(RuntimeConfig::default());
    for s in 0..5 {
        serve(
            &mut rt,
            0,
            usize::from(s % 4),
            Req {
                est: Some(3),
                ..preq(s)
            }
            .frame(),
        );
    }
    rt.tick(10_000_000);
    SoftwareNf::reset(&mut rt);
    assert_eq!((rt.flow_records(), rt.candidates()), (0, 0));
    assert!(rt.take_created().is_empty());
    assert!(rt.take_expired_flows().is_empty());
    assert_eq!(rt.handler().resets, 1);
    assert_eq!(counter(&rt, "requests"), 5);
    assert_eq!(serve(&mut rt, 1, 0, preq(0).frame()).len(), 1);
    assert_eq!(counter(&rt, "flows_new"), 6, "a known flow is new again");
}

#[test]
fn construction_checks_its_inputs() {
    assert!(ClipRuntime::new(RuntimeConfig::default(), 0, Probe::default()).is_err());
    let bad = RuntimeConfig {
        server_id: 0,
        ..RuntimeConfig::default()
    };
    assert!(ClipRuntime::new(bad, 1, Probe::default()).is_err());
    let rt = probe(RuntimeConfig::default());
    assert_eq!(rt.housekeeping_interval(), Some(10_000_000));
    assert_eq!(rt.name(), "clip");
}

#[test]
fn unpadded_entry_expiry_keys_reach_the_handler() {
    let mut rt = probe(RuntimeConfig::default());
    serve(&mut rt, 0, 0, preq(1).frame());
    rt.entry_expired(4, &[1, 2, 3]);
    assert_eq!(rt.flow_records(), 1);
    rt.entry_expired(0, &key(1).0);
    assert_eq!(rt.flow_records(), 0);
    assert_eq!(
        rt.handler().entry_expired,
        vec![(4, vec![1, 2, 3]), (0, key(1).0.to_vec())]
    );
    assert!(rt.handler().expired.is_empty(), "not a server-side expiry");
}
