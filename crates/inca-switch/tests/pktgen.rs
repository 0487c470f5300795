//! The packet generator's port-down trigger, as on Tofino: detection
//! delay, the port-down header in the generated frame, and firing once
//! until the control plane re-arms the port.

use std::cell::RefCell;
use std::rc::Rc;

use inca_switch::device::{ControlMessage, MICROS, MILLIS};
use inca_switch::harness::Harness;
use inca_switch::pktgen::{StreamConfig, Trigger};
use inca_switch::switch::PKTGEN_PORT;
use inca_switch::{
    AccessError, ControlEvent, ControlPlane, DataPlane, Declare, DeclareError, Gress, Nanos,
    PacketCtx, PacketKind, ParseError, PortId, Profile, Program, Switch,
};
use inca_wire::pktgen::{PortDownHeaderRepr, PORT_DOWN_HEADER_LEN};

/// The port the generator watches.
const WATCHED: PortId = 5;
/// The stream (Tofino application) watching it.
const STREAM: u8 = 2;
/// Generated packets leave on this port, so tests see them.
const OUT: PortId = 9;
/// Control message: clear the port-down latch of port `body[0]`.
const MSG_CLEAR: u32 = 1;

fn template() -> Vec<u8> {
    (0..60).map(|i| i as u8).collect()
}

/// What the control plane heard, with when.
type Events = Rc<RefCell<Vec<(Nanos, ControlEvent<()>)>>>;

/// Watches [`WATCHED`] with a batch of two; forwards generated packets to
/// [`OUT`]; clears a port when told to.
#[derive(Clone)]
struct Watcher {
    events: Events,
}

impl Program for Watcher {
    type Meta = ();
    type Digest = ();

    fn name(&self) -> &str {
        "watcher"
    }

    fn declare(&mut self, _decl: &mut Declare) -> Result<(), DeclareError> {
        Ok(())
    }

    fn parse(&self, _: Gress, _: &[u8], _: &mut ()) -> Result<(), ParseError> {
        Ok(())
    }

    fn ingress(
        &mut self,
        pkt: &mut PacketCtx<(), ()>,
        _dp: &mut DataPlane<'_>,
    ) -> Result<(), AccessError> {
        if matches!(pkt.kind(), PacketKind::Generated { .. }) {
            assert_eq!(pkt.ingress_port(), PKTGEN_PORT);
            pkt.forward(OUT);
        }
        Ok(())
    }

    fn control(&mut self, event: ControlEvent<()>, cp: &mut ControlPlane<'_>) {
        match &event {
            ControlEvent::Start => {
                cp.packet_generator(
                    STREAM,
                    Some(StreamConfig {
                        trigger: Trigger::PortDown { port: WATCHED },
                        template: template(),
                        batch_size: 2,
                    }),
                );
            }
            ControlEvent::Message(m) if m.kind == MSG_CLEAR => {
                cp.pktgen_clear_port_down(PortId::from(m.body[0]));
            }
            _ => {}
        }
        self.events.borrow_mut().push((cp.now(), event));
    }
}

fn start(profile: Profile) -> (Harness<Switch<Watcher>>, Events) {
    let events = Events::default();
    let sw = Switch::new(
        profile,
        Watcher {
            events: events.clone(),
        },
    )
    .unwrap();
    (Harness::new(sw, 1), events)
}

fn clear(h: &mut Harness<Switch<Watcher>>, at: Nanos, port: u8) {
    h.control(
        at,
        ControlMessage {
            kind: MSG_CLEAR,
            body: vec![port],
        },
    );
}

/// When generated packets left the switch.
fn generated_at(h: &mut Harness<Switch<Watcher>>) -> Vec<Nanos> {
    h.take().into_iter().map(|t| t.at).collect()
}

#[test]
fn fires_after_the_detection_delay_with_the_port_down_header() {
    let profile = Profile::tofino();
    let detect = profile.data_path.port_down_detection;
    assert_eq!(detect, 1_100, "TEA spec §8: T_LINKDOWN + T_PKTGEN");
    let pipeline = profile.data_path.ingress_latency + profile.data_path.egress_latency;
    let (mut h, _) = start(profile);
    h.link(MILLIS, WATCHED, false);
    h.advance_to(MILLIS + detect - 1);
    assert!(h.take().is_empty(), "nothing before the detection delay");
    h.advance_to(2 * MILLIS);
    let out = h.take();
    assert_eq!(out.len(), 2);
    for (packet_id, t) in out.iter().enumerate() {
        assert_eq!(t.port, OUT);
        assert!(t.at >= MILLIS + detect + pipeline);
        let header = PortDownHeaderRepr::parse(&t.frame).unwrap();
        assert_eq!(
            header,
            PortDownHeaderRepr {
                pipe_id: 0,
                app_id: STREAM,
                port: WATCHED,
                packet_id: packet_id as u16,
            }
        );
        // Byte for byte: app id 2 in byte 0, port 5 in the low 9 bits of
        // bytes 1..4, packet id in bytes 4..6, then the template.
        assert_eq!(t.frame[..6], [0x02, 0, 0, 5, 0, packet_id as u8]);
        assert_eq!(t.frame[PORT_DOWN_HEADER_LEN..], template()[..]);
    }
    assert_eq!(out[0].at, MILLIS + detect + pipeline);
    assert_eq!(h.device.stats().generated, 2);
}

#[test]
fn detection_delay_is_a_profile_input() {
    let mut profile = Profile::tofino();
    profile
        .set("data_path.port_down_detection", "200us")
        .unwrap();
    let pipeline = profile.data_path.ingress_latency + profile.data_path.egress_latency;
    let (mut h, _) = start(profile);
    h.link(MILLIS, WATCHED, false);
    h.advance_to(2 * MILLIS);
    assert_eq!(generated_at(&mut h)[0], MILLIS + 200 * MICROS + pipeline);
}

#[test]
fn a_flap_shorter_than_detection_and_other_ports_are_not_seen() {
    let (mut h, _) = start(Profile::tofino());
    h.link(MILLIS, WATCHED, false);
    h.link(MILLIS + 1_000, WATCHED, true);
    h.link(MILLIS, WATCHED + 1, false);
    h.advance_to(3 * MILLIS);
    assert!(h.take().is_empty());
    // The flap did not latch the port: a real failure still fires.
    h.link(4 * MILLIS, WATCHED, false);
    h.advance_to(5 * MILLIS);
    assert_eq!(h.take().len(), 2);
}

#[test]
fn fires_once_until_the_control_plane_clears_the_port() {
    let (mut h, events) = start(Profile::tofino());
    h.link(MILLIS, WATCHED, false);
    h.link(2 * MILLIS, WATCHED, true);
    h.link(3 * MILLIS, WATCHED, false);
    h.link(4 * MILLIS, WATCHED, true);
    h.advance_to(5 * MILLIS);
    assert_eq!(generated_at(&mut h).len(), 2, "one batch: the port latched");
    // The CPU still hears of every change.
    let downs = events
        .borrow()
        .iter()
        .filter(|(_, e)| matches!(e, ControlEvent::PortStatus { up: false, .. }))
        .count();
    assert_eq!(downs, 2);

    // Re-armed (a control operation, so it takes a table write's time).
    clear(&mut h, 6 * MILLIS, WATCHED as u8);
    h.link(7 * MILLIS, WATCHED, false);
    h.advance_to(8 * MILLIS);
    let again = generated_at(&mut h);
    assert_eq!(again.len(), 2, "fires again after the clear");
    assert!(again[0] > 7 * MILLIS);
    // ... and latched again.
    h.link(9 * MILLIS, WATCHED, true);
    h.link(10 * MILLIS, WATCHED, false);
    h.advance_to(11 * MILLIS);
    assert!(h.take().is_empty());
    assert_eq!(h.device.stats().generated, 4);

    // A restart forgets the latch (and reinstalls the stream at Start).
    h.restart(12 * MILLIS);
    h.link(13 * MILLIS, WATCHED, true);
    h.link(14 * MILLIS, WATCHED, false);
    h.advance_to(15 * MILLIS);
    assert_eq!(h.take().len(), 2);
}

#[test]
fn clearing_a_port_the_device_lacks_fails() {
    let (mut h, events) = start(Profile::tofino());
    clear(&mut h, MILLIS, 40);
    h.advance_to(2 * MILLIS);
    let failed: Vec<String> = events
        .borrow()
        .iter()
        .filter_map(|(_, e)| match e {
            ControlEvent::OpFailed { error, .. } => Some(error.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(failed.len(), 1);
    assert!(failed[0].contains("port 40"), "{}", failed[0]);
}

/// Two timer streams of one period fire at the same instants.
#[derive(Clone)]
struct TwoStreams;

impl Program for TwoStreams {
    type Meta = ();
    type Digest = ();

    fn name(&self) -> &str {
        "two_streams"
    }

    fn declare(&mut self, _decl: &mut Declare) -> Result<(), DeclareError> {
        Ok(())
    }

    fn parse(&self, _: Gress, _: &[u8], _: &mut ()) -> Result<(), ParseError> {
        Ok(())
    }

    fn ingress(
        &mut self,
        pkt: &mut PacketCtx<(), ()>,
        _dp: &mut DataPlane<'_>,
    ) -> Result<(), AccessError> {
        pkt.forward(OUT);
        Ok(())
    }

    fn control(&mut self, event: ControlEvent<()>, cp: &mut ControlPlane<'_>) {
        if let ControlEvent::Start = event {
            for stream in [0, 1] {
                cp.packet_generator(
                    stream,
                    Some(StreamConfig {
                        trigger: Trigger::Timer {
                            period: 10 * MILLIS,
                        },
                        template: template(),
                        batch_size: 100,
                    }),
                );
            }
        }
    }
}

#[test]
fn streams_share_the_generator_port_rate() {
    // 60-byte frames plus 24 bytes of preamble, gap and FCS at 100 Gbps:
    // 6.72 ns each. Two batches of 100 fired together take 200 of those,
    // one after the other, not 100 side by side.
    let sw = Switch::new(Profile::tofino(), TwoStreams).unwrap();
    let mut h = Harness::new(sw, 1);
    h.advance_to(15 * MILLIS);
    let at: Vec<Nanos> = h.take().into_iter().map(|t| t.at).collect();
    assert_eq!(at.len(), 200);
    let gap = 84 * 8 * 1_000 / 100_000; // ps → ns, truncated: 6 ns
    for w in at.windows(2) {
        assert!(
            w[1] >= w[0] + gap,
            "packets closer than the port allows: {w:?}"
        );
    }
    let span = at[199] - at[0];
    assert!(span >= 199 * gap, "span {span} ns");
}
