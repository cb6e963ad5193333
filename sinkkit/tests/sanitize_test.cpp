#include "picomq/kit/sanitize.hpp"

#include <gtest/gtest.h>

#include <string>
#include <string_view>

#include "picomq/kit/encoding.hpp"
#include "picomq/kit/name_template.hpp"

namespace picomq::kit {
namespace {

using namespace std::string_view_literals;

constexpr NamePolicy kAllPolicies[] = {NamePolicy::SqlIdentifier, NamePolicy::IndexName, NamePolicy::ObjectKey,
                                       NamePolicy::Verbatim};

// Topic names a hostile or careless producer could create.
constexpr std::string_view kHostileNames[] = {R"("; DROP TABLE x; --)",
                                              "it's",
                                              "a;b",
                                              "заказы.eu",
                                              "logs.😀",
                                              "Orders.EU",
                                              "../../etc/passwd",
                                              "a/./b/../c",
                                              "/abs",
                                              "100%",
                                              "a%20b",
                                              "a%2fb",
                                              "%",
                                              "a\0b"sv,
                                              "tab\there",
                                              "nl\nhere",
                                              "del\x7f",
                                              "c1\xC2\x85",
                                              "bad\xFF\xFE",
                                              "trunc\xE2\x82",
                                              ".",
                                              "..",
                                              "_x",
                                              "-x",
                                              "+x",
                                              "a b",
                                              "UPPER",
                                              "a*b?c<d>e|f,g#h:i\\j"};

std::string sanitized(std::string_view name, NamePolicy policy) {
  auto result = sanitize_name(name, policy);
  EXPECT_TRUE(result.ok()) << result.error();
  return result.ok() ? result.value() : "<failed>";
}

bool is_lower_hex(std::string_view s) { return s.find_first_not_of("0123456789abcdef") == std::string_view::npos; }

// --- every policy -------------------------------------------------------------------------

TEST(Sanitize, FitNameCutsWithAHashOnlyWhatIsTooLongAndIsIdempotent) {
  EXPECT_EQ(fit_name("short", 10), "short");
  const std::string long_a = std::string(40, 'a') + "1", long_b = std::string(40, 'a') + "2";
  const std::string a = fit_name(long_a, 20), b = fit_name(long_b, 20);
  EXPECT_EQ(a.size(), 20u);
  EXPECT_EQ(a.substr(0, 12), std::string(11, 'a') + "_");
  EXPECT_NE(a, b) << "names that differ past the cut stay distinct";
  EXPECT_EQ(fit_name(a, 20), a) << "idempotent";
  // Never inside a UTF-8 character: "é" is 2 bytes; a cut at 11 would split the 6th.
  const std::string accents = fit_name("ééééééééééééééé", 20);
  EXPECT_TRUE(is_valid_utf8(accents)) << accents;
  EXPECT_LE(accents.size(), 20u);
}

TEST(Sanitize, EmptyIsAnErrorUnderEveryPolicy) {
  for (const NamePolicy policy : kAllPolicies) {
    auto result = sanitize_name("", policy);
    ASSERT_FALSE(result.ok()) << to_string(policy);
    EXPECT_NE(result.error().find("empty"), std::string::npos) << result.error();
  }
}

TEST(Sanitize, IsIdempotentAndDeterministic) {
  std::vector<std::string> names(std::begin(kHostileNames), std::end(kHostileNames));
  names.push_back(std::string(200, 'a'));
  names.push_back(std::string(2000, ' '));
  names.push_back("ab" + std::string(700, ' '));
  std::string cyrillic;
  for (int i = 0; i < 300; ++i) cyrillic += "з";
  names.push_back(cyrillic);
  for (const NamePolicy policy : kAllPolicies) {
    for (const std::string& name : names) {
      const std::string once = sanitized(name, policy);
      EXPECT_EQ(sanitized(name, policy), once) << to_string(policy);
      EXPECT_EQ(sanitized(once, policy), once) << to_string(policy) << ": " << name;
      if (max_name_bytes(policy) != 0) {
        EXPECT_LE(once.size(), max_name_bytes(policy));
      }
    }
  }
}

// --- SqlIdentifier ------------------------------------------------------------------------

TEST(SanitizeSql, KeepsQuotesAndSemicolonsAsDataForTheQuotedIdentifier) {
  EXPECT_EQ(sanitized("orders", NamePolicy::SqlIdentifier), "orders");
  EXPECT_EQ(sanitized(R"("; DROP TABLE x; --)", NamePolicy::SqlIdentifier), R"("; DROP TABLE x; --)");
  EXPECT_EQ(sanitized("Orders.EU", NamePolicy::SqlIdentifier), "Orders.EU");
}

TEST(SanitizeSql, KeepsUnicode) {
  EXPECT_EQ(sanitized("заказы.eu", NamePolicy::SqlIdentifier), "заказы.eu");
  EXPECT_EQ(sanitized("logs_😀", NamePolicy::SqlIdentifier), "logs_😀");
}

TEST(SanitizeSql, ReplacesControlCharactersAndInvalidBytes) {
  EXPECT_EQ(sanitized("a\0b"sv, NamePolicy::SqlIdentifier), "a_b");
  EXPECT_EQ(sanitized("a\x1f"
                      "b\x7f",
                      NamePolicy::SqlIdentifier),
            "a_b_");
  EXPECT_EQ(sanitized("tab\there\n", NamePolicy::SqlIdentifier), "tab_here_");
  EXPECT_EQ(sanitized("a\xC2\x85"
                      "b",
                      NamePolicy::SqlIdentifier),
            "a_b");  // C1 NEL
  EXPECT_EQ(sanitized("a\xFF"
                      "b",
                      NamePolicy::SqlIdentifier),
            "a_b");
  EXPECT_EQ(sanitized("\xC0\x80", NamePolicy::SqlIdentifier), "__");  // overlong NUL
  EXPECT_EQ(sanitized("x\xE2\x82", NamePolicy::SqlIdentifier), "x__");
}

TEST(SanitizeSql, LimitIs63BytesWithExactHashSuffix) {
  const std::string at_limit(63, 'a');
  EXPECT_EQ(sanitized(at_limit, NamePolicy::SqlIdentifier), at_limit);
  // FNV-1a 32 of 64 'a' is d96f0f85.
  EXPECT_EQ(sanitized(std::string(64, 'a'), NamePolicy::SqlIdentifier), std::string(54, 'a') + "_d96f0f85");
  EXPECT_EQ(sanitized(std::string(200, 'a'), NamePolicy::SqlIdentifier), std::string(54, 'a') + "_4e48052d");
}

TEST(SanitizeSql, LongNamesDifferingOnlyAtTheEndStayDistinct) {
  const std::string base = "events_" + std::string(190, 'x');
  const std::string a = sanitized(base + "_eu", NamePolicy::SqlIdentifier);
  const std::string b = sanitized(base + "_us", NamePolicy::SqlIdentifier);
  EXPECT_EQ(a.size(), 63u);
  EXPECT_EQ(b.size(), 63u);
  EXPECT_NE(a, b);
  EXPECT_EQ(a.substr(0, 54), b.substr(0, 54));
  EXPECT_EQ(a[54], '_');
  EXPECT_TRUE(is_lower_hex(a.substr(55)));
}

TEST(SanitizeSql, TruncatesOnAUtf8Boundary) {
  std::string name = "a";
  for (int i = 0; i < 100; ++i) name += "з";  // 2 bytes each: byte 54 is mid-character
  const std::string out = sanitized(name, NamePolicy::SqlIdentifier);
  EXPECT_TRUE(is_valid_utf8(out));
  EXPECT_EQ(out.size(), 53u + 9u);
  EXPECT_EQ(out.substr(0, 53), name.substr(0, 53));
}

// --- IndexName ----------------------------------------------------------------------------

TEST(SanitizeIndex, LowercasesAndReplacesDisallowedCharacters) {
  EXPECT_EQ(sanitized("Orders.EU", NamePolicy::IndexName), "orders.eu");
  EXPECT_EQ(sanitized("logs-2024.01_x", NamePolicy::IndexName), "logs-2024.01_x");
  EXPECT_EQ(sanitized("a*b?c<d>e|f,g#h:i\\j/k\"l m", NamePolicy::IndexName), "a_b_c_d_e_f_g_h_i_j_k_l_m");
  EXPECT_EQ(sanitized(R"("; DROP TABLE x; --)", NamePolicy::IndexName), "i___drop_table_x__--");
}

TEST(SanitizeIndex, OneUnderscorePerNonAsciiCharacterOrInvalidByte) {
  EXPECT_EQ(sanitized("logs😀", NamePolicy::IndexName), "logs_");
  EXPECT_EQ(sanitized("заказы.eu", NamePolicy::IndexName), "i______.eu");
  EXPECT_EQ(sanitized("a\xFF\xFE"
                      "b",
                      NamePolicy::IndexName),
            "a__b");
  EXPECT_EQ(sanitized("a\0b"sv, NamePolicy::IndexName), "a_b");
}

TEST(SanitizeIndex, ForbiddenFirstCharactersAndDotNamesGetAPrefix) {
  EXPECT_EQ(sanitized("-x", NamePolicy::IndexName), "i-x");
  EXPECT_EQ(sanitized("_x", NamePolicy::IndexName), "i_x");
  EXPECT_EQ(sanitized("+x", NamePolicy::IndexName), "i_x");
  EXPECT_EQ(sanitized(".", NamePolicy::IndexName), "i.");
  EXPECT_EQ(sanitized("..", NamePolicy::IndexName), "i..");
  EXPECT_EQ(sanitized(".hidden", NamePolicy::IndexName), "i.hidden");
  EXPECT_EQ(sanitized("x-", NamePolicy::IndexName), "x-");
}

TEST(SanitizeIndex, LimitIs255BytesAndLongNamesStayDistinct) {
  const std::string base(300, 'q');
  const std::string a = sanitized(base + "A", NamePolicy::IndexName);
  const std::string b = sanitized(base + "B", NamePolicy::IndexName);
  EXPECT_EQ(a.size(), 255u);
  EXPECT_NE(a, b);
  EXPECT_EQ(a.substr(0, 246), std::string(246, 'q'));
  EXPECT_EQ(a[246], '_');
  EXPECT_TRUE(is_lower_hex(a.substr(247)));
  EXPECT_EQ(sanitized(std::string(255, 'q'), NamePolicy::IndexName), std::string(255, 'q'));
}

// --- ObjectKey ----------------------------------------------------------------------------

TEST(SanitizeKey, KeepsSafeCharactersAndSlashes) {
  EXPECT_EQ(sanitized("orders/eu", NamePolicy::ObjectKey), "orders/eu");
  EXPECT_EQ(sanitized("Az09!-_.*'()/x", NamePolicy::ObjectKey), "Az09!-_.*'()/x");
}

TEST(SanitizeKey, PercentEncodesEverythingElseUppercase) {
  EXPECT_EQ(sanitized(R"("; DROP TABLE x; --)", NamePolicy::ObjectKey), "%22%3B%20DROP%20TABLE%20x%3B%20--");
  EXPECT_EQ(sanitized("заказы.eu", NamePolicy::ObjectKey), "%D0%B7%D0%B0%D0%BA%D0%B0%D0%B7%D1%8B.eu");
  EXPECT_EQ(sanitized("a\0\x1f\x7f"sv, NamePolicy::ObjectKey), "a%00%1F%7F");
  EXPECT_EQ(sanitized("bad\xFF", NamePolicy::ObjectKey), "bad%FF");
  EXPECT_EQ(sanitized("a\\b?c#d&e=f+g", NamePolicy::ObjectKey), "a%5Cb%3Fc%23d%26e%3Df%2Bg");
}

TEST(SanitizeKey, PercentSign) {
  EXPECT_EQ(sanitized("100%", NamePolicy::ObjectKey), "100%25");
  EXPECT_EQ(sanitized("%", NamePolicy::ObjectKey), "%25");
  EXPECT_EQ(sanitized("%4", NamePolicy::ObjectKey), "%254");
  EXPECT_EQ(sanitized("a%2fb", NamePolicy::ObjectKey), "a%252fb");  // lowercase: not ours
  EXPECT_EQ(sanitized("a%20b", NamePolicy::ObjectKey), "a%20b");    // kept: idempotence
}

TEST(SanitizeKey, CannotClimbOutOfThePrefix) {
  EXPECT_EQ(sanitized("../../etc/passwd", NamePolicy::ObjectKey), "__/__/etc/passwd");
  EXPECT_EQ(sanitized("a/./b/../c", NamePolicy::ObjectKey), "a/_/b/__/c");
  EXPECT_EQ(sanitized("..", NamePolicy::ObjectKey), "__");
  EXPECT_EQ(sanitized("x/..", NamePolicy::ObjectKey), "x/__");
  EXPECT_EQ(sanitized(".../..a/a..", NamePolicy::ObjectKey), ".../..a/a..");  // not special
  EXPECT_EQ(sanitized("/abs/path", NamePolicy::ObjectKey), "abs/path");
  EXPECT_EQ(sanitized("///x", NamePolicy::ObjectKey), "x");
  EXPECT_EQ(sanitized("/../x", NamePolicy::ObjectKey), "__/x");
}

TEST(SanitizeKey, OnlySlashesIsAnError) {
  EXPECT_FALSE(sanitize_name("/", NamePolicy::ObjectKey).ok());
  EXPECT_FALSE(sanitize_name("///", NamePolicy::ObjectKey).ok());
}

TEST(SanitizeKey, LimitIs1024BytesAndNeverSplitsAnEscape) {
  // "ab" then escapes at byte 2, 5, 8...: byte 1015 is inside one, so the cut backs off to 1013.
  const std::string out = sanitized("ab" + std::string(700, ' '), NamePolicy::ObjectKey);
  EXPECT_EQ(out.size(), 1013u + 9u);
  EXPECT_EQ(out.substr(1007, 6), "%20%20");
  EXPECT_EQ(out[1013], '_');
  for (std::size_t i = out.find('%'); i != std::string::npos; i = out.find('%', i + 1)) {
    ASSERT_LE(i + 3, 1013u) << "escape cut at " << i;
  }
  const std::string other = sanitized("ab" + std::string(699, ' ') + "!", NamePolicy::ObjectKey);
  EXPECT_NE(out, other);
}

// --- Verbatim -----------------------------------------------------------------------------

TEST(SanitizeVerbatim, LeavesNonEmptyNamesAlone) {
  for (std::string_view name : kHostileNames) {
    EXPECT_EQ(sanitized(name, NamePolicy::Verbatim), name);
  }
  EXPECT_EQ(max_name_bytes(NamePolicy::Verbatim), 0u);
}

// --- with a template ----------------------------------------------------------------------

TEST(SanitizeWithTemplate, ResolveThenSanitise) {
  auto tmpl = NameTemplate::parse("orders_{topic_segment[-1]}");
  ASSERT_TRUE(tmpl.ok()) << tmpl.error();
  const auto name = tmpl.value().resolve(R"(shop."; DROP TABLE x; --)");
  ASSERT_TRUE(name.ok()) << name.error();
  EXPECT_EQ(sanitized(name.value(), NamePolicy::SqlIdentifier), R"(orders_"; DROP TABLE x; --)");
  EXPECT_EQ(sanitized(name.value(), NamePolicy::IndexName), "orders____drop_table_x__--");

  // An empty resolved name is caught by the policy, not passed on.
  const auto empty = NameTemplate::parse("{topic_segment[1]}").value().resolve("a..b");
  ASSERT_TRUE(empty.ok());
  EXPECT_FALSE(sanitize_name(empty.value(), NamePolicy::SqlIdentifier).ok());
}

}  // namespace
}  // namespace picomq::kit
