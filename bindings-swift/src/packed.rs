//! The packed forms of the queue's bulk calls (`enqueue_many`, `claim`):
//! their payloads and records cross as one byte buffer each (`Data` in
//! Swift), read and written by `Sources/Honker/Packed.swift`.
//!
//! Why: UniFFI's generated Swift lifts a record field by field, each through
//! `Data.copyBytes` (~0.1 µs a field): 32 claimed jobs of ten fields cost
//! more than the claim itself, and 1,000 payloads as `[Payload]` plus their
//! `[Enqueued]` results cost a third of a 1,000-job batch. A packed buffer
//! is read with direct loads. Payloads come in by address (`borrowed`), the
//! results go out as `Vec<u8>`. Everything else crosses as UniFFI records.
//!
//! Layout, integers little-endian (both sides are one build of one package):
//!
//! ```text
//! payload   u8 kind (0 JSON text, 1 bytes), u32 length, the bytes
//! enqueued  i64 id, u8 existing (0 or 1)
//! claimed   i64 id, u32 attempts, u32 max_attempts, i32 priority,
//!           i64 run_at_ms, i64 created_at_ms, i64 lease_expires_at_ms,
//!           payload, str token, u8 has_trace_context [str trace_context]
//! str       u32 length, UTF-8
//! ```
//!
//! A buffer is a sequence of one kind with nothing around it. The records
//! are destructured without `..` and built with every field in Swift, so a
//! field added to core's `records!` table stops both sides compiling until
//! the layout here (and Packed.swift) carries it; the Swift test
//! `testClaimedJobsCarryEveryFieldThroughThePackedForm` checks each field's
//! value, which is what catches a field read in the wrong order.

use crate::database::Payload;
use crate::errors::{HonkerError, R};
use crate::records::ClaimedJob;

const JSON: u8 = 0;
const BYTES: u8 = 1;

fn malformed() -> HonkerError {
    HonkerError::InvalidArgument {
        message: "packed payloads are malformed (Packed.swift writes them)".into(),
    }
}

/// The packed payloads Swift passes by address and length: as a `Vec<u8>`
/// UniFFI would read them one byte at a time (its generic `Vec<T>`), a
/// tenth of a 1,000-job batch's time.
///
/// # Safety
///
/// `address` and `len` must describe one readable buffer that stays alive
/// and unchanged for the whole call: `Packed.swift` passes them from inside
/// `Data.withUnsafeBytes` around the call.
pub(crate) unsafe fn borrowed<'a>(address: u64, len: u64) -> R<&'a [u8]> {
    let len = usize::try_from(len).map_err(|_| malformed())?;
    if len == 0 {
        return Ok(&[]);
    }
    let address = usize::try_from(address).map_err(|_| malformed())?;
    let start: *const u8 = std::ptr::with_exposed_provenance(address);
    if start.is_null() {
        return Err(malformed());
    }
    // SAFETY: the caller's contract above.
    Ok(unsafe { std::slice::from_raw_parts(start, len) })
}

/// Payloads packed by Swift's `Packed.payloads`.
pub(crate) fn unpack_payloads(packed: &[u8]) -> R<Vec<honker::Payload>> {
    let mut out = Vec::new();
    let mut rest = packed;
    while let Some((&kind, tail)) = rest.split_first() {
        let (len, tail) = tail.split_first_chunk::<4>().ok_or_else(malformed)?;
        let len = u32::from_le_bytes(*len) as usize;
        if tail.len() < len {
            return Err(malformed());
        }
        let (bytes, tail) = tail.split_at(len);
        out.push(match kind {
            JSON => honker::Payload::Json(String::from_utf8(bytes.to_vec()).map_err(|_| {
                HonkerError::InvalidArgument {
                    message: "a JSON payload is not UTF-8".into(),
                }
            })?),
            BYTES => honker::Payload::Bytes(bytes.to_vec()),
            _ => return Err(malformed()),
        });
        rest = tail;
    }
    Ok(out)
}

/// Each record as its id, then one byte: 0 when the job was added, else
/// 1 + the code of the mode that acted (`UniqueMode::ALL`'s order, which
/// `Packed.swift`'s `uniqueModes` lists).
pub(crate) fn pack_enqueued(done: Vec<honker::Enqueued>) -> Vec<u8> {
    let mut out = Vec::with_capacity(done.len() * 9);
    for e in done {
        out.extend_from_slice(&e.id.to_le_bytes());
        out.push(match e.unique {
            None => 0,
            Some(m) => {
                1 + honker::UniqueMode::ALL
                    .iter()
                    .position(|&x| x == m)
                    .expect("a mode is one of ALL") as u8
            }
        });
    }
    out
}

fn put_str(out: &mut Vec<u8>, s: &[u8]) {
    // A string or payload longer than u32 cannot reach here: core's payload
    // limit and SQLite's string limit are both below 4 GiB.
    out.extend_from_slice(&(s.len() as u32).to_le_bytes());
    out.extend_from_slice(s);
}

pub(crate) fn pack_claimed(jobs: Vec<honker::Job>) -> Vec<u8> {
    let mut out = Vec::with_capacity(jobs.len() * 128);
    for j in jobs {
        let ClaimedJob {
            id,
            payload,
            attempts,
            max_attempts,
            priority,
            run_at_ms,
            created_at_ms,
            lease_expires_at_ms,
            token,
            trace_context,
        } = j.into();
        out.extend_from_slice(&id.to_le_bytes());
        out.extend_from_slice(&attempts.to_le_bytes());
        out.extend_from_slice(&max_attempts.to_le_bytes());
        out.extend_from_slice(&priority.to_le_bytes());
        out.extend_from_slice(&run_at_ms.to_le_bytes());
        out.extend_from_slice(&created_at_ms.to_le_bytes());
        out.extend_from_slice(&lease_expires_at_ms.to_le_bytes());
        match &payload {
            Payload::Json { text } => {
                out.push(JSON);
                put_str(&mut out, text.as_bytes());
            }
            Payload::Bytes { data } => {
                out.push(BYTES);
                put_str(&mut out, data);
            }
        }
        put_str(&mut out, token.as_bytes());
        match trace_context {
            Some(t) => {
                out.push(1);
                put_str(&mut out, t.as_bytes());
            }
            None => out.push(0),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn packed(items: &[(u8, &[u8])]) -> Vec<u8> {
        let mut out = Vec::new();
        for (kind, bytes) in items {
            out.push(*kind);
            put_str(&mut out, bytes);
        }
        out
    }

    #[test]
    fn payloads_unpack_in_order_with_their_kinds() {
        let p = unpack_payloads(&packed(&[
            (JSON, b"{\"a\":1}"),
            (BYTES, &[0, 255]),
            (JSON, b""),
        ]))
        .unwrap();
        assert_eq!(
            p,
            vec![
                honker::Payload::Json("{\"a\":1}".into()),
                honker::Payload::Bytes(vec![0, 255]),
                honker::Payload::Json(String::new()),
            ]
        );
        assert!(unpack_payloads(&[]).unwrap().is_empty());
    }

    #[test]
    fn malformed_payloads_are_refused_not_read_past_their_end() {
        let good = packed(&[(JSON, b"[1,2]")]);
        for bad in [
            &good[..good.len() - 1],             // short by one byte
            &good[..3],                          // inside the length
            &[7, 0, 0, 0, 0][..],                // an unknown kind
            &[JSON, 0xff, 0xff, 0xff, 0xff][..], // a length past the end
        ] {
            let e = unpack_payloads(bad).unwrap_err();
            assert!(matches!(e, HonkerError::InvalidArgument { .. }), "{e:?}");
        }
        let e = unpack_payloads(&packed(&[(JSON, &[0xc3, 0x28])])).unwrap_err();
        assert!(e.to_string().contains("not UTF-8"), "{e}");
    }
}
