//! Tests of the control protocol: hand-written bytes from the spec, every
//! typed error, round trips of every message, hostile bytes, and the stream
//! decoder under random chunkings.

use proptest::collection::vec;
use proptest::prelude::*;

use super::stream::DECODER_CAPACITY;
use super::*;

fn frame(req_id: u64, msg: Message) -> Vec<u8> {
    Frame { req_id, msg }.encode().unwrap()
}

fn entry(obj: u16, key: &[u8], val: &[u8], version: u64) -> Entry {
    Entry {
        obj,
        key: key.to_vec(),
        val: val.to_vec(),
        version,
    }
}

/// One message of every type, for tests that must cover the whole table.
fn one_of_each() -> Vec<Message> {
    let e = entry(3, b"k", b"vv", 9);
    let sync = vec![SyncItem {
        app: 4,
        obj: 1,
        key: vec![1, 2],
        snap: 5,
        hist: 6,
    }];
    vec![
        Message::Hello {
            pdev: 2,
            caps: 0xF,
            lost_state: true,
        },
        Message::HelloAck {
            round: 7,
            ldevs: vec![LdevRole {
                ldev: 4,
                role: Role::Replica,
            }],
        },
        Message::WriteReq {
            app: 1,
            uk: vec![10, 0, 0, 1],
            writes: vec![Write {
                op: WriteOp::InsertIfAbsent,
                obj: 2,
                key: b"flow".to_vec(),
                val: b"nat".to_vec(),
            }],
        },
        Message::WriteApply {
            app: 1,
            entries: vec![OpEntry {
                op: WriteOp::Upsert,
                entry: e.clone(),
            }],
        },
        Message::WriteApplied {
            status: AppliedStatus::Failed,
        },
        Message::WriteAck {
            results: vec![WriteResult {
                status: AckStatus::Exists,
                version: 8,
            }],
        },
        Message::PromoteReport {
            app: 3,
            uk: vec![10, 0, 0, 1],
            estimate: 64,
            elapsed_us: 1000,
        },
        Message::EventFwd {
            app: 2,
            frame: vec![0xAA; 60],
        },
        Message::SyncReq {
            round: 3,
            items: sync.clone(),
        },
        Message::SyncResp {
            round: 3,
            items: sync,
        },
        Message::Dump {
            app: 2,
            entries: vec![OpEntry {
                op: WriteOp::Delete,
                entry: e,
            }],
            last: true,
        },
        Message::Rejoin {
            items: vec![RejoinItem {
                app: 2,
                obj: 1,
                key: vec![],
                h: 77,
            }],
        },
        Message::RejoinDone,
        Message::Ping { ts: 1 },
        Message::Pong { ts: 1 },
    ]
}

#[test]
fn one_of_each_covers_the_table() {
    let mut types: Vec<MsgType> = one_of_each().iter().map(Message::msg_type).collect();
    types.sort();
    assert_eq!(types, MsgType::ALL);
    for m in one_of_each() {
        let b = frame(42, m.clone());
        assert_eq!(Frame::decode(&b), Ok(Frame { req_id: 42, msg: m }));
    }
}

#[test]
fn bytes_follow_the_spec_layout() {
    // HELLO: header (magic 0x4558, version 1, type 0x01, length 7, req_id 5)
    // then pdev 16, caps 32, lost_state 8.
    let b = frame(
        5,
        Message::Hello {
            pdev: 0x0102,
            caps: 0x0A0B0C0D,
            lost_state: false,
        },
    );
    assert_eq!(
        b,
        [
            0x45, 0x58, 1, 0x01, 0, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0, 5, //
            0x01, 0x02, 0x0A, 0x0B, 0x0C, 0x0D, 0
        ]
    );
    // WRITE_APPLY: app 8, n 16, then op 8 ‖ Entry (obj 16, Key, Val, version 64).
    let b = Message::WriteApply {
        app: 9,
        entries: vec![OpEntry {
            op: WriteOp::Upsert,
            entry: entry(0x0304, &[0xAB], &[0xCD, 0xEF], 0x11),
        }],
    }
    .encode()
    .unwrap();
    assert_eq!(
        b,
        [9, 0, 1, 2, 3, 4, 1, 0xAB, 2, 0xCD, 0xEF, 0, 0, 0, 0, 0, 0, 0, 0x11]
    );
    // DUMP: app 8 [our choice], n 32, items, `last`; REJOIN_DONE has an
    // empty body.
    let b = Message::Dump {
        app: 7,
        entries: vec![],
        last: true,
    }
    .encode()
    .unwrap();
    assert_eq!(b, [7, 0, 0, 0, 0, 1]);
    // WRITE_REQ: app 8, uk Key [our choice], n 16, then op 8, obj 16, Key, Val.
    let b = Message::WriteReq {
        app: 3,
        uk: vec![0xA1, 0xA2],
        writes: vec![Write {
            op: WriteOp::InsertIfAbsent,
            obj: 0x0506,
            key: vec![0xB1],
            val: vec![],
        }],
    }
    .encode()
    .unwrap();
    assert_eq!(b, [3, 2, 0xA1, 0xA2, 0, 1, 1, 5, 6, 1, 0xB1, 0]);
    // SYNC_RESP item: app 8 [our choice], obj 16, Key, snap 64, hist 64.
    let b = Message::SyncResp {
        round: 0x0102,
        items: vec![SyncItem {
            app: 9,
            obj: 0x0304,
            key: vec![0xEE],
            snap: 5,
            hist: 6,
        }],
    }
    .encode()
    .unwrap();
    assert_eq!(
        b,
        [
            0, 0, 0, 0, 0, 0, 1, 2, 0, 0, 0, 1, //
            9, 3, 4, 1, 0xEE, 0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0, 6
        ]
    );
    assert_eq!(b.len(), SYNC_FIXED_LEN + 21);
    // REJOIN item: app 8 [our choice], obj 16, Key, H 64.
    let item = RejoinItem {
        app: 1,
        obj: 2,
        key: vec![],
        h: 3,
    };
    assert_eq!(item.encoded_len(), 12);
    let b = Message::Rejoin { items: vec![item] }.encode().unwrap();
    assert_eq!(b, [0, 0, 0, 1, 1, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 3]);
    assert_eq!(frame(0, Message::RejoinDone).len(), HEADER_LEN);
    let d = ReportDigest {
        app_id: 2,
        uk: vec![7, 8],
        estimate: 64,
        bank: 1,
    };
    assert_eq!(d.encode().unwrap(), [2, 2, 7, 8, 0, 0, 0, 64, 1]);
}

#[test]
fn every_malformation_has_its_error() {
    let ping = frame(1, Message::Ping { ts: 3 });
    // Short: a header cut off, a body cut off.
    assert!(matches!(
        Frame::decode(&ping[..10]),
        Err(ControlError::Short {
            field: "header",
            need: 16,
            have: 10
        })
    ));
    assert!(matches!(
        Message::decode(MsgType::Ping, &[0; 5]),
        Err(ControlError::Short { field: "ts", .. })
    ));
    let mut b = ping.clone();
    b[0] = 0x46;
    assert_eq!(Frame::decode(&b), Err(ControlError::BadMagic(0x4658)));
    let mut b = ping.clone();
    b[2] = 2;
    assert_eq!(Frame::decode(&b), Err(ControlError::BadVersion(2)));
    let mut b = ping.clone();
    b[3] = 0x41; // the gap in the table
    assert_eq!(Frame::decode(&b), Err(ControlError::UnknownType(0x41)));
    // Length mismatch: one byte more than the header declares, or a body
    // with a byte after its last field.
    let mut b = ping.clone();
    b.push(0);
    assert_eq!(
        Frame::decode(&b),
        Err(ControlError::LengthMismatch {
            declared: 8,
            actual: 9
        })
    );
    assert_eq!(
        Message::decode(MsgType::RejoinDone, &[0]),
        Err(ControlError::LengthMismatch {
            declared: 1,
            actual: 0
        })
    );
    // A count the body cannot hold is refused before anything is allocated.
    let body = [0, 0, 0, 0, 0, 0, 0, 1, 0xFF, 0xFF, 0xFF, 0xFF];
    assert_eq!(
        Message::decode(MsgType::SyncReq, &body),
        Err(ControlError::CountExceedsBody {
            field: "n",
            count: 0xFFFF_FFFF,
            min_item: 20,
            remaining: 0
        })
    );
    assert!(matches!(
        Message::decode(MsgType::EventFwd, &[1, 0, 5, 1, 2]),
        Err(ControlError::CountExceedsBody { field: "len", .. })
    ));
    // Undefined enumerations and booleans.
    assert_eq!(
        Message::decode(MsgType::WriteApplied, &[2]),
        Err(ControlError::BadValue {
            field: "status",
            value: 2
        })
    );
    assert!(matches!(
        Message::decode(MsgType::Hello, &[0, 1, 0, 0, 0, 0, 2]),
        Err(ControlError::BadValue {
            field: "lost_state",
            value: 2
        })
    ));
    // Encoder limits: key 256 bytes, 256 logical devices, a body over 1 MiB.
    let long = Message::PromoteReport {
        app: 1,
        uk: vec![0; 256],
        estimate: 0,
        elapsed_us: 0,
    };
    assert_eq!(
        long.encode(),
        Err(ControlError::KeyTooLong {
            field: "uk",
            len: 256
        })
    );
    let ok = Message::PromoteReport {
        app: 1,
        uk: vec![0; 255],
        estimate: 0,
        elapsed_us: 0,
    };
    assert_eq!(
        Message::decode(MsgType::PromoteReport, &ok.encode().unwrap()),
        Ok(ok)
    );
    let ldevs = vec![
        LdevRole {
            ldev: 0,
            role: Role::Primary
        };
        256
    ];
    assert_eq!(
        Message::HelloAck { round: 0, ldevs }.encode(),
        Err(ControlError::TooManyItems {
            field: "n",
            count: 256
        })
    );
    let big = Message::Rejoin {
        items: vec![
            RejoinItem {
                app: 0,
                obj: 0,
                key: vec![0; 255],
                h: 0
            };
            MAX_BODY_LEN / 267 + 1
        ],
    };
    assert!(matches!(big.encode(), Err(ControlError::FrameTooLong(_))));
    let mut b = ping;
    b[4..8].copy_from_slice(&((MAX_BODY_LEN + 1) as u32).to_be_bytes());
    assert_eq!(
        Frame::decode(&b),
        Err(ControlError::FrameTooLong(MAX_BODY_LEN + 1))
    );
}

#[test]
fn decoder_skips_a_bad_frame_and_stops_on_lost_sync() {
    let good = frame(1, Message::Ping { ts: 9 });
    let mut unknown = frame(2, Message::Pong { ts: 9 });
    unknown[3] = 0x7F;
    let mut d = FrameDecoder::new();
    for b in [&good, &unknown, &good] {
        assert_eq!(d.push(b), b.len());
    }
    assert_eq!(d.next_frame().unwrap().unwrap().req_id, 1);
    let e = d.next_frame().unwrap_err();
    assert_eq!(e, ControlError::UnknownType(0x7F));
    assert!(!e.is_fatal());
    assert_eq!(d.next_frame().unwrap().unwrap().req_id, 1);
    assert_eq!(d.next_frame(), Ok(None));
    assert_eq!(d.buffered(), 0);
    // Garbage where a header should be: fatal, and stays so.
    d.push(b"GET / HTTP/1.1\r\n\r\n");
    let e = d.next_frame().unwrap_err();
    assert!(e.is_fatal(), "{e}");
    d.push(&good);
    assert_eq!(d.next_frame().unwrap_err(), e);
    assert_eq!(d.failure(), Some(&e));
}

#[test]
fn decoder_refuses_an_oversized_frame_without_buffering_it() {
    let mut d = FrameDecoder::new();
    let mut h = frame(1, Message::RejoinDone);
    h[4..8].copy_from_slice(&u32::MAX.to_be_bytes());
    d.push(&h);
    assert_eq!(
        d.next_frame(),
        Err(ControlError::FrameTooLong(u32::MAX as usize))
    );
    assert_eq!(d.buffered(), 0);
}

#[test]
fn decoder_is_bounded_and_a_full_buffer_yields_a_frame() {
    // The largest legal frame, then more bytes: push takes only what fits,
    // and the full buffer always decodes.
    let max = Message::EventFwd {
        app: 1,
        frame: vec![7; 65_535],
    };
    let one = frame(1, max.clone());
    let stream: Vec<u8> = one.repeat(20).into_iter().collect();
    assert!(stream.len() > DECODER_CAPACITY);
    let mut d = FrameDecoder::new();
    let (mut off, mut got) = (0, 0);
    while off < stream.len() {
        let n = d.push(&stream[off..]);
        off += n;
        assert!(d.buffered() <= DECODER_CAPACITY);
        let mut pulled = false;
        while let Some(f) = d.next_frame().unwrap() {
            assert_eq!(f.msg, max);
            got += 1;
            pulled = true;
        }
        assert!(
            n > 0 || pulled,
            "decoder wedged with {} bytes",
            d.buffered()
        );
    }
    assert_eq!(got, 20);
}

fn bytes(max: usize) -> impl Strategy<Value = Vec<u8>> {
    vec(any::<u8>(), 0..=max)
}

fn key() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![4 => bytes(24), 1 => vec(any::<u8>(), 255..=255)]
}

fn op() -> impl Strategy<Value = WriteOp> {
    proptest::sample::select(WriteOp::ALL)
}

fn arb_entry() -> impl Strategy<Value = Entry> {
    (any::<u16>(), key(), key(), any::<u64>()).prop_map(|(obj, key, val, version)| Entry {
        obj,
        key,
        val,
        version,
    })
}

fn op_entries() -> impl Strategy<Value = Vec<OpEntry>> {
    vec(
        (op(), arb_entry()).prop_map(|(op, entry)| OpEntry { op, entry }),
        0..6,
    )
}

fn sync_items() -> impl Strategy<Value = Vec<SyncItem>> {
    vec(
        (any::<u8>(), any::<u16>(), key(), any::<u64>(), any::<u64>()).prop_map(
            |(app, obj, key, snap, hist)| SyncItem {
                app,
                obj,
                key,
                snap,
                hist,
            },
        ),
        0..6,
    )
}

fn arb_message() -> impl Strategy<Value = Message> {
    prop_oneof![
        (any::<u16>(), any::<u32>(), any::<bool>()).prop_map(|(pdev, caps, lost_state)| {
            Message::Hello {
                pdev,
                caps,
                lost_state,
            }
        }),
        (
            any::<u64>(),
            vec(
                (any::<u8>(), proptest::sample::select(Role::ALL))
                    .prop_map(|(ldev, role)| LdevRole { ldev, role }),
                0..8
            )
        )
            .prop_map(|(round, ldevs)| Message::HelloAck { round, ldevs }),
        (
            any::<u8>(),
            key(),
            vec(
                (op(), any::<u16>(), key(), key()).prop_map(|(op, obj, key, val)| Write {
                    op,
                    obj,
                    key,
                    val
                }),
                0..6
            )
        )
            .prop_map(|(app, uk, writes)| Message::WriteReq { app, uk, writes }),
        (any::<u8>(), op_entries()).prop_map(|(app, entries)| Message::WriteApply { app, entries }),
        proptest::sample::select(AppliedStatus::ALL)
            .prop_map(|status| Message::WriteApplied { status }),
        vec(
            (proptest::sample::select(AckStatus::ALL), any::<u64>())
                .prop_map(|(status, version)| WriteResult { status, version }),
            0..8
        )
        .prop_map(|results| Message::WriteAck { results }),
        (any::<u8>(), key(), any::<u32>(), any::<u32>()).prop_map(
            |(app, uk, estimate, elapsed_us)| Message::PromoteReport {
                app,
                uk,
                estimate,
                elapsed_us
            }
        ),
        (any::<u8>(), bytes(1600)).prop_map(|(app, frame)| Message::EventFwd { app, frame }),
        (any::<u64>(), sync_items()).prop_map(|(round, items)| Message::SyncReq { round, items }),
        (any::<u64>(), sync_items()).prop_map(|(round, items)| Message::SyncResp { round, items }),
        (any::<u8>(), op_entries(), any::<bool>()).prop_map(|(app, entries, last)| Message::Dump {
            app,
            entries,
            last
        }),
        vec(
            (any::<u8>(), any::<u16>(), key(), any::<u64>())
                .prop_map(|(app, obj, key, h)| RejoinItem { app, obj, key, h }),
            0..6
        )
        .prop_map(|items| Message::Rejoin { items }),
        Just(Message::RejoinDone),
        any::<u64>().prop_map(|ts| Message::Ping { ts }),
        any::<u64>().prop_map(|ts| Message::Pong { ts }),
    ]
}

/// Feeds `stream` to a decoder in pieces cut at `cuts` (positions taken
/// modulo the length) and returns the frames, or the first error.
fn decode_chunked(stream: &[u8], cuts: &[usize]) -> Result<Vec<Frame>, ControlError> {
    let mut points: Vec<usize> = cuts.iter().map(|c| c % (stream.len() + 1)).collect();
    points.push(0);
    points.push(stream.len());
    points.sort_unstable();
    let mut d = FrameDecoder::new();
    let mut out = Vec::new();
    for w in points.windows(2) {
        let piece = &stream[w[0]..w[1]];
        assert_eq!(d.push(piece), piece.len());
        while let Some(f) = d.next_frame()? {
            out.push(f);
        }
    }
    Ok(out)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn every_message_round_trips(req_id in any::<u64>(), msg in arb_message()) {
        let f = Frame { req_id, msg };
        let b = f.encode().unwrap();
        let h = FrameHeader::new_checked(&b[..]).unwrap();
        prop_assert_eq!(h.frame_len(), b.len());
        prop_assert_eq!(HeaderRepr::parse(&h).unwrap().msg_type, f.msg.msg_type());
        prop_assert_eq!(Frame::decode(&b).unwrap(), f);
    }

    /// The item sizes senders split batches by add up to the body.
    #[test]
    fn item_lengths_add_up_to_the_body(msg in arb_message()) {
        let body = msg.encode().unwrap().len();
        let predicted = match &msg {
            Message::Dump { entries, .. } => {
                DUMP_FIXED_LEN + entries.iter().map(OpEntry::encoded_len).sum::<usize>()
            }
            Message::SyncReq { items, .. } | Message::SyncResp { items, .. } => {
                SYNC_FIXED_LEN + items.iter().map(SyncItem::encoded_len).sum::<usize>()
            }
            Message::Rejoin { items } => {
                REJOIN_FIXED_LEN + items.iter().map(RejoinItem::encoded_len).sum::<usize>()
            }
            _ => body,
        };
        prop_assert_eq!(predicted, body);
    }

    #[test]
    fn random_bytes_never_panic_and_accepted_bytes_are_canonical(
        raw in bytes(300), t in any::<u8>(), valid_header in any::<bool>()
    ) {
        // Half the inputs get a valid magic, version, type and length, so
        // the body parsers see hostile bodies too.
        let mut b = raw.clone();
        if valid_header && b.len() >= HEADER_LEN {
            let body = (b.len() - HEADER_LEN) as u32;
            let ty = MsgType::ALL[usize::from(t) % MsgType::ALL.len()] as u8;
            b[..8].copy_from_slice(&[0x45, 0x58, 1, ty, 0, 0, 0, 0]);
            b[4..8].copy_from_slice(&body.to_be_bytes());
        }
        if let Ok(f) = Frame::decode(&b) {
            prop_assert_eq!(f.encode().unwrap(), b.clone());
        }
        if let Ok(m) = MsgType::from_type_byte(t).and_then(|ty| Message::decode(ty, &raw)) {
            prop_assert_eq!(m.encode().unwrap(), raw.clone());
        }
        if let Ok(d) = ReportDigest::decode(&raw) {
            prop_assert_eq!(d.encode().unwrap(), raw.clone());
        }
        let mut d = FrameDecoder::new();
        d.push(&b);
        for _ in 0..4 {
            match d.next_frame() {
                Ok(Some(f)) => prop_assert!(f.encode().is_ok()),
                Ok(None) => break,
                Err(e) if e.is_fatal() => break,
                Err(_) => {}
            }
        }
    }

    #[test]
    fn any_chunking_gives_the_same_frames(
        msgs in vec((any::<u64>(), arb_message()), 1..8),
        cuts in vec(any::<usize>(), 0..24),
    ) {
        let frames: Vec<Frame> = msgs.into_iter().map(|(req_id, msg)| Frame { req_id, msg }).collect();
        let stream: Vec<u8> = frames.iter().flat_map(|f| f.encode().unwrap()).collect();
        prop_assert_eq!(decode_chunked(&stream, &[]).unwrap(), frames.clone());
        prop_assert_eq!(decode_chunked(&stream, &cuts).unwrap(), frames.clone());
        // Byte by byte.
        let every: Vec<usize> = (0..stream.len()).collect();
        prop_assert_eq!(decode_chunked(&stream, &every).unwrap(), frames);
    }

    #[test]
    fn report_digest_round_trips(app_id in any::<u8>(), uk in key(), estimate in any::<u32>(), bank in any::<u8>()) {
        let d = ReportDigest { app_id, uk, estimate, bank };
        prop_assert_eq!(ReportDigest::decode(&d.encode().unwrap()).unwrap(), d);
    }
}
