// The MongoDB sink's pure pieces, no server: documents (ids, metadata, payload layouts, dates,
// the 16 MiB limit), write operations per strategy, error codes and bulk replies, collection
// names.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "mongodb/config.h"
#include "mongodb/document.h"
#include "mongodb/errors.h"
#include "mongodb/json_to_bson.h"
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
              {TestRecord{.offset = 42,
                          .payload = R"({"_id": "theirs", "n": 1, "big": 9007199254740993, "s": "é"})",
                          .key = std::string("k\0\xff", 3),
                          .headers = {{"h", "v"}, {"h", "w"}, {"nul", std::nullopt}},
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

// The simdjson path (mongodb/json_to_bson.h) against libbson's own reader: the same bytes for
// every payload it takes, and the payloads it leaves to libbson are those libbson reads
// differently (Extended JSON) or refuses.
TEST(MongoDocument, PlainJsonBecomesTheSameBsonAsLibbsonReadsIt) {
  const std::vector<std::string> plain = {
      R"({})",
      R"({"a": 1, "b": -2147483648, "c": 2147483647, "d": 2147483648, "e": -2147483649})",
      R"({"big": 9223372036854775807, "small": -9223372036854775808, "z": -0})",
      R"({"f": 1.5, "g": -0.25, "h": 1e3, "i": 1E-7, "j": 0.0, "k": 123456789012345678901234.5})",
      R"({"t": true, "u": false, "n": null, "s": "", "esc": "\"\\\/\b\f\n\r\t\u00e9\ud83d\ude00"})",
      R"({"nested": {"x": [1, "two", {"three": [3.0, null, []]}, [], {}]}, "arr": [[[]]]})",
      R"({"dup": 1, "dup": "again", "": "empty key", "é": "ü", "pico_topic": "theirs"})",
      R"(  {"order_id": 7, "items": [{"sku": "A-1", "qty": 2, "price": 9.99}], "note": "a\u0001b"}  )",
  };
  for (const auto& json : plain) {
    bson_error_t error;
    mg::BsonPtr libbson(
        bson_new_from_json(reinterpret_cast<const uint8_t*>(json.data()), static_cast<ssize_t>(json.size()), &error));
    ASSERT_TRUE(libbson) << json << ": " << error.message;
    mg::BsonPtr fast = mg::new_bson();
    bool pico = false;
    ASSERT_TRUE(mg::append_plain_json_object(json, fast.get(), pico)) << json;
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(bson_get_data(fast.get())), fast->len),
              std::string(reinterpret_cast<const char*>(bson_get_data(libbson.get())), libbson->len))
        << json << "\n fast:    " << mg::to_json(*fast) << "\n libbson: " << mg::to_json(*libbson);
    EXPECT_EQ(pico, json.find("pico_topic") != std::string::npos) << json;
  }
  std::string deep = "1";
  for (int i = 0; i < 95; ++i) deep = "[" + std::move(deep) + "]";
  const std::vector<std::string> left_to_libbson = {
      R"({"id": {"$oid": "5f43a1b2c3d4e5f601234567"}})",  // Extended JSON
      R"({"at": {"$date": "2026-12-07T10:00:00Z"}})",
      R"({"$set": 1})",
      R"({"n": 18446744073709551615})",  // beyond int64: libbson's error
      R"({"zf": -0.0})",                 // simdjson versions differ on "-0": every -0.0 goes to libbson
      R"({"nul": "a\u0000b"})",
      R"({"a\u0000b": 1})",
      R"([1, 2])",  // not an object
      R"({"a": 1,})",
      "{\"deep\": " + deep + "}",
  };
  for (const auto& json : left_to_libbson) {
    mg::BsonPtr fast = mg::new_bson();
    bool pico = false;
    EXPECT_FALSE(mg::append_plain_json_object(json, fast.get(), pico)) << json;
  }
  // Through bson_from_json, the same documents as before: Extended JSON read as its types.
  auto oid = mg::bson_from_json(R"({"id": {"$oid": "5f43a1b2c3d4e5f601234567"}, "pico_key": 1})");
  ASSERT_TRUE(oid);
  bson_iter_t it;
  ASSERT_TRUE(bson_iter_init_find(&it, oid.value().get(), "id"));
  EXPECT_EQ(bson_iter_type(&it), BSON_TYPE_OID);
  bool pico = false;
  ASSERT_TRUE(mg::bson_from_json(R"({"pico_key": {"$numberLong": "5"}})", pico));
  EXPECT_TRUE(pico);
  EXPECT_NE(mg::bson_from_json(R"({"a": 1,})").error().find("not a BSON document: "), std::string::npos);
}

// docs/sinks/mongodb.md: a payload field named like a pico_* field wins over the metadata, one key
// per document — through simdjson's path and through libbson's (the $date sends the second there).
TEST(MongoDocument, APayloadFieldNamedLikeMetadataWinsOnBothPaths) {
  TestBatch b(
      "t", 2,
      {TestRecord{.offset = 5, .payload = R"({"pico_topic": "theirs", "pico_offset": 7, "n": 1})"},
       TestRecord{.offset = 6,
                  .payload = R"({"pico_topic": "theirs", "pico_offset": 7, "n": {"$date": "2026-01-01T00:00:00Z"}})"}});
  auto e = encode(settings(), b);
  ASSERT_EQ(e.ops.size(), 2u);
  for (const auto& op : e.ops) {
    const json d = doc_json(op.doc.get());
    EXPECT_EQ(d["pico_topic"], "theirs");
    EXPECT_EQ(d["pico_offset"], 7);
    EXPECT_EQ(d["pico_partition"], 2);
    size_t topics = 0;
    bson_iter_t it;
    bson_iter_init(&it, op.doc.get());
    while (bson_iter_next(&it))
      if (std::string_view(bson_iter_key(&it)) == "pico_topic") ++topics;
    EXPECT_EQ(topics, 1u) << mg::to_json(*op.doc);
  }
  EXPECT_EQ(doc_json(e.ops[1].doc.get())["n"], json::parse(R"({"$date": "2026-01-01T00:00:00Z"})"));
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
  EXPECT_EQ(doc_json(e.ops[0].doc.get()), json::parse(R"({"_id": "t:0:0", "at": {"$date": "2023-11-14T22:13:20.123Z"},
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
  EXPECT_NE(e.rejected[0].reason.find("over MongoDB's 16 MiB document limit"), std::string::npos)
      << e.rejected[0].reason;
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

TEST(MongoChangeEvents, KeysBecomeIdsOfTheirJsonTypeAndEachOpItsOperation) {
  mg::Settings s = settings();
  s.write_strategy = mg::WriteStrategy::Replace;
  s.id_strategy = mg::IdStrategy::Key;
  s.include_metadata = false;
  auto change = [](int64_t offset, pmq_change_op op, const std::optional<std::string>& key,
                   std::optional<std::string> row = std::nullopt) {
    return TestRecord{.offset = offset, .payload = std::move(row), .key = key, .op = op, .key_json = key};
  };
  TestBatch b("t", 0,
              {change(0, PMQ_OP_UPSERT, R"({"id":7})", R"({"_id": "theirs", "id": 7, "a": 1})"),
               change(1, PMQ_OP_UPSERT, R"({"id":9007199254740993})", R"({"a": 2})"),
               change(2, PMQ_OP_DELETE, R"({"order_id":1,"line":2})"), change(3, PMQ_OP_TRUNCATE, std::nullopt),
               change(4, PMQ_OP_PATCH, R"({"order_id":1,"line":2})", R"({"line": 2, "note": "x"})"),
               change(5, PMQ_OP_UPSERT, R"("scalar")", R"({"a": 3})"), change(6, PMQ_OP_DELETE, std::nullopt)});
  auto e = encode(s, b);
  ASSERT_EQ(e.ops.size(), 5u);
  ASSERT_EQ(e.rejected.size(), 2u);
  EXPECT_EQ(e.rejected[0].record, 5u);
  EXPECT_NE(e.rejected[0].reason.find("not a JSON object"), std::string::npos) << e.rejected[0].reason;
  EXPECT_EQ(e.rejected[1].record, 6u);
  EXPECT_NE(e.rejected[1].reason.find("no key"), std::string::npos) << e.rejected[1].reason;

  EXPECT_EQ(e.ops[0].kind, mg::OpKind::Replace);
  EXPECT_EQ(doc_json(e.ops[0].filter.get()), json::parse(R"({"_id": 7})"));
  EXPECT_EQ(doc_json(e.ops[0].doc.get()), json::parse(R"({"_id": 7, "id": 7, "a": 1})")) << "the row's _id yields";
  bson_iter_t it;
  ASSERT_TRUE(bson_iter_init_find(&it, e.ops[0].filter.get(), "_id"));
  EXPECT_EQ(bson_iter_type(&it), BSON_TYPE_INT32);
  ASSERT_TRUE(bson_iter_init_find(&it, e.ops[1].filter.get(), "_id"));
  EXPECT_EQ(bson_iter_type(&it), BSON_TYPE_INT64);
  EXPECT_EQ(bson_iter_int64(&it), 9007199254740993);

  EXPECT_EQ(e.ops[2].kind, mg::OpKind::Delete);
  EXPECT_EQ(doc_json(e.ops[2].filter.get()), json::parse(R"({"_id": {"order_id": 1, "line": 2}})"));
  EXPECT_FALSE(e.ops[2].doc);
  EXPECT_EQ(e.ops[3].kind, mg::OpKind::DeleteAll);
  EXPECT_EQ(doc_json(e.ops[3].filter.get()), json::object());
  EXPECT_EQ(e.ops[4].kind, mg::OpKind::Update);
  EXPECT_EQ(doc_json(e.ops[4].doc.get()),
            json::parse(R"({"$set": {"line": 2, "note": "x"}, "$setOnInsert": {"order_id": 1}})"))
      << "the key's fields the patch does not name, on insert only";
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
  EXPECT_EQ(
      mg::duplicate_on(11000, nullptr, "E11000 duplicate key error collection: db.c index: _id_ dup key: { _id: 1 }"),
      D::Id);
  EXPECT_EQ(
      mg::duplicate_on(11000, nullptr, "E11000 duplicate key error collection: db.c index: sku_1 dup key: { sku: 1 }"),
      D::Other);
  EXPECT_EQ(mg::duplicate_on(11000, nullptr, "E11000 duplicate key error collection: t.c"), D::Unnamed)
      << "FerretDB 1.24";
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

// judge_attempt on replies in the shapes MongoDB documents for bulk writes and command errors
// (the server's reply as libmongoc passes it on; FerretDB here has no replica set, so write
// concern errors, NotWritablePrimary and RetryableWriteError labels cannot be produced for real).
namespace {

mg::BulkAttempt attempt(const std::string& reply_json, bool executed, uint32_t server_code = 0) {
  mg::BulkAttempt a;
  a.executed = executed;
  a.reply = mg::parse_bulk_reply(*mg::bson_from_json(reply_json).value());
  if (!executed && server_code) {
    a.server_error = true;
    a.error_domain = 17;  // MONGOC_ERROR_SERVER
    a.error_code = server_code;
    // libmongoc's message is the server's errmsg (of the command, or of the first writeError).
    const json j = json::parse(reply_json);
    a.error = j.contains("errmsg")        ? j["errmsg"].get<std::string>()
              : j.contains("writeErrors") ? j["writeErrors"][0]["errmsg"].get<std::string>()
                                          : "server error";
  }
  return a;
}

const mg::IdLookup no_lookup = [](const std::vector<size_t>&, std::string& error) -> std::optional<std::vector<bool>> {
  error = "not expected";
  ADD_FAILURE() << "no id lookup expected";
  return std::nullopt;
};

std::string states(const mg::AttemptVerdict& v) {  // "DDRP": Done, Rejected, Pending per operation
  std::string out;
  for (auto s : v.state) out += s == mg::OpState::Done ? 'D' : s == mg::OpState::Rejected ? 'R' : 'P';
  return out;
}

}  // namespace

TEST(MongoAttempts, UnorderedInsertsDuplicatesOnIdAreWrittenRefusedDocumentsRejectedTheRestWritten) {
  // MongoDB 7.0: an unordered insert of 5 with a replayed _id and a validator refusal.
  auto a = attempt(R"({"nInserted": 3, "writeErrors": [
      {"index": 1, "code": 11000, "errmsg": "E11000 duplicate key error collection: db.c index: _id_ dup key: { _id: \"t:0:1\" }",
       "keyPattern": {"_id": 1}, "keyValue": {"_id": "t:0:1"}},
      {"index": 3, "code": 121, "errmsg": "Document failed validation", "errInfo": {"failingDocumentId": "t:0:3"}}]})",
                   false, 11000);
  const auto v = mg::judge_attempt(a, std::vector<bool>(5, true), false, "c", no_lookup);
  EXPECT_EQ(states(v), "DDDRD");
  EXPECT_EQ(v.already_written, 1u);
  EXPECT_TRUE(v.retry.empty()) << v.retry;
  EXPECT_TRUE(v.fatal.empty());
  EXPECT_EQ(v.reasons[3], "MongoDB refused the document (error 121): Document failed validation");
  for (int32_t code : {2, 10334}) {
    auto b = attempt(R"({"nInserted": 1, "writeErrors": [{"index": 0, "code": )" + std::to_string(code) +
                         R"(, "errmsg": "refused"}]})",
                     false, static_cast<uint32_t>(code));
    EXPECT_EQ(states(mg::judge_attempt(b, {true, true}, false, "c", no_lookup)), "RD") << code;
  }
}

TEST(MongoAttempts, AWriteConcernErrorResendsEveryOperationWithoutAWriteError) {
  // writeConcernErrors: applied on the primary, not acknowledged by the write concern.
  auto a = attempt(R"({"nInserted": 3, "writeConcernErrors": [{"code": 64, "codeName": "WriteConcernFailed",
      "errmsg": "waiting for replication timed out", "errInfo": {"wtimeout": true}}]})",
                   false);
  a.error_domain = 24;  // MONGOC_ERROR_WRITE_CONCERN
  a.error_code = 64;
  auto v = mg::judge_attempt(a, std::vector<bool>(3, true), false, "c", no_lookup);
  EXPECT_EQ(states(v), "PPP") << "resent: they answer 11000 if they landed";
  EXPECT_NE(v.retry.find("write concern error 64: waiting for replication timed out"), std::string::npos) << v.retry;
  // With a refused document among them: that one is settled, the others resent.
  auto b = attempt(R"({"nInserted": 2, "writeErrors": [{"index": 1, "code": 2, "errmsg": "bad"}],
      "writeConcernErrors": [{"code": 100, "codeName": "UnsatisfiableWriteConcern", "errmsg": "Not enough data-bearing nodes"}]})",
                   false, 2);
  v = mg::judge_attempt(b, std::vector<bool>(3, true), false, "c", no_lookup);
  EXPECT_EQ(states(v), "PRP");
  EXPECT_FALSE(v.retry.empty());
  // Ordered (upserts): everything from the start again, none is known acknowledged.
  v = mg::judge_attempt(a, std::vector<bool>(3, false), true, "c", no_lookup);
  EXPECT_EQ(states(v), "PPP");
  EXPECT_EQ(v.resume, 0u);
}

TEST(MongoAttempts, NotWritablePrimaryAndRetryableWriteErrorLabelsResendTheUnacknowledgedPart) {
  // A command error of the whole bulk (a step-down): no writeErrors, the label set.
  auto a = attempt(R"({"ok": 0, "errmsg": "not primary", "code": 10107, "codeName": "NotWritablePrimary",
      "errorLabels": ["RetryableWriteError"]})",
                   false, 10107);
  auto v = mg::judge_attempt(a, std::vector<bool>(4, true), false, "c", no_lookup);
  EXPECT_EQ(states(v), "PPPP");
  EXPECT_NE(v.retry.find("not primary"), std::string::npos) << v.retry;
  EXPECT_TRUE(v.fatal.empty());
  // The label decides for a code that would otherwise stop the sink.
  auto b =
      attempt(R"({"ok": 0, "errmsg": "interrupted", "code": 13, "errorLabels": ["RetryableWriteError"]})", false, 13);
  EXPECT_FALSE(mg::judge_attempt(b, {true}, false, "c", no_lookup).retry.empty());
  auto c = attempt(
      R"({"ok": 0, "errmsg": "not authorized on db to execute command", "code": 13, "codeName": "Unauthorized"})",
      false, 13);
  v = mg::judge_attempt(c, {true}, false, "c", no_lookup);
  EXPECT_NE(v.fatal.find("not authorized"), std::string::npos) << v.fatal;
  // A per-document NotWritablePrimary (the primary stepped down mid-batch, unordered): only
  // that document again, the others are written.
  auto d = attempt(R"({"nInserted": 2, "writeErrors": [{"index": 2, "code": 10107, "errmsg": "not primary"}]})", false,
                   10107);
  v = mg::judge_attempt(d, std::vector<bool>(3, true), false, "c", no_lookup);
  EXPECT_EQ(states(v), "DDP");
  EXPECT_FALSE(v.retry.empty());
  // A network error (no reply at all).
  mg::BulkAttempt net;
  net.error_domain = 2;  // MONGOC_ERROR_STREAM
  net.error_code = 4;
  net.error = "Failed to read 4 bytes: socket error or timeout";
  v = mg::judge_attempt(net, std::vector<bool>(2, true), false, "c", no_lookup);
  EXPECT_EQ(states(v), "PP");
  EXPECT_NE(v.retry.find("socket error"), std::string::npos);
  mg::BulkAttempt auth = net;
  auth.auth_error = true;
  EXPECT_FALSE(mg::judge_attempt(auth, {true}, false, "c", no_lookup).fatal.empty());
}

TEST(MongoAttempts, OrderedWritesStopAtTheFirstErrorAndResumeAfterARefusalOrAtARetry) {
  auto refused =
      attempt(R"({"nUpserted": 2, "writeErrors": [{"index": 2, "code": 66, "errmsg": "immutable _id"}]})", false, 66);
  auto v = mg::judge_attempt(refused, std::vector<bool>(5, false), true, "c", no_lookup);
  EXPECT_EQ(states(v), "DDRPP") << "3 and 4 were not run: sent again at once";
  EXPECT_EQ(v.resume, 3u);
  EXPECT_TRUE(v.retry.empty());
  auto shutdown =
      attempt(R"({"nUpserted": 1, "writeErrors": [{"index": 1, "code": 91, "errmsg": "shutting down"}]})", false, 91);
  v = mg::judge_attempt(shutdown, std::vector<bool>(3, false), true, "c", no_lookup);
  EXPECT_EQ(states(v), "DPP");
  EXPECT_EQ(v.resume, 1u);
  EXPECT_FALSE(v.retry.empty());
  auto ok = attempt(R"({"nUpserted": 3})", true);
  v = mg::judge_attempt(ok, std::vector<bool>(3, false), true, "c", no_lookup);
  EXPECT_EQ(states(v), "DDD");
  EXPECT_EQ(v.resume, 3u);
}

TEST(MongoAttempts, FerretDbsUnnamedDuplicatesAreLookedUpAndAnIndexOutOfRangeIsNotTrusted) {
  auto a = attempt(R"({"nInserted": 1, "writeErrors": [
      {"index": 0, "code": 11000, "errmsg": "E11000 duplicate key error collection: db.c"},
      {"index": 2, "code": 11000, "errmsg": "E11000 duplicate key error collection: db.c"}]})",
                   false, 11000);
  std::vector<size_t> asked;
  auto v = mg::judge_attempt(a, std::vector<bool>(3, true), false, "c",
                             [&](const std::vector<size_t>& at, std::string&) -> std::optional<std::vector<bool>> {
                               asked = at;
                               return std::vector<bool>{true, false};
                             });
  EXPECT_EQ(asked, (std::vector<size_t>{0, 2}));
  EXPECT_TRUE(v.looked_up);
  EXPECT_EQ(states(v), "DDR") << "0 is there (a replay), 2 conflicts on another unique index";
  EXPECT_EQ(v.already_written, 1u);
  v = mg::judge_attempt(a, std::vector<bool>(3, true), false, "c",
                        [](const std::vector<size_t>&, std::string& e) -> std::optional<std::vector<bool>> {
                          e = "connection refused";
                          return std::nullopt;
                        });
  EXPECT_EQ(states(v), "PDP");
  EXPECT_NE(v.retry.find("connection refused"), std::string::npos);
  auto bad = attempt(R"({"writeErrors": [{"index": 7, "code": 2, "errmsg": "?"}]})", false, 2);
  v = mg::judge_attempt(bad, std::vector<bool>(2, true), false, "c", no_lookup);
  EXPECT_EQ(states(v), "PP");
  EXPECT_NE(v.retry.find("out of range"), std::string::npos);
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
