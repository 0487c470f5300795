//! Tests of the codec: round trips of every variant through bytes, typed
//! errors, the session decoder under hostile bytes and random chunking, and
//! batch splitting.

use inca_wire::exoplane::control::{Frame, Message, MsgType, MAX_BODY_LEN};
use proptest::collection::vec;
use proptest::prelude::*;

use super::session::{DaemonEnd, Direction, HubEnd};
use super::*;
use crate::hub::msg::{EntryRec, Write, WriteOp, WriteStatus};
use crate::ids::{EntryKey, LogicalId, ObjId, Pdev, UnionKey, MAX_PDEVS};
use crate::sync::{Rejoin, SyncItem, SyncReq, SyncResp};

fn bytes(max: usize) -> impl Strategy<Value = Vec<u8>> {
    vec(any::<u8>(), 0..=max)
}

/// Keys of every length class: empty, short, and up to the 255-byte limit.
fn key() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![bytes(8), bytes(255)]
}

fn op() -> impl Strategy<Value = WriteOp> {
    prop_oneof![
        Just(WriteOp::InsertIfAbsent),
        Just(WriteOp::Upsert),
        Just(WriteOp::Delete)
    ]
}

fn rec() -> impl Strategy<Value = EntryRec> {
    (op(), any::<u16>(), key(), key(), any::<u64>()).prop_map(|(op, obj, key, value, version)| {
        EntryRec {
            op,
            obj: ObjId(obj),
            key,
            value,
            version,
        }
    })
}

fn entry_key() -> impl Strategy<Value = EntryKey> {
    (any::<u8>(), any::<u16>(), key()).prop_map(|(app, obj, key)| EntryKey {
        app: AppId(app),
        obj: ObjId(obj),
        key,
    })
}

fn sync_items(max: usize) -> impl Strategy<Value = Vec<SyncItem>> {
    vec(
        (entry_key(), any::<u64>(), any::<u64>()).prop_map(|(entry, snap, hist)| SyncItem {
            entry,
            snap,
            hist,
        }),
        0..max,
    )
}

fn rejoin(max: usize) -> impl Strategy<Value = Rejoin> {
    vec((entry_key(), any::<u64>()), 0..max).prop_map(|items| Rejoin { items })
}

fn hub_to_daemon() -> impl Strategy<Value = HubToDaemon> {
    let status = prop_oneof![
        Just(WriteStatus::Ok),
        Just(WriteStatus::Exists),
        Just(WriteStatus::Failed)
    ];
    prop_oneof![
        (
            any::<u64>(),
            vec((any::<u8>().prop_map(LogicalId), 0..=1u8), 0..8)
        )
            .prop_map(|(round, roles)| HubMsg::HelloAck { round, roles }),
        (any::<u8>(), vec(rec(), 0..5)).prop_map(|(app, entries)| HubMsg::WriteApply {
            app: AppId(app),
            entries
        }),
        vec((status, any::<u64>()), 0..8).prop_map(|results| HubMsg::WriteAck { results }),
        (any::<u8>(), vec(rec(), 0..5), any::<bool>()).prop_map(|(app, entries, last)| {
            HubMsg::Dump {
                app: AppId(app),
                entries,
                last,
            }
        }),
        any::<u64>().prop_map(|ts| HubMsg::Ping { ts }),
        any::<u64>().prop_map(|ts| HubMsg::Pong { ts }),
    ]
    .prop_map(HubToDaemon::Hub)
    .boxed()
    .prop_union(
        prop_oneof![
            (any::<u64>(), sync_items(5)).prop_map(|(round, items)| HubToDaemon::Hub(
                HubMsg::SyncReq(SyncReq { round, items })
            )),
            rejoin(5).prop_map(|r| HubToDaemon::Hub(HubMsg::Rejoin(r))),
            (any::<u8>(), bytes(1600)).prop_map(|(app, frame)| HubToDaemon::EventFwd {
                app: AppId(app),
                frame
            }),
        ]
        .boxed(),
    )
}

fn daemon_to_hub() -> impl Strategy<Value = DaemonToHub> {
    let write = (op(), any::<u16>(), key(), key()).prop_map(|(op, obj, key, value)| Write {
        op,
        obj: ObjId(obj),
        key,
        value,
    });
    prop_oneof![
        (0..MAX_PDEVS as u16, any::<u32>(), any::<bool>()).prop_map(|(p, caps, lost_state)| {
            DaemonMsg::Hello {
                pdev: Pdev(p),
                caps,
                lost_state,
            }
        }),
        (any::<u8>(), key(), vec(write, 0..5)).prop_map(|(app, uk, writes)| {
            DaemonMsg::WriteReq {
                app: AppId(app),
                uk: UnionKey(uk),
                writes,
            }
        }),
        any::<bool>().prop_map(|ok| DaemonMsg::WriteApplied { ok }),
        (any::<u8>(), key(), any::<u32>(), any::<u32>()).prop_map(
            |(app, uk, estimate, elapsed_us)| DaemonMsg::PromoteReport {
                app: AppId(app),
                uk: UnionKey(uk),
                estimate,
                elapsed_us,
            }
        ),
        Just(DaemonMsg::RejoinDone),
        any::<u64>().prop_map(|ts| DaemonMsg::Ping { ts }),
        any::<u64>().prop_map(|ts| DaemonMsg::Pong { ts }),
    ]
    .prop_map(DaemonToHub::Daemon)
    .boxed()
    .prop_union(
        (any::<u64>(), sync_items(5))
            .prop_map(|(round, items)| {
                DaemonToHub::Daemon(DaemonMsg::SyncResp(SyncResp { round, items }))
            })
            .boxed(),
    )
}

/// What a receiving end makes of one frame's bytes on its own: the oracle
/// for the session's counts.
#[derive(Debug, PartialEq, Eq)]
enum Verdict {
    Message,
    Malformed,
    Unusable,
}

fn verdict<D: Direction>(frame: &[u8]) -> Verdict {
    match Frame::decode(frame) {
        Err(_) => Verdict::Malformed,
        Ok(f) => match D::decode(f.msg) {
            Ok(_) => Verdict::Message,
            Err(_) => Verdict::Unusable,
        },
    }
}

/// A frame header for `body` with any type byte.
fn raw_frame(t: u8, req_id: u64, body: &[u8]) -> Vec<u8> {
    let mut f = vec![0x45, 0x58, 1, t];
    f.extend_from_slice(&(body.len() as u32).to_be_bytes());
    f.extend_from_slice(&req_id.to_be_bytes());
    f.extend_from_slice(body);
    f
}

/// Messages with their `req_id`, and how feeding ended.
type Fed<In> = (Vec<(u64, In)>, Result<(), SessionError>);

fn feed_in_pieces<D: Direction>(s: &mut Session<D>, stream: &[u8], cuts: &[usize]) -> Fed<D::In> {
    let mut cuts: Vec<usize> = cuts.iter().map(|c| c % (stream.len() + 1)).collect();
    cuts.push(0);
    cuts.push(stream.len());
    cuts.sort_unstable();
    let mut out = Vec::new();
    for w in cuts.windows(2) {
        if let Err(e) = s.feed(&stream[w[0]..w[1]], &mut out) {
            return (out, Err(e));
        }
    }
    (out, Ok(()))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn hub_messages_round_trip_through_bytes(
        msgs in vec((any::<u64>(), hub_to_daemon()), 1..6),
        cuts in vec(any::<usize>(), 0..6),
    ) {
        let mut hub = HubSession::new();
        let mut stream = Vec::new();
        for (req_id, m) in &msgs {
            stream.extend(hub.encode(*req_id, m).unwrap());
        }
        let mut daemon = DaemonSession::new();
        let (got, r) = feed_in_pieces(&mut daemon, &stream, &cuts);
        prop_assert_eq!(r, Ok(()));
        prop_assert_eq!(got, msgs.clone());
        prop_assert_eq!(hub.stats().frames_out, msgs.len() as u64);
        prop_assert_eq!(daemon.stats().frames_in, msgs.len() as u64);
    }

    #[test]
    fn daemon_messages_round_trip_through_bytes(
        msgs in vec((any::<u64>(), daemon_to_hub()), 1..6),
        cuts in vec(any::<usize>(), 0..6),
    ) {
        let mut daemon = DaemonSession::new();
        let mut stream = Vec::new();
        for (req_id, m) in &msgs {
            stream.extend(daemon.encode(*req_id, m).unwrap());
        }
        let mut hub = HubSession::new();
        let (got, r) = feed_in_pieces(&mut hub, &stream, &cuts);
        prop_assert_eq!(r, Ok(()));
        prop_assert_eq!(got, msgs);
    }

    /// Frames with valid bounds but any type byte and body: the session
    /// yields exactly the frames that decode on their own and counts every
    /// other one, however the stream is cut.
    #[test]
    fn bad_frames_are_counted_and_skipped(
        frames in vec((any::<u8>(), any::<u64>(), bytes(64)), 0..12),
        cuts in vec(any::<usize>(), 0..8),
        hub_end in any::<bool>(),
    ) {
        let frames: Vec<Vec<u8>> = frames.iter().map(|(t, r, b)| raw_frame(*t, *r, b)).collect();
        let stream = frames.concat();
        let (verdicts, stats, got) = if hub_end {
            let mut s = HubSession::new();
            let (got, r) = feed_in_pieces(&mut s, &stream, &cuts);
            prop_assert_eq!(r, Ok(()));
            (frames.iter().map(|f| verdict::<HubEnd>(f)).collect::<Vec<_>>(), s.stats(), got.len())
        } else {
            let mut s = DaemonSession::new();
            let (got, r) = feed_in_pieces(&mut s, &stream, &cuts);
            prop_assert_eq!(r, Ok(()));
            (frames.iter().map(|f| verdict::<DaemonEnd>(f)).collect::<Vec<_>>(), s.stats(), got.len())
        };
        let n = |v: Verdict| verdicts.iter().filter(|x| **x == v).count() as u64;
        prop_assert_eq!(stats.frames_in, n(Verdict::Message));
        prop_assert_eq!(got as u64, n(Verdict::Message));
        prop_assert_eq!(stats.malformed, n(Verdict::Malformed));
        prop_assert_eq!(stats.unusable, n(Verdict::Unusable));
        prop_assert_eq!(stats.lost_sync, 0);
    }

    /// Any bytes at all: no panic; every message handed out is counted,
    /// and a lost stream stays lost.
    #[test]
    fn random_bytes_never_panic(
        raw in bytes(400),
        with_magic in any::<bool>(),
        cuts in vec(any::<usize>(), 0..8),
    ) {
        let mut stream = raw;
        if with_magic && stream.len() >= 3 {
            stream[..3].copy_from_slice(&[0x45, 0x58, 1]);
        }
        let mut s = DaemonSession::new();
        let (got, r) = feed_in_pieces(&mut s, &stream, &cuts);
        let st = s.stats();
        prop_assert_eq!(st.frames_in, got.len() as u64);
        prop_assert_eq!(r.is_err(), s.is_lost());
        prop_assert_eq!(st.lost_sync, u64::from(s.is_lost()));
        if s.is_lost() {
            let mut more = Vec::new();
            prop_assert!(s.feed(&[0x45, 0x58, 1, 0x50], &mut more).is_err());
            prop_assert!(more.is_empty());
        }
    }

    #[test]
    fn dump_split_keeps_every_entry_once(
        app in any::<u8>(),
        entries in vec(rec(), 0..40),
        last in any::<bool>(),
        max_body in 600usize..4000,
    ) {
        let parts = split_dump(AppId(app), entries.clone(), last, max_body).unwrap();
        let mut all = Vec::new();
        for (i, p) in parts.iter().enumerate() {
            let HubMsg::Dump { app: a, entries: e, last: l } = p else {
                panic!("not a DUMP: {p:?}");
            };
            prop_assert_eq!(*a, AppId(app));
            prop_assert_eq!(*l, last && i + 1 == parts.len());
            let body = HubToDaemon::Hub(p.clone()).to_wire().unwrap().encode().unwrap();
            prop_assert!(body.len() <= max_body, "{} > {}", body.len(), max_body);
            prop_assert!(!e.is_empty() || parts.len() == 1);
            all.extend(e.iter().cloned());
        }
        prop_assert_eq!(all, entries);
    }

    #[test]
    fn sync_and_rejoin_split_keep_every_item_once(
        round in any::<u64>(),
        items in sync_items(60),
        rj in rejoin(60),
        max_body in 300usize..3000,
    ) {
        let reqs = split_sync_req(SyncReq { round, items: items.clone() }, max_body).unwrap();
        let resps = split_sync_resp(SyncResp { round, items: items.clone() }, max_body).unwrap();
        prop_assert_eq!(reqs.len(), resps.len());
        let mut all = Vec::new();
        for r in &reqs {
            prop_assert_eq!(r.round, round);
            let body = HubToDaemon::Hub(HubMsg::SyncReq(r.clone())).to_wire().unwrap().encode().unwrap();
            prop_assert!(body.len() <= max_body);
            all.extend(r.items.iter().cloned());
        }
        prop_assert_eq!(&all, &items);
        let all: Vec<SyncItem> = resps.into_iter().flat_map(|r| r.items).collect();
        prop_assert_eq!(&all, &items);
        let parts = split_rejoin(rj.clone(), max_body).unwrap();
        for p in &parts {
            let body = HubToDaemon::Hub(HubMsg::Rejoin(p.clone())).to_wire().unwrap().encode().unwrap();
            prop_assert!(body.len() <= max_body);
        }
        let all: Vec<_> = parts.into_iter().flat_map(|p| p.items).collect();
        prop_assert_eq!(all, rj.items);
    }
}

#[test]
fn a_full_dump_splits_under_the_frame_limit() {
    // 8,000 entries with 255-byte keys and values: ~4 MB, four or more frames.
    let entries: Vec<EntryRec> = (0..8000u64)
        .map(|i| EntryRec {
            op: WriteOp::Upsert,
            obj: ObjId(1),
            key: vec![i as u8; 255],
            value: vec![7; 255],
            version: i,
        })
        .collect();
    let parts = split_dump(AppId(1), entries, true, MAX_BODY_LEN).unwrap();
    assert!(parts.len() >= 4, "{} parts", parts.len());
    let mut hub = HubSession::new();
    let mut daemon = DaemonSession::new();
    let mut out = Vec::new();
    for p in parts {
        let f = hub.encode(0, &HubToDaemon::Hub(p)).unwrap();
        daemon.feed(&f, &mut out).unwrap();
    }
    let n: usize = out
        .iter()
        .map(|(_, m)| match m {
            HubToDaemon::Hub(HubMsg::Dump { entries, .. }) => entries.len(),
            _ => 0,
        })
        .sum();
    assert_eq!(n, 8000);
}

#[test]
fn what_the_wire_cannot_carry_is_a_typed_error() {
    let long = vec![0; 256];
    let req = DaemonToHub::Daemon(DaemonMsg::WriteReq {
        app: AppId(1),
        uk: UnionKey(long.clone()),
        writes: vec![],
    });
    assert_eq!(
        req.to_wire(),
        Err(CodecError::KeyTooLong {
            field: "uk",
            len: 256
        })
    );
    let apply = HubToDaemon::Hub(HubMsg::WriteApply {
        app: AppId(1),
        entries: vec![EntryRec {
            op: WriteOp::Upsert,
            obj: ObjId(1),
            key: vec![1],
            value: long,
            version: 1,
        }],
    });
    assert_eq!(
        apply.to_wire(),
        Err(CodecError::KeyTooLong {
            field: "val",
            len: 256
        })
    );
    let ack = HubToDaemon::Hub(HubMsg::WriteAck {
        results: vec![(WriteStatus::Ok, 0); 65_536],
    });
    assert_eq!(
        ack.to_wire(),
        Err(CodecError::TooManyItems {
            field: "n",
            count: 65_536,
            max: 65_535
        })
    );
    let roles = HubToDaemon::Hub(HubMsg::HelloAck {
        round: 0,
        roles: vec![(LogicalId(0), 2)],
    });
    assert_eq!(
        roles.to_wire(),
        Err(CodecError::OutOfRange {
            field: "role",
            value: 2,
            max: 1
        })
    );
    let hello = DaemonToHub::Daemon(DaemonMsg::Hello {
        pdev: Pdev(MAX_PDEVS as u16),
        caps: 0,
        lost_state: false,
    });
    assert!(matches!(
        hello.to_wire(),
        Err(CodecError::OutOfRange { field: "pdev", .. })
    ));
    // An empty REJOIN round-trips.
    let empty = HubToDaemon::Hub(HubMsg::Rejoin(Rejoin { items: vec![] }));
    assert_eq!(HubToDaemon::from_wire(empty.to_wire().unwrap()), Ok(empty));
    let fwd = HubToDaemon::EventFwd {
        app: AppId(0),
        frame: vec![0; 65_536],
    };
    assert!(matches!(
        fwd.to_wire(),
        Err(CodecError::TooManyItems { field: "len", .. })
    ));
    // A single item over the limit cannot be split.
    let big = vec![EntryRec {
        op: WriteOp::Upsert,
        obj: ObjId(1),
        key: vec![0; 200],
        value: vec![],
        version: 1,
    }];
    assert!(matches!(
        split_dump(AppId(0), big, true, 100),
        Err(CodecError::ItemTooLarge { max: 100, .. })
    ));
    // A refused message is counted and nothing is sent.
    let mut s = DaemonSession::new();
    assert!(s.encode(1, &hello).is_err());
    assert_eq!(s.stats().encode_errors, 1);
    assert_eq!(s.stats().frames_out, 0);
}

#[test]
fn each_end_refuses_the_other_ends_messages() {
    let ping = Message::Ping { ts: 1 };
    assert!(HubToDaemon::from_wire(ping.clone()).is_ok());
    assert!(DaemonToHub::from_wire(ping).is_ok());
    assert_eq!(
        HubToDaemon::from_wire(Message::RejoinDone),
        Err(CodecError::WrongDirection {
            msg: "REJOIN_DONE",
            direction: "hub→daemon"
        })
    );
    assert_eq!(
        DaemonToHub::from_wire(Message::Dump {
            app: 0,
            entries: vec![],
            last: true
        }),
        Err(CodecError::WrongDirection {
            msg: "DUMP",
            direction: "daemon→hub"
        })
    );
    // Every type goes to exactly one end, except PING and PONG to both.
    for &t in MsgType::ALL {
        let m = Message::decode(t, &sample_body(t)).unwrap();
        let hub = DaemonToHub::from_wire(m.clone()).is_ok();
        let daemon = HubToDaemon::from_wire(m).is_ok();
        let both = matches!(t, MsgType::Ping | MsgType::Pong);
        assert!(hub != daemon || both, "{t:?}: hub {hub}, daemon {daemon}");
    }
    // A HELLO whose pdev no holders bitmap can name is counted as unusable.
    let mut hub = HubSession::new();
    let mut out = Vec::new();
    let bad = Frame {
        req_id: 1,
        msg: Message::Hello {
            pdev: 63,
            caps: 0,
            lost_state: false,
        },
    };
    hub.feed(&bad.encode().unwrap(), &mut out).unwrap();
    assert!(out.is_empty());
    assert_eq!(hub.stats().unusable, 1);
}

/// The smallest valid body of each type.
fn sample_body(t: MsgType) -> Vec<u8> {
    match t {
        MsgType::Hello => vec![0; 7],
        MsgType::HelloAck => vec![0; 9],
        MsgType::WriteReq => vec![0; 4],
        MsgType::WriteApply => vec![0; 3],
        MsgType::WriteApplied => vec![0],
        MsgType::WriteAck => vec![0; 2],
        MsgType::PromoteReport => vec![0; 10],
        MsgType::EventFwd => vec![0; 3],
        MsgType::SyncReq | MsgType::SyncResp => vec![0; 12],
        MsgType::Dump => vec![0; 6],
        MsgType::Rejoin => vec![0; 4],
        MsgType::RejoinDone => vec![],
        MsgType::Ping | MsgType::Pong => vec![0; 8],
    }
}

#[test]
fn a_lost_stream_is_reported_and_stays_lost() {
    let mut s = HubSession::new();
    let mut out = Vec::new();
    let ping = Frame {
        req_id: 9,
        msg: Message::Ping { ts: 4 },
    }
    .encode()
    .unwrap();
    let mut stream = ping.clone();
    stream.extend_from_slice(&[0x46, 0x58, 1, 0x50]);
    stream.extend_from_slice(&[0; 20]);
    let r = s.feed(&stream, &mut out);
    assert!(matches!(r, Err(SessionError::LostSync(_))));
    assert_eq!(
        out,
        vec![(9, DaemonToHub::Daemon(DaemonMsg::Ping { ts: 4 }))]
    );
    assert!(s.is_lost());
    assert!(s.feed(&ping, &mut out).is_err());
    assert_eq!(out.len(), 1);
    assert_eq!(s.stats().lost_sync, 1);
}
