//! Device profiles: what a device can hold and how fast it is.
//!
//! A profile is the model input for one kind of device: its pipeline stages
//! and per-stage resource budgets (the resource model places a program's
//! objects against these), its ports and buffer, its pipeline and
//! control-plane timing, and the features it has. Three profiles are built in:
//! `tofino` (a Tofino-1-class switch), `smartnic` (a 40 Gbps P4 smart NIC) and
//! `server` (a CPU server). Every value can be overridden by name with
//! [`Profile::set`], which is how scenarios change a model input.

use crate::device::{Nanos, MICROS, MILLIS};
use crate::resources::{Resource, ResourceVec};

/// Which optional data-plane features a device has. The smart-NIC profile
/// lacks some of them, which is what the ExoPlane planner checks
/// compatibility against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Features {
    /// Packets can be sent back to ingress for another pass.
    pub recirculation: bool,
    /// Packets can be re-injected into ingress with metadata, without egress.
    pub resubmit: bool,
    /// Egress-to-egress mirroring with truncation.
    pub mirroring: bool,
    /// Multicast / replication groups in the traffic manager.
    pub multicast: bool,
    /// Ternary, LPM and range tables (TCAM or an emulation of it).
    pub ternary_match: bool,
    /// Number of packet-generator streams (0 = no generator).
    pub pktgen_streams: u8,
}

/// Control-plane timing: how long operations from the switch CPU take and how
/// many it can do per second. Operations are served one at a time, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ControlPlaneTiming {
    /// Time for one table entry add/modify/delete to take effect.
    pub table_write: Nanos,
    /// Fixed time of one register read or write operation.
    pub register_op: Nanos,
    /// Extra time per register entry read or written in one operation (bulk
    /// reads of whole arrays are slow on real switches).
    pub register_per_entry: Nanos,
    /// Latency from a digest being emitted in the data plane to its delivery
    /// to the control plane.
    pub digest_latency: Nanos,
    /// Latency of a packet punted to the CPU, on top of its serialisation on
    /// the CPU channel.
    pub punt_latency: Nanos,
    /// Bandwidth of the data-plane ↔ CPU channel, bits per second.
    pub punt_bps: u64,
    /// CPU time to handle one punted packet or digest (FIFO, one CPU thread).
    pub cpu_per_event: Nanos,
    /// At most this many control-plane operations per second (the op-rate
    /// model: operations are spaced at least `1e9 / max_ops_per_sec` apart).
    pub max_ops_per_sec: u64,
}

/// Timing and capacity of the data path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataPathTiming {
    /// Number of front-panel ports.
    pub ports: u16,
    /// Rate of each port, bits per second.
    pub port_rate_bps: u64,
    /// Latency of the ingress pipeline (parser to traffic manager).
    pub ingress_latency: Nanos,
    /// Latency of the egress pipeline (traffic manager to wire).
    pub egress_latency: Nanos,
    /// Extra latency of one recirculation or resubmit pass.
    pub recirculation_latency: Nanos,
    /// Shared packet buffer of the traffic manager, bytes.
    pub buffer_bytes: u64,
    /// The parser sees only the first this-many bytes of a frame.
    pub parse_depth: usize,
    /// Minimum time between two packets entering the pipeline (0 = line rate
    /// on every port at once, as on a switch ASIC; smart NICs and servers
    /// process packets one at a time).
    pub per_packet: Nanos,
}

/// A device profile. See the module documentation.
#[derive(Debug, Clone, PartialEq)]
pub struct Profile {
    /// The profile's name (`tofino`, `smartnic`, `server`).
    pub name: String,
    /// Number of match-action stages per pipeline (1 for run-to-completion
    /// devices).
    pub stages: u32,
    /// The device runs each packet to completion in software (smart NIC,
    /// server): dependencies between objects need no separate stages, and
    /// objects that do not fit on-chip memory go to DRAM.
    pub run_to_completion: bool,
    /// Resources of one stage.
    pub stage_budget: ResourceVec,
    /// Off-chip memory for tables and registers, bytes (0 on a switch ASIC).
    pub dram_bytes: u64,
    /// Optional features.
    pub features: Features,
    /// Data-path timing and capacity.
    pub data_path: DataPathTiming,
    /// Control-plane timing.
    pub control_plane: ControlPlaneTiming,
}

impl Profile {
    /// A Tofino-1-class switch pipeline.
    ///
    /// Stage budgets follow the RMT architecture (Bosshart et al., "Forwarding
    /// Metamorphosis", SIGCOMM 2013, §5: per stage 106 SRAM blocks of 1K×112 b,
    /// 16 TCAM blocks of 2K×40 b) as rounded for Tofino in the ExoPlane spec
    /// (§2, "shared with the platform's RMT model": 12 stages; per stage 80
    /// SRAM blocks of 1,024×128 b, 24 TCAM blocks of 512×44 b, 48 map-RAM
    /// blocks, 4 stateful ALUs, 416 hash bits). Crossbar, VLIW and gateway
    /// budgets follow Jose et al., "Compiling Packet Programs to Reconfigurable
    /// Switches" (NSDI 2015, Table 1: 1,280 b exact and 640 b ternary crossbar
    /// per stage, i.e. 160 and 80 bytes… rounded down to the 128 and 66 bytes
    /// Tofino exposes) and the P4 Studio resource summaries (32 VLIW
    /// instruction slots and 16 gateways per stage, 16 logical tables).
    /// Timing: 32 ports at 100 Gbps, a 22 MB shared buffer (RedPlane spec,
    /// "a few tens of MB"), 450 ns ingress+TM+egress pass (TEA spec §8.1),
    /// parser depth 512 B (TEA spec: "the first few hundred bytes"), 8
    /// packet-generator streams (SwiSh spec §2). Control plane: tens of ms per
    /// operation in the worst case is the paper-level description; the
    /// default here is 20 µs per table write capped at 50 k operations/s (TEA
    /// spec §5.5 and CLIP spec §7.1), which scenarios override.
    pub fn tofino() -> Profile {
        let mut b = ResourceVec::ZERO;
        b[Resource::SramBlocks] = 80;
        b[Resource::TcamBlocks] = 24;
        b[Resource::MapRamBlocks] = 48;
        b[Resource::StatefulAlus] = 4;
        b[Resource::HashBits] = 416;
        b[Resource::ExactXbarBytes] = 128;
        b[Resource::TernaryXbarBytes] = 66;
        b[Resource::VliwSlots] = 32;
        b[Resource::Gateways] = 16;
        b[Resource::LogicalTables] = 16;
        Profile {
            name: "tofino".into(),
            stages: 12,
            run_to_completion: false,
            stage_budget: b,
            dram_bytes: 0,
            features: Features {
                recirculation: true,
                resubmit: true,
                mirroring: true,
                multicast: true,
                ternary_match: true,
                pktgen_streams: 8,
            },
            data_path: DataPathTiming {
                ports: 32,
                port_rate_bps: 100_000_000_000,
                ingress_latency: 250,
                egress_latency: 200,
                recirculation_latency: 450,
                buffer_bytes: 22 * 1024 * 1024,
                parse_depth: 512,
                per_packet: 0,
            },
            control_plane: ControlPlaneTiming {
                table_write: 20 * MICROS,
                register_op: 50 * MICROS,
                register_per_entry: 2_580,
                digest_latency: 50 * MICROS,
                punt_latency: 5 * MICROS,
                punt_bps: 10_000_000_000,
                cpu_per_event: 20 * MICROS,
                max_ops_per_sec: 50_000,
            },
        }
    }

    /// A 40 Gbps P4-programmable smart NIC (Netronome Agilio CX class, per the
    /// ExoPlane spec §2): 2 GB of DRAM, 8 MB of SRAM, 60 compute units,
    /// about 5 µs per packet end to end, and no recirculation, resubmit,
    /// mirroring or packet generator. Control-plane table writes take tens
    /// of ms (ExoPlane spec: 20 ms per batched RPC).
    pub fn smartnic() -> Profile {
        let mut b = ResourceVec::ZERO;
        // 8 MB of on-chip SRAM in 16 KiB blocks (the same block size as the
        // switch so reports compare), emulated TCAM in SRAM, no stateful-ALU
        // limit beyond the compute units.
        b[Resource::SramBlocks] = 512;
        b[Resource::TcamBlocks] = 64;
        b[Resource::MapRamBlocks] = 512;
        b[Resource::StatefulAlus] = 60;
        b[Resource::HashBits] = 4096;
        b[Resource::ExactXbarBytes] = 512;
        b[Resource::TernaryXbarBytes] = 256;
        b[Resource::VliwSlots] = 1024;
        b[Resource::Gateways] = 1024;
        b[Resource::LogicalTables] = 64;
        Profile {
            name: "smartnic".into(),
            stages: 1,
            run_to_completion: true,
            stage_budget: b,
            dram_bytes: 2 * 1024 * 1024 * 1024,
            features: Features {
                recirculation: false,
                resubmit: false,
                mirroring: false,
                multicast: false,
                ternary_match: true,
                pktgen_streams: 0,
            },
            data_path: DataPathTiming {
                ports: 2,
                port_rate_bps: 40_000_000_000,
                ingress_latency: 2_500,
                egress_latency: 2_500,
                recirculation_latency: 0,
                buffer_bytes: 2 * 1024 * 1024,
                parse_depth: 512,
                per_packet: 50,
            },
            control_plane: ControlPlaneTiming {
                table_write: 20 * MILLIS,
                register_op: 1 * MILLIS,
                register_per_entry: 1_000,
                digest_latency: 100 * MICROS,
                punt_latency: 10 * MICROS,
                punt_bps: 1_000_000_000,
                cpu_per_event: 20 * MICROS,
                max_ops_per_sec: 3_200,
            },
        }
    }

    /// A CPU server running a software data path on 4 cores (the papers'
    /// software baselines): 64 GB of DRAM, about 400 ns of CPU per packet and
    /// core (TEA spec §7), so 4 cores give about 10 Mpps, with NIC RX and TX
    /// latency of 1 µs each.
    pub fn server() -> Profile {
        let mut b = ResourceVec::ZERO;
        // A CPU has no pipeline resources to run out of: each budget is set
        // far above anything a program declares, so only DRAM limits it.
        for r in Resource::ALL {
            b[r] = u64::MAX / 4;
        }
        b[Resource::SramBlocks] = 0;
        b[Resource::TcamBlocks] = 0;
        Profile {
            name: "server".into(),
            stages: 1,
            run_to_completion: true,
            stage_budget: b,
            dram_bytes: 64 * 1024 * 1024 * 1024,
            features: Features {
                recirculation: true,
                resubmit: true,
                mirroring: true,
                multicast: true,
                ternary_match: true,
                pktgen_streams: 8,
            },
            data_path: DataPathTiming {
                ports: 2,
                port_rate_bps: 40_000_000_000,
                ingress_latency: 1_000,
                egress_latency: 1_000,
                recirculation_latency: 400,
                buffer_bytes: 64 * 1024 * 1024,
                parse_depth: 9_000,
                per_packet: 100,
            },
            control_plane: ControlPlaneTiming {
                table_write: 1 * MICROS,
                register_op: 1 * MICROS,
                register_per_entry: 1,
                digest_latency: 1 * MICROS,
                punt_latency: 1 * MICROS,
                punt_bps: 100_000_000_000,
                cpu_per_event: 1 * MICROS,
                max_ops_per_sec: 1_000_000,
            },
        }
    }
}
