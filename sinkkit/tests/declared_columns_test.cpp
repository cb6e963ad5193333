// Declared columns in both TOML shapes, and every way a declaration can be wrong.
#include "picomq/kit/declared_columns.hpp"

#include <gtest/gtest.h>

namespace kit = picomq::kit;

namespace {

std::vector<std::pair<std::string, std::string>> pairs(const std::string& json) {
  auto r = kit::parse_declared_columns(json);
  EXPECT_TRUE(r) << r.error();
  std::vector<std::pair<std::string, std::string>> out;
  if (r)
    for (const auto& c : r.value()) out.emplace_back(c.name, c.type);
  return out;
}

}  // namespace

TEST(KitDeclaredColumns, AnArrayOfTablesKeepsItsOrderAndATableOfTypesIsReadToo) {
  using P = std::vector<std::pair<std::string, std::string>>;
  const P ordered{{"z", "text"}, {"a", "Nullable(Int64)"}}, table{{"id", "int8"}, {"note", "text"}};
  EXPECT_EQ(pairs(R"j([{"name": "z", "type": "text"}, {"name": "a", "type": "Nullable(Int64)"}])j"), ordered);
  EXPECT_EQ(pairs(R"j({"id": "int8", "note": "text"})j"), table);
}

TEST(KitDeclaredColumns, EachWrongDeclarationSaysWhatIsWrong) {
  auto error = [](const std::string& json) { return kit::parse_declared_columns(json).error(); };
  EXPECT_EQ(error("{"), "not readable as JSON");
  EXPECT_EQ(error(R"j("id text")j"),
            "must be an array [{ name = \"...\", type = \"...\" }, ...] or a table { name = \"type\" }");
  EXPECT_EQ(error(R"j([{"name": "id"}])j"), "each item must be a table { name = \"...\", type = \"...\" }");
  EXPECT_EQ(error(R"j([{"name": "id", "type": 3}])j"), "the type of 'id' must be a string");
  EXPECT_EQ(error(R"j({"id": ["text"]})j"), "the type of 'id' must be a string");
  EXPECT_EQ(error(R"j([{"name": "a", "type": "x"}, {"name": "a", "type": "y"}])j"), "column 'a' is declared twice");
  EXPECT_EQ(error("[]"), "no columns declared");
  EXPECT_EQ(error("{}"), "no columns declared");
}
