//! Quantities in scenario files: a time, rate or size written as a bare
//! number or as a string with a unit (`20us`, `10Gbps`, `64KiB`), as serde
//! field deserialisers shared by every part of the scenario schema.

use inca_switch::device::Nanos;
use inca_switch::units;
use serde::de::{Deserializer, Error as _};
use serde::Deserialize;

pub(crate) fn de_time<'de, D: Deserializer<'de>>(d: D) -> Result<Nanos, D::Error> {
    let v = NumOrStr::deserialize(d)?;
    v.parse(units::parse_time).ok_or_else(|| {
        D::Error::custom(format!(
            "invalid time {v}: write e.g. 1500, 20us, 1.5ms, 2s"
        ))
    })
}

pub(crate) fn de_opt_time<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Nanos>, D::Error> {
    de_time(d).map(Some)
}

pub(crate) fn de_opt_rate<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    let v = NumOrStr::deserialize(d)?;
    v.parse(units::parse_rate).map(Some).ok_or_else(|| {
        D::Error::custom(format!(
            "invalid rate {v}: write e.g. 10Gbps, 400M, 1000000"
        ))
    })
}

pub(crate) fn de_opt_size<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    let v = NumOrStr::deserialize(d)?;
    v.parse(units::parse_size)
        .map(Some)
        .ok_or_else(|| D::Error::custom(format!("invalid size {v}: write e.g. 1500, 64KiB, 1MB")))
}

/// A quantity written as a number or a string with a unit.
#[derive(Deserialize)]
#[serde(untagged)]
enum NumOrStr {
    Num(u64),
    Str(String),
}

impl NumOrStr {
    fn parse(&self, f: impl Fn(&str) -> Option<u64>) -> Option<u64> {
        match self {
            NumOrStr::Num(n) => Some(*n),
            NumOrStr::Str(s) => f(s),
        }
    }
}

impl std::fmt::Display for NumOrStr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NumOrStr::Num(n) => write!(f, "{n}"),
            NumOrStr::Str(s) => write!(f, "{s:?}"),
        }
    }
}
