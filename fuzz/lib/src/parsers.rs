//! One fuzz target per inca-wire parser (and the TEA agent protocol, the
//! other byte format a device reads from the network).
//!
//! Each target reads every accessor of every view that accepts the bytes,
//! and checks what the view promises: lengths inside the buffer, header plus
//! payload adding up, and that a parsed repr survives emit-then-parse
//! unchanged (so a parser and its builder agree on every input the parser
//! takes, not just the ones the tests build). The first bytes of some inputs
//! choose a parameter (K and V for RedPlane, addresses for checksums) so the
//! fuzzer can reach every shape.

use std::net::Ipv4Addr;

use inca_wire::redplane as rp;
use inca_wire::*;

/// Addresses for the pseudo-header checksums, from the input when it is
/// long enough (so a fuzzer can make a checksum come out right).
fn addrs(data: &[u8]) -> (Ipv4Addr, Ipv4Addr, &[u8]) {
    if data.len() >= 8 {
        let a = Ipv4Addr::new(data[0], data[1], data[2], data[3]);
        let b = Ipv4Addr::new(data[4], data[5], data[6], data[7]);
        (a, b, &data[8..])
    } else {
        (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2), data)
    }
}

/// Ethernet II and 802.1Q.
pub fn ethernet(data: &[u8]) {
    let off = ethernet::payload_offset(data);
    let Ok(f) = EthernetFrame::new_checked(data) else {
        assert!(
            off.is_err(),
            "payload_offset accepts what new_checked refuses"
        );
        return;
    };
    assert_eq!(off.ok(), Some(f.header_len()));
    let _ = (f.dst(), f.src(), f.outer_ethertype(), f.is_tagged());
    assert_eq!(f.vlan().is_some(), f.is_tagged());
    assert_eq!(f.header_len() + f.payload().len(), data.len());
    let Ok(r) = EthernetRepr::parse(&f) else {
        return;
    };
    assert_eq!(r.buffer_len(), f.header_len());
    let mut buf = vec![0; r.buffer_len()];
    r.emit(&mut buf).expect("a parsed Ethernet header emits");
    let again = EthernetFrame::new_checked(&buf[..]).expect("an emitted header parses");
    assert_eq!(EthernetRepr::parse(&again).ok(), Some(r));
    // Setters on a copy stay in bounds.
    let mut m = data.to_vec();
    let mut fm = EthernetFrame::new_unchecked(&mut m[..]);
    fm.set_dst([1; 6]);
    fm.set_src([2; 6]);
    if let Some(tag) = r.vlan {
        let _ = fm.set_vlan(tag);
    }
    let _ = fm.payload_mut().len();
}

/// IPv4, options skipped, header checksum.
pub fn ipv4(data: &[u8]) {
    if let Ok(p) = Ipv4Packet::new_checked(data) {
        let (hl, total) = (p.header_len(), usize::from(p.total_len()));
        assert!(hl >= ipv4::MIN_HEADER_LEN && hl <= total && total <= data.len());
        assert_eq!(p.payload().len(), total - hl);
        assert_eq!(p.options().len(), hl - ipv4::MIN_HEADER_LEN);
        assert_eq!(p.header().len(), hl);
        let _ = (p.version(), p.dscp(), p.ecn(), p.ident(), p.dont_frag());
        let _ = (p.more_frags(), p.frag_offset(), p.ttl(), p.protocol());
        let _ = (p.src_addr(), p.dst_addr(), p.checksum());
        // One's-complement zero has two forms: a header whose checksum
        // computes to 0x0000 also verifies with 0xFFFF stored (RFC 1071).
        let (computed, stored) = (p.compute_checksum(), p.checksum());
        let same = computed == stored || matches!((computed, stored), (0, 0xFFFF) | (0xFFFF, 0));
        assert_eq!(
            p.verify_checksum(),
            same,
            "computed {computed:#06x}, stored {stored:#06x}"
        );
        if let Ok(r) = Ipv4Repr::parse(&p) {
            let mut buf = vec![0; r.buffer_len() + r.payload_len];
            r.emit(&mut buf).expect("a parsed IPv4 header emits");
            let again = Ipv4Packet::new_checked(&buf[..]).expect("an emitted header parses");
            assert!(again.verify_checksum());
            assert_eq!(Ipv4Repr::parse(&again).ok(), Some(r));
        }
        // Rewriting and refilling the checksum gives a valid header.
        let mut m = data.to_vec();
        let mut pm = Ipv4Packet::new_unchecked(&mut m[..]);
        pm.set_ttl(p.ttl().wrapping_sub(1));
        pm.fill_checksum();
        assert!(Ipv4Packet::new_checked(&m[..]).unwrap().verify_checksum());
    }
    if let Ok(p) = Ipv4Packet::new_checked_header(data) {
        assert!(p.header_len() <= data.len());
        assert!(p.header_len() + p.payload().len() <= data.len());
        let _ = (p.total_len(), p.options(), p.verify_checksum());
        let _ = Ipv4Repr::parse(&p);
    }
}

/// UDP with the IPv4 pseudo-header checksum.
pub fn udp(data: &[u8]) {
    let (a, b, data) = addrs(data);
    let Ok(d) = UdpDatagram::new_checked(data) else {
        return;
    };
    let len = usize::from(d.len());
    assert!(len >= udp::HEADER_LEN && len <= data.len());
    assert_eq!(d.payload().len(), len - udp::HEADER_LEN);
    let _ = (d.src_port(), d.dst_port(), d.checksum(), d.is_empty());
    let _ = d.compute_checksum(a, b);
    if let Ok(r) = UdpRepr::parse(&d, a, b) {
        for with_ck in [false, true] {
            let mut buf = vec![0; r.buffer_len(d.payload().len())];
            r.emit(&mut buf, d.payload(), a, b, with_ck)
                .expect("a parsed UDP header emits");
            let again = UdpDatagram::new_checked(&buf[..]).expect("an emitted datagram parses");
            assert_eq!(UdpRepr::parse(&again, a, b).ok(), Some(r));
            assert_eq!(again.payload(), d.payload());
        }
    }
    let mut m = data.to_vec();
    let mut dm = UdpDatagram::new_unchecked(&mut m[..]);
    dm.fill_checksum(a, b);
    assert!(UdpDatagram::new_checked(&m[..])
        .unwrap()
        .verify_checksum(a, b));
}

/// TCP with options and the pseudo-header checksum.
pub fn tcp(data: &[u8]) {
    let (a, b, data) = addrs(data);
    let Ok(s) = TcpSegment::new_checked(data) else {
        return;
    };
    let hl = s.header_len();
    assert!(hl >= tcp::MIN_HEADER_LEN && hl <= data.len());
    assert_eq!(s.options().len(), hl - tcp::MIN_HEADER_LEN);
    assert_eq!(s.payload().len(), data.len() - hl);
    let _ = (
        s.src_port(),
        s.dst_port(),
        s.seq(),
        s.ack(),
        s.ns(),
        s.flags(),
    );
    let _ = (
        s.window(),
        s.checksum(),
        s.urgent(),
        s.compute_checksum(a, b),
    );
    if let Ok(r) = TcpRepr::parse(&s, a, b) {
        let mut buf = vec![0; r.buffer_len()];
        r.emit(&mut buf, a, b).expect("a parsed TCP segment emits");
        let again = TcpSegment::new_checked(&buf[..]).expect("an emitted segment parses");
        assert_eq!(TcpRepr::parse(&again, a, b).ok(), Some(r));
    }
    let mut m = data.to_vec();
    let mut sm = TcpSegment::new_unchecked(&mut m[..]);
    sm.fill_checksum(a, b);
    let _ = sm.options_mut().len() + sm.payload_mut().len();
    assert!(TcpSegment::new_checked(&m[..])
        .unwrap()
        .verify_checksum(a, b));
}

/// RoCEv2: BTH, RETH, AETH on their own and as a whole packet.
pub fn roce(data: &[u8]) {
    if let Ok(h) = Bth::new_checked(data) {
        let _ = (h.opcode_raw(), h.solicited(), h.migreq(), h.pad_count());
        let _ = (h.tver(), h.pkey(), h.resv8a(), h.fecn(), h.becn());
        assert!(h.dest_qp() < 1 << 24 && h.psn() < 1 << 24);
        let _ = (h.ack_req(), h.resv7());
        if let Ok(r) = BthRepr::parse(&h) {
            let mut buf = [0u8; roce::BTH_LEN];
            r.emit(&mut buf).expect("a parsed BTH emits");
            assert_eq!(
                BthRepr::parse(&Bth::new_checked(&buf[..]).unwrap()).ok(),
                Some(r)
            );
        }
    }
    if let Ok(r) = Reth::new_checked(data) {
        let repr = RethRepr::parse(&r).expect("a checked RETH parses");
        let mut buf = [0u8; roce::RETH_LEN];
        repr.emit(&mut buf).unwrap();
        assert_eq!(&buf[..], &data[..roce::RETH_LEN]);
    }
    if let Ok(a) = Aeth::new_checked(data) {
        let _ = roce::syndrome_kind(a.syndrome());
        if let Ok(repr) = AethRepr::parse(&a) {
            let mut buf = [0u8; roce::AETH_LEN];
            repr.emit(&mut buf).unwrap();
            assert_eq!(&buf[..], &data[..roce::AETH_LEN]);
        }
    }
    let Ok(p) = RocePacket::new_checked(data) else {
        return;
    };
    let _ = (p.opcode(), p.ext_header(), p.icrc(), p.pad());
    assert_eq!(p.reth().is_some(), p.ext_header() == ExtHeader::Reth);
    assert_eq!(p.aeth().is_some(), p.ext_header() == ExtHeader::Aeth);
    assert!(p.payload_offset() + p.payload().len() + p.pad().len() + roce::ICRC_LEN == data.len());
    let Ok(r) = RoceRepr::parse(&p) else {
        return;
    };
    assert_eq!(r.buffer_len(), data.len());
    let mut buf = vec![0; r.buffer_len()];
    r.emit(&mut buf).expect("a parsed RoCE packet emits");
    let again = RocePacket::new_checked(&buf[..]).expect("an emitted RoCE packet parses");
    assert_eq!(RoceRepr::parse(&again).ok(), Some(r));
}

/// The RoCEv2 ICRC over an IPv4 packet or a whole frame: filling it makes
/// it verify.
pub fn icrc(data: &[u8]) {
    let _ = (
        compute_icrc(data),
        verify_icrc(data),
        icrc::stored_icrc(data),
    );
    let _ = (compute_frame_icrc(data), verify_frame_icrc(data));
    let mut m = data.to_vec();
    if fill_icrc(&mut m).is_ok() {
        assert!(verify_icrc(&m).is_ok(), "a filled ICRC verifies");
    }
    let mut m = data.to_vec();
    if fill_frame_icrc(&mut m).is_ok() {
        assert!(
            verify_frame_icrc(&m).is_ok(),
            "a filled frame ICRC verifies"
        );
    }
}

/// RedPlane: requests and acks (K and V from the first two bytes), chain
/// messages, heartbeats, announcements, and whole UDP frames.
pub fn redplane(data: &[u8]) {
    let _ = rp::parse_udp_frame(data).map(|i| {
        assert!(i.payload.len() <= data.len());
        (i.src_port, i.dst_port, i.ident)
    });
    if data.len() < 2 {
        return;
    }
    let (k, v, msg) = (
        usize::from(data[0] % 64),
        usize::from(data[1] % 64),
        &data[2..],
    );
    if let Ok(r) = rp::Request::new_checked(msg, k, v) {
        assert_eq!((r.key().len(), r.value().len()), (k, v));
        assert_eq!(r.header_len() + r.piggyback().len(), msg.len());
        let _ = (r.type_byte(), r.seq());
        if let Ok(repr) = rp::RequestRepr::parse(&r) {
            let bytes = repr.to_vec();
            assert_eq!(&bytes[..], msg, "a request emits to the bytes it came from");
        }
    }
    if let Ok(a) = rp::Ack::new_checked(msg, k, v) {
        let _ = (a.ack_type(), a.seq(), a.key(), a.value(), a.header_len());
        assert!(a.header_len() + a.piggyback().len() == msg.len());
        let repr = rp::AckRepr::parse(&a);
        if let Ok(bytes) = repr.to_vec() {
            let again = rp::Ack::new_checked(&bytes[..], k, v).expect("an emitted ack parses");
            assert_eq!(rp::AckRepr::parse(&again), repr);
        }
    }
    if let Ok(u) = rp::ChainUpdate::new_checked(msg, k, v) {
        let repr = rp::ChainUpdateRepr::parse(&u);
        let bytes = repr.to_vec();
        assert_eq!(bytes.len(), rp::chain_update_len(k, v));
        let again = rp::ChainUpdate::new_checked(&bytes[..], k, v).expect("emitted update parses");
        assert_eq!(rp::ChainUpdateRepr::parse(&again), repr);
        let _ = (
            u.seq(),
            u.fence(),
            u.owner(),
            u.lease_ms_remaining(),
            u.update_id(),
        );
    }
    if let Ok(s) = rp::ChainSnap::new_checked(msg, k, v) {
        let repr = rp::ChainSnapRepr::parse(&s);
        let bytes = repr.to_vec();
        assert_eq!(bytes.len(), rp::chain_snap_len(k, v));
        let again = rp::ChainSnap::new_checked(&bytes[..], k, v).expect("emitted snap parses");
        assert_eq!(rp::ChainSnapRepr::parse(&again), repr);
        let _ = (s.epoch(), s.commit(), s.update_id());
    }
    if let Ok(a) = rp::ChainAck::new_checked(msg) {
        assert_eq!(
            rp::chain_ack_bytes(a.update_id())[..],
            msg[..rp::CHAIN_ACK_LEN]
        );
    }
    if let Ok(h) = rp::Heartbeat::new_checked(msg) {
        let repr = rp::HeartbeatRepr::parse(&h);
        let bytes = repr.to_vec();
        assert_eq!(
            rp::HeartbeatRepr::parse(&rp::Heartbeat::new_checked(&bytes[..]).unwrap()),
            repr
        );
        let _ = (h.config_version(), h.removed(), h.flags());
    }
    if let Ok(h) = rp::HeadAnnounce::new_checked(msg) {
        let repr = rp::HeadAnnounceRepr::parse(&h);
        let bytes = repr.to_vec();
        let again = rp::HeadAnnounce::new_checked(&bytes[..]).unwrap();
        assert_eq!(rp::HeadAnnounceRepr::parse(&again), repr);
        let _ = (h.config_version(), h.old_head(), h.new_head());
    }
    let _ = (rp::ReqType::from_u8(data[0]), rp::AckType::from_u8(data[0]));
    let _ = rp::ChainType::from_u8(data[0]);
    let s = u16::from_be_bytes([data[0], data[1]]);
    let _ = (rp::seq_next(s), rp::seq_add(s, s), rp::worker_of_port(s));
    let _ = (
        rp::serial_lt(s, 7),
        rp::serial_le(7, s),
        rp::serial_max(s, 9),
    );
    let _ = (rp::is_store_port(s), rp::chain_port(s));
}

/// Forces `magic` on a copy of `data` so the reader under test is the one
/// that runs, whatever the fuzzer does to the first bytes.
fn with_magic(data: &[u8], magic: [u8; 4]) -> Vec<u8> {
    let mut m = data.to_vec();
    if m.len() >= 4 {
        m[..4].copy_from_slice(&magic);
    }
    m
}

/// Every frame a capture reader returns, fed back through the writer and
/// read again, comes back the same (timestamps to the writer's precision).
fn capture_roundtrip(frames: &[(u64, Vec<u8>)]) {
    let mut w = PcapWriter::new(Vec::new()).unwrap();
    let mut kept = Vec::new();
    for (ts, f) in frames {
        if f.len() <= pcap::SNAPLEN as usize && w.write(*ts, f).is_ok() {
            kept.push((*ts, f.clone()));
        }
    }
    let bytes = w.finish().unwrap();
    assert_eq!(read_capture_bytes(&bytes).unwrap(), kept);
}

/// The pcap reader (both byte orders, micro and nanosecond magic).
pub fn pcap(data: &[u8]) {
    let magic = match data.first().map(|b| b % 4) {
        Some(0) => 0xA1B2_C3D4u32.to_le_bytes(),
        Some(1) => 0xA1B2_C3D4u32.to_be_bytes(),
        Some(2) => 0xA1B2_3C4Du32.to_le_bytes(),
        _ => 0xA1B2_3C4Du32.to_be_bytes(),
    };
    if let Ok(frames) = read_capture_bytes(&with_magic(data, magic)) {
        capture_roundtrip(&frames);
    }
}

/// The pcapng reader (section header, interfaces, EPB/SPB/PB blocks).
pub fn pcapng(data: &[u8]) {
    if let Ok(frames) = read_capture_bytes(&with_magic(data, 0x0A0D_0D0Au32.to_be_bytes())) {
        capture_roundtrip(&frames);
    }
}

/// The TEA agent protocol (switch control plane ↔ DRAM server agent):
/// decode, and a decoded message re-encodes to the same bytes.
pub fn tea_agent_proto(data: &[u8]) {
    use inca_tea::server::agent_proto::{message_len, Message};
    if let Ok(Some(n)) = message_len(data) {
        assert!(n >= inca_tea::server::agent_proto::HEADER_LEN);
    }
    if let Ok(m) = Message::decode(data) {
        let bytes = m.encode().expect("a decoded message encodes");
        assert_eq!(Message::decode(&bytes).ok(), Some(m));
    }
    let _ = inca_tea::server::agent_proto::parse_udp(data);
}

/// The per-hop telemetry stack: the view over the bytes, then the first
/// byte as a depth limit and the rest as a frame to push a stamp onto.
pub fn telemetry(data: &[u8]) {
    use inca_wire::telemetry::{
        push_stamp, stack_of, Pushed, Stamp, StampPoint, TelemetryStack, STAMP_LEN,
    };
    if let Ok(s) = TelemetryStack::new_checked(data) {
        assert!(s.total_len() <= data.len());
        assert_eq!(s.stamps().count(), usize::from(s.count()));
        let _ = s.overflow();
    }
    let Some((&depth, frame)) = data.split_first() else {
        return;
    };
    let stamp = Stamp {
        device: 7,
        point: StampPoint::Egress,
        time: 123,
    };
    let mut f = frame.to_vec();
    match push_stamp(&mut f, stamp, depth) {
        Err(_) => assert_eq!(f, frame, "a refused frame is unchanged"),
        Ok(pushed) => {
            let u = parse_udp_frame(&f).expect("a stamped frame still parses");
            assert!(Probe::parse(u.payload).is_some(), "the probe survives");
            let s = stack_of(u.payload).expect("a stamped probe has a stack");
            match pushed {
                Pushed::Appended(n) => {
                    assert!(n >= STAMP_LEN);
                    assert_eq!(f.len(), frame.len() + n);
                    assert_eq!(s.stamp(usize::from(s.count()) - 1), Some(stamp));
                }
                Pushed::Overflow => assert!(s.overflow() > 0),
            }
        }
    }
}

/// The ExoPlane control protocol (hub ↔ daemon, TCP): a decoded frame,
/// body or REPORT digest re-encodes to the same bytes (decoding is strict,
/// so encoding is canonical); and the stream decoder, fed the bytes after
/// the first in chunks of 1 + first % 32 bytes, yields exactly the frames
/// and errors that walking the stream frame by frame gives, stopping at the
/// first error that breaks frame sync.
pub fn exoplane_control(data: &[u8]) {
    use inca_wire::exoplane::control::{
        ControlError, Frame, FrameDecoder, FrameHeader, Message, MsgType, ReportDigest,
    };
    if let Ok(f) = Frame::decode(data) {
        assert_eq!(f.encode().expect("a decoded frame encodes"), data);
    }
    if let Ok(d) = ReportDigest::decode(data) {
        assert_eq!(d.encode().expect("a decoded digest encodes"), data);
    }
    let Some((&first, rest)) = data.split_first() else {
        return;
    };
    if let Ok(m) = MsgType::from_type_byte(first).and_then(|t| Message::decode(t, rest)) {
        assert_eq!(m.encode().expect("a decoded body encodes"), rest);
    }
    // Reference: the stream walked frame by frame.
    let mut expect = Vec::new();
    let mut off = 0;
    loop {
        match FrameHeader::new_checked(&rest[off..]) {
            Err(ControlError::Short { .. }) => break,
            Err(e) => {
                expect.push(Err(e));
                break;
            }
            Ok(h) if rest.len() - off < h.frame_len() => break,
            Ok(h) => {
                expect.push(Frame::decode(&rest[off..off + h.frame_len()]));
                off += h.frame_len();
            }
        }
    }
    let mut got = Vec::new();
    let mut dec = FrameDecoder::new();
    'feed: for mut piece in rest.chunks(usize::from(first % 32) + 1) {
        while !piece.is_empty() {
            let n = dec.push(piece);
            piece = &piece[n..];
            loop {
                match dec.next_frame() {
                    Ok(Some(f)) => got.push(Ok(f)),
                    Ok(None) => break,
                    Err(e) => {
                        let fatal = e.is_fatal();
                        got.push(Err(e));
                        if fatal {
                            break 'feed;
                        }
                    }
                }
            }
        }
    }
    assert_eq!(got, expect);
}

/// ExoPlane's NetCache header (a UDP payload): the checked view agrees
/// with the repr, the repr re-emits the same bytes, and the setters write
/// what the getters read.
pub fn exoplane_netcache(data: &[u8]) {
    use inca_wire::exoplane::netcache::{NetCacheHeader, NetCacheRepr, Op};
    let Ok(h) = NetCacheHeader::new_checked(data) else {
        assert!(NetCacheRepr::parse(data).is_err(), "the repr refuses too");
        return;
    };
    let r = NetCacheRepr::parse(data).expect("a checked header parses");
    assert_eq!((r.op, r.seq, r.key), (h.op(), h.seq(), h.key()));
    assert_eq!(r.value, h.value());
    assert_eq!(r.to_bytes().expect("a parsed header emits"), data);
    let mut b = data.to_vec();
    let mut v = NetCacheHeader::new_checked(&mut b[..]).expect("same bytes");
    v.set_op(Op::Ack);
    v.set_seq(!r.seq);
    v.set_key(&[0x5A; 16]);
    let back = NetCacheRepr::parse(&b).expect("still a header");
    assert_eq!((back.op, back.seq, back.key), (Op::Ack, !r.seq, [0x5A; 16]));
    assert_eq!(back.value, r.value, "the value is untouched");
}

/// The ExoPlane EXO shim and MERGE body: the view and repr over the bytes,
/// then the bytes as a frame to pop a shim from and push one onto (a
/// refused frame is unchanged; a pushed shim pops back to the frame).
pub fn exoplane_shim(data: &[u8]) {
    use inca_wire::exoplane::{shim, MergeRepr, Shim, ShimRepr, ShimType};
    if let Ok(s) = Shim::new_checked(data) {
        let r = ShimRepr::parse(data).expect("a checked shim parses");
        assert_eq!(r.shim_type, s.shim_type());
        assert_eq!(ShimRepr::parse(&r.to_bytes()).ok(), Some(r));
    }
    if let Ok(m) = MergeRepr::parse(data) {
        let mut b = [0u8; 24];
        m.emit(&mut b).expect("a parsed merge body emits");
        assert_eq!(MergeRepr::parse(&b).ok(), Some(m));
    }
    let mut f = data.to_vec();
    match shim::pop(&mut f) {
        Err(_) => assert_eq!(f, data, "a refused pop leaves the frame alone"),
        Ok(_) => assert_eq!(f.len() + shim::SHIM_LEN, data.len()),
    }
    let r = ShimRepr {
        shim_type: ShimType::ToDev,
        failover: data.first().is_some_and(|b| b & 1 == 1),
        app_id: 1,
        ldev: 2,
        in_port: 3,
        out_port: 0,
        next_type: 0,
    };
    let mut g = data.to_vec();
    match shim::push(&mut g, r) {
        Err(_) => assert_eq!(g, data, "a refused push leaves the frame alone"),
        Ok(()) => {
            let back = shim::pop(&mut g).expect("a pushed shim pops");
            assert_eq!(back.app_id, 1);
            assert_eq!(g, data, "push then pop restores the frame");
        }
    }
}

/// SwiSh SRO (common header, SRO body, NAT key and value, the IP-in-IP
/// tunnel): nothing panics, a parsed body re-emits the bytes it came from
/// (padding zero), and a tunnelled frame unwraps to its inner packet.
pub fn swish_sro(data: &[u8]) {
    use inca_wire::swish::sro;
    use inca_wire::swish::HeaderRepr;
    if let Ok(h) = HeaderRepr::parse(data) {
        assert_eq!(&h.to_bytes()[..], &data[..8]);
        let _ = sro::MsgType::from_u8(h.msg_type);
    }
    let body = data.get(8..).unwrap_or(&[]);
    if let Ok(b) = sro::Body::new_checked(body) {
        let repr = sro::BodyRepr::parse(&b);
        assert_eq!(repr.buffer_len(), b.total_len());
        let bytes = repr.to_vec().expect("a parsed body emits");
        let again = sro::Body::new_checked(&bytes[..]).expect("an emitted body parses");
        assert_eq!(sro::BodyRepr::parse(&again), repr);
        let padding_zero = body[..b.total_len()]
            .iter()
            .zip(&bytes)
            .all(|(a, e)| a == e || *e == 0);
        assert!(padding_zero, "only padding may differ");
        if let Ok(k) = sro::NatKey::parse(b.key()) {
            assert_eq!(&k.to_bytes()[..], b.key());
        }
        if let Ok(v) = sro::NatValue::parse(b.value()) {
            assert_eq!(&v.to_bytes()[..], b.value());
        }
    }
    if let Some(dst) = sro::tunnel_dst(data) {
        let _ = dst;
        if let Ok(inner) = sro::decapsulate(data) {
            assert!(inner.len() + 20 <= data.len());
            if let Ok(t) = sro::encapsulate(&inner, Ipv4Addr::LOCALHOST, dst) {
                assert_eq!(sro::decapsulate(&t).ok(), Some(inner));
            }
        }
    }
    let _ = sro::encapsulate(data, Ipv4Addr::LOCALHOST, Ipv4Addr::BROADCAST);
}

/// SwiSh SDW (specs/swish.md §4.4): the common header then the body of the
/// type it names; a parsed body emits back to the bytes it came from (the
/// reserved byte aside) and parses again to itself.
pub fn swish_sdw(data: &[u8]) {
    use inca_wire::swish::sdw::{Body, BodyRepr, MsgType};
    use inca_wire::swish::{HeaderRepr, HEADER_LEN};
    let Ok(h) = HeaderRepr::parse(data) else {
        return;
    };
    assert_eq!(HeaderRepr::parse(&h.to_bytes()).ok(), Some(h));
    let body = &data[HEADER_LEN..];
    for ty in [MsgType::Data, MsgType::Ack, MsgType::Ready] {
        let Ok(r) = BodyRepr::parse(body, ty) else {
            continue;
        };
        let v = Body::new_checked(body, ty).expect("a parsed body is a checked body");
        let _ = (v.win(), v.col(), v.val(3), v.reserved());
        let bytes = r.to_vec().expect("a parsed body emits");
        assert_eq!(bytes[..15], body[..15], "emit keeps the fields");
        assert_eq!(BodyRepr::parse(&bytes, ty).ok(), Some(r));
    }
    let _ = MsgType::from_u8(h.msg_type);
}

/// The SwiSh DDoS push digest (specs/swish.md §4.5): the view and the repr
/// agree, and a parsed digest emits back to its bytes (the pad as zero).
pub fn swish_ddos(data: &[u8]) {
    use inca_wire::swish::ddos::{Digest, DigestRepr, DIGEST_LEN};
    let Ok(r) = DigestRepr::parse(data) else {
        assert!(data.len() < DIGEST_LEN);
        return;
    };
    let v = Digest::new_checked(data).expect("a parsed digest is a checked one");
    assert_eq!(
        (v.src_ip(), v.local_est(), v.rid()),
        (r.src_ip, r.local_est, r.rid)
    );
    let _ = v.pad();
    let b = r.to_bytes();
    assert_eq!(b[..10], data[..10], "emit keeps the fields");
    assert_eq!(DigestRepr::parse(&b), Ok(r));
}

/// The SwiSh controller RPC (§4.5): the view stays inside the buffer and
/// agrees with the repr; a parsed RPC emits back to exactly the frame's
/// bytes and parses to itself.
pub fn swish_ctl(data: &[u8]) {
    use inca_wire::swish::ctl::{Frame, Rpc};
    let Ok(f) = Frame::new_checked(data) else {
        assert!(Rpc::parse(data).is_err(), "the repr refuses too");
        return;
    };
    let _ = (f.op(), f.body().len(), f.is_empty());
    let Ok(r) = Rpc::parse(data) else {
        return;
    };
    assert_eq!(r.op(), f.op());
    let bytes = r.to_vec().expect("a parsed RPC emits");
    assert_eq!(
        bytes[..],
        data[..f.total_len()],
        "emit gives the frame back"
    );
    assert_eq!(Rpc::parse(&bytes).as_ref(), Ok(&r));
}

/// The SwiSh EWO body (and the common header in front of it): the view's
/// accessors stay inside the buffer, the repr agrees with the view and
/// emits back to the bytes it came from (up to the reserved field, which
/// emits as zero), and a setter changes only its value.
pub fn swish_ewo(data: &[u8]) {
    use inca_wire::swish::ewo::{Body, BodyRepr, BODY_FIXED_LEN};
    use inca_wire::swish::{HeaderRepr, HEADER_LEN};
    if let Ok(h) = HeaderRepr::parse(data) {
        assert_eq!(HeaderRepr::parse(&h.to_bytes()), Ok(h));
    }
    let body = data.get(HEADER_LEN.min(data.len())..).unwrap_or(&[]);
    for b in [data, body] {
        let Ok(v) = Body::new_checked(b) else {
            assert!(BodyRepr::parse(b).is_err(), "the repr refuses too");
            continue;
        };
        assert!(v.len() <= b.len());
        let r = BodyRepr::parse(b).expect("a checked body parses");
        assert_eq!(
            (r.var_id, r.kind, r.index),
            (v.var_id(), v.merge_kind(), v.index())
        );
        let mut bytes = r.to_vec().expect("a parsed body emits");
        assert_eq!(bytes.len(), v.len());
        assert_eq!(&bytes[..10], &b[..10]);
        assert_eq!(&bytes[BODY_FIXED_LEN..], &b[BODY_FIXED_LEN..v.len()]);
        assert_eq!(BodyRepr::parse(&bytes).as_ref(), Ok(&r));
        let mut w = Body::new_checked(&mut bytes[..]).expect("same bytes");
        w.set_value(0, !r.values.first().copied().unwrap_or(0));
        w.set_index(!r.index);
        let back = BodyRepr::parse(&bytes).expect("still a body");
        assert_eq!(back.index, !r.index);
        assert_eq!(back.values.get(1..), r.values.get(1..));
    }
}

/// The CLIP shim (specs/clip.md §4.2): the view agrees with the repr and
/// the repr re-emits the header (reserved bits as zero); setters write
/// what getters read; on a whole frame a refused pop or push leaves it
/// unchanged, a pop followed by a push of what it returned restores the
/// frame, and a push followed by a pop restores it too. The params
/// packing round-trips (widths and values from the input).
pub fn clip_shim(data: &[u8]) {
    use inca_wire::clip::shim::{self, ClipHeader, ClipRepr, Kind, Sel, Status};
    use inca_wire::clip::ETHERTYPE;
    if let Ok(h) = ClipHeader::new_checked(data) {
        let r = ClipRepr::parse(data).expect("a checked header parses");
        assert_eq!(
            (
                r.kind,
                r.flags,
                r.load_type,
                r.app_id,
                r.hdr_words,
                r.parsed_len
            ),
            (
                h.kind(),
                h.flags(),
                h.load_type(),
                h.app_id(),
                h.hdr_words(),
                h.parsed_len()
            )
        );
        assert_eq!(
            (r.server_id, r.sel, r.status, r.grp_ver, r.cms_est),
            (h.server_id(), h.sel(), h.status(), h.grp_ver(), h.cms_est())
        );
        assert_eq!(r.params_len(), h.params_len());
        let mut masked = [0u8; 16];
        masked.copy_from_slice(&data[..16]);
        masked[1] &= shim::FLAGS_MASK;
        masked[9] &= 0xF8;
        assert_eq!(r.to_bytes(), masked, "emit keeps every field");
        assert_eq!(ClipRepr::parse(&r.to_bytes()), Ok(r));
        let mut b = masked;
        let mut v = ClipHeader::new_checked(&mut b[..]).expect("same bytes");
        v.set_kind(Kind::Response);
        v.set_status(Status::NoResult);
        v.set_sel(Sel::Hint);
        v.set_load_type(!r.load_type);
        v.set_server_id(!r.server_id);
        v.set_cms_est(!r.cms_est);
        let back = ClipRepr::parse(&b).expect("still a header");
        assert_eq!(
            back,
            ClipRepr {
                kind: Kind::Response,
                status: Status::NoResult,
                sel: Sel::Hint,
                load_type: !r.load_type,
                server_id: !r.server_id,
                cms_est: !r.cms_est,
                ..r
            }
        );
    }
    // Pop, then push back what came off.
    let mut f = data.to_vec();
    match shim::pop(&mut f) {
        Err(_) => assert_eq!(f, data, "a refused pop leaves the frame alone"),
        Ok((r, params)) => {
            let (start, _) = shim::shim_of(data)
                .expect("a popped frame had a shim")
                .expect("a popped frame had a shim");
            assert_eq!(params.len(), r.params_len());
            assert_eq!(f.len() + 16 + params.len(), data.len());
            assert_eq!(f[start - 2..start], r.load_type.to_be_bytes());
            if r.load_type != ETHERTYPE && shim::ethertype_offset(&f) == Ok(start - 2) {
                shim::push(&mut f, r, &params).expect("what was popped pushes back");
                let mut want = data.to_vec();
                want[start + 1] &= shim::FLAGS_MASK;
                want[start + 9] &= 0xF8;
                assert_eq!(f, want, "pop then push restores the frame");
            }
        }
    }
    // Push, then pop.
    let r = ClipRepr {
        kind: Kind::Request,
        flags: shim::FLAG_CMS_VALID,
        load_type: 0,
        app_id: 3,
        hdr_words: 0,
        parsed_len: 40,
        server_id: 1,
        sel: Sel::Cur,
        status: Status::Ok,
        grp_ver: 1,
        cms_est: 9,
    };
    let plen = data
        .first()
        .map_or(0, |b| usize::from(b % 9) * 4 + usize::from(b >> 7));
    let params: Vec<u8> = data.iter().rev().copied().cycle().take(plen).collect();
    let mut g = data.to_vec();
    match shim::push(&mut g, r, &params) {
        Err(_) => assert_eq!(g, data, "a refused push leaves the frame alone"),
        Ok(()) => {
            assert_eq!(g.len(), data.len() + 16 + plen);
            let (back, p) = shim::pop(&mut g).expect("a pushed shim pops");
            assert_eq!((back.app_id, back.parsed_len, back.cms_est), (3, 40, 9));
            assert_eq!(p, params);
            assert_eq!(g, data, "push then pop restores the frame");
        }
    }
    // Params packing: widths from the odd bytes, values from the even ones.
    let fields: Vec<(u64, u8)> = data
        .chunks(2)
        .take(16)
        .map(|c| {
            let w = c[0] % 65;
            let v = u64::from(c.get(1).copied().unwrap_or(0)).wrapping_mul(0x0101_0101_0101_0101);
            (if w == 64 { v } else { v & ((1u64 << w) - 1) }, w)
        })
        .collect();
    let bits: usize = fields.iter().map(|f| usize::from(f.1)).sum();
    let mut out = vec![0xA5u8; bits.div_ceil(8)];
    shim::pack(&fields, &mut out).expect("fitting fields pack");
    let widths: Vec<u8> = fields.iter().map(|f| f.1).collect();
    let got = shim::unpack(&out, &widths).expect("they unpack");
    assert!(
        got.iter().zip(&fields).all(|(g, f)| *g == f.0),
        "pack/unpack round trip"
    );
    if !bits.is_multiple_of(8) {
        assert_eq!(
            out[out.len() - 1] & (0xFF >> (bits % 8)),
            0,
            "padding is zero"
        );
    }
    let _ = shim::unpack(data, &widths);
}

/// CLIP-CTL (specs/clip.md §4.5) and the pin-overflow digest (§4.4): a
/// datagram `decode` accepts re-encodes to exactly its bytes, and its
/// body split to datagram size comes back item for item; a body decoded
/// on its own re-encodes to its payload; the header view agrees with the
/// header repr; a parsed digest emits back to its 20 bytes.
pub fn clip_ctl(data: &[u8]) {
    use inca_wire::clip::ctl::{
        split, CtlBody, CtlHeader, CtlHeaderRepr, CtlMessage, MsgType, HEADER_LEN, MAX_DATAGRAM,
    };
    use inca_wire::clip::PinOverflow;
    if let Ok(m) = CtlMessage::decode(data) {
        assert_eq!(m.try_encode().expect("a decoded message encodes"), data);
        let parts = split(m.body.clone(), MAX_DATAGRAM);
        assert_eq!(
            parts.iter().map(CtlBody::item_count).sum::<usize>(),
            m.body.item_count()
        );
        for p in parts {
            let part = CtlMessage {
                body: p,
                ..m.clone()
            };
            let bytes = part.try_encode().expect("a part encodes");
            assert_eq!(CtlMessage::decode(&bytes).as_ref(), Ok(&part));
        }
    }
    if let Ok(h) = CtlHeader::new_checked(data) {
        let _ = (
            h.txn_id(),
            h.sender(),
            h.reply(),
            h.more(),
            h.payload().len(),
        );
        assert!(h.payload().len() <= usize::from(h.payload_len()));
        if let Ok(r) = CtlHeaderRepr::parse(data) {
            let mut want = [0u8; HEADER_LEN];
            want.copy_from_slice(&data[..HEADER_LEN]);
            want[11] &= 0x03;
            assert_eq!(r.to_bytes(), want);
        }
    }
    if let Some((&first, rest)) = data.split_first() {
        if let Ok(b) = MsgType::from_u8(first).and_then(|t| CtlBody::decode(t, rest)) {
            let m = CtlMessage {
                txn_id: 0,
                sender: 0,
                reply: true,
                more: false,
                body: b,
            };
            let bytes = m.try_encode().expect("a decoded body encodes");
            assert_eq!(&bytes[HEADER_LEN..], rest);
        }
    }
    if let Ok(d) = PinOverflow::parse(data) {
        assert_eq!(d.to_bytes()[..], data[..20]);
        assert_eq!(PinOverflow::parse(&d.to_bytes()), Ok(d));
    }
}
