//! Unit tests of the host: configuration, schedules, distributions and
//! the frames its generators build.

use super::dist::{draw_flows, parse_prefix, wire_bits, Pace};
use super::workload::{Answer, Outstanding};
use super::*;
use inca_wire::{EthernetFrame, Ipv4Packet};
use rand::SeedableRng;
use std::collections::{BTreeMap, BTreeSet};

const MAC_A: MacAddr = [2, 0, 0, 0, 0, 1];
const MAC_B: MacAddr = [2, 0, 0, 0, 0, 2];

fn host(toml: &str) -> Result<Host, HostError> {
    Host::new(HostConfig::from_toml(toml)?, MAC_A, MAC_B, 10_000_000_000)
}

fn rng() -> DeviceRng {
    DeviceRng::seed_from_u64(7)
}

#[test]
fn every_workload_example_parses() {
    let dir = std::env::temp_dir().join(format!("inca-host-unit-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let pcap = dir.join("one.pcap");
    let mut w = inca_wire::PcapWriter::create(&pcap).unwrap();
    w.write(0, &[0u8; 60]).unwrap();
    w.finish().unwrap();
    let text = format!(
        r#"
ip = "10.0.0.1"
prefix_len = 24
gateway = "10.0.0.254"
bin = "1ms"
tcp = {{ send_buffer = 1048576 }}

[[workload]]
kind = "udp"
name = "bg"
dst = "10.0.1.1:5000"
rate = "1Gbps"
size = {{mix = [[64, 7], [570, 4], [1518, 1]]}}
start = "1ms"
stop = "11ms"
flows = 10000
src_ports = [1024, 65535]
src_prefix = "10.0.0.0/24"
zipf = 0.99

[[workload]]
kind = "pcap"
file = {pcap:?}
speedup = 2
loop = true

[[workload]]
kind = "request"
server = "10.0.1.1:7"
pps = 100000
size = {{uniform = [100, "200B"]}}
timeout = "1ms"

[[workload]]
kind = "echo"
port = 7

[[workload]]
kind = "tcp"
dst = "10.0.1.1:5001"
bytes = "1GB"

[[workload]]
kind = "tcp_sink"
port = 5001
backlog = 4
"#
    );
    let h = host(&text).unwrap();
    let names: Vec<_> = h.workload_names().collect();
    assert_eq!(
        names,
        ["bg", "pcap1", "request2", "echo3", "tcp4", "tcp_sink5"]
    );
    assert!(h.plan.notes.iter().any(|n| n.contains("raised to 66 B")));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn errors_name_the_field() {
    let cases = [
        ("ip = \"10.0.0.1\"\nbogus = 1", "bogus"),
        (
            "ip = \"10.0.0.1\"\n[[workload]]\nkind = \"udp\"\ndst = \"1.2.3.4:5\"\nrate = \"10Gbs\"",
            "workload[0] \"udp0\" (udp).rate",
        ),
        (
            "ip = \"10.0.0.1\"\n[[workload]]\nkind = \"udp\"\ndst = \"1.2.3.4:5\"\nrate = \"1G\"\nstart = \"1xs\"",
            "udp0\" (udp).start",
        ),
        ("ip = \"10.0.0.1\"\n[[workload]]\nkind = \"udp\"\ndst = \"1.2.3.4:5\"", "needs rate"),
        (
            "ip = \"10.0.0.1\"\n[[workload]]\nkind = \"udp\"\ndst = \"1.2.3.4:5\"\npps = 1\nwhat = 1",
            "what",
        ),
        (
            "ip = \"10.0.0.1\"\n[[workload]]\nkind = \"udp\"\ndst = \"1.2.3.4:5\"\npps = 1\nflows = 70000",
            "flows: 70000 distinct",
        ),
        (
            "ip = \"10.0.0.1\"\n[[workload]]\nkind = \"udp\"\ndst = \"1.2.3.4:5\"\npps = 1\nsize = {mix = []}",
            "size: mix is empty",
        ),
        (
            "ip = \"10.0.0.1\"\n[[workload]]\nkind = \"pcap\"\nfile = \"/nonexistent.pcap\"",
            "pcap0\" (pcap).file",
        ),
        ("ip = \"10.0.0.1\"\n[[workload]]\nkind = \"teleport\"", "teleport"),
    ];
    for (text, want) in cases {
        let e = host(text).expect_err(text).to_string();
        assert!(e.contains(want), "{text:?}: {e:?} lacks {want:?}");
    }
}

#[test]
fn pace_is_exact_from_the_index() {
    let p = Pace::Bits(10_000_000_000);
    // 1000-byte frames: 8192 wire bits, 819.2 ns each.
    let bits = |i: u64| u128::from(i) * wire_bits(1000);
    assert_eq!(p.offset(1, bits(1)), 819);
    assert_eq!(p.offset(5, bits(5)), 4096);
    assert_eq!(p.offset(1_000_000, bits(1_000_000)), 819_200_000);
    assert_eq!(Pace::Pps(3).offset(2, 0), 666_666_666);
    assert_eq!(Pace::Pps(3).offset(3, 0), 1_000_000_000);
}

#[test]
fn outstanding_requests_time_out_match_and_stay_bounded() {
    let mut o = Outstanding::default();
    assert_eq!(o.push(0, 4), 0);
    assert_eq!(o.push(10, 4), 0);
    assert_eq!(o.push(20, 4), 0);
    assert_eq!(o.answer(1), Answer::Matched(10));
    assert_eq!(o.answer(1), Answer::Duplicate);
    assert_eq!(o.answer(9), Answer::Unknown);
    assert_eq!(o.deadline(100), Some(100));
    assert_eq!(o.expire(100, 100), 1);
    assert_eq!(o.answer(0), Answer::Late);
    assert_eq!(o.deadline(100), Some(120));
    for t in 0..10 {
        o.push(30 + t, 4);
    }
    assert!(o.slots.len() <= 4);
    assert_eq!(o.next_seq(), 13);
}

#[test]
fn zipf_matches_its_formula_and_zero_is_uniform() {
    let z = Zipf::new(1000, 0.99).unwrap();
    let h: f64 = (1..=1000).map(|k| (k as f64).powf(-0.99)).sum();
    for k in [0usize, 1, 9, 999] {
        let want = ((k + 1) as f64).powf(-0.99) / h;
        assert!((z.probability(k) - want).abs() < 1e-12);
    }
    let u = Zipf::new(10, 0.0).unwrap();
    assert!((u.probability(3) - 0.1).abs() < 1e-12);
    assert!(Zipf::new(0, 1.0).is_none());
    assert!(Zipf::new(5, -1.0).is_none());
    assert!(Zipf::new(5, f64::NAN).is_none());
    let mut r = rng();
    assert!((0..10_000).all(|_| z.sample(&mut r) < 1000));
}

#[test]
fn size_mix_follows_its_weights() {
    let spec = SizeSpec::Mix(vec![(64.into(), 7), (570.into(), 4), (1518.into(), 1)]);
    let (d, raised) = SizeDist::resolve(&spec, "size").unwrap();
    assert!(raised);
    let mut r = rng();
    let n = 120_000;
    let mut counts = [0u32; 3];
    for _ in 0..n {
        match d.sample(&mut r) {
            66 => counts[0] += 1,
            570 => counts[1] += 1,
            1518 => counts[2] += 1,
            s => panic!("size {s}"),
        }
    }
    for (c, w) in counts.iter().zip([7.0, 4.0, 1.0]) {
        let got = *c as f64 / n as f64;
        let want = w / 12.0;
        assert!((got - want).abs() / want < 0.03, "{counts:?}");
    }
    let (u, _) = SizeDist::resolve(&SizeSpec::Uniform(100.into(), 200.into()), "size").unwrap();
    assert!((0..1000)
        .map(|_| u.sample(&mut r))
        .all(|s| (100..=200).contains(&s)));
}

#[test]
fn random_flows_are_distinct_and_in_range() {
    let mut r = rng();
    let f = draw_flows(1000, (2000, 2999), None, Ipv4Addr::new(10, 0, 0, 1), &mut r);
    assert_eq!(f.len(), 1000);
    assert_eq!(f.iter().collect::<HashSet<_>>().len(), 1000);
    assert!(f
        .iter()
        .all(|&(a, p)| a == Ipv4Addr::new(10, 0, 0, 1) && (2000..=2999).contains(&p)));
    let pre = parse_prefix("10.9.0.0/16").unwrap();
    let g = draw_flows(5000, (1, 1), Some(pre), Ipv4Addr::new(10, 0, 0, 1), &mut r);
    assert_eq!(g.iter().collect::<HashSet<_>>().len(), 5000);
    assert!(g.iter().all(|&(a, _)| a.octets()[..2] == [10, 9]));
}

#[test]
fn udp_vlan_tags_every_frame_and_keeps_its_size() {
    let text = "ip = \"10.0.0.1\"\n[[workload]]\nkind = \"udp\"\ndst = \"10.0.1.1:9\"\npps = 1000\ncount = 3\nsize = 100\nvlan = 7";
    let mut h = host(text).unwrap();
    let frames = sent_frames(&mut h);
    assert_eq!(frames.len(), 3);
    for f in &frames {
        let eth = EthernetFrame::new_checked(&f[..]).unwrap();
        assert_eq!(eth.vlan().map(|t| t.vid), Some(7));
        assert_eq!(eth.ethertype(), inca_wire::ethernet::ethertype::IPV4);
        assert_eq!(f.len(), 100);
    }
    let bad = text.replace("vlan = 7", "vlan = 4095");
    assert!(host(&bad).unwrap_err().to_string().contains("vlan"));
}

/// Runs `h` until its generators stop; returns the frames it sent.
fn sent_frames(h: &mut Host) -> Vec<Vec<u8>> {
    let (mut r, mut out, mut frames) = (rng(), Vec::new(), Vec::new());
    h.start(0, &mut r, &mut out);
    for _ in 0..100_000 {
        let timers: Vec<_> = out
            .drain(..)
            .filter_map(|o| match o {
                Output::Timer { at, token } => Some((at, token)),
                Output::Transmit { frame, .. } => {
                    frames.push(frame);
                    None
                }
                _ => None,
            })
            .collect();
        if timers.is_empty() {
            break;
        }
        for (at, token) in timers {
            h.handle(at, Input::Timer { token }, &mut r, &mut out);
        }
    }
    frames
}

#[test]
fn tcp_syns_to_drawn_destinations_reach_a_sink_as_probes() {
    let text = "ip = \"10.1.2.1\"\n[[workload]]\nkind = \"udp\"\ndst = \"192.0.2.1:5000\"\npps = 1000\ncount = 64\nsize = 66\nflows = 16\nsrc_prefix = \"10.2.0.0/28\"\nsrc_ports = [5000, 5000]\nflows_at = \"dst\"\nsrc_port = 6000\ntcp_flags = 2";
    let mut h = host(text).unwrap();
    assert!(h.plan.notes.iter().any(|n| n.contains("raised to 78 B")));
    let frames = sent_frames(&mut h);
    assert_eq!(frames.len(), 64);
    let mut dsts = HashSet::new();
    for f in &frames {
        assert_eq!(f.len(), 78);
        let ip = Ipv4Packet::new_checked(&f[14..]).unwrap();
        assert_eq!(ip.protocol(), inca_wire::ipv4::protocol::TCP);
        assert_eq!(ip.src_addr(), Ipv4Addr::new(10, 1, 2, 1));
        assert_eq!(ip.dst_addr().octets()[..3], [10, 2, 0]);
        let seg = inca_wire::TcpSegment::new_checked(ip.payload()).unwrap();
        assert_eq!(
            (seg.flags().0, seg.src_port(), seg.dst_port()),
            (2, 6000, 5000)
        );
        dsts.insert(ip.dst_addr());
    }
    assert!(dsts.len() > 8, "destinations vary: {dsts:?}");
    // A host receiving them measures their latency like UDP probes.
    let mut sink = host("ip = \"192.0.2.1\"").unwrap();
    let (mut r, mut out) = (rng(), Vec::new());
    sink.start(0, &mut r, &mut out);
    for f in frames {
        sink.handle(
            1_000_000_000,
            Input::Frame { port: 0, frame: f },
            &mut r,
            &mut out,
        );
    }
    assert_eq!(sink.stats().rx_probes, 64);
    assert_eq!(sink.stats().rx_other, 0);
    assert_eq!(sink.latency().count(), 64);
    let bad = text
        .replace("flows = 16", "flows = 1")
        .replace("flows_at = \"dst\"\n", "");
    assert!(host(&bad).unwrap_err().to_string().contains("src_port"));
}

#[test]
fn gtpu_uplink_signals_each_ue_first_then_every_nth_packet() {
    let text = "ip = \"10.1.0.1\"\n[[workload]]\nkind = \"udp\"\ndst = \"203.0.113.1:7\"\npps = 1000\ncount = 72\nsize = 102\nflows = 4\nsrc_prefix = \"10.200.0.0/30\"\nsrc_ports = [7000, 7000]\ngtpu_teid = 1000\ngtpu_sgw = \"10.255.0.1\"\ngtpc_every = 18\ngtpc_body = [\"ue\", \"teid\", \"teid\", \"enb\"]";
    let frames = sent_frames(&mut host(text).unwrap());
    assert_eq!(frames.len(), 72);
    let (mut signals, mut data) = (BTreeMap::new(), 0);
    let mut teids = BTreeMap::new();
    for (i, f) in frames.iter().enumerate() {
        let ip = Ipv4Packet::new_checked(&f[14..]).unwrap();
        assert_eq!(ip.src_addr(), Ipv4Addr::new(10, 1, 0, 1), "the eNB sends");
        let udp = UdpDatagram::new_checked(ip.payload()).unwrap();
        if udp.dst_port() == GTPC_PORT {
            // Signalling to dst's address: UE, ul TEID, dl TEID, eNB.
            assert_eq!(ip.dst_addr(), Ipv4Addr::new(203, 0, 113, 1));
            let b = udp.payload();
            let ue = Ipv4Addr::new(b[0], b[1], b[2], b[3]);
            assert_eq!(b[4..8], b[8..12]);
            assert_eq!(b[12..16], [10, 1, 0, 1]);
            let teid = u32::from_be_bytes([b[4], b[5], b[6], b[7]]);
            // The UE's first packet is its signalling.
            assert!(signals.contains_key(&ue) || !teids.contains_key(&ue), "{i}");
            *signals.entry(ue).or_insert(0) += 1;
            assert_eq!(*teids.entry(ue).or_insert(teid), teid);
            continue;
        }
        data += 1;
        assert_eq!(udp.dst_port(), encap::GTPU_PORT);
        assert_eq!(
            ip.dst_addr(),
            Ipv4Addr::new(10, 255, 0, 1),
            "to the gateway"
        );
        assert_eq!(f.len(), 102);
        let g = udp.payload();
        let teid = u32::from_be_bytes([g[4], g[5], g[6], g[7]]);
        let inner = Ipv4Packet::new_checked(&g[8..]).unwrap();
        let ue = inner.src_addr();
        assert_eq!(ue.octets()[..3], [10, 200, 0]);
        assert_eq!(inner.dst_addr(), Ipv4Addr::new(203, 0, 113, 1));
        assert_eq!(
            teids.get(&ue),
            Some(&teid),
            "data after the UE's signalling"
        );
        assert!((1000..1004).contains(&teid));
    }
    // 4 first messages plus every 18th packet (4 of 72), some of
    // which fell on a UE's first packet already.
    let total: u32 = signals.values().sum();
    assert_eq!(signals.len(), 4);
    assert!((5..=8).contains(&total), "{total} signalling messages");
    assert_eq!(data + total as usize, 72);
    // The downlink (the same tunnel back) reaches the eNB's probe
    // reader; malformed GTP-U is counted, not parsed.
    let mut enb = host("ip = \"10.1.0.1\"").unwrap();
    let (mut r, mut out) = (rng(), Vec::new());
    enb.start(0, &mut r, &mut out);
    let data_frames: Vec<_> = frames
        .iter()
        .filter(|f| f[36..38] == encap::GTPU_PORT.to_be_bytes())
        .cloned()
        .collect();
    for f in &data_frames {
        enb.handle(
            1_000_000_000,
            Input::Frame {
                port: 0,
                frame: f.clone(),
            },
            &mut r,
            &mut out,
        );
    }
    assert_eq!(enb.stats().rx_probes, data_frames.len() as u64);
    let mut bad = data_frames[0].clone();
    bad[14 + 20 + 8 + 1] = 1; // not a G-PDU
    let bad = with_udp_checksum_zero(bad);
    enb.handle(
        1_000_000_000,
        Input::Frame {
            port: 0,
            frame: bad,
        },
        &mut r,
        &mut out,
    );
    assert_eq!(enb.stats().rx_probes, data_frames.len() as u64);
    assert_eq!(enb.stats().rx_udp_plain, 1);
    // The default, inca-apps layout: version 1, create, UE, TEID, eNB; and a
    // constant word as written.
    let inca = sent_frames(
        &mut host(&text.replace("\ngtpc_body = [\"ue\", \"teid\", \"teid\", \"enb\"]", ""))
            .unwrap(),
    );
    let b = &inca[0][14 + 20 + 8..];
    assert_eq!(b[..2], [1, 1]);
    assert_eq!(b[12..16], [10, 1, 0, 1]);
    let odd = sent_frames(
        &mut host(&text.replace(
            "[\"ue\", \"teid\", \"teid\", \"enb\"]",
            "[7, \"enb\", \"ue\", 0x01020304]",
        ))
        .unwrap(),
    );
    let b = &odd[0][14 + 20 + 8..];
    assert_eq!(b[..8], [0, 0, 0, 7, 10, 1, 0, 1]);
    assert_eq!(b[12..16], [1, 2, 3, 4]);
    let bad_word = text.replace("\"teid\", \"teid\"", "\"teid\", \"imsi\"");
    let e = host(&bad_word).unwrap_err().to_string();
    assert!(e.contains("gtpc_body"), "{e}");
    // Without attach messages exactly every 18th packet signals.
    let later = sent_frames(&mut host(&format!("{text}\ngtpc_attach = false")).unwrap());
    let sig: Vec<usize> = (0..later.len())
        .filter(|&i| later[i][36..38] == GTPC_PORT.to_be_bytes())
        .collect();
    assert_eq!(sig, vec![17, 35, 53, 71]);
    // The options need the tunnel, and one tunnel at a time.
    let no_tunnel = text.replace("gtpu_teid = 1000\n", "");
    assert!(host(&no_tunnel)
        .unwrap_err()
        .to_string()
        .contains("gtpu_teid"));
    let both = format!("{text}\nvxlan_vni = 1");
    assert!(host(&both).unwrap_err().to_string().contains("vxlan_vni"));
}

/// Zeroes a frame's UDP checksum (optional in IPv4) after an edit.
fn with_udp_checksum_zero(mut f: Vec<u8>) -> Vec<u8> {
    f[14 + 20 + 6] = 0;
    f[14 + 20 + 7] = 0;
    f
}

#[test]
fn tcp_echo_answers_generated_segments_with_swapped_ends() {
    let gen = "ip = \"10.1.0.1\"\n[[workload]]\nkind = \"udp\"\ndst = \"203.0.113.1:7\"\npps = 1000\ncount = 3\nsize = 78\nsrc_port = 41000\ntcp_flags = 24";
    let frames = sent_frames(&mut host(gen).unwrap());
    for tcp in [true, false] {
        let echo =
            format!("ip = \"203.0.113.1\"\n[[workload]]\nkind = \"echo\"\nport = 7\ntcp = {tcp}");
        let mut e = host(&echo).unwrap();
        let (mut r, mut out) = (rng(), Vec::new());
        e.start(0, &mut r, &mut out);
        out.clear();
        for f in &frames {
            e.handle(
                1_000,
                Input::Frame {
                    port: 0,
                    frame: f.clone(),
                },
                &mut r,
                &mut out,
            );
        }
        let answers: Vec<Vec<u8>> = out
            .iter()
            .filter_map(|o| match o {
                Output::Transmit { frame, .. } => Some(frame.clone()),
                _ => None,
            })
            .collect();
        if !tcp {
            assert!(answers.is_empty(), "UDP-only echo leaves TCP alone");
            continue;
        }
        assert_eq!(answers.len(), 3);
        let ip = Ipv4Packet::new_checked(&answers[0][14..]).unwrap();
        assert_eq!(ip.dst_addr(), Ipv4Addr::new(10, 1, 0, 1));
        let seg = inca_wire::TcpSegment::new_checked(ip.payload()).unwrap();
        assert_eq!(
            (seg.src_port(), seg.dst_port(), seg.flags().0),
            (7, 41000, 0x18)
        );
        // Back at the sender the answer is a probe: a round trip.
        let mut g = host("ip = \"10.1.0.1\"").unwrap();
        g.start(0, &mut r, &mut out);
        g.handle(
            5_000,
            Input::Frame {
                port: 0,
                frame: answers[0].clone(),
            },
            &mut r,
            &mut out,
        );
        assert_eq!(g.stats().rx_probes, 1);
    }
}

#[test]
fn vxlan_frames_carry_the_vni_and_drawn_inner_destinations() {
    let text = "ip = \"10.1.1.1\"\n[[workload]]\nkind = \"udp\"\ndst = \"10.255.0.1:4789\"\npps = 1000\ncount = 32\nsize = 66\nflows = 16\nsrc_prefix = \"10.128.0.0/28\"\nsrc_ports = [5000, 5000]\nflows_at = \"dst\"\nvxlan_vni = 1";
    let frames = sent_frames(&mut host(text).unwrap());
    assert_eq!(frames.len(), 32);
    let mut sink = host("ip = \"192.0.2.1\"").unwrap();
    let (mut r, mut out) = (rng(), Vec::new());
    sink.start(0, &mut r, &mut out);
    for f in frames {
        assert_eq!(f.len(), 116);
        // As the VPN gateway parses it: VNI 1, inner destination drawn.
        let m = vxlan_vni_and_inner_dst(&f);
        assert_eq!(m.0, 1);
        assert_eq!(m.1[..3], [10, 128, 0]);
        sink.handle(
            1_000_000_000,
            Input::Frame { port: 0, frame: f },
            &mut r,
            &mut out,
        );
    }
    assert_eq!(sink.stats().rx_probes, 32);
    assert_eq!(sink.stats().rx_udp_plain, 0);
    let bad = text.replace("vxlan_vni = 1", "vxlan_vni = 16777216");
    assert!(host(&bad).unwrap_err().to_string().contains("vxlan_vni"));
    let bad = text.replace("flows = 16\n", "").replace(
        "src_prefix = \"10.128.0.0/28\"\nsrc_ports = [5000, 5000]\n",
        "",
    );
    assert!(host(&bad).unwrap_err().to_string().contains("flows_at"));
}

/// (VNI, inner IPv4 destination) of an untagged VXLAN frame.
fn vxlan_vni_and_inner_dst(f: &[u8]) -> (u32, [u8; 4]) {
    let vx = 14 + 20 + 8;
    let vni = u32::from_be_bytes([0, f[vx + 4], f[vx + 5], f[vx + 6]]);
    let ip = Ipv4Packet::new_checked(&f[vx + 8 + 14..]).unwrap();
    (vni, ip.dst_addr().octets())
}

#[test]
fn garbage_never_panics() {
    let mut h = host("ip = \"10.0.0.1\"\n[[workload]]\nkind = \"echo\"\nport = 7").unwrap();
    let mut r = rng();
    let mut out = Vec::new();
    h.start(0, &mut r, &mut out);
    for i in 0..20_000u64 {
        let len = r.gen_range(0..200);
        let mut frame: Vec<u8> = (0..len).map(|_| r.gen()).collect();
        // Make a fair share look like IPv4/UDP so deeper parsers run.
        if len > 14 && i % 2 == 0 {
            frame[12] = 0x08;
            frame[13] = 0x00;
            frame[14] = 0x45;
        }
        h.handle(i, Input::Frame { port: 0, frame }, &mut r, &mut out);
        out.clear();
    }
    assert_eq!(h.stats().rx_packets, 20_000);
    assert!(h.stats().rx_malformed > 5_000);
}

#[test]
fn flows_above_the_table_limit_are_a_permutation_in_constant_memory() {
    use super::dist::{FlowSet, FLOW_TABLE_MAX};
    let mut r = rng();
    let pre = parse_prefix("10.0.0.0/8").unwrap();
    let n = 10_000_000;
    let f = FlowSet::draw(
        n,
        (1024, 65535),
        Some(pre),
        Ipv4Addr::new(10, 0, 0, 1),
        &mut r,
    );
    assert_eq!(f.heap_bytes(), 0);
    assert!(n > FLOW_TABLE_MAX);
    // Distinct (a bijection of the space restricted to 0..n): check a
    // stretch and a stride across the range, and all in range.
    let mut seen = HashSet::new();
    for i in (0..200_000).chain((0..n).step_by(97)) {
        let (a, p) = f.get(i).unwrap();
        assert_eq!(a.octets()[0], 10);
        assert!(p >= 1024);
        seen.insert((i, a, p));
    }
    let points: HashSet<_> = seen.iter().map(|&(_, a, p)| (a, p)).collect();
    let idx: HashSet<_> = seen.iter().map(|&(i, _, _)| i).collect();
    assert_eq!(points.len(), idx.len());
    // Small counts keep the drawn table (scenarios' draws unchanged).
    let t = FlowSet::draw(10, (1, 100), None, Ipv4Addr::new(10, 0, 0, 1), &mut r);
    assert!(matches!(t, FlowSet::Table(ref v) if v.len() == 10));
}

/// (source, source port, VLAN id, probe tx_time) of each sent frame.
fn flows_of(frames: &[Vec<u8>]) -> Vec<(Ipv4Addr, u16, Option<u16>, Nanos)> {
    frames
        .iter()
        .map(|f| {
            let eth = EthernetFrame::new_checked(&f[..]).unwrap();
            let vid = eth.vlan().map(|t| t.vid);
            let ip = Ipv4Packet::new_checked(&f[if vid.is_some() { 18 } else { 14 }..]).unwrap();
            let udp = inca_wire::UdpDatagram::new_checked(ip.payload()).unwrap();
            let probe = Probe::parse(udp.payload()).unwrap();
            (ip.src_addr(), udp.src_port(), vid, probe.tx_time)
        })
        .collect()
}

#[test]
fn tenant_vlan_is_stable_per_flow_and_splits_flows_evenly() {
    println!("seed 7 (the unit tests' device RNG)");
    let text = "ip = \"10.0.0.1\"\n[[workload]]\nkind = \"udp\"\ndst = \"10.0.1.1:9\"\npps = 1000000\ncount = 40000\nsize = 100\nflows = 4000\nsrc_prefix = \"10.8.0.0/16\"\ntenant = { count = 8, base = 100 }";
    let frames = sent_frames(&mut host(text).unwrap());
    assert_eq!(frames.len(), 40_000);
    let mut tenant = BTreeMap::new();
    for (src, sport, vid, _) in flows_of(&frames) {
        let vid = vid.expect("every frame tagged");
        assert!((100..108).contains(&vid));
        // Stable: a flow always has the same tenant.
        assert_eq!(*tenant.entry((src, sport)).or_insert(vid), vid);
    }
    // Near uniform over the distinct flows seen: chi-square, 7 degrees of
    // freedom (99.9 % quantile 24.3).
    let mut per = [0u32; 8];
    for vid in tenant.values() {
        per[usize::from(vid - 100)] += 1;
    }
    let e = tenant.len() as f64 / 8.0;
    let chi2: f64 = per.iter().map(|&c| (f64::from(c) - e).powi(2) / e).sum();
    println!("flows {} per tenant {per:?} chi2 {chi2:.1}", tenant.len());
    assert!(tenant.len() > 3900);
    assert!(chi2 < 24.3, "chi2 {chi2}");
    for bad in ["vlan = 7", "tenant = { count = 0 }"] {
        let t = text.replace("tenant = { count = 8, base = 100 }", bad);
        let t = if bad.starts_with("vlan") {
            format!("{t}\ntenant = {{ count = 2 }}")
        } else {
            t
        };
        assert!(
            host(&t).unwrap_err().to_string().contains("tenant"),
            "{bad}"
        );
    }
}

#[test]
fn popularity_rotates_at_period_boundaries_and_is_stable_within() {
    println!("seed 7 (the unit tests' device RNG)");
    // 4 periods of 2.5 ms at 1 Mpps: 2500 packets each, Zipf 1.2 over 1000
    // flows (rank 1 ~19 %, rank 2 ~8 %, rank 3 ~5 %).
    let text = "ip = \"10.0.0.1\"\n[[workload]]\nkind = \"udp\"\ndst = \"10.0.1.1:9\"\npps = 1000000\nstop = \"10ms\"\nsize = 100\nflows = 1000\nzipf = 1.2\nrotate_every = \"2500us\"";
    let frames = sent_frames(&mut host(text).unwrap());
    assert_eq!(frames.len(), 10_000);
    let sent = flows_of(&frames);
    // The two heaviest flows of packets in [from, to).
    let top2 = |from: Nanos, to: Nanos| {
        let mut c = BTreeMap::new();
        for &(src, sport, _, t) in &sent {
            if (from..to).contains(&t) {
                *c.entry((src, sport)).or_insert(0u32) += 1;
            }
        }
        let mut v: Vec<_> = c.into_iter().collect();
        v.sort_by_key(|&(f, n)| (std::cmp::Reverse(n), f));
        v.iter().take(2).map(|&(f, _)| f).collect::<BTreeSet<_>>()
    };
    let period = 2_500_000;
    let mut prev = None;
    for e in 0..4u64 {
        let (a, b) = (e * period, (e + 1) * period);
        let (first, second) = (top2(a, a + period / 2), top2(a + period / 2, b));
        println!("period {e}: {first:?} / {second:?}");
        assert_eq!(first, second, "stable within period {e}");
        if let Some(p) = prev.replace(first.clone()) {
            assert!(p != first, "rotated at the start of period {e}");
        }
    }
    let bad = text.replace("zipf = 1.2\n", "");
    assert!(host(&bad).unwrap_err().to_string().contains("rotate_every"));
}

#[test]
fn a_udp_workload_over_ten_million_flows_runs_with_tenants_and_rotation() {
    let text = "ip = \"10.0.0.1\"\n[[workload]]\nkind = \"udp\"\ndst = \"10.0.1.1:9\"\npps = 1000000\ncount = 5000\nsize = 100\nflows = 10000000\nsrc_prefix = \"10.0.0.0/8\"\nzipf = 0.99\nrotate_every = \"1ms\"\ntenant = { count = 4 }";
    let sent = flows_of(&sent_frames(&mut host(text).unwrap()));
    assert_eq!(sent.len(), 5000);
    assert!(sent
        .iter()
        .all(|&(src, _, vid, _)| src.octets()[0] == 10 && (1..=4).contains(&vid.unwrap())));
    // Skewed: far fewer distinct flows than packets.
    let distinct: HashSet<_> = sent.iter().map(|&(s, p, _, _)| (s, p)).collect();
    assert!(distinct.len() < 4000, "{}", distinct.len());
    let gtpc = text.replace("tenant = { count = 4 }", "gtpu_teid = 1\ngtpc_every = 5");
    assert!(host(&gtpc).unwrap_err().to_string().contains("gtpc_every"));
}

/// Frames a host sends when told `changes` at their times (timers and
/// changes in time order).
fn sent_frames_changed(h: &mut Host, changes: &[(Nanos, ControlMessage)]) -> Vec<Vec<u8>> {
    let (mut r, mut out, mut frames) = (rng(), Vec::new(), Vec::new());
    let mut due: std::collections::BinaryHeap<std::cmp::Reverse<(Nanos, usize, u64)>> =
        Default::default();
    for (i, (t, _)) in changes.iter().enumerate() {
        due.push(std::cmp::Reverse((*t, 1, i as u64)));
    }
    h.start(0, &mut r, &mut out);
    for _ in 0..1_000_000 {
        for o in out.drain(..) {
            match o {
                Output::Timer { at, token } => due.push(std::cmp::Reverse((at, 0, token))),
                Output::Transmit { frame, .. } => frames.push(frame),
                _ => {}
            }
        }
        let Some(std::cmp::Reverse((at, what, x))) = due.pop() else {
            break;
        };
        let input = match what {
            0 => Input::Timer { token: x },
            _ => Input::Control(changes[x as usize].1.clone()),
        };
        h.handle(at, input, &mut r, &mut out);
    }
    frames
}

#[test]
fn a_shift_moves_the_hot_flows_and_a_storm_speeds_up_and_flattens() {
    use super::control::WorkloadChange;
    println!("seed 7 (the unit tests' device RNG)");
    // 100 kpps for 30 ms over 1,000 flows, Zipf 1.2 (rank 1 ~19 %). A shift
    // at 10 ms; a storm x4 from 20 to 25 ms.
    let text = "ip = \"10.0.0.1\"\n[[workload]]\nname = \"z\"\nkind = \"udp\"\ndst = \"10.0.1.1:9\"\npps = 100000\nstop = \"30ms\"\nsize = 100\nflows = 1000\nzipf = 1.2";
    let ms = 1_000_000;
    let changes = [
        (10 * ms, WorkloadChange::Shift.message("z")),
        (20 * ms, WorkloadChange::Storm { factor: 4 }.message("z")),
        (25 * ms, WorkloadChange::Calm.message("z")),
        (26 * ms, WorkloadChange::Shift.message("nobody")),
    ];
    let mut h = host(text).unwrap();
    let sent = flows_of(&sent_frames_changed(&mut h, &changes));
    assert_eq!(h.stats().workload_controls, 3);
    assert_eq!(
        h.stats().control_ignored,
        1,
        "an unknown workload is ignored"
    );
    let in_window = |a: Nanos, b: Nanos| sent.iter().filter(move |f| (a..b).contains(&f.3));
    let top = |a: Nanos, b: Nanos| {
        let mut c = BTreeMap::new();
        for f in in_window(a, b) {
            *c.entry((f.0, f.1)).or_insert(0u32) += 1;
        }
        let mut v: Vec<_> = c.into_iter().collect();
        v.sort_by_key(|&(f, n)| (std::cmp::Reverse(n), f));
        v
    };
    let (before, after) = (top(0, 10 * ms), top(10 * ms, 20 * ms));
    println!("top before {:?}, after {:?}", &before[..2], &after[..2]);
    assert_ne!(
        before[0].0, after[0].0,
        "the shift changed the hottest flow"
    );
    // Rates: 1,000 packets per 10 ms before; 4x in the storm; back after.
    let n = |a, b| in_window(a, b).count();
    // (The packet due at a change's instant may fall on either side.)
    let near = |got: usize, want: usize| got.abs_diff(want) <= 1;
    assert_eq!(n(0, 10 * ms), 1000);
    assert!(
        near(n(20 * ms, 25 * ms), 2000),
        "x4 for 5 ms: {}",
        n(20 * ms, 25 * ms)
    );
    assert!(near(n(25 * ms, 30 * ms), 500), "{}", n(25 * ms, 30 * ms));
    // In the storm every flow is about as hot: the hottest has a few
    // packets of 2,000, not ~19 %.
    let storm = top(20 * ms, 25 * ms);
    assert!(storm[0].1 < 20, "storm's hottest flow: {}", storm[0].1);
    assert!(after[0].1 > 100, "Zipf's hottest flow: {}", after[0].1);
    // The shift outlives the storm: the hottest after it is the shifted one.
    assert_eq!(top(25 * ms, 30 * ms)[0].0, after[0].0);
    // Shifting a workload without Zipf is refused (counted as ignored).
    let plain = text.replace("zipf = 1.2", "");
    let mut h = host(&plain).unwrap();
    sent_frames_changed(&mut h, &changes[..1]);
    assert_eq!(h.stats().control_ignored, 1);
}
