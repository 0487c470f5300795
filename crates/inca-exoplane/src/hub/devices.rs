//! Device status and the hub's side of failure and recovery (spec §5.8):
//! UP / DOWN / REBUILDING per pdev, HELLO handling (reconnect → resend
//! unanswered WRITE_APPLYs; lost state or coming back from DOWN → DUMP of
//! every entry the device holds, then REJOIN), REJOIN_DONE → `pdev_alive`
//! = 1, and declaring a holder dead.

use inca_switch::device::Nanos;

use super::entries::pdev_bit;
use super::msg::{EntryRec, HubMsg, WriteOp};
use super::oplog::Op;
use super::{DeviceStatus, Hub, HubEvent, HubOutput, SwitchOp};
use crate::ids::{AppId, LogicalId, Pdev};

/// Status and session state of every device.
pub(super) struct Devices {
    status: Vec<DeviceStatus>,
    session: Vec<bool>,
    /// When the hub last heard anything from each daemon.
    last_heard: Vec<Nanos>,
}

impl Devices {
    pub fn new(n: u8) -> Self {
        Devices {
            status: vec![DeviceStatus::Up; usize::from(n)],
            session: vec![false; usize::from(n)],
            last_heard: vec![0; usize::from(n)],
        }
    }

    pub fn known(&self, pdev: Pdev) -> bool {
        usize::from(pdev.0) < self.status.len()
    }

    pub fn status(&self, pdev: Pdev) -> Option<DeviceStatus> {
        self.status.get(usize::from(pdev.0)).copied()
    }

    /// Not declared dead: writes wait for it (REBUILDING devices receive
    /// writes while their DUMP streams, §5.8).
    pub fn live(&self, pdev: Pdev) -> bool {
        self.status(pdev).is_some_and(|s| s != DeviceStatus::Down)
    }

    pub fn session_up(&self, pdev: Pdev) -> bool {
        self.session
            .get(usize::from(pdev.0))
            .copied()
            .unwrap_or(false)
    }

    pub fn heard(&mut self, pdev: Pdev, now: Nanos) {
        if let Some(t) = self.last_heard.get_mut(usize::from(pdev.0)) {
            *t = now;
        }
    }

    pub fn session_reset(&mut self, pdev: Pdev) {
        if let Some(s) = self.session.get_mut(usize::from(pdev.0)) {
            *s = false;
        }
    }

    fn set(&mut self, pdev: Pdev, status: DeviceStatus) {
        self.status[usize::from(pdev.0)] = status;
    }
}

impl Hub {
    pub(super) fn on_hello(&mut self, now: Nanos, pdev: Pdev, req_id: u64, lost_state: bool) {
        let i = usize::from(pdev.0);
        self.devices.session[i] = true;
        let n = self.config.n_devices;
        let primary_of = LogicalId(pdev.0 as u8);
        let replica_of = LogicalId(((u16::from(n) + pdev.0 - 1) % u16::from(n)) as u8);
        let mut roles = vec![(primary_of, 0)];
        if n > 1 {
            roles.push((replica_of, 1));
        }
        self.send(
            pdev,
            req_id,
            HubMsg::HelloAck {
                round: self.sync.round(),
                roles,
            },
        );
        let status = self.devices.status[i];
        if status == DeviceStatus::Up && !lost_state {
            // A reconnect: the device kept its state; resend what it may
            // not have applied (idempotent by version).
            self.resend_applies(pdev);
            return;
        }
        if status == DeviceStatus::Up {
            // It restarted before anyone noticed: stop routing to it.
            self.switch_op(SwitchOp::SetPdevAlive { pdev, alive: false });
        }
        self.devices.set(pdev, DeviceStatus::Rebuilding);
        self.resend_applies(pdev);
        self.stream_dump(pdev);
        // §5.6 recovery: REJOIN carries the device's recorded history
        // H[pdev][k] per shared register entry; the device is out of the
        // rounds until REJOIN_DONE.
        let rejoin = self.sync.begin_rejoin(now, pdev);
        self.send(pdev, 0, HubMsg::Rejoin(rejoin));
    }

    /// DUMP of every entry whose holders include `pdev`, per app, in
    /// batches; the last message has `last` set.
    fn stream_dump(&mut self, pdev: Pdev) {
        let bit = pdev_bit(pdev);
        let batch = self.config.dump_batch.max(1);
        let mut msgs: Vec<(AppId, Vec<EntryRec>)> = Vec::new();
        for (key, entry) in &self.dir.map {
            if entry.holders & bit == 0 || entry.deleting {
                continue;
            }
            let rec = EntryRec {
                op: WriteOp::Upsert,
                obj: key.obj,
                key: key.key.clone(),
                value: entry.value.clone(),
                version: entry.version,
            };
            match msgs.last_mut() {
                Some((app, recs)) if *app == key.app && recs.len() < batch => recs.push(rec),
                _ => msgs.push((key.app, vec![rec])),
            }
        }
        if msgs.is_empty() {
            let app = self.apps.keys().next().copied().unwrap_or(AppId(0));
            msgs.push((app, Vec::new()));
        }
        let n = msgs.len();
        for (i, (app, entries)) in msgs.into_iter().enumerate() {
            self.send(
                pdev,
                0,
                HubMsg::Dump {
                    app,
                    entries,
                    last: i + 1 == n,
                },
            );
        }
    }

    /// PINGs every daemon with an open session; one silent for
    /// `ping_misses` periods (daemon dead or paused without link loss) is
    /// declared dead.
    pub(super) fn ping_all(&mut self, now: Nanos) {
        let silence = self.config.ping_interval * self.config.ping_misses;
        for p in 0..u16::from(self.config.n_devices) {
            let pdev = Pdev(p);
            if !self.devices.session_up(pdev) {
                continue;
            }
            if now.saturating_sub(self.devices.last_heard[usize::from(p)]) > silence {
                self.declare_dead(now, pdev);
            } else {
                self.send(pdev, 0, HubMsg::Ping { ts: now });
            }
        }
    }

    pub(super) fn on_rejoin_done(&mut self, _now: Nanos, pdev: Pdev) {
        if self.devices.status(pdev) != Some(DeviceStatus::Rebuilding) {
            self.stats.unknown += 1;
            return;
        }
        self.devices.set(pdev, DeviceStatus::Up);
        self.sync.rejoin_done(pdev);
        self.switch_op(SwitchOp::SetPdevAlive { pdev, alive: true });
        self.out
            .push_back(HubOutput::Event(HubEvent::DeviceUp(pdev)));
    }

    /// `pdev` is dead: DOWN, `pdev_alive` = 0, out of every quorum, and
    /// nothing more is sent to it. A daemon that was only paused, or whose
    /// link flapped, hears nothing for [`crate::daemon::HUB_SILENCE`] and
    /// says HELLO again (or its session resets and it reconnects); the
    /// HELLO rebuilds it.
    pub(super) fn declare_dead(&mut self, now: Nanos, pdev: Pdev) {
        if !self.devices.known(pdev) || self.devices.status(pdev) == Some(DeviceStatus::Down) {
            return;
        }
        self.devices.set(pdev, DeviceStatus::Down);
        self.devices.session_reset(pdev);
        self.sync.device_down(now, pdev);
        self.stats.holders_dead += 1;
        self.log.push(now, Op::HolderDead { pdev });
        self.switch_op(SwitchOp::SetPdevAlive { pdev, alive: false });
        self.out
            .push_back(HubOutput::Event(HubEvent::HolderDead(pdev)));
        self.drop_holder(now, pdev);
    }
}
