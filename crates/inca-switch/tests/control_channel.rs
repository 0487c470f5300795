//! The control channel's window and batching: the smart NIC reaches the
//! operation rate its profile cites, the switch stays serial.

use inca_switch::device::{MILLIS, SECONDS};
use inca_switch::harness::Harness;
use inca_switch::{
    AccessError, ControlEvent, ControlPlane, DataPlane, Declare, DeclareError, Gress, MatchKind,
    MatchSpec, PacketCtx, ParseError, Profile, Program, Switch, TableDecl, TableHandle,
};

/// At start, installs `writes` entries, all from the one start handler.
#[derive(Clone)]
struct Installer {
    writes: u32,
    table: Option<TableHandle<u32>>,
}

impl Program for Installer {
    type Meta = ();
    type Digest = ();

    fn name(&self) -> &str {
        "installer"
    }

    fn declare(&mut self, decl: &mut Declare) -> Result<(), DeclareError> {
        let size = self.writes as usize;
        self.table = Some(decl.table(TableDecl::new("flows", MatchKind::Exact, 4, 32, size))?);
        Ok(())
    }

    fn parse(&self, _: Gress, _: &[u8], _: &mut ()) -> Result<(), ParseError> {
        Ok(())
    }

    fn ingress(
        &mut self,
        _: &mut PacketCtx<(), ()>,
        _: &mut DataPlane<'_>,
    ) -> Result<(), AccessError> {
        Ok(())
    }

    fn control(&mut self, event: ControlEvent<()>, cp: &mut ControlPlane<'_>) {
        if let ControlEvent::Start = event {
            for i in 0..self.writes {
                let spec = MatchSpec::Exact(Box::new(i.to_be_bytes()));
                cp.table_add(self.table.unwrap(), spec, i);
            }
        }
    }
}

fn installer(profile: Profile, writes: u32) -> Harness<Switch<Installer>> {
    let prog = Installer {
        writes,
        table: None,
    };
    Harness::new(Switch::new(profile, prog).unwrap(), 1)
}

/// Operations applied by time `t`.
fn applied_by(h: &mut Harness<Switch<Installer>>, t: u64) -> u64 {
    h.advance_to(t);
    h.device.stats().cp_ops
}

#[test]
fn the_smartnic_reaches_its_cited_write_rate_with_batching() {
    let profile = Profile::smartnic();
    let cp = profile.control_plane;
    // The cited figures: 20 ms per batched RPC, 64 in flight, 3,200/s.
    assert_eq!(cp.table_write, 20 * MILLIS);
    assert_eq!((cp.max_in_flight, cp.max_ops_per_sec), (64, 3_200));
    assert!(cp.max_batch > 1);
    let mut h = installer(profile, 8_000);
    let at_half = applied_by(&mut h, SECONDS / 2);
    let at_one_and_half = applied_by(&mut h, 3 * SECONDS / 2);
    let rate = at_one_and_half - at_half;
    assert!(
        (3_200 - u64::from(cp.max_batch)..=3_200 + u64::from(cp.max_batch)).contains(&rate),
        "{rate} writes/s"
    );
    assert_eq!(applied_by(&mut h, 4 * SECONDS), 8_000);
    assert_eq!(h.device.stats().cp_op_failures, 0);
    assert_eq!(
        h.device
            .objects()
            .table_len(h.device.program().table.unwrap().id()),
        8_000
    );
}

#[test]
fn a_batch_shares_one_rpc_latency() {
    let profile = Profile::smartnic();
    let cp = profile.control_plane;
    let batch = u64::from(cp.max_batch);
    let mut h = installer(profile, batch as u32);
    // The whole batch takes effect together, one RPC after the handler.
    let done = cp.cpu_per_event + cp.table_write;
    assert_eq!(applied_by(&mut h, done - 1), 0);
    assert_eq!(applied_by(&mut h, done), batch);
}

#[test]
fn a_serial_channel_gives_one_write_per_rpc_latency() {
    // The model before windows and batches: 20 ms per write, about 50/s.
    let mut profile = Profile::smartnic();
    profile.set("control_plane.max_in_flight", "1").unwrap();
    profile.set("control_plane.max_batch", "1").unwrap();
    let mut h = installer(profile, 200);
    assert_eq!(applied_by(&mut h, SECONDS), 49);
}

#[test]
fn the_tofino_channel_is_serial_at_its_cited_rate() {
    let profile = Profile::tofino();
    let cp = profile.control_plane;
    assert_eq!((cp.max_in_flight, cp.max_batch), (1, 1));
    let mut h = installer(profile, 60_000);
    // 20 µs per write, one at a time: 50,000 in a second (after the start
    // handler's 20 µs and the first write's 20 µs).
    let by_one = applied_by(&mut h, SECONDS + cp.cpu_per_event);
    assert_eq!(by_one, 50_000);
}
