//! The UDP generators: `udp` (constant rate, sizes, random 5-tuples, Zipf,
//! VLAN, TCP-flag, VXLAN and GTP-U shapes, session signalling), and the
//! adversarial `new_flows` and `tuples` floods ([`crate::nodes::attack`]),
//! which are the same generator with other flow plans and no probe.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::Arc;

use inca_switch::device::{DeviceRng, Nanos};
use inca_wire::ethernet::VLAN_TAG_LEN;
use inca_wire::{build_udp_frame, Probe, VlanTag, PROBE_LEN};
use rand::Rng;

use super::{probe_frame, BuildContext, HostInfo, StepContext, Workload};
use crate::nodes::attack::{nth_source, NewFlowsConfig, TuplesConfig};
use crate::nodes::encap::{Shape, L4};
use crate::nodes::host::dist::{
    parse_prefix, prefix_mask, resolve_schedule, source_space, Clock, FlowSet, Schedule, Zipf,
    FLOW_TABLE_MAX,
};
use crate::nodes::host::schema::{
    invalid, parse_time_field, src_port_range, FlowsAt, GtpcWord, HostError, UdpConfig,
    DEFAULT_UDP_PORT_BASE, GTPC_BODY_LEN, GTPC_PORT, MAX_FLOWS, UDP_FRAME_HEADERS,
};
use crate::workload_control::WorkloadChange;

#[derive(Debug, Clone)]
pub(crate) enum FlowPlan {
    Single {
        src_port: u16,
    },
    Random {
        n: usize,
        ports: (u16, u16),
        /// (network, prefix length) of random source addresses.
        prefix: Option<(u32, u8)>,
        zipf: Option<Arc<Zipf>>,
    },
    /// A new 5-tuple per packet: packet i uses source i of the space.
    Fresh {
        prefix: (Ipv4Addr, u8),
        ports: (u16, u16),
    },
    /// Round robin over fixed sources.
    List {
        sources: Arc<Vec<(Ipv4Addr, u16)>>,
    },
}

#[derive(Debug, Clone)]
struct UdpPlan {
    /// Whether payloads start with a probe (attack workloads send none).
    probe: bool,
    /// TCP or UDP, VXLAN or not.
    shape: Shape,
    /// With `flows_at = "dst"`: the source port; the flows are destinations.
    dst_flows: Option<u16>,
    dst: SocketAddrV4,
    sched: Schedule,
    flows: FlowPlan,
    vlan: Option<u16>,
    /// Per-flow tenant VLANs: (base, count).
    tenant: Option<(u16, u16)>,
    /// Popularity rotation period.
    rotate_every: Option<Nanos>,
    /// GTP-U's outer destination (with `shape.gtpu`).
    gtpu_sgw: Option<Ipv4Addr>,
    /// Session signalling.
    gtpc: Option<Gtpc>,
}

/// A `udp` workload's session signalling (see [`UdpConfig`]).
#[derive(Debug, Clone, Copy)]
struct Gtpc {
    /// Every this-th packet is signalling (0: none but the first).
    every: u64,
    /// The body's layout.
    body: [GtpcWord; 4],
    /// Each UE's first packet is its session message.
    attach: bool,
}

/// A UDP generator's volatile state (one life).
#[derive(Debug)]
struct Life {
    clock: Clock,
    /// Random 5-tuples' (source address, source port); empty for a single
    /// flow.
    flows: FlowSet,
    /// With session signalling: which flows (UEs) have had theirs (one entry
    /// per flow, at most `MAX_FLOWS`).
    signalled: Vec<bool>,
    /// Storms under way ([`WorkloadChange::Storm`]; overlapping ones
    /// nest, the rate multiple is the first's): flows picked uniformly.
    storms: u32,
}

/// A `udp`, `new_flows` or `tuples` workload.
#[derive(Debug)]
pub(crate) struct UdpWorkload {
    plan: UdpPlan,
    life: Option<Life>,
    /// Popularity shifts so far ([`WorkloadChange::Shift`]); they outlive
    /// a restart (the shift is the world's, not the host's).
    shifts: u64,
}

impl UdpWorkload {
    fn boxed(plan: UdpPlan) -> Box<dyn Workload> {
        Box::new(UdpWorkload {
            plan,
            life: None,
            shifts: 0,
        })
    }
}

/// Builds a `udp` workload.
pub(crate) fn build_udp(
    c: &UdpConfig,
    cx: &mut BuildContext<'_>,
) -> Result<Box<dyn Workload>, HostError> {
    let (field, name) = (cx.field.as_str(), cx.name.as_str());
    let (link_rate, default_port) = (cx.link_rate, cx.default_port());
    let notes: &mut Vec<String> = cx.notes;
    let dst = c
        .dst
        .ok_or_else(|| invalid(&format!("{field}.dst"), "missing (ip:port)"))?;
    let sched = resolve_schedule(
        field, &c.rate, c.pps, &c.size, &c.start, &c.stop, c.count, link_rate, notes,
    )?;
    let flows = match c.flows {
        None => {
            for (set, f) in [
                (c.zipf.is_some(), "zipf"),
                (c.src_ports.is_some(), "src_ports"),
                (c.src_prefix.is_some(), "src_prefix"),
            ] {
                if set {
                    return Err(invalid(&format!("{field}.{f}"), "only with flows = N"));
                }
            }
            FlowPlan::Single {
                src_port: c.src_port.unwrap_or(default_port),
            }
        }
        Some(n) => {
            let ff = format!("{field}.flows");
            if n == 0 || n > MAX_FLOWS {
                return Err(invalid(&ff, format!("{n} is outside 1..={MAX_FLOWS}")));
            }
            if c.src_port.is_some() && c.flows_at != Some(FlowsAt::Dst) {
                return Err(invalid(
                    &format!("{field}.src_port"),
                    "with flows = N use src_ports (or flows_at = \"dst\")",
                ));
            }
            let ports = src_port_range(field, c.src_ports)?;
            let prefix = match &c.src_prefix {
                Some(s) => Some(parse_prefix(s).ok_or_else(|| {
                    invalid(
                        &format!("{field}.src_prefix"),
                        format!("{s:?} is not a.b.c.d/len"),
                    )
                })?),
                None => None,
            };
            let space = source_space(ports, prefix);
            if n > space {
                return Err(invalid(
                    &ff,
                    format!("{n} distinct 5-tuples do not fit in {space} (widen src_ports or src_prefix)"),
                ));
            }
            let zipf = match c.zipf {
                Some(a) => Some(Arc::new(Zipf::new(n as usize, a).ok_or_else(|| {
                    invalid(
                        &format!("{field}.zipf"),
                        format!("{a} is not a finite skew >= 0"),
                    )
                })?)),
                None => None,
            };
            FlowPlan::Random {
                n: n as usize,
                ports,
                prefix,
                zipf,
            }
        }
    };
    let vlan = match c.vlan {
        Some(v) if !(1..=4094).contains(&v) => {
            return Err(invalid(
                &format!("{field}.vlan"),
                format!("{v} is outside 1..=4094"),
            ))
        }
        v => v,
    };
    let tenant = match c.tenant {
        None => None,
        Some(_) if vlan.is_some() => {
            return Err(invalid(&format!("{field}.tenant"), "not with vlan"))
        }
        Some(t) => {
            let base = t.base.unwrap_or(1);
            let last = u32::from(base) + u32::from(t.count);
            if t.count == 0 || base == 0 || last > 4095 {
                return Err(invalid(
                    &format!("{field}.tenant"),
                    format!("VLANs {base}..{last} are outside 1..=4094 (or count is 0)"),
                ));
            }
            Some((base, t.count))
        }
    };
    let rotate_every = match &c.rotate_every {
        None => None,
        Some(_) if c.zipf.is_none() => {
            return Err(invalid(&format!("{field}.rotate_every"), "only with zipf"))
        }
        Some(q) => {
            let f = format!("{field}.rotate_every");
            match parse_time_field(q, &f)? {
                0 => return Err(invalid(&f, "must be > 0")),
                t => Some(t),
            }
        }
    };
    let dst_flows = match c.flows_at.unwrap_or_default() {
        FlowsAt::Src => None,
        FlowsAt::Dst if c.flows.is_none() => {
            return Err(invalid(
                &format!("{field}.flows_at"),
                "\"dst\" only with flows = N",
            ))
        }
        FlowsAt::Dst => Some(c.src_port.unwrap_or(default_port)),
    };
    let vxlan = match c.vxlan_vni {
        Some(v) if v > 0x00ff_ffff => {
            return Err(invalid(
                &format!("{field}.vxlan_vni"),
                format!("{v} does not fit in 24 bits"),
            ))
        }
        v => v,
    };
    if c.gtpu_teid.is_some() && vxlan.is_some() {
        return Err(invalid(
            &format!("{field}.gtpu_teid"),
            "not with vxlan_vni (one tunnel at a time)",
        ));
    }
    for (set, f) in [
        (c.gtpu_sgw.is_some(), "gtpu_sgw"),
        (c.gtpc_every.is_some(), "gtpc_every"),
        (c.gtpc_body.is_some(), "gtpc_body"),
        (c.gtpc_attach.is_some(), "gtpc_attach"),
    ] {
        if set && c.gtpu_teid.is_none() {
            return Err(invalid(&format!("{field}.{f}"), "only with gtpu_teid"));
        }
    }
    if c.gtpc_every.is_some() && c.flows.is_some_and(|n| n > FLOW_TABLE_MAX as u64) {
        // Signalling remembers each UE: a table per flow.
        return Err(invalid(
            &format!("{field}.gtpc_every"),
            format!("only with flows <= {FLOW_TABLE_MAX}"),
        ));
    }
    let gtpu_sgw = c.gtpu_sgw;
    let gtpc = c.gtpc_every.map(|every| Gtpc {
        every,
        body: c.gtpc_body.unwrap_or(GtpcWord::INCA_EPC),
        attach: c.gtpc_attach.unwrap_or(true),
    });
    let shape = Shape {
        l4: c.tcp_flags.map_or(L4::Udp, L4::Tcp),
        vxlan,
        gtpu: c.gtpu_teid,
    };
    let least = shape.headers() + PROBE_LEN;
    if !shape.is_plain() && sched.size.min() < least {
        notes.push(format!(
            "{name}: frames smaller than {least} B are raised to {least} B (headers and probe)"
        ));
    }
    Ok(UdpWorkload::boxed(UdpPlan {
        probe: true,
        shape,
        dst_flows,
        dst,
        sched,
        flows,
        vlan,
        tenant,
        rotate_every,
        gtpu_sgw,
        gtpc,
    }))
}

/// Builds a `new_flows` workload: a new 5-tuple per packet, no probe.
pub(crate) fn build_new_flows(
    c: &NewFlowsConfig,
    cx: &mut BuildContext<'_>,
) -> Result<Box<dyn Workload>, HostError> {
    let (field, name, link_rate) = (cx.field.as_str(), cx.name.as_str(), cx.link_rate);
    let notes: &mut Vec<String> = cx.notes;
    let dst = c
        .dst
        .ok_or_else(|| invalid(&format!("{field}.dst"), "missing (ip:port)"))?;
    let sched = resolve_schedule(
        field, &c.rate, c.pps, &c.size, &c.start, &c.stop, c.count, link_rate, notes,
    )?;
    let pf = format!("{field}.src_prefix");
    let prefix = c
        .src_prefix
        .as_deref()
        .ok_or_else(|| invalid(&pf, "missing (a.b.c.d/len)"))
        .and_then(|s| {
            crate::nodes::attack::parse_prefix(s)
                .ok_or_else(|| invalid(&pf, format!("{s:?} is not a.b.c.d/len")))
        })?;
    let ports = src_port_range(field, c.src_ports)?;
    notes.push(format!(
        "{name}: new-flow flood over {} sources; later packets reuse them",
        crate::nodes::attack::space(prefix, ports)
    ));
    Ok(UdpWorkload::boxed(UdpPlan {
        probe: false,
        shape: Shape::default(),
        dst_flows: None,
        dst,
        sched,
        flows: FlowPlan::Fresh { prefix, ports },
        vlan: None,
        tenant: None,
        rotate_every: None,
        gtpu_sgw: None,
        gtpc: None,
    }))
}

/// Builds a `tuples` workload: round robin over given sources, no probe.
pub(crate) fn build_tuples(
    c: &TuplesConfig,
    cx: &mut BuildContext<'_>,
) -> Result<Box<dyn Workload>, HostError> {
    let (field, link_rate) = (cx.field.as_str(), cx.link_rate);
    let notes: &mut Vec<String> = cx.notes;
    let dst = c
        .dst
        .ok_or_else(|| invalid(&format!("{field}.dst"), "missing (ip:port)"))?;
    let sched = resolve_schedule(
        field, &c.rate, c.pps, &c.size, &c.start, &c.stop, c.count, link_rate, notes,
    )?;
    if c.craft.is_some() {
        return Err(invalid(
            &format!("{field}.craft"),
            "crafted sources are computed by a scenario (its factory knows the target switch)",
        ));
    }
    if c.sources.is_empty() || c.sources.len() > crate::nodes::attack::MAX_SOURCES {
        return Err(invalid(
            &format!("{field}.sources"),
            format!(
                "{} sources; give 1..={}",
                c.sources.len(),
                crate::nodes::attack::MAX_SOURCES
            ),
        ));
    }
    Ok(UdpWorkload::boxed(UdpPlan {
        probe: false,
        shape: Shape::default(),
        dst_flows: None,
        dst,
        sched,
        flows: FlowPlan::List {
            sources: Arc::new(c.sources.iter().map(|s| (*s.ip(), s.port())).collect()),
        },
        vlan: None,
        tenant: None,
        rotate_every: None,
        gtpu_sgw: None,
        gtpc: None,
    }))
}

impl Workload for UdpWorkload {
    fn begin(&mut self, host: &HostInfo, anchor: Nanos, rng: &mut DeviceRng) {
        let p = &self.plan;
        let flows = match &p.flows {
            FlowPlan::Single { .. } | FlowPlan::Fresh { .. } | FlowPlan::List { .. } => {
                FlowSet::Table(Vec::new())
            }
            FlowPlan::Random {
                n, ports, prefix, ..
            } => FlowSet::draw(*n, *ports, *prefix, host.ip, rng),
        };
        let signalled = match (&p.gtpc, &p.flows) {
            (Some(_), FlowPlan::Random { n, .. }) => vec![false; (*n).max(1)],
            (Some(_), _) => vec![false; 1],
            (None, _) => Vec::new(),
        };
        self.life = Some(Life {
            clock: Clock::at(p.sched.start.max(anchor)),
            flows,
            signalled,
            storms: 0,
        });
    }

    fn end(&mut self) {
        self.life = None;
    }

    fn next_at(&self) -> Option<Nanos> {
        self.life.as_ref()?.clock.next(&self.plan.sched)
    }

    fn change(&mut self, now: Nanos, change: WorkloadChange) -> bool {
        let Some(life) = &mut self.life else {
            return false;
        };
        match change {
            WorkloadChange::Shift => {
                let zipf = matches!(&self.plan.flows, FlowPlan::Random { zipf: Some(_), .. });
                self.shifts += u64::from(zipf);
                zipf
            }
            WorkloadChange::Storm { factor } => {
                if life.storms == 0 {
                    life.clock.rebase(now, factor, &self.plan.sched);
                }
                life.storms += 1;
                true
            }
            WorkloadChange::Calm if life.storms > 0 => {
                life.storms -= 1;
                if life.storms == 0 {
                    life.clock.rebase(now, 1, &self.plan.sched);
                }
                true
            }
            // A calm after a restart ended its storm: nothing to end.
            WorkloadChange::Calm => false,
        }
    }

    fn step(&mut self, cx: &mut StepContext<'_>) -> Option<Vec<u8>> {
        let p = &self.plan;
        let shifts = self.shifts;
        let Life {
            clock,
            flows,
            signalled,
            storms,
        } = self.life.as_mut()?;
        let (host, send, now) = (cx.host, cx.send, cx.now);
        let (rng, scratch) = (&mut *cx.rng, &mut *cx.scratch);
        let mut size = p.sched.size.sample(rng);
        if !p.shape.is_plain() {
            // Pace by the frame actually sent.
            let tagged = p.vlan.is_some() || p.tenant.is_some();
            size = size.max(p.shape.headers() + PROBE_LEN + if tagged { VLAN_TAG_LEN } else { 0 });
        }
        let seq = clock.sent;
        clock.advance(size);
        if !send {
            return None;
        }
        let (flow, (src, sport)) = match &p.flows {
            FlowPlan::Single { src_port } => (0, (host.ip, *src_port)),
            FlowPlan::Fresh { prefix, ports } => (0, nth_source(*prefix, *ports, seq)),
            FlowPlan::List { sources } => {
                let i = (seq % sources.len().max(1) as u64) as usize;
                (
                    i,
                    sources
                        .get(i)
                        .copied()
                        .unwrap_or((host.ip, DEFAULT_UDP_PORT_BASE)),
                )
            }
            FlowPlan::Random { n, zipf, .. } => {
                let f = match zipf {
                    Some(z) if *storms == 0 => {
                        let rank = z.sample(rng);
                        let period = p
                            .rotate_every
                            .map_or(0, |t| now.saturating_sub(p.sched.start) / t);
                        // A shift is a period of its own, apart from the
                        // timed ones (which count from 0 up).
                        rotated(rank, *n, period | shifts << 40)
                    }
                    _ => rng.gen_range(0..*n),
                };
                (f, flows.get(f).unwrap_or((host.ip, DEFAULT_UDP_PORT_BASE)))
            }
        };
        let probe = Probe {
            flow: flow as u32,
            seq,
            tx_time: now,
        };
        let mut ep = host.endpoints(src, *p.dst.ip());
        let (src, sport, dst, dport) = match p.dst_flows {
            Some(port) => (host.ip, port, src, sport),
            None => (src, sport, *p.dst.ip(), p.dst.port()),
        };
        let vlan = match p.tenant {
            Some((base, count)) => Some(base + tenant_of(src, sport, dst, dport, count)),
            None => p.vlan,
        };
        let size = match vlan {
            Some(vid) => {
                ep.vlan = Some(VlanTag {
                    pcp: 0,
                    dei: false,
                    vid,
                });
                size.saturating_sub(VLAN_TAG_LEN)
            }
            None => size,
        };
        if let Some(Gtpc {
            every,
            body: words,
            attach,
        }) = p.gtpc
        {
            // The UE's session message first, then every `every`-th.
            let first = attach && signalled.get(flow).is_some_and(|s| !s);
            if first || (every > 0 && (seq + 1) % every == 0) {
                if let Some(s) = signalled.get_mut(flow) {
                    *s = true;
                }
                let teid = p
                    .shape
                    .gtpu
                    .unwrap_or(0)
                    .wrapping_add(ue_index(&p.flows, src));
                ep.src_ip = host.ip;
                ep.dst_ip = *p.dst.ip();
                scratch.clear();
                scratch.extend_from_slice(&GtpcWord::body(&words, src, teid, host.ip));
                scratch.resize(size.saturating_sub(UDP_FRAME_HEADERS).max(GTPC_BODY_LEN), 0);
                return build_udp_frame(&ep, GTPC_PORT, GTPC_PORT, scratch, true).ok();
            }
        }
        if !p.shape.is_plain() {
            // A tunnel's outer header goes from the host to `dst` (GTP-U:
            // to the gateway, `gtpu_sgw`).
            ep.src_ip = host.ip;
            ep.dst_ip = p.gtpu_sgw.unwrap_or(*p.dst.ip());
            let payload_len = size.saturating_sub(p.shape.headers()).max(PROBE_LEN);
            scratch.clear();
            scratch.resize(payload_len, 0);
            probe.write(scratch);
            let mut shape = p.shape;
            // One bearer per UE: the TEID follows the UE's address.
            let ue = ue_index(&p.flows, src);
            shape.gtpu = shape.gtpu.map(|t| t.wrapping_add(ue));
            shape.build(&ep, src, sport, dst, dport, scratch)
        } else if p.dst_flows.is_some() {
            ep.src_ip = src;
            ep.dst_ip = dst;
            probe_frame(&ep, sport, dport, size, probe, scratch)
        } else if p.probe {
            probe_frame(&ep, sport, p.dst.port(), size, probe, scratch)
        } else {
            scratch.clear();
            scratch.resize(size.saturating_sub(UDP_FRAME_HEADERS), 0);
            build_udp_frame(&ep, sport, p.dst.port(), scratch, true).ok()
        }
    }
}

/// A UE's index in its workload's `src_prefix` (its host bits; 0 without
/// a prefix): the offset of its TEID, the same in every workload that draws
/// from the prefix.
fn ue_index(flows: &FlowPlan, ue: Ipv4Addr) -> u32 {
    match flows {
        FlowPlan::Random {
            prefix: Some((_, len)),
            ..
        } => u32::from(ue) & !prefix_mask(*len),
        _ => 0,
    }
}

/// SplitMix64's finaliser: a fixed, well-mixed hash (the same in every run
/// and every build, unlike std's hasher).
fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The tenant (0..count) of a flow: a hash of its 5-tuple.
pub(crate) fn tenant_of(src: Ipv4Addr, sport: u16, dst: Ipv4Addr, dport: u16, count: u16) -> u16 {
    let a = u64::from(u32::from(src)) << 32 | u64::from(u32::from(dst));
    let b = u64::from(sport) << 16 | u64::from(dport);
    (mix64(mix64(a) ^ b) % u64::from(count.max(1))) as u16
}

/// The flow Zipf rank `rank` stands for in rotation period `epoch`.
pub(crate) fn rotated(rank: usize, n: usize, epoch: u64) -> usize {
    if epoch == 0 {
        return rank;
    }
    let n = n.max(1) as u64;
    ((rank as u64 % n + mix64(epoch) % n) % n) as usize
}
