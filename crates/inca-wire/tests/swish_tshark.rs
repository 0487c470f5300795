//! The SwiSh Lua dissector (contrib/wireshark/swish.lua) decodes frames laid
//! out byte by byte as specs/swish.md §4 gives them: an SRO WRITE with a NAT
//! key and value, an EWO G-counter UPDATE, an SDW DATA and READY, and a DDoS
//! push digest. The bodies are written here from the spec's tables, not by
//! the protocol modules, so the script is checked against the spec itself.

mod dissect;

use std::net::Ipv4Addr;

use inca_wire::builder::{build_udp_frame, Endpoints};
use inca_wire::swish::{flags, HeaderRepr, Proto, GROUP_RID, UDP_PORT};

fn frame(header: HeaderRepr, body: &[u8], dst_port: u16) -> Vec<u8> {
    let ep = Endpoints::new(
        [2, 0x53, 0x57, 0, 0, 1],
        Ipv4Addr::new(10, 47, 0, 1),
        [2, 0x53, 0x57, 0, 0, 2],
        Ipv4Addr::new(10, 47, 0, 2),
    );
    let mut payload = header.to_bytes().to_vec();
    payload.extend_from_slice(body);
    build_udp_frame(&ep, UDP_PORT ^ 1, dst_port, &payload, false).unwrap()
}

fn header(proto: Proto, msg_type: u8, flags: u8) -> HeaderRepr {
    HeaderRepr {
        proto,
        msg_type,
        flags,
        group_id: 3,
        src_rid: 1,
        dst_rid: 2,
    }
}

#[test]
fn tshark_dissects_swish_with_the_lua_script() {
    // SRO WRITE: seq 77, origin 1, var 9, req 5, key 7 B, value 6 B, each padded to 4 B.
    let mut sro = Vec::new();
    sro.extend_from_slice(&77u32.to_be_bytes());
    sro.extend_from_slice(&1u16.to_be_bytes());
    sro.extend_from_slice(&9u16.to_be_bytes());
    sro.extend_from_slice(&5u32.to_be_bytes());
    sro.extend_from_slice(&[7, 6, 0, 0]);
    sro.extend_from_slice(&[10, 0, 0, 5, 0x30, 0x39, 6, 0]);
    sro.extend_from_slice(&[100, 64, 0, 1, 0x10, 0x00, 0, 0]);
    // EWO UPDATE: var 4, GCNT, 1 value, index 1234, slot_base 2, value 41.
    let mut ewo = Vec::new();
    ewo.extend_from_slice(&4u16.to_be_bytes());
    ewo.extend_from_slice(&[2, 1]);
    ewo.extend_from_slice(&1234u32.to_be_bytes());
    ewo.extend_from_slice(&2u16.to_be_bytes());
    ewo.extend_from_slice(&[0, 0]);
    ewo.extend_from_slice(&41u32.to_be_bytes());
    // SDW DATA: win 9, col 63 of 64, coll 3, 3 rows, values.
    let mut data = Vec::new();
    for v in [9u32, 63, 64] {
        data.extend_from_slice(&v.to_be_bytes());
    }
    data.extend_from_slice(&3u16.to_be_bytes());
    data.extend_from_slice(&[3, 0]);
    for v in [0xA0u32, 0xB0, 0xC0] {
        data.extend_from_slice(&v.to_be_bytes());
    }
    let ready = data[..16].to_vec();
    let mut digest = Vec::new();
    digest.extend_from_slice(&[192, 0, 2, 7]);
    digest.extend_from_slice(&600u32.to_be_bytes());
    digest.extend_from_slice(&[0, 2, 0, 0]);
    let mut ready_header = header(Proto::Sdw, 0x03, 0);
    ready_header.dst_rid = GROUP_RID;
    // UDP 47010 carries the digest alone, without the common header.
    let to_controller = Endpoints::new(
        [2, 0x53, 0x57, 0, 0, 2],
        Ipv4Addr::new(10, 47, 0, 2),
        [2, 0, 0, 0, 0, 9],
        Ipv4Addr::new(10, 9, 0, 1),
    );
    let frames = [
        frame(header(Proto::Sro, 0x02, 0), &sro, UDP_PORT),
        frame(header(Proto::Ewo, 0x01, 0), &ewo, UDP_PORT),
        frame(
            header(Proto::Sdw, 0x01, flags::LAST | flags::RETX),
            &data,
            UDP_PORT,
        ),
        frame(ready_header, &ready, UDP_PORT),
        build_udp_frame(&to_controller, 47010, 47010, &digest, false).unwrap(),
    ];
    let fields = [
        "swish.proto",
        "swish.type",
        "swish.flags",
        "swish.dst_rid",
        "swish.sro.seq",
        "swish.sro.key",
        "swish.sro.value",
        "swish.ewo.merge_kind",
        "swish.ewo.index",
        "swish.ewo.slot_base",
        "swish.ewo.value",
        "swish.sdw.win",
        "swish.sdw.col",
        "swish.sdw.ncols",
        "swish.sdw.value",
        "swish_digest.src_ip",
        "swish_digest.local_est",
    ];
    let Some(rows) = dissect::dissect("swish.lua", &frames, &fields) else {
        return;
    };
    assert_eq!(rows.len(), 5, "{rows:?}");
    let col = |row: usize, name: &str| -> &str {
        let i = fields.iter().position(|f| *f == name).unwrap();
        rows[row][i].as_str()
    };
    assert_eq!(col(0, "swish.proto"), "1", "{rows:?}");
    assert_eq!(col(0, "swish.type"), "0x02");
    assert_eq!(col(0, "swish.sro.seq"), "77");
    assert_eq!(col(0, "swish.sro.key"), "0a000005303906");
    assert_eq!(col(0, "swish.sro.value"), "644000011000");
    assert_eq!(col(1, "swish.proto"), "2");
    assert_eq!(col(1, "swish.ewo.merge_kind"), "2");
    assert_eq!(col(1, "swish.ewo.index"), "1234");
    assert_eq!(col(1, "swish.ewo.slot_base"), "2");
    assert_eq!(col(1, "swish.ewo.value"), "41");
    assert_eq!(col(2, "swish.proto"), "3");
    assert_eq!(col(2, "swish.flags"), "0x06");
    assert_eq!(col(2, "swish.sdw.win"), "9");
    assert_eq!(col(2, "swish.sdw.col"), "63");
    assert_eq!(col(2, "swish.sdw.ncols"), "64");
    assert_eq!(
        col(2, "swish.sdw.value"),
        "0x000000a0,0x000000b0,0x000000c0"
    );
    assert_eq!(col(3, "swish.type"), "0x03");
    assert_eq!(col(3, "swish.dst_rid"), "65535");
    assert_eq!(col(3, "swish.sdw.value"), "");
    assert_eq!(col(4, "swish_digest.src_ip"), "192.0.2.7");
    assert_eq!(col(4, "swish_digest.local_est"), "600");
}
