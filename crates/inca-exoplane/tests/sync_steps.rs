//! Step-by-step tests of the sync state machines (specs/exoplane.md §5.6):
//! the fault behaviours the spec lists, the MERGE_ACK gate on both sides,
//! the switch copy's lifecycle, DELETE, REJOIN, and the limits. A small
//! synchronous rig carries outputs by hand so each test can drop, hold back
//! or repeat exactly the message it is about.

use std::collections::BTreeMap;

use inca_exoplane::ids::{AppId, ObjId, Pdev};
use inca_exoplane::sync::hub::HubConfig;
use inca_exoplane::sync::{
    Daemon, DaemonOutput, DeviceStatus, EntryKey, HubOutput, Limits, Merge, MergeCmd, MergeOp,
    SyncError, SyncHub, SyncReq, SyncResp, Width, T_C, T_RT,
};

fn add() -> Merge {
    Merge::new(MergeOp::Add, Width::W32)
}

fn key(n: u8) -> EntryKey {
    EntryKey {
        app: AppId(1),
        obj: ObjId(7),
        key: vec![n],
    }
}

/// A hub, a switch register store and devices with their daemons.
struct Rig {
    now: u64,
    hub: SyncHub,
    sw: BTreeMap<EntryKey, u64>,
    devs: Vec<(Daemon, BTreeMap<EntryKey, u64>)>,
    /// Switch MERGEs not yet carried out.
    held_merges: Vec<MergeCmd>,
    /// Device MERGEs held back by `daemon_outputs(_, true)`.
    dev_held: Vec<MergeCmd>,
}

impl Rig {
    fn new(devices: usize, cfg: HubConfig) -> Rig {
        Rig {
            now: 0,
            hub: SyncHub::new(0, cfg),
            sw: BTreeMap::new(),
            devs: (0..devices)
                .map(|d| (Daemon::new(Pdev(d as u16), 0, cfg.limits), BTreeMap::new()))
                .collect(),
            held_merges: Vec::new(),
            dev_held: Vec::new(),
        }
    }

    fn hold(&mut self, k: &EntryKey, m: Merge, devs: &[usize], switch: bool) {
        for &d in devs {
            self.hub.add_holder(k, m, Pdev(d as u16)).unwrap();
            self.devs[d].0.add_entry(k, m).unwrap();
            self.devs[d].1.insert(k.clone(), 0);
        }
        if switch {
            let v = self.hub.switch_install(k, m).unwrap();
            self.sw.insert(k.clone(), v);
        }
    }

    /// Starts the next round; returns the SYNC_REQs (switch reads and
    /// merges carried out unless `hold_switch_merges`).
    fn start_round(&mut self) -> Vec<(Pdev, SyncReq)> {
        self.now = self.hub.poll_timeout().max(self.now);
        self.hub.handle_timeout(self.now);
        self.hub_outputs()
    }

    fn hub_outputs(&mut self) -> Vec<(Pdev, SyncReq)> {
        let mut reqs = Vec::new();
        while let Some(o) = self.hub.poll_output() {
            match o {
                HubOutput::ReadSwitch { entry } => {
                    let v = self.sw[&entry];
                    self.hub.handle_switch_read(self.now, &entry, v);
                }
                HubOutput::Merge(cmd) => self.held_merges.push(cmd),
                HubOutput::RemoveSwitchSlot { entry } => {
                    self.sw.remove(&entry);
                }
                HubOutput::SyncReq { pdev, req } => reqs.push((pdev, req)),
            }
        }
        reqs
    }

    /// Applies and acknowledges the switch MERGEs held back so far.
    fn ack_switch_merges(&mut self) -> Vec<(Pdev, SyncReq)> {
        for cmd in std::mem::take(&mut self.held_merges) {
            if let Some(reg) = self.sw.get_mut(&cmd.entry) {
                *reg = cmd.merge.combine(*reg, cmd.delta);
            }
            self.hub.handle_merge_ack(self.now, &cmd.entry);
        }
        self.hub_outputs()
    }

    /// Delivers a request; returns the response (device reads and merges
    /// carried out at once).
    fn deliver(&mut self, d: usize, req: &SyncReq) -> Option<SyncResp> {
        self.devs[d].0.handle_sync_req(req);
        self.daemon_outputs(d, false)
    }

    fn daemon_outputs(&mut self, d: usize, hold_merges: bool) -> Option<SyncResp> {
        let mut resp = None;
        let mut held = Vec::new();
        while let Some(o) = self.devs[d].0.poll_output() {
            let (daemon, regs) = &mut self.devs[d];
            match o {
                DaemonOutput::ReadRegister { entry, round } => {
                    let v = regs[&entry];
                    daemon.handle_register_read(&entry, round, v);
                }
                DaemonOutput::Merge(cmd) if hold_merges => held.push(cmd),
                DaemonOutput::Merge(cmd) => {
                    let reg = regs.get_mut(&cmd.entry).unwrap();
                    *reg = cmd.merge.combine(*reg, cmd.delta);
                    daemon.handle_merge_ack(&cmd.entry);
                }
                DaemonOutput::SetRegister { entry, value } => {
                    regs.insert(entry, value);
                }
                DaemonOutput::SyncResp(r) => resp = Some(r),
                DaemonOutput::RejoinDone => self.hub.rejoin_done(Pdev(d as u16)),
            }
        }
        self.dev_held.extend(held);
        resp
    }

    fn reply(&mut self, d: usize, resp: &SyncResp) -> Vec<(Pdev, SyncReq)> {
        self.hub.handle_sync_resp(self.now, Pdev(d as u16), resp);
        self.hub_outputs()
    }

    /// One whole round: every request delivered, every response returned,
    /// switch merges acknowledged, except responses of `drop_from`.
    fn round(&mut self, drop_from: &[usize]) {
        for (p, req) in self.start_round() {
            let d = p.0 as usize;
            if let Some(resp) = self.deliver(d, &req) {
                if !drop_from.contains(&d) {
                    self.reply(d, &resp);
                }
            }
        }
        // Close the round at its deadline if someone stayed silent.
        self.now += T_RT;
        self.hub.handle_timeout(self.now);
        self.hub_outputs();
        self.ack_switch_merges();
    }

    fn bump_dev(&mut self, d: usize, k: &EntryKey, x: u64) {
        *self.devs[d].1.get_mut(k).unwrap() += x;
    }

    fn values(&self, k: &EntryKey) -> Vec<u64> {
        let mut v = vec![self
            .sw
            .get(k)
            .copied()
            .unwrap_or_else(|| self.hub.s_cp(k).unwrap())];
        v.extend(self.devs.iter().filter_map(|(_, r)| r.get(k).copied()));
        v
    }
}

#[test]
fn two_rounds_spread_every_contribution() {
    let mut r = Rig::new(2, HubConfig::default());
    let k = key(1);
    r.hold(&k, add(), &[0, 1], true);
    r.bump_dev(0, &k, 5);
    r.bump_dev(1, &k, 7);
    *r.sw.get_mut(&k).unwrap() += 11;
    r.round(&[]);
    assert_eq!(r.values(&k)[0], 23, "device → switch within one round");
    r.round(&[]);
    assert_eq!(r.values(&k), vec![23, 23, 23], "device → device within two");
}

#[test]
fn lost_response_is_made_good_next_round() {
    let mut r = Rig::new(2, HubConfig::default());
    let k = key(1);
    r.hold(&k, add(), &[0, 1], true);
    r.bump_dev(0, &k, 5);
    r.round(&[0]);
    assert_eq!(r.hub.stats().rounds_timed_out, 1);
    assert_eq!(r.values(&k)[0], 0, "the hub did not learn device 0's 5");
    r.bump_dev(0, &k, 2);
    r.round(&[]);
    r.round(&[]);
    assert_eq!(r.values(&k), vec![7, 7, 7]);
}

#[test]
fn duplicate_and_stale_requests_are_rejected() {
    let mut r = Rig::new(2, HubConfig::default());
    let k = key(1);
    r.hold(&k, add(), &[0, 1], true);
    *r.sw.get_mut(&k).unwrap() += 4;
    let reqs = r.start_round();
    let (_, req0) = reqs.iter().find(|(p, _)| p.0 == 0).unwrap().clone();
    assert!(r.deliver(0, &req0).is_some());
    assert!(r.deliver(0, &req0).is_none(), "a duplicate gets no answer");
    let stale = SyncReq {
        round: req0.round - 1,
        items: req0.items.clone(),
    };
    assert!(r.deliver(0, &stale).is_none());
    assert_eq!(r.devs[0].0.stats().req_stale, 2);
    assert_eq!(r.devs[0].1[&k], 4, "merged once");
}

#[test]
fn duplicate_and_stale_responses_are_discarded() {
    let mut r = Rig::new(2, HubConfig::default());
    let k = key(1);
    r.hold(&k, add(), &[0, 1], true);
    r.bump_dev(0, &k, 3);
    let reqs = r.start_round();
    let resp0 = r.deliver(0, &reqs[0].1).unwrap();
    let resp1 = r.deliver(1, &reqs[1].1).unwrap();
    r.reply(0, &resp0);
    r.reply(0, &resp0);
    r.reply(1, &resp1);
    r.reply(0, &resp0);
    r.ack_switch_merges();
    assert_eq!(r.sw[&k], 3, "counted once");
    r.now += T_C;
    r.start_round();
    r.reply(0, &resp0);
    let s = r.hub.stats();
    assert_eq!((s.resp_duplicate, s.resp_stale), (1, 2), "{s:?}");
}

#[test]
fn hub_reads_no_snapshot_while_a_merge_is_unacknowledged() {
    let mut r = Rig::new(1, HubConfig::default());
    let k = key(1);
    r.hold(&k, add(), &[0], true);
    r.bump_dev(0, &k, 3);
    let reqs = r.start_round();
    let resp = r.deliver(0, &reqs[0].1).unwrap();
    r.reply(0, &resp);
    assert_eq!(r.held_merges.len(), 1, "round 1 merges 3 into the switch");
    r.now += T_C;
    assert!(
        r.start_round().is_empty(),
        "round 2 waits for the MERGE_ACK"
    );
    let reqs = r.ack_switch_merges();
    assert_eq!(reqs.len(), 1);
    assert_eq!(reqs[0].1.items[0].snap, 3, "snapshot read after the merge");
}

#[test]
fn daemon_reads_no_snapshot_while_its_merge_is_unacknowledged() {
    let mut r = Rig::new(1, HubConfig::default());
    let k = key(1);
    r.hold(&k, add(), &[0], true);
    *r.sw.get_mut(&k).unwrap() += 9;
    let reqs = r.start_round();
    r.devs[0].0.handle_sync_req(&reqs[0].1);
    r.daemon_outputs(0, true);
    let merge = r.dev_held.pop().expect("the daemon merges 9");
    assert_eq!(r.devs[0].0.pending_merges(), 1);
    let next = SyncReq {
        round: reqs[0].1.round + 1,
        items: reqs[0].1.items.clone(),
    };
    r.devs[0].0.handle_sync_req(&next);
    assert_eq!(
        r.devs[0].0.poll_output(),
        None,
        "no read before the MERGE_ACK"
    );
    *r.devs[0].1.get_mut(&k).unwrap() += merge.delta;
    r.devs[0].0.handle_merge_ack(&k);
    assert!(matches!(
        r.devs[0].0.poll_output(),
        Some(DaemonOutput::ReadRegister { .. })
    ));
}

#[test]
fn failure_between_reply_and_merge_loses_nothing_acknowledged() {
    let mut r = Rig::new(2, HubConfig::default());
    let k = key(1);
    r.hold(&k, add(), &[0, 1], true);
    r.bump_dev(1, &k, 6);
    r.round(&[]);
    r.bump_dev(0, &k, 5);
    // Device 0 replies (the hub learns its 5) and dies before merging the 6.
    let reqs = r.start_round();
    for (p, req) in reqs {
        r.devs[p.0 as usize].0.handle_sync_req(&req);
        let resp = r.daemon_outputs(p.0 as usize, p.0 == 0).unwrap();
        r.reply(p.0 as usize, &resp);
    }
    assert_eq!(r.dev_held.len(), 1, "device 0's merge of the 6 never lands");
    r.hub.device_down(r.now, Pdev(0));
    r.devs[0] = (
        Daemon::new(Pdev(0), r.hub.round(), Limits::default()),
        BTreeMap::new(),
    );
    r.ack_switch_merges();
    // Rebuild: DUMP recreates the slot at 0̸, REJOIN restores H = 5.
    r.devs[0].0.add_entry(&k, add()).unwrap();
    r.devs[0].1.insert(k.clone(), 0);
    let rejoin = r.hub.begin_rejoin(r.now, Pdev(0));
    assert_eq!(r.hub.status(Pdev(0)), DeviceStatus::Rebuilding);
    assert_eq!(rejoin.items, vec![(k.clone(), 5)]);
    r.devs[0].0.handle_rejoin(&rejoin);
    r.daemon_outputs(0, false);
    assert_eq!(r.hub.status(Pdev(0)), DeviceStatus::Up);
    assert_eq!(r.devs[0].1[&k], 5, "its past contributions are back");
    r.now += T_C;
    r.round(&[]);
    r.round(&[]);
    assert_eq!(r.values(&k), vec![11, 11, 11]);
}

#[test]
fn down_devices_sit_out_rounds() {
    let mut r = Rig::new(2, HubConfig::default());
    let k = key(1);
    r.hold(&k, add(), &[0, 1], true);
    r.hub.device_down(0, Pdev(1));
    let reqs = r.start_round();
    assert_eq!(reqs.iter().map(|(p, _)| p.0).collect::<Vec<_>>(), vec![0]);
}

#[test]
fn eviction_waits_for_the_merge_and_keeps_the_switch_value() {
    let mut r = Rig::new(2, HubConfig::default());
    let k = key(1);
    r.hold(&k, add(), &[0, 1], true);
    r.bump_dev(0, &k, 5);
    *r.sw.get_mut(&k).unwrap() += 3;
    let reqs = r.start_round();
    for (p, req) in reqs {
        let resp = r.deliver(p.0 as usize, &req).unwrap();
        r.reply(p.0 as usize, &resp);
    }
    assert_eq!(r.held_merges.len(), 1);
    r.hub.switch_evict(r.now, &k).unwrap();
    assert!(
        r.hub.poll_output().is_none(),
        "no eviction read before the MERGE_ACK"
    );
    r.ack_switch_merges();
    assert!(!r.sw.contains_key(&k), "slot removed after the read");
    assert_eq!(r.hub.s_cp(&k), Some(8), "S_cp = V, the switch's own 3 kept");
    assert_eq!(
        r.hub.switch_install(&k, add()),
        Ok(8),
        "re-installed at S_cp"
    );
}

#[test]
fn round_news_for_an_entry_being_evicted_go_to_s_cp() {
    let mut r = Rig::new(1, HubConfig::default());
    let k = key(1);
    r.hold(&k, add(), &[0], true);
    r.bump_dev(0, &k, 5);
    let reqs = r.start_round();
    let resp = r.deliver(0, &reqs[0].1).unwrap();
    // The eviction's read is issued but not yet answered when the round ends.
    r.hub.switch_evict(r.now, &k).unwrap();
    let read = r.hub.poll_output();
    assert_eq!(read, Some(HubOutput::ReadSwitch { entry: k.clone() }));
    r.hub.handle_sync_resp(r.now, Pdev(0), &resp);
    assert!(
        r.hub.poll_output().is_none(),
        "no MERGE into a slot being evicted"
    );
    r.hub.handle_switch_read(r.now, &k, 2);
    assert_eq!(r.hub.s_cp(&k), Some(7));
    assert_eq!(
        r.hub.poll_output(),
        Some(HubOutput::RemoveSwitchSlot { entry: k.clone() })
    );
    assert_eq!(r.hub.switch_evict(r.now, &k), Err(SyncError::NotInstalled));
}

#[test]
fn entries_are_shared_from_their_second_copy_and_delete_drops_them() {
    let mut r = Rig::new(2, HubConfig::default());
    let k = key(1);
    r.hold(&k, add(), &[0], false);
    assert!(!r.hub.is_shared(&k));
    assert!(r.start_round().is_empty(), "nothing to sync with one copy");
    r.hub.add_holder(&k, add(), Pdev(1)).unwrap();
    assert!(r.hub.is_shared(&k));
    assert_eq!(r.hub.history(&k, Pdev(0)), Some(0));
    assert_eq!(
        r.hub
            .add_holder(&k, Merge::new(MergeOp::Or, Width::W32), Pdev(1)),
        Err(SyncError::MergeMismatch(add()))
    );
    r.hub.delete(r.now, &k);
    assert!(!r.hub.is_shared(&k));
    assert_eq!(r.hub.s_cp(&k), None);
    assert_eq!(r.hub.entries(), 0);
}

#[test]
fn idempotent_merges_send_snapshots_without_history() {
    let or = Merge::new(MergeOp::Or, Width::W16);
    let mut r = Rig::new(2, HubConfig::default());
    let k = key(1);
    r.hold(&k, or, &[0, 1], true);
    *r.devs[0].1.get_mut(&k).unwrap() |= 0b01;
    *r.devs[1].1.get_mut(&k).unwrap() |= 0b10;
    *r.sw.get_mut(&k).unwrap() |= 0b100;
    let reqs = r.start_round();
    assert!(reqs.iter().all(|(_, q)| q.items[0].hist == 0));
    for (p, req) in reqs {
        let resp = r.deliver(p.0 as usize, &req).unwrap();
        assert_eq!(resp.items[0].hist, 0);
        r.reply(p.0 as usize, &resp);
    }
    r.ack_switch_merges();
    r.now += T_C;
    r.round(&[]);
    assert_eq!(r.values(&k), vec![0b111; 3]);
    // Rebuilt: REJOIN carries 0̸; the next round refills the copy.
    r.hub.device_down(r.now, Pdev(1));
    r.devs[1] = (
        Daemon::new(Pdev(1), r.hub.round(), Limits::default()),
        BTreeMap::new(),
    );
    r.devs[1].0.add_entry(&k, or).unwrap();
    r.devs[1].1.insert(k.clone(), 0);
    let rejoin = r.hub.begin_rejoin(r.now, Pdev(1));
    assert_eq!(rejoin.items, vec![(k.clone(), 0)]);
    r.devs[1].0.handle_rejoin(&rejoin);
    r.daemon_outputs(1, false);
    r.round(&[]);
    assert_eq!(r.values(&k), vec![0b111; 3]);
}

#[test]
fn limits_refuse_and_count() {
    let cfg = HubConfig {
        limits: Limits {
            max_entries: 2,
            max_items: 1,
        },
        ..HubConfig::default()
    };
    let mut r = Rig::new(2, cfg);
    r.hold(&key(1), add(), &[0, 1], false);
    // Device 0 already carries one shared entry, the most one message holds.
    r.hub.add_holder(&key(2), add(), Pdev(1)).unwrap();
    assert_eq!(
        r.hub.add_holder(&key(2), add(), Pdev(0)),
        Err(SyncError::TooManyItems(1))
    );
    assert!(!r.hub.is_shared(&key(2)));
    assert_eq!(
        r.hub.add_holder(&key(3), add(), Pdev(0)),
        Err(SyncError::TableFull(2))
    );
    assert_eq!(r.hub.stats().refused, 2);
    let big = SyncReq {
        round: 1,
        items: vec![
            inca_exoplane::sync::SyncItem {
                entry: key(1),
                snap: 0,
                hist: 0,
            };
            2
        ],
    };
    r.devs[0].0.handle_sync_req(&big);
    assert_eq!(r.devs[0].0.stats().too_many_items, 1);
    assert_eq!(
        r.devs[0].0.last_round(),
        0,
        "a refused request does not advance the round"
    );
}

#[test]
fn a_newer_request_abandons_an_unfinished_answer() {
    let mut r = Rig::new(1, HubConfig::default());
    let (k1, k2) = (key(1), key(2));
    r.hold(&k1, add(), &[0], true);
    r.hold(&k2, add(), &[0], true);
    *r.sw.get_mut(&k1).unwrap() += 4;
    let reqs = r.start_round();
    r.devs[0].0.handle_sync_req(&reqs[0].1);
    r.daemon_outputs(0, true);
    assert_eq!(r.dev_held.len(), 1, "k1's merge stalls (daemon pause)");
    // Round 2 asks again; k1 waits for its merge, k2 is answered at once.
    let mut next = reqs[0].1.clone();
    next.round += 1;
    r.devs[0].0.handle_sync_req(&next);
    assert!(r.daemon_outputs(0, false).is_none(), "k1 still waits");
    // Round 3 arrives before the stall ends: round 2's answer is abandoned.
    let mut third = next.clone();
    third.round += 1;
    r.devs[0].0.handle_sync_req(&third);
    assert_eq!(r.devs[0].0.stats().abandoned, 1);
    let stalled = r.dev_held.pop().unwrap();
    *r.devs[0].1.get_mut(&k1).unwrap() += stalled.delta;
    r.devs[0].0.handle_merge_ack(&k1);
    let resp = r.daemon_outputs(0, false).expect("round 3 answered");
    assert_eq!(resp.round, third.round);
    assert_eq!(resp.items.len(), 2);
    assert_eq!(r.devs[0].1[&k1], 4, "the stalled merge counted once");
}
