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
use crate::units;

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
    /// The data path is software on a CPU (the `server` profile): a program
    /// may reach an object more than once per packet and may write its own
    /// tables (a software NAT installs a new flow inline instead of asking a
    /// control plane). Switch ASICs and P4 smart NICs have neither.
    pub cpu_data_path: bool,
    /// Number of packet-generator streams (0 = no generator).
    pub pktgen_streams: u8,
}

/// Control-plane timing: how long operations from the switch CPU take, how
/// many it can do per second, and how many RPCs of how many operations can
/// be in flight at once. Operations take effect in issue order.
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
    /// model: operations are spaced at least `1e9 / max_ops_per_sec` apart,
    /// each operation of a batch counting).
    pub max_ops_per_sec: u64,
    /// At most this many RPCs outstanding on the control channel at once
    /// (1: strictly serial; 0 behaves as 1). See [`crate::control`].
    pub max_in_flight: u32,
    /// At most this many operations issued together (by one control-plane
    /// handler) travel as one RPC and share its latency (1: no batching; 0
    /// behaves as 1).
    pub max_batch: u32,
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
    /// Time from a link going down to the packet generator's port-down
    /// trigger firing (the MAC's link-fault detection).
    pub port_down_detection: Nanos,
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
    /// Sources, value by value:
    ///
    /// - **Stages and memories.** 12 match-action stages; per stage 80 SRAM
    ///   blocks of 1,024 × 128 b, 24 TCAM blocks of 512 × 44 b, 48 map-RAM
    ///   blocks, 4 stateful ALUs and 416 hash bits: the ExoPlane spec §2.1
    ///   ("switch resources for the planner's resource model", marked [our
    ///   choice] there, shared with this model). The same numbers appear in
    ///   Intel's open-sourced Tofino compiler (p4lang/p4c,
    ///   `backends/tofino/bf-p4c/mau/tofino/memories.h`: 8 rows × 10 columns
    ///   of 1,024-deep SRAMs, 12 × 2 TCAMs of depth 512, 6 map-RAM columns × 8
    ///   rows, 4 meter/stateful ALUs; `input_xbar.h`: 8 hash groups of 52
    ///   bits). For comparison, the RMT chip of Bosshart et al. ("Forwarding
    ///   Metamorphosis", SIGCOMM 2013) had 32 stages with 106 SRAM blocks of
    ///   1K × 112 b and 16 TCAM blocks of 2K × 40 b per stage.
    /// - **Crossbars.** 128 bytes of exact-match and 66 bytes of ternary-match
    ///   input crossbar per stage: the Tofino compiler source above
    ///   (`input_xbar.h`: 8 exact groups × 16 bytes; 6 ternary byte groups ×
    ///   11 bytes).
    /// - **VLIW, gateways, logical tables.** 32 VLIW instruction rows (the
    ///   compiler's `instruction_memory.h`: a 32-row instruction memory per
    ///   gress; the model counts 32 per stage for both gresses together [our
    ///   choice, conservative]); 16 gateways (8 rows × 2 per row) and 16
    ///   logical tables (`LOGICAL_TABLES = 16`), same `memories.h`.
    /// - **Ports and buffer.** 32 ports at 100 Gbps (ExoPlane spec §2: a
    ///   32 × 100 GbE switch; TEA spec §8.1: 32 ports, 100G-capable); 22 MiB
    ///   shared buffer (RedPlane spec §5.11: 22 MB, the sources say "a few tens
    ///   of MB"; the value is [our choice]).
    /// - **Pipeline latency.** 450 ns per ingress+TM+egress pass (TEA spec
    ///   §8.1, [our choice] there), split 250 ns ingress / 200 ns egress [our
    ///   choice]; one recirculation costs one more pass (SwiSh spec §8.1).
    ///   The ExoPlane thesis measured 273–384 ns per pass (ExoPlane spec §2);
    ///   scenarios that reproduce it override the latencies.
    /// - **Parser.** 512 B parse depth (TEA spec §5.9, [our choice] there; the
    ///   sources say the ASIC parses only the first few hundred bytes).
    /// - **Packet generator.** 8 streams (SwiSh spec §2); a port-down
    ///   trigger fires 1.1 µs after the link goes down (TEA spec §8: the
    ///   link is declared down `T_LINKDOWN` = 1 µs after loss of signal and
    ///   the generator injects its packet `T_PKTGEN` = 0.1 µs later, both
    ///   [our choice] there). The ExoPlane spec §2.1 assumes 50 µs for the
    ///   same path ([our choice] there too); its scenarios set
    ///   `data_path.port_down_detection = "50us"`.
    /// - **Control plane.** 20 µs per table write, at most 50,000 operations
    ///   per second (TEA spec §5.4 and CLIP spec §8.1, both [our choice]; the
    ///   ExoPlane and RedPlane specs also use 20 µs per table write); register
    ///   operations 50 µs + 2.58 µs per entry (SwiSh spec §8.1, calibrated to
    ///   the SwiSh paper's ~507 ms bulk read); 50 µs digest latency (CLIP spec
    ///   §8.1); 5 µs punt latency and 20 µs of CPU per punted packet or digest
    ///   (SwiSh spec §8.1); a 10 Gbps CPU channel (RedPlane spec §5.3: PCIe,
    ///   O(10 Gbps)). Papers describe worst-case control-plane operations as
    ///   taking tens of ms; scenarios that need that override `table_write`.
    ///   The channel is serial (one operation in flight, no batching): the
    ///   sources give a per-operation cost and a rate cap and no window, and
    ///   20 µs per operation serially is exactly their 50,000 per second.
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
                cpu_data_path: false,
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
                port_down_detection: 1_100,
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
                max_in_flight: 1,
                max_batch: 1,
            },
        }
    }

    /// A 40 Gbps P4-programmable smart NIC (Netronome Agilio CX class, per
    /// the ExoPlane spec §2).
    ///
    /// From the ExoPlane spec §2: 40 Gbps, 2 GB DRAM (model input); 8 MB
    /// SRAM and 60 compute units ([our choice] there); unloaded end-to-end
    /// latency of a device-processed packet about 5.1–6.1 µs, modelled as
    /// 2.5 µs in + 2.5 µs out [our choice of split]; per-packet service at
    /// least 50 ns and a 2 MB ingress buffer; control-plane table writes of
    /// 20 ms per batched RPC with at most 64 in flight, hence at most 3,200
    /// writes/s (modelled as `max_in_flight` 64 and `max_ops_per_sec` 3,200,
    /// each write of a batch counting against the rate; up to 32 writes per
    /// RPC, `max_batch`, [our choice]: the spec fixes the RPC cost and the
    /// window but not the batch size); register batch reads of 1 ms per 1,000 entries, modelled as
    /// 1 µs per entry on top of a fixed 1 ms per operation [our choice]; CPU
    /// packet injection 20 µs. The NIC lacks recirculation, resubmit, mirroring and a packet
    /// generator (ExoPlane spec §5.9, [our choice] there). The per-stage
    /// budget is one run-to-completion "stage": 8 MB of SRAM counted as 512
    /// blocks of 16 KiB (the switch's block size, so reports compare), TCAM
    /// emulated in SRAM (64 blocks), one stateful ALU per compute unit (60);
    /// the other budgets are generous placeholders [our choice]. Digest and
    /// punt latencies and the CPU channel rate are [our choice].
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
                cpu_data_path: false,
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
                // No generator; kept at the switch's value so an override
                // of `features.pktgen_streams` behaves like the switch.
                port_down_detection: 1_100,
            },
            control_plane: ControlPlaneTiming {
                table_write: 20 * MILLIS,
                register_op: MILLIS,
                register_per_entry: 1_000,
                digest_latency: 100 * MICROS,
                punt_latency: 10 * MICROS,
                punt_bps: 1_000_000_000,
                cpu_per_event: 20 * MICROS,
                max_ops_per_sec: 3_200,
                max_in_flight: 64,
                max_batch: 32,
            },
        }
    }

    /// A CPU server running a software data path on 4 cores (the papers'
    /// software baselines).
    ///
    /// TEA spec §7: 4 cores, 400 ns of CPU per packet, NIC RX and TX latency
    /// of 1 µs each ([our choice] there), so one packet enters every 100 ns;
    /// TEA spec §8.1: 64 GB of RAM and a 40 Gbps NIC. A CPU has no pipeline
    /// resources to run out of, so every budget except SRAM and TCAM (which
    /// are 0: all state lives in DRAM) is effectively unlimited. Control-plane
    /// timings are those of local function calls, 1 µs each, one at a time
    /// [our choice].
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
                cpu_data_path: true,
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
                // A software generator hears of the link from the same
                // NIC fault detection [our choice: the switch's value].
                port_down_detection: 1_100,
            },
            control_plane: ControlPlaneTiming {
                table_write: MICROS,
                register_op: MICROS,
                register_per_entry: 1,
                digest_latency: MICROS,
                punt_latency: MICROS,
                punt_bps: 100_000_000_000,
                cpu_per_event: MICROS,
                max_ops_per_sec: 1_000_000,
                max_in_flight: 1,
                max_batch: 1,
            },
        }
    }

    /// The names of the built-in profiles.
    pub const NAMES: [&'static str; 3] = ["tofino", "smartnic", "server"];

    /// The built-in profile called `name` (`tofino`, `smartnic`, `server`).
    pub fn by_name(name: &str) -> Result<Profile, ProfileError> {
        match name {
            "tofino" => Ok(Profile::tofino()),
            "smartnic" => Ok(Profile::smartnic()),
            "server" => Ok(Profile::server()),
            _ => Err(ProfileError::UnknownProfile {
                name: name.to_string(),
                valid: Profile::NAMES.join(", "),
            }),
        }
    }

    /// Every parameter name [`Profile::set`] accepts, in a stable order.
    pub fn parameter_names() -> Vec<String> {
        params().into_iter().map(|(n, _)| n).collect()
    }

    /// Overrides one model input by its dotted name, e.g.
    /// `set("budget.sram_blocks", "64")`, `set("control_plane.table_write",
    /// "5ms")`, `set("dram_bytes", "2GiB")`, `set("features.recirculation",
    /// "false")`.
    ///
    /// Values: counts are plain integers (`_` separators allowed); times are
    /// integer nanoseconds or a number with `ns`, `us`/`µs`, `ms` or `s`
    /// (`20us`, `1.5ms`); sizes are bytes or a number with `B`, `KB`, `MB`,
    /// `GB`, `TB` (powers of 1,000) or `KiB`, `MiB`, `GiB`, `TiB` (powers of
    /// 1,024); rates are bits per second or a number with `bps`, `kbps`,
    /// `Mbps`, `Gbps`, `Tbps` (`k`, `M`, `G`, `T` alone also work); flags are
    /// `true`/`false` (also `yes`/`no`, `on`/`off`, `1`/`0`).
    pub fn set(&mut self, name: &str, value: &str) -> Result<(), ProfileError> {
        let kind = params()
            .into_iter()
            .find(|(n, _)| n == name)
            .map(|(_, k)| k)
            .ok_or_else(|| ProfileError::UnknownParameter {
                name: name.to_string(),
                suggestions: suggest(name),
            })?;
        let bad = || ProfileError::BadValue {
            name: name.to_string(),
            value: value.to_string(),
            expected: kind.expected(),
        };
        let v = value.trim();
        if kind == ParamKind::Flag {
            let b = parse_flag(v).ok_or_else(bad)?;
            *self
                .flag_mut(name)
                .expect("every flag parameter has a field") = b;
            return Ok(());
        }
        let n: u64 = match kind {
            ParamKind::Count => units::parse_count(v),
            ParamKind::Time => units::parse_time(v),
            ParamKind::Size => units::parse_size(v),
            ParamKind::Rate => units::parse_rate(v),
            ParamKind::Flag => unreachable!("handled above"),
        }
        .ok_or_else(bad)?;
        match self
            .field_mut(name)
            .expect("every numeric parameter has a field")
        {
            FieldMut::U64(f) => *f = n,
            FieldMut::U32(f) => *f = u32::try_from(n).map_err(|_| bad())?,
            FieldMut::U16(f) => *f = u16::try_from(n).map_err(|_| bad())?,
            FieldMut::U8(f) => *f = u8::try_from(n).map_err(|_| bad())?,
            FieldMut::Usize(f) => *f = usize::try_from(n).map_err(|_| bad())?,
        }
        Ok(())
    }

    fn flag_mut(&mut self, name: &str) -> Option<&mut bool> {
        let f = &mut self.features;
        Some(match name {
            "run_to_completion" => &mut self.run_to_completion,
            "features.recirculation" => &mut f.recirculation,
            "features.resubmit" => &mut f.resubmit,
            "features.mirroring" => &mut f.mirroring,
            "features.multicast" => &mut f.multicast,
            "features.ternary_match" => &mut f.ternary_match,
            "features.cpu_data_path" => &mut f.cpu_data_path,
            _ => return None,
        })
    }

    fn field_mut(&mut self, name: &str) -> Option<FieldMut<'_>> {
        if let Some(key) = name.strip_prefix("budget.") {
            let r = Resource::from_key(key)?;
            return Some(FieldMut::U64(&mut self.stage_budget[r]));
        }
        let d = &mut self.data_path;
        let c = &mut self.control_plane;
        Some(match name {
            "stages" => FieldMut::U32(&mut self.stages),
            "dram_bytes" => FieldMut::U64(&mut self.dram_bytes),
            "features.pktgen_streams" => FieldMut::U8(&mut self.features.pktgen_streams),
            "data_path.ports" => FieldMut::U16(&mut d.ports),
            "data_path.port_rate_bps" => FieldMut::U64(&mut d.port_rate_bps),
            "data_path.ingress_latency" => FieldMut::U64(&mut d.ingress_latency),
            "data_path.egress_latency" => FieldMut::U64(&mut d.egress_latency),
            "data_path.recirculation_latency" => FieldMut::U64(&mut d.recirculation_latency),
            "data_path.buffer_bytes" => FieldMut::U64(&mut d.buffer_bytes),
            "data_path.parse_depth" => FieldMut::Usize(&mut d.parse_depth),
            "data_path.per_packet" => FieldMut::U64(&mut d.per_packet),
            "data_path.port_down_detection" => FieldMut::U64(&mut d.port_down_detection),
            "control_plane.table_write" => FieldMut::U64(&mut c.table_write),
            "control_plane.register_op" => FieldMut::U64(&mut c.register_op),
            "control_plane.register_per_entry" => FieldMut::U64(&mut c.register_per_entry),
            "control_plane.digest_latency" => FieldMut::U64(&mut c.digest_latency),
            "control_plane.punt_latency" => FieldMut::U64(&mut c.punt_latency),
            "control_plane.punt_bps" => FieldMut::U64(&mut c.punt_bps),
            "control_plane.cpu_per_event" => FieldMut::U64(&mut c.cpu_per_event),
            "control_plane.max_ops_per_sec" => FieldMut::U64(&mut c.max_ops_per_sec),
            "control_plane.max_in_flight" => FieldMut::U32(&mut c.max_in_flight),
            "control_plane.max_batch" => FieldMut::U32(&mut c.max_batch),
            _ => return None,
        })
    }
}

/// A mutable reference to one numeric profile field.
enum FieldMut<'a> {
    U64(&'a mut u64),
    U32(&'a mut u32),
    U16(&'a mut u16),
    U8(&'a mut u8),
    Usize(&'a mut usize),
}

/// How a parameter's value is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ParamKind {
    Count,
    Time,
    Size,
    Rate,
    Flag,
}

impl ParamKind {
    fn expected(self) -> &'static str {
        match self {
            ParamKind::Count => "a non-negative integer",
            ParamKind::Time => "a time: integer nanoseconds or a number with ns, us, ms or s (e.g. 20us, 5ms, 1s)",
            ParamKind::Size => "a size: bytes or a number with B, KB, MB, GB, KiB, MiB, GiB, TiB (e.g. 22MiB, 2GiB)",
            ParamKind::Rate => "a rate: bits per second or a number with kbps, Mbps, Gbps, Tbps (e.g. 100Gbps)",
            ParamKind::Flag => "true or false",
        }
    }
}

/// Every settable parameter with how its value is written.
fn params() -> Vec<(String, ParamKind)> {
    use ParamKind::*;
    let mut v: Vec<(String, ParamKind)> = vec![
        ("stages".into(), Count),
        ("run_to_completion".into(), Flag),
        ("dram_bytes".into(), Size),
    ];
    for r in Resource::ALL {
        v.push((format!("budget.{}", r.key()), Count));
    }
    let rest: &[(&str, ParamKind)] = &[
        ("features.recirculation", Flag),
        ("features.resubmit", Flag),
        ("features.mirroring", Flag),
        ("features.multicast", Flag),
        ("features.ternary_match", Flag),
        ("features.cpu_data_path", Flag),
        ("features.pktgen_streams", Count),
        ("data_path.ports", Count),
        ("data_path.port_rate_bps", Rate),
        ("data_path.ingress_latency", Time),
        ("data_path.egress_latency", Time),
        ("data_path.recirculation_latency", Time),
        ("data_path.buffer_bytes", Size),
        ("data_path.parse_depth", Size),
        ("data_path.per_packet", Time),
        ("data_path.port_down_detection", Time),
        ("control_plane.table_write", Time),
        ("control_plane.register_op", Time),
        ("control_plane.register_per_entry", Time),
        ("control_plane.digest_latency", Time),
        ("control_plane.punt_latency", Time),
        ("control_plane.punt_bps", Rate),
        ("control_plane.cpu_per_event", Time),
        ("control_plane.max_ops_per_sec", Count),
        ("control_plane.max_in_flight", Count),
        ("control_plane.max_batch", Count),
    ];
    v.extend(rest.iter().map(|&(n, k)| (n.to_string(), k)));
    v
}

/// Parameter names close to `name`: same last segment, or within edit
/// distance 3; all names when none is close.
fn suggest(name: &str) -> Vec<String> {
    let all = Profile::parameter_names();
    let last = name.rsplit('.').next().unwrap_or(name);
    let close: Vec<String> = all
        .iter()
        .filter(|n| {
            let n_last = n.rsplit('.').next().unwrap_or(n);
            n_last == last || edit_distance(n, name) <= 3 || edit_distance(n_last, last) <= 2
        })
        .cloned()
        .collect();
    if close.is_empty() {
        all
    } else {
        close
    }
}

fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != cb);
            cur[j + 1] = sub.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

fn parse_flag(v: &str) -> Option<bool> {
    match v.to_ascii_lowercase().as_str() {
        "true" | "yes" | "on" | "1" => Some(true),
        "false" | "no" | "off" | "0" => Some(false),
        _ => None,
    }
}

/// A profile could not be found or changed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProfileError {
    /// No built-in profile has this name.
    #[error("unknown device profile \"{name}\"; valid profiles: {valid}")]
    UnknownProfile {
        /// The name asked for.
        name: String,
        /// The valid names, comma-separated.
        valid: String,
    },
    /// No parameter has this name.
    #[error("unknown profile parameter \"{name}\"; {}: {}",
        if .suggestions.len() < Profile::parameter_names().len() { "did you mean" } else { "valid parameters are" },
        .suggestions.join(", "))]
    UnknownParameter {
        /// The name given.
        name: String,
        /// Close matches, or every valid name when none is close.
        suggestions: Vec<String>,
    },
    /// The value could not be parsed for this parameter.
    #[error("bad value \"{value}\" for profile parameter \"{name}\": expected {expected}")]
    BadValue {
        /// The parameter.
        name: String,
        /// The value given.
        value: String,
        /// What the parameter accepts.
        expected: &'static str,
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::SECONDS;

    #[test]
    fn by_name_finds_the_built_ins() {
        for n in Profile::NAMES {
            assert_eq!(Profile::by_name(n).unwrap().name, n);
        }
        let e = Profile::by_name("tofino2").unwrap_err().to_string();
        assert!(e.contains("tofino, smartnic, server"), "{e}");
    }

    #[test]
    fn every_parameter_can_be_set() {
        let mut p = Profile::tofino();
        for n in Profile::parameter_names() {
            let v = if p.flag_mut(&n).is_some() {
                "true"
            } else {
                "7"
            };
            p.set(&n, v).unwrap_or_else(|e| panic!("{n}: {e}"));
        }
        assert_eq!(p.stages, 7);
        assert_eq!(p.stage_budget[Resource::LogicalTables], 7);
        assert_eq!(p.control_plane.max_ops_per_sec, 7);
        assert_eq!(p.data_path.parse_depth, 7);
        assert!(p.run_to_completion);
    }

    #[test]
    fn set_parses_units() {
        let mut p = Profile::tofino();
        p.set("budget.sram_blocks", "64").unwrap();
        assert_eq!(p.stage_budget[Resource::SramBlocks], 64);
        p.set("control_plane.table_write", "5ms").unwrap();
        assert_eq!(p.control_plane.table_write, 5 * MILLIS);
        p.set("control_plane.table_write", "20us").unwrap();
        assert_eq!(p.control_plane.table_write, 20 * MICROS);
        p.set("data_path.ingress_latency", "1.5us").unwrap();
        assert_eq!(p.data_path.ingress_latency, 1_500);
        p.set("data_path.egress_latency", "300").unwrap();
        assert_eq!(p.data_path.egress_latency, 300);
        p.set("control_plane.digest_latency", "1s").unwrap();
        assert_eq!(p.control_plane.digest_latency, SECONDS);
        p.set("dram_bytes", "2GiB").unwrap();
        assert_eq!(p.dram_bytes, 2 << 30);
        p.set("data_path.buffer_bytes", "22MiB").unwrap();
        assert_eq!(p.data_path.buffer_bytes, 22 << 20);
        p.set("data_path.buffer_bytes", "1_000 KB").unwrap();
        assert_eq!(p.data_path.buffer_bytes, 1_000_000);
        p.set("data_path.port_rate_bps", "40Gbps").unwrap();
        assert_eq!(p.data_path.port_rate_bps, 40_000_000_000);
        p.set("features.recirculation", "false").unwrap();
        assert!(!p.features.recirculation);
        p.set("features.pktgen_streams", "4").unwrap();
        assert_eq!(p.features.pktgen_streams, 4);
    }

    #[test]
    fn set_errors_name_the_field() {
        let mut p = Profile::tofino();
        let e = p.set("control_plane.table_write", "fast").unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains("control_plane.table_write") && msg.contains("20us"),
            "{msg}"
        );
        let e = p.set("features.pktgen_streams", "300").unwrap_err();
        assert!(matches!(e, ProfileError::BadValue { .. }), "{e}");
        let e = p.set("features.mirroring", "maybe").unwrap_err();
        assert!(e.to_string().contains("true or false"), "{e}");
        assert!(p.set("data_path.ingress_latency", "0.5ns").is_err());
        assert!(p.set("stages", "-1").is_err());
        assert!(p.set("stages", "").is_err());
        let e = p.set("table_write", "1ms").unwrap_err();
        match &e {
            ProfileError::UnknownParameter { suggestions, .. } => {
                assert_eq!(suggestions, &vec!["control_plane.table_write".to_string()]);
            }
            other => panic!("{other}"),
        }
        assert!(e.to_string().contains("did you mean"), "{e}");
        let e = p.set("budget.sram_block", "1").unwrap_err().to_string();
        assert!(e.contains("budget.sram_blocks"), "{e}");
        let e = p.set("zzzzzzzzzzzzzzzz", "1").unwrap_err().to_string();
        assert!(
            e.contains("valid parameters are") && e.contains("stages"),
            "{e}"
        );
        // Failed sets change nothing.
        assert_eq!(p, Profile::tofino());
    }
}
