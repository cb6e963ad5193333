//! The exactly-once record in the table itself: each commit's snapshot summary carries, under keys
//! namespaced by the sink's app id, the next offset of every source topic-partition it holds and a
//! commit id:
//!
//!   picomq.<app_id>.offsets   = {"orders":{"0":1200,"3":77}}
//!   picomq.<app_id>.commit-id = 6f1c…  (a UUID per commit attempt series)
//!
//! On assignment the sink walks the current snapshot's ancestry (parents, newest first) to the
//! newest snapshot that names each partition: records below that offset are in the table.
//! Snapshots of other writers (or other app ids) carry no such key and are walked past.
use std::collections::{BTreeMap, HashMap};

use iceberg::spec::TableMetadata;

pub type Tp = (String, i32);

pub fn offsets_key(app_id: &str) -> String {
    format!("picomq.{app_id}.offsets")
}

pub fn commit_id_key(app_id: &str) -> String {
    format!("picomq.{app_id}.commit-id")
}

/// The summary properties of a commit holding `next` (topic-partition → next offset).
pub fn summary_properties(app_id: &str, commit_id: &str, next: &BTreeMap<Tp, i64>) -> HashMap<String, String> {
    let mut by_topic: BTreeMap<&str, BTreeMap<String, i64>> = BTreeMap::new();
    for ((topic, partition), offset) in next {
        by_topic
            .entry(topic.as_str())
            .or_default()
            .insert(partition.to_string(), *offset);
    }
    HashMap::from([
        (
            offsets_key(app_id),
            serde_json::to_string(&by_topic).expect("a map of numbers serialises"),
        ),
        (commit_id_key(app_id), commit_id.to_string()),
    ])
}

/// Parses one summary's offsets value; None if absent or not ours to read.
fn parse_offsets(value: &str) -> Option<BTreeMap<String, BTreeMap<String, i64>>> {
    serde_json::from_str(value).ok()
}

/// The committed next offset of each of `tps` as the table's current ancestry has it (absent:
/// no snapshot of this app id holds the partition).
pub fn committed(metadata: &TableMetadata, app_id: &str, tps: &[Tp]) -> HashMap<Tp, i64> {
    let key = offsets_key(app_id);
    let mut found: HashMap<Tp, i64> = HashMap::new();
    let mut at = metadata.current_snapshot().cloned();
    while let Some(snapshot) = at {
        if found.len() == tps.len() {
            break;
        }
        if let Some(offsets) = snapshot
            .summary()
            .additional_properties
            .get(&key)
            .and_then(|v| parse_offsets(v))
        {
            for tp in tps {
                if found.contains_key(tp) {
                    continue;
                }
                if let Some(o) = offsets.get(&tp.0).and_then(|p| p.get(&tp.1.to_string())) {
                    found.insert(tp.clone(), *o);
                }
            }
        }
        at = snapshot
            .parent_snapshot_id()
            .and_then(|id| metadata.snapshot_by_id(id).cloned());
    }
    found
}

/// Whether a snapshot of the current ancestry carries `commit_id`: a commit whose answer was lost
/// (timeout, 5xx) may have landed; retrying it without this check would append its files twice.
pub fn holds_commit(metadata: &TableMetadata, app_id: &str, commit_id: &str, depth: usize) -> bool {
    let key = commit_id_key(app_id);
    let mut at = metadata.current_snapshot().cloned();
    let mut walked = 0;
    while let Some(snapshot) = at {
        if snapshot
            .summary()
            .additional_properties
            .get(&key)
            .map(|v| v == commit_id)
            .unwrap_or(false)
        {
            return true;
        }
        walked += 1;
        if walked >= depth {
            return false;
        }
        at = snapshot
            .parent_snapshot_id()
            .and_then(|id| metadata.snapshot_by_id(id).cloned());
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_properties_name_every_partition_under_the_app_ids_keys() {
        let next = BTreeMap::from([
            (("orders".to_string(), 0), 1200),
            (("orders".to_string(), 3), 77),
            (("b.c".to_string(), 1), 5),
        ]);
        let p = summary_properties("sinkA", "id-1", &next);
        assert_eq!(
            p["picomq.sinkA.offsets"],
            r#"{"b.c":{"1":5},"orders":{"0":1200,"3":77}}"#
        );
        assert_eq!(p["picomq.sinkA.commit-id"], "id-1");
        let parsed = parse_offsets(&p["picomq.sinkA.offsets"]).unwrap();
        assert_eq!(parsed["orders"]["3"], 77);
        assert!(parse_offsets("not json").is_none());
    }

    /// Table metadata with snapshots 1 <- 2 <- 3 (current), summaries given per snapshot.
    fn metadata(summaries: [serde_json::Value; 3]) -> TableMetadata {
        let snapshots: Vec<serde_json::Value> = summaries
            .into_iter()
            .enumerate()
            .map(|(i, mut summary)| {
                summary["operation"] = "append".into();
                let id = i as i64 + 1;
                let mut s = serde_json::json!({"snapshot-id": id, "sequence-number": id, "timestamp-ms": 1_700_000_000_000i64 + id,
                    "manifest-list": format!("s3://b/t/metadata/snap-{id}.avro"), "summary": summary, "schema-id": 0});
                if id > 1 {
                    s["parent-snapshot-id"] = (id - 1).into();
                }
                s
            })
            .collect();
        let m = serde_json::json!({
            "format-version": 2, "table-uuid": "9c12d441-03fe-4693-9a96-a0705ddf69c1", "location": "s3://b/t",
            "last-sequence-number": 3, "last-updated-ms": 1_700_000_000_003i64, "last-column-id": 1,
            "schemas": [{"type": "struct", "schema-id": 0, "fields": [{"id": 1, "name": "n", "required": false, "type": "long"}]}],
            "current-schema-id": 0, "partition-specs": [{"spec-id": 0, "fields": []}], "default-spec-id": 0,
            "last-partition-id": 999, "properties": {}, "current-snapshot-id": 3, "snapshots": snapshots,
            "snapshot-log": [], "metadata-log": [], "sort-orders": [{"order-id": 0, "fields": []}], "default-sort-order-id": 0,
            "refs": {"main": {"snapshot-id": 3, "type": "branch"}}
        });
        serde_json::from_value(m).expect("valid table metadata")
    }

    #[test]
    fn committed_offsets_come_from_the_newest_snapshot_naming_each_partition_walking_past_others() {
        let tps = vec![("t".to_string(), 0), ("t".to_string(), 1), ("t".to_string(), 2)];
        let m = metadata([
            serde_json::json!({"picomq.a.offsets": r#"{"t":{"0":10,"1":20}}"#, "picomq.a.commit-id": "c1"}),
            serde_json::json!({"picomq.a.offsets": r#"{"t":{"0":15}}"#, "picomq.a.commit-id": "c2"}),
            // Another writer's snapshot, and another app id's, on top.
            serde_json::json!({"picomq.b.offsets": r#"{"t":{"0":99,"1":99}}"#, "added-records": "5"}),
        ]);
        let found = committed(&m, "a", &tps);
        assert_eq!(found.get(&tps[0]), Some(&15), "the newer snapshot wins");
        assert_eq!(
            found.get(&tps[1]),
            Some(&20),
            "older snapshots fill in partitions the newer ones lack"
        );
        assert_eq!(found.get(&tps[2]), None, "never written");
        assert_eq!(committed(&m, "b", &tps[..1]).get(&tps[0]), Some(&99));
        assert!(holds_commit(&m, "a", "c2", 64));
        assert!(holds_commit(&m, "a", "c1", 64));
        assert!(!holds_commit(&m, "a", "c1", 2), "beyond the depth looked at");
        assert!(!holds_commit(&m, "a", "c3", 64));
    }
}
