//! Control events of switch-served packets (spec §5.4, last paragraph):
//! the hub forwards each (EVENT_FWD) to the daemon of the flow's primary,
//! or its replica while the primary is down, and drops it (counted) with
//! neither; the daemon runs the app's control logic on it and its writes
//! go through the hub — a DELETE of an entry that backs a switch-resident
//! flow first evicts that flow in two phases (§5.5). Sans-IO: the hub and
//! daemons of `hub_rig`, seeds printed.

mod hub_rig;

use hub_rig::{fm_caps, test_apps, Chaos, Rig, FLOW_OBJ, MS, S};
use inca_exoplane::daemon::DaemonInput;
use inca_exoplane::hub::app::{placement, shard};
use inca_exoplane::hub::check::{check_p3, check_p4_log};
use inca_exoplane::hub::msg::DaemonMsg;
use inca_exoplane::hub::oplog::EntryKey;
use inca_exoplane::hub::{HubConfig, HubInput, HubOutput, T_FLUSH};
use inca_exoplane::ids::{AppId, UnionKey};

const APP: AppId = AppId(2);

fn rig(seed: u64) -> Rig {
    println!("seed {seed}");
    let mut rig = Rig::new(seed, 3, HubConfig::new(3), test_apps, fm_caps());
    rig.run_until(100 * MS);
    rig
}

/// Sets `uk` up through its shard's daemon and promotes it to the switch.
fn promoted(rig: &mut Rig, uk: &UnionKey) {
    rig.miss(APP, uk.clone(), vec![0, 7]);
    let t = rig.now + 200 * MS;
    rig.run_until(t);
    let p = rig.route(APP, uk).expect("a live device");
    rig.daemons[usize::from(p.0)].as_mut().unwrap().handle(
        rig.now,
        DaemonInput::Report {
            app: APP,
            uk: uk.clone(),
            estimate: 1000,
            at: rig.now,
            since: None,
            previous_window: false,
        },
    );
    rig.drain_daemon(p);
    let t = rig.now + 300 * MS;
    rig.run_until(t);
    assert!(rig.hub.present_flows(APP).contains(uk), "promoted");
    assert!(rig.switch.fm.contains_key(&(APP, uk.clone())));
}

/// The flow's entry is gone from the switch (FM and table), the hub and
/// every device; P3/P4 hold over the hub's log.
fn gone_everywhere(rig: &mut Rig, uk: &UnionKey) {
    let key = EntryKey {
        app: APP,
        obj: FLOW_OBJ,
        key: uk.0.clone(),
    };
    assert!(
        !rig.switch.fm.contains_key(&(APP, uk.clone())),
        "FM evicted"
    );
    assert!(
        !rig.switch.entries.contains_key(&key),
        "switch entry removed"
    );
    assert!(rig.hub.entry(&key).is_none(), "hub directory entry deleted");
    for (i, d) in rig.daemons.iter().enumerate() {
        if let Some(d) = d {
            assert_eq!(
                d.applied_version(APP, FLOW_OBJ, &uk.0),
                None,
                "pdev {i} still holds the entry"
            );
        }
    }
    rig.check_converged();
    assert!(rig.violations.is_empty(), "{:#?}", rig.violations);
    check_p3(rig.hub.op_log(), T_FLUSH).expect("P3");
    check_p4_log(rig.hub.op_log()).expect("P4");
}

#[test]
fn an_event_of_a_switch_served_flow_deletes_its_entry_everywhere_after_eviction() {
    let mut rig = rig(11);
    let uk = Rig::uk(77);
    promoted(&mut rig, &uk);
    let evictions = rig.hub.stats().evictions;
    rig.switch_event(APP, &uk);
    rig.run_until(rig.now + S);
    assert_eq!(rig.events_delivered, 1);
    assert_eq!(rig.hub.stats().events_fwd, 1);
    assert_eq!(
        rig.hub.stats().evictions,
        evictions + 1,
        "two-phase eviction ran"
    );
    let (primary, _) = placement(shard(APP, &uk, 3), 3);
    let d = rig.daemons[usize::from(primary.0)].as_ref().unwrap();
    assert_eq!((d.stats().events, d.stats().event_writes_ok), (1, 1));
    gone_everywhere(&mut rig, &uk);
}

#[test]
fn with_the_primary_down_the_replica_gets_the_event() {
    let mut rig = rig(12);
    let uk = Rig::uk(78);
    promoted(&mut rig, &uk);
    let (primary, replica) = placement(shard(APP, &uk, 3), 3);
    rig.crash(primary, true, 60 * S);
    rig.run_until(rig.now + 10 * MS);
    rig.switch_event(APP, &uk);
    rig.run_until(rig.now + S);
    let r = rig.daemons[usize::from(replica.0)].as_ref().unwrap();
    assert_eq!((r.stats().events, r.stats().event_writes_ok), (1, 1));
    gone_everywhere(&mut rig, &uk);
}

#[test]
fn the_hub_routes_events_to_the_primary_then_the_replica_and_counts_the_rest() {
    let mut rig = rig(13);
    let uk = Rig::uk(5);
    let (primary, replica) = placement(shard(APP, &uk, 3), 3);
    let target = |rig: &mut Rig| {
        rig.hub.handle(
            rig.now,
            HubInput::Event {
                app: APP,
                uk: uk.clone(),
                frame: vec![9],
            },
        );
        std::iter::from_fn(|| rig.hub.poll_output()).find_map(|o| match o {
            HubOutput::EventFwd { pdev, app, frame } => {
                assert_eq!((app, frame), (APP, vec![9]));
                Some(pdev)
            }
            _ => None,
        })
    };
    assert_eq!(target(&mut rig), Some(primary));
    rig.hub
        .handle(rig.now, HubInput::PortDown { pdev: primary });
    assert_eq!(target(&mut rig), Some(replica));
    rig.hub
        .handle(rig.now, HubInput::PortDown { pdev: replica });
    assert_eq!(target(&mut rig), None);
    // An app the hub does not know.
    rig.hub.handle(
        rig.now,
        HubInput::Event {
            app: AppId(99),
            uk: uk.clone(),
            frame: vec![],
        },
    );
    let s = rig.hub.stats();
    assert_eq!((s.events_fwd, s.events_dropped), (2, 2));
}

#[test]
fn a_daemon_sends_an_events_writes_and_counts_their_ack() {
    let mut rig = rig(14);
    let uk = Rig::uk(9);
    let p = rig.route(APP, &uk).unwrap();
    let d = rig.daemons[usize::from(p.0)].as_mut().unwrap();
    // An event whose logic writes nothing: handled, nothing sent.
    d.handle(
        rig.now,
        DaemonInput::Event {
            app: APP,
            uk: uk.clone(),
            frame: vec![9],
        },
    );
    assert!(d.poll_output().is_none());
    let mut frame = vec![2, 0];
    frame.extend_from_slice(&uk.0);
    d.handle(
        rig.now,
        DaemonInput::Event {
            app: APP,
            uk: uk.clone(),
            frame,
        },
    );
    let out = d.poll_output();
    let Some(inca_exoplane::daemon::DaemonOutput::ToHub {
        msg: DaemonMsg::WriteReq { writes, .. },
        ..
    }) = out
    else {
        panic!("{out:?}");
    };
    assert_eq!(writes.len(), 1);
    assert_eq!(
        writes[0].op,
        inca_exoplane::hub::msg::WriteOp::Delete,
        "{writes:?}"
    );
    // Unknown app: dropped, counted.
    d.handle(
        rig.now,
        DaemonInput::Event {
            app: AppId(99),
            uk,
            frame: vec![2],
        },
    );
    let s = d.stats().clone();
    assert_eq!((s.events, s.event_writes, s.events_dropped), (2, 1, 1));
    // The ack (none here: the message was taken off the rig) times out.
    rig.run_until(rig.now + 2 * S);
    let d = rig.daemons[usize::from(p.0)].as_ref().unwrap();
    assert_eq!(d.stats().event_writes_failed, 1);
}

#[test]
fn chaos_with_events_keeps_p3_p4_and_converges() {
    for seed in 100..102 {
        println!("seed {seed}");
        let mut rig = Rig::new(seed, 4, HubConfig::new(4), test_apps, fm_caps());
        rig.chaos = Some(Chaos {
            p_event: 0.05,
            ..Chaos::default()
        });
        rig.run_until(8 * S);
        rig.chaos = None;
        let end = rig.now + 12 * S;
        rig.run_until(end);
        rig.check_converged();
        assert!(
            rig.violations.is_empty(),
            "seed {seed}: {:#?}",
            &rig.violations[..rig.violations.len().min(10)]
        );
        check_p3(rig.hub.op_log(), T_FLUSH).expect("P3");
        check_p4_log(rig.hub.op_log()).expect("P4");
        let s = rig.hub.stats();
        println!(
            "  events raised {} forwarded {} dropped {} delivered {}",
            rig.events_raised, s.events_fwd, s.events_dropped, rig.events_delivered
        );
        assert!(rig.events_raised > 50 && rig.events_delivered > 30);
        assert_eq!(rig.events_raised, s.events_fwd + s.events_dropped);
    }
}
