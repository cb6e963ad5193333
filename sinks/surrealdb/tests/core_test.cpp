// The SurrealDB sink's pure pieces: table identifiers, statements, CBOR bodies, the answers'
// statuses and their classes, and what each record becomes.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "picomq/kit/testing/fake_host.hpp"
#include "surrealdb/config.h"
#include "surrealdb/rpc.h"

namespace sr = picomq::surrealdb;
namespace kt = picomq::kit::testing;
using nlohmann::json;

namespace {

json cbor(const std::string& bytes) { return json::from_cbor(bytes); }

TEST(SurrealCore, TableIdentifiersAreSafeBetweenBackticksAndIdempotent) {
  EXPECT_EQ(sr::table_identifier("shop.orders-eu"), "shop_orders_eu");
  EXPECT_EQ(sr::table_identifier("weird topic;x`"), "weird_topic_x_");
  EXPECT_EQ(sr::table_identifier("2024"), "t2024");
  EXPECT_EQ(sr::table_identifier("caf\xc3\xa9"), "caf_") << "a multi-byte character is one '_'";
  const std::string long_name(200, 'a');
  const std::string cut = sr::table_identifier(long_name);
  EXPECT_LE(cut.size(), 63u);
  EXPECT_NE(cut, sr::table_identifier(std::string(199, 'a') + "b")) << "names differing past the cut stay apart";
  for (const std::string& n : std::vector<std::string>{"shop.orders-eu", "2024", long_name}) {
    const std::string once = sr::table_identifier(n);
    EXPECT_EQ(sr::table_identifier(once), once);
    for (char c : once) EXPECT_TRUE(std::isalnum(static_cast<unsigned char>(c)) || c == '_') << once;
  }
}

TEST(SurrealCore, StatementsBindEverythingAndPerItemStatementsIndexTheItems) {
  const std::string insert = sr::statement_text(sr::Shape::Insert, sr::Mode::Insert, 3, false);
  EXPECT_EQ(insert, "INSERT IGNORE INTO $tb $v RETURN NONE");
  const std::string each = sr::statement_text(sr::Shape::Insert, sr::Mode::Insert, 2, true);
  EXPECT_EQ(each, "INSERT IGNORE INTO $tb [$v[0]] RETURN NONE;INSERT IGNORE INTO $tb [$v[1]] RETURN NONE;");
  const std::string ops = sr::statement_text(sr::Shape::Ops, sr::Mode::Upsert, 2, false);
  EXPECT_NE(ops.find("UPSERT type::record($tb, $o[0]) CONTENT $o[1]"), std::string::npos);
  EXPECT_NE(ops.find("DELETE type::record($tb, $o[0])"), std::string::npos);
}

TEST(SurrealCore, TheBodyIsACborQueryWithTheItemsAsAVariable) {
  std::vector<std::string> items;
  for (int i = 0; i < 30; ++i) {
    std::string b;
    json::to_cbor(json{{"i", i}}, b);
    items.push_back(b);
  }
  const json body = cbor(sr::rpc_body(7, "INSERT IGNORE INTO $tb $v RETURN NONE", "orders", items, 2, 25));
  EXPECT_EQ(body["id"], 7);
  EXPECT_EQ(body["method"], "query");
  EXPECT_EQ(body["params"][0], "INSERT IGNORE INTO $tb $v RETURN NONE");
  EXPECT_EQ(body["params"][1]["tb"], "orders");
  ASSERT_EQ(body["params"][1]["v"].size(), 25u);
  EXPECT_EQ(body["params"][1]["v"][0]["i"], 2);
  EXPECT_EQ(body["params"][1]["v"][24]["i"], 26);
  EXPECT_EQ(cbor(sr::rpc_body(1, "x", "t", items, 0, 0))["params"][1]["v"], json::array());
}

TEST(SurrealCore, AnswersAreReadPerStatementAndClassified) {
  std::string body;
  json::to_cbor(
      json{{"id", 1},
           {"result",
            json::array({json{{"status", "OK"}, {"result", json::array()}},
                         json{{"status", "ERR"}, {"kind", "Internal"}, {"result", "Couldn't coerce value"}}})}},
      body);
  auto r = sr::parse_rpc_response(body);
  ASSERT_TRUE(r);
  ASSERT_EQ(r.value().statements.size(), 2u);
  EXPECT_TRUE(r.value().statements[0].ok);
  EXPECT_FALSE(r.value().statements[1].ok);
  EXPECT_EQ(r.value().statements[1].kind, "Internal");
  EXPECT_EQ(sr::classify_error(r.value().statements[1]), sr::ErrorClass::Record);
  body.clear();
  json::to_cbor(json{{"id", 1}, {"error", {{"code", -32000}, {"kind", "Validation"}, {"message", "Parse error"}}}},
                body);
  auto e = sr::parse_rpc_response(body);
  ASSERT_TRUE(e);
  EXPECT_EQ(e.value().error, "Validation: Parse error");
  EXPECT_FALSE(sr::parse_rpc_response("not cbor"));
  using C = sr::ErrorClass;
  EXPECT_EQ(sr::classify_error({false, "AlreadyExists", "Database record `t:a` already exists"}), C::AlreadyThere);
  EXPECT_EQ(
      sr::classify_error({false, "Internal", "Transaction conflict: Resource busy. This transaction can be retried"}),
      C::Retry);
  EXPECT_EQ(sr::classify_error({false, "Internal", "The query was not executed because it exceeded the timeout"}),
            C::Retry);
  EXPECT_EQ(sr::classify_error({false, "NotFound", "The namespace 'x' does not exist"}), C::Fatal);
  EXPECT_EQ(sr::classify_error({false, "NotFound", "The table 'x' does not exist"}), C::TableGone);
  EXPECT_EQ(sr::classify_error({false, "NotAllowed", "Not enough permissions to perform this action"}), C::Fatal);
  EXPECT_EQ(sr::classify_error({false, "Internal", "Found 'x' for field `v`, with record `t:1`, but expected a int"}),
            C::Record);
}

sr::Settings settings(sr::Mode mode, sr::IdMode id, sr::Tombstones t = sr::Tombstones::Skip) {
  sr::Settings s;
  s.mode = mode;
  s.id = id;
  s.tombstones = t;
  return s;
}

TEST(SurrealCore, EachRecordBecomesAnItemWithItsIdOrIsRefused) {
  kt::TestBatch b("shop.orders", 2,
                  {kt::TestRecord{.offset = 5, .payload = R"({"id": 9, "v": "t:0:1"})", .key = "k:1"},
                   kt::TestRecord{.offset = 6, .payload = std::nullopt, .key = "k:2"},
                   kt::TestRecord{.offset = 7, .payload = R"({"v": 2})"}});
  {
    const sr::Encoder e(settings(sr::Mode::Insert, sr::IdMode::Record));
    const auto p = e.plan(b.raw());
    EXPECT_EQ(e.shape(p), sr::Shape::Insert);
    ASSERT_EQ(p.items.size(), 2u);
    EXPECT_EQ(p.skipped, 1u);
    const json first = cbor(p.items[0].cbor);
    EXPECT_EQ(first["id"], json::parse(R"(["shop.orders", 2, 5])"));
    EXPECT_EQ(first["pico_payload_id"], 9);
    EXPECT_EQ(first["v"], "t:0:1");
    EXPECT_EQ(first["pico_offset"], 5);
  }
  {
    const sr::Encoder e(settings(sr::Mode::Upsert, sr::IdMode::Key, sr::Tombstones::Delete));
    const auto p = e.plan(b.raw());
    EXPECT_EQ(e.shape(p), sr::Shape::Ops);
    ASSERT_EQ(p.items.size(), 2u);
    ASSERT_EQ(p.refused.size(), 1u);
    EXPECT_EQ(p.refused[0].first, 2u);
    const json first = cbor(p.items[0].cbor);
    EXPECT_EQ(first[0], "k:1");
    EXPECT_FALSE(first[1].contains("id"));
    EXPECT_EQ(cbor(p.items[1].cbor), json::parse(R"(["k:2", null])"));
    EXPECT_TRUE(p.items[1].remove);
  }
}

TEST(SurrealCore, AnIntegerBeyondInt64IsRefusedNotWrapped) {
  kt::TestBatch b("t", 0,
                  {kt::TestRecord{.offset = 0, .payload = R"({"a": 9223372036854775807})"},
                   kt::TestRecord{.offset = 1, .payload = R"({"a": {"b": [18446744073709551615]}})"},
                   kt::TestRecord{.offset = 2, .payload = R"({"a": -9223372036854775808})"}});
  const sr::Encoder e(settings(sr::Mode::Insert, sr::IdMode::Record));
  const auto p = e.plan(b.raw());
  ASSERT_EQ(p.refused.size(), 1u);
  EXPECT_EQ(p.refused[0].first, 1u);
  EXPECT_NE(p.refused[0].second.find("64-bit signed"), std::string::npos);
  ASSERT_EQ(p.items.size(), 2u);
  EXPECT_EQ(cbor(p.items[0].cbor)["a"], INT64_MAX);
}

TEST(SurrealCore, AChangeKeyIsItsValueOrTheArrayOfItsValuesInKeyOrder) {
  EXPECT_EQ(sr::change_record_id(R"({"id":7})").value(), 7);
  EXPECT_EQ(sr::change_record_id(R"({"sku":"a-1"})").value(), "a-1");
  EXPECT_EQ(sr::change_record_id(R"({"order_id":1,"line":2})").value(), nlohmann::ordered_json::parse("[1,2]"))
      << "the key's own order, not the names' (line < order_id)";
  EXPECT_EQ(sr::change_record_id(R"({"x":1.5})").value(), nlohmann::ordered_json::parse("[1.5]"));
  EXPECT_EQ(sr::change_record_id("").error(), "the change event has no key");
  EXPECT_NE(sr::change_record_id("[1]").error().find("not a JSON object"), std::string::npos);
  EXPECT_NE(sr::change_record_id(R"({"id":null})").error().find("'id' is null"), std::string::npos);
  EXPECT_NE(sr::change_record_id(R"({"id":18446744073709551615})").error().find("64-bit"), std::string::npos);
}

TEST(SurrealCore, ChangesAreOpIdContentTriplesInOneForStatement) {
  sr::Settings s;
  s.document = picomq::kit::JsonLayout::Flat;
  const kt::TestBatch b("t", 0,
                        {{.offset = 0, .payload = R"({"id":1,"v":1})", .op = PMQ_OP_UPSERT, .key_json = R"({"id":1})"},
                         {.offset = 1, .payload = R"({"v":2})", .op = PMQ_OP_PATCH, .key_json = R"({"id":1})"},
                         {.offset = 2, .payload = std::nullopt, .op = PMQ_OP_DELETE, .key_json = R"({"a":"x","b":2})"},
                         {.offset = 3, .op = PMQ_OP_TRUNCATE},
                         {.offset = 4, .payload = std::nullopt, .op = PMQ_OP_DELETE, .key_json = "{}"}});
  sr::Encoder encoder(s);
  const sr::ItemPlan p = encoder.plan(b.raw());
  EXPECT_EQ(encoder.shape(p), sr::Shape::Changes);
  ASSERT_EQ(p.items.size(), 4u);
  ASSERT_EQ(p.refused.size(), 1u);
  EXPECT_EQ(p.refused[0].first, 4u);
  const json upsert = cbor(p.items[0].cbor);
  EXPECT_EQ(upsert[0], "u");
  EXPECT_EQ(upsert[1], 1);
  EXPECT_EQ(upsert[2]["v"], 1);
  EXPECT_EQ(upsert[2]["pico_payload_id"], 1) << "the row's id: the record id is the key";
  EXPECT_FALSE(upsert[2].contains("id"));
  EXPECT_EQ(upsert[2]["pico_op"], "upsert");
  EXPECT_EQ(cbor(p.items[1].cbor)[0], "p");
  EXPECT_EQ(cbor(p.items[2].cbor), json::parse(R"(["d", ["x", 2], null])"));
  EXPECT_EQ(cbor(p.items[3].cbor), json::parse(R"(["t", null, null])"));
  EXPECT_EQ(sr::statement_text(sr::Shape::Changes, sr::Mode::Insert, 4, false),
            "FOR $o IN $v { IF $o[0] == 'd' { DELETE type::record($tb, $o[1]) RETURN NONE } ELSE IF $o[0] == 't' "
            "{ DELETE type::table($tb) RETURN NONE } ELSE IF $o[0] == 'p' { LET $r = type::record($tb, $o[1]); "
            "UPSERT $r CONTENT object::extend($r.* ?? {}, $o[2]) RETURN NONE } ELSE { UPSERT type::record($tb, "
            "$o[1]) CONTENT $o[2] RETURN NONE } }");
  EXPECT_NE(sr::statement_text(sr::Shape::Changes, sr::Mode::Insert, 2, true).find("FOR $o IN [$v[1]]"),
            std::string::npos);
}

}  // namespace
