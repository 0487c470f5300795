//! TEA-Table byte layout in server DRAM (spec §3.2) and the layout-related
//! configuration checks of §5.9.
//!
//! A row holds the main bucket i, the shadow copy of bucket (i+1) mod n and the
//! scratchpad of row i, so one contiguous RDMA READ returns both candidate
//! buckets of a key followed by the parked packet. Everything here is pure
//! arithmetic on a [`Layout`]; nothing allocates DRAM.

use serde::Serialize;
use thiserror::Error;

/// Flags byte: the cell holds a key (bit 7); bits 6..0 are zero.
pub const FLAG_VALID: u8 = 0x80;
/// Scratchpad bytes per row: 8 B shim + frame of at most 1522 B, rounded up.
pub const SCRATCH_BYTES: usize = 1536;
/// TEA shim prepended to the parked frame (spec §4.2).
pub const SHIM_BYTES: usize = 8;
/// Largest original frame a lookup may carry (1500 MTU + 14 Ethernet + 4 VLAN + 4 spare).
pub const MAX_FRAME: usize = 1522;
/// RoCE path MTU: every READ response must be a single READ RESPONSE ONLY.
pub const PMTU: usize = 4096;
/// Default switch parse depth (model input, spec §5.9).
pub const DEFAULT_PARSE_DEPTH: usize = 512;
/// Default server link MTU (model input, spec §5.9).
pub const DEFAULT_LINK_MTU: usize = 9000;
/// Default cells per bucket (spec §3.2).
pub const DEFAULT_CELLS: usize = 2;
/// Load-factor target used when sizing a table from an entry count (spec §3.2).
pub const TARGET_LOAD: f64 = 0.9;
/// Largest supported log2 of the bucket count. [our choice] Bucket indices are
/// u32 on the wire (digest, range table), so n ≤ 2^31.
pub const MAX_LOG2_BUCKETS: u32 = 31;

/// Bytes a READ RESPONSE carries before the cells: Eth 14 + IPv4 20 + UDP 8 +
/// BTH 12 + AETH 4 (spec §5.9 uses 58 for the parse-depth check).
const RESPONSE_HDR_BYTES: usize = 58;
/// IPv4 + UDP + BTH + RETH + ICRC around a request payload.
const REQUEST_L3_OVERHEAD: usize = 20 + 8 + 12 + 16 + 4;
/// IPv4 + UDP + BTH + AETH + ICRC around a response payload.
const RESPONSE_L3_OVERHEAD: usize = 20 + 8 + 12 + 4 + 4;

/// Why a layout or its configuration is rejected.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum LayoutError {
    #[error("key length must be at least 1 byte (got {0})")]
    EmptyKey(usize),
    #[error("cells per bucket must be at least 1 (got {0})")]
    NoCells(usize),
    #[error("bucket count 2^{0} out of range: need 1 <= log2(n) <= {MAX_LOG2_BUCKETS}")]
    BucketCount(u32),
    #[error("{entries} entries cannot fit at load factor {max_load} in at most 2^{MAX_LOG2_BUCKETS} buckets of {cells} cells")]
    TooManyEntries {
        entries: u64,
        max_load: f64,
        cells: usize,
    },
    #[error("KV_LEN {kv_len} + 8 + 1522 = {need} exceeds the RoCE PMTU {pmtu}: responses would need several packets (spec §5.9)")]
    Pmtu {
        kv_len: usize,
        need: usize,
        pmtu: usize,
    },
    #[error("58 + KV_LEN {kv_len} + 8 + NF header depth {nf_depth} = {need} exceeds the parse depth {parse_depth} (spec §5.9)")]
    ParseDepth {
        kv_len: usize,
        nf_depth: usize,
        need: usize,
        parse_depth: usize,
    },
    #[error(
        "largest TEA packet is {need} B at IP level, over the server link MTU {mtu} (spec §5.9)"
    )]
    LinkMtu { need: usize, mtu: usize },
    #[error("{what} = {value} is not a power of two (spec §5.9)")]
    NotPowerOfTwo { what: &'static str, value: u64 },
}

/// Limits a layout is checked against (spec §5.9); all are model inputs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct LayoutLimits {
    /// Bytes of the NF's own headers the response parser must reach.
    pub nf_header_depth: usize,
    pub parse_depth: usize,
    pub pmtu: usize,
    pub link_mtu: usize,
}

impl LayoutLimits {
    /// The spec's defaults for an NF whose headers span `nf_header_depth` bytes.
    pub fn for_nf(nf_header_depth: usize) -> Self {
        Self {
            nf_header_depth,
            parse_depth: DEFAULT_PARSE_DEPTH,
            pmtu: PMTU,
            link_mtu: DEFAULT_LINK_MTU,
        }
    }
}

/// Geometry of one TEA-Table: key/value widths, cells per bucket and bucket count.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Layout {
    key_len: usize,
    value_len: usize,
    cells: usize,
    log2_buckets: u32,
}

/// Round up to a multiple of 4.
fn roundup4(x: usize) -> usize {
    (x + 3) & !3
}

impl Layout {
    /// A layout with `n = 2^log2_buckets` buckets of `cells` cells.
    pub fn new(
        key_len: usize,
        value_len: usize,
        cells: usize,
        log2_buckets: u32,
    ) -> Result<Self, LayoutError> {
        if key_len == 0 {
            return Err(LayoutError::EmptyKey(key_len));
        }
        if cells == 0 {
            return Err(LayoutError::NoCells(cells));
        }
        // [our choice] n ≥ 2 so that a key's two candidate buckets are distinct.
        if log2_buckets == 0 || log2_buckets > MAX_LOG2_BUCKETS {
            return Err(LayoutError::BucketCount(log2_buckets));
        }
        Ok(Self {
            key_len,
            value_len,
            cells,
            log2_buckets,
        })
    }

    /// The smallest power-of-two table holding `entries` at load ≤ `max_load`.
    pub fn for_entries(
        key_len: usize,
        value_len: usize,
        cells: usize,
        entries: u64,
        max_load: f64,
    ) -> Result<Self, LayoutError> {
        let too_many = LayoutError::TooManyEntries {
            entries,
            max_load,
            cells,
        };
        if max_load.is_nan() || max_load <= 0.0 || cells == 0 {
            return Err(too_many);
        }
        for k in 1..=MAX_LOG2_BUCKETS {
            let capacity = (1u64 << k) as f64 * cells as f64 * max_load;
            if entries as f64 <= capacity {
                return Self::new(key_len, value_len, cells, k);
            }
        }
        Err(too_many)
    }

    pub fn key_len(&self) -> usize {
        self.key_len
    }
    pub fn value_len(&self) -> usize {
        self.value_len
    }
    /// C, cells per bucket.
    pub fn cells(&self) -> usize {
        self.cells
    }
    pub fn log2_buckets(&self) -> u32 {
        self.log2_buckets
    }
    /// n, the bucket count.
    pub fn buckets(&self) -> u32 {
        1u32 << self.log2_buckets
    }
    /// n × C.
    pub fn total_cells(&self) -> usize {
        (self.buckets() as usize) * self.cells
    }
    pub fn bucket_mask(&self) -> u32 {
        self.buckets() - 1
    }
    /// roundup4(1 + K + V).
    pub fn cell_bytes(&self) -> usize {
        roundup4(1 + self.key_len + self.value_len)
    }
    /// B = C × CELL_BYTES.
    pub fn bucket_bytes(&self) -> usize {
        self.cells * self.cell_bytes()
    }
    /// KV_LEN = 2B: the bucket and the shadow of its successor.
    pub fn kv_len(&self) -> usize {
        2 * self.bucket_bytes()
    }
    /// ROW_BYTES = next_pow2(KV_LEN + SCRATCH_BYTES).
    pub fn row_bytes(&self) -> usize {
        (self.kv_len() + SCRATCH_BYTES).next_power_of_two()
    }
    pub fn log2_row_bytes(&self) -> u32 {
        self.row_bytes().trailing_zeros()
    }

    /// bucket(key) = CRC-64/XZ(key) & (n−1), the data plane's bucket hash.
    pub fn bucket_of(&self, key: &[u8]) -> u32 {
        (inca_switch::hash::crc64(key) & u64::from(self.bucket_mask())) as u32
    }
    /// The second candidate bucket (i+1) mod n.
    pub fn next_bucket(&self, i: u32) -> u32 {
        i.wrapping_add(1) & self.bucket_mask()
    }
    /// The row holding the shadow copy of bucket b: (b−1) mod n.
    pub fn shadow_row(&self, b: u32) -> u32 {
        b.wrapping_sub(1) & self.bucket_mask()
    }

    /// Byte offset of row i inside a region whose first row is `lo`.
    /// `i` must lie in the region's range (`i ≥ lo`).
    pub fn row_offset(&self, lo: u32, i: u32) -> u64 {
        u64::from(i - lo) << self.log2_row_bytes()
    }
    /// Offset of cell c of the main bucket of row i.
    pub fn main_cell_offset(&self, lo: u32, i: u32, c: usize) -> u64 {
        self.row_offset(lo, i) + (c * self.cell_bytes()) as u64
    }
    /// Offset of cell c of the shadow bucket held in row i (a copy of bucket i+1).
    pub fn shadow_cell_offset(&self, lo: u32, i: u32, c: usize) -> u64 {
        self.row_offset(lo, i) + (self.bucket_bytes() + c * self.cell_bytes()) as u64
    }
    /// VA(i) = base_va + ((i − lo) << log2(ROW_BYTES)).
    pub fn va(&self, base_va: u64, lo: u32, i: u32) -> u64 {
        base_va.wrapping_add(self.row_offset(lo, i))
    }
    /// scratch_VA(i) = VA(i) + KV_LEN.
    pub fn scratch_va(&self, base_va: u64, lo: u32, i: u32) -> u64 {
        self.va(base_va, lo, i).wrapping_add(self.kv_len() as u64)
    }
    /// Bytes of a region holding `rows` rows.
    pub fn region_bytes(&self, rows: u64) -> u64 {
        rows << self.log2_row_bytes()
    }

    /// Encode a VALID cell: flags | key | value | zero pad. `None` if a width is wrong.
    pub fn encode_cell(&self, key: &[u8], value: &[u8]) -> Option<Vec<u8>> {
        let mut cell = vec![0u8; self.cell_bytes()];
        self.encode_cell_into(key, value, &mut cell)?;
        Some(cell)
    }
    /// Encode into an existing CELL_BYTES slice.
    pub fn encode_cell_into(&self, key: &[u8], value: &[u8], out: &mut [u8]) -> Option<()> {
        if key.len() != self.key_len
            || value.len() != self.value_len
            || out.len() != self.cell_bytes()
        {
            return None;
        }
        out.fill(0);
        out[0] = FLAG_VALID;
        out[1..1 + self.key_len].copy_from_slice(key);
        out[1 + self.key_len..1 + self.key_len + self.value_len].copy_from_slice(value);
        Some(())
    }
    /// Decode one cell: `Some((key, value))` if VALID, `None` if empty or short.
    pub fn decode_cell<'a>(&self, cell: &'a [u8]) -> Option<(&'a [u8], &'a [u8])> {
        if cell.len() < 1 + self.key_len + self.value_len || cell[0] & FLAG_VALID == 0 {
            return None;
        }
        let k = &cell[1..1 + self.key_len];
        let v = &cell[1 + self.key_len..1 + self.key_len + self.value_len];
        Some((k, v))
    }
    /// What the data plane does with a READ response: search the 2C cells
    /// (bucket i then shadow of i+1) for a VALID cell holding `key`.
    pub fn match_row<'a>(&self, kv: &'a [u8], key: &[u8]) -> Option<&'a [u8]> {
        kv.chunks_exact(self.cell_bytes())
            .take(2 * self.cells)
            .filter_map(|cell| self.decode_cell(cell))
            .find(|(k, _)| *k == key)
            .map(|(_, v)| v)
    }

    /// IP-level size of the largest TEA packet on a server link: the READ
    /// REQUEST with the trailer, or its response. [our choice] The spec names
    /// only requests; the response is larger by KV_LEN so it is checked too.
    pub fn largest_ip_packet(&self) -> usize {
        let payload = SHIM_BYTES + MAX_FRAME;
        let padded = roundup4(payload);
        let request = REQUEST_L3_OVERHEAD + padded;
        let response = RESPONSE_L3_OVERHEAD + self.kv_len() + padded;
        request.max(response)
    }

    /// The §5.9 checks that concern the layout (DRAM fit is checked by the partition).
    pub fn check(&self, limits: &LayoutLimits) -> Result<(), LayoutError> {
        let kv_len = self.kv_len();
        let need = kv_len + SHIM_BYTES + MAX_FRAME;
        if need > limits.pmtu {
            return Err(LayoutError::Pmtu {
                kv_len,
                need,
                pmtu: limits.pmtu,
            });
        }
        let need = RESPONSE_HDR_BYTES + kv_len + SHIM_BYTES + limits.nf_header_depth;
        if need > limits.parse_depth {
            return Err(LayoutError::ParseDepth {
                kv_len,
                nf_depth: limits.nf_header_depth,
                need,
                parse_depth: limits.parse_depth,
            });
        }
        let need = self.largest_ip_packet();
        if need > limits.link_mtu {
            return Err(LayoutError::LinkMtu {
                need,
                mtu: limits.link_mtu,
            });
        }
        let row = self.row_bytes() as u64;
        if !row.is_power_of_two() {
            return Err(LayoutError::NotPowerOfTwo {
                what: "ROW_BYTES",
                value: row,
            });
        }
        let n = u64::from(self.buckets());
        if !n.is_power_of_two() {
            return Err(LayoutError::NotPowerOfTwo {
                what: "n",
                value: n,
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_sizing_examples() {
        let v6 = Layout::new(37, 18, 2, 10).unwrap();
        assert_eq!(
            (
                v6.cell_bytes(),
                v6.bucket_bytes(),
                v6.kv_len(),
                v6.row_bytes()
            ),
            (56, 112, 224, 2048)
        );
        let v4 = Layout::new(13, 6, 2, 10).unwrap();
        assert_eq!(
            (
                v4.cell_bytes(),
                v4.bucket_bytes(),
                v4.kv_len(),
                v4.row_bytes()
            ),
            (20, 40, 80, 2048)
        );
    }

    #[test]
    fn t4_crc64_vector_drives_bucket() {
        assert_eq!(
            inca_switch::hash::crc64(b"123456789"),
            0x995D_C9BB_DF19_39FA
        );
        let l = Layout::new(9, 1, 2, 16).unwrap();
        assert_eq!(l.bucket_of(b"123456789"), 0x39FA);
    }

    #[test]
    fn shadow_row_wraps() {
        let l = Layout::new(4, 4, 2, 3).unwrap();
        assert_eq!(l.shadow_row(0), 7);
        assert_eq!(l.shadow_row(5), 4);
        assert_eq!(l.next_bucket(7), 0);
    }

    #[test]
    fn addresses() {
        let l = Layout::new(13, 6, 2, 10).unwrap();
        assert_eq!(l.va(0x1000_0000, 100, 103), 0x1000_0000 + 3 * 2048);
        assert_eq!(
            l.scratch_va(0x1000_0000, 100, 103),
            0x1000_0000 + 3 * 2048 + 80
        );
        assert_eq!(l.shadow_cell_offset(100, 101, 1), 2048 + 40 + 20);
    }

    #[test]
    fn cell_round_trip_and_match() {
        let l = Layout::new(3, 2, 2, 4).unwrap();
        let cell = l.encode_cell(&[1, 2, 3], &[9, 8]).unwrap();
        assert_eq!(cell, vec![0x80, 1, 2, 3, 9, 8, 0, 0]);
        assert_eq!(
            l.decode_cell(&cell),
            Some((&[1u8, 2, 3][..], &[9u8, 8][..]))
        );
        assert!(l.encode_cell(&[1, 2], &[9, 8]).is_none());
        let mut kv = vec![0u8; l.kv_len()];
        kv[3 * 8..4 * 8].copy_from_slice(&cell);
        assert_eq!(l.match_row(&kv, &[1, 2, 3]), Some(&[9u8, 8][..]));
        assert_eq!(l.match_row(&kv, &[1, 2, 4]), None);
        assert_eq!(l.match_row(&kv[..10], &[1, 2, 3]), None);
    }

    #[test]
    fn config_checks() {
        let ok = Layout::new(13, 6, 2, 10).unwrap();
        assert_eq!(ok.check(&LayoutLimits::for_nf(54)), Ok(()));
        assert!(matches!(
            ok.check(&LayoutLimits::for_nf(400)),
            Err(LayoutError::ParseDepth { .. })
        ));
        let huge = Layout::new(200, 200, 8, 10).unwrap();
        assert!(matches!(
            huge.check(&LayoutLimits::for_nf(54)),
            Err(LayoutError::Pmtu { .. })
        ));
        let mut small_mtu = LayoutLimits::for_nf(54);
        small_mtu.link_mtu = 1500;
        assert!(matches!(
            ok.check(&small_mtu),
            Err(LayoutError::LinkMtu { .. })
        ));
        assert!(Layout::new(13, 6, 2, 0).is_err());
        assert!(Layout::new(0, 6, 2, 4).is_err());
    }

    #[test]
    fn sizing_from_entries() {
        let l = Layout::for_entries(13, 6, 2, 10_000_000, 0.9).unwrap();
        assert_eq!(l.buckets(), 1 << 23);
        let l = Layout::for_entries(13, 6, 2, 1000, 0.9).unwrap();
        assert!(1000.0 / l.total_cells() as f64 <= 0.9);
        assert!(1000.0 / (l.total_cells() / 2) as f64 > 0.9);
    }
}
