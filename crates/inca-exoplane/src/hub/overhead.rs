//! The hub's memory, counted from its directories (spec §5.10, Thesis
//! §4.6.5): what E11 reports.
//!
//! Bytes are counted the way the thesis sizes state — the fields the spec
//! lists (§3.2) at their stated widths, packed, with every key and value
//! at its actual length — not the Rust containers' footprint (pointers,
//! tree nodes and allocator slack depend on the build, not on ExoPlane):
//!
//! - flow directory, per flow: union key + logical id (1) + state (1) +
//!   last counter sample (4) + last rate (4) [our choice: the rate at the
//!   counter's 32 bits];
//! - entry directory, per entry: app (1) + object (2) + key + value +
//!   version (8) + holders bitmap (8) + switch refcount (4) + switch slot
//!   (4); of which the *device map* — which devices hold a key, the part the
//!   thesis counts — is app + object + key + holders bitmap;
//! - `H`: per shared register entry, one value of the register's width per
//!   external holder; `S_cp`: one value per shared entry (reported apart).
//!
//! Flows counted are the PRESENT ones (a steady-state snapshot; INSERTING
//! and EVICTING flows are transient).

use std::collections::BTreeMap;

use serde::Serialize;

use super::app::ObjectKind;
use super::Hub;
use crate::ids::{AppId, ObjId, Pdev, MAX_PDEVS};

/// Fixed bytes of a flow-directory record besides its union key.
pub const FLOW_FIXED: u64 = 1 + 1 + 4 + 4;
/// Fixed bytes of an entry-directory record besides key and value.
pub const ENTRY_FIXED: u64 = 1 + 2 + 8 + 8 + 4 + 4;
/// Fixed bytes of a device-map record besides the key.
pub const DEVICE_MAP_FIXED: u64 = 1 + 2 + 8;

/// One app's flow directory.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct AppOverhead {
    /// The app.
    pub app: u8,
    /// PRESENT flows.
    pub flows: u64,
    /// Their flow-directory bytes.
    pub flow_bytes: u64,
}

/// One object's entries.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ObjectOverhead {
    /// The app.
    pub app: u8,
    /// The object.
    pub obj: u16,
    /// Whether it is a register (data-plane-updatable).
    pub register: bool,
    /// Entries in the directory.
    pub entries: u64,
    /// Their entry-directory bytes.
    pub entry_bytes: u64,
    /// … of which the device map.
    pub device_map_bytes: u64,
    /// Shared (synchronised) entries.
    pub shared: u64,
    /// External holders summed over shared entries.
    pub holder_copies: u64,
    /// `H` bytes (holder copies × width).
    pub h_bytes: u64,
    /// `S_cp` bytes (shared entries × width).
    pub s_cp_bytes: u64,
}

/// The hub's memory.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Overhead {
    /// Per app.
    pub apps: Vec<AppOverhead>,
    /// Per object.
    pub objects: Vec<ObjectOverhead>,
}

impl Overhead {
    /// Flow directory bytes, all apps.
    pub fn flow_bytes(&self) -> u64 {
        self.apps.iter().map(|a| a.flow_bytes).sum()
    }
    /// Entry directory bytes, all objects.
    pub fn entry_bytes(&self) -> u64 {
        self.objects.iter().map(|o| o.entry_bytes).sum()
    }
    /// Device-map bytes, all objects.
    pub fn device_map_bytes(&self) -> u64 {
        self.objects.iter().map(|o| o.device_map_bytes).sum()
    }
    /// `H` bytes, all objects.
    pub fn h_bytes(&self) -> u64 {
        self.objects.iter().map(|o| o.h_bytes).sum()
    }
    /// `S_cp` bytes, all objects.
    pub fn s_cp_bytes(&self) -> u64 {
        self.objects.iter().map(|o| o.s_cp_bytes).sum()
    }
    /// Spec §5.10's hub memory: flow directory + entry directory + `H`.
    pub fn total(&self) -> u64 {
        self.flow_bytes() + self.entry_bytes() + self.h_bytes()
    }
}

impl Hub {
    /// The hub's memory now, per app and per object (module docs say how
    /// bytes are counted).
    pub fn overhead(&self) -> Overhead {
        let apps = self
            .apps
            .iter()
            .map(|(id, a)| {
                let present = a.flows.present();
                AppOverhead {
                    app: id.0,
                    flows: present.len() as u64,
                    flow_bytes: present
                        .iter()
                        .map(|uk| uk.0.len() as u64 + FLOW_FIXED)
                        .sum(),
                }
            })
            .collect();
        let mut objects: BTreeMap<(AppId, ObjId), ObjectOverhead> = BTreeMap::new();
        for (k, e) in &self.dir.map {
            let kind = self
                .apps
                .get(&k.app)
                .and_then(|a| a.kinds.get(&k.obj).copied());
            let width = match kind {
                Some(ObjectKind::Register { width, .. }) => Some(u64::from(width)),
                _ => None,
            };
            let o = objects.entry((k.app, k.obj)).or_insert(ObjectOverhead {
                app: k.app.0,
                obj: k.obj.0,
                register: width.is_some(),
                ..ObjectOverhead::default()
            });
            let key = k.key.len() as u64;
            o.entries += 1;
            o.entry_bytes += ENTRY_FIXED + key + e.value.len() as u64;
            o.device_map_bytes += DEVICE_MAP_FIXED + key;
            if let (Some(w), true) = (width, self.sync.is_shared(k)) {
                let holders = (0..MAX_PDEVS as u16)
                    .filter(|&p| self.sync.history(k, Pdev(p)).is_some())
                    .count() as u64;
                o.shared += 1;
                o.holder_copies += holders;
                o.h_bytes += holders * w;
                o.s_cp_bytes += w;
            }
        }
        Overhead {
            apps,
            objects: objects.into_values().collect(),
        }
    }
}
