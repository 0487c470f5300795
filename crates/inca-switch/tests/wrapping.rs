//! A program that wraps others (as ExoPlane's runtime wraps its apps): a
//! selected composite whose app the wrapper picks, `PacketCtx::nest`, the
//! type-erased `DataPlane::merge_u64`, `DataPlane::oracle_contains` (no
//! access), and typed handles of wrapped objects for control writes.

use inca_switch::composite::{BlockDigest, CompositeMeta};
use inca_switch::harness::Harness;
use inca_switch::objects::ObjectId;
use inca_switch::{
    AccessError, ArrayDecl, Block, Composite, ControlEvent, ControlPlane, DataPlane, Declare,
    DeclareError, Gress, Handle, MatchKind, MatchSpec, PacketCtx, ParseError, PortId, Profile,
    Program, RegisterHandle, Switch, TableDecl, TableHandle,
};

/// A block: counts packets in register `r[0]` and counter `c[0]`, looks
/// the frame's second byte up in `t`, forwards to `out` (or to the entry's
/// port on a hit).
#[derive(Clone)]
struct Count {
    out: PortId,
    h: Option<(RegisterHandle<u32>, Handle, TableHandle<PortId>)>,
}

impl Program for Count {
    type Meta = ();
    type Digest = ();
    fn name(&self) -> &str {
        "count"
    }
    fn declare(&mut self, d: &mut Declare) -> Result<(), DeclareError> {
        let t = d.table(TableDecl::new("t", MatchKind::Exact, 1, 16, 4))?;
        let r = d.register(ArrayDecl::new("r", 4).after(&[t.id()]))?;
        let c = d.counter(ArrayDecl::new("c", 4).after(&[t.id()]))?;
        self.h = Some((r, c, t));
        Ok(())
    }
    fn parse(&self, _: Gress, _: &[u8], _: &mut ()) -> Result<(), ParseError> {
        Ok(())
    }
    fn ingress(
        &mut self,
        pkt: &mut PacketCtx<(), ()>,
        dp: &mut DataPlane<'_>,
    ) -> Result<(), AccessError> {
        let Some((r, c, t)) = self.h else {
            return Ok(());
        };
        let k = pkt.header().get(1).copied().unwrap_or(0);
        let port = dp.lookup(t, &[k])?.unwrap_or(self.out);
        dp.register(r, 0, |v| *v += 1)?;
        dp.count(c, 0, 1)?;
        // The port the packet "arrived" on, as the wrapper showed it.
        pkt.forward(port + pkt.ingress_port());
        Ok(())
    }
}

#[derive(Clone, Default)]
struct Meta {
    apps: CompositeMeta,
}

/// First byte: 0 or 1 runs that block (seen as arriving on port 10);
/// 7 merges +5 into `a/r[slot]` (second byte), 8 +3 into `a/c[0]`; 5 asks
/// the oracle whether `a/t` holds the second byte (port 4 yes, 5 no), then
/// runs block a.
#[derive(Clone)]
struct Wrapper {
    apps: Composite,
    ids: Option<(ObjectId, ObjectId, ObjectId)>,
}

impl Program for Wrapper {
    type Meta = Meta;
    type Digest = BlockDigest;
    fn name(&self) -> &str {
        "wrapper"
    }
    fn declare(&mut self, d: &mut Declare) -> Result<(), DeclareError> {
        self.apps.declare_after(d, |_| Vec::new())?;
        let id = |n| d.id_of(n).ok_or(DeclareError::DuplicateName(n.into()));
        self.ids = Some((id("a/r")?, id("a/c")?, id("a/t")?));
        Ok(())
    }
    fn parse(&self, g: Gress, h: &[u8], m: &mut Meta) -> Result<(), ParseError> {
        self.apps.parse(g, h, &mut m.apps)
    }
    fn ingress(
        &mut self,
        pkt: &mut PacketCtx<Meta, BlockDigest>,
        dp: &mut DataPlane<'_>,
    ) -> Result<(), AccessError> {
        let Some((r, c, t)) = self.ids else {
            return Ok(());
        };
        let h = pkt.header().to_vec();
        let (first, second) = (h.first().copied(), h.get(1).copied().unwrap_or(0));
        let app = match first {
            Some(7) => {
                dp.merge_u64(r, u64::from(second), |v| v + 5)?;
                pkt.forward(3);
                return Ok(());
            }
            Some(8) => {
                dp.merge_u64(c, 0, |v| v + 3)?;
                pkt.forward(3);
                return Ok(());
            }
            Some(5) => {
                let hit = dp.oracle_contains(t, &[second]) == Some(true);
                pkt.forward(if hit { 4 } else { 5 });
                0
            }
            Some(a @ (0 | 1)) => u16::from(a),
            _ => return Ok(()),
        };
        let mut m = std::mem::take(&mut pkt.meta.apps);
        self.apps
            .select(&mut m, app, &h)
            .map_err(|_| AccessError::WrongHandle)?;
        let apps = &mut self.apps;
        let port = if first == Some(5) { None } else { Some(10) };
        let (res, _) = pkt.nest(&mut m, port, |inner| apps.ingress(inner, dp));
        pkt.meta.apps = m;
        res
    }
    fn control(&mut self, e: ControlEvent<BlockDigest>, cp: &mut ControlPlane<'_>) {
        match e.split_digest::<BlockDigest>() {
            Ok(ControlEvent::Start) => {
                if let Some((_, _, t)) = self.ids {
                    // A typed handle to the wrapped block's table.
                    let h = TableHandle::<PortId>::of_object(t);
                    cp.table_add(h, MatchSpec::Exact(vec![42].into()), 20);
                    // The wrong type: fails when applied, changes nothing.
                    let bad = TableHandle::<u64>::of_object(t);
                    cp.table_add(bad, MatchSpec::Exact(vec![43].into()), 1);
                }
            }
            Ok(e) => self.apps.control(e, cp),
            Err(d) => self.apps.control(ControlEvent::Digest(d), cp),
        }
    }
}

fn harness() -> Harness<Switch<Wrapper>> {
    let blocks = vec![
        Block::new("a", Count { out: 1, h: None }),
        Block::new("b", Count { out: 2, h: None }),
    ];
    let w = Wrapper {
        apps: Composite::selected("apps", blocks).unwrap(),
        ids: None,
    };
    let mut h = Harness::new(Switch::new(Profile::tofino(), w).unwrap(), 3);
    h.advance_to(1_000_000);
    h
}

fn ports(h: &mut Harness<Switch<Wrapper>>) -> Vec<PortId> {
    h.take().into_iter().map(|t| t.port).collect()
}

fn reg(h: &Harness<Switch<Wrapper>>, name: &str, i: u64) -> u32 {
    let o = h.device.objects();
    let id = o.id_of(name).unwrap();
    o.register_peek(RegisterHandle::<u32>::of_object(id), i)
        .unwrap()
}

#[test]
fn the_wrapper_picks_the_block_and_the_port_it_sees() {
    let mut h = harness();
    for (i, f) in [[0u8, 0], [1, 0], [9, 0], [0, 42]].into_iter().enumerate() {
        h.send(2_000_000 + i as u64 * 1_000, 0, f.to_vec());
    }
    h.advance_to(3_000_000);
    // Block a forwards to 1 + 10 (the port the wrapper showed), b to 2 +
    // 10; byte 9 selects nothing and is dropped; 42 hits a/t → 20 + 10.
    assert_eq!(ports(&mut h), vec![11, 12, 30]);
    assert_eq!((reg(&h, "a/r", 0), reg(&h, "b/r", 0)), (2, 1));
    assert_eq!(h.device.program().apps.counters().classified, vec![2, 1]);
    assert!(h.device.violations().is_empty());
}

#[test]
fn merge_u64_folds_into_registers_and_counters_once_per_pass() {
    let mut h = harness();
    h.send(2_000_000, 0, vec![7, 2]);
    h.send(2_001_000, 0, vec![7, 2]);
    h.send(2_002_000, 0, vec![8, 0]);
    h.send(2_003_000, 0, vec![7, 9]); // slot beyond the array
    h.advance_to(3_000_000);
    assert_eq!(reg(&h, "a/r", 2), 10);
    let o = h.device.objects();
    // The counter grew by 3 packets through the erased path.
    let c = Handle::of_object(o.id_of("a/c").unwrap());
    assert_eq!(o.counter_read(c, 0).unwrap(), (3, 0));
    assert_eq!(ports(&mut h), vec![3, 3, 3]);
    let v = h.device.violations();
    assert_eq!(v.len(), 1, "{v:?}");
}

#[test]
fn the_oracle_is_no_access_and_wrong_typed_handles_change_nothing() {
    let mut h = harness();
    // Oracle on a/t, then block a looks a/t up in the same pass: no
    // double access.
    h.send(2_000_000, 0, vec![5, 42]);
    h.send(2_001_000, 0, vec![5, 43]);
    h.advance_to(3_000_000);
    // 42: oracle yes (4), then block a forwards to 20 + 0 (no port shown).
    // 43: the wrongly typed insert never landed: oracle no, block a to 1.
    assert_eq!(ports(&mut h), vec![20, 1]);
    assert!(h.device.violations().is_empty());
    assert_eq!(
        h.device
            .objects()
            .table_len(h.device.objects().id_of("a/t").unwrap()),
        1
    );
}
