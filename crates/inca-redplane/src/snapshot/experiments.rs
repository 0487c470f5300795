//! Snapshot bandwidth (spec §8 item 4, \[TH\] Fig. 5.13, \[RP\] Fig. 11): the
//! replication traffic of the heavy-hitter detector for 3/4/5 rows at
//! snapshot frequencies from 32 to 1024 Hz, measured by running the switch.
//!
//! One HH switch with all 16 VLAN partitions leased runs in the one-device
//! harness against a scripted store that answers every LEASE_NEW with an
//! empty restore and acks every SNAPSHOT_REQ within `store_rtt`. After a
//! warm-up, the bytes the switch sends to the store (requests, including
//! any retransmission) and receives from it (acks) over `duration` are the
//! result. The control plane's register latency is cut to 1 µs here so the
//! 16 restores finish quickly; it does not affect the steady state measured
//! [our choice].

use inca_switch::harness::Harness;
use inca_switch::{Nanos, Profile, Switch};
use inca_wire::redplane::{
    build_ack_frame, parse_udp_frame, rp_endpoints, AckRepr, AckType, ReqType, Request,
};

use super::apps::HeavyHitterSketch;
use super::config::SnapshotConfig;
use super::program::BoundedSwitch;

/// One measured point.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BandwidthPoint {
    /// Sketch rows.
    pub rows: usize,
    /// Snapshots per second.
    pub hz: u64,
    /// Switch → store, Mbit/s of frames.
    pub request_mbps: f64,
    /// Store → switch, Mbit/s of frames.
    pub ack_mbps: f64,
    /// Snapshot requests sent per second (first transmissions and
    /// retransmissions).
    pub requests_per_sec: f64,
    /// Retransmissions during the measurement.
    pub retransmissions: u64,
}

/// Measures one point: `rows` rows, `hz` snapshots per second, over
/// `duration` ns after a warm-up, with acks `store_rtt` after each request.
pub fn snapshot_bandwidth(
    rows: usize,
    hz: u64,
    duration: Nanos,
    store_rtt: Nanos,
) -> Result<BandwidthPoint, String> {
    if hz == 0 || duration == 0 {
        return Err("hz and duration must be positive".into());
    }
    let t_snap = 1_000_000_000 / hz;
    let cfg = SnapshotConfig {
        t_snap,
        epsilon: 3 * t_snap,
        ..SnapshotConfig::default()
    };
    let vlans: Vec<u16> = (1..=16).collect();
    let app = HeavyHitterSketch::new(rows, vlans.clone(), u32::MAX);
    let mut profile = Profile::tofino();
    profile.control_plane.register_op = 1_000;
    profile.control_plane.register_per_entry = 0;
    let prog = BoundedSwitch::new(app, cfg.clone()).for_profile(&profile);
    prog.plan()?;
    let switch = Switch::new(profile, prog).map_err(|e| e.to_string())?;
    let mut h = Harness::new(switch, 1);
    h.keep_frames = true;
    let (k, v) = (3, 4 * rows);
    let ack = |t: AckType, seq: u16, key: &[u8], value: &[u8], ident: u16| {
        let ep = rp_endpoints(
            cfg.store_mac,
            cfg.store_ip,
            cfg.switch_mac,
            cfg.switch_ip,
            ident,
        );
        build_ack_frame(
            &ep,
            cfg.store_udp,
            &AckRepr {
                ack_type: t,
                seq,
                key,
                value,
                piggyback: &[],
            },
        )
        .map_err(|e| e.to_string())
    };
    // Ask for every partition once.
    for (i, &vlan) in vlans.iter().enumerate() {
        h.send(1_000_000 + i as u64 * 1_000, cfg.in_port, data_frame(vlan)?);
    }
    let step = store_rtt.max(1_000);
    let warmup = 100_000_000 + 4 * t_snap;
    let end = warmup + duration;
    let (mut req_bytes, mut ack_bytes, mut reqs) = (0u64, 0u64, 0u64);
    let mut retx_at_warmup = None;
    let mut t = 1_000_000;
    while t < end {
        t += step;
        h.advance_to(t);
        if t >= warmup && retx_at_warmup.is_none() {
            retx_at_warmup = Some(h.device.program().stats().retransmissions);
        }
        let measuring = t > warmup;
        for out in h.take() {
            if out.port != cfg.store_port {
                continue;
            }
            let Ok(info) = parse_udp_frame(&out.frame) else {
                continue;
            };
            let Ok(r) = Request::new_checked(info.payload, k, v) else {
                continue;
            };
            let reply = match r.req_type() {
                Ok(ReqType::LeaseNew) => {
                    let part = [r.key()[0], r.key()[1]];
                    let mut frames = Vec::new();
                    for j in 0..64u8 {
                        let key = [part[0], part[1], j];
                        frames.push(ack(
                            AckType::SnapshotRestore,
                            0,
                            &key,
                            &vec![0; v],
                            info.ident,
                        )?);
                    }
                    frames
                }
                Ok(ReqType::Snapshot) => {
                    if measuring {
                        req_bytes += out.frame.len() as u64;
                        reqs += 1;
                    }
                    vec![ack(AckType::Snapshot, r.seq(), r.key(), &[], info.ident)?]
                }
                _ => Vec::new(),
            };
            for f in reply {
                if measuring {
                    ack_bytes += f.len() as u64;
                }
                h.send(t + store_rtt, cfg.store_port, f);
            }
        }
    }
    let stats = h.device.program().stats().clone();
    if stats.restores < vlans.len() as u64 {
        return Err(format!(
            "only {} of {} partitions were leased during the warm-up",
            stats.restores,
            vlans.len()
        ));
    }
    let secs = duration as f64 / 1e9;
    Ok(BandwidthPoint {
        rows,
        hz,
        request_mbps: req_bytes as f64 * 8.0 / secs / 1e6,
        ack_mbps: ack_bytes as f64 * 8.0 / secs / 1e6,
        requests_per_sec: reqs as f64 / secs,
        retransmissions: stats.retransmissions - retx_at_warmup.unwrap_or(0),
    })
}

/// The sweep of §8 item 4: rows 3/4/5 × the given frequencies.
pub fn snapshot_bandwidth_sweep(
    hz: &[u64],
    duration: Nanos,
    store_rtt: Nanos,
) -> Result<Vec<BandwidthPoint>, String> {
    let mut out = Vec::new();
    for rows in [3, 4, 5] {
        for &f in hz {
            out.push(snapshot_bandwidth(rows, f, duration, store_rtt)?);
        }
    }
    Ok(out)
}

fn data_frame(vlan: u16) -> Result<Vec<u8>, String> {
    use inca_wire::builder::{build_udp_frame, Endpoints};
    use inca_wire::ethernet::VlanTag;
    let ep = Endpoints {
        vlan: Some(VlanTag {
            pcp: 0,
            dei: false,
            vid: vlan,
        }),
        ..Endpoints::new(
            [2, 0, 0, 0, 1, 1],
            std::net::Ipv4Addr::new(10, 1, 0, 1),
            [2, 0, 0, 0, 1, 2],
            std::net::Ipv4Addr::new(10, 2, 0, 1),
        )
    };
    build_udp_frame(&ep, 1000 + vlan, 80, &[0u8; 18], false).map_err(|e| e.to_string())
}
