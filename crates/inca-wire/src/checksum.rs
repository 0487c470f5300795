//! The Internet checksum (RFC 1071) and its incremental update (RFC 1624).
//!
//! Sums are kept as unfolded `u32` accumulators so that a pseudo-header, a
//! header and a payload living in different buffers can be summed separately
//! and combined; [`fold`] turns an accumulator into the 16-bit one's-complement
//! sum, and the checksum field holds its complement.

use std::net::Ipv4Addr;

/// One's-complement accumulation of `data` as big-endian 16-bit words, an odd
/// trailing byte padded with zero (RFC 1071 §4.1).
pub fn sum(data: &[u8]) -> u32 {
    let mut acc: u64 = 0;
    let mut chunks = data.chunks_exact(2);
    for c in &mut chunks {
        acc += u64::from(u16::from_be_bytes([c[0], c[1]]));
    }
    if let [last] = chunks.remainder() {
        acc += u64::from(*last) << 8;
    }
    // Fold to 32 bits here so callers can keep adding without overflow.
    fold64(acc)
}

fn fold64(mut acc: u64) -> u32 {
    while acc > 0xFFFF_FFFF {
        acc = (acc & 0xFFFF_FFFF) + (acc >> 32);
    }
    acc as u32
}

/// Adds two accumulators without losing carries.
pub fn combine(a: u32, b: u32) -> u32 {
    fold64(u64::from(a) + u64::from(b))
}

/// Folds an accumulator into a 16-bit one's-complement sum (not complemented).
pub fn fold(mut acc: u32) -> u16 {
    while acc > 0xFFFF {
        acc = (acc & 0xFFFF) + (acc >> 16);
    }
    acc as u16
}

/// The checksum of `data`: the complement of its one's-complement sum.
pub fn checksum(data: &[u8]) -> u16 {
    !fold(sum(data))
}

/// The accumulator of the IPv4 pseudo-header used by UDP and TCP
/// (src, dst, zero, protocol, upper-layer length).
pub fn pseudo_header_ipv4(src: Ipv4Addr, dst: Ipv4Addr, protocol: u8, length: u16) -> u32 {
    let mut acc = sum(&src.octets());
    acc = combine(acc, sum(&dst.octets()));
    acc = combine(acc, u32::from(protocol));
    combine(acc, u32::from(length))
}

/// RFC 1624 eqn. 3: the new checksum after one 16-bit word of the covered
/// data changes from `old` to `new`, without re-reading the data.
///
/// `HC' = ~(~HC + ~m + m')`. Unlike eqn. 2 this never yields 0x0000 from a
/// non-zero sum, so it stays correct for headers whose sum is 0xFFFF.
pub fn update_u16(checksum: u16, old: u16, new: u16) -> u16 {
    let acc = u32::from(!checksum) + u32::from(!old) + u32::from(new);
    !fold(acc)
}

/// [`update_u16`] for a 32-bit field (e.g. an IPv4 address rewritten by NAT).
pub fn update_u32(checksum: u16, old: u32, new: u32) -> u16 {
    let c = update_u16(checksum, (old >> 16) as u16, (new >> 16) as u16);
    update_u16(c, old as u16, new as u16)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc1071_example() {
        // RFC 1071 §3 example: the sum of these words is 0xddf2.
        let data = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(fold(sum(&data)), 0xddf2);
        assert_eq!(checksum(&data), !0xddf2);
    }

    #[test]
    fn odd_length_pads_with_zero() {
        assert_eq!(sum(&[0x12, 0x34, 0x56]), 0x1234 + 0x5600);
    }

    #[test]
    fn incremental_matches_recompute() {
        let mut data = [0x45u8, 0x00, 0x00, 0x54, 0x12, 0x34, 0x40, 0x00, 0x40, 0x01];
        let before = checksum(&data);
        let old = u16::from_be_bytes([data[4], data[5]]);
        data[4] = 0xab;
        data[5] = 0xcd;
        assert_eq!(update_u16(before, old, 0xabcd), checksum(&data));
    }
}
