//! Offline experiments on the table alone (spec §8.2): E10 (bounded linear
//! probing vs 2-way cuckoo), E11 (range rules vs consistent hashing), E12 (the
//! cost calculator) and the bulk-insert benchmark. Each returns rows (serde
//! `Serialize`) that the CLI writes as CSV/JSON.

use super::layout::Layout;
use super::partition::{Partition, ServerOffer};
use super::{Loc, TableConfig, TableError, TeaTable};
use inca_switch::hash::crc64;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;
use std::time::Instant;

/// IPv4 5-tuple NAT entry widths used by the offline runs (spec §3.2).
pub const NAT4_K: usize = 13;
pub const NAT4_V: usize = 6;

/// A table on one server with ample DRAM and replication 1 (layout studies only).
fn single_server_table(layout: Layout, config: TableConfig) -> Result<TeaTable, String> {
    let dram = layout.region_bytes(u64::from(layout.buckets())).max(1);
    let p = Partition::new(
        layout,
        &[ServerOffer {
            id: 0,
            dram_bytes: dram,
        }],
        1,
    )
    .map_err(|e| e.to_string())?;
    Ok(TeaTable::new(p, config))
}

/// Key i of a deterministic key stream (13 bytes, splitmix-scrambled).
fn stream_key(seed: u64, i: u64, out: &mut [u8]) {
    let mut x = seed ^ i.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    for chunk in out.chunks_mut(8) {
        x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = x;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        let bytes = z.to_be_bytes();
        chunk.copy_from_slice(&bytes[..chunk.len()]);
    }
}

// ---------------------------------------------------------------- E10

/// One E10 row: a scheme at a load (entries / cells, stashed entries included).
#[derive(Debug, Clone, Serialize)]
pub struct E10Row {
    pub scheme: &'static str,
    pub load: f64,
    pub entries: u64,
    pub cells: u64,
    pub stash_entries: u64,
    pub stash_fraction: f64,
    /// DRAM round trips per lookup of a present key, averaged over keys
    /// (a stashed key costs 0, it is served from SRAM).
    pub mean_dram_reads: f64,
    pub max_dram_reads: u32,
    pub displacements_per_insert: f64,
}

/// 2-way cuckoo hashing with C-cell buckets, the same random-walk
/// displacement (MAX_TRIES, never straight back) and an unbounded stash.
struct Cuckoo {
    layout: Layout,
    cells: Vec<Option<Box<[u8]>>>,
    stash: usize,
    displacements: u64,
}

impl Cuckoo {
    /// h1 = the TEA bucket hash; h2 = a splitmix64 finaliser of the full
    /// CRC-64, forced ≠ h1. [our choice] A CRC of a salted key would not do:
    /// CRC is affine, so CRC(salt ‖ K) = CRC(K) ⊕ const and every key's two
    /// buckets would pair up into fixed bucket pairs.
    fn buckets(&self, key: &[u8]) -> (u32, u32) {
        let crc = crc64(key);
        let h1 = (crc & u64::from(self.layout.bucket_mask())) as u32;
        let mut z = crc ^ 0x5A5A_5A5A_5A5A_5A5A;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        let mut h2 = (z & u64::from(self.layout.bucket_mask())) as u32;
        if h2 == h1 {
            h2 = h1 ^ 1;
        }
        (h1, h2)
    }
    fn idx(&self, b: u32, c: usize) -> usize {
        b as usize * self.layout.cells() + c
    }
    fn insert<R: Rng>(&mut self, key: &[u8], max_tries: u32, rng: &mut R) {
        let mut e: Box<[u8]> = key.into();
        let mut last: Option<usize> = None;
        for _ in 0..max_tries {
            let (h1, h2) = self.buckets(&e);
            let free = [h1, h2].into_iter().find_map(|b| {
                (0..self.layout.cells())
                    .map(|c| self.idx(b, c))
                    .find(|&i| self.cells[i].is_none())
            });
            if let Some(i) = free {
                self.cells[i] = Some(e);
                return;
            }
            let candidates: Vec<usize> = [h1, h2]
                .into_iter()
                .flat_map(|b| (0..self.layout.cells()).map(move |c| (b, c)))
                .map(|(b, c)| self.idx(b, c))
                .filter(|&i| Some(i) != last)
                .collect();
            let i = candidates[rng.gen_range(0..candidates.len())];
            let victim = self.cells[i].replace(e);
            self.displacements += 1;
            let Some(v) = victim else { return };
            e = v;
            last = Some(i);
        }
        self.stash += 1;
    }
    /// Reads a lookup needs: 1 if in h1 (read first), 2 if in h2, 0 if stashed.
    fn reads(&self) -> (u64, u32) {
        let mut total = 0u64;
        let mut max = 0u32;
        for b in 0..self.layout.buckets() {
            for c in 0..self.layout.cells() {
                if let Some(k) = &self.cells[self.idx(b, c)] {
                    let (h1, _) = self.buckets(k);
                    let r = if b == h1 { 1 } else { 2 };
                    total += u64::from(r);
                    max = max.max(r);
                }
            }
        }
        (total, max)
    }
}

/// E10: fill a table of 2^`log2_buckets` × 2 cells with random IPv4 NAT keys
/// and report, at each load in `loads` (ascending), the stash fraction and
/// the DRAM reads per lookup of BLP and of 2-way cuckoo with equal cells.
/// [our choice] The stash is unbounded here so its size is measured, not capped.
pub fn e10(log2_buckets: u32, loads: &[f64], seed: u64) -> Result<Vec<E10Row>, String> {
    let layout = Layout::new(NAT4_K, NAT4_V, 2, log2_buckets).map_err(|e| e.to_string())?;
    let cells = layout.total_cells() as u64;
    let config = TableConfig {
        stash_cap: usize::MAX,
        ..TableConfig::default()
    };
    let mut blp = single_server_table(layout, config)?;
    let mut cuckoo = Cuckoo {
        layout,
        cells: vec![None; layout.total_cells()],
        stash: 0,
        displacements: 0,
    };
    let mut rng_blp = ChaCha8Rng::seed_from_u64(seed);
    let mut rng_ck = ChaCha8Rng::seed_from_u64(seed ^ 0xC0C0);
    let mut key = [0u8; NAT4_K];
    let value = [0u8; NAT4_V];
    let mut inserted = 0u64;
    let mut rows = Vec::new();
    for &load in loads {
        let goal = ((load * cells as f64).round() as u64).min(cells);
        while inserted < goal {
            stream_key(seed, inserted, &mut key);
            match blp.insert(&key, &value, &mut rng_blp) {
                Ok(_) | Err(TableError::StashFull(_)) => {}
                Err(e) => return Err(e.to_string()),
            }
            cuckoo.insert(&key, config.max_tries, &mut rng_ck);
            inserted += 1;
        }
        let s = blp.stats();
        let mut reads = 0u64;
        let mut max = 0u32;
        for (k, _, loc) in blp.entries() {
            if let Loc::Dram { bucket, .. } = loc {
                let h = layout.bucket_of(&k);
                // Row h holds buckets h and h+1: one READ either way.
                let r = u32::from(bucket == h || bucket == layout.next_bucket(h));
                if r == 0 {
                    return Err(format!(
                        "BLP placed a key outside its row (bucket {bucket}, home {h})"
                    ));
                }
                reads += u64::from(r);
                max = max.max(r);
            }
        }
        rows.push(E10Row {
            scheme: "blp",
            load,
            entries: s.entries,
            cells,
            stash_entries: s.stash_entries,
            stash_fraction: s.stash_fraction,
            mean_dram_reads: reads as f64 / s.entries.max(1) as f64,
            max_dram_reads: max,
            displacements_per_insert: s.displacements as f64 / inserted.max(1) as f64,
        });
        let (ck_reads, ck_max) = cuckoo.reads();
        rows.push(E10Row {
            scheme: "cuckoo2",
            load,
            entries: inserted,
            cells,
            stash_entries: cuckoo.stash as u64,
            stash_fraction: cuckoo.stash as f64 / inserted.max(1) as f64,
            mean_dram_reads: ck_reads as f64 / inserted.max(1) as f64,
            max_dram_reads: ck_max,
            displacements_per_insert: cuckoo.displacements as f64 / inserted.max(1) as f64,
        });
    }
    Ok(rows)
}

/// The E10 load sweep 0.50, 0.55, …, 0.95.
pub fn e10_loads() -> Vec<f64> {
    (0..10).map(|i| 0.5 + 0.05 * f64::from(i)).collect()
}

// ---------------------------------------------------------------- E11

/// One E11 row: range rules for N servers.
#[derive(Debug, Clone, Serialize)]
pub struct E11Row {
    pub servers: u32,
    /// Rules our range partitioner installs (its `ranges().len()`).
    pub tea_range_rules: u32,
    /// Range rules a consistent-hashing ring with `vnodes` per server needs:
    /// one per maximal bucket interval owned by one virtual node.
    pub ch_vnode_rules: u32,
    /// Same, after merging neighbouring intervals of the same server.
    pub ch_server_rules: u32,
    /// The sources' figure 100N − 1, for comparison.
    pub paper_ch_rules: u32,
}

/// Intervals of [0, n) with constant owner on a consistent-hashing ring:
/// (vnode-level count, server-level count).
fn ring_rules(servers: u32, vnodes: u32, log2_buckets: u32) -> (u32, u32) {
    let mask = (1u64 << log2_buckets) - 1;
    let mut points: Vec<(u64, u32)> = (0..servers)
        .flat_map(|s| (0..vnodes).map(move |v| (s, v)))
        .map(|(s, v)| {
            let mut id = [0u8; 8];
            id[..4].copy_from_slice(&s.to_be_bytes());
            id[4..].copy_from_slice(&v.to_be_bytes());
            (crc64(&id) & mask, s)
        })
        .collect();
    points.sort_unstable();
    points.dedup_by_key(|p| p.0); // a position owned twice goes to the first
                                  // A bucket b belongs to the first point ≥ b, wrapping to the first point.
    let mut owners: Vec<u32> = points.iter().map(|p| p.1).collect();
    let last_pos = points.last().map_or(mask, |p| p.0);
    if last_pos < mask {
        owners.push(points[0].1); // the wrapped tail (last point, n)
    }
    let vnode_rules = owners.len() as u32;
    let server_rules = 1 + owners.windows(2).filter(|w| w[0] != w[1]).count() as u32;
    (vnode_rules, server_rules)
}

/// E11 for N = 1..=`max_servers` over 2^`log2_buckets` buckets.
pub fn e11(max_servers: u32, vnodes: u32, log2_buckets: u32) -> Result<Vec<E11Row>, String> {
    let layout = Layout::new(NAT4_K, NAT4_V, 2, log2_buckets).map_err(|e| e.to_string())?;
    (1..=max_servers)
        .map(|n| {
            let offers: Vec<ServerOffer> = (0..n)
                .map(|i| ServerOffer {
                    id: i as u16,
                    dram_bytes: 64 << 30,
                })
                .collect();
            let r = if n >= 2 { 2 } else { 1 };
            let p = Partition::new(layout, &offers, r).map_err(|e| e.to_string())?;
            let (ch_vnode_rules, ch_server_rules) = ring_rules(n, vnodes, log2_buckets);
            Ok(E11Row {
                servers: n,
                tea_range_rules: p.ranges().len() as u32,
                ch_vnode_rules,
                ch_server_rules,
                paper_ch_rules: vnodes * n - 1,
            })
        })
        .collect()
}

// ---------------------------------------------------------------- E12

/// One deployment option of TEA Table 1.
#[derive(Debug, Clone, Serialize)]
pub struct CostOption {
    pub name: &'static str,
    pub throughput_gbps: f64,
    pub memory_bytes: f64,
    pub price_usd: f64,
    pub power_w: f64,
    /// Whether state can be sharded over several units. [our choice] Servers
    /// and appliances sit behind a flow-sharding load balancer; a switch
    /// holds the whole table in its own SRAM, so switch-only is infeasible
    /// when the state exceeds one switch's SRAM.
    pub shardable: bool,
}

/// TEA Table 1 (spec §8.2 E12 inputs). "> $40K" is taken as $40K.
pub fn e12_options() -> Vec<CostOption> {
    vec![
        CostOption {
            name: "appliance",
            throughput_gbps: 40.0,
            memory_bytes: 10e9,
            price_usd: 40_000.0,
            power_w: 480.0,
            shardable: true,
        },
        CostOption {
            name: "server",
            throughput_gbps: 10.0,
            memory_bytes: 10e9,
            price_usd: 3_000.0,
            power_w: 200.0,
            shardable: true,
        },
        CostOption {
            name: "switch",
            throughput_gbps: 3300.0,
            memory_bytes: 10e6,
            price_usd: 10_000.0,
            power_w: 620.0,
            shardable: false,
        },
    ]
}

/// A traffic/state regime.
#[derive(Debug, Clone, Serialize)]
pub struct Regime {
    pub name: &'static str,
    pub rate_gbps: f64,
    pub flows: u64,
    pub state_bytes: f64,
}

/// The four regimes of spec §8.2 E12 (regime 4 also at 10 Tbps).
pub fn e12_regimes() -> Vec<Regime> {
    let r = |name, rate_gbps, flows, state_bytes| Regime {
        name,
        rate_gbps,
        flows,
        state_bytes,
    };
    vec![
        r("1: <100G, 100K flows", 100.0, 100_000, 1e6),
        r("2: <100G, 10M flows", 100.0, 10_000_000, 100e6),
        r("3: >1T, 100K flows", 1000.0, 100_000, 1e6),
        r("4: >1T, 10M flows", 1000.0, 10_000_000, 100e6),
        r("4: 10T, 10M flows", 10_000.0, 10_000_000, 100e6),
    ]
}

/// Calculator inputs the lead passes in.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct E12Inputs {
    /// DRAM lookups per second one TEA server sustains: measured in E4.
    pub per_server_lookups_per_s: f64,
    /// Mean frame size including FCS; one lookup per packet. [our choice] 64 B,
    /// the size the TEA evaluation uses for lookup throughput.
    pub mean_frame_bytes: f64,
    /// Price range of extra on-chip SRAM per GB (spec: $2–5K).
    pub extra_sram_usd_per_gb: (f64, f64),
}

impl E12Inputs {
    pub fn new(per_server_lookups_per_s: f64) -> Self {
        Self {
            per_server_lookups_per_s,
            mean_frame_bytes: 64.0,
            extra_sram_usd_per_gb: (2_000.0, 5_000.0),
        }
    }
    /// Packets per second at `rate_gbps`, counting preamble and IFG (20 B).
    pub fn packets_per_s(&self, rate_gbps: f64) -> f64 {
        rate_gbps * 1e9 / ((self.mean_frame_bytes + 20.0) * 8.0)
    }
}

/// One E12 row: an option in a regime.
#[derive(Debug, Clone, Serialize)]
pub struct E12Row {
    pub regime: &'static str,
    pub option: &'static str,
    pub feasible: bool,
    /// Units of the option (switches for "switch+tea").
    pub units: u64,
    /// DRAM servers (switch+TEA only).
    pub servers: u64,
    pub price_usd: f64,
    pub power_w: f64,
    /// For an infeasible switch-only row: what the missing SRAM would cost.
    pub extra_sram_usd_low: f64,
    pub extra_sram_usd_high: f64,
    /// Cheapest feasible option of its regime.
    pub cheapest: bool,
}

fn ceil_div(a: f64, b: f64) -> u64 {
    (a / b).ceil().max(1.0) as u64
}

/// E12: units, price and power per option and regime.
pub fn e12(inputs: &E12Inputs) -> Vec<E12Row> {
    let options = e12_options();
    let switch = options
        .iter()
        .find(|o| o.name == "switch")
        .cloned()
        .unwrap_or_else(|| e12_options().swap_remove(2));
    let mut rows = Vec::new();
    for regime in e12_regimes() {
        let first = rows.len();
        for o in &options {
            let by_rate = ceil_div(regime.rate_gbps, o.throughput_gbps);
            let by_state = ceil_div(regime.state_bytes, o.memory_bytes);
            let feasible = o.shardable || regime.state_bytes <= o.memory_bytes;
            let units = if o.shardable {
                by_rate.max(by_state)
            } else {
                by_rate
            };
            let missing_gb = ((regime.state_bytes - o.memory_bytes) / 1e9).max(0.0);
            rows.push(E12Row {
                regime: regime.name,
                option: o.name,
                feasible,
                units,
                servers: 0,
                price_usd: units as f64 * o.price_usd,
                power_w: units as f64 * o.power_w,
                extra_sram_usd_low: if feasible {
                    0.0
                } else {
                    missing_gb * inputs.extra_sram_usd_per_gb.0
                },
                extra_sram_usd_high: if feasible {
                    0.0
                } else {
                    missing_gb * inputs.extra_sram_usd_per_gb.1
                },
                cheapest: false,
            });
        }
        // Switch + TEA: the switches the rate needs, plus DRAM servers for
        // the lookup rate (and for the state, though it never binds here).
        let switches = ceil_div(regime.rate_gbps, switch.throughput_gbps);
        let lookups = inputs.packets_per_s(regime.rate_gbps);
        let feasible = inputs.per_server_lookups_per_s > 0.0;
        let servers = if feasible {
            ceil_div(lookups, inputs.per_server_lookups_per_s)
                .max(ceil_div(regime.state_bytes, 64e9))
        } else {
            0
        };
        let server = &options[1];
        rows.push(E12Row {
            regime: regime.name,
            option: "switch+tea",
            feasible,
            units: switches,
            servers,
            price_usd: switches as f64 * switch.price_usd + servers as f64 * server.price_usd,
            power_w: switches as f64 * switch.power_w + servers as f64 * server.power_w,
            extra_sram_usd_low: 0.0,
            extra_sram_usd_high: 0.0,
            cheapest: false,
        });
        let best = (first..rows.len())
            .filter(|&i| rows[i].feasible)
            .min_by(|&a, &b| rows[a].price_usd.total_cmp(&rows[b].price_usd));
        if let Some(i) = best {
            rows[i].cheapest = true;
        }
    }
    rows
}

// ---------------------------------------------------------------- insert benchmark

/// What one bulk-insert run does.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct InsertBenchConfig {
    pub entries: u64,
    /// `None`: the smallest table at load ≤ 0.9.
    pub log2_buckets: Option<u32>,
    /// Cells per bucket, C.
    pub cells: usize,
    pub stash_cap: usize,
    pub seed: u64,
}

impl Default for InsertBenchConfig {
    /// 10 M IPv4 NAT entries with the spec's C = 2 and STASH_CAP.
    fn default() -> Self {
        Self {
            entries: 10_000_000,
            log2_buckets: None,
            cells: super::layout::DEFAULT_CELLS,
            stash_cap: super::STASH_CAP,
            seed: 1,
        }
    }
}

/// Result of one bulk-insert run.
#[derive(Debug, Clone, Serialize)]
pub struct InsertBench {
    pub config: InsertBenchConfig,
    pub inserted: u64,
    /// Inserts refused with `StashFull` (spec §5.4 Insert step 1).
    pub refused_stash_full: u64,
    pub buckets: u64,
    pub cells: u64,
    pub load_factor: f64,
    pub stash_entries: u64,
    pub stash_fraction: f64,
    pub displacements: u64,
    pub seconds: f64,
    /// Insert calls per second (accepted or refused), plans included.
    pub inserts_per_s: f64,
}

/// Insert random IPv4 NAT keys, generating every plan as the control plane
/// would (the plans are dropped), and time it.
pub fn insert_benchmark(cfg: &InsertBenchConfig) -> Result<InsertBench, String> {
    let layout = match cfg.log2_buckets {
        Some(k) => Layout::new(NAT4_K, NAT4_V, cfg.cells, k),
        None => Layout::for_entries(
            NAT4_K,
            NAT4_V,
            cfg.cells,
            cfg.entries,
            super::layout::TARGET_LOAD,
        ),
    }
    .map_err(|e| e.to_string())?;
    let config = TableConfig {
        stash_cap: cfg.stash_cap,
        ..TableConfig::default()
    };
    let mut t = single_server_table(layout, config)?;
    let mut rng = ChaCha8Rng::seed_from_u64(cfg.seed);
    let mut key = [0u8; NAT4_K];
    let mut refused = 0u64;
    let start = Instant::now();
    for i in 0..cfg.entries {
        stream_key(cfg.seed, i, &mut key);
        let b = i.to_be_bytes();
        let value = [b[2], b[3], b[4], b[5], b[6], b[7]];
        match t.insert(&key, &value, &mut rng) {
            Ok(plan) => {
                std::hint::black_box(&plan);
            }
            Err(TableError::StashFull(_)) => refused += 1,
            Err(e) => return Err(e.to_string()),
        }
    }
    let seconds = start.elapsed().as_secs_f64();
    let s = t.stats();
    Ok(InsertBench {
        config: *cfg,
        inserted: cfg.entries - refused,
        refused_stash_full: refused,
        buckets: u64::from(layout.buckets()),
        cells: s.cells,
        load_factor: s.load_factor,
        stash_entries: s.stash_entries,
        stash_fraction: s.stash_fraction,
        displacements: s.displacements,
        seconds,
        inserts_per_s: cfg.entries as f64 / seconds.max(1e-9),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn e10_blp_reads_at_most_one_and_cuckoo_up_to_two() {
        let rows = e10(10, &[0.5, 0.8, 0.95], 1).unwrap();
        assert_eq!(rows.len(), 6);
        for r in &rows {
            match r.scheme {
                "blp" => assert!(r.max_dram_reads <= 1 && r.mean_dram_reads <= 1.0),
                _ => assert!(r.max_dram_reads <= 2),
            }
        }
        let blp: Vec<_> = rows.iter().filter(|r| r.scheme == "blp").collect();
        assert!(blp[2].stash_fraction >= blp[0].stash_fraction);
        let ck_high = rows
            .iter()
            .find(|r| r.scheme == "cuckoo2" && r.load > 0.9)
            .unwrap();
        assert!(ck_high.mean_dram_reads > 1.0);
        assert_eq!(ck_high.max_dram_reads, 2);
    }

    #[test]
    fn e11_counts_rules() {
        let rows = e11(32, 100, 20).unwrap();
        for r in &rows {
            assert_eq!(r.tea_range_rules, r.servers);
            assert!(r.ch_vnode_rules >= 100 * r.servers - 1, "{r:?}");
            assert!(r.ch_server_rules <= r.ch_vnode_rules);
        }
        assert_eq!(rows[0].ch_server_rules, 1);
    }

    #[test]
    fn e12_regime_winners() {
        // A capacity in the range E4 measures (tens of M lookups/s per server).
        let rows = e12(&E12Inputs::new(30e6));
        let winner = |regime: &str| {
            rows.iter()
                .find(|r| r.regime.starts_with(regime) && r.cheapest)
                .map(|r| r.option)
        };
        assert_eq!(winner("1:"), Some("switch"));
        assert_eq!(winner("3:"), Some("switch"));
        assert_eq!(winner("4: >1T"), Some("switch+tea"));
        let sw2 = rows
            .iter()
            .find(|r| r.regime.starts_with("2:") && r.option == "switch")
            .unwrap();
        assert!(!sw2.feasible && sw2.extra_sram_usd_low > 0.0);
    }

    #[test]
    fn small_insert_benchmark_runs() {
        let r = insert_benchmark(&InsertBenchConfig {
            entries: 20_000,
            ..InsertBenchConfig::default()
        })
        .unwrap();
        assert_eq!(r.inserted, 20_000);
        assert!(r.load_factor <= 0.9 + 1e-9);
        assert!(r.stash_fraction < 0.05);
        // A 16-entry stash overflows: inserts are refused, never lost.
        let r = insert_benchmark(&InsertBenchConfig {
            entries: 20_000,
            log2_buckets: Some(13),
            stash_cap: 16,
            ..InsertBenchConfig::default()
        })
        .unwrap();
        assert!(r.refused_stash_full > 0);
        assert_eq!(r.stash_entries, 16);
    }
}

#[cfg(test)]
mod print {
    /// `cargo test --release -p inca-tea --lib print_offline -- --ignored --nocapture`
    #[test]
    #[ignore]
    fn print_offline() {
        for r in super::e10(16, &super::e10_loads(), 1).unwrap() {
            println!("{}", serde_json::to_string(&r).unwrap());
        }
        for r in super::e11(32, 100, 20).unwrap() {
            println!("{}", serde_json::to_string(&r).unwrap());
        }
        for r in super::e12(&super::E12Inputs::new(30e6)) {
            println!("{}", serde_json::to_string(&r).unwrap());
        }
    }
}
