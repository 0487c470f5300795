//! Hash units: the CRC-based hash engines a Tofino-class pipeline uses to
//! index register arrays, pick ECMP members and compute flow signatures.
//!
//! A [`HashUnit`] is an algorithm plus an output width; it hashes a byte
//! string (the concatenated fields the program selected) and keeps the low
//! `output_bits` bits of the result, which is how a P4 `Hash<bit<N>>` extern
//! narrows a CRC to an index.
//!
//! The CRC parameterisations are the standard catalogue ones, chosen to agree
//! with what P4 targets call `crc16`/`crc32`/`crc64`:
//!
//! | algorithm | catalogue name | polynomial | reflected | init / xorout | check("123456789") |
//! |---|---|---|---|---|---|
//! | [`HashAlgorithm::Crc16`] | CRC-16/ARC | 0x8005 | yes | 0 / 0 | 0xBB3D |
//! | [`HashAlgorithm::Crc32`] | CRC-32/ISO-HDLC (Ethernet FCS) | 0x04C11DB7 | yes | !0 / !0 | 0xCBF43926 |
//! | [`HashAlgorithm::Crc64`] | CRC-64/XZ (ECMA-182 polynomial) | 0x42F0E1EBA9EA3693 | yes | !0 / !0 | 0x995DC9BBDF1939FA |
//!
//! CRC-16/ARC is BMv2's `crc16` and Tofino's `HashAlgorithm.crc16` default
//! (reflected 0x8005); CRC-32/ISO-HDLC is the Ethernet CRC that both call
//! `crc32`. For 64 bits there is no single P4 convention, so we use the widely
//! deployed reflected ECMA-182 variant (xz, Go's `crc64.ECMA`).
//!
//! The `crc::Crc` engines (with their lookup tables) are built at compile time
//! as `static`s, so hashing never builds a table or allocates.

use crc::{Crc, CRC_16_ARC, CRC_32_ISO_HDLC, CRC_64_XZ};
use thiserror::Error;

// Built at compile time: the table generation is `const fn` in `crc` 3.
static CRC16: Crc<u16> = Crc::<u16>::new(&CRC_16_ARC);
static CRC32: Crc<u32> = Crc::<u32>::new(&CRC_32_ISO_HDLC);
static CRC64: Crc<u64> = Crc::<u64>::new(&CRC_64_XZ);

/// CRC-16/ARC (poly 0x8005, reflected, init 0, xorout 0) of `data`.
#[inline]
pub fn crc16(data: &[u8]) -> u16 {
    CRC16.checksum(data)
}

/// CRC-32/ISO-HDLC (the Ethernet CRC: poly 0x04C11DB7, reflected, init and
/// xorout all ones) of `data`.
#[inline]
pub fn crc32(data: &[u8]) -> u32 {
    CRC32.checksum(data)
}

/// CRC-64/XZ (ECMA-182 poly 0x42F0E1EBA9EA3693, reflected, init and xorout
/// all ones) of `data`.
#[inline]
pub fn crc64(data: &[u8]) -> u64 {
    CRC64.checksum(data)
}

/// The function a [`HashUnit`] computes before truncation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum HashAlgorithm {
    /// CRC-16/ARC, see [`crc16`].
    Crc16,
    /// CRC-32/ISO-HDLC, see [`crc32`].
    Crc32,
    /// CRC-64/XZ, see [`crc64`].
    Crc64,
    /// No hashing: the first (up to) 8 bytes of the input read as a big-endian
    /// number. Programs use it to index an array directly by a field.
    Identity,
}

impl HashAlgorithm {
    /// Width in bits of the algorithm's raw output (the most a [`HashUnit`]
    /// using it may keep).
    pub const fn width(self) -> u8 {
        match self {
            HashAlgorithm::Crc16 => 16,
            HashAlgorithm::Crc32 => 32,
            HashAlgorithm::Crc64 | HashAlgorithm::Identity => 64,
        }
    }

    /// The raw, untruncated output of the algorithm on `data`.
    #[inline]
    pub fn compute(self, data: &[u8]) -> u64 {
        match self {
            HashAlgorithm::Crc16 => u64::from(crc16(data)),
            HashAlgorithm::Crc32 => u64::from(crc32(data)),
            HashAlgorithm::Crc64 => crc64(data),
            HashAlgorithm::Identity => {
                // Big-endian fold of at most 8 bytes: shorter inputs give a
                // smaller number (b"\x12\x34" -> 0x1234), never a panic.
                data.iter()
                    .take(8)
                    .fold(0u64, |acc, &b| (acc << 8) | u64::from(b))
            }
        }
    }
}

/// A [`HashUnit`] could not be built.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum HashError {
    /// The output width is zero or wider than the algorithm produces.
    #[error("hash output of {bits} bits is invalid for {algorithm:?}: must be 1..={max}")]
    OutputBits {
        /// The algorithm asked for.
        algorithm: HashAlgorithm,
        /// The width asked for.
        bits: u8,
        /// The algorithm's width, the largest allowed.
        max: u8,
    },
}

/// A hash engine: an algorithm whose output is truncated to `output_bits`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct HashUnit {
    algorithm: HashAlgorithm,
    output_bits: u8,
    // Precomputed so `hash` is one AND after the CRC.
    mask: u64,
}

impl HashUnit {
    /// Makes a unit keeping the low `output_bits` bits of `algorithm`'s
    /// output; `output_bits` must be in `1..=algorithm.width()`.
    pub fn new(algorithm: HashAlgorithm, output_bits: u8) -> Result<Self, HashError> {
        let max = algorithm.width();
        if output_bits == 0 || output_bits > max {
            return Err(HashError::OutputBits {
                algorithm,
                bits: output_bits,
                max,
            });
        }
        let mask = if output_bits == 64 {
            u64::MAX
        } else {
            (1u64 << output_bits) - 1
        };
        Ok(HashUnit {
            algorithm,
            output_bits,
            mask,
        })
    }

    /// Hashes `data` and returns the low `output_bits` bits.
    #[inline]
    pub fn hash(&self, data: &[u8]) -> u64 {
        self.algorithm.compute(data) & self.mask
    }

    /// The algorithm this unit computes.
    pub fn algorithm(&self) -> HashAlgorithm {
        self.algorithm
    }

    /// How many low bits of the algorithm's output this unit keeps.
    pub fn output_bits(&self) -> u8 {
        self.output_bits
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const CHECK: &[u8] = b"123456789";

    #[test]
    fn standard_check_values() {
        assert_eq!(crc16(CHECK), 0xBB3D);
        assert_eq!(crc32(CHECK), 0xCBF4_3926);
        assert_eq!(crc64(CHECK), 0x995D_C9BB_DF19_39FA);
    }

    #[test]
    fn full_width_units_match_free_functions() {
        let u16_ = HashUnit::new(HashAlgorithm::Crc16, 16).unwrap();
        let u32_ = HashUnit::new(HashAlgorithm::Crc32, 32).unwrap();
        let u64_ = HashUnit::new(HashAlgorithm::Crc64, 64).unwrap();
        assert_eq!(u16_.hash(CHECK), 0xBB3D);
        assert_eq!(u32_.hash(CHECK), 0xCBF4_3926);
        assert_eq!(u64_.hash(CHECK), 0x995D_C9BB_DF19_39FA);
        assert_eq!(u32_.algorithm(), HashAlgorithm::Crc32);
        assert_eq!(u32_.output_bits(), 32);
    }

    #[test]
    fn truncation_keeps_low_bits() {
        let u = HashUnit::new(HashAlgorithm::Crc32, 10).unwrap();
        assert_eq!(u.hash(CHECK), 0xCBF4_3926 & 0x3FF);
        let u = HashUnit::new(HashAlgorithm::Crc16, 1).unwrap();
        assert_eq!(u.hash(CHECK), 0xBB3D & 1);
        let u = HashUnit::new(HashAlgorithm::Crc64, 48).unwrap();
        assert_eq!(u.hash(CHECK), 0x995D_C9BB_DF19_39FA & 0xFFFF_FFFF_FFFF);
    }

    #[test]
    fn identity_is_big_endian_prefix() {
        let u = HashUnit::new(HashAlgorithm::Identity, 64).unwrap();
        assert_eq!(u.hash(&[]), 0);
        assert_eq!(u.hash(&[0x12, 0x34]), 0x1234);
        assert_eq!(
            u.hash(&[1, 2, 3, 4, 5, 6, 7, 8, 9, 10]),
            0x0102_0304_0506_0708
        );
        let u = HashUnit::new(HashAlgorithm::Identity, 8).unwrap();
        assert_eq!(u.hash(&[0x12, 0x34]), 0x34);
    }

    #[test]
    fn bad_widths_are_rejected() {
        for (algo, max) in [
            (HashAlgorithm::Crc16, 16),
            (HashAlgorithm::Crc32, 32),
            (HashAlgorithm::Crc64, 64),
            (HashAlgorithm::Identity, 64),
        ] {
            assert!(HashUnit::new(algo, 0).is_err());
            assert!(HashUnit::new(algo, max).is_ok());
            assert_eq!(
                HashUnit::new(algo, max + 1),
                Err(HashError::OutputBits {
                    algorithm: algo,
                    bits: max + 1,
                    max
                })
            );
        }
        assert!(HashUnit::new(HashAlgorithm::Crc64, 255).is_err());
        let msg = HashUnit::new(HashAlgorithm::Crc16, 17)
            .unwrap_err()
            .to_string();
        assert!(msg.contains("17") && msg.contains("1..=16"), "{msg}");
    }

    proptest! {
        #[test]
        fn output_fits_width(data in proptest::collection::vec(any::<u8>(), 0..64), bits in 1u8..=64) {
            for algo in [HashAlgorithm::Crc16, HashAlgorithm::Crc32, HashAlgorithm::Crc64, HashAlgorithm::Identity] {
                if let Ok(u) = HashUnit::new(algo, bits) {
                    let h = u.hash(&data);
                    prop_assert!(bits == 64 || h >> bits == 0);
                    prop_assert_eq!(h, algo.compute(&data) & u.mask);
                }
            }
        }
    }
}
