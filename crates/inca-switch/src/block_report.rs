//! Per-block resource usage: what each block of a composite program takes
//! of the device, summed from where its objects were placed.
//!
//! The stage allocator places all blocks' objects together (the hardware
//! rules hold across the composite); this module only attributes the result
//! back to the blocks, by the object ranges [`crate::Declare::in_block`]
//! recorded. A program without blocks has an empty report.

use std::fmt;

use serde::Serialize;

use crate::objects::BlockSpan;
use crate::placement::{thousands, Location, Placement};
use crate::resources::{Resource, ResourceVec};

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

/// Attributes `placement`'s objects to `blocks`.
pub fn block_usage(placement: &Placement, blocks: &[BlockSpan]) -> Vec<BlockUsage> {
    blocks
        .iter()
        .map(|b| {
            let objects = &placement.objects[b.objects.start as usize..b.objects.end as usize];
            let mut used = ResourceVec::ZERO;
            let mut dram_bytes = 0;
            let mut stages: Option<(u32, u32)> = None;
            for o in objects {
                used += o.stage_use.iter().map(|(_, v)| *v).sum();
                if let Location::Dram { bytes } = o.location {
                    dram_bytes += bytes;
                }
                let (f, l) = (o.first_stage(), o.last_stage());
                stages = Some(stages.map_or((f, l), |(a, z)| (a.min(f), z.max(l))));
            }
            BlockUsage {
                block: b.name.clone(),
                objects: objects.len(),
                used,
                dram_bytes,
                stages,
            }
        })
        .collect()
}

/// The per-block table of the resource report.
pub(crate) struct BlockTable<'a>(pub &'a Placement);

impl fmt::Display for BlockTable<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let p = self.0;
        let w = p
            .blocks
            .iter()
            .map(|b| b.block.len())
            .max()
            .unwrap_or(5)
            .max(5);
        write!(f, "{:<w$} {:>7} {:>7}", "block", "objects", "stages")?;
        for r in Resource::ALL {
            write!(f, " {:>7}", r.short_name())?;
        }
        if p.run_to_completion {
            write!(f, " {:>14}", "DRAM bytes")?;
        }
        writeln!(f)?;
        for b in &p.blocks {
            let stages = match b.stages {
                Some((a, z)) if a == z => a.to_string(),
                Some((a, z)) => format!("{a}-{z}"),
                None => "-".into(),
            };
            write!(f, "{:<w$} {:>7} {:>7}", b.block, b.objects, stages)?;
            for r in Resource::ALL {
                write!(f, " {:>7}", b.used[r])?;
            }
            if p.run_to_completion {
                write!(f, " {:>14}", thousands(b.dram_bytes))?;
            }
            writeln!(f)?;
        }
        Ok(())
    }
}
