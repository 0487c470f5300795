//! The lazy two-copy snapshot of one register array (spec §5.9, \[TH\] §5.4.4
//! and App. B), as the stateful ALUs of a Tofino-class switch run it.
//!
//! Per array of `n` entries there are three register arrays: `active` (one
//! entry: which copy is current), `last_upd[n]` (which copy each entry last
//! wrote) and `pair[n]` (the two interleaved 32-bit copies, `lo` = copy 0,
//! `hi` = copy 1). Every packet makes exactly one register action on each of
//! them, as the hardware allows:
//!
//! 1. `active`: a snapshot packet for index 0 flips it; every other packet
//!    reads it. Either way the action returns the (new) value `a`.
//! 2. `last_upd[i]`: returns the old bit `p` and stores `a`.
//! 3. `pair[i]`, update with increment `u`: if `p ≠ a` (first touch since the
//!    flip) `c_a = c_¬a + u`, else `c_a += u`. Snapshot: if `p ≠ a`, `c_a =
//!    c_¬a`; the snapshot value is `c_¬a` in both cases.
//!
//! So after a flip the inactive copy of every entry freezes at its value of
//! the flip instant until the burst reads it, which is what makes a burst a
//! consistent snapshot — provided the burst visits every index before the
//! next flip (the generator validator enforces that, §9 item 15).
//!
//! [`LazyReference`] is the algorithm's specification: a plain array whose
//! snapshot is a copy taken at the flip. Tests drive both with the same
//! interleavings.

use inca_switch::objects::Objects;
use inca_switch::register::Pair;
use inca_switch::{
    AccessError, ArrayDecl, ControlPlane, DataPlane, Declare, DeclareError, ObjectId,
    RegisterHandle,
};

/// One lazily snapshotted register array. See the module documentation.
#[derive(Debug, Clone, Copy)]
pub struct LazyArray {
    active: RegisterHandle<u8>,
    last_upd: RegisterHandle<u8>,
    pair: RegisterHandle<Pair>,
    entries: usize,
}

fn copy(p: &Pair, which: u8) -> u32 {
    if which & 1 == 0 {
        p.lo
    } else {
        p.hi
    }
}

fn copy_mut(p: &mut Pair, which: u8) -> &mut u32 {
    if which & 1 == 0 {
        &mut p.lo
    } else {
        &mut p.hi
    }
}

impl LazyArray {
    /// Declares `{name}_active`, `{name}_last_upd` and `{name}_pair` with
    /// `entries` entries, placed after `after` (the hash that indexes it).
    /// `last_upd` holds one bit per entry; the model's narrowest register is
    /// 8 bits, so the resource report over-charges it 8× [our choice: no
    /// bit-packed register kind exists in the model].
    pub fn declare(
        d: &mut Declare,
        name: &str,
        entries: usize,
        after: &[ObjectId],
    ) -> Result<LazyArray, DeclareError> {
        if entries == 0 {
            return Err(DeclareError::Invalid {
                name: name.to_string(),
                reason: "a snapshotted array needs at least one entry".into(),
            });
        }
        let active = d.register::<u8>(ArrayDecl::new(&format!("{name}_active"), 1).after(after))?;
        let last_upd = d.register::<u8>(
            ArrayDecl::new(&format!("{name}_last_upd"), entries).after(&[active.id()]),
        )?;
        let pair = d.register::<Pair>(
            ArrayDecl::new(&format!("{name}_pair"), entries).after(&[last_upd.id()]),
        )?;
        Ok(LazyArray {
            active,
            last_upd,
            pair,
            entries,
        })
    }

    /// Number of entries.
    pub fn entries(&self) -> usize {
        self.entries
    }

    /// The last object of the block (for dependency lists after it).
    pub fn last_id(&self) -> ObjectId {
        self.pair.id()
    }

    fn touch(&self, dp: &mut DataPlane<'_>, i: u64, flip: bool) -> Result<(u8, u8), AccessError> {
        let a = dp.register(self.active, 0, |v: &mut u8| {
            if flip {
                *v ^= 1;
            }
            *v & 1
        })?;
        let p = dp.register(self.last_upd, i, |v: &mut u8| std::mem::replace(v, a) & 1)?;
        Ok((a, p))
    }

    /// An update packet adds `u` (saturating) to entry `i`; returns the new
    /// value.
    pub fn update(&self, dp: &mut DataPlane<'_>, i: u64, u: u32) -> Result<u32, AccessError> {
        let (a, p) = self.touch(dp, i, false)?;
        dp.register(self.pair, i, |c: &mut Pair| {
            let base = if p != a { copy(c, a ^ 1) } else { copy(c, a) };
            let v = base.saturating_add(u);
            *copy_mut(c, a) = v;
            v
        })
    }

    /// A snapshot packet for entry `i` (`flip` for the burst's packet 0):
    /// returns the value entry `i` had at the last flip.
    pub fn snapshot(&self, dp: &mut DataPlane<'_>, i: u64, flip: bool) -> Result<u32, AccessError> {
        let (a, p) = self.touch(dp, i, flip)?;
        dp.register(self.pair, i, |c: &mut Pair| {
            let frozen = copy(c, a ^ 1);
            if p != a {
                *copy_mut(c, a) = frozen;
            }
            frozen
        })
    }

    /// Control plane: restores entry `i` to `v` by writing both copies. Then
    /// the entry reads as `v` whatever `active` and `last_upd[i]` say, so the
    /// control plane need not know `active` (it cannot read it synchronously);
    /// the `last_upd = active` write of §5.9 is subsumed [our choice].
    pub fn restore(&self, cp: &mut ControlPlane<'_>, i: u64, v: u32) -> u64 {
        cp.register_write(self.pair, i, Pair { lo: v, hi: v })
    }

    /// The entry's current value as the data plane would compute it (the
    /// ground truth the observer records at a flip).
    pub fn current(&self, objects: &Objects, i: u64) -> Option<u32> {
        let a = objects.register_peek(self.active, 0).ok()? & 1;
        let p = objects.register_peek(self.last_upd, i).ok()? & 1;
        let c = objects.register_peek(self.pair, i).ok()?;
        Some(if p == a { copy(&c, a) } else { copy(&c, a ^ 1) })
    }
}

/// The specification of [`LazyArray`]: a plain array, snapshotted by copying
/// it at the flip.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LazyReference {
    /// The live values.
    pub values: Vec<u32>,
    /// The values at the last flip.
    pub frozen: Vec<u32>,
}

impl LazyReference {
    /// `n` entries, all zero.
    pub fn new(n: usize) -> Self {
        LazyReference {
            values: vec![0; n],
            frozen: vec![0; n],
        }
    }

    /// Adds `u` (saturating) to entry `i`; returns the new value.
    pub fn update(&mut self, i: usize, u: u32) -> Option<u32> {
        let v = self.values.get_mut(i)?;
        *v = v.saturating_add(u);
        Some(*v)
    }

    /// Takes the snapshot (the flip).
    pub fn flip(&mut self) {
        self.frozen.clone_from(&self.values);
    }

    /// Entry `i` of the last snapshot.
    pub fn snapshot(&self, i: usize) -> Option<u32> {
        self.frozen.get(i).copied()
    }
}
