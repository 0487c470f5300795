//! The selection module (spec §5.5 step 1): a two-row count-min sketch of
//! flight packets. Every flight packet increments both rows (saturating)
//! and carries the smaller count in the shim's `cms_est`, so servers can
//! report the heaviest flows they saw without the switch naming any.

use inca_switch::placement::Gress;
use inca_switch::{AccessError, ArrayDecl, DataPlane, Declare, DeclareError, RegisterHandle};

use crate::flow::{FlowHashes, FH_C};

/// Cells per row (2 × 1,024 per [CLIP §V-D]).
pub const CMS_WIDTH: u32 = 1024;

/// The sketch's objects.
#[derive(Debug, Clone, Copy)]
pub struct Selection {
    rows: [RegisterHandle<u32>; 2],
    fh_c: inca_switch::objects::Handle,
}

impl Selection {
    /// Declares FH_C and the two rows.
    pub fn declare(d: &mut Declare) -> Result<Selection, DeclareError> {
        let fh_c = d.hash("fh_c", FH_C, 32, Gress::Ingress, &[])?;
        let row = |d: &mut Declare, name: &str| {
            d.register::<u32>(ArrayDecl::new(name, CMS_WIDTH as usize).after(&[fh_c.id()]))
        };
        let rows = [row(d, "cms_row0")?, row(d, "cms_row1")?];
        Ok(Selection { rows, fh_c })
    }

    /// The rows (the controller clears them).
    pub fn rows(&self) -> [RegisterHandle<u32>; 2] {
        self.rows
    }

    /// Counts one flight packet of the flow with key bytes `key`; returns
    /// `min` of the two incremented cells and the flow's FH_C.
    pub fn count(&self, dp: &mut DataPlane<'_>, key: &[u8]) -> Result<u32, AccessError> {
        let c = dp.hash(self.fh_c, key)? as u32;
        let h = FlowHashes {
            a: 0,
            b: 0,
            c,
            d: 0,
        };
        let mut est = u32::MAX;
        for (row, reg) in self.rows.iter().enumerate() {
            let v = dp.register(*reg, u64::from(h.cms(row, CMS_WIDTH)), |cell| {
                *cell = cell.saturating_add(1);
                *cell
            })?;
            est = est.min(v);
        }
        Ok(est)
    }
}
