//! The packets the load-time check sends: a systematic set over the
//! headers a switch program commonly parses, random ones from the seed, and
//! the replies to what the program transmitted (the other direction of a
//! flow, so a NAT's or firewall's return path runs against the entries its
//! control plane installed).
//!
//! Systematic set, per ingress port: IPv4 TCP with SYN, SYN-ACK, ACK,
//! FIN-ACK and RST; IPv4 UDP to ports 53, 80, 2152 (GTP-U), 4789 (VXLAN),
//! 4791 (RoCEv2) and 5000-5002; ICMP echo; an 802.1Q-tagged IPv4 UDP; ARP;
//! IPv6; an IPv4 fragment; a runt frame. A program's own protocols beyond
//! these come from its [`crate::CheckHints`].

use rand::{Rng, SeedableRng};

/// TCP flags tried: SYN, SYN-ACK, ACK, FIN-ACK, RST.
const TCP_FLAGS: [u8; 5] = [0x02, 0x12, 0x10, 0x11, 0x04];
/// UDP destination ports tried.
const UDP_PORTS: [u16; 8] = [53, 80, 2152, 4789, 4791, 5000, 5001, 5002];
/// Ingress ports of the systematic set (the profile's, if fewer) [our
/// choice: the catalog's programs use ports 0-7 by default].
pub const PORTS: u16 = 8;

fn csum(data: &[u8], init: u32) -> u16 {
    let mut sum = init;
    for c in data.chunks(2) {
        sum += u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]));
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// An IPv4 packet in Ethernet (optionally 802.1Q-tagged) with `l4` as its
/// payload, checksums filled.
pub fn ipv4_frame(src: [u8; 4], dst: [u8; 4], proto: u8, l4: &[u8], vlan: Option<u16>) -> Vec<u8> {
    let mut f = vec![0x02, 0, 0, 0, 0, 0x02, 0x02, 0, 0, 0, 0, 0x01];
    if let Some(vid) = vlan {
        f.extend_from_slice(&[0x81, 0x00]);
        f.extend_from_slice(&(vid & 0x0fff).to_be_bytes());
    }
    f.extend_from_slice(&[0x08, 0x00]);
    let ip_at = f.len();
    let total = (20 + l4.len()) as u16;
    f.extend_from_slice(&[0x45, 0, 0, 0, 0, 1, 0x40, 0, 64, proto, 0, 0]);
    f[ip_at + 2..ip_at + 4].copy_from_slice(&total.to_be_bytes());
    f.extend_from_slice(&src);
    f.extend_from_slice(&dst);
    let c = csum(&f[ip_at..ip_at + 20], 0);
    f[ip_at + 10..ip_at + 12].copy_from_slice(&c.to_be_bytes());
    let l4_at = f.len();
    f.extend_from_slice(l4);
    fill_l4_checksum(&mut f[ip_at..], l4_at - ip_at);
    f
}

/// Fills the TCP or UDP checksum of the IPv4 packet `ip` (L4 at `l4_at`).
fn fill_l4_checksum(ip: &mut [u8], l4_at: usize) {
    let proto = ip[9];
    let at = match proto {
        6 => 16,
        17 => 6,
        _ => return,
    };
    if ip.len() < l4_at + at + 2 {
        return;
    }
    ip[l4_at + at..l4_at + at + 2].copy_from_slice(&[0, 0]);
    let len = (ip.len() - l4_at) as u32;
    let mut pseudo = 0u32;
    for c in ip[12..20].chunks(2) {
        pseudo += u32::from(u16::from_be_bytes([c[0], c[1]]));
    }
    pseudo += u32::from(proto) + len;
    let c = csum(&ip[l4_at..], pseudo);
    ip[l4_at + at..l4_at + at + 2].copy_from_slice(&c.to_be_bytes());
}

fn tcp(sport: u16, dport: u16, flags: u8) -> Vec<u8> {
    let mut t = vec![0u8; 20];
    t[0..2].copy_from_slice(&sport.to_be_bytes());
    t[2..4].copy_from_slice(&dport.to_be_bytes());
    t[4..8].copy_from_slice(&1000u32.to_be_bytes());
    if flags & 0x10 != 0 {
        t[8..12].copy_from_slice(&2000u32.to_be_bytes());
    }
    t[12] = 5 << 4;
    t[13] = flags;
    t[14..16].copy_from_slice(&65535u16.to_be_bytes());
    t
}

fn udp(sport: u16, dport: u16, payload: &[u8]) -> Vec<u8> {
    let mut u = vec![0u8; 8];
    u[0..2].copy_from_slice(&sport.to_be_bytes());
    u[2..4].copy_from_slice(&dport.to_be_bytes());
    u[4..6].copy_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
    u.extend_from_slice(payload);
    u
}

const INSIDE: [u8; 4] = [10, 0, 0, 1];
const OUTSIDE: [u8; 4] = [10, 0, 1, 1];

/// The systematic set on `ports` ingress ports: `(port, frame)`.
pub fn systematic(ports: u16) -> Vec<(u16, Vec<u8>)> {
    let payload = [0x5au8; 32];
    let mut frames = Vec::new();
    for f in TCP_FLAGS {
        frames.push(ipv4_frame(INSIDE, OUTSIDE, 6, &tcp(40000, 80, f), None));
    }
    for p in UDP_PORTS {
        frames.push(ipv4_frame(
            INSIDE,
            OUTSIDE,
            17,
            &udp(40000, p, &payload),
            None,
        ));
    }
    let icmp = [8u8, 0, 0, 0, 0, 1, 0, 1];
    frames.push(ipv4_frame(INSIDE, OUTSIDE, 1, &icmp, None));
    frames.push(ipv4_frame(
        INSIDE,
        OUTSIDE,
        17,
        &udp(40000, 5000, &payload),
        Some(10),
    ));
    let mut frag = ipv4_frame(INSIDE, OUTSIDE, 17, &udp(40000, 5000, &payload), None);
    frag[20] = 0x20; // more fragments
    frames.push(frag);
    let mut arp = vec![0xff; 6];
    arp.extend_from_slice(&[0x02, 0, 0, 0, 0, 1, 0x08, 0x06, 0, 1, 0x08, 0, 6, 4, 0, 1]);
    arp.extend_from_slice(&[
        0x02, 0, 0, 0, 0, 1, 10, 0, 0, 1, 0, 0, 0, 0, 0, 0, 10, 0, 1, 1,
    ]);
    frames.push(arp);
    let mut v6 = vec![
        0x02, 0, 0, 0, 0, 0x02, 0x02, 0, 0, 0, 0, 0x01, 0x86, 0xdd, 0x60,
    ];
    v6.resize(14 + 40 + 8, 0);
    frames.push(v6);
    frames.push(vec![0u8; 10]);
    (0..ports)
        .flat_map(|p| frames.iter().map(move |f| (p, f.clone())))
        .collect()
}

/// `n` random IPv4 TCP/UDP packets from `seed`: addresses in 10.0.0.0/16,
/// ports, flags and the ingress port (below `ports`) drawn at random.
pub fn random(seed: u64, n: usize, ports: u16) -> Vec<(u16, Vec<u8>)> {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    (0..n)
        .map(|_| {
            let src = [10, 0, rng.gen(), rng.gen()];
            let dst = [10, 0, rng.gen(), rng.gen()];
            let (sp, dp) = (rng.gen_range(1024..65535), rng.gen_range(1..65535));
            let frame = if rng.gen_bool(0.5) {
                let flags = TCP_FLAGS[rng.gen_range(0..TCP_FLAGS.len())];
                ipv4_frame(src, dst, 6, &tcp(sp, dp, flags), None)
            } else {
                let len = rng.gen_range(0..64);
                let payload: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
                ipv4_frame(src, dst, 17, &udp(sp, dp, &payload), None)
            };
            (rng.gen_range(0..ports.max(1)), frame)
        })
        .collect()
}

/// The reply to `frame` (Ethernet and IPv4 addresses and L4 ports swapped;
/// a TCP SYN answered by a SYN-ACK), or `None` if it is not IPv4 TCP/UDP.
pub fn reply(frame: &[u8]) -> Option<Vec<u8>> {
    let mut f = frame.to_vec();
    let mut ip = 14;
    if f.get(12..14)? == [0x81, 0x00] {
        ip = 18;
    }
    if f.get(ip - 2..ip)? != [0x08, 0x00] {
        return None;
    }
    let ihl = usize::from(*f.get(ip)? & 0x0f) * 4;
    let l4 = ip + ihl;
    let proto = *f.get(ip + 9)?;
    if !matches!(proto, 6 | 17) || f.len() < l4 + if proto == 6 { 20 } else { 8 } {
        return None;
    }
    let (a, b) = f.split_at_mut(6);
    a.swap_with_slice(&mut b[..6]);
    for k in 0..4 {
        f.swap(ip + 12 + k, ip + 16 + k);
    }
    for k in 0..2 {
        f.swap(l4 + k, l4 + 2 + k);
    }
    if proto == 6 {
        let flags = f[l4 + 13];
        if flags & 0x12 == 0x02 {
            f[l4 + 13] = 0x12;
        }
        let end = (ip + usize::from(u16::from_be_bytes([f[ip + 2], f[ip + 3]]))).min(f.len());
        fill_l4_checksum(&mut f[ip..end], ihl);
    }
    Some(f)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checksums_verify_and_replies_swap() {
        let f = ipv4_frame(INSIDE, OUTSIDE, 6, &tcp(1, 2, 0x02), None);
        assert_eq!(csum(&f[14..34], 0), 0, "IPv4 header checksum");
        let r = reply(&f).unwrap();
        assert_eq!(&r[26..30], &OUTSIDE);
        assert_eq!(&r[30..34], &INSIDE);
        assert_eq!(u16::from_be_bytes([r[34], r[35]]), 2);
        assert_eq!(r[34 + 13], 0x12, "a SYN is answered by a SYN-ACK");
        assert_eq!(csum(&r[14..34], 0), 0);
        assert!(reply(&[0u8; 10]).is_none());
        assert_eq!(systematic(2).len(), 2 * systematic(1).len());
        assert_eq!(
            random(7, 5, 4),
            random(7, 5, 4),
            "deterministic from the seed"
        );
    }
}
