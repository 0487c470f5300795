//! The per-flow counter core: which flows are counted, which entry of a
//! counter array of `entries` (a power of two) a key counts in, and how a
//! count grows.
//!
//! The plain [`FlowCounter`](crate::counters::FlowCounter) and RedPlane's
//! Async-Counter (\[RP\] §7, bounded mode) are the same NF: a count per
//! IPv4 5-tuple at entry CRC-32(5-tuple) mod `entries` (flows that hash
//! alike share). The plain [`CounterBlock`](crate::counters::CounterBlock)
//! indexes its per-source entries the same way by the source address.
//! RedPlane's Sync-Counter keys exactly (one replicated value per
//! 5-tuple, TCP/UDP only) and so needs no index.
//!
//! The overflow rule differs by system and is explicit ([`Overflow`]): the
//! plain counter and Sync-Counter wrap (a 32-bit register counter); the
//! bounded-mode arrays saturate (their entries are sketch counters too, and
//! a saturated count stays an upper bound).

use crate::headers::Parsed;

/// What happens past the largest count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Overflow {
    /// Modulo 2³² (a plain register counter).
    Wrap,
    /// Stays at the largest count (a sketch counter).
    Saturate,
}

/// The flow a packet counts for: its 5-tuple, for IPv4 packets (ports
/// zero when the protocol has none).
pub fn flow_key(p: &Parsed) -> Option<[u8; 13]> {
    p.ipv4.then(|| p.five_tuple())
}

/// The entry `key` counts in, of `entries` (a power of two): CRC-32 of
/// the key modulo `entries`, as a CRC-32 hash unit with ⌈log₂ entries⌉
/// output bits gives it.
pub fn index(key: &[u8], entries: usize) -> u64 {
    u64::from(inca_switch::hash::crc32(key)) & (entries.max(1) as u64 - 1)
}

/// Adds `n` to `count` under `overflow`; returns the new count.
pub fn add(count: &mut u32, n: u32, overflow: Overflow) -> u32 {
    *count = match overflow {
        Overflow::Wrap => count.wrapping_add(n),
        Overflow::Saturate => count.saturating_add(n),
    };
    *count
}

#[cfg(test)]
mod tests {
    use super::*;
    use inca_switch::hash::{HashAlgorithm, HashUnit};

    #[test]
    fn the_index_is_what_a_crc32_hash_unit_gives() {
        for bits in 1..=16u8 {
            let unit = HashUnit::new(HashAlgorithm::Crc32, bits).unwrap();
            let key = [10, 0, 0, bits, 203, 0, 113, 9, 17, 0, 80, 1, bits];
            assert_eq!(index(&key, 1 << bits), unit.hash(&key));
        }
    }

    #[test]
    fn counts_wrap_or_saturate() {
        let mut c = u32::MAX;
        assert_eq!(add(&mut c, 1, Overflow::Saturate), u32::MAX);
        assert_eq!(add(&mut c, 1, Overflow::Wrap), 0);
    }
}
