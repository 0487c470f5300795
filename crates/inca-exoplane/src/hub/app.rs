//! What the hub and the daemons need to know about an app (spec §5.1):
//! its objects, which are control-plane-updatable tables and which
//! data-plane-updatable registers, and how a flow's union key projects onto
//! each object's key. The full app model (merge operators, programs) lives
//! elsewhere; this is the slice the write path and promotion use.

use crate::ids::{AppId, LogicalId, ObjId, Pdev, UnionKey};
use inca_switch::hash::crc32;

/// How an object's entries change (spec §5.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ObjectKind {
    /// A match-action table: only the control plane writes it; the hub
    /// stores the authoritative value.
    Table,
    /// A register: packets change it; writes only create or delete the
    /// slot, which starts at the merge identity (all zero, `width` bytes).
    Register {
        /// Value width in bytes (1, 2, 4 or 8).
        width: u8,
    },
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
