// The MongoDB sink's pure pieces, no server: documents (ids, metadata, payload layouts, dates,
// the 16 MiB limit), write operations per strategy, error codes and bulk replies, collection
// names.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "mongodb/config.h"
#include "mongodb/document.h"
#include "mongodb/errors.h"
#include "picomq/kit/testing/fake_host.hpp"

namespace mg = picomq::mongodb;
namespace kt = picomq::kit::testing;
using kt::TestBatch;
using kt::TestRecord;
using nlohmann::json;

namespace {

json doc_json(const bson_t* b) { return json::parse(mg::to_json(*b)); }

mg::Settings settings() {
  mg::Settings s;
  s.database = "db";
  s.collection = "{topic}";
  return s;
}

mg::Encoded encode(const mg::Settings& s, const TestBatch& b, int64_t now = 1'800'000'000'000) {
  return mg::DocumentEncoder(s).encode(b.raw(), now);
}

TEST(MongoDocument, RecordIdMetadataAndPayloadFields) {
  TestBatch b("shop.orders", 3,
              {TestRecord{.offset = 42, .payload = R"({"_id": "theirs", "n": 1, "big": 9007199254740993, "s": "é"})",
                          .key = std::string("k\0\xff", 3), .headers = {{"h", "v"}, {"h", "w"}, {"nul", std::nullopt}},
                          .timestamp_ms = 1'700'000'000'123}});
  auto e = encode(settings(), b);
  ASSERT_TRUE(e.rejected.empty());
  ASSERT_EQ(e.ops.size(), 1u);
  EXPECT_EQ(e.ops[0].kind, mg::OpKind::Insert);
  const json d = doc_json(e.ops[0].doc.get());
  EXPECT_EQ(d["_id"], "shop.orders:3:42") << "the record id; the payload's own _id is not written";
  EXPECT_EQ(d["pico_topic"], "shop.orders");
  EXPECT_EQ(d["pico_partition"], 3);
  EXPECT_EQ(d["pico_offset"], 42);
  EXPECT_EQ(d["pico_timestamp"], json::parse(R"({"$date": "2023-11-14T22:13:20.123Z"})"));
  EXPECT_EQ(d["pico_key"], json::parse(R"({"$binary": {"base64": "awD/", "subType": "00"}})"));
  EXPECT_EQ(d["pico_headers"], json::parse(R"({"h": ["v", "w"], "nul": null})"));
  EXPECT_EQ(d["n"], 1);
  EXPECT_EQ(d["big"].get<int64_t>(), 9007199254740993) << "an int64 stays exact";
  EXPECT_EQ(d["s"], "é");
  // Field order: _id, metadata, payload.
  std::vector<std::string> keys;
  for (auto& [k, v] : d.items()) keys.push_back(k);
  EXPECT_EQ(keys.front(), "_id");
}

TEST(MongoDocument, NonObjectPayloadsGoUnderPayloadOrTheConfiguredField) {
  mg::Settings s = settings();
  s.include_metadata = false;
  TestBatch b = TestBatch::json("t", 0, 0, {"[1, 2]", "\"text\"", "7", "null"});
  auto e = encode(s, b);
  ASSERT_EQ(e.ops.size(), 4u);
  EXPECT_EQ(doc_json(e.ops[0].doc.get()), json::parse(R"({"_id": "t:0:0", "payload": [1, 2]})"));
  EXPECT_EQ(doc_json(e.ops[1].doc.get()), json::parse(R"({"_id": "t:0:1", "payload": "text"})"));
  EXPECT_EQ(doc_json(e.ops[2].doc.get()), json::parse(R"({"_id": "t:0:2", "payload": 7})"));
  EXPECT_EQ(doc_json(e.ops[3].doc.get()), json::parse(R"({"_id": "t:0:3", "payload": null})"));
  s.payload_field = "body";
  auto f = encode(s, TestBatch::json("t", 0, 0, {R"({"a": 1})"}));
  EXPECT_EQ(doc_json(f.ops[0].doc.get()), json::parse(R"({"_id": "t:0:0", "body": {"a": 1}})"));
  TestBatch tomb("t", 0, {TestRecord{.offset = 5, .payload = std::nullopt}});
  EXPECT_EQ(doc_json(encode(s, tomb).ops[0].doc.get()), json::parse(R"({"_id": "t:0:5", "body": null})"));
  TestBatch text("t", 0, {TestRecord{.offset = 1, .payload = "plain"}}, PMQ_PAYLOAD_TEXT, "text");
  EXPECT_EQ(doc_json(encode(s, text).ops[0].doc.get()), json::parse(R"({"_id": "t:0:1", "body": "plain"})"));
}

TEST(MongoDocument, IdStrategies) {
  mg::Settings s = settings();
  s.include_metadata = false;
  s.id_strategy = mg::IdStrategy::Key;
  TestBatch keyed("t", 0,
                  {TestRecord{.offset = 0, .payload = R"({"a": 1})", .key = "user-1"},
                   TestRecord{.offset = 1, .payload = R"({"a": 2})", .key = std::string("\xff\x00", 2)},
                   TestRecord{.offset = 2, .payload = R"({"a": 3})"}});
  auto k = encode(s, keyed);
  ASSERT_EQ(k.ops.size(), 2u);
  EXPECT_EQ(doc_json(k.ops[0].doc.get())["_id"], "user-1");
  EXPECT_EQ(doc_json(k.ops[1].doc.get())["_id"], json::parse(R"({"$binary": {"base64": "/wA=", "subType": "00"}})"));
  ASSERT_EQ(k.rejected.size(), 1u);
  EXPECT_EQ(k.rejected[0].record, 2u);
  EXPECT_NE(k.rejected[0].reason.find("the record has no key"), std::string::npos) << k.rejected[0].reason;

  s.id_strategy = mg::IdStrategy::Field;
  s.id_field = "order_id";
  auto f = encode(s, TestBatch::json("t", 0, 0, {R"({"order_id": 17, "x": 1})", R"({"x": 2})"}));
  ASSERT_EQ(f.ops.size(), 1u);
  EXPECT_EQ(doc_json(f.ops[0].doc.get()), json::parse(R"({"_id": 17, "order_id": 17, "x": 1})"));
  ASSERT_EQ(f.rejected.size(), 1u);
  EXPECT_NE(f.rejected[0].reason.find("no field 'order_id'"), std::string::npos);

  s.id_strategy = mg::IdStrategy::Generated;
  s.id_field.reset();
  auto g = encode(s, TestBatch::json("t", 0, 0, {R"({"x": 1})", R"({"x": 1})"}));
  const json a = doc_json(g.ops[0].doc.get()), b = doc_json(g.ops[1].doc.get());
  ASSERT_TRUE(a["_id"].contains("$oid"));
  EXPECT_NE(a["_id"], b["_id"]);
}

TEST(MongoDocument, TimestampFieldsBecomeDatesAndAValueThatIsNoDateRejectsItsRecordOnly) {
  mg::Settings s = settings();
  s.include_metadata = false;
  s.timestamp_fields = {"at", "when"};
  auto e = encode(s, TestBatch::json("t", 0, 0,
                                     {R"({"at": 1700000000123, "when": "2026-12-01T15:04:05.5+01:00", "n": 1})",
                                      R"({"at": "yesterday"})", R"({"at": true})", R"({"other": 1})",
                                      R"({"at": {"$date": "2026-01-01T00:00:00Z"}})"}));
  ASSERT_EQ(e.ops.size(), 3u);
  EXPECT_EQ(doc_json(e.ops[0].doc.get()),
            json::parse(R"({"_id": "t:0:0", "at": {"$date": "2023-11-14T22:13:20.123Z"},
                            "when": {"$date": "2026-12-01T14:04:05.500Z"}, "n": 1})"));
  EXPECT_EQ(doc_json(e.ops[1].doc.get()), json::parse(R"({"_id": "t:0:3", "other": 1})"));
  EXPECT_EQ(doc_json(e.ops[2].doc.get())["at"], json::parse(R"({"$date": "2026-01-01T00:00:00Z"})"))
      << "Extended JSON in the payload is read as the type it names";
  ASSERT_EQ(e.rejected.size(), 2u);
  EXPECT_EQ(e.rejected[0].record, 1u);
  EXPECT_NE(e.rejected[0].reason.find("'yesterday' is not an ISO-8601 date-time"), std::string::npos);
  EXPECT_EQ(e.rejected[1].record, 2u);
}

TEST(MongoDocument, ADocumentOver16MiBIsRejectedWithItsSizeAndTheRestOfTheBatchGoesOn) {
  const std::string big = R"({"blob": ")" + std::string(mg::kMaxDocumentBytes, 'x') + "\"}";
  auto e = encode(settings(), TestBatch::json("t", 0, 0, {R"({"a": 1})", big, R"({"a": 3})"}));
  ASSERT_EQ(e.ops.size(), 2u);
  ASSERT_EQ(e.rejected.size(), 1u);
  EXPECT_EQ(e.rejected[0].record, 1u);
  EXPECT_NE(e.rejected[0].reason.find("over MongoDB's 16 MiB document limit"), std::string::npos) << e.rejected[0].reason;
  const auto bad = encode(settings(), TestBatch::json("t", 0, 0, {R"({"n": 1e999999})"}));
  EXPECT_EQ(bad.rejected.size(), bad.ops.empty() ? 1u : 0u);
}

TEST(MongoDocument, ReplaceUpdateAndDeleteOperations) {
  mg::Settings s = settings();
  s.include_metadata = false;
  s.write_strategy = mg::WriteStrategy::Replace;
  auto r = encode(s, TestBatch::json("t", 0, 9, {R"({"a": 1})"}));
  ASSERT_EQ(r.ops.size(), 1u);
  EXPECT_EQ(r.ops[0].kind, mg::OpKind::Replace);
  EXPECT_EQ(doc_json(r.ops[0].filter.get()), json::parse(R"({"_id": "t:0:9"})"));
  EXPECT_EQ(doc_json(r.ops[0].doc.get()), json::parse(R"({"_id": "t:0:9", "a": 1})"));

  s.business_key = {"sku", "site"};
  auto bk = encode(s, TestBatch::json("t", 0, 0, {R"({"sku": "A", "site": 2, "q": 5})", R"({"sku": "B"})"}));
  ASSERT_EQ(bk.ops.size(), 1u);
  EXPECT_EQ(doc_json(bk.ops[0].filter.get()), json::parse(R"({"sku": "A", "site": 2})"));
  EXPECT_EQ(doc_json(bk.ops[0].doc.get()), json::parse(R"({"sku": "A", "site": 2, "q": 5})"))
      << "no _id in a replacement by business key (an existing document keeps its own)";
  ASSERT_EQ(bk.rejected.size(), 1u);
  EXPECT_NE(bk.rejected[0].reason.find("no field 'site'"), std::string::npos);

  s.write_strategy = mg::WriteStrategy::Update;
  s.business_key.clear();
  s.id_strategy = mg::IdStrategy::Key;
  s.inserted_at_field = "created";
  s.updated_at_field = "modified";
  s.delete_on_tombstone = true;
  TestBatch u("t", 0,
              {TestRecord{.offset = 0, .payload = R"({"a": 1})", .key = "u1"},
               TestRecord{.offset = 1, .payload = std::nullopt, .key = "u1"}});
  auto up = encode(s, u, 1'800'000'000'000);
  ASSERT_EQ(up.ops.size(), 2u);
  EXPECT_EQ(up.ops[0].kind, mg::OpKind::Update);
  EXPECT_EQ(doc_json(up.ops[0].filter.get()), json::parse(R"({"_id": "u1"})"));
  EXPECT_EQ(doc_json(up.ops[0].doc.get()),
            json::parse(R"({"$set": {"a": 1, "modified": {"$date": "2027-01-15T08:00:00Z"}},
                            "$setOnInsert": {"created": {"$date": "2027-01-15T08:00:00Z"}}})"));
  EXPECT_EQ(up.ops[1].kind, mg::OpKind::Delete);
  EXPECT_EQ(doc_json(up.ops[1].filter.get()), json::parse(R"({"_id": "u1"})"));
}

TEST(MongoErrors, WhatEachCodeMeansForADocument) {
  using D = mg::DuplicateOn;
  auto item = [](int32_t code, D dup = D::None, bool insert = true) {
    return mg::classify_item(mg::WriteError{0, code, "", dup}, insert);
  };
  EXPECT_EQ(item(11000, D::Id), mg::ItemOutcome::Written) << "a replay of this _id";
  EXPECT_EQ(item(11000, D::Other), mg::ItemOutcome::Rejected) << "another unique index";
  EXPECT_EQ(item(11000, D::Unnamed), mg::ItemOutcome::Verify) << "FerretDB: looked up";
  EXPECT_EQ(item(11000, D::Id, false), mg::ItemOutcome::Retry) << "two upserts raced";
  EXPECT_EQ(item(11000, D::Other, false), mg::ItemOutcome::Rejected);
  for (int32_t c : {2, 121, 10334, 52, 66, 14, 17419}) EXPECT_EQ(item(c), mg::ItemOutcome::Rejected) << c;
  for (int32_t c : {10107, 91, 189, 11600, 64, 9001, 89, 6, 13436}) EXPECT_EQ(item(c), mg::ItemOutcome::Retry) << c;
  for (int32_t c : {13, 18}) EXPECT_EQ(item(c), mg::ItemOutcome::Fatal) << c;
  EXPECT_EQ(mg::classify_command(13, false), mg::ItemOutcome::Fatal);
  EXPECT_EQ(mg::classify_command(13, true), mg::ItemOutcome::Retry) << "the RetryableWriteError label wins";
  EXPECT_EQ(mg::classify_command(10107, false), mg::ItemOutcome::Retry);
}

TEST(MongoErrors, WhichIndexADuplicateKeyIsOnFromMongoDbsAndFerretDbsReplies) {
  using D = mg::DuplicateOn;
  auto pattern = mg::bson_from_json(R"({"_id": 1})").value();
  auto other = mg::bson_from_json(R"({"sku": 1})").value();
  EXPECT_EQ(mg::duplicate_on(11000, pattern.get(), "whatever"), D::Id);
  EXPECT_EQ(mg::duplicate_on(11000, other.get(), "whatever"), D::Other);
  EXPECT_EQ(mg::duplicate_on(11000, nullptr, "E11000 duplicate key error collection: db.c index: _id_ dup key: { _id: 1 }"), D::Id);
  EXPECT_EQ(mg::duplicate_on(11000, nullptr, "E11000 duplicate key error collection: db.c index: sku_1 dup key: { sku: 1 }"), D::Other);
  EXPECT_EQ(mg::duplicate_on(11000, nullptr, "E11000 duplicate key error collection: t.c"), D::Unnamed) << "FerretDB 1.24";
  EXPECT_EQ(mg::duplicate_on(2, nullptr, "index: _id_"), D::None);
}

TEST(MongoErrors, BulkReplyParts) {
  auto reply = mg::bson_from_json(R"({"nInserted": 2, "nUpserted": 1, "nMatched": 0, "nModified": 0, "nRemoved": 0,
      "writeErrors": [{"index": 1, "code": 11000, "errmsg": "E11000 duplicate key error collection: t.c",
                       "keyPattern": {"_id": 1}},
                      {"index": 3, "code": 2, "errmsg": "invalid key"}],
      "writeConcernErrors": [{"code": 64, "errmsg": "waiting for replication timed out"}],
      "errorLabels": ["RetryableWriteError"]})")
                   .value();
  const mg::BulkReply r = mg::parse_bulk_reply(*reply);
  EXPECT_EQ(r.inserted, 2);
  EXPECT_EQ(r.upserted, 1);
  ASSERT_EQ(r.write_errors.size(), 2u);
  EXPECT_EQ(r.write_errors[0].index, 1u);
  EXPECT_EQ(r.write_errors[0].code, 11000);
  EXPECT_EQ(r.write_errors[0].duplicate, mg::DuplicateOn::Id);
  EXPECT_EQ(r.write_errors[1].index, 3u);
  EXPECT_EQ(r.write_errors[1].message, "invalid key");
  EXPECT_EQ(r.write_errors[1].duplicate, mg::DuplicateOn::None);
  ASSERT_EQ(r.write_concern_errors.size(), 1u);
  EXPECT_EQ(r.write_concern_errors[0], "64: waiting for replication timed out");
  EXPECT_TRUE(r.retryable_label);
}

TEST(MongoNames, CollectionNamesFollowMongoDbsNamespaceRules) {
  EXPECT_EQ(mg::collection_name("shop.orders-eu", "db").value(), "shop.orders-eu");
  EXPECT_EQ(mg::collection_name("a$b\x01", "db").value(), "a_b_");
  EXPECT_EQ(mg::collection_name("system.users", "db").value(), "_system.users");
  EXPECT_EQ(mg::collection_name(".hidden", "db").value(), "_.hidden");
  EXPECT_EQ(mg::collection_name(mg::collection_name("a$b", "db").value(), "db").value(), "a_b") << "idempotent";
  EXPECT_FALSE(mg::collection_name("", "db"));
  EXPECT_EQ(mg::collection_name(std::string(235, 'x'), "db").value(), std::string(235, 'x'));
  const std::string cut = mg::collection_name(std::string(249, 'x'), "db").value();
  EXPECT_EQ(cut.size(), 235u) << "FerretDB's limit";
  EXPECT_EQ(mg::collection_name(cut, "db").value(), cut) << "idempotent";
  const std::string db(60, 'd');
  EXPECT_EQ(mg::collection_name(std::string(249, 'x'), db).value().size(), 255u - 61) << "MongoDB's namespace";
  EXPECT_NE(mg::collection_name(std::string(248, 'x') + "1", "db").value(),
            mg::collection_name(std::string(248, 'x') + "2", "db").value());
  EXPECT_EQ(mg::parse_index("a, b.c").value(), (std::vector<std::string>{"a", "b.c"}));
  EXPECT_FALSE(mg::parse_index("a,,b"));
  EXPECT_FALSE(mg::parse_index("$a"));
}

}  // namespace
