//! Hostile input for TEA's frame handlers (issue 8): the switch running
//! every TEA program and the DRAM server (NIC and agent behind one port).
//!
//! - RDMA requests outside a memory region, across two regions, past a
//!   multi-packet WRITE's length, with a wrong R_Key or one from before a
//!   crash, to a QP that does not exist: each is NAKed (or, for the unknown
//!   QP, dropped and counted) and every registered byte is unchanged —
//!   checked over the whole of both regions, not just the target.
//! - Random bytes and mutated valid frames: nothing panics, every frame is
//!   counted somewhere, garbage never changes memory, and the server still
//!   answers its agent and its QP afterwards.
//! - The switch with each TEA program: random and mutated frames on any
//!   port; every frame gets a fate, the SRAM cache and stash stay within
//!   their capacities.
//!
//! The long-running versions are the `switch_tea` and `tea_dram` cargo-fuzz
//! targets (fuzz/README.md).

use std::net::Ipv4Addr;

use inca_apps::params::Params;
use inca_sim::engine::Node;
use inca_switch::device::Nanos;
use inca_switch::harness::Harness;
use inca_switch::{Profile, Switch};
use inca_tea::nf::{TeaFirewall, TeaLb, TeaNat, TeaVpn};
use inca_tea::server::agent_proto::{
    build_datagram, parse_udp, Body, CreateQp, Message, Reply, Request, WriteEntry, AGENT_UDP_PORT,
};
use inca_tea::server::nic::DropReason;
use inca_tea::server::{DramServer, DramServerConfig};
use inca_tea::switch::{TeaNf, TeaSwitch};
use inca_wire::roce::syndrome;
use inca_wire::*;
use proptest::prelude::*;
use std::result::Result;

const CP_MAC: MacAddr = [0x02, 0, 0, 0, 0x0a, 0xfe];
const CP_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 254);
const REGION: u64 = 1 << 16;
const SWITCH_QPN: u32 = 0x701;

/// A DRAM server with two regions (ids 1 and 2) and one QP in RTS, set up
/// through its agent as the switch control plane does it.
struct Rig {
    h: Harness<DramServer>,
    cfg: DramServerConfig,
    /// (base VA, R_Key) of regions 1 and 2.
    regions: [(u64, u32); 2],
    qpn: u32,
    next_id: u32,
}

impl Rig {
    fn new() -> Rig {
        let cfg = DramServerConfig::default();
        let mut rig = Rig {
            h: Harness::new(DramServer::new(cfg.clone()).unwrap(), 1),
            cfg,
            regions: [(0, 0); 2],
            qpn: 0,
            next_id: 1,
        };
        rig.setup();
        rig
    }

    /// Allocates the regions and creates the QP (again after a restart).
    fn setup(&mut self) {
        for (i, id) in [1u16, 2].into_iter().enumerate() {
            let Some(Reply::Region { base_va, rkey }) = self.call(Request::AllocRegion {
                region_id: id,
                bytes: REGION,
            }) else {
                panic!("region {id}");
            };
            self.regions[i] = (base_va, rkey);
        }
        let qp = CreateQp {
            qp_idx: 7,
            remote_qpn: SWITCH_QPN,
            remote_mac: CP_MAC,
            remote_ip: CP_IP,
            init_psn: 0,
            pmtu: 1024,
            max_rd_atomic: 16,
        };
        let Some(Reply::QpCreated { qpn, .. }) = self.call(Request::CreateQp(qp)) else {
            panic!("QP");
        };
        self.qpn = qpn;
    }

    fn at(&self) -> Nanos {
        self.h.now() + 1_000
    }

    /// One agent request; its reply.
    fn call(&mut self, r: Request) -> Option<Reply> {
        let ep = Endpoints::new(CP_MAC, CP_IP, self.cfg.mac, self.cfg.ip);
        let id = self.next_id;
        self.next_id += 1;
        let f = build_datagram(&ep, 40000, AGENT_UDP_PORT, &Message::request(id, r)).unwrap();
        self.h.take();
        let t = self.at();
        self.h.send(t, 0, f);
        self.h.advance_to(t + 100_000);
        self.h.take().into_iter().find_map(|x| {
            let d = parse_udp(&x.frame)?;
            let m = Message::decode(d.payload).ok()?;
            match m.body {
                Body::Reply(r) if m.req_id == id => Some(r),
                _ => None,
            }
        })
    }

    fn rdma(&self) -> RoceFrameBuilder {
        RoceFrameBuilder::new(
            Endpoints::new(CP_MAC, CP_IP, self.cfg.mac, self.cfg.ip),
            0xC001,
            self.qpn,
        )
    }

    /// Delivers `frame`; the RoCE packets the server answered with, as
    /// (opcode, AETH syndrome, payload).
    fn rdma_in(&mut self, frame: Vec<u8>) -> Vec<(Opcode, Option<u8>, Vec<u8>)> {
        self.h.take();
        let t = self.at();
        self.h.send(t, 0, frame);
        self.h.advance_to(t + 1_000_000);
        self.h
            .take()
            .into_iter()
            .filter_map(|x| {
                let d = parse_udp(&x.frame)?;
                let p = RocePacket::new_checked(d.payload).ok()?;
                let r = RoceRepr::parse(&p).ok()?;
                Some((r.bth.opcode, r.aeth.map(|a| a.syndrome), r.payload.to_vec()))
            })
            .collect()
    }

    /// Every registered byte, both regions.
    fn memory(&self) -> Vec<u8> {
        let mut all = Vec::new();
        for (base, _) in self.regions {
            let mut b = vec![0; REGION as usize];
            self.h.device.nic().memory().read(base, &mut b);
            all.extend(b);
        }
        all
    }

    fn reth(&self, region: usize, off: u64, len: u32) -> RethRepr {
        RethRepr {
            virtual_addr: self.regions[region].0.wrapping_add(off),
            rkey: self.regions[region].1,
            dma_len: len,
        }
    }
}

fn nak(out: &[(Opcode, Option<u8>, Vec<u8>)]) -> Option<u8> {
    match out {
        [(Opcode::Acknowledge, Some(s), _)] if *s != syndrome::ACK_CREDITS_INVALID => Some(*s),
        _ => None,
    }
}

#[test]
fn rdma_outside_a_region_or_with_a_wrong_key_is_nakked_and_memory_is_untouched() {
    type Case = (&'static str, fn(&Rig) -> Vec<Vec<u8>>, u8);
    let cases: Vec<Case> = vec![
        (
            "write, wrong R_Key",
            |r| {
                let reth = RethRepr {
                    rkey: r.regions[0].1 ^ 0x5A5A,
                    ..r.reth(0, 0, 8)
                };
                vec![r.rdma().write_only(0, true, reth, &[0xAA; 8]).unwrap()]
            },
            syndrome::NAK_REMOTE_ACCESS,
        ),
        (
            "write, region 1's key at region 2's address",
            |r| {
                let reth = RethRepr {
                    virtual_addr: r.regions[1].0,
                    ..r.reth(0, 0, 8)
                };
                vec![r.rdma().write_only(0, true, reth, &[0xAA; 8]).unwrap()]
            },
            syndrome::NAK_REMOTE_ACCESS,
        ),
        (
            "write across the region's end",
            |r| {
                vec![r
                    .rdma()
                    .write_only(0, true, r.reth(0, REGION - 4, 8), &[0xAA; 8])
                    .unwrap()]
            },
            syndrome::NAK_REMOTE_ACCESS,
        ),
        (
            "write below the region",
            |r| {
                vec![r
                    .rdma()
                    .write_only(0, true, r.reth(0, u64::MAX - 3, 8), &[0xAA; 8])
                    .unwrap()]
            },
            syndrome::NAK_REMOTE_ACCESS,
        ),
        (
            "write at the top of the address space",
            |r| {
                let reth = RethRepr {
                    virtual_addr: u64::MAX - 3,
                    ..r.reth(0, 0, 8)
                };
                vec![r.rdma().write_only(0, true, reth, &[0xAA; 8]).unwrap()]
            },
            syndrome::NAK_REMOTE_ACCESS,
        ),
        (
            "multi-packet write whose length crosses the region's end",
            |r| {
                vec![r
                    .rdma()
                    .build(
                        Opcode::RdmaWriteFirst,
                        0,
                        false,
                        Some(r.reth(0, REGION - 1024, 2048)),
                        None,
                        &[0xAA; 1024],
                    )
                    .unwrap()]
            },
            syndrome::NAK_REMOTE_ACCESS,
        ),
        (
            "read, wrong R_Key",
            |r| {
                let reth = RethRepr {
                    rkey: r.regions[1].1.wrapping_add(1),
                    ..r.reth(1, 0, 64)
                };
                vec![r.rdma().read_request(0, reth, &[]).unwrap()]
            },
            syndrome::NAK_REMOTE_ACCESS,
        ),
        (
            "read past the region's end",
            |r| {
                vec![r
                    .rdma()
                    .read_request(0, r.reth(1, REGION - 8, 64), &[])
                    .unwrap()]
            },
            syndrome::NAK_REMOTE_ACCESS,
        ),
    ];
    for (what, frames, code) in cases {
        let mut rig = Rig::new();
        // Known contents (written by the agent, so no PSN is used up), so
        // "untouched" is not just "still zero".
        let fill = (1..=2)
            .map(|region| WriteEntry {
                region,
                offset: 256,
                data: vec![0x80, 1, 2, 3],
            })
            .collect();
        assert_eq!(
            rig.call(Request::WriteBatch(fill)),
            Some(Reply::WriteDone(None)),
            "{what}"
        );
        let before = rig.memory();
        let mut got = None;
        for f in frames(&rig) {
            got = nak(&rig.rdma_in(f));
        }
        assert_eq!(got, Some(code), "{what}: NAK");
        assert!(rig.memory() == before, "{what}: memory changed");
        // No READ returned data.
        assert_eq!(rig.h.device.nic().stats().bytes_read, 0, "{what}");
    }
}

#[test]
fn a_multi_packet_write_longer_than_its_reth_is_nakked_and_writes_nothing_past_it() {
    let mut rig = Rig::new();
    let before = rig.memory();
    // A 2048-byte WRITE (PMTU 1024): FIRST, then the LAST 1024 bytes...
    let first = rig
        .rdma()
        .build(
            Opcode::RdmaWriteFirst,
            0,
            false,
            Some(rig.reth(0, 4096, 2048)),
            None,
            &[0xAA; 1024],
        )
        .unwrap();
    assert_eq!(rig.rdma_in(first), vec![]);
    // ...but a MIDDLE comes instead, as if more than the RETH's length
    // were on its way.
    let middle = rig
        .rdma()
        .build(Opcode::RdmaWriteMiddle, 1, false, None, None, &[0xBB; 1024])
        .unwrap();
    assert_eq!(
        nak(&rig.rdma_in(middle)),
        Some(syndrome::NAK_INVALID_REQUEST)
    );
    let last = rig
        .rdma()
        .build(Opcode::RdmaWriteLast, 2, true, None, None, &[0xCC; 1024])
        .unwrap();
    assert_eq!(
        rig.rdma_in(last),
        vec![],
        "the QP is in error: nothing more is taken"
    );
    let after = rig.memory();
    // Only the bytes inside the RETH's range may differ.
    for (i, (a, b)) in before.iter().zip(&after).enumerate() {
        if !(4096..4096 + 2048).contains(&i) {
            assert_eq!(a, b, "byte {i} outside the WRITE changed");
        }
    }
}

#[test]
fn a_key_from_before_a_crash_no_longer_opens_the_region() {
    let mut rig = Rig::new();
    let old = rig.regions[0];
    let t = rig.at();
    rig.h.restart(t);
    rig.setup();
    assert_eq!(
        rig.regions[0].0, old.0,
        "the region comes back at the same address"
    );
    assert_ne!(rig.regions[0].1, old.1, "with a new R_Key");
    let before = rig.memory();
    let reth = RethRepr {
        virtual_addr: old.0,
        rkey: old.1,
        dma_len: 8,
    };
    let w = rig.rdma().write_only(0, true, reth, &[0xCC; 8]).unwrap();
    assert_eq!(nak(&rig.rdma_in(w)), Some(syndrome::NAK_REMOTE_ACCESS));
    assert!(rig.memory() == before);
}

#[test]
fn requests_for_an_unknown_qp_are_dropped_counted_and_never_answered() {
    let mut rig = Rig::new();
    let before = rig.memory();
    for qpn in [0, 1, rig.qpn + 1, 0xFF_FFFF] {
        let b = RoceFrameBuilder::new(
            Endpoints::new(CP_MAC, CP_IP, rig.cfg.mac, rig.cfg.ip),
            0xC001,
            qpn,
        );
        let w = b
            .write_only(0, true, rig.reth(0, 0, 8), &[0xDD; 8])
            .unwrap();
        assert!(rig.rdma_in(w).is_empty(), "QPN {qpn:#x}");
        let r = b.read_request(0, rig.reth(0, 0, 8), &[]).unwrap();
        assert!(rig.rdma_in(r).is_empty(), "QPN {qpn:#x}");
    }
    let dropped = rig
        .h
        .device
        .nic()
        .stats()
        .drops
        .get(&DropReason::UnknownQp)
        .copied();
    assert_eq!(dropped, Some(8));
    assert!(rig.memory() == before);
}

/// Frames a DRAM server and a TEA switch see: RDMA WRITE and READ on the
/// rig's QP, agent requests, and a client UDP flow.
fn valid_frames(rig: &Rig) -> Vec<Vec<u8>> {
    let ep = Endpoints::new(CP_MAC, CP_IP, rig.cfg.mac, rig.cfg.ip);
    vec![
        rig.rdma()
            .write_only(0, true, rig.reth(0, 64, 8), &[9; 8])
            .unwrap(),
        rig.rdma().read_request(1, rig.reth(1, 64, 8), &[]).unwrap(),
        build_datagram(
            &ep,
            40000,
            AGENT_UDP_PORT,
            &Message::request(99, Request::QpStatus { qp_idx: 7 }),
        )
        .unwrap(),
        build_datagram(
            &ep,
            40000,
            AGENT_UDP_PORT,
            &Message::request(
                98,
                Request::ReadMem {
                    region: 1,
                    offset: 0,
                    len: 16,
                },
            ),
        )
        .unwrap(),
        build_udp_frame(
            &Endpoints::new([2; 6], [10, 0, 0, 9].into(), [4; 6], [192, 0, 2, 1].into()),
            5000,
            53,
            b"dns?",
            true,
        )
        .unwrap(),
    ]
}

/// After hostile input the server still runs its agent (HEARTBEAT) and
/// answers a READ on a fresh QP.
fn still_serves(rig: &mut Rig) -> Result<(), TestCaseError> {
    prop_assert_eq!(rig.call(Request::Heartbeat), Some(Reply::HeartbeatOk));
    let qp = CreateQp {
        qp_idx: 9,
        remote_qpn: SWITCH_QPN + 1,
        remote_mac: CP_MAC,
        remote_ip: CP_IP,
        init_psn: 0,
        pmtu: 1024,
        max_rd_atomic: 16,
    };
    let Some(Reply::QpCreated { qpn, .. }) = rig.call(Request::CreateQp(qp)) else {
        return Err(TestCaseError::fail("no QP after hostile input"));
    };
    let b = RoceFrameBuilder::new(
        Endpoints::new(CP_MAC, CP_IP, rig.cfg.mac, rig.cfg.ip),
        0xC002,
        qpn,
    );
    let out = rig.rdma_in(b.read_request(0, rig.reth(0, 0, 8), &[]).unwrap());
    prop_assert!(
        matches!(out.as_slice(), [(Opcode::RdmaReadResponseOnly, _, p)] if p.len() == 8),
        "{:?}",
        out
    );
    Ok(())
}

/// Every frame the server received is counted by the NIC, the agent or the
/// server itself.
fn counted(rig: &Rig) -> u64 {
    let d = &rig.h.device;
    let agent = d.agent().stats();
    d.nic().stats().rx_frames
        + agent.requests.values().sum::<u64>()
        + agent.retransmitted
        + agent.malformed
        + d.stats().not_for_server
}

// ------------------------------------------------------------------ switch

/// The bounds; once `drained`, also that every frame received has a fate
/// (before that, frames are still in the pipeline). The frames counted.
fn tea_bounds<N: TeaNf>(s: &Switch<TeaSwitch<N>>, drained: bool) -> Result<u64, String> {
    let p = s.program();
    let cache = p.cache_entries(s.objects()).len();
    let stash = p.stash_entries(s.objects()).len();
    if cache > p.config().cache_cap || stash > p.config().stash_cap {
        return Err(format!("cache {cache}, stash {stash}"));
    }
    if s.buffer_used() > s.profile().data_path.buffer_bytes {
        return Err(format!("buffer {}", s.buffer_used()));
    }
    let st = s.stats();
    let rx: u64 = st.ports.iter().map(|p| p.rx_packets).sum();
    if drained && st.fates() - st.bad_port_drops < rx {
        return Err(format!(
            "{rx} frames in, {} fates\n{st:?}\n{:?}",
            st.fates() - st.bad_port_drops,
            p.dp_stats()
        ));
    }
    Ok(rx + st.bad_port_drops)
}

/// Bounds and accounting of a TEA switch built by the catalog; the frames
/// it counted.
fn check_tea(n: &dyn Node, drained: bool) -> Result<u64, String> {
    let any = n.as_any();
    if let Some(s) = any.downcast_ref::<Switch<TeaSwitch<TeaNat>>>() {
        tea_bounds(s, drained)
    } else if let Some(s) = any.downcast_ref::<Switch<TeaSwitch<TeaFirewall>>>() {
        tea_bounds(s, drained)
    } else if let Some(s) = any.downcast_ref::<Switch<TeaSwitch<TeaLb>>>() {
        tea_bounds(s, drained)
    } else if let Some(s) = any.downcast_ref::<Switch<TeaSwitch<TeaVpn>>>() {
        tea_bounds(s, drained)
    } else {
        Err(format!("unexpected node {}", n.kind()))
    }
}

fn each_tea_program(frames: &[(u16, Nanos, Vec<u8>)]) -> Result<(), TestCaseError> {
    let params = Params::parse(["entries=4096"]).unwrap();
    for (name, _) in inca_tea::catalog::PROGRAMS {
        let node = inca_tea::catalog::build(name, &params, &Profile::tofino()).unwrap();
        let mut h = Harness::new(node, 11);
        h.keep_frames = false;
        let mut t = 0;
        for (port, dt, f) in frames {
            t += dt;
            h.send(t, *port, f.clone());
            check_tea(h.device.as_ref(), false)
                .map_err(|e| TestCaseError::fail(format!("{name}: {e}")))?;
        }
        h.advance_to(t + 200_000_000);
        let n = check_tea(h.device.as_ref(), true)
            .map_err(|e| TestCaseError::fail(format!("{name}: {e}")))?;
        prop_assert_eq!(n, frames.len() as u64, "{}: every frame counted", name);
    }
    Ok(())
}

/// A mutation: which base frame, (offset, byte) edits, bytes cut off the end.
type Pick = (usize, Vec<(usize, u8)>, usize);

fn mutate(base: &[Vec<u8>], picks: &[Pick], fix: bool) -> Vec<Vec<u8>> {
    picks
        .iter()
        .map(|(i, edits, cut)| {
            let mut f = base[i % base.len()].clone();
            for &(at, v) in edits {
                let n = f.len();
                f[at % n] = v;
            }
            f.truncate(f.len().saturating_sub(*cut));
            if fix {
                // Checksums recomputed, so the mutation reaches the NIC's
                // rules rather than stopping at the ICRC.
                if f.len() > 14 && Ipv4Packet::new_checked_header(&f[14..]).is_ok() {
                    Ipv4Packet::new_unchecked(&mut f[14..]).fill_checksum();
                }
                let _ = fill_frame_icrc(&mut f);
            }
            f
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    #[test]
    fn dram_server_random_bytes_are_counted_change_nothing_and_it_keeps_serving(
        frames in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..300), 1..24)
    ) {
        let mut rig = Rig::new();
        let before = rig.memory();
        let counted_before = counted(&rig);
        for f in &frames {
            let t = rig.at();
            rig.h.send(t, 0, f.clone());
        }
        prop_assert_eq!(counted(&rig) - counted_before, frames.len() as u64);
        prop_assert!(rig.memory() == before, "garbage changed memory");
        still_serves(&mut rig)?;
    }

    #[test]
    fn dram_server_mutated_frames_with_good_checksums_keep_it_serving(
        picks in proptest::collection::vec(
            (0usize..5, proptest::collection::vec((any::<usize>(), any::<u8>()), 1..4), 0usize..8), 1..24),
        fix in any::<bool>()
    ) {
        let mut rig = Rig::new();
        let frames = mutate(&valid_frames(&rig), &picks, fix);
        let counted_before = counted(&rig);
        for f in &frames {
            let t = rig.at();
            rig.h.send(t, 0, f.clone());
        }
        prop_assert_eq!(counted(&rig) - counted_before, frames.len() as u64);
        let mem = rig.h.device.nic().memory();
        prop_assert!(mem.resident_bytes() <= mem.used() + 4096);
        still_serves(&mut rig)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(8))]

    #[test]
    fn switch_random_bytes_on_any_port(
        frames in proptest::collection::vec(
            (0u16..80, 0u64..5_000_000, proptest::collection::vec(any::<u8>(), 0..300)), 1..12)
    ) {
        each_tea_program(&frames)?;
    }

    #[test]
    fn switch_mutated_frames(
        picks in proptest::collection::vec(
            (0usize..5, proptest::collection::vec((any::<usize>(), any::<u8>()), 0..4), 0usize..8), 1..12),
        ports in proptest::collection::vec(0u16..4, 12)
    ) {
        let rig = Rig::new();
        let frames: Vec<_> = mutate(&valid_frames(&rig), &picks, true)
            .into_iter()
            .enumerate()
            .map(|(i, f)| (ports[i % ports.len()], 10_000, f))
            .collect();
        each_tea_program(&frames)?;
    }
}
