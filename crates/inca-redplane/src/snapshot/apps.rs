//! The bounded-mode apps (spec §7): what a snapshotted app supplies to
//! [`crate::snapshot::BoundedSwitch`] — its rows, entries per partition,
//! partitions, how a packet picks a partition and an entry per row, the
//! snapshot key layout, and what it does with the updated counts.
//!
//! - [`HeavyHitterSketch`]: per VLAN partition a count-min sketch of `rows`
//!   (3, 4 or 5) × 64 × 32-bit counters, indexed by 6-bit CRC32/CRC64/CRC16
//!   hashes of the 5-tuple (\[RP\] §6 (5)); up to 16 VLAN slots through an
//!   exact VLAN → slot table the control plane fills at start. Key = (VLAN
//!   16, index 8), value = rows × 32 bit. The row hashes and the minimum
//!   are [`inca_apps::core::sketch`]'s ([`RowHashes::Cycled`]).
//! - [`AsyncCounter`]: one 1024-entry array indexed by a CRC32 hash of the
//!   5-tuple, one partition, the entry as the plain flow counter's
//!   ([`inca_apps::core::counter`]). Key = index 16, value 32 bit.

use inca_apps::core::counter;
use inca_apps::core::sketch::{self, RowHashes};
use inca_apps::headers::Parsed;
use inca_apps::params::{ParamError, Params};
use inca_switch::hash::HashAlgorithm;
use inca_switch::table::MatchSpec;
use inca_switch::{
    AccessError, ControlPlane, DataPlane, Declare, DeclareError, Gress, Handle, MatchKind,
    ObjectId, TableDecl, TableHandle,
};

/// A heavy-hitter report: the flow whose estimate reached the threshold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct HeavyReport {
    /// The VLAN (partition key).
    pub vlan: u16,
    /// The 5-tuple.
    pub key: [u8; 13],
}

/// What a snapshotted app supplies. See the module documentation.
pub trait BoundedApp: Clone + 'static {
    /// The program name.
    fn name(&self) -> &str;
    /// Number of snapshotted arrays (sketch rows).
    fn rows(&self) -> usize;
    /// Entries per partition in each row (n).
    fn entries(&self) -> usize;
    /// Partition slots (P).
    fn partitions(&self) -> usize;
    /// Key bytes (K) of snapshot messages.
    fn key_len(&self) -> usize;
    /// Value bytes (V): 4 per row.
    fn value_len(&self) -> usize {
        4 * self.rows()
    }
    /// Declares the app's own objects (hash units, partition table); returns
    /// the objects the snapshotted rows depend on.
    fn declare(&mut self, d: &mut Declare) -> Result<Vec<ObjectId>, DeclareError>;
    /// Installs static entries at control-plane start.
    fn start(&self, _cp: &mut ControlPlane<'_>) {}
    /// The partition slot of a partition key in the data plane (`None`:
    /// not replicated here, the packet bypasses RedPlane). One table access.
    fn slot(&self, dp: &mut DataPlane<'_>, partition_key: u16) -> Result<Option<u16>, AccessError>;
    /// The same mapping as the control plane knows it.
    fn slot_of(&self, partition_key: u16) -> Option<u16>;
    /// The partition key of slot `slot`.
    fn partition_key(&self, slot: u16) -> u16;
    /// The partition key of a data packet (`None`: not measured).
    fn packet_partition(&self, p: &Parsed) -> Option<u16>;
    /// The entry index (in `0..entries`) of the packet in each row.
    fn indices(
        &self,
        dp: &mut DataPlane<'_>,
        p: &Parsed,
        out: &mut [u64],
    ) -> Result<(), AccessError>;
    /// Writes the snapshot key of `(partition_key, index)` into `out`
    /// (`key_len` bytes).
    fn encode_key(&self, partition_key: u16, index: u16, out: &mut [u8]);
    /// Reads a snapshot key back.
    fn decode_key(&self, key: &[u8]) -> Option<(u16, u16)>;
    /// Sees a measured packet's updated counts (one per row); may report.
    fn on_update(&self, p: &Parsed, partition_key: u16, counts: &[u32]) -> Option<HeavyReport>;
}

/// The heavy hitter's row hashes ([RP] §6 (5)): CRC-32, CRC-64, CRC-16.
const ROW_HASHES: RowHashes = RowHashes::Cycled;

/// The heavy-hitter detector of §7. See the module documentation.
#[derive(Debug, Clone)]
pub struct HeavyHitterSketch {
    rows: usize,
    entries: usize,
    /// VLAN of each slot.
    vlans: Vec<u16>,
    threshold: u32,
    hashes: Vec<Handle>,
    vlan_tbl: Option<TableHandle<u16>>,
}

impl HeavyHitterSketch {
    /// Parameter names.
    pub const PARAMS: &'static [&'static str] = &["rows", "vlans", "vlan_first", "threshold"];

    /// `rows` (3–5) rows of 64 counters for each of `vlans` (the VLAN ids,
    /// at most 16), reporting flows at `threshold` packets.
    pub fn new(rows: usize, vlans: Vec<u16>, threshold: u32) -> Self {
        HeavyHitterSketch {
            rows,
            entries: 64,
            vlans,
            threshold,
            hashes: Vec::new(),
            vlan_tbl: None,
        }
    }

    /// From parameters: `rows` (3, 3–5), `vlans` (slots, 16, 1–16),
    /// `vlan_first` (the first VLAN id, 1; slot s serves VLAN vlan_first+s),
    /// `threshold` (1000).
    pub fn from_params(p: &Params) -> Result<Self, ParamError> {
        let rows = p.number("rows", 3, 3, 5)? as usize;
        let n = p.number("vlans", 16, 1, 16)? as u16;
        let first = p.number("vlan_first", 1, 0, 4095 - u64::from(n))? as u16;
        let threshold = p.count("threshold", 1000, u64::from(u32::MAX))? as u32;
        Ok(HeavyHitterSketch::new(
            rows,
            (first..first + n).collect(),
            threshold,
        ))
    }

    /// The report threshold.
    pub fn threshold(&self) -> u32 {
        self.threshold
    }

    /// Row `r`'s index of a 5-tuple, as the data plane computes it.
    pub fn index_of(&self, r: usize, key: &[u8; 13]) -> u64 {
        ROW_HASHES.hash(r, 6, key) & (self.entries as u64 - 1)
    }
}

impl BoundedApp for HeavyHitterSketch {
    fn name(&self) -> &str {
        "redplane_hh"
    }
    fn rows(&self) -> usize {
        self.rows
    }
    fn entries(&self) -> usize {
        self.entries
    }
    fn partitions(&self) -> usize {
        self.vlans.len()
    }
    fn key_len(&self) -> usize {
        3
    }

    fn declare(&mut self, d: &mut Declare) -> Result<Vec<ObjectId>, DeclareError> {
        self.hashes.clear();
        let tbl = d.table::<u16>(TableDecl::new("hh_vlan_slot", MatchKind::Exact, 2, 8, 16))?;
        self.vlan_tbl = Some(tbl);
        let mut ids = vec![tbl.id()];
        for r in 0..self.rows {
            let h = d.hash(
                &format!("hh_hash{r}"),
                ROW_HASHES.algorithm(r),
                6,
                Gress::Ingress,
                &[],
            )?;
            ids.push(h.id());
            self.hashes.push(h);
        }
        Ok(ids)
    }

    fn start(&self, cp: &mut ControlPlane<'_>) {
        if let Some(t) = self.vlan_tbl {
            for (slot, vlan) in self.vlans.iter().enumerate() {
                cp.table_add(
                    t,
                    MatchSpec::Exact(vlan.to_be_bytes().to_vec().into()),
                    slot as u16,
                );
            }
        }
    }

    fn slot(&self, dp: &mut DataPlane<'_>, vlan: u16) -> Result<Option<u16>, AccessError> {
        match self.vlan_tbl {
            Some(t) => dp.lookup(t, &vlan.to_be_bytes()),
            None => Ok(None),
        }
    }

    fn slot_of(&self, vlan: u16) -> Option<u16> {
        self.vlans.iter().position(|&v| v == vlan).map(|s| s as u16)
    }

    fn partition_key(&self, slot: u16) -> u16 {
        self.vlans.get(usize::from(slot)).copied().unwrap_or(0)
    }

    fn packet_partition(&self, p: &Parsed) -> Option<u16> {
        p.ipv4.then_some(p.vlan)
    }

    fn indices(
        &self,
        dp: &mut DataPlane<'_>,
        p: &Parsed,
        out: &mut [u64],
    ) -> Result<(), AccessError> {
        let key = p.five_tuple();
        for (r, o) in out.iter_mut().enumerate().take(self.rows) {
            let h = ROW_HASHES.with_input(r, &key, |input| dp.hash(self.hashes[r], input))?;
            *o = h & (self.entries as u64 - 1);
        }
        Ok(())
    }

    fn encode_key(&self, vlan: u16, index: u16, out: &mut [u8]) {
        if out.len() >= 3 {
            out[..2].copy_from_slice(&vlan.to_be_bytes());
            out[2] = index as u8;
        }
    }

    fn decode_key(&self, key: &[u8]) -> Option<(u16, u16)> {
        (key.len() == 3).then(|| (u16::from_be_bytes([key[0], key[1]]), u16::from(key[2])))
    }

    fn on_update(&self, p: &Parsed, vlan: u16, counts: &[u32]) -> Option<HeavyReport> {
        // Every row of the flow grew by one, so the minimum grew by exactly
        // one: it equals the threshold once, at the packet that crosses it.
        let est = sketch::min(counts.iter().copied())?;
        (est == self.threshold).then(|| HeavyReport {
            vlan,
            key: p.five_tuple(),
        })
    }
}

/// The Async-Counter of §7. See the module documentation.
#[derive(Debug, Clone)]
pub struct AsyncCounter {
    entries: usize,
    hash: Option<Handle>,
}

impl Default for AsyncCounter {
    fn default() -> Self {
        AsyncCounter {
            entries: 1024,
            hash: None,
        }
    }
}

impl AsyncCounter {
    /// Parameter names.
    pub const PARAMS: &'static [&'static str] = &["entries"];

    /// From parameters: `entries` (1024, a power of two up to 65536).
    pub fn from_params(p: &Params) -> Result<Self, ParamError> {
        let entries = p.count("entries", 1024, 65_536)?;
        if !entries.is_power_of_two() {
            return Err(ParamError::Value {
                name: "entries".into(),
                reason: format!("{entries} is not a power of two"),
            });
        }
        Ok(AsyncCounter {
            entries: entries as usize,
            hash: None,
        })
    }

    /// The index of a 5-tuple.
    pub fn index_of(&self, key: &[u8; 13]) -> u64 {
        counter::index(key, self.entries)
    }
}

impl BoundedApp for AsyncCounter {
    fn name(&self) -> &str {
        "redplane_async_counter"
    }
    fn rows(&self) -> usize {
        1
    }
    fn entries(&self) -> usize {
        self.entries
    }
    fn partitions(&self) -> usize {
        1
    }
    fn key_len(&self) -> usize {
        2
    }

    fn declare(&mut self, d: &mut Declare) -> Result<Vec<ObjectId>, DeclareError> {
        let bits = self.entries.trailing_zeros().max(1) as u8;
        let h = d.hash("ac_hash", HashAlgorithm::Crc32, bits, Gress::Ingress, &[])?;
        self.hash = Some(h);
        Ok(vec![h.id()])
    }

    fn slot(&self, _dp: &mut DataPlane<'_>, key: u16) -> Result<Option<u16>, AccessError> {
        Ok((key == 0).then_some(0))
    }

    fn slot_of(&self, key: u16) -> Option<u16> {
        (key == 0).then_some(0)
    }

    fn partition_key(&self, _slot: u16) -> u16 {
        0
    }

    fn packet_partition(&self, p: &Parsed) -> Option<u16> {
        p.ipv4.then_some(0)
    }

    fn indices(
        &self,
        dp: &mut DataPlane<'_>,
        p: &Parsed,
        out: &mut [u64],
    ) -> Result<(), AccessError> {
        let Some(h) = self.hash else {
            return Err(AccessError::WrongHandle);
        };
        if let Some(o) = out.first_mut() {
            *o = dp.hash(h, &p.five_tuple())? & (self.entries as u64 - 1);
        }
        Ok(())
    }

    fn encode_key(&self, _partition: u16, index: u16, out: &mut [u8]) {
        if out.len() >= 2 {
            out[..2].copy_from_slice(&index.to_be_bytes());
        }
    }

    fn decode_key(&self, key: &[u8]) -> Option<(u16, u16)> {
        (key.len() == 2).then(|| (0, u16::from_be_bytes([key[0], key[1]])))
    }

    fn on_update(&self, _p: &Parsed, _partition: u16, _counts: &[u32]) -> Option<HeavyReport> {
        None
    }
}
