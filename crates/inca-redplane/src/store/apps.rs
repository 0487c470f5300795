//! The application hooks that run at the state store (specs/redplane.md §2
//! "Developer API", §7): key and value widths, `store_init` for keys seen for
//! the first time (NAT port pools, LB backend round-robin), how a key maps to
//! a shard, and which record holds a bounded-mode partition's lease.
//!
//! Independent of the switch-side code: a store worker only needs these.

use std::collections::BTreeSet;
use std::net::Ipv4Addr;

use inca_apps::core::Endpoint;
use serde::{Deserialize, Serialize};

/// Where a store worker sits among the shards of its app.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShardCtx {
    /// This shard's index, `0..count`.
    pub index: u32,
    /// How many shards the app's keys are spread over.
    pub count: u32,
}

/// What `store_init` produces: the key's value, plus records the same shard
/// creates alongside it (the NAT's reverse mapping).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct InitResult {
    /// The new key's value (V bytes).
    pub value: Vec<u8>,
    /// Other records created with it, `(key, value)`, ownerless.
    pub extra: Vec<(Vec<u8>, Vec<u8>)>,
}

/// Bounded-mode partitioning (§5.9): entry keys are `(partition, index)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SnapshotLayout {
    /// Entries per partition (n).
    pub entries: usize,
}

/// A RedPlane app as the store sees it.
pub trait StoreApp: Send {
    /// The app's name, for reports.
    fn name(&self) -> &'static str;
    /// Key width K in bytes.
    fn key_len(&self) -> usize;
    /// Value width V in bytes.
    fn value_len(&self) -> usize;
    /// `store_init`: the value of a key seen for the first time at this shard.
    fn init(&mut self, key: &[u8], shard: ShardCtx) -> InitResult;
    /// Called for every record a replica applies (head or chain), so pool
    /// state follows the replicated records and a new head never hands out
    /// what an old head already did.
    fn on_apply(&mut self, _key: &[u8], _value: &[u8]) {}
    /// Which shard (of `count`) owns `key`. Default: CRC32 of the key,
    /// truncated to 16 bits, split into `count` equal ranges — the same
    /// function as the switch's `shard_map` (§3.1).
    fn shard_of(&self, key: &[u8], count: u32) -> u32 {
        hash_shard(key, count)
    }
    /// Bounded-mode apps: the partition layout. `None` for per-flow apps.
    fn snapshot_layout(&self) -> Option<SnapshotLayout> {
        None
    }
    /// For bounded-mode apps: the entry index within its partition and the
    /// partition's lease key (the entry key with the index zeroed).
    fn partition_of(&self, _key: &[u8]) -> Option<(Vec<u8>, usize)> {
        None
    }
    /// For bounded-mode apps: the entry key of `index` in the partition
    /// whose lease key is `lease_key`.
    fn entry_key(&self, lease_key: &[u8], _index: usize) -> Vec<u8> {
        lease_key.to_vec()
    }
}

/// CRC32 truncated to 16 bits, range-split into `count` shards.
pub fn hash_shard(key: &[u8], count: u32) -> u32 {
    let h = u64::from(inca_switch::hash::crc32(key) & 0xFFFF);
    ((h * u64::from(count.max(1))) >> 16) as u32
}

/// The 6-byte (address, port) form the NAT and LB keys and values use.
fn ip_port(ip: Ipv4Addr, port: u16) -> Vec<u8> {
    Endpoint::new(ip.octets(), port).to_bytes().to_vec()
}

/// The app on a store worker, as configured (`app = "nat"`, ...).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "app", rename_all = "snake_case", deny_unknown_fields)]
pub enum AppConfig {
    /// NAT: 6 B keys (IP, port), 6 B values.
    Nat {
        /// The NAT's public IP; keys with this IP are reverse keys.
        public_ip: Ipv4Addr,
        /// First public port of the pool.
        #[serde(default = "default_port_base")]
        port_base: u16,
        /// Number of public ports, split evenly over the shards.
        #[serde(default = "default_port_count")]
        port_count: u16,
    },
    /// Stateful firewall: 6 B key, 6 B value (state byte + pad).
    Firewall,
    /// Load balancer: 6 B client key, 6 B backend value.
    Lb {
        /// The backend pool, `"ip:port"` strings.
        backends: Vec<std::net::SocketAddrV4>,
    },
    /// EPC-SGW: 4 B UE IP, 12 B (uplink TEID, downlink TEID, eNB IP).
    Epc,
    /// Sync-Counter: 13 B 5-tuple, 4 B count.
    SyncCounter,
    /// KV store: 4 B key, 4 B value.
    Kv,
    /// Heavy-hitter sketch partitions: key (VLAN 16, index 8), rows × 4 B.
    HeavyHitter {
        /// Sketch rows (3, 4 or 5).
        #[serde(default = "default_rows")]
        rows: usize,
        /// Entries per row (64).
        #[serde(default = "default_hh_entries")]
        entries: usize,
    },
    /// Async-Counter: key index 16 bit (one partition), 4 B value.
    AsyncCounter {
        /// Array size (1024).
        #[serde(default = "default_async_entries")]
        entries: usize,
    },
}

fn default_port_base() -> u16 {
    1024
}
fn default_port_count() -> u16 {
    64512
}
fn default_rows() -> usize {
    3
}
fn default_hh_entries() -> usize {
    64
}
fn default_async_entries() -> usize {
    1024
}

impl AppConfig {
    /// Builds the store-side app.
    pub fn build(&self) -> Box<dyn StoreApp> {
        match self {
            AppConfig::Nat {
                public_ip,
                port_base,
                port_count,
            } => Box::new(NatStore::new(*public_ip, *port_base, *port_count)),
            AppConfig::Firewall => Box::new(Fixed::new("firewall", 6, 6)),
            AppConfig::Lb { backends } => Box::new(LbStore {
                backends: backends.clone(),
                next: 0,
            }),
            AppConfig::Epc => Box::new(Fixed::new("epc", 4, 12)),
            AppConfig::SyncCounter => Box::new(Fixed::new("sync_counter", 13, 4)),
            AppConfig::Kv => Box::new(Fixed::new("kv", 4, 4)),
            AppConfig::HeavyHitter { rows, entries } => Box::new(Partitioned {
                name: "heavy_hitter",
                partition_bytes: 2,
                index_bytes: 1,
                value_len: 4 * rows,
                entries: (*entries).clamp(1, 256),
            }),
            AppConfig::AsyncCounter { entries } => Box::new(Partitioned {
                name: "async_counter",
                partition_bytes: 0,
                index_bytes: 2,
                value_len: 4,
                entries: (*entries).clamp(1, 65536),
            }),
        }
    }
}

/// Apps whose new keys start at zero (firewall "none", EPC before signaling,
/// counters, KV).
#[derive(Debug, Clone)]
pub struct Fixed {
    name: &'static str,
    k: usize,
    v: usize,
}

impl Fixed {
    /// An app with K = `k`, V = `v`, zero initial values.
    pub fn new(name: &'static str, k: usize, v: usize) -> Self {
        Fixed { name, k, v }
    }
}

impl StoreApp for Fixed {
    fn name(&self) -> &'static str {
        self.name
    }
    fn key_len(&self) -> usize {
        self.k
    }
    fn value_len(&self) -> usize {
        self.v
    }
    fn init(&mut self, _key: &[u8], _shard: ShardCtx) -> InitResult {
        InitResult {
            value: vec![0; self.v],
            extra: Vec::new(),
        }
    }
}

/// The NAT at the store: each shard owns an equal slice of the public port
/// range and allocates from it, creating the forward record (internal →
/// public) and the reverse record (public → internal) together. Reverse
/// keys are sharded by port range, not hash, so the allocating shard owns
/// both (§7) [our choice]. Ports are never returned to the pool: the apps
/// have no connection teardown [our choice].
#[derive(Debug, Clone)]
pub struct NatStore {
    public_ip: Ipv4Addr,
    port_base: u16,
    port_count: u16,
    used: BTreeSet<u16>,
    cursor: u16,
}

impl NatStore {
    /// A NAT pool over `port_count` ports from `port_base`.
    pub fn new(public_ip: Ipv4Addr, port_base: u16, port_count: u16) -> Self {
        let port_count = port_count.min(u16::MAX - port_base).max(1);
        NatStore {
            public_ip,
            port_base,
            port_count,
            used: BTreeSet::new(),
            cursor: 0,
        }
    }

    /// The public port range `[lo, hi)` of shard `index` of `count`.
    pub fn shard_range(&self, index: u32, count: u32) -> (u16, u16) {
        let count = count.max(1);
        let per = u32::from(self.port_count) / count;
        let lo = u32::from(self.port_base) + per * index;
        (lo as u16, (lo + per) as u16)
    }

    fn is_reverse(&self, key: &[u8]) -> bool {
        key.len() >= 4 && key[..4] == self.public_ip.octets()
    }
}

impl StoreApp for NatStore {
    fn name(&self) -> &'static str {
        "nat"
    }
    fn key_len(&self) -> usize {
        6
    }
    fn value_len(&self) -> usize {
        6
    }

    fn init(&mut self, key: &[u8], shard: ShardCtx) -> InitResult {
        if self.is_reverse(key) {
            // A reverse key with no record: nobody allocated it, so the
            // switch drops the packet (value 0.0.0.0:0).
            return InitResult {
                value: vec![0; 6],
                extra: Vec::new(),
            };
        }
        let (lo, hi) = self.shard_range(shard.index, shard.count);
        let span = hi.saturating_sub(lo);
        for i in 0..span {
            let port = lo + (self.cursor.wrapping_add(i) % span.max(1));
            if !self.used.contains(&port) {
                self.used.insert(port);
                self.cursor = (port - lo).wrapping_add(1);
                let public = ip_port(self.public_ip, port);
                return InitResult {
                    value: public.clone(),
                    extra: vec![(public, key.to_vec())],
                };
            }
        }
        // Pool exhausted: the mapping is 0.0.0.0:0, which the switch drops.
        InitResult {
            value: vec![0; 6],
            extra: Vec::new(),
        }
    }

    fn on_apply(&mut self, key: &[u8], value: &[u8]) {
        // A forward record's value, or a reverse record's key, names a used
        // public port.
        for b in [key, value] {
            if b.len() == 6 && self.is_reverse(b) {
                self.used.insert(u16::from_be_bytes([b[4], b[5]]));
            }
        }
    }

    fn shard_of(&self, key: &[u8], count: u32) -> u32 {
        if self.is_reverse(key) {
            let port = u16::from_be_bytes([key[4], key[5]]);
            let per = (u32::from(self.port_count) / count.max(1)).max(1);
            let off = u32::from(port.saturating_sub(self.port_base));
            (off / per).min(count.max(1) - 1)
        } else {
            hash_shard(key, count)
        }
    }
}

/// The load balancer: a new client key gets the next backend of the pool,
/// round-robin per shard [our choice].
#[derive(Debug, Clone)]
pub struct LbStore {
    backends: Vec<std::net::SocketAddrV4>,
    next: usize,
}

impl StoreApp for LbStore {
    fn name(&self) -> &'static str {
        "lb"
    }
    fn key_len(&self) -> usize {
        6
    }
    fn value_len(&self) -> usize {
        6
    }
    fn init(&mut self, _key: &[u8], _shard: ShardCtx) -> InitResult {
        let value = match self.backends.get(self.next % self.backends.len().max(1)) {
            Some(b) => ip_port(*b.ip(), b.port()),
            None => vec![0; 6],
        };
        self.next = self.next.wrapping_add(1);
        InitResult {
            value,
            extra: Vec::new(),
        }
    }
}

/// Bounded-mode apps (HH sketch per VLAN, Async-Counter): keys are
/// `partition ‖ index`; the partition's lease lives on the key with the
/// index bytes zeroed.
#[derive(Debug, Clone)]
pub struct Partitioned {
    name: &'static str,
    partition_bytes: usize,
    index_bytes: usize,
    value_len: usize,
    entries: usize,
}

impl StoreApp for Partitioned {
    fn name(&self) -> &'static str {
        self.name
    }
    fn key_len(&self) -> usize {
        self.partition_bytes + self.index_bytes
    }
    fn value_len(&self) -> usize {
        self.value_len
    }
    fn init(&mut self, _key: &[u8], _shard: ShardCtx) -> InitResult {
        InitResult {
            value: vec![0; self.value_len],
            extra: Vec::new(),
        }
    }
    fn snapshot_layout(&self) -> Option<SnapshotLayout> {
        Some(SnapshotLayout {
            entries: self.entries,
        })
    }
    fn partition_of(&self, key: &[u8]) -> Option<(Vec<u8>, usize)> {
        if key.len() != self.key_len() {
            return None;
        }
        let idx = key[self.partition_bytes..]
            .iter()
            .fold(0usize, |a, &b| a << 8 | usize::from(b));
        if idx >= self.entries {
            return None;
        }
        let mut lease = key.to_vec();
        lease[self.partition_bytes..].fill(0);
        Some((lease, idx))
    }
    fn entry_key(&self, lease_key: &[u8], index: usize) -> Vec<u8> {
        let mut k = lease_key.to_vec();
        let n = self.index_bytes;
        for i in 0..n {
            if let Some(b) = k.get_mut(self.partition_bytes + i) {
                *b = (index >> (8 * (n - 1 - i))) as u8;
            }
        }
        k
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nat_shards_own_disjoint_port_ranges_and_reverse_keys_follow_them() {
        let ip = Ipv4Addr::new(100, 64, 0, 1);
        let mut shards: Vec<NatStore> = (0..4).map(|_| NatStore::new(ip, 1024, 4000)).collect();
        let mut seen = BTreeSet::new();
        for (i, s) in shards.iter_mut().enumerate() {
            for c in 0..50u16 {
                let key = ip_port(Ipv4Addr::new(10, 0, 0, 1), c);
                let r = s.init(
                    &key,
                    ShardCtx {
                        index: i as u32,
                        count: 4,
                    },
                );
                let port = u16::from_be_bytes([r.value[4], r.value[5]]);
                let (lo, hi) = s.shard_range(i as u32, 4);
                assert!(port >= lo && port < hi);
                assert!(seen.insert(port), "port {port} handed out twice");
                assert_eq!(r.extra, vec![(r.value.clone(), key)]);
                assert_eq!(s.shard_of(&r.value, 4), i as u32);
            }
        }
    }

    #[test]
    fn nat_on_apply_keeps_a_new_head_from_reusing_ports() {
        let ip = Ipv4Addr::new(100, 64, 0, 1);
        let mut a = NatStore::new(ip, 1024, 10);
        let mut b = NatStore::new(ip, 1024, 10);
        let shard = ShardCtx { index: 0, count: 1 };
        let r = a.init(&[10, 0, 0, 1, 0, 1], shard);
        b.on_apply(&[10, 0, 0, 1, 0, 1], &r.value);
        let r2 = b.init(&[10, 0, 0, 2, 0, 1], shard);
        assert_ne!(r.value, r2.value);
        // Unknown reverse key → 0.0.0.0:0.
        assert_eq!(b.init(&ip_port(ip, 5000), shard).value, vec![0; 6]);
    }

    #[test]
    fn lb_round_robins_and_partitions_map_indices() {
        let cfg: AppConfig =
            serde_json::from_str(r#"{"app":"lb","backends":["10.1.0.1:80","10.1.0.2:80"]}"#)
                .unwrap();
        let mut lb = cfg.build();
        let s = ShardCtx { index: 0, count: 1 };
        let a = lb.init(&[0; 6], s).value;
        let b = lb.init(&[0; 6], s).value;
        let c = lb.init(&[0; 6], s).value;
        assert_ne!(a, b);
        assert_eq!(a, c);
        let hh = AppConfig::HeavyHitter {
            rows: 3,
            entries: 64,
        }
        .build();
        assert_eq!((hh.key_len(), hh.value_len()), (3, 12));
        assert_eq!(hh.partition_of(&[0, 7, 5]), Some((vec![0, 7, 0], 5)));
        assert_eq!(hh.partition_of(&[0, 7, 64]), None);
        assert_eq!(hh.entry_key(&[0, 7, 0], 9), vec![0, 7, 9]);
        let ac = AppConfig::AsyncCounter { entries: 1024 }.build();
        assert_eq!(ac.partition_of(&[3, 255]), Some((vec![0, 0], 1023)));
        assert_eq!(ac.entry_key(&[0, 0], 1023), vec![3, 255]);
    }
}
