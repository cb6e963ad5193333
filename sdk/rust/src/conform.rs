//! Conforming an Arrow batch to a destination table's schema: the rule every table-format sink
//! (Delta, Iceberg) applies to the Arrow plane's batches, so it lives here once.
//!
//! Columns are taken by name and cast to the table's types; a column the batch lacks is null; a
//! value the table cannot hold, a null in a non-nullable column, or a payload field the table does
//! not have marks its row with the reason (the sink rejects that record); `pico_*` metadata
//! columns the table chose not to keep are dropped. With `evolve`, a payload field the table lacks
//! becomes a new nullable column instead. The table's fields (their metadata too, e.g. Iceberg's
//! field ids) are the output's.
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, BooleanArray, RecordBatch};
use arrow::compute::{cast_with_options, filter_record_batch, CastOptions};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};

use crate::{Call, Error};

/// Conforms an imported batch to the table's schema, by column name. Returns the conformed batch
/// and, per row, why it cannot be written (None: it can).
pub fn conform(batch: &RecordBatch, table: &Schema, evolve: bool) -> (RecordBatch, Vec<Option<String>>) {
    let rows = batch.num_rows();
    let mut problems: Vec<Option<String>> = vec![None; rows];
    let mut note = |row: usize, m: String| {
        let p = &mut problems[row];
        match p {
            Some(existing) => {
                existing.push_str("; ");
                existing.push_str(&m);
            }
            None => *p = Some(m),
        }
    };
    let mut fields: Vec<Arc<Field>> = Vec::new();
    let mut columns: Vec<ArrayRef> = Vec::new();
    let opts = CastOptions {
        safe: true,
        ..Default::default()
    };
    for field in table.fields() {
        let Some(src) = batch.column_by_name(field.name()) else {
            if !field.is_nullable() {
                (0..rows).for_each(|r| {
                    note(
                        r,
                        format!("field '{}': missing, and the column is not nullable", field.name()),
                    )
                });
            }
            fields.push(field.clone());
            columns.push(arrow::array::new_null_array(field.data_type(), rows));
            continue;
        };
        let col = if src.data_type() == field.data_type() {
            src.clone()
        } else if src.data_type() == &DataType::Null {
            arrow::array::new_null_array(field.data_type(), rows)
        } else {
            match cast_with_options(src, field.data_type(), &opts) {
                Ok(c) => {
                    for r in 0..rows {
                        if src.is_valid(r) && c.is_null(r) {
                            note(
                                r,
                                format!(
                                    "field '{}': {} value does not fit the table's {}",
                                    field.name(),
                                    src.data_type(),
                                    field.data_type()
                                ),
                            );
                        }
                    }
                    c
                }
                Err(e) => {
                    for r in 0..rows {
                        if src.is_valid(r) {
                            note(
                                r,
                                format!(
                                    "field '{}': {} cannot become the table's {} ({e})",
                                    field.name(),
                                    src.data_type(),
                                    field.data_type()
                                ),
                            );
                        }
                    }
                    arrow::array::new_null_array(field.data_type(), rows)
                }
            }
        };
        if !field.is_nullable() && col.null_count() > 0 {
            for r in 0..rows {
                if col.is_null(r) {
                    note(
                        r,
                        format!("field '{}': null, and the column is not nullable", field.name()),
                    );
                }
            }
        }
        fields.push(field.clone());
        columns.push(col);
    }
    // Columns the table does not have: pico_* metadata the table chose not to keep is dropped;
    // a payload field is a schema mismatch for the records that carry it, or (schema_evolution)
    // a new nullable column.
    for (i, f) in batch.schema().fields().iter().enumerate() {
        if table.field_with_name(f.name()).is_ok() || f.name().starts_with("pico_") {
            continue;
        }
        let src = batch.column(i);
        if evolve && src.data_type() != &DataType::Null {
            fields.push(Arc::new(Field::new(f.name(), src.data_type().clone(), true)));
            columns.push(src.clone());
            continue;
        }
        for r in 0..rows {
            if src.is_valid(r) {
                note(r, format!("field '{}' is not a column of the table", f.name()));
            }
        }
    }
    // Rows with problems become all-null here; they are filtered out before writing.
    let schema = Arc::new(Schema::new(
        fields
            .iter()
            .map(|f| {
                if problems.iter().any(|p| p.is_some()) {
                    Arc::new(Field::clone(f).with_nullable(true))
                } else {
                    f.clone()
                }
            })
            .collect::<Vec<_>>(),
    ));
    let out = RecordBatch::try_new(schema, columns).unwrap_or_else(|_| RecordBatch::new_empty(Arc::new(table.clone())));
    (out, problems)
}

/// The rows of a conformed batch to write: rows at offsets below `floor` (in the table already:
/// a replay) are dropped and counted as `records_skipped`, rows `conform` found a problem with are
/// rejected through `call`, the rest kept, with the `target` schema's nullability back when given
/// (the refused rows are gone). None when no row is kept.
pub fn rows_to_write(
    conformed: RecordBatch,
    problems: &[Option<String>],
    offsets: &[i64],
    floor: i64,
    call: &mut Call,
    target: Option<SchemaRef>,
) -> Result<Option<RecordBatch>, Error> {
    let mut keep = Vec::with_capacity(offsets.len());
    let mut skipped = 0u64;
    for (i, off) in offsets.iter().enumerate() {
        if *off < floor {
            skipped += 1;
            keep.push(false);
        } else if let Some(why) = &problems[i] {
            call.reject(i, why);
            keep.push(false);
        } else {
            keep.push(true);
        }
    }
    if skipped > 0 {
        call.host().count("records_skipped", skipped);
    }
    let kept = keep.iter().filter(|k| **k).count();
    if kept == 0 {
        return Ok(None);
    }
    let rows = if kept == offsets.len() {
        conformed
    } else {
        filter_record_batch(&conformed, &BooleanArray::from(keep))
            .map_err(|e| Error::fatal(format!("filtering the batch: {e}")))?
    };
    Ok(Some(match target {
        Some(schema) => RecordBatch::try_new(schema, rows.columns().to_vec()).unwrap_or(rows),
        None => rows,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Int32Array, Int64Array, StringArray, TimestampMicrosecondArray, TimestampMillisecondArray};
    use arrow::datatypes::TimeUnit;

    fn table() -> Schema {
        Schema::new(vec![
            Field::new("pico_offset", DataType::Int64, false),
            Field::new(
                "pico_timestamp",
                DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
                true,
            ),
            Field::new("n", DataType::Int32, true),
            Field::new("s", DataType::Utf8, true),
        ])
    }

    fn batch(cols: Vec<(&str, ArrayRef)>) -> RecordBatch {
        RecordBatch::try_from_iter(cols.into_iter().map(|(n, a)| (n.to_string(), a))).unwrap()
    }

    #[test]
    fn columns_are_taken_by_name_cast_to_the_tables_types_and_missing_ones_are_null() {
        let b = batch(vec![
            ("s", Arc::new(StringArray::from(vec!["a", "b"])) as ArrayRef),
            (
                "pico_timestamp",
                Arc::new(TimestampMillisecondArray::from(vec![1_700_000_000_123, 5]).with_timezone("UTC")),
            ),
            ("pico_offset", Arc::new(Int64Array::from(vec![7, 8]))),
            ("pico_headers", Arc::new(StringArray::from(vec!["dropped", "dropped"]))),
            ("n", Arc::new(Int64Array::from(vec![1, 2]))),
        ]);
        let (out, problems) = conform(&b, &table(), false);
        assert_eq!(problems, vec![None, None]);
        assert_eq!(out.num_columns(), 4, "pico_* columns the table lacks are dropped");
        let ts = out
            .column(1)
            .as_any()
            .downcast_ref::<TimestampMicrosecondArray>()
            .unwrap();
        assert_eq!(ts.value(0), 1_700_000_000_123_000);
        assert_eq!(
            out.column(2).as_any().downcast_ref::<Int32Array>().unwrap().values(),
            &[1, 2]
        );
        assert_eq!(
            out.column(3).as_any().downcast_ref::<StringArray>().unwrap().value(1),
            "b"
        );

        let only_offsets = batch(vec![("pico_offset", Arc::new(Int64Array::from(vec![1])) as ArrayRef)]);
        let (out, problems) = conform(&only_offsets, &table(), false);
        assert_eq!(problems, vec![None]);
        assert!(out.column(2).is_null(0) && out.column(3).is_null(0));
    }

    #[test]
    fn values_the_table_cannot_hold_and_unknown_fields_reject_their_records_only() {
        let b = batch(vec![
            ("pico_offset", Arc::new(Int64Array::from(vec![1, 2, 3, 4])) as ArrayRef),
            (
                "n",
                Arc::new(Int64Array::from(vec![Some(1), Some(i64::MAX), None, Some(4)])),
            ),
            ("s", Arc::new(Int64Array::from(vec![Some(10), None, None, None]))),
            ("extra", Arc::new(StringArray::from(vec![None, None, Some("x"), None]))),
        ]);
        let (_, problems) = conform(&b, &table(), false);
        assert_eq!(problems[0], None, "an int64 becomes a string");
        assert_eq!(
            problems[1].as_deref(),
            Some("field 'n': Int64 value does not fit the table's Int32")
        );
        assert_eq!(
            problems[2].as_deref(),
            Some("field 'extra' is not a column of the table")
        );
        assert_eq!(problems[3], None);

        // With schema evolution the unknown field is a new nullable column instead.
        let (out, problems) = conform(&b, &table(), true);
        assert_eq!(problems[2], None);
        assert_eq!(out.schema().field(4).name(), "extra");
        assert!(out.schema().field(4).is_nullable());
    }

    #[test]
    fn a_missing_or_null_non_nullable_column_rejects() {
        let b = batch(vec![("n", Arc::new(Int64Array::from(vec![1])) as ArrayRef)]);
        let (_, problems) = conform(&b, &table(), false);
        assert_eq!(
            problems[0].as_deref(),
            Some("field 'pico_offset': missing, and the column is not nullable")
        );
        let b = batch(vec![(
            "pico_offset",
            Arc::new(Int64Array::from(vec![None, Some(2)])) as ArrayRef,
        )]);
        let (_, problems) = conform(&b, &table(), false);
        assert_eq!(
            problems[0].as_deref(),
            Some("field 'pico_offset': null, and the column is not nullable")
        );
        assert_eq!(problems[1], None);
    }
}
