//! Control events (spec §5.4, last paragraph [our choice there]): a
//! packet's app raised a control event — on the switch (the hub forwards
//! it, EVENT_FWD) or on this device. The app's control logic turns it into
//! writes, sent to the hub as a WRITE_REQ like a setup's; the hub runs them
//! as any write (a DELETE of an entry backing a switch-resident flow first
//! evicts that flow in two phases, §5.5). Nothing waits for the ack: the
//! packet that raised the event went on as the app decided.

use inca_switch::device::Nanos;

use super::{Daemon, Timer};
use crate::hub::msg::{DaemonMsg, WriteStatus};
use crate::ids::{AppId, UnionKey, Version};

impl Daemon {
    pub(super) fn on_event(&mut self, now: Nanos, app: AppId, uk: UnionKey, frame: Vec<u8>) {
        let Some(logic) = self.apps.get(&app) else {
            self.stats.unknown += 1;
            self.stats.events_dropped += 1;
            return;
        };
        self.stats.events += 1;
        let writes = logic.writes_for_event(&uk, &frame);
        if writes.is_empty() {
            return;
        }
        // Bounded with the setups' limit [our choice].
        if self.events.len() >= self.config.max_pending {
            self.stats.events_dropped += 1;
            return;
        }
        self.next_req += 1;
        let req_id = self.next_req;
        self.stats.event_writes += 1;
        self.send_hub(req_id, DaemonMsg::WriteReq { app, uk, writes });
        self.events.insert(req_id);
        self.set_timer(now + self.config.setup_timeout, Timer::Event(req_id));
    }

    pub(super) fn on_event_ack(&mut self, req_id: u64, results: &[(WriteStatus, Version)]) {
        self.events.remove(&req_id);
        let ok = results
            .iter()
            .all(|(s, _)| matches!(s, WriteStatus::Ok | WriteStatus::Exists));
        if ok {
            self.stats.event_writes_ok += 1;
        } else {
            self.stats.event_writes_failed += 1;
        }
    }

    pub(super) fn event_deadline(&mut self, req_id: u64) {
        if self.events.remove(&req_id) {
            self.stats.event_writes_failed += 1;
        }
    }
}
