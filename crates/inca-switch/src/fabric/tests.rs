//! The fabric's own tests, with two toy devices: a relay that forwards
//! what arrives on port p out of port p ^ 1 after a delay, and records
//! every input.

use super::*;

const SEED: u64 = 7;

/// Forwards port p to p ^ 1 after `delay`; control kind 1 sets timer
/// token `body[0]` at `now + body[1]`; kind 2 sends a control message back;
/// kind 3 transmits in the past.
#[derive(Default)]
struct Relay {
    delay: Nanos,
    seen: Vec<(Nanos, String)>,
}

impl Device for Relay {
    fn start(&mut self, now: Nanos, _rng: &mut DeviceRng, _out: &mut Vec<Output>) {
        self.seen.push((now, "start".into()));
    }

    fn handle(&mut self, now: Nanos, input: Input, _rng: &mut DeviceRng, out: &mut Vec<Output>) {
        match input {
            Input::Frame { port, frame } => {
                self.seen.push((now, format!("frame {port} {}", frame[0])));
                out.push(Output::Transmit {
                    at: now + self.delay,
                    port: port ^ 1,
                    frame,
                });
            }
            Input::Timer { token } => self.seen.push((now, format!("timer {token}"))),
            Input::Control(m) if m.kind == 1 => out.push(Output::Timer {
                at: now + Nanos::from(m.body[1]),
                token: u64::from(m.body[0]),
            }),
            Input::Control(m) if m.kind == 2 => out.push(Output::Control(m)),
            Input::Control(_) => out.push(Output::Transmit {
                at: now.saturating_sub(1),
                port: 9,
                frame: vec![0],
            }),
            Input::LinkState { port, up } => self.seen.push((now, format!("link {port} {up}"))),
            // Echoes a session message back on its session, one delay later.
            Input::Session(SessionEvent::Message { session, body }) => out.push(Output::Session {
                at: now + self.delay,
                session,
                body,
            }),
            Input::Session(e) => self.seen.push((now, e.session().to_string())),
        }
    }

    fn restart(&mut self, now: Nanos, _rng: &mut DeviceRng, _out: &mut Vec<Output>) {
        self.seen.push((now, "restart".into()));
    }
}

fn relay(delay: Nanos) -> Relay {
    Relay {
        delay,
        ..Relay::default()
    }
}

fn msg(kind: u32, body: &[u8]) -> ControlMessage {
    ControlMessage {
        kind,
        body: body.to_vec(),
    }
}

/// a (port 1) —100 ns— b (port 0); b's port 1 and a's port 0 are open.
fn pair() -> Fabric<Relay> {
    let mut f = Fabric::new(SEED);
    let a = f.add(relay(10));
    let b = f.add(relay(5));
    f.connect((a, 1), (b, 0), Wire::with_latency(100)).unwrap();
    f.start_all();
    f
}

#[test]
fn frames_cross_wires_with_their_latency_and_leave_on_open_ports() {
    let mut f = pair();
    f.keep_egress(true);
    f.inject(1_000, 0, 0, vec![42]);
    f.run_until(2_000);
    // a at 1000, sends at 1010, b gets it at 1110, sends on its port 1 at 1115.
    assert_eq!(f.device(1).seen[1], (1_110, "frame 0 42".to_string()));
    let out = f.take_egress();
    assert_eq!(out.len(), 1);
    assert_eq!((out[0].at, out[0].node, out[0].port), (1_115, 1, 1));
    assert_eq!(f.left_on(1, 1), 1);
    assert_eq!(f.left_on(0, 0), 0);
    let s = f.stats();
    assert_eq!((s.injected, s.delivered, s.left), (1, 1, 1));
    assert_eq!(f.now(), 2_000);
}

#[test]
fn a_frame_on_a_wire_is_not_delivered_before_its_time() {
    let mut f = pair();
    f.inject(0, 0, 0, vec![1]);
    f.run_until(109);
    assert_eq!(f.device(1).seen.len(), 1, "only the start");
    f.run_until(110);
    assert_eq!(f.device(1).seen.len(), 2);
}

#[test]
fn a_timer_set_again_replaces_the_pending_one() {
    let mut f = pair();
    f.control(0, 0, msg(1, &[3, 200]));
    f.control(10, 0, msg(1, &[3, 50]));
    f.control(20, 0, msg(1, &[4, 30]));
    f.run_until(1_000);
    let timers: Vec<_> = f
        .device(0)
        .seen
        .iter()
        .filter(|s| s.1.starts_with("timer"))
        .collect();
    assert_eq!(
        timers,
        [&(50, "timer 4".to_string()), &(60, "timer 3".to_string())]
    );
    assert_eq!(f.stats().timers_fired, 2);
}

#[test]
fn the_earliest_timer_moved_later_lets_another_fire_first() {
    let mut f = pair();
    f.control(0, 0, msg(1, &[3, 50]));
    f.control(0, 0, msg(1, &[4, 100]));
    f.control(10, 0, msg(1, &[3, 190]));
    f.run_until(1_000);
    let timers: Vec<_> = f
        .device(0)
        .seen
        .iter()
        .filter(|s| s.1.starts_with("timer"))
        .collect();
    assert_eq!(
        timers,
        [&(100, "timer 4".to_string()), &(200, "timer 3".to_string())]
    );
}

#[test]
fn at_one_instant_timers_fire_before_frames_arrive_in_node_then_token_order() {
    let mut f = pair();
    // a's frame reaches b at 110 (a sends at 10, 100 ns on the wire).
    f.inject(0, 0, 0, vec![5]);
    f.control(0, 1, msg(1, &[9, 110]));
    f.control(0, 1, msg(1, &[2, 110]));
    f.control(0, 0, msg(1, &[7, 110]));
    f.run_until(110);
    let b: Vec<_> = f.device(1).seen[1..].iter().map(|s| s.1.as_str()).collect();
    assert_eq!(b, ["timer 2", "timer 9", "frame 0 5"]);
    assert_eq!(
        f.device(0).seen.last().unwrap(),
        &(110, "timer 7".to_string())
    );
}

#[test]
fn a_restart_forgets_pending_timers() {
    let mut f = pair();
    f.control(0, 0, msg(1, &[3, 200]));
    f.restart(100, 0);
    f.run_until(1_000);
    assert!(f.device(0).seen.iter().all(|s| !s.1.starts_with("timer")));
    assert_eq!(
        f.device(0).seen.last().unwrap(),
        &(100, "restart".to_string())
    );
}

#[test]
fn taps_copy_and_messages_are_captured() {
    let mut f = pair();
    f.tap(0, 1).unwrap();
    f.inject(0, 0, 0, vec![9]);
    f.control(500, 1, msg(2, b"hi"));
    f.run_until(1_000);
    let t = f.take_tapped();
    assert_eq!(t.len(), 1);
    assert_eq!(
        (t[0].at, t[0].node, t[0].port, t[0].frame[0]),
        (10, 0, 1, 9)
    );
    assert_eq!(f.stats().delivered, 1, "a tapped frame still crosses");
    assert_eq!(f.take_messages(), vec![(500, 1, msg(2, b"hi"))]);
    assert!(f.take_messages().is_empty());
}

#[test]
fn an_output_in_the_past_is_counted_and_carried_out_now() {
    let mut f = pair();
    f.keep_egress(true);
    f.control(100, 0, msg(3, &[]));
    assert_eq!(f.stats().contract_violations, 1);
    assert_eq!(f.take_egress()[0].at, 100);
}

#[test]
fn wiring_mistakes_are_errors() {
    let mut f = pair();
    assert_eq!(
        f.connect((0, 1), (1, 1), Wire::default()),
        Err(FabricError::PortTaken { node: 0, port: 1 })
    );
    assert_eq!(
        f.connect((0, 2), (5, 0), Wire::default()),
        Err(FabricError::UnknownNode(5))
    );
    assert_eq!(
        f.connect(
            (0, 2),
            (1, 2),
            Wire {
                latency: 0,
                loss: 1.5
            }
        ),
        Err(FabricError::BadLoss(1.5))
    );
    assert_eq!(
        f.connect((0, 3), (0, 3), Wire::default()),
        Err(FabricError::PortTaken { node: 0, port: 3 })
    );
    assert_eq!(f.tap(2, 0), Err(FabricError::UnknownNode(2)));
}

fn lossy(seed: u64) -> (u64, u64) {
    let mut f = Fabric::new(seed);
    let (a, b) = (f.add(relay(0)), f.add(relay(0)));
    f.connect(
        (a, 1),
        (b, 0),
        Wire {
            latency: 1,
            loss: 0.3,
        },
    )
    .unwrap();
    f.set_stream(a, 0, 10, vec![vec![1], vec![2]]);
    assert_eq!(f.push(1_000), 1_000);
    f.run_until(f.now() + 10);
    (f.stats().lost, f.stats().delivered)
}

#[test]
fn loss_is_drawn_from_the_seed() {
    println!("seeds {SEED} and {}", SEED + 1);
    let (lost, delivered) = lossy(SEED);
    assert_eq!(lost + delivered, 1_000);
    assert!((200..400).contains(&lost), "{lost} of 1000 lost at p = 0.3");
    assert_eq!(
        lossy(SEED),
        (lost, delivered),
        "the same seed, the same losses"
    );
    assert_ne!(lossy(SEED + 1).0, lost, "another seed, other losses");
}

#[test]
fn a_wire_taken_down_drops_and_tells_both_ends() {
    let mut f = pair();
    f.link(50, 0, 1, false);
    f.inject(100, 0, 0, vec![1]);
    f.run_until(1_000);
    assert_eq!(f.stats().link_down_drops, 1);
    assert_eq!(f.device(0).seen[1], (50, "link 1 false".to_string()));
    assert_eq!(f.device(1).seen[1], (50, "link 0 false".to_string()));
    f.link(1_000, 1, 0, true);
    f.inject(1_100, 0, 0, vec![2]);
    f.run_until(2_000);
    assert_eq!(f.stats().delivered, 1);
}

#[test]
fn a_stream_feeds_templates_in_turn_at_its_gap() {
    let mut f = pair();
    f.run_until(1_000);
    f.set_stream(0, 0, 100, vec![vec![1], vec![2], vec![3]]);
    assert_eq!(f.push(4), 4);
    let got: Vec<_> = f.device(0).seen[1..].to_vec();
    assert_eq!(
        got,
        [
            (1_100, "frame 0 1".to_string()),
            (1_200, "frame 0 2".to_string()),
            (1_300, "frame 0 3".to_string()),
            (1_400, "frame 0 1".to_string()),
        ]
    );
    assert_eq!(f.stats().injected, 4);
    f.set_stream(0, 0, 1, Vec::new());
    assert_eq!(f.push(3), 0, "no templates, no stream");
}

#[test]
fn devices_of_different_types_come_back_as_themselves() {
    #[derive(Default)]
    struct Sink(u64);
    impl Device for Sink {
        fn handle(&mut self, _: Nanos, i: Input, _: &mut DeviceRng, _: &mut Vec<Output>) {
            if matches!(i, Input::Frame { .. }) {
                self.0 += 1;
            }
        }
        fn restart(&mut self, _: Nanos, _: &mut DeviceRng, _: &mut Vec<Output>) {}
    }
    let mut f: Fabric = Fabric::new(SEED);
    let r = f.add_any(relay(0));
    let s = f.add_any(Sink::default());
    f.connect((r, 1), (s, 0), Wire::default()).unwrap();
    f.start_all();
    f.inject(0, r, 0, vec![1]);
    f.run_until(10);
    assert_eq!(f.get::<Sink>(s).map(|s| s.0), Some(1));
    assert!(f.get::<Sink>(r).is_none());
    assert_eq!(f.get_mut::<Relay>(r).map(|r| r.seen.len()), Some(2));
    let sink: Sink = f.into_device(s).expect("node 1 is the sink");
    assert_eq!(sink.0, 1);
}

#[test]
fn session_events_reach_the_node_and_session_sends_are_captured() {
    let mut f = Fabric::new(7);
    let a = f.add(Relay {
        delay: 5,
        seen: Vec::new(),
    });
    f.session(
        10,
        a,
        SessionEvent::Up {
            session: SessionId(3),
        },
    );
    f.session(
        20,
        a,
        SessionEvent::Message {
            session: SessionId(3),
            body: vec![1, 2],
        },
    );
    assert_eq!(
        f.device(a).seen.last().unwrap(),
        &(10, "session 3".to_string())
    );
    let sent = f.take_session_sent();
    assert_eq!(
        sent,
        vec![SessionSent {
            at: 25,
            node: a,
            session: SessionId(3),
            body: vec![1, 2],
        }]
    );
    assert!(f.take_session_sent().is_empty());
}
