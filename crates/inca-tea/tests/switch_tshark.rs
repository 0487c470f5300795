//! The switch's RDMA frames, captured on the server links of a simulated
//! run, decoded by tshark: RoCE (InfiniBand over UDP 4791), no malformed
//! packets, correct IPv4 checksums and ICRCs (the ICRC checked by the
//! independent Lua post-dissector of crates/inca-wire/tests). Fails when
//! tshark is missing unless INCA_SKIP_TSHARK=1.

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::Command;

use inca_tea::rig::{Probe, Rig, RigConfig};
use inca_wire::{build_udp_frame, Endpoints};

fn tshark() -> Option<&'static str> {
    if std::env::var("INCA_SKIP_TSHARK").as_deref() == Ok("1") {
        println!("skipped: INCA_SKIP_TSHARK=1, tshark cross-check not run");
        return None;
    }
    match Command::new("tshark").arg("-v").output() {
        Ok(o) if o.status.success() => Some("tshark"),
        Ok(o) => panic!(
            "`tshark -v` failed ({}); install tshark or set INCA_SKIP_TSHARK=1",
            o.status
        ),
        Err(e) => panic!("tshark not found ({e}); install it or set INCA_SKIP_TSHARK=1"),
    }
}

fn lua_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../inca-wire/tests/icrc_check.lua")
}

fn capture(trailer: bool) -> PathBuf {
    let cfg = RigConfig {
        read_req_trailer: trailer,
        cache_cap: 0,
        servers: 1,
        replication: 1,
        ..RigConfig::default()
    };
    let mut rig = Rig::nat(&cfg, Probe::default(), Probe::default()).unwrap();
    let path = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("tea-tshark-{}-{trailer}.pcap", std::process::id()));
    let l = rig.server_links[0];
    rig.sim.capture(l, &path).unwrap();
    assert!(rig.run_until_ready(20_000_000));
    let t0 = rig.sim.now();
    for n in 0..20u32 {
        let ep = Endpoints::new(
            [2, 0, 0, 0, 1, 1],
            Ipv4Addr::new(10, 1, 0, n as u8),
            [2, 0, 0, 0, 1, 2],
            Ipv4Addr::new(8, 8, 8, 8),
        );
        let payload = vec![n as u8; 1 + (n as usize * 71) % 1400];
        let f = build_udp_frame(&ep, 1000 + n as u16, 53, &payload, true).unwrap();
        rig.send(t0 + u64::from(n) * 20_000, rig.inside, f);
    }
    rig.run_until(t0 + 3_000_000);
    rig.sim.finish_captures().unwrap();
    path
}

#[test]
fn tshark_decodes_the_switch_rdma_frames() {
    let Some(bin) = tshark() else { return };
    for trailer in [true, false] {
        let pcap = capture(trailer);
        let out = Command::new(bin)
            .arg("-n")
            .arg("-r")
            .arg(&pcap)
            .args(["-X", &format!("lua_script:{}", lua_script().display())])
            .args(["-o", "ip.check_checksum:TRUE"])
            .args(["-T", "fields", "-E", "separator=\t", "-E", "occurrence=f"])
            .args([
                "-e",
                "frame.protocols",
                "-e",
                "udp.dstport",
                "-e",
                "infiniband.bth.opcode",
            ])
            .args([
                "-e",
                "ip.checksum.status",
                "-e",
                "inca_icrc.status",
                "-e",
                "ip.src",
            ])
            .output()
            .expect("run tshark");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success() && !stderr.contains("Lua: Error"),
            "{stderr}"
        );
        let text = String::from_utf8(out.stdout).unwrap();
        let mut roce = 0;
        let mut opcodes = std::collections::BTreeSet::new();
        for line in text.lines() {
            let f: Vec<&str> = line.split('\t').collect();
            assert!(!f[0].contains("malformed"), "malformed frame: {line}");
            if f[1] == "4791" {
                roce += 1;
                assert!(f[0].contains("infiniband"), "not decoded as RoCE: {line}");
                assert_eq!(f[3], "1", "IPv4 checksum: {line}");
                assert_eq!(f[4], "good", "ICRC: {line}");
                opcodes.insert(f[2].to_string());
            }
        }
        // WRITE ONLY, READ REQUEST from the switch; READ RESPONSE ONLY back.
        for op in ["10", "12", "16"] {
            assert!(
                opcodes.contains(op),
                "trailer={trailer}: no opcode {op} in {opcodes:?}"
            );
        }
        assert!(roce >= 60, "trailer={trailer}: only {roce} RoCE frames");
    }
}
