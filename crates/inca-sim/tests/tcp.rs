//! Two `TcpStack`s connected by a tiny test-only wire, in virtual time.
//!
//! The wire is deliberately simple (the simulator has its own link model):
//! each direction is a FIFO with a rate, a propagation delay and a byte-bounded
//! queue; a packet that does not fit is dropped (tail drop), and during an
//! outage everything offered is dropped.

use std::collections::VecDeque;
use std::net::Ipv4Addr;

use inca_sim::tcp::{FlowStats, Outcome, TcpConfig, TcpStack};
use inca_switch::device::{Nanos, MICROS, MILLIS, SECONDS};

const A: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const B: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
const GW: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 254);
const PORT: u16 = 5201;
/// Ethernet header + FCS + preamble + inter-frame gap: what each IP packet
/// costs on the wire beyond its own bytes, so "link rate" means what it does on
/// a real Ethernet link.
const ETHERNET_OVERHEAD: usize = 14 + 4 + 8 + 12;

/// One direction of a link.
struct Link {
    rate_bps: u64,
    delay: Nanos,
    queue_bytes: usize,
    /// When the transmitter finishes the last accepted packet.
    busy_until: Nanos,
    /// Accepted packets not yet fully serialized: (end of transmission, bytes).
    queued: VecDeque<(Nanos, usize)>,
    queued_total: usize,
    /// Packets on their way: (arrival time, packet); arrival times ascend.
    in_flight: VecDeque<(Nanos, Vec<u8>)>,
    /// Everything offered in [start, end) is dropped.
    outages: Vec<(Nanos, Nanos)>,
    dropped: u64,
}

impl Link {
    fn new(rate_bps: u64, delay: Nanos, queue_bytes: usize) -> Self {
        Link {
            rate_bps,
            delay,
            queue_bytes,
            busy_until: 0,
            queued: VecDeque::new(),
            queued_total: 0,
            in_flight: VecDeque::new(),
            outages: Vec::new(),
            dropped: 0,
        }
    }

    fn offer(&mut self, now: Nanos, packet: Vec<u8>) {
        while let Some(&(end, bytes)) = self.queued.front() {
            if end > now {
                break;
            }
            self.queued.pop_front();
            self.queued_total -= bytes;
        }
        let wire_bytes = packet.len() + ETHERNET_OVERHEAD;
        let down = self.outages.iter().any(|&(s, e)| s <= now && now < e);
        if down || self.queued_total + wire_bytes > self.queue_bytes {
            self.dropped += 1;
            return;
        }
        let serialize = (wire_bytes as u64 * 8 * SECONDS).div_ceil(self.rate_bps);
        let end = self.busy_until.max(now) + serialize;
        self.busy_until = end;
        self.queued.push_back((end, wire_bytes));
        self.queued_total += wire_bytes;
        self.in_flight.push_back((end + self.delay, packet));
    }

    fn next_arrival(&self) -> Option<Nanos> {
        self.in_flight.front().map(|&(t, _)| t)
    }
}

/// Host `a` (the sender) and host `b` (the receiver) and the link between them.
struct Net {
    a: TcpStack,
    b: TcpStack,
    ab: Link,
    ba: Link,
    now: Nanos,
    /// Every packet put on the wire: (time, from a?, bytes).
    trace: Vec<(Nanos, bool, Vec<u8>)>,
    record: bool,
}

impl Net {
    fn new(rate_bps: u64, delay: Nanos, queue_bytes: usize, config: TcpConfig) -> Self {
        Net {
            a: TcpStack::new(A, 24, GW, config.clone()),
            b: TcpStack::new(B, 24, GW, config),
            ab: Link::new(rate_bps, delay, queue_bytes),
            ba: Link::new(rate_bps, delay, queue_bytes),
            now: 0,
            trace: Vec::new(),
            record: false,
        }
    }

    /// Runs the event loop until `end` or until `done` holds.
    fn run_until(&mut self, end: Nanos, done: impl Fn(&Net) -> bool) {
        let mut out = Vec::new();
        loop {
            if done(self) {
                return;
            }
            let next = [
                self.a.poll_at(self.now),
                self.b.poll_at(self.now),
                self.ab.next_arrival(),
                self.ba.next_arrival(),
            ]
            .into_iter()
            .flatten()
            .min();
            let Some(next) = next.filter(|&t| t <= end) else {
                self.now = end;
                return;
            };
            assert!(next >= self.now, "time went backwards");
            self.now = next;
            while self.ab.next_arrival() == Some(self.now) {
                let (_, p) = self.ab.in_flight.pop_front().unwrap();
                self.b.receive(self.now, &p);
            }
            while self.ba.next_arrival() == Some(self.now) {
                let (_, p) = self.ba.in_flight.pop_front().unwrap();
                self.a.receive(self.now, &p);
            }
            if self.a.poll_at(self.now).is_some_and(|t| t <= self.now) {
                self.a.poll(self.now, &mut out);
                for p in out.drain(..) {
                    if self.record {
                        self.trace.push((self.now, true, p.clone()));
                    }
                    self.ab.offer(self.now, p);
                }
            }
            if self.b.poll_at(self.now).is_some_and(|t| t <= self.now) {
                self.b.poll(self.now, &mut out);
                for p in out.drain(..) {
                    if self.record {
                        self.trace.push((self.now, false, p.clone()));
                    }
                    self.ba.offer(self.now, p);
                }
            }
        }
    }
}

fn both_done(net: &Net) -> bool {
    net.a.flows()[0].outcome != Outcome::Open && net.b.flows()[0].outcome != Outcome::Open
}

/// Goodput in bits per second over the bins `from..to` of a series.
fn goodput_bps(flow: &FlowStats, bin: Nanos, from: usize, to: usize) -> f64 {
    let bytes: u64 = flow.goodput[from..to].iter().sum();
    bytes as f64 * 8.0 / ((to - from) as f64 * bin as f64 / SECONDS as f64)
}

#[test]
fn bulk_transfer_1gbps_completes_byte_exact_at_line_rate() {
    const BYTES: u64 = 10_000_000;
    const RATE: u64 = 1_000_000_000;
    let config = TcpConfig {
        goodput_bin: MILLIS,
        ..TcpConfig::default()
    };
    // A 64 KiB queue (about 45 full frames, 0.5 ms at 1 Gbps): smaller than
    // the default 4 MiB window, so the congestion window must find it.
    let mut net = Net::new(RATE, 10 * MICROS, 64 << 10, config);
    net.b.sink(PORT, 1);
    net.a.bulk_send(0, 40_000, (B, PORT), Some(BYTES));
    net.run_until(10 * SECONDS, both_done);

    let s = &net.a.flows()[0];
    let r = &net.b.flows()[0];
    println!(
        "receiver bytes {} errors {}",
        r.bytes_received, r.payload_errors
    );
    assert_eq!(s.outcome, Outcome::Completed);
    assert_eq!(r.outcome, Outcome::Completed);
    assert_eq!(s.bytes_sent_acked, BYTES);
    assert_eq!(r.bytes_received, BYTES);
    assert_eq!(r.payload_errors, 0);
    let secs = (r.ended_at.unwrap() - r.established_at.unwrap()) as f64 / 1e9;
    println!(
        "1 Gbps: 10 MB in {:.3} ms, average {:.1} Mbps, drops {}, retransmitted {}, min RTT {:?} ns",
        secs * 1e3,
        BYTES as f64 * 8.0 / secs / 1e6,
        net.ab.dropped,
        s.segments_retransmitted,
        s.min_rtt
    );
    // Steady state: skip the first 3 ms and the last (partial) bin.
    let bins = r.goodput.len();
    let steady = goodput_bps(r, MILLIS, 3, bins - 1);
    println!("1 Gbps: steady goodput {:.1} Mbps", steady / 1e6);
    assert!(steady >= 0.9 * RATE as f64, "goodput {steady}");
}

#[test]
fn bulk_transfer_10gbps_reaches_line_rate() {
    const RATE: u64 = 10_000_000_000;
    // The window must cover the bandwidth-delay product, or it (not the link)
    // limits goodput: 10 Gbps x ~25 us RTT is ~31 KB, so the default 4 MiB
    // buffers are ample; the congestion window, not the buffers, keeps the
    // 256 KiB queue (0.2 ms at 10 Gbps) from overflowing.
    let config = TcpConfig {
        goodput_bin: MILLIS,
        ..TcpConfig::default()
    };
    let mut net = Net::new(RATE, 10 * MICROS, 256 << 10, config);
    net.b.sink(PORT, 1);
    net.a.bulk_send(0, 40_000, (B, PORT), None);
    net.run_until(30 * MILLIS, |_| false);
    let r = &net.b.flows()[0];
    let s = &net.a.flows()[0];
    assert_eq!(r.outcome, Outcome::Open);
    assert_eq!(r.payload_errors, 0);
    // Bins 5..29: after start-up, before the (partial) bin the run ends in.
    let steady = goodput_bps(r, MILLIS, 5, 29);
    println!(
        "10 Gbps: steady goodput {:.2} Gbps ({} bytes in 30 ms), drops {}, retransmitted {}, min RTT {:?} ns",
        steady / 1e9,
        r.bytes_received,
        net.ab.dropped,
        s.segments_retransmitted,
        s.min_rtt
    );
    assert!(steady >= 0.9 * RATE as f64, "goodput {steady}");
}

#[test]
fn short_outage_is_recovered() {
    const BYTES: u64 = 20_000_000;
    let config = TcpConfig {
        goodput_bin: MILLIS,
        ..TcpConfig::default()
    };
    let mut net = Net::new(1_000_000_000, 10 * MICROS, 64 << 10, config);
    // Both directions drop everything from 50 ms to 100 ms.
    net.ab.outages.push((50 * MILLIS, 100 * MILLIS));
    net.ba.outages.push((50 * MILLIS, 100 * MILLIS));
    net.b.sink(PORT, 1);
    net.a.bulk_send(0, 40_000, (B, PORT), Some(BYTES));
    net.run_until(10 * SECONDS, both_done);
    let s = &net.a.flows()[0];
    let r = &net.b.flows()[0];
    println!(
        "outage: receiver goodput per ms {:?}",
        &r.goodput[40..r.goodput.len().min(200)]
    );
    assert_eq!(s.outcome, Outcome::Completed);
    assert_eq!(r.outcome, Outcome::Completed);
    assert_eq!(r.bytes_received, BYTES);
    assert_eq!(r.payload_errors, 0);
    // The dip: nothing delivered while the link is down (bins 51..99).
    assert!(r.goodput[51..99].iter().all(|&b| b == 0));
    // Before: close to line rate (119 KB per ms at 949 Mbps). After: the first
    // data gets through at the first retransmission timeout after the link is
    // back (the timer restarts on every ACK of new data and backs off from
    // 10 ms after the last one: 60, 80, 120 ms); the rate is back once the
    // go-back-N repair is done.
    let before = goodput_bps(r, MILLIS, 10, 49);
    let last = r.goodput.len() - 1;
    let resumed = (100..last).find(|&i| r.goodput[i] > 0).unwrap();
    let recovered = (100..last - 10)
        .find(|&i| goodput_bps(r, MILLIS, i, i + 10) >= 0.9e9)
        .expect("never back to line rate");
    let after = goodput_bps(r, MILLIS, recovered, last);
    println!(
        "outage: {:.0} Mbps before; first data again at {} ms, line rate from {} ms: {:.0} Mbps; done at {:.1} ms",
        before / 1e6,
        resumed,
        recovered,
        after / 1e6,
        r.ended_at.unwrap() as f64 / 1e6
    );
    assert!(before >= 0.9e9 && after >= 0.9e9);
    // Prompt: a few RTOs after the outage ends, not the retransmission
    // deadline smoltcp set near the start of the connection (~830 ms).
    assert!(resumed < 200, "first data again at {resumed} ms");
}

/// An endless 1 Gbps transfer with outages on both directions of the link
/// (each `(start, end)`); returns the receiver's flow (1 ms goodput bins) and
/// the sender's.
fn endless_transfer(outages: &[(Nanos, Nanos)], end: Nanos) -> (FlowStats, FlowStats, u64) {
    let config = TcpConfig {
        goodput_bin: MILLIS,
        ..TcpConfig::default()
    };
    // A 1 MiB queue absorbs slow start's overshoot: nothing is lost but what
    // the outages take.
    let mut net = Net::new(1_000_000_000, 10 * MICROS, 1 << 20, config);
    net.ab.outages.extend_from_slice(outages);
    net.ba.outages.extend_from_slice(outages);
    net.b.sink(PORT, 1);
    net.a.bulk_send(0, 40_000, (B, PORT), None);
    net.run_until(end, |_| false);
    let dropped = net.ab.dropped + net.ba.dropped;
    (net.b.flows()[0].clone(), net.a.flows()[0].clone(), dropped)
}

/// The first 1 ms bin at or after `from` in which the receiver got data.
fn first_data_from(r: &FlowStats, from: usize) -> Option<usize> {
    (from..r.goodput.len()).find(|&i| r.goodput[i] > 0)
}

#[test]
fn outages_early_and_late_are_recovered_within_a_few_rtos() {
    // A 20 ms outage in the first round of smoltcp's retransmission timer
    // (which smoltcp would not restart before ~830 ms) and a 50 ms one long
    // after it.
    let (r, s, _) = endless_transfer(
        &[(20 * MILLIS, 40 * MILLIS), (1500 * MILLIS, 1550 * MILLIS)],
        1700 * MILLIS,
    );
    assert_eq!(s.outcome, Outcome::Open);
    assert_eq!(r.outcome, Outcome::Open);
    assert_eq!(r.payload_errors, 0);
    let early = first_data_from(&r, 40).unwrap();
    let late = first_data_from(&r, 1550).unwrap();
    println!(
        "outages: first data again at {early} ms (link up at 40 ms) and at {late} ms (link up at 1550 ms); {} segments retransmitted",
        s.segments_retransmitted
    );
    // Nothing gets through once the queue (up to 8 ms at 1 Gbps) has drained.
    assert!(r.goodput[30..40].iter().all(|&b| b == 0));
    assert!(r.goodput[1510..1550].iter().all(|&b| b == 0));
    assert!(early <= 40 + 100, "first data again at {early} ms");
    assert!(late <= 1550 + 100, "first data again at {late} ms");
    // And back to line rate soon after.
    assert!(goodput_bps(&r, MILLIS, early + 20, 1500) >= 0.9e9);
    assert!(goodput_bps(&r, MILLIS, late + 20, 1699) >= 0.9e9);
}

#[test]
fn long_healthy_transfer_has_no_spurious_retransmissions() {
    // 2 s at 1 Gbps with nothing lost: smoltcp's retransmission deadline,
    // set near the start and never restarted while data is outstanding,
    // must not fire in the middle of it and resend the whole window.
    let (r, s, dropped) = endless_transfer(&[], 2 * SECONDS);
    let steady = goodput_bps(&r, MILLIS, 10, 1999);
    println!(
        "healthy: {} bytes in 2 s, steady {:.1} Mbps, drops {dropped}, retransmitted {}",
        r.bytes_received,
        steady / 1e6,
        s.segments_retransmitted
    );
    assert_eq!(dropped, 0);
    assert_eq!(s.outcome, Outcome::Open);
    assert_eq!(r.payload_errors, 0);
    assert_eq!(s.segments_retransmitted, 0);
    assert!(steady >= 0.9e9, "goodput {steady}");
    // No dip anywhere: every 10 ms window after start-up runs near line rate.
    for i in (10..1990).step_by(10) {
        let g = goodput_bps(&r, MILLIS, i, i + 10);
        assert!(g >= 0.85e9, "{:.0} Mbps at {i} ms", g / 1e6);
    }
}

#[test]
fn receiver_losing_its_state_resets_the_sender() {
    let config = TcpConfig::default();
    let mut net = Net::new(1_000_000_000, 10 * MICROS, 64 << 10, config.clone());
    net.b.sink(PORT, 1);
    net.a.bulk_send(0, 40_000, (B, PORT), None);
    net.run_until(20 * MILLIS, |_| false);
    assert!(net.a.flows()[0].bytes_sent_acked > 1_000_000);
    // The receiver crashes and comes back without state, listening again (as a
    // restarted server would): the sender's next segment gets an RST.
    let crash = net.now;
    net.b = TcpStack::new(B, 24, GW, config);
    net.b.sink(PORT, 1);
    net.run_until(2 * SECONDS, sender_done);
    let s = &net.a.flows()[0];
    println!(
        "reset: sender {:?} at {:?} (crash at {crash})",
        s.outcome, s.ended_at
    );
    assert_eq!(s.outcome, Outcome::Reset);
    let ended = s.ended_at.unwrap();
    assert!(ended > crash && ended < crash + MILLIS, "ended at {ended}");
    // The fresh receiver never accepted a connection.
    assert_eq!(net.b.flows()[0].outcome, Outcome::Open);
    assert_eq!(net.b.flows()[0].established_at, None);
    // No reconnection: the sender stays quiet.
    net.record = true;
    net.run_until(net.now + SECONDS, |_| false);
    assert!(net.trace.iter().all(|p| !p.1), "the sender sent again");
}

#[test]
fn a_peer_that_vanishes_times_the_sender_out() {
    let config = TcpConfig::default();
    let mut net = Net::new(1_000_000_000, 10 * MICROS, 64 << 10, config);
    net.b.sink(PORT, 1);
    net.a.bulk_send(0, 40_000, (B, PORT), None);
    net.run_until(10 * MILLIS, |_| false);
    // Everything is lost from now on (a NAT dropping unknown flows, say).
    let cut = net.now;
    net.ab.outages.push((cut, Nanos::MAX));
    net.ba.outages.push((cut, Nanos::MAX));
    net.run_until(5 * SECONDS, both_done);
    let s = &net.a.flows()[0];
    let r = &net.b.flows()[0];
    println!(
        "vanish: sender {:?} at {:?}, receiver {:?} at {:?}",
        s.outcome, s.ended_at, r.outcome, r.ended_at
    );
    assert_eq!(s.outcome, Outcome::TimedOut);
    assert_eq!(r.outcome, Outcome::TimedOut);
    // The timeout is 1 s after the last packet heard.
    let ended = s.ended_at.unwrap();
    assert!(
        ended >= cut + SECONDS - MILLIS && ended <= cut + SECONDS + 20 * MILLIS,
        "{ended}"
    );
}

fn sender_done(net: &Net) -> bool {
    net.a.flows()[0].outcome != Outcome::Open
}

/// Every packet put on the wire, and both hosts' flow statistics.
type Recording = (Vec<(Nanos, bool, Vec<u8>)>, Vec<FlowStats>, Vec<FlowStats>);

/// One run with every packet recorded.
fn recorded_run() -> Recording {
    let config = TcpConfig {
        goodput_bin: MILLIS,
        seed: 42,
        ..TcpConfig::default()
    };
    let mut net = Net::new(1_000_000_000, 10 * MICROS, 256 << 10, config);
    net.record = true;
    net.ab.outages.push((30 * MILLIS, 32 * MILLIS));
    net.b.sink(PORT, 2);
    net.a.bulk_send(0, 40_000, (B, PORT), Some(2_000_000));
    net.a.bulk_send(MILLIS, 0, (B, PORT), Some(1_000_000));
    net.run_until(300 * MILLIS, |_| false);
    (net.trace, net.a.flows().to_vec(), net.b.flows().to_vec())
}

#[test]
fn identical_runs_are_identical() {
    let (trace1, a1, b1) = recorded_run();
    let (trace2, a2, b2) = recorded_run();
    println!(
        "determinism: {} packets, {:?}",
        trace1.len(),
        a1.iter().map(|f| f.outcome).collect::<Vec<_>>()
    );
    assert!(trace1.len() > 1000);
    assert_eq!(trace1, trace2);
    assert_eq!(a1, a2);
    assert_eq!(b1, b2);
}

#[test]
fn garbage_never_panics_and_is_counted() {
    use rand::{Rng, SeedableRng};
    let seed = 7u64;
    println!("garbage: seed {seed}");
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let mut net = Net::new(1_000_000_000, 10 * MICROS, 64 << 10, TcpConfig::default());
    net.record = true;
    net.b.sink(PORT, 1);
    net.a.bulk_send(0, 40_000, (B, PORT), Some(1_000_000));
    net.run_until(2 * MILLIS, |_| false);
    let real: Vec<Vec<u8>> = net
        .trace
        .iter()
        .filter(|p| p.1)
        .map(|p| p.2.clone())
        .collect();
    let now = net.now;
    let mut malformed = 0;
    // Random bytes of random lengths.
    for _ in 0..2000 {
        let len = rng.gen_range(0..200);
        let p: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
        net.b.receive(now, &p);
        malformed += 1;
    }
    // Real segments, truncated or with one byte flipped (checksums catch it).
    for i in 0..2000 {
        let mut p = real[i % real.len()].clone();
        if i % 2 == 0 {
            p.truncate(rng.gen_range(0..p.len()));
        } else {
            let at = rng.gen_range(0..p.len());
            p[at] ^= 1 << rng.gen_range(0..8);
        }
        net.b.receive(now, &p);
        malformed += 1;
    }
    assert_eq!(net.b.malformed(), malformed);
    // Well-formed segments with random TCP fields (valid checksums), aimed at
    // the live connection: smoltcp must cope with whatever they say.
    for _ in 0..2000 {
        let p = random_segment(&mut rng);
        net.b.receive(now, &p);
        net.a.receive(now, &p);
    }
    assert_eq!(net.b.malformed(), malformed);
    let mut out = Vec::new();
    net.a.poll(now, &mut out);
    net.b.poll(now, &mut out);
    println!(
        "garbage: b malformed {} ignored {}, a malformed {} ignored {}",
        net.b.malformed(),
        net.b.ignored(),
        net.a.malformed(),
        net.a.ignored()
    );
}

/// A valid IPv4/TCP packet between A:40000 and B:PORT (either way) with random
/// flags, sequence and acknowledgement numbers, window and payload.
fn random_segment(rng: &mut impl rand::Rng) -> Vec<u8> {
    use smoltcp::phy::ChecksumCapabilities;
    use smoltcp::wire::{
        IpAddress, IpProtocol, Ipv4Packet, Ipv4Repr, TcpControl, TcpPacket, TcpRepr, TcpSeqNumber,
    };
    let payload: Vec<u8> = (0..rng.gen_range(0..64)).map(|_| rng.gen()).collect();
    let to_b = rng.gen_bool(0.5);
    let (src, dst, sport, dport) = if to_b {
        (A, B, 40_000, PORT)
    } else {
        (B, A, PORT, 40_000)
    };
    let control = [
        TcpControl::None,
        TcpControl::Syn,
        TcpControl::Fin,
        TcpControl::Rst,
        TcpControl::Psh,
    ][rng.gen_range(0..5)];
    let tcp = TcpRepr {
        src_port: sport,
        dst_port: dport,
        control,
        seq_number: TcpSeqNumber(rng.gen()),
        ack_number: rng.gen_bool(0.8).then(|| TcpSeqNumber(rng.gen())),
        window_len: rng.gen(),
        window_scale: rng.gen_bool(0.2).then(|| rng.gen_range(0..20)),
        max_seg_size: rng.gen_bool(0.2).then(|| rng.gen()),
        sack_permitted: rng.gen(),
        sack_ranges: [None, None, None],
        timestamp: None,
        payload: &payload,
    };
    let ip = Ipv4Repr {
        src_addr: src,
        dst_addr: dst,
        next_header: IpProtocol::Tcp,
        payload_len: tcp.buffer_len(),
        hop_limit: 64,
    };
    let mut buf = vec![0u8; ip.buffer_len() + tcp.buffer_len()];
    let caps = ChecksumCapabilities::default();
    ip.emit(&mut Ipv4Packet::new_unchecked(&mut buf[..]), &caps);
    tcp.emit(
        &mut TcpPacket::new_unchecked(&mut buf[20..]),
        &IpAddress::Ipv4(src),
        &IpAddress::Ipv4(dst),
        &caps,
    );
    buf
}
