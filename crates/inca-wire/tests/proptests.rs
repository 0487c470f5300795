//! Property tests: every header round-trips through emit/parse, and no view,
//! repr parser (RedPlane's and CLIP's included), ICRC helper or capture
//! reader (pcap and pcapng, whatever follows the magic) panics on arbitrary
//! bytes.

use std::net::Ipv4Addr;

use inca_wire::*;
use proptest::prelude::*;

fn ip() -> impl Strategy<Value = Ipv4Addr> {
    any::<[u8; 4]>().prop_map(Ipv4Addr::from)
}

fn vlan() -> impl Strategy<Value = Option<VlanTag>> {
    proptest::option::of(
        (0u8..8, any::<bool>(), 0u16..4096).prop_map(|(pcp, dei, vid)| VlanTag { pcp, dei, vid }),
    )
}

fn opcode() -> impl Strategy<Value = Opcode> {
    proptest::sample::select(Opcode::ALL.to_vec())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn ethernet_roundtrip(dst in any::<[u8; 6]>(), src in any::<[u8; 6]>(), vlan in vlan(),
                          et in any::<u16>().prop_filter("not a TPID", |e| *e != ethertype_vlan()),
                          payload in proptest::collection::vec(any::<u8>(), 0..64)) {
        let r = EthernetRepr { dst, src, vlan, ethertype: et };
        let mut buf = vec![0; r.buffer_len() + payload.len()];
        r.emit(&mut buf).unwrap();
        let hl = r.buffer_len();
        buf[hl..].copy_from_slice(&payload);
        let f = EthernetFrame::new_checked(&buf[..]).unwrap();
        prop_assert_eq!(EthernetRepr::parse(&f).unwrap(), r);
        prop_assert_eq!(f.payload(), &payload[..]);
        prop_assert_eq!(ethernet::payload_offset(&buf).unwrap(), hl);
    }

    #[test]
    fn ipv4_roundtrip(src in ip(), dst in ip(), protocol in any::<u8>(), ttl in any::<u8>(), tos in any::<u8>(),
                      ident in any::<u16>(), dont_frag in any::<bool>(), more_frags in any::<bool>(),
                      frag_offset in 0u16..0x2000, payload in proptest::collection::vec(any::<u8>(), 0..64),
                      eth_pad in 0usize..8) {
        let r = Ipv4Repr { src, dst, protocol, payload_len: payload.len(), ttl, tos, ident, dont_frag, more_frags, frag_offset };
        let mut buf = vec![0; r.buffer_len() + payload.len() + eth_pad];
        r.emit(&mut buf).unwrap();
        buf[20..20 + payload.len()].copy_from_slice(&payload);
        let p = Ipv4Packet::new_checked(&buf[..]).unwrap();
        prop_assert!(p.verify_checksum());
        prop_assert_eq!(Ipv4Repr::parse(&p).unwrap(), r);
        prop_assert_eq!(p.payload(), &payload[..]);
    }

    #[test]
    fn ipv4_options_are_skipped(opt_words in 1usize..=10, payload in proptest::collection::vec(any::<u8>(), 0..32)) {
        let hl = 20 + 4 * opt_words;
        let mut buf = vec![0x01u8; hl + payload.len()]; // NOP options
        let r = Ipv4Repr { src: Ipv4Addr::new(1, 2, 3, 4), dst: Ipv4Addr::new(5, 6, 7, 8), protocol: 17,
            payload_len: payload.len(), ttl: 9, tos: 0, ident: 1, dont_frag: false, more_frags: false, frag_offset: 0 };
        r.emit(&mut buf).unwrap();
        let mut p = Ipv4Packet::new_unchecked(&mut buf[..]);
        p.set_header_len(hl).unwrap();
        p.set_total_len((hl + payload.len()) as u16);
        p.fill_checksum();
        buf[hl..].copy_from_slice(&payload);
        let p = Ipv4Packet::new_checked(&buf[..]).unwrap();
        prop_assert_eq!(p.header_len(), hl);
        prop_assert_eq!(p.options().len(), hl - 20);
        prop_assert_eq!(p.payload(), &payload[..]);
        prop_assert_eq!(Ipv4Repr::parse(&p).unwrap().payload_len, payload.len());
    }

    #[test]
    fn udp_roundtrip(src in ip(), dst in ip(), sp in any::<u16>(), dp in any::<u16>(), with_ck in any::<bool>(),
                     payload in proptest::collection::vec(any::<u8>(), 0..128)) {
        let r = UdpRepr { src_port: sp, dst_port: dp };
        let mut buf = vec![0; r.buffer_len(payload.len())];
        r.emit(&mut buf, &payload, src, dst, with_ck).unwrap();
        let d = UdpDatagram::new_checked(&buf[..]).unwrap();
        prop_assert_eq!(d.checksum() != 0, with_ck);
        prop_assert!(d.verify_checksum(src, dst));
        prop_assert_eq!(UdpRepr::parse(&d, src, dst).unwrap(), r);
        prop_assert_eq!(d.payload(), &payload[..]);
        if with_ck && !payload.is_empty() {
            let mut bad = buf.clone();
            bad[8] ^= 0x10;
            let d = UdpDatagram::new_checked(&bad[..]).unwrap();
            prop_assert_eq!(UdpRepr::parse(&d, src, dst), Err(WireError::BadChecksum));
        }
    }

    #[test]
    fn tcp_roundtrip(src in ip(), dst in ip(), sp in any::<u16>(), dp in any::<u16>(), seq in any::<u32>(),
                     ack in any::<u32>(), flags in any::<u8>(), window in any::<u16>(), urgent in any::<u16>(),
                     opt_words in 0usize..=10, opt_seed in any::<u8>(),
                     payload in proptest::collection::vec(any::<u8>(), 0..128)) {
        let options: Vec<u8> = (0..opt_words * 4).map(|i| opt_seed.wrapping_add(i as u8)).collect();
        let r = TcpRepr { src_port: sp, dst_port: dp, seq, ack, flags: TcpFlags(flags), window, urgent,
                          options: &options, payload: &payload };
        let mut buf = vec![0; r.buffer_len()];
        r.emit(&mut buf, src, dst).unwrap();
        let s = TcpSegment::new_checked(&buf[..]).unwrap();
        prop_assert!(s.verify_checksum(src, dst));
        prop_assert_eq!(TcpRepr::parse(&s, src, dst).unwrap(), r);
        prop_assert_eq!(s.flags().contains(TcpFlags::SYN), flags & 0x02 != 0);
    }

    #[test]
    fn bth_reth_aeth_roundtrip(op in opcode(), se in any::<bool>(), m in any::<bool>(), pad in 0u8..4, tver in 0u8..16,
                               pkey in any::<u16>(), resv8a in any::<u8>(), qp in 0u32..1 << 24, a in any::<bool>(),
                               psn in 0u32..1 << 24, va in any::<u64>(), rkey in any::<u32>(), len in any::<u32>(),
                               syn in any::<u8>(), msn in 0u32..1 << 24) {
        let b = BthRepr { opcode: op, solicited: se, migreq: m, pad_count: pad, tver, pkey, resv8a, dest_qp: qp, ack_req: a, psn };
        let mut buf = [0u8; 12];
        b.emit(&mut buf).unwrap();
        prop_assert_eq!(BthRepr::parse(&Bth::new_checked(&buf[..]).unwrap()).unwrap(), b);
        let r = RethRepr { virtual_addr: va, rkey, dma_len: len };
        let mut buf = [0u8; 16];
        r.emit(&mut buf).unwrap();
        prop_assert_eq!(RethRepr::parse(&Reth::new_checked(&buf[..]).unwrap()).unwrap(), r);
        let ae = AethRepr { syndrome: syn, msn };
        let mut buf = [0u8; 4];
        ae.emit(&mut buf).unwrap();
        prop_assert_eq!(AethRepr::parse(&Aeth::new_checked(&buf[..]).unwrap()).unwrap(), ae);
    }

    #[test]
    fn roce_frame_roundtrip(op in opcode(), qp in 0u32..1 << 24, psn in 0u32..1 << 24, a in any::<bool>(),
                            sport in any::<u16>(), udp_ck in any::<bool>(), vlan in vlan(),
                            va in any::<u64>(), rkey in any::<u32>(), len in any::<u32>(),
                            syn in any::<u8>(), msn in 0u32..1 << 24, tos in any::<u8>(), ttl in any::<u8>(),
                            payload in proptest::collection::vec(any::<u8>(), 0..80)) {
        let mut ep = Endpoints::new([2, 0, 0, 0, 0, 1], Ipv4Addr::new(10, 0, 0, 1), [2, 0, 0, 0, 0, 2], Ipv4Addr::new(10, 0, 0, 2));
        ep.vlan = vlan;
        ep.tos = tos;
        ep.ttl = ttl;
        let b = RoceFrameBuilder::new(ep, sport, qp).with_udp_checksum(udp_ck);
        let reth = (op.ext_header() == ExtHeader::Reth).then_some(RethRepr { virtual_addr: va, rkey, dma_len: len });
        let aeth = (op.ext_header() == ExtHeader::Aeth).then_some(AethRepr { syndrome: syn, msn });
        let f = b.build(op, psn, a, reth, aeth, &payload).unwrap();
        prop_assert!(verify_frame_icrc(&f).is_ok());
        let eth = EthernetFrame::new_checked(&f[..]).unwrap();
        prop_assert_eq!(eth.vlan(), vlan);
        let ip = Ipv4Packet::new_checked(eth.payload()).unwrap();
        prop_assert!(Ipv4Repr::parse(&ip).is_ok());
        let udp = UdpDatagram::new_checked(ip.payload()).unwrap();
        prop_assert!(UdpRepr::parse(&udp, ip.src_addr(), ip.dst_addr()).is_ok());
        prop_assert_eq!(udp.dst_port(), ROCEV2_UDP_PORT);
        let p = RocePacket::new_checked(udp.payload()).unwrap();
        let r = RoceRepr::parse(&p).unwrap();
        prop_assert_eq!(r.bth.opcode, op);
        prop_assert_eq!(r.bth.dest_qp, qp);
        prop_assert_eq!(r.bth.psn, psn);
        prop_assert_eq!(r.bth.ack_req, a);
        prop_assert_eq!(r.reth, reth);
        prop_assert_eq!(r.aeth, aeth);
        prop_assert_eq!(r.payload, &payload[..]);
        prop_assert_eq!((r.payload.len() + usize::from(r.bth.pad_count)) % 4, 0);
        prop_assert_eq!(r.icrc, compute_frame_icrc(&f).unwrap());
    }

    #[test]
    fn pcap_roundtrip(frames in proptest::collection::vec((0u64..(u64::from(u32::MAX) + 1) * 1_000_000_000,
                                                           proptest::collection::vec(any::<u8>(), 0..100)), 0..8)) {
        let mut w = PcapWriter::new(Vec::new()).unwrap();
        for (ts, f) in &frames {
            w.write(*ts, f).unwrap();
        }
        let bytes = w.finish().unwrap();
        prop_assert_eq!(read_capture_bytes(&bytes).unwrap(), frames);
        let mut w = PcapWriter::new(Vec::new()).unwrap();
        prop_assert!(matches!(w.write(u64::MAX, &[]), Err(PcapError::TimestampOutOfRange(_))));
    }
}

fn ethertype_vlan() -> u16 {
    ethernet::ethertype::VLAN
}

// ------------------------------------------------------------ no panics

fn poke_all(b: &[u8]) {
    if let Ok(f) = EthernetFrame::new_checked(b) {
        let _ = (f.dst(), f.src(), f.vlan(), f.ethertype(), f.payload().len());
        let _ = EthernetRepr::parse(&f);
    }
    let _ = ethernet::payload_offset(b);
    if let Ok(p) = Ipv4Packet::new_checked(b) {
        let _ = (
            p.version(),
            p.dscp(),
            p.ecn(),
            p.total_len(),
            p.ident(),
            p.dont_frag(),
            p.more_frags(),
        );
        let _ = (
            p.frag_offset(),
            p.ttl(),
            p.protocol(),
            p.src_addr(),
            p.dst_addr(),
            p.options(),
            p.payload(),
        );
        let _ = (
            p.verify_checksum(),
            p.compute_checksum(),
            Ipv4Repr::parse(&p),
        );
    }
    if let Ok(p) = Ipv4Packet::new_checked_header(b) {
        let _ = (
            p.total_len(),
            p.options(),
            p.payload(),
            p.verify_checksum(),
            Ipv4Repr::parse(&p),
        );
    }
    let (a, c) = (Ipv4Addr::new(1, 2, 3, 4), Ipv4Addr::new(4, 3, 2, 1));
    if let Ok(d) = UdpDatagram::new_checked(b) {
        let _ = (
            d.src_port(),
            d.dst_port(),
            d.len(),
            d.payload(),
            d.verify_checksum(a, c),
            UdpRepr::parse(&d, a, c),
        );
    }
    if let Ok(s) = TcpSegment::new_checked(b) {
        let _ = (
            s.seq(),
            s.ack(),
            s.flags(),
            s.ns(),
            s.window(),
            s.urgent(),
            s.options(),
            s.payload(),
        );
        let _ = TcpRepr::parse(&s, a, c);
    }
    if let Ok(h) = Bth::new_checked(b) {
        let _ = (
            h.opcode(),
            h.solicited(),
            h.migreq(),
            h.pad_count(),
            h.tver(),
            h.pkey(),
            h.fecn(),
            h.becn(),
        );
        let _ = (
            h.dest_qp(),
            h.ack_req(),
            h.resv7(),
            h.psn(),
            BthRepr::parse(&h),
        );
    }
    if let Ok(r) = Reth::new_checked(b) {
        let _ = (r.virtual_addr(), r.rkey(), r.dma_len());
    }
    if let Ok(x) = Aeth::new_checked(b) {
        let _ = (x.syndrome(), x.msn(), roce::syndrome_kind(x.syndrome()));
    }
    if let Ok(p) = RocePacket::new_checked(b) {
        let _ = (
            p.opcode(),
            p.reth().map(|r| r.rkey()),
            p.aeth().map(|x| x.msn()),
            p.payload(),
            p.pad(),
            p.icrc(),
        );
        let _ = RoceRepr::parse(&p);
    }
    let _ = (
        compute_icrc(b),
        verify_icrc(b),
        compute_frame_icrc(b),
        verify_frame_icrc(b),
    );
    let mut m = b.to_vec();
    let _ = fill_frame_icrc(&mut m);
    let _ = fill_icrc(&mut m);
    let _ = read_capture_bytes(b);
    poke_redplane(b);
}

/// Every RedPlane view and repr, at the K and V of each app and beyond.
fn poke_redplane(b: &[u8]) {
    use inca_wire::redplane as rp;
    if let Ok(i) = rp::parse_udp_frame(b) {
        assert!(i.payload.len() <= b.len());
    }
    for (k, v) in [(0, 0), (4, 4), (6, 6), (4, 12), (13, 4), (64, 64)] {
        if let Ok(r) = rp::Request::new_checked(b, k, v) {
            let _ = (r.type_byte(), r.seq(), r.key(), r.value(), r.piggyback());
            if let Ok(repr) = rp::RequestRepr::parse(&r) {
                assert_eq!(repr.to_vec(), b, "a request re-emits its own bytes");
            }
        }
        if let Ok(a) = rp::Ack::new_checked(b, k, v) {
            let _ = (a.ack_type(), a.seq(), a.key(), a.value(), a.piggyback());
            let _ = rp::AckRepr::parse(&a).to_vec();
        }
        if let Ok(u) = rp::ChainUpdate::new_checked(b, k, v) {
            let _ = rp::ChainUpdateRepr::parse(&u).to_vec();
        }
        if let Ok(s) = rp::ChainSnap::new_checked(b, k, v) {
            let _ = rp::ChainSnapRepr::parse(&s).to_vec();
        }
    }
    if let Ok(a) = rp::ChainAck::new_checked(b) {
        let _ = a.update_id();
    }
    if let Ok(h) = rp::Heartbeat::new_checked(b) {
        let _ = rp::HeartbeatRepr::parse(&h).to_vec();
    }
    if let Ok(h) = rp::HeadAnnounce::new_checked(b) {
        let _ = rp::HeadAnnounceRepr::parse(&h).to_vec();
    }
}

/// `b` with its first four bytes replaced by `magic`, so the reader that
/// magic selects runs on the rest, whatever the random bytes were.
fn with_magic(b: &[u8], magic: u32) -> Vec<u8> {
    let mut m = magic.to_be_bytes().to_vec();
    m.extend_from_slice(b.get(4..).unwrap_or(&[]));
    m
}

/// A valid RoCE frame to mutate, so the fuzzer reaches deep paths.
fn seed_frame() -> Vec<u8> {
    let ep = Endpoints::new(
        [2, 0, 0, 0, 0, 1],
        Ipv4Addr::new(10, 0, 0, 1),
        [2, 0, 0, 0, 0, 2],
        Ipv4Addr::new(10, 0, 0, 2),
    );
    RoceFrameBuilder::new(ep, 1, 2)
        .write_only(
            3,
            true,
            RethRepr {
                virtual_addr: 4,
                rkey: 5,
                dma_len: 6,
            },
            &[7; 6],
        )
        .unwrap()
}

fn seed_pcap(ng: bool) -> Vec<u8> {
    if ng {
        use pcap_file::pcapng::blocks::enhanced_packet::EnhancedPacketBlock;
        use pcap_file::pcapng::blocks::interface_description::InterfaceDescriptionBlock;
        let mut w = pcap_file::pcapng::PcapNgWriter::new(Vec::new()).unwrap();
        w.write_pcapng_block(InterfaceDescriptionBlock::new(
            pcap_file::DataLink::ETHERNET,
            0,
        ))
        .unwrap();
        let f = seed_frame();
        w.write_pcapng_block(EnhancedPacketBlock {
            interface_id: 0,
            timestamp: std::time::Duration::from_micros(5),
            original_len: f.len() as u32,
            data: f.into(),
            options: vec![],
        })
        .unwrap();
        w.into_inner()
    } else {
        let mut w = PcapWriter::new(Vec::new()).unwrap();
        w.write(12345, &seed_frame()).unwrap();
        w.finish().unwrap()
    }
}

fn mutate(mut base: Vec<u8>, edits: &[(usize, u8)], cut: usize) -> Vec<u8> {
    for &(i, v) in edits {
        if !base.is_empty() {
            let n = base.len();
            base[i % n] = v;
        }
    }
    base.truncate(base.len().saturating_sub(cut % 8));
    base
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2048, ..ProptestConfig::default() })]

    #[test]
    fn random_bytes_never_panic(b in proptest::collection::vec(any::<u8>(), 0..200)) {
        poke_all(&b);
        // Also at every layer offset of the same bytes.
        for off in [8, 12, 14, 18, 34, 42] {
            if b.len() > off {
                poke_all(&b[off..]);
            }
        }
    }

    #[test]
    fn mutated_frames_never_panic(edits in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..6), cut in any::<usize>()) {
        let f = mutate(seed_frame(), &edits, cut);
        poke_all(&f);
        for off in [14, 34, 42] {
            if f.len() > off {
                poke_all(&f[off..]);
            }
        }
    }

    #[test]
    fn random_bytes_behind_each_capture_magic_never_panic(b in proptest::collection::vec(any::<u8>(), 0..300)) {
        for magic in [0xA1B2_C3D4, 0xD4C3_B2A1, 0xA1B2_3C4D, 0x4D3C_B2A1, 0x0A0D_0D0A] {
            let _ = read_capture_bytes(&with_magic(&b, magic));
        }
    }

    #[test]
    fn mutated_captures_never_panic(ng in any::<bool>(), edits in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..6),
                                    cut in any::<usize>()) {
        let f = mutate(seed_pcap(ng), &edits, cut);
        let _ = read_capture_bytes(&f);
    }
}

mod exoplane_shim {
    use inca_wire::exoplane::{merge, shim, MergeOp, MergeRepr, ShimRepr, ShimType};
    use proptest::prelude::*;

    fn shim_repr() -> impl Strategy<Value = ShimRepr> {
        (
            proptest::sample::select(ShimType::ALL.to_vec()),
            any::<bool>(),
            any::<u8>(),
            any::<u8>(),
            any::<u16>(),
            any::<u16>(),
            any::<u16>(),
        )
            .prop_map(
                |(shim_type, failover, app_id, ldev, in_port, out_port, next_type)| ShimRepr {
                    shim_type,
                    failover,
                    app_id,
                    ldev,
                    in_port,
                    out_port,
                    next_type,
                },
            )
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

        #[test]
        fn shim_roundtrip(r in shim_repr()) {
            let mut b = [0u8; 12];
            r.emit(&mut b).unwrap();
            prop_assert_eq!(ShimRepr::parse(&b).unwrap(), r);
        }

        #[test]
        fn push_pop_inverse(r in shim_repr(), tagged in any::<bool>(),
                            et in any::<u16>().prop_filter("not VLAN or shim",
                                |e| *e != 0x8100 && *e != inca_wire::exoplane::ETHERTYPE),
                            payload in proptest::collection::vec(any::<u8>(), 0..64)) {
            let mut f = vec![2u8; 12];
            if tagged { f.extend_from_slice(&[0x81, 0x00, 0x00, 0x2A]); }
            f.extend_from_slice(&et.to_be_bytes());
            f.extend_from_slice(&payload);
            let orig = f.clone();
            shim::push(&mut f, r).unwrap();
            let popped = shim::pop(&mut f).unwrap();
            prop_assert_eq!(popped, ShimRepr { next_type: et, ..r });
            prop_assert_eq!(f, orig);
        }

        #[test]
        fn merge_roundtrip(obj_id in any::<u16>(), op in proptest::sample::select(MergeOp::ALL.to_vec()),
                           width in proptest::sample::select(merge::WIDTHS.to_vec()),
                           slot in any::<u32>(), round in any::<u64>(), delta in any::<u64>()) {
            let mask = if width == 64 { u64::MAX } else { (1u64 << width) - 1 };
            let r = MergeRepr { obj_id, op, width, slot, round, delta: delta & mask };
            let mut b = [0u8; 24];
            r.emit(&mut b).unwrap();
            prop_assert_eq!(MergeRepr::parse(&b).unwrap(), r);
            // The result stays within the width, and ⊕ is commutative.
            let v = op.apply(width, delta, round);
            prop_assert_eq!(v & !mask, 0);
            prop_assert_eq!(v, op.apply(width, round, delta));
        }

        #[test]
        fn exoplane_parsers_never_panic(data in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = ShimRepr::parse(&data);
            let _ = MergeRepr::parse(&data);
            let _ = shim::shim_of(&data);
            let mut f = data.clone();
            if shim::pop(&mut f).is_err() { prop_assert_eq!(&f, &data); }
            let mut g = data.clone();
            let r = ShimRepr { shim_type: ShimType::ToDev, failover: false, app_id: 1,
                               ldev: 0, in_port: 0, out_port: 0, next_type: 0 };
            match shim::push(&mut g, r) {
                Ok(()) => prop_assert_eq!(g.len(), data.len() + 12),
                Err(_) => prop_assert_eq!(&g, &data),
            }
        }
    }
}

mod swish_ewo {
    use inca_wire::swish::ewo::{Body, BodyRepr, MergeKind, MAX_VALS};
    use proptest::prelude::*;

    fn kind() -> impl Strategy<Value = MergeKind> {
        proptest::sample::select(vec![
            MergeKind::Lww,
            MergeKind::Gcnt,
            MergeKind::Pncnt,
            MergeKind::Gset,
            MergeKind::Max,
        ])
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

        #[test]
        fn ewo_body_roundtrip(var_id: u16, kind in kind(), index: u32, slot_base: u16,
                              values in proptest::collection::vec(any::<u32>(), 0..=MAX_VALS)) {
            let r = BodyRepr { var_id, kind, index, slot_base, values };
            let bytes = r.to_vec().unwrap();
            prop_assert_eq!(bytes.len(), r.buffer_len());
            prop_assert_eq!(BodyRepr::parse(&bytes).unwrap(), r);
        }

        #[test]
        fn ewo_body_never_panics(b in proptest::collection::vec(any::<u8>(), 0..100)) {
            if let Ok(v) = Body::new_checked(&b[..]) {
                prop_assert!(v.len() <= b.len());
                let r = BodyRepr::parse(&b).unwrap();
                prop_assert_eq!(BodyRepr::parse(&r.to_vec().unwrap()).unwrap(), r);
            } else {
                prop_assert!(BodyRepr::parse(&b).is_err());
            }
        }
    }
}

mod clip {
    use inca_wire::clip::ctl::{CtlBody, CtlMessage, FlowInfo, MAX_DATAGRAM};
    use inca_wire::clip::shim::{self, ClipRepr, Kind, Sel, Status};
    use inca_wire::clip::{PinOverflow, ETHERTYPE};
    use proptest::prelude::*;

    fn repr() -> impl Strategy<Value = ClipRepr> {
        (
            (
                proptest::sample::select(Kind::ALL.to_vec()),
                any::<u8>(),
                any::<u16>(),
                any::<u8>(),
                any::<u8>(),
                any::<u16>(),
            ),
            (
                any::<u8>(),
                proptest::sample::select(Sel::ALL.to_vec()),
                proptest::sample::select(Status::ALL.to_vec()),
                any::<u16>(),
                any::<u32>(),
            ),
        )
            .prop_map(
                |(
                    (kind, flags, load_type, app_id, hdr_words, parsed_len),
                    (server_id, sel, status, grp_ver, cms_est),
                )| ClipRepr {
                    kind,
                    flags: flags & shim::FLAGS_MASK,
                    load_type,
                    app_id,
                    hdr_words,
                    parsed_len,
                    server_id,
                    sel,
                    status,
                    grp_ver,
                    cms_est,
                },
            )
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

        #[test]
        fn clip_header_roundtrip(r in repr()) {
            let mut b = [0u8; 16];
            r.emit(&mut b).unwrap();
            prop_assert_eq!(b, r.to_bytes());
            prop_assert_eq!(ClipRepr::parse(&b).unwrap(), r);
        }

        #[test]
        fn clip_push_pop_inverse(r in repr(), tagged in any::<bool>(),
                                 et in any::<u16>().prop_filter("not VLAN or CLIP",
                                     |e| *e != 0x8100 && *e != ETHERTYPE),
                                 words in 0usize..=20,
                                 payload in proptest::collection::vec(any::<u8>(), 0..64)) {
            let mut f = vec![2u8; 12];
            if tagged { f.extend_from_slice(&[0x81, 0x00, 0x00, 0x2A]); }
            f.extend_from_slice(&et.to_be_bytes());
            f.extend_from_slice(&payload);
            let orig = f.clone();
            let params: Vec<u8> = (0..words * 4).map(|i| i as u8).collect();
            shim::push(&mut f, r, &params).unwrap();
            prop_assert_eq!(f.len(), orig.len() + 16 + params.len());
            prop_assert_eq!(&f[shim::params_range(&f).unwrap()], &params[..]);
            let (popped, p) = shim::pop(&mut f).unwrap();
            prop_assert_eq!(popped, ClipRepr { load_type: et, hdr_words: (4 + words) as u8, ..r });
            prop_assert_eq!(p, params);
            prop_assert_eq!(f, orig);
        }

        #[test]
        fn pack_unpack_roundtrip(fields in proptest::collection::vec((any::<u64>(), 0u8..=64), 0..12)) {
            let fields: Vec<(u64, u8)> = fields
                .into_iter()
                .map(|(v, w)| (if w == 64 { v } else { v & ((1u64 << w) - 1) }, w))
                .collect();
            let bits: usize = fields.iter().map(|f| usize::from(f.1)).sum();
            let mut out = vec![0xFFu8; bits.div_ceil(8)];
            shim::pack(&fields, &mut out).unwrap();
            let widths: Vec<u8> = fields.iter().map(|f| f.1).collect();
            let values: Vec<u64> = fields.iter().map(|f| f.0).collect();
            prop_assert_eq!(shim::unpack(&out, &widths).unwrap(), values);
            if !bits.is_multiple_of(8) {
                prop_assert_eq!(out[out.len() - 1] & (0xFF >> (bits % 8)), 0, "padding is zero");
            }
        }

        #[test]
        fn clip_ctl_split_and_roundtrip(n in 0usize..200, ts in any::<u64>()) {
            let items: Vec<FlowInfo> = (0..n)
                .map(|i| FlowInfo { flow: [i as u8; 16], first_seen: ts, last_seen: ts ^ i as u64,
                                    offloaded: i % 2 == 0 })
                .collect();
            let parts = inca_wire::clip::ctl::split(CtlBody::FlowQueryReply { items: items.clone() }, MAX_DATAGRAM);
            let mut back = Vec::new();
            for (i, p) in parts.iter().enumerate() {
                let m = CtlMessage { txn_id: i as u32, sender: 1, reply: true, more: i + 1 < parts.len(),
                                     body: p.clone() };
                let b = m.encode();
                prop_assert!(b.len() <= MAX_DATAGRAM);
                prop_assert_eq!(CtlMessage::decode(&b).unwrap(), m);
                if let CtlBody::FlowQueryReply { items } = p { back.extend_from_slice(items); }
            }
            prop_assert_eq!(back, items);
        }

        #[test]
        fn clip_parsers_never_panic(data in proptest::collection::vec(any::<u8>(), 0..80)) {
            let _ = ClipRepr::parse(&data);
            let _ = shim::shim_of(&data);
            let _ = shim::params_range(&data);
            if let Ok(m) = CtlMessage::decode(&data) { prop_assert_eq!(m.encode(), data.clone()); }
            if let Ok(d) = PinOverflow::parse(&data) { prop_assert_eq!(&d.to_bytes()[..], &data[..20]); }
            let mut f = data.clone();
            if shim::pop(&mut f).is_err() { prop_assert_eq!(&f, &data); }
            let mut g = data.clone();
            let r = ClipRepr::parse(&[0x11, 0, 0, 0, 1, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]).unwrap();
            match shim::push(&mut g, r, &[1, 2, 3, 4]) {
                Ok(()) => prop_assert_eq!(g.len(), data.len() + 20),
                Err(_) => prop_assert_eq!(&g, &data),
            }
        }
    }
}
