//! The planner's optimisation model (ExoPlane spec §5.9): the instance the
//! ILP solves and the assignment it returns.
//!
//! An [`Instance`] holds, per app, the traffic share of each quantum of keys
//! (`F_{p,q}`, hottest first), the latencies of a switch- and a
//! device-served packet, what each quantum costs on the switch
//! (`R_{p,q,switch,r}`) and on each device type, the base costs charged
//! once per device that holds any quantum of the app (`B_{p,i,r}`), and
//! whether the app may go there at all (`C_{p,i}`). Devices come as types
//! (a count of identical devices with one capacity vector).
//!
//! The costs follow a contract the profiler guarantees and the
//! reformulation relies on (see [`Instance::contract_violation`]): the
//! switch's marginal cost of quantum `q` never decreases with `q`, the
//! shares never increase with `q`, and a quantum costs a device the same
//! whichever quantum it is. Under it, some optimal assignment puts on the
//! switch a prefix of the hottest quanta (swap a colder switch quantum for
//! a hotter device one: no more switch resources, the same device
//! resources, no worse latency), which is what lets
//! [`crate::reform`] count quanta instead of assigning each.

use serde::Serialize;

/// Where an app must live (spec §5.9: HIGH = only the switch, LOW = only
/// devices, MEDIUM = both).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Affinity {
    /// Every quantum on the switch.
    High,
    /// The planner decides.
    Medium,
    /// No quantum on the switch.
    Low,
}

impl Affinity {
    /// Parses `high`, `medium` or `low`.
    pub fn parse(s: &str) -> Option<Affinity> {
        match s.to_ascii_lowercase().as_str() {
            "high" => Some(Affinity::High),
            "medium" => Some(Affinity::Medium),
            "low" => Some(Affinity::Low),
            _ => None,
        }
    }
}

/// What an app's quanta cost on one device type.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DeviceCost {
    /// Per quantum, per resource of the type (the same for every quantum).
    pub per_quantum: Vec<f64>,
    /// Charged once on every device of the type holding any quantum.
    pub base: Vec<f64>,
}

/// One app as the ILP sees it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AppModel {
    /// The app's name (unique in the instance).
    pub name: String,
    /// `W_p`: its share of all traffic.
    pub weight: f64,
    /// `Q_p`: keys per quantum.
    pub quantum: u64,
    /// `F_{p,q}`: the share of the app's traffic each quantum carries,
    /// hottest first; its length is the number of quanta `N_p`.
    pub share: Vec<f64>,
    /// HIGH, MEDIUM or LOW.
    pub affinity: Affinity,
    /// `L_{p,switch}`: latency of a switch-served packet, ns.
    pub lat_switch: f64,
    /// `L_{p,device}`: latency of a device-served packet, ns (every device
    /// type: the spec gives it per app, not per device).
    pub lat_device: f64,
    /// `R_{p,q,switch,r}` for the quanta that can be on the switch at all:
    /// quantum `q ≥ switch_quantum.len()` does not fit there (∞).
    pub switch_quantum: Vec<Vec<f64>>,
    /// `B_{p,switch,r}`.
    pub switch_base: Vec<f64>,
    /// Per device type: its costs, or `None` when `C_{p,i} = 0`.
    pub device: Vec<Option<DeviceCost>>,
}

impl AppModel {
    /// `N_p`.
    pub fn quanta(&self) -> usize {
        self.share.len()
    }

    /// Quanta that may be on the switch: 0 for LOW, else those that fit.
    pub fn switch_limit(&self) -> usize {
        if self.affinity == Affinity::Low {
            0
        } else {
            self.switch_quantum.len().min(self.quanta())
        }
    }
}

/// A kind of device and how many of them.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DeviceType {
    /// Its name (the device profile's).
    pub name: String,
    /// How many identical devices.
    pub count: usize,
    /// Resource names, in the order of every cost vector of the type.
    pub resources: Vec<String>,
    /// `Cap_{i,r}` of one device.
    pub cap: Vec<f64>,
}

/// The ILP's input.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Instance {
    /// Switch resource names, in the order of the switch cost vectors.
    pub switch_resources: Vec<String>,
    /// `Cap_{switch,r}`.
    pub switch_cap: Vec<f64>,
    /// Device types.
    pub device_types: Vec<DeviceType>,
    /// The apps.
    pub apps: Vec<AppModel>,
    /// Optional cap on the keys of all switch-served quanta (the flow
    /// managers' total size; 10,240 in the thesis's evaluation).
    pub fm_cap: Option<u64>,
}

/// Where a quantum is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Loc {
    /// On the switch.
    Switch,
    /// On device number `j` (devices numbered type by type).
    Device(usize),
}

/// A solution: the location of every quantum of every app.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Assignment {
    /// `loc[p][q]`.
    pub loc: Vec<Vec<Loc>>,
}

/// Tolerance on resource sums (relative to the capacity) [our choice].
pub const CAP_TOLERANCE: f64 = 1e-7;

impl Instance {
    /// Total number of devices.
    pub fn devices(&self) -> usize {
        self.device_types.iter().map(|t| t.count).sum()
    }

    /// The type of device `j`.
    pub fn type_of(&self, j: usize) -> usize {
        let mut k = j;
        for (t, ty) in self.device_types.iter().enumerate() {
            if k < ty.count {
                return t;
            }
            k -= ty.count;
        }
        panic!("device {j} out of range")
    }

    /// A human name for device `j`: `smartnic#3`.
    pub fn device_name(&self, j: usize) -> String {
        let t = self.type_of(j);
        let first: usize = self.device_types[..t].iter().map(|t| t.count).sum();
        format!("{}#{}", self.device_types[t].name, j - first)
    }

    /// The locations quantum `q` of app `p` may take: the switch if it fits
    /// there and the affinity allows it, and every compatible device unless
    /// the affinity is HIGH.
    pub fn allowed(&self, p: usize, q: usize) -> Vec<Loc> {
        let a = &self.apps[p];
        let mut v = Vec::new();
        if q < a.switch_limit() {
            v.push(Loc::Switch);
        }
        if a.affinity != Affinity::High {
            for j in 0..self.devices() {
                if a.device[self.type_of(j)].is_some() {
                    v.push(Loc::Device(j));
                }
            }
        }
        v
    }

    /// The objective (4.5) of `asg`: `Σ_p W_p · lat_p`, lat from (4.4).
    pub fn objective(&self, asg: &Assignment) -> f64 {
        self.apps
            .iter()
            .zip(&asg.loc)
            .map(|(a, locs)| a.weight * self.app_latency(a, locs))
            .sum()
    }

    /// (4.4): `lat_p = Σ_q F_{p,q} · L_{p,loc(q)}`.
    pub fn app_latency(&self, a: &AppModel, locs: &[Loc]) -> f64 {
        a.share
            .iter()
            .zip(locs)
            .map(|(f, l)| {
                f * match l {
                    Loc::Switch => a.lat_switch,
                    Loc::Device(_) => a.lat_device,
                }
            })
            .sum()
    }

    /// What breaks the cost contract the reformulation relies on (see the
    /// module documentation), or `None`.
    pub fn contract_violation(&self) -> Option<String> {
        for a in &self.apps {
            for q in 1..a.share.len() {
                if a.share[q] > a.share[q - 1] + 1e-15 {
                    return Some(format!("{}: share of quantum {q} rises", a.name));
                }
            }
            for q in 1..a.switch_quantum.len() {
                for r in 0..self.switch_cap.len() {
                    if a.switch_quantum[q][r] + 1e-12 < a.switch_quantum[q - 1][r] {
                        return Some(format!(
                            "{}: switch cost of quantum {q} in {} falls",
                            a.name, self.switch_resources[r]
                        ));
                    }
                }
            }
        }
        None
    }

    /// Binary variables of the naive formulation (one per quantum per
    /// allowed location).
    pub fn naive_binaries(&self) -> usize {
        (0..self.apps.len())
            .map(|p| {
                (0..self.apps[p].quanta())
                    .map(|q| self.allowed(p, q).len())
                    .sum::<usize>()
            })
            .sum()
    }
}

/// Per app: quanta on the switch, and per device.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Counts {
    /// `n_p`.
    pub switch: Vec<usize>,
    /// `[p][j]`: quanta of app p on device j.
    pub device: Vec<Vec<usize>>,
}

impl Assignment {
    /// The quanta per location.
    pub fn counts(&self, inst: &Instance) -> Counts {
        let n = inst.devices();
        let mut c = Counts {
            switch: vec![0; self.loc.len()],
            device: vec![vec![0; n]; self.loc.len()],
        };
        for (p, locs) in self.loc.iter().enumerate() {
            for l in locs {
                match *l {
                    Loc::Switch => c.switch[p] += 1,
                    Loc::Device(j) => c.device[p][j] += 1,
                }
            }
        }
        c
    }

    /// From counts: the hottest `n_p` quanta on the switch, the rest to the
    /// devices in order.
    pub fn from_counts(inst: &Instance, c: &Counts) -> Assignment {
        let loc = inst
            .apps
            .iter()
            .enumerate()
            .map(|(p, a)| {
                let mut v = vec![Loc::Switch; c.switch[p].min(a.quanta())];
                for (j, &m) in c.device[p].iter().enumerate() {
                    v.extend(std::iter::repeat_n(Loc::Device(j), m));
                }
                v
            })
            .collect();
        Assignment { loc }
    }
}
