//! Writes by hand: control messages that install flow-manager entries and
//! app entries on a switch or device program, the way the hub's
//! WRITE_APPLY and promotion will (§5.4, §5.5), for tests and scenarios
//! that run the data planes without a hub.
//!
//! Bodies (big-endian, [our choice]):
//! - [`MSG_FM`]: `app` 8 ‖ `op` 8 (1 insert, 3 delete) ‖ `slot` 32 ‖
//!   `len` 8 ‖ union key.
//! - [`MSG_WRITE`]: `app` 8 ‖ `op` 8 (1 upsert, 3 delete) ‖ `obj` 16 ‖
//!   `len` 8 ‖ key ‖ `len` 8 ‖ value (empty for a delete).
//! - [`MSG_MERGE`]: `app` 8 ‖ MERGE body; [`MSG_BANK`], [`MSG_REINJECT`]:
//!   empty.

use inca_switch::device::ControlMessage;

/// Message kind: a flow-manager entry ("EXFM").
pub const MSG_FM: u32 = 0x4558_464d;
/// Message kind: an app table entry ("EXWR").
pub const MSG_WRITE: u32 = 0x4558_5752;

/// Message kind: inject a MERGE into the pipeline ("EXMG"); body `app` 8
/// ‖ the 24-byte MERGE body (§4.3).
pub const MSG_MERGE: u32 = 0x4558_4d47;

/// A [`MSG_MERGE`] for app `app`. None if the body does not emit.
pub fn merge(app: u8, m: &inca_wire::exoplane::MergeRepr) -> Option<ControlMessage> {
    let mut body = vec![app; 1 + inca_wire::exoplane::MERGE_LEN];
    m.emit(&mut body[1..]).ok()?;
    Some(ControlMessage {
        kind: MSG_MERGE,
        body,
    })
}

/// Reads a [`MSG_MERGE`] body.
pub fn parse_merge(body: &[u8]) -> Option<(u8, inca_wire::exoplane::MergeRepr)> {
    let (&app, rest) = body.split_first()?;
    Some((app, inca_wire::exoplane::MergeRepr::parse(rest).ok()?))
}

/// Message kind: start a new popularity window on a device ("EXBK"),
/// as the daemon's `T_win` tick will; empty body.
pub const MSG_BANK: u32 = 0x4558_424b;

/// Message kind: re-inject every queued MISS on a device ("EXRI"), as the
/// daemon will once a flow's writes are acknowledged; empty body.
pub const MSG_REINJECT: u32 = 0x4558_5249;

/// Insert (or upsert).
pub const OP_INSERT: u8 = 1;
/// Delete.
pub const OP_DELETE: u8 = 3;

/// A decoded [`MSG_FM`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FmWrite {
    /// The app id.
    pub app: u8,
    /// Insert (`Some(slot)`: the direct-counter slot) or delete (None).
    pub slot: Option<u32>,
    /// The union key.
    pub uk: Vec<u8>,
}

/// A decoded [`MSG_WRITE`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryWrite {
    /// The app id.
    pub app: u8,
    /// The object id.
    pub obj: u16,
    /// The key bytes.
    pub key: Vec<u8>,
    /// The value (None: delete).
    pub value: Option<Vec<u8>>,
}

fn short(v: &[u8]) -> Option<Vec<u8>> {
    let (&len, rest) = v.split_first()?;
    rest.get(..usize::from(len)).map(<[u8]>::to_vec)
}

/// A [`MSG_FM`] insert (`slot` Some) or delete. None if the key is longer
/// than 255 bytes.
pub fn fm(app: u8, slot: Option<u32>, uk: &[u8]) -> Option<ControlMessage> {
    let mut body = vec![app, if slot.is_some() { OP_INSERT } else { OP_DELETE }];
    body.extend_from_slice(&slot.unwrap_or(0).to_be_bytes());
    body.push(u8::try_from(uk.len()).ok()?);
    body.extend_from_slice(uk);
    Some(ControlMessage { kind: MSG_FM, body })
}

/// Reads a [`MSG_FM`] body.
pub fn parse_fm(body: &[u8]) -> Option<FmWrite> {
    let (&app, rest) = body.split_first()?;
    let (&op, rest) = rest.split_first()?;
    let slot = u32::from_be_bytes(rest.get(..4)?.try_into().ok()?);
    let uk = short(&rest[4..])?;
    let slot = match op {
        OP_INSERT => Some(slot),
        OP_DELETE => None,
        _ => return None,
    };
    Some(FmWrite { app, slot, uk })
}

/// A [`MSG_WRITE`] upsert (`value` Some) or delete. None if the key or
/// value is longer than 255 bytes.
pub fn write(app: u8, obj: u16, key: &[u8], value: Option<&[u8]>) -> Option<ControlMessage> {
    let mut body = vec![
        app,
        if value.is_some() {
            OP_INSERT
        } else {
            OP_DELETE
        },
    ];
    body.extend_from_slice(&obj.to_be_bytes());
    body.push(u8::try_from(key.len()).ok()?);
    body.extend_from_slice(key);
    let v = value.unwrap_or(&[]);
    body.push(u8::try_from(v.len()).ok()?);
    body.extend_from_slice(v);
    Some(ControlMessage {
        kind: MSG_WRITE,
        body,
    })
}

/// Reads a [`MSG_WRITE`] body.
pub fn parse_write(body: &[u8]) -> Option<EntryWrite> {
    let (&app, rest) = body.split_first()?;
    let (&op, rest) = rest.split_first()?;
    let obj = u16::from_be_bytes(rest.get(..2)?.try_into().ok()?);
    let key = short(&rest[2..])?;
    let value = short(&rest[3 + key.len()..])?;
    let value = match op {
        OP_INSERT => Some(value),
        OP_DELETE => None,
        _ => return None,
    };
    Some(EntryWrite {
        app,
        obj,
        key,
        value,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_refusals() {
        let m = fm(3, Some(9), &[1, 2, 3]).unwrap();
        assert_eq!(
            parse_fm(&m.body),
            Some(FmWrite {
                app: 3,
                slot: Some(9),
                uk: vec![1, 2, 3]
            })
        );
        let w = write(1, 2, &[5; 13], Some(&[7; 8])).unwrap();
        let e = parse_write(&w.body).unwrap();
        assert_eq!((e.app, e.obj, e.key.len()), (1, 2, 13));
        assert_eq!(e.value, Some(vec![7; 8]));
        let d = write(1, 2, &[5], None).unwrap();
        assert_eq!(parse_write(&d.body).unwrap().value, None);
        for cut in 0..w.body.len() {
            assert_eq!(parse_write(&w.body[..cut]), None, "cut at {cut}");
        }
        assert!(fm(1, None, &[0; 256]).is_none());
    }
}
