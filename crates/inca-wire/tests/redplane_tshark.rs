//! The RedPlane Lua dissector (contrib/wireshark/redplane.lua) decodes the
//! requests and acks we build: a pcap with a LEASE_RENEW write carrying a
//! piggybacked IPv4 packet, its RENEW_ACK, a MIGRATE_ACK with a value, and a
//! HEAD_ANNOUNCE is run through tshark. Skips (with the reason) when tshark
//! is not installed or INCA_SKIP_TSHARK=1 (tests/dissect).

mod dissect;

use inca_wire::redplane::*;
use std::net::Ipv4Addr;

#[test]
fn tshark_dissects_redplane_with_the_lua_script() {
    let sw = Ipv4Addr::new(10, 1, 0, 1);
    let st = Ipv4Addr::new(10, 9, 0, 1);
    let key = [10, 0, 0, 5, 0x30, 0x39];
    // The piggyback: a small IPv4/UDP packet, so the dissector hands it on.
    let inner_ep = rp_endpoints(
        [0; 6],
        Ipv4Addr::new(10, 0, 0, 5),
        [0; 6],
        Ipv4Addr::new(8, 8, 8, 8),
        1,
    );
    let inner = build_rp_frame(&inner_ep, 12345, 53, b"query").unwrap()[14..].to_vec();
    let to_store = rp_endpoints([2, 0, 0, 0, 0, 1], sw, [2, 0, 0, 0, 0, 2], st, 0xBEEF);
    let to_switch = rp_endpoints([2, 0, 0, 0, 0, 2], st, [2, 0, 0, 0, 0, 1], sw, 0xBEEF);
    let frames = [
        build_request_frame(
            &to_store,
            8001,
            &RequestRepr {
                req_type: ReqType::LeaseRenew,
                seq: 4097,
                key: &key,
                value: &[100, 64, 0, 1, 0x10, 0x00],
                piggyback: &inner,
            },
        )
        .unwrap(),
        build_ack_frame(
            &to_switch,
            8001,
            &AckRepr {
                ack_type: AckType::LeaseRenew,
                seq: 4097,
                key: &key,
                value: &[],
                piggyback: &inner,
            },
        )
        .unwrap(),
        build_ack_frame(
            &to_switch,
            8001,
            &AckRepr {
                ack_type: AckType::LeaseMigrate,
                seq: 8193,
                key: &key,
                value: &[100, 64, 0, 1, 0x10, 0x00],
                piggyback: &[],
            },
        )
        .unwrap(),
        build_rp_frame(
            &to_switch,
            NODE_CONTROL_PORT,
            SWITCH_PORT,
            &HeadAnnounceRepr {
                config_version: 1,
                old_head: st,
                new_head: Ipv4Addr::new(10, 9, 0, 2),
            }
            .to_vec(),
        )
        .unwrap(),
    ];
    let fields = [
        "redplane.req_type",
        "redplane.ack_type",
        "redplane.seq",
        "redplane.key",
        "redplane.value",
        "redplane.piggyback_len",
        "redplane.new_head",
        "udp.dstport",
    ];
    let Some(rows) = dissect::dissect("redplane.lua", &frames, &fields) else {
        return;
    };
    let text = format!("{rows:?}");
    let rows: Vec<Vec<&str>> = rows
        .iter()
        .map(|r| r.iter().map(String::as_str).collect())
        .collect();
    assert_eq!(rows.len(), 4, "{text}");
    // Request: type 1, seq 4097, key, value, a 33-byte piggyback (IPv4 20 + UDP 8 + 5), inner UDP 53.
    assert_eq!(
        &rows[0][..6],
        &["0x01", "", "4097", "0a0000053039", "644000011000", "33"],
        "{text}"
    );
    assert!(
        rows[0][7].contains("53"),
        "inner packet not dissected: {text}"
    );
    assert_eq!(
        &rows[1][..6],
        &["", "0x01", "4097", "0a0000053039", "", "33"],
        "{text}"
    );
    assert_eq!(
        &rows[2][..6],
        &["", "0x02", "8193", "0a0000053039", "644000011000", ""],
        "{text}"
    );
    assert_eq!(rows[3][1], "0x20", "{text}");
    assert_eq!(rows[3][6], "10.9.0.2", "{text}");
}
