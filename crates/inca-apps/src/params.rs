//! Named parameters of an app (`--set flows=65536`), checked against the
//! names the app knows so that a typo is an error, not a silent default.

use std::collections::BTreeMap;

/// A parameter problem, naming the parameter.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParamError {
    /// `name=value` was not in that form.
    #[error("expected name=value, got {0:?}")]
    Syntax(String),
    /// The app has no parameter of that name.
    #[error("unknown parameter {name:?}; {app} takes: {known}")]
    Unknown {
        /// The name given.
        name: String,
        /// The app.
        app: String,
        /// The names it takes.
        known: String,
    },
    /// The value is not a number in range.
    #[error("parameter {name}: {reason}")]
    Value {
        /// The parameter.
        name: String,
        /// What was wrong.
        reason: String,
    },
}

/// Parameter values as given, by name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Params(BTreeMap<String, String>);

impl Params {
    /// Parses `name=value` strings.
    pub fn parse<'a>(items: impl IntoIterator<Item = &'a str>) -> Result<Params, ParamError> {
        let mut map = BTreeMap::new();
        for item in items {
            let (k, v) = item
                .split_once('=')
                .ok_or_else(|| ParamError::Syntax(item.to_string()))?;
            map.insert(k.trim().to_string(), v.trim().to_string());
        }
        Ok(Params(map))
    }

    /// Sets one value.
    pub fn set(&mut self, name: &str, value: impl ToString) -> &mut Self {
        self.0.insert(name.to_string(), value.to_string());
        self
    }

    /// Fails if any given name is not in `known` (what `app` takes).
    pub fn check_known(&self, app: &str, known: &[&str]) -> Result<(), ParamError> {
        match self.0.keys().find(|k| !known.contains(&k.as_str())) {
            Some(name) => Err(ParamError::Unknown {
                name: name.clone(),
                app: app.to_string(),
                known: known.join(", "),
            }),
            None => Ok(()),
        }
    }

    /// Every `(name, value)` given, in name order.
    pub fn entries(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// The raw text of `name`, if given (for names and choices).
    pub fn text(&self, name: &str) -> Option<&str> {
        self.0.get(name).map(String::as_str)
    }

    /// The value of `name` as an IPv4 address, or `default`.
    pub fn ipv4(&self, name: &str, default: [u8; 4]) -> Result<[u8; 4], ParamError> {
        match self.0.get(name) {
            None => Ok(default),
            Some(raw) => raw
                .parse::<std::net::Ipv4Addr>()
                .map(|a| a.octets())
                .map_err(|_| ParamError::Value {
                    name: name.to_string(),
                    reason: format!("{raw:?} is not an IPv4 address"),
                }),
        }
    }

    /// The value of `name` as a whole number in `1..=max`, or `default`.
    /// Accepts `_` separators and `K`/`M`/`G` suffixes (powers of 1000).
    pub fn count(&self, name: &str, default: u64, max: u64) -> Result<u64, ParamError> {
        self.number(name, default, 1, max)
    }

    /// The value of `name` as a whole number in `min..=max`, or `default`
    /// (same syntax as [`Params::count`]).
    pub fn number(&self, name: &str, default: u64, min: u64, max: u64) -> Result<u64, ParamError> {
        let Some(raw) = self.0.get(name) else {
            return Ok(default);
        };
        let err = |reason: String| ParamError::Value {
            name: name.to_string(),
            reason,
        };
        let s = raw.replace('_', "");
        let (digits, mult) = match s.chars().last() {
            Some('k' | 'K') => (&s[..s.len() - 1], 1_000),
            Some('m' | 'M') => (&s[..s.len() - 1], 1_000_000),
            Some('g' | 'G') => (&s[..s.len() - 1], 1_000_000_000),
            _ => (s.as_str(), 1),
        };
        let v: u64 = digits
            .parse()
            .map_err(|_| err(format!("{raw:?} is not a whole number")))?;
        let v = v
            .checked_mul(mult)
            .ok_or_else(|| err(format!("{raw} is too large")))?;
        if v < min || v > max {
            return Err(err(format!("{v} is out of range {min}..={max}")));
        }
        Ok(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_checks_and_reads_counts() {
        let p = Params::parse(["flows=10M", "ports = 4"]).unwrap();
        assert_eq!(p.count("flows", 1, u64::MAX).unwrap(), 10_000_000);
        assert_eq!(p.count("ports", 1, 64).unwrap(), 4);
        assert_eq!(p.count("other", 7, 64).unwrap(), 7);
        assert!(p.check_known("nat", &["flows"]).is_err());
        assert!(p.check_known("nat", &["flows", "ports"]).is_ok());
        assert!(Params::parse(["flows"]).is_err());
        let bad = Params::parse(["flows=lots"]).unwrap();
        let e = bad.count("flows", 1, 10).unwrap_err().to_string();
        assert!(e.contains("flows"), "{e}");
        assert!(Params::parse(["flows=0"])
            .unwrap()
            .count("flows", 1, 10)
            .is_err());
        assert_eq!(
            Params::parse(["port=0"])
                .unwrap()
                .number("port", 5, 0, 10)
                .unwrap(),
            0
        );
        let ip = Params::parse(["public=198.51.101.1", "bad=1.2.3"]).unwrap();
        assert_eq!(ip.ipv4("public", [0; 4]).unwrap(), [198, 51, 101, 1]);
        assert_eq!(ip.ipv4("other", [1, 2, 3, 4]).unwrap(), [1, 2, 3, 4]);
        assert!(ip
            .ipv4("bad", [0; 4])
            .unwrap_err()
            .to_string()
            .contains("bad"));
    }
}
