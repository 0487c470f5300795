//! The ExoPlane Lua dissector (contrib/wireshark/exoplane.lua) decodes what
//! the spec describes: EXO shim frames built here byte by byte from
//! specs/exoplane.md §4.1 (a TO_DEV carrying IPv4/UDP, a FROM_DEV with the
//! FAILOVER flag, a MERGE with its §4.3 body), and control frames from
//! `inca_wire::exoplane::control` in TCP segments to and from port 7700 —
//! two frames in one segment, and one frame split across two segments that
//! tshark must reassemble, and a body shorter than its count says. Skips (with the reason) when tshark is not
//! installed or INCA_SKIP_TSHARK=1.

use std::net::Ipv4Addr;
use std::path::Path;
use std::process::Command;

use inca_wire::exoplane::control::*;
use inca_wire::exoplane::{ETHERTYPE, HUB_PORT};
use inca_wire::{build_tcp_frame, build_udp_frame, Endpoints, PcapWriter, TcpFlags, TcpRepr};

const SW: [u8; 6] = [2, 0, 0, 0, 0, 1];
const DEV: [u8; 6] = [2, 0, 0, 0, 0, 2];

/// Ethernet ‖ 12-byte shim (§4.1) ‖ rest.
#[allow(clippy::too_many_arguments)]
fn shim_frame(
    ty: u8,
    flags: u8,
    app: u8,
    ldev: u8,
    in_port: u16,
    out_port: u16,
    next_type: u16,
    rest: &[u8],
) -> Vec<u8> {
    let mut f = DEV.to_vec();
    f.extend_from_slice(&SW);
    f.extend_from_slice(&ETHERTYPE.to_be_bytes());
    f.push(1 << 4 | ty); // ver 1 ‖ type
    f.push(flags);
    f.push(app);
    f.push(ldev);
    f.extend_from_slice(&in_port.to_be_bytes());
    f.extend_from_slice(&out_port.to_be_bytes());
    f.extend_from_slice(&next_type.to_be_bytes());
    f.extend_from_slice(&[0, 0]); // rsvd
    f.extend_from_slice(rest);
    f
}

/// The §4.3 body: obj_id 16 ‖ op 8 ‖ width 8 ‖ slot 32 ‖ round 64 ‖ delta 64.
fn merge_body(obj: u16, op: u8, width: u8, slot: u32, round: u64, delta: u64) -> Vec<u8> {
    let mut b = obj.to_be_bytes().to_vec();
    b.push(op);
    b.push(width);
    b.extend_from_slice(&slot.to_be_bytes());
    b.extend_from_slice(&round.to_be_bytes());
    b.extend_from_slice(&delta.to_be_bytes());
    b
}

fn tcp(ep: &Endpoints, sport: u16, dport: u16, seq: u32, payload: &[u8]) -> Vec<u8> {
    build_tcp_frame(
        ep,
        &TcpRepr {
            src_port: sport,
            dst_port: dport,
            seq,
            ack: 1,
            flags: TcpFlags::ACK | TcpFlags::PSH,
            window: 65535,
            urgent: 0,
            options: &[],
            payload,
        },
    )
    .unwrap()
}

fn enc(req_id: u64, msg: Message) -> Vec<u8> {
    Frame { req_id, msg }.encode().unwrap()
}

#[test]
fn tshark_dissects_exoplane_with_the_lua_script() {
    if std::env::var("INCA_SKIP_TSHARK").as_deref() == Ok("1") {
        println!("skipped: INCA_SKIP_TSHARK=1, ExoPlane dissector check not run");
        return;
    }
    if Command::new("tshark")
        .arg("-v")
        .output()
        .map(|o| !o.status.success())
        .unwrap_or(true)
    {
        println!("skipped: tshark not found on PATH (apt-get install tshark)");
        return;
    }
    let host = Endpoints::new(
        SW,
        Ipv4Addr::new(10, 0, 0, 5),
        DEV,
        Ipv4Addr::new(8, 8, 8, 8),
    );
    let inner = build_udp_frame(&host, 12345, 40001, b"query", true).unwrap();
    let daemon = Endpoints::new(
        DEV,
        Ipv4Addr::new(10, 0, 9, 2),
        SW,
        Ipv4Addr::new(10, 0, 9, 1),
    );
    let hub = daemon.reversed();
    let hello = enc(
        1,
        Message::Hello {
            pdev: 2,
            caps: 0x15,
            lost_state: true,
        },
    );
    let ping = enc(2, Message::Ping { ts: 123_456_789 });
    let apply = enc(
        7,
        Message::WriteApply {
            app: 3,
            entries: vec![
                OpEntry {
                    op: WriteOp::InsertIfAbsent,
                    entry: Entry {
                        obj: 4,
                        key: vec![0x0a, 0, 0, 5, 0x30, 0x39],
                        val: vec![0x64, 0x40, 0, 1],
                        version: 41,
                    },
                },
                OpEntry {
                    op: WriteOp::Delete,
                    entry: Entry {
                        obj: 4,
                        key: vec![0xbb; 200],
                        val: vec![],
                        version: 42,
                    },
                },
            ],
        },
    );
    let sync = enc(
        8,
        Message::SyncReq {
            round: 77,
            items: vec![SyncItem {
                app: 6,
                obj: 9,
                key: vec![1, 2, 3],
                snap: 1000,
                hist: 990,
            }],
        },
    );
    let event = enc(
        9,
        Message::EventFwd {
            app: 3,
            frame: inner.clone(),
        },
    );
    // WRITE_REQ with the flow's union key, DUMP with its app, REJOIN with
    // per-item apps: the fields inca adds to §4.6's bodies.
    let write_req = enc(
        3,
        Message::WriteReq {
            app: 3,
            uk: vec![0x0a, 0, 0, 5],
            writes: vec![Write {
                op: WriteOp::Upsert,
                obj: 4,
                key: vec![0xcc],
                val: vec![0xdd],
            }],
        },
    );
    let dump = enc(
        11,
        Message::Dump {
            app: 5,
            entries: vec![],
            last: true,
        },
    );
    let rejoin = enc(
        12,
        Message::Rejoin {
            items: vec![RejoinItem {
                app: 7,
                obj: 2,
                key: vec![0xee],
                h: 31,
            }],
        },
    );
    let mut event_dump_rejoin = event.clone();
    event_dump_rejoin.extend_from_slice(&dump);
    event_dump_rejoin.extend_from_slice(&rejoin);
    // A WRITE_ACK whose count (3) promises more results than its body has.
    let mut bad = enc(
        10,
        Message::WriteAck {
            results: vec![WriteResult {
                status: AckStatus::Ok,
                version: 1,
            }],
        },
    );
    bad[HEADER_LEN + 1] = 3;
    // Daemon → hub: HELLO, PING and WRITE_REQ in one segment.
    let mut two = hello.clone();
    two.extend_from_slice(&ping);
    two.extend_from_slice(&write_req);
    // Hub → daemon: WRITE_APPLY split across two segments (the second also
    // carries SYNC_REQ), then EVENT_FWD.
    let cut = 40;
    let mut tail = apply[cut..].to_vec();
    tail.extend_from_slice(&sync);
    let hub_seq = 5000u32;
    let frames = [
        shim_frame(1, 0, 3, 2, 5, 0, 0x0800, &inner[14..]),
        shim_frame(2, 1, 3, 2, 5, 7, 0x0800, &inner[14..]),
        shim_frame(3, 0, 1, 0, 0, 0, 0, &merge_body(12, 1, 32, 4097, 9, 250)),
        tcp(&daemon, 40000, HUB_PORT, 1000, &two),
        tcp(&hub, HUB_PORT, 40000, hub_seq, &apply[..cut]),
        tcp(&hub, HUB_PORT, 40000, hub_seq + cut as u32, &tail),
        tcp(
            &hub,
            HUB_PORT,
            40000,
            hub_seq + (apply.len() + sync.len()) as u32,
            &event_dump_rejoin,
        ),
        tcp(&daemon, 40002, HUB_PORT, 1, &bad),
    ];
    let path = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("inca-wire-{}-exoplane.pcap", std::process::id()));
    let mut w = PcapWriter::create(&path).unwrap();
    for (i, f) in frames.iter().enumerate() {
        w.write(1_700_000_000_000_000_000 + i as u64 * 1000, f)
            .unwrap();
    }
    w.finish().unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../contrib/wireshark/exoplane.lua");
    let fields = [
        "exoplane.type",
        "exoplane.failover",
        "exoplane.app_id",
        "exoplane.ldev",
        "exoplane.in_port",
        "exoplane.out_port",
        "exoplane.next_type",
        "udp.dstport",
        "exoplane.merge.obj_id",
        "exoplane.merge.op",
        "exoplane.merge.width",
        "exoplane.merge.slot",
        "exoplane.merge.round",
        "exoplane.merge.delta",
        "exoctl.type",
        "exoctl.req_id",
        "exoctl.pdev",
        "exoctl.caps",
        "exoctl.lost_state",
        "exoctl.ts",
        "exoctl.op",
        "exoctl.key",
        "exoctl.val",
        "exoctl.entry_version",
        "exoctl.round",
        "exoctl.snap",
        "exoctl.hist",
        "exoctl.frame_len",
        "exoctl.app",
        "exoctl.uk",
        "exoctl.last",
        "exoctl.h",
        "_ws.expert",
    ];
    let mut cmd = Command::new("tshark");
    cmd.arg("-n")
        .arg("-r")
        .arg(&path)
        .args(["-X", &format!("lua_script:{}", script.display())])
        .args(["-T", "fields", "-E", "separator=\t", "-E", "occurrence=a"])
        .args(["-E", "aggregator=,"]);
    for f in fields {
        cmd.args(["-e", f]);
    }
    let out = cmd.output().expect("run tshark");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && !stderr.contains("Lua: Error"),
        "tshark failed: {stderr}"
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let rows: Vec<Vec<&str>> = text.lines().map(|l| l.split('\t').collect()).collect();
    assert_eq!(rows.len(), frames.len(), "{text}");
    let col = |row: usize, name: &str| -> &str {
        let i = fields.iter().position(|f| *f == name).unwrap();
        rows[row].get(i).copied().unwrap_or("")
    };
    // TO_DEV: shim fields, and the IPv4/UDP packet after it is dissected.
    assert_eq!(
        [
            col(0, "exoplane.type"),
            col(0, "exoplane.failover"),
            col(0, "exoplane.app_id"),
            col(0, "exoplane.ldev"),
            col(0, "exoplane.in_port"),
            col(0, "exoplane.out_port"),
            col(0, "exoplane.next_type"),
            col(0, "udp.dstport"),
        ],
        ["1", "0", "3", "2", "5", "0", "0x0800", "40001"],
        "{text}"
    );
    // FROM_DEV with FAILOVER and the app's egress port.
    assert_eq!(
        [
            col(1, "exoplane.type"),
            col(1, "exoplane.failover"),
            col(1, "exoplane.out_port")
        ],
        ["2", "1", "7"],
        "{text}"
    );
    // MERGE body.
    assert_eq!(
        [
            col(2, "exoplane.type"),
            col(2, "exoplane.merge.obj_id"),
            col(2, "exoplane.merge.op"),
            col(2, "exoplane.merge.width"),
            col(2, "exoplane.merge.slot"),
            col(2, "exoplane.merge.round"),
            col(2, "exoplane.merge.delta"),
        ],
        ["3", "12", "1", "32", "4097", "9", "250"],
        "{text}"
    );
    // Two control frames in one segment.
    assert_eq!(col(3, "exoctl.type"), "0x01,0x50,0x10", "{text}");
    assert_eq!(col(3, "exoctl.req_id"), "1,2,3", "{text}");
    assert_eq!(col(3, "exoctl.app"), "3", "{text}");
    assert_eq!(col(3, "exoctl.uk"), "0a000005", "{text}");
    assert_eq!(col(3, "exoctl.key"), "cc", "{text}");
    assert_eq!(
        [
            col(3, "exoctl.pdev"),
            col(3, "exoctl.caps"),
            col(3, "exoctl.lost_state"),
            col(3, "exoctl.ts")
        ],
        ["2", "0x00000015", "1", "123456789"],
        "{text}"
    );
    // The first half of WRITE_APPLY alone decodes nothing; the segment that
    // completes it shows WRITE_APPLY (reassembled) and SYNC_REQ.
    assert_eq!(col(4, "exoctl.type"), "", "{text}");
    assert_eq!(col(5, "exoctl.type"), "0x11,0x30", "{text}");
    assert_eq!(col(5, "exoctl.op"), "1,3", "{text}");
    assert_eq!(col(5, "exoctl.app"), "3,6", "{text}");
    let long_key = "bb".repeat(200);
    assert_eq!(
        col(5, "exoctl.key"),
        format!("0a0000053039,{long_key},010203"),
        "{text}"
    );
    // tshark prints a present but empty bytes field as <MISSING>.
    assert_eq!(col(5, "exoctl.val"), "64400001,<MISSING>", "{text}");
    assert_eq!(col(5, "exoctl.entry_version"), "41,42", "{text}");
    assert_eq!(
        [
            col(5, "exoctl.round"),
            col(5, "exoctl.snap"),
            col(5, "exoctl.hist")
        ],
        ["77", "1000", "990"],
        "{text}"
    );
    // EVENT_FWD hands its frame to the Ethernet dissector.
    assert_eq!(col(6, "exoctl.type"), "0x21,0x40,0x42", "{text}");
    assert_eq!(col(6, "exoctl.app"), "3,5,7", "{text}");
    assert_eq!(col(6, "exoctl.last"), "1", "{text}");
    assert_eq!(col(6, "exoctl.h"), "31", "{text}");
    assert_eq!(
        col(6, "exoctl.frame_len"),
        inner.len().to_string(),
        "{text}"
    );
    assert_eq!(col(6, "udp.dstport"), "40001", "{text}");
    // Nothing but the last frame was marked malformed, and that one is.
    assert!(
        rows[..7]
            .iter()
            .all(|r| r.last().copied().unwrap_or("").is_empty()),
        "{text}"
    );
    assert_eq!(col(7, "exoctl.type"), "0x13", "{text}");
    assert!(
        col(7, "_ws.expert").contains("Malformed ExoPlane control body"),
        "{text}"
    );
}

#[test]
fn tshark_dissects_the_netcache_header_with_the_lua_script() {
    use inca_wire::exoplane::netcache::{NetCacheRepr, Op, PORT};
    if std::env::var("INCA_SKIP_TSHARK").as_deref() == Ok("1") {
        println!("skipped: INCA_SKIP_TSHARK=1, NetCache dissector check not run");
        return;
    }
    if Command::new("tshark")
        .arg("-v")
        .output()
        .map(|o| !o.status.success())
        .unwrap_or(true)
    {
        println!("skipped: tshark not found on PATH (apt-get install tshark)");
        return;
    }
    let client = Endpoints::new(
        SW,
        Ipv4Addr::new(10, 0, 0, 5),
        DEV,
        Ipv4Addr::new(10, 0, 1, 1),
    );
    let nc = |op, seq, value: Vec<u8>| {
        NetCacheRepr {
            op,
            seq,
            key: [0xA5; 16],
            value,
        }
        .to_bytes()
        .unwrap()
    };
    let mut bad = nc(Op::Read, 1, vec![]);
    bad[0] = 9;
    let frames = [
        build_udp_frame(&client, PORT, PORT, &nc(Op::Read, 7, vec![]), true).unwrap(),
        build_udp_frame(
            &client.reversed(),
            PORT,
            PORT,
            &nc(Op::Reply, 7, vec![0x11; 128]),
            true,
        )
        .unwrap(),
        build_udp_frame(&client, PORT, PORT, &bad, true).unwrap(),
    ];
    let path = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("inca-wire-{}-netcache.pcap", std::process::id()));
    let mut w = PcapWriter::create(&path).unwrap();
    for (i, f) in frames.iter().enumerate() {
        w.write(1_700_000_000_000_000_000 + i as u64 * 1000, f)
            .unwrap();
    }
    w.finish().unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../contrib/wireshark/exoplane.lua");
    let fields = [
        "exonc.op",
        "exonc.seq",
        "exonc.key",
        "exonc.value_len",
        "_ws.expert",
    ];
    let mut cmd = Command::new("tshark");
    cmd.arg("-n")
        .arg("-r")
        .arg(&path)
        .args(["-X", &format!("lua_script:{}", script.display())])
        .args(["-T", "fields", "-E", "separator=\t", "-E", "occurrence=a"]);
    for f in fields {
        cmd.args(["-e", f]);
    }
    let out = cmd.output().expect("run tshark");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && !stderr.contains("Lua: Error"),
        "tshark failed: {stderr}"
    );
    let text = String::from_utf8(out.stdout).unwrap();
    println!("{text}");
    let rows: Vec<Vec<&str>> = text.lines().map(|l| l.split('\t').collect()).collect();
    assert_eq!(rows.len(), frames.len(), "{text}");
    let key = "a5".repeat(16);
    assert_eq!(rows[0][..4], ["1", "7", key.as_str(), "0"], "{text}");
    assert_eq!(rows[1][..4], ["3", "7", key.as_str(), "128"], "{text}");
    assert!(rows[0][4].is_empty() && rows[1][4].is_empty(), "{text}");
    assert!(!rows[2][4].is_empty(), "the bad op is flagged: {text}");
}
