// [plugin_config] against a plugin's option table: every problem named, defaults filled in,
// durations and sizes normalised, secrets kept out of messages.
#include "picomq/kit/plugin_options.hpp"

#include <gtest/gtest.h>

#include <array>

namespace picomq::kit {
namespace {

constexpr std::array kOptions{
    pmq_option{"url", PMQ_OPTION_STRING, PMQ_OPTION_REQUIRED, nullptr, nullptr, "where"},
    pmq_option{"password", PMQ_OPTION_STRING, PMQ_OPTION_SECRET, nullptr, "hunter2|swordfish", "secret"},
    pmq_option{"mode", PMQ_OPTION_STRING, 0, "\"insert\"", "insert|upsert|append", "how"},
    pmq_option{"batch", PMQ_OPTION_INT, 0, "500", nullptr, "n"},
    pmq_option{"ratio", PMQ_OPTION_FLOAT, 0, "0.5", nullptr, "r"},
    pmq_option{"tls", PMQ_OPTION_BOOL, 0, "false", nullptr, "t"},
    pmq_option{"timeout", PMQ_OPTION_DURATION, 0, "\"5s\"", nullptr, "d"},
    pmq_option{"buffer", PMQ_OPTION_BYTE_SIZE, 0, "\"64KiB\"", nullptr, "b"},
    pmq_option{"columns", PMQ_OPTION_STRING_LIST, 0, "[]", nullptr, "c"},
    pmq_option{"mapping", PMQ_OPTION_TABLE, 0, nullptr, nullptr, "m"},
};

pmq_sink_plugin plugin() {
  pmq_sink_plugin d{};
  d.name = "demo";
  d.options = kOptions.data();
  d.option_count = kOptions.size();
  d.option_size = sizeof(pmq_option);
  return d;
}

std::vector<std::string> problems(std::string_view config) {
  std::vector<std::string> errors;
  auto p = plugin();
  EXPECT_FALSE(PluginOptions::validate(p, config, errors)) << config;
  return errors;
}

TEST(PluginOptions, DefaultsAreFilledInAndValuesNormalised) {
  auto p = plugin();
  std::vector<std::string> errors;
  auto opts = PluginOptions::validate(
      p, R"({"url":"pg://x","timeout":"250ms","buffer":"8MiB","columns":["a","b"],"mapping":{"k":[1,2]},"ratio":2})",
      errors);
  ASSERT_TRUE(opts) << (errors.empty() ? "" : errors[0]);
  EXPECT_STREQ(opts->string("url"), "pg://x");
  EXPECT_STREQ(opts->string("mode"), "insert");
  EXPECT_EQ(opts->integer("batch"), 500);
  EXPECT_DOUBLE_EQ(opts->number("ratio"), 2.0) << "an integer is a fine float";
  EXPECT_FALSE(opts->boolean("tls"));
  EXPECT_EQ(opts->integer("timeout"), 250);
  EXPECT_EQ(opts->integer("buffer"), 8 << 20);
  ASSERT_EQ(opts->list_size("columns"), 2u);
  EXPECT_STREQ(opts->list_item("columns", 1), "b");
  EXPECT_STREQ(opts->json("mapping"), R"({"k":[1,2]})");
  EXPECT_FALSE(opts->has("password")) << "no default, not set";
  EXPECT_EQ(opts->string("password"), nullptr);
  EXPECT_EQ(opts->string("batch"), nullptr) << "wrong type reads as unset";
  EXPECT_EQ(opts->integer("nope"), 0);
  EXPECT_NE(opts->json().find(R"("timeout":250)"), std::string::npos) << opts->json();
  EXPECT_NE(opts->json().find(R"("tls":false)"), std::string::npos) << opts->json();
}

TEST(PluginOptions, EveryProblemIsNamedWithTheKey) {
  auto errors = problems(R"({"mdoe":"upsert","batch":"ten","tls":1,"timeout":"soon","buffer":-1,"columns":["a",2],)"
                         R"("mapping":"x","mode":"merge"})");
  std::string all;
  for (auto& e : errors) all += e + "\n";
  EXPECT_NE(all.find("mdoe: unknown option for the demo sink; did you mean 'mode'?"), std::string::npos) << all;
  EXPECT_NE(all.find("url: missing required option"), std::string::npos) << all;
  EXPECT_NE(all.find("batch: must be an integer, not a string"), std::string::npos) << all;
  EXPECT_NE(all.find("tls: must be a boolean, not an integer"), std::string::npos) << all;
  EXPECT_NE(all.find("timeout: "), std::string::npos) << all;
  EXPECT_NE(all.find("buffer: must not be negative"), std::string::npos) << all;
  EXPECT_NE(all.find("columns: must be a list of strings (found an integer in it)"), std::string::npos) << all;
  EXPECT_NE(all.find("mapping: must be a table, not a string"), std::string::npos) << all;
  EXPECT_NE(all.find("mode: must be one of insert|upsert|append, not \"merge\""), std::string::npos) << all;
  EXPECT_EQ(errors.size(), 9u) << all;
}

TEST(PluginOptions, SecretValuesNeverAppearInMessages) {
  auto errors = problems(R"({"url":"x","password":"letmein"})");
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].find("password: must be one of"), std::string::npos) << errors[0];
  EXPECT_EQ(errors[0].find("letmein"), std::string::npos) << errors[0];
}

TEST(PluginOptions, NotATableAndNoOptions) {
  EXPECT_EQ(problems("[1]").at(0), "[plugin_config] is not a table");
  pmq_sink_plugin bare{};
  bare.name = "bare";
  std::vector<std::string> errors;
  EXPECT_FALSE(PluginOptions::validate(bare, R"({"x":1})", errors));
  EXPECT_NE(errors.at(0).find("(it takes no options)"), std::string::npos) << errors[0];
  errors.clear();
  EXPECT_TRUE(PluginOptions::validate(bare, "{}", errors));
}

TEST(PluginOptions, ProblemsAreStructuredWithTheirKindAndOption) {
  auto p = plugin();
  std::vector<OptionProblem> problems;
  EXPECT_FALSE(PluginOptions::validate(p, R"({"mdoe":"upsert","batch":"ten","password":"letmein"})", problems));
  ASSERT_EQ(problems.size(), 4u);
  EXPECT_EQ(problems[0].kind, OptionProblem::Kind::Unknown);
  EXPECT_EQ(problems[0].option, "mdoe");
  EXPECT_EQ(problems[0].message.rfind("unknown option for the demo sink; did you mean 'mode'?", 0), 0u)
      << problems[0].message;
  EXPECT_EQ(problems[1].kind, OptionProblem::Kind::Missing);
  EXPECT_EQ(problems[1].to_string(), "url: missing required option");
  EXPECT_EQ(problems[2].kind, OptionProblem::Kind::Invalid);
  EXPECT_EQ(problems[2].to_string(), "password: must be one of hunter2|swordfish");
  EXPECT_EQ(problems[3].to_string(), "batch: must be an integer, not a string");
  problems.clear();
  EXPECT_FALSE(PluginOptions::validate(p, "[1]", problems));
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0].option, "");
  EXPECT_EQ(problems[0].to_string(), "[plugin_config] is not a table");
}

TEST(PluginOptions, PluginProblemsAreSplitIntoDeclaredOptionAndMessage) {
  auto problems =
      PluginOptions::plugin_problems(plugin(),
                                     "mode: needs url\n  mapping.k: must be a list\nurl: x: y\nno option here\n"
                                     "nope: not declared\n\ncolumns[1]: empty\n");
  ASSERT_EQ(problems.size(), 6u);
  for (const auto& p : problems) EXPECT_EQ(p.kind, OptionProblem::Kind::Plugin);
  EXPECT_EQ(problems[0].option, "mode");
  EXPECT_EQ(problems[0].message, "needs url");
  EXPECT_EQ(problems[1].option, "mapping.k");
  EXPECT_EQ(problems[1].message, "must be a list");
  EXPECT_EQ(problems[2].option, "url");
  EXPECT_EQ(problems[2].message, "x: y");
  EXPECT_EQ(problems[3].option, "");
  EXPECT_EQ(problems[3].message, "no option here");
  EXPECT_EQ(problems[4].option, "") << "not a declared option: the line is kept whole";
  EXPECT_EQ(problems[4].message, "nope: not declared");
  EXPECT_EQ(problems[5].option, "columns[1]");
}

TEST(PluginOptions, MarkdownTableListsEveryOption) {
  auto md = PluginOptions::markdown_table(plugin());
  EXPECT_NE(md.find("| `mode` | string: insert\\|upsert\\|append | `\"insert\"` | no | no | how |"), std::string::npos)
      << md;
  EXPECT_NE(md.find("| `password` | string: hunter2\\|swordfish | — | no | yes | secret |"), std::string::npos) << md;
  EXPECT_NE(md.find("| `url` | string | — | yes | no | where |"), std::string::npos) << md;
}

}  // namespace
}  // namespace picomq::kit
