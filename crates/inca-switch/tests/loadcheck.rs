//! The load-time check: small programs with a double access, a missing
//! dependency and a dependency against the data flow are each refused with
//! a finding that names the objects and the path; correct programs pass,
//! and two accesses in "wrong" code order with no data flow between them
//! are not a finding.

use inca_switch::loadcheck::{load_check, LoadCheckOptions, LoadCheckReport};
use inca_switch::probe::{Dependence, FindingKind};
use inca_switch::{
    AccessError, ArrayDecl, CheckHints, ControlEvent, ControlPlane, DataPlane, Declare,
    DeclareError, Gress, KnownViolation, MatchKind, MatchSpec, PacketCtx, ParseError, Profile,
    Program, RegisterHandle, TableDecl, TableHandle,
};

const SEED: u64 = 7;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Mode {
    /// `r` twice in one pass.
    Double,
    /// `r` indexed by `t`'s result, not declared after `t`.
    Missing,
    /// `b` indexed by `a`'s result, `a` declared after `b`.
    Contradict,
    /// `r` indexed by `t`'s result and declared after it.
    Correct,
    /// `r` reached before `t`, declared after it, no data flow between.
    OrderOnly,
    /// Like `Missing`, with the finding declared known.
    KnownMissing,
}

#[derive(Clone)]
struct Probe {
    mode: Mode,
    t: Option<TableHandle<u32>>,
    a: Option<RegisterHandle<u32>>,
    b: Option<RegisterHandle<u32>>,
}

impl Probe {
    fn new(mode: Mode) -> Self {
        Probe {
            mode,
            t: None,
            a: None,
            b: None,
        }
    }
}

/// The UDP destination port of an untagged IPv4 UDP frame.
fn udp_dport(h: &[u8]) -> Option<u16> {
    (h.len() >= 38 && h[12..14] == [8, 0] && h[23] == 17)
        .then(|| u16::from_be_bytes([h[36], h[37]]))
}

impl Program for Probe {
    type Meta = Option<u16>;
    type Digest = ();

    fn name(&self) -> &str {
        "probe"
    }

    fn declare(&mut self, d: &mut Declare) -> Result<(), DeclareError> {
        match self.mode {
            Mode::Contradict => {
                let b = d.register::<u32>(ArrayDecl::new("b", 16))?;
                let a = d.register::<u32>(ArrayDecl::new("a", 16).after(&[b.id()]))?;
                (self.a, self.b) = (Some(a), Some(b));
            }
            _ => {
                let t = d.table::<u32>(TableDecl::new("t", MatchKind::Exact, 2, 32, 16))?;
                let after = match self.mode {
                    Mode::Correct | Mode::OrderOnly => vec![t.id()],
                    _ => vec![],
                };
                self.a = Some(d.register::<u32>(ArrayDecl::new("r", 16).after(&after))?);
                self.t = Some(t);
            }
        }
        Ok(())
    }

    fn parse(&self, _: Gress, h: &[u8], meta: &mut Option<u16>) -> Result<(), ParseError> {
        *meta = udp_dport(h);
        Ok(())
    }

    fn ingress(
        &mut self,
        pkt: &mut PacketCtx<Option<u16>, ()>,
        dp: &mut DataPlane<'_>,
    ) -> Result<(), AccessError> {
        let Some(port) = pkt.meta else {
            return Ok(());
        };
        let key = port.to_be_bytes();
        match (self.mode, self.t, self.a, self.b) {
            (Mode::Double, Some(t), Some(r), _) => {
                dp.lookup(t, &key)?;
                dp.register(r, 0, |v| *v += 1)?;
                if port == 80 {
                    // The bug: a second action on `r` on this path only.
                    dp.register(r, 1, |v| *v += 1)?;
                }
            }
            (Mode::Contradict, _, Some(a), Some(b)) => {
                let x = dp.register(a, u64::from(port % 16), |v| *v)?;
                dp.register(b, u64::from(x % 16), |v| *v += 1)?;
            }
            (Mode::OrderOnly, Some(t), Some(r), _) => {
                dp.register(r, u64::from(port % 16), |v| *v += 1)?;
                dp.lookup(t, &key)?;
            }
            (_, Some(t), Some(r), _) => {
                let i = dp.lookup(t, &key)?.unwrap_or(0);
                dp.register(r, u64::from(i % 16), |v| *v += 1)?;
            }
            _ => {}
        }
        pkt.forward(1);
        Ok(())
    }

    fn control(&mut self, event: ControlEvent<()>, cp: &mut ControlPlane<'_>) {
        if let (ControlEvent::Start, Some(t)) = (event, self.t) {
            cp.table_add(
                t,
                MatchSpec::Exact(5000u16.to_be_bytes().to_vec().into()),
                3,
            );
        }
    }

    fn check_hints(&self) -> CheckHints {
        let mut h = CheckHints::default();
        if self.mode == Mode::KnownMissing {
            h.known
                .push(KnownViolation::new("r", "a test of known violations"));
        }
        h
    }
}

fn run(mode: Mode) -> LoadCheckReport {
    println!("seed {SEED}");
    let r = load_check(
        &Profile::tofino(),
        Probe::new(mode),
        LoadCheckOptions { seed: SEED },
    )
    .expect("loads");
    println!("{r}");
    assert!(r.passes > 0 && r.accesses > 0, "the check ran passes");
    r
}

#[test]
fn a_double_access_on_one_path_is_refused() {
    let r = run(Mode::Double);
    assert_eq!(r.findings.len(), 1, "{r}");
    let f = &r.findings[0];
    assert_eq!(f.kind, FindingKind::DoubleAccess);
    assert_eq!(f.object, "r");
    assert_eq!(f.path, ["t", "r", "r"]);
    assert!(f.packet.contains(":80"), "the path's packet: {}", f.packet);
    let text = f.to_string();
    assert!(
        text.contains("probe: double access: \"r\" is reached twice in one ingress pass"),
        "{text}"
    );
}

#[test]
fn a_missing_dependency_is_refused() {
    let r = run(Mode::Missing);
    assert_eq!(r.findings.len(), 1, "{r}");
    let f = &r.findings[0];
    assert_eq!(
        f.kind,
        FindingKind::DependencyMissing {
            source: "t".into(),
            how: Dependence::Value
        }
    );
    assert_eq!(f.object, "r");
    assert_eq!(f.path, ["t", "r"]);
    assert!(
        f.to_string()
            .contains("dependency missing: \"r\" depends on \"t\""),
        "{f}"
    );
}

#[test]
fn a_dependency_against_the_data_flow_is_refused() {
    let r = run(Mode::Contradict);
    assert_eq!(r.findings.len(), 1, "{r}");
    let f = &r.findings[0];
    assert_eq!(
        f.kind,
        FindingKind::DependencyContradicted {
            source: "a".into(),
            how: Dependence::Value
        }
    );
    assert_eq!(f.object, "b");
    assert!(
        f.to_string().contains(
            "dependency contradicts data flow: \"a\" is declared after \"b\", but \"b\" depends on \"a\""
        ),
        "{f}"
    );
}

#[test]
fn correct_programs_pass() {
    for mode in [Mode::Correct, Mode::OrderOnly] {
        let r = run(mode);
        assert!(r.passed(), "{mode:?}: {r}");
        assert!(r.reruns > 0, "{mode:?}: perturbed re-runs happened");
    }
}

#[test]
fn known_violations_are_reported_not_refused() {
    let r = run(Mode::KnownMissing);
    assert!(r.passed(), "{r}");
    assert_eq!(r.known.len(), 1);
    assert!(r
        .to_string()
        .contains("known violation (a test of known violations)"));
}

#[test]
fn cpu_data_paths_are_skipped() {
    let server = Profile::by_name("server").unwrap();
    let r = load_check(
        &server,
        Probe::new(Mode::Double),
        LoadCheckOptions::default(),
    )
    .unwrap();
    assert!(r.skipped.is_some() && r.passed());
}
