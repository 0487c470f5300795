//! The super-spreader / DDoS detector's sketch arithmetic (specs/swish.md
//! §7), shared by the detector on SDW ([`crate::sdw::ddos`]) and the local
//! sketches of the pull and push baselines ([`crate::ddos`]):
//!
//! - a packet is *sampled* iff hash(src, dst) mod 16 = 0 (p = 1/16);
//! - a sampled packet sets bit hash′_r(dst) mod 32 in column hash_r(src) of
//!   each of the 3 rows (32-bit bitsets, Or merge);
//! - a row's estimate is linear counting on its bitset scaled by 1/p:
//!   `16 · 32 · ln(32 / (32 − popcount))` distinct destinations;
//! - the source is blocked at an estimate ≥ 1,000 in every row (popcount ≥
//!   28), and a baseline switch calls it suspicious at ≥ 500 (popcount ≥
//!   20) — thresholds derived from the spec's estimates by [`popcount_for`].
//!
//! Also the experiment's traffic frames: IPv4/UDP from the source to the
//! destination, to port [`TRAFFIC_PORT`].

use std::net::Ipv4Addr;

use inca_wire::builder::{build_udp_frame, Endpoints};

/// Rows (spec §7, model input).
pub const ROWS: usize = 3;
/// Columns per row (spec §7, model input).
pub const COLS: u32 = 32_768;
/// Bits per cell.
pub const CELL_BITS: u32 = 32;
/// 1/p: one pair in 16 is sampled (spec §7, [our choice] there).
pub const SAMPLE: u32 = 16;
/// Distinct destinations at which a source is blocked (spec §7, model input).
pub const BLOCK_EST: u32 = 1_000;
/// A baseline switch's local estimate that makes a source suspicious
/// (spec §7, model input).
pub const SUSPICIOUS_EST: u32 = 500;
/// UDP destination port of the experiment's traffic [our choice].
pub const TRAFFIC_PORT: u16 = 9;

/// murmur3's 32-bit finalizer: any fixed mixing function serves [our
/// choice; a Tofino hash unit computes a CRC].
fn mix(mut h: u32) -> u32 {
    h ^= h >> 16;
    h = h.wrapping_mul(0x85EB_CA6B);
    h ^= h >> 13;
    h = h.wrapping_mul(0xC2B2_AE35);
    h ^ (h >> 16)
}

const SEEDS: [u32; ROWS] = [0x9E37_79B1, 0x7F4A_7C15, 0x94D0_49BB];

/// Whether the pair (src, dst) is sampled: hash(src, dst) mod 16 = 0.
pub fn sampled(src: u32, dst: u32) -> bool {
    mix(src ^ mix(dst ^ 0x5BD1_E995)).is_multiple_of(SAMPLE)
}

/// Column hash_r(src) mod `cols` of row `row`.
pub fn column(row: usize, src: u32, cols: u32) -> u32 {
    mix(src ^ SEEDS[row % ROWS]) % cols.max(1)
}

/// The cell value a sampled packet ors into row `row`: bit hash′_r(dst) mod 32.
pub fn bit(row: usize, dst: u32) -> u32 {
    1 << (mix(dst.wrapping_add(SEEDS[row % ROWS]) ^ 0x2545_F491) % CELL_BITS)
}

/// Popcount of a cell as the data plane computes it: two 16-bit lookups
/// (one per half), summed. [our choice] The two exact-match tables hold
/// 64K constant entries each (P4 `const entries`, compiled in, no runtime
/// load); inca's tables start empty and a runtime load of 6 × 64K entries
/// at the tofino profile's 20 µs per write would take 7.9 s, so the lookup
/// is computed here and the tables are not declared (their SRAM is not in
/// `inca check`'s report).
pub fn popcount(cell: u32) -> u32 {
    (cell & 0xFFFF).count_ones() + (cell >> 16).count_ones()
}

/// A row's estimate of distinct destinations for a popcount: linear
/// counting `m · ln(m / (m − pc))` with m = 32, scaled by 1/p; a full
/// bitset estimates `u32::MAX`.
pub fn estimate(pc: u32) -> u32 {
    if pc >= CELL_BITS {
        return u32::MAX;
    }
    let m = f64::from(CELL_BITS);
    (f64::from(SAMPLE) * m * (m / (m - f64::from(pc))).ln()).round() as u32
}

/// The smallest popcount whose estimate reaches `est` (the data plane
/// compares popcounts: 28 for 1,000, 20 for 500).
pub fn popcount_for(est: u32) -> u32 {
    (0..=CELL_BITS)
        .find(|&pc| estimate(pc) >= est)
        .unwrap_or(CELL_BITS)
}

/// Popcount at which a source is blocked (every row).
pub fn block_popcount() -> u32 {
    popcount_for(BLOCK_EST)
}

/// Popcount at which a baseline switch calls a source suspicious.
pub fn suspicious_popcount() -> u32 {
    popcount_for(SUSPICIOUS_EST)
}

/// The IPv4 address of source `k` of an experiment [our choice: 10.0.0.0/8
/// from 10.1.0.0 up].
pub fn source_ip(k: u32) -> u32 {
    0x0A01_0000u32.wrapping_add(k)
}

/// The IPv4 address of destination `i` [our choice: 172.16.0.0/12].
pub fn dest_ip(i: u32) -> u32 {
    0xAC10_0000 | (i & 0x000F_FFFF)
}

/// A traffic frame from `src` to `dst` (60 bytes: the minimum Ethernet
/// frame without FCS, an 18-byte payload).
pub fn traffic_frame(src: u32, dst: u32) -> Vec<u8> {
    let ep = Endpoints::new(
        [0x02, 0, 0, 0, 0, 1],
        Ipv4Addr::from(src),
        [0x02, 0, 0, 0, 0, 2],
        Ipv4Addr::from(dst),
    );
    build_udp_frame(&ep, TRAFFIC_PORT, TRAFFIC_PORT, &[0u8; 18], false).unwrap_or_default()
}

/// (src, dst) of a traffic frame: IPv4/UDP to [`TRAFFIC_PORT`].
pub fn parse_traffic(frame: &[u8]) -> Option<(u32, u32)> {
    let u = inca_wire::parse_udp_frame(frame).ok()?;
    if u.dst_port != TRAFFIC_PORT {
        return None;
    }
    Some((u32::from(u.src_ip), u32::from(u.dst_ip)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thresholds_follow_from_the_estimates() {
        assert_eq!(block_popcount(), 28, "spec §7: 1,000 destinations");
        assert_eq!(suspicious_popcount(), 20, "spec §7: 500 destinations");
        assert!(estimate(27) < BLOCK_EST && estimate(28) >= BLOCK_EST);
        assert_eq!(popcount(0xFFFF_0001), 17);
    }

    #[test]
    fn sampling_is_about_one_in_sixteen_and_traffic_parses() {
        let n = (0..160_000u32).filter(|&d| sampled(7, d)).count();
        assert!((8_000..12_000).contains(&n), "{n}");
        let f = traffic_frame(source_ip(3), dest_ip(5));
        assert_eq!(parse_traffic(&f), Some((source_ip(3), dest_ip(5))));
        assert_eq!(f.len(), 60);
        assert!(column(2, 9, COLS) < COLS);
        assert_eq!(bit(1, 4).count_ones(), 1);
    }
}
