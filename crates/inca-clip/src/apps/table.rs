//! A promotable app table keyed by flow key (MFWD's and SNAT's switch
//! copy): declared with `inca_switch`, written by the driver from
//! [`Entry`]s, polled for idle time.

use inca_switch::{
    AccessError, ControlPlane, DataPlane, Declare, DeclareError, MatchKind, MatchSpec, TableDecl,
    TableHandle,
};

use crate::app::Entry;
use crate::flow::FLOW_KEY_LEN;

/// A switch table from flow key to `N` bytes of action data.
#[derive(Debug, Clone)]
pub struct FlowTable<const N: usize> {
    name: &'static str,
    capacity: usize,
    handle: Option<TableHandle<[u8; N]>>,
}

impl<const N: usize> FlowTable<N> {
    /// A table `name` of `capacity` entries.
    pub fn new(name: &'static str, capacity: usize) -> Self {
        FlowTable {
            name,
            capacity,
            handle: None,
        }
    }

    /// Its capacity.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Its object id (after declaration), for objects placed after it.
    pub fn id(&self) -> Option<inca_switch::ObjectId> {
        self.handle.map(|h| h.id())
    }

    /// Its handle (after declaration), for reading it (tests, checks).
    pub fn handle(&self) -> Option<TableHandle<[u8; N]>> {
        self.handle
    }

    /// Declares it.
    pub fn declare(&mut self, d: &mut Declare) -> Result<(), DeclareError> {
        let t = TableDecl::new(
            self.name,
            MatchKind::Exact,
            FLOW_KEY_LEN,
            (N * 8) as u32,
            self.capacity,
        )
        .vliw(2);
        self.handle = Some(d.table(t)?);
        Ok(())
    }

    /// Looks a flow key up.
    pub fn lookup(
        &self,
        dp: &mut DataPlane<'_>,
        key: &[u8],
    ) -> Result<Option<[u8; N]>, AccessError> {
        match self.handle {
            Some(h) => dp.lookup(h, key),
            None => Ok(None),
        }
    }

    /// Installs an entry (its data must be `N` bytes, its key a flow key).
    pub fn install(&self, cp: &mut ControlPlane<'_>, e: &Entry) -> Option<u64> {
        let h = self.handle?;
        let data: [u8; N] = e.data.as_slice().try_into().ok()?;
        if e.key.len() != FLOW_KEY_LEN {
            return None;
        }
        Some(cp.table_add(h, MatchSpec::Exact(e.key.clone().into()), data))
    }

    /// Deletes an entry.
    pub fn uninstall(&self, cp: &mut ControlPlane<'_>, key: &[u8]) -> Option<u64> {
        let h = self.handle?;
        Some(cp.table_delete(h, MatchSpec::Exact(key.to_vec().into())))
    }

    /// Reads an entry's activity.
    pub fn poll(&self, cp: &mut ControlPlane<'_>, key: &[u8]) -> Option<u64> {
        let h = self.handle?;
        Some(cp.table_entry_read(h, MatchSpec::Exact(key.to_vec().into())))
    }
}
