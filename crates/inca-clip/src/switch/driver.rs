//! The switch driver (spec §2): the switch control plane's side of CLIP.
//! It installs the static configuration when the switch starts (server
//! links, the first group in slot 0, `cur = 0`, routes), executes the
//! controller's commands (table inserts and deletes, register writes and
//! clears) and sends up what the data plane reports (pin-overflow
//! digests, idle pins, CLIP-CTL datagrams from servers).
//!
//! Commands arrive as control messages ([`Command`], kind
//! [`MSG_COMMAND`]); the driver answers a [`Command::Barrier`] once every
//! command before it has taken effect (the control channel is FIFO, so a
//! register read issued after them returns after them). What it sends up
//! is a [`Report`] (kind [`MSG_REPORT`]).

use inca_switch::device::{ControlMessage, Nanos, PortId};
use inca_switch::{ControlEvent, ControlPlane, MatchSpec};

use crate::app::{Entry, SwitchApp};
use crate::flow::FlowKey;
use crate::switch::forwarding::{Forwarding, ServerEntry, SlotEntry, MAX_MEMBERS};
use crate::switch::program::{PinOverflow, REASON_CTL};
use crate::switch::scalability::Scalability;
use crate::switch::selection::Selection;

/// Message kind of a command to the driver.
pub const MSG_COMMAND: u32 = 0xC11C_0001;
/// Message kind of what the driver sends up.
pub const MSG_REPORT: u32 = 0xC11C_0002;
/// Array clear cost: 1 ms per 65,536 cells (§8.1, model input).
pub const CLEAR_NS_PER_64K: Nanos = 1_000_000;

/// A server's link, as configured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ServerLink {
    /// Server id (1..=127).
    pub id: u8,
    /// The switch port its link is on.
    pub port: PortId,
}

/// The driver's static configuration.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DriverConfig {
    /// The servers and their ports.
    pub servers: Vec<ServerLink>,
    /// Members of G_1, installed in slot 0 at start.
    pub initial_group: Vec<u8>,
    /// T_exp, the server flow idle expiry (pins age at T_exp + 1 s).
    pub t_exp_ns: Nanos,
}

impl Default for DriverConfig {
    fn default() -> Self {
        DriverConfig {
            servers: Vec::new(),
            initial_group: Vec::new(),
            t_exp_ns: 10_000_000_000,
        }
    }
}

impl DriverConfig {
    /// T_pin_idle = T_exp + 1 s (§5.6).
    pub fn pin_idle_ns(&self) -> Nanos {
        self.t_exp_ns + 1_000_000_000
    }

    /// Checks ids, ports and the group's size.
    pub fn check(&self) -> Result<(), String> {
        for s in &self.servers {
            if !(1..=127).contains(&s.id) {
                return Err(format!("server id {} is not in 1..=127", s.id));
            }
        }
        if self.initial_group.len() > MAX_MEMBERS {
            return Err(format!(
                "a group has at most {MAX_MEMBERS} members, not {}",
                self.initial_group.len()
            ));
        }
        for m in &self.initial_group {
            if !self.servers.iter().any(|s| s.id == *m) {
                return Err(format!("group member {m} is not a configured server"));
            }
        }
        Ok(())
    }
}

/// A command from the controller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// `clip_server[id] := (port, valid)`.
    SetServer {
        /// Server id.
        id: u8,
        /// Its port.
        port: PortId,
        /// In service.
        valid: bool,
    },
    /// Write `clip_member[slot, *]` with `members`, then `clip_slot[slot]
    /// := (|members|, ver)` (§5.6 step 9).
    SetSlot {
        /// Slot 0 or 1.
        slot: u8,
        /// Version.
        ver: u16,
        /// Members in index order.
        members: Vec<u8>,
    },
    /// Replace member `idx` of `slot` in place (failure replacement).
    SetMember {
        /// Slot.
        slot: u8,
        /// Index.
        idx: u8,
        /// New server.
        server: u8,
    },
    /// `cur := slot`.
    SetCur(u8),
    /// `rec := on`.
    SetRec(bool),
    /// `pin_table[flow] := server`.
    PinAdd {
        /// The flow.
        flow: FlowKey,
        /// Its server.
        server: u8,
    },
    /// Delete `pin_table[flow]`.
    PinDelete(FlowKey),
    /// Clear every way of Bloom filter `filter`.
    ClearBloom(u8),
    /// Clear both pin-cache ways.
    ClearPinCache,
    /// Clear both CMS rows (row 0 then row 1).
    ClearCms,
    /// Install an app entry in the switch table.
    AppInstall(Entry),
    /// Delete an app entry.
    AppUninstall {
        /// Table.
        table: u8,
        /// Key.
        key: Vec<u8>,
    },
    /// Read an app entry's activity (idle-time polling).
    AppPoll {
        /// Table.
        table: u8,
        /// Key.
        key: Vec<u8>,
    },
    /// Send a frame out of a port (CLIP-CTL to a server).
    PacketOut {
        /// The port.
        port: PortId,
        /// The frame.
        frame: Vec<u8>,
    },
    /// Answer [`Report::Barrier`] once every earlier command took effect.
    Barrier(u64),
    /// For the controller: `Transition(G_new)` (§5.6).
    Transition(Vec<u8>),
    /// For the controller: install an entry in every server's mirrored
    /// table (MIRROR_INSERT) and know it for promotion.
    Mirror(Entry),
}

/// What the driver sends up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Report {
    /// Every command before barrier `token` took effect.
    Barrier(u64),
    /// A command failed when it took effect.
    Failed(String),
    /// A pin-overflow digest (§4.4).
    Overflow(PinOverflow),
    /// A pin aged out (no hit for T_pin_idle).
    PinIdle(FlowKey),
    /// An app entry's activity.
    Activity {
        /// Its key.
        key: Vec<u8>,
        /// Time since its last hit.
        idle: Nanos,
    },
    /// A CLIP-CTL datagram from a server (the whole frame).
    Ctl {
        /// The port it came in on.
        port: PortId,
        /// The frame.
        frame: Vec<u8>,
    },
}

/// What the driver did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DriverStats {
    /// Commands executed.
    pub commands: u64,
    /// Commands refused (malformed, out of range).
    pub refused: u64,
    /// Operations that failed when they took effect.
    pub failed: u64,
}

/// The driver. See the module documentation.
#[derive(Debug, Clone)]
pub struct Driver {
    config: DriverConfig,
    /// Barrier tokens by the register-read request that closes them.
    barriers: Vec<(u64, u64)>,
    /// Outstanding activity polls: request → key.
    polls: Vec<(u64, Vec<u8>)>,
    /// Server ids with a `clip_server` entry.
    known_servers: Vec<u8>,
    /// Counters.
    pub stats: DriverStats,
}

impl Driver {
    /// A driver with `config`.
    pub fn new(config: DriverConfig) -> Self {
        Driver {
            config,
            barriers: Vec::new(),
            polls: Vec::new(),
            known_servers: Vec::new(),
            stats: DriverStats::default(),
        }
    }

    /// Its configuration.
    pub fn config(&self) -> &DriverConfig {
        &self.config
    }

    /// Counters for reports.
    pub fn counters(&self) -> Vec<(String, u64)> {
        vec![
            ("driver_commands".into(), self.stats.commands),
            ("driver_refused".into(), self.stats.refused),
            ("driver_failed".into(), self.stats.failed),
        ]
    }

    /// Sends a report up to whoever drives the switch.
    pub fn up(cp: &mut ControlPlane<'_>, r: &Report) {
        cp.send(ControlMessage {
            kind: MSG_REPORT,
            body: r.encode(),
        });
    }

    /// Handles one control event; what it has to report goes to `reports`
    /// (the program hands them to its controller, or sends them up).
    #[allow(clippy::too_many_arguments)]
    pub fn handle<A: SwitchApp>(
        &mut self,
        event: ControlEvent<PinOverflow>,
        cp: &mut ControlPlane<'_>,
        reports: &mut Vec<Report>,
        app: &A,
        fwd: &Forwarding,
        sel: &Selection,
        scale: &Scalability,
    ) {
        match event {
            ControlEvent::Start => {
                self.barriers.clear();
                self.polls.clear();
                self.install_static(cp, fwd, scale);
                app.start(cp);
            }
            ControlEvent::Message(m) if m.kind == MSG_COMMAND => match Command::decode(&m.body) {
                Some(c) => {
                    self.stats.commands += 1;
                    self.execute(c, cp, app, fwd, sel, scale);
                }
                None => self.stats.refused += 1,
            },
            ControlEvent::Digest(d) => reports.push(Report::Overflow(d)),
            ControlEvent::IdleTimeout {
                table,
                spec: MatchSpec::Exact(k),
            } if table == scale.pin_table.id() => {
                if let Ok(k) = <[u8; 16]>::try_from(&k[..]) {
                    reports.push(Report::PinIdle(FlowKey(k)));
                }
            }
            ControlEvent::PacketIn {
                port,
                reason: REASON_CTL,
                frame,
            } => reports.push(Report::Ctl { port, frame }),
            ControlEvent::RegisterValues { request, .. } => {
                if let Some(i) = self.barriers.iter().position(|(r, _)| *r == request) {
                    let (_, token) = self.barriers.remove(i);
                    reports.push(Report::Barrier(token));
                }
            }
            ControlEvent::EntryActivity { request, idle, .. } => {
                if let Some(i) = self.polls.iter().position(|(r, _)| *r == request) {
                    let (_, key) = self.polls.remove(i);
                    reports.push(Report::Activity { key, idle });
                }
            }
            ControlEvent::OpFailed { request, error } => {
                self.stats.failed += 1;
                if let Some(i) = self.polls.iter().position(|(r, _)| *r == request) {
                    // A polled entry that is gone: idle for ever.
                    let (_, key) = self.polls.remove(i);
                    reports.push(Report::Activity {
                        key,
                        idle: Nanos::MAX,
                    });
                } else {
                    reports.push(Report::Failed(error));
                }
            }
            _ => {}
        }
    }

    fn install_static(&mut self, cp: &mut ControlPlane<'_>, fwd: &Forwarding, scale: &Scalability) {
        let (Some(server_t), Some(member_t), Some(slot_t)) = (fwd.server, fwd.member, fwd.slot)
        else {
            return;
        };
        self.known_servers = self.config.servers.iter().map(|s| s.id).collect();
        for s in &self.config.servers {
            cp.table_add(
                server_t,
                MatchSpec::Exact(vec![s.id].into()),
                ServerEntry {
                    port: s.port,
                    valid: true,
                },
            );
            cp.table_add(
                fwd.server_port,
                MatchSpec::Exact(s.port.to_be_bytes().to_vec().into()),
                s.id,
            );
        }
        let g = &self.config.initial_group;
        // Every member cell exists from the start (server 0: none), so a
        // slot is rewritten with modifies only.
        for slot in 0..2u8 {
            for i in 0..MAX_MEMBERS {
                let m = if slot == 0 {
                    g.get(i).copied().unwrap_or(0)
                } else {
                    0
                };
                cp.table_add(member_t, MatchSpec::Exact(vec![slot, i as u8].into()), m);
            }
        }
        let slot0 = SlotEntry {
            n: g.len() as u8,
            ver: if g.is_empty() { 0 } else { 1 },
        };
        cp.table_add(slot_t, MatchSpec::Exact(vec![0].into()), slot0);
        cp.table_add(
            slot_t,
            MatchSpec::Exact(vec![1].into()),
            SlotEntry::default(),
        );
        cp.register_write(scale.cur, 0, 0);
        cp.register_write(scale.rec, 0, 0);
    }

    fn clear_cost(cells: u64) -> Nanos {
        cells.div_ceil(65_536).max(1) * CLEAR_NS_PER_64K
    }

    /// Executes one command.
    pub fn execute<A: SwitchApp>(
        &mut self,
        c: Command,
        cp: &mut ControlPlane<'_>,
        app: &A,
        fwd: &Forwarding,
        sel: &Selection,
        scale: &Scalability,
    ) {
        let exact = |b: Vec<u8>| MatchSpec::Exact(b.into());
        let (Some(server_t), Some(member_t), Some(slot_t)) = (fwd.server, fwd.member, fwd.slot)
        else {
            return;
        };
        match c {
            Command::SetServer { id, port, valid } => {
                let entry = ServerEntry { port, valid };
                if self.known_servers.contains(&id) {
                    cp.table_modify(server_t, exact(vec![id]), entry);
                } else {
                    self.known_servers.push(id);
                    cp.table_add(server_t, exact(vec![id]), entry);
                    cp.table_add(fwd.server_port, exact(port.to_be_bytes().to_vec()), id);
                }
            }
            Command::SetSlot { slot, ver, members } => {
                if slot > 1 || members.len() > MAX_MEMBERS {
                    self.stats.refused += 1;
                    return;
                }
                for (i, m) in members.iter().enumerate() {
                    cp.table_modify(member_t, exact(vec![slot, i as u8]), *m);
                }
                let entry = SlotEntry {
                    n: members.len() as u8,
                    ver,
                };
                cp.table_modify(slot_t, exact(vec![slot]), entry);
            }
            Command::SetMember { slot, idx, server } => {
                if slot > 1 || usize::from(idx) >= MAX_MEMBERS {
                    self.stats.refused += 1;
                    return;
                }
                cp.table_modify(member_t, exact(vec![slot, idx]), server);
            }
            Command::SetCur(c) => {
                cp.register_write(scale.cur, 0, c & 1);
            }
            Command::SetRec(on) => {
                cp.register_write(scale.rec, 0, u8::from(on));
            }
            Command::PinAdd { flow, server } => {
                cp.table_add(scale.pin_table, exact(flow.0.to_vec()), server);
            }
            Command::PinDelete(flow) => {
                cp.table_delete(scale.pin_table, exact(flow.0.to_vec()));
            }
            Command::ClearBloom(f) => {
                let cost = Self::clear_cost(u64::from(scale.sizes().bloom_bits));
                for way in scale.bm[usize::from(f & 1)] {
                    cp.register_clear_timed(way, cost);
                }
            }
            Command::ClearPinCache => {
                let cost = Self::clear_cost(u64::from(scale.sizes().pin_cache));
                for way in scale.pin_cache {
                    cp.register_clear_timed(way, cost);
                }
            }
            Command::ClearCms => {
                let cost = Self::clear_cost(u64::from(crate::switch::selection::CMS_WIDTH));
                for row in sel.rows() {
                    cp.register_clear_timed(row, cost);
                }
            }
            Command::AppInstall(e) => {
                if app.install(cp, &e).is_none() {
                    self.stats.refused += 1;
                }
            }
            Command::AppUninstall { table, key } => {
                if app.uninstall(cp, table, &key).is_none() {
                    self.stats.refused += 1;
                }
            }
            Command::AppPoll { table, key } => match app.poll(cp, table, &key) {
                Some(r) => self.polls.push((r, key)),
                None => self.stats.refused += 1,
            },
            Command::PacketOut { port, frame } => {
                cp.packet_out(frame, inca_switch::PacketOutDest::Port(port));
            }
            Command::Barrier(token) => {
                let r = cp.register_read(scale.cur, 0, 1);
                self.barriers.push((r, token));
            }
            // The controller's; without one they are refused.
            Command::Transition(_) | Command::Mirror(_) => self.stats.refused += 1,
        }
    }
}

/// A little big-endian reader over a message body.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        Some(a)
    }
    fn u8(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }
    fn u16(&mut self) -> Option<u16> {
        self.take(2).map(|b| u16::from_be_bytes([b[0], b[1]]))
    }
    fn u64(&mut self) -> Option<u64> {
        self.take(8)
            .map(|b| u64::from_be_bytes(b.try_into().unwrap_or([0; 8])))
    }
    fn flow(&mut self) -> Option<FlowKey> {
        self.take(16).and_then(|b| b.try_into().ok()).map(FlowKey)
    }
    /// A u16-length-prefixed byte string.
    fn bytes(&mut self) -> Option<Vec<u8>> {
        let n = self.u16()?;
        self.take(usize::from(n)).map(<[u8]>::to_vec)
    }
    fn end(self) -> Option<()> {
        self.0.is_empty().then_some(())
    }
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    out.extend_from_slice(&(b.len().min(usize::from(u16::MAX)) as u16).to_be_bytes());
    out.extend_from_slice(&b[..b.len().min(usize::from(u16::MAX))]);
}

impl Command {
    /// The message body: an op byte, then the fields big-endian, byte
    /// strings with a u16 length.
    pub fn encode(&self) -> Vec<u8> {
        let mut o = Vec::new();
        match self {
            Command::SetServer { id, port, valid } => {
                o.push(1);
                o.push(*id);
                o.extend_from_slice(&port.to_be_bytes());
                o.push(u8::from(*valid));
            }
            Command::SetSlot { slot, ver, members } => {
                o.push(2);
                o.push(*slot);
                o.extend_from_slice(&ver.to_be_bytes());
                put_bytes(&mut o, members);
            }
            Command::SetMember { slot, idx, server } => {
                o.extend_from_slice(&[3, *slot, *idx, *server])
            }
            Command::SetCur(c) => o.extend_from_slice(&[4, *c]),
            Command::SetRec(r) => o.extend_from_slice(&[5, u8::from(*r)]),
            Command::PinAdd { flow, server } => {
                o.push(6);
                o.extend_from_slice(&flow.0);
                o.push(*server);
            }
            Command::PinDelete(flow) => {
                o.push(7);
                o.extend_from_slice(&flow.0);
            }
            Command::ClearBloom(f) => o.extend_from_slice(&[8, *f]),
            Command::ClearPinCache => o.push(9),
            Command::ClearCms => o.push(10),
            Command::AppInstall(e) => {
                o.extend_from_slice(&[11, e.table, e.action]);
                put_bytes(&mut o, &e.key);
                put_bytes(&mut o, &e.data);
            }
            Command::AppUninstall { table, key } => {
                o.extend_from_slice(&[12, *table]);
                put_bytes(&mut o, key);
            }
            Command::AppPoll { table, key } => {
                o.extend_from_slice(&[13, *table]);
                put_bytes(&mut o, key);
            }
            Command::PacketOut { port, frame } => {
                o.push(14);
                o.extend_from_slice(&port.to_be_bytes());
                put_bytes(&mut o, frame);
            }
            Command::Barrier(t) => {
                o.push(15);
                o.extend_from_slice(&t.to_be_bytes());
            }
            Command::Transition(members) => {
                o.push(16);
                put_bytes(&mut o, members);
            }
            Command::Mirror(e) => {
                o.extend_from_slice(&[17, e.table, e.action]);
                put_bytes(&mut o, &e.key);
                put_bytes(&mut o, &e.data);
            }
        }
        o
    }

    /// Reads a body [`encode`](Self::encode) wrote; None if malformed.
    pub fn decode(body: &[u8]) -> Option<Command> {
        let mut r = Reader(body);
        let c = match r.u8()? {
            1 => Command::SetServer {
                id: r.u8()?,
                port: r.u16()?,
                valid: r.u8()? != 0,
            },
            2 => Command::SetSlot {
                slot: r.u8()?,
                ver: r.u16()?,
                members: r.bytes()?,
            },
            3 => Command::SetMember {
                slot: r.u8()?,
                idx: r.u8()?,
                server: r.u8()?,
            },
            4 => Command::SetCur(r.u8()?),
            5 => Command::SetRec(r.u8()? != 0),
            6 => Command::PinAdd {
                flow: r.flow()?,
                server: r.u8()?,
            },
            7 => Command::PinDelete(r.flow()?),
            8 => Command::ClearBloom(r.u8()?),
            9 => Command::ClearPinCache,
            10 => Command::ClearCms,
            11 => {
                let (table, action) = (r.u8()?, r.u8()?);
                Command::AppInstall(Entry {
                    table,
                    action,
                    key: r.bytes()?,
                    data: r.bytes()?,
                })
            }
            12 => Command::AppUninstall {
                table: r.u8()?,
                key: r.bytes()?,
            },
            13 => Command::AppPoll {
                table: r.u8()?,
                key: r.bytes()?,
            },
            14 => Command::PacketOut {
                port: r.u16()?,
                frame: r.bytes()?,
            },
            15 => Command::Barrier(r.u64()?),
            16 => Command::Transition(r.bytes()?),
            17 => {
                let (table, action) = (r.u8()?, r.u8()?);
                Command::Mirror(Entry {
                    table,
                    action,
                    key: r.bytes()?,
                    data: r.bytes()?,
                })
            }
            _ => return None,
        };
        r.end()?;
        Some(c)
    }

    /// As a control message.
    pub fn message(&self) -> ControlMessage {
        ControlMessage {
            kind: MSG_COMMAND,
            body: self.encode(),
        }
    }
}

impl Report {
    /// The message body (as [`Command::encode`]).
    pub fn encode(&self) -> Vec<u8> {
        let mut o = Vec::new();
        match self {
            Report::Barrier(t) => {
                o.push(1);
                o.extend_from_slice(&t.to_be_bytes());
            }
            Report::Failed(e) => {
                o.push(2);
                put_bytes(&mut o, e.as_bytes());
            }
            Report::Overflow(d) => {
                o.push(3);
                o.extend_from_slice(&d.flow.0);
                o.push(d.server);
                o.extend_from_slice(&d.grp_ver.to_be_bytes());
            }
            Report::PinIdle(f) => {
                o.push(4);
                o.extend_from_slice(&f.0);
            }
            Report::Activity { key, idle } => {
                o.push(5);
                put_bytes(&mut o, key);
                o.extend_from_slice(&idle.to_be_bytes());
            }
            Report::Ctl { port, frame } => {
                o.push(6);
                o.extend_from_slice(&port.to_be_bytes());
                put_bytes(&mut o, frame);
            }
        }
        o
    }

    /// Reads a body [`encode`](Self::encode) wrote; None if malformed.
    pub fn decode(body: &[u8]) -> Option<Report> {
        let mut r = Reader(body);
        let rep = match r.u8()? {
            1 => Report::Barrier(r.u64()?),
            2 => Report::Failed(String::from_utf8_lossy(&r.bytes()?).into_owned()),
            3 => Report::Overflow(PinOverflow {
                flow: r.flow()?,
                server: r.u8()?,
                grp_ver: r.u16()?,
            }),
            4 => Report::PinIdle(r.flow()?),
            5 => Report::Activity {
                key: r.bytes()?,
                idle: r.u64()?,
            },
            6 => Report::Ctl {
                port: r.u16()?,
                frame: r.bytes()?,
            },
            _ => return None,
        };
        r.end()?;
        Some(rep)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_and_reports_round_trip() {
        let f = FlowKey([7; 16]);
        let cmds = vec![
            Command::SetServer {
                id: 3,
                port: 9,
                valid: true,
            },
            Command::SetSlot {
                slot: 1,
                ver: 7,
                members: vec![1, 2, 3],
            },
            Command::SetMember {
                slot: 0,
                idx: 2,
                server: 5,
            },
            Command::SetCur(1),
            Command::SetRec(true),
            Command::PinAdd { flow: f, server: 2 },
            Command::PinDelete(f),
            Command::ClearBloom(1),
            Command::ClearPinCache,
            Command::ClearCms,
            Command::AppInstall(Entry {
                table: 0,
                key: vec![1; 16],
                action: 1,
                data: vec![9, 9],
            }),
            Command::AppUninstall {
                table: 0,
                key: vec![2; 16],
            },
            Command::AppPoll {
                table: 0,
                key: vec![3; 16],
            },
            Command::PacketOut {
                port: 4,
                frame: vec![0; 60],
            },
            Command::Barrier(u64::MAX),
            Command::Transition(vec![1, 2]),
            Command::Mirror(Entry {
                table: 0,
                key: vec![4; 16],
                action: 1,
                data: vec![0, 7],
            }),
        ];
        for c in cmds {
            let b = c.encode();
            assert_eq!(Command::decode(&b), Some(c.clone()), "{c:?}");
            assert_eq!(Command::decode(&b[..b.len() - 1]), None, "{c:?} cut");
            let mut longer = b.clone();
            longer.push(0);
            assert_eq!(Command::decode(&longer), None, "{c:?} extra");
        }
        let reps = vec![
            Report::Barrier(5),
            Report::Failed("table full".into()),
            Report::Overflow(PinOverflow {
                flow: f,
                server: 3,
                grp_ver: 2,
            }),
            Report::PinIdle(f),
            Report::Activity {
                key: vec![1, 2],
                idle: 77,
            },
            Report::Ctl {
                port: 3,
                frame: vec![1; 80],
            },
        ];
        for r in reps {
            assert_eq!(Report::decode(&r.encode()), Some(r.clone()), "{r:?}");
        }
        assert_eq!(Command::decode(&[]), None);
        assert_eq!(Command::decode(&[99]), None);
    }
}
