//! Per-key histories of calls, recorded across devices, checked for
//! linearizability key by key.
//!
//! A system that offers a linearizable object per key (SwiSh's strong mode:
//! reads and writes of a key served by several switches) records each call
//! when it is invoked and when it responds, from whichever device saw it;
//! at the end of a run [`KeyHistories::violations`] checks every key's
//! history against the sequential [`Spec`] and says, per key that fails,
//! why and which calls. Keys are visited in order, so the report does not
//! depend on recording order or hashing.

use std::collections::BTreeMap;
use std::fmt::Debug;

use crate::linearizability::{check, Call, Spec, Verdict};

/// Why a call could not be recorded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecordError {
    /// The call id was already invoked.
    #[error("call {0} invoked twice")]
    DuplicateCall(u64),
    /// A response for a call that was never invoked.
    #[error("response to call {0}, never invoked")]
    UnknownCall(u64),
    /// A second response for a call.
    #[error("call {0} responded twice")]
    AlreadyResponded(u64),
    /// A response earlier than its invocation.
    #[error("call {id} responded at {responded} ns, before its invocation at {invoked} ns")]
    ResponseBeforeInvocation {
        /// The call.
        id: u64,
        /// Its invocation time, ns.
        invoked: u64,
        /// The response time given, ns.
        responded: u64,
    },
}

/// The calls of every key, in invocation order per key.
#[derive(Debug, Clone)]
pub struct KeyHistories<K, I, O> {
    keys: BTreeMap<K, Vec<Call<I, O>>>,
    /// Where each call is: its key and index in that key's history.
    index: BTreeMap<u64, (K, usize)>,
}

impl<K, I, O> Default for KeyHistories<K, I, O> {
    fn default() -> Self {
        KeyHistories {
            keys: BTreeMap::new(),
            index: BTreeMap::new(),
        }
    }
}

impl<K: Ord + Clone + Debug, I, O> KeyHistories<K, I, O> {
    /// No calls yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Call `id` on `key` was invoked at `at` ns with `input`. Call ids are
    /// unique over all keys.
    pub fn invoke(&mut self, key: K, id: u64, at: u64, input: I) -> Result<(), RecordError> {
        if self.index.contains_key(&id) {
            return Err(RecordError::DuplicateCall(id));
        }
        let calls = self.keys.entry(key.clone()).or_default();
        self.index.insert(id, (key, calls.len()));
        calls.push(Call {
            id,
            invoked: at,
            input,
            response: None,
        });
        Ok(())
    }

    /// Call `id` responded at `at` ns with `output`.
    pub fn respond(&mut self, id: u64, at: u64, output: O) -> Result<(), RecordError> {
        let (key, i) = self.index.get(&id).ok_or(RecordError::UnknownCall(id))?;
        let call = self
            .keys
            .get_mut(key)
            .and_then(|calls| calls.get_mut(*i))
            .ok_or(RecordError::UnknownCall(id))?;
        if call.response.is_some() {
            return Err(RecordError::AlreadyResponded(id));
        }
        if at < call.invoked {
            return Err(RecordError::ResponseBeforeInvocation {
                id,
                invoked: call.invoked,
                responded: at,
            });
        }
        call.response = Some((at, output));
        Ok(())
    }

    /// The keys with their calls, in key order.
    pub fn keys(&self) -> impl Iterator<Item = (&K, &[Call<I, O>])> {
        self.keys.iter().map(|(k, v)| (k, v.as_slice()))
    }

    /// Calls recorded over all keys.
    pub fn len(&self) -> usize {
        self.index.len()
    }

    /// Whether nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    /// Each key's verdict against `spec` (a node budget of `budget` per
    /// key), in key order.
    pub fn verdicts<M>(&self, spec: &M, budget: usize) -> Vec<(&K, Verdict)>
    where
        M: Spec<Input = I, Output = O>,
    {
        self.keys
            .iter()
            .map(|(k, calls)| (k, check(spec, calls, budget)))
            .collect()
    }

    /// One message per key that is not linearizable, naming the key, the
    /// reason and the calls; inconclusive keys are reported too when
    /// `strict` (a campaign that must decide every key).
    pub fn violations<M>(&self, spec: &M, budget: usize, strict: bool) -> Vec<String>
    where
        M: Spec<Input = I, Output = O>,
    {
        self.verdicts(spec, budget)
            .into_iter()
            .filter_map(|(k, v)| match v {
                Verdict::Linearizable => None,
                Verdict::Violation { reason, ops } => Some(format!(
                    "key {k:?}: not linearizable: {reason} (calls {ops:?})"
                )),
                Verdict::Inconclusive(why) => {
                    strict.then(|| format!("key {k:?}: undecided: {why}"))
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A counter per key: `true` increments and returns the new count,
    /// `false` reads it.
    struct Counter;

    impl Spec for Counter {
        type State = u32;
        type Input = bool;
        type Output = u32;
        fn init(&self) -> u32 {
            0
        }
        fn step(&self, s: &u32, inc: &bool) -> (u32, u32) {
            let n = s + u32::from(*inc);
            (n, n)
        }
    }

    #[test]
    fn keys_are_checked_separately_and_reported_by_name() {
        let mut h: KeyHistories<&str, bool, u32> = KeyHistories::new();
        // Key "a": two switches increment concurrently, then a read sees 2.
        h.invoke("a", 1, 0, true).unwrap();
        h.invoke("a", 2, 5, true).unwrap();
        h.respond(2, 20, 1).unwrap();
        h.respond(1, 25, 2).unwrap();
        h.invoke("a", 3, 30, false).unwrap();
        h.respond(3, 35, 2).unwrap();
        // Key "b": an increment completes, then a read misses it.
        h.invoke("b", 4, 0, true).unwrap();
        h.respond(4, 10, 1).unwrap();
        h.invoke("b", 5, 20, false).unwrap();
        h.respond(5, 30, 0).unwrap();
        // Key "c": an increment whose response was lost, seen by a read.
        h.invoke("c", 6, 0, true).unwrap();
        h.invoke("c", 7, 50, false).unwrap();
        h.respond(7, 60, 1).unwrap();
        assert_eq!(h.len(), 7);
        let verdicts: Vec<(&str, bool)> = h
            .verdicts(&Counter, 1_000)
            .into_iter()
            .map(|(k, v)| (*k, v.is_ok()))
            .collect();
        assert_eq!(verdicts, vec![("a", true), ("b", false), ("c", true)]);
        let v = h.violations(&Counter, 1_000, true);
        assert_eq!(v.len(), 1);
        assert!(v[0].starts_with("key \"b\": not linearizable"), "{}", v[0]);
        assert!(v[0].ends_with("(calls [5])"), "{}", v[0]);
    }

    #[test]
    fn an_undecided_key_is_reported_only_when_strict() {
        let mut h: KeyHistories<u8, bool, u32> = KeyHistories::new();
        for id in 0..10 {
            h.invoke(0, id, 0, true).unwrap();
        }
        h.invoke(0, 99, 100, false).unwrap();
        h.respond(99, 110, 11).unwrap();
        assert!(h.violations(&Counter, 5, false).is_empty());
        let strict = h.violations(&Counter, 5, true);
        assert_eq!(strict.len(), 1);
        assert!(strict[0].starts_with("key 0: undecided"), "{}", strict[0]);
    }

    #[test]
    fn malformed_recordings_are_typed_errors() {
        let mut h: KeyHistories<u8, bool, u32> = KeyHistories::new();
        h.invoke(1, 7, 100, true).unwrap();
        assert_eq!(h.invoke(2, 7, 0, true), Err(RecordError::DuplicateCall(7)));
        assert_eq!(h.respond(8, 0, 0), Err(RecordError::UnknownCall(8)));
        assert_eq!(
            h.respond(7, 50, 1),
            Err(RecordError::ResponseBeforeInvocation {
                id: 7,
                invoked: 100,
                responded: 50
            })
        );
        h.respond(7, 150, 1).unwrap();
        assert_eq!(h.respond(7, 160, 1), Err(RecordError::AlreadyResponded(7)));
    }
}
