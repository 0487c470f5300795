//! Range partitioning and replica placement of the TEA-Table (spec §5.6).
//!
//! The bucket space [0, n) is cut into N contiguous ranges, one per server, with
//! rows in proportion to each server's offered DRAM. Range r has its primary on
//! server r and, with R = 2, its secondary on server (r+1) mod N. Every
//! (server, range) pair gets its own region. This module also turns a write of
//! one cell of bucket b into the concrete byte writes on every replica: the main
//! copy in row b and the shadow copy in row (b−1) mod n, which at a range edge
//! belongs to another range and therefore other servers.

use super::layout::Layout;
use serde::Serialize;
use std::collections::BTreeMap;
use thiserror::Error;

/// The control plane's server id (`sid` in the data-plane tables).
pub type ServerId = u16;

/// A server as it offers itself to the table (HELLO, spec §4.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ServerOffer {
    pub id: ServerId,
    pub dram_bytes: u64,
}

/// Which replica of a range a region holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub enum Role {
    Primary,
    Secondary,
}

/// One `range_tbl` entry: buckets [lo, hi] → (range, primary, secondary).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct RangeRule {
    pub range: u16,
    pub lo: u32,
    /// Inclusive upper bound.
    pub hi: u32,
    pub primary: ServerId,
    /// `None` when R = 1.
    pub secondary: Option<ServerId>,
}

impl RangeRule {
    pub fn rows(&self) -> u32 {
        self.hi - self.lo + 1
    }
    pub fn contains(&self, bucket: u32) -> bool {
        (self.lo..=self.hi).contains(&bucket)
    }
}

/// One DRAM region the control plane asks a server's agent to allocate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Region {
    pub server: ServerId,
    pub range: u16,
    pub role: Role,
    /// Region id used in ALLOC_REGION and WRITE_BATCH. [our choice] The range
    /// index: a server holds at most two distinct ranges, so it is unique per server.
    pub region_id: u16,
    /// First bucket (row) of the region; VA(i) is relative to it.
    pub lo: u32,
    pub rows: u32,
    pub bytes: u64,
}

/// One (region, offset, bytes) write, as carried by WRITE_BATCH.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct RegionWrite {
    pub region: u16,
    pub offset: u64,
    pub bytes: Vec<u8>,
}

/// The writes for one server: one WRITE_BATCH.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ServerBatch {
    pub server: ServerId,
    pub writes: Vec<RegionWrite>,
}

/// Why a partition plan is rejected.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum PartitionError {
    #[error("no DRAM servers")]
    NoServers,
    #[error("replication factor must be 1 or 2 (got {0})")]
    BadReplication(u8),
    #[error("replication factor 2 needs at least 2 servers (got {0})")]
    NotEnoughServers(usize),
    #[error("{servers} servers but only {buckets} buckets: every range needs a bucket")]
    TooManyServers { servers: usize, buckets: u32 },
    #[error("server id {0} appears twice")]
    DuplicateServer(ServerId),
    #[error("server {0} offers no DRAM")]
    ZeroDram(ServerId),
    #[error("server {server}: its regions need {need} bytes of DRAM but it offers {offered} (spec §5.9)")]
    DramTooSmall {
        server: ServerId,
        need: u64,
        offered: u64,
    },
}

/// The range plan of one table: ranges, replicas and regions.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Partition {
    layout: Layout,
    replication: u8,
    servers: Vec<ServerOffer>,
    ranges: Vec<RangeRule>,
}

/// Split `total` into parts proportional to `weights` by largest remainder
/// (ties to the lower index, so the result is deterministic); a part that
/// would be empty takes one from the largest part, so each part is ≥ 1.
pub fn proportional_split(total: u64, weights: &[u64]) -> Vec<u64> {
    let parts = weights.len() as u64;
    if parts == 0 || total < parts {
        return Vec::new();
    }
    let total128 = u128::from(total);
    let sum: u128 = weights.iter().map(|&w| u128::from(w)).sum::<u128>().max(1);
    let mut out: Vec<u64> = Vec::with_capacity(weights.len());
    let mut rems: Vec<(u128, usize)> = Vec::with_capacity(weights.len());
    for (i, &w) in weights.iter().enumerate() {
        let exact = total128 * u128::from(w);
        out.push((exact / sum) as u64);
        rems.push((exact % sum, i));
    }
    let given: u64 = out.iter().sum();
    rems.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    for &(_, i) in rems.iter().take(total.saturating_sub(given) as usize) {
        out[i] += 1;
    }
    for i in 0..out.len() {
        if out[i] == 0 {
            let big = (0..out.len())
                .max_by_key(|&j| (out[j], std::cmp::Reverse(j)))
                .unwrap_or(i);
            out[big] -= 1;
            out[i] = 1;
        }
    }
    out
}

impl Partition {
    /// Plan ranges for `servers` (in this order: range r's primary is `servers[r]`).
    pub fn new(
        layout: Layout,
        servers: &[ServerOffer],
        replication: u8,
    ) -> Result<Self, PartitionError> {
        if servers.is_empty() {
            return Err(PartitionError::NoServers);
        }
        if replication != 1 && replication != 2 {
            return Err(PartitionError::BadReplication(replication));
        }
        if replication == 2 && servers.len() < 2 {
            return Err(PartitionError::NotEnoughServers(servers.len()));
        }
        let n = layout.buckets();
        if servers.len() > n as usize || servers.len() > usize::from(u16::MAX) {
            return Err(PartitionError::TooManyServers {
                servers: servers.len(),
                buckets: n,
            });
        }
        let mut seen = std::collections::BTreeSet::new();
        for s in servers {
            if !seen.insert(s.id) {
                return Err(PartitionError::DuplicateServer(s.id));
            }
            if s.dram_bytes == 0 {
                return Err(PartitionError::ZeroDram(s.id));
            }
        }
        let weights: Vec<u64> = servers.iter().map(|s| s.dram_bytes).collect();
        let sizes = proportional_split(u64::from(n), &weights);
        let count = servers.len();
        let mut ranges = Vec::with_capacity(count);
        let mut lo = 0u32;
        for (r, &rows) in sizes.iter().enumerate() {
            let hi = lo + rows as u32 - 1;
            ranges.push(RangeRule {
                range: r as u16,
                lo,
                hi,
                primary: servers[r].id,
                secondary: (replication == 2).then(|| servers[(r + 1) % count].id),
            });
            lo = hi.wrapping_add(1);
        }
        let plan = Self {
            layout,
            replication,
            servers: servers.to_vec(),
            ranges,
        };
        for s in servers {
            let need: u64 = plan.regions_of(s.id).iter().map(|r| r.bytes).sum();
            if need > s.dram_bytes {
                return Err(PartitionError::DramTooSmall {
                    server: s.id,
                    need,
                    offered: s.dram_bytes,
                });
            }
        }
        Ok(plan)
    }

    pub fn layout(&self) -> &Layout {
        &self.layout
    }
    pub fn replication(&self) -> u8 {
        self.replication
    }
    pub fn servers(&self) -> &[ServerOffer] {
        &self.servers
    }
    /// The range rules the data plane installs in `range_tbl`, in bucket order.
    pub fn ranges(&self) -> &[RangeRule] {
        &self.ranges
    }
    /// Index of the range holding `bucket`.
    pub fn range_of(&self, bucket: u32) -> usize {
        self.ranges
            .partition_point(|r| r.hi < bucket)
            .min(self.ranges.len() - 1)
    }
    /// The servers holding range r, primary first.
    pub fn replicas(&self, range: usize) -> impl Iterator<Item = (ServerId, Role)> + '_ {
        let rule = &self.ranges[range];
        std::iter::once((rule.primary, Role::Primary))
            .chain(rule.secondary.map(|s| (s, Role::Secondary)))
    }
    fn region_for(&self, range: usize, server: ServerId, role: Role) -> Region {
        let rule = &self.ranges[range];
        Region {
            server,
            range: rule.range,
            role,
            region_id: rule.range,
            lo: rule.lo,
            rows: rule.rows(),
            bytes: self.layout.region_bytes(u64::from(rule.rows())),
        }
    }
    /// Every region, ordered by (server, range).
    pub fn regions(&self) -> Vec<Region> {
        let mut out: Vec<Region> = (0..self.ranges.len())
            .flat_map(|r| {
                self.replicas(r)
                    .map(move |(s, role)| (r, s, role))
                    .collect::<Vec<_>>()
            })
            .map(|(r, s, role)| self.region_for(r, s, role))
            .collect();
        out.sort_by_key(|r| (r.server, r.range));
        out
    }
    /// The regions one server must allocate.
    pub fn regions_of(&self, server: ServerId) -> Vec<Region> {
        self.regions()
            .into_iter()
            .filter(|r| r.server == server)
            .collect()
    }

    fn push_copy(
        &self,
        out: &mut BTreeMap<ServerId, Vec<RegionWrite>>,
        row: u32,
        cell: usize,
        shadow: bool,
        bytes: &[u8],
    ) {
        let range = self.range_of(row);
        let lo = self.ranges[range].lo;
        let offset = if shadow {
            self.layout.shadow_cell_offset(lo, row, cell)
        } else {
            self.layout.main_cell_offset(lo, row, cell)
        };
        for (server, _) in self.replicas(range) {
            out.entry(server).or_default().push(RegionWrite {
                region: self.ranges[range].range,
                offset,
                bytes: bytes.to_vec(),
            });
        }
    }

    fn batches(out: BTreeMap<ServerId, Vec<RegionWrite>>) -> Vec<ServerBatch> {
        out.into_iter()
            .map(|(server, writes)| ServerBatch { server, writes })
            .collect()
    }

    /// write_cell(b, c, bytes): main copy in row b and shadow copy in row
    /// (b−1) mod n, on every replica; one batch per server, ordered by server.
    pub fn cell_writes(&self, bucket: u32, cell: usize, bytes: &[u8]) -> Vec<ServerBatch> {
        let mut out = BTreeMap::new();
        self.push_copy(&mut out, bucket, cell, false, bytes);
        self.push_copy(&mut out, self.layout.shadow_row(bucket), cell, true, bytes);
        Self::batches(out)
    }
    /// Only the main copy (used to model the thesis' Alg. 1 order).
    pub fn main_writes(&self, bucket: u32, cell: usize, bytes: &[u8]) -> Vec<ServerBatch> {
        let mut out = BTreeMap::new();
        self.push_copy(&mut out, bucket, cell, false, bytes);
        Self::batches(out)
    }
    /// Only the shadow copy (used to model the thesis' Alg. 1 order).
    pub fn shadow_writes(&self, bucket: u32, cell: usize, bytes: &[u8]) -> Vec<ServerBatch> {
        let mut out = BTreeMap::new();
        self.push_copy(&mut out, self.layout.shadow_row(bucket), cell, true, bytes);
        Self::batches(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offers(dram: &[u64]) -> Vec<ServerOffer> {
        dram.iter()
            .enumerate()
            .map(|(i, &d)| ServerOffer {
                id: i as u16 + 1,
                dram_bytes: d,
            })
            .collect()
    }

    #[test]
    fn split_is_proportional_and_complete() {
        assert_eq!(proportional_split(10, &[1, 1]), vec![5, 5]);
        assert_eq!(proportional_split(16, &[1, 3]), vec![4, 12]);
        let s = proportional_split(1000, &[7, 1, 1, 1]);
        assert_eq!(s.iter().sum::<u64>(), 1000);
        assert!(s.iter().all(|&x| x >= 1));
        assert_eq!(
            proportional_split(4, &[1_000_000, 1, 1, 1]),
            vec![1, 1, 1, 1]
        );
    }

    #[test]
    fn ranges_cover_bucket_space_in_proportion() {
        let l = Layout::new(13, 6, 2, 10).unwrap();
        let gb = 1u64 << 30;
        let p = Partition::new(l, &offers(&[gb, 2 * gb, gb]), 2).unwrap();
        let r = p.ranges();
        assert_eq!(r[0].lo, 0);
        assert_eq!(r[2].hi, 1023);
        for w in r.windows(2) {
            assert_eq!(w[0].hi + 1, w[1].lo);
        }
        assert_eq!(
            r.iter().map(|x| x.rows()).collect::<Vec<_>>(),
            vec![256, 512, 256]
        );
        assert_eq!(r[0].secondary, Some(2));
        assert_eq!(r[2].secondary, Some(1));
        assert_eq!(p.range_of(255), 0);
        assert_eq!(p.range_of(256), 1);
        assert_eq!(p.range_of(1023), 2);
        // server 1 holds range 0 (primary) and range 2 (secondary)
        let regs = p.regions_of(1);
        assert_eq!(regs.len(), 2);
        assert_eq!((regs[0].range, regs[0].role), (0, Role::Primary));
        assert_eq!((regs[1].range, regs[1].role), (2, Role::Secondary));
    }

    #[test]
    fn config_errors() {
        let l = Layout::new(13, 6, 2, 10).unwrap();
        assert_eq!(Partition::new(l, &[], 1), Err(PartitionError::NoServers));
        assert_eq!(
            Partition::new(l, &offers(&[1 << 30]), 2),
            Err(PartitionError::NotEnoughServers(1))
        );
        assert!(matches!(
            Partition::new(l, &offers(&[1 << 20, 1 << 20]), 2),
            Err(PartitionError::DramTooSmall { .. })
        ));
        assert_eq!(
            Partition::new(l, &offers(&[1 << 30]), 3),
            Err(PartitionError::BadReplication(3))
        );
    }

    #[test]
    fn shadow_write_crosses_range_edge() {
        let l = Layout::new(13, 6, 2, 4).unwrap(); // 16 buckets
        let gb = 1u64 << 30;
        let p = Partition::new(l, &offers(&[gb, gb, gb, gb]), 2).unwrap();
        let cell = l.encode_cell(&[7; 13], &[1; 6]).unwrap();
        // bucket 4 starts range 1 (servers 2, 3); its shadow lives in row 3, range 0 (servers 1, 2)
        let b = p.cell_writes(4, 1, &cell);
        let servers: Vec<_> = b.iter().map(|x| x.server).collect();
        assert_eq!(servers, vec![1, 2, 3]);
        assert_eq!(
            b[0].writes,
            vec![RegionWrite {
                region: 0,
                offset: l.shadow_cell_offset(0, 3, 1),
                bytes: cell.clone()
            }]
        );
        assert_eq!(b[1].writes.len(), 2);
        // bucket 0's shadow wraps to row 15 (range 3: servers 4, 1)
        let b = p.cell_writes(0, 0, &cell);
        let s1 = b.iter().find(|x| x.server == 1).unwrap();
        assert_eq!(s1.writes.len(), 2);
        assert!(s1
            .writes
            .iter()
            .any(|w| w.region == 3 && w.offset == l.shadow_cell_offset(12, 15, 0)));
    }
}
