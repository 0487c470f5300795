//! Ready-made NAT set-ups for benchmarks (the criterion benches and `inca
//! bench` build the same switch the same way, so their figures compare),
//! and the frames of tests that drive NFs with random flows.

use std::net::Ipv4Addr;

use inca_switch::device::{Nanos, PortId, SECONDS};
use inca_switch::fabric::Fabric;
use inca_switch::harness::Harness;
use inca_switch::{Profile, Switch};
use inca_wire::{build_tcp_frame, build_udp_frame, Endpoints, TcpFlags, TcpRepr};

use crate::nat::Nat;

/// The NAT's public address in these set-ups.
pub const PUBLIC: [u8; 4] = [198, 51, 100, 1];

/// A 64-byte TCP frame (ACK, 6 payload bytes) of inside flow `sport`:
/// 10.0.0.5:`sport` → 203.0.113.9:80.
pub fn nat_tcp_frame(sport: u16) -> Vec<u8> {
    let ep = Endpoints::new(
        [2, 0, 0, 0, 0, 1],
        Ipv4Addr::new(10, 0, 0, 5),
        [2, 0, 0, 0, 0, 2],
        Ipv4Addr::new(203, 0, 113, 9),
    );
    let tcp = TcpRepr {
        src_port: sport,
        dst_port: 80,
        seq: 1,
        ack: 0,
        flags: TcpFlags::ACK,
        window: 1000,
        urgent: 0,
        options: &[],
        payload: &[0; 6],
    };
    build_tcp_frame(&ep, &tcp).expect("a valid TCP frame")
}

/// `flows` frames of [`nat_tcp_frame`], source ports 10,000 up.
pub fn nat_tcp_flows(flows: u16) -> Vec<Vec<u8>> {
    (0..flows).map(|f| nat_tcp_frame(10_000 + f)).collect()
}

/// The plain NAT on the `tofino` profile (65,536 mappings) with a mapping
/// for every flow of `templates`, installed through its control plane by
/// sending each flow's first packet on `inside`; outbound leaves on
/// `outside`. Returns the switch and the time the set-up reached, or what
/// went wrong.
pub fn installed_nat(
    templates: &[Vec<u8>],
    inside: PortId,
    outside: PortId,
) -> Result<(Switch<Nat>, Nanos), String> {
    let nat = Nat::new(65_536, outside, PUBLIC);
    let sw = Switch::new(Profile::tofino(), nat).map_err(|e| e.to_string())?;
    let mut h = Harness::new(sw, 1);
    for (i, f) in templates.iter().enumerate() {
        h.send(i as u64 * 1_000, inside, f.clone());
    }
    h.advance_to(SECONDS);
    if h.transmit_count != templates.len() as u64 {
        return Err(format!(
            "NAT set-up: {} of {} flows installed",
            h.transmit_count,
            templates.len()
        ));
    }
    let now = h.now();
    Ok((h.device, now))
}

/// [`installed_nat`] in a one-node [`Fabric`] fed `templates` in turn on
/// `inside`, `gap` apart ([`Fabric::push`]): the load of the NAT
/// benchmarks (and the baseline of the RedPlane and TEA ones).
pub fn fed_nat(
    templates: &[Vec<u8>],
    inside: PortId,
    outside: PortId,
    gap: Nanos,
) -> Result<Fabric<Switch<Nat>>, String> {
    let (sw, now) = installed_nat(templates, inside, outside)?;
    let mut f = Fabric::new(1);
    let node = f.add(sw);
    f.run_until(now);
    f.set_stream(node, inside, gap, templates.to_vec());
    Ok(f)
}

/// Checks a [`fed_nat`] after its run: once the last packets have crossed
/// the pipeline, every packet pushed left, only the set-up's `flows` were
/// punted (the rest took the fast path) and no queue dropped.
pub fn check_fed_nat(f: &mut Fabric<Switch<Nat>>, flows: u64) -> Result<(), String> {
    f.run_until(f.now() + 1_000_000);
    let (pushed, left) = (f.stats().injected, f.stats().left);
    if left != pushed {
        return Err(format!("NAT sent {left} of {pushed} packets"));
    }
    let s = f.device(0).stats();
    if s.punts != flows {
        return Err(format!(
            "NAT punted {} packets, expected {flows} (set-up only)",
            s.punts
        ));
    }
    if s.ports.iter().any(|p| p.tm_drops != 0) {
        return Err("NAT queue drops".into());
    }
    Ok(())
}

/// The L4 protocol of a [`flow_frame`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlowProto {
    /// TCP with these flags.
    Tcp(u8),
    /// UDP with a checksum.
    Udp,
    /// UDP without a checksum (0).
    UdpNoChecksum,
    /// ICMP echo request (`true`) or reply; the source port is the
    /// identifier of a request, the destination port that of a reply.
    IcmpEcho(bool),
}

/// An Ethernet/IPv4 frame of `proto` from `src:sport` to `dst:dport` with
/// valid checksums and a few payload bytes, for tests that drive NFs with
/// random flows (the differential tests of [`crate::core`] against every
/// system's adapter).
pub fn flow_frame(proto: FlowProto, src: [u8; 4], sport: u16, dst: [u8; 4], dport: u16) -> Vec<u8> {
    let ep = Endpoints::new(
        [2, 0, 0, 0, 0, 1],
        Ipv4Addr::from(src),
        [2, 0, 0, 0, 0, 2],
        Ipv4Addr::from(dst),
    );
    let payload = [0xab; 5];
    let built = match proto {
        FlowProto::Tcp(flags) => build_tcp_frame(
            &ep,
            &TcpRepr {
                src_port: sport,
                dst_port: dport,
                seq: 7,
                ack: 0,
                flags: TcpFlags(flags),
                window: 1000,
                urgent: 0,
                options: &[],
                payload: &payload,
            },
        ),
        FlowProto::Udp => build_udp_frame(&ep, sport, dport, &payload, true),
        FlowProto::UdpNoChecksum => build_udp_frame(&ep, sport, dport, &payload, false),
        FlowProto::IcmpEcho(request) => {
            let id = if request { sport } else { dport };
            return icmp_echo_frame(src, dst, request, id);
        }
    };
    built.expect("a frame of fixed, valid sizes")
}

/// An Ethernet/IPv4/ICMP echo frame with valid checksums.
fn icmp_echo_frame(src: [u8; 4], dst: [u8; 4], request: bool, id: u16) -> Vec<u8> {
    let mut f = vec![0u8; 14 + 20 + 8 + 16];
    f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    let ip = &mut f[14..34];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&(20u16 + 8 + 16).to_be_bytes());
    ip[8] = 64;
    ip[9] = crate::headers::PROTO_ICMP;
    ip[12..16].copy_from_slice(&src);
    ip[16..20].copy_from_slice(&dst);
    let s = inca_wire::checksum::checksum(&f[14..34]);
    f[24..26].copy_from_slice(&s.to_be_bytes());
    f[34] = if request { 8 } else { 0 };
    f[38..40].copy_from_slice(&id.to_be_bytes());
    let s = inca_wire::checksum::checksum(&f[34..]);
    f[36..38].copy_from_slice(&s.to_be_bytes());
    f
}

/// A VXLAN frame (outer `outer_src` → `outer_dst`, UDP to port 4789, VNI
/// `vni`) around an inner UDP frame `inner_src` → `inner_dst`, with valid
/// checksums.
pub fn vxlan_frame(
    outer_src: [u8; 4],
    outer_dst: [u8; 4],
    vni: u32,
    inner_src: [u8; 4],
    inner_dst: [u8; 4],
) -> Vec<u8> {
    let inner = flow_frame(FlowProto::Udp, inner_src, 1111, inner_dst, 2222);
    let v = vni.to_be_bytes();
    let mut payload = vec![crate::core::vpn::VXLAN_FLAG_I, 0, 0, 0, v[1], v[2], v[3], 0];
    payload.extend_from_slice(&inner);
    let ep = Endpoints::new(
        [2, 0, 0, 0, 1, 1],
        Ipv4Addr::from(outer_src),
        [2, 0, 0, 0, 1, 2],
        Ipv4Addr::from(outer_dst),
    );
    build_udp_frame(&ep, 49_152, crate::core::vpn::VXLAN_PORT, &payload, true)
        .expect("a frame of fixed, valid sizes")
}
