//! Hostile frames for RedPlane's frame handlers (issue 8): the switch
//! running every RedPlane program, and the state store server. Random bytes
//! and mutated valid frames, on any port, at random times. Nothing panics;
//! the switch gives every frame it received a fate and keeps at most
//! MAX_FLOWS flows; the store counts every frame it cannot parse as
//! malformed, keeps its records within `max_records`, never breaks its own
//! §6.2.4 invariant, and still answers a valid request afterwards.
//!
//! The long-running versions are the `switch_redplane` and `redplane_store`
//! cargo-fuzz targets (fuzz/README.md).

use std::net::Ipv4Addr;

use inca_apps::params::Params;
use inca_redplane::apps::SpecModel;
use inca_redplane::catalog::{with_program, RpVisitor, PROGRAMS};
use inca_redplane::store::{AppConfig, StoreConfig, StoreServer, WorkerConfig};
use inca_redplane::switch::{RedPlane, RedPlaneApp};
use inca_switch::device::Nanos;
use inca_switch::harness::Harness;
use inca_switch::{Profile, Switch};
use inca_wire::build_udp_frame;
use inca_wire::redplane::*;
use proptest::prelude::*;

const SWITCH: Ipv4Addr = Ipv4Addr::new(10, 1, 0, 1);
const STORE: Ipv4Addr = Ipv4Addr::new(10, 9, 0, 1);

/// Frames a RedPlane switch and store see: client UDP, requests of every
/// type, acks, a chain update and a heartbeat.
fn valid_frames() -> Vec<Vec<u8>> {
    let ep =
        |s: Ipv4Addr, d: Ipv4Addr| rp_endpoints([2, 0, 0, 0, 0, 1], s, [2, 0, 0, 0, 0, 2], d, 7);
    let (k, v) = ([0, 0, 0, 9], [0, 0, 0, 1]);
    let mut f = vec![build_udp_frame(
        &ep([10, 0, 0, 1].into(), [192, 0, 2, 1].into()),
        1234,
        5000,
        b"get k",
        true,
    )
    .unwrap()];
    for (t, seq) in [
        (ReqType::LeaseNew, 0),
        (ReqType::LeaseRenew, 1),
        (ReqType::LeaseRenew, 0),
        (ReqType::BufRead, 1),
        (ReqType::Snapshot, 1),
    ] {
        let r = RequestRepr {
            req_type: t,
            seq,
            key: &k,
            value: &v,
            piggyback: &[],
        };
        f.push(build_request_frame(&ep(SWITCH, STORE), 8001, &r).unwrap());
    }
    let a = AckRepr {
        ack_type: AckType::LeaseNew,
        seq: 1,
        key: &[10, 0, 0, 1, 0x04, 0xd2],
        value: &[0; 6],
        piggyback: &[],
    };
    f.push(build_ack_frame(&ep(STORE, SWITCH), 8001, &a).unwrap());
    let u = ChainUpdateRepr {
        seq: 1,
        key: &k,
        value: &v,
        fence: 0,
        owner: SWITCH,
        lease_ms_remaining: 500,
        update_id: 1,
    };
    let peer = ep(Ipv4Addr::new(10, 9, 0, 2), STORE);
    f.push(build_rp_frame(&peer, chain_port(8001), chain_port(8001), &u.to_vec()).unwrap());
    let hb = HeartbeatRepr {
        config_version: 1,
        removed: 0,
        flags: 0,
    };
    f.push(build_rp_frame(&peer, NODE_CONTROL_PORT, NODE_CONTROL_PORT, &hb.to_vec()).unwrap());
    f
}

/// A mutation: which base frame, (offset, byte) edits, bytes cut off the end.
type Pick = (usize, Vec<(usize, u8)>, usize);

fn mutate(base: &[Vec<u8>], picks: &[Pick]) -> Vec<Vec<u8>> {
    picks
        .iter()
        .map(|(i, edits, cut)| {
            let mut f = base[i % base.len()].clone();
            for &(at, v) in edits {
                let n = f.len();
                f[at % n] = v;
            }
            f.truncate(f.len().saturating_sub(*cut));
            f
        })
        .collect()
}

// ------------------------------------------------------------------ switch

struct Drive<'a>(&'a [(u16, Nanos, Vec<u8>)]);

impl RpVisitor for Drive<'_> {
    type Output = Result<(), String>;
    fn visit<A: RedPlaneApp + SpecModel>(self, program: RedPlane<A>) -> Self::Output {
        let slots = program.config().slots;
        let sw = Switch::new(Profile::tofino(), program).map_err(|e| e.to_string())?;
        let buffer = sw.profile().data_path.buffer_bytes;
        let ports = sw.profile().data_path.ports;
        let mut h = Harness::new(sw, 3);
        h.keep_frames = false;
        let mut t = 0;
        for (port, dt, f) in self.0 {
            t += dt;
            h.send(t, *port, f.clone());
            let keys = h.device.program().keys();
            if keys > slots || h.device.buffer_used() > buffer {
                return Err(format!(
                    "{keys} flows (MAX_FLOWS {slots}), buffer {}",
                    h.device.buffer_used()
                ));
            }
        }
        // Past every retransmission and lease timer.
        h.advance_to(t + 5_000_000_000);
        let s = h.device.stats();
        let valid = self.0.iter().filter(|(p, _, _)| *p < ports).count() as u64;
        let rx: u64 = s.ports.iter().map(|p| p.rx_packets).sum();
        if rx != valid || s.bad_port_drops != self.0.len() as u64 - valid {
            return Err(format!("rx {rx} of {valid}, bad port {}", s.bad_port_drops));
        }
        if s.fates() - s.bad_port_drops < rx {
            return Err(format!(
                "{rx} frames in, {} fates",
                s.fates() - s.bad_port_drops
            ));
        }
        Ok(())
    }
}

fn each_program(frames: &[(u16, Nanos, Vec<u8>)]) -> Result<(), TestCaseError> {
    for (name, _) in PROGRAMS {
        with_program(name, &Params::default(), None, Drive(frames))
            .map_err(TestCaseError::fail)?
            .map_err(|e| TestCaseError::fail(format!("{name}: {e}")))?;
    }
    Ok(())
}

// ------------------------------------------------------------------ store

fn store(max_records: usize) -> Harness<StoreServer> {
    let w = |worker, app| WorkerConfig {
        worker,
        app,
        shard: 0,
        shards: 1,
    };
    let mut c = StoreConfig::new(STORE, vec![w(1, AppConfig::Kv), w(2, AppConfig::Firewall)]);
    c.max_records = max_records;
    let mut h = Harness::new(StoreServer::new(c).unwrap(), 5);
    h.keep_frames = true;
    h
}

/// Sends `frames` to a store and checks its bounds; returns the harness.
fn hammer_store(frames: &[(Nanos, Vec<u8>)]) -> Result<Harness<StoreServer>, TestCaseError> {
    let max_records = 8;
    let mut h = store(max_records);
    let mut t = 0;
    for (dt, f) in frames {
        t += dt;
        let before = h.device.stats().malformed;
        h.send(t, 0, f.clone());
        if parse_udp_frame(f).is_err() {
            prop_assert_eq!(
                h.device.stats().malformed,
                before + 1,
                "an unparsable frame is counted"
            );
        }
        for w in [1, 2] {
            let n = h.device.worker(w).map_or(0, |w| w.record_count());
            prop_assert!(n <= max_records, "worker {} holds {} records", w, n);
        }
    }
    h.advance_to(t + 3_000_000_000);
    let s = h.device.stats();
    prop_assert_eq!(s.rx_frames, frames.len() as u64);
    prop_assert_eq!(s.invariant_violations, 0);
    Ok(h)
}

/// A LEASE_NEW for a key no hostile frame used gets its NEW_ACK.
fn still_serves(h: &mut Harness<StoreServer>) -> Result<(), TestCaseError> {
    let key = [0xEE, 0xEE, 0xEE, 0x01];
    let r = RequestRepr {
        req_type: ReqType::LeaseNew,
        seq: 0,
        key: &key,
        value: &[0; 4],
        piggyback: &[],
    };
    let ep = rp_endpoints(
        [2, 0, 0, 0, 0, 1],
        Ipv4Addr::new(10, 1, 0, 77),
        [2; 6],
        STORE,
        9,
    );
    let t = h.now() + 1_000;
    h.take();
    h.send(t, 0, build_request_frame(&ep, 8001, &r).unwrap());
    h.advance_to(t + 10_000_000);
    let answered = h.take().iter().any(|x| {
        parse_udp_frame(&x.frame).is_ok_and(|i| {
            i.dst_ip == Ipv4Addr::new(10, 1, 0, 77)
                && Ack::new_checked(i.payload, 4, 4).is_ok_and(|a| a.key() == key)
        })
    });
    prop_assert!(answered, "the store still answers a valid LEASE_NEW");
    Ok(())
}

#[test]
fn a_store_at_its_record_limit_still_answers_known_keys_and_drops_new_ones() {
    let mut h = store(8);
    let mut t = 0;
    for i in 0..20u8 {
        t += 1_000;
        let r = RequestRepr {
            req_type: ReqType::LeaseNew,
            seq: 0,
            key: &[0, 0, 0, i],
            value: &[0; 4],
            piggyback: &[],
        };
        let ep = rp_endpoints([2, 0, 0, 0, 0, 1], SWITCH, [2; 6], STORE, 9);
        h.send(t, 0, build_request_frame(&ep, 8001, &r).unwrap());
    }
    h.advance_to(t + 10_000_000);
    assert_eq!(h.device.worker(1).unwrap().record_count(), 8);
    assert_eq!(h.device.stats().record_overflow, 12);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn switch_random_bytes_on_any_port(
        frames in proptest::collection::vec(
            (0u16..80, 0u64..5_000_000, proptest::collection::vec(any::<u8>(), 0..300)), 1..16)
    ) {
        each_program(&frames)?;
    }

    #[test]
    fn switch_mutated_frames(
        picks in proptest::collection::vec(
            (0usize..16, proptest::collection::vec((any::<usize>(), any::<u8>()), 0..4), 0usize..24), 1..16),
        ports in proptest::collection::vec(0u16..4, 16)
    ) {
        let frames: Vec<_> = mutate(&valid_frames(), &picks)
            .into_iter()
            .enumerate()
            .map(|(i, f)| (ports[i % ports.len()], 10_000, f))
            .collect();
        each_program(&frames)?;
    }

    #[test]
    fn store_random_bytes_are_counted_and_the_store_keeps_serving(
        frames in proptest::collection::vec(
            (0u64..50_000_000, proptest::collection::vec(any::<u8>(), 0..200)), 1..32)
    ) {
        let mut h = hammer_store(&frames)?;
        still_serves(&mut h)?;
    }

    #[test]
    fn store_mutated_requests_keep_bounds_and_the_store_keeps_serving(
        picks in proptest::collection::vec(
            (0usize..16, proptest::collection::vec((any::<usize>(), any::<u8>()), 0..4), 0usize..24), 1..32)
    ) {
        let frames: Vec<_> = mutate(&valid_frames(), &picks).into_iter().map(|f| (100_000, f)).collect();
        let mut h = hammer_store(&frames)?;
        still_serves(&mut h)?;
    }
}
