//! The CLIP switch programs built from named parameters (`inca check`,
//! scenarios): `clip_null`, `clip_mfwd`, `clip_snat` and `clip_trd`.
//!
//! Parameters: `servers` (`id:port` pairs, comma separated, e.g.
//! `1:2,2:3`; default none), `group` (the first group's member ids, e.g.
//! `1,2`; default every server), `route_port` (where regular traffic is
//! routed: a default route; default 1), `bloom_bits` (bits per Bloom way,
//! default 65,536), `pin_cache` (cells per pin-cache way, default 16,384),
//! `pins` (pin-table entries, default 16,384), `entries` (the app's switch
//! table, default 1,024), `flight` (NULL only: 1 sends every packet to a
//! server, 0 none — "Ideal"; default 1), `t_exp_ms` (server flow expiry,
//! default 10,000), `controller` (1: the controller runs on the switch
//! CPU; 0: the driver alone, commands from outside; default 1),
//! `promotion` (`off`, `sketch` or `random`: the periodic loop; default
//! off), `push` (1: a transition pushes the previous group's promotable
//! flows into the switch table while it admits them and pins the rest,
//! §5.6 step 5; 0: it pins them all; default 1), `t_report_ms`
//! (default 250), `n_top` (default 256), `conns` (TRD only: R, the
//! `conn_idx` entries and the cells of `max_end` and `retx_cnt`, which the
//! controller splits evenly over the servers as their index slices,
//! POOL_ASSIGN kind 2; default 65,536).
//!
//! For live use and scale-out/in in scenario files [our choice]:
//! `routes` (more static routes, `NET/LEN@PORT` separated by commas or
//! spaces, e.g. `10.0.0.0/24@0`), `next_hop_mac` (the destination MAC of
//! routed packets; default 02:00:00:00:00:fe — a live testbed's hosts
//! answer only to 02:00:00:00:00:01), `pools` (SNAT only: the servers'
//! pool slices, `id:ip:lo-hi` comma separated, e.g.
//! `1:198.51.100.1:20000-29999`; replies to them are translated back
//! through the slice's owner — the inbound direction; default none:
//! outbound only), `transitions` (scheduled `Transition(G)`s,
//! `TIME:members` separated by `;`, e.g. `2s:1,2;4s:2`, the time since
//! the switch started — simulated, or a live node's wall clock) and
//! `fail_after_ms` (a server silent this long is declared failed; default
//! 300, three heartbeats).

use inca_apps::l2l3::{Entry as L3Entry, NextHop, L2L3};
use inca_apps::params::{ParamError, Params};
use inca_switch::device::Nanos;

use crate::apps::snat::PoolOwner;
use crate::apps::{mfwd, null, snat, trd};
use crate::switch::controller::{Conns, ControllerConfig, Policy, Promotion};
use crate::switch::scalability::{ScaleSizes, BLOOM_BITS, PIN_CACHE_CELLS, PIN_TABLE_ENTRIES};
use crate::switch::{ClipSwitch, Driver, DriverConfig, ServerLink};

/// The NULL program's name.
pub const NULL_PROGRAM: &str = "clip_null";
/// The MFWD program's name.
pub const MFWD_PROGRAM: &str = "clip_mfwd";
/// The SNAT program's name.
pub const SNAT_PROGRAM: &str = "clip_snat";
/// The TRD program's name.
pub const TRD_PROGRAM: &str = "clip_trd";
/// Every program's name.
pub const PROGRAMS: [&str; 4] = [NULL_PROGRAM, MFWD_PROGRAM, SNAT_PROGRAM, TRD_PROGRAM];

/// Parameter names.
pub const PARAMS: &[&str] = &[
    "servers",
    "group",
    "route_port",
    "bloom_bits",
    "pin_cache",
    "pins",
    "entries",
    "flight",
    "t_exp_ms",
    "controller",
    "promotion",
    "push",
    "t_report_ms",
    "n_top",
    "conns",
    "routes",
    "next_hop_mac",
    "pools",
    "transitions",
    "fail_after_ms",
];

/// One of the programs, built.
#[derive(Debug, Clone)]
pub enum Built {
    /// `clip_null`.
    Null(Box<ClipSwitch<null::NullSwitch>>),
    /// `clip_mfwd`.
    Mfwd(Box<ClipSwitch<mfwd::MfwdSwitch>>),
    /// `clip_snat`.
    Snat(Box<ClipSwitch<snat::SnatSwitch>>),
    /// `clip_trd`.
    Trd(Box<ClipSwitch<trd::TrdSwitch>>),
}

fn bad(name: &str, reason: impl ToString) -> ParamError {
    ParamError::Value {
        name: name.into(),
        reason: reason.to_string(),
    }
}

fn list(p: &Params, name: &str) -> Result<Vec<u64>, ParamError> {
    let Some(t) = p.text(name) else {
        return Ok(Vec::new());
    };
    t.split(',')
        .filter(|s| !s.trim().is_empty())
        .map(|s| {
            s.trim()
                .parse::<u64>()
                .map_err(|_| bad(name, format!("{s:?} is not a number")))
        })
        .collect()
}

fn servers(p: &Params) -> Result<Vec<ServerLink>, ParamError> {
    let Some(t) = p.text("servers") else {
        return Ok(Vec::new());
    };
    let mut out: Vec<ServerLink> = Vec::new();
    for item in t.split(',').filter(|s| !s.trim().is_empty()) {
        let (id, port) = item
            .trim()
            .split_once(':')
            .ok_or_else(|| bad("servers", format!("{item:?} is not id:port")))?;
        let id: u8 = id
            .parse()
            .ok()
            .filter(|i| (1..=127).contains(i))
            .ok_or_else(|| bad("servers", format!("server id {id:?} is not in 1..=127")))?;
        let port: u16 = port
            .parse()
            .ok()
            .filter(|p| *p < 512)
            .ok_or_else(|| bad("servers", format!("port {port:?} is not in 0..512")))?;
        if out.iter().any(|s| s.id == id || s.port == port) {
            return Err(bad("servers", format!("{item:?} repeats an id or a port")));
        }
        out.push(ServerLink { id, port });
    }
    Ok(out)
}

/// `routes`: (prefix, length, port).
fn routes(p: &Params) -> Result<Vec<([u8; 4], u8, u16)>, ParamError> {
    let Some(t) = p.text("routes") else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for item in t.split([',', ' ']).filter(|s| !s.is_empty()) {
        let wrong = || bad("routes", format!("{item:?} is not NET/LEN@PORT"));
        let (prefix, port) = item.split_once('@').ok_or_else(wrong)?;
        let (net, len) = prefix.split_once('/').ok_or_else(wrong)?;
        let net: std::net::Ipv4Addr = net.parse().map_err(|_| wrong())?;
        let len: u8 = len.parse().ok().filter(|l| *l <= 32).ok_or_else(wrong)?;
        let port: u16 = port.parse().ok().filter(|p| *p < 512).ok_or_else(wrong)?;
        out.push((net.octets(), len, port));
    }
    if out.len() > 32 {
        return Err(bad("routes", "at most 32 routes"));
    }
    Ok(out)
}

fn mac(p: &Params, name: &str, default: [u8; 6]) -> Result<[u8; 6], ParamError> {
    let Some(t) = p.text(name) else {
        return Ok(default);
    };
    let parts: Vec<u8> = t
        .split(':')
        .map(|b| u8::from_str_radix(b, 16).ok().filter(|_| b.len() == 2))
        .collect::<Option<_>>()
        .filter(|v: &Vec<u8>| v.len() == 6)
        .ok_or_else(|| bad(name, format!("{t:?} is not a MAC address")))?;
    let mut m = [0u8; 6];
    m.copy_from_slice(&parts);
    Ok(m)
}

/// `pools`: each server's slice, for the inbound direction.
fn pools(p: &Params, servers: &[ServerLink]) -> Result<Vec<PoolOwner>, ParamError> {
    let Some(t) = p.text("pools") else {
        return Ok(Vec::new());
    };
    let mut out: Vec<PoolOwner> = Vec::new();
    for item in t.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let wrong = |why: &str| bad("pools", format!("{item:?}: {why} (id:ip:lo-hi)"));
        let mut f = item.splitn(3, ':');
        let (Some(id), Some(ip), Some(range)) = (f.next(), f.next(), f.next()) else {
            return Err(wrong("not three fields"));
        };
        let server: u8 = id.parse().map_err(|_| wrong("bad server id"))?;
        if !servers.iter().any(|s| s.id == server) {
            return Err(wrong("not a configured server"));
        }
        let ip: std::net::Ipv4Addr = ip.parse().map_err(|_| wrong("bad address"))?;
        let (lo, hi) = range.split_once('-').ok_or_else(|| wrong("no lo-hi"))?;
        let (Ok(lo), Ok(hi)) = (lo.parse::<u16>(), hi.parse::<u16>()) else {
            return Err(wrong("ports are 1..=65535"));
        };
        if lo == 0 || lo > hi {
            return Err(wrong("lo-hi is not a range of ports"));
        }
        let o = PoolOwner {
            server,
            ip: ip.octets(),
            lo,
            hi,
        };
        if out
            .iter()
            .any(|x| x.server == server || (x.ip == o.ip && x.lo <= hi && lo <= x.hi))
        {
            return Err(wrong("repeats a server or overlaps another slice"));
        }
        out.push(o);
    }
    if out.len() > snat::MAX_OWNERS {
        return Err(bad("pools", "too many slices"));
    }
    Ok(out)
}

/// `transitions`: (time, members) in time order.
fn schedule(p: &Params, servers: &[ServerLink]) -> Result<Vec<(Nanos, Vec<u8>)>, ParamError> {
    let Some(t) = p.text("transitions") else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for item in t.split(';').map(str::trim).filter(|s| !s.is_empty()) {
        let wrong = |why: &str| bad("transitions", format!("{item:?}: {why} (TIME:ids)"));
        let (at, members) = item.split_once(':').ok_or_else(|| wrong("no ':'"))?;
        let at = inca_switch::units::parse_time(at.trim()).ok_or_else(|| wrong("bad time"))?;
        let members: Vec<u8> = members
            .split(',')
            .map(|m| m.trim().parse::<u8>().ok())
            .collect::<Option<_>>()
            .ok_or_else(|| wrong("bad server id"))?;
        if members.is_empty() || members.len() > crate::switch::forwarding::MAX_MEMBERS {
            return Err(wrong("a group has 1 to 16 members"));
        }
        if let Some(m) = members
            .iter()
            .find(|m| !servers.iter().any(|s| s.id == **m))
        {
            return Err(wrong(&format!("{m} is not a configured server")));
        }
        out.push((at, members));
    }
    if out.len() > crate::switch::controller::MAX_SCHEDULE {
        return Err(bad("transitions", "at most 64"));
    }
    out.sort_by_key(|(at, _)| *at);
    Ok(out)
}

fn pow2(p: &Params, name: &str, default: u64, max: u64) -> Result<u32, ParamError> {
    let v = p.count(name, default, max)?;
    if !v.is_power_of_two() {
        return Err(bad(name, format!("{v} is not a power of two")));
    }
    Ok(v as u32)
}

/// Builds `program` from `p`; None if the name is not CLIP's.
pub fn build(program: &str, p: &Params) -> Option<Result<Built, ParamError>> {
    if !PROGRAMS.contains(&program) {
        return None;
    }
    Some(build_known(program, p))
}

fn build_known(program: &str, p: &Params) -> Result<Built, ParamError> {
    p.check_known(program, PARAMS)?;
    let servers = servers(p)?;
    let group = match p.text("group") {
        Some(_) => list(p, "group")?.into_iter().map(|v| v as u8).collect(),
        None => servers.iter().map(|s| s.id).collect(),
    };
    let owners = pools(p, &servers)?;
    if !owners.is_empty() && program != SNAT_PROGRAM {
        return Err(bad("pools", "only clip_snat has pool slices"));
    }
    let schedule = schedule(p, &servers)?;
    let cfg = DriverConfig {
        servers,
        initial_group: group,
        t_exp_ns: p.count("t_exp_ms", 10_000, 3_600_000)? * 1_000_000,
    };
    cfg.check().map_err(|e| bad("group", e))?;
    let route_port = p.number("route_port", 1, 0, 511)? as u16;
    let dst_mac = mac(p, "next_hop_mac", [0x02, 0, 0, 0, 0, 0xFE])?;
    let hop = |port: u16| NextHop {
        port,
        dst_mac,
        src_mac: [0x02, 0, 0, 0, 0, 0xFD],
    };
    let mut l3 = L2L3::new(64, 64, 16);
    l3.entries = vec![
        L3Entry::NextHop {
            id: 1,
            hop: hop(route_port),
        },
        L3Entry::Route {
            prefix: [0; 4],
            len: 0,
            nexthop: 1,
        },
    ];
    // One next hop per port the extra routes use (ids 2, 3, ...).
    let mut hops: Vec<u16> = vec![route_port];
    for (prefix, len, port) in routes(p)? {
        let id = match hops.iter().position(|h| *h == port) {
            Some(i) => i as u16 + 1,
            None => {
                hops.push(port);
                l3.entries.push(L3Entry::NextHop {
                    id: hops.len() as u16,
                    hop: hop(port),
                });
                hops.len() as u16
            }
        };
        l3.entries.push(L3Entry::Route {
            prefix,
            len: u16::from(len),
            nexthop: id,
        });
    }
    let sizes = ScaleSizes {
        bloom_bits: pow2(p, "bloom_bits", u64::from(BLOOM_BITS), 65_536)?,
        pin_cache: pow2(p, "pin_cache", u64::from(PIN_CACHE_CELLS), 16_384)?,
        pin_table: p.count("pins", PIN_TABLE_ENTRIES as u64, 1 << 20)? as usize,
    };
    let entries = p.count("entries", 1024, 1 << 20)? as usize;
    let policy = match p.text("promotion").unwrap_or("off") {
        "off" => Policy::Off,
        "sketch" => Policy::Sketch,
        "random" => Policy::Random,
        other => {
            return Err(bad(
                "promotion",
                format!("{other:?} is not off, sketch or random"),
            ))
        }
    };
    let promotion = Promotion {
        policy,
        t_report_ns: p.count("t_report_ms", 250, 60_000)?.max(1) * 1_000_000,
        n_top: p.count("n_top", 256, 65_535)? as u16,
        capacity: entries,
        ..Promotion::default()
    };
    let fail_after_ns = p.count("fail_after_ms", 300, 3_600_000)?.max(1) * 1_000_000;
    let controller_on = p.number("controller", 1, 0, 1)? == 1;
    if !controller_on && !schedule.is_empty() {
        return Err(bad(
            "transitions",
            "the controller runs them (controller = 1)",
        ));
    }
    let push = p.number("push", 1, 0, 1)? == 1;
    let controller = controller_on.then(|| ControllerConfig {
        pin_capacity: sizes.pin_table,
        promotion,
        schedule,
        fail_after_ns,
        push,
        ..ControllerConfig::default()
    });
    let driver = Driver::new(cfg);
    Ok(match program {
        NULL_PROGRAM => {
            let flight = p.number("flight", 1, 0, 1)? == 1;
            Built::Null(Box::new(ClipSwitch::with_controller(
                null::NullSwitch { flight },
                l3,
                sizes,
                driver,
                controller,
            )))
        }
        MFWD_PROGRAM => Built::Mfwd(Box::new(ClipSwitch::with_controller(
            mfwd::MfwdSwitch::new(entries),
            l3,
            sizes,
            driver,
            controller,
        ))),
        SNAT_PROGRAM => Built::Snat(Box::new(ClipSwitch::with_controller(
            snat::SnatSwitch::new(entries).with_owners(owners),
            l3,
            sizes,
            driver,
            controller,
        ))),
        _ => {
            let conns = p.number("conns", u64::from(trd::CONNS), 1, u64::from(trd::CONNS))?;
            let controller = controller.map(|c| ControllerConfig {
                conns: Conns {
                    r: conns as u32,
                    ..Conns::default()
                },
                ..c
            });
            Built::Trd(Box::new(ClipSwitch::with_controller(
                trd::TrdSwitch::new(conns as u32),
                l3,
                sizes,
                driver,
                controller,
            )))
        }
    })
}
