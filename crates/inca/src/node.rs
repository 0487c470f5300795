//! `inca node --config FILE`: one device as a live process.
//!
//! Builds the device (a switch running a catalog app, or a router), binds its
//! ports (UDP links or Linux interfaces), optionally captures every port to
//! pcap, opens its control sessions (TCP, `inca_live::session`), and runs
//! it until SIGTERM or SIGINT. Counters are served in
//! Prometheus text format on `metrics` and logged every few seconds; on
//! shutdown the captures are closed and a final summary is logged.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use inca_live::capture::CapturePort;
use inca_live::config::{parse_mac, DeviceSpec, NodeConfig};
use inca_live::link::LiveLink;
use inca_live::packet::PacketPort;
use inca_live::port::Port;
use inca_live::runner::{Runner, RunnerConfig};
use inca_live::session::{LiveSessions, SessionDecl};
use inca_live::udp::UdpPort;
use inca_sim::engine::Node;
use inca_sim::nodes::host::{Host, HostConfig};
use inca_sim::nodes::router::{Router, RouterConfig};
use inca_sim::scenario::{LinkParams, SwitchFactory};
use inca_switch::Profile;

/// How often the metrics text is refreshed and a summary may be logged.
const SNAPSHOT_EVERY: Duration = Duration::from_millis(200);
const LOG_EVERY: Duration = Duration::from_secs(10);

/// Runs the node described by `config_path`.
pub fn run(config_path: &Path) -> anyhow::Result<()> {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .try_init();
    let text = std::fs::read_to_string(config_path)
        .with_context(|| format!("cannot read {}", config_path.display()))?;
    let config = NodeConfig::from_toml(&text)
        .map_err(|e| anyhow::anyhow!("{}: {e}", config_path.display()))?;
    let device = build_device(&config)?;
    let ports = build_ports(&config)?;
    let stop = Arc::new(AtomicBool::new(false));
    signal_hook::flag::register(signal_hook::consts::SIGTERM, stop.clone())?;
    signal_hook::flag::register(signal_hook::consts::SIGINT, stop.clone())?;
    let metrics = Arc::new(Mutex::new(String::new()));
    if let Some(addr) = config.metrics {
        serve_metrics(addr, metrics.clone(), stop.clone())?;
        tracing::info!(%addr, "metrics");
    }
    for p in &ports {
        tracing::info!(node = %config.name, port = %p.describe(), "port");
    }
    let (links, ingress) = build_links(&config)?;
    let mut runner = Runner::new(device, ports, config.seed, RunnerConfig::default())
        .with_links(links)
        .with_ingress_links(ingress);
    if let Some(listen) = config.session_listen {
        let decls: Vec<SessionDecl> = config
            .sessions
            .iter()
            .map(|s| SessionDecl {
                id: inca_switch::device::SessionId(s.id),
                peer: s.peer,
            })
            .collect();
        let sessions = LiveSessions::bind(listen, &decls)
            .with_context(|| format!("session_listen {listen}"))?;
        tracing::info!(node = %config.name, %listen, sessions = decls.len(), "control sessions");
        runner = runner.with_sessions(sessions);
    }
    tracing::info!(node = %config.name, "running");
    let (mut last_snapshot, mut last_log) = (Instant::now(), Instant::now());
    while !stop.load(Ordering::Relaxed) {
        if !runner.step()? {
            runner.wait()?;
        }
        if last_snapshot.elapsed() >= SNAPSHOT_EVERY {
            last_snapshot = Instant::now();
            *metrics.lock().unwrap_or_else(|e| e.into_inner()) = prometheus(&config.name, &runner);
        }
        if last_log.elapsed() >= LOG_EVERY {
            last_log = Instant::now();
            let s = runner.stats();
            tracing::info!(
                frames_in = s.frames_in,
                frames_out = s.frames_out,
                timers = s.timers,
                contract_violations = s.contract_violations,
                invariant_violations = s.invariant_violations,
                "summary"
            );
        }
    }
    let s = runner.stats();
    tracing::info!(node = %config.name, frames_in = s.frames_in, frames_out = s.frames_out, "stopped");
    Ok(())
}

fn build_device(config: &NodeConfig) -> anyhow::Result<Box<dyn Node>> {
    match &config.device {
        DeviceSpec::Switch {
            profile,
            program,
            params,
            profile_set,
        } => {
            let mut prof = Profile::by_name(profile)?;
            for (k, v) in profile_set {
                prof.set(k, &value_text(v))?;
            }
            let params: Vec<(String, String)> = params
                .iter()
                .map(|(k, v)| (k.clone(), value_text(v)))
                .collect();
            inca::factory()
                .build(program, &params, prof)
                .map_err(|e| anyhow::anyhow!("program {program}: {e}"))
        }
        DeviceSpec::Router {
            routes,
            neighbours,
            detect_delay,
        } => {
            let ports = config
                .ports
                .iter()
                .map(|p| usize::from(p.id) + 1)
                .max()
                .unwrap_or(0);
            let macs = (0..ports).map(|p| [0x02, 0x10, 0, 0, 0, p as u8]).collect();
            let mut nbrs = vec![[0xff; 6]; ports];
            for n in neighbours {
                let mac =
                    parse_mac(&n.mac).with_context(|| format!("neighbour mac {:?}", n.mac))?;
                if let Some(slot) = nbrs.get_mut(usize::from(n.port)) {
                    *slot = mac;
                }
            }
            let mut rc = RouterConfig::default();
            if let Some(d) = detect_delay {
                rc.detect_delay = *d;
            }
            let mut router = Router::new(rc, macs, nbrs);
            for r in routes {
                let (ip, len) = r.prefix.split_once('/').unwrap_or((&r.prefix, "32"));
                let ip: std::net::Ipv4Addr = ip
                    .parse()
                    .with_context(|| format!("route prefix {:?}", r.prefix))?;
                let len: u8 = len
                    .parse()
                    .with_context(|| format!("route prefix {:?}", r.prefix))?;
                router
                    .add_route(ip.octets(), len, r.ports.clone())
                    .map_err(|e| anyhow::anyhow!("route {}: {e}", r.prefix))?;
            }
            Ok(Box::new(router))
        }
        DeviceSpec::Server {
            server,
            ip,
            params,
            neighbours,
        } => {
            let ports = config
                .ports
                .iter()
                .map(|p| usize::from(p.id) + 1)
                .max()
                .unwrap_or(1);
            let mut neighbour_macs = vec![[0xff; 6]; ports];
            for n in neighbours {
                let mac =
                    parse_mac(&n.mac).with_context(|| format!("neighbour mac {:?}", n.mac))?;
                if let Some(slot) = neighbour_macs.get_mut(usize::from(n.port)) {
                    *slot = mac;
                }
            }
            let setup = inca_sim::scenario::ServerSetup {
                name: config.name.clone(),
                ip: *ip,
                macs: (0..ports).map(|p| [0x02, 0x20, 0, 0, 0, p as u8]).collect(),
                neighbour_macs,
                params: params.clone(),
                addresses: Default::default(),
            };
            inca::factory()
                .build_server(server, &setup)
                .map_err(|e| anyhow::anyhow!("server {server}: {e}"))
        }
        DeviceSpec::Host {
            config: host,
            mac,
            gateway_mac,
            link_rate,
        } => {
            use serde::Deserialize;
            let host = HostConfig::deserialize(host.clone())
                .map_err(|e| anyhow::anyhow!("device.config: {e}"))?;
            let mac_of =
                |v: &Option<String>, default: [u8; 6], field: &str| -> anyhow::Result<[u8; 6]> {
                    match v {
                        Some(s) => parse_mac(s)
                            .with_context(|| format!("device.{field} {s:?} is not a MAC address")),
                        None => Ok(default),
                    }
                };
            let mac = mac_of(mac, [2, 0, 0, 0, 0, 1], "mac")?;
            let gateway = mac_of(gateway_mac, [0xff; 6], "gateway_mac")?;
            let rate = match link_rate {
                Some(r) => inca_switch::units::parse_rate(r)
                    .with_context(|| format!("device.link_rate {r:?}"))?,
                None => 10_000_000_000,
            };
            // Workload kinds a system registers (SwiSh's app client) too.
            let factory = inca::factory();
            let registry = inca_sim::factory::FactoryWorkloads(&factory);
            Ok(Box::new(
                Host::with_registry(host, mac, gateway, rate, &registry)
                    .map_err(|e| anyhow::anyhow!("device.config: {e}"))?,
            ))
        }
    }
}

/// The ports, in device-port order; a gap in the ids is an error (each
/// device port must be bound to something).
fn build_ports(config: &NodeConfig) -> anyhow::Result<Vec<Box<dyn Port>>> {
    let mut specs = config.ports.clone();
    specs.sort_by_key(|p| p.id);
    let mut ports: Vec<Box<dyn Port>> = Vec::new();
    for (i, p) in specs.iter().enumerate() {
        if usize::from(p.id) != i {
            bail!("ports must be numbered 0, 1, 2, … without gaps; port {i} is missing");
        }
        let port: Box<dyn Port> = match (&p.udp, &p.interface) {
            (Some(u), None) => Box::new(
                UdpPort::bind(u.local, u.peer)
                    .with_context(|| format!("port {}: udp {}", p.id, u.local))?,
            ),
            (None, Some(name)) => Box::new(
                PacketPort::open(name)
                    .with_context(|| format!("port {}: interface {name}", p.id))?,
            ),
            _ => bail!("port {}: give exactly one of `udp` and `interface`", p.id),
        };
        let port: Box<dyn Port> = match &config.capture_dir {
            Some(dir) => {
                std::fs::create_dir_all(dir)
                    .with_context(|| format!("capture_dir {}", dir.display()))?;
                let path = dir.join(format!("{}-port{}.pcap", config.name, p.id));
                Box::new(
                    CapturePort::new(port, &path)
                        .with_context(|| format!("capture {}", path.display()))?,
                )
            }
            None => port,
        };
        ports.push(port);
    }
    Ok(ports)
}

/// Link models of the ports, in device-port order.
type Links = Vec<Option<LiveLink>>;

/// Each port's link models (egress, ingress), in device-port order (the
/// ports are checked by [`build_ports`]).
fn build_links(config: &NodeConfig) -> anyhow::Result<(Links, Links)> {
    let (mut egress, mut ingress): (Links, Links) = (Vec::new(), Vec::new());
    let channel = |id: u16, field: &str, params: &LinkParams| {
        let c = params
            .channel()
            .map_err(|e| anyhow::anyhow!("port {id}: {field}: {e}"))?;
        tracing::info!(node = %config.name, port = id, channel = %c, "{field} model");
        anyhow::Ok(c)
    };
    for p in &config.ports {
        let i = usize::from(p.id);
        if egress.len() <= i {
            egress.resize_with(i + 1, || None);
            ingress.resize_with(i + 1, || None);
        }
        if let Some(params) = &p.link {
            let c = channel(p.id, "link", params)?;
            egress[i] = Some(LiveLink::egress(c, config.seed, i));
        }
        if let Some(params) = &p.ingress_link {
            let c = channel(p.id, "ingress_link", params)?;
            ingress[i] = Some(LiveLink::ingress(c, config.seed, i));
        }
    }
    Ok((egress, ingress))
}

fn value_text(v: &toml::Value) -> String {
    match v {
        toml::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Counters in Prometheus text format: the device's report and each port's.
fn prometheus(node: &str, runner: &Runner<Box<dyn Node>>) -> String {
    let mut s = String::new();
    let report = runner.device().report(runner.now());
    for (k, v) in &report.counters {
        let name: String = k
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect();
        s.push_str(&format!("inca_{name}{{node=\"{node}\"}} {v}\n"));
    }
    // The driver's own checks (device contract, invariants counted live).
    let rs = runner.stats();
    for (k, v) in [
        // The device's clock (its timers and schedules count from it).
        ("runner_uptime_ns", runner.now()),
        ("runner_contract_violations", rs.contract_violations),
        ("runner_invariant_violations", rs.invariant_violations),
    ] {
        s.push_str(&format!("inca_{k}{{node=\"{node}\"}} {v}\n"));
    }
    if let Some(ss) = runner.sessions().map(|s| s.stats()) {
        for (k, v) in [
            ("session_messages_sent", ss.messages_sent),
            ("session_messages_received", ss.messages_received),
            ("session_refused", ss.refused),
            ("session_ups", ss.ups),
            ("session_resets", ss.resets),
            ("session_messages_lost", ss.messages_lost),
            ("session_connect_failures", ss.connect_failures),
            ("session_rejected", ss.rejected),
            ("session_malformed", ss.malformed),
        ] {
            s.push_str(&format!("inca_{k}{{node=\"{node}\"}} {v}\n"));
        }
    }
    for (i, p) in runner.ports().iter().enumerate() {
        let st = p.stats();
        for (k, v) in [
            ("port_rx_frames", st.rx_frames),
            ("port_tx_frames", st.tx_frames),
            ("port_tx_dropped", st.tx_dropped),
            ("port_rx_malformed", st.rx_malformed),
        ] {
            s.push_str(&format!("inca_{k}{{node=\"{node}\",port=\"{i}\"}} {v}\n"));
        }
        let models = [
            ("link", runner.link(i)),
            ("ingress_link", runner.ingress_link(i)),
        ];
        for (prefix, l) in models {
            let Some(l) = l.map(LiveLink::stats) else {
                continue;
            };
            for (k, v) in [
                ("offered", l.channel.offered),
                ("delivered", l.channel.delivered),
                ("loss_drops", l.channel.lost),
                ("queue_drops", l.channel.queue_drops),
                ("dups", l.channel.duplicated),
                ("reordered", l.channel.reordered),
                ("max_queue_bytes", l.channel.max_queue_bytes),
                ("held_drops", l.held_drops),
                ("late", l.late),
            ] {
                s.push_str(&format!(
                    "inca_{prefix}_{k}{{node=\"{node}\",port=\"{i}\"}} {v}\n"
                ));
            }
        }
    }
    s
}

/// Serves the latest metrics text to every HTTP request on `addr`, on its
/// own thread, until `stop`.
fn serve_metrics(
    addr: std::net::SocketAddr,
    text: Arc<Mutex<String>>,
    stop: Arc<AtomicBool>,
) -> anyhow::Result<()> {
    let listener = TcpListener::bind(addr).with_context(|| format!("metrics address {addr}"))?;
    listener.set_nonblocking(true)?;
    std::thread::spawn(move || {
        while !stop.load(Ordering::Relaxed) {
            match listener.accept() {
                Ok((mut conn, _)) => {
                    let _ = conn.set_read_timeout(Some(Duration::from_millis(200)));
                    let mut buf = [0u8; 1024];
                    let _ = conn.read(&mut buf);
                    let body = text.lock().map(|t| t.clone()).unwrap_or_default();
                    let _ = write!(
                        conn,
                        "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                        body.len()
                    );
                }
                Err(_) => std::thread::sleep(Duration::from_millis(20)),
            }
        }
    });
    Ok(())
}
