use super::window::*;
use super::*;

#[test]
fn time_conversions_never_poll_early() {
    assert_eq!(to_instant(1_999).total_micros(), 1);
    assert_eq!(from_instant(Instant::from_micros(7)), 7_000);
    assert_eq!(from_instant(Instant::from_micros(-5)), 0);
    assert_eq!(to_duration(1).total_micros(), 1);
    assert_eq!(to_duration(2_000).total_micros(), 2);
    assert_eq!(
        to_instant(u64::MAX).total_micros(),
        (u64::MAX / 1_000) as i64
    );
}

#[test]
fn pattern_round_trips_at_any_offset() {
    let mut buf = vec![0u8; 1000];
    fill_pattern(12_345, &mut buf);
    assert_eq!(pattern_errors(12_345, &buf), 0);
    assert_eq!(buf[0], (12_345 % 251) as u8);
    buf[10] ^= 1;
    assert_eq!(pattern_errors(12_345, &buf), 1);
    assert!(pattern_errors(12_346, &buf) > 900);
}

#[test]
fn sequence_comparison_wraps() {
    assert!(seq_lt(1, 2));
    assert!(seq_lt(u32::MAX, 0));
    assert!(!seq_lt(5, 5));
}

#[test]
fn config_is_clamped_not_trusted() {
    let config = TcpConfig {
        mss_mtu: 10,
        send_buffer: 0,
        recv_buffer: usize::MAX,
        goodput_bin: 0,
        ..TcpConfig::default()
    };
    let mut stack = TcpStack::new(
        Ipv4Addr::new(10, 0, 0, 1),
        99,
        Ipv4Addr::UNSPECIFIED,
        config,
    );
    assert_eq!(stack.config().mss_mtu, 576);
    assert_eq!(stack.config().send_buffer, 1);
    assert_eq!(stack.config().recv_buffer, MAX_BUFFER);
    assert!(stack.config().goodput_bin > 0);
    // Bad endpoints fail the flow instead of panicking.
    let bad = stack.bulk_send(0, 1, (Ipv4Addr::UNSPECIFIED, 80), Some(1));
    let zero_port = stack.sink(0, 1)[0];
    let mut out = Vec::new();
    stack.poll(0, &mut out);
    assert_eq!(stack.flows()[bad].outcome, Outcome::Failed);
    assert_eq!(stack.flows()[zero_port].outcome, Outcome::Failed);
}

#[test]
fn window_shrinks_once_per_loss_episode() {
    let mut w = Window::new(Congestion::Cubic, 1000, 1 << 20);
    assert!(!w.on_sent(0, 100, 1, true));
    for i in 0..20u32 {
        assert!(!w.on_sent(0, 101 + i * 1000, 1000, false));
    }
    w.on_ack(10, 10_000, 10_000);
    assert_eq!(w.cwnd, 20_000.0); // slow start
    assert!(w.on_sent(20, 101 + 10_000, 1000, false));
    assert!(w.on_sent(20, 101 + 11_000, 1000, false));
    assert_eq!(w.cwnd, 20_000.0 * CUBIC_BETA);
    assert_eq!(w.limit(), 14_000);
}

#[test]
fn rto_follows_rfc_6298_within_smoltcp_bounds() {
    let mut w = Window::new(Congestion::Cubic, 1000, 1 << 20);
    assert_eq!(w.rto(), None);
    w.on_rtt_sample(0, 40 * MILLIS);
    // SRTT 40 ms, RTTVAR 20 ms: 40 + 4 * 20.
    assert_eq!(w.rto(), Some(120 * MILLIS));
    for _ in 0..100 {
        w.on_rtt_sample(0, 50 * MICROS);
    }
    assert_eq!(w.rto(), Some(MIN_RTO));
    w.on_rtt_sample(0, u64::MAX);
    assert_eq!(w.rto(), Some(MAX_RTO));
    assert_eq!(backed_off(MIN_RTO, 0), MIN_RTO);
    assert_eq!(backed_off(MIN_RTO, 2), 4 * MIN_RTO);
    assert_eq!(backed_off(MIN_RTO, u32::MAX), MAX_RTO);
}

#[test]
fn stale_retransmissions_are_recognised() {
    let mut w = Window::new(Congestion::Cubic, 1000, 1 << 20);
    assert!(!w.is_stale_retransmission(5, 1000, false));
    w.on_sent(0, u32::MAX - 500, 1, true);
    w.on_sent(0, u32::MAX - 499, 1000, false); // wraps
    assert!(w.outstanding(0));
    assert!(!w.outstanding(1000));
    assert!(w.is_stale_retransmission(u32::MAX - 499, 1000, false));
    assert!(!w.is_stale_retransmission(u32::MAX - 499, 1001, false));
    assert!(!w.is_stale_retransmission(500, 1000, false));
    assert!(!w.is_stale_retransmission(u32::MAX - 499, 0, false));
}

#[test]
fn window_variant_differs_only_in_window_and_checksum() {
    let (a, b) = (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2));
    let tcp = TcpRepr {
        src_port: 1,
        dst_port: 2,
        control: TcpControl::None,
        seq_number: smoltcp::wire::TcpSeqNumber(7),
        ack_number: Some(smoltcp::wire::TcpSeqNumber(9)),
        window_len: 100,
        window_scale: None,
        max_seg_size: None,
        sack_permitted: false,
        sack_ranges: [None, None, None],
        timestamp: None,
        payload: &[],
    };
    let ip = Ipv4Repr {
        src_addr: b,
        dst_addr: a,
        next_header: IpProtocol::Tcp,
        payload_len: tcp.buffer_len(),
        hop_limit: 64,
    };
    let mut packet = vec![0u8; ip.buffer_len() + tcp.buffer_len()];
    let caps = ChecksumCapabilities::default();
    ip.emit(&mut Ipv4Packet::new_unchecked(&mut packet[..]), &caps);
    tcp.emit(
        &mut TcpPacket::new_unchecked(&mut packet[20..]),
        &IpAddress::Ipv4(b),
        &IpAddress::Ipv4(a),
        &caps,
    );
    let variant = with_other_window(&packet).unwrap();
    assert!(matches!(
        classify(a, &variant),
        Classified::Tcp {
            pure_ack: true,
            ack: Some(9),
            ..
        }
    ));
    let parsed = TcpPacket::new_checked(&variant[20..]).unwrap();
    assert_eq!(parsed.window_len(), 101);
    assert_eq!(with_other_window(&packet[..10]), None);
}

#[test]
fn unanswered_connect_times_out_and_refused_connect_is_reset() {
    let a = Ipv4Addr::new(10, 0, 0, 1);
    let b = Ipv4Addr::new(10, 0, 0, 2);
    let mut client = TcpStack::new(a, 24, b, TcpConfig::default());
    let mut server = TcpStack::new(b, 24, a, TcpConfig::default());
    let lost = client.bulk_send(0, 1000, (b, 80), Some(10));
    let refused = client.bulk_send(0, 1001, (b, 81), Some(10));
    let mut out = Vec::new();
    let mut now = 0;
    while let Some(t) = client.poll_at(now) {
        if t > 3 * SECONDS {
            break;
        }
        now = t;
        client.poll(now, &mut out);
        for packet in out.drain(..) {
            // Only the SYN to port 81 reaches the server (nothing listens
            // there, so it answers RST); the one to port 80 is lost.
            let mut replies = Vec::new();
            if packet[22..24] == 81u16.to_be_bytes() {
                server.receive(now, &packet);
                server.poll(now, &mut replies);
            }
            for reply in replies {
                client.receive(now, &reply);
            }
        }
    }
    let flows = client.flows();
    assert_eq!(flows[refused].outcome, Outcome::Reset);
    assert_eq!(flows[lost].outcome, Outcome::TimedOut);
    let ended = flows[lost].ended_at.unwrap();
    assert!((SECONDS..SECONDS + MILLIS).contains(&ended), "{ended}");
}
