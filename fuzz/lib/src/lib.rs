//! `inca-fuzz`: what inca's fuzz targets run, usable without libFuzzer.
//!
//! Every target is a function from arbitrary bytes to nothing that panics
//! exactly when it finds a bug: a parser or device that panics, indexes out
//! of bounds, overflows, lets bounded state grow past its bound, or breaks
//! a property checked here (a parsed header that does not survive
//! emit-and-parse again, say). The `fuzz/fuzz_targets/*.rs` binaries are
//! one line each over [`run`]; the seed-corpus generator (`src/bin/seed.rs`)
//! writes inputs in the formats [`input`] reads.
//!
//! - [`parsers`] — one target per inca-wire parser (ExoPlane's control
//!   protocol and CLIP's included), and the TEA agent protocol.
//! - [`devices`] — one target per device frame handler: the switch with each
//!   catalog program (inca-apps, RedPlane, TEA), the ExoPlane switch and
//!   device programs, the RedPlane state store,
//!   the TEA DRAM server.
//! - [`input`] — the device targets' input format: a program choice, then a
//!   short sequence of frames (port, time, bytes) and other events.
//! - [`alloc`] — a counting allocator, for the heap-growth bound.

#![deny(unsafe_code)]

#[allow(unsafe_code)]
pub mod alloc;
pub mod devices;
pub mod input;
pub mod parsers;

/// Every target name, in the order `run-all.sh` runs them; the first
/// [`PARSER_TARGETS`] are parsers.
pub const TARGETS: &[&str] = &[
    "ethernet",
    "ipv4",
    "udp",
    "tcp",
    "roce",
    "icrc",
    "redplane",
    "pcap",
    "pcapng",
    "tea_agent_proto",
    "telemetry",
    "exoplane_control",
    "exoplane_shim",
    "exoplane_netcache",
    "swish_sro",
    "swish_sdw",
    "swish_ewo",
    "swish_ddos",
    "swish_ctl",
    "clip_shim",
    "clip_ctl",
    "switch_apps",
    "switch_redplane",
    "switch_tea",
    "switch_exoplane",
    "redplane_store",
    "tea_dram",
];

/// How many of [`TARGETS`] are parser targets.
pub const PARSER_TARGETS: usize = 21;

/// Runs target `name` on `data`. Panics on a finding (and on an unknown
/// name, a bug in the caller).
pub fn run(name: &str, data: &[u8]) {
    match name {
        "ethernet" => parsers::ethernet(data),
        "ipv4" => parsers::ipv4(data),
        "udp" => parsers::udp(data),
        "tcp" => parsers::tcp(data),
        "roce" => parsers::roce(data),
        "icrc" => parsers::icrc(data),
        "redplane" => parsers::redplane(data),
        "pcap" => parsers::pcap(data),
        "pcapng" => parsers::pcapng(data),
        "tea_agent_proto" => parsers::tea_agent_proto(data),
        "telemetry" => parsers::telemetry(data),
        "exoplane_control" => parsers::exoplane_control(data),
        "exoplane_shim" => parsers::exoplane_shim(data),
        "exoplane_netcache" => parsers::exoplane_netcache(data),
        "swish_sro" => parsers::swish_sro(data),
        "swish_sdw" => parsers::swish_sdw(data),
        "swish_ewo" => parsers::swish_ewo(data),
        "swish_ddos" => parsers::swish_ddos(data),
        "swish_ctl" => parsers::swish_ctl(data),
        "clip_shim" => parsers::clip_shim(data),
        "clip_ctl" => parsers::clip_ctl(data),
        "switch_apps" => devices::switch_apps(data),
        "switch_redplane" => devices::switch_redplane(data),
        "switch_tea" => devices::switch_tea(data),
        "switch_exoplane" => devices::switch_exoplane(data),
        "redplane_store" => devices::redplane_store(data),
        "tea_dram" => devices::tea_dram(data),
        other => panic!("unknown fuzz target {other:?}"),
    }
}

#[cfg(test)]
mod tests {
    /// Every input under `fuzz/regressions/<target>/` (findings kept after
    /// their fix) runs clean through its target.
    #[test]
    fn regressions_replay_clean() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../regressions");
        let mut ran = 0;
        for t in crate::TARGETS {
            let Ok(entries) = std::fs::read_dir(dir.join(t)) else {
                continue;
            };
            for e in entries {
                let data = std::fs::read(e.unwrap().path()).unwrap();
                crate::run(t, &data);
                ran += 1;
            }
        }
        assert!(ran > 0, "no regression inputs under {}", dir.display());
    }

    /// A stable-compiler smoke run of every parser target: 20,000 seeded
    /// random inputs each, biased towards the headers' own shapes (an IPv4
    /// version nibble, a RoCE opcode, a capture magic) so the properties
    /// past the first length check run too.
    #[test]
    fn parser_targets_survive_random_inputs() {
        let mut x: u64 = 0x2545_F491_4F6C_DD1D;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for t in &crate::TARGETS[..crate::PARSER_TARGETS] {
            for i in 0..20_000 {
                let len = (next() % 96) as usize;
                let mut b: Vec<u8> = (0..len).map(|_| next() as u8).collect();
                if let Some(first) = b.first_mut() {
                    *first = match i % 4 {
                        0 => 0x45,
                        1 => 0x0A,
                        _ => *first,
                    };
                }
                crate::run(t, &b);
            }
        }
    }
}
