//! The flow key and the hashes over it (spec §4.1).
//!
//! A [`FlowKey`] is 16 bytes: `ctx` (24 bits: a VXLAN VNI for overlay
//! apps, else 0), `proto`, the IPv4 addresses and the ports. Every hash
//! CLIP computes is over these 16 bytes, as the switch's hash units
//! compute them:
//!
//! | Hash | Algorithm | Slices used |
//! |---|---|---|
//! | FH_A | CRC-32C | ECMP member `[31:16] mod n`; Bloom way 0 `[15:0]`; pin-cache fingerprint `[23:0]` |
//! | FH_B | CRC-32 | Bloom way 1 `[15:0]`; Bloom way 2 `[31:16]` |
//! | FH_C | CRC-32D | CMS row 0 `[9:0]`; row 1 `[25:16]` |
//! | FH_D | CRC-32Q | pin-cache way 0 `[13:0]`; way 1 `[27:14]` |
//! | RSS | Toeplitz, Microsoft's key | core = RETA[h & 127] |
//!
//! A CRC is affine, so seeded variants of one polynomial collide
//! identically; independence comes only from distinct polynomials or
//! disjoint bit slices (§4.1, §9 item 6). Narrower tables (a Bloom filter
//! shrunk to force false positives) keep the low bits of each slice.

use inca_apps::headers::{Parsed, PROTO_TCP, PROTO_UDP};
use inca_switch::hash::HashAlgorithm;

/// Bytes in a flow key.
pub const FLOW_KEY_LEN: usize = 16;

/// FH_A's algorithm (CRC-32C).
pub const FH_A: HashAlgorithm = HashAlgorithm::Crc32c;
/// FH_B's algorithm (CRC-32/ISO-HDLC).
pub const FH_B: HashAlgorithm = HashAlgorithm::Crc32;
/// FH_C's algorithm (CRC-32D).
pub const FH_C: HashAlgorithm = HashAlgorithm::Crc32d;
/// FH_D's algorithm (CRC-32Q).
pub const FH_D: HashAlgorithm = HashAlgorithm::Crc32q;

/// A flow's identity (§4.1). The all-zero key is every non-IPv4 frame's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct FlowKey(pub [u8; FLOW_KEY_LEN]);

impl FlowKey {
    /// The key of these fields (`ctx` keeps its low 24 bits).
    pub fn new(ctx: u32, proto: u8, src: [u8; 4], dst: [u8; 4], sport: u16, dport: u16) -> FlowKey {
        let mut k = [0u8; FLOW_KEY_LEN];
        k[0..3].copy_from_slice(&ctx.to_be_bytes()[1..4]);
        k[3] = proto;
        k[4..8].copy_from_slice(&src);
        k[8..12].copy_from_slice(&dst);
        k[12..14].copy_from_slice(&sport.to_be_bytes());
        k[14..16].copy_from_slice(&dport.to_be_bytes());
        FlowKey(k)
    }

    /// The default key of a parsed packet: its outer IPv4 5-tuple under
    /// context `ctx`; ports 0 unless TCP or UDP; all zero if not IPv4.
    pub fn of_parsed(p: &Parsed, ctx: u32) -> FlowKey {
        if !p.ipv4 {
            return FlowKey::default();
        }
        let ports = p.has_ports && (p.proto == PROTO_TCP || p.proto == PROTO_UDP);
        let (sport, dport) = if ports { (p.sport, p.dport) } else { (0, 0) };
        FlowKey::new(ctx, p.proto, p.src, p.dst, sport, dport)
    }

    /// The default key of a packet whose L3 header starts `l3` and whose
    /// EtherType is `load_type` — what a server sees behind a CLIP shim.
    /// Equal to [`FlowKey::of_parsed`] of the original frame: the same
    /// parser runs over an Ethernet header rebuilt around the L3 bytes (no
    /// VLAN tag: the key does not include it). A malformed IPv4 header
    /// gives the all-zero key, as non-IPv4 does.
    pub fn of_l3(load_type: u16, l3: &[u8]) -> FlowKey {
        // The parser reads at most an IPv4 header with options (60) and a
        // TCP header (20): copy that much, not the whole packet.
        const ETH: usize = 14;
        const WINDOW: usize = 60 + 20;
        let mut buf = [0u8; ETH + WINDOW];
        buf[12..14].copy_from_slice(&load_type.to_be_bytes());
        let n = l3.len().min(WINDOW);
        buf[ETH..ETH + n].copy_from_slice(&l3[..n]);
        match inca_apps::headers::parse(&buf[..ETH + n]) {
            Ok(p) => FlowKey::of_parsed(&p, 0),
            Err(_) => FlowKey::default(),
        }
    }

    /// The 24-bit context (VNI).
    pub fn ctx(&self) -> u32 {
        u32::from_be_bytes([0, self.0[0], self.0[1], self.0[2]])
    }

    /// The IP protocol.
    pub fn proto(&self) -> u8 {
        self.0[3]
    }

    /// The source address.
    pub fn src(&self) -> [u8; 4] {
        [self.0[4], self.0[5], self.0[6], self.0[7]]
    }

    /// The destination address.
    pub fn dst(&self) -> [u8; 4] {
        [self.0[8], self.0[9], self.0[10], self.0[11]]
    }

    /// The source port.
    pub fn sport(&self) -> u16 {
        u16::from_be_bytes([self.0[12], self.0[13]])
    }

    /// The destination port.
    pub fn dport(&self) -> u16 {
        u16::from_be_bytes([self.0[14], self.0[15]])
    }

    /// The key as bytes.
    pub fn as_bytes(&self) -> &[u8; FLOW_KEY_LEN] {
        &self.0
    }

    /// The four switch hashes of this key.
    pub fn hashes(&self) -> FlowHashes {
        FlowHashes {
            a: FH_A.compute(&self.0) as u32,
            b: FH_B.compute(&self.0) as u32,
            c: FH_C.compute(&self.0) as u32,
            d: FH_D.compute(&self.0) as u32,
        }
    }
}

impl std::fmt::Display for FlowKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ip = |a: [u8; 4]| std::net::Ipv4Addr::from(a);
        write!(
            f,
            "{}/{}:{}->{}:{}",
            self.proto(),
            ip(self.src()),
            self.sport(),
            ip(self.dst()),
            self.dport()
        )?;
        if self.ctx() != 0 {
            write!(f, "@{}", self.ctx())?;
        }
        Ok(())
    }
}

/// The four CRCs of a flow key and the slices CLIP takes of them (§4.1).
/// Table sizes are powers of two; a slice keeps as many low bits of its
/// field as the table needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlowHashes {
    /// FH_A (CRC-32C).
    pub a: u32,
    /// FH_B (CRC-32).
    pub b: u32,
    /// FH_C (CRC-32D).
    pub c: u32,
    /// FH_D (CRC-32Q).
    pub d: u32,
}

impl FlowHashes {
    /// The member index of a group of `n` members: `FH_A[31:16] mod n`
    /// (0 for an empty group).
    pub fn member(&self, n: u32) -> u32 {
        if n == 0 {
            return 0;
        }
        (self.a >> 16) % n
    }

    /// Bloom way `way` (0..3) index in a filter of `size` bits per way
    /// (a power of two ≤ 65,536): way 0 FH_A[15:0], way 1 FH_B[15:0],
    /// way 2 FH_B[31:16].
    pub fn bloom(&self, way: usize, size: u32) -> u32 {
        let field = match way {
            0 => self.a & 0xFFFF,
            1 => self.b & 0xFFFF,
            _ => self.b >> 16,
        };
        field & size.saturating_sub(1)
    }

    /// The pin-cache fingerprint: FH_A[23:0].
    pub fn fingerprint(&self) -> u32 {
        self.a & 0x00FF_FFFF
    }

    /// CMS row `row` (0 or 1) index in rows of `width` cells (a power of
    /// two ≤ 1,024): row 0 FH_C[9:0], row 1 FH_C[25:16].
    pub fn cms(&self, row: usize, width: u32) -> u32 {
        let field = if row == 0 {
            self.c & 0x3FF
        } else {
            (self.c >> 16) & 0x3FF
        };
        field & width.saturating_sub(1)
    }

    /// Pin-cache way `way` (0 or 1) index in ways of `size` cells (a power
    /// of two ≤ 16,384): way 0 FH_D[13:0], way 1 FH_D[27:14].
    pub fn pin_way(&self, way: usize, size: u32) -> u32 {
        let field = if way == 0 {
            self.d & 0x3FFF
        } else {
            (self.d >> 14) & 0x3FFF
        };
        field & size.saturating_sub(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_values_are_the_catalogue_s() {
        // §4.1's table: CRC of ASCII "123456789".
        let s = b"123456789";
        assert_eq!(FH_A.compute(s), 0xE306_9283);
        assert_eq!(FH_B.compute(s), 0xCBF4_3926);
        assert_eq!(FH_C.compute(s), 0x8731_5576);
        assert_eq!(FH_D.compute(s), 0x3010_BF7F);
    }

    #[test]
    fn layout_and_fields() {
        let k = FlowKey::new(0x0A0B0C0D, 6, [10, 0, 0, 1], [10, 0, 0, 2], 1234, 80);
        assert_eq!(
            k.0,
            [0x0B, 0x0C, 0x0D, 6, 10, 0, 0, 1, 10, 0, 0, 2, 0x04, 0xD2, 0, 80]
        );
        assert_eq!(k.ctx(), 0x0B0C0D);
        assert_eq!((k.proto(), k.sport(), k.dport()), (6, 1234, 80));
        assert_eq!(k.src(), [10, 0, 0, 1]);
        assert_eq!(k.dst(), [10, 0, 0, 2]);
        let h = k.hashes();
        assert!(h.member(3) < 3);
        assert!(h.bloom(2, 1024) < 1024);
        assert!(h.cms(1, 1024) < 1024);
        assert!(h.pin_way(1, 16_384) < 16_384);
        assert_eq!(h.member(0), 0);
    }

    #[test]
    fn the_key_behind_a_shim_is_the_original_frame_s() {
        use inca_wire::{build_udp_frame, Endpoints};
        let ep = Endpoints::new(
            [2; 6],
            std::net::Ipv4Addr::new(10, 0, 0, 1),
            [4; 6],
            std::net::Ipv4Addr::new(10, 0, 0, 2),
        );
        let f = build_udp_frame(&ep, 1234, 53, &[7; 300], false).unwrap();
        let p = inca_apps::headers::parse(&f).unwrap();
        let k = FlowKey::of_l3(0x0800, &f[14..]);
        assert_eq!(k, FlowKey::of_parsed(&p, 0));
        assert_eq!(k.sport(), 1234);
        assert_eq!(FlowKey::of_l3(0x86DD, &f[14..]), FlowKey::default());
        assert_eq!(FlowKey::of_l3(0x0800, &f[14..20]), FlowKey::default());
        // Ports cut off: the addresses still key it, ports 0.
        let short = FlowKey::of_l3(0x0800, &f[14..36]);
        assert_eq!((short.src(), short.sport()), ([10, 0, 0, 1], 0));
    }

    #[test]
    fn non_ipv4_is_the_zero_key() {
        assert_eq!(
            FlowKey::of_parsed(&Parsed::default(), 7),
            FlowKey::default()
        );
    }
}
