//! The SRAM cache policy of spec §5.5: pure decisions the control plane takes
//! on hot-key digests and at epoch boundaries.
//!
//! The cache itself is a data-plane exact-match table with a direct hit
//! counter; this module keeps its mirror (key → value) and decides installs and
//! evictions. Hit counts live in the data plane, so the caller passes a way to
//! read them when a decision needs them.

use std::collections::BTreeMap;

/// Cache capacity (spec §3.1).
pub const CACHE_CAP: usize = 1024;

/// What the control plane must do to the data-plane cache after a digest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CacheDecision {
    /// Add (key, value); the cache had room.
    Install { key: Vec<u8>, value: Vec<u8> },
    /// Remove `evict`, then add (key, value).
    Replace {
        evict: Vec<u8>,
        key: Vec<u8>,
        value: Vec<u8>,
    },
}

/// Mirror of the data-plane cache plus its replacement policy.
#[derive(Debug, Clone)]
pub struct Cache {
    cap: usize,
    entries: BTreeMap<Vec<u8>, Vec<u8>>,
    epochs: u64,
}

impl Default for Cache {
    fn default() -> Self {
        Self::new(CACHE_CAP)
    }
}

impl Cache {
    pub fn new(cap: usize) -> Self {
        Self {
            cap,
            entries: BTreeMap::new(),
            epochs: 0,
        }
    }
    pub fn capacity(&self) -> usize {
        self.cap
    }
    pub fn len(&self) -> usize {
        self.entries.len()
    }
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
    pub fn contains(&self, key: &[u8]) -> bool {
        self.entries.contains_key(key)
    }
    pub fn get(&self, key: &[u8]) -> Option<&[u8]> {
        self.entries.get(key).map(Vec::as_slice)
    }
    /// Cached entries in key order.
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        self.entries
            .iter()
            .map(|(k, v)| (k.as_slice(), v.as_slice()))
    }
    /// Completed epochs.
    pub fn epochs(&self) -> u64 {
        self.epochs
    }

    /// Decide on a digest for `key` with sketch estimate `est`. `value` is the
    /// table's current value (`None` if the key is not in the table);
    /// `hits_of` reads a cached key's hit counter for this epoch.
    ///
    /// [our choice] Among equally cold entries the smallest key is evicted, so
    /// the decision is deterministic.
    pub fn on_digest(
        &mut self,
        key: &[u8],
        est: u64,
        value: Option<&[u8]>,
        hits_of: impl Fn(&[u8]) -> u64,
    ) -> Option<CacheDecision> {
        let value = value?;
        if self.cap == 0 || self.entries.contains_key(key) {
            return None;
        }
        if self.entries.len() < self.cap {
            self.entries.insert(key.to_vec(), value.to_vec());
            return Some(CacheDecision::Install {
                key: key.to_vec(),
                value: value.to_vec(),
            });
        }
        let (coldest, hits) = self
            .entries
            .keys()
            .map(|k| (k, hits_of(k)))
            .min_by(|a, b| a.1.cmp(&b.1).then_with(|| a.0.cmp(b.0)))?;
        if est <= hits {
            return None;
        }
        let evict = coldest.clone();
        self.entries.remove(&evict);
        self.entries.insert(key.to_vec(), value.to_vec());
        Some(CacheDecision::Replace {
            evict,
            key: key.to_vec(),
            value: value.to_vec(),
        })
    }

    /// Keep the mirror coherent with an update; returns whether the key was cached.
    pub fn modify(&mut self, key: &[u8], value: &[u8]) -> bool {
        match self.entries.get_mut(key) {
            Some(v) => {
                *v = value.to_vec();
                true
            }
            None => false,
        }
    }
    /// Drop a key (delete); returns whether it was cached.
    pub fn remove(&mut self, key: &[u8]) -> bool {
        self.entries.remove(key).is_some()
    }
    /// Epoch boundary: the caller resets the data-plane hit counters and the
    /// sketch; the cache keeps its contents (spec §5.5).
    pub fn end_epoch(&mut self) {
        self.epochs += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn install_then_evict_only_when_hotter() {
        let mut c = Cache::new(2);
        let v = [9u8];
        assert!(
            c.on_digest(b"a", 5, None, |_| 0).is_none(),
            "absent key ignored"
        );
        assert!(matches!(
            c.on_digest(b"a", 5, Some(&v), |_| 0),
            Some(CacheDecision::Install { .. })
        ));
        assert!(
            c.on_digest(b"a", 50, Some(&v), |_| 0).is_none(),
            "cached key ignored"
        );
        c.on_digest(b"b", 5, Some(&v), |_| 0).unwrap();
        let hits = |k: &[u8]| if k == b"a" { 10 } else { 3 };
        assert!(
            c.on_digest(b"c", 3, Some(&v), hits).is_none(),
            "est must exceed"
        );
        assert_eq!(
            c.on_digest(b"c", 4, Some(&v), hits),
            Some(CacheDecision::Replace {
                evict: b"b".to_vec(),
                key: b"c".to_vec(),
                value: v.to_vec()
            })
        );
        assert_eq!(c.len(), 2);
        assert!(c.contains(b"a") && c.contains(b"c"));
    }

    #[test]
    fn never_exceeds_capacity() {
        let mut c = Cache::new(CACHE_CAP);
        for i in 0..3000u32 {
            c.on_digest(&i.to_be_bytes(), u64::from(i), Some(&[1]), |_| 0);
            assert!(c.len() <= CACHE_CAP);
        }
        assert_eq!(c.len(), CACHE_CAP);
    }
}
