//! Unit tests of the testbed plan: ports, routes, sessions, refusals.

use super::*;

const NAT: &str = r#"
name = "nat"
duration = "1s"
[[switch]]
name = "nat1"
program = "nat"
params = { outside_port = 0, public = "198.51.100.1" }
[[router]]
name = "r1"
[[host]]
name = "client"
ip = "10.0.0.1"
[[host]]
name = "c2"
ip = "10.0.0.2"
[[host]]
name = "server"
ip = "10.1.0.1"
[[link]]
a = "client:0"
b = "r1:1"
[[link]]
a = "c2:0"
b = "r1:2"
[[link]]
a = "r1:0"
b = "nat1:1"
[[link]]
a = "nat1:0"
b = "server:0"
"#;

#[test]
fn names_fit_linux_limits() {
    assert_eq!(
        testbed_name(Path::new("/x/My Scenario.toml")),
        "my-scenario"
    );
    let p = interface_prefix("quickstart");
    assert_eq!(p.len(), 7);
    assert_eq!(p, interface_prefix("quickstart"));
    assert_ne!(p, interface_prefix("quickstart2"));
    assert!(format!("{p}-9999a").len() <= 15);
}

#[test]
fn gateways() {
    let gw = |ip: &str, len| default_gateway(ip.parse().unwrap(), len).map(|g| g.to_string());
    assert_eq!(gw("10.0.0.1", 24).as_deref(), Some("10.0.0.254"));
    assert_eq!(gw("10.0.0.254", 24).as_deref(), Some("10.0.0.253"));
    assert_eq!(gw("10.0.0.1", 16).as_deref(), Some("10.0.255.254"));
    assert_eq!(gw("10.0.0.1", 32), None);
}

#[test]
fn plan_binds_ports_and_routes_like_the_simulator() {
    let loaded = Loaded::from_str(NAT, "nat.toml", &[]).unwrap();
    let p = plan(&loaded.scenario, "nat", Some(Path::new("/tmp/cap"))).unwrap();
    let pre = interface_prefix("nat");
    assert_eq!(p.hosts.len(), 3);
    assert_eq!(p.hosts[0].namespace, "inca-nat-client");
    assert_eq!(p.hosts[0].root_if, format!("{pre}-0"));
    assert_eq!(
        p.hosts[0].neighbours,
        vec![
            "10.0.0.254".parse::<Ipv4Addr>().unwrap(),
            "10.0.0.2".parse().unwrap()
        ]
    );
    assert_eq!(
        p.hosts[2].neighbours,
        vec!["10.1.0.254".parse::<Ipv4Addr>().unwrap()]
    );
    assert_eq!(p.pairs, vec![(format!("{pre}-2a"), format!("{pre}-2b"))]);
    let nat = &p.nodes[0];
    assert_eq!(nat.name, "nat1");
    assert_eq!(nat.capture_dir.as_deref(), Some(Path::new("/tmp/cap")));
    let ports: Vec<(u16, &str)> = nat
        .ports
        .iter()
        .map(|p| (p.id, p.interface.as_deref().unwrap()))
        .collect();
    assert_eq!(
        ports,
        vec![(0, &*format!("{pre}-3")), (1, &*format!("{pre}-2b"))]
    );
    let r1 = &p.nodes[1];
    let DeviceSpec::Router {
        routes, neighbours, ..
    } = &r1.device
    else {
        panic!("r1 is a router")
    };
    assert_eq!(neighbours.len(), 3);
    assert!(neighbours.iter().all(|n| n.mac == HOST_MAC));
    let r: Vec<(&str, &[u16])> = routes
        .iter()
        .map(|r| (r.prefix.as_str(), r.ports.as_slice()))
        .collect();
    assert_eq!(
        r,
        vec![
            ("10.0.0.1/32", &[1u16][..]),
            ("10.0.0.2/32", &[2][..]),
            ("10.1.0.1/32", &[0][..])
        ]
    );
    // Every generated configuration parses back.
    for n in &p.nodes {
        assert_eq!(&NodeConfig::from_toml(&n.to_toml()).unwrap(), n);
    }
}

#[test]
fn quickstart_routes_use_both_aggregation_switches() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../experiments/quickstart.toml"
    );
    let loaded = Loaded::from_file(Path::new(path), &[]).unwrap();
    let routes = routes(&loaded.scenario).unwrap();
    let tor1 = &routes["tor1"];
    let to_server = tor1.iter().find(|r| r.prefix == "10.1.0.1/32").unwrap();
    assert_eq!(to_server.ports, vec![0, 1]);
    let to_pool = routes["core"]
        .iter()
        .find(|r| r.prefix == "198.51.100.0/24")
        .unwrap();
    assert_eq!(to_pool.ports, vec![0]);
}

#[test]
fn a_prefix_two_switches_announce_is_one_ecmp_route() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../experiments/live/redplane-failover.toml"
    );
    let loaded = Loaded::from_file(Path::new(path), &[]).unwrap();
    let routes = routes(&loaded.scenario).unwrap();
    let core: Vec<(&str, &[u16])> = routes["core"]
        .iter()
        .map(|r| (r.prefix.as_str(), r.ports.as_slice()))
        .collect();
    assert_eq!(
        core.iter().filter(|r| r.0 == "198.51.100.0/24").count(),
        1,
        "{core:?}"
    );
    assert!(
        core.contains(&("198.51.100.0/24", &[0u16, 1][..])),
        "{core:?}"
    );
    assert!(core.contains(&("10.255.0.2/32", &[1u16][..])), "{core:?}");
    assert!(core.contains(&("10.9.0.1/32", &[3u16][..])), "{core:?}");
    let tor1 = &routes["tor1"];
    let to_server = tor1.iter().find(|r| r.prefix == "10.1.0.1/32").unwrap();
    assert_eq!(to_server.ports, vec![0, 1]);
}

#[test]
fn sessions_and_smart_nics_become_node_configs() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../experiments/live/exoplane-failover.toml"
    );
    let loaded = Loaded::from_file(Path::new(path), &[]).unwrap();
    let p = plan(&loaded.scenario, "exo", None).unwrap();
    let ip = management_ip("exo");
    assert_eq!(ip.octets()[0], 127);
    assert_ne!(ip, management_ip("exo2"));
    let names: Vec<&str> = p.nodes.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(names, ["sw", "nic0", "nic1"]);
    let at = |port: u16| SocketAddr::new(ip.into(), port);
    // Every node serves metrics on its own port.
    for (i, n) in p.nodes.iter().enumerate() {
        assert_eq!(n.metrics, Some(at(METRICS_PORT + i as u16)));
    }
    // The switch holds both sessions; each NIC one, pointing back.
    let sw = &p.nodes[0];
    assert_eq!(sw.session_listen, Some(at(SESSION_PORT)));
    let sessions: Vec<(u32, SocketAddr)> = sw.sessions.iter().map(|s| (s.id, s.peer)).collect();
    assert_eq!(
        sessions,
        [(1, at(SESSION_PORT + 1)), (2, at(SESSION_PORT + 2))]
    );
    for (i, n) in p.nodes.iter().enumerate().skip(1) {
        assert_eq!(n.session_listen, Some(at(SESSION_PORT + i as u16)));
        assert_eq!(n.sessions.len(), 1);
        assert_eq!(n.sessions[0].id, i as u32);
        assert_eq!(n.sessions[0].peer, at(SESSION_PORT));
        // Smart NICs run as switches on the smartnic profile, one port.
        let DeviceSpec::Switch {
            profile, program, ..
        } = &n.device
        else {
            panic!("{} is a switch node", n.name)
        };
        assert_eq!(
            (profile.as_str(), program.as_str()),
            ("smartnic", "exoplane_device")
        );
        assert_eq!(n.ports.len(), 1);
    }
    // The switch's ports are 0..=3 without gaps (inca node needs that).
    let ids: Vec<u16> = sw.ports.iter().map(|p| p.id).collect();
    assert_eq!(ids, [0, 1, 2, 3]);
    for n in &p.nodes {
        assert_eq!(&NodeConfig::from_toml(&n.to_toml()).unwrap(), n);
    }
}

#[test]
fn sessions_the_testbed_cannot_carry_are_refused_by_name() {
    let with = |extra: &str| {
        let text = format!("{NAT}\n{extra}");
        let loaded = Loaded::from_str(&text, "s.toml", &[]).unwrap();
        plan(&loaded.scenario, "s", None)
            .map(|_| ())
            .unwrap_err()
            .to_string()
    };
    let e = with("[[session]]\na = \"nat1\"\nb = \"client\"\n");
    assert!(e.contains("nat1-client") && e.contains("host"), "{e}");
    let e = with("[[session]]\na = \"nat1\"\nb = \"nobody\"\n");
    assert!(e.contains("session.b") && e.contains("nobody"), "{e}");
    let e = with(
        "[[session]]\na = \"nat1\"\nb = \"r1\"\nid = 3\n[[session]]\nname = \"again\"\na = \"r1\"\nb = \"nat1\"\nid = 3\n",
    );
    assert!(e.contains("again") && e.contains("id 3"), "{e}");
    // A session between two nodes is fine.
    let loaded = Loaded::from_str(
        &format!("{NAT}\n[[session]]\na = \"nat1\"\nb = \"r1\"\n"),
        "s.toml",
        &[],
    )
    .unwrap();
    let p = plan(&loaded.scenario, "s", None).unwrap();
    assert_eq!(
        p.nodes[0].sessions[0].peer,
        p.nodes[1].session_listen.unwrap()
    );
    assert_eq!(
        p.nodes[1].sessions[0].peer,
        p.nodes[0].session_listen.unwrap()
    );
}

#[test]
fn host_to_host_links_and_extra_host_ports_are_refused() {
    let bad = NAT.replace(
        "a = \"client:0\"\nb = \"r1:1\"",
        "a = \"client:0\"\nb = \"c2:1\"",
    );
    let loaded = Loaded::from_str(&bad, "bad.toml", &[]).unwrap();
    assert!(plan(&loaded.scenario, "bad", None).is_err());
}

#[test]
fn a_links_model_goes_on_both_node_ends_and_defaults_count() {
    // r1—nat1 sets its own delay and loss; the defaults give every link a
    // rate, so each node port carries a link model.
    let text = NAT
        .replace(
            "a = \"r1:0\"\nb = \"nat1:1\"",
            "a = \"r1:0\"\nb = \"nat1:1\"\ndelay = \"2ms\"\nloss = 0.1",
        )
        .replace(
            "[[switch]]",
            "[defaults.link]\nrate = \"10Gbps\"\n[[switch]]",
        );
    let loaded = Loaded::from_str(&text, "nat.toml", &[]).unwrap();
    let p = plan(&loaded.scenario, "nat", None).unwrap();
    let link = |node: usize, port: u16| {
        p.nodes[node]
            .ports
            .iter()
            .find(|x| x.id == port)
            .and_then(|x| x.link.clone())
            .map(|l| l.channel().unwrap())
    };
    for (node, port) in [(0, 1), (1, 0)] {
        let c = link(node, port).unwrap();
        assert_eq!((c.rate_bps, c.delay), (10_000_000_000, 2_000_000));
        assert_eq!(c.loss, inca_sim::link::LossModel::Bernoulli { p: 0.1 });
    }
    // A host's link: the node's end models both directions, what the host
    // sends as it arrives.
    let c = link(1, 1).unwrap();
    assert_eq!(
        (c.rate_bps, c.loss),
        (10_000_000_000, inca_sim::link::LossModel::None)
    );
    let client = p.nodes[1].ports.iter().find(|x| x.id == 1).unwrap();
    assert_eq!(client.ingress_link, client.link);
    // Between two nodes, each end models its own sending only.
    assert!(p.nodes[0].ports[1].link.is_some() && p.nodes[0].ports[1].ingress_link.is_none());
    // Without any link field anywhere, no port pays for a model.
    let plain = Loaded::from_str(NAT, "nat.toml", &[]).unwrap();
    let p = plan(&plain.scenario, "nat", None).unwrap();
    assert!(p
        .nodes
        .iter()
        .flat_map(|n| &n.ports)
        .all(|x| x.link.is_none() && x.ingress_link.is_none()));
}
