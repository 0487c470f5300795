//! Control events of switch-served packets (spec §5.4, last paragraph
//! [our choice there]): the switch punts them to the hub, which forwards
//! each (EVENT_FWD) to the daemon of primary(l) for the flow's shard l,
//! whose control logic issues writes like any setup's. As in the data
//! plane, the replica takes the primary's place while the primary is not
//! up; with neither up (or without a session to it) the event is dropped
//! and counted: the app then behaves as its switch copy alone would
//! without a control plane (a firewall connection stays until it ages).

use super::app::{placement, shard};
use super::{DeviceStatus, Hub, HubOutput};
use crate::ids::{AppId, Pdev, UnionKey};

impl Hub {
    pub(super) fn on_event(&mut self, app: AppId, uk: UnionKey, frame: Vec<u8>) {
        let Some(pdev) = self.event_target(app, &uk) else {
            self.stats.events_dropped += 1;
            return;
        };
        self.stats.events_fwd += 1;
        self.out.push_back(HubOutput::EventFwd { pdev, app, frame });
    }

    /// The daemon an event of flow `uk` goes to: the primary of its shard
    /// if up with a session, else the replica if so.
    pub fn event_target(&self, app: AppId, uk: &UnionKey) -> Option<Pdev> {
        if !self.apps.contains_key(&app) {
            return None;
        }
        let n = self.config.n_devices;
        let (primary, replica) = placement(shard(app, uk, n), n);
        [primary, replica].into_iter().find(|&d| {
            self.devices.status(d) == Some(DeviceStatus::Up) && self.devices.session_up(d)
        })
    }
}
