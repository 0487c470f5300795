//! The RedPlane EPC serving gateway (spec §7, [RP] §7.1): per UE (its IPv4
//! address, 4 B) the uplink TEID, the downlink TEID and the eNodeB address
//! (12 B, in three register arrays indexed by slot).
//!
//! - Signaling (UDP destination 2123) is a write. [our choice] Its body is
//!   simplified to UE IPv4 (4), uplink TEID (4), downlink TEID (4), eNB
//!   IPv4 (4); the packet is forwarded on by the routes.
//! - Uplink data: GTP-U on UDP 2152 (flags 8, type 8 = 0xFF, length 16,
//!   TEID 32) from the eNB, keyed by the inner source address. A TEID that
//!   is not the UE's uplink TEID is dropped; otherwise the packet is
//!   decapsulated and routed.
//! - Downlink data: IPv4 to an address in the UE network, keyed by the
//!   destination, encapsulated toward the UE's eNB with its downlink TEID.
//!
//! Data arriving while a signaling write is outstanding goes out as
//! BUF_READ (the wrapper does that).
//!
//! The GTP-U encapsulation is [`inca_apps::core::epc`]'s (without DF); this
//! adapter keeps the bearer in three registers and the replicated value.

use inca_apps::core::epc::Encap;
use inca_apps::core::Prefix;
use inca_apps::headers::{Parsed, PROTO_UDP};
use inca_apps::params::{ParamError, Params};
use inca_switch::objects::ObjectId;
use inca_switch::{
    AccessError, ArrayDecl, ControlPlane, DataPlane, Declare, DeclareError, PacketCtx,
    RegisterHandle,
};

use super::{from_l3, spec_parse, SpecModel};
use crate::switch::{Access, Bytes, Out, RedPlaneApp, RpDigest, RpMeta, Verdict};

pub use inca_apps::core::epc::{ENCAP_LEN, GTPC_PORT, GTPU_PORT};

/// What kind of EPC packet a frame is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Signaling { ue: [u8; 4], value: [u8; 12] },
    Uplink { ue: [u8; 4], teid: u32 },
    Downlink { ue: [u8; 4] },
}

/// Frame edits the NF logic needs, over a switch packet or a plain buffer,
/// so the data plane and the reference model run the same code.
trait Edit {
    fn bytes(&mut self) -> &mut [u8];
    fn insert(&mut self, at: usize, b: &[u8]) -> bool;
    fn remove(&mut self, at: usize, n: usize) -> bool;
}

impl Edit for Vec<u8> {
    fn bytes(&mut self) -> &mut [u8] {
        self
    }
    fn insert(&mut self, at: usize, b: &[u8]) -> bool {
        if at > self.len() {
            return false;
        }
        self.splice(at..at, b.iter().copied());
        true
    }
    fn remove(&mut self, at: usize, n: usize) -> bool {
        if at + n > self.len() {
            return false;
        }
        self.drain(at..at + n);
        true
    }
}

impl Edit for PacketCtx<RpMeta, RpDigest> {
    fn bytes(&mut self) -> &mut [u8] {
        self.header_mut()
    }
    fn insert(&mut self, at: usize, b: &[u8]) -> bool {
        self.insert_header(at, b)
    }
    fn remove(&mut self, at: usize, n: usize) -> bool {
        self.remove_header(at, n)
    }
}

/// The serving gateway. See the module documentation.
#[derive(Debug, Clone)]
pub struct RpEpc {
    /// The gateway's own address (outer source of downlink tunnels).
    pub sgw: [u8; 4],
    /// The UE network.
    pub ue_net: ([u8; 4], u8),
    regs: Option<[RegisterHandle<u32>; 3]>,
}

impl RpEpc {
    /// Parameter names.
    pub const PARAMS: &'static [&'static str] = &["sgw", "ue_net", "ue_len"];

    /// A gateway at `sgw` serving UEs in `ue_net`.
    pub fn new(sgw: [u8; 4], ue_net: ([u8; 4], u8)) -> Self {
        RpEpc {
            sgw,
            ue_net,
            regs: None,
        }
    }

    /// From parameters.
    pub fn from_params(p: &Params) -> Result<Self, ParamError> {
        Ok(RpEpc::new(
            p.ipv4("sgw", [192, 0, 2, 1])?,
            (
                p.ipv4("ue_net", [10, 200, 0, 0])?,
                p.number("ue_len", 16, 0, 32)? as u8,
            ),
        ))
    }

    fn is_ue(&self, ip: [u8; 4]) -> bool {
        Prefix::new(self.ue_net.0, self.ue_net.1).contains(ip)
    }

    fn kind(&self, p: &Parsed, h: &[u8]) -> Option<Kind> {
        if !p.ipv4 {
            return None;
        }
        let l4 = usize::from(p.l4);
        if p.proto == PROTO_UDP && p.has_ports && p.dport == GTPC_PORT {
            let b = h.get(l4 + 8..l4 + 24)?;
            let mut value = [0u8; 12];
            value.copy_from_slice(&b[4..16]);
            return Some(Kind::Signaling {
                ue: [b[0], b[1], b[2], b[3]],
                value,
            });
        }
        if p.proto == PROTO_UDP && p.has_ports && p.dport == GTPU_PORT {
            let g = h.get(l4 + 8..l4 + 16)?;
            if g[1] != 0xFF {
                return None;
            }
            let inner = h.get(l4 + 16..l4 + 36)?;
            if inner[0] >> 4 != 4 {
                return None;
            }
            return Some(Kind::Uplink {
                ue: [inner[12], inner[13], inner[14], inner[15]],
                teid: u32::from_be_bytes([g[4], g[5], g[6], g[7]]),
            });
        }
        self.is_ue(p.dst).then_some(Kind::Downlink { ue: p.dst })
    }

    /// The NF logic on `f` given the UE's value (ul TEID, dl TEID, eNB).
    /// Returns where the output goes.
    fn apply<E: Edit>(&self, f: &mut E, p: &Parsed, kind: Kind, value: &[u8; 12]) -> Out {
        let ul = u32::from_be_bytes([value[0], value[1], value[2], value[3]]);
        let dl = u32::from_be_bytes([value[4], value[5], value[6], value[7]]);
        let enb = [value[8], value[9], value[10], value[11]];
        let l3 = usize::from(p.l3);
        match kind {
            Kind::Signaling { .. } => Out::RouteTo(p.dst),
            Kind::Uplink { teid, .. } => {
                let outer = usize::from(p.l4) - l3 + 16;
                if teid != ul || ul == 0 || !f.remove(l3, outer) {
                    return Out::Drop;
                }
                Out::Route
            }
            Kind::Downlink { .. } => {
                if enb == [0; 4] {
                    return Out::Drop;
                }
                let inner_len = {
                    let b = f.bytes();
                    match b.get(l3 + 2..l3 + 4) {
                        Some(x) => usize::from(u16::from_be_bytes([x[0], x[1]])),
                        None => return Out::Drop,
                    }
                };
                let hdr = Encap {
                    src: self.sgw,
                    enb,
                    teid: dl,
                    dont_fragment: false,
                }
                .header(inner_len);
                if !f.insert(l3, &hdr) {
                    return Out::Drop;
                }
                Out::RouteTo(enb)
            }
        }
    }
}

impl RedPlaneApp for RpEpc {
    fn name(&self) -> &str {
        "redplane_epc"
    }
    fn key_bytes(&self) -> usize {
        4
    }
    fn value_bytes(&self) -> usize {
        12
    }
    fn declare(
        &mut self,
        d: &mut Declare,
        after: &[ObjectId],
        slots: usize,
    ) -> Result<(), DeclareError> {
        let ul = d.register::<u32>(ArrayDecl::new("epc_teid_ul", slots).after(after))?;
        let dl = d.register::<u32>(ArrayDecl::new("epc_teid_dl", slots).after(after))?;
        let enb = d.register::<u32>(ArrayDecl::new("epc_enb", slots).after(after))?;
        self.regs = Some([ul, dl, enb]);
        Ok(())
    }
    fn key(&self, p: &Parsed, header: &[u8]) -> Option<Bytes> {
        match self.kind(p, header)? {
            Kind::Signaling { ue, .. } | Kind::Uplink { ue, .. } | Kind::Downlink { ue } => {
                Some(Bytes::new(&ue))
            }
        }
    }
    fn classify(&self, p: &Parsed, header: &[u8]) -> Access {
        match self.kind(p, header) {
            Some(Kind::Signaling { .. }) => Access::Write,
            _ => Access::Read,
        }
    }
    fn process(
        &mut self,
        pkt: &mut PacketCtx<RpMeta, RpDigest>,
        dp: &mut DataPlane<'_>,
        slot: u32,
        _key: &Bytes,
        _access: Access,
    ) -> Result<Verdict, AccessError> {
        let p = pkt.meta.p;
        let (Some([ul, dl, enb]), Some(kind)) = (self.regs, self.kind(&p, pkt.header())) else {
            return Ok(Verdict {
                out: Out::Drop,
                value_after: None,
            });
        };
        let i = u64::from(slot);
        let mut value = [0u8; 12];
        let mut value_after = None;
        match kind {
            Kind::Signaling { value: v, .. } => {
                let w = |o: usize| u32::from_be_bytes([v[o], v[o + 1], v[o + 2], v[o + 3]]);
                dp.register(ul, i, |r| *r = w(0))?;
                dp.register(dl, i, |r| *r = w(4))?;
                dp.register(enb, i, |r| *r = w(8))?;
                value = v;
                value_after = Some(Bytes::new(&v));
            }
            Kind::Uplink { .. } => {
                value[0..4].copy_from_slice(&dp.register(ul, i, |r| *r)?.to_be_bytes());
            }
            Kind::Downlink { .. } => {
                value[4..8].copy_from_slice(&dp.register(dl, i, |r| *r)?.to_be_bytes());
                value[8..12].copy_from_slice(&dp.register(enb, i, |r| *r)?.to_be_bytes());
            }
        }
        let out = self.apply(pkt, &p, kind, &value);
        Ok(Verdict { out, value_after })
    }
    fn install(&mut self, cp: &mut ControlPlane<'_>, _key: &Bytes, value: &Bytes, slot: u32) {
        let Some(regs) = self.regs else {
            return;
        };
        let v = value.as_slice();
        if v.len() != 12 {
            return;
        }
        for (n, r) in regs.iter().enumerate() {
            let o = 4 * n;
            cp.register_write(
                *r,
                u64::from(slot),
                u32::from_be_bytes([v[o], v[o + 1], v[o + 2], v[o + 3]]),
            );
        }
    }
}

impl SpecModel for RpEpc {
    fn spec_key(&self, input: &[u8]) -> Option<Vec<u8>> {
        let p = spec_parse(input)?;
        self.key(&p, input).map(|k| k.as_slice().to_vec())
    }
    fn spec_step(&self, state: &[u8], input: &[u8]) -> (Vec<Vec<u8>>, Vec<u8>) {
        let (Some(p), true) = (spec_parse(input), state.len() == 12) else {
            return (Vec::new(), state.to_vec());
        };
        let Some(kind) = self.kind(&p, input) else {
            return (Vec::new(), state.to_vec());
        };
        let mut value = [0u8; 12];
        value.copy_from_slice(state);
        if let Kind::Signaling { value: v, .. } = kind {
            value = v;
        }
        let mut f = input.to_vec();
        let out = match self.apply(&mut f, &p, kind, &value) {
            Out::Drop => Vec::new(),
            _ => vec![from_l3(&f, &p)],
        };
        (out, value.to_vec())
    }
}
