//! The multi-core server device on its own (a harness drives it): latency
//! as the sum of its parts, RSS affinity and spread, bounded rings, and the
//! PCIe bound on throughput.

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;

use inca_server::{
    CoreCosts, MultiCoreServer, NfOutput, NicConfig, PcieConfig, PortMacs, ServerConfig, SoftwareNf,
};
use inca_switch::device::PortId;
use inca_switch::harness::Harness;
use inca_wire::{build_udp_frame, Endpoints};

const SEED: u64 = 15;

/// Forwards port 0 to port 1 and remembers which cores saw each source
/// port.
#[derive(Debug, Default)]
struct Forward {
    cores_of: BTreeMap<u16, BTreeSet<usize>>,
}

impl SoftwareNf for Forward {
    fn name(&self) -> &str {
        "forward"
    }
    fn process(&mut self, core: usize, _port: PortId, frame: Vec<u8>, out: &mut Vec<NfOutput>) {
        let sport = u16::from_be_bytes([frame[34], frame[35]]);
        self.cores_of.entry(sport).or_default().insert(core);
        out.push((1, frame));
    }
    fn counters(&self) -> Vec<(String, u64)> {
        vec![("flows".into(), self.cores_of.len() as u64)]
    }
    fn reset(&mut self) {
        self.cores_of.clear();
    }
}

fn frame(sport: u16, len: usize) -> Vec<u8> {
    let ep = Endpoints::new(
        [2, 0, 0, 0, 0, 1],
        Ipv4Addr::new(10, 0, 0, 1),
        [2, 0, 0, 0, 0, 2],
        Ipv4Addr::new(10, 0, 1, 1),
    );
    let payload = vec![0u8; len - 42];
    build_udp_frame(&ep, sport, 9, &payload, false).unwrap()
}

fn server(config: ServerConfig) -> Harness<MultiCoreServer<Forward>> {
    let port = |i: u8| PortMacs {
        mac: [2, 0, 0, 0, 9, i],
        neighbour: [2, 0, 0, 0, 8, i],
    };
    let s = MultiCoreServer::new(config, vec![port(0), port(1)], Forward::default()).unwrap();
    Harness::new(s, SEED)
}

#[test]
fn low_load_latency_is_the_sum_of_dma_cpu_and_doorbell() {
    println!("seed {SEED}");
    let config = ServerConfig {
        cores: 2,
        costs: CoreCosts {
            fixed_ns: 700,
            per_byte_ps: 500,
        },
        ..ServerConfig::default()
    };
    let mut h = server(config.clone());
    // A first frame pays the batched transfers (descriptor prefetch, tail
    // update, doorbell bytes); the second, long after, pays only its own.
    h.send(1_000, 0, frame(7, 100));
    h.send(100_000, 0, frame(7, 100));
    h.advance_to(200_000);
    assert_eq!(h.transmitted.len(), 2);
    let t = &h.transmitted[1];
    assert_eq!(t.port, 1);
    assert_eq!(&t.frame[0..12], &[2, 0, 0, 0, 8, 1, 2, 0, 0, 0, 9, 1]);
    // The parts, from the defaults' inputs (PCIe 2.0 x8: 4 bytes per ns,
    // 24 B per TLP, MPS 256, MRRS 512; reads 500 ns, writes 250 ns):
    let ser = |bytes: u64| bytes / 4;
    let rx_dma = ser(100 + 24) + ser(16 + 24) + 250; // payload, descriptor
    let cpu = 700 + 100 * 500 / 1000;
    let doorbell = 250;
    let tx_desc = ser(24) + 500 + ser(16 + 24);
    let tx_payload = ser(24) + 500 + ser(100 + 24);
    let expected = rx_dma + cpu + doorbell + tx_desc + tx_payload;
    assert_eq!(
        t.at - 100_000,
        expected,
        "one frame's time through the server"
    );
}

#[test]
fn rss_keeps_a_flow_on_one_core_and_spreads_flows() {
    println!("seed {SEED}");
    let mut h = server(ServerConfig {
        cores: 4,
        ..ServerConfig::default()
    });
    let mut t = 0;
    for round in 0..20 {
        for sport in 1000..1200u16 {
            t += 1_000;
            let _ = round;
            h.send(t, 0, frame(sport, 64));
        }
    }
    h.advance_to(t + 1_000_000);
    let nf = h.device.nf();
    assert!(
        nf.cores_of.values().all(|c| c.len() == 1),
        "a flow stayed on one core"
    );
    let per_core = h.device.core_stats();
    let total: u64 = per_core.iter().map(|c| c.packets).sum();
    assert_eq!(total, 4_000);
    for (i, c) in per_core.iter().enumerate() {
        // 200 flows over 4 cores: each gets a fair share, give or take.
        assert!(c.packets >= 500 && c.packets <= 1_500, "core {i}: {c:?}");
    }
}

#[test]
fn a_full_receive_ring_drops_and_counts() {
    println!("seed {SEED}");
    let mut h = server(ServerConfig {
        cores: 1,
        costs: CoreCosts {
            fixed_ns: 1_000_000,
            per_byte_ps: 0,
        },
        nic: NicConfig {
            rx_ring: 4,
            ..NicConfig::default()
        },
        ..ServerConfig::default()
    });
    for i in 0..20 {
        h.send(1_000, 0, frame(100 + i, 64));
    }
    h.advance_to(10_000_000);
    let c = h.device.core_stats()[0];
    assert_eq!((c.packets, c.rx_ring_drops), (4, 16));
    assert_eq!(h.transmitted.len(), 4);
    let counters = h.device.counters();
    assert_eq!(counters["rx_ring_drops"], 16);
    assert_eq!(counters["nf_flows"], 4);
}

#[test]
fn pcie_bounds_small_frame_throughput_below_line_rate() {
    println!("seed {SEED}");
    // 100 GbE on PCIe 2.0 x8: 64-byte frames need more PCIe bytes per
    // frame than the link carries at line rate, so PCIe is the bound.
    let nic = NicConfig {
        line_rate_gbps: 100.0,
        pcie: PcieConfig::default(),
        ..NicConfig::default()
    };
    let mut h = server(ServerConfig {
        cores: 8,
        costs: CoreCosts {
            fixed_ns: 0,
            per_byte_ps: 0,
        },
        nic: nic.clone(),
        ..ServerConfig::default()
    });
    // Offered: one 64 B frame every 7 ns (143 Mpps, about line rate) for
    // 200 us; the server runs until it has sent everything it admitted.
    let end = 200_000u64;
    let (mut t, mut sport) = (0u64, 0u16);
    while t < end {
        sport = sport.wrapping_add(1);
        h.send(t, 0, frame(sport, 64));
        t += 7;
    }
    h.advance_to(end + 10_000_000);
    let tx = h.device.nic_stats().tx_frames;
    assert_eq!(tx, h.transmitted.len() as u64);
    let last = h.transmitted.last().unwrap().at;
    // PCIe bytes per frame device -> host, from the model's inputs:
    // payload write + descriptor write-back, a prefetch request per 8
    // frames, the two transmit read requests, a write-back per 32.
    let up = (64 + 24) as f64 + 40.0 + 24.0 / 8.0 + 24.0 + 24.0 + 40.0 / 32.0;
    let bound_pps = 32e9 / 8.0 / up;
    let measured_pps = tx as f64 / last as f64 * 1e9;
    println!("measured {measured_pps:.0} pps, PCIe bound {bound_pps:.0} pps");
    assert!(
        (measured_pps - bound_pps).abs() / bound_pps < 0.03,
        "throughput {measured_pps:.0} pps is PCIe's bound {bound_pps:.0}"
    );
    assert!(measured_pps < 0.2 * 100e9 / ((64 + 24) * 8) as f64);
    let c = h.device.counters();
    assert!(
        c["rx_buffer_drops"] + c["rx_ring_drops"] > 0,
        "the excess was dropped"
    );
    assert_eq!(
        c["rx_frames"],
        tx + c["rx_buffer_drops"] + c["rx_ring_drops"],
        "every frame is sent or counted"
    );
}

#[test]
fn a_restart_loses_frames_in_flight_and_keeps_counters() {
    println!("seed {SEED}");
    let mut h = server(ServerConfig {
        cores: 2,
        ..ServerConfig::default()
    });
    for i in 0..50 {
        h.send(1_000 + i * 10, 0, frame(i as u16, 64));
    }
    // Mid-flight: some frames are in the NIC, some in the cores' queues.
    h.restart(1_500);
    let before = h.transmitted.len();
    for i in 0..10 {
        h.send(100_000 + i * 1_000, 0, frame(500 + i as u16, 64));
    }
    h.advance_to(1_000_000);
    let c = h.device.counters();
    assert_eq!(c["rx_frames"], 60);
    assert_eq!(
        h.transmitted.len() - before,
        10,
        "the restarted server forwards again"
    );
    assert!(before < 50, "frames in flight at the crash are lost");
    assert_eq!(c["nf_flows"], 10, "the NF lost its state");
    let times: Vec<u64> = h.transmitted.iter().map(|t| t.at).collect();
    assert!(times.windows(2).all(|w| w[0] <= w[1]));
}

/// Counts housekeeping calls, sends a frame from each, and remembers the
/// time it was handed with each frame.
#[derive(Debug, Default)]
struct Ticker {
    calls: Vec<u64>,
    seen_at: Vec<u64>,
}

impl SoftwareNf for Ticker {
    fn name(&self) -> &str {
        "ticker"
    }
    fn process(&mut self, _core: usize, _port: PortId, _frame: Vec<u8>, _out: &mut Vec<NfOutput>) {
        unreachable!("the server calls process_at");
    }
    fn process_at(
        &mut self,
        now: u64,
        _core: usize,
        _port: PortId,
        frame: Vec<u8>,
        out: &mut Vec<NfOutput>,
    ) {
        self.seen_at.push(now);
        out.push((1, frame));
    }
    fn housekeeping_interval(&self) -> Option<u64> {
        Some(1_000_000)
    }
    fn housekeeping(&mut self, now: u64, out: &mut Vec<NfOutput>) {
        self.calls.push(now);
        out.push((0, frame(4242, 64)));
    }
    fn counters(&self) -> Vec<(String, u64)> {
        vec![("housekeeping".into(), self.calls.len() as u64)]
    }
    fn reset(&mut self) {
        self.calls.clear();
    }
}

#[test]
fn housekeeping_runs_every_interval_from_start_and_after_a_restart() {
    println!("seed {SEED}");
    let port = |i: u8| PortMacs {
        mac: [2, 0, 0, 0, 9, i],
        neighbour: [2, 0, 0, 0, 8, i],
    };
    let s = MultiCoreServer::new(
        ServerConfig {
            cores: 2,
            ..ServerConfig::default()
        },
        vec![port(0), port(1)],
        Ticker::default(),
    )
    .unwrap();
    let mut h = Harness::new(s, SEED);
    h.send(2_500_000, 0, frame(7, 100));
    h.advance_to(5_500_000);
    let nf = h.device.nf();
    assert_eq!(
        nf.calls,
        vec![1_000_000, 2_000_000, 3_000_000, 4_000_000, 5_000_000]
    );
    // The core took the frame after its RX DMA, not at its arrival.
    assert_eq!(nf.seen_at.len(), 1);
    assert!(nf.seen_at[0] > 2_500_000 && nf.seen_at[0] < 2_510_000);
    // Each housekeeping frame left on port 0 after its call, through the
    // transmit DMA (later than the call, within microseconds).
    let sent: Vec<_> = h.transmitted.iter().filter(|t| t.port == 0).collect();
    assert_eq!(sent.len(), 5);
    for (t, call) in sent.iter().zip(&h.device.nf().calls) {
        assert!(
            t.at > *call && t.at < call + 10_000,
            "{} after {call}",
            t.at
        );
        assert_eq!(
            &t.frame[0..6],
            &[2, 0, 0, 0, 8, 0],
            "MACs set as for frames"
        );
    }
    assert_eq!(h.transmitted.iter().filter(|t| t.port == 1).count(), 1);
    assert_eq!(h.device.counters()["nf_housekeeping"], 5);
    // A restart forgets the schedule and starts it again from the restart.
    h.restart(5_700_000);
    h.advance_to(8_000_000);
    assert_eq!(h.device.nf().calls, vec![6_700_000, 7_700_000]);
}

#[test]
fn a_zero_housekeeping_interval_is_refused() {
    #[derive(Debug)]
    struct Zero;
    impl SoftwareNf for Zero {
        fn name(&self) -> &str {
            "zero"
        }
        fn process(&mut self, _: usize, _: PortId, _: Vec<u8>, _: &mut Vec<NfOutput>) {}
        fn housekeeping_interval(&self) -> Option<u64> {
            Some(0)
        }
        fn counters(&self) -> Vec<(String, u64)> {
            Vec::new()
        }
        fn reset(&mut self) {}
    }
    let port = PortMacs {
        mac: [2; 6],
        neighbour: [4; 6],
    };
    assert!(MultiCoreServer::new(ServerConfig::default(), vec![port], Zero).is_err());
}

/// Forwards port 0 to port 1; a frame whose UDP source port is odd costs
/// `extra` ns of CPU beyond the per-frame cost (a miss that allocates,
/// say), reported once per frame.
#[derive(Debug, Default)]
struct Priced {
    extra: u64,
    pending: u64,
    asked: u64,
}

impl SoftwareNf for Priced {
    fn name(&self) -> &str {
        "priced"
    }
    fn process(&mut self, _core: usize, _port: PortId, frame: Vec<u8>, out: &mut Vec<NfOutput>) {
        let sport = u16::from_be_bytes([frame[34], frame[35]]);
        if sport % 2 == 1 {
            self.pending += self.extra;
        }
        out.push((1, frame));
    }
    fn take_extra_cpu_ns(&mut self) -> u64 {
        self.asked += 1;
        std::mem::take(&mut self.pending)
    }
    fn counters(&self) -> Vec<(String, u64)> {
        vec![("asked".into(), self.asked)]
    }
    fn reset(&mut self) {
        self.pending = 0;
    }
}

#[test]
fn extra_cpu_an_nf_reports_is_charged_to_that_frame_alone() {
    println!("seed {SEED}");
    let port = |i: u8| PortMacs {
        mac: [2, 0, 0, 0, 9, i],
        neighbour: [2, 0, 0, 0, 8, i],
    };
    let config = ServerConfig {
        cores: 1,
        costs: CoreCosts {
            fixed_ns: 400,
            per_byte_ps: 0,
        },
        ..ServerConfig::default()
    };
    let nf = Priced {
        extra: 500,
        ..Priced::default()
    };
    let s = MultiCoreServer::new(config, vec![port(0), port(1)], nf).unwrap();
    let mut h = Harness::new(s, SEED);
    // Lone frames far apart: even, even, odd, even. Each one's time through
    // the server is the same but for the odd one's 500 ns (and the first
    // one's, which pays the batched PCIe transfers).
    for (i, sport) in [2u16, 4, 3, 6].into_iter().enumerate() {
        h.send(100_000 * (i as u64 + 1), 0, frame(sport, 100));
    }
    h.advance_to(1_000_000);
    let took: Vec<u64> = h
        .transmitted
        .iter()
        .enumerate()
        .map(|(i, t)| t.at - 100_000 * (i as u64 + 1))
        .collect();
    assert_eq!(took.len(), 4);
    assert_eq!(took[2], took[1] + 500, "{took:?}");
    assert_eq!(took[3], took[1], "{took:?}");
    let core = h.device.core_stats()[0];
    assert_eq!(
        (core.packets, core.busy_ns),
        (4, 4 * 400 + 500),
        "busy time holds the extra"
    );
    assert_eq!(h.device.counters()["nf_asked"], 4, "asked once a frame");
    // Back to back on one core, the odd frame's extra time delays the
    // frame behind it by as much.
    h.send(2_000_000, 0, frame(5, 100));
    h.send(2_000_000, 0, frame(6, 100));
    h.advance_to(3_000_000);
    let n = h.transmitted.len();
    let (first, second) = (h.transmitted[n - 2].at, h.transmitted[n - 1].at);
    assert_eq!(first - 2_000_000, took[2], "the odd one as when alone");
    assert_eq!(second - first, 400, "the even one right after it");
    assert!(
        second - 2_000_000 >= took[1] + 500 + 400,
        "the even one waited out the odd one's 400 + 500 ns of CPU"
    );
}

#[test]
fn a_late_wake_never_sends_in_the_past() {
    // Live, a timer can fire late: the steps due meanwhile run at their
    // own times, but what they send leaves no earlier than the call.
    use inca_switch::device::{device_rng, Device, Input, Output};
    println!("seed {SEED}");
    let port = |i: u8| PortMacs {
        mac: [2, 0, 0, 0, 9, i],
        neighbour: [2, 0, 0, 0, 8, i],
    };
    let mut s = MultiCoreServer::new(
        ServerConfig::default(),
        vec![port(0), port(1)],
        Forward::default(),
    )
    .unwrap();
    let mut rng = device_rng(SEED, 0);
    let mut out = Vec::new();
    s.start(0, &mut rng, &mut out);
    s.handle(
        1_000,
        Input::Frame {
            port: 0,
            frame: frame(7, 100),
        },
        &mut rng,
        &mut out,
    );
    assert!(
        out.iter().all(|o| !matches!(o, Output::Transmit { .. })),
        "nothing leaves at once"
    );
    // The wake comes 1 ms late; every step has long been due.
    let late = 1_000_000;
    let mut out = Vec::new();
    s.handle(
        late,
        Input::Timer {
            token: inca_server::multicore::WAKE,
        },
        &mut rng,
        &mut out,
    );
    let sent: Vec<u64> = out
        .iter()
        .filter_map(|o| match o {
            Output::Transmit { at, .. } => Some(*at),
            _ => None,
        })
        .collect();
    assert_eq!(sent.len(), 1, "{out:?}");
    assert!(sent.iter().all(|&at| at >= late), "{sent:?}");
}
