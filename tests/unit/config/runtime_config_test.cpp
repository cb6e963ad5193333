#include "config/runtime_config.h"

#include <gtest/gtest.h>

#include "temp_dir.h"
#include "test_support.h"

namespace picomq::config {
namespace {

using namespace std::chrono_literals;
using testing::dump;
using testing::error_for;
using testing::fake_env;

constexpr std::string_view kFullExample = R"([broker]
bootstrap_servers = "127.0.0.1:9092"
[broker.properties]
"security.protocol" = "plaintext"
[plugins]
path = ["../build/plugins"]
[sinks]
dir = "sinks.d"
[runtime]
status_file = "/tmp/status.json"
max_buffered_records = 100000
max_buffered_bytes = "64MiB"
shutdown_timeout = "30s"
log_level = "info"
)";

// The brief's embedded example without `embedded = true`: TOML cannot hold both that boolean and a
// [broker.embedded] table, so the table alone switches the embedded broker on.
constexpr std::string_view kEmbeddedExample = R"([broker.embedded]
topics = ["orders.eu", "orders.us"]
partitions = 1
[[broker.embedded.seed]]
topic = "orders.eu"
file = "orders.eu.jsonl"
[sinks]
dir = "sinks.d"
)";

RuntimeConfigResult parse(std::string_view text, const EnvLookup& env = fake_env()) {
  return parse_runtime_config(text, "runtime.toml", "/etc/picomq", env);
}

TEST(RuntimeConfig, ParsesTheFullExample) {
  auto result = parse(kFullExample);
  ASSERT_TRUE(result.config) << dump(result.errors);
  const auto& c = *result.config;
  EXPECT_EQ(c.file, "runtime.toml");
  EXPECT_EQ(c.bootstrap_servers, "127.0.0.1:9092");
  EXPECT_FALSE(c.embedded);
  using P = std::pair<std::string, std::string>;
  EXPECT_EQ(c.client_properties, (std::vector<P>{{"security.protocol", "plaintext"}}));
  EXPECT_EQ(c.plugin_path, (std::vector<std::filesystem::path>{"/etc/build/plugins"}));
  EXPECT_EQ(c.sinks_dir, std::filesystem::path("/etc/picomq/sinks.d"));
  EXPECT_EQ(c.status_file, std::filesystem::path("/tmp/status.json"));
  EXPECT_EQ(c.max_buffered_records, 100000u);
  EXPECT_EQ(c.max_buffered_bytes, 64u << 20);
  EXPECT_EQ(c.shutdown_timeout, 30s);
  EXPECT_EQ(c.log_level, "info");
}

TEST(RuntimeConfig, AppliesDefaults) {
  auto result = parse("[broker]\nbootstrap_servers = \"h:9092\"\n[sinks]\ndir = \"/srv/sinks\"\n");
  ASSERT_TRUE(result.config) << dump(result.errors);
  const auto& c = *result.config;
  EXPECT_TRUE(c.plugin_path.empty());
  EXPECT_EQ(c.sinks_dir, std::filesystem::path("/srv/sinks"));
  EXPECT_FALSE(c.status_file);
  EXPECT_EQ(c.max_buffered_records, 100000u);
  EXPECT_EQ(c.max_buffered_bytes, 64u << 20);
  EXPECT_EQ(c.shutdown_timeout, 30000ms);
  EXPECT_EQ(c.log_level, "info");
  EXPECT_TRUE(c.client_properties.empty());
  EXPECT_EQ(c.group_protocol, GroupProtocol::Auto);
}

TEST(RuntimeConfig, ParsesTheEmbeddedExample) {
  auto result = parse(kEmbeddedExample);
  ASSERT_TRUE(result.config) << dump(result.errors);
  const auto& c = *result.config;
  EXPECT_TRUE(c.embedded);
  EXPECT_TRUE(c.bootstrap_servers.empty());
  EXPECT_EQ(c.embedded_topics, (std::vector<std::string>{"orders.eu", "orders.us"}));
  EXPECT_EQ(c.embedded_partitions, 1);
  ASSERT_EQ(c.embedded_seeds.size(), 1u);
  EXPECT_EQ(c.embedded_seeds[0].topic, "orders.eu");
  EXPECT_EQ(c.embedded_seeds[0].file, "/etc/picomq/orders.eu.jsonl");
}

TEST(RuntimeConfig, EmbeddedBooleanAlone) {
  auto result = parse("[broker]\nembedded = true\n[sinks]\ndir = \"s\"\n");
  ASSERT_TRUE(result.config) << dump(result.errors);
  EXPECT_TRUE(result.config->embedded);
  EXPECT_TRUE(result.config->embedded_topics.empty());
  EXPECT_EQ(result.config->embedded_partitions, 1);
}

TEST(RuntimeConfig, EmbeddedBooleanAndTableTogetherIsATomlError) {
  auto result = parse("[broker]\nembedded = true\n[broker.embedded]\ntopics = [\"a\"]\n[sinks]\ndir = \"s\"\n");
  EXPECT_FALSE(result.config);
  ASSERT_EQ(result.errors.size(), 1u) << dump(result.errors);
  EXPECT_EQ(result.errors[0].line, 3);
  EXPECT_NE(result.errors[0].message.find("cannot redefine"), std::string::npos) << result.errors[0].message;
}

TEST(RuntimeConfig, BootstrapServersRequiredUnlessEmbedded) {
  auto result = parse("[broker]\n[sinks]\ndir = \"s\"\n");
  EXPECT_EQ(error_for(result.errors, "broker.bootstrap_servers").message,
            "missing required key 'bootstrap_servers' (or set embedded = true)");
  auto off = parse("[broker]\nembedded = false\n[sinks]\ndir = \"s\"\n");
  error_for(off.errors, "broker.bootstrap_servers");
  auto both = parse("[broker]\nbootstrap_servers = \"h:1\"\nembedded = true\n[sinks]\ndir = \"s\"\n");
  EXPECT_NE(error_for(both.errors, "broker.bootstrap_servers").message.find("cannot be combined"), std::string::npos);
}

TEST(RuntimeConfig, BrokerAndSinksSectionsAreRequired) {
  auto result = parse("[runtime]\nlog_level = \"debug\"\n");
  EXPECT_FALSE(result.config);
  EXPECT_EQ(error_for(result.errors, "broker").message, "missing required key 'broker'");
  EXPECT_EQ(error_for(result.errors, "sinks").message, "missing required key 'sinks'");
  auto no_dir = parse("[broker]\nbootstrap_servers = \"h:1\"\n[sinks]\n");
  EXPECT_EQ(error_for(no_dir.errors, "sinks.dir").message, "missing required key 'dir'");
}

TEST(RuntimeConfig, UnknownKeysAreErrorsWithSuggestions) {
  auto result = parse(R"([broker]
bootstrap_server = "h:1"
[sinks]
dir = "s"
[runtime]
log_levle = "info"
[plugin]
path = "p"
)");
  EXPECT_FALSE(result.config);
  auto e = error_for(result.errors, "broker.bootstrap_server");
  EXPECT_EQ(e.message, "unknown key 'bootstrap_server' (did you mean 'bootstrap_servers'?)");
  EXPECT_EQ(e.line, 2);
  EXPECT_EQ(error_for(result.errors, "runtime.log_levle").message,
            "unknown key 'log_levle' (did you mean 'log_level'?)");
  EXPECT_EQ(error_for(result.errors, "plugin").message, "unknown key 'plugin' (did you mean 'plugins'?)");
  error_for(result.errors, "broker.bootstrap_servers");  // and it is still missing
}

TEST(RuntimeConfig, PluginPathMayBeAStringOrAnArray) {
  auto one = parse("[broker]\nbootstrap_servers = \"h:1\"\n[plugins]\npath = \"plugins\"\n[sinks]\ndir = \"s\"\n");
  ASSERT_TRUE(one.config) << dump(one.errors);
  EXPECT_EQ(one.config->plugin_path, (std::vector<std::filesystem::path>{"/etc/picomq/plugins"}));
  auto many =
      parse("[broker]\nbootstrap_servers = \"h:1\"\n[plugins]\npath = [\"a\", \"/opt/b\"]\n[sinks]\ndir = \"s\"\n");
  ASSERT_TRUE(many.config) << dump(many.errors);
  EXPECT_EQ(many.config->plugin_path, (std::vector<std::filesystem::path>{"/etc/picomq/a", "/opt/b"}));
  auto bad = parse("[broker]\nbootstrap_servers = \"h:1\"\n[plugins]\npath = 3\n[sinks]\ndir = \"s\"\n");
  EXPECT_EQ(error_for(bad.errors, "plugins.path").message,
            "'path' must be a string or an array of strings, got integer");
  auto bad_entry = parse("[broker]\nbootstrap_servers = \"h:1\"\n[plugins]\npath = [\"a\", 1]\n[sinks]\ndir = \"s\"\n");
  error_for(bad_entry.errors, "plugins.path[1]");
}

TEST(RuntimeConfig, ByteSizesAsIntegersOrStrings) {
  auto as_int =
      parse("[broker]\nbootstrap_servers = \"h:1\"\n[sinks]\ndir = \"s\"\n[runtime]\nmax_buffered_bytes = 1048576\n");
  ASSERT_TRUE(as_int.config) << dump(as_int.errors);
  EXPECT_EQ(as_int.config->max_buffered_bytes, 1048576u);
  auto as_text =
      parse("[broker]\nbootstrap_servers = \"h:1\"\n[sinks]\ndir = \"s\"\n[runtime]\nmax_buffered_bytes = \"10MB\"\n");
  ASSERT_TRUE(as_text.config) << dump(as_text.errors);
  EXPECT_EQ(as_text.config->max_buffered_bytes, 10'000'000u);
  auto bad =
      parse("[broker]\nbootstrap_servers = \"h:1\"\n[sinks]\ndir = \"s\"\n[runtime]\nmax_buffered_bytes = \"lots\"\n");
  EXPECT_NE(error_for(bad.errors, "runtime.max_buffered_bytes").message.find("invalid byte size 'lots'"),
            std::string::npos);
  auto zero = parse("[broker]\nbootstrap_servers = \"h:1\"\n[sinks]\ndir = \"s\"\n[runtime]\nmax_buffered_bytes = 0\n");
  error_for(zero.errors, "runtime.max_buffered_bytes");
  auto wrong =
      parse("[broker]\nbootstrap_servers = \"h:1\"\n[sinks]\ndir = \"s\"\n[runtime]\nmax_buffered_bytes = 1.5\n");
  EXPECT_NE(error_for(wrong.errors, "runtime.max_buffered_bytes").message.find("got float"), std::string::npos);
}

TEST(RuntimeConfig, RuntimeValuesAreValidated) {
  auto result = parse(R"([broker]
bootstrap_servers = "h:1"
[sinks]
dir = "s"
[runtime]
max_buffered_records = 0
shutdown_timeout = "30"
log_level = "verbose"
)");
  EXPECT_FALSE(result.config);
  EXPECT_EQ(result.errors.size(), 3u) << dump(result.errors);
  EXPECT_EQ(error_for(result.errors, "runtime.max_buffered_records").message,
            "'max_buffered_records' must be at least 1, got 0");
  auto timeout = error_for(result.errors, "runtime.shutdown_timeout");
  EXPECT_EQ(timeout.line, 7);
  EXPECT_EQ(timeout.column, 20);
  EXPECT_NE(error_for(result.errors, "runtime.log_level").message.find("trace, debug, info, warn, error"),
            std::string::npos);
}

TEST(RuntimeConfig, EmbeddedTopicsAndSeedsAreValidated) {
  auto result = parse(R"([broker.embedded]
topics = ["ok", "not ok"]
partitions = 0
[[broker.embedded.seed]]
topic = "other"
file = "x.jsonl"
[[broker.embedded.seed]]
topic = "ok"
[sinks]
dir = "s"
)");
  EXPECT_FALSE(result.config);
  EXPECT_EQ(result.errors.size(), 4u) << dump(result.errors);
  error_for(result.errors, "broker.embedded.topics[1]");
  error_for(result.errors, "broker.embedded.partitions");
  EXPECT_EQ(error_for(result.errors, "broker.embedded.seed[0].topic").message,
            "seed topic 'other' is not in [broker.embedded] topics");
  EXPECT_EQ(error_for(result.errors, "broker.embedded.seed[1].file").message, "missing required key 'file'");
}

TEST(RuntimeConfig, ManagedClientPropertiesAreRejected) {
  auto result = parse(R"([broker]
bootstrap_servers = "h:1"
[broker.properties]
"enable.auto.commit" = true
"sasl.mechanism" = "PLAIN"
[sinks]
dir = "s"
)");
  EXPECT_FALSE(result.config);
  ASSERT_EQ(result.errors.size(), 1u) << dump(result.errors);
  EXPECT_EQ(result.errors[0].key, "broker.properties.\"enable.auto.commit\"");
}

TEST(RuntimeConfig, GroupProtocolIsAutoConsumerOrClassicAndConsumerRefusesWhatKip848Cannot) {
  auto config_with = [](std::string_view broker_lines) {
    return parse("[broker]\nbootstrap_servers = \"h:1\"\n" + std::string(broker_lines) + "[sinks]\ndir = \"s\"\n");
  };
  for (auto [text, want] : {std::pair{"auto", GroupProtocol::Auto}, std::pair{"consumer", GroupProtocol::Consumer},
                            std::pair{"classic", GroupProtocol::Classic}}) {
    auto result = config_with("group_protocol = \"" + std::string(text) + "\"\n");
    ASSERT_TRUE(result.config) << dump(result.errors);
    EXPECT_EQ(result.config->group_protocol, want) << text;
  }
  auto bad = config_with("group_protocol = \"eager\"\n");
  EXPECT_NE(error_for(bad.errors, "broker.group_protocol").message.find("\"auto\", \"consumer\" or \"classic\""),
            std::string::npos)
      << dump(bad.errors);
  // KIP-848 has the broker decide the session timeout and the assignor: librdkafka refuses them.
  auto classic_property =
      config_with("group_protocol = \"consumer\"\n[broker.properties]\n\"session.timeout.ms\" = 30000\n");
  EXPECT_FALSE(classic_property.config);
  EXPECT_NE(error_for(classic_property.errors, "broker.group_protocol").message.find("'session.timeout.ms'"),
            std::string::npos)
      << dump(classic_property.errors);
  auto fenced = config_with("group_instance_id = \"host-a\"\ngroup_protocol = \"consumer\"\n");
  EXPECT_NE(error_for(fenced.errors, "broker.group_protocol").message.find("UNRELEASED_INSTANCE_ID"), std::string::npos)
      << dump(fenced.errors);
  // The librdkafka property is the runtime's to set.
  auto managed = config_with("[broker.properties]\n\"group.protocol\" = \"consumer\"\n");
  EXPECT_NE(error_for(managed.errors, "broker.properties.\"group.protocol\"").message.find("set group_protocol"),
            std::string::npos)
      << dump(managed.errors);
}

TEST(RuntimeConfig, InterpolatesStringValues) {
  auto env = fake_env({{"KAFKA", "k1:9092,k2:9092"}, {"SASL_PASSWORD", "pw"}, {"STATE", "/var/lib/picomq"}});
  auto result = parse(R"([broker]
bootstrap_servers = "${KAFKA}"
[broker.properties]
"sasl.password" = "${SASL_PASSWORD}"
[sinks]
dir = "${STATE}/sinks.d"
)",
                      env);
  ASSERT_TRUE(result.config) << dump(result.errors);
  EXPECT_EQ(result.config->bootstrap_servers, "k1:9092,k2:9092");
  EXPECT_EQ(result.config->client_properties[0].second, "pw");
  EXPECT_EQ(result.config->sinks_dir, std::filesystem::path("/var/lib/picomq/sinks.d"));
  auto unset = parse("[broker]\nbootstrap_servers = \"${KAFKA}\"\n[sinks]\ndir = \"s\"\n");
  EXPECT_EQ(unset.errors.size(), 1u) << dump(unset.errors);
  EXPECT_EQ(error_for(unset.errors, "broker.bootstrap_servers").to_string(),
            "runtime.toml:2:21: key 'broker.bootstrap_servers': environment variable 'KAFKA' is not set");
}

TEST(RuntimeConfig, ApiTableAndLogFormat) {
  auto env = fake_env({{"TOKEN", "t0k"}});
  auto result = parse(R"([broker]
bootstrap_servers = "k:9092"
[sinks]
dir = "s"
[runtime]
log_format = "json"
[api]
enabled = true
listen = "0.0.0.0:9100"
token = "${TOKEN}"
tls_cert = "api.crt"
tls_key = "api.key"
watch_sinks_dir = false
)",
                      env);
  ASSERT_TRUE(result.config) << dump(result.errors);
  const auto& c = *result.config;
  EXPECT_EQ(c.log_format, "json");
  EXPECT_TRUE(c.api.enabled);
  EXPECT_EQ(c.api.host, "0.0.0.0");
  EXPECT_EQ(c.api.port, 9100);
  EXPECT_EQ(c.api.token, "t0k");
  EXPECT_EQ(c.api.tls_cert, std::filesystem::path("/etc/picomq/api.crt"));
  EXPECT_FALSE(c.api.watch_sinks_dir);

  auto defaults = parse("[broker]\nbootstrap_servers = \"k:9092\"\n[sinks]\ndir = \"s\"\n");
  ASSERT_TRUE(defaults.config);
  EXPECT_FALSE(defaults.config->api.enabled) << "off unless asked for";
  EXPECT_EQ(defaults.config->api.host, "127.0.0.1");
  EXPECT_EQ(defaults.config->log_format, "text");

  auto bad = parse(R"([broker]
bootstrap_servers = "k:9092"
[sinks]
dir = "s"
[runtime]
log_format = "xml"
[api]
listen = "9100"
token = ""
tls_cert = "a.crt"
)");
  EXPECT_EQ(error_for(bad.errors, "runtime.log_format").message,
            "'log_format' must be \"text\" or \"json\", got \"xml\"");
  EXPECT_EQ(error_for(bad.errors, "api.listen").line, 8);
  EXPECT_NE(error_for(bad.errors, "api.token").message.find("must not be empty"), std::string::npos);
  EXPECT_NE(error_for(bad.errors, "api").message.find("'tls_cert' and 'tls_key' go together"), std::string::npos)
      << dump(bad.errors);
}

TEST(RuntimeConfig, SyntaxErrorIsOneError) {
  auto result = parse("[broker\nbootstrap_servers = 1\n");
  ASSERT_EQ(result.errors.size(), 1u) << dump(result.errors);
  EXPECT_EQ(result.errors[0].line, 1);
  EXPECT_TRUE(result.errors[0].key.empty());
}

TEST(RuntimeConfig, LoadResolvesAgainstTheConfigFolder) {
  testing::TempDir dir;
  auto file = dir.write("conf/runtime.toml",
                        std::string(kEmbeddedExample) + "[runtime]\nstatus_file = \"state/status.json\"\n");
  auto result = load_runtime_config(file, fake_env());
  ASSERT_TRUE(result.config) << dump(result.errors);
  EXPECT_EQ(result.config->file, file.string());
  EXPECT_EQ(result.config->sinks_dir, dir.path() / "conf/sinks.d");
  EXPECT_EQ(result.config->status_file, dir.path() / "conf/state/status.json");
  EXPECT_EQ(result.config->embedded_seeds[0].file, (dir.path() / "conf/orders.eu.jsonl").string());
  auto missing = load_runtime_config(dir.path() / "nope.toml", fake_env());
  ASSERT_EQ(missing.errors.size(), 1u);
  EXPECT_NE(missing.errors[0].message.find("cannot open file"), std::string::npos);
}

}  // namespace
}  // namespace picomq::config
