//! Registered DRAM of one server: memory regions with an R_Key, bounds and
//! access rights, backed by sparse pages allocated on first write.
//!
//! A TEA table of 10 M entries spans gigabytes of address space, almost all
//! of it scratchpad padding that is never written, so a page exists only once
//! a non-zero byte lands in it; reading a page that was never written yields
//! zeros, as freshly registered (zeroed) memory does. Pages are found through
//! a two-level table (one slot per 2 MiB of registered space, then one per
//! 4 KiB page, allocated on first write), O(1) on the NIC's hot path.

use std::collections::BTreeMap;

/// Bytes per backing page.
pub const PAGE_BYTES: usize = 4096;
/// The first region's base address [our choice: where a Linux process's
/// mmap area typically starts, as in the spec's test vectors].
pub const FIRST_BASE_VA: u64 = 0x0000_7f00_0000_0000;
/// Region bases are aligned to this [our choice: 2 MiB, a huge page].
pub const REGION_ALIGN: u64 = 2 << 20;

/// Access rights of a region (IBV_ACCESS_REMOTE_*).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Access {
    /// REMOTE_READ.
    pub remote_read: bool,
    /// REMOTE_WRITE.
    pub remote_write: bool,
}

impl Access {
    /// Remote read and write, as the agent registers TEA regions (§3.4).
    pub const READ_WRITE: Access = Access {
        remote_read: true,
        remote_write: true,
    };
}

/// One registered region.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Region {
    /// The agent's id for it.
    pub id: u16,
    /// First virtual address.
    pub base_va: u64,
    /// Length in bytes.
    pub len: u64,
    /// Remote key.
    pub rkey: u32,
    /// Rights.
    pub access: Access,
}

impl Region {
    /// True when `[va, va + len)` lies inside the region.
    pub fn contains(&self, va: u64, len: u64) -> bool {
        va >= self.base_va
            && va
                .checked_add(len)
                .is_some_and(|end| end <= self.base_va + self.len)
    }
}

/// Why a region could not be registered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum MemError {
    /// Not enough offered DRAM left.
    #[error("not enough DRAM left for the region")]
    NoMemory,
    /// The region id is taken by a region of another size.
    #[error("region id already used with another size")]
    IdInUse,
    /// Outside every region, or no such region.
    #[error("outside the region")]
    OutOfBounds,
}

/// All regions and their bytes.
#[derive(Debug, Clone)]
pub struct Memory {
    capacity: u64,
    used: u64,
    next_va: u64,
    next_rkey_seq: u16,
    rkey_prefix: u32,
    regions: BTreeMap<u16, Region>,
    by_rkey: BTreeMap<u32, u16>,
    /// Directory: one entry per 2 MiB of address space above
    /// [`FIRST_BASE_VA`], each a table of 512 pages.
    dir: Vec<Option<Box<PageTable>>>,
    resident_pages: u64,
}

const PAGES_PER_TABLE: usize = (REGION_ALIGN as usize) / PAGE_BYTES;
type Page = Box<[u8; PAGE_BYTES]>;
type PageTable = [Option<Page>; PAGES_PER_TABLE];

impl Memory {
    /// Empty memory with `capacity` bytes to offer. `generation` goes into
    /// every R_Key, so keys issued before a restart never match after it.
    pub fn new(capacity: u64, generation: u32) -> Memory {
        Memory {
            capacity,
            used: 0,
            next_va: FIRST_BASE_VA,
            next_rkey_seq: 1,
            rkey_prefix: (generation & 0xFFFF) << 16,
            regions: BTreeMap::new(),
            by_rkey: BTreeMap::new(),
            dir: Vec::new(),
            resident_pages: 0,
        }
    }

    /// Registers `len` bytes as region `id`. Registering the same id with the
    /// same length again returns the existing region [our choice: the agent
    /// must survive a control plane that repeats itself].
    pub fn register(&mut self, id: u16, len: u64, access: Access) -> Result<Region, MemError> {
        self.register_inner(id, len, access, None)
    }

    /// [`Memory::register`] with a chosen R_Key (tests replaying captured
    /// frames, a live agent mirroring a real NIC's key); fails with
    /// `IdInUse` if another region holds that key.
    pub fn register_with_rkey(
        &mut self,
        id: u16,
        len: u64,
        access: Access,
        rkey: u32,
    ) -> Result<Region, MemError> {
        if self.by_rkey.get(&rkey).is_some_and(|&other| other != id) {
            return Err(MemError::IdInUse);
        }
        self.register_inner(id, len, access, Some(rkey))
    }

    fn register_inner(
        &mut self,
        id: u16,
        len: u64,
        access: Access,
        rkey: Option<u32>,
    ) -> Result<Region, MemError> {
        if let Some(r) = self.regions.get(&id) {
            return if r.len == len {
                Ok(r.clone())
            } else {
                Err(MemError::IdInUse)
            };
        }
        let aligned = len
            .checked_add(REGION_ALIGN - 1)
            .ok_or(MemError::NoMemory)?
            & !(REGION_ALIGN - 1);
        if len == 0 || self.used.saturating_add(len) > self.capacity {
            return Err(MemError::NoMemory);
        }
        // Generated keys have 65535 values; keep the search below finite.
        if rkey.is_none() && self.by_rkey.len() >= 0xFFFF {
            return Err(MemError::NoMemory);
        }
        let base_va = self.next_va;
        self.next_va = base_va.checked_add(aligned).ok_or(MemError::NoMemory)?;
        self.used += len;
        let rkey = match rkey {
            Some(k) => k,
            None => loop {
                let k = self.rkey_prefix | u32::from(self.next_rkey_seq);
                self.next_rkey_seq = self.next_rkey_seq.wrapping_add(1).max(1);
                if !self.by_rkey.contains_key(&k) {
                    break k;
                }
            },
        };
        let r = Region {
            id,
            base_va,
            len,
            rkey,
            access,
        };
        self.regions.insert(id, r.clone());
        self.by_rkey.insert(rkey, id);
        Ok(r)
    }

    /// The region with this R_Key.
    pub fn region_by_rkey(&self, rkey: u32) -> Option<&Region> {
        self.by_rkey.get(&rkey).and_then(|id| self.regions.get(id))
    }

    /// The region with this id.
    pub fn region(&self, id: u16) -> Option<&Region> {
        self.regions.get(&id)
    }

    /// Every region, by id.
    pub fn regions(&self) -> impl Iterator<Item = &Region> {
        self.regions.values()
    }

    /// Bytes registered so far.
    pub fn used(&self) -> u64 {
        self.used
    }

    /// Bytes actually backed by pages.
    pub fn resident_bytes(&self) -> u64 {
        self.resident_pages * PAGE_BYTES as u64
    }

    /// Translates a region-relative range to a VA, checking bounds.
    pub fn region_va(&self, id: u16, offset: u64, len: u64) -> Result<u64, MemError> {
        let r = self.regions.get(&id).ok_or(MemError::OutOfBounds)?;
        let va = r.base_va.checked_add(offset).ok_or(MemError::OutOfBounds)?;
        if r.contains(va, len) {
            Ok(va)
        } else {
            Err(MemError::OutOfBounds)
        }
    }

    /// Page number of `va` relative to [`FIRST_BASE_VA`], split into
    /// (directory slot, page in table, offset in page). `None` below the
    /// first region.
    fn locate(va: u64) -> Option<(usize, usize, usize)> {
        let rel = va.checked_sub(FIRST_BASE_VA)?;
        let page = rel / PAGE_BYTES as u64;
        let slot = usize::try_from(page / PAGES_PER_TABLE as u64).ok()?;
        Some((
            slot,
            (page % PAGES_PER_TABLE as u64) as usize,
            (rel % PAGE_BYTES as u64) as usize,
        ))
    }

    fn page(&self, va: u64) -> Option<&Page> {
        let (slot, idx, _) = Self::locate(va)?;
        self.dir.get(slot)?.as_ref()?[idx].as_ref()
    }

    /// Copies `dst.len()` bytes starting at `va` into `dst`. The caller has
    /// checked the range against a region; never-written bytes read as zero.
    pub fn read(&self, va: u64, dst: &mut [u8]) {
        let mut done = 0;
        while done < dst.len() {
            let a = va + done as u64;
            let off = (a % PAGE_BYTES as u64) as usize;
            let n = (PAGE_BYTES - off).min(dst.len() - done);
            match self.page(a) {
                Some(p) => dst[done..done + n].copy_from_slice(&p[off..off + n]),
                None => dst[done..done + n].fill(0),
            }
            done += n;
        }
    }

    /// Writes `src` at `va` (range checked by the caller, so `va` lies in a
    /// registered region). All-zero pieces falling on absent pages allocate
    /// nothing.
    pub fn write(&mut self, va: u64, src: &[u8]) {
        let mut done = 0;
        while done < src.len() {
            let a = va + done as u64;
            let Some((slot, idx, off)) = Self::locate(a) else {
                return;
            };
            let n = (PAGE_BYTES - off).min(src.len() - done);
            let piece = &src[done..done + n];
            done += n;
            let present = self
                .dir
                .get(slot)
                .and_then(|t| t.as_ref())
                .is_some_and(|t| t[idx].is_some());
            if !present && piece.iter().all(|&b| b == 0) {
                continue;
            }
            // The directory only grows as far as registered space reaches.
            if a >= self.next_va {
                return;
            }
            if slot >= self.dir.len() {
                self.dir.resize_with(slot + 1, || None);
            }
            let table =
                self.dir[slot].get_or_insert_with(|| Box::new([const { None }; PAGES_PER_TABLE]));
            let page = table[idx].get_or_insert_with(|| {
                self.resident_pages += 1;
                Box::new([0u8; PAGE_BYTES])
            });
            page[off..off + n].copy_from_slice(piece);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sparse_pages_follow_writes_and_read_zero_elsewhere() {
        let mut m = Memory::new(64 << 30, 0);
        let r = m.register(1, 10 << 30, Access::READ_WRITE).unwrap();
        assert_eq!(m.resident_bytes(), 0);
        let va = r.base_va + (5 << 30) - 3;
        m.write(va, &[1, 2, 3, 4, 5, 6]);
        assert_eq!(m.resident_bytes(), 2 * PAGE_BYTES as u64);
        let mut b = [9u8; 10];
        m.read(va - 2, &mut b);
        assert_eq!(b, [0, 0, 1, 2, 3, 4, 5, 6, 0, 0]);
        m.write(r.base_va, &[0; 100]);
        assert_eq!(m.resident_bytes(), 2 * PAGE_BYTES as u64);
    }

    #[test]
    fn regions_are_bounded_by_capacity_and_keys_differ_by_generation() {
        let mut m = Memory::new(1 << 20, 3);
        let a = m.register(1, 1 << 19, Access::READ_WRITE).unwrap();
        assert_eq!(m.register(1, 1 << 19, Access::READ_WRITE), Ok(a.clone()));
        assert_eq!(
            m.register(1, 1 << 18, Access::READ_WRITE),
            Err(MemError::IdInUse)
        );
        let b = m.register(2, 1 << 19, Access::READ_WRITE).unwrap();
        assert!(b.base_va >= a.base_va + a.len);
        assert_eq!(
            m.register(3, 1, Access::READ_WRITE),
            Err(MemError::NoMemory)
        );
        let other = Memory::new(1 << 20, 4).register(1, 1, Access::READ_WRITE);
        assert_ne!(other.unwrap().rkey, a.rkey);
        assert!(a.contains(a.base_va, a.len));
        assert!(!a.contains(a.base_va, a.len + 1));
        assert!(!a.contains(a.base_va - 1, 1));
        assert!(!a.contains(u64::MAX, 2));
    }
}
