//! The per-flow Sync-Counter (spec §7, the worst case of [RP] §6 (6)): a
//! 32-bit count per 5-tuple, incremented by every packet, each packet a
//! write (the flow key and the wrapping count are
//! [`inca_apps::core::counter`]'s). The new count is stamped into the
//! packet.
//!
//! [our choice] The count goes into the 4 payload bytes right after the
//! simulator's 24-byte UDP probe header (`inca_sim::nodes::host::PROBE_LEN`),
//! so the probe still measures latency; the L4 checksum is updated
//! incrementally. A packet whose payload (or parser window) is too short to
//! hold it is counted but forwarded unstamped.

use inca_apps::core::counter::{self, Overflow};
use inca_apps::headers::{write_u32_fix_sum, Parsed, PROTO_TCP, PROTO_UDP};
use inca_switch::objects::ObjectId;
use inca_switch::{
    AccessError, ArrayDecl, ControlPlane, DataPlane, Declare, DeclareError, PacketCtx,
    RegisterHandle,
};

use super::{from_l3, spec_parse, SpecModel};
use crate::switch::{Access, Bytes, Out, RedPlaneApp, RpDigest, RpMeta, Verdict};

/// Payload offset of the stamped count (after the probe header).
pub const STAMP_OFFSET: usize = inca_sim::nodes::host::PROBE_LEN;

/// The Sync-Counter. See the module documentation.
#[derive(Debug, Clone, Default)]
pub struct SyncCounter {
    count: Option<RegisterHandle<u32>>,
}

impl SyncCounter {
    /// A Sync-Counter.
    pub fn new() -> Self {
        SyncCounter::default()
    }

    /// The flow of a packet: the counter core's flow key, TCP/UDP only
    /// (exact, one replicated value per 5-tuple).
    fn flow(p: &Parsed) -> Option<[u8; 13]> {
        counter::flow_key(p).filter(|_| p.has_ports)
    }

    /// Where the count goes in a frame parsed as `p`, and where the L4
    /// checksum is: None if not TCP/UDP.
    fn stamp_at(p: &Parsed, h: &[u8]) -> Option<(usize, usize, bool)> {
        let l4 = usize::from(p.l4);
        match p.proto {
            PROTO_UDP if p.has_ports => Some((l4 + 8 + STAMP_OFFSET, l4 + 6, true)),
            PROTO_TCP if p.has_ports => {
                let doff = usize::from(h.get(l4 + 12)? >> 4) * 4;
                Some((l4 + doff + STAMP_OFFSET, l4 + 16, false))
            }
            _ => None,
        }
    }

    /// The NF logic: stamps `count` into the packet (within its IPv4 total
    /// length). Returns whether it fit.
    pub fn stamp(h: &mut [u8], p: &Parsed, count: u32) -> bool {
        let Some((at, sum, udp)) = Self::stamp_at(p, h) else {
            return false;
        };
        let l3 = usize::from(p.l3);
        let ip_end = h
            .get(l3 + 2..l3 + 4)
            .map(|b| l3 + usize::from(u16::from_be_bytes([b[0], b[1]])))
            .unwrap_or(0);
        at + 4 <= ip_end && write_u32_fix_sum(h, usize::from(p.l4), at, count, sum, udp)
    }
}

impl RedPlaneApp for SyncCounter {
    fn name(&self) -> &str {
        "redplane_sync_counter"
    }
    fn key_bytes(&self) -> usize {
        13
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
        self.count = Some(d.register::<u32>(ArrayDecl::new("sync_count", slots).after(after))?);
        Ok(())
    }

    fn key(&self, p: &Parsed, _header: &[u8]) -> Option<Bytes> {
        Self::flow(p).map(|k| Bytes::new(&k))
    }

    fn classify(&self, _p: &Parsed, _header: &[u8]) -> Access {
        Access::Write
    }

    fn process(
        &mut self,
        pkt: &mut PacketCtx<RpMeta, RpDigest>,
        dp: &mut DataPlane<'_>,
        slot: u32,
        _key: &Bytes,
        _access: Access,
    ) -> Result<Verdict, AccessError> {
        let Some(count) = self.count else {
            return Ok(Verdict {
                out: Out::Drop,
                value_after: None,
            });
        };
        let n = dp.register(count, u64::from(slot), |c| {
            counter::add(c, 1, Overflow::Wrap)
        })?;
        let p = pkt.meta.p;
        Self::stamp(pkt.header_mut(), &p, n);
        Ok(Verdict {
            out: Out::RouteTo(p.dst),
            value_after: Some(Bytes::new(&n.to_be_bytes())),
        })
    }

    fn install(&mut self, cp: &mut ControlPlane<'_>, _key: &Bytes, value: &Bytes, slot: u32) {
        let Some(count) = self.count else {
            return;
        };
        let v = value.as_slice();
        let n = if v.len() == 4 {
            u32::from_be_bytes([v[0], v[1], v[2], v[3]])
        } else {
            0
        };
        cp.register_write(count, u64::from(slot), n);
    }
}

impl SpecModel for SyncCounter {
    fn spec_key(&self, input: &[u8]) -> Option<Vec<u8>> {
        spec_parse(input)
            .and_then(|p| Self::flow(&p))
            .map(|k| k.to_vec())
    }

    fn spec_step(&self, state: &[u8], input: &[u8]) -> (Vec<Vec<u8>>, Vec<u8>) {
        let Some(p) = spec_parse(input) else {
            return (Vec::new(), state.to_vec());
        };
        let mut n = if state.len() == 4 {
            u32::from_be_bytes([state[0], state[1], state[2], state[3]])
        } else {
            0
        };
        counter::add(&mut n, 1, Overflow::Wrap);
        let mut f = input.to_vec();
        Self::stamp(&mut f, &p, n);
        (vec![from_l3(&f, &p)], n.to_be_bytes().to_vec())
    }

    /// Every IPv4 packet adds one (class 1); anything else changes nothing
    /// (class 0).
    fn spec_effect_class(&self, input: &[u8]) -> Option<u64> {
        Some(u64::from(spec_parse(input).is_some()))
    }
}
