//! The EWO replica's control plane and the controller's messages to it
//! (§4.5, §5.3). At start it installs the mirror session, the peer tables,
//! the multicast group, the serving flag and the generator streams; later
//! the controller (an external server, here messages through the switch
//! CPU, each operation charged the profile's control-plane cost):
//! - [`SET_PEERS`] — the new member list (a failure removes one, a join
//!   adds one): tables, `npeers`, multicast group rewritten;
//! - [`WRITE_REG`] — entries of one array of one variable (a joiner's copy
//!   of a live replica's arrays);
//! - [`SET_SERVING`] — the joiner starts serving.

use inca_switch::pktgen::{StreamConfig, Trigger};
use inca_switch::register::{Pair, RegisterValue};
use inca_switch::switch::RECIRCULATION_PORT;
use inca_switch::tm::MirrorSession;
use inca_switch::{ControlEvent, ControlPlane, MatchSpec};

use crate::addr::ReplicaAddr;
use crate::ewo::config::{Propagation, StreamRole};
use crate::ewo::program::{EwoProgram, PEER_TABLE};

/// Message kind: the member list (body: [`encode_peers`]).
pub const SET_PEERS: u32 = 0x4557_0001;
/// Message kind: register entries (body: [`encode_write`]).
pub const WRITE_REG: u32 = 0x4557_0002;
/// Message kind: serving flag (body: one byte, 0 or 1).
pub const SET_SERVING: u32 = 0x4557_0003;

/// Size of a generator packet [our choice]: a minimum Ethernet frame.
const GEN_FRAME: usize = 64;

/// A member list as a message body: per peer rid:16, ip:32, mac:48,
/// port:16.
pub fn encode_peers(peers: &[ReplicaAddr]) -> Vec<u8> {
    let mut b = Vec::with_capacity(14 * peers.len());
    for p in peers {
        b.extend_from_slice(&p.rid.to_be_bytes());
        b.extend_from_slice(&p.ip.octets());
        b.extend_from_slice(&p.mac);
        b.extend_from_slice(&p.port.to_be_bytes());
    }
    b
}

/// The member list back; `None` if the length is not a multiple of 14.
pub fn decode_peers(b: &[u8]) -> Option<Vec<ReplicaAddr>> {
    if !b.len().is_multiple_of(14) {
        return None;
    }
    Some(
        b.chunks_exact(14)
            .map(|c| ReplicaAddr {
                rid: u16::from_be_bytes([c[0], c[1]]),
                ip: std::net::Ipv4Addr::new(c[2], c[3], c[4], c[5]),
                mac: [c[6], c[7], c[8], c[9], c[10], c[11]],
                port: u16::from_be_bytes([c[12], c[13]]),
            })
            .collect(),
    )
}

/// Register entries as a message body: var_id:16, array:8, pad:8,
/// start:32, then the entries as u64 (pairs `hi << 32 | lo`).
pub fn encode_write(var_id: u16, array: u8, start: u32, values: &[u64]) -> Vec<u8> {
    let mut b = Vec::with_capacity(8 + 8 * values.len());
    b.extend_from_slice(&var_id.to_be_bytes());
    b.extend_from_slice(&[array, 0]);
    b.extend_from_slice(&start.to_be_bytes());
    for v in values {
        b.extend_from_slice(&v.to_be_bytes());
    }
    b
}

fn install_peers(p: &mut EwoProgram, peers: Vec<ReplicaAddr>, cp: &mut ControlPlane<'_>) {
    let (Some(by_idx), Some(by_rid), Some(np)) = (p.peer_idx, p.peer_rid, p.npeers) else {
        return;
    };
    let peers: Vec<ReplicaAddr> = peers
        .into_iter()
        .filter(|q| q.rid != p.cfg.rid())
        .take(PEER_TABLE)
        .collect();
    for (i, old) in std::mem::take(&mut p.installed).iter().enumerate() {
        cp.table_delete(by_idx, MatchSpec::Exact(Box::new([i as u8])));
        cp.table_delete(by_rid, MatchSpec::Exact(Box::new(old.rid.to_be_bytes())));
    }
    for (i, q) in peers.iter().enumerate() {
        cp.table_add(by_idx, MatchSpec::Exact(Box::new([i as u8])), *q);
        cp.table_add(by_rid, MatchSpec::Exact(Box::new(q.rid.to_be_bytes())), *q);
    }
    cp.register_write(np, 0, peers.len() as u32);
    let members = peers.iter().map(|q| (q.port, q.rid)).collect();
    cp.multicast_group(p.cfg.mcast_group, members);
    p.installed = peers;
}

fn write_reg(p: &mut EwoProgram, b: &[u8], cp: &mut ControlPlane<'_>) -> bool {
    if b.len() < 8 || !(b.len() - 8).is_multiple_of(8) {
        return false;
    }
    let var_id = u16::from_be_bytes([b[0], b[1]]);
    let array = usize::from(b[2]);
    let start = u32::from_be_bytes([b[4], b[5], b[6], b[7]]);
    let Some(a) = p.arrays(var_id) else {
        return false;
    };
    let Some(spec) = p.cfg.vars.iter().find(|v| v.var_id == var_id) else {
        return false;
    };
    let count = (b.len() - 8) / 8;
    if u64::from(start) + count as u64 > u64::from(spec.entries) {
        return false;
    }
    let vals = b[8..]
        .chunks_exact(8)
        .map(|c| u64::from_be_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]));
    match (a.lww, a.words.get(array)) {
        (Some(h), _) if array == 0 => {
            for (k, v) in vals.enumerate() {
                cp.register_write(h, u64::from(start) + k as u64, Pair::from_u64(v));
            }
        }
        (None, Some(&h)) => {
            for (k, v) in vals.enumerate() {
                cp.register_write(h, u64::from(start) + k as u64, v as u32);
            }
        }
        _ => return false,
    }
    true
}

/// Handles one control-plane event of replica `p`.
pub(crate) fn handle(p: &mut EwoProgram, event: ControlEvent<()>, cp: &mut ControlPlane<'_>) {
    match event {
        ControlEvent::Start => {
            cp.mirror_session(
                p.cfg.mirror_session,
                MirrorSession {
                    port: RECIRCULATION_PORT,
                    truncate: Some(p.cfg.mirror_truncate),
                },
            );
            if let Some(h) = p.serving {
                cp.register_write(h, 0, u32::from(p.cfg.serving));
            }
            install_peers(p, p.cfg.peers.clone(), cp);
            for (s, &(v, role)) in p.streams.clone().iter().enumerate() {
                let spec = p.cfg.vars[v];
                let period = match (role, spec.propagation) {
                    (StreamRole::AntiEntropy, _) => p.cfg.t_ae,
                    (StreamRole::Estimator, _) => match p.cfg.limiter {
                        Some(l) => l.period,
                        None => continue,
                    },
                    (StreamRole::Batch, Propagation::Periodic(t)) => t,
                    (StreamRole::Batch, Propagation::PerWrite) => continue,
                };
                let config = StreamConfig {
                    trigger: Trigger::Timer { period },
                    template: vec![0; GEN_FRAME],
                    batch_size: spec.entries as u16,
                };
                cp.packet_generator(s as u8, Some(config));
            }
        }
        ControlEvent::Message(m) => {
            let ok = match m.kind {
                SET_PEERS => match decode_peers(&m.body) {
                    Some(peers) => {
                        install_peers(p, peers, cp);
                        true
                    }
                    None => false,
                },
                WRITE_REG => write_reg(p, &m.body, cp),
                SET_SERVING if m.body.len() == 1 => match p.serving {
                    Some(h) => {
                        cp.register_write(h, 0, u32::from(m.body[0] != 0));
                        true
                    }
                    None => false,
                },
                _ => false,
            };
            if !ok {
                p.stats.bad_control += 1;
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peer_lists_round_trip() {
        let peers = vec![
            ReplicaAddr::conventional(1, 3),
            ReplicaAddr::conventional(0x0102, 4),
        ];
        assert_eq!(decode_peers(&encode_peers(&peers)), Some(peers));
        assert_eq!(decode_peers(&[0; 13]), None);
    }
}
