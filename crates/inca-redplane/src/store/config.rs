//! `StoreConfig`: everything a state-store server is built from, in the
//! snake_case names a scenario `[[server]] kind = "redplane_store"` table or an
//! `inca node` file uses. Defaults follow specs/redplane.md §5.11.

use std::net::Ipv4Addr;

use inca_server::ServerAddr;
use inca_switch::device::{Nanos, MICROS, MILLIS, SECONDS};
use serde::{Deserialize, Serialize};

use super::apps::{AppConfig, ShardCtx};

/// Members a chain may have (the heartbeat's removed bitmap is 32 bits).
pub const MAX_CHAIN: usize = 32;

/// A store configuration serde accepted but the store cannot run; the
/// message names the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreConfigError {
    /// A worker number outside 1..=63.
    #[error("workers: worker {worker} is not in 1..=63")]
    WorkerNumber {
        /// The number given.
        worker: u16,
    },
    /// Two workers with the same number.
    #[error("workers: worker {worker} appears twice")]
    WorkerTwice {
        /// The number given twice.
        worker: u16,
    },
    /// A shard index not below the shard count.
    #[error("workers: worker {worker} has shard {shard} of {shards}")]
    Shard {
        /// The worker.
        worker: u16,
        /// Its shard index.
        shard: u32,
        /// Its shard count.
        shards: u32,
    },
    /// A chain that does not list this server.
    #[error("chain: does not contain this server's ip {ip}")]
    NotInChain {
        /// This server's address.
        ip: Ipv4Addr,
    },
    /// More than [`MAX_CHAIN`] members.
    #[error("chain: at most 32 members")]
    ChainTooLong {
        /// How many were given.
        members: usize,
    },
    /// A fence gap of 0, or too large for 16-bit serial numbers.
    #[error("fence_gap: {fence_gap} must be in 1..{}", (1u32 << 15) - 1024)]
    FenceGap {
        /// The gap given.
        fence_gap: u16,
    },
    /// No queue and no service time: no request could ever be admitted.
    #[error("worker_queue: must be at least 1")]
    WorkerQueue,
}

/// One worker: a UDP port 8000 + `worker` serving one app's shard.
/// (`deny_unknown_fields` cannot be combined with the flattened app; the
/// app's own fields are still checked.)
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkerConfig {
    /// Worker number w, 1…63 (port 8000 + w).
    pub worker: u16,
    /// The app this worker serves (fixes K and V).
    #[serde(flatten)]
    pub app: AppConfig,
    /// This worker's shard index among `shards`.
    #[serde(default)]
    pub shard: u32,
    /// How many shards the app is split into.
    #[serde(default = "one")]
    pub shards: u32,
}

fn one() -> u32 {
    1
}

impl WorkerConfig {
    /// The shard context handed to `store_init`.
    pub fn shard_ctx(&self) -> ShardCtx {
        ShardCtx {
            index: self.shard,
            count: self.shards.max(1),
        }
    }
}

/// A state-store server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoreConfig {
    /// This server's IPv4 address.
    pub ip: Ipv4Addr,
    /// Its MAC address.
    #[serde(default = "default_mac")]
    pub mac: [u8; 6],
    /// The next hop's MAC (every frame goes out port 0 to it).
    #[serde(default = "broadcast")]
    pub gateway_mac: [u8; 6],
    /// The workers.
    pub workers: Vec<WorkerConfig>,
    /// Chain member IPs, head first, this server included. Empty = no chain.
    #[serde(default)]
    pub chain: Vec<Ipv4Addr>,
    /// Chain replication on/off ([RP] Fig. 9). Off: this server alone
    /// answers once it has applied an update.
    #[serde(default = "yes")]
    pub chain_enabled: bool,
    /// LEASE_PERIOD.
    #[serde(default = "default_lease")]
    pub lease_period: Nanos,
    /// CPU time per request per worker.
    #[serde(default = "default_service")]
    pub service_time: Nanos,
    /// Requests a worker may have waiting (beyond this: dropped, counted).
    #[serde(default = "default_queue")]
    pub worker_queue: usize,
    /// HOLD_TIMEOUT for buffered reads (= RTO).
    #[serde(default = "default_hold")]
    pub hold_timeout: Nanos,
    /// FENCE_GAP.
    #[serde(default = "default_fence_gap")]
    pub fence_gap: u16,
    /// Heartbeat period between chain members.
    #[serde(default = "default_heartbeat")]
    pub heartbeat_interval: Nanos,
    /// Missed heartbeats after which a member is removed.
    #[serde(default = "default_misses")]
    pub heartbeat_misses: u32,
    /// The head resends unacknowledged chain updates after this long.
    #[serde(default = "default_chain_rto")]
    pub chain_rto: Nanos,
    /// Chain updates a worker may have in flight (beyond: requests dropped).
    #[serde(default = "default_chain_window")]
    pub chain_window: usize,
    /// Records per worker (beyond: new keys dropped, counted).
    #[serde(default = "default_max_records")]
    pub max_records: usize,
    /// Switch IPs allowed to send requests; empty = any. Also where new-head
    /// announcements go (with every switch seen so far).
    #[serde(default)]
    pub allowed_switches: Vec<Ipv4Addr>,
}

fn default_mac() -> [u8; 6] {
    [0x02, 0, 0, 0, 0x5e, 0x01]
}
fn broadcast() -> [u8; 6] {
    [0xff; 6]
}
fn yes() -> bool {
    true
}
fn default_lease() -> Nanos {
    SECONDS
}
fn default_service() -> Nanos {
    250
}
fn default_queue() -> usize {
    4096
}
fn default_hold() -> Nanos {
    MILLIS
}
fn default_fence_gap() -> u16 {
    4096
}
fn default_heartbeat() -> Nanos {
    10 * MILLIS
}
fn default_misses() -> u32 {
    3
}
fn default_chain_rto() -> Nanos {
    500 * MICROS
}
fn default_chain_window() -> usize {
    65536
}
fn default_max_records() -> usize {
    1 << 22
}

impl StoreConfig {
    /// A config with defaults for one server, no chain.
    pub fn new(ip: Ipv4Addr, workers: Vec<WorkerConfig>) -> Self {
        StoreConfig {
            ip,
            mac: default_mac(),
            gateway_mac: broadcast(),
            workers,
            chain: Vec::new(),
            chain_enabled: true,
            lease_period: default_lease(),
            service_time: default_service(),
            worker_queue: default_queue(),
            hold_timeout: default_hold(),
            fence_gap: default_fence_gap(),
            heartbeat_interval: default_heartbeat(),
            heartbeat_misses: default_misses(),
            chain_rto: default_chain_rto(),
            chain_window: default_chain_window(),
            max_records: default_max_records(),
            allowed_switches: Vec::new(),
        }
    }

    /// Checks what serde cannot: worker numbers, the chain, the fence gap.
    pub fn validate(&self) -> Result<(), StoreConfigError> {
        let mut seen = std::collections::BTreeSet::new();
        for w in &self.workers {
            if !(1..=63).contains(&w.worker) {
                return Err(StoreConfigError::WorkerNumber { worker: w.worker });
            }
            if !seen.insert(w.worker) {
                return Err(StoreConfigError::WorkerTwice { worker: w.worker });
            }
            if w.shard >= w.shards.max(1) {
                return Err(StoreConfigError::Shard {
                    worker: w.worker,
                    shard: w.shard,
                    shards: w.shards,
                });
            }
        }
        if !self.chain.is_empty() && !self.chain.contains(&self.ip) {
            return Err(StoreConfigError::NotInChain { ip: self.ip });
        }
        if self.chain.len() > MAX_CHAIN {
            return Err(StoreConfigError::ChainTooLong {
                members: self.chain.len(),
            });
        }
        // §5.6: MAX_INFLIGHT (1024) + FENCE_GAP must stay below 2^15.
        if u32::from(self.fence_gap) + 1024 >= 1 << 15 || self.fence_gap == 0 {
            return Err(StoreConfigError::FenceGap {
                fence_gap: self.fence_gap,
            });
        }
        if self.service_time == 0 && self.worker_queue == 0 {
            return Err(StoreConfigError::WorkerQueue);
        }
        Ok(())
    }

    /// The server's addresses.
    pub fn addr(&self) -> ServerAddr {
        ServerAddr {
            ip: self.ip,
            mac: self.mac,
            gateway_mac: self.gateway_mac,
        }
    }

    /// Whether chain replication is in effect (on, and more than one member).
    pub fn replicated(&self) -> bool {
        self.chain_enabled && self.chain.len() > 1
    }
}
