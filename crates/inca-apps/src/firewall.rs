//! Stateful firewall: connections opened from inside are let back in,
//! unsolicited traffic from outside is dropped.
//!
//! One port is the outside (`outside_port`); every other port is inside.
//! The connection state is one exact-match table, `fw_conn`, keyed by the
//! connection's 5-tuple in its canonical direction, the way the inside host
//! sent it: (inside address, remote address, protocol, inside port, remote
//! port). A packet from inside looks up its own 5-tuple; a packet from
//! outside looks up its 5-tuple with the two ends swapped (on a switch the
//! direction gateway selects which header fields feed the table's key), so
//! one entry serves both directions and its idle timer sees traffic either
//! way. The entry's action data is the inside port the connection came from.
//!
//! - From inside, a hit is forwarded out of `outside_port`. A miss is a new
//!   connection: the packet goes to the control plane, which installs the
//!   entry and re-injects the packet (the packet-out follows the table write
//!   in the control channel, so the re-injected packet hits). On a CPU data
//!   path (`server` profile) the data path installs the entry itself.
//! - From outside, a hit is forwarded to the entry's inside port; a miss
//!   (unsolicited) is dropped and counted.
//! - Packets that are not TCP or UDP over IPv4, and fragments after the
//!   first (no ports), are dropped and counted; frames that do not parse
//!   are counted by the switch.
//!
//! Aging: `fw_conn` has an idle timeout (`idle_timeout`, seconds, default
//! 60); when an entry has seen no packet in either direction for that long
//! the switch tells the control plane, which deletes it.
//!
//! TCP teardown is deliberately simple: FIN is ignored (the connection ends
//! by idle timeout, so the closing handshake's last ACKs still pass); a RST
//! on an existing connection, from either side, is forwarded and a digest
//! asks the control plane to delete the entry at once (a CPU data path
//! deletes it inline). A RST from inside that matches no connection is
//! forwarded without creating one.
//!
//! Counters (`fw_stats`, one access per packet): see the `STAT_*`
//! constants.
//!
//! Sides, connection keys and what opens a connection are
//! [`crate::core::firewall`]'s; this program keeps the connections in
//! `fw_conn`.
//!
//! Parameters: `flows` (connections, default 65,536), `outside_port`
//! (default 0), `idle_timeout` (seconds, default 60).

use std::collections::BTreeMap;

use inca_switch::device::SECONDS;
use inca_switch::{
    AccessError, ArrayDecl, ControlEvent, ControlPlane, DataPlane, Declare, DeclareError, Gress,
    Handle, MatchKind, MatchSpec, Nanos, PacketCtx, PacketKind, PacketOutDest, ParseError, PortId,
    Program, TableDecl, TableHandle,
};

use crate::core::firewall::{self as core, Opening, Orientation, Side};
use crate::counters::{attach_params, CounterBlock};
use crate::headers::{parse, parse_ingress_only, Parsed};
use crate::params::{ParamError, Params};

/// Reason code of a punted new connection.
pub const REASON_NEW_CONN: u16 = 1;
/// Reason code of a re-injected packet that still missed: its install
/// failed (the control channel refused it). The control plane forgets the
/// connection so its next packet tries again; re-injected packets are never
/// re-injected twice, so nothing loops.
pub const REASON_INSTALL_FAILED: u16 = 2;
/// `fw_stats` index: inside-to-outside packet of a known connection.
pub const STAT_OUT: u64 = 0;
/// `fw_stats` index: outside-to-inside packet of a known connection.
pub const STAT_IN: u64 = 1;
/// `fw_stats` index: new inside connection (punted, or installed inline).
pub const STAT_NEW: u64 = 2;
/// `fw_stats` index: unsolicited outside packet, dropped.
pub const STAT_UNSOLICITED: u64 = 3;
/// `fw_stats` index: not TCP/UDP over IPv4 (or no ports), dropped.
pub const STAT_NOT_L4: u64 = 4;
/// `fw_stats` index: inside RST matching no connection, forwarded.
pub const STAT_STRAY_RST: u64 = 5;
/// Entries of `fw_stats`.
pub const STATS: usize = 8;

/// The firewall program. See the module documentation.
#[derive(Debug, Clone)]
pub struct Firewall {
    flows: usize,
    outside_port: PortId,
    idle_timeout: Nanos,
    conn: Option<TableHandle<PortId>>,
    stats: Option<Handle>,
    /// Per-source and per-tenant counters, if attached: (sources, tenants)
    /// to declare, and the block once declared.
    counters: Option<(usize, usize)>,
    block: Option<CounterBlock>,
    /// Control-plane state: the inside port of every connection installed
    /// (or being installed). Lost on restart, with the table.
    conns: BTreeMap<[u8; 13], PortId>,
    /// New connections refused because the table was full.
    pub refused: u64,
    /// Connections removed by the idle timeout.
    pub expired: u64,
    /// Connections removed because of a RST.
    pub reset: u64,
    /// Packets the control plane sent back into ingress.
    pub reinjected: u64,
}

impl Firewall {
    /// The attached per-source and per-tenant counters (`counters` > 0),
    /// once the program is loaded; read them with [`CounterBlock::source`]
    /// and [`CounterBlock::tenant`].
    pub fn counters(&self) -> Option<&CounterBlock> {
        self.block.as_ref()
    }

    /// The outside port (every other port is inside).
    pub fn outside_port(&self) -> PortId {
        self.outside_port
    }

    /// Parameter names.
    pub const PARAMS: &'static [&'static str] = &[
        "flows",
        "outside_port",
        "idle_timeout",
        "counters",
        "tenants",
    ];

    /// A firewall for `flows` connections with the outside on
    /// `outside_port`, aging connections idle for `idle_timeout`.
    pub fn new(flows: usize, outside_port: PortId, idle_timeout: Nanos) -> Self {
        Firewall {
            flows,
            outside_port,
            idle_timeout: idle_timeout.max(1),
            conn: None,
            stats: None,
            counters: None,
            block: None,
            conns: BTreeMap::new(),
            refused: 0,
            expired: 0,
            reset: 0,
            reinjected: 0,
        }
    }

    /// A firewall sized from parameters.
    pub fn from_params(p: &Params) -> Result<Self, ParamError> {
        p.check_known("firewall", Self::PARAMS)?;
        let flows = p.count("flows", 65_536, 1 << 32)? as usize;
        let outside = p.number("outside_port", 0, 0, 511)? as PortId;
        let idle = p.count("idle_timeout", 60, 86_400)?;
        let mut fw = Firewall::new(flows, outside, idle * SECONDS);
        fw.counters = attach_params(p)?;
        Ok(fw)
    }

    /// Number of connections the control plane knows.
    pub fn connections(&self) -> usize {
        self.conns.len()
    }

    /// The connection table's handle (after loading).
    pub fn conn_table(&self) -> Option<TableHandle<PortId>> {
        self.conn
    }

    /// The statistics counter's handle (after loading).
    pub fn stats_counter(&self) -> Option<Handle> {
        self.stats
    }

    /// Teaches the control-plane state a connection whose `fw_conn` entry
    /// some other control plane installed (inside port `port`): a runtime
    /// that keeps one table in several data planes runs this program's
    /// control logic in more than one place (ExoPlane's daemons), and each
    /// must know every connection its copy holds, or it ignores that
    /// connection's RST. False if already known or the table is full.
    pub fn adopt(&mut self, key: [u8; 13], port: PortId) -> bool {
        self.admit(key, port) == Some(true)
    }

    /// Forgets a connection whose entry some other control plane removed
    /// (see [`Firewall::adopt`]), so a new connection of the same 5-tuple
    /// is installed again. False if it was not known.
    pub fn forget(&mut self, key: &[u8; 13]) -> bool {
        self.conns.remove(key).is_some()
    }

    /// Records a new connection in the control-plane state: true if it is
    /// new and fits, false if known already; None if the table is full.
    fn admit(&mut self, key: [u8; 13], port: PortId) -> Option<bool> {
        if self.conns.contains_key(&key) {
            return Some(false);
        }
        if self.conns.len() >= self.flows {
            self.refused += 1;
            return None;
        }
        self.conns.insert(key, port);
        Some(true)
    }
}

/// Counts in `fw_stats` (one access per pass).
fn count(
    dp: &mut DataPlane<'_>,
    stats: Handle,
    index: u64,
    bytes: usize,
) -> Result<(), AccessError> {
    dp.count(stats, index, bytes as u64)
}

impl Program for Firewall {
    type Meta = Parsed;
    /// A connection to delete (a RST was seen).
    type Digest = [u8; 13];

    fn name(&self) -> &str {
        "firewall"
    }

    fn declare(&mut self, d: &mut Declare) -> Result<(), DeclareError> {
        let direction = d.gateway("fw_direction", Gress::Ingress, &[])?;
        // Action data: the inside port (9 bits, padded to 16).
        let conn = d.table(
            TableDecl::new("fw_conn", MatchKind::Exact, 13, 16, self.flows)
                .after(&[direction.id()])
                .idle_timeout(self.idle_timeout)
                .vliw(2),
        )?;
        let stats = d.counter(ArrayDecl::new("fw_stats", STATS).after(&[conn.id()]))?;
        if let Some((sources, tenants)) = self.counters {
            self.block = Some(CounterBlock::declare(
                d,
                "fw",
                sources,
                tenants,
                &[direction.id()],
            )?);
        }
        self.conn = Some(conn);
        self.stats = Some(stats);
        Ok(())
    }

    fn parse(&self, gress: Gress, header: &[u8], meta: &mut Parsed) -> Result<(), ParseError> {
        parse_ingress_only(gress, header, meta)
    }

    fn ingress(
        &mut self,
        pkt: &mut PacketCtx<Parsed, [u8; 13]>,
        dp: &mut DataPlane<'_>,
    ) -> Result<(), AccessError> {
        let (Some(conn), Some(stats)) = (self.conn, self.stats) else {
            return Ok(());
        };
        if let Some(block) = self.block {
            block.count(dp, pkt)?;
        }
        let p = pkt.meta;
        let len = pkt.len();
        if !p.has_ports {
            return count(dp, stats, STAT_NOT_L4, len); // dropped
        }
        let rst = core::is_rst(&p);
        let side = Side::by_port(pkt.ingress_port(), self.outside_port);
        let key = core::conn_key(&p, side, Orientation::AsSentFromInside);
        let hit = dp.lookup(conn, &key)?;
        if side == Side::Outside {
            let Some(inside) = hit else {
                return count(dp, stats, STAT_UNSOLICITED, len); // dropped
            };
            pkt.forward(inside);
            count(dp, stats, STAT_IN, len)?;
        } else {
            match hit {
                Some(_) => {
                    pkt.forward(self.outside_port);
                    count(dp, stats, STAT_OUT, len)?;
                }
                None if !Opening::AnyButRst.opens(&p, side) => {
                    // Outbound is always allowed; a RST opens nothing.
                    pkt.forward(self.outside_port);
                    return count(dp, stats, STAT_STRAY_RST, len);
                }
                None if dp.can_write_tables() => {
                    // A software firewall: install inline (the lookup
                    // missed, so the table lacks the entry either way).
                    let port = pkt.ingress_port();
                    if self.admit(key, port).is_some() {
                        let spec = MatchSpec::Exact(key.to_vec().into());
                        if dp.table_insert(conn, spec, port)?.is_ok() {
                            pkt.forward(self.outside_port);
                        } else {
                            self.conns.remove(&key);
                            self.refused += 1;
                        }
                    }
                    return count(dp, stats, STAT_NEW, len);
                }
                None if pkt.kind() == PacketKind::FromCpu => {
                    pkt.to_cpu(REASON_INSTALL_FAILED);
                    return count(dp, stats, STAT_NEW, len);
                }
                None => {
                    pkt.to_cpu(REASON_NEW_CONN);
                    return count(dp, stats, STAT_NEW, len);
                }
            }
        }
        if rst {
            if dp.can_write_tables() {
                let spec = MatchSpec::Exact(key.to_vec().into());
                if dp.table_delete(conn, &spec)?.is_ok() && self.conns.remove(&key).is_some() {
                    self.reset += 1;
                }
            } else {
                pkt.digest(key);
            }
        }
        Ok(())
    }

    fn control(&mut self, event: ControlEvent<[u8; 13]>, cp: &mut ControlPlane<'_>) {
        let Some(conn) = self.conn else {
            return;
        };
        match event {
            ControlEvent::PacketIn {
                port,
                reason,
                frame,
            } => {
                let side = Side::by_port(port, self.outside_port);
                if side == Side::Outside {
                    return;
                }
                let Ok(p) = parse(&frame) else {
                    return;
                };
                if !p.has_ports {
                    return;
                }
                let key = core::conn_key(&p, side, Orientation::AsSentFromInside);
                if reason == REASON_INSTALL_FAILED {
                    if self.conns.remove(&key).is_some() {
                        self.refused += 1;
                    }
                    return; // dropped
                }
                if reason != REASON_NEW_CONN {
                    return;
                }
                match self.admit(key, port) {
                    None => return, // table full: the packet is dropped
                    Some(true) => {
                        cp.table_add(conn, MatchSpec::Exact(key.to_vec().into()), port);
                    }
                    Some(false) => {} // installed or on its way
                }
                // After the write (the channel is FIFO), so it hits.
                self.reinjected += 1;
                cp.packet_out(frame, PacketOutDest::Ingress(port));
            }
            ControlEvent::IdleTimeout { table, spec } if table == conn.id() => {
                if let MatchSpec::Exact(k) = &spec {
                    if let Ok(key) = <[u8; 13]>::try_from(&k[..]) {
                        if self.conns.remove(&key).is_some() {
                            self.expired += 1;
                        }
                    }
                }
                cp.table_delete(conn, spec);
            }
            ControlEvent::Digest(key) => {
                // A RST: the connection is over.
                if self.conns.remove(&key).is_none() {
                    return; // already gone
                }
                self.reset += 1;
                cp.table_delete(conn, MatchSpec::Exact(key.to_vec().into()));
            }
            _ => {}
        }
    }
}
