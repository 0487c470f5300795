//! The switch and device programs built from named parameters, the way
//! `inca check` and scenario files size programs (`--set fm=10240`), so
//! that the placement of an ExoPlane deployment can be checked before a
//! planner exists (§5.9 will produce these sizes).
//!
//! Parameters (both programs):
//! - `apps`: the apps, in classifier order, from `nat`, `fw`, `um`,
//!   `vpn`, `sp`, `tnat` (per-tenant NAT), `tacl` (per-tenant ACL), `nc`
//!   (NetCache) (default `um,nat,fw`: the stage allocator places in
//!   declaration order, and UnivMon's long dependency chain fits when
//!   declared first; as `nat,fw,um` it needs 13 stages); app ids are 1, 2,
//!   … in that order.
//!   Classifier rules: UnivMon UDP/TCP port 7777, firewall 5353, SYN proxy
//!   2222, VPN 4789 (VXLAN), per-tenant ACL 8080, NetCache 50000 (its
//!   protocol's port at both ends), the NATs everything else [our choice,
//!   as the tests]. NetCache's storage server is behind `outside_port`,
//!   its clients behind port 0 (port 1 if the outside is 0), and it caches
//!   at most [`NC_SLOTS`] keys [our choice].
//! - `flows`: table entries per app (default 65,536 on the switch, 1M on a
//!   device).
//! - `outside_port`: the apps' outside port (default 1).
//! - `admit`: 1 has the per-tenant ACL and the VPN set up new flows on
//!   their first packet, like the NATs (the ACL a permit entry, the VPN
//!   its VM's mapping; their control logic writes them; §8 E6); 0
//!   (default) leaves flows without entries denied or dropped.
//! - `pin`: app-pinning (§5.1 "Operating models", §8 E6's baseline):
//!   `app:sw` or `app:N`, comma-separated, e.g. `vpn:sw,tnat:0`. An app
//!   pinned to `sw` runs whole on the switch as a HIGH app (its switch
//!   instance with all `flows` entries, its own control logic on the
//!   switch's control plane, no flow manager); one pinned to device `N`
//!   is a LOW app the switch sends every packet of to that device (no
//!   flow manager, no shard hash), whose entries the hub writes to that
//!   device alone. Apps not named keep their ExoPlane affinity. Both
//!   programs must be given the same `pin`. Where each app goes is
//!   decided outside, with the placement model ([`crate::pinning`]).
//!
//! Switch only:
//! - `fm`: flow-manager entries in total, split evenly over the MEDIUM apps
//!   (default 10,240, Thesis §4.6.5).
//! - `devices`: external devices (default 4), on switch ports
//!   `device_port`, `device_port + 1`, … (default 2).
//!
//! - `hub`: 1 runs the hub on the switch's control plane (§5.4–§5.8),
//!   talking to the devices' daemons over control sessions; 0 (default)
//!   leaves flow-manager and app entries to control messages
//!   ([`crate::manual`]).
//! - `converged`: 1 asks a checked run to find every synchronised copy in
//!   agreement at its end ([`crate::checks`]; only for scenarios whose
//!   traffic and faults stop at least 3 s before the end).
//! - `failover`: 0 turns device failover off (§8 E10's baseline: the
//!   switch keeps sending a lost device its shards); default 1.
//! - `breakage`: a deliberate fault in the hub for showing the checks
//!   catch it (`fm_before_acks`, `ack_before_apply`); never in real runs.
//!
//! Device only: `cms_width` (default 65,536), `theta` (default 64);
//! `pdev` (0 ..) runs the daemon as that physical device, of `devices`
//! (default 4) in the deployment (without `pdev`, no daemon).

use inca_apps::params::{ParamError, Params};

use crate::app::{catalog, Affinity, AppSpec};
use crate::daemon::DaemonConfig;
use crate::device::DaemonSetup;
use crate::device::{DeviceConfig, ExoDevice, CMS_WIDTH, THETA};
use crate::hub::{Breakage, HubConfig};
use crate::ids::AppId;
use crate::ids::Pdev;
use crate::switch::{ExoSwitch, HubSetup, SwitchApp, SwitchConfig};

/// The device's report threshold θ (the data plane's and the daemon's).
fn dev_theta(p: &Params) -> Result<u32, ParamError> {
    Ok(p.count("theta", u64::from(THETA), u64::from(u32::MAX))? as u32)
}
use inca_switch::composite::ClassifyRule;
use inca_switch::PortId;

/// NetCache's cached keys at most (`flows` if smaller) [our choice]: 16K
/// keys × 128 B of values, what places on a Tofino beside the leaf
/// scenario's NAT, firewall and SYN proxy at 65,536 flows each when
/// declared first (`apps=nc,nat,fw,sp`; its value arrays' map RAM runs out
/// at 32K keys, and declared last its 23 stateful ALUs no longer find room
/// in the stages after the other apps).
pub const NC_SLOTS: usize = 16_384;

/// The switch program's parameter names.
pub const SWITCH_PARAMS: &[&str] = &[
    "apps",
    "flows",
    "outside_port",
    "fm",
    "devices",
    "device_port",
    "hub",
    "converged",
    "breakage",
    "failover",
    "pin",
    "admit",
];
/// The device program's parameter names.
pub const DEVICE_PARAMS: &[&str] = &[
    "apps",
    "flows",
    "outside_port",
    "cms_width",
    "theta",
    "pdev",
    "devices",
    "pin",
    "admit",
];

fn bad(name: &str, reason: impl Into<String>) -> ParamError {
    ParamError::Value {
        name: name.to_string(),
        reason: reason.into(),
    }
}

/// The apps named by `apps`, each with `flows` entries.
fn apps(p: &Params, default_flows: u64) -> Result<Vec<AppSpec>, ParamError> {
    let flows = p.count("flows", default_flows, 1 << 32)? as usize;
    let outside = p.number("outside_port", 1, 0, 511)? as PortId;
    let names = p.text("apps").unwrap_or("um,nat,fw");
    let admit = p.number("admit", 0, 0, 1)? == 1;
    let mut out = Vec::new();
    for (i, name) in names.split(',').map(str::trim).enumerate() {
        let id = AppId(u8::try_from(i + 1).map_err(|_| bad("apps", "at most 255 apps"))?);
        let spec = match name {
            "nat" => catalog::nat(id, "nat", flows, outside),
            "fw" => catalog::firewall(id, "fw", flows, outside, 4096),
            "um" => catalog::univmon(id, "um", 8, 3, 1024),
            "vpn" if admit => catalog::vpn_admitting(id, "vpn", flows, outside, 256),
            "vpn" => catalog::vpn(id, "vpn", flows, outside, 256),
            "sp" => catalog::synproxy(id, "sp", flows, 0, outside),
            "tnat" => catalog::tenant_nat(id, "tnat", flows, outside),
            "tacl" if admit => catalog::tenant_acl_admitting(id, "tacl", flows, outside),
            "tacl" => catalog::tenant_acl(id, "tacl", flows, outside),
            "nc" => {
                let clients = if outside == 0 { 1 } else { 0 };
                let slots = flows.min(NC_SLOTS);
                catalog::netcache(id, "nc", slots, outside, clients, 65_536)
            }
            other => {
                return Err(bad(
                    "apps",
                    format!("unknown app {other:?} (nat, fw, um, vpn, sp, tnat, tacl, nc)"),
                ))
            }
        };
        if out.iter().any(|a: &AppSpec| a.name == spec.name) {
            return Err(bad("apps", format!("{name} named twice")));
        }
        out.push(spec);
    }
    Ok(out)
}

/// Applies `pin` to `apps` (switch-pinned → HIGH, device-pinned → LOW);
/// the device-pinned apps with their devices. `devices`: how many there
/// are.
fn pins(p: &Params, apps: &mut [AppSpec], devices: u64) -> Result<Vec<(String, u8)>, ParamError> {
    let Some(text) = p.text("pin") else {
        return Ok(Vec::new());
    };
    let mut seen: Vec<&str> = Vec::new();
    let mut out = Vec::new();
    for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let Some((name, place)) = item.split_once(':') else {
            return Err(bad("pin", format!("{item:?}: app:sw or app:N")));
        };
        let (name, place) = (name.trim(), place.trim());
        if seen.contains(&name) {
            return Err(bad("pin", format!("{name} pinned twice")));
        }
        seen.push(name);
        let Some(spec) = apps.iter_mut().find(|a| a.name == name) else {
            return Err(bad("pin", format!("{name:?} is not one of the apps")));
        };
        if place == "sw" {
            spec.affinity = Affinity::High;
            continue;
        }
        let d: u8 = place
            .parse()
            .ok()
            .filter(|&d| u64::from(d) < devices)
            .ok_or_else(|| {
                bad(
                    "pin",
                    format!("{item:?}: sw or a device 0..{}", devices.saturating_sub(1)),
                )
            })?;
        spec.affinity = Affinity::Low;
        out.push((name.to_string(), d));
    }
    Ok(out)
}

/// The classifier rules for `apps`.
fn rules(apps: &[AppSpec]) -> Vec<ClassifyRule> {
    let port = |name: &str| match name {
        "um" => Some(7777),
        "fw" => Some(5353),
        "sp" => Some(2222),
        "vpn" => Some(4789),
        "tacl" => Some(8080),
        "nc" => Some(inca_wire::exoplane::netcache::PORT),
        _ => None,
    };
    let mut rules: Vec<ClassifyRule> = apps
        .iter()
        .filter_map(|a| {
            port(&a.name).map(|dport| ClassifyRule {
                dport: Some(dport),
                ..ClassifyRule::any(&a.name)
            })
        })
        .collect();
    rules.extend(
        apps.iter()
            .filter(|a| port(&a.name).is_none())
            .map(|a| ClassifyRule::any(&a.name)),
    );
    rules
}

/// The switch program from parameters.
pub fn switch_from_params(p: &Params) -> Result<ExoSwitch, ParamError> {
    p.check_known("exoplane_switch", SWITCH_PARAMS)?;
    let mut specs = apps(p, 65_536)?;
    let n_devices = p.number("devices", 4, 1, 64)?;
    let pinned = pins(p, &mut specs, n_devices)?;
    let medium = specs
        .iter()
        .filter(|a| a.affinity == Affinity::Medium)
        .count();
    let fm = p.count("fm", 10_240, 1 << 32)? as usize;
    let devices = p.number("devices", 4, 1, 64)? as PortId;
    let first = p.number("device_port", 2, 0, 511)? as PortId;
    if u64::from(first) + u64::from(devices) > 512 {
        return Err(bad("device_port", "devices run past port 511"));
    }
    let rules = rules(&specs);
    let apps: Vec<SwitchApp> = specs
        .into_iter()
        .map(|spec| SwitchApp {
            fm_entries: if spec.affinity == Affinity::Medium {
                (fm / medium.max(1)).max(1)
            } else {
                0
            },
            spec,
        })
        .collect();
    let hub_pins = pinned
        .iter()
        .filter_map(|(name, d)| {
            let app = apps.iter().find(|a| &a.spec.name == name)?;
            Some((app.spec.id, Pdev(u16::from(*d))))
        })
        .collect();
    let mut cfg = SwitchConfig::new(apps, rules, (first..first + devices).collect());
    cfg.pinned = pinned;
    let sw = ExoSwitch::new(cfg).map_err(|e| bad("apps", e.to_string()))?;
    let mut config = HubConfig::new(devices as u8);
    config.pinned = hub_pins;
    config.breakage = match p.text("breakage") {
        None => None,
        Some("fm_before_acks") => Some(Breakage::FmInsertBeforeObjectAcks),
        Some("ack_before_apply") => Some(Breakage::AckBeforeHoldersApplied),
        Some(other) => {
            return Err(bad(
                "breakage",
                format!("{other:?}: fm_before_acks or ack_before_apply (tests only)"),
            ))
        }
    };
    Ok(match p.number("hub", 0, 0, 1)? {
        1 => sw.with_hub(HubSetup {
            config,
            converged: p.number("converged", 0, 0, 1)? == 1,
            failover: p.number("failover", 1, 0, 1)? == 1,
        }),
        _ => sw,
    })
}

/// The device program from parameters (HIGH apps left out: they never
/// reach a device).
pub fn device_from_params(p: &Params) -> Result<ExoDevice, ParamError> {
    p.check_known("exoplane_device", DEVICE_PARAMS)?;
    let mut apps = apps(p, 1 << 20)?;
    pins(p, &mut apps, p.number("devices", 4, 1, 64)?)?;
    let apps = apps
        .into_iter()
        .filter(|a| a.affinity != Affinity::High)
        .collect();
    let mut cfg = DeviceConfig::new(apps);
    cfg.cms_width = p.number("cms_width", CMS_WIDTH as u64, 2, 1 << 24)? as usize;
    if !cfg.cms_width.is_power_of_two() {
        return Err(bad("cms_width", "a power of two (indices are hash bits)"));
    }
    cfg.theta = p.count("theta", u64::from(THETA), u64::from(u32::MAX))? as u32;
    let devices = p.number("devices", 4, 1, 64)? as u8;
    let dev = ExoDevice::new(cfg).map_err(|e| bad("apps", e.to_string()))?;
    if p.text("pdev").is_none() {
        return Ok(dev);
    }
    let pdev = p.number("pdev", 0, 0, u64::from(devices) - 1)? as u16;
    let mut config = DaemonConfig::new(Pdev(pdev));
    config.theta = dev_theta(p)?;
    Ok(dev.with_daemon(DaemonSetup {
        config,
        n_devices: devices,
        seed: u64::from(pdev),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use inca_switch::{check, Profile};

    fn params(items: &[&str]) -> Params {
        Params::parse(items.iter().copied()).unwrap()
    }

    #[test]
    fn sizes_from_parameters_and_placement() {
        // The evaluation's 10,240 FM entries and 64K flows per app fit.
        let mut sw = switch_from_params(&Params::default()).unwrap();
        let placed = check(&Profile::tofino(), &mut sw).unwrap();
        assert!(placed.objects.iter().any(|o| o.name == "exo/fm_nat"));
        let mut dev = device_from_params(&Params::default()).unwrap();
        check(&Profile::smartnic(), &mut dev).unwrap();
        // Both §8 scenarios place: front-end (VPN, per-tenant NAT and ACL,
        // UnivMon) and leaf (NetCache first, per-VM NAT, FW, SYN proxy).
        for apps in ["apps=um,vpn,tnat,tacl", "apps=nc,nat,fw,sp"] {
            let mut sw = switch_from_params(&params(&[apps])).unwrap();
            let placed = check(&Profile::tofino(), &mut sw).unwrap();
            for o in [
                "tacl/acl_map",
                "tnat/nat_out",
                "nc/nc_cache",
                "nc/nc_value15",
            ] {
                assert!(
                    !apps.contains(&o[..o.find('/').unwrap()])
                        || placed.objects.iter().any(|p| p.name == o),
                    "{apps}: {o}"
                );
            }
            let mut dev = device_from_params(&params(&[apps])).unwrap();
            check(&Profile::smartnic(), &mut dev).unwrap();
        }
        // A flow manager far beyond the switch's SRAM is refused, by name.
        let mut big = switch_from_params(&params(&["fm=100M"])).unwrap();
        let e = check(&Profile::tofino(), &mut big).unwrap_err();
        assert!(e.to_string().contains("fm_"), "{e}");
        // Bad input names the parameter.
        for (bad, name) in [
            (&["apps=nat,xyz"][..], "apps"),
            (&["apps=nat,nat"][..], "apps"),
            (&["devices=0"][..], "devices"),
            (&["fm=0"][..], "fm"),
            (&["colour=red"][..], "colour"),
        ] {
            let e = switch_from_params(&params(bad)).err().unwrap().to_string();
            assert!(e.contains(name), "{bad:?}: {e}");
        }
        let e = device_from_params(&params(&["cms_width=1000"]))
            .err()
            .unwrap();
        assert!(e.to_string().contains("cms_width"), "{e}");
    }

    #[test]
    fn pins_make_whole_apps_high_or_low_on_one_device() {
        let items = [
            "apps=um,vpn,tnat,tacl",
            "pin=vpn:sw,tnat:0,tacl:1,um:2",
            "flows=262144",
            "hub=1",
        ];
        let sw = switch_from_params(&params(&items)).unwrap();
        let cfg = sw.config();
        let affinity = |n: &str| {
            cfg.apps
                .iter()
                .find(|a| a.spec.name == n)
                .unwrap()
                .spec
                .affinity
        };
        assert_eq!(affinity("vpn"), Affinity::High);
        assert_eq!(affinity("tnat"), Affinity::Low);
        assert_eq!(affinity("um"), Affinity::Low);
        assert_eq!(
            cfg.pinned,
            [("tnat".into(), 0), ("tacl".into(), 1), ("um".into(), 2)]
        );
        // No flow manager for any of them.
        assert!(cfg.apps.iter().all(|a| a.fm_entries == 0));
        // The devices run the device-pinned apps, UnivMon among them.
        let dev_items = ["apps=um,vpn,tnat,tacl", "pin=vpn:sw,tnat:0,tacl:1,um:2"];
        let mut dev = device_from_params(&params(&dev_items)).unwrap();
        let placed = check(&Profile::smartnic(), &mut dev).unwrap();
        assert!(placed.objects.iter().any(|o| o.name.starts_with("um/")));
        assert!(!placed.objects.iter().any(|o| o.name.starts_with("vpn/")));
        for (bad, why) in [
            ("pin=vpn", "app:sw"),
            ("pin=vpn:sw,vpn:0", "twice"),
            ("pin=xyz:sw", "not one of"),
            ("pin=vpn:4", "device"),
        ] {
            let e = switch_from_params(&params(&["apps=vpn", bad]))
                .err()
                .unwrap()
                .to_string();
            assert!(e.contains("pin") && e.contains(why), "{bad}: {e}");
        }
    }
}
