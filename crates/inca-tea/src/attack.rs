//! Keys crafted to collide in a TEA switch's hash units (issue 8,
//! adversarial workloads), computed from the same hash units and seeds the
//! data plane uses:
//!
//! - sketch row r: CRC-32([r] ‖ key) & 0xFFFF (spec §5.1 step 2);
//! - dedup Bloom filter j: CRC-32([0x10 + j] ‖ key) & 0x3FFFF (step 4);
//! - bucket: CRC-64/XZ(key) & (n − 1) (step 5).
//!
//! Every CRC with a fixed init and final XOR is affine over GF(2) in its
//! input for inputs of one length, so the keys that collide with a
//! template key are the template XOR the kernel of a linear map, found by
//! Gaussian elimination over the bits an attacker controls (source address
//! host bits and source port), not by search. A consequence worth knowing
//! (docs/reliability.md "Adversarial workloads"): the four sketch rows and the two
//! Bloom-filter arrays are the *same* CRC behind a different first byte,
//! so their linear parts are identical — two keys that collide in one row
//! collide in all four, and then differ in the Bloom filter only in its two
//! extra index bits (at most 4 distinct slots per colliding class).
//!
//! [`craft_sources`] is what a scenario's factory calls for a `tuples`
//! workload's `craft` (`inca_sim::nodes::attack`):
//! - `attack = "sketch"` — classes of keys sharing all four sketch counters
//!   (option `class`, default 4, one per Bloom-filter slot, so each key
//!   still raises its own digest): a class looks hot after `t_hot` packets
//!   in all, each of its keys is reported hot, and the cache churns;
//! - `attack = "bucket"` — keys that all map to one bucket of the table
//!   (sized from the target's `entries` and `load_percent`): past the four
//!   cells of buckets i and i+1 every insert displaces, fails and stashes.

use std::net::{Ipv4Addr, SocketAddrV4};

use inca_apps::params::Params;
use inca_sim::nodes::attack::CraftRequest;
use inca_switch::hash::{HashAlgorithm, HashUnit};

use crate::switch::dataplane::{BF_ARRAYS, BF_BITS, BF_HASHES, CMS_COLS, CMS_HASHES, CMS_ROWS};

pub use crate::switch::dataplane::{BF_SEED, CMS_SEED};
/// Most kernel elements one enumeration visits [our choice: enough for any
/// request a scenario makes; bounds the time a bad request can take].
pub const MAX_VISITS: u64 = 1 << 22;

/// A bit of a key an attacker controls: (byte index, bit mask).
pub type FreeBit = (usize, u8);

/// `data` through a hash unit like the one the data plane declares (0 for
/// a width the algorithm cannot give, which the callers never ask for).
fn hash(alg: HashAlgorithm, bits: u8, data: &[u8]) -> u64 {
    HashUnit::new(alg, bits).map_or(0, |u| u.hash(data))
}

/// The sketch counter index of `key` in row `r`, as the data plane computes it.
pub fn cms_index(r: usize, key: &[u8]) -> u64 {
    CMS_HASHES.hash(r, CMS_COLS.trailing_zeros() as u8, key)
}

/// The dedup Bloom-filter bit of `key` in array `j`.
pub fn bf_index(j: usize, key: &[u8]) -> u64 {
    BF_HASHES.hash(j, BF_BITS.trailing_zeros() as u8, key)
}

/// The bucket of `key` in a table of 2^`log2_buckets` buckets.
pub fn bucket_index(log2_buckets: u32, key: &[u8]) -> u64 {
    hash(HashAlgorithm::Crc64, log2_buckets as u8, key)
}

/// All four sketch indices of `key`, packed 16 bits each.
pub fn sketch_signature(key: &[u8]) -> u64 {
    (0..CMS_ROWS).fold(0, |acc, r| acc | (cms_index(r, key) << (16 * r)))
}

fn flip(key: &mut [u8], free: &[FreeBit], combo: u64) {
    for (i, &(byte, mask)) in free.iter().enumerate() {
        if combo >> i & 1 == 1 {
            key[byte] ^= mask;
        }
    }
}

/// A basis of the combinations of `free` bits (bit i of a combination
/// flips `free[i]`) that leave `f` unchanged, `f` being affine over GF(2)
/// (a CRC of fixed-length input, masked). At most 64 free bits.
pub fn kernel(template: &[u8], free: &[FreeBit], f: impl Fn(&[u8]) -> u64) -> Vec<u64> {
    let base = f(template);
    let mut basis: [Option<(u64, u64)>; 64] = [None; 64];
    let mut kernel = Vec::new();
    for i in 0..free.len().min(64) {
        let mut k = template.to_vec();
        flip(&mut k, free, 1 << i);
        let (mut v, mut c) = (f(&k) ^ base, 1u64 << i);
        for b in (0..64).rev() {
            if v >> b & 1 == 0 {
                continue;
            }
            match basis[b] {
                Some((bv, bc)) => {
                    v ^= bv;
                    c ^= bc;
                }
                None => {
                    basis[b] = Some((v, c));
                    break;
                }
            }
        }
        if v == 0 {
            kernel.push(c);
        }
    }
    kernel
}

/// Up to `want` distinct keys (the template first) that `f` maps where it
/// maps the template, each checked against `f` itself; visits at most
/// [`MAX_VISITS`] kernel elements.
pub fn colliding(
    template: &[u8],
    free: &[FreeBit],
    want: usize,
    f: impl Fn(&[u8]) -> u64,
) -> Vec<Vec<u8>> {
    let target = f(template);
    let ker = kernel(template, free, &f);
    let total = if ker.len() >= 63 {
        u64::MAX
    } else {
        1u64 << ker.len()
    };
    let mut out = Vec::new();
    let mut key = template.to_vec();
    let mut combo = 0u64;
    for idx in 0..total.min(MAX_VISITS) {
        if out.len() >= want {
            break;
        }
        if idx > 0 {
            // Gray code: one kernel vector changes per step.
            let j = idx.trailing_zeros() as usize;
            combo ^= ker[j];
            key.copy_from_slice(template);
            flip(&mut key, free, combo);
        }
        if f(&key) == target {
            out.push(key.clone());
        }
    }
    out
}

/// The attacker's key space for 5-tuple keys (NAT, firewall, LB: src ‖ dst
/// ‖ proto ‖ sport ‖ dport): the template key and its free bits — the
/// prefix's host bits and the largest aligned power-of-two block of ports
/// inside the range.
pub fn five_tuple_space(
    prefix: (Ipv4Addr, u8),
    ports: (u16, u16),
    dst: SocketAddrV4,
    proto: u8,
) -> (Vec<u8>, Vec<FreeBit>) {
    let (lo, hi) = (u32::from(ports.0), u32::from(ports.1));
    let (base, k) = (0..=16u32)
        .rev()
        .find_map(|k| {
            let size = 1u32 << k;
            let base = lo.div_ceil(size) * size;
            (base + size - 1 <= hi).then_some((base, k))
        })
        .unwrap_or((lo, 0));
    let mut key = Vec::with_capacity(13);
    key.extend_from_slice(&prefix.0.octets());
    key.extend_from_slice(&dst.ip().octets());
    key.push(proto);
    key.extend_from_slice(&(base as u16).to_be_bytes());
    key.extend_from_slice(&dst.port().to_be_bytes());
    let mut free = Vec::new();
    for b in 0..32 - u32::from(prefix.1.min(32)) {
        free.push((3 - (b / 8) as usize, 1u8 << (b % 8)));
    }
    for b in 0..k {
        free.push((10 - (b / 8) as usize, 1u8 << (b % 8)));
    }
    (key, free)
}

/// `classes` classes of up to `class` keys each: the keys of a class share
/// all four sketch counters and take distinct Bloom-filter slots first;
/// classes have distinct sketch signatures. Class c starts from the
/// template with its c-th free bit pattern varied outside the kernel.
pub fn sketch_classes(
    template: &[u8],
    free: &[FreeBit],
    classes: usize,
    class: usize,
) -> Vec<Vec<Vec<u8>>> {
    let mut out: Vec<Vec<Vec<u8>>> = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    let mut start = 0u64;
    while out.len() < classes && start < MAX_VISITS {
        let mut t = template.to_vec();
        flip(&mut t, free, start);
        start += 1;
        if !seen.insert(sketch_signature(&t)) {
            continue;
        }
        // Distinct Bloom-filter slots first (each still digests), then any.
        let members = colliding(&t, free, class.max(4) * 64, sketch_signature);
        let mut picked: Vec<Vec<u8>> = Vec::new();
        let mut slots = std::collections::BTreeSet::new();
        for m in &members {
            if picked.len() < class && slots.insert(bf_index(0, m)) {
                picked.push(m.clone());
            }
        }
        for m in members {
            if picked.len() >= class {
                break;
            }
            if !picked.contains(&m) {
                picked.push(m);
            }
        }
        if picked.len() >= class.min(2) {
            out.push(picked);
        }
    }
    out
}

/// The sources of 5-tuple keys (bytes 0..4 and 9..11).
fn sources(keys: &[Vec<u8>]) -> Vec<SocketAddrV4> {
    keys.iter()
        .filter(|k| k.len() == 13)
        .map(|k| {
            SocketAddrV4::new(
                Ipv4Addr::new(k[0], k[1], k[2], k[3]),
                u16::from_be_bytes([k[9], k[10]]),
            )
        })
        .collect()
}

/// Crafted sources for a scenario's `tuples` workload (see the module
/// documentation). Only the 5-tuple NFs (NAT, firewall, LB) are supported.
pub fn craft_sources(req: &CraftRequest) -> Result<Vec<SocketAddrV4>, String> {
    if !matches!(req.program.as_str(), "tea_nat" | "tea_firewall" | "tea_lb") {
        return Err(format!(
            "program {:?}: crafted keys need a 5-tuple TEA NF (tea_nat, tea_firewall, tea_lb)",
            req.program
        ));
    }
    let (template, free) = five_tuple_space(req.src_prefix, req.src_ports, req.dst, req.proto);
    let opt = |name: &str, default: usize| -> Result<usize, String> {
        match req.options.get(name) {
            None => Ok(default),
            Some(v) => v
                .as_integer()
                .filter(|&n| n >= 1)
                .map(|n| n as usize)
                .ok_or_else(|| format!("options.{name}: want a positive integer")),
        }
    };
    let keys: Vec<Vec<u8>> = match req.attack.as_str() {
        "sketch" => {
            let class = opt("class", 4)?;
            let classes = req.keys.div_ceil(class);
            sketch_classes(&template, &free, classes, class)
                .into_iter()
                .flatten()
                .take(req.keys)
                .collect()
        }
        "bucket" => {
            let pairs: Vec<String> = req.params.iter().map(|(k, v)| format!("{k}={v}")).collect();
            let p = Params::parse(pairs.iter().map(String::as_str)).map_err(|e| e.to_string())?;
            let v = if req.program == "tea_firewall" { 1 } else { 6 };
            let log2 = crate::catalog::table_log2_buckets(&p, 13, v)?;
            colliding(&template, &free, req.keys, |k| bucket_index(log2, k))
        }
        other => {
            return Err(format!(
                "unknown attack {other:?}; TEA crafts \"sketch\" and \"bucket\""
            ))
        }
    };
    if keys.len() < req.keys {
        return Err(format!(
            "only {} of {} keys exist in {} free bits (widen src_prefix or src_ports)",
            keys.len(),
            req.keys,
            free.len()
        ));
    }
    Ok(sources(&keys))
}

/// Sketch rows and Bloom-filter arrays the data plane declares (checked in
/// the tests against what this module assumes).
pub const SHAPE: (usize, usize) = (CMS_ROWS, BF_ARRAYS);

#[cfg(test)]
mod tests {
    use super::*;

    fn space() -> (Vec<u8>, Vec<FreeBit>) {
        five_tuple_space(
            (Ipv4Addr::new(10, 96, 0, 0), 16),
            (1024, 65535),
            SocketAddrV4::new(Ipv4Addr::new(192, 0, 2, 1), 5000),
            17,
        )
    }

    #[test]
    fn the_space_is_the_prefix_and_an_aligned_port_block() {
        let (t, free) = space();
        assert_eq!(&t[..4], &[10, 96, 0, 0]);
        assert_eq!(u16::from_be_bytes([t[9], t[10]]), 32768);
        assert_eq!(free.len(), 16 + 15);
        let (t, free) = five_tuple_space(
            (Ipv4Addr::new(10, 2, 0, 0), 22),
            (5000, 5000),
            SocketAddrV4::new(Ipv4Addr::new(192, 0, 2, 1), 5000),
            17,
        );
        assert_eq!(u16::from_be_bytes([t[9], t[10]]), 5000);
        assert_eq!(free.len(), 10);
    }

    #[test]
    fn sketch_collisions_share_every_row_and_spread_over_bloom_slots() {
        assert_eq!(SHAPE, (4, 2));
        let (t, free) = space();
        let classes = sketch_classes(&t, &free, 3, 4);
        assert_eq!(classes.len(), 3);
        let mut sigs = Vec::new();
        for c in &classes {
            assert_eq!(c.len(), 4);
            let sig = sketch_signature(&c[0]);
            for k in c {
                for r in 0..CMS_ROWS {
                    assert_eq!(cms_index(r, k), cms_index(r, &c[0]), "row {r}");
                }
            }
            let mut slots: Vec<u64> = c.iter().map(|k| bf_index(0, k)).collect();
            slots.sort();
            slots.dedup();
            assert_eq!(slots.len(), 4, "one Bloom-filter slot per key");
            // Same linear part: the arrays agree on which keys collide.
            for k in c {
                assert_eq!(bf_index(0, k) & 0xFFFF, bf_index(0, &c[0]) & 0xFFFF);
                assert_eq!(bf_index(1, k) & 0xFFFF, bf_index(1, &c[0]) & 0xFFFF);
            }
            sigs.push(sig);
        }
        sigs.dedup();
        assert_eq!(sigs.len(), 3, "classes are distinct");
    }

    #[test]
    fn the_kernel_has_the_expected_dimension() {
        let (t, free) = space();
        // Rows share their linear part: 31 free bits, rank 16, not 64.
        assert_eq!(kernel(&t, &free, sketch_signature).len(), 31 - 16);
        assert_eq!(kernel(&t, &free, |k| bucket_index(21, k)).len(), 31 - 21);
    }

    #[test]
    fn bucket_collisions_land_in_one_bucket_and_match_the_layout() {
        let (t, free) = space();
        let keys = colliding(&t, &free, 64, |k| bucket_index(20, k));
        assert_eq!(keys.len(), 64);
        let layout = crate::table::layout::Layout::new(13, 6, 2, 20).unwrap();
        let b = layout.bucket_of(&keys[0]);
        assert!(keys.iter().all(|k| layout.bucket_of(k) == b));
        let mut d = keys.clone();
        d.sort();
        d.dedup();
        assert_eq!(d.len(), 64);
    }

    #[test]
    fn craft_requests_are_checked() {
        let mut req = CraftRequest {
            program: "tea_nat".into(),
            params: vec![("entries".into(), "100000".into())],
            attack: "bucket".into(),
            keys: 32,
            dst: SocketAddrV4::new(Ipv4Addr::new(192, 0, 2, 1), 5000),
            proto: 17,
            src_prefix: (Ipv4Addr::new(10, 96, 0, 0), 16),
            src_ports: (1024, 65535),
            options: Default::default(),
        };
        let got = craft_sources(&req).unwrap();
        assert_eq!(got.len(), 32);
        req.attack = "sketch".into();
        assert_eq!(craft_sources(&req).unwrap().len(), 32);
        req.attack = "nope".into();
        assert!(craft_sources(&req).is_err());
        req.attack = "bucket".into();
        req.src_prefix = (Ipv4Addr::new(10, 96, 0, 0), 30);
        req.src_ports = (5000, 5000);
        assert!(
            craft_sources(&req).is_err(),
            "2 free bits cannot hold 32 keys"
        );
        req.program = "tea_vpn".into();
        assert!(craft_sources(&req).is_err());
    }
}
