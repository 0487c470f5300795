//! What the hub and the daemons need to know about an app (spec §5.1):
//! its objects, which are control-plane-updatable tables and which
//! data-plane-updatable registers, and how a flow's union key projects onto
//! each object's key, and each register's merge operator (§5.6). The full
//! app model (programs) lives elsewhere; this is the slice the write path,
//! promotion and synchronisation use.

use crate::ids::{AppId, LogicalId, ObjId, Pdev, UnionKey};
use crate::sync::{Merge, MergeOp, Width};
use inca_switch::hash::crc32;

/// How an object's entries change (spec §5.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ObjectKind {
    /// A match-action table: only the control plane writes it; the hub
    /// stores the authoritative value.
    Table,
    /// A register: packets change it; writes only create or delete the
    /// slot, which starts at the merge identity; copies are kept in step by
    /// synchronisation with the declared merge operator (§5.6).
    Register {
        /// Value width in bytes (1, 2, 4 or 8).
        width: u8,
        /// The merge operator `⊕` the developer declared.
        op: MergeOp,
    },
}

impl ObjectKind {
    /// The merge of a register (operator and width), `None` for a table
    /// or a width that is not 1, 2, 4 or 8 bytes.
    pub fn merge(self) -> Option<Merge> {
        match self {
            ObjectKind::Table => None,
            ObjectKind::Register { width, op } => {
                let w = Width::from_bits(width.checked_mul(8)?).ok()?;
                Some(Merge::new(op, w))
            }
        }
    }
}

/// The bytes of a register value as the switch and devices store it:
/// big-endian, `width` bytes [our choice: network order, like the wire].
pub fn register_bytes(value: u64, width: u8) -> Vec<u8> {
    let w = usize::from(width.min(8));
    value.to_be_bytes()[8 - w..].to_vec()
}

/// The value of register bytes written by [`register_bytes`] (longer
/// input keeps its last 8 bytes).
pub fn register_value(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0u64, |v, b| (v << 8) | u64::from(*b))
}

/// One object of an app.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectDecl {
    /// The object's id.
    pub obj: ObjId,
    /// Table or register.
    pub kind: ObjectKind,
    /// The most entries the switch instance holds (slots 0..capacity).
    pub switch_capacity: u32,
}

/// The app knowledge the hub and daemons share.
pub trait FlowKeys {
    /// The app's id.
    fn app(&self) -> AppId;
    /// The app's objects.
    fn objects(&self) -> &[ObjectDecl];
    /// The key of `obj` that a packet of flow `uk` looks up, or `None` when
    /// the flow does not touch `obj`.
    fn object_key(&self, obj: ObjId, uk: &UnionKey) -> Option<Vec<u8>>;

    /// Flows besides the writer's that look up entry `key` of `obj`: their
    /// shards' devices hold it too (a NAT's reply flow reads the `nat_in`
    /// entry its outbound flow's setup wrote). None by default.
    fn entry_flows(&self, obj: ObjId, key: &[u8]) -> Vec<UnionKey> {
        let _ = (obj, key);
        Vec::new()
    }
}

/// The logical id a flow is sharded to (spec §5.2 step 5): the low 10 bits
/// of CRC-32 over `app_id ‖ UK` index a 1,024-entry table holding
/// `index mod N_L`.
pub fn shard(app: AppId, uk: &UnionKey, n_logical: u8) -> LogicalId {
    let mut bytes = Vec::with_capacity(1 + uk.0.len());
    bytes.push(app.0);
    bytes.extend_from_slice(&uk.0);
    let index = crc32(&bytes) & 0x3FF;
    LogicalId((index % u32::from(n_logical.max(1))) as u8)
}

/// Primary and replica of logical id `l` among `n` devices (spec §5.8):
/// pdev `l` and pdev `(l + 1) mod n`.
pub fn placement(l: LogicalId, n: u8) -> (Pdev, Pdev) {
    let n = u16::from(n.max(1));
    let l = u16::from(l.0);
    (Pdev(l % n), Pdev((l + 1) % n))
}
