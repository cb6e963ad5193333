// The Meilisearch sink's pure pieces, without a server: index uids, which record becomes which
// operation with which id (and what is refused before sending), the body text of each item, and
// the reading of Meilisearch's answers (bodies as its API reference gives them).
#include <gtest/gtest.h>

#include "meilisearch/config.h"
#include "meilisearch/documents.h"
#include "meilisearch/tasks.h"
#include "picomq/kit/record_id.hpp"
#include "picomq/kit/testing/fake_host.hpp"

namespace picomq::meilisearch {
namespace {

using kit::testing::TestBatch;

std::string rendered(const Settings& s, const TestBatch& b) {
  const DocumentPlan plan = plan_documents(s, b.raw());
  kit::RecordJsonOptions o;
  o.layout = s.document;
  kit::RecordJsonWriter writer(o);
  const kit::BatchJsonWriter json = writer.begin(b.raw());
  std::string out;
  for (const Item& item : plan.items) render_item(out, item, json, b.raw(), s.primary_key);
  return out;
}

Settings payload_documents() {
  Settings s;
  s.primary_key = "pico_id";
  s.document = kit::JsonLayout::PayloadOnly;
  return s;
}

TEST(MeilisearchIndexUid, EveryByteOutsideTheAlphabetBecomesAnUnderscoreAndLongNamesAreCut) {
  EXPECT_EQ(index_uid("shop.orders"), "shop_orders");
  EXPECT_EQ(index_uid("a-b_C9"), "a-b_C9");
  EXPECT_EQ(index_uid("caf\xc3\xa9"), "caf__");
  EXPECT_EQ(index_uid(""), "_");
  const std::string cut = index_uid(std::string(1000, 'x'));
  EXPECT_LE(cut.size(), kMaxIndexUidBytes);
  EXPECT_NE(cut, index_uid(std::string(999, 'x'))) << "a hash suffix keeps cut names apart";
}

TEST(MeilisearchDocuments, RecordIdsGoFirstAsThePrimaryKeyField) {
  const auto b = TestBatch::json("shop.orders", 2, 41, {R"({"a":1})", R"(  { } )"});
  EXPECT_EQ(rendered(payload_documents(), b),
            "{\"pico_id\":\"shop_2Eorders-2-41\",\"a\":1}\n  {\"pico_id\":\"shop_2Eorders-2-42\" } \n");
}

TEST(MeilisearchDocuments, KeyIdsAreEncodedAndARecordWithoutAKeyIsRefused) {
  Settings s = payload_documents();
  s.id = IdMode::Key;
  const TestBatch b("t", 0, {{.offset = 0, .payload = R"({"a":1})", .key = "user/7"}, {.offset = 1, .payload = "{}"}});
  const DocumentPlan plan = plan_documents(s, b.raw());
  ASSERT_EQ(plan.items.size(), 1u);
  EXPECT_EQ(plan.items[0].record, 0u);
  EXPECT_EQ(plan.items[0].id, "user_2F7");
  ASSERT_EQ(plan.refused.size(), 1u);
  EXPECT_EQ(plan.refused[0].first, 1u);
  EXPECT_EQ(plan.refused[0].second, "id = \"key\": the record has no key");

  const TestBatch long_key("t", 0, {{.offset = 0, .payload = "{}", .key = std::string(600, 'k')}});
  const DocumentPlan refused = plan_documents(s, long_key.raw());
  ASSERT_EQ(refused.refused.size(), 1u);
  EXPECT_NE(refused.refused[0].second.find("more than Meilisearch's 511"), std::string::npos);
}

TEST(MeilisearchDocuments, FieldIdsLeaveTheDocumentAsItIs) {
  Settings s = payload_documents();
  s.id = IdMode::Field;
  s.primary_key = "sku";
  const auto b = TestBatch::json("t", 0, 0, {R"({"sku":"A-1","n":2})"});
  EXPECT_EQ(rendered(s, b), "{\"sku\":\"A-1\",\"n\":2}\n");
}

TEST(MeilisearchDocuments, TombstonesAreSkippedOrDeletedByKeyAsAJsonString) {
  Settings s = payload_documents();
  s.id = IdMode::Key;
  const TestBatch b("t", 0,
                    {{.offset = 0, .payload = std::nullopt, .key = "k1"}, {.offset = 1, .payload = "{}", .key = "k2"}});
  const DocumentPlan skipped = plan_documents(s, b.raw());
  EXPECT_EQ(skipped.skipped_tombstones, 1u);
  ASSERT_EQ(skipped.items.size(), 1u);
  EXPECT_EQ(skipped.items[0].op, Op::Write);

  s.tombstones = Tombstones::Delete;
  const DocumentPlan plan = plan_documents(s, b.raw());
  ASSERT_EQ(plan.items.size(), 2u);
  EXPECT_EQ(plan.items[0].op, Op::Delete);
  kit::RecordJsonWriter writer{kit::RecordJsonOptions{}};
  const kit::BatchJsonWriter json = writer.begin(b.raw());
  std::string out;
  render_item(out, plan.items[0], json, b.raw(), s.primary_key);
  EXPECT_EQ(out, "\"k1\"");
}

TEST(MeilisearchDocuments, APayloadThatIsNoObjectIsRefusedUnderDocumentPayload) {
  const auto b = TestBatch::json("t", 0, 0, {"[1,2]", R"({"ok":true})"});
  const DocumentPlan plan = plan_documents(payload_documents(), b.raw());
  ASSERT_EQ(plan.refused.size(), 1u);
  EXPECT_EQ(plan.refused[0].first, 0u);
  ASSERT_EQ(plan.items.size(), 1u);
  EXPECT_EQ(plan.items[0].record, 1u);
}

TEST(MeilisearchAnswers, TaskUidsErrorsAndStates) {
  // POST /indexes/{uid}/documents -> 202 (Meilisearch's "Summarized task object").
  EXPECT_EQ(task_uid(R"({"taskUid":147,"indexUid":"movies","status":"enqueued","type":"documentAdditionOrUpdate",)"
                     R"("enqueuedAt":"2024-08-08T17:05:55.791772Z"})"),
            147u);
  EXPECT_EQ(task_uid(R"({"status":"enqueued"})"), std::nullopt);
  EXPECT_EQ(task_uid("not json"), std::nullopt);

  const TaskError e = error_of(R"({"message":"Index `x` not found.","code":"index_not_found","type":"invalid_request",)"
                               R"("link":"https://docs.meilisearch.com/errors#index_not_found"})");
  EXPECT_EQ(e.code, "index_not_found");
  EXPECT_EQ(e.type, "invalid_request");
  EXPECT_EQ(e.message, "Index `x` not found.");
  EXPECT_EQ(error_of("<html>").code, "");

  const TaskState processing = task_state(R"({"uid":4,"status":"processing","error":null})");
  EXPECT_EQ(processing.status, "processing");
  EXPECT_FALSE(processing.finished());
  EXPECT_FALSE(task_state("").finished()) << "an unreadable answer is asked again";
  const TaskState failed = task_state(
      R"({"uid":5,"status":"failed","error":{"message":"Document identifier `a b` is invalid.",)"
      R"("code":"invalid_document_id","type":"invalid_request","link":"https://docs.meilisearch.com/errors#invalid_document_id"}})");
  EXPECT_TRUE(failed.finished());
  EXPECT_EQ(failed.error.code, "invalid_document_id");

  EXPECT_EQ(index_primary_key(R"({"uid":"movies","primaryKey":"id"})"), "id");
  EXPECT_EQ(index_primary_key(R"({"uid":"movies","primaryKey":null})"), std::nullopt);
}

TEST(MeilisearchAnswers, AFinishedTasksVerdict) {
  auto state = [](std::string status, std::string code = "", std::string type = "") {
    return TaskState{std::move(status), {std::move(code), std::move(type), "m"}};
  };
  EXPECT_EQ(verdict(state("succeeded")), TaskVerdict::Written);
  EXPECT_EQ(verdict(state("canceled")), TaskVerdict::Canceled);
  EXPECT_EQ(verdict(state("failed", "invalid_document_id", "invalid_request")), TaskVerdict::Bisect);
  EXPECT_EQ(verdict(state("failed", "missing_document_id", "invalid_request")), TaskVerdict::Bisect);
  EXPECT_EQ(verdict(state("failed", "internal", "internal")), TaskVerdict::Resend);
  EXPECT_EQ(verdict(state("failed", "no_space_left_on_device", "system")), TaskVerdict::Resend);
  EXPECT_EQ(verdict(state("failed", "index_not_found", "invalid_request")), TaskVerdict::IndexGone);
  EXPECT_EQ(verdict(state("failed", "invalid_settings_filterable_attributes", "invalid_request")), TaskVerdict::Fatal);
}

TEST(MeilisearchChanges, AOneFieldKeyIsItsValueAndACompositeKeyItsCompactJsonBothEncoded) {
  EXPECT_EQ(change_document_id(R"({"id":7})").value(), "7");
  EXPECT_EQ(change_document_id(R"({"id": "a-1"})").value(), "a-1");
  EXPECT_EQ(change_document_id(R"({"id":"a_1"})").value(), "a_5F1") << "'_' is escaped: the encoding stays reversible";
  EXPECT_EQ(change_document_id(R"({"sku":"x.y/z"})").value(), "x_2Ey_2Fz");
  EXPECT_EQ(change_document_id(R"({"n":-1.5})").value(), "-1_2E5");
  EXPECT_EQ(change_document_id(R"({"order_id": 1, "line": 2})").value(), "_7B_22order_5Fid_22_3A1_2C_22line_22_3A2_7D");
  EXPECT_EQ(kit::from_url_safe(change_document_id(R"({"order_id":1,"line":2})").value()),
            std::optional<std::string>(R"({"order_id":1,"line":2})"));
  EXPECT_EQ(change_document_id("").error(), "the change event has no key");
  EXPECT_NE(change_document_id("[1]").error().find("not a JSON object with fields"), std::string::npos);
  EXPECT_NE(change_document_id("{}").error().find("not a JSON object with fields"), std::string::npos);
  EXPECT_NE(change_document_id(R"({"id":""})").error().find("empty document id"), std::string::npos);
  EXPECT_NE(
      change_document_id("{\"id\":\"" + std::string(300, '.') + "\"}").error().find("more than Meilisearch's 511"),
      std::string::npos);
}

TEST(MeilisearchChanges, EachOperationIsAnItemInRecordOrderAndAKeyThatDoesNotFitIsRefused) {
  Settings s = payload_documents();
  s.changes = true;
  const TestBatch b("t", 0,
                    {{.offset = 0, .payload = R"({"id":1,"v":1})", .op = PMQ_OP_UPSERT, .key_json = R"({"id":1})"},
                     {.offset = 1, .payload = R"({"v":2})", .op = PMQ_OP_PATCH, .key_json = R"({"id":1})"},
                     {.offset = 2, .op = PMQ_OP_TRUNCATE},
                     {.offset = 3, .payload = std::nullopt, .op = PMQ_OP_DELETE, .key_json = R"({"id":"a.b"})"},
                     {.offset = 4, .payload = std::nullopt, .op = PMQ_OP_DELETE, .key_json = "{}"}});
  const DocumentPlan plan = plan_documents(s, b.raw());
  ASSERT_EQ(plan.items.size(), 4u);
  EXPECT_EQ(plan.items[0].op, Op::Write);
  EXPECT_EQ(plan.items[1].op, Op::Patch);
  EXPECT_EQ(plan.items[2].op, Op::Truncate);
  EXPECT_EQ(plan.items[3].op, Op::Delete);
  EXPECT_EQ(plan.items[3].id, "a_2Eb");
  ASSERT_EQ(plan.refused.size(), 1u);
  EXPECT_EQ(plan.refused[0].first, 4u);
  kit::RecordJsonOptions o;
  o.layout = s.document;
  kit::RecordJsonWriter writer(o);
  const kit::BatchJsonWriter json = writer.begin(b.raw());
  std::string out;
  for (const Item& item : plan.items) render_item(out, item, json, b.raw(), s.primary_key);
  EXPECT_EQ(out, "{\"pico_id\":\"1\",\"id\":1,\"v\":1}\n{\"pico_id\":\"1\",\"v\":2}\n\"a_2Eb\"");
}

}  // namespace
}  // namespace picomq::meilisearch
