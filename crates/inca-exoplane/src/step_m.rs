//! §5.6 step M, shared by the switch and device programs: a MERGE injected
//! by the control plane folds `delta` into one register (or counter) entry
//! with one access, then goes back to the CPU as MERGE_ACK.

use inca_switch::objects::ObjectId;
use inca_switch::{AccessError, DataPlane, PacketCtx};
use inca_wire::exoplane::{MergeRepr, Shim, ShimRepr, ShimType, MERGE_LEN, SHIM_LEN};

/// What became of a MERGE.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Merged {
    /// Applied; the packet goes to the CPU with reason `ack_reason`.
    Applied,
    /// Unknown app or object, bad body or slot: dropped.
    Refused,
}

/// Runs step M on `pkt`, whose shim `s` starts at `at`; `object_of(app_id,
/// obj_id)` finds the register or counter. The packet is dropped unless
/// the merge applies, then punted with `ack_reason`.
pub(crate) fn merge<M, D>(
    pkt: &mut PacketCtx<M, D>,
    dp: &mut DataPlane<'_>,
    at: usize,
    s: ShimRepr,
    ack_reason: u16,
    object_of: impl Fn(u8, u16) -> Option<ObjectId>,
) -> Result<Merged, AccessError> {
    pkt.drop_packet();
    let body = pkt
        .header()
        .get(at + SHIM_LEN..)
        .and_then(|b| MergeRepr::parse(b).ok());
    let Some((m, id)) = body.and_then(|m| Some((m, object_of(s.app_id, m.obj_id)?))) else {
        return Ok(Merged::Refused);
    };
    match dp.merge_u64(id, u64::from(m.slot), |v| m.op.apply(m.width, v, m.delta)) {
        Ok(_) => {}
        // A slot beyond the array: the access was made and failed.
        Err(AccessError::Index { .. }) => return Ok(Merged::Refused),
        Err(e) => return Err(e),
    }
    if let Ok(mut v) = Shim::new_checked(&mut pkt.header_mut()[at..]) {
        v.set_shim_type(ShimType::MergeAck);
    }
    pkt.to_cpu(ack_reason);
    Ok(Merged::Applied)
}

/// The app and MERGE body of a MERGE or MERGE_ACK frame.
pub(crate) fn body_of(frame: &[u8]) -> Option<(u8, MergeRepr)> {
    let (at, s) = inca_wire::exoplane::shim::shim_of(frame).ok()??;
    Some((
        s.app_id,
        MergeRepr::parse(frame.get(at + SHIM_LEN..)?).ok()?,
    ))
}

/// A MERGE frame for app `app_id` (what the hub or daemon injects into
/// its pipeline): Ethernet with the shim EtherType, a MERGE shim, the
/// body. None if the body does not emit (width, delta).
pub fn merge_frame(app_id: u8, m: &MergeRepr) -> Option<Vec<u8>> {
    let mut f = vec![0u8; 12];
    f.extend_from_slice(&inca_wire::exoplane::ETHERTYPE.to_be_bytes());
    let s = ShimRepr {
        shim_type: ShimType::Merge,
        failover: false,
        app_id,
        ldev: 0,
        in_port: 0,
        out_port: 0,
        next_type: 0,
    };
    f.extend_from_slice(&s.to_bytes());
    let at = f.len();
    f.resize(at + MERGE_LEN, 0);
    m.emit(&mut f[at..]).ok()?;
    Some(f)
}

/// A UDP frame behind a shim, for the load-time check's samples: the
/// programs' shim branches are unreachable from its generic packets.
pub(crate) fn sample(repr: ShimRepr) -> Option<Vec<u8>> {
    let udp = [0x9c, 0x40, 0x00, 0x50, 0x00, 0x0c, 0x00, 0x00, 1, 2, 3, 4];
    let mut f =
        inca_switch::loadcheck::packets::ipv4_frame([10, 0, 0, 1], [10, 0, 1, 1], 17, &udp, None);
    inca_wire::exoplane::shim::push(&mut f, repr).ok()?;
    Some(f)
}
