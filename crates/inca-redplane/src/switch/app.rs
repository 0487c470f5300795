//! The developer API of spec §2: what an app supplies so that RedPlane can
//! replicate its per-flow state. The app keeps its NF logic and its state in
//! ordinary data-plane objects indexed by the slot RedPlane gives each key.

use inca_apps::headers::Parsed;
use inca_switch::objects::ObjectId;
use inca_switch::{AccessError, ControlPlane, DataPlane, Declare, DeclareError, PacketCtx, PortId};

use super::{RpDigest, RpMeta};

/// Largest key or value in bytes (the EPC value is 12 B, the 5-tuple 13 B).
pub const MAX_BYTES: usize = 16;

/// A fixed-width key or value (K or V bytes), kept inline so the data path
/// does not allocate.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Bytes {
    len: u8,
    buf: [u8; MAX_BYTES],
}

impl Bytes {
    /// `b` as a key or value (cut to [`MAX_BYTES`]).
    pub fn new(b: &[u8]) -> Bytes {
        let n = b.len().min(MAX_BYTES);
        let mut buf = [0u8; MAX_BYTES];
        buf[..n].copy_from_slice(&b[..n]);
        Bytes { len: n as u8, buf }
    }
    /// `n` zero bytes.
    pub fn zeroed(n: usize) -> Bytes {
        Bytes {
            len: n.min(MAX_BYTES) as u8,
            buf: [0; MAX_BYTES],
        }
    }
    /// The bytes.
    pub fn as_slice(&self) -> &[u8] {
        &self.buf[..usize::from(self.len)]
    }
    /// The bytes, writable.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        &mut self.buf[..usize::from(self.len)]
    }
}

/// How a packet uses its flow's state, decided from headers alone (the
/// sequence number is assigned before the app runs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Reads the state.
    Read,
    /// Changes the state.
    Write,
}

/// Where an app's output goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Out {
    /// No output.
    Drop,
    /// Out of this port.
    Port(PortId),
    /// By RedPlane's static routes on this destination address.
    RouteTo([u8; 4]),
    /// By RedPlane's static routes on the output's destination address,
    /// parsed again (after decapsulation).
    Route,
}

/// What the app's ingress logic decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verdict {
    /// Where the output goes.
    pub out: Out,
    /// For a write: the full new value of the flow (never a delta).
    pub value_after: Option<Bytes>,
}

/// Replication mode (spec §2). The switch wrapper here implements
/// `Linearizable`; bounded mode is the snapshot block's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Every write is durable before its output leaves.
    Linearizable,
}

/// A RedPlane application (spec §2). See the module documentation.
pub trait RedPlaneApp: Clone + 'static {
    /// The app's name, for reports.
    fn name(&self) -> &str;
    /// K: key width in bytes.
    fn key_bytes(&self) -> usize;
    /// V: value width in bytes.
    fn value_bytes(&self) -> usize;
    /// The replication mode.
    fn mode(&self) -> Mode {
        Mode::Linearizable
    }
    /// Declares the app's objects, `slots` entries per per-flow array, after
    /// the RedPlane objects in `after`.
    fn declare(
        &mut self,
        d: &mut Declare,
        after: &[ObjectId],
        slots: usize,
    ) -> Result<(), DeclareError>;
    /// The flow key of a packet; `None` bypasses RedPlane (forwarded by the
    /// static routes).
    fn key(&self, p: &Parsed, header: &[u8]) -> Option<Bytes>;
    /// Read or write, from headers alone.
    fn classify(&self, p: &Parsed, header: &[u8]) -> Access;
    /// The 16-bit hash `shard_map` is looked up with; `None` uses the
    /// CRC32 of the key truncated to 16 bits. The NAT overrides it for
    /// reverse keys (sharded by public-port range, spec §7).
    fn shard_hash(&self, _key: &Bytes) -> Option<u16> {
        None
    }
    /// The app's ingress logic for a packet of the flow `key` in `slot`, with a
    /// valid lease. A write must return `value_after`.
    fn process(
        &mut self,
        pkt: &mut PacketCtx<RpMeta, RpDigest>,
        dp: &mut DataPlane<'_>,
        slot: u32,
        key: &Bytes,
        access: Access,
    ) -> Result<Verdict, AccessError>;
    /// Control plane: installs `value` for `key` in `slot`, adding or
    /// overwriting entries and registers.
    fn install(&mut self, cp: &mut ControlPlane<'_>, key: &Bytes, value: &Bytes, slot: u32);
    /// Control plane: the idle reaper frees `slot` of `key`.
    fn uninstall(&mut self, _cp: &mut ControlPlane<'_>, _key: &Bytes, _slot: u32) {}
}
