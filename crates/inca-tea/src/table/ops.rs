//! Insert / Delete / Update / stash drain of spec §5.4 as step plans.
//!
//! Bounded linear probing: a key lives in bucket h(K) or h(K)+1 mod n (both
//! come back in one READ of row h(K)), or in the switch stash. Inserts displace
//! occupants at random (at most `max_tries`, never straight back into the cell
//! just filled) and obey the DRAM mutation shield: a cell holding key X is
//! overwritten only after X has been in the stash for T_GRACE. The mirror is
//! changed when the plan is made; the plan tells the driver how to get there.

use super::cache::CacheDecision;
use super::{InsertOrder, Loc, OpKind, Outcome, Plan, Step, TableError, TeaTable};
use rand::Rng;

impl TeaTable {
    fn set_cell(&mut self, bucket: u32, cell: usize, kv: Option<(&[u8], &[u8])>) -> Vec<u8> {
        let range = self.cell_range(bucket, cell);
        let layout = self.layout;
        let out = &mut self.cells[range];
        match kv {
            Some((k, v)) => {
                // Widths were checked at the API boundary.
                let _ = layout.encode_cell_into(k, v, out);
            }
            None => out.fill(0),
        }
        out.to_vec()
    }

    fn free_cell(&self, bucket: u32) -> Option<usize> {
        (0..self.layout.cells()).find(|&c| self.cell(bucket, c).is_none())
    }

    /// Emit the steps that make cell (b, c) hold `bytes` in DRAM.
    fn write_steps(&self, steps: &mut Vec<Step>, bucket: u32, cell: usize, bytes: &[u8]) {
        steps.push(Step::WriteCells(
            self.partition.cell_writes(bucket, cell, bytes),
        ));
    }

    /// Spec §5.4 Insert(K, V). An existing key is updated instead.
    pub fn insert<R: Rng + ?Sized>(
        &mut self,
        key: &[u8],
        value: &[u8],
        rng: &mut R,
    ) -> Result<Plan, TableError> {
        self.check_kv(key, Some(value))?;
        if self.locate(key).is_some() {
            return self.update(key, value);
        }
        if self.stash.len() >= self.config.stash_cap {
            return Err(TableError::StashFull(self.config.stash_cap));
        }
        self.inserts += 1;
        let mut steps = vec![Step::StashAdd {
            key: key.to_vec(),
            value: value.to_vec(),
        }];
        self.stash.insert(key.to_vec(), value.to_vec());
        let outcome = self.place(key.to_vec(), value.to_vec(), &mut steps, rng);
        Ok(Plan {
            op: OpKind::Insert,
            key: key.to_vec(),
            outcome,
            steps,
        })
    }

    /// Step 3 of Insert: move the stashed entry `e` into DRAM, displacing if needed.
    fn place<R: Rng + ?Sized>(
        &mut self,
        mut key: Vec<u8>,
        mut value: Vec<u8>,
        steps: &mut Vec<Step>,
        rng: &mut R,
    ) -> Outcome {
        let cells = self.layout.cells();
        let mut last: Option<(u32, usize)> = None;
        let mut tries = 0u32;
        while tries < self.config.max_tries {
            let i = self.layout.bucket_of(&key);
            let j = self.layout.next_bucket(i);
            let free = [i, j]
                .into_iter()
                .find_map(|b| self.free_cell(b).map(|c| (b, c)));
            if let Some((b, c)) = free {
                let bytes = self.set_cell(b, c, Some((&key, &value)));
                self.dram_entries += 1;
                self.stash.remove(&key);
                self.emit_fill(steps, b, c, &bytes, key);
                return Outcome::Placed {
                    displacements: tries,
                };
            }
            // [our choice] No chain can free a cell when every occupant of
            // i and j hashes to i (their candidates are these two buckets):
            // each move only shuffles them, at T_GRACE apiece. Stash at
            // once. Keys crafted to share a bucket (issue 8) otherwise made
            // every insert MAX_TRIES grace waits of the serial executor.
            let hopeless = [i, j].into_iter().all(|b| {
                (0..cells).all(|c| {
                    self.cell(b, c)
                        .is_some_and(|(k, _)| self.layout.bucket_of(k) == i)
                })
            });
            if hopeless {
                self.hopeless += 1;
                break;
            }
            // Choose among the 2C cells of i and j, except the one just filled.
            let candidates: Vec<(u32, usize)> = [i, j]
                .into_iter()
                .flat_map(|b| (0..cells).map(move |c| (b, c)))
                .filter(|&bc| Some(bc) != last)
                .collect();
            let (b, c) = candidates[rng.gen_range(0..candidates.len())];
            if self.stash.len() >= self.config.stash_cap {
                break;
            }
            let Some((vk, vv)) = self.cell(b, c).map(|(k, v)| (k.to_vec(), v.to_vec())) else {
                // Both buckets are full, so every candidate is occupied.
                break;
            };
            self.stash.insert(vk.clone(), vv.clone());
            let bytes = self.set_cell(b, c, Some((&key, &value)));
            self.stash.remove(&key);
            self.emit_displace(steps, b, c, &bytes, key, (&vk, &vv));
            self.displacements += 1;
            key = vk;
            value = vv;
            last = Some((b, c));
            tries += 1;
        }
        self.stashed_outcomes += 1;
        Outcome::Stashed {
            key,
            displacements: tries,
        }
    }

    /// Steps for writing the stashed key `key` into the empty cell (b, c).
    fn emit_fill(&self, steps: &mut Vec<Step>, b: u32, c: usize, bytes: &[u8], key: Vec<u8>) {
        match self.order {
            InsertOrder::Shielded | InsertOrder::NoGrace => {
                // No grace: the cell was empty and the key is served by the stash.
                self.write_steps(steps, b, c, bytes);
                steps.push(Step::StashRemove { key });
            }
            InsertOrder::ThesisAlg1 => {
                steps.push(Step::WriteCells(self.partition.main_writes(b, c, bytes)));
                steps.push(Step::StashRemove { key });
                steps.push(Step::WriteCells(self.partition.shadow_writes(b, c, bytes)));
            }
        }
    }

    /// Steps for overwriting victim `v` in (b, c) with the stashed key `key`.
    fn emit_displace(
        &self,
        steps: &mut Vec<Step>,
        b: u32,
        c: usize,
        bytes: &[u8],
        key: Vec<u8>,
        victim: (&[u8], &[u8]),
    ) {
        let stash_victim = Step::StashAdd {
            key: victim.0.to_vec(),
            value: victim.1.to_vec(),
        };
        match self.order {
            InsertOrder::Shielded | InsertOrder::NoGrace => {
                steps.push(stash_victim);
                if self.order == InsertOrder::Shielded {
                    steps.push(Step::WaitGrace);
                }
                self.write_steps(steps, b, c, bytes);
                steps.push(Step::StashRemove { key });
            }
            InsertOrder::ThesisAlg1 => {
                steps.push(Step::WriteCells(self.partition.main_writes(b, c, bytes)));
                steps.push(Step::StashRemove { key });
                steps.push(stash_victim);
            }
        }
    }

    /// Spec §5.4 Update(K, V').
    pub fn update(&mut self, key: &[u8], value: &[u8]) -> Result<Plan, TableError> {
        self.check_kv(key, Some(value))?;
        let loc = self.locate(key).ok_or(TableError::NotFound)?;
        // [our choice] A DRAM-resident key needs a stash slot while its cell
        // is rewritten; with the stash full the update is refused.
        if matches!(loc, Loc::Dram { .. }) && self.stash.len() >= self.config.stash_cap {
            return Err(TableError::StashFull(self.config.stash_cap));
        }
        let mut steps = Vec::new();
        if self.get(key) != Some(value) {
            steps.push(Step::StashAdd {
                key: key.to_vec(),
                value: value.to_vec(),
            });
            if self.cache.modify(key, value) {
                steps.push(Step::CacheModify {
                    key: key.to_vec(),
                    value: value.to_vec(),
                });
            }
            match loc {
                Loc::Stash => {
                    self.stash.insert(key.to_vec(), value.to_vec());
                }
                Loc::Dram { bucket, cell } => {
                    steps.push(Step::WaitGrace);
                    let bytes = self.set_cell(bucket, cell, Some((key, value)));
                    self.write_steps(&mut steps, bucket, cell, &bytes);
                    steps.push(Step::StashRemove { key: key.to_vec() });
                }
            }
        }
        Ok(Plan {
            op: OpKind::Update,
            key: key.to_vec(),
            outcome: Outcome::Updated,
            steps,
        })
    }

    /// Spec §5.4 Delete(K).
    pub fn delete(&mut self, key: &[u8]) -> Result<Plan, TableError> {
        self.check_kv(key, None)?;
        let loc = self.locate(key).ok_or(TableError::NotFound)?;
        let mut steps = Vec::new();
        if self.cache.remove(key) {
            steps.push(Step::CacheRemove { key: key.to_vec() });
        }
        match loc {
            Loc::Stash => {
                self.stash.remove(key);
                steps.push(Step::StashRemove { key: key.to_vec() });
            }
            Loc::Dram { bucket, cell } => {
                let bytes = self.set_cell(bucket, cell, None);
                self.dram_entries -= 1;
                self.write_steps(&mut steps, bucket, cell, &bytes);
            }
        }
        Ok(Plan {
            op: OpKind::Delete,
            key: key.to_vec(),
            outcome: Outcome::Deleted,
            steps,
        })
    }

    /// The periodic stash drain (every 10 ms, [our choice] in the spec): re-run
    /// Insert step 3 for up to `max_entries` stashed keys, in key order, as
    /// one plan (the mirror moves at once, so the steps must run as one unit).
    /// `None` if the stash is empty.
    pub fn drain<R: Rng + ?Sized>(&mut self, max_entries: usize, rng: &mut R) -> Option<Plan> {
        let keys: Vec<Vec<u8>> = self.stash.keys().take(max_entries).cloned().collect();
        if keys.is_empty() {
            return None;
        }
        let mut steps = Vec::new();
        let (mut placed, mut left, mut displacements) = (0u32, 0u32, 0u32);
        for key in keys {
            let Some(value) = self.stash.get(&key).cloned() else {
                continue;
            };
            match self.place(key, value, &mut steps, rng) {
                Outcome::Placed { displacements: d } => {
                    placed += 1;
                    displacements += d;
                }
                Outcome::Stashed {
                    displacements: d, ..
                } => {
                    left += 1;
                    displacements += d;
                }
                _ => {}
            }
        }
        Some(Plan {
            op: OpKind::Drain,
            key: Vec::new(),
            outcome: Outcome::Drained {
                placed,
                still_stashed: left,
                displacements,
            },
            steps,
        })
    }

    /// A hot-key digest (spec §5.5): maybe install `key` in the cache.
    /// `hits_of` reads a cached key's data-plane hit counter for this epoch.
    pub fn on_digest(
        &mut self,
        key: &[u8],
        est: u64,
        hits_of: impl Fn(&[u8]) -> u64,
    ) -> Option<Plan> {
        let value = self.get(key).map(<[u8]>::to_vec);
        let decision = self.cache.on_digest(key, est, value.as_deref(), hits_of)?;
        let steps = match decision {
            CacheDecision::Install { key, value } => vec![Step::CacheModify { key, value }],
            CacheDecision::Replace { evict, key, value } => vec![
                Step::CacheRemove { key: evict },
                Step::CacheModify { key, value },
            ],
        };
        Some(Plan {
            op: OpKind::Cache,
            key: key.to_vec(),
            outcome: Outcome::Cached,
            steps,
        })
    }

    /// Epoch boundary of the cache policy (the driver resets the counters).
    pub fn end_epoch(&mut self) {
        self.cache.end_epoch();
    }
}
