//! One line naming a packet, for the load-time check's findings: where it
//! came from and its headers as far as Ethernet, 802.1Q, IPv4 and TCP/UDP
//! go (the switch does not know a program's own protocols).

use crate::placement::Gress;
use crate::program::{PacketCtx, PacketKind};

fn be16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*b.get(at)?, *b.get(at + 1)?]))
}

fn tcp_flags(f: u8) -> String {
    let names = [
        (0x02, 'S'),
        (0x10, '.'),
        (0x01, 'F'),
        (0x04, 'R'),
        (0x08, 'P'),
    ];
    names
        .iter()
        .filter(|(bit, _)| f & bit != 0)
        .map(|(_, c)| *c)
        .collect()
}

/// The headers of `frame` in one line.
pub fn describe_headers(frame: &[u8]) -> String {
    let Some(mut ethertype) = be16(frame, 12) else {
        return format!("{}-byte frame", frame.len());
    };
    let mut at = 14;
    let mut out = String::new();
    if ethertype == 0x8100 {
        let vid = be16(frame, 14).unwrap_or(0) & 0x0fff;
        out.push_str(&format!("VLAN {vid} "));
        ethertype = be16(frame, 16).unwrap_or(0);
        at = 18;
    }
    if ethertype != 0x0800 {
        out.push_str(&format!("ethertype {ethertype:#06x}"));
        return out;
    }
    let ip = &frame[at.min(frame.len())..];
    if ip.len() < 20 {
        out.push_str("truncated IPv4");
        return out;
    }
    let ihl = usize::from(ip[0] & 0x0f) * 4;
    let addr = |o: usize| format!("{}.{}.{}.{}", ip[o], ip[o + 1], ip[o + 2], ip[o + 3]);
    let (src, dst) = (addr(12), addr(16));
    let l4 = &ip[ihl.min(ip.len())..];
    match (ip[9], be16(l4, 0), be16(l4, 2)) {
        (6, Some(sp), Some(dp)) => {
            let flags = l4.get(13).copied().unwrap_or(0);
            out.push_str(&format!(
                "IPv4 TCP {src}:{sp} > {dst}:{dp} [{}]",
                tcp_flags(flags)
            ));
        }
        (17, Some(sp), Some(dp)) => {
            out.push_str(&format!("IPv4 UDP {src}:{sp} > {dst}:{dp}"));
        }
        (p, _, _) => out.push_str(&format!("IPv4 proto {p} {src} > {dst}")),
    }
    out
}

/// Where the packet of a pass came from and what it is.
pub fn describe_frame<M, D>(gress: Gress, pkt: &PacketCtx<M, D>) -> String {
    let kind = match pkt.kind {
        PacketKind::Normal => String::new(),
        k => format!("{k:?} "),
    };
    let place = match gress {
        Gress::Ingress => format!("in port {}", pkt.ingress_port),
        Gress::Egress => format!("out port {}", pkt.egress.port),
    };
    format!("{kind}{} {place}", describe_headers(&pkt.frame))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_tcp_and_others() {
        let mut f = vec![0u8; 14 + 20 + 20];
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        f[14] = 0x45;
        f[14 + 9] = 6;
        f[14 + 12..14 + 16].copy_from_slice(&[10, 0, 0, 1]);
        f[14 + 16..14 + 20].copy_from_slice(&[10, 0, 1, 1]);
        f[34..36].copy_from_slice(&1000u16.to_be_bytes());
        f[36..38].copy_from_slice(&80u16.to_be_bytes());
        f[34 + 13] = 0x12;
        assert_eq!(
            describe_headers(&f),
            "IPv4 TCP 10.0.0.1:1000 > 10.0.1.1:80 [S.]"
        );
        f[12..14].copy_from_slice(&[0x08, 0x06]);
        assert_eq!(describe_headers(&f), "ethertype 0x0806");
        assert_eq!(describe_headers(&[1, 2]), "2-byte frame");
    }
}
