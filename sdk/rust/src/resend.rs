//! The order rule of sinks that commit windows of several batches (Delta, Iceberg): after a
//! window's commit failed, its batches come again (the runtime re-sends each, oldest first), but
//! batches sent after them may reach the sink before they do. A later batch taken into the next
//! window and committed would record an offset past records that are in no commit: a gap the
//! exactly-once offsets would then hide for good. So until the failed records are back, a later
//! batch of the partition is refused as retryable; the runtime re-sends it after the earlier ones.
//!
//! ```ignore
//! // a window's commit failed: its records up to `next - 1` must come again first
//! resends.failed(&tp, next - 1);
//! // each batch, once the table's offset and the window's are known
//! resends.check(&tp, first_offset, table_next.max(window_next))?;
//! ```
use std::collections::HashMap;

use crate::Error;

/// A (topic, partition).
pub type Tp = (String, i32);

#[derive(Debug, Default)]
pub struct Resends {
    /// Per partition: the last offset of records whose commit failed and that have not come again.
    through: HashMap<Tp, i64>,
}

impl Resends {
    /// Records up to `last_offset` of `tp` were in a window whose commit failed.
    pub fn failed(&mut self, tp: &Tp, last_offset: i64) {
        let e = self.through.entry(tp.clone()).or_insert(last_offset);
        *e = (*e).max(last_offset);
    }

    /// A batch of `tp` starting at `first_offset`, when the table (committed) and the open window
    /// together hold `tp`'s records below `next` (-1: none known). Ok: take it. Err (retryable):
    /// it comes after failed records that are not back yet.
    pub fn check(&mut self, tp: &Tp, first_offset: i64, next: i64) -> Result<(), Error> {
        let Some(&through) = self.through.get(tp) else {
            return Ok(());
        };
        if next > through {
            // The failed records are in the table (the commit had landed after all) or back in
            // the window.
            self.through.remove(tp);
            return Ok(());
        }
        if first_offset <= through {
            return Ok(()); // one of the failed batches (or one overlapping them) coming again
        }
        Err(Error::retry(format!(
            "{}[{}]: offsets from {first_offset} wait until the records up to offset {through} of a failed commit have come again",
            tp.0, tp.1
        )))
    }

    /// The partition was revoked (or the sink restarts it): what comes next is read from the table.
    pub fn forget(&mut self, tp: &Tp) {
        self.through.remove(tp);
    }

    pub fn is_waiting(&self, tp: &Tp) -> bool {
        self.through.contains_key(tp)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tp() -> Tp {
        ("orders".to_string(), 0)
    }

    #[test]
    fn a_later_batch_waits_until_the_failed_records_are_back() {
        let mut r = Resends::default();
        assert!(r.check(&tp(), 200, 100).is_ok(), "nothing failed: anything goes");
        r.failed(&tp(), 199);
        let refused = r.check(&tp(), 200, 100).unwrap_err();
        assert!(refused.message.contains("up to offset 199"), "{}", refused.message);
        assert!(r.check(&tp(), 100, 100).is_ok(), "a failed batch comes again");
        assert!(r.is_waiting(&tp()));
        assert!(
            r.check(&tp(), 200, 200).is_ok(),
            "the window holds them again: the later batch goes"
        );
        assert!(!r.is_waiting(&tp()));
        assert!(
            r.check(&("orders".to_string(), 1), 500, -1).is_ok(),
            "other partitions are not held"
        );
    }

    #[test]
    fn a_commit_that_landed_after_all_releases_the_partition() {
        let mut r = Resends::default();
        r.failed(&tp(), 99);
        r.failed(&tp(), 49);
        assert!(
            r.check(&tp(), 100, 50).is_err(),
            "the later failure does not lower the mark"
        );
        assert!(
            r.check(&tp(), 100, 100).is_ok(),
            "the table is at 100: the commit had landed"
        );
        r.failed(&tp(), 10);
        r.forget(&tp());
        assert!(r.check(&tp(), 500, -1).is_ok());
    }
}
