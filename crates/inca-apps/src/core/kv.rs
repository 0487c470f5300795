//! The key-value store core: what a read or an update does to a key's
//! value and what the answer carries ([`serve`], [`apply`]), and the
//! answer's header rewrite ([`answer`]): the request turned around to its
//! sender with the answer's fields written in place.
//!
//! The systems differ in format and in where the value lives, not in this:
//! the plain store ([`crate::kvstore`], NetCache's 28-byte header, 16-byte
//! values in four register arrays behind a key → slot table, misses
//! answered MISS) and RedPlane's (\[RP\] §7.2: op, 32-bit key and value,
//! the value replicated, every key has one) decode their own op codes into
//! [`Op`] and write their own fields.

use crate::headers::{reflect, write_fix_sum};

/// What a request asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// Read the key's value.
    Read,
    /// Write the request's value to the key.
    Update,
}

/// How a request went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Done: the answer carries the key's (new) value.
    Ok,
    /// A read of a key that is not stored: the answer carries zero.
    Miss,
}

/// What serving a request gives: the answer and the value to store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Served<V> {
    /// The answer's status.
    pub status: Status,
    /// The value the answer carries: the stored one for a read, the
    /// written one for an update (echoed).
    pub value: V,
    /// The key's new value (None: unchanged).
    pub store: Option<V>,
}

/// Serves `op` on a key whose value is `stored` (None: not stored), with
/// `new` the request's value (ignored by a read).
pub fn serve<V: Copy + Default>(op: Op, stored: Option<V>, new: V) -> Served<V> {
    match (op, stored) {
        (Op::Read, Some(v)) => Served {
            status: Status::Ok,
            value: v,
            store: None,
        },
        (Op::Read, None) => Served {
            status: Status::Miss,
            value: V::default(),
            store: None,
        },
        (Op::Update, _) => Served {
            status: Status::Ok,
            value: new,
            store: Some(new),
        },
    }
}

/// [`serve`] on a stored key whose value is `cell` (a register entry, a
/// replicated value), in place: returns the value the answer carries.
pub fn apply<V: Copy + Default>(op: Op, cell: &mut V, new: V) -> V {
    let s = serve(op, Some(*cell), new);
    if let Some(v) = s.store {
        *cell = v;
    }
    s.value
}

/// Turns the UDP request in header window `h` (IPv4 header at `l3`, UDP
/// header at `l4`) around to its sender — addresses and ports swapped,
/// which leaves the checksums valid — and writes each `(offset, bytes)`
/// field, updating the UDP checksum incrementally (a zero checksum stays
/// zero). L2 is the caller's: a store that answers out of the arrival port
/// swaps the MACs too. Returns false if a field or header is beyond `h`
/// (fields before it are written).
pub fn answer(h: &mut [u8], l3: usize, l4: usize, fields: &[(usize, &[u8])]) -> bool {
    for &(off, bytes) in fields {
        if !write_fix_sum(h, l4, off, bytes, l4 + 6, true) {
            return false;
        }
    }
    reflect(h, l3, l4)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_return_the_value_and_updates_store_and_echo_it() {
        assert_eq!(
            serve(Op::Read, Some(7u32), 9),
            Served {
                status: Status::Ok,
                value: 7,
                store: None
            }
        );
        assert_eq!(serve(Op::Read, None::<u32>, 9).status, Status::Miss);
        assert_eq!(serve(Op::Read, None::<u32>, 9).value, 0);
        assert_eq!(serve(Op::Update, None, 9u32).store, Some(9));
        let mut cell = 3u32;
        assert_eq!(apply(Op::Read, &mut cell, 5), 3);
        assert_eq!(apply(Op::Update, &mut cell, 5), 5);
        assert_eq!(cell, 5);
    }
}
