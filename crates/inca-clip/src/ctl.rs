//! CLIP-CTL on the wire (spec §4.5), shared by the controller and the
//! server runtimes: messages as UDP datagrams ([`frame`], [`parse`]), and
//! [`Reliable`], the sender's half of "retransmitted every 50 ms, at most 5
//! times, until a REPLY with the same txn_id arrives", with the receiver's
//! duplicate filter ([`Dedup`]: the reply to a (sender, txn_id) seen
//! before is sent again instead of acting twice).
//!
//! Addresses [our choice]: the controller is `10.255.0.254`, server `i` is
//! `10.255.0.i`; both ends run on the point-to-point server links (the
//! switch punts datagrams to port 47100 from server ports to its CPU and
//! the controller sends with packet-out). MAC addresses are the sending
//! device's to fill.

use std::collections::{BTreeMap, VecDeque};
use std::net::Ipv4Addr;

use inca_switch::device::Nanos;
use inca_wire::clip::ctl::{CtlBody, CtlMessage, CONTROLLER_PORT, SERVER_PORT};
use inca_wire::{build_udp_frame, parse_udp_frame, Endpoints};

/// Retransmission interval (§4.5, §5.7).
pub const RETX_NS: Nanos = 50_000_000;
/// Retransmissions before giving up.
pub const RETX_MAX: u32 = 5;
/// Most requests awaiting a reply at once [our choice].
pub const MAX_PENDING: usize = 4096;
/// Replies remembered for duplicates, per sender [our choice].
pub const DEDUP_DEPTH: usize = 64;

/// The controller's address.
pub const CONTROLLER_IP: Ipv4Addr = Ipv4Addr::new(10, 255, 0, 254);

/// Server `id`'s address.
pub fn server_ip(id: u8) -> Ipv4Addr {
    Ipv4Addr::new(10, 255, 0, id)
}

/// `msg` as a UDP frame from the controller to server `to` (`to == 0`: the
/// reverse, from server `from` to the controller).
pub fn frame(msg: &CtlMessage, from: u8, to: u8) -> Vec<u8> {
    let (src, sport) = if from == 0 {
        (CONTROLLER_IP, CONTROLLER_PORT)
    } else {
        (server_ip(from), SERVER_PORT)
    };
    let (dst, dport) = if to == 0 {
        (CONTROLLER_IP, CONTROLLER_PORT)
    } else {
        (server_ip(to), SERVER_PORT)
    };
    let ep = Endpoints::new(
        [0x02, 0, 0, 0, 0xC1, from],
        src,
        [0x02, 0, 0, 0, 0xC1, to],
        dst,
    );
    // A message that cannot be encoded is an empty payload, which the
    // peer refuses and counts.
    build_udp_frame(&ep, sport, dport, &msg.encode(), true).unwrap_or_default()
}

/// The CLIP-CTL message in a UDP frame to `port`; None for anything else
/// or malformed bytes.
pub fn parse(frame: &[u8], port: u16) -> Option<CtlMessage> {
    let u = parse_udp_frame(frame).ok()?;
    if u.dst_port != port {
        return None;
    }
    CtlMessage::decode(u.payload).ok()
}

/// Whether `frame` is a UDP datagram to `port` (cheap pre-check).
pub fn is_to_port(frame: &[u8], port: u16) -> bool {
    parse_udp_frame(frame).is_ok_and(|u| u.dst_port == port)
}

/// A message and the peer it goes to (or came from).
pub type Addressed = (u8, CtlMessage);

/// A request awaiting its reply.
#[derive(Debug, Clone)]
struct Pending {
    to: u8,
    msg: CtlMessage,
    next: Nanos,
    tries: u32,
}

/// The sender's side: txn ids, retransmission, give-up. Sans-IO: it
/// returns what to (re)send and the caller sends it.
#[derive(Debug, Clone, Default)]
pub struct Reliable {
    next_txn: u32,
    pending: BTreeMap<u32, Pending>,
    /// Requests that got no reply after every retry.
    pub gave_up: u64,
    /// Requests refused because too many were pending.
    pub overflow: u64,
}

impl Reliable {
    /// Registers a request from `sender` to `to` with `body`; returns the
    /// message to send now (None if too many are pending).
    pub fn request(
        &mut self,
        now: Nanos,
        sender: u8,
        to: u8,
        body: CtlBody,
        more: bool,
    ) -> Option<CtlMessage> {
        if self.pending.len() >= MAX_PENDING {
            self.overflow += 1;
            return None;
        }
        self.next_txn = self.next_txn.wrapping_add(1);
        let msg = CtlMessage {
            txn_id: self.next_txn,
            sender,
            reply: false,
            more,
            body,
        };
        self.pending.insert(
            msg.txn_id,
            Pending {
                to,
                msg: msg.clone(),
                next: now + RETX_NS,
                tries: 0,
            },
        );
        Some(msg)
    }

    /// A reply arrived: the request it answers (its destination and
    /// message), if still pending.
    pub fn replied(&mut self, txn: u32) -> Option<(u8, CtlMessage)> {
        self.pending.remove(&txn).map(|p| (p.to, p.msg))
    }

    /// Requests due for a retransmission at `now`, and those given up
    /// (returned separately so the caller can act on the loss).
    pub fn due(&mut self, now: Nanos) -> (Vec<Addressed>, Vec<Addressed>) {
        let mut resend = Vec::new();
        let mut lost = Vec::new();
        let due: Vec<u32> = self
            .pending
            .iter()
            .filter(|(_, p)| p.next <= now)
            .map(|(t, _)| *t)
            .collect();
        for t in due {
            let Some(p) = self.pending.get_mut(&t) else {
                continue;
            };
            if p.tries >= RETX_MAX {
                let p = self.pending.remove(&t).expect("present");
                self.gave_up += 1;
                lost.push((p.to, p.msg));
            } else {
                p.tries += 1;
                p.next = now + RETX_NS;
                resend.push((p.to, p.msg.clone()));
            }
        }
        (resend, lost)
    }

    /// The earliest retransmission time, if any request is pending.
    pub fn next_due(&self) -> Option<Nanos> {
        self.pending.values().map(|p| p.next).min()
    }

    /// Forgets every pending request to or from `peer` (it failed).
    pub fn forget(&mut self, peer: u8) {
        self.pending.retain(|_, p| p.to != peer);
    }

    /// Forgets everything (a restart).
    pub fn clear(&mut self) {
        self.pending.clear();
    }
}

/// The receiver's duplicate filter: per sender, the replies to its latest
/// requests.
#[derive(Debug, Clone, Default)]
pub struct Dedup {
    seen: BTreeMap<u8, VecDeque<(u32, Vec<CtlMessage>)>>,
    /// Duplicates answered from the cache.
    pub duplicates: u64,
}

impl Dedup {
    /// The cached replies if (`sender`, `txn`) was seen before.
    pub fn lookup(&mut self, sender: u8, txn: u32) -> Option<Vec<CtlMessage>> {
        let r = self
            .seen
            .get(&sender)?
            .iter()
            .find(|(t, _)| *t == txn)
            .map(|(_, r)| r.clone());
        if r.is_some() {
            self.duplicates += 1;
        }
        r
    }

    /// Remembers the replies sent to (`sender`, `txn`).
    pub fn remember(&mut self, sender: u8, txn: u32, replies: Vec<CtlMessage>) {
        let q = self.seen.entry(sender).or_default();
        if q.len() >= DEDUP_DEPTH {
            q.pop_front();
        }
        q.push_back((txn, replies));
    }

    /// Forgets everything (a restart).
    pub fn clear(&mut self) {
        self.seen.clear();
    }
}

/// A reply to `req` carrying `body` (an [`CtlBody::Ack`] when None).
pub fn reply(req: &CtlMessage, sender: u8, body: Option<CtlBody>) -> CtlMessage {
    CtlMessage {
        txn_id: req.txn_id,
        sender,
        reply: true,
        more: false,
        body: body.unwrap_or(CtlBody::Ack {
            of: req.body.msg_type(),
        }),
    }
}
