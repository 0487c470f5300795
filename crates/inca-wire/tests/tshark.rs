//! Cross-checks against Wireshark's dissectors: frames we build are written
//! to a pcap and decoded by `tshark`. Fails when tshark is missing unless
//! INCA_SKIP_TSHARK=1, so CI cannot pass silently without it.

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::Command;

use inca_wire::*;

const T1: &str = "e41d2dab2bc27cfe90643b32080045c2003c718c4000401191610a0011010a001201000012b7002800008100ffff40000118000000000000000000000000000000000000000082fd002a";

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// `None` (after printing why) when the run asked to skip tshark.
fn tshark() -> Option<&'static str> {
    if std::env::var("INCA_SKIP_TSHARK").as_deref() == Ok("1") {
        println!("skipped: INCA_SKIP_TSHARK=1, tshark cross-check not run");
        return None;
    }
    match Command::new("tshark").arg("-v").output() {
        Ok(o) if o.status.success() => Some("tshark"),
        Ok(o) => panic!("`tshark -v` failed ({}); install Wireshark's tshark or set INCA_SKIP_TSHARK=1", o.status),
        Err(e) => panic!("tshark not found on PATH ({e}); install it (apt-get install tshark) or set INCA_SKIP_TSHARK=1"),
    }
}

fn tmp(name: &str) -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("inca-wire-{}-{name}", std::process::id()))
}

fn lua_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/icrc_check.lua")
}

/// Runs tshark with the ICRC post-dissector and checksum validation on, and
/// returns one row of tab-separated `fields` per frame.
fn tshark_fields(bin: &str, pcap: &Path, fields: &[&str]) -> Vec<Vec<String>> {
    let mut cmd = Command::new(bin);
    cmd.arg("-n")
        .arg("-r")
        .arg(pcap)
        .args(["-X", &format!("lua_script:{}", lua_script().display())])
        .args([
            "-o",
            "ip.check_checksum:TRUE",
            "-o",
            "udp.check_checksum:TRUE",
            "-o",
            "tcp.check_checksum:TRUE",
        ])
        .args(["-T", "fields", "-E", "separator=\t", "-E", "occurrence=f"]);
    for f in fields {
        cmd.args(["-e", f]);
    }
    let out = cmd.output().expect("run tshark");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "tshark failed: {stderr}");
    assert!(
        !stderr.contains("Lua: Error"),
        "ICRC Lua script failed: {stderr}"
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| l.split('\t').map(str::to_owned).collect())
        .collect()
}

fn write_pcap(name: &str, frames: &[Vec<u8>]) -> PathBuf {
    let path = tmp(name);
    let mut w = PcapWriter::create(&path).unwrap();
    for (i, f) in frames.iter().enumerate() {
        w.write(1_700_000_000_000_000_000 + i as u64 * 1_000, f)
            .unwrap();
    }
    w.finish().unwrap();
    path
}

fn endpoints() -> Endpoints {
    Endpoints::new(
        [0x02, 0, 0, 0, 0x0a, 0xfe],
        Ipv4Addr::new(10, 0, 0, 254),
        [0x02, 0, 0, 0, 0x0a, 0x01],
        Ipv4Addr::new(10, 0, 0, 1),
    )
}

#[test]
fn tshark_decodes_write_read_and_response() {
    let Some(bin) = tshark() else { return };
    let b = RoceFrameBuilder::new(endpoints(), 0xC001, 0x00ABCD);
    let resp = RoceFrameBuilder::new(endpoints().reversed(), 0xC001, 0x000105);
    let frames = vec![
        b.write_only(
            0x000F00,
            false,
            RethRepr {
                virtual_addr: 0x7f00_1234_5600,
                rkey: 0xDEAD_BEEF,
                dma_len: 10,
            },
            b"0123456789",
        )
        .unwrap(),
        b.read_request(
            0x000F01,
            RethRepr {
                virtual_addr: 0x7f00_0000_1000,
                rkey: 0x0000_1234,
                dma_len: 4096,
            },
            &[],
        )
        .unwrap(),
        resp.read_response(
            ReadResponsePart::Only,
            0xFFFFFF,
            Some(AethRepr {
                syndrome: 0x1F,
                msn: 77,
            }),
            b"value!",
        )
        .unwrap(),
    ];
    let path = write_pcap("decode.pcap", &frames);
    let rows = tshark_fields(
        bin,
        &path,
        &[
            "frame.protocols",
            "infiniband.bth.opcode",
            "infiniband.bth.destqp",
            "infiniband.bth.psn",
            "infiniband.bth.a",
            "infiniband.bth.padcnt",
            "infiniband.reth.va",
            "infiniband.reth.r_key",
            "infiniband.reth.dmalen",
            "infiniband.aeth.syndrome",
            "infiniband.aeth.msn",
            "ip.checksum.status",
            "inca_icrc.status",
        ],
    );
    assert_eq!(rows.len(), 3, "{rows:?}");
    let want: [[&str; 13]; 3] = [
        [
            "",
            "10",
            "0x00abcd",
            "3840",
            "0",
            "2",
            "0x00007f0012345600",
            "0xdeadbeef",
            "10",
            "",
            "",
            "1",
            "good",
        ],
        [
            "",
            "12",
            "0x00abcd",
            "3841",
            "1",
            "0",
            "0x00007f0000001000",
            "0x00001234",
            "4096",
            "",
            "",
            "1",
            "good",
        ],
        [
            "", "16", "0x000105", "16777215", "0", "2", "", "", "", "31", "77", "1", "good",
        ],
    ];
    for (row, want) in rows.iter().zip(want) {
        assert!(
            row[0].contains("eth:ethertype:ip:udp:infiniband"),
            "not decoded as RoCE: {row:?}"
        );
        assert_eq!(&row[1..], &want[1..], "tshark fields differ");
    }
    // The full text view names the opcodes as Wireshark knows them.
    let out = Command::new(bin)
        .arg("-n")
        .arg("-r")
        .arg(&path)
        .arg("-V")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    for name in [
        "Opcode: Reliable Connection (RC) - RDMA WRITE Only (10)",
        "Opcode: Reliable Connection (RC) - RDMA READ Request (12)",
        "Opcode: Reliable Connection (RC) - RDMA READ response Only (16)",
    ] {
        assert!(text.contains(name), "tshark -V does not mention {name}");
    }
    std::fs::remove_file(path).ok();
}

#[test]
fn tshark_icrc_check_agrees() {
    let Some(bin) = tshark() else { return };
    let mut ep = endpoints();
    ep.vlan = Some(VlanTag {
        pcp: 3,
        dei: false,
        vid: 100,
    });
    ep.tos = 0x68;
    let b = RoceFrameBuilder::new(ep, 0xC123, 42).with_udp_checksum(true);
    let aeth = AethRepr {
        syndrome: 0x1F,
        msn: 1,
    };
    let mut frames = vec![
        hex(T1), // captured from a real NIC: validates the checker itself
        b.write_only(
            1,
            true,
            RethRepr {
                virtual_addr: 1 << 40,
                rkey: 7,
                dma_len: 3,
            },
            b"abc",
        )
        .unwrap(),
        b.read_response(ReadResponsePart::First, 2, Some(aeth), &[0x55; 256])
            .unwrap(),
        b.read_response(ReadResponsePart::Middle, 3, None, &[0x66; 256])
            .unwrap(),
        b.read_response(ReadResponsePart::Last, 4, Some(aeth), &[0x77; 13])
            .unwrap(),
        b.ack(
            5,
            AethRepr {
                syndrome: roce::syndrome::NAK_PSN_SEQ_ERROR,
                msn: 2,
            },
        )
        .unwrap(),
    ];
    // Router-style rewrite of masked fields (TTL and IP checksum) must keep it good.
    let mut routed = frames[1].clone();
    {
        let off = ethernet::payload_offset(&routed).unwrap();
        let mut ip = Ipv4Packet::new_checked(&mut routed[off..]).unwrap();
        ip.set_ttl(ip.ttl() - 1);
        ip.fill_checksum();
    }
    frames.push(routed);
    // A corrupted payload byte must be reported bad.
    let mut corrupt = frames[1].clone();
    let n = corrupt.len();
    corrupt[n - 6] ^= 0x01;
    frames.push(corrupt);
    let path = write_pcap("icrc.pcap", &frames);
    let rows = tshark_fields(
        bin,
        &path,
        &[
            "inca_icrc.status",
            "infiniband.invariant.crc",
            "udp.checksum.status",
        ],
    );
    assert_eq!(rows.len(), frames.len());
    for (i, (row, f)) in rows.iter().zip(&frames).enumerate() {
        let want = if i == frames.len() - 1 { "bad" } else { "good" };
        assert_eq!(row[0], want, "frame {i}: tshark-side ICRC check");
        // Wireshark shows the ICRC as the wire bytes read big-endian (it
        // does not show one for a CNP, frame 0).
        if i > 0 {
            let wire = &f[f.len() - 4..];
            assert_eq!(
                row[1],
                format!(
                    "0x{:02x}{:02x}{:02x}{:02x}",
                    wire[0], wire[1], wire[2], wire[3]
                )
            );
        }
        if i > 0 && i < frames.len() - 1 {
            assert_eq!(row[2], "1", "frame {i}: tshark UDP checksum status");
        }
    }
    std::fs::remove_file(path).ok();
}

#[test]
fn tshark_validates_udp_and_tcp_checksums() {
    let Some(bin) = tshark() else { return };
    let ep = endpoints();
    let tcp = TcpRepr {
        src_port: 40000,
        dst_port: 8080,
        seq: 0x0102_0304,
        ack: 0x0A0B_0C0D,
        flags: TcpFlags::ACK | TcpFlags::PSH,
        window: 512,
        urgent: 0,
        options: &[1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2],
        payload: b"GET / HTTP/1.0\r\n\r\n",
    };
    let frames = vec![
        build_udp_frame(&ep, 5000, 53, b"odd-length", true).unwrap(),
        build_tcp_frame(&ep, &tcp).unwrap(),
    ];
    let path = write_pcap("l4.pcap", &frames);
    let rows = tshark_fields(
        bin,
        &path,
        &[
            "ip.checksum.status",
            "udp.checksum.status",
            "tcp.checksum.status",
            "tcp.seq_raw",
            "tcp.flags",
            "tcp.options.timestamp.tsval",
        ],
    );
    assert_eq!(rows[0][..2], ["1", "1"]);
    assert_eq!(rows[1][0], "1");
    assert_eq!(rows[1][2], "1");
    assert_eq!(rows[1][3], "16909060");
    assert_eq!(rows[1][4], "0x0018");
    assert_eq!(rows[1][5], "1");
    std::fs::remove_file(path).ok();
}
