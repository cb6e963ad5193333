//! iceberg-rust 0.10 speaks arrow-rs 58; the SDK hands out arrow-rs 59 batches. The two meet
//! through the Arrow C Data Interface, whose structs are the same C layout in every arrow-rs
//! version: exporting from one and importing into the other moves buffer ownership, no bytes.
use std::sync::Arc;

use arrow::array::{RecordBatch, StructArray};
use arrow::datatypes::{Schema, SchemaRef};
use arrow_array_58 as a58;
use arrow_schema_58 as s58;

/// A table's schema (arrow 58, from iceberg) as arrow 59, field metadata (field ids) included.
pub fn schema_to_59(schema: &s58::Schema) -> Result<SchemaRef, String> {
    let ffi58 =
        s58::ffi::FFI_ArrowSchema::try_from(schema).map_err(|e| format!("exporting the table's Arrow schema: {e}"))?;
    // SAFETY: FFI_ArrowSchema is #[repr(C)] ArrowSchema in both versions (transmute refuses
    // types of different sizes); ownership moves with
    // the bytes (the source is forgotten, the copy's release callback frees it once).
    let ffi59: arrow::ffi::FFI_ArrowSchema = unsafe { std::mem::transmute(ffi58) };
    let schema = Schema::try_from(&ffi59).map_err(|e| format!("importing the table's Arrow schema: {e}"))?;
    Ok(Arc::new(schema))
}

/// An arrow 59 data type as arrow 58's (for iceberg's type mapping).
pub fn data_type_to_58(data_type: &arrow::datatypes::DataType) -> Result<s58::DataType, String> {
    let ffi59 = arrow::ffi::FFI_ArrowSchema::try_from(data_type).map_err(|e| format!("exporting {data_type}: {e}"))?;
    // SAFETY: as in schema_to_59.
    let ffi58: s58::ffi::FFI_ArrowSchema = unsafe { std::mem::transmute(ffi59) };
    s58::DataType::try_from(&ffi58).map_err(|e| format!("importing {data_type}: {e}"))
}

/// A conformed batch (arrow 59) as arrow 58, for iceberg's writers.
pub fn batch_to_58(batch: RecordBatch) -> Result<a58::RecordBatch, String> {
    let strukt: StructArray = batch.into();
    let (array, schema) =
        arrow::ffi::to_ffi(&arrow::array::Array::into_data(strukt)).map_err(|e| format!("exporting the batch: {e}"))?;
    // SAFETY: as above, for FFI_ArrowArray and FFI_ArrowSchema.
    let (array58, schema58): (arrow_data_58::ffi::FFI_ArrowArray, s58::ffi::FFI_ArrowSchema) = unsafe {
        (
            std::mem::transmute::<arrow::ffi::FFI_ArrowArray, arrow_data_58::ffi::FFI_ArrowArray>(array),
            std::mem::transmute::<arrow::ffi::FFI_ArrowSchema, s58::ffi::FFI_ArrowSchema>(schema),
        )
    };
    let data = unsafe { a58::ffi::from_ffi(array58, &schema58) }.map_err(|e| format!("importing the batch: {e}"))?;
    Ok(a58::RecordBatch::from(a58::StructArray::from(data)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use a58::Array as _;
    use arrow::array::{Int64Array, StringArray};
    use arrow::datatypes::{DataType, Field};
    use std::collections::HashMap;

    #[test]
    fn batches_and_schemas_cross_with_their_values_and_field_ids() {
        let meta = HashMap::from([("PARQUET:field_id".to_string(), "7".to_string())]);
        let schema = Arc::new(Schema::new(vec![
            Field::new("n", DataType::Int64, false).with_metadata(meta),
            Field::new("s", DataType::Utf8, true),
        ]));
        let batch = RecordBatch::try_new(
            schema,
            vec![
                Arc::new(Int64Array::from(vec![1, 2])),
                Arc::new(StringArray::from(vec![Some("a"), None])),
            ],
        )
        .unwrap();
        let b58 = batch_to_58(batch).unwrap();
        assert_eq!(b58.num_rows(), 2);
        assert_eq!(
            b58.schema()
                .field(0)
                .metadata()
                .get("PARQUET:field_id")
                .map(String::as_str),
            Some("7")
        );
        let n = b58.column(0).as_any().downcast_ref::<a58::Int64Array>().unwrap();
        assert_eq!(n.values().to_vec(), vec![1, 2]);
        let s = b58.column(1).as_any().downcast_ref::<a58::StringArray>().unwrap();
        assert!(s.is_null(1) && s.value(0) == "a");

        let back = schema_to_59(&b58.schema()).unwrap();
        assert_eq!(
            back.field(0).metadata().get("PARQUET:field_id").map(String::as_str),
            Some("7")
        );
        assert_eq!(back.field(1).data_type(), &DataType::Utf8);
    }
}
