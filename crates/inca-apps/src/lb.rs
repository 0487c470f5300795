//! L4 load balancer: a virtual IP (VIP) and port in front of a pool of
//! backends, with per-connection state so a connection stays on its backend
//! while the pool changes.
//!
//! Objects (all ingress):
//!
//! - `lb_conn`, exact, keyed by the client's 5-tuple (client address, VIP,
//!   protocol, client port, VIP port), `flows` entries with an idle timeout
//!   (`idle_timeout` seconds, default 60): the connection's backend
//!   (address, port, egress port) and the client's port. Return traffic from
//!   the backend looks up the same entry (its key is rebuilt from the
//!   packet's destination and the constant VIP; on a switch the direction
//!   gateway selects the key fields), so one entry serves both directions
//!   and ages on traffic either way.
//! - `lb_pool`, exact, keyed by a bucket number (`buckets` entries, a power
//!   of two, default 256): the backend of each bucket. A new connection's
//!   bucket is the CRC-32 of its 5-tuple (`lb_hash`, low bits); the control
//!   plane spreads the buckets over the pool members.
//! - `lb_mode`, a one-entry 8-bit register: how the data plane treats a new
//!   connection (0: forward it through the pool and send a digest so the
//!   control plane installs `lb_conn`; 1: punt it to the control plane).
//! - `lb_stats`, a counter array; see the `STAT_*` constants.
//!
//! Packets:
//!
//! - To the VIP (destination address and port): a hit in `lb_conn` rewrites
//!   the destination to the backend's and forwards it to the backend's
//!   port. A miss is a new connection: the data plane picks the bucket's
//!   backend, forwards the packet there at once and sends a digest; the
//!   control plane installs the entry (every packet before the install does
//!   the same and the control plane ignores digests of known connections).
//!   On a CPU data path (`server`) the data path installs the entry itself.
//! - Anything else is return traffic if `lb_conn` has the connection and
//!   the packet comes from its backend (source address and port): the
//!   source is rewritten to the VIP and the packet goes to the client's
//!   port (the port its connection arrived on). Other packets are dropped
//!   and counted, as are packets that are not TCP or UDP over IPv4.
//!
//! Checksums are updated incrementally (RFC 1624), as a switch must.
//!
//! Connection keys, the bucket hash and the rewrites are
//! [`crate::core::lb`]'s; this program keeps the connections and the pool
//! in its tables.
//!
//! Pool changes are control messages to the switch:
//!
//! - kind [`MSG_ADD_BACKEND`] (1), body 8 bytes: backend address (4), its
//!   port (u16 big-endian), its egress port (u16 big-endian). The new
//!   member takes `buckets / members` buckets from the members that hold
//!   the most; other buckets keep their backend. Adding a member already in
//!   the pool (same address and port) does nothing.
//! - kind [`MSG_REMOVE_BACKEND`] (2), body 6 bytes: address (4) and port
//!   (u16 big-endian). Its buckets go to the members holding the fewest. An
//!   empty pool leaves the buckets empty: new connections are dropped.
//!
//! Other bodies are counted in `bad_messages` and ignored. Changing the pool
//! never touches `lb_conn`, so established connections keep their backend;
//! **a removed backend's existing connections keep going to it** (connection
//! draining) until they end by idle timeout — the operator removes a backend
//! from the pool first and shuts it down later.
//!
//! A pool change is made race-free against connections whose entry is not
//! installed yet (their first packets went through the old pool and their
//! digests are in flight): the control plane first switches `lb_mode` to
//! punt, then sends a marker packet into ingress, which the data plane
//! answers with a digest. Digests reach the control plane in order, so when
//! the marker's arrives every digest of a packet forwarded by the old pool
//! has been handled and its install issued. Only then does the control
//! plane rewrite the buckets and switch `lb_mode` back (control operations
//! take effect in order). Meanwhile it decides new connections itself, with
//! its copy of the buckets and the same hash, so its choice agrees with the
//! data plane's before and after. Changes arriving during a transition are
//! applied together at its end.
//!
//! Control-plane state (the pool members, the copy of the buckets, the
//! connections installed) lives in the struct and is lost on restart, with
//! the tables: the pool starts again from its configured members.
//!
//! Parameters: `flows` (connections, default 65,536), `vip` (default
//! 192.0.2.1), `vip_port` (default 80), `backends` (initial pool size,
//! default 4: 10.1.0.1, 10.1.0.2, … on ports 1, 2, …, listening on
//! `vip_port`), `buckets` (default 256), `idle_timeout` (seconds, default
//! 60).

use std::collections::{BTreeMap, VecDeque};

use inca_switch::device::SECONDS;
use inca_switch::hash::HashAlgorithm;
use inca_switch::{
    AccessError, ArrayDecl, ControlEvent, ControlPlane, DataPlane, Declare, DeclareError, Gress,
    Handle, MatchKind, MatchSpec, Nanos, PacketCtx, PacketKind, PacketOutDest, ParseError, PortId,
    Program, RegisterHandle, TableDecl, TableHandle,
};

use crate::core::lb::{self as core, Spread};
use crate::core::Endpoint;
use crate::headers::{parse, parse_ingress_only, Parsed};
use crate::params::{ParamError, Params};

/// Control message kind: add a backend to the pool.
pub const MSG_ADD_BACKEND: u32 = 1;
/// Control message kind: remove a backend from the pool.
pub const MSG_REMOVE_BACKEND: u32 = 2;
/// Reason code of a punted new connection (during a pool change).
pub const REASON_NEW_CONN: u16 = 1;
/// Reason code of a re-injected packet that still missed: its install
/// failed. The control plane forgets the connection and drops the packet;
/// a packet is never re-injected twice, so nothing loops.
pub const REASON_INSTALL_FAILED: u16 = 2;
/// `lb_mode` value: new connections go through the pool, with a digest.
pub const MODE_DIGEST: u8 = 0;
/// `lb_mode` value: new connections go to the control plane.
pub const MODE_PUNT: u8 = 1;
/// Ethertype of the control plane's marker frame (IEEE local experimental).
pub const MARKER_ETHERTYPE: u16 = 0x88b5;

/// `lb_stats` index: client packet of a known connection.
pub const STAT_TO_BACKEND: u64 = 0;
/// `lb_stats` index: client packet of a new connection.
pub const STAT_NEW: u64 = 1;
/// `lb_stats` index: backend packet sent back to the client.
pub const STAT_TO_CLIENT: u64 = 2;
/// `lb_stats` index: not to the VIP and not from a known connection's
/// backend; dropped.
pub const STAT_UNKNOWN: u64 = 3;
/// `lb_stats` index: new connection with no backend (empty pool); dropped.
pub const STAT_NO_BACKEND: u64 = 4;
/// `lb_stats` index: not TCP/UDP over IPv4; dropped.
pub const STAT_NOT_L4: u64 = 5;
/// `lb_stats` index: the control plane's marker.
pub const STAT_MARKER: u64 = 6;
/// Entries of `lb_stats`.
pub const STATS: usize = 8;

/// A pool member.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Backend {
    /// Its address.
    pub ip: [u8; 4],
    /// Its port (the service's port on the backend).
    pub port: u16,
    /// The switch port it is reached through.
    pub egress: PortId,
}

impl Backend {
    /// Its address and port.
    pub fn endpoint(&self) -> Endpoint {
        Endpoint::new(self.ip, self.port)
    }
}

/// A connection's entry in `lb_conn`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Conn {
    /// Where the connection goes.
    pub backend: Backend,
    /// The port the client is reached through.
    pub client_port: PortId,
}

/// What the data plane tells the control plane.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LbDigest {
    /// A new connection was sent to `conn`'s backend: install it.
    New {
        /// The client 5-tuple.
        key: [u8; 13],
        /// Its entry.
        conn: Conn,
    },
    /// The marker of pool change `epoch` went through ingress.
    Marker(u32),
}

/// A pool change asked for by a control message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PoolChange {
    /// Add this member.
    Add(Backend),
    /// Remove the member with this address and port.
    Remove([u8; 4], u16),
}

impl PoolChange {
    /// Decodes a control message (see the module documentation); None if
    /// it is not a well-formed pool change.
    pub fn decode(kind: u32, body: &[u8]) -> Option<PoolChange> {
        match (kind, body) {
            (MSG_ADD_BACKEND, &[a, b, c, d, p0, p1, e0, e1]) => {
                let egress = u16::from_be_bytes([e0, e1]);
                (egress <= 511).then_some(PoolChange::Add(Backend {
                    ip: [a, b, c, d],
                    port: u16::from_be_bytes([p0, p1]),
                    egress,
                }))
            }
            (MSG_REMOVE_BACKEND, &[a, b, c, d, p0, p1]) => Some(PoolChange::Remove(
                [a, b, c, d],
                u16::from_be_bytes([p0, p1]),
            )),
            _ => None,
        }
    }

    /// The control message for this change.
    pub fn encode(&self) -> inca_switch::device::ControlMessage {
        let (kind, body) = match *self {
            PoolChange::Add(b) => {
                let mut body = b.ip.to_vec();
                body.extend_from_slice(&b.port.to_be_bytes());
                body.extend_from_slice(&b.egress.to_be_bytes());
                (MSG_ADD_BACKEND, body)
            }
            PoolChange::Remove(ip, port) => {
                let mut body = ip.to_vec();
                body.extend_from_slice(&port.to_be_bytes());
                (MSG_REMOVE_BACKEND, body)
            }
        };
        inca_switch::device::ControlMessage { kind, body }
    }
}

/// The load balancer program. See the module documentation.
#[derive(Debug, Clone)]
pub struct LoadBalancer {
    flows: usize,
    vip: [u8; 4],
    vip_port: u16,
    buckets: usize,
    idle_timeout: Nanos,
    initial: Vec<Backend>,
    /// Where replies go when their connection is not installed yet.
    client_port: PortId,
    conn: Option<TableHandle<Conn>>,
    pool: Option<TableHandle<Backend>>,
    hash: Option<Handle>,
    mode: Option<RegisterHandle<u8>>,
    stats: Option<Handle>,
    // Control-plane state (lost on restart).
    members: Vec<Backend>,
    /// The control plane's copy of `lb_pool`.
    assignment: Vec<Option<Backend>>,
    conns: BTreeMap<[u8; 13], Conn>,
    pending: VecDeque<PoolChange>,
    /// The pool change in progress, by its marker's epoch.
    changing: Option<u32>,
    epoch: u32,
    /// New connections refused because the table was full.
    pub refused: u64,
    /// Connections removed by the idle timeout.
    pub expired: u64,
    /// Packets the control plane sent into ingress (punted packets sent
    /// back, and markers).
    pub packet_outs: u64,
    /// Control messages that were not well-formed pool changes.
    pub bad_messages: u64,
    /// Pool changes applied.
    pub pool_changes: u64,
}

/// The bucket of a 5-tuple: what `lb_hash` computes, so the control plane
/// agrees with the data plane.
pub fn bucket_of(key: &[u8; 13], buckets: usize) -> usize {
    Spread::Buckets(buckets).slot(key).unwrap_or(0)
}

/// Sends `pkt` to backend `b`: destination rewritten.
fn to_backend(pkt: &mut PacketCtx<Parsed, LbDigest>, b: &Backend) {
    let p = pkt.meta;
    core::to_backend(pkt.header_mut(), &p, b.endpoint());
    pkt.forward(b.egress);
}

/// The marker frame of pool change `epoch`.
pub fn marker_frame(epoch: u32) -> Vec<u8> {
    let mut f = vec![0u8; 60];
    f[6] = 0x02; // a locally administered source MAC
    f[12..14].copy_from_slice(&MARKER_ETHERTYPE.to_be_bytes());
    f[14..18].copy_from_slice(&epoch.to_be_bytes());
    f
}

impl LoadBalancer {
    /// Parameter names.
    pub const PARAMS: &'static [&'static str] = &[
        "flows",
        "vip",
        "vip_port",
        "backends",
        "buckets",
        "idle_timeout",
        "client_port",
    ];

    /// A load balancer for `flows` connections to `vip:vip_port` over
    /// `pool`, with `buckets` hash buckets (rounded up to a power of two)
    /// and connections aging after `idle_timeout`.
    pub fn new(
        flows: usize,
        vip: [u8; 4],
        vip_port: u16,
        pool: Vec<Backend>,
        buckets: usize,
        idle_timeout: Nanos,
    ) -> Self {
        let buckets = buckets.clamp(1, 1 << 16).next_power_of_two();
        LoadBalancer {
            flows,
            vip,
            vip_port,
            buckets,
            idle_timeout: idle_timeout.max(1),
            initial: pool,
            client_port: 0,
            conn: None,
            pool: None,
            hash: None,
            mode: None,
            stats: None,
            members: Vec::new(),
            assignment: Vec::new(),
            conns: BTreeMap::new(),
            pending: VecDeque::new(),
            changing: None,
            epoch: 0,
            refused: 0,
            expired: 0,
            packet_outs: 0,
            bad_messages: 0,
            pool_changes: 0,
        }
    }

    /// The default pool of `n` members: 10.1.0.1, 10.1.0.2, … on ports
    /// 1, 2, …, each listening on `port`.
    pub fn default_pool(n: usize, port: u16) -> Vec<Backend> {
        (1..=n as u32)
            .map(|i| Backend {
                ip: (u32::from_be_bytes([10, 1, 0, 0]) + i).to_be_bytes(),
                port,
                egress: i as PortId,
            })
            .collect()
    }

    /// A load balancer sized from parameters.
    pub fn from_params(p: &Params) -> Result<Self, ParamError> {
        p.check_known("lb", Self::PARAMS)?;
        let flows = p.count("flows", 65_536, 1 << 32)? as usize;
        let vip = p.ipv4("vip", [192, 0, 2, 1])?;
        let vip_port = p.number("vip_port", 80, 0, 65_535)? as u16;
        let backends = p.count("backends", 4, 511)? as usize;
        let buckets = p.count("buckets", 256, 1 << 16)?;
        if !buckets.is_power_of_two() {
            return Err(ParamError::Value {
                name: "buckets".into(),
                reason: format!("{buckets} is not a power of two"),
            });
        }
        let idle = p.count("idle_timeout", 60, 86_400)?;
        let client_port = p.number("client_port", 0, 0, 511)? as PortId;
        Ok(LoadBalancer::new(
            flows,
            vip,
            vip_port,
            Self::default_pool(backends, vip_port),
            buckets as usize,
            idle * SECONDS,
        )
        .with_client_port(client_port))
    }

    /// Replies whose connection is not installed yet go out `port` (the
    /// side the clients are on; default 0).
    pub fn with_client_port(mut self, port: PortId) -> Self {
        self.client_port = port;
        self
    }

    /// The virtual service.
    fn vip_endpoint(&self) -> Endpoint {
        Endpoint::new(self.vip, self.vip_port)
    }

    /// The current pool members (control-plane view).
    pub fn members(&self) -> &[Backend] {
        &self.members
    }

    /// The backend of every bucket (control-plane view).
    pub fn assignment(&self) -> &[Option<Backend>] {
        &self.assignment
    }

    /// Number of connections the control plane has installed.
    pub fn connections(&self) -> usize {
        self.conns.len()
    }

    /// The connection table's handle (after loading).
    pub fn conn_table(&self) -> Option<TableHandle<Conn>> {
        self.conn
    }

    /// The statistics counter's handle (after loading).
    pub fn stats_counter(&self) -> Option<Handle> {
        self.stats
    }

    /// Whether a pool change is in progress.
    pub fn changing(&self) -> bool {
        self.changing.is_some()
    }

    /// Buckets held by each member, in member order.
    fn loads(&self) -> Vec<usize> {
        self.members
            .iter()
            .map(|m| self.assignment.iter().filter(|b| *b == &Some(*m)).count())
            .collect()
    }

    /// Applies a change to the control plane's copy; returns the buckets
    /// that changed, with their old backend.
    fn apply(&mut self, change: PoolChange) -> Vec<(usize, Option<Backend>)> {
        let mut changed = Vec::new();
        match change {
            PoolChange::Add(b) => {
                if self
                    .members
                    .iter()
                    .any(|m| m.ip == b.ip && m.port == b.port)
                {
                    return changed;
                }
                self.members.push(b);
                let share = self.buckets / self.members.len();
                // Empty buckets first (an empty pool, or more members than
                // buckets before), then from the most loaded members.
                for i in 0..self.buckets {
                    if self.assignment[i].is_none() {
                        self.assignment[i] = Some(b);
                        changed.push((i, None));
                    }
                }
                let mut loads = self.loads();
                let me = self.members.len() - 1;
                while loads[me] < share {
                    let Some((donor, _)) = loads[..me]
                        .iter()
                        .enumerate()
                        .max_by_key(|&(i, &l)| (l, std::cmp::Reverse(i)))
                    else {
                        break;
                    };
                    let d = self.members[donor];
                    let Some(i) = (0..self.buckets)
                        .rev()
                        .find(|&i| self.assignment[i] == Some(d))
                    else {
                        break;
                    };
                    self.assignment[i] = Some(b);
                    changed.push((i, Some(d)));
                    loads[donor] -= 1;
                    loads[me] += 1;
                }
            }
            PoolChange::Remove(ip, port) => {
                let Some(pos) = self
                    .members
                    .iter()
                    .position(|m| m.ip == ip && m.port == port)
                else {
                    return changed;
                };
                let gone = self.members.remove(pos);
                let mut loads = self.loads();
                for i in 0..self.buckets {
                    if self.assignment[i] != Some(gone) {
                        continue;
                    }
                    let heir = loads
                        .iter()
                        .enumerate()
                        .min_by_key(|&(i, &l)| (l, i))
                        .map(|(i, _)| i);
                    self.assignment[i] = heir.map(|h| self.members[h]);
                    if let Some(h) = heir {
                        loads[h] += 1;
                    }
                    changed.push((i, Some(gone)));
                }
            }
        }
        changed
    }

    /// Installs the new backend of the buckets that changed.
    fn write_buckets(&self, changed: &[(usize, Option<Backend>)], cp: &mut ControlPlane<'_>) {
        let Some(pool) = self.pool else {
            return;
        };
        for &(i, old) in changed {
            let spec = MatchSpec::Exact((i as u16).to_be_bytes().to_vec().into());
            match (old, self.assignment.get(i).copied().flatten()) {
                (None, Some(b)) => {
                    cp.table_add(pool, spec, b);
                }
                (Some(o), Some(b)) if o != b => {
                    cp.table_modify(pool, spec, b);
                }
                (Some(_), None) => {
                    cp.table_delete(pool, spec);
                }
                _ => {}
            }
        }
    }

    /// Starts a pool change: new connections to the control plane, then a
    /// marker to drain the digests in flight.
    fn begin_change(&mut self, cp: &mut ControlPlane<'_>) {
        let Some(mode) = self.mode else {
            return;
        };
        self.epoch = self.epoch.wrapping_add(1);
        self.changing = Some(self.epoch);
        cp.register_write(mode, 0, MODE_PUNT);
        self.packet_outs += 1;
        cp.packet_out(marker_frame(self.epoch), PacketOutDest::Ingress(0));
    }

    /// The marker is back: every digest of the old pool has been handled.
    /// Rewrites the buckets and lets the data plane decide again.
    fn finish_change(&mut self, cp: &mut ControlPlane<'_>) {
        let Some(mode) = self.mode else {
            return;
        };
        let mut changed: Vec<(usize, Option<Backend>)> = Vec::new();
        while let Some(c) = self.pending.pop_front() {
            self.pool_changes += 1;
            for (i, old) in self.apply(c) {
                // Keep the bucket's backend from before this batch.
                if !changed.iter().any(|&(j, _)| j == i) {
                    changed.push((i, old));
                }
            }
        }
        self.write_buckets(&changed, cp);
        cp.register_write(mode, 0, MODE_DIGEST);
        self.changing = None;
    }

    /// Records a new connection: true if newly recorded, false if known;
    /// None if the table is full.
    fn admit(&mut self, key: [u8; 13], conn: Conn) -> Option<bool> {
        if self.conns.contains_key(&key) {
            return Some(false);
        }
        if self.conns.len() >= self.flows {
            self.refused += 1;
            return None;
        }
        self.conns.insert(key, conn);
        Some(true)
    }
}

impl Program for LoadBalancer {
    type Meta = Parsed;
    type Digest = LbDigest;

    fn name(&self) -> &str {
        "lb"
    }

    fn declare(&mut self, d: &mut Declare) -> Result<(), DeclareError> {
        let direction = d.gateway("lb_direction", Gress::Ingress, &[])?;
        // Backend address (32) + port (16) + egress (9) + client port (9).
        let conn = d.table(
            TableDecl::new("lb_conn", MatchKind::Exact, 13, 66, self.flows)
                .after(&[direction.id()])
                .idle_timeout(self.idle_timeout)
                .vliw(4),
        )?;
        let bits = self.buckets.trailing_zeros().max(1) as u8;
        let hash = d.hash(
            "lb_hash",
            HashAlgorithm::Crc32,
            bits,
            Gress::Ingress,
            &[direction.id()],
        )?;
        let pool = d.table(
            TableDecl::new("lb_pool", MatchKind::Exact, 2, 57, self.buckets)
                .after(&[hash.id()])
                .vliw(2),
        )?;
        let mode = d.register::<u8>(ArrayDecl::new("lb_mode", 1).after(&[direction.id()]))?;
        let stats =
            d.counter(ArrayDecl::new("lb_stats", STATS).after(&[conn.id(), pool.id(), mode.id()]))?;
        self.conn = Some(conn);
        self.pool = Some(pool);
        self.hash = Some(hash);
        self.mode = Some(mode);
        self.stats = Some(stats);
        Ok(())
    }

    fn parse(&self, gress: Gress, header: &[u8], meta: &mut Parsed) -> Result<(), ParseError> {
        parse_ingress_only(gress, header, meta)
    }

    fn ingress(
        &mut self,
        pkt: &mut PacketCtx<Parsed, LbDigest>,
        dp: &mut DataPlane<'_>,
    ) -> Result<(), AccessError> {
        let (Some(conn_t), Some(pool_t), Some(hash), Some(mode), Some(stats)) =
            (self.conn, self.pool, self.hash, self.mode, self.stats)
        else {
            return Ok(());
        };
        let p = pkt.meta;
        let len = pkt.len() as u64;
        if !p.has_ports {
            let h = pkt.header();
            let marker = pkt.kind() == PacketKind::FromCpu
                && h.get(12..14) == Some(&MARKER_ETHERTYPE.to_be_bytes()[..]);
            if let (true, Some(&[a, b, c, d])) = (marker, h.get(14..18)) {
                pkt.digest(LbDigest::Marker(u32::from_be_bytes([a, b, c, d])));
                return dp.count(stats, STAT_MARKER, len);
            }
            return dp.count(stats, STAT_NOT_L4, len);
        }
        let vip = self.vip_endpoint();
        let to_vip = core::to_vip(&p, vip);
        let key = core::client_key(&p, to_vip, vip);
        let hit = dp.lookup(conn_t, &key)?;
        if !to_vip {
            return match hit {
                Some(c) if c.backend.ip == p.src && c.backend.port == p.sport => {
                    core::from_backend(pkt.header_mut(), &p, vip);
                    pkt.forward(c.client_port);
                    dp.count(stats, STAT_TO_CLIENT, len)
                }
                // A reply racing its connection's install (a SYN-ACK comes
                // back in microseconds; the entry takes a control-plane
                // round trip): from the service port, on a backend's side,
                // it is rewritten statelessly towards the clients, as a
                // stateless L4 load balancer does for all return traffic.
                None if p.sport == self.vip_port && pkt.ingress_port() != self.client_port => {
                    core::from_backend(pkt.header_mut(), &p, vip);
                    pkt.forward(self.client_port);
                    dp.count(stats, STAT_TO_CLIENT, len)
                }
                _ => dp.count(stats, STAT_UNKNOWN, len),
            };
        }
        if let Some(c) = hit {
            to_backend(pkt, &c.backend);
            return dp.count(stats, STAT_TO_BACKEND, len);
        }
        // A new connection: the bucket's backend.
        let bucket = dp.hash(hash, &key)? as usize & (self.buckets - 1);
        let chosen = dp.lookup(pool_t, &(bucket as u16).to_be_bytes())?;
        let client_port = pkt.ingress_port();
        if dp.can_write_tables() {
            // A software load balancer: install inline.
            let Some(backend) = chosen else {
                return dp.count(stats, STAT_NO_BACKEND, len);
            };
            let conn = Conn {
                backend,
                client_port,
            };
            if self.admit(key, conn).is_some() {
                let spec = MatchSpec::Exact(key.to_vec().into());
                if dp.table_insert(conn_t, spec, conn)?.is_ok() {
                    to_backend(pkt, &backend);
                } else {
                    self.conns.remove(&key);
                    self.refused += 1;
                }
            }
            return dp.count(stats, STAT_NEW, len);
        }
        if pkt.kind() == PacketKind::FromCpu {
            pkt.to_cpu(REASON_INSTALL_FAILED);
            return dp.count(stats, STAT_NEW, len);
        }
        if dp.register(mode, 0, |m| *m)? == MODE_PUNT {
            pkt.to_cpu(REASON_NEW_CONN);
            return dp.count(stats, STAT_NEW, len);
        }
        let Some(backend) = chosen else {
            return dp.count(stats, STAT_NO_BACKEND, len);
        };
        to_backend(pkt, &backend);
        pkt.digest(LbDigest::New {
            key,
            conn: Conn {
                backend,
                client_port,
            },
        });
        dp.count(stats, STAT_NEW, len)
    }

    fn control(&mut self, event: ControlEvent<LbDigest>, cp: &mut ControlPlane<'_>) {
        let (Some(conn_t), Some(pool_t)) = (self.conn, self.pool) else {
            return;
        };
        match event {
            ControlEvent::Start => {
                self.members.clear();
                self.assignment = vec![None; self.buckets];
                for b in self.initial.clone() {
                    self.apply(PoolChange::Add(b));
                }
                for (i, b) in self.assignment.iter().enumerate() {
                    if let Some(b) = b {
                        let spec = MatchSpec::Exact((i as u16).to_be_bytes().to_vec().into());
                        cp.table_add(pool_t, spec, *b);
                    }
                }
            }
            ControlEvent::Message(m) => match PoolChange::decode(m.kind, &m.body) {
                Some(c) => {
                    self.pending.push_back(c);
                    if self.changing.is_none() {
                        self.begin_change(cp);
                    }
                }
                None => self.bad_messages += 1,
            },
            ControlEvent::Digest(LbDigest::Marker(epoch)) if self.changing == Some(epoch) => {
                self.finish_change(cp);
            }
            ControlEvent::Digest(LbDigest::New { key, conn }) => {
                if self.admit(key, conn) != Some(true) {
                    return; // known (or the table is full)
                }
                cp.table_add(conn_t, MatchSpec::Exact(key.to_vec().into()), conn);
            }
            ControlEvent::PacketIn {
                port,
                reason,
                frame,
            } => {
                let Ok(p) = parse(&frame) else {
                    return;
                };
                if !p.has_ports || !core::to_vip(&p, self.vip_endpoint()) {
                    return;
                }
                let key = p.five_tuple();
                if reason == REASON_INSTALL_FAILED {
                    if self.conns.remove(&key).is_some() {
                        self.refused += 1;
                    }
                    return; // dropped
                }
                if reason != REASON_NEW_CONN {
                    return;
                }
                if !self.conns.contains_key(&key) {
                    // Decide as the data plane would with the current pool.
                    let b = self
                        .assignment
                        .get(bucket_of(&key, self.buckets))
                        .copied()
                        .flatten();
                    let Some(backend) = b else {
                        return; // empty pool: dropped
                    };
                    let conn = Conn {
                        backend,
                        client_port: port,
                    };
                    if self.admit(key, conn).is_none() {
                        return; // full: dropped
                    }
                    cp.table_add(conn_t, MatchSpec::Exact(key.to_vec().into()), conn);
                }
                // After the write (the channel is FIFO), so it hits.
                self.packet_outs += 1;
                cp.packet_out(frame, PacketOutDest::Ingress(port));
            }
            ControlEvent::IdleTimeout { table, spec } if table == conn_t.id() => {
                if let MatchSpec::Exact(k) = &spec {
                    if let Ok(key) = <[u8; 13]>::try_from(&k[..]) {
                        if self.conns.remove(&key).is_some() {
                            self.expired += 1;
                        }
                    }
                }
                cp.table_delete(conn_t, spec);
            }
            _ => {}
        }
    }
}
