//! Change events (docs/changes.md) applied to a Delta table without DataFusion: a copy-on-write
//! merge per commit window.
//!
//! The window keeps, per row key, the fate of the key after the window's changes in offset order
//! (the last change decides; patches are merged onto the row before them): a full row, a patch
//! still to be merged onto the table's row, or a delete; a truncate empties the window and marks
//! it truncated. At the commit the sink reads the table's files that may hold a changed key (the
//! add actions' min/max statistics of the key columns, when present), keeps their rows whose key
//! did not change, adds each key's final row, writes that as new files and commits, in one
//! transaction with the window's txn actions, `remove` actions for the files it rewrote and `add`
//! actions for the new ones (after a truncate: a `remove` for every file).
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use arrow::array::{
    new_null_array, Array, ArrayRef, BinaryArray, Int32Array, Int64Array, RecordBatch, StringArray,
    TimestampMillisecondArray,
};
use arrow::datatypes::{Field, Schema, SchemaRef};
use arrow::row::{RowConverter, SortField};
use picomq_sink::ChangeOp;
use serde_json::{Map, Value};

/// The metadata columns the sink fills from the record (when the table has them).
pub const META_COLUMNS: [&str; 6] = [
    "pico_topic",
    "pico_partition",
    "pico_offset",
    "pico_timestamp",
    "pico_key",
    "pico_headers",
];

pub fn is_meta(name: &str) -> bool {
    META_COLUMNS.contains(&name)
}

/// The record a key's last change came from: the metadata columns of its row.
#[derive(Debug, Clone)]
pub struct Meta {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    pub timestamp_ms: Option<i64>,
    pub key: Option<Vec<u8>>,
}

/// What the window's changes leave of a key.
#[derive(Debug, Clone, PartialEq)]
pub enum Fate {
    /// The full row (an upsert, or patches merged onto one, or onto nothing after a delete).
    Row(Map<String, Value>),
    /// Columns to set on the table's row (inserted with what they name when it is not there).
    Patch(Map<String, Value>),
    Delete,
}

#[derive(Debug, Clone)]
pub struct KeyState {
    pub key: Map<String, Value>,
    pub fate: Fate,
    pub meta: Meta,
}

/// One commit window's changes.
#[derive(Debug, Default)]
pub struct Window {
    /// A truncate came: every row the table holds goes (and the window's earlier changes).
    pub truncated: bool,
    /// By the key's canonical text (its fields sorted): the key's fate.
    pub keys: BTreeMap<String, KeyState>,
    pub truncates: u64,
}

impl Window {
    pub fn is_empty(&self) -> bool {
        !self.truncated && self.keys.is_empty()
    }

    /// Applies one change, in offset order. `key` is the key object, `payload` the row or the
    /// patch's columns (upsert, patch).
    pub fn apply(
        &mut self,
        op: ChangeOp,
        key: Option<Map<String, Value>>,
        payload: Option<Map<String, Value>>,
        meta: Meta,
    ) {
        match op {
            ChangeOp::Truncate => {
                self.keys.clear();
                self.truncated = true;
                self.truncates += 1;
                return;
            }
            ChangeOp::Append => return,
            _ => {}
        }
        let Some(key) = key else { return };
        let text = canonical(&key);
        let before = self.keys.remove(&text).map(|s| s.fate);
        let fate = match op {
            ChangeOp::Delete => Fate::Delete,
            ChangeOp::Upsert => Fate::Row(with_key(payload.unwrap_or_default(), &key)),
            ChangeOp::Patch => {
                let columns = payload.unwrap_or_default();
                match before {
                    Some(Fate::Row(mut row)) => {
                        row.extend(columns);
                        Fate::Row(row)
                    }
                    Some(Fate::Patch(mut earlier)) => {
                        earlier.extend(columns);
                        Fate::Patch(earlier)
                    }
                    // The row is gone (deleted in this window, or every row truncated): the
                    // patch inserts what it names.
                    Some(Fate::Delete) => Fate::Row(with_key(columns, &key)),
                    None if self.truncated => Fate::Row(with_key(columns, &key)),
                    None => Fate::Patch(with_key(columns, &key)),
                }
            }
            ChangeOp::Truncate | ChangeOp::Append => unreachable!(),
        };
        self.keys.insert(text, KeyState { key, fate, meta });
    }
}

/// The key object's text with its fields in order (serde_json's map is sorted): equal keys are
/// equal texts whatever order the record had them in.
pub fn canonical(key: &Map<String, Value>) -> String {
    Value::Object(key.clone()).to_string()
}

/// The row with the key's fields it lacks (the key names the row: its columns hold it).
fn with_key(mut row: Map<String, Value>, key: &Map<String, Value>) -> Map<String, Value> {
    for (k, v) in key {
        row.entry(k.clone()).or_insert_with(|| v.clone());
    }
    row
}

/// The schema the payloads are decoded with: the table's columns but the metadata ones, each
/// nullable (a patch names some columns only; nullability is checked on the final rows).
pub fn payload_schema(table: &Schema) -> SchemaRef {
    Arc::new(Schema::new(
        table
            .fields()
            .iter()
            .filter(|f| !is_meta(f.name()))
            .map(|f| f.as_ref().clone().with_nullable(true))
            .collect::<Vec<_>>(),
    ))
}

/// JSON objects decoded into `schema` (arrow-json; strict: a field the schema lacks is an error).
pub fn decode(schema: &SchemaRef, rows: &[&Map<String, Value>], strict: bool) -> Result<RecordBatch, String> {
    let mut decoder = arrow_json::ReaderBuilder::new(schema.clone())
        .with_strict_mode(strict)
        .with_batch_size(rows.len().max(1))
        .build_decoder()
        .map_err(|e| e.to_string())?;
    decoder.serialize(rows).map_err(|e| e.to_string())?;
    Ok(decoder
        .flush()
        .map_err(|e| e.to_string())?
        .unwrap_or_else(|| RecordBatch::new_empty(schema.clone())))
}

/// Why a row of an upsert cannot be a row of the table (a field the table does not have, a value
/// its column cannot hold, a null in a non-nullable column), or None.
pub fn row_problem(table: &Schema, payload: &SchemaRef, row: &Map<String, Value>, full: bool) -> Option<String> {
    for name in row.keys() {
        if is_meta(name) {
            continue;
        }
        if table.field_with_name(name).is_err() {
            return Some(format!("field '{name}' is not a column of the table"));
        }
    }
    if full {
        for f in table.fields() {
            if !f.is_nullable() && !is_meta(f.name()) && row.get(f.name()).map(Value::is_null).unwrap_or(true) {
                return Some(format!(
                    "field '{}' is missing or null, and the table's column is not nullable",
                    f.name()
                ));
            }
        }
    }
    let columns: Map<String, Value> = row
        .iter()
        .filter(|(k, _)| !is_meta(k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    decode(payload, &[&columns], true).err()
}

/// The key columns' fields of the table (the key's field names, in the key's order).
pub fn key_fields(table: &Schema, names: &[String]) -> Result<Vec<Field>, String> {
    names
        .iter()
        .map(|n| {
            table
                .field_with_name(n)
                .map(|f| f.clone().with_nullable(true))
                .map_err(|_| format!("key field '{n}' is not a column of the table"))
        })
        .collect()
}

/// Why a key object cannot name a row of the table (a field that is not a column, a value the
/// column cannot hold), or None.
pub fn key_problem(table: &Schema, names: &[String], key: &Map<String, Value>) -> Option<String> {
    let fields = match key_fields(table, names) {
        Ok(f) => f,
        Err(e) => return Some(e),
    };
    decode(&Arc::new(Schema::new(fields)), &[key], true)
        .err()
        .map(|e| format!("the row key does not fit the key columns: {e}"))
}

/// Turns key columns into comparable bytes: the same converter for the window's keys and the
/// files' rows.
pub struct KeyEncoder {
    converter: RowConverter,
    fields: Vec<Field>,
}

impl KeyEncoder {
    pub fn new(fields: Vec<Field>) -> Result<Self, String> {
        let converter = RowConverter::new(fields.iter().map(|f| SortField::new(f.data_type().clone())).collect())
            .map_err(|e| e.to_string())?;
        Ok(KeyEncoder { converter, fields })
    }
    /// The keys of `batch`'s rows, from its columns named as the key's fields (cast to the table's types).
    pub fn encode(&self, batch: &RecordBatch) -> Result<Vec<Vec<u8>>, String> {
        let mut columns = Vec::with_capacity(self.fields.len());
        for f in &self.fields {
            let c = batch
                .column_by_name(f.name())
                .ok_or_else(|| format!("a data file has no key column '{}'", f.name()))?;
            let c = if c.data_type() == f.data_type() {
                c.clone()
            } else {
                arrow::compute::cast(c, f.data_type()).map_err(|e| format!("key column '{}': {e}", f.name()))?
            };
            columns.push(c);
        }
        let rows = self.converter.convert_columns(&columns).map_err(|e| e.to_string())?;
        Ok(rows.iter().map(|r| r.as_ref().to_vec()).collect())
    }
    /// The window's keys decoded into the key columns' types, encoded.
    pub fn encode_keys(&self, keys: &[&Map<String, Value>]) -> Result<Vec<Vec<u8>>, String> {
        let schema = Arc::new(Schema::new(self.fields.clone()));
        let batch = decode(&schema, keys, false)?;
        self.encode(&batch)
    }
}

/// Whether a file whose add action has these statistics may hold one of `keys`: false only when,
/// for every key, some key column's value lies outside the file's [min, max] (integers, and
/// strings shorter than the 32 characters a writer may truncate statistics to).
pub fn may_hold(stats: Option<&str>, key_columns: &[String], keys: &[&Map<String, Value>]) -> bool {
    let Some(stats) = stats.and_then(|s| serde_json::from_str::<Value>(s).ok()) else {
        return true;
    };
    let (Some(min), Some(max)) = (stats.get("minValues"), stats.get("maxValues")) else {
        return true;
    };
    keys.iter().any(|key| {
        key_columns.iter().all(|c| match (key.get(c), min.get(c), max.get(c)) {
            (Some(v), Some(lo), Some(hi)) => within(v, lo, hi),
            _ => true,
        })
    })
}

fn within(v: &Value, lo: &Value, hi: &Value) -> bool {
    match (v, lo, hi) {
        (Value::Number(v), Value::Number(lo), Value::Number(hi)) => match (v.as_i64(), lo.as_i64(), hi.as_i64()) {
            (Some(v), Some(lo), Some(hi)) => lo <= v && v <= hi,
            _ => true,
        },
        (Value::String(v), Value::String(lo), Value::String(hi))
            if lo.chars().count() < 32 && hi.chars().count() < 32 =>
        {
            lo.as_str() <= v.as_str() && v.as_str() <= hi.as_str()
        }
        _ => true,
    }
}

/// The metadata column `name` of the table for `metas`' rows (cast to the table's type).
fn meta_column(field: &Field, metas: &[&Meta]) -> Result<ArrayRef, String> {
    let array: ArrayRef = match field.name().as_str() {
        "pico_topic" => Arc::new(StringArray::from_iter_values(metas.iter().map(|m| m.topic.as_str()))),
        "pico_partition" => Arc::new(Int32Array::from_iter_values(metas.iter().map(|m| m.partition))),
        "pico_offset" => Arc::new(Int64Array::from_iter_values(metas.iter().map(|m| m.offset))),
        "pico_timestamp" => Arc::new(
            TimestampMillisecondArray::from(metas.iter().map(|m| m.timestamp_ms).collect::<Vec<_>>())
                .with_timezone("UTC"),
        ),
        "pico_key" => Arc::new(BinaryArray::from(
            metas.iter().map(|m| m.key.as_deref()).collect::<Vec<_>>(),
        )),
        // Headers are not kept under changes (the sink does not read them).
        _ => return Ok(new_null_array(field.data_type(), metas.len())),
    };
    if array.data_type() == field.data_type() {
        Ok(array)
    } else {
        arrow::compute::cast(&array, field.data_type()).map_err(|e| format!("column '{}': {e}", field.name()))
    }
}

/// A source column cast to the table's type.
fn as_table_type(c: &ArrayRef, field: &Field) -> Result<ArrayRef, String> {
    if c.data_type() == field.data_type() {
        Ok(c.clone())
    } else {
        arrow::compute::cast(c, field.data_type()).map_err(|e| format!("column '{}': {e}", field.name()))
    }
}

/// What the merge of a window produced.
pub struct Merged {
    /// The rows of the new files (None: no row to write).
    pub rows: Option<RecordBatch>,
    /// Indices (into the files given) of the files rewritten (their rows are in `rows` or gone).
    pub rewritten: Vec<usize>,
    pub deleted_rows: u64,
}

/// The merge: `files` are the record batches of the candidate files (file index, batch) read
/// from the table; the window's keys decide which of their rows stay. A file none of whose rows
/// has a changed key is not rewritten. After a truncate no file is given (every one goes).
pub fn merge(
    table: &SchemaRef,
    key_columns: &[String],
    window: &Window,
    files: &[(usize, RecordBatch)],
) -> Result<Merged, String> {
    let states: Vec<&KeyState> = window.keys.values().collect();
    if states.is_empty() {
        // Only a truncate (its files are removed by the caller), or nothing.
        return Ok(Merged {
            rows: None,
            rewritten: Vec::new(),
            deleted_rows: 0,
        });
    }
    let encoder = KeyEncoder::new(key_fields(table, key_columns)?)?;
    let key_maps: Vec<&Map<String, Value>> = states.iter().map(|s| &s.key).collect();
    let by_key: HashMap<Vec<u8>, usize> = encoder
        .encode_keys(&key_maps)?
        .into_iter()
        .enumerate()
        .map(|(i, k)| (k, i))
        .collect();

    // The rows each file keeps, and the table's row of each changed key (for its patch).
    let mut kept: Vec<Vec<usize>> = Vec::with_capacity(files.len());
    let mut found: Vec<Option<(usize, usize)>> = vec![None; states.len()];
    let mut touched = std::collections::BTreeSet::new();
    let mut deleted_rows = 0u64;
    for (source, (file, batch)) in files.iter().enumerate() {
        let keys = encoder.encode(batch)?;
        let mut keep = Vec::with_capacity(keys.len());
        for (row, k) in keys.iter().enumerate() {
            match by_key.get(k) {
                Some(&i) => {
                    touched.insert(*file);
                    found[i] = Some((source, row));
                    if states[i].fate == Fate::Delete {
                        deleted_rows += 1;
                    }
                }
                None => keep.push(row),
            }
        }
        kept.push(keep);
    }

    // The new rows: each key's row or patch, decoded into the table's columns; their metadata.
    let payload = payload_schema(table);
    let written: Vec<usize> = (0..states.len()).filter(|&i| states[i].fate != Fate::Delete).collect();
    let rows: Vec<&Map<String, Value>> = written
        .iter()
        .map(|&i| match &states[i].fate {
            Fate::Row(r) | Fate::Patch(r) => r,
            Fate::Delete => unreachable!(),
        })
        .collect();
    let metas: Vec<&Meta> = written.iter().map(|&i| &states[i].meta).collect();
    let decoded = decode(&payload, &rows, false)?;
    let new_source = files.len();

    let mut columns = Vec::with_capacity(table.fields().len());
    for field in table.fields() {
        let new_column = if is_meta(field.name()) {
            meta_column(field, &metas)?
        } else {
            as_table_type(
                decoded
                    .column_by_name(field.name())
                    .ok_or_else(|| format!("column '{}' missing from the decoded rows", field.name()))?,
                field,
            )?
        };
        let mut sources: Vec<ArrayRef> = Vec::with_capacity(files.len() + 1);
        for (_, batch) in files {
            sources.push(match batch.column_by_name(field.name()) {
                Some(c) => as_table_type(c, field)?,
                None => new_null_array(field.data_type(), batch.num_rows()),
            });
        }
        sources.push(new_column);
        let mut indices: Vec<(usize, usize)> = Vec::new();
        for (source, (file, _)) in files.iter().enumerate() {
            if touched.contains(file) {
                indices.extend(kept[source].iter().map(|&r| (source, r)));
            }
        }
        for (j, &i) in written.iter().enumerate() {
            let from_table = match (&states[i].fate, found[i]) {
                // A patch of a row the table holds: the columns it does not name keep their value.
                (Fate::Patch(p), Some(at)) if !is_meta(field.name()) && !p.contains_key(field.name()) => Some(at),
                _ => None,
            };
            indices.push(from_table.unwrap_or((new_source, j)));
        }
        let refs: Vec<&dyn Array> = sources.iter().map(|a| a.as_ref()).collect();
        columns.push(arrow::compute::interleave(&refs, &indices).map_err(|e| e.to_string())?);
    }
    let num_rows = columns.first().map(|c| c.len()).unwrap_or(0);
    let rows = if num_rows == 0 {
        None
    } else {
        Some(RecordBatch::try_new(table.clone(), columns).map_err(|e| format!("the merged rows: {e}"))?)
    };
    Ok(Merged {
        rows,
        rewritten: touched.into_iter().collect(),
        deleted_rows,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::datatypes::DataType as ArrowType;

    fn meta(offset: i64) -> Meta {
        Meta {
            topic: "t".into(),
            partition: 0,
            offset,
            timestamp_ms: Some(1000),
            key: None,
        }
    }
    fn obj(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }
    fn schema() -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new("pico_offset", ArrowType::Int64, false),
            Field::new("id", ArrowType::Int64, false),
            Field::new("name", ArrowType::Utf8, true),
            Field::new("body", ArrowType::Utf8, true),
        ]))
    }
    fn file(ids: &[i64], names: &[&str]) -> RecordBatch {
        RecordBatch::try_new(
            schema(),
            vec![
                Arc::new(Int64Array::from_iter_values(ids.iter().map(|_| 0))),
                Arc::new(Int64Array::from(ids.to_vec())),
                Arc::new(StringArray::from(names.to_vec())),
                Arc::new(StringArray::from(vec!["kept"; ids.len()])),
            ],
        )
        .unwrap()
    }
    fn rows(b: &RecordBatch) -> Vec<(i64, Option<String>, Option<String>)> {
        let id = b.column(1).as_any().downcast_ref::<Int64Array>().unwrap();
        let name = b.column(2).as_any().downcast_ref::<StringArray>().unwrap();
        let body = b.column(3).as_any().downcast_ref::<StringArray>().unwrap();
        let mut out: Vec<_> = (0..b.num_rows())
            .map(|i| {
                (
                    id.value(i),
                    name.is_valid(i).then(|| name.value(i).to_string()),
                    body.is_valid(i).then(|| body.value(i).to_string()),
                )
            })
            .collect();
        out.sort();
        out
    }

    #[test]
    fn the_last_change_of_a_key_decides_and_patches_chain() {
        let mut w = Window::default();
        let k = obj(serde_json::json!({"id": 1}));
        w.apply(
            ChangeOp::Upsert,
            Some(k.clone()),
            Some(obj(serde_json::json!({"id": 1, "name": "a", "body": "b"}))),
            meta(0),
        );
        w.apply(
            ChangeOp::Patch,
            Some(k.clone()),
            Some(obj(serde_json::json!({"name": "c"}))),
            meta(1),
        );
        assert_eq!(
            w.keys.values().next().unwrap().fate,
            Fate::Row(obj(serde_json::json!({"id": 1, "name": "c", "body": "b"})))
        );
        w.apply(ChangeOp::Delete, Some(k.clone()), None, meta(2));
        w.apply(
            ChangeOp::Patch,
            Some(k.clone()),
            Some(obj(serde_json::json!({"name": "d"}))),
            meta(3),
        );
        assert_eq!(
            w.keys.values().next().unwrap().fate,
            Fate::Row(obj(serde_json::json!({"id": 1, "name": "d"}))),
            "a patch after a delete inserts what it names"
        );
        let k2 = obj(serde_json::json!({"id": 2}));
        w.apply(
            ChangeOp::Patch,
            Some(k2.clone()),
            Some(obj(serde_json::json!({"name": "x"}))),
            meta(4),
        );
        w.apply(
            ChangeOp::Patch,
            Some(k2.clone()),
            Some(obj(serde_json::json!({"body": "y"}))),
            meta(5),
        );
        assert_eq!(
            w.keys[&canonical(&k2)].fate,
            Fate::Patch(obj(serde_json::json!({"id": 2, "name": "x", "body": "y"})))
        );
        w.apply(ChangeOp::Truncate, None, None, meta(6));
        assert!(w.keys.is_empty() && w.truncated);
        w.apply(
            ChangeOp::Patch,
            Some(k2.clone()),
            Some(obj(serde_json::json!({"name": "z"}))),
            meta(7),
        );
        assert_eq!(
            w.keys[&canonical(&k2)].fate,
            Fate::Row(obj(serde_json::json!({"id": 2, "name": "z"}))),
            "after a truncate no row is there"
        );
    }

    #[test]
    fn merge_keeps_unchanged_rows_replaces_patches_and_deletes() {
        let mut w = Window::default();
        let key = |i: i64| obj(serde_json::json!({ "id": i }));
        w.apply(
            ChangeOp::Upsert,
            Some(key(1)),
            Some(obj(serde_json::json!({"id": 1, "name": "new"}))),
            meta(10),
        );
        w.apply(ChangeOp::Delete, Some(key(2)), None, meta(11));
        w.apply(
            ChangeOp::Patch,
            Some(key(3)),
            Some(obj(serde_json::json!({"name": "patched"}))),
            meta(12),
        );
        w.apply(
            ChangeOp::Patch,
            Some(key(7)),
            Some(obj(serde_json::json!({"name": "inserted"}))),
            meta(13),
        );
        w.apply(ChangeOp::Delete, Some(key(8)), None, meta(14));
        let files = vec![
            (0, file(&[1, 2, 3, 4], &["a", "b", "c", "d"])),
            (1, file(&[5, 6], &["e", "f"])),
        ];
        let m = merge(&schema(), &["id".to_string()], &w, &files).unwrap();
        assert_eq!(m.rewritten, vec![0], "the file without a changed key stays");
        assert_eq!(m.deleted_rows, 1);
        let b = m.rows.unwrap();
        assert_eq!(
            rows(&b),
            vec![
                (1, Some("new".into()), None),
                (3, Some("patched".into()), Some("kept".into())),
                (4, Some("d".into()), Some("kept".into())),
                (7, Some("inserted".into()), None),
            ]
        );
        let offsets = b.column(0).as_any().downcast_ref::<Int64Array>().unwrap();
        assert!(
            offsets.values().contains(&12),
            "a patched row takes the patch's metadata"
        );
    }

    #[test]
    fn statistics_prune_files_that_cannot_hold_a_key() {
        let stats = r#"{"numRecords":3,"minValues":{"id":10,"s":"b"},"maxValues":{"id":20,"s":"d"}}"#;
        let cols = ["id".to_string()];
        let k = |v: Value| obj(v);
        assert!(may_hold(Some(stats), &cols, &[&k(serde_json::json!({"id": 15}))]));
        assert!(!may_hold(
            Some(stats),
            &cols,
            &[&k(serde_json::json!({"id": 9})), &k(serde_json::json!({"id": 21}))]
        ));
        assert!(
            may_hold(None, &cols, &[&k(serde_json::json!({"id": 9}))]),
            "no statistics: every file"
        );
        let s = ["s".to_string()];
        assert!(!may_hold(Some(stats), &s, &[&k(serde_json::json!({"s": "e"}))]));
        assert!(may_hold(Some(stats), &s, &[&k(serde_json::json!({"s": "c"}))]));
    }

    #[test]
    fn rows_the_table_cannot_hold_are_named() {
        let t = schema();
        let p = payload_schema(&t);
        assert_eq!(
            row_problem(&t, &p, &obj(serde_json::json!({"id": 1, "name": "x"})), true),
            None
        );
        assert!(row_problem(&t, &p, &obj(serde_json::json!({"id": 1, "zz": 1})), true)
            .unwrap()
            .contains("'zz'"));
        assert!(row_problem(&t, &p, &obj(serde_json::json!({"name": "x"})), true)
            .unwrap()
            .contains("'id'"));
        assert_eq!(
            row_problem(&t, &p, &obj(serde_json::json!({"name": "x"})), false),
            None,
            "a patch names some columns"
        );
        assert!(row_problem(&t, &p, &obj(serde_json::json!({"id": "one"})), true).is_some());
    }
}
