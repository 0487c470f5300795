//! Composite programs: namespaced declarations, per-block resource report,
//! and every control event routed back to the block it belongs to.
//!
//! The toy block below uses each demultiplexed mechanism (a timer, a
//! register read, an entry-activity read, a punt with a reason code, a digest, a table write that
//! fails, an addressed message); each of two blocks, run together behind a
//! classifier, must see exactly what it sees alone on its own switch.

use inca_switch::capture::{capture_control, ControlWrite};
use inca_switch::composite::{addressed, ClassifyRule};
use inca_switch::device::{ControlMessage, SECONDS};
use inca_switch::harness::{Harness, Transmitted};
use inca_switch::{
    check, AccessError, ArrayDecl, Block, Composite, ControlEvent, ControlPlane, DataPlane,
    Declare, DeclareError, Gress, MatchKind, MatchSpec, PacketCtx, ParseError, PortId, Profile,
    Program, RegisterHandle, Switch, TableDecl, TableHandle,
};

/// What the toy's control plane saw.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Seen {
    timers: Vec<u64>,
    reads: Vec<Vec<u64>>,
    activity: Vec<bool>,
    punts: Vec<(PortId, u16, Vec<u8>)>,
    digests: Vec<String>,
    failures: usize,
    messages: Vec<u32>,
    foreign_results: usize,
    /// Idle timeouts of the block's own `fwd` table, and of any other.
    idle_own: usize,
    idle_foreign: usize,
}

/// A toy block: counts packets in a register, forwards by a table, punts
/// frames starting with 1 (reason `reason`), digests frames starting with 2.
#[derive(Clone)]
struct Toy<D> {
    out: PortId,
    reason: u16,
    big: usize,
    /// `fwd` entries age out after this long without a hit.
    idle: Option<u64>,
    reg: Option<RegisterHandle<u32>>,
    fwd: Option<TableHandle<PortId>>,
    pending_read: Option<u64>,
    pending_activity: Option<u64>,
    seen: Seen,
    _d: std::marker::PhantomData<D>,
}

impl<D> Toy<D> {
    fn new(out: PortId, reason: u16) -> Self {
        Toy {
            out,
            reason,
            big: 4,
            idle: None,
            reg: None,
            fwd: None,
            pending_read: None,
            pending_activity: None,
            seen: Seen::default(),
            _d: std::marker::PhantomData,
        }
    }
}

impl<D: From<u8> + Clone + std::fmt::Debug + 'static> Program for Toy<D> {
    type Meta = Option<u8>;
    type Digest = D;

    fn name(&self) -> &str {
        "toy"
    }

    fn declare(&mut self, d: &mut Declare) -> Result<(), DeclareError> {
        let mut t = TableDecl::new("fwd", MatchKind::Exact, 1, 16, 4);
        if let Some(idle) = self.idle {
            t = t.idle_timeout(idle);
        }
        let fwd = d.table(t)?;
        self.reg = Some(d.register(ArrayDecl::new("r", self.big).after(&[fwd.id()]))?);
        self.fwd = Some(fwd);
        Ok(())
    }

    fn parse(&self, _: Gress, header: &[u8], meta: &mut Option<u8>) -> Result<(), ParseError> {
        *meta = Some(*header.first().ok_or(ParseError("empty"))?);
        Ok(())
    }

    fn ingress(
        &mut self,
        pkt: &mut PacketCtx<Option<u8>, D>,
        dp: &mut DataPlane<'_>,
    ) -> Result<(), AccessError> {
        let (Some(reg), Some(fwd)) = (self.reg, self.fwd) else {
            return Ok(());
        };
        let first = pkt.meta.unwrap_or(0);
        dp.register(reg, 0, |v| *v += 1)?;
        let port = dp.lookup(fwd, &[0])?.unwrap_or(self.out);
        match first {
            1 if pkt.kind() != inca_switch::PacketKind::FromCpu => pkt.to_cpu(self.reason),
            2 => {
                pkt.digest(D::from(first));
                pkt.forward(port);
            }
            _ => pkt.forward(port),
        }
        Ok(())
    }

    fn control(&mut self, event: ControlEvent<D>, cp: &mut ControlPlane<'_>) {
        let (Some(reg), Some(fwd)) = (self.reg, self.fwd) else {
            return;
        };
        match event {
            ControlEvent::Start => {
                cp.table_add(fwd, MatchSpec::Exact(vec![0].into()), self.out);
                // A duplicate: fails when it takes effect.
                cp.table_add(fwd, MatchSpec::Exact(vec![0].into()), self.out);
                cp.set_timer(cp.now() + SECONDS / 2, 9);
            }
            ControlEvent::Timer { token } => {
                self.seen.timers.push(token);
                self.pending_read = Some(cp.register_read(reg, 0, 1));
                let entry = MatchSpec::Exact(vec![0].into());
                self.pending_activity = Some(cp.table_entry_read(fwd, entry));
            }
            ControlEvent::EntryActivity { request, hit, .. } => {
                if self.pending_activity.take() == Some(request) {
                    self.seen.activity.push(hit);
                } else {
                    self.seen.foreign_results += 1;
                }
            }
            ControlEvent::RegisterValues { request, values } => {
                if self.pending_read.take() == Some(request) {
                    self.seen.reads.push(values);
                } else {
                    self.seen.foreign_results += 1;
                }
            }
            ControlEvent::PacketIn {
                port,
                reason,
                frame,
            } => {
                cp.packet_out(frame.clone(), inca_switch::PacketOutDest::Ingress(port));
                self.seen.punts.push((port, reason, frame));
            }
            ControlEvent::Digest(d) => self.seen.digests.push(format!("{d:?}")),
            ControlEvent::OpFailed { .. } => self.seen.failures += 1,
            ControlEvent::Message(m) => self.seen.messages.push(m.kind),
            ControlEvent::IdleTimeout { table, .. } if table == fwd.id() => self.seen.idle_own += 1,
            ControlEvent::IdleTimeout { .. } => self.seen.idle_foreign += 1,
            _ => {}
        }
    }
}

type ToyA = Toy<u32>;
type ToyB = Toy<u64>;

fn composite() -> Composite {
    let rules = ClassifyRule::parse_list("a:port=1;b:port=2").unwrap();
    Composite::classified(
        "two",
        vec![
            Block::new("a", ToyA::new(5, 7)),
            Block::new("b", ToyB::new(6, 7)),
        ],
        rules,
        None,
    )
    .unwrap()
}

/// Frames for a block: forward, punt, digest, in turn (from 10 ms, once the
/// classifier's entries are in: before, packets are unclassified).
fn traffic(port: PortId) -> Vec<(u64, PortId, Vec<u8>)> {
    (0..12u8)
        .map(|i| {
            (
                SECONDS / 100 + u64::from(i) * 100_000,
                port,
                vec![i % 3, i, 0xaa, port as u8],
            )
        })
        .collect()
}

fn run<D: inca_switch::Device>(
    dev: D,
    frames: &[(u64, PortId, Vec<u8>)],
    msgs: &[ControlMessage],
) -> Harness<D> {
    let mut h = Harness::new(dev, 3);
    for (at, port, f) in frames {
        h.send(*at, *port, f.clone());
    }
    for m in msgs {
        h.control(SECONDS, m.clone());
    }
    h.advance_to(3 * SECONDS);
    h
}

fn sorted(mut t: Vec<Transmitted>) -> Vec<(PortId, Vec<u8>)> {
    let mut v: Vec<_> = t.drain(..).map(|t| (t.port, t.frame)).collect();
    v.sort();
    v
}

#[test]
fn each_block_sees_what_it_sees_alone() {
    let (ta, tb) = (traffic(1), traffic(2));
    let mut both: Vec<_> = ta.iter().chain(&tb).cloned().collect();
    both.sort_by_key(|f| f.0);
    // Unclassified: dropped and counted.
    both.push((SECONDS / 50, 3, vec![0, 0]));
    let msg = ControlMessage {
        kind: 77,
        body: vec![],
    };
    let sw = Switch::new(Profile::tofino(), composite()).unwrap();
    let mut h = run(sw, &both, &[addressed("b", msg.clone()).unwrap()]);
    let mut ha = run(
        Switch::new(Profile::tofino(), ToyA::new(5, 7)).unwrap(),
        &ta,
        &[],
    );
    let mut hb = run(
        Switch::new(Profile::tofino(), ToyB::new(6, 7)).unwrap(),
        &tb,
        &[msg],
    );

    let out = sorted(h.take());
    let alone: Vec<_> = {
        let mut v = sorted(ha.take());
        v.extend(sorted(hb.take()));
        v.sort();
        v
    };
    assert_eq!(out, alone);
    let c = h.device.program();
    let (a, b) = (c.block::<ToyA>("a").unwrap(), c.block::<ToyB>("b").unwrap());
    assert_eq!(a.seen, ha.device.program().seen);
    assert_eq!(b.seen, hb.device.program().seen);
    // And the routing was exercised, not vacuous.
    assert_eq!(a.seen.timers, [9]);
    assert_eq!(
        a.seen.reads,
        [vec![16]],
        "12 packets and 4 re-injected punts"
    );
    assert_eq!(a.seen.activity, [true], "the forwarding entry was hit");
    assert_eq!(b.seen.activity, [true]);
    assert_eq!(a.seen.foreign_results + b.seen.foreign_results, 0);
    assert_eq!(a.seen.punts.len(), 4);
    assert_eq!(
        a.seen.punts[0].1, 7,
        "the block gets its own reason code back"
    );
    assert_eq!(a.seen.digests, ["2"; 4]);
    assert_eq!(a.seen.failures, 1);
    assert!(a.seen.messages.is_empty());
    assert_eq!(b.seen.messages, [77]);
    assert_eq!(c.counters().unclassified, 1);
    assert_eq!(c.counters().classify_install_failures, 0);
    // 12 packets and 4 re-injected punts each.
    assert_eq!(c.counters().classified, [16, 16]);
    // The report carries each block's counters under its name.
    let r = c.report();
    assert!(r.counters.contains(&("composite/unclassified".into(), 1)));
}

#[test]
fn declarations_are_namespaced_and_reported_per_block() {
    let p = check(&Profile::tofino(), &mut composite()).unwrap();
    for name in ["classifier/classify", "a/fwd", "a/r", "b/fwd", "b/r"] {
        assert!(p.object(name).is_some(), "{name}");
    }
    let blocks: Vec<_> = p
        .blocks
        .iter()
        .map(|b| (b.block.as_str(), b.objects))
        .collect();
    assert_eq!(blocks, [("classifier", 1), ("a", 2), ("b", 2)]);
    // Every app object is placed after the classifier.
    assert!(
        p.object("a/fwd").unwrap().first_stage()
            > p.object("classifier/classify").unwrap().last_stage()
    );
    let text = p.to_string();
    assert!(
        text.contains("block") && text.contains("classifier"),
        "{text}"
    );
    // Per-block sums add up to the whole.
    let sum: inca_switch::resources::ResourceVec = p.blocks.iter().map(|b| b.used).sum();
    assert_eq!(sum, p.used);

    // A block too big: the error names the block and the object.
    let mut big = ToyA::new(5, 7);
    big.big = 1 << 30;
    let mut c = Composite::pipeline("p", vec![Block::new("huge", big)]).unwrap();
    let e = check(&Profile::tofino(), &mut c).unwrap_err().to_string();
    assert!(e.contains("\"huge/r\""), "{e}");
}

#[test]
fn bad_composites_are_refused() {
    let r = |s: &str| ClassifyRule::parse_list(s).unwrap();
    let blocks = || {
        vec![
            Block::new("a", ToyA::new(5, 7)),
            Block::new("a", ToyA::new(5, 7)),
        ]
    };
    assert!(Composite::pipeline("p", blocks()).is_err());
    assert!(Composite::pipeline("p", vec![]).is_err());
    let one = || vec![Block::new("a", ToyA::new(5, 7))];
    assert!(Composite::classified("c", one(), r("x:*"), None).is_err());
    assert!(Composite::classified("c", one(), r("a:*"), Some("x")).is_err());
    let reserved = vec![Block::new("classifier", ToyA::new(5, 7))];
    assert!(Composite::classified("c", reserved, r("classifier:*"), None).is_err());
    let mut d = Declare::default();
    let e = d.in_block("a/b", &[], |_| Ok(())).unwrap_err();
    assert!(matches!(e, DeclareError::Invalid { .. }));
}

#[test]
fn a_pipeline_runs_every_block_in_order() {
    // Both toys count every packet; the later block's forwarding wins.
    let c = Composite::pipeline(
        "p",
        vec![
            Block::new("a", ToyA::new(5, 7)),
            Block::new("b", ToyB::new(6, 7)),
        ],
    )
    .unwrap();
    let frames: Vec<_> = (0..3u64)
        .map(|i| (SECONDS / 100 + i, 1, vec![0, i as u8]))
        .collect();
    let mut h = run(Switch::new(Profile::tofino(), c).unwrap(), &frames, &[]);
    let out = h.take();
    assert_eq!(out.len(), 3);
    assert!(out.iter().all(|t| t.port == 6));
    let c = h.device.program();
    assert_eq!(c.block::<ToyA>("a").unwrap().seen.reads, [vec![3]]);
    assert_eq!(c.block::<ToyB>("b").unwrap().seen.reads, [vec![3]]);
}

#[test]
fn capture_collects_a_blocks_writes_without_applying_them() {
    let mut toy = ToyA::new(5, 7);
    toy.declare(&mut Declare::default()).unwrap();
    let timing = Profile::tofino().control_plane;
    let cap = capture_control(&mut toy, ControlEvent::Start, 100, &timing);
    let writes: Vec<_> = cap.writes().collect();
    assert_eq!(writes.len(), 2);
    match writes[0] {
        ControlWrite::TableAdd { spec, .. } => assert_eq!(spec, &MatchSpec::Exact(vec![0].into())),
        w => panic!("not a table add: {w:?}"),
    }
    assert_eq!(writes[0].action::<PortId>(), Some(&5));
    assert_eq!(writes[0].action::<u32>(), None);
    assert_eq!(cap.timers, [(100 + SECONDS / 2, 9)]);

    // A composite's capture splits by block through the request ids.
    let mut c = composite();
    c.declare(&mut Declare::default()).unwrap();
    let cap = capture_control(&mut c, ControlEvent::Start, 0, &timing);
    let owners: Vec<_> = cap
        .ops
        .iter()
        .map(|o| c.block_of_request(o.request))
        .collect();
    assert_eq!(
        owners,
        [None, None, Some("a"), Some("a"), Some("b"), Some("b")]
    );

    // Replaying a capture onto a running switch applies it.
    struct Replayer(Option<inca_switch::capture::Captured>, ToyA);
    impl Clone for Replayer {
        fn clone(&self) -> Self {
            Replayer(None, self.1.clone())
        }
    }
    impl Program for Replayer {
        type Meta = Option<u8>;
        type Digest = u32;
        fn name(&self) -> &str {
            "replayer"
        }
        fn declare(&mut self, d: &mut Declare) -> Result<(), DeclareError> {
            self.1.declare(d)
        }
        fn parse(&self, g: Gress, h: &[u8], m: &mut Option<u8>) -> Result<(), ParseError> {
            self.1.parse(g, h, m)
        }
        fn ingress(
            &mut self,
            p: &mut PacketCtx<Option<u8>, u32>,
            dp: &mut DataPlane<'_>,
        ) -> Result<(), AccessError> {
            self.1.ingress(p, dp)
        }
        fn control(&mut self, e: ControlEvent<u32>, cp: &mut ControlPlane<'_>) {
            if let (ControlEvent::Start, Some(c)) = (e, self.0.take()) {
                c.replay(cp);
            }
        }
    }
    let mut source = ToyA::new(4, 7);
    source.declare(&mut Declare::default()).unwrap();
    let cap = capture_control(&mut source, ControlEvent::Start, 0, &timing);
    let mut r = Replayer(Some(cap), ToyA::new(5, 7));
    r.declare(&mut Declare::default()).unwrap();
    // Switch::new declares again on the program it is given; the handles are
    // the same, so the captured writes name the right objects.
    let sw = Switch::new(Profile::tofino(), r).unwrap();
    let mut h = run(sw, &[(SECONDS, 1, vec![0])], &[]);
    let out = h.take();
    assert_eq!(out.len(), 1);
    assert_eq!(
        out[0].port, 4,
        "the replayed entry (port 4) forwards, not the default 5"
    );
}

#[test]
fn after_a_restart_the_classifier_and_the_blocks_start_again() {
    let sw = Switch::new(Profile::tofino(), composite()).unwrap();
    let mut h = run(sw, &traffic(1), &[]);
    assert_eq!(h.take().len(), 12);
    h.restart(4 * SECONDS);
    let later: Vec<_> = traffic(2)
        .into_iter()
        .map(|(at, p, f)| (at + 4 * SECONDS, p, f))
        .collect();
    for (at, port, f) in &later {
        h.send(*at, *port, f.clone());
    }
    h.advance_to(6 * SECONDS);
    let out = h.take();
    assert_eq!(out.len(), 12, "classified and forwarded after the restart");
    assert!(out.iter().all(|t| t.port == 6));
    let c = h.device.program();
    assert!(
        c.block::<ToyA>("a").unwrap().seen.punts.is_empty(),
        "state lost in the crash"
    );
    let b = c.block::<ToyB>("b").unwrap();
    assert_eq!((b.seen.punts.len(), b.seen.timers.len()), (4, 1));
}

#[test]
fn an_idle_timeout_goes_to_the_block_that_owns_the_table() {
    let mut b = ToyB::new(6, 7);
    b.idle = Some(SECONDS / 10);
    let mut a = ToyA::new(5, 7);
    a.idle = Some(10 * SECONDS);
    let rules = ClassifyRule::parse_list("a:port=1;b:port=2").unwrap();
    let c = Composite::classified(
        "two",
        vec![Block::new("a", a), Block::new("b", b)],
        rules,
        None,
    )
    .unwrap();
    let h = run(Switch::new(Profile::tofino(), c).unwrap(), &[], &[]);
    let c = h.device.program();
    let (a, b) = (c.block::<ToyA>("a").unwrap(), c.block::<ToyB>("b").unwrap());
    assert_eq!((b.seen.idle_own, b.seen.idle_foreign), (1, 0));
    assert_eq!((a.seen.idle_own, a.seen.idle_foreign), (0, 0));
}
