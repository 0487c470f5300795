//! Focused tests of the hub's and daemon's named limits and timers: the
//! two-phase order with `T_FLUSH`, refcounts of shared entries, the 10 %
//! hysteresis, the promotion rate limit, the 2 s holder timeout, resend
//! after a session reset, REBUILDING with DUMP/REJOIN, and on the daemon
//! the 16-frame buffer, the 1 s setup timeout, version ordering and the
//! θ-exact, once-per-window, promotable-only reports. Deterministic: no
//! randomness.

mod hub_rig;

use hub_rig::{TestApp, FLOW_OBJ, MS, S, TENANT_OBJ};
use inca_exoplane::daemon::{
    ControlLogic, Daemon, DaemonConfig, DaemonInput, DaemonOutput, DeviceOp, HUB_SILENCE,
    MAX_BUFFERED, SETUP_TIMEOUT, THETA, T_WIN,
};
use inca_exoplane::hub::msg::{DaemonMsg, EntryRec, HubMsg, Write, WriteOp, WriteStatus};
use inca_exoplane::hub::{
    DeviceStatus, Hub, HubApp, HubConfig, HubEvent, HubInput, HubOutput, SwitchOp, SwitchOpId,
    HOLDER_TIMEOUT, PING_INTERVAL, PING_MISSES, PROMOTION_INTERVAL, T_FLUSH,
};
use inca_exoplane::ids::{AppId, Pdev, UnionKey};

const APP: AppId = AppId(1);

fn hub(n: u8, cap: u32) -> Hub {
    let apps = vec![HubApp {
        keys: Box::new(TestApp::new(1, 64, 8)),
        fm_capacity: cap,
    }];
    Hub::new(HubConfig::new(n), apps, 0).unwrap()
}

fn drain(h: &mut Hub) -> Vec<HubOutput> {
    std::iter::from_fn(|| h.poll_output()).collect()
}

fn hello(h: &mut Hub, now: u64, p: u16, lost: bool) -> Vec<HubOutput> {
    h.handle(
        now,
        HubInput::Daemon {
            pdev: Pdev(p),
            req_id: 0,
            msg: DaemonMsg::Hello {
                pdev: Pdev(p),
                caps: 0,
                lost_state: lost,
            },
        },
    );
    drain(h)
}

/// Answers every PING in the hub's outputs; returns the other outputs.
fn pong_all(h: &mut Hub, now: u64) -> Vec<HubOutput> {
    let mut rest = Vec::new();
    for o in drain(h) {
        match o {
            HubOutput::ToDaemon(td) if matches!(td.msg, HubMsg::Ping { .. }) => {
                let HubMsg::Ping { ts } = td.msg else {
                    unreachable!()
                };
                h.handle(
                    now,
                    HubInput::Daemon {
                        pdev: td.pdev,
                        req_id: td.req_id,
                        msg: DaemonMsg::Pong { ts },
                    },
                );
            }
            o => rest.push(o),
        }
    }
    rest
}

fn uk(t: u8, f: u8) -> UnionKey {
    UnionKey(vec![t, 0, 0, f])
}

fn setup_writes(u: &UnionKey) -> Vec<Write> {
    TestApp::new(1, 64, 8).writes_for(u, &[0, 7])
}

/// Sets `u` up through the hub, answering every WRITE_APPLY at once.
fn setup_flow(h: &mut Hub, now: u64, u: &UnionKey) {
    h.handle(
        now,
        HubInput::Daemon {
            pdev: Pdev(0),
            req_id: 99,
            msg: DaemonMsg::WriteReq {
                app: APP,
                uk: u.clone(),
                writes: setup_writes(u),
            },
        },
    );
    let mut acked = false;
    let mut todo = drain(h);
    while let Some(o) = todo.pop() {
        let HubOutput::ToDaemon(td) = o else { continue };
        match td.msg {
            HubMsg::WriteApply { .. } => {
                h.handle(
                    now,
                    HubInput::Daemon {
                        pdev: td.pdev,
                        req_id: td.req_id,
                        msg: DaemonMsg::WriteApplied { ok: true },
                    },
                );
                todo.extend(drain(h));
            }
            HubMsg::WriteAck { results } => {
                assert!(results.iter().all(|(s, _)| *s != WriteStatus::Failed));
                acked = true;
            }
            _ => {}
        }
    }
    assert!(acked, "setup of {u:?} not acknowledged");
}

fn report(h: &mut Hub, now: u64, u: &UnionKey, estimate: u32, elapsed_us: u32) -> Vec<HubOutput> {
    h.handle(
        now,
        HubInput::Daemon {
            pdev: Pdev(0),
            req_id: 1,
            msg: DaemonMsg::PromoteReport {
                app: APP,
                uk: u.clone(),
                estimate,
                elapsed_us,
            },
        },
    );
    drain(h)
}

/// Switch operations other than the periodic counter reads.
fn switch_ops(outs: &[HubOutput]) -> Vec<(SwitchOpId, SwitchOp)> {
    outs.iter()
        .filter_map(|o| match o {
            HubOutput::Switch {
                op: SwitchOp::ReadFmCounters { .. },
                ..
            } => None,
            HubOutput::Switch { id, op } => Some((*id, op.clone())),
            _ => None,
        })
        .collect()
}

fn ack(h: &mut Hub, now: u64, id: SwitchOpId) -> Vec<HubOutput> {
    h.handle(now, HubInput::SwitchAck { id, ok: true });
    drain(h)
}

/// Promotes `u` acking every switch op at `now`; returns the FM add id.
fn promote(h: &mut Hub, now: u64, u: &UnionKey, estimate: u32) {
    let mut ops = switch_ops(&report(h, now, u, estimate, 1_000_000));
    while let Some((id, _)) = ops.pop() {
        ops.extend(switch_ops(&ack(h, now, id)));
    }
}

#[test]
fn fm_add_waits_for_every_install_ack_and_removal_waits_t_flush() {
    let mut h = hub(2, 8);
    hello(&mut h, 0, 0, false);
    hello(&mut h, 0, 1, false);
    let u = uk(1, 1);
    setup_flow(&mut h, 0, &u);
    let ops = switch_ops(&report(&mut h, 0, &u, 100, 1_000_000));
    assert_eq!(ops.len(), 2, "{ops:?}");
    assert!(ops
        .iter()
        .all(|(_, op)| matches!(op, SwitchOp::InstallEntry { .. })));
    assert!(
        switch_ops(&ack(&mut h, 10, ops[0].0)).is_empty(),
        "FM add after one ack"
    );
    let fm = switch_ops(&ack(&mut h, 20, ops[1].0));
    assert!(
        matches!(fm.as_slice(), [(_, SwitchOp::FmAdd { .. })]),
        "{fm:?}"
    );
    ack(&mut h, 30, fm[0].0);
    assert_eq!(h.present_flows(APP), vec![u.clone()]);
    h.handle(
        40,
        HubInput::FmIdle {
            app: APP,
            uk: u.clone(),
        },
    );
    let del = switch_ops(&drain(&mut h));
    assert!(matches!(del.as_slice(), [(_, SwitchOp::FmDelete { .. })]));
    let t0 = 1_000;
    assert!(ack(&mut h, t0, del[0].0).is_empty());
    h.handle_timeout(t0 + T_FLUSH - 1);
    assert!(
        switch_ops(&drain(&mut h)).is_empty(),
        "removal before T_flush"
    );
    h.handle_timeout(t0 + T_FLUSH);
    let rm = switch_ops(&drain(&mut h));
    // The table entry goes at once; the shared register is read first and
    // folded into S_cp (§5.6 lifecycle), then its slot is removed.
    assert_eq!(rm.len(), 2, "{rm:?}");
    assert!(matches!(rm[0].1, SwitchOp::RemoveEntry { ref entry, .. } if entry.obj == FLOW_OBJ));
    let SwitchOp::ReadRegister { entry: tenant, .. } = rm[1].1.clone() else {
        panic!("{rm:?}");
    };
    assert_eq!(tenant.obj, TENANT_OBJ);
    h.handle(
        t0 + T_FLUSH + 10,
        HubInput::RegisterRead {
            entry: tenant.clone(),
            value: 77,
        },
    );
    let rm2 = switch_ops(&drain(&mut h));
    assert!(
        matches!(rm2.as_slice(), [(_, SwitchOp::RemoveEntry { entry, .. })] if *entry == tenant),
        "{rm2:?}"
    );
    assert_eq!(h.sync().s_cp(&tenant), Some(77));
    for (id, _) in rm.iter().take(1).chain(&rm2) {
        ack(&mut h, t0 + T_FLUSH + 20, *id);
    }
    // Promoted again, the register is installed at S_cp.
    let ops = switch_ops(&report(&mut h, 2 * S, &u, 100, 1_000_000));
    let value = ops.iter().find_map(|(_, op)| match op {
        SwitchOp::InstallEntry { entry, value, .. } if *entry == tenant => Some(value.clone()),
        _ => None,
    });
    assert_eq!(value, Some(vec![0, 0, 0, 77]), "{ops:?}");
}

#[test]
fn shared_entry_leaves_the_switch_only_at_refcount_zero() {
    let mut h = hub(2, 8);
    hello(&mut h, 0, 0, false);
    hello(&mut h, 0, 1, false);
    let (a, b) = (uk(3, 1), uk(3, 2));
    setup_flow(&mut h, 0, &a);
    setup_flow(&mut h, 0, &b);
    promote(&mut h, 0, &a, 100);
    promote(&mut h, 2 * PROMOTION_INTERVAL, &b, 100);
    let tenant = inca_exoplane::hub::oplog::EntryKey {
        app: APP,
        obj: TENANT_OBJ,
        key: vec![3],
    };
    assert_eq!(h.entry(&tenant).unwrap().refcount(), 2);
    let evict = |h: &mut Hub, u: &UnionKey, t: u64| -> Vec<SwitchOp> {
        h.handle(
            t,
            HubInput::FmIdle {
                app: APP,
                uk: u.clone(),
            },
        );
        let del = switch_ops(&drain(h));
        ack(h, t, del[0].0);
        h.handle_timeout(t + T_FLUSH);
        switch_ops(&drain(h))
            .into_iter()
            .map(|(_, op)| op)
            .collect()
    };
    let first = evict(&mut h, &a, 100 * MS);
    assert!(
        matches!(first.as_slice(), [SwitchOp::RemoveEntry { entry, .. }] if entry.obj == FLOW_OBJ),
        "only a's own entry leaves: {first:?}"
    );
    assert_eq!(h.entry(&tenant).unwrap().refcount(), 1);
    let second = evict(&mut h, &b, 200 * MS);
    assert_eq!(
        second.len(),
        2,
        "b's entry and the tenant entry leave: {second:?}"
    );
}

#[test]
fn full_fm_admits_only_a_rate_10_percent_above_the_victim() {
    let mut h = hub(2, 1);
    hello(&mut h, 0, 0, false);
    hello(&mut h, 0, 1, false);
    let (a, b) = (uk(1, 1), uk(2, 2));
    setup_flow(&mut h, 0, &a);
    setup_flow(&mut h, 0, &b);
    promote(&mut h, 0, &a, 1000); // 1,000 packets/s
    let t = 10 * MS;
    let outs = report(&mut h, t, &b, 1090, 1_000_000);
    assert!(
        switch_ops(&outs).is_empty(),
        "1.09 × the victim's rate must not evict it"
    );
    let outs = report(&mut h, 2 * t, &b, 1110, 1_000_000);
    let ops = switch_ops(&outs);
    assert!(
        ops.iter()
            .any(|(_, op)| matches!(op, SwitchOp::FmDelete { .. })),
        "{ops:?}"
    );
    assert!(ops
        .iter()
        .any(|(_, op)| matches!(op, SwitchOp::InstallEntry { .. })));
}

#[test]
fn promotions_are_spaced_by_the_rate_limit() {
    let mut h = hub(2, 8);
    hello(&mut h, 0, 0, false);
    hello(&mut h, 0, 1, false);
    let (a, b) = (uk(1, 1), uk(2, 2));
    setup_flow(&mut h, 0, &a);
    setup_flow(&mut h, 0, &b);
    let t = 5 * MS;
    assert!(!switch_ops(&report(&mut h, t, &a, 100, 1_000)).is_empty());
    assert!(
        switch_ops(&report(&mut h, t, &b, 100, 1_000)).is_empty(),
        "second in the same ms"
    );
    assert_eq!(h.poll_timeout(), Some(t + PROMOTION_INTERVAL));
    h.handle_timeout(t + PROMOTION_INTERVAL);
    assert!(
        !switch_ops(&drain(&mut h)).is_empty(),
        "promoted 1 ms later"
    );
}

#[test]
fn silent_holder_is_declared_dead_after_the_holder_timeout() {
    let mut h = hub(2, 8);
    hello(&mut h, 0, 0, false);
    hello(&mut h, 0, 1, false);
    let u = uk(1, 1); // a shard whose holders are pdevs 0 and 1
    h.handle(
        0,
        HubInput::Daemon {
            pdev: Pdev(0),
            req_id: 5,
            msg: DaemonMsg::WriteReq {
                app: APP,
                uk: u.clone(),
                writes: setup_writes(&u),
            },
        },
    );
    // Only pdev 0 answers.
    for o in drain(&mut h) {
        if let HubOutput::ToDaemon(td) = o {
            if td.pdev == Pdev(0) {
                h.handle(
                    0,
                    HubInput::Daemon {
                        pdev: Pdev(0),
                        req_id: td.req_id,
                        msg: DaemonMsg::WriteApplied { ok: true },
                    },
                );
            }
        }
    }
    assert!(drain(&mut h).iter().all(
        |o| !matches!(o, HubOutput::ToDaemon(td) if matches!(td.msg, HubMsg::WriteAck { .. }))
    ));
    // Both daemons answer PINGs (alive), but pdev 1 never applies.
    let mut t = 0;
    while t < HOLDER_TIMEOUT - 1 {
        t = (t + PING_INTERVAL).min(HOLDER_TIMEOUT - 1);
        h.handle_timeout(t);
        let early = pong_all(&mut h, t);
        assert!(
            !early.iter().any(|o| matches!(o, HubOutput::Event(_))),
            "t={t}: {early:?}"
        );
    }
    h.handle_timeout(HOLDER_TIMEOUT);
    let outs = drain(&mut h);
    assert!(
        outs.contains(&HubOutput::Event(HubEvent::HolderDead(Pdev(1)))),
        "{outs:?}"
    );
    assert!(switch_ops(&outs).iter().any(|(_, op)| *op
        == SwitchOp::SetPdevAlive {
            pdev: Pdev(1),
            alive: false
        }));
    assert!(outs.iter().any(|o| matches!(o, HubOutput::ToDaemon(td) if td.pdev == Pdev(0) && matches!(td.msg, HubMsg::WriteAck { .. }))));
    assert_eq!(h.device_status(Pdev(1)), Some(DeviceStatus::Down));

    // It comes back: REBUILDING, a DUMP of what it holds, REJOIN; after
    // REJOIN_DONE it is UP and pdev_alive = 1.
    let outs = hello(&mut h, 3 * S, 1, false);
    assert_eq!(h.device_status(Pdev(1)), Some(DeviceStatus::Rebuilding));
    let dumped: usize = outs
        .iter()
        .filter_map(|o| match o {
            HubOutput::ToDaemon(td) => match &td.msg {
                HubMsg::Dump { entries, .. } => Some(entries.len()),
                _ => None,
            },
            _ => None,
        })
        .sum();
    assert_eq!(dumped, 2, "the flow entry and the tenant entry");
    assert!(outs
        .iter()
        .any(|o| matches!(o, HubOutput::ToDaemon(td) if matches!(td.msg, HubMsg::Rejoin { .. }))));
    h.handle(
        3 * S,
        HubInput::Daemon {
            pdev: Pdev(1),
            req_id: 0,
            msg: DaemonMsg::RejoinDone,
        },
    );
    let outs = drain(&mut h);
    assert!(switch_ops(&outs).iter().any(|(_, op)| *op
        == SwitchOp::SetPdevAlive {
            pdev: Pdev(1),
            alive: true
        }));
    assert_eq!(h.device_status(Pdev(1)), Some(DeviceStatus::Up));
}

#[test]
fn unanswered_applies_are_resent_after_a_reconnect() {
    let mut h = hub(2, 8);
    hello(&mut h, 0, 0, false);
    hello(&mut h, 0, 1, false);
    let u = uk(1, 1);
    h.handle(
        0,
        HubInput::Daemon {
            pdev: Pdev(0),
            req_id: 5,
            msg: DaemonMsg::WriteReq {
                app: APP,
                uk: u.clone(),
                writes: setup_writes(&u),
            },
        },
    );
    let first: Vec<_> = drain(&mut h)
        .into_iter()
        .filter_map(|o| match o {
            HubOutput::ToDaemon(td) if td.pdev == Pdev(1) => Some(td),
            _ => None,
        })
        .collect();
    assert_eq!(first.len(), 2);
    h.handle(MS, HubInput::SessionReset { pdev: Pdev(1) });
    let again: Vec<_> = hello(&mut h, 2 * MS, 1, false)
        .into_iter()
        .filter_map(|o| match o {
            HubOutput::ToDaemon(td) if matches!(td.msg, HubMsg::WriteApply { .. }) => Some(td),
            _ => None,
        })
        .collect();
    assert_eq!(again, first, "the same WRITE_APPLYs, same ids and versions");
    assert_eq!(h.stats().applies_resent, 2);
}

fn daemon() -> Daemon {
    let apps: Vec<Box<dyn ControlLogic>> = vec![Box::new(TestApp::new(1, 64, 8))];
    let mut d = Daemon::new(DaemonConfig::new(Pdev(0)), apps, 0, false);
    d.handle(0, DaemonInput::SessionUp);
    std::iter::from_fn(|| d.poll_output()).for_each(drop);
    d
}

fn d_drain(d: &mut Daemon) -> Vec<DaemonOutput> {
    std::iter::from_fn(|| d.poll_output()).collect()
}

/// Gives the daemon flow `u`'s entry and the tenant entry (version 1, by
/// WRITE_APPLY with request ids from `first_req`), the device acknowledging
/// each, so `u` is promotable.
fn give_flow_entries(d: &mut Daemon, u: &UnionKey, first_req: u64) {
    for (j, (obj, key)) in [(FLOW_OBJ, u.0.clone()), (TENANT_OBJ, vec![1])]
        .into_iter()
        .enumerate()
    {
        let rec = EntryRec {
            op: WriteOp::Upsert,
            obj,
            key,
            value: vec![],
            version: 1,
        };
        d.handle(
            0,
            DaemonInput::FromHub {
                req_id: first_req + j as u64,
                msg: HubMsg::WriteApply {
                    app: APP,
                    entries: vec![rec],
                },
            },
        );
        for o in d_drain(d) {
            if let DaemonOutput::Device { id, .. } = o {
                d.handle(0, DaemonInput::DeviceAck { id, ok: true });
            }
        }
    }
}

#[test]
fn setup_buffers_sixteen_frames_and_releases_them_on_the_ack() {
    let mut d = daemon();
    let u = uk(1, 1);
    for i in 0..20u8 {
        d.handle(
            MS,
            DaemonInput::Miss {
                app: APP,
                uk: u.clone(),
                frame: vec![0, i],
            },
        );
    }
    let outs = d_drain(&mut d);
    let reqs: Vec<u64> = outs
        .iter()
        .filter_map(|o| match o {
            DaemonOutput::ToHub {
                req_id,
                msg: DaemonMsg::WriteReq { .. },
            } => Some(*req_id),
            _ => None,
        })
        .collect();
    assert_eq!(reqs.len(), 1, "one WRITE_REQ per flow");
    assert_eq!(d.stats().frames_dropped, 20 - MAX_BUFFERED as u64);
    assert!(!outs
        .iter()
        .any(|o| matches!(o, DaemonOutput::Reinject { .. })));
    d.handle(
        2 * MS,
        DaemonInput::FromHub {
            req_id: reqs[0],
            msg: HubMsg::WriteAck {
                results: vec![(WriteStatus::Ok, 1), (WriteStatus::Exists, 1)],
            },
        },
    );
    let released = d_drain(&mut d)
        .iter()
        .filter(|o| matches!(o, DaemonOutput::Reinject { .. }))
        .count();
    assert_eq!(released, MAX_BUFFERED);
}

#[test]
fn setup_without_ack_drops_its_frames_after_the_timeout() {
    let mut d = daemon();
    d.handle(
        0,
        DaemonInput::Miss {
            app: APP,
            uk: uk(1, 1),
            frame: vec![0, 0],
        },
    );
    d.handle(
        0,
        DaemonInput::Miss {
            app: APP,
            uk: uk(1, 1),
            frame: vec![0, 1],
        },
    );
    d_drain(&mut d);
    d.handle_timeout(SETUP_TIMEOUT - 1);
    assert_eq!(d.pending_setups(), 1);
    d.handle_timeout(SETUP_TIMEOUT);
    assert_eq!(d.pending_setups(), 0);
    assert_eq!(d.stats().frames_dropped, 2);
    assert_eq!(d.stats().setups_timed_out, 1);
}

fn apply(d: &mut Daemon, req_id: u64, u: &UnionKey, version: u64) -> Vec<DaemonOutput> {
    let rec = EntryRec {
        op: WriteOp::Upsert,
        obj: FLOW_OBJ,
        key: u.0.clone(),
        value: vec![1],
        version,
    };
    d.handle(
        0,
        DaemonInput::FromHub {
            req_id,
            msg: HubMsg::WriteApply {
                app: APP,
                entries: vec![rec],
            },
        },
    );
    d_drain(d)
}

#[test]
fn applies_in_version_order_and_answers_after_the_device_ack() {
    let mut d = daemon();
    let u = uk(1, 1);
    let outs = apply(&mut d, 7, &u, 5);
    let [DaemonOutput::Device {
        id,
        op: DeviceOp::Store { version: 5, .. },
    }] = outs.as_slice()
    else {
        panic!("{outs:?}")
    };
    // An older version arriving later (a resend) is not written, and its
    // WRITE_APPLIED waits for the device like the first.
    let outs = apply(&mut d, 8, &u, 3);
    assert!(outs.is_empty(), "{outs:?}");
    assert_eq!(d.stats().stale_applies, 1);
    d.handle(0, DaemonInput::DeviceAck { id: *id, ok: true });
    let replies: Vec<u64> = d_drain(&mut d)
        .iter()
        .filter_map(|o| match o {
            DaemonOutput::ToHub {
                req_id,
                msg: DaemonMsg::WriteApplied { ok: true },
            } => Some(*req_id),
            _ => None,
        })
        .collect();
    assert_eq!(replies, vec![7, 8]);
    assert_eq!(d.applied_version(APP, FLOW_OBJ, &u.0), Some(5));
}

#[test]
fn reports_once_per_window_exactly_at_theta_and_only_promotable_flows() {
    let mut d = daemon();
    let (u, stranger) = (uk(1, 1), uk(2, 2));
    give_flow_entries(&mut d, &u, 0);
    d_drain(&mut d);
    let count_reports = |d: &mut Daemon| {
        d_drain(d)
            .iter()
            .filter(|o| {
                matches!(
                    o,
                    DaemonOutput::ToHub {
                        msg: DaemonMsg::PromoteReport { .. },
                        ..
                    }
                )
            })
            .count()
    };
    for i in 0..200u64 {
        d.handle(
            i * MS,
            DaemonInput::TailPacket {
                app: APP,
                uk: u.clone(),
            },
        );
        if i + 1 == u64::from(THETA) - 1 {
            assert_eq!(count_reports(&mut d), 0, "reported before θ");
        }
        d.handle(
            i * MS,
            DaemonInput::TailPacket {
                app: APP,
                uk: stranger.clone(),
            },
        );
    }
    assert_eq!(count_reports(&mut d), 1, "exactly one report in the window");
    assert!(
        d.stats().reports_suppressed >= 1,
        "the flow without entries is not reported"
    );
    d.handle_timeout(T_WIN);
    for _ in 0..THETA {
        d.handle(
            T_WIN + MS,
            DaemonInput::TailPacket {
                app: APP,
                uk: u.clone(),
            },
        );
    }
    assert_eq!(
        count_reports(&mut d),
        1,
        "reported again in the next window"
    );
}

#[test]
fn a_daemon_silent_for_three_pings_is_declared_dead() {
    let mut h = hub(2, 8);
    hello(&mut h, 0, 0, false);
    hello(&mut h, 0, 1, false);
    // pdev 0 answers, pdev 1 (paused, link up) does not.
    let mut dead_at = None;
    let mut t = 0;
    while dead_at.is_none() && t < 10 * PING_INTERVAL {
        t += PING_INTERVAL;
        h.handle_timeout(t);
        for o in drain(&mut h) {
            match o {
                HubOutput::ToDaemon(td) if td.pdev == Pdev(0) => {
                    if let HubMsg::Ping { ts } = td.msg {
                        h.handle(
                            t,
                            HubInput::Daemon {
                                pdev: Pdev(0),
                                req_id: 0,
                                msg: DaemonMsg::Pong { ts },
                            },
                        );
                    }
                }
                HubOutput::Event(HubEvent::HolderDead(p)) => {
                    assert_eq!(p, Pdev(1));
                    dead_at = Some(t);
                }
                _ => {}
            }
        }
    }
    // Silent for more than PING_MISSES periods: declared at the next PING.
    assert_eq!(dead_at, Some((PING_MISSES + 1) * PING_INTERVAL));
    assert_eq!(h.device_status(Pdev(0)), Some(DeviceStatus::Up));
    assert_eq!(h.device_status(Pdev(1)), Some(DeviceStatus::Down));
}

/// HELLOs a daemon sent among `outs`.
fn hellos(outs: &[DaemonOutput]) -> usize {
    outs.iter()
        .filter(|o| {
            matches!(
                o,
                DaemonOutput::ToHub {
                    msg: DaemonMsg::Hello { .. },
                    ..
                }
            )
        })
        .count()
}

#[test]
fn a_daemon_the_hub_stopped_talking_to_says_hello_again_once_its_link_is_up() {
    let mut d = daemon();
    // PINGs every PING_INTERVAL keep it quiet.
    let mut t = 0;
    while t < 3 * S {
        t += PING_INTERVAL;
        let msg = HubMsg::Ping { ts: t };
        d.handle(t, DaemonInput::FromHub { req_id: 1, msg });
        d.handle_timeout(t);
        assert_eq!(hellos(&d_drain(&mut d)), 0, "t={t}");
    }
    // The hub declared it dead (a port-down) and went silent; its link
    // is down for a while: no HELLO while it is.
    d.handle(t, DaemonInput::Link { up: false });
    let silent_from = t;
    while t < silent_from + 3 * HUB_SILENCE {
        t += 100 * MS;
        d.handle_timeout(t);
        assert_eq!(hellos(&d_drain(&mut d)), 0, "t={t}");
    }
    // Link up: HELLO within one more silence period, then one per
    // period while the hub stays silent.
    d.handle(t, DaemonInput::Link { up: true });
    let up_at = t;
    let mut first = None;
    while t < up_at + 3 * HUB_SILENCE {
        t += 100 * MS;
        d.handle_timeout(t);
        if hellos(&d_drain(&mut d)) > 0 {
            first.get_or_insert(t);
        }
    }
    let first = first.expect("a HELLO after the link came up");
    assert!(first - up_at <= HUB_SILENCE, "{} ms", (first - up_at) / MS);
    assert!(d.stats().rehellos >= 2, "{}", d.stats().rehellos);
}

/// App-pinning (§8 E6's baseline): a pinned app's entries go to its one
/// device, whatever the flow's shard; unpinned, to the shard's primary and
/// replica as well.
#[test]
fn a_pinned_apps_writes_go_to_its_device_alone() {
    let applied_at = |pinned: Option<u16>| {
        let mut config = HubConfig::new(4);
        if let Some(d) = pinned {
            config.pinned.insert(APP, Pdev(d));
        }
        let apps = vec![HubApp {
            keys: Box::new(TestApp::new(1, 64, 8)),
            fm_capacity: 0,
        }];
        let mut h = Hub::new(config, apps, 0).unwrap();
        for p in 0..4 {
            hello(&mut h, 0, p, false);
        }
        let mut holders = std::collections::BTreeSet::new();
        for f in 0..16 {
            let u = uk(1, f);
            h.handle(
                MS,
                HubInput::Daemon {
                    pdev: Pdev(3),
                    req_id: 1,
                    msg: DaemonMsg::WriteReq {
                        app: APP,
                        uk: u.clone(),
                        writes: setup_writes(&u),
                    },
                },
            );
            for o in drain(&mut h) {
                if let HubOutput::ToDaemon(td) = o {
                    if matches!(td.msg, HubMsg::WriteApply { .. }) {
                        holders.insert(td.pdev.0);
                    }
                }
            }
        }
        holders.into_iter().collect::<Vec<_>>()
    };
    assert_eq!(applied_at(Some(3)), [3]);
    assert!(applied_at(None).len() > 1);
}

/// A REPORT digest rates its flow from when the data plane counted it to
/// θ, not from when the daemon got to it: a control plane busy for 400 ms
/// (a sketch bank being cleared, setups queued) must not make a flow that
/// reached θ in 10 ms look 40 times slower than it is and lose its
/// promotion to slower flows (found running §8 E5 with four NICs). A
/// report counted before a bank flip and read after it is rated against
/// the window it was counted in.
#[test]
fn a_late_report_is_rated_from_when_the_data_plane_counted_it() {
    let mut d = daemon();
    let flows = [uk(1, 1), uk(1, 2)];
    for (i, u) in flows.iter().enumerate() {
        give_flow_entries(&mut d, u, 10 * i as u64);
    }
    d_drain(&mut d);
    let elapsed = |d: &mut Daemon| -> Vec<u32> {
        d_drain(d)
            .iter()
            .filter_map(|o| match o {
                DaemonOutput::ToHub {
                    msg: DaemonMsg::PromoteReport { elapsed_us, .. },
                    ..
                } => Some(*elapsed_us),
                _ => None,
            })
            .collect()
    };
    // Counted at 10 ms into the first window, read at 410 ms.
    let report = |u: &UnionKey, at, since, previous_window| DaemonInput::Report {
        app: APP,
        uk: u.clone(),
        estimate: 64,
        at,
        since,
        previous_window,
    };
    d.handle(410 * MS, report(&flows[0], 10 * MS, None, false));
    assert_eq!(elapsed(&mut d), vec![10_000]);
    // Counted at 990 ms, read after the flip at 1 s (T_win): still 990 ms
    // into its own window, and not the new window's report of the flow.
    d.handle_timeout(S);
    d.handle(S + 5 * MS, report(&flows[1], 990 * MS, None, true));
    assert_eq!(elapsed(&mut d), vec![990_000]);
    // The data plane switched banks only 200 ms after the tick (its
    // control channel was busy) and counted the flows to θ 9 ms later: 9 ms
    // each, the second flow reported again in its new window.
    for u in &flows {
        d.handle(
            S + 300 * MS,
            report(u, S + 209 * MS, Some(S + 200 * MS), false),
        );
    }
    assert_eq!(elapsed(&mut d), vec![9_000, 9_000]);
}

/// An FM slot's counter is not cleared when the slot is reused, so the
/// first poll after a flow becomes PRESENT may count its predecessor's
/// packets: the hub takes it as a baseline only. Here the first reading
/// (5,000, of which 4,000 were the slot's previous flow's) must not make
/// a 1,000 packets/s flow look like 5,000/s and shield it from a faster
/// report (found running §8 E5, where slots churn while hot flows are
/// promoted over cold ones).
#[test]
fn the_first_counter_poll_after_promotion_is_only_a_baseline() {
    let mut h = hub(2, 1);
    hello(&mut h, 0, 0, false);
    hello(&mut h, 0, 1, false);
    let (a, b) = (uk(1, 1), uk(2, 2));
    setup_flow(&mut h, 0, &a);
    setup_flow(&mut h, 0, &b);
    promote(&mut h, 0, &a, 1000);
    h.handle(
        S,
        HubInput::FmCounters {
            app: APP,
            counters: vec![(a.clone(), 5_000)],
        },
    );
    drain(&mut h);
    let ops = switch_ops(&report(&mut h, S + MS, &b, 1110, 1_000_000));
    assert!(
        ops.iter()
            .any(|(_, op)| matches!(op, SwitchOp::FmDelete { .. })),
        "a's rate was taken from its slot's old count: {ops:?}"
    );
}
