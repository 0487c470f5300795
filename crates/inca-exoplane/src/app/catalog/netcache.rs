//! NetCache (§7, leaf scenario, HIGH): inca-apps' NetCache speaking
//! ExoPlane's header (UDP 50000, 128-bit keys, 128-byte values) with its
//! key index written from outside, as §7's control-plane object.
//!
//! Objects, as the program declares them: `nc_cache` (key → slot, the
//! control-plane key index), `nc_state` (per slot: valid bit and pending
//! writes), `nc_value0..15` (the value, 8 × 16 B as pairs of 32-bit
//! words, one stateful-ALU access each),
//! `nc_hits` (per-slot hits), `nc_cms0..2` (hot-key count-min rows) and
//! `nc_bloom0..2` (the report filter). [our choice] Only `nc_hits` is
//! declared mergeable (ADD): the state steers the cache's logic, the
//! values are overwritten by the server's answers (last writer, not a
//! merge), and the sketch and filter entries carry epoch tags that reset
//! them, which no §5.6 operator merges. So the app is HIGH only, as §8
//! runs it; `validate` refuses it as MEDIUM.
//!
//! Installing `key → slot` first resets the slot's state to 0 (invalid,
//! no writes pending), then adds the entry, in that order on the FIFO
//! operation channel — what the program's own control plane does — so a
//! reused slot never answers with its previous key's value; the next
//! server REPLY fills it.

use inca_apps::netcache::{Format, NetCache};
use inca_switch::objects::ObjectId;
use inca_switch::{ControlPlane, MatchSpec, PortId, RegisterHandle, TableHandle};

use super::{table, AppProgram};
use crate::app::{Affinity, AppSpec, Consistency, KeyField, MergeOp, ObjectKind, ObjectSpec};
use crate::ids::{AppId, ObjId};

/// Value bytes: 8 × 16 B (§7).
pub const VALUE_BYTES: usize = 128;
/// The key.
const KEY: &[KeyField] = &[KeyField::CacheKey];

/// NetCache (§7) with `slots` cached keys, the storage server on
/// `server_port`, clients on `client_port`, a hot-key sketch of
/// `sketch_width` entries per row. HIGH.
pub fn netcache(
    id: AppId,
    name: &str,
    slots: usize,
    server_port: PortId,
    client_port: PortId,
    sketch_width: usize,
) -> AppSpec {
    let nc = NetCache::new(slots, server_port, client_port)
        .with_stats(sketch_width, 128, 1_000_000_000)
        .with_exo_header(VALUE_BYTES)
        .with_external_index();
    let reg = |id: u16, name: String, bits: u32, consistency| ObjectSpec {
        id: ObjId(id),
        name,
        kind: ObjectKind::Register,
        key: KEY,
        value_bits: bits,
        consistency,
    };
    let un = Consistency::Unmergeable;
    let mut objects = vec![
        // Action data: the slot, in as many bits as the program declares.
        table(1, "nc_cache", KEY, slot_bits(slots)),
        reg(2, "nc_state".into(), 16, un),
        reg(3, "nc_hits".into(), 32, Consistency::Bounded(MergeOp::Add)),
    ];
    let mut next = 4u16;
    let mut push = |name: String, bits| {
        objects.push(reg(next, name, bits, un));
        next += 1;
    };
    let (arrays, bits) = nc.value_arrays();
    for i in 0..arrays {
        push(format!("nc_value{i}"), bits);
    }
    for i in 0..inca_apps::netcache::SKETCH_ROWS {
        push(format!("nc_cms{i}"), 32);
    }
    for i in 0..inca_apps::netcache::SKETCH_ROWS {
        push(format!("nc_bloom{i}"), 8);
    }
    AppSpec {
        id,
        name: name.to_string(),
        affinity: Affinity::High,
        objects,
        program: AppProgram::NetCache(nc),
    }
}

/// ⌈log2(slots)⌉ bits (at least 1): the width of a slot number.
fn slot_bits(slots: usize) -> u32 {
    (usize::BITS - slots.saturating_sub(1).leading_zeros()).max(1)
}

/// The index entry a NetCache packet looks up: its key, for requests from
/// clients and answers from the server. An uncached key misses by design
/// (the request goes to the server).
pub(super) fn needs(objects: &[ObjectSpec], header: &[u8]) -> Vec<(ObjId, Vec<u8>)> {
    let Some(m) = Format::Exo
        .parse(header, true)
        .ok()
        .filter(|m| m.is_cache())
    else {
        return Vec::new();
    };
    objects
        .iter()
        .find(|o| o.name == "nc_cache")
        .map(|o| vec![(o.id, m.key.to_vec())])
        .unwrap_or_default()
}

/// Writes index entry `key → slot` (value: the slot, 4 bytes big-endian)
/// after resetting the slot's state, or deletes it.
pub(super) fn install(
    nc: &NetCache,
    cp: &mut ControlPlane<'_>,
    resolve: &dyn Fn(&str) -> Option<ObjectId>,
    index: ObjectId,
    key: &[u8],
    value: Option<&[u8]>,
) -> Result<u64, &'static str> {
    let h = TableHandle::<u32>::of_object(index);
    let spec = MatchSpec::Exact(key.to_vec().into());
    let Some(v) = value else {
        return Ok(cp.table_delete(h, spec));
    };
    let v: [u8; 4] = v.try_into().map_err(|_| "a NetCache slot is 4 bytes")?;
    let slot = u32::from_be_bytes(v);
    if slot as usize >= nc.slots() {
        return Err("slot beyond the cache");
    }
    if key.len() != Format::Exo.key_len() {
        return Err("a NetCache key is 16 bytes");
    }
    let state = resolve("nc_state").ok_or("no nc_state register")?;
    cp.register_write(RegisterHandle::<u16>::of_object(state), u64::from(slot), 0);
    Ok(cp.table_add(h, spec, slot))
}

/// An index entry's value bytes ([`crate::app::AppSpec::install`]'s input).
pub fn encode_slot(slot: u32) -> Vec<u8> {
    slot.to_be_bytes().to_vec()
}
