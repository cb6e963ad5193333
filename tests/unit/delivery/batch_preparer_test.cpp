// The batch preparer: decoded records in, what the sink gets, the bad records and where the
// offset may go out.
#include "runtime/delivery/batch_preparer.h"

#include <gtest/gtest.h>

#include "fakes.h"

namespace picomq::runtime::testing {
namespace {

using Policy = config::BadRecordPolicy;
const TopicPartition A{"orders.eu", 2};

BatchPreparer preparer(Policy policy, const transform::Chain* chain = nullptr) {
  return BatchPreparer({config::Schema::Json, policy, 3}, decoders::make_decoder(config::Schema::Json), chain);
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
  BatchPreparer p({config::Schema::Json, Policy::Skip, 3, &options}, decoders::make_decoder(config::Schema::Json), nullptr);
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

TEST(BatchPreparer, FilteredRecordsAreCountedAndCommittedPast) {
  auto def = config::parse_sink_definition(R"(type = "sink"
key = "s1"
path = "libpicomq_connector_stdout_sink"
[[topics]]
topics = ["orders"]
[[transforms]]
type = "filter"
drop_when = { field = "a", equals = 2 }
)", "sink.toml", [](std::string_view) -> std::optional<std::string> { return std::nullopt; });
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

}  // namespace
}  // namespace picomq::runtime::testing
