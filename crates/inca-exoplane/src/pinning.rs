//! App-pinning placement (specs/exoplane.md §5.1 "Operating models", §8
//! E6's baseline): each whole app on one place — on the switch if it fits
//! there beside the apps already placed, else on the device with the most
//! remaining capacity. "Fits" is the switch placement model's answer
//! ([`inca_switch::check`]) for the `exoplane_switch` program with those
//! apps pinned to the switch at their full size, the program the baseline
//! runs. The result is the `pin` parameter of both programs
//! ([`crate::programs`]).

use inca_apps::params::Params;
use inca_switch::{check, Profile};

use crate::programs::switch_from_params;

/// Where an app is pinned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// On the switch, whole.
    Switch,
    /// On physical device `N`, whole.
    Device(u8),
}

/// Places `order`'s apps one by one. `declared`: every app in classifier
/// (and stage allocation) order, a superset of `order`; `flows`: table
/// entries per app; `load`: each app's offered load and `capacity` each of
/// the `devices` devices' (one unit); a tie goes to the lowest device.
/// Returns the places in `order`'s order, or the parameter error of a bad
/// input.
pub fn plan(
    profile: &Profile,
    declared: &[&str],
    order: &[&str],
    flows: u64,
    devices: u8,
    load: &[f64],
    capacity: f64,
) -> Result<Vec<Place>, String> {
    if load.len() != order.len() || devices == 0 {
        return Err("one load per app and at least one device".into());
    }
    let mut on_switch: Vec<&str> = Vec::new();
    let mut remaining = vec![capacity; usize::from(devices)];
    let mut out = Vec::new();
    for (app, &l) in order.iter().zip(load) {
        let mut trial = on_switch.clone();
        trial.push(app);
        if fits(profile, declared, &trial, flows, devices)? {
            on_switch.push(app);
            out.push(Place::Switch);
            continue;
        }
        let (d, _) = remaining
            .iter()
            .enumerate()
            .fold((0, f64::NEG_INFINITY), |best, (i, &r)| {
                if r > best.1 {
                    (i, r)
                } else {
                    best
                }
            });
        remaining[d] -= l;
        out.push(Place::Device(d as u8));
    }
    Ok(out)
}

/// Whether `apps`, pinned to the switch at `flows` entries each, place.
fn fits(
    profile: &Profile,
    declared: &[&str],
    apps: &[&str],
    flows: u64,
    devices: u8,
) -> Result<bool, String> {
    let names: Vec<&str> = declared
        .iter()
        .copied()
        .filter(|a| apps.contains(a))
        .collect();
    let pin: Vec<String> = names.iter().map(|a| format!("{a}:sw")).collect();
    let items = [
        format!("apps={}", names.join(",")),
        format!("pin={}", pin.join(",")),
        format!("flows={flows}"),
        format!("devices={devices}"),
    ];
    let params = Params::parse(items.iter().map(String::as_str)).map_err(|e| e.to_string())?;
    let mut sw = switch_from_params(&params).map_err(|e| e.to_string())?;
    Ok(check(profile, &mut sw).is_ok())
}

/// `places` as the `pin` parameter (`app:sw` / `app:N`).
pub fn pin_param(order: &[&str], places: &[Place]) -> String {
    order
        .iter()
        .zip(places)
        .map(|(a, p)| match p {
            Place::Switch => format!("{a}:sw"),
            Place::Device(d) => format!("{a}:{d}"),
        })
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The front-end ensemble at a size where the VPN fits alone: every
    /// later app goes to its own device; far smaller, all fit.
    #[test]
    fn greedy_switch_first_then_emptiest_device() {
        let declared = ["um", "vpn", "tnat", "tacl"];
        let order = ["vpn", "tnat", "tacl", "um"];
        let p = Profile::tofino();
        let big = plan(&p, &declared, &order, 262_144, 4, &[1.0; 4], 4.0).unwrap();
        assert_eq!(
            big,
            [
                Place::Switch,
                Place::Device(0),
                Place::Device(1),
                Place::Device(2)
            ]
        );
        assert_eq!(pin_param(&order, &big), "vpn:sw,tnat:0,tacl:1,um:2");
        let small = plan(&p, &declared, &order, 4_096, 4, &[1.0; 4], 4.0).unwrap();
        assert!(small.iter().all(|&x| x == Place::Switch), "{small:?}");
        // Past the switch's size even the first app goes to a device.
        let huge = plan(&p, &declared, &order[..1], 1 << 20, 4, &[1.0], 4.0).unwrap();
        assert_eq!(huge, [Place::Device(0)]);
        assert!(plan(&p, &declared, &order, 1, 4, &[1.0], 4.0).is_err());
    }
}
