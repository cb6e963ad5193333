#include "postgres/sql.h"

#include <gtest/gtest.h>

#include "picomq/kit/name_template.hpp"
#include "picomq/kit/sanitize.hpp"
#include "test_util.h"

namespace picomq::postgres {
namespace {

namespace dest = picomq::kit;
using test::field;
using test::layout;

const std::string kMetaDdl =
    R"("pico_topic" text NOT NULL, "pico_partition" int4 NOT NULL, "pico_offset" int8 NOT NULL, )"
    R"("pico_timestamp" timestamptz, "pico_key" bytea, "pico_headers" jsonb NOT NULL)";
const std::string kMetaStage =
    R"("pico_topic" text, "pico_partition" int4, "pico_offset" int8, "pico_timestamp" timestamptz, "pico_key" bytea, "pico_headers" jsonb)";
const std::string kMetaCols =
    R"("pico_topic", "pico_partition", "pico_offset", "pico_timestamp", "pico_key", "pico_headers")";

TableName target() { return TableName::make("public", "orders_eu").value(); }
TableName staging() { return TableName::temp(kStagingTable).value(); }

// ---- quoting -------------------------------------------------------------------------------

TEST(Quote, PlainAndHostileIdentifiers) {
  EXPECT_EQ(quote_identifier("orders").value(), R"("orders")");
  EXPECT_EQ(quote_identifier("Orders").value(), R"("Orders")");  // case kept
  EXPECT_EQ(quote_identifier(R"(a"b)").value(), R"("a""b")");
  EXPECT_EQ(quote_identifier(R"(")").value(), R"("""")");
  EXPECT_EQ(quote_identifier(R"("; DROP TABLE x; --)").value(), R"("""; DROP TABLE x; --")");
  EXPECT_EQ(quote_identifier(R"(a\b\")").value(), R"("a\b\""")");  // backslashes are data
  EXPECT_EQ(quote_identifier("заказы.eu").value(), "\"заказы.eu\"");
  EXPECT_EQ(quote_identifier("a b'c").value(), R"("a b'c")");
  EXPECT_EQ(quote_identifier("$1").value(), R"("$1")");
}

TEST(Quote, RefusesEmptyAndNul) {
  EXPECT_FALSE(quote_identifier("").ok());
  EXPECT_FALSE(quote_identifier(std::string_view("a\0b", 3)).ok());
  EXPECT_NE(quote_identifier(std::string_view("a\0b", 3)).error().find("NUL"), std::string::npos);
}

// A quoted identifier always ends at its own closing quote: strip the outer quotes, un-double,
// and get the name back; no lone quote inside.
TEST(Quote, RoundTripsEveryHostileName) {
  for (const std::string& name : {std::string(R"(x"; DELETE FROM t; --)"), std::string(200, '"'), std::string("\"\"\""),
                                  std::string("a\"\"b"), std::string("🚀\";")}) {
    const std::string q = quote_identifier(name).value();
    ASSERT_GE(q.size(), 2u);
    ASSERT_EQ(q.front(), '"');
    ASSERT_EQ(q.back(), '"');
    std::string back;
    const std::string inner = q.substr(1, q.size() - 2);
    for (std::size_t i = 0; i < inner.size(); ++i) {
      if (inner[i] == '"') {
        ASSERT_LT(i + 1, inner.size());
        ASSERT_EQ(inner[i + 1], '"') << "lone quote in " << q;
        ++i;
      }
      back.push_back(inner[i]);
    }
    EXPECT_EQ(back, name);
  }
}

TEST(Quote, Qualified) {
  EXPECT_EQ(qualified("public", "orders").value(), R"("public"."orders")");
  EXPECT_EQ(qualified("", "orders").value(), R"("orders")");
  EXPECT_EQ(qualified(R"(s"x)", R"(t.y)").value(), R"("s""x"."t.y")");
  EXPECT_FALSE(qualified("public", "").ok());
  EXPECT_FALSE(qualified(std::string_view("p\0", 2), "t").ok());
  EXPECT_EQ(TableName::temp("pico_staging").value().sql(), R"(pg_temp."pico_staging")");
  EXPECT_EQ(TableName::make("", R"(a"b)").value().sql(), R"("a""b")");
}

TEST(Quote, LongHostileTopicThroughTemplateAndSanitiser) {
  const std::string topic = "shop." + std::string(100, '"') + std::string(100, ';');  // 205 bytes
  auto tmpl = dest::NameTemplate::parse("orders_{topic_segment[-1]}").value();
  const std::string resolved = tmpl.resolve(topic).value();
  ASSERT_EQ(resolved.size(), 207u);
  const std::string name = dest::sanitize_name(resolved, dest::NamePolicy::SqlIdentifier).value();
  EXPECT_LE(name.size(), 63u);
  EXPECT_EQ(name, dest::sanitize_name(resolved, dest::NamePolicy::SqlIdentifier).value());  // stable
  EXPECT_EQ(name.substr(0, 7), "orders_");
  EXPECT_EQ(name[name.size() - 9], '_');  // "_" + 8 hex digits of the hash
  const std::string q = TableName::make("public", name).value().sql();
  EXPECT_EQ(q, "\"public\".\"orders_" + std::string(2 * 47, '"') + "_" + name.substr(name.size() - 8) + "\"");
  // A layout refuses a column name the server would truncate.
  auto bad = make_layout(LayoutOptions{
      PayloadMode::Columns, WriteMode::Append, false, {field(std::string(64, 'c'), ColumnType::Text)}, {}});
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(bad.error().find("63 bytes"), std::string::npos);
  // A unicode name cut on a character boundary.
  const std::string uni =
      dest::sanitize_name(std::string(40, 'a') + "ééééééééééééé", dest::NamePolicy::SqlIdentifier).value();
  EXPECT_LE(uni.size(), 63u);
  EXPECT_TRUE(quote_identifier(uni).ok());
}

// ---- layout --------------------------------------------------------------------------------

TEST(Layout, ColumnOrderAndKeys) {
  auto l = layout(PayloadMode::Jsonb, WriteMode::Insert, true);
  ASSERT_EQ(l.columns.size(), 8u);
  EXPECT_EQ(l.columns[0].name, "pico_id");
  EXPECT_EQ(l.columns[0].source, Source::RecordId);
  EXPECT_EQ(l.columns[7].name, "payload");
  EXPECT_EQ(l.columns[7].type, ColumnType::Jsonb);
  EXPECT_EQ(l.key, std::vector<std::string>{"pico_id"});
  EXPECT_TRUE(layout(PayloadMode::Text, WriteMode::Append, false).key.empty());
  auto u = layout(PayloadMode::Columns, WriteMode::Upsert, false,
                  {field("id", ColumnType::Int8), field("v", ColumnType::Text)}, {"id"});
  EXPECT_TRUE(u.columns[0].not_null);
  EXPECT_FALSE(u.columns[1].not_null);
  // The staging-only pico_offset of upsert without metadata.
  auto cc = copy_columns(u);
  ASSERT_EQ(cc.size(), 3u);
  EXPECT_EQ(cc[2].name, "pico_offset");
}

TEST(Layout, Errors) {
  auto err = [](const LayoutOptions& o) {
    auto l = make_layout(o);
    EXPECT_FALSE(l.ok());
    return l.ok() ? std::string() : l.error();
  };
  EXPECT_NE(err({PayloadMode::Columns, WriteMode::Insert, true, {}, {}}).find("at least one column"),
            std::string::npos);
  EXPECT_NE(err({PayloadMode::Jsonb, WriteMode::Insert, true, {field("a", ColumnType::Text)}, {}})
                .find("only for payload mode 'columns'"),
            std::string::npos);
  EXPECT_NE(err({PayloadMode::Columns, WriteMode::Insert, true, {field("pico_offset", ColumnType::Int8)}, {}})
                .find("collides with a metadata column"),
            std::string::npos);
  EXPECT_NE(
      err({PayloadMode::Columns, WriteMode::Insert, false, {field("pico_id", ColumnType::Text)}, {}}).find("collides"),
      std::string::npos);
  EXPECT_NE(
      err({PayloadMode::Columns, WriteMode::Upsert, false, {field("pico_offset", ColumnType::Int8)}, {"pico_offset"}})
          .find("staging"),
      std::string::npos);
  EXPECT_NE(err({PayloadMode::Columns,
                 WriteMode::Append,
                 false,
                 {field("a", ColumnType::Text), field("a", ColumnType::Int8)},
                 {}})
                .find("twice"),
            std::string::npos);
  EXPECT_NE(err({PayloadMode::Columns, WriteMode::Append, false, {field("", ColumnType::Text)}, {}}).find("empty"),
            std::string::npos);
  EXPECT_NE(err({PayloadMode::Columns, WriteMode::Append, false, {field(std::string("a\0", 2), ColumnType::Text)}, {}})
                .find("NUL"),
            std::string::npos);
  EXPECT_NE(err({PayloadMode::Jsonb, WriteMode::Upsert, true, {}, {}}).find("needs a key"), std::string::npos);
  EXPECT_NE(err({PayloadMode::Jsonb, WriteMode::Upsert, true, {}, {"nope"}}).find("not a column"), std::string::npos);
  EXPECT_NE(err({PayloadMode::Jsonb, WriteMode::Upsert, true, {}, {"payload"}}).find("jsonb"), std::string::npos);
  EXPECT_NE(err({PayloadMode::Jsonb, WriteMode::Upsert, true, {}, {"pico_key", "pico_key"}}).find("twice"),
            std::string::npos);
  EXPECT_NE(err({PayloadMode::Jsonb, WriteMode::Insert, true, {}, {"pico_key"}}).find("only for write mode 'upsert'"),
            std::string::npos);
  EXPECT_NE(err({PayloadMode::Jsonb, WriteMode::Append, true, {}, {"pico_key"}}).find("only for write mode 'upsert'"),
            std::string::npos);
}

TEST(Layout, ParseNames) {
  EXPECT_EQ(parse_payload_mode("columns"), PayloadMode::Columns);
  EXPECT_EQ(parse_payload_mode("JSONB"), std::nullopt);
  EXPECT_EQ(parse_write_mode("upsert"), WriteMode::Upsert);
  EXPECT_EQ(parse_write_mode("merge"), std::nullopt);
  EXPECT_EQ(parse_column_type("bigint"), ColumnType::Int8);
  EXPECT_EQ(parse_column_type("double precision"), ColumnType::Float8);
  EXPECT_EQ(parse_column_type("bool"), ColumnType::Bool);
  EXPECT_EQ(parse_column_type("varchar"), std::nullopt);
  for (auto t : {ColumnType::Text, ColumnType::Int4, ColumnType::Int8, ColumnType::Float8, ColumnType::Bool,
                 ColumnType::Jsonb, ColumnType::Bytea, ColumnType::Timestamptz}) {
    EXPECT_EQ(parse_column_type(sql_type(t)), t);
  }
}

// ---- CREATE TABLE: every payload mode x include_metadata x write mode ------------------------

struct DdlCase {
  PayloadMode payload;
  WriteMode write;
  bool meta;
  std::string expected;
};

TEST(CreateTable, EveryMode) {
  const std::string T = R"(CREATE TABLE IF NOT EXISTS "public"."orders_eu" ()";
  const std::string id = R"("pico_id" text NOT NULL, )";
  const std::string cols = R"("id" int8, "amount" float8)";
  const std::vector<Column> payload_cols = {field("id", ColumnType::Int8), field("amount", ColumnType::Float8)};
  const std::vector<DdlCase> cases = {
      {PayloadMode::Jsonb, WriteMode::Insert, true,
       T + id + kMetaDdl + R"(, "payload" jsonb, PRIMARY KEY ("pico_id")))"},
      {PayloadMode::Jsonb, WriteMode::Insert, false, T + id + R"("payload" jsonb, PRIMARY KEY ("pico_id")))"},
      {PayloadMode::Jsonb, WriteMode::Append, true, T + kMetaDdl + R"(, "payload" jsonb))"},
      {PayloadMode::Jsonb, WriteMode::Append, false, T + R"("payload" jsonb))"},
      {PayloadMode::Jsonb, WriteMode::Upsert, true,
       T + R"("pico_topic" text NOT NULL, "pico_partition" int4 NOT NULL, "pico_offset" int8 NOT NULL, )"
           R"("pico_timestamp" timestamptz, "pico_key" bytea NOT NULL, "pico_headers" jsonb NOT NULL, "payload" jsonb, PRIMARY KEY ("pico_key")))"},
      {PayloadMode::Text, WriteMode::Insert, true, T + id + kMetaDdl + R"(, "payload" text, PRIMARY KEY ("pico_id")))"},
      {PayloadMode::Text, WriteMode::Insert, false, T + id + R"("payload" text, PRIMARY KEY ("pico_id")))"},
      {PayloadMode::Text, WriteMode::Append, true, T + kMetaDdl + R"(, "payload" text))"},
      {PayloadMode::Text, WriteMode::Append, false, T + R"("payload" text))"},
      {PayloadMode::Bytea, WriteMode::Insert, true,
       T + id + kMetaDdl + R"(, "payload" bytea, PRIMARY KEY ("pico_id")))"},
      {PayloadMode::Bytea, WriteMode::Insert, false, T + id + R"("payload" bytea, PRIMARY KEY ("pico_id")))"},
      {PayloadMode::Bytea, WriteMode::Append, true, T + kMetaDdl + R"(, "payload" bytea))"},
      {PayloadMode::Bytea, WriteMode::Append, false, T + R"("payload" bytea))"},
      {PayloadMode::Columns, WriteMode::Insert, true,
       T + id + kMetaDdl + ", " + cols + R"(, PRIMARY KEY ("pico_id")))"},
      {PayloadMode::Columns, WriteMode::Insert, false, T + id + cols + R"(, PRIMARY KEY ("pico_id")))"},
      {PayloadMode::Columns, WriteMode::Append, true, T + kMetaDdl + ", " + cols + ")"},
      {PayloadMode::Columns, WriteMode::Append, false, T + cols + ")"},
      {PayloadMode::Columns, WriteMode::Upsert, true,
       T + kMetaDdl + R"(, "id" int8 NOT NULL, "amount" float8, PRIMARY KEY ("id")))"},
      {PayloadMode::Columns, WriteMode::Upsert, false,
       T + R"("id" int8 NOT NULL, "amount" float8, PRIMARY KEY ("id")))"},
  };
  for (const auto& c : cases) {
    const bool columns = c.payload == PayloadMode::Columns;
    std::vector<std::string> key;
    if (c.write == WriteMode::Upsert) key = {columns ? "id" : "pico_key"};
    auto l = layout(c.payload, c.write, c.meta, columns ? payload_cols : std::vector<Column>{}, key);
    EXPECT_EQ(create_table_sql(target(), l), c.expected)
        << to_string(c.payload) << " " << to_string(c.write) << " " << c.meta;
  }
}

TEST(CreateTable, CompositeUpsertKeyAndEveryType) {
  auto l =
      layout(PayloadMode::Columns, WriteMode::Upsert, false,
             {field("tenant", ColumnType::Text), field("id", ColumnType::Int4), field("ok", ColumnType::Bool),
              field("at", ColumnType::Timestamptz), field("doc", ColumnType::Jsonb), field("blob", ColumnType::Bytea)},
             {"tenant", "id"});
  EXPECT_EQ(
      create_table_sql(target(), l),
      R"(CREATE TABLE IF NOT EXISTS "public"."orders_eu" ("tenant" text NOT NULL, "id" int4 NOT NULL, "ok" boolean, )"
      R"("at" timestamptz, "doc" jsonb, "blob" bytea, PRIMARY KEY ("tenant", "id")))");
}

TEST(CreateTable, HostileColumnAndTableNames) {
  auto l = layout(PayloadMode::Columns, WriteMode::Append, false,
                  {field(R"(a"); DROP TABLE x; --)", ColumnType::Text), field("é 💥", ColumnType::Int8),
                   field(R"(\)", ColumnType::Bool)});
  auto t = TableName::make(R"(s"c)", R"(t"; --)").value();
  EXPECT_EQ(create_table_sql(t, l),
            R"(CREATE TABLE IF NOT EXISTS "s""c"."t""; --" ("a""); DROP TABLE x; --" text, "é 💥" int8, "\" boolean))");
}

// ---- staging, COPY, merge ------------------------------------------------------------------

TEST(Statements, InsertMode) {
  auto l = layout(PayloadMode::Jsonb, WriteMode::Insert, true);
  const std::string cols = R"("pico_id", )" + kMetaCols + R"(, "payload")";
  auto w = write_statements(target(), staging(), l);
  EXPECT_EQ(w.create_staging, R"(CREATE TEMP TABLE pg_temp."pico_staging" ("pico_id" text, )" + kMetaStage +
                                  R"(, "payload" jsonb) ON COMMIT DROP)");
  EXPECT_EQ(w.copy, R"(COPY pg_temp."pico_staging" ()" + cols + ") FROM STDIN (FORMAT binary)");
  EXPECT_EQ(w.merge, R"(INSERT INTO "public"."orders_eu" ()" + cols + ") SELECT " + cols +
                         R"( FROM pg_temp."pico_staging" ON CONFLICT ("pico_id") DO NOTHING)");
}

TEST(Statements, InsertModeWithoutMetadata) {
  auto l = layout(PayloadMode::Bytea, WriteMode::Insert, false);
  auto w = write_statements(target(), staging(), l);
  EXPECT_EQ(w.create_staging,
            R"(CREATE TEMP TABLE pg_temp."pico_staging" ("pico_id" text, "payload" bytea) ON COMMIT DROP)");
  EXPECT_EQ(w.copy, R"(COPY pg_temp."pico_staging" ("pico_id", "payload") FROM STDIN (FORMAT binary))");
  EXPECT_EQ(
      w.merge,
      R"(INSERT INTO "public"."orders_eu" ("pico_id", "payload") SELECT "pico_id", "payload" FROM pg_temp."pico_staging" )"
      R"(ON CONFLICT ("pico_id") DO NOTHING)");
}

TEST(Statements, UpsertLastRecordPerKeyWins) {
  auto l = layout(PayloadMode::Columns, WriteMode::Upsert, true,
                  {field("id", ColumnType::Int8), field("name", ColumnType::Text)}, {"id"});
  const std::string cols = kMetaCols + R"(, "id", "name")";
  auto w = write_statements(target(), staging(), l);
  EXPECT_EQ(w.create_staging, R"(CREATE TEMP TABLE pg_temp."pico_staging" ()" + kMetaStage +
                                  R"(, "id" int8, "name" text) ON COMMIT DROP)");
  EXPECT_EQ(w.copy, R"(COPY pg_temp."pico_staging" ()" + cols + ") FROM STDIN (FORMAT binary)");
  EXPECT_EQ(
      w.merge,
      R"(INSERT INTO "public"."orders_eu" ()" + cols + R"() SELECT DISTINCT ON ("id") )" + cols +
          R"( FROM pg_temp."pico_staging" ORDER BY "id", "pico_offset" DESC ON CONFLICT ("id") DO UPDATE SET )"
          R"("pico_topic" = EXCLUDED."pico_topic", "pico_partition" = EXCLUDED."pico_partition", )"
          R"("pico_offset" = EXCLUDED."pico_offset", "pico_timestamp" = EXCLUDED."pico_timestamp", )"
          R"("pico_key" = EXCLUDED."pico_key", "pico_headers" = EXCLUDED."pico_headers", "name" = EXCLUDED."name")");
}

TEST(Statements, UpsertWithoutMetadataOrdersByAStagingOnlyOffset) {
  auto l = layout(PayloadMode::Columns, WriteMode::Upsert, false,
                  {field("tenant", ColumnType::Text), field("id", ColumnType::Int8), field("v", ColumnType::Jsonb)},
                  {"tenant", "id"});
  auto w = write_statements(target(), staging(), l);
  EXPECT_EQ(
      w.create_staging,
      R"(CREATE TEMP TABLE pg_temp."pico_staging" ("tenant" text, "id" int8, "v" jsonb, "pico_offset" int8) ON COMMIT DROP)");
  EXPECT_EQ(w.copy, R"(COPY pg_temp."pico_staging" ("tenant", "id", "v", "pico_offset") FROM STDIN (FORMAT binary))");
  EXPECT_EQ(
      w.merge,
      R"(INSERT INTO "public"."orders_eu" ("tenant", "id", "v") SELECT DISTINCT ON ("tenant", "id") "tenant", "id", "v" )"
      R"(FROM pg_temp."pico_staging" ORDER BY "tenant", "id", "pico_offset" DESC )"
      R"(ON CONFLICT ("tenant", "id") DO UPDATE SET "v" = EXCLUDED."v")");
}

TEST(Statements, UpsertWhereEveryColumnIsKeyDoesNothing) {
  auto l = layout(PayloadMode::Columns, WriteMode::Upsert, false, {field("id", ColumnType::Int8)}, {"id"});
  EXPECT_EQ(merge_sql(target(), staging(), l),
            R"(INSERT INTO "public"."orders_eu" ("id") SELECT DISTINCT ON ("id") "id" FROM pg_temp."pico_staging" )"
            R"(ORDER BY "id", "pico_offset" DESC ON CONFLICT ("id") DO NOTHING)");
}

TEST(Statements, UpsertOnRecordKeyInJsonbMode) {
  auto l = layout(PayloadMode::Jsonb, WriteMode::Upsert, true, {}, {"pico_key"});
  EXPECT_EQ(
      merge_sql(target(), staging(), l),
      R"(INSERT INTO "public"."orders_eu" ()" + kMetaCols + R"(, "payload") SELECT DISTINCT ON ("pico_key") )" +
          kMetaCols +
          R"(, "payload" FROM pg_temp."pico_staging" ORDER BY "pico_key", "pico_offset" DESC ON CONFLICT ("pico_key") DO UPDATE SET )"
          R"("pico_topic" = EXCLUDED."pico_topic", "pico_partition" = EXCLUDED."pico_partition", "pico_offset" = EXCLUDED."pico_offset", )"
          R"("pico_timestamp" = EXCLUDED."pico_timestamp", "pico_headers" = EXCLUDED."pico_headers", "payload" = EXCLUDED."payload")");
}

// docs/changes.md: the last change per key decides; deletes first, then the upserts.
TEST(Statements, ChangeEventsDeleteAndUpsertTheLastChangePerKey) {
  auto l = layout(PayloadMode::Columns, WriteMode::Upsert, false,
                  {field("id", ColumnType::Int8), field("region", ColumnType::Text), field("v", ColumnType::Text)},
                  {"id", "region"}, true);
  EXPECT_EQ(create_staging_sql(staging(), l),
            R"(CREATE TEMP TABLE pg_temp."pico_staging" ("id" int8, "region" text, "v" text, "pico_offset" int8, )"
            R"("pico_deleted" boolean, "pico_absent" jsonb) ON COMMIT DROP)");
  const std::string last =
      R"((SELECT DISTINCT ON ("id", "region") * FROM pg_temp."pico_staging" ORDER BY "id", "region", "pico_offset" DESC) AS last)";
  auto s = change_statements(target(), staging(), l, false);
  EXPECT_EQ(s.truncate, "");
  EXPECT_EQ(s.remove, R"(DELETE FROM "public"."orders_eu" AS t USING )" + last +
                          R"( WHERE last."pico_deleted" AND t."id" = last."id" AND t."region" = last."region")");
  EXPECT_EQ(
      s.upsert,
      R"(INSERT INTO "public"."orders_eu" ("id", "region", "v") SELECT last."id", last."region", last."v" FROM )" +
          last +
          R"( WHERE NOT last."pico_deleted" AND last."pico_absent" IS NULL ON CONFLICT ("id", "region") DO UPDATE SET "v" = EXCLUDED."v")");
  // A patch keeps the columns it does not name.
  EXPECT_EQ(
      s.patch,
      R"(UPDATE "public"."orders_eu" AS t SET "v" = CASE WHEN last."pico_absent" ? 'v' THEN t."v" ELSE last."v" END FROM )" +
          last + R"( WHERE last."pico_absent" IS NOT NULL AND t."id" = last."id" AND t."region" = last."region")");
  EXPECT_EQ(
      s.patch_missing,
      R"(INSERT INTO "public"."orders_eu" ("id", "region", "v") SELECT last."id", last."region", last."v" FROM )" +
          last +
          R"( WHERE last."pico_absent" IS NOT NULL AND NOT EXISTS (SELECT 1 FROM "public"."orders_eu" AS t )"
          R"(WHERE t."id" = last."id" AND t."region" = last."region") ON CONFLICT ("id", "region") DO NOTHING)");
  EXPECT_EQ(change_statements(target(), staging(), l, true).truncate, R"(TRUNCATE "public"."orders_eu")");
  // Only upsert applies changes, and pico_deleted is the staging's own.
  auto insert = make_layout(LayoutOptions{PayloadMode::Jsonb, WriteMode::Insert, true, {}, {}, true});
  ASSERT_FALSE(insert.ok());
  EXPECT_EQ(insert.error(), "change events need write mode 'upsert' (a key to delete by), not 'insert'");
  auto clash = make_layout(LayoutOptions{
      PayloadMode::Columns, WriteMode::Upsert, true, {field("pico_deleted", ColumnType::Bool)}, {"pico_key"}, true});
  ASSERT_FALSE(clash.ok());
  EXPECT_NE(clash.error().find("collides with a staging column of change events"), std::string::npos);
}

TEST(Statements, AppendCopiesStraightIntoTheTarget) {
  auto l = layout(PayloadMode::Text, WriteMode::Append, true);
  auto w = write_statements(target(), staging(), l);
  EXPECT_EQ(w.create_staging, "");
  EXPECT_EQ(w.merge, "");
  EXPECT_EQ(w.copy, R"(COPY "public"."orders_eu" ()" + kMetaCols + R"(, "payload") FROM STDIN (FORMAT binary))");
  // merge_sql for append (a staged append, if a caller wants one) is a plain INSERT ... SELECT.
  EXPECT_EQ(merge_sql(target(), staging(), l), R"(INSERT INTO "public"."orders_eu" ()" + kMetaCols +
                                                   R"(, "payload") SELECT )" + kMetaCols +
                                                   R"(, "payload" FROM pg_temp."pico_staging")");
}

TEST(Statements, HostileStagingAndTargetNames) {
  auto l = layout(PayloadMode::Jsonb, WriteMode::Insert, false);
  auto t = TableName::make("", R"(x"; DROP TABLE y; --)").value();
  auto s = TableName::temp(R"(st"g)").value();
  EXPECT_EQ(merge_sql(t, s, l),
            R"(INSERT INTO "x""; DROP TABLE y; --" ("pico_id", "payload") SELECT "pico_id", "payload" )"
            R"(FROM pg_temp."st""g" ON CONFLICT ("pico_id") DO NOTHING)");
}

// ---- ALTER TABLE ---------------------------------------------------------------------------

TEST(AddColumns, OneStatementForAll) {
  EXPECT_EQ(
      add_columns_sql(target(), {field("note", ColumnType::Text), field(R"(q"x)", ColumnType::Timestamptz)}).value(),
      R"(ALTER TABLE "public"."orders_eu" ADD COLUMN IF NOT EXISTS "note" text, ADD COLUMN IF NOT EXISTS "q""x" timestamptz)");
  EXPECT_FALSE(add_columns_sql(target(), {}).ok());
  EXPECT_FALSE(add_columns_sql(target(), {field(std::string("a\0b", 3), ColumnType::Text)}).ok());
  EXPECT_FALSE(add_columns_sql(target(), {field(std::string(64, 'x'), ColumnType::Text)}).ok());
}

}  // namespace
}  // namespace picomq::postgres
