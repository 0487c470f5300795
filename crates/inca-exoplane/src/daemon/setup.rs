//! New-flow setup (spec §5.4, daemon side): one pending setup per union
//! key, a bounded buffer of its frames, released only after the hub's
//! WRITE_ACK says every write is OK or EXISTS.

use std::collections::{BTreeMap, HashMap};

use inca_switch::device::Nanos;

use super::{Daemon, DaemonOutput, Timer};
use crate::hub::msg::{DaemonMsg, WriteStatus};
use crate::ids::{AppId, UnionKey, Version};

struct Pending {
    req_id: u64,
    frames: Vec<Vec<u8>>,
}

/// Pending setups by flow, and the flow of each request id.
#[derive(Default)]
pub(super) struct Setups {
    pending: BTreeMap<(AppId, UnionKey), Pending>,
    by_req: HashMap<u64, (AppId, UnionKey)>,
}

impl Setups {
    pub fn len(&self) -> usize {
        self.pending.len()
    }
}

impl Daemon {
    pub(super) fn on_miss(&mut self, now: Nanos, app: AppId, uk: UnionKey, frame: Vec<u8>) {
        let key = (app, uk);
        if let Some(p) = self.setups.pending.get_mut(&key) {
            if p.frames.len() < self.config.max_buffered {
                p.frames.push(frame);
            } else {
                self.stats.frames_dropped += 1;
            }
            return;
        }
        let Some(logic) = self.apps.get(&app) else {
            self.stats.unknown += 1;
            self.stats.frames_dropped += 1;
            return;
        };
        if self.setups.pending.len() >= self.config.max_pending {
            self.stats.frames_dropped += 1;
            return;
        }
        let writes = logic.writes_for(&key.1, &frame);
        if writes.is_empty() {
            self.stats.frames_dropped += 1;
            return;
        }
        self.next_req += 1;
        let req_id = self.next_req;
        self.stats.setups += 1;
        self.send_hub(
            req_id,
            DaemonMsg::WriteReq {
                app,
                uk: key.1.clone(),
                writes,
            },
        );
        self.setups.by_req.insert(req_id, key.clone());
        self.setups.pending.insert(
            key,
            Pending {
                req_id,
                frames: vec![frame],
            },
        );
        self.set_timer(now + self.config.setup_timeout, Timer::Setup(req_id));
    }

    pub(super) fn on_ack(
        &mut self,
        _now: Nanos,
        req_id: u64,
        results: Vec<(WriteStatus, Version)>,
    ) {
        let Some(key) = self.setups.by_req.remove(&req_id) else {
            // Late ack of a setup that timed out.
            self.stats.unknown += 1;
            return;
        };
        let p = self.setups.pending.remove(&key).expect("indexed");
        let ok = results
            .iter()
            .all(|(s, _)| matches!(s, WriteStatus::Ok | WriteStatus::Exists));
        if ok {
            self.stats.setups_ok += 1;
            self.stats.frames_reinjected += p.frames.len() as u64;
            for frame in p.frames {
                self.out.push_back(DaemonOutput::Reinject {
                    app: key.0,
                    uk: key.1.clone(),
                    frame,
                });
            }
        } else {
            self.stats.setups_failed += 1;
            self.stats.frames_dropped += p.frames.len() as u64;
        }
    }

    pub(super) fn setup_deadline(&mut self, req_id: u64) {
        let Some(key) = self.setups.by_req.remove(&req_id) else {
            return;
        };
        if let Some(p) = self.setups.pending.remove(&key) {
            debug_assert_eq!(p.req_id, req_id);
            self.stats.setups_timed_out += 1;
            self.stats.frames_dropped += p.frames.len() as u64;
        }
    }
}
