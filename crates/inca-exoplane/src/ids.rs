//! Identifiers shared by every ExoPlane component (specs/exoplane.md §3,
//! §4.6). Each is a newtype over the wire width the spec gives it, so a
//! logical device id cannot be passed where a physical one is meant.

/// An application's id: the `app_id` of the EXO shim and control frames (8 b).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AppId(pub u8);

/// A stateful object of one app (`obj`, 16 b on the control protocol).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjId(pub u16);

/// A logical device (shard owner), `ldev` in the shim (8 b). Logical id `l`
/// has primary physical device `l` and replica `(l + 1) mod N` (§5.8).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LogicalId(pub u8);

/// A physical external device (`pdev`, 16 b). Bit `pdev + 1` of a holders
/// bitmap; bit 0 is the switch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Pdev(pub u16);

/// The most physical devices a holders bitmap (u64, bit 0 = switch) can name.
pub const MAX_PDEVS: usize = 63;

/// A union key `UK_p` (§5.1): the bytes of the union of an app's object keys,
/// in the app's declared field order. At most [`MAX_KEY_LEN`] bytes (the
/// control protocol's `Key` has an 8-bit length).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct UnionKey(pub Vec<u8>);

/// The longest key or value the control protocol can carry (`len` 8).
pub const MAX_KEY_LEN: usize = 255;

/// A per-key write version assigned by the hub's sequencer (§5.4).
pub type Version = u64;

/// A synchronisation round number (§5.6).
pub type Round = u64;

/// An entry of an app's object: (app, object, key bytes). The hub's entry
/// directory (§3.2) and the synchronisation state (§5.6) are both keyed by
/// it; slots differ per device, so they do not name an entry across copies.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct EntryKey {
    /// The app.
    pub app: AppId,
    /// The object.
    pub obj: ObjId,
    /// The object's key bytes (at most [`MAX_KEY_LEN`]).
    pub key: Vec<u8>,
}
