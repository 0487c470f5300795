//! Hash units: the CRC-based hash engines a Tofino-class pipeline uses to
//! index register arrays, pick ECMP members and compute flow signatures.
//!
//! A [`HashUnit`] is an algorithm plus an output width; it hashes a byte
//! string (the concatenated fields the program selected) and keeps the low
//! `output_bits` bits of the result, which is how a P4 `Hash<bit<N>>` extern
//! narrows a CRC to an index.
//!
//! Every CRC is a parameterisation from the reveng CRC catalogue (via the
//! `crc` crate's copy of it), so an algorithm is fully named by its
//! catalogue entry and checked against the catalogue's published `check`
//! value (the CRC of ASCII `"123456789"`):
//!
//! | algorithm | catalogue name | polynomial | reflected | init / xorout | check |
//! |---|---|---|---|---|---|
//! | [`Crc16`](HashAlgorithm::Crc16) | CRC-16/ARC | 0x8005 | yes | 0 / 0 | 0xBB3D |
//! | [`Crc16Ibm3740`](HashAlgorithm::Crc16Ibm3740) | CRC-16/IBM-3740 (CCITT-FALSE) | 0x1021 | no | 0xFFFF / 0 | 0x29B1 |
//! | [`Crc16Xmodem`](HashAlgorithm::Crc16Xmodem) | CRC-16/XMODEM | 0x1021 | no | 0 / 0 | 0x31C3 |
//! | [`Crc16Kermit`](HashAlgorithm::Crc16Kermit) | CRC-16/KERMIT | 0x1021 | yes | 0 / 0 | 0x2189 |
//! | [`Crc16Dnp`](HashAlgorithm::Crc16Dnp) | CRC-16/DNP | 0x3D65 | yes | 0 / 0xFFFF | 0xEA82 |
//! | [`Crc16Modbus`](HashAlgorithm::Crc16Modbus) | CRC-16/MODBUS | 0x8005 | yes | 0xFFFF / 0 | 0x4B37 |
//! | [`Crc16T10Dif`](HashAlgorithm::Crc16T10Dif) | CRC-16/T10-DIF | 0x8BB7 | no | 0 / 0 | 0xD0DB |
//! | [`Crc16Usb`](HashAlgorithm::Crc16Usb) | CRC-16/USB | 0x8005 | yes | 0xFFFF / 0xFFFF | 0xB4C8 |
//! | [`Crc32`](HashAlgorithm::Crc32) | CRC-32/ISO-HDLC (Ethernet FCS) | 0x04C11DB7 | yes | !0 / !0 | 0xCBF43926 |
//! | [`Crc32c`](HashAlgorithm::Crc32c) | CRC-32/ISCSI (CRC-32C) | 0x1EDC6F41 | yes | !0 / !0 | 0xE3069283 |
//! | [`Crc32d`](HashAlgorithm::Crc32d) | CRC-32/BASE91-D (CRC-32D) | 0xA833982B | yes | !0 / !0 | 0x87315576 |
//! | [`Crc32q`](HashAlgorithm::Crc32q) | CRC-32/AIXM (CRC-32Q) | 0x814141AB | no | 0 / 0 | 0x3010BF7F |
//! | [`Crc32Bzip2`](HashAlgorithm::Crc32Bzip2) | CRC-32/BZIP2 | 0x04C11DB7 | no | !0 / !0 | 0xFC891918 |
//! | [`Crc32Mpeg2`](HashAlgorithm::Crc32Mpeg2) | CRC-32/MPEG-2 | 0x04C11DB7 | no | !0 / 0 | 0x0376E6E7 |
//! | [`Crc32Autosar`](HashAlgorithm::Crc32Autosar) | CRC-32/AUTOSAR | 0xF4ACFB13 | yes | !0 / !0 | 0x1697D06A |
//! | [`Crc32Mef`](HashAlgorithm::Crc32Mef) | CRC-32/MEF (Koopman) | 0x741B8CD7 | yes | !0 / 0 | 0xD2C22F51 |
//! | [`Crc64`](HashAlgorithm::Crc64) | CRC-64/XZ | 0x42F0E1EBA9EA3693 | yes | !0 / !0 | 0x995DC9BBDF1939FA |
//! | [`Crc64Ecma182`](HashAlgorithm::Crc64Ecma182) | CRC-64/ECMA-182 | 0x42F0E1EBA9EA3693 | no | 0 / 0 | 0x6C40DF5F0B497347 |
//! | [`Crc64GoIso`](HashAlgorithm::Crc64GoIso) | CRC-64/GO-ISO | 0x1B | yes | !0 / !0 | 0xB90956C775A41001 |
//!
//! Why this set: `crc16` and `crc32` are what BMv2 and Tofino's
//! `HashAlgorithm_t.CRC16`/`CRC32` compute (CRC-16/ARC, the Ethernet CRC);
//! CRC-32C/D/Q and the CRC-16 variants are the named polynomials the Tofino
//! compiler's predefined-algorithm list offers (`crc_16_dnp`, `crc_32c`,
//! `crc_32d`, `crc_32q`, `xmodem`, `crc_ccitt_false`, ...). For 64 bits the
//! Tofino compiler's `crc_64` is CRC-64/ECMA-182 (not reflected, init 0,
//! xorout 0); [`Crc64`](HashAlgorithm::Crc64) stays the reflected CRC-64/XZ
//! (Go's `crc64.ECMA`, xz) that programs here have always used, and a
//! program modelling Tofino's `crc64` picks
//! [`Crc64Ecma182`](HashAlgorithm::Crc64Ecma182).
//!
//! **Independent rows.** A sketch (count-min, UnivMon) needs rows whose
//! indices are independent. CRCs are affine over GF(2), so two "seeds" of
//! one polynomial (different init values) differ by a constant XOR for
//! equal-length keys: their rows collide on exactly the same key pairs.
//! Rows therefore take pairwise distinct generator polynomials, as Tofino
//! sketch programs do: [`HashAlgorithm::independent_row`] and
//! [`HashUnit::independent_rows`].
//!
//! The `crc::Crc` engines (with their lookup tables) are built at compile time
//! as `static`s, so hashing never builds a table or allocates.

use crc::{
    Crc, CRC_16_ARC, CRC_16_DNP, CRC_16_IBM_3740, CRC_16_KERMIT, CRC_16_MODBUS, CRC_16_T10_DIF,
    CRC_16_USB, CRC_16_XMODEM, CRC_32_AIXM, CRC_32_AUTOSAR, CRC_32_BASE91_D, CRC_32_BZIP2,
    CRC_32_ISCSI, CRC_32_ISO_HDLC, CRC_32_MEF, CRC_32_MPEG_2, CRC_64_ECMA_182, CRC_64_GO_ISO,
    CRC_64_XZ,
};
use thiserror::Error;

// Built at compile time: the table generation is `const fn` in `crc` 3.
static CRC16: Crc<u16> = Crc::<u16>::new(&CRC_16_ARC);
static CRC16_IBM_3740: Crc<u16> = Crc::<u16>::new(&CRC_16_IBM_3740);
static CRC16_XMODEM: Crc<u16> = Crc::<u16>::new(&CRC_16_XMODEM);
static CRC16_KERMIT: Crc<u16> = Crc::<u16>::new(&CRC_16_KERMIT);
static CRC16_DNP: Crc<u16> = Crc::<u16>::new(&CRC_16_DNP);
static CRC16_MODBUS: Crc<u16> = Crc::<u16>::new(&CRC_16_MODBUS);
static CRC16_T10_DIF: Crc<u16> = Crc::<u16>::new(&CRC_16_T10_DIF);
static CRC16_USB: Crc<u16> = Crc::<u16>::new(&CRC_16_USB);
static CRC32: Crc<u32> = Crc::<u32>::new(&CRC_32_ISO_HDLC);
static CRC32C: Crc<u32> = Crc::<u32>::new(&CRC_32_ISCSI);
static CRC32D: Crc<u32> = Crc::<u32>::new(&CRC_32_BASE91_D);
static CRC32Q: Crc<u32> = Crc::<u32>::new(&CRC_32_AIXM);
static CRC32_BZIP2: Crc<u32> = Crc::<u32>::new(&CRC_32_BZIP2);
static CRC32_MPEG2: Crc<u32> = Crc::<u32>::new(&CRC_32_MPEG_2);
static CRC32_AUTOSAR: Crc<u32> = Crc::<u32>::new(&CRC_32_AUTOSAR);
static CRC32_MEF: Crc<u32> = Crc::<u32>::new(&CRC_32_MEF);
static CRC64: Crc<u64> = Crc::<u64>::new(&CRC_64_XZ);
static CRC64_ECMA_182: Crc<u64> = Crc::<u64>::new(&CRC_64_ECMA_182);
static CRC64_GO_ISO: Crc<u64> = Crc::<u64>::new(&CRC_64_GO_ISO);

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

/// The function a [`HashUnit`] computes before truncation. The CRC
/// variants are catalogue entries; see the module documentation's table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum HashAlgorithm {
    /// CRC-16/ARC, see [`crc16`] (P4's `crc16`).
    Crc16,
    /// CRC-16/IBM-3740, also known as CRC-16/CCITT-FALSE.
    Crc16Ibm3740,
    /// CRC-16/XMODEM.
    Crc16Xmodem,
    /// CRC-16/KERMIT.
    Crc16Kermit,
    /// CRC-16/DNP.
    Crc16Dnp,
    /// CRC-16/MODBUS.
    Crc16Modbus,
    /// CRC-16/T10-DIF.
    Crc16T10Dif,
    /// CRC-16/USB.
    Crc16Usb,
    /// CRC-32/ISO-HDLC, see [`crc32`] (P4's `crc32`).
    Crc32,
    /// CRC-32C: CRC-32/ISCSI.
    Crc32c,
    /// CRC-32D: CRC-32/BASE91-D.
    Crc32d,
    /// CRC-32Q: CRC-32/AIXM.
    Crc32q,
    /// CRC-32/BZIP2.
    Crc32Bzip2,
    /// CRC-32/MPEG-2.
    Crc32Mpeg2,
    /// CRC-32/AUTOSAR.
    Crc32Autosar,
    /// CRC-32/MEF (Koopman's polynomial).
    Crc32Mef,
    /// CRC-64/XZ, see [`crc64`].
    Crc64,
    /// CRC-64/ECMA-182: the Tofino compiler's `crc_64` (poly
    /// 0x42F0E1EBA9EA3693, not reflected, init 0, xorout 0).
    Crc64Ecma182,
    /// CRC-64/GO-ISO.
    Crc64GoIso,
    /// No hashing: the first (up to) 8 bytes of the input read as a big-endian
    /// number. Programs use it to index an array directly by a field.
    Identity,
}

/// 32-bit CRCs with pairwise distinct generator polynomials, in the order
/// sketch rows take them (see the module documentation). The first four
/// are the ones Tofino sketch programs usually pick (CRC-32, -32C, -32D,
/// -32Q).
const INDEPENDENT_ROWS: [HashAlgorithm; 6] = [
    HashAlgorithm::Crc32,
    HashAlgorithm::Crc32c,
    HashAlgorithm::Crc32d,
    HashAlgorithm::Crc32q,
    HashAlgorithm::Crc32Autosar,
    HashAlgorithm::Crc32Mef,
];

impl HashAlgorithm {
    /// Every algorithm, in declaration order.
    pub const ALL: [HashAlgorithm; 20] = [
        HashAlgorithm::Crc16,
        HashAlgorithm::Crc16Ibm3740,
        HashAlgorithm::Crc16Xmodem,
        HashAlgorithm::Crc16Kermit,
        HashAlgorithm::Crc16Dnp,
        HashAlgorithm::Crc16Modbus,
        HashAlgorithm::Crc16T10Dif,
        HashAlgorithm::Crc16Usb,
        HashAlgorithm::Crc32,
        HashAlgorithm::Crc32c,
        HashAlgorithm::Crc32d,
        HashAlgorithm::Crc32q,
        HashAlgorithm::Crc32Bzip2,
        HashAlgorithm::Crc32Mpeg2,
        HashAlgorithm::Crc32Autosar,
        HashAlgorithm::Crc32Mef,
        HashAlgorithm::Crc64,
        HashAlgorithm::Crc64Ecma182,
        HashAlgorithm::Crc64GoIso,
        HashAlgorithm::Identity,
    ];

    /// How many sketch rows [`independent_row`](Self::independent_row) can
    /// give distinct polynomials to.
    pub const INDEPENDENT_ROWS: usize = INDEPENDENT_ROWS.len();

    /// Width in bits of the algorithm's raw output (the most a [`HashUnit`]
    /// using it may keep).
    pub const fn width(self) -> u8 {
        use HashAlgorithm::*;
        match self {
            Crc16 | Crc16Ibm3740 | Crc16Xmodem | Crc16Kermit | Crc16Dnp | Crc16Modbus
            | Crc16T10Dif | Crc16Usb => 16,
            Crc32 | Crc32c | Crc32d | Crc32q | Crc32Bzip2 | Crc32Mpeg2 | Crc32Autosar
            | Crc32Mef => 32,
            Crc64 | Crc64Ecma182 | Crc64GoIso | Identity => 64,
        }
    }

    /// The algorithm's name in the reveng CRC catalogue (`"identity"` for
    /// [`Identity`](Self::Identity)).
    pub const fn catalogue_name(self) -> &'static str {
        use HashAlgorithm::*;
        match self {
            Crc16 => "CRC-16/ARC",
            Crc16Ibm3740 => "CRC-16/IBM-3740",
            Crc16Xmodem => "CRC-16/XMODEM",
            Crc16Kermit => "CRC-16/KERMIT",
            Crc16Dnp => "CRC-16/DNP",
            Crc16Modbus => "CRC-16/MODBUS",
            Crc16T10Dif => "CRC-16/T10-DIF",
            Crc16Usb => "CRC-16/USB",
            Crc32 => "CRC-32/ISO-HDLC",
            Crc32c => "CRC-32/ISCSI",
            Crc32d => "CRC-32/BASE91-D",
            Crc32q => "CRC-32/AIXM",
            Crc32Bzip2 => "CRC-32/BZIP2",
            Crc32Mpeg2 => "CRC-32/MPEG-2",
            Crc32Autosar => "CRC-32/AUTOSAR",
            Crc32Mef => "CRC-32/MEF",
            Crc64 => "CRC-64/XZ",
            Crc64Ecma182 => "CRC-64/ECMA-182",
            Crc64GoIso => "CRC-64/GO-ISO",
            Identity => "identity",
        }
    }

    /// The algorithm for row `row` of a sketch whose rows must hash
    /// independently: 32-bit CRCs with pairwise distinct polynomials. Rows
    /// past [`INDEPENDENT_ROWS`](Self::INDEPENDENT_ROWS) are an error, not
    /// a silent reuse of a polynomial.
    pub fn independent_row(row: usize) -> Result<HashAlgorithm, HashError> {
        INDEPENDENT_ROWS
            .get(row)
            .copied()
            .ok_or(HashError::TooManyRows {
                rows: row + 1,
                max: INDEPENDENT_ROWS.len(),
            })
    }

    /// The raw, untruncated output of the algorithm on `data`.
    #[inline]
    pub fn compute(self, data: &[u8]) -> u64 {
        use HashAlgorithm::*;
        match self {
            Crc16 => u64::from(crc16(data)),
            Crc16Ibm3740 => u64::from(CRC16_IBM_3740.checksum(data)),
            Crc16Xmodem => u64::from(CRC16_XMODEM.checksum(data)),
            Crc16Kermit => u64::from(CRC16_KERMIT.checksum(data)),
            Crc16Dnp => u64::from(CRC16_DNP.checksum(data)),
            Crc16Modbus => u64::from(CRC16_MODBUS.checksum(data)),
            Crc16T10Dif => u64::from(CRC16_T10_DIF.checksum(data)),
            Crc16Usb => u64::from(CRC16_USB.checksum(data)),
            Crc32 => u64::from(crc32(data)),
            Crc32c => u64::from(CRC32C.checksum(data)),
            Crc32d => u64::from(CRC32D.checksum(data)),
            Crc32q => u64::from(CRC32Q.checksum(data)),
            Crc32Bzip2 => u64::from(CRC32_BZIP2.checksum(data)),
            Crc32Mpeg2 => u64::from(CRC32_MPEG2.checksum(data)),
            Crc32Autosar => u64::from(CRC32_AUTOSAR.checksum(data)),
            Crc32Mef => u64::from(CRC32_MEF.checksum(data)),
            Crc64 => crc64(data),
            Crc64Ecma182 => CRC64_ECMA_182.checksum(data),
            Crc64GoIso => CRC64_GO_ISO.checksum(data),
            Identity => {
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
    /// More independent sketch rows than there are distinct polynomials.
    #[error("{rows} independent hash rows asked for; at most {max} have distinct polynomials")]
    TooManyRows {
        /// Rows asked for.
        rows: usize,
        /// Rows available.
        max: usize,
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

    /// `rows` units of `output_bits` bits whose outputs are independent of
    /// each other: row `i` uses [`HashAlgorithm::independent_row`]`(i)`.
    pub fn independent_rows(rows: usize, output_bits: u8) -> Result<Vec<HashUnit>, HashError> {
        (0..rows)
            .map(|row| HashUnit::new(HashAlgorithm::independent_row(row)?, output_bits))
            .collect()
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

    /// Each algorithm's CRC of "123456789" is the `check` value published
    /// in the reveng catalogue (typed in from the catalogue, not read from
    /// the `crc` crate the implementation uses).
    #[test]
    fn catalogue_check_values() {
        use HashAlgorithm::*;
        let published: [(HashAlgorithm, u64); 19] = [
            (Crc16, 0xBB3D),
            (Crc16Ibm3740, 0x29B1),
            (Crc16Xmodem, 0x31C3),
            (Crc16Kermit, 0x2189),
            (Crc16Dnp, 0xEA82),
            (Crc16Modbus, 0x4B37),
            (Crc16T10Dif, 0xD0DB),
            (Crc16Usb, 0xB4C8),
            (Crc32, 0xCBF4_3926),
            (Crc32c, 0xE306_9283),
            (Crc32d, 0x8731_5576),
            (Crc32q, 0x3010_BF7F),
            (Crc32Bzip2, 0xFC89_1918),
            (Crc32Mpeg2, 0x0376_E6E7),
            (Crc32Autosar, 0x1697_D06A),
            (Crc32Mef, 0xD2C2_2F51),
            (Crc64, 0x995D_C9BB_DF19_39FA),
            (Crc64Ecma182, 0x6C40_DF5F_0B49_7347),
            (Crc64GoIso, 0xB909_56C7_75A4_1001),
        ];
        for (algo, check) in published {
            assert_eq!(
                algo.compute(CHECK),
                check,
                "{} ({algo:?})",
                algo.catalogue_name()
            );
            let unit = HashUnit::new(algo, algo.width()).unwrap();
            assert_eq!(unit.hash(CHECK), check);
        }
        // Every CRC in `ALL` is in the list above (Identity is not a CRC).
        assert_eq!(published.len() + 1, HashAlgorithm::ALL.len());
        for algo in HashAlgorithm::ALL {
            assert!(
                algo == Identity || published.iter().any(|&(a, _)| a == algo),
                "{algo:?} has no published check value in this test"
            );
        }
    }

    /// The Tofino compiler's CRC-64 and the CRC-64/XZ used so far share a
    /// polynomial but differ (reflection, init, xorout): both selectable.
    #[test]
    fn tofino_crc64_is_distinct_from_xz() {
        assert_ne!(
            HashAlgorithm::Crc64Ecma182.compute(CHECK),
            HashAlgorithm::Crc64.compute(CHECK)
        );
        // ECMA-182 has init 0 and xorout 0, so it is linear: CRC(0...) = 0.
        assert_eq!(HashAlgorithm::Crc64Ecma182.compute(&[0; 13]), 0);
    }

    /// Chi-square statistic of the joint distribution of two bucket
    /// sequences over `w` × `w` cells against the uniform one.
    fn joint_chi_square(a: &[u64], b: &[u64], w: u64) -> f64 {
        let mut cells = vec![0u64; (w * w) as usize];
        for (&x, &y) in a.iter().zip(b) {
            cells[(x * w + y) as usize] += 1;
        }
        let expected = a.len() as f64 / (w * w) as f64;
        cells
            .iter()
            .map(|&c| (c as f64 - expected).powi(2) / expected)
            .sum()
    }

    /// Structured keys, the hard case for a linear hash: 13-byte 5-tuples
    /// from 10.0.0.0/16 and ports counting up, as a sketch sees them.
    fn five_tuples(n: u32) -> Vec<[u8; 13]> {
        (0..n)
            .map(|i| {
                let mut k = [0u8; 13];
                k[0..4].copy_from_slice(&(0x0A00_0000 | (i & 0xFFFF)).to_be_bytes());
                k[4..8].copy_from_slice(&0x0A01_0001u32.to_be_bytes());
                k[8..10].copy_from_slice(&(1024 + (i >> 16) as u16).to_be_bytes());
                k[10..12].copy_from_slice(&80u16.to_be_bytes());
                k[12] = 6;
                k
            })
            .collect()
    }

    /// Random 5-tuples from a seeded generator.
    fn random_keys(n: u32) -> Vec<[u8; 13]> {
        use rand::{RngCore, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(14);
        (0..n)
            .map(|_| {
                let mut k = [0u8; 13];
                rng.fill_bytes(&mut k);
                k
            })
            .collect()
    }

    /// Rows of a sketch index independently: for every pair of rows the
    /// joint distribution of their 6-bit buckets over 2^17 keys passes a
    /// chi-square test against uniform (4,095 degrees of freedom: mean
    /// 4,095, sd 90.5; the bound is mean + 6 sd). With random keys the
    /// statistic lands near the mean; with the structured keys (a full
    /// 2^17 subspace) the rows' joint linear map has full rank, so every
    /// cell gets exactly 32 keys and the statistic is 0. Two "seeds" of one
    /// polynomial (init values) fail the same test by orders of magnitude,
    /// which is why rows take distinct polynomials.
    #[test]
    fn independent_rows_are_statistically_independent() {
        const W: u64 = 64;
        let rows = HashUnit::independent_rows(HashAlgorithm::INDEPENDENT_ROWS, 6).unwrap();
        let dof = (W * W - 1) as f64;
        let bound = dof + 6.0 * (2.0 * dof).sqrt();
        for keys in [five_tuples(1 << 17), random_keys(1 << 17)] {
            let buckets: Vec<Vec<u64>> = rows
                .iter()
                .map(|u| keys.iter().map(|k| u.hash(k)).collect())
                .collect();
            for i in 0..rows.len() {
                for j in i + 1..rows.len() {
                    let chi = joint_chi_square(&buckets[i], &buckets[j], W);
                    assert!(
                        chi < bound,
                        "rows {i} ({:?}) and {j} ({:?}): chi-square {chi:.0} >= {bound:.0}",
                        rows[i].algorithm(),
                        rows[j].algorithm()
                    );
                }
            }
            // Negative control: CRC-32 with a different init value.
            let seeded = crc::Crc::<u32>::new(&crc::Algorithm {
                init: 0x1234_5678,
                ..crc::CRC_32_ISO_HDLC
            });
            let same_poly: Vec<u64> = keys
                .iter()
                .map(|k| u64::from(seeded.checksum(k)) & (W - 1))
                .collect();
            let chi = joint_chi_square(&buckets[0], &same_poly, W);
            assert!(chi > 50.0 * bound, "seeded copy looked independent: {chi}");
        }
    }

    #[test]
    fn rows_beyond_the_distinct_polynomials_are_refused() {
        let n = HashAlgorithm::INDEPENDENT_ROWS;
        assert_eq!(HashUnit::independent_rows(n, 32).unwrap().len(), n);
        assert_eq!(
            HashUnit::independent_rows(n + 1, 32),
            Err(HashError::TooManyRows {
                rows: n + 1,
                max: n
            })
        );
        assert!(HashUnit::independent_rows(2, 33).is_err());
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
        for algo in HashAlgorithm::ALL {
            let max = algo.width();
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
            for algo in HashAlgorithm::ALL {
                if let Ok(u) = HashUnit::new(algo, bits) {
                    let h = u.hash(&data);
                    prop_assert!(bits == 64 || h >> bits == 0);
                    prop_assert_eq!(h, algo.compute(&data) & u.mask);
                }
            }
        }
    }
}
