//! Experiment E7 (spec §8.2, Table II): what each CLIP module takes of the
//! switch. The CLIP program is placed alone (the NULL app declares no
//! objects), and every placed object is attributed to its module by name:
//!
//! - **Selecting**: the count-min sketch and FH_C;
//! - **Scalability**: `cur`, `rec`, both Bloom filters, the pin table,
//!   the pin cache, FH_B and FH_D;
//! - **Forwarding**: L2/L3 (LPM, next hop, MAC table), FH_A, the server
//!   slots, members, links and the server-port table.
//!
//! Shares are of the whole device (every stage's budget), as the resource
//! report gives them.

use inca_switch::placement::{Location, Placement};
use inca_switch::resources::{Resource, ResourceVec};
use inca_switch::Profile;

use crate::apps::null::NullSwitch;
use crate::switch::scalability::ScaleSizes;
use crate::switch::{ClipSwitch, Driver, DriverConfig};

/// A CLIP module.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Module {
    /// The count-min sketch.
    Selecting,
    /// Pins, filters, pin cache.
    Scalability,
    /// L2/L3 and the server groups.
    Forwarding,
}

impl Module {
    /// Every module, in the table's order.
    pub const ALL: [Module; 3] = [Module::Selecting, Module::Scalability, Module::Forwarding];

    /// Its name in the table.
    pub fn name(self) -> &'static str {
        match self {
            Module::Selecting => "Selecting",
            Module::Scalability => "Scalability",
            Module::Forwarding => "Forwarding",
        }
    }

    /// The module an object of the CLIP program belongs to (None: the
    /// app's).
    pub fn of(object: &str) -> Option<Module> {
        if object.starts_with("app/") {
            return None;
        }
        Some(match object {
            "fh_c" | "cms_row0" | "cms_row1" => Module::Selecting,
            "fh_b" | "fh_d" | "cur" | "rec" | "pin_table" | "pin_cache_w0" | "pin_cache_w1" => {
                Module::Scalability
            }
            o if o.starts_with("bm") => Module::Scalability,
            _ => Module::Forwarding,
        })
    }
}

/// One row of Table II: a module's share of each resource, in percent.
#[derive(Debug, Clone, PartialEq)]
pub struct ModuleShare {
    /// The module.
    pub module: Module,
    /// Match crossbar (exact + ternary bytes).
    pub crossbar: f64,
    /// SRAM blocks.
    pub sram: f64,
    /// TCAM blocks.
    pub tcam: f64,
    /// VLIW instruction slots.
    pub vliw: f64,
    /// Hash-unit output bits.
    pub hash_bits: f64,
    /// Stateful ALUs.
    pub salu: f64,
    /// Stages it occupies, of the device's.
    pub stages: f64,
}

fn pct(used: u64, avail: u64) -> f64 {
    if avail == 0 {
        0.0
    } else {
        100.0 * used as f64 / avail as f64
    }
}

/// The CLIP program (NULL app) placed on `profile`.
pub fn placement(profile: &Profile) -> Result<Placement, inca_switch::LoadError> {
    let mut prog = ClipSwitch::new(
        NullSwitch { flight: true },
        inca_apps::l2l3::L2L3::new(4096, 1024, 256),
        ScaleSizes::default(),
        Driver::new(DriverConfig::default()),
    );
    inca_switch::check(profile, &mut prog)
}

/// Table II from a placement.
pub fn shares(p: &Placement) -> Vec<ModuleShare> {
    Module::ALL
        .iter()
        .map(|&m| {
            let mut used = ResourceVec::ZERO;
            let mut stages = std::collections::BTreeSet::new();
            for o in p.objects.iter().filter(|o| Module::of(&o.name) == Some(m)) {
                used += o.stage_use.iter().map(|(_, v)| *v).sum();
                if let Location::Stages { first, last } = o.location {
                    stages.extend(first..=last);
                }
            }
            let a = &p.available;
            ModuleShare {
                module: m,
                crossbar: pct(
                    used[Resource::ExactXbarBytes] + used[Resource::TernaryXbarBytes],
                    a[Resource::ExactXbarBytes] + a[Resource::TernaryXbarBytes],
                ),
                sram: pct(used[Resource::SramBlocks], a[Resource::SramBlocks]),
                tcam: pct(used[Resource::TcamBlocks], a[Resource::TcamBlocks]),
                vliw: pct(used[Resource::VliwSlots], a[Resource::VliwSlots]),
                hash_bits: pct(used[Resource::HashBits], a[Resource::HashBits]),
                salu: pct(used[Resource::StatefulAlus], a[Resource::StatefulAlus]),
                stages: pct(stages.len() as u64, u64::from(p.stages)),
            }
        })
        .collect()
}

/// Table II as Markdown.
pub fn table(rows: &[ModuleShare]) -> String {
    let mut s = String::from(
        "| Module | Crossbar | SRAM | TCAM | VLIW | Hash bits | SALU | Stages |\n|---|---|---|---|---|---|---|---|\n",
    );
    for r in rows {
        s += &format!(
            "| {} | {:.1} % | {:.1} % | {:.1} % | {:.1} % | {:.1} % | {:.1} % | {:.0} % |\n",
            r.module.name(),
            r.crossbar,
            r.sram,
            r.tcam,
            r.vliw,
            r.hash_bits,
            r.salu,
            r.stages
        );
    }
    s
}
