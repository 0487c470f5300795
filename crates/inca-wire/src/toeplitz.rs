//! The Toeplitz hash of Receive Side Scaling (RSS): what a NIC computes over
//! a packet's addresses and ports to pick a receive queue.
//!
//! Microsoft's RSS specification ("RSS hashing functions", Windows driver
//! documentation, learn.microsoft.com/windows-hardware/drivers/network/
//! rss-hashing-functions) defines it over a byte string `input` and a secret
//! key `K` of 40 bytes: for every bit of the input, most significant first,
//! when the bit is 1 the result is XORed with the leftmost 32 bits of `K`,
//! and `K` is shifted left by one bit. The inputs are, in packet order:
//!
//! - IPv4 with TCP (and, where the NIC enables it, UDP): source address,
//!   destination address, source port, destination port (12 bytes);
//! - IPv4 otherwise: source and destination address (8 bytes).
//!
//! [`MICROSOFT_KEY`] is the key of Microsoft's verification table, which
//! most NIC drivers (Intel's ixgbe/ice, DPDK's testpmd) also use as their
//! default; the unit tests check that table.

/// The 40-byte key of Microsoft's "Verifying the RSS Hash Calculation"
/// table.
pub const MICROSOFT_KEY: [u8; 40] = [
    0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67, 0x25, 0x3d, 0x43, 0xa3, 0x8f, 0xb0,
    0xd0, 0xca, 0x2b, 0xcb, 0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3, 0x80, 0x30, 0xf2, 0x0c,
    0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac, 0x01, 0xfa,
];

/// The longest input a 40-byte key hashes: every input bit needs 32 key
/// bits from its position on, so 40 − 4 bytes (the IPv6 4-tuple's length).
pub const MAX_INPUT: usize = MICROSOFT_KEY.len() - 4;

/// The Toeplitz hash of `input` under `key`. Input bytes beyond
/// `key.len() - 4` would need key bits the key does not have; they are
/// hashed against zero bits (contribute nothing), as a shift register of
/// the key's length would. RSS inputs are at most [`MAX_INPUT`] bytes.
pub fn hash(key: &[u8], input: &[u8]) -> u32 {
    let mut result = 0u32;
    for (i, &byte) in input.iter().enumerate() {
        for bit in 0..8 {
            if byte & (0x80 >> bit) != 0 {
                result ^= window(key, i * 8 + bit);
            }
        }
    }
    result
}

/// The 32 key bits starting at bit `offset` (zeros past the key's end).
fn window(key: &[u8], offset: usize) -> u32 {
    let byte = offset / 8;
    let shift = offset % 8;
    // Five bytes hold any 32-bit window that starts inside the first.
    let mut w = 0u64;
    for k in 0..5 {
        w = (w << 8) | u64::from(key.get(byte + k).copied().unwrap_or(0));
    }
    ((w << shift) >> 8) as u32
}

/// The RSS input of an IPv4 packet: addresses, then the ports when given
/// (TCP or UDP, not a later fragment). Returns the buffer and its length.
pub fn ipv4_input(src: [u8; 4], dst: [u8; 4], ports: Option<(u16, u16)>) -> ([u8; 12], usize) {
    let mut b = [0u8; 12];
    b[..4].copy_from_slice(&src);
    b[4..8].copy_from_slice(&dst);
    match ports {
        Some((sport, dport)) => {
            b[8..10].copy_from_slice(&sport.to_be_bytes());
            b[10..12].copy_from_slice(&dport.to_be_bytes());
            (b, 12)
        }
        None => (b, 8),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (destination, destination port, source, source port, IPv4-only hash,
    /// IPv4 with TCP hash).
    type Row = ([u8; 4], u16, [u8; 4], u16, u32, u32);

    /// Microsoft's "Verifying the RSS Hash Calculation" table, IPv4 rows.
    const TABLE: [Row; 5] = [
        (
            [161, 142, 100, 80],
            1766,
            [66, 9, 149, 187],
            2794,
            0x323e_8fc2,
            0x51cc_c178,
        ),
        (
            [65, 69, 140, 83],
            4739,
            [199, 92, 111, 2],
            14230,
            0xd718_262a,
            0xc626_b0ea,
        ),
        (
            [12, 22, 207, 184],
            38024,
            [24, 19, 198, 95],
            12898,
            0xd2d0_a5de,
            0x5c2b_394a,
        ),
        (
            [209, 142, 163, 6],
            2217,
            [38, 27, 205, 30],
            48228,
            0x8298_9176,
            0xafc7_327f,
        ),
        (
            [202, 188, 127, 2],
            1303,
            [153, 39, 163, 191],
            44251,
            0x5d18_09c5,
            0x10e8_28a2,
        ),
    ];

    #[test]
    fn microsoft_verification_table() {
        for (dst, dport, src, sport, ip_only, with_tcp) in TABLE {
            let (b, n) = ipv4_input(src, dst, None);
            assert_eq!(hash(&MICROSOFT_KEY, &b[..n]), ip_only, "{src:?} -> {dst:?}");
            let (b, n) = ipv4_input(src, dst, Some((sport, dport)));
            assert_eq!(hash(&MICROSOFT_KEY, &b[..n]), with_tcp, "{src:?}:{sport}");
        }
    }

    #[test]
    fn hash_is_linear_in_its_input() {
        // Toeplitz is XOR-linear: h(a ^ b) = h(a) ^ h(b).
        let a = [1u8, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12];
        let b = [0xf0u8, 0x0f, 0xaa, 0x55, 0, 1, 2, 3, 0xff, 0x80, 0x7f, 0x11];
        let x: Vec<u8> = a.iter().zip(&b).map(|(p, q)| p ^ q).collect();
        let k = &MICROSOFT_KEY;
        assert_eq!(hash(k, &x), hash(k, &a) ^ hash(k, &b));
        assert_eq!(hash(k, &[0; 12]), 0);
        // Past the key's end, bits hash against zeros.
        assert_eq!(hash(&[0xff; 4], &[0, 0, 0, 0, 1]), 0);
    }
}
