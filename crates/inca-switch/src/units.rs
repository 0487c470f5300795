//! Quantities with units, as people write them in scenario files and on the
//! command line: times (`20us`, `1.5ms`, `1s`; plain numbers are ns), sizes
//! (`1500`, `22MiB`, `2GB`), rates (`100Gbps`, `40G`) and counts. Decimal
//! fractions are allowed when the result is a whole number of the base unit.

use crate::device::{MICROS, MILLIS, SECONDS};

const TIME: &[(&str, u64)] = &[
    ("", 1),
    ("ns", 1),
    ("us", MICROS),
    ("µs", MICROS),
    ("ms", MILLIS),
    ("s", SECONDS),
];

const SIZE: &[(&str, u64)] = &[
    ("", 1),
    ("B", 1),
    ("KB", 1_000),
    ("kB", 1_000),
    ("MB", 1_000_000),
    ("GB", 1_000_000_000),
    ("TB", 1_000_000_000_000),
    ("KiB", 1 << 10),
    ("MiB", 1 << 20),
    ("GiB", 1 << 30),
    ("TiB", 1 << 40),
];

const RATE: &[(&str, u64)] = &[
    ("", 1),
    ("bps", 1),
    ("k", 1_000),
    ("kbps", 1_000),
    ("Kbps", 1_000),
    ("M", 1_000_000),
    ("Mbps", 1_000_000),
    ("G", 1_000_000_000),
    ("Gbps", 1_000_000_000),
    ("T", 1_000_000_000_000),
    ("Tbps", 1_000_000_000_000),
];

/// A time in nanoseconds.
pub fn parse_time(v: &str) -> Option<u64> {
    parse_scaled(v.trim(), TIME)
}

/// A size in bytes.
pub fn parse_size(v: &str) -> Option<u64> {
    parse_scaled(v.trim(), SIZE)
}

/// A rate in bits per second.
pub fn parse_rate(v: &str) -> Option<u64> {
    parse_scaled(v.trim(), RATE)
}

/// A plain count.
pub fn parse_count(v: &str) -> Option<u64> {
    parse_scaled(v.trim(), &[("", 1)])
}

/// Parses `<number><unit>` where the number is decimal digits (with optional
/// `_` separators and one `.` fraction) and the unit one of `units` (exact,
/// case-sensitive; whitespace between allowed). The result must be a whole
/// number that fits in a u64.
fn parse_scaled(v: &str, units: &[(&str, u64)]) -> Option<u64> {
    let split = v
        .char_indices()
        .find(|&(_, c)| !(c.is_ascii_digit() || c == '_' || c == '.'))
        .map(|(i, _)| i)
        .unwrap_or(v.len());
    let (num, unit) = v.split_at(split);
    let unit = unit.trim();
    let mult = units.iter().find(|(u, _)| *u == unit)?.1;
    let num: String = num.chars().filter(|&c| c != '_').collect();
    let (int, frac) = match num.split_once('.') {
        Some((i, f)) => (i, f),
        None => (num.as_str(), ""),
    };
    if int.is_empty() && frac.is_empty() {
        return None;
    }
    if frac.contains('.') || frac.len() > 18 {
        return None;
    }
    let int_v: u128 = if int.is_empty() { 0 } else { int.parse().ok()? };
    let frac_v: u128 = if frac.is_empty() {
        0
    } else {
        frac.parse().ok()?
    };
    let scale = 10u128.pow(frac.len() as u32);
    let total = (int_v.checked_mul(scale)?.checked_add(frac_v)?).checked_mul(u128::from(mult))?;
    if total / scale * scale != total {
        return None;
    }
    u64::try_from(total / scale).ok()
}

/// A rate for people: `100 Gbps`, `2.5 Mbps`.
pub fn format_rate(bps: u64) -> String {
    scaled(
        bps as f64,
        &[(1e12, "Tbps"), (1e9, "Gbps"), (1e6, "Mbps"), (1e3, "kbps")],
        "bps",
    )
}

/// A size for people: `1.5 MB`.
pub fn format_bytes(bytes: u64) -> String {
    scaled(
        bytes as f64,
        &[(1e12, "TB"), (1e9, "GB"), (1e6, "MB"), (1e3, "kB")],
        "B",
    )
}

/// A time for people: `1.2 ms`.
pub fn format_time(ns: u64) -> String {
    scaled(ns as f64, &[(1e9, "s"), (1e6, "ms"), (1e3, "µs")], "ns")
}

fn scaled(v: f64, steps: &[(f64, &str)], base: &str) -> String {
    let (x, unit) = steps
        .iter()
        .find(|&&(f, _)| v >= f)
        .map_or((v, base), |&(f, unit)| (v / f, unit));
    let s = format!("{x:.3}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    format!("{s} {unit}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_units() {
        assert_eq!(parse_time("20us"), Some(20_000));
        assert_eq!(parse_time("1.5ms"), Some(1_500_000));
        assert_eq!(parse_time("7"), Some(7));
        assert_eq!(parse_time("0.5ns"), None, "not a whole number of ns");
        assert_eq!(parse_size("22MiB"), Some(22 << 20));
        assert_eq!(parse_rate("100Gbps"), Some(100_000_000_000));
        assert_eq!(parse_rate("fast"), None);
        assert_eq!(parse_count("1_000"), Some(1000));
    }

    #[test]
    fn formats_for_people() {
        assert_eq!(format_rate(100_000_000_000), "100 Gbps");
        assert_eq!(format_bytes(1_500_000), "1.5 MB");
        assert_eq!(format_time(1_200_000), "1.2 ms");
        assert_eq!(format_time(999), "999 ns");
    }
}
