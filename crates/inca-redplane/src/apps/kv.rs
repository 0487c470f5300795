//! The RedPlane key-value store (spec §7, [RP] §7.2): requests on UDP
//! destination port 5000 with a body of op (8 bit: 0 read, 1 update),
//! key (32) and value (32). The value of each key is a 32-bit register
//! entry in the key's slot. Reads and updates are answered by reflecting
//! the request to its sender with the key's (new) value in the value field:
//! the transition and the answer are [`inca_apps::core::kv`]'s, shared with
//! the plain store.
//!
//! [our choice] The reply swaps the IPv4 addresses and the UDP ports, which
//! leaves both checksums valid apart from the value field (updated
//! incrementally).

use inca_apps::core::kv::{self, Op};
use inca_apps::headers::{Parsed, PROTO_UDP};
use inca_switch::objects::ObjectId;
use inca_switch::{
    AccessError, ArrayDecl, ControlPlane, DataPlane, Declare, DeclareError, PacketCtx,
    RegisterHandle,
};

use super::{from_l3, spec_parse, SpecModel};
use crate::switch::{Access, Bytes, Out, RedPlaneApp, RpDigest, RpMeta, Verdict};

/// The KV store's UDP port.
pub const KV_PORT: u16 = 5000;
/// Op code of a read.
pub const OP_READ: u8 = 0;
/// Op code of an update.
pub const OP_UPDATE: u8 = 1;

/// The KV store. See the module documentation.
#[derive(Debug, Clone, Default)]
pub struct RpKv {
    values: Option<RegisterHandle<u32>>,
}

/// A parsed KV request: (op, key, value).
fn request(p: &Parsed, h: &[u8]) -> Option<(u8, [u8; 4], u32)> {
    if !p.ipv4 || p.proto != PROTO_UDP || !p.has_ports || p.dport != KV_PORT {
        return None;
    }
    let b = h.get(usize::from(p.l4) + 8..usize::from(p.l4) + 17)?;
    Some((
        b[0],
        [b[1], b[2], b[3], b[4]],
        u32::from_be_bytes([b[5], b[6], b[7], b[8]]),
    ))
}

impl RpKv {
    /// A KV store.
    pub fn new() -> Self {
        RpKv::default()
    }

    /// The NF logic: answers the request in `h` with `value` (reflected to
    /// its sender). Returns the address the reply goes to.
    pub fn reply(h: &mut [u8], p: &Parsed, value: u32) -> Option<[u8; 4]> {
        let (l3, l4) = (usize::from(p.l3), usize::from(p.l4));
        kv::answer(h, l3, l4, &[(l4 + 13, &value.to_be_bytes())]).then_some(p.src)
    }

    /// The core's op of a request's op code (anything but an update reads).
    fn op(code: u8) -> Op {
        if code == OP_UPDATE {
            Op::Update
        } else {
            Op::Read
        }
    }
}

impl RedPlaneApp for RpKv {
    fn name(&self) -> &str {
        "redplane_kv"
    }
    fn key_bytes(&self) -> usize {
        4
    }
    fn value_bytes(&self) -> usize {
        4
    }
    fn declare(
        &mut self,
        d: &mut Declare,
        after: &[ObjectId],
        slots: usize,
    ) -> Result<(), DeclareError> {
        self.values = Some(d.register::<u32>(ArrayDecl::new("kv_value", slots).after(after))?);
        Ok(())
    }
    fn key(&self, p: &Parsed, header: &[u8]) -> Option<Bytes> {
        request(p, header).map(|(_, k, _)| Bytes::new(&k))
    }
    fn classify(&self, p: &Parsed, header: &[u8]) -> Access {
        match request(p, header) {
            Some((OP_UPDATE, _, _)) => Access::Write,
            _ => Access::Read,
        }
    }
    fn process(
        &mut self,
        pkt: &mut PacketCtx<RpMeta, RpDigest>,
        dp: &mut DataPlane<'_>,
        slot: u32,
        _key: &Bytes,
        access: Access,
    ) -> Result<Verdict, AccessError> {
        let p = pkt.meta.p;
        let (Some(reg), Some((code, _, new))) = (self.values, request(&p, pkt.header())) else {
            return Ok(Verdict {
                out: Out::Drop,
                value_after: None,
            });
        };
        // `classify` made exactly the updates writes.
        debug_assert_eq!(Self::op(code) == Op::Update, access == Access::Write);
        let value = dp.register(reg, u64::from(slot), |v| kv::apply(Self::op(code), v, new))?;
        let out = Self::reply(pkt.header_mut(), &p, value).map_or(Out::Drop, Out::RouteTo);
        Ok(Verdict {
            out,
            value_after: (access == Access::Write).then(|| Bytes::new(&value.to_be_bytes())),
        })
    }
    fn install(&mut self, cp: &mut ControlPlane<'_>, _key: &Bytes, value: &Bytes, slot: u32) {
        if let Some(reg) = self.values {
            let v = value.as_slice();
            let n = if v.len() == 4 {
                u32::from_be_bytes([v[0], v[1], v[2], v[3]])
            } else {
                0
            };
            cp.register_write(reg, u64::from(slot), n);
        }
    }
}

impl SpecModel for RpKv {
    fn spec_key(&self, input: &[u8]) -> Option<Vec<u8>> {
        let p = spec_parse(input)?;
        request(&p, input).map(|(_, k, _)| k.to_vec())
    }
    fn spec_step(&self, state: &[u8], input: &[u8]) -> (Vec<Vec<u8>>, Vec<u8>) {
        let (Some(p), true) = (spec_parse(input), state.len() == 4) else {
            return (Vec::new(), state.to_vec());
        };
        let Some((op, _, new)) = request(&p, input) else {
            return (Vec::new(), state.to_vec());
        };
        let mut value = u32::from_be_bytes([state[0], state[1], state[2], state[3]]);
        kv::apply(Self::op(op), &mut value, new);
        let mut f = input.to_vec();
        let out = match Self::reply(&mut f, &p, value) {
            Some(_) => vec![from_l3(&f, &p)],
            None => Vec::new(),
        };
        (out, value.to_be_bytes().to_vec())
    }
}
