//! Per-block resource usage: what each block of a composite program takes
//! of the device, summed from where its objects were placed.
//!
//! The stage allocator places all blocks' objects together (the hardware
//! rules hold across the composite); the switch attributes the result back
//! to the blocks, by the object ranges [`crate::Declare::in_block`] recorded
//! ([`BlockUsage::of`]), and the resource report prints this table. A
//! program without blocks has an empty one.

use std::fmt;

use serde::Serialize;

use crate::resources::{Resource, ResourceVec};
use crate::units::format_bytes;

/// What one block uses.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BlockUsage {
    /// The block's instance name.
    pub block: String,
    /// Number of objects it declared.
    pub objects: usize,
    /// Resources its objects take, over all stages.
    pub used: ResourceVec,
    /// DRAM bytes its objects take (run-to-completion devices).
    pub dram_bytes: u64,
    /// First and last stage any of its objects occupies (`None` if it
    /// declared nothing).
    pub stages: Option<(u32, u32)>,
}

impl BlockUsage {
    /// Block `block`'s usage from what its objects take: per object, its
    /// amounts in each stage it occupies, its DRAM bytes, and its stages.
    pub fn of<'a>(
        block: &str,
        objects: impl IntoIterator<Item = (&'a [(u32, ResourceVec)], u64, (u32, u32))>,
    ) -> BlockUsage {
        let mut u = BlockUsage {
            block: block.to_string(),
            objects: 0,
            used: ResourceVec::ZERO,
            dram_bytes: 0,
            stages: None,
        };
        for (stage_use, dram, (first, last)) in objects {
            u.objects += 1;
            u.used += stage_use.iter().map(|(_, v)| *v).sum();
            u.dram_bytes += dram;
            u.stages = Some(
                u.stages
                    .map_or((first, last), |(a, z)| (a.min(first), z.max(last))),
            );
        }
        u
    }
}

/// The per-block table of the resource report: the blocks, and whether the
/// device runs to completion (then DRAM is shown).
pub(crate) struct BlockTable<'a>(pub &'a [BlockUsage], pub bool);

impl fmt::Display for BlockTable<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (blocks, run_to_completion) = (self.0, self.1);
        let w = blocks
            .iter()
            .map(|b| b.block.len())
            .max()
            .unwrap_or(5)
            .max(5);
        write!(f, "{:<w$} {:>7} {:>7}", "block", "objects", "stages")?;
        for r in Resource::ALL {
            write!(f, " {:>7}", r.short_name())?;
        }
        if run_to_completion {
            write!(f, " {:>14}", "DRAM")?;
        }
        writeln!(f)?;
        for b in blocks {
            let stages = match b.stages {
                Some((a, z)) if a == z => a.to_string(),
                Some((a, z)) => format!("{a}-{z}"),
                None => "-".into(),
            };
            write!(f, "{:<w$} {:>7} {:>7}", b.block, b.objects, stages)?;
            for r in Resource::ALL {
                write!(f, " {:>7}", b.used[r])?;
            }
            if run_to_completion {
                write!(f, " {:>14}", format_bytes(b.dram_bytes))?;
            }
            writeln!(f)?;
        }
        Ok(())
    }
}
