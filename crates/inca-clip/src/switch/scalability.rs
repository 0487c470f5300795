//! The scalability module (spec §5.4 `select_server`, §5.6): which server
//! a flight packet goes to, so that every flow stays on the server holding
//! its state while the server group changes.
//!
//! - `pin_table`: exact ⟨flow, server⟩ pins the controller installs.
//! - `cur`: which group slot is current; `rec`: record mode (a transition
//!   is about to clear the previous epoch's filter).
//! - `bm0`, `bm1`: two Bloom filters of three ways. BM[cur] records every
//!   flow that takes the group path in this epoch (a single
//!   read-modify-write per way, returning the old bit); BM[1-cur] is frozen
//!   and answers "was this flow seen before the last change?".
//! - `pin_cache`: two ways of {valid, server, fingerprint} cells the data
//!   plane fills in record mode, for flows that newly depend on the frozen
//!   filter (Bloom false positives, resumptions); a digest reports what
//!   does not fit.
//!
//! Every register array is touched at most once per pass, in stage order.

use inca_switch::objects::{Handle, ObjectId};
use inca_switch::placement::Gress;
use inca_switch::{
    AccessError, ArrayDecl, DataPlane, Declare, DeclareError, MatchKind, RegisterHandle, TableDecl,
    TableHandle,
};
use inca_wire::clip::shim::Sel;

use crate::flow::{FlowHashes, FH_B, FH_D};
use crate::switch::forwarding::Forwarding;

/// Bloom ways per filter.
pub const BLOOM_WAYS: usize = 3;
/// Default bits per Bloom way (65,536 [our choice, §3.1]).
pub const BLOOM_BITS: u32 = 65_536;
/// Default cells per pin-cache way (16,384 [our choice, §3.1]).
pub const PIN_CACHE_CELLS: u32 = 16_384;
/// Default pin-table entries (16,384, §3.1).
pub const PIN_TABLE_ENTRIES: usize = 16_384;

/// Pin-cache cell: valid bit.
const CELL_VALID: u32 = 1 << 31;

/// A pin-cache cell: {valid:1, server:7, fp:24}.
pub fn cell(server: u8, fp: u32) -> u32 {
    CELL_VALID | (u32::from(server & 0x7F) << 24) | (fp & 0x00FF_FFFF)
}

/// Sizes of the module's memories.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScaleSizes {
    /// Bits per Bloom way (a power of two ≤ 65,536).
    pub bloom_bits: u32,
    /// Cells per pin-cache way (a power of two ≤ 16,384).
    pub pin_cache: u32,
    /// Pin-table entries.
    pub pin_table: usize,
}

impl Default for ScaleSizes {
    fn default() -> Self {
        ScaleSizes {
            bloom_bits: BLOOM_BITS,
            pin_cache: PIN_CACHE_CELLS,
            pin_table: PIN_TABLE_ENTRIES,
        }
    }
}

/// The module's objects.
#[derive(Debug, Clone)]
pub struct Scalability {
    sizes: ScaleSizes,
    /// The pin table: flow key → server id.
    pub pin_table: TableHandle<u8>,
    /// Current slot (bit 0).
    pub cur: RegisterHandle<u8>,
    /// Record mode (bit 0).
    pub rec: RegisterHandle<u8>,
    /// `bm[f][w]`: filter f, way w (one bit per cell).
    pub bm: [[RegisterHandle<u8>; BLOOM_WAYS]; 2],
    /// Pin-cache ways.
    pub pin_cache: [RegisterHandle<u32>; 2],
    fh_b: Handle,
    fh_d: Handle,
}

/// What `select_server` decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Selected {
    /// The server.
    pub server: u8,
    /// How.
    pub sel: Sel,
    /// The slot's version (0 unless a group path).
    pub grp_ver: u16,
    /// Record mode was on.
    pub rec: bool,
    /// A ⟨flow, server⟩ pair record mode could not cache: send a digest.
    pub overflow: bool,
}

impl Scalability {
    /// Declares the module; `fh_a` is forwarding's FH_A unit (shared).
    /// `slots` declares the group tables between the filters (which pick
    /// the slot) and the pin cache (which records the member): it gets the
    /// ids they depend on and returns the member table's.
    pub fn declare(
        d: &mut Declare,
        sizes: ScaleSizes,
        fh_a: Handle,
        pin_idle_timeout: u64,
        slots: impl FnOnce(&mut Declare, &[ObjectId]) -> Result<ObjectId, DeclareError>,
    ) -> Result<Scalability, DeclareError> {
        let fh_b = d.hash("fh_b", FH_B, 32, Gress::Ingress, &[])?;
        let fh_d = d.hash("fh_d", FH_D, 32, Gress::Ingress, &[])?;
        let mut pin = TableDecl::new("pin_table", MatchKind::Exact, 16, 7, sizes.pin_table);
        if pin_idle_timeout > 0 {
            pin = pin.idle_timeout(pin_idle_timeout);
        }
        let pin_table = d.table(pin)?;
        let cur = d.register::<u8>(ArrayDecl::new("cur", 1).after(&[pin_table.id()]))?;
        let way = |d: &mut Declare, f: usize, w: usize, after: &[_]| {
            d.register::<u8>(
                ArrayDecl::new(&format!("bm{f}_w{w}"), sizes.bloom_bits as usize).after(after),
            )
        };
        let after_a = [fh_a.id(), cur.id()];
        let after_b = [fh_b.id(), cur.id()];
        let bm = [
            [
                way(d, 0, 0, &after_a)?,
                way(d, 0, 1, &after_b)?,
                way(d, 0, 2, &after_b)?,
            ],
            [
                way(d, 1, 0, &after_a)?,
                way(d, 1, 1, &after_b)?,
                way(d, 1, 2, &after_b)?,
            ],
        ];
        let mut all_bm: Vec<_> = bm.iter().flatten().map(|h| h.id()).collect();
        all_bm.push(cur.id());
        let member = slots(d, &all_bm)?;
        // `rec` is read beside `cur`, before the slot is known, so that it
        // is not one more stage on the selection's chain.
        let rec = d.register::<u8>(ArrayDecl::new("rec", 1).after(&[pin_table.id()]))?;
        let mut after_pc = vec![fh_d.id(), fh_a.id(), rec.id(), member];
        after_pc.extend(all_bm);
        let pc0 = d.register::<u32>(
            ArrayDecl::new("pin_cache_w0", sizes.pin_cache as usize).after(&after_pc),
        )?;
        let pc1 = d.register::<u32>(
            ArrayDecl::new("pin_cache_w1", sizes.pin_cache as usize).after(&[pc0.id()]),
        )?;
        Ok(Scalability {
            sizes,
            pin_table,
            cur,
            rec,
            bm,
            pin_cache: [pc0, pc1],
            fh_b,
            fh_d,
        })
    }

    /// The sizes it was declared with.
    pub fn sizes(&self) -> ScaleSizes {
        self.sizes
    }

    /// `select_server(f)` (§5.4, in its exact order): None when the chosen
    /// slot is empty or the member has no server.
    pub fn select(
        &self,
        dp: &mut DataPlane<'_>,
        fwd: &Forwarding,
        key: &[u8; 16],
        fh_a: u32,
        hint: Option<u8>,
    ) -> Result<Option<Selected>, AccessError> {
        if let Some(server) = dp.lookup(self.pin_table, key)? {
            return Ok(Some(Selected {
                server,
                sel: Sel::PinTable,
                grp_ver: 0,
                rec: false,
                overflow: false,
            }));
        }
        if let Some(server) = hint {
            return Ok(Some(Selected {
                server,
                sel: Sel::Hint,
                grp_ver: 0,
                rec: false,
                overflow: false,
            }));
        }
        let h = FlowHashes {
            a: fh_a,
            b: dp.hash(self.fh_b, key)? as u32,
            c: 0,
            d: dp.hash(self.fh_d, key)? as u32,
        };
        let c = usize::from(dp.register(self.cur, 0, |v| *v)? & 1);
        let rec = dp.register(self.rec, 0, |v| *v)? & 1 == 1;
        let mut hit = [true; 2];
        for (f, ways) in self.bm.iter().enumerate() {
            for (w, reg) in ways.iter().enumerate() {
                let i = u64::from(h.bloom(w, self.sizes.bloom_bits));
                let old = if f == c {
                    // BM[cur]: update (set the bit, return the old one).
                    dp.register(*reg, i, |v| std::mem::replace(v, 1))?
                } else {
                    dp.register(*reg, i, |v| *v)?
                };
                hit[f] &= old & 1 == 1;
            }
        }
        let p = 1 - c;
        let hit_prev = hit[p];
        let slot = if hit_prev { p } else { c };
        let Some((server, ver)) = fwd.member(dp, slot as u8, fh_a)? else {
            return Ok(None);
        };
        let record = rec && slot == p;
        let fp = h.fingerprint();
        let mut inserted = false;
        for (w, reg) in self.pin_cache.iter().enumerate() {
            let i = u64::from(h.pin_way(w, self.sizes.pin_cache));
            let outcome = dp.register(*reg, i, |v| {
                let valid = *v & CELL_VALID != 0;
                if valid && *v & 0x00FF_FFFF == fp {
                    PinCache::Match(((*v >> 24) & 0x7F) as u8)
                } else if record && !valid {
                    *v = cell(server, fp);
                    PinCache::Inserted
                } else {
                    PinCache::NoMatch
                }
            })?;
            match outcome {
                PinCache::Match(s) => {
                    return Ok(Some(Selected {
                        server: s,
                        sel: Sel::PinCache,
                        grp_ver: 0,
                        rec,
                        overflow: false,
                    }))
                }
                PinCache::Inserted => {
                    inserted = true;
                    break;
                }
                PinCache::NoMatch => {}
            }
        }
        Ok(Some(Selected {
            server,
            sel: if slot == c { Sel::Cur } else { Sel::Prev },
            grp_ver: ver,
            rec,
            overflow: record && !inserted,
        }))
    }
}

enum PinCache {
    Match(u8),
    Inserted,
    NoMatch,
}
