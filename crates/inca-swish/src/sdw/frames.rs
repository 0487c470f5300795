//! Byte positions of an SDW packet inside a frame and the in-place
//! rewrites the handlers make (turning a DATA into an ACK, a READY into an
//! ADVANCE, and so on), plus the internal type codes that never leave a
//! replica [our choice].
//!
//! Every SDW frame the replicas make is untagged Ethernet, IPv4 without
//! options and UDP, so the SwiSh header starts at byte 42; a frame whose
//! payload starts elsewhere is counted as malformed and dropped.

use inca_wire::ipv4::Ipv4Packet;
use inca_wire::swish::sdw::{BodyRepr, MsgType};
use inca_wire::swish::{src_port, HeaderRepr, Proto, GROUP_RID};

use crate::addr::{udp_frame, ReplicaAddr};

/// Offset of the SwiSh header.
pub const SWISH_AT: usize = 42;
/// Offset of the SDW body.
pub const BODY_AT: usize = SWISH_AT + 8;
/// Length of a DATA frame (§4.4: 78 bytes without FCS).
pub const DATA_FRAME_LEN: usize = BODY_AT + 28;

/// Internal: ADVANCE(win) (recirculated or through the loopback).
pub const T_ADVANCE: u8 = 0x81;
/// Internal: a recirculated packet that fires the DATA stream; with
/// flag [`F_THEN_READY`] it then goes out as READY(win).
pub const T_TRIGGER: u8 = 0x82;
/// Internal: START(win), injected by the controller through the CPU.
pub const T_START: u8 = 0x83;
/// Internal: the ACK-check timer stream's template.
pub const T_TIMER: u8 = 0x84;
/// Flag of [`T_TRIGGER`]: send READY(win) after firing the stream.
pub const F_THEN_READY: u8 = 0x80;

/// The destination MAC of internal frames: what the DATA stream's
/// recirculation trigger matches, with the type byte [our choice].
pub const INTERNAL_MAC: [u8; 6] = [0x02, 0x53, 0x44, 0x57, 0xFF, 0xFF];

/// An internal frame of type `ty` for window `win` from `me`.
pub fn internal_frame(me: &ReplicaAddr, group: u8, ty: u8, win: u32, coll: u16) -> Vec<u8> {
    let mut payload = vec![0u8; 8 + 28];
    let h = HeaderRepr {
        proto: Proto::Sdw,
        msg_type: ty,
        flags: 0,
        group_id: group,
        src_rid: me.rid,
        dst_rid: me.rid,
    };
    let _ = h.emit(&mut payload);
    let body = BodyRepr {
        msg_type: MsgType::Data,
        win,
        col: 0,
        ncols: 0,
        coll_id: coll,
        nrows: 0,
        vals: [0; 3],
    };
    let _ = body.emit(&mut payload[8..]);
    let to = ReplicaAddr {
        mac: INTERNAL_MAC,
        ..*me
    };
    // Fixed addresses and a 36-byte payload always build.
    udp_frame(me, &to, &payload).unwrap_or_default()
}

/// The DATA stream's recirculation match: internal MAC and type TRIGGER
/// of this group.
pub fn trigger_match(group: u8) -> (Vec<u8>, Vec<u8>) {
    let mut value = vec![0u8; SWISH_AT + 4];
    let mut mask = vec![0u8; SWISH_AT + 4];
    value[..6].copy_from_slice(&INTERNAL_MAC);
    mask[..6].fill(0xFF);
    value[SWISH_AT + 1] = T_TRIGGER;
    mask[SWISH_AT + 1] = 0xFF;
    value[SWISH_AT + 3] = group;
    mask[SWISH_AT + 3] = 0xFF;
    (value, mask)
}

/// Sets the type, flags and window of the SDW packet in `h`.
pub fn set_kind(h: &mut [u8], ty: u8, flags: u8, win: u32) {
    if h.len() < BODY_AT + 16 {
        return;
    }
    h[SWISH_AT + 1] = ty;
    h[SWISH_AT + 2] = flags;
    h[BODY_AT..BODY_AT + 4].copy_from_slice(&win.to_be_bytes());
}

/// Sets col, ncols, nrows and the cells.
pub fn set_data(h: &mut [u8], col: u32, ncols: u32, nrows: u8, vals: [u32; 3]) {
    if h.len() < DATA_FRAME_LEN {
        return;
    }
    h[BODY_AT + 4..BODY_AT + 8].copy_from_slice(&col.to_be_bytes());
    h[BODY_AT + 8..BODY_AT + 12].copy_from_slice(&ncols.to_be_bytes());
    h[BODY_AT + 14] = nrows;
    for (i, v) in vals.iter().enumerate() {
        let at = BODY_AT + 16 + 4 * i;
        h[at..at + 4].copy_from_slice(&v.to_be_bytes());
    }
}

/// Addresses the frame in `h` from `from` to `to`: MACs, IPs (checksum
/// refilled), UDP source port, and the SwiSh rids (`to` = None: the group,
/// MAC for internal use).
pub fn address(h: &mut [u8], from: &ReplicaAddr, to: Option<&ReplicaAddr>) {
    if h.len() < BODY_AT {
        return;
    }
    let (mac, ip, rid) = match to {
        Some(t) => (t.mac, t.ip, t.rid),
        None => (INTERNAL_MAC, from.ip, GROUP_RID),
    };
    h[0..6].copy_from_slice(&mac);
    h[6..12].copy_from_slice(&from.mac);
    {
        let mut ipv4 = Ipv4Packet::new_unchecked(&mut h[14..34]);
        ipv4.set_src_addr(from.ip);
        ipv4.set_dst_addr(ip);
        ipv4.fill_checksum();
    }
    h[34..36].copy_from_slice(&src_port(from.rid).to_be_bytes());
    h[SWISH_AT + 4..SWISH_AT + 6].copy_from_slice(&from.rid.to_be_bytes());
    h[SWISH_AT + 6..SWISH_AT + 8].copy_from_slice(&rid.to_be_bytes());
}
