//! Batches cut to the body limit: a sender with more DUMP, SYNC or REJOIN
//! items than one frame carries
//! ([`MAX_BODY_LEN`](inca_wire::exoplane::control::MAX_BODY_LEN) body bytes) sends several
//! messages, each item in exactly one, in the order given.
//!
//! Items are packed greedily by their encoded size (inca-wire's
//! `encoded_len`, the same arithmetic the encoder uses), so every part
//! encodes under the limit unless a single item does not fit. An empty
//! batch is one empty message: an empty DUMP still ends the stream with
//! `last`, an empty SYNC_REQ still opens the round. A DUMP's `last` is set
//! on the final part only, and only if the batch was the final one.
//!
//! Receivers must accept a round in parts: the sync part today takes one
//! SYNC_REQ per round (sync::MAX_ITEMS bounds it to 2^16 items, which with
//! 255-byte keys is more than 1 MiB), so splitting a SYNC batch needs the
//! sync part to accept a round in parts (docs/architecture.md).

use inca_wire::exoplane::control::{
    Entry, OpEntry, RejoinItem, SyncItem, WriteOp, DUMP_FIXED_LEN, REJOIN_FIXED_LEN, SYNC_FIXED_LEN,
};

use super::CodecError;
use crate::hub::msg::{EntryRec, HubMsg};
use crate::ids::{AppId, EntryKey};
use crate::sync::{Rejoin, SyncItem as HubSyncItem, SyncReq, SyncResp};

/// Cuts `items` into runs whose encoded sizes plus `fixed` stay within
/// `max_body`; an empty input is one empty run.
fn chunk<T>(
    items: Vec<T>,
    fixed: usize,
    max_body: usize,
    len: impl Fn(&T) -> usize,
) -> Result<Vec<Vec<T>>, CodecError> {
    let mut parts = vec![Vec::new()];
    let mut used = fixed;
    for item in items {
        let n = len(&item);
        if fixed + n > max_body {
            return Err(CodecError::ItemTooLarge {
                len: fixed + n,
                max: max_body,
            });
        }
        if used + n > max_body {
            parts.push(Vec::new());
            used = fixed;
        }
        used += n;
        // `parts` starts non-empty and only grows.
        if let Some(p) = parts.last_mut() {
            p.push(item);
        }
    }
    Ok(parts)
}

fn rec_len(r: &EntryRec) -> usize {
    OpEntry {
        op: WriteOp::Upsert,
        entry: Entry {
            obj: r.obj.0,
            key: Vec::new(),
            val: Vec::new(),
            version: r.version,
        },
    }
    .encoded_len()
        + r.key.len()
        + r.value.len()
}

fn sync_item_len(i: &HubSyncItem) -> usize {
    SyncItem {
        app: i.entry.app.0,
        obj: i.entry.obj.0,
        key: Vec::new(),
        snap: i.snap,
        hist: i.hist,
    }
    .encoded_len()
        + i.entry.key.len()
}

fn rejoin_item_len(e: &EntryKey) -> usize {
    RejoinItem {
        app: e.app.0,
        obj: e.obj.0,
        key: Vec::new(),
        h: 0,
    }
    .encoded_len()
        + e.key.len()
}

/// One app's DUMP entries as DUMP messages of at most `max_body` body bytes
/// (`MAX_BODY_LEN` on a real session); `last` marks the final part if
/// `last` is set.
pub fn split_dump(
    app: AppId,
    entries: Vec<EntryRec>,
    last: bool,
    max_body: usize,
) -> Result<Vec<HubMsg>, CodecError> {
    let parts = chunk(entries, DUMP_FIXED_LEN, max_body, rec_len)?;
    let n = parts.len();
    Ok(parts
        .into_iter()
        .enumerate()
        .map(|(i, entries)| HubMsg::Dump {
            app,
            entries,
            last: last && i + 1 == n,
        })
        .collect())
}

/// A SYNC_REQ as several of the same round within `max_body` each.
pub fn split_sync_req(req: SyncReq, max_body: usize) -> Result<Vec<SyncReq>, CodecError> {
    let round = req.round;
    Ok(chunk(req.items, SYNC_FIXED_LEN, max_body, sync_item_len)?
        .into_iter()
        .map(|items| SyncReq { round, items })
        .collect())
}

/// A SYNC_RESP as several of the same round within `max_body` each.
pub fn split_sync_resp(resp: SyncResp, max_body: usize) -> Result<Vec<SyncResp>, CodecError> {
    let round = resp.round;
    Ok(chunk(resp.items, SYNC_FIXED_LEN, max_body, sync_item_len)?
        .into_iter()
        .map(|items| SyncResp { round, items })
        .collect())
}

/// A REJOIN as several within `max_body` each.
pub fn split_rejoin(rejoin: Rejoin, max_body: usize) -> Result<Vec<Rejoin>, CodecError> {
    Ok(chunk(rejoin.items, REJOIN_FIXED_LEN, max_body, |(e, _)| {
        rejoin_item_len(e)
    })?
    .into_iter()
    .map(|items| Rejoin { items })
    .collect())
}
