//! Control-plane reads per entry: a table entry's hit flag and idle time,
//! and counter cells, delivered as control events after the modelled
//! latency.

use std::cell::RefCell;
use std::rc::Rc;

use inca_switch::device::{ControlMessage, MICROS, MILLIS};
use inca_switch::harness::Harness;
use inca_switch::objects::Handle;
use inca_switch::{
    AccessError, ArrayDecl, ControlEvent, ControlPlane, DataPlane, Declare, DeclareError, Gress,
    MatchKind, MatchSpec, Nanos, PacketCtx, ParseError, Profile, Program, Switch, TableDecl,
    TableHandle,
};

/// Control message: read the activity of entry `[body[0]]`.
const MSG_ENTRY: u32 = 1;
/// Control message: read counters `body[0] .. body[0] + body[1]`.
const MSG_COUNTERS: u32 = 2;

type Events = Rc<RefCell<Vec<(Nanos, ControlEvent<()>)>>>;

/// Looks up the first byte in `flows` (one entry, key 1, installed at
/// start) and counts it in `hits[first byte]`.
#[derive(Clone)]
struct Reader {
    flows: Option<TableHandle<u16>>,
    hits: Option<Handle>,
    events: Events,
    requests: Rc<RefCell<Vec<u64>>>,
}

impl Program for Reader {
    type Meta = u8;
    type Digest = ();

    fn name(&self) -> &str {
        "reader"
    }

    fn declare(&mut self, decl: &mut Declare) -> Result<(), DeclareError> {
        self.flows = Some(decl.table(TableDecl::new("flows", MatchKind::Exact, 1, 16, 16))?);
        self.hits = Some(decl.counter(ArrayDecl::new("hits", 8))?);
        Ok(())
    }

    fn parse(&self, _: Gress, header: &[u8], meta: &mut u8) -> Result<(), ParseError> {
        *meta = *header.first().ok_or(ParseError("empty"))?;
        Ok(())
    }

    fn ingress(
        &mut self,
        pkt: &mut PacketCtx<u8, ()>,
        dp: &mut DataPlane<'_>,
    ) -> Result<(), AccessError> {
        let key = pkt.meta;
        let len = pkt.len() as u64;
        if let Some(port) = dp.lookup(self.flows.unwrap(), &[key])? {
            pkt.forward(port);
        }
        dp.count(self.hits.unwrap(), u64::from(key), len)
    }

    fn control(&mut self, event: ControlEvent<()>, cp: &mut ControlPlane<'_>) {
        match &event {
            ControlEvent::Start => {
                cp.table_add(self.flows.unwrap(), MatchSpec::Exact(Box::new([1])), 2);
            }
            ControlEvent::Message(m) if m.kind == MSG_ENTRY => {
                let spec = MatchSpec::Exact(Box::new([m.body[0]]));
                let r = cp.table_entry_read(self.flows.unwrap(), spec);
                self.requests.borrow_mut().push(r);
            }
            ControlEvent::Message(m) if m.kind == MSG_COUNTERS => {
                let (first, count) = (u64::from(m.body[0]), u64::from(m.body[1]));
                let r = cp.counter_read(self.hits.unwrap(), first, count);
                self.requests.borrow_mut().push(r);
            }
            _ => {}
        }
        self.events.borrow_mut().push((cp.now(), event));
    }
}

struct Rig {
    h: Harness<Switch<Reader>>,
    events: Events,
    requests: Rc<RefCell<Vec<u64>>>,
}

impl Rig {
    fn new() -> Rig {
        let events = Events::default();
        let requests = Rc::new(RefCell::new(Vec::new()));
        let prog = Reader {
            flows: None,
            hits: None,
            events: events.clone(),
            requests: requests.clone(),
        };
        let h = Harness::new(Switch::new(Profile::tofino(), prog).unwrap(), 1);
        Rig {
            h,
            events,
            requests,
        }
    }

    fn ask(&mut self, at: Nanos, kind: u32, body: Vec<u8>) {
        self.h.control(at, ControlMessage { kind, body });
    }

    /// The answers so far (not messages, not the start).
    fn answers(&self) -> Vec<(Nanos, ControlEvent<()>)> {
        self.events
            .borrow()
            .iter()
            .filter(|(_, e)| {
                matches!(
                    e,
                    ControlEvent::EntryActivity { .. }
                        | ControlEvent::CounterValues { .. }
                        | ControlEvent::OpFailed { .. }
                )
            })
            .cloned()
            .collect()
    }
}

#[test]
fn entry_activity_arrives_after_the_read_latency() {
    let cp = Profile::tofino().control_plane;
    // The handler's CPU time, then a one-entry hardware read.
    let latency = cp.cpu_per_event + cp.register_op + cp.register_per_entry;
    assert_eq!(latency, 20 * MICROS + 50 * MICROS + 2_580);
    let mut rig = Rig::new();
    // The entry is installed at start + CPU + table write = 40 µs.
    let installed = cp.cpu_per_event + cp.table_write;

    rig.ask(MILLIS, MSG_ENTRY, vec![1]);
    rig.h.advance_to(2 * MILLIS);
    let request = rig.requests.borrow()[0];
    let at = MILLIS + latency;
    let flows = rig.h.device.program().flows.unwrap().id();
    match &rig.answers()[..] {
        [(
            t,
            ControlEvent::EntryActivity {
                request: r,
                table,
                spec,
                hit,
                idle,
            },
        )] => {
            assert_eq!((*t, *r, *table), (at, request, flows));
            assert_eq!(spec, &MatchSpec::Exact(Box::new([1])));
            assert!(!hit, "no traffic yet");
            assert_eq!(*idle, at - installed, "idle since the insert");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn the_hit_flag_is_set_by_traffic_and_reset_by_a_read() {
    let cp = Profile::tofino().control_plane;
    let latency = cp.cpu_per_event + cp.register_op + cp.register_per_entry;
    let mut rig = Rig::new();
    rig.h.send(MILLIS, 0, vec![1; 64]);
    rig.h.send(MILLIS + 500, 0, vec![1; 64]);
    rig.ask(2 * MILLIS, MSG_ENTRY, vec![1]);
    rig.ask(3 * MILLIS, MSG_ENTRY, vec![1]);
    rig.h.send(4 * MILLIS, 0, vec![1; 64]);
    rig.ask(5 * MILLIS, MSG_ENTRY, vec![1]);
    rig.h.advance_to(6 * MILLIS);
    let seen: Vec<(bool, Nanos)> = rig
        .answers()
        .into_iter()
        .map(|(_, e)| match e {
            ControlEvent::EntryActivity { hit, idle, .. } => (hit, idle),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(
        seen,
        vec![
            (true, 2 * MILLIS + latency - (MILLIS + 500)),
            (false, 3 * MILLIS + latency - (MILLIS + 500)),
            (true, 5 * MILLIS + latency - 4 * MILLIS),
        ]
    );
    assert_eq!(rig.h.take().len(), 3, "reads do not disturb forwarding");
}

#[test]
fn reading_a_missing_entry_fails() {
    let mut rig = Rig::new();
    rig.ask(MILLIS, MSG_ENTRY, vec![7]);
    rig.h.advance_to(2 * MILLIS);
    let request = rig.requests.borrow()[0];
    match &rig.answers()[..] {
        [(_, ControlEvent::OpFailed { request: r, error })] => {
            assert_eq!(*r, request);
            assert!(
                error.contains("not found") || error.contains("no entry"),
                "{error}"
            );
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn counters_are_read_with_the_per_entry_latency() {
    let cp = Profile::tofino().control_plane;
    let mut rig = Rig::new();
    for i in 0..3 {
        rig.h.send(MILLIS + i * 100, 0, vec![1; 100]);
    }
    rig.h.send(MILLIS + 400, 0, vec![3; 70]);
    rig.ask(2 * MILLIS, MSG_COUNTERS, vec![0, 4]);
    rig.ask(3 * MILLIS, MSG_COUNTERS, vec![6, 3]); // runs past the end
    rig.h.advance_to(4 * MILLIS);
    let requests = rig.requests.borrow().clone();
    let answers = rig.answers();
    match &answers[0] {
        (
            t,
            ControlEvent::CounterValues {
                request,
                first,
                values,
            },
        ) => {
            assert_eq!(
                *t,
                2 * MILLIS + cp.cpu_per_event + cp.register_op + 4 * cp.register_per_entry
            );
            assert_eq!((*request, *first), (requests[0], 0));
            assert_eq!(values, &vec![(0, 0), (3, 300), (0, 0), (1, 70)]);
        }
        other => panic!("{other:?}"),
    }
    match &answers[1] {
        (_, ControlEvent::OpFailed { request, error }) => {
            assert_eq!(*request, requests[1]);
            assert!(error.contains("out of range"), "{error}");
        }
        other => panic!("{other:?}"),
    }
}
