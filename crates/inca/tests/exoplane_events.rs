//! ExoPlane's control events end to end in the simulator (spec §5.4, last
//! paragraph; §7's firewall `conn` "deleted on FIN/RST via EVENT_FWD"):
//! the rack of experiments/exoplane/rack.toml (hub on the switch, two
//! smart NICs with daemons) carries two TCP connections through the
//! stateful firewall, replayed from a capture:
//!
//! - A is popular: set up through its shard's daemon, promoted to the
//!   switch, then its inside host sends a RST. The switch serves the RST
//!   (forwarded, as inca-apps' firewall does) and raises the firewall's
//!   "delete this connection" digest; the hub forwards it (EVENT_FWD) to
//!   the daemon of the flow's primary, whose firewall logic issues the
//!   DELETE; the hub evicts A from the switch in two phases, then deletes
//!   the entry on every holder.
//! - B stays on its device; its RST raises the same digest there, which
//!   the device's daemon handles alike.
//!
//! - C ends with a FIN, which inca-apps' firewall ignores (a connection
//!   ends by idle timeout, so the closing handshake's last ACKs pass): no
//!   event, the connection stays, as with the app alone.
//!
//! Afterwards neither A nor B is anywhere (switch, devices, hub), C is
//! still set up, and the run's §6 checks (P1, P3, P4) pass.

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};

use inca_exoplane::device::ExoDevice;
use inca_exoplane::hub::oplog::{EntryKey, Op};
use inca_exoplane::ids::{AppId, ObjId, UnionKey};
use inca_exoplane::switch::ExoSwitch;
use inca_sim::engine::Simulation;
use inca_sim::scenario::Loaded;
use inca_switch::Switch;
use inca_system::SystemFactory;
use inca_wire::{build_tcp_frame, Endpoints, PcapWriter, TcpFlags, TcpRepr};

const MS: u64 = 1_000_000;
const FW: AppId = AppId(2);
const FW_CONN: ObjId = ObjId(1);
const C1: [u8; 4] = [10, 0, 0, 1];
const S1: [u8; 4] = [203, 0, 113, 1];

fn tcp(sport: u16, flags: TcpFlags, payload: &[u8]) -> Vec<u8> {
    let ep = Endpoints::new(
        [2, 0, 0, 0, 0, 1],
        Ipv4Addr::from(C1),
        [2, 0, 0, 0, 0, 2],
        Ipv4Addr::from(S1),
    );
    let t = TcpRepr {
        src_port: sport,
        dst_port: 5353,
        seq: 1,
        ack: 1,
        flags,
        window: 8192,
        urgent: 0,
        options: &[],
        payload,
    };
    build_tcp_frame(&ep, &t).unwrap()
}

/// The connection key of `sport` (the firewall's `fw_conn` key and the
/// flow's union key): inside ‖ remote ‖ proto ‖ ports.
fn conn(sport: u16) -> Vec<u8> {
    let mut k = C1.to_vec();
    k.extend_from_slice(&S1);
    k.push(6);
    k.extend_from_slice(&sport.to_be_bytes());
    k.extend_from_slice(&5353u16.to_be_bytes());
    k
}

const A: u16 = 40_000;
const B: u16 = 40_001;
const C: u16 = 40_002;

/// The capture: A's SYN, a packet a millisecond for 1.5 s (popular: it
/// crosses θ = 64 in every sketch window), its RST at 1.7 s; B's SYN, five
/// packets, its RST at 1.75 s; C's SYN, five packets, its FIN at 1.8 s.
fn capture(dir: &Path) -> PathBuf {
    let path = dir.join(format!("exoplane-events-{}.pcap", std::process::id()));
    let mut frames = vec![
        (0, tcp(A, TcpFlags::SYN, &[])),
        (2 * MS, tcp(B, TcpFlags::SYN, &[])),
        (3 * MS, tcp(C, TcpFlags::SYN, &[])),
    ];
    let data = [0x5a; 100];
    for i in 1..=1500 {
        frames.push((i * MS + MS / 2, tcp(A, TcpFlags::ACK, &data)));
    }
    for i in 0..5 {
        frames.push((100 * MS + i * 10 * MS, tcp(B, TcpFlags::ACK, &data)));
        frames.push((105 * MS + i * 10 * MS, tcp(C, TcpFlags::ACK, &data)));
    }
    frames.push((1700 * MS, tcp(A, TcpFlags::RST | TcpFlags::ACK, &[])));
    frames.push((1750 * MS, tcp(B, TcpFlags::RST | TcpFlags::ACK, &[])));
    frames.push((1800 * MS, tcp(C, TcpFlags::FIN | TcpFlags::ACK, &[])));
    frames.sort_by_key(|(t, _)| *t);
    let mut w = PcapWriter::create(&path).unwrap();
    for (t, f) in &frames {
        w.write(1_700_000_000_000_000_000 + t, f).unwrap();
    }
    w.finish().unwrap();
    path
}

/// rack.toml's rack with the capture as c1's only workload.
fn scenario(dir: &Path, pcap: &Path) -> PathBuf {
    let rack = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../experiments/exoplane/rack.toml"),
    )
    .unwrap();
    // Keep the topology; replace the hosts' workloads.
    let start = rack.find("[[host]]").unwrap();
    let end = rack.find("[[link]]").unwrap();
    let hosts = format!(
        "[[host]]\nname = \"c1\"\nip = \"10.0.0.1\"\n[[host.workload]]\nname = \"fw-tcp\"\n\
         kind = \"pcap\"\nfile = {:?}\nstart = \"10ms\"\n\n[[host]]\nname = \"s1\"\n\
         ip = \"203.0.113.1\"\n\n",
        pcap.display().to_string()
    );
    let toml = format!("{}{}{}", &rack[..start], hosts, &rack[end..])
        .replace("duration = \"3s\"", "duration = \"2200ms\"");
    let path = dir.join(format!("exoplane-events-{}.toml", std::process::id()));
    std::fs::write(&path, toml).unwrap();
    path
}

fn counter(sim: &Simulation, node: &str, name: &str) -> u64 {
    sim.node_reports()
        .into_iter()
        .find(|(n, _, _)| n == node)
        .and_then(|(_, _, r)| r.counters.get(name).copied())
        .unwrap_or(0)
}

#[test]
fn a_rst_deletes_a_promoted_and_a_device_served_connection_everywhere_a_fin_nothing() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let pcap = capture(dir);
    let path = scenario(dir, &pcap);
    let seed = 1;
    println!("seed {seed}");
    let loaded = Loaded::from_file(&path, &[]).expect("the scenario loads");
    let factory = SystemFactory::checked(inca::registry());
    let mut built = loaded.build(&factory, Some(seed), None).expect("it builds");
    // Before the RSTs: A is on the switch, both connections everywhere.
    built.sim.run_until(1600 * MS, |_| {});
    let sw_id = built.sim.node_id("sw").unwrap();
    fn sw(sim: &Simulation, id: inca_sim::engine::NodeId) -> &Switch<ExoSwitch> {
        sim.node::<Switch<ExoSwitch>>(id).unwrap()
    }
    let hub = sw(&built.sim, sw_id).program().hub().unwrap();
    assert!(
        hub.present_flows(FW).contains(&UnionKey(conn(A))),
        "A promoted"
    );
    assert!(!hub.present_flows(FW).contains(&UnionKey(conn(B))));
    for sport in [A, B, C] {
        let key = EntryKey {
            app: FW,
            obj: FW_CONN,
            key: conn(sport),
        };
        assert!(hub.entry(&key).is_some(), "{sport} set up");
    }
    let fm_hits = sw(&built.sim, sw_id).program().counters().fm_hits;
    assert!(fm_hits > 100, "A served by the switch: {fm_hits}");
    built.sim.run_until(built.duration, |_| {});
    let sim = &built.sim;
    let violations = factory.run_checks(sim);
    assert!(violations.is_empty(), "{}", violations.join("\n"));

    // A's RST was served by the switch (an FM hit, forwarded) and its
    // event forwarded once; B's raised on its device.
    assert_eq!(counter(sim, "sw", "hub/events_fwd"), 1);
    assert_eq!(counter(sim, "sw", "hub/events_dropped"), 0);
    assert!(counter(sim, "sw", "exo/fm_hits") > fm_hits);
    let sum = |name: &str| counter(sim, "nic0", name) + counter(sim, "nic1", name);
    assert_eq!(sum("daemon/events_fwd_received"), 1);
    assert_eq!(sum("exo/events"), 1, "B's RST on its device");
    assert_eq!(sum("daemon/events"), 2);
    assert_eq!(sum("daemon/event_writes_ok"), 2);
    assert_eq!(sum("daemon/events_dropped"), 0);

    // Gone from the hub, the switch (FM and table) and every device.
    let hub = sw(sim, sw_id).program().hub().unwrap();
    assert!(hub.present_flows(FW).is_empty());
    assert!(hub.stats().evictions >= 1);
    // In the hub's log: A's FM delete after its RST (sent at 10 ms +
    // 1.7 s), the entry's delete done after the FM delete.
    let rst_at = 1710 * MS;
    let log: Vec<_> = hub.op_log().records().collect();
    let fm_delete = log.iter().find_map(|r| match &r.op {
        Op::FmDelete { app, uk } if *app == FW && uk.0 == conn(A) => Some(r.at),
        _ => None,
    });
    let deleted = log.iter().find_map(|r| match &r.op {
        Op::WriteStarted {
            entry,
            delete: true,
            ..
        } if entry.key == conn(A) => Some(r.at),
        _ => None,
    });
    let done = log.iter().rev().find_map(|r| match &r.op {
        Op::WriteDone { entry, .. } if entry.key == conn(A) => Some(r.at),
        _ => None,
    });
    let (fm_delete, deleted, done) = (fm_delete.unwrap(), deleted.unwrap(), done.unwrap());
    println!(
        "A: RST at {} ms; FM delete +{} us, device delete sent +{} us, done +{} us",
        rst_at / MS,
        (fm_delete - rst_at) / 1000,
        (deleted - rst_at) / 1000,
        (done - rst_at) / 1000
    );
    assert!(rst_at < fm_delete && fm_delete < deleted && deleted <= done);
    for sport in [A, B] {
        let key = EntryKey {
            app: FW,
            obj: FW_CONN,
            key: conn(sport),
        };
        assert!(hub.entry(&key).is_none(), "{sport} still in the hub");
    }
    let c = EntryKey {
        app: FW,
        obj: FW_CONN,
        key: conn(C),
    };
    assert!(hub.entry(&c).is_some(), "a FIN deletes nothing");
    let table_len = |node: &str| {
        let id = sim.node_id(node).unwrap();
        let objects = match node {
            "sw" => sim.node::<Switch<ExoSwitch>>(id).unwrap().objects(),
            _ => sim.node::<Switch<ExoDevice>>(id).unwrap().objects(),
        };
        let fm = objects.id_of("exo/fm_fw").map(|t| objects.table_len(t));
        let conns = objects.table_len(objects.id_of("fw/fw_conn").unwrap());
        (fm, conns)
    };
    assert_eq!(table_len("sw"), (Some(0), 0));
    for nic in ["nic0", "nic1"] {
        // C's entry stays on its primary and replica (both NICs).
        assert_eq!(table_len(nic).1, 1, "{nic} holds C alone");
        let d = sim.node_id(nic).unwrap();
        let daemon = sim.node::<Switch<ExoDevice>>(d).unwrap().program();
        let daemon = daemon.daemon().unwrap();
        for sport in [A, B] {
            assert_eq!(daemon.applied_version(FW, FW_CONN, &conn(sport)), None);
        }
        assert!(daemon.applied_version(FW, FW_CONN, &conn(C)).is_some());
    }
    let _ = std::fs::remove_file(&pcap);
    let _ = std::fs::remove_file(&path);
}
