// Typed options: the descriptors the runtime sees, and the parse, through the fake host (the
// runtime's own validation in front of the sink's).
#include "picomq/kit/options.hpp"

#include <gtest/gtest.h>

#include "picomq/kit/testing/fake_host.hpp"

namespace kit = picomq::kit;
namespace sdk = picomq::sdk;
using namespace std::chrono_literals;

namespace {

enum class Method { Post, Put };

struct Tls {
  bool verify = true;
  std::optional<std::string> ca_file;
};

struct Settings {
  std::string url;
  Method method = Method::Post;
  std::chrono::milliseconds timeout{};
  kit::ByteSize max_body{};
  int64_t max_in_flight = 0;
  double ratio = 0;
  std::vector<std::string> tags;
  std::optional<std::string> token;
  kit::JsonValue extra;
  Tls tls;
};

const kit::OptionGroup<Tls>& tls_group() {
  static const kit::OptionGroup<Tls> group{
      "tls_",
      kit::option("verify", &Tls::verify).fallback(true).help("Verify the server's certificate."),
      kit::option("ca_file", &Tls::ca_file).help("CA bundle."),
  };
  return group;
}

Settings parsed;  // what the probe sink's open() parsed, for the test to read

class ProbeSink : public sdk::BaseSink<ProbeSink> {
 public:
  static constexpr std::string_view sink_name = "options_probe";
  static inline const kit::OptionTable<Settings> options{
      kit::option("url", &Settings::url).required().check(kit::not_empty()).help("Where to send."),
      kit::option("method", &Settings::method)
          .choices({{"POST", Method::Post}, {"PUT", Method::Put}})
          .fallback(Method::Post)
          .help("HTTP method."),
      kit::option("timeout", &Settings::timeout).fallback(30s).check(kit::positive_duration()).help("Timeout."),
      kit::option("max_body", &Settings::max_body).fallback(kit::ByteSize{8 << 20}).help("Body limit."),
      kit::option("max_in_flight", &Settings::max_in_flight).fallback(4).check(kit::at_least(1)).help("Requests."),
      kit::option("ratio", &Settings::ratio).fallback(0.5).help("A ratio."),
      kit::option("tags", &Settings::tags).fallback(std::vector<std::string>{"a", "b"}).help("Tags."),
      kit::option("token", &Settings::token).secret().help("A token."),
      kit::option("extra", &Settings::extra).help("Anything."),
      kit::group(&Settings::tls, tls_group()),
  };
  static void validate(const sdk::Config& c, sdk::ConfigProblems& p) { options.validate(c, p); }
  void open(const sdk::Config& c) { parsed = options.parse(c); }
  void write(const sdk::Record&) {}
};

const pmq_option* find(std::string_view name) {
  for (size_t i = 0; i < ProbeSink::options.size(); ++i)
    if (ProbeSink::options.data()[i].name == name) return &ProbeSink::options.data()[i];
  return nullptr;
}

}  // namespace

TEST(KitOptions, DescriptorsCarryTypesDefaultsFlagsAndAllowedValuesFromTheTypedDeclaration) {
  ASSERT_EQ(ProbeSink::options.size(), 11u);
  EXPECT_EQ(find("url")->type, PMQ_OPTION_STRING);
  EXPECT_EQ(find("url")->flags, PMQ_OPTION_REQUIRED);
  EXPECT_EQ(find("url")->default_json, nullptr);
  EXPECT_STREQ(find("method")->allowed, "POST|PUT");
  EXPECT_STREQ(find("method")->default_json, "\"POST\"");
  EXPECT_EQ(find("timeout")->type, PMQ_OPTION_DURATION);
  EXPECT_STREQ(find("timeout")->default_json, "\"30s\"");
  EXPECT_EQ(find("max_body")->type, PMQ_OPTION_BYTE_SIZE);
  EXPECT_STREQ(find("max_body")->default_json, "\"8MiB\"");
  EXPECT_EQ(find("max_in_flight")->type, PMQ_OPTION_INT);
  EXPECT_STREQ(find("max_in_flight")->default_json, "4");
  EXPECT_STREQ(find("ratio")->default_json, "0.5");
  EXPECT_STREQ(find("tags")->default_json, "[\"a\",\"b\"]");
  EXPECT_EQ(find("token")->flags, PMQ_OPTION_SECRET);
  EXPECT_EQ(find("extra")->type, PMQ_OPTION_TABLE);
  ASSERT_NE(find("tls_verify"), nullptr) << "a group's options carry its prefix";
  EXPECT_STREQ(find("tls_verify")->default_json, "true");
  EXPECT_EQ(find("tls_ca_file")->default_json, nullptr);
  EXPECT_STREQ(find("url")->help, "Where to send.");
}

TEST(KitOptions, TheRuntimeAcceptsTheTableAndParseFillsEveryMember) {
  kit::testing::FakeHost host(sdk::descriptor<ProbeSink>());
  host.open(R"({"url": "http://x/in", "method": "PUT", "timeout": "250ms", "max_body": "1KiB", "tags": ["z"],
               "token": "s3cret", "extra": {"k": [1, 2]}, "tls_ca_file": "/etc/ca.pem", "ratio": 2})");
  EXPECT_EQ(parsed.url, "http://x/in");
  EXPECT_EQ(parsed.method, Method::Put);
  EXPECT_EQ(parsed.timeout, 250ms);
  EXPECT_EQ(parsed.max_body.bytes, 1024u);
  EXPECT_EQ(parsed.max_in_flight, 4);
  EXPECT_DOUBLE_EQ(parsed.ratio, 2.0);
  EXPECT_EQ(parsed.tags, std::vector<std::string>{"z"});
  EXPECT_EQ(parsed.token, "s3cret");
  EXPECT_NE(parsed.extra.text.find("\"k\""), std::string::npos);
  EXPECT_TRUE(parsed.tls.verify);
  EXPECT_EQ(parsed.tls.ca_file, "/etc/ca.pem");
  host.close();

  host.open(R"({"url": "http://y"})");
  EXPECT_EQ(parsed.method, Method::Post) << "the default";
  EXPECT_EQ(parsed.timeout, 30s);
  EXPECT_EQ(parsed.max_body.bytes, 8u << 20);
  EXPECT_FALSE(parsed.token.has_value()) << "an optional without default stays empty";
  EXPECT_FALSE(parsed.tls.ca_file.has_value());
}

TEST(KitOptions, ValueChecksAndTheRuntimesChecksReportEveryProblemUnderItsKey) {
  kit::testing::FakeHost host(sdk::descriptor<ProbeSink>());
  auto problems = host.check(R"({"url": "", "max_in_flight": 0, "timeout": "0s"})");
  auto has = [&](std::string_view text) {
    for (const auto& p : problems)
      if (p.find(text) != std::string::npos) return true;
    return false;
  };
  EXPECT_TRUE(has("url: must not be empty")) << ::testing::PrintToString(problems);
  EXPECT_TRUE(has("max_in_flight: must be at least 1"));
  EXPECT_TRUE(has("timeout: must be longer than 0"));
  // The runtime's own checks come first and stop before the sink's: allowed values and types.
  auto runtime_problems = host.check(R"({"url": "http://x", "method": "GET", "timeout": true})");
  ASSERT_FALSE(runtime_problems.empty());
  EXPECT_NE(::testing::PrintToString(runtime_problems).find("method"), std::string::npos);
  EXPECT_THROW(host.open(R"({"method": "PUT"})"), std::runtime_error) << "url is required";
}

TEST(KitOptions, DefaultsRenderInTheLargestExactUnit) {
  EXPECT_EQ(kit::format_duration(0ms), "0s");
  EXPECT_EQ(kit::format_duration(1500ms), "1500ms");
  EXPECT_EQ(kit::format_duration(120s), "2m");
  EXPECT_EQ(kit::format_duration(std::chrono::hours(3)), "3h");
  EXPECT_EQ(kit::format_byte_size(1536), "1536B");
  EXPECT_EQ(kit::format_byte_size(3ull << 30), "3GiB");
  EXPECT_EQ(kit::json_string("a\"b"), "\"a\\\"b\"");
}
