// The batch preparer: decoded records in, what the sink gets, the bad records and where the
// offset may go out.
#include "runtime/delivery/batch_preparer.h"

#include <gtest/gtest.h>

#include <cstdio>

#include "decoders/payload_decoder.h"
#include "fakes.h"
#include "picomq/arrow_view.hpp"

namespace picomq::runtime::testing {
namespace {

using Policy = config::BadRecordPolicy;
const TopicPartition A{"orders.eu", 2};

BatchPreparer preparer(Policy policy, const transform::Chain* chain = nullptr) {
  return BatchPreparer({config::Schema::Json, policy, 3}, decoders::make_decoder(config::Schema::Json), nullptr, chain);
}

VectorRecords mixed() {
  return VectorRecords({{10, R"({"a":1})", {{"h", "1"}}}, {11, "not json", {}}, {12, R"({"a":3})", {}}});
}

TEST(BatchPreparer, UnderFailTheBatchStopsAtTheUndecodableRecordAndCommitsUpToIt) {
  auto p = preparer(Policy::Fail);
  const auto records = mixed();
  PreparedBatch out = p.prepare(A, records, true);
  ASSERT_EQ(out.batch.records.size(), 1u);
  EXPECT_EQ(out.batch.records[0].offset, 10);
  EXPECT_EQ(out.batch.block_index, 3u);
  EXPECT_EQ(out.batch.tp, A);
  EXPECT_EQ(out.commit_to, 11);
  EXPECT_NE(out.failure.find("cannot decode record orders.eu[2] at offset 11 (schema json)"), std::string::npos)
      << out.failure;
}

TEST(BatchPreparer, UnderSkipTheUndecodableRecordIsSetAsideAndTheCommitGoesPastTheBatch) {
  auto p = preparer(Policy::Skip);
  const auto records = mixed();
  PreparedBatch out = p.prepare(A, records, true);
  ASSERT_EQ(out.batch.records.size(), 2u);
  EXPECT_EQ(out.batch.records[1].offset, 12);
  ASSERT_EQ(out.bad.size(), 1u);
  EXPECT_EQ(out.bad[0].index, 1u);
  EXPECT_EQ(out.bad[0].stage, BadRecordStage::Decode);
  EXPECT_EQ(out.commit_to, 13);
  EXPECT_TRUE(out.failure.empty());
}

TEST(BatchPreparer, HeadersAreReadOnlyWhenSomebodyWantsThem) {
  auto p = preparer(Policy::Skip);
  const auto records = mixed();
  EXPECT_EQ(p.prepare(A, records, true).batch.records[0].header_count, 1u);
  EXPECT_EQ(p.prepare(A, records, false).batch.records[0].header_count, 0u);
}

TEST(BatchPreparer, ForAnArrowPlaneSinkTheKeptRecordsAreExportedAsTheBatchIsPrepared) {
  const arrow::ExportOptions options;
  BatchPreparer p({config::Schema::Json, Policy::Skip, 3, &options}, decoders::make_decoder(config::Schema::Json),
                  nullptr, nullptr);
  const auto records = mixed();
  PreparedBatch out = p.prepare(A, records, true);
  ASSERT_TRUE(out.batch.arrow_export);
  const arrow::HeldExport& held = *out.batch.arrow_export;
  ASSERT_TRUE(held.result.ok) << held.result.error;
  EXPECT_EQ(held.array.length, 2) << "the undecodable record is not in the export";
  ASSERT_NE(held.schema.release, nullptr);
  const std::string last_column = held.schema.children[held.schema.n_children - 1]->name;
  EXPECT_EQ(last_column, "a");
  EXPECT_EQ(out.batch.records.size(), 2u);
  EXPECT_FALSE(preparer(Policy::Skip).prepare(A, records, true).batch.arrow_export) << "other planes export nothing";
}

// Declared columns (docs/arrow.md) that some of these records cannot hold: 21 has a string id,
// 22 is undecodable, 23 no id, 24 a tombstone (the id is not nullable); 20 and 25 fit.
arrow::ExportOptions declared_id() {
  arrow::ExportOptions options;
  options.declared = std::vector<arrow::DeclaredColumn>{{"id", arrow::ColumnType::Int64, false}};
  return options;
}
VectorRecords misfits() {
  return VectorRecords({{20, R"({"id":20})", {}},
                        {21, R"({"id":"twenty-one"})", {}},
                        {22, "not json", {}},
                        {23, R"({"name":"no id"})", {}},
                        {24, "", {}, true},
                        {25, R"({"id":25})", {}}});
}

TEST(BatchPreparer, ArrowExportRefusalsAreTheSinksBadRecordsAndTheRestIsExportedWithoutThem) {
  const auto options = declared_id();
  BatchPreparer p({config::Schema::Json, Policy::DeadLetter, 0, &options}, decoders::make_decoder(config::Schema::Json),
                  nullptr, nullptr);
  const auto records = misfits();
  PreparedBatch out = p.prepare(A, records, false);
  ASSERT_EQ(out.batch.records.size(), 2u);
  EXPECT_EQ(out.batch.records[0].offset, 20);
  EXPECT_EQ(out.batch.records[1].offset, 25);
  ASSERT_TRUE(out.batch.arrow_export);
  ASSERT_TRUE(out.batch.arrow_export->result.ok) << out.batch.arrow_export->result.error;
  EXPECT_EQ(out.batch.arrow_export->array.length, 2);
  ASSERT_EQ(out.bad.size(), 4u);  // in offset order, the decode failure among the refusals
  EXPECT_EQ(out.bad[0].index, 1u);
  EXPECT_EQ(out.bad[0].stage, BadRecordStage::Sink);
  EXPECT_EQ(out.bad[0].reason, "arrow export: field 'id': expected int64, found string");
  EXPECT_EQ(out.bad[1].index, 2u);
  EXPECT_EQ(out.bad[1].stage, BadRecordStage::Decode);
  EXPECT_EQ(out.bad[2].index, 3u);
  EXPECT_EQ(out.bad[2].reason, "arrow export: field 'id': missing, and the column is not nullable");
  EXPECT_EQ(out.bad[3].index, 4u);
  EXPECT_EQ(out.bad[3].reason, "arrow export: tombstone: field 'id' is not nullable");
  EXPECT_EQ(out.commit_to, 26);
  EXPECT_TRUE(out.failure.empty());
}

TEST(BatchPreparer, UnderFailAnArrowExportRefusalStopsTheBatchThereAndThePrefixIsExported) {
  const auto options = declared_id();
  BatchPreparer p({config::Schema::Json, Policy::Fail, 0, &options}, decoders::make_decoder(config::Schema::Json),
                  nullptr, nullptr);
  const auto records = misfits();
  PreparedBatch out = p.prepare(A, records, false);
  ASSERT_EQ(out.batch.records.size(), 1u);
  ASSERT_TRUE(out.batch.arrow_export);
  EXPECT_EQ(out.batch.arrow_export->array.length, 1);
  EXPECT_EQ(out.commit_to, 21);
  EXPECT_EQ(out.failure,
            "the sink rejected record orders.eu[2] at offset 21: arrow export: field 'id': expected int64, found "
            "string");
  EXPECT_TRUE(out.bad.empty());

  const VectorRecords first_refused({{30, R"({"id":"x"})", {}}, {31, R"({"id":31})", {}}, {32, R"({"id":"y"})", {}}});
  PreparedBatch none = p.prepare(A, first_refused, false);
  EXPECT_TRUE(none.batch.records.empty());
  EXPECT_FALSE(none.batch.arrow_export) << "nothing to write: no export";
  EXPECT_EQ(none.commit_to, 30);
  EXPECT_EQ(none.failure,
            "the sink rejected record orders.eu[2] at offset 30: arrow export: field 'id': expected int64, found "
            "string (and 1 more)");
}

// Every column's format, name, metadata and cells as text: what two exports must agree on.
std::vector<std::string> cells_of(const ArrowSchema& schema, const ArrowArray& array) {
  const sdk::ArrowBatchView view(&schema, &array);
  std::vector<std::string> out;
  for (size_t c = 0; c < view.num_columns(); ++c) {
    const sdk::ColumnView column = view.column(c);
    out.push_back(std::string(column.name()) + ":" + std::string(column.format()) + (column.is_json() ? ":json" : ""));
    for (size_t row = 0; row < view.num_rows(); ++row) {
      std::string cell = "null";
      if (!column.is_null(row)) {
        switch (column.type()) {
          case sdk::ColumnType::Bool: cell = column.as_bool(row) ? "true" : "false"; break;
          case sdk::ColumnType::Int32: cell = std::to_string(column.as_int32(row)); break;
          case sdk::ColumnType::Int64: cell = std::to_string(column.as_int64(row)); break;
          case sdk::ColumnType::TimestampMs: cell = std::to_string(column.as_timestamp_ms(row)); break;
          case sdk::ColumnType::Float64: {
            char text[32];
            std::snprintf(text, sizeof text, "%.17g", column.as_double(row));
            cell = text;
            break;
          }
          case sdk::ColumnType::Utf8:
          case sdk::ColumnType::Binary: cell = std::string(column.as_bytes(row).as_string_view()); break;
          case sdk::ColumnType::Map: cell = std::to_string(column.entries(row).size()) + " entries"; break;
          default: cell = "?";
        }
      }
      out.push_back(cell);
    }
  }
  return out;
}

// The runtime's options: the export reads the JSON decoder's own parse of each payload as it is
// accepted. Whatever the batch holds, the result is export_batch()'s, cell by cell.
TEST(BatchPreparer, TheArrowExportReadsTheDecodersParseAndGivesWhatExportBatchGives) {
  arrow::ExportOptions inferred;
  inferred.payloads_validated = true;  // as the runtime sets it: its decoder validated them
  arrow::ExportOptions declared = inferred;
  declared.declared = std::vector<arrow::DeclaredColumn>{
      {"id", arrow::ColumnType::Int64, false}, {"s", arrow::ColumnType::Utf8},  {"f", arrow::ColumnType::Float64},
      {"items", arrow::ColumnType::Json},      {"v", arrow::ColumnType::Int64}, {"late", arrow::ColumnType::Json}};
  const std::vector<VectorRecords> batches = {
      // shape-stable, with a bad record skipped, a tombstone, and fields missing or late
      VectorRecords({{0, R"({"id": 1, "s": "a", "f": 1.5, "items": [ {"k": "]"} ], "b": true})", {{"h", "1"}}},
                     {1, "not json", {}},
                     {2, "", {}, /*tombstone=*/true},
                     {3, R"( {"id": 2, "s": "b\u00e9", "f": 2, "late": {"x" : [1, 2.50]}} )", {}},
                     {4, R"({"s": null, "id": -3, "b": false, "v": 4.0})", {}}}),
      // a number simdjson does not represent: the decoder's grammar check, no parse to read
      VectorRecords({{0, R"({"id": 1, "n": 1})", {}}, {1, R"({"id": 2, "n": 123456789012345678901234567890})", {}}}),
      // kinds that need the general reading (inferred), a value that does not convert (declared)
      VectorRecords({{0, R"({"id": 1, "v": 1})", {}}, {1, R"({"id": 2, "v": "one"})", {}}}),
      // a payload that is not an object
      VectorRecords({{0, R"({"id": 1, "v": 1})", {}}, {1, R"([1, 2])", {}}}),
      // a declared column missing where it is not nullable
      VectorRecords({{0, R"({"id": 1})", {}}, {1, R"({"s": "no id"})", {}}}),
      // a duplicate key (the last one wins), after a record that set the columns up
      VectorRecords({{0, R"({"id": 1, "s": "x"})", {}}, {1, R"({"id": 2, "s": "y", "s": "z"})", {}}}),
      // fields in another order, one of a new name, one absent
      VectorRecords({{0, R"({"id": 1, "s": "x", "f": 1})", {}},
                     {1, R"({"s": "y", "id": 2, "g": true})", {}},
                     {2, R"({"f": 2.5})", {}}}),
  };
  for (const arrow::ExportOptions* options : {&inferred, &declared}) {
    ASSERT_TRUE(arrow::ParsedBatchExport::applies(*options));
    for (size_t b = 0; b < batches.size(); ++b) {
      SCOPED_TRACE((options->declared ? "declared, batch " : "inferred, batch ") + std::to_string(b));
      BatchPreparer p({config::Schema::Json, Policy::Skip, 3, options}, decoders::make_decoder(config::Schema::Json),
                      nullptr, nullptr);
      PreparedBatch out = p.prepare(A, batches[b], true);
      ASSERT_TRUE(out.batch.arrow_export);
      const arrow::HeldExport& held = *out.batch.arrow_export;
      arrow::HeldExport direct;
      direct.result = arrow::export_batch(out.batch.abi_view(), *options, &direct.schema, &direct.array);
      ASSERT_EQ(held.result.ok, direct.result.ok) << held.result.error << " / " << direct.result.error;
      ASSERT_EQ(held.result.error, direct.result.error);
      if (!held.result.ok) {
        ASSERT_EQ(held.result.rejected.size(), direct.result.rejected.size());
        ASSERT_FALSE(held.result.rejected.empty());
        for (size_t k = 0; k < held.result.rejected.size(); ++k) {
          EXPECT_EQ(held.result.rejected[k].record_index, direct.result.rejected[k].record_index);
          EXPECT_EQ(held.result.rejected[k].reason, direct.result.rejected[k].reason);
        }
        continue;
      }
      EXPECT_EQ(cells_of(held.schema, held.array), cells_of(direct.schema, direct.array));
    }
  }
}

TEST(BatchPreparer, FilteredRecordsAreCountedAndCommittedPast) {
  auto def = config::parse_sink_definition(R"(type = "sink"
key = "s1"
path = "libpicomq_connector_stdout_sink"
[[topics]]
topics = ["orders"]
[[transforms]]
type = "filter"
drop_when = { field = "a", equals = 2 }
)",
                                           "sink.toml",
                                           [](std::string_view) -> std::optional<std::string> { return std::nullopt; });
  ASSERT_TRUE(def.definition) << config::format_errors(def.errors);
  transform::Chain chain(def.definition->transforms);
  auto p = preparer(Policy::Skip, &chain);
  const VectorRecords records({{0, R"({"a":1})", {}}, {1, R"({"a":2})", {}}, {2, R"({"a":2})", {}}});
  PreparedBatch out = p.prepare(A, records, false);
  ASSERT_EQ(out.batch.records.size(), 1u);
  EXPECT_EQ(out.batch.records[0].offset, 0);
  EXPECT_EQ(out.filtered, 2u);
  EXPECT_EQ(out.commit_to, 3);
}

// docs/changes.md: under `changes` each record becomes an operation on a row, with its key.
BatchPreparer change_preparer(Policy policy, uint32_t change_ops = PMQ_CHANGE_OPS_KEYED) {
  BatchPreparer::Settings s{config::Schema::Json, policy, 0};
  s.changes = config::ChangeEvents::Debezium;
  s.change_ops = change_ops;
  return BatchPreparer(s, decoders::make_decoder(config::Schema::Json), decoders::make_decoder(config::Schema::Json),
                       nullptr);
}

VectorRecords debezium_events() {
  return VectorRecords({
      {0, R"({"before":null,"after":{"id":1,"v":"a"},"op":"c"})", {}, false, R"({"id":1})"},
      {1, R"({"before":{"id":1},"after":null,"op":"d"})", {}, false, R"({"id":1})"},
      {2, "", {}, true, R"({"id":1})"},                                // the tombstone after the delete
      {3, R"({"before":null,"after":null,"op":"t"})", {}, false, {}},  // a truncate
      {4, R"({"before":null,"after":{"id":2},"op":"u"})", {}, false, "not json"},
      {5, R"({"op":"m","message":{"prefix":"audit","content":"aGk="}})", {}, false, {}},  // a logical decoding message
  });
}

TEST(BatchPreparer, ChangeEventsBecomeOperationsWithTheirKeysAndTheBatchSaysSo) {
  auto p = change_preparer(Policy::Skip, PMQ_CHANGE_OPS_KEYED | PMQ_CHANGE_OP_BIT(PMQ_OP_TRUNCATE));
  const auto records = debezium_events();
  PreparedBatch out = p.prepare(A, records, false);
  ASSERT_EQ(out.batch.records.size(), 4u);
  auto text = [](pmq_bytes b) { return std::string(reinterpret_cast<const char*>(b.data), b.size); };
  const auto& r = out.batch.records;
  EXPECT_EQ(r[0].op, PMQ_OP_UPSERT);
  EXPECT_EQ(text(r[0].payload), R"({"id":1,"v":"a"})");
  EXPECT_EQ(text(r[0].key_json), R"({"id":1})");
  EXPECT_EQ(r[1].op, PMQ_OP_DELETE);
  EXPECT_EQ(r[1].payload.data, nullptr);
  EXPECT_EQ(text(r[1].key_json), R"({"id":1})");
  EXPECT_EQ(r[2].op, PMQ_OP_DELETE);
  EXPECT_EQ(r[2].offset, 2);
  EXPECT_EQ(r[3].op, PMQ_OP_TRUNCATE);
  EXPECT_EQ(r[3].key_json.data, nullptr);
  // The key that is not JSON is a bad record of the decode stage; the message changes nothing.
  ASSERT_EQ(out.bad.size(), 1u);
  EXPECT_EQ(out.bad[0].index, 4u);
  EXPECT_EQ(out.bad[0].stage, BadRecordStage::Decode);
  EXPECT_NE(out.bad[0].reason.find("key: "), std::string::npos) << out.bad[0].reason;
  EXPECT_EQ(out.filtered, 1u);
  EXPECT_EQ(out.commit_to, 6);
  const pmq_batch view = out.batch.abi_view();
  EXPECT_TRUE(pmq_batch_has_changes(&view));
  EXPECT_EQ(pmq_record_op(&view, pmq_batch_record(&view, 1)), PMQ_OP_DELETE);
}

TEST(BatchPreparer, ATruncateForASinkThatDoesNotApplyThemIsItsBadRecordAndUnderFailStopsThere) {
  const auto records = debezium_events();
  auto skip = change_preparer(Policy::Skip);
  PreparedBatch out = skip.prepare(A, records, false);
  ASSERT_EQ(out.bad.size(), 2u);
  EXPECT_EQ(out.bad[0].index, 3u);
  EXPECT_EQ(out.bad[0].stage, BadRecordStage::Sink);
  EXPECT_EQ(out.bad[0].reason, "the sink does not apply truncates");

  auto fail = change_preparer(Policy::Fail);
  out = fail.prepare(A, records, false);
  EXPECT_EQ(out.batch.records.size(), 3u);
  EXPECT_EQ(out.commit_to, 3);
  EXPECT_NE(out.failure.find("the sink does not apply truncates: record orders.eu[2] at offset 3"), std::string::npos)
      << out.failure;
}

// A patch (Debezium could not read a column) after a full row of its key in the batch becomes
// that row with the patch over it; one with no full row before it stays a patch, and is the
// sink's bad record when the sink cannot keep columns.
TEST(BatchPreparer, APatchAfterItsKeysFullRowIsMergedAndOtherwiseNeedsASinkThatPatches) {
  const VectorRecords records({
      {0, R"({"before":null,"after":{"id":1,"t":"a","body":"long"},"op":"c"})", {}, false, R"({"id":1})"},
      {1,
       R"({"before":null,"after":{"id":1,"t":"b","body":"__debezium_unavailable_value"},"op":"u"})",
       {},
       false,
       R"({"id":1})"},
      {2,
       R"({"before":null,"after":{"id":2,"t":"c","body":"__debezium_unavailable_value"},"op":"u"})",
       {},
       false,
       R"({"id":2})"},
  });
  auto text = [](pmq_bytes b) { return std::string(reinterpret_cast<const char*>(b.data), b.size); };
  auto patches = change_preparer(Policy::Skip, PMQ_CHANGE_OPS_KEYED | PMQ_CHANGE_OP_BIT(PMQ_OP_PATCH));
  PreparedBatch out = patches.prepare(A, records, false);
  ASSERT_EQ(out.batch.records.size(), 3u);
  EXPECT_EQ(out.batch.records[1].op, PMQ_OP_UPSERT);
  EXPECT_EQ(text(out.batch.records[1].payload), R"({"body":"long","id":1,"t":"b"})");
  EXPECT_EQ(out.batch.records[2].op, PMQ_OP_PATCH);
  EXPECT_EQ(text(out.batch.records[2].payload), R"({"id":2,"t":"c"})");

  auto no_patches = change_preparer(Policy::Skip);
  out = no_patches.prepare(A, records, false);
  ASSERT_EQ(out.batch.records.size(), 2u);
  ASSERT_EQ(out.bad.size(), 1u);
  EXPECT_EQ(out.bad[0].index, 2u);
  EXPECT_EQ(out.bad[0].stage, BadRecordStage::Sink);
  EXPECT_NE(out.bad[0].reason.find("REPLICA IDENTITY FULL"), std::string::npos) << out.bad[0].reason;
}

TEST(BatchPreparer, APlainBlockWithADecodedKeyCarriesItAndAKeyThatDoesNotDecodeIsBad) {
  BatchPreparer p({config::Schema::Json, Policy::Fail, 0}, decoders::make_decoder(config::Schema::Json),
                  decoders::make_decoder(config::Schema::Json), nullptr);
  const VectorRecords records({{0, R"({"a":1})", {}, false, R"({"id":1})"},
                               {1, R"({"a":2})", {}, false, {}},
                               {2, R"({"a":3})", {}, false, "{oops"}});
  PreparedBatch out = p.prepare(A, records, false);
  ASSERT_EQ(out.batch.records.size(), 2u);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(out.batch.records[0].key_json.data),
                        out.batch.records[0].key_json.size),
            R"({"id":1})");
  EXPECT_EQ(out.batch.records[0].op, PMQ_OP_APPEND);
  EXPECT_EQ(out.batch.records[1].key_json.data, nullptr);  // no key
  EXPECT_EQ(out.commit_to, 2);
  EXPECT_NE(out.failure.find("cannot decode the key of record orders.eu[2] at offset 2"), std::string::npos)
      << out.failure;
  const pmq_batch view = out.batch.abi_view();
  EXPECT_FALSE(pmq_batch_has_changes(&view));
}

// ABI 2.4: an avro block's batch names each record's writer schema (here the definition's),
// parallel to the records the sink gets (a bad record leaves no hole); other schemas name none.
TEST(BatchPreparer, AnAvroBatchCarriesEachRecordsWriterSchemaTextParallelToItsRecords) {
  config::TopicsBlock block;
  block.schema = config::Schema::Avro;
  block.avro_schema_json = R"({"type":"record","name":"R","fields":[{"name":"n","type":"long"}]})";
  auto factory = decoders::make_decoder_factory(block);
  ASSERT_EQ(factory->error(), "");
  auto p = std::make_unique<BatchPreparer>(BatchPreparer::Settings{config::Schema::Avro, Policy::Skip, 0},
                                           factory->make(), nullptr, nullptr);
  // n = 1, then a long cut short (0x80 promises another byte), then n = -2.
  const VectorRecords records(
      {{0, std::string("\x02", 1), {}}, {1, std::string("\x80", 1), {}}, {2, std::string("\x03", 1), {}}});
  PreparedBatch out = p->prepare(A, records, false);
  ASSERT_EQ(out.batch.records.size(), 2u);
  ASSERT_EQ(out.bad.size(), 1u);
  ASSERT_EQ(out.batch.writer_schemas.size(), 2u);
  const pmq_batch view = out.batch.abi_view();
  for (size_t i = 0; i < 2; ++i) {
    ASSERT_NE(pmq_batch_writer_schema(&view, i), nullptr);
    EXPECT_EQ(std::string(pmq_batch_writer_schema(&view, i)), *block.avro_schema_json);
  }
  EXPECT_EQ(std::string_view(reinterpret_cast<const char*>(view.records[1].payload.data), view.records[1].payload.size),
            R"({"n":-2})");
  EXPECT_EQ(out.batch.writer_schema_texts.size(), 1u) << "one text kept alive for the batch";
  p.reset();  // the decoder and the factory held the schema too
  factory.reset();
  EXPECT_EQ(std::string(pmq_batch_writer_schema(&view, 0)), *block.avro_schema_json)
      << "the batch keeps the text alive";

  const auto json = preparer(Policy::Skip).prepare(A, mixed(), false);
  EXPECT_TRUE(json.batch.writer_schemas.empty());
  const pmq_batch json_view = json.batch.abi_view();
  EXPECT_EQ(pmq_batch_writer_schema(&json_view, 0), nullptr);
}

}  // namespace
}  // namespace picomq::runtime::testing
