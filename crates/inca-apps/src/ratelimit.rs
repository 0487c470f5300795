//! A per-user token-bucket rate limiter on the switch's RFC 2698 meters.
//!
//! A user is a source IPv4 address. Traffic from any port but `uplink` is
//! policed per user and forwarded to `uplink`; traffic from `uplink` goes
//! to `downlink` unpoliced. Non-IPv4 frames from users cannot be attributed
//! to a user and are dropped (counted as program drops).
//!
//! # Data plane
//!
//! - `rl_users`: exact table, source address (4 bytes) → user index
//!   (`flows` entries, written by the control plane).
//! - `rl_meter`: an RFC 2698 meter array of `flows + 1` meters, in bytes
//!   mode over the whole frame: meter `i` polices user `i`; the last one,
//!   index `flows`, is shared by all sources not (yet) in the table and is
//!   configured with the default rate.
//! - `rl_reported` (32-bit register, `flows` rounded up to a power of two,
//!   indexed by `rl_hash`, a CRC-32 of the address): the last unknown source
//!   reported in each entry, so a new user is reported by digest once, not
//!   on every packet, until another unknown source takes its entry.
//!
//! A red packet is dropped. A yellow one (possible only when the peak rate
//! is above the committed rate) is forwarded with its DSCP set to
//! `yellow_dscp` (IPv4 header checksum updated incrementally). A green one
//! is forwarded untouched.
//!
//! A user's meter is the RFC 2698 two-rate marker with committed rate CIR =
//! `rate`, peak rate PIR = `max(peak, rate)` and both bucket depths (CBS,
//! PBS) = `burst`; with `peak == rate` (the default) it is a plain token
//! bucket of depth `burst` filled at `rate`: a packet passes if the bucket
//! holds its length in tokens, which it then takes.
//!
//! # Control plane
//!
//! At start it configures the shared meter. A [`NewUser`] digest installs
//! the source with the default rate and burst: the meter is configured
//! first, then the table entry added (the operation channel is FIFO, so the
//! entry never points to an unconfigured meter). Message [`MSG_SET_USER`]
//! sets a user's rate (body: address, 4 bytes; rate, bits/s, u64; burst,
//! bytes, u64; optionally peak, bits/s, u64; all big-endian), adding the
//! user if new; it takes effect after the control plane's meter
//! configuration latency, with full buckets. When the table is full new
//! users stay on the shared meter (counted in `refused`).
//!
//! Parameters: `flows` (users, default 65,536), `rate` (default committed
//! rate, bits/s, default 10 M), `burst` (default bucket depth, bytes,
//! default 15,000), `peak` (default peak rate, bits/s, default = `rate`),
//! `yellow_dscp` (default 10, AF11), `uplink` (default 1), `downlink`
//! (default 0).

use std::collections::BTreeMap;

use inca_switch::hash::HashAlgorithm;
use inca_switch::meter::{Color, MeterConfig};
use inca_switch::{
    AccessError, ArrayDecl, ControlEvent, ControlPlane, DataPlane, Declare, DeclareError, Gress,
    Handle, MatchKind, MatchSpec, PacketCtx, ParseError, PortId, Program, RegisterHandle,
    TableDecl, TableHandle,
};
use inca_wire::checksum;

use crate::headers::{parse_ingress_only, Parsed};
use crate::kvstore::index_bits;
use crate::params::{ParamError, Params};

/// Control message: set a user's rate (see the module documentation).
pub const MSG_SET_USER: u32 = 1;

/// A digest: a source address not in the user table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NewUser {
    /// The address.
    pub ip: [u8; 4],
}

/// A user's rate: committed and peak rates in bits per second, burst in
/// bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rate {
    /// Committed rate, bits/s.
    pub rate_bps: u64,
    /// Bucket depth, bytes.
    pub burst: u64,
    /// Peak rate, bits/s (below `rate_bps` counts as `rate_bps`).
    pub peak_bps: u64,
}

impl Rate {
    /// The meter configuration: CIR = rate, PIR = max(peak, rate), CBS =
    /// PBS = burst (bytes per second; a rate below 8 bits/s is 1 byte/s).
    pub fn meter_config(&self) -> MeterConfig {
        let cir = (self.rate_bps / 8).max(1);
        let pir = (self.peak_bps / 8).max(cir);
        let burst = self.burst.max(1);
        MeterConfig {
            cir,
            cbs: burst,
            pir,
            pbs: burst,
        }
    }

    /// The body of a [`MSG_SET_USER`] message for `ip`.
    pub fn message(&self, ip: [u8; 4]) -> Vec<u8> {
        let mut b = ip.to_vec();
        b.extend_from_slice(&self.rate_bps.to_be_bytes());
        b.extend_from_slice(&self.burst.to_be_bytes());
        b.extend_from_slice(&self.peak_bps.to_be_bytes());
        b
    }
}

/// The rate limiter. See the module documentation.
#[derive(Debug, Clone)]
pub struct RateLimiter {
    flows: usize,
    default: Rate,
    yellow_dscp: u8,
    uplink: PortId,
    downlink: PortId,
    users: Option<TableHandle<u32>>,
    meter: Option<Handle>,
    hash: Option<Handle>,
    reported: Option<RegisterHandle<u32>>,
    /// Control plane: the index of every installed user.
    index: BTreeMap<[u8; 4], u32>,
    /// Users refused because the table was full.
    pub refused: u64,
}

impl RateLimiter {
    /// Parameter names.
    pub const PARAMS: &'static [&'static str] = &[
        "flows",
        "rate",
        "burst",
        "peak",
        "yellow_dscp",
        "uplink",
        "downlink",
    ];

    /// A limiter for `flows` users with the default `rate`, forwarding
    /// policed traffic to `uplink` and the reverse direction to `downlink`.
    pub fn new(flows: usize, default: Rate, uplink: PortId, downlink: PortId) -> Self {
        RateLimiter {
            flows,
            default,
            yellow_dscp: 10,
            uplink,
            downlink,
            users: None,
            meter: None,
            hash: None,
            reported: None,
            index: BTreeMap::new(),
            refused: 0,
        }
    }

    /// A limiter sized from parameters.
    pub fn from_params(p: &Params) -> Result<Self, ParamError> {
        p.check_known("ratelimit", Self::PARAMS)?;
        let flows = p.count("flows", 65_536, 1 << 31)? as usize;
        let rate_bps = p.count("rate", 10_000_000, 1 << 50)?;
        let burst = p.count("burst", 15_000, 1 << 40)?;
        let peak_bps = p.number("peak", rate_bps, rate_bps, 1 << 50)?;
        let dscp = p.number("yellow_dscp", 10, 0, 63)? as u8;
        let uplink = p.number("uplink", 1, 0, 511)? as PortId;
        let downlink = p.number("downlink", 0, 0, 511)? as PortId;
        let rate = Rate {
            rate_bps,
            burst,
            peak_bps,
        };
        let mut r = RateLimiter::new(flows, rate, uplink, downlink);
        r.yellow_dscp = dscp;
        Ok(r)
    }

    /// The user index of `ip`, if installed (control-plane view).
    pub fn user_of(&self, ip: [u8; 4]) -> Option<u32> {
        self.index.get(&ip).copied()
    }

    /// Number of installed users.
    pub fn users(&self) -> usize {
        self.index.len()
    }

    /// Size of the reported-source filter.
    fn filter_size(&self) -> usize {
        self.flows.next_power_of_two().max(2)
    }

    /// Installs or reconfigures user `ip` with `rate`.
    fn set_user(&mut self, cp: &mut ControlPlane<'_>, ip: [u8; 4], rate: Rate) {
        let (Some(users), Some(meter)) = (self.users, self.meter) else {
            return;
        };
        if let Some(&i) = self.index.get(&ip) {
            cp.meter_configure(meter, u64::from(i), rate.meter_config());
            return;
        }
        if self.index.len() >= self.flows {
            self.refused += 1;
            return;
        }
        let i = self.index.len() as u32;
        self.index.insert(ip, i);
        cp.meter_configure(meter, u64::from(i), rate.meter_config());
        cp.table_add(users, MatchSpec::Exact(ip.to_vec().into()), i);
    }
}

/// Sets the DSCP of the IPv4 header at `l3`, updating its checksum.
fn set_dscp(h: &mut [u8], l3: usize, dscp: u8) {
    let Some(w) = h.get(l3..l3 + 12) else {
        return;
    };
    let old = u16::from_be_bytes([w[0], w[1]]);
    let tos = (dscp << 2) | (w[1] & 0x03);
    let new = u16::from_be_bytes([w[0], tos]);
    let sum = checksum::update_u16(u16::from_be_bytes([w[10], w[11]]), old, new);
    h[l3 + 1] = tos;
    h[l3 + 10..l3 + 12].copy_from_slice(&sum.to_be_bytes());
}

impl Program for RateLimiter {
    type Meta = Parsed;
    type Digest = NewUser;

    fn name(&self) -> &str {
        "ratelimit"
    }

    fn declare(&mut self, d: &mut Declare) -> Result<(), DeclareError> {
        let direction = d.gateway("rl_direction", Gress::Ingress, &[])?;
        let users = d.table::<u32>(
            TableDecl::new(
                "rl_users",
                MatchKind::Exact,
                4,
                index_bits(self.flows + 1),
                self.flows,
            )
            .after(&[direction.id()]),
        )?;
        let meter = d.meter(ArrayDecl::new("rl_meter", self.flows + 1).after(&[users.id()]))?;
        let bits = index_bits(self.filter_size()) as u8;
        let hash = d.hash("rl_hash", HashAlgorithm::Crc32, bits, Gress::Ingress, &[])?;
        let reported = d.register::<u32>(
            ArrayDecl::new("rl_reported", self.filter_size()).after(&[users.id(), hash.id()]),
        )?;
        self.users = Some(users);
        self.meter = Some(meter);
        self.hash = Some(hash);
        self.reported = Some(reported);
        Ok(())
    }

    fn parse(&self, gress: Gress, header: &[u8], meta: &mut Parsed) -> Result<(), ParseError> {
        parse_ingress_only(gress, header, meta)
    }

    fn ingress(
        &mut self,
        pkt: &mut PacketCtx<Parsed, NewUser>,
        dp: &mut DataPlane<'_>,
    ) -> Result<(), AccessError> {
        let (Some(users), Some(meter), Some(hash), Some(reported)) =
            (self.users, self.meter, self.hash, self.reported)
        else {
            return Ok(());
        };
        if pkt.ingress_port() == self.uplink {
            pkt.forward(self.downlink);
            return Ok(());
        }
        let p = pkt.meta;
        if !p.ipv4 {
            return Ok(()); // not attributable to a user: dropped
        }
        let index = match dp.lookup(users, &p.src)? {
            Some(i) => u64::from(i),
            None => {
                let slot = dp.hash(hash, &p.src)?;
                let ip = u32::from_be_bytes(p.src);
                let new = dp.register(reported, slot, |r| {
                    let new = *r != ip;
                    *r = ip;
                    new
                })?;
                if new {
                    pkt.digest(NewUser { ip: p.src });
                }
                self.flows as u64
            }
        };
        match dp.meter(meter, index, pkt.len() as u64, None)? {
            Color::Red => return Ok(()), // dropped
            Color::Yellow => set_dscp(pkt.header_mut(), usize::from(p.l3), self.yellow_dscp),
            Color::Green => {}
        }
        pkt.forward(self.uplink);
        Ok(())
    }

    fn control(&mut self, event: ControlEvent<NewUser>, cp: &mut ControlPlane<'_>) {
        match event {
            ControlEvent::Start => {
                if let Some(meter) = self.meter {
                    cp.meter_configure(meter, self.flows as u64, self.default.meter_config());
                }
            }
            ControlEvent::Digest(NewUser { ip }) if !self.index.contains_key(&ip) => {
                self.set_user(cp, ip, self.default);
            }
            ControlEvent::Message(m) if m.kind == MSG_SET_USER => {
                let b = &m.body;
                if b.len() != 20 && b.len() != 28 {
                    return;
                }
                let u = |o: usize| u64::from_be_bytes(b[o..o + 8].try_into().expect("8 bytes"));
                let ip = [b[0], b[1], b[2], b[3]];
                let (rate_bps, burst) = (u(4), u(12));
                let peak_bps = if b.len() == 28 { u(20) } else { rate_bps };
                if rate_bps == 0 || burst == 0 {
                    return;
                }
                self.set_user(
                    cp,
                    ip,
                    Rate {
                        rate_bps,
                        burst,
                        peak_bps,
                    },
                );
            }
            _ => {}
        }
    }
}
