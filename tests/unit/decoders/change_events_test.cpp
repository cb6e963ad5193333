// Change events (docs/changes.md): Debezium's envelope in the shapes its JsonConverter writes
// (schemas.enable on and off, unwrapped by ExtractNewRecordState), and keyed records.
#include "decoders/change_events.h"

#include <gtest/gtest.h>

namespace picomq::decoders {
namespace {

using config::ChangeEvents;

struct Read {
  bool ok = false;
  Change change;
  std::string error;
  std::deque<std::string> owned;
};

Read read(ChangeReader& reader, std::optional<std::string_view> payload, std::optional<std::string_view> key) {
  Read r;
  r.ok = reader.read(payload, key, r.change, r.owned, r.error);
  return r;
}

// What Debezium 3's PostgreSQL connector writes for `UPDATE inventory.customers SET ...`, with
// JsonConverter's schemas.enable = false (trimmed `source`).
constexpr std::string_view kUpdate =
    R"({"before":{"id":1004,"email":"old@example.com"},"after":{"id":1004,"first_name":"Anne","email":"anne@example.com"},)"
    R"("source":{"connector":"postgresql","db":"shop","schema":"inventory","table":"customers","lsn":33832960},)"
    R"("op":"u","ts_ms":1733480000123})";

TEST(ChangeReader, ADebeziumUpdateIsAnUpsertOfAfterByTheRecordKey) {
  ChangeReader reader(ChangeEvents::Debezium, {});
  auto r = read(reader, kUpdate, R"({"id": 1004})");
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.change.op, PMQ_OP_UPSERT);
  EXPECT_EQ(r.change.row, R"({"id":1004,"first_name":"Anne","email":"anne@example.com"})");
  EXPECT_EQ(r.change.key, R"({"id":1004})");  // minified: equal keys are equal texts
  EXPECT_FALSE(r.change.skip);
}

TEST(ChangeReader, CreateAndSnapshotReadsAreUpserts) {
  ChangeReader reader(ChangeEvents::Debezium, {});
  for (const char* op : {"c", "r"}) {
    const std::string event = std::string(R"({"before":null,"after":{"id":7},"op":")") + op + "\"}";
    auto r = read(reader, event, R"({"id":7})");
    ASSERT_TRUE(r.ok) << op << ": " << r.error;
    EXPECT_EQ(r.change.op, PMQ_OP_UPSERT) << op;
    EXPECT_EQ(r.change.row, R"({"id":7})");
  }
}

TEST(ChangeReader, WithSchemasEnableTheValueAndTheKeyAreUnwrapped) {
  ChangeReader reader(ChangeEvents::Debezium, {});
  const std::string value = std::string(R"({"schema":{"type":"struct","name":"shop.inventory.customers.Envelope"},)") +
                            R"("payload":)" + std::string(kUpdate) + "}";
  auto r = read(reader, value,
                R"({"schema":{"type":"struct","fields":[{"field":"id","type":"int32"}]},"payload":{"id":1004}})");
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.change.op, PMQ_OP_UPSERT);
  EXPECT_EQ(r.change.row, R"({"id":1004,"first_name":"Anne","email":"anne@example.com"})");
  EXPECT_EQ(r.change.key, R"({"id":1004})");
}

TEST(ChangeReader, ADeleteIsByTheRecordKeyOrByKeyFieldsOfBefore) {
  constexpr std::string_view kDelete = R"({"before":{"id":1004,"region":"eu"},"after":null,"op":"d"})";
  ChangeReader by_record_key(ChangeEvents::Debezium, {});
  auto r = read(by_record_key, kDelete, R"({"id":1004})");
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.change.op, PMQ_OP_DELETE);
  EXPECT_EQ(r.change.key, R"({"id":1004})");
  EXPECT_TRUE(r.change.row.empty());

  ChangeReader by_fields(ChangeEvents::Debezium, {"region", "id"});
  r = read(by_fields, kDelete, std::nullopt);
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.change.key, R"({"region":"eu","id":1004})");  // in key_fields' order

  // REPLICA IDENTITY NOTHING: no `before`, nothing to take key_fields from.
  r = read(by_fields, R"({"before":null,"after":null,"op":"d"})", std::nullopt);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("key_fields"), std::string::npos) << r.error;
}

TEST(ChangeReader, ATombstoneDeletesItsKeyUnlessKeysAreNotDecoded) {
  ChangeReader reader(ChangeEvents::Debezium, {});
  auto r = read(reader, std::nullopt, R"({"id":1004})");
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.change.op, PMQ_OP_DELETE);
  EXPECT_EQ(r.change.key, R"({"id":1004})");

  // The key is taken from the row: the tombstone after a delete event repeats it, and is left out.
  ChangeReader by_fields(ChangeEvents::Debezium, {"id"});
  r = read(by_fields, std::nullopt, std::nullopt);
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_TRUE(r.change.skip);
}

TEST(ChangeReader, TruncateAndMessageEvents) {
  ChangeReader reader(ChangeEvents::Debezium, {});
  auto r = read(reader, R"({"before":null,"after":null,"op":"t","source":{"table":"orders"}})", std::nullopt);
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.change.op, PMQ_OP_TRUNCATE);
  EXPECT_TRUE(r.change.key.empty());
  r = read(reader, R"({"op":"m","message":{"prefix":"audit","content":"aGk="}})", std::nullopt);
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_TRUE(r.change.skip);
}

TEST(ChangeReader, AnUnwrappedRowIsAnUpsertAndItsDeletedFlagADelete) {
  ChangeReader reader(ChangeEvents::Debezium, {"id"});
  auto r = read(reader, R"({"id":3,"name":"c","__deleted":"false"})", std::nullopt);
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.change.op, PMQ_OP_UPSERT);
  EXPECT_EQ(r.change.row, R"({"id":3,"name":"c"})");  // the flag is an instruction, not a column
  EXPECT_EQ(r.change.key, R"({"id":3})");
  r = read(reader, R"({"id":3,"name":"c","__deleted":"true"})", std::nullopt);
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.change.op, PMQ_OP_DELETE);
  EXPECT_EQ(r.change.key, R"({"id":3})");
  // A table with a column named op: no before / after beside it, so a row, as it came.
  const std::string_view with_op = R"({"id":4,"op":"d"})";
  r = read(reader, with_op, std::nullopt);
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.change.op, PMQ_OP_UPSERT);
  EXPECT_EQ(r.change.row.data(), with_op.data());
}

// An UPDATE that left a TOASTed column unchanged: Debezium cannot read it (REPLICA IDENTITY
// DEFAULT) and puts its placeholder there. The row is a patch of the other columns.
TEST(ChangeReader, ColumnsDebeziumCouldNotReadMakeAPatchOfTheOthers) {
  ChangeReader reader(ChangeEvents::Debezium, {});
  auto r = read(reader,
                R"({"before":null,"after":{"id":5,"title":"new","body":"__debezium_unavailable_value",)"
                R"("blob":"X19kZWJleml1bV91bmF2YWlsYWJsZV92YWx1ZQ=="},"op":"u"})",
                R"({"id":5})");
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.change.op, PMQ_OP_PATCH);
  EXPECT_EQ(r.change.row, R"({"id":5,"title":"new"})");
  EXPECT_EQ(r.change.key, R"({"id":5})");
  // A patch after a full row of its key: the row with the patch over it.
  std::deque<std::string> owned;
  EXPECT_EQ(reader.merge(R"({"id":5,"title":"old","body":"long"})", r.change.row, owned),
            R"({"body":"long","id":5,"title":"new"})");
  // The same in an unwrapped row.
  r = read(reader, R"({"id":6,"body":"__debezium_unavailable_value","__deleted":"false"})", R"({"id":6})");
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.change.op, PMQ_OP_PATCH);
}

TEST(ChangeReader, KeyedRecordsUpsertTheirPayloadAndATombstoneDeletes) {
  ChangeReader reader(ChangeEvents::Keyed, {});
  const std::string_view payload = R"({"sku": "A-1", "qty": 2})";
  auto r = read(reader, payload, R"("A-1")");
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.change.op, PMQ_OP_UPSERT);
  EXPECT_EQ(r.change.row.data(), payload.data());  // the payload itself, not a copy
  EXPECT_EQ(r.change.key, R"({"key":"A-1"})");     // a scalar key names the row as "key"
  r = read(reader, std::nullopt, R"("A-1")");
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.change.op, PMQ_OP_DELETE);
  EXPECT_EQ(r.change.key, R"({"key":"A-1"})");
}

TEST(ChangeReader, RecordsThatAreNotChangesSayWhy) {
  ChangeReader keyed(ChangeEvents::Keyed, {});
  auto r = read(keyed, R"([1,2])", R"({"id":1})");
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.error, "a change's payload must be a JSON object");
  r = read(keyed, R"({"id":1})", std::nullopt);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("has no key"), std::string::npos) << r.error;
  r = read(keyed, std::nullopt, "null");
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.error, "the record key is null");

  ChangeReader by_fields(ChangeEvents::Keyed, {"id"});
  r = read(by_fields, R"({"name":"x"})", std::nullopt);
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.error, "key field 'id' is missing from the row");
  r = read(by_fields, R"({"id":null})", std::nullopt);
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.error, "key field 'id' is null in the row");

  ChangeReader debezium(ChangeEvents::Debezium, {});
  r = read(debezium, R"({"before":null,"after":{"id":1},"op":"x"})", R"({"id":1})");
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("unknown Debezium op 'x'"), std::string::npos) << r.error;
  r = read(debezium, R"({"before":null,"after":null,"op":"c"})", R"({"id":1})");
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("without an 'after' object"), std::string::npos) << r.error;
}

}  // namespace
}  // namespace picomq::decoders
