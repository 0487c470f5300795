//! The forwarding module (spec §5.4): regular traffic through inca-apps'
//! L2/L3 program (LPM → next hop, or L2), and requests through the two
//! reserved server groups, bypassing LPM: slot `s` holds `n` members and a
//! version, a flow's member is `FH_A[31:16] mod n`, and each server id
//! maps to the egress port of its point-to-point link.
//!
//! FH_A is computed once here and shared with the scalability module
//! (Bloom way 0 and the pin-cache fingerprint), as §4.1 asks.

use inca_apps::headers::Parsed;
use inca_apps::l2l3::L2L3;
use inca_switch::objects::{Handle, ObjectId};
use inca_switch::placement::Gress;
use inca_switch::{
    AccessError, DataPlane, Declare, DeclareError, MatchKind, PacketCtx, PortId, Program,
    TableDecl, TableHandle,
};

use crate::flow::{FlowHashes, FH_A};

/// Reserved ECMP group id of slot 0 (§3.1 [our choice]).
pub const CLIP_G0: u16 = 0xFFF0;
/// Reserved ECMP group id of slot 1.
pub const CLIP_G1: u16 = 0xFFF1;
/// Most members of a group (§2 [our choice]).
pub const MAX_MEMBERS: usize = 16;
/// Most servers (server ids 1..=127; 7 bits on the wire).
pub const MAX_SERVERS: usize = 127;

/// A group slot: members and version (0: empty).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SlotEntry {
    /// Members (0..=16).
    pub n: u8,
    /// Group version.
    pub ver: u16,
}

/// A server's link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerEntry {
    /// The switch port its link is on.
    pub port: PortId,
    /// In service.
    pub valid: bool,
}

/// The module's objects.
#[derive(Debug, Clone)]
pub struct Forwarding {
    /// The regular L2/L3 program.
    pub l2l3: L2L3,
    /// FH_A, shared.
    pub fh_a: Handle,
    /// `clip_slot`: slot → (n, version).
    pub slot: Option<TableHandle<SlotEntry>>,
    /// `clip_member`: (slot, index) → server id.
    pub member: Option<TableHandle<u8>>,
    /// `clip_server`: server id → port.
    pub server: Option<TableHandle<ServerEntry>>,
    /// `server_port`: which ports are server ports (port → server id).
    pub server_port: TableHandle<u8>,
}

impl Forwarding {
    /// Declares the regular half (L2/L3, FH_A) around `server_port`
    /// ([`declare_server_port`](Self::declare_server_port), declared first);
    /// the slots come later, after what selects them
    /// ([`declare_slots`](Self::declare_slots)), and the server links after
    /// the pin cache ([`declare_servers`](Self::declare_servers)).
    pub fn declare(
        d: &mut Declare,
        mut l2l3: L2L3,
        server_port: TableHandle<u8>,
    ) -> Result<Forwarding, DeclareError> {
        l2l3.declare(d)?;
        let fh_a = d.hash("fh_a", FH_A, 32, Gress::Ingress, &[])?;
        Ok(Forwarding {
            l2l3,
            fh_a,
            slot: None,
            member: None,
            server: None,
            server_port,
        })
    }

    /// Declares `server_port`, which every pass looks up first: its result
    /// (server port or not) tells a response from an original, so every
    /// other object is reached behind it.
    pub fn declare_server_port(d: &mut Declare) -> Result<TableHandle<u8>, DeclareError> {
        d.table(TableDecl::new(
            "server_port",
            MatchKind::Exact,
            2,
            7,
            MAX_SERVERS + 1,
        ))
    }

    /// Declares `clip_slot` and `clip_member`, after `after` (`cur` and
    /// the Bloom ways, which pick the slot); returns the member table's id.
    pub fn declare_slots(
        &mut self,
        d: &mut Declare,
        after: &[ObjectId],
    ) -> Result<ObjectId, DeclareError> {
        let slot = d.table(TableDecl::new("clip_slot", MatchKind::Exact, 1, 21, 2).after(after))?;
        let member = d.table(
            TableDecl::new("clip_member", MatchKind::Exact, 2, 7, 2 * MAX_MEMBERS)
                .after(&[slot.id(), self.fh_a.id()]),
        )?;
        self.slot = Some(slot);
        self.member = Some(member);
        Ok(member.id())
    }

    /// Declares `clip_server`, after `after` (the pin cache, which may
    /// choose the server).
    pub fn declare_servers(
        &mut self,
        d: &mut Declare,
        after: &[ObjectId],
    ) -> Result<(), DeclareError> {
        self.server = Some(d.table(
            TableDecl::new("clip_server", MatchKind::Exact, 1, 10, MAX_SERVERS + 1).after(after),
        )?);
        Ok(())
    }

    /// The server id of port `port`, if it is a server port.
    pub fn server_of_port(
        &self,
        dp: &mut DataPlane<'_>,
        port: PortId,
    ) -> Result<Option<u8>, AccessError> {
        dp.lookup(self.server_port, &port.to_be_bytes())
    }

    /// FH_A of a flow key.
    pub fn fh_a(&self, dp: &mut DataPlane<'_>, key: &[u8]) -> Result<u32, AccessError> {
        Ok(dp.hash(self.fh_a, key)? as u32)
    }

    /// The member of slot `slot` a flow with FH_A `fh_a` maps to, and the
    /// slot's version; None if the slot is empty.
    pub fn member(
        &self,
        dp: &mut DataPlane<'_>,
        slot: u8,
        fh_a: u32,
    ) -> Result<Option<(u8, u16)>, AccessError> {
        let (Some(slot_t), Some(member_t)) = (self.slot, self.member) else {
            return Ok(None);
        };
        let Some(s) = dp.lookup(slot_t, &[slot])? else {
            return Ok(None);
        };
        if s.n == 0 {
            return Ok(None);
        }
        let h = FlowHashes {
            a: fh_a,
            b: 0,
            c: 0,
            d: 0,
        };
        let idx = h.member(u32::from(s.n)) as u8;
        Ok(dp.lookup(member_t, &[slot, idx])?.map(|m| (m, s.ver)))
    }

    /// The port of server `id` (None if unknown or out of service).
    pub fn server_port(
        &self,
        dp: &mut DataPlane<'_>,
        id: u8,
    ) -> Result<Option<PortId>, AccessError> {
        let Some(server_t) = self.server else {
            return Ok(None);
        };
        Ok(dp
            .lookup(server_t, &[id])?
            .filter(|s| s.valid)
            .map(|s| s.port))
    }

    /// `forward_regular`: L3 route (or L2) through the L2/L3 program.
    pub fn regular<M, D>(
        &mut self,
        pkt: &mut PacketCtx<M, D>,
        parsed: Parsed,
        dp: &mut DataPlane<'_>,
    ) -> Result<(), AccessError> {
        let mut meta = parsed;
        let (r, _) =
            pkt.nest::<Parsed, (), _>(&mut meta, None, |inner| self.l2l3.ingress(inner, dp));
        r
    }
}
