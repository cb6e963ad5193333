// TLS and SASL to the broker: a Kafka of the test's own with a SASL_SSL listener (SCRAM-SHA-512,
// certificates made here with openssl), the runtime and its dead-letter producer through it, and
// wrong credentials stopping the sink at start with a clear message and no secret in the log.
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>

#include <fstream>

#include "harness.h"
#include "picomq/kit/testing/shell.hpp"

namespace picomq::test {
namespace {

using kit::testing::run_shell;
using kit::testing::shell_quote;

const std::string kUser = "picomq-connect";
const std::string kPassword = "scram-Pw-4be1c9";  // the broker's SCRAM credential
const std::string kWrongPassword = "not-the-Pw-77a0";

// A CA, and a broker certificate it signs for 127.0.0.1 (the advertised host).
std::filesystem::path make_certificates(const std::filesystem::path& dir) {
  const std::string d = shell_quote(dir.string());
  run_shell("(cd " + d +
            " && openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=picomq-test-ca -keyout ca.key -out ca.pem"
            " && openssl req -newkey rsa:2048 -nodes -subj /CN=127.0.0.1 -keyout broker.key -out broker.csr"
            " && printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\\n' > san.ext"
            " && openssl x509 -req -in broker.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 -extfile san.ext"
            " -out broker.pem"
            " && openssl pkcs8 -topk8 -nocrypt -in broker.key -out broker.pk8"
            " && cat broker.pk8 broker.pem ca.pem > broker-keystore.pem) 2>&1");
  return dir / "ca.pem";
}

class SecureKafka {
 public:
  SecureKafka() : dir_(make_temp_dir("picomq-kafka-secure")), kafka_(dir_ / "broker", free_port()) {
    ca_ = make_certificates(dir_);
    secure_port_ = free_port();
    const auto extra = dir_ / "secure.properties";
    const std::string plain = kafka_.bootstrap();
    const int port = std::stoi(plain.substr(plain.rfind(':') + 1));
    std::ofstream(extra)
        << "listeners=PLAINTEXT://127.0.0.1:" << port << ",CONTROLLER://127.0.0.1:" << port + 1
        << ",SASL_SSL://127.0.0.1:" << secure_port_ << "\n"
        << "advertised.listeners=PLAINTEXT://127.0.0.1:" << port << ",SASL_SSL://127.0.0.1:" << secure_port_ << "\n"
        << "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SASL_SSL:SASL_SSL\n"
        << "sasl.enabled.mechanisms=SCRAM-SHA-512\n"
        << "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config="
           "org.apache.kafka.common.security.scram.ScramLoginModule required;\n"
        << "ssl.keystore.type=PEM\n"
        << "ssl.keystore.location=" << (dir_ / "broker-keystore.pem").string() << "\n";
    setenv("PICOMQ_KAFKA_EXTRA_PROPERTIES", extra.c_str(), 1);
    setenv("PICOMQ_KAFKA_FORMAT_ARGS",
           ("--add-scram SCRAM-SHA-512=[name=" + kUser + ",password=" + kPassword + "]").c_str(), 1);
    kafka_.start();
    unsetenv("PICOMQ_KAFKA_EXTRA_PROPERTIES");
    unsetenv("PICOMQ_KAFKA_FORMAT_ARGS");
  }
  ~SecureKafka() { kafka_.stop(); }
  Kafka& plain() { return kafka_; }  // the harness's own client: PLAINTEXT
  std::string secure_bootstrap() const { return "127.0.0.1:" + std::to_string(secure_port_); }
  // [broker.properties] for SASL_SSL, the password through ${KAFKA_PASSWORD}.
  std::string client_properties() const {
    return "[broker.properties]\n\"security.protocol\" = \"SASL_SSL\"\n\"sasl.mechanisms\" = \"SCRAM-SHA-512\"\n"
           "\"sasl.username\" = \"" +
           kUser + "\"\n\"sasl.password\" = \"${KAFKA_PASSWORD}\"\n\"ssl.ca.location\" = \"" + ca_.string() + "\"\n";
  }

 private:
  std::filesystem::path dir_;
  Kafka kafka_;
  std::filesystem::path ca_;
  int secure_port_ = 0;
};

TEST(Security, SaslScramOverTlsCarriesTheSinkAndItsDeadLetterProducerAndWrongCredentialsStopItClearly) {
  SecureKafka kafka;
  const auto topic = unique_name("secure");
  const auto dead = unique_name("secure-dead");
  kafka.plain().create_topic(topic);
  kafka.plain().create_topic(dead);
  kafka.plain().produce_values(topic, {R"({"n":0})", R"({"n":1})", "not json", R"({"n":3})"});

  Runtime rt(kafka.secure_bootstrap(), "secure");
  rt.env("KAFKA_PASSWORD", kPassword);
  rt.broker_settings(kafka.client_properties());
  rt.add_definition("s.toml", testkit_definition("secure",
                                                 "topics = [\"" + topic +
                                                     "\"]\non_bad_record = \"dead_letter\"\n"
                                                     "dead_letter_topic = \"" +
                                                     dead + "\"",
                                                 testkit_config(rt)));
  rt.start();
  ASSERT_TRUE(wait_until([&] { return kafka.plain().committed("picomq-connect-sink-secure", topic) == 4; }, 60s))
      << rt.log();
  EXPECT_EQ(TestkitLog::read(rt.dir() / "records.log").ids.size(), 3u);
  const auto dead_lettered = kafka.plain().consume(dead, 1, 30s);
  ASSERT_EQ(dead_lettered.size(), 1u) << "the dead-letter producer went through SASL_SSL too\n" << rt.log();
  EXPECT_EQ(dead_lettered[0].value, "not json");
  rt.signal(SIGTERM);
  EXPECT_EQ(rt.wait_exit(30s), 0);
  EXPECT_EQ(rt.log().find(kPassword), std::string::npos) << "the password is never logged";

  // Wrong credentials: the sink stops in error at start, saying what the broker refused.
  Runtime wrong(kafka.secure_bootstrap(), "secure-wrong");
  wrong.env("KAFKA_PASSWORD", kWrongPassword);
  wrong.broker_settings(kafka.client_properties());
  wrong.add_definition("s.toml", testkit_definition("secure", "topics = [\"" + topic + "\"]", testkit_config(wrong)));
  wrong.start();
  ASSERT_TRUE(wrong.wait_state("secure", "error", 60s)) << wrong.log();
  const auto message = wrong.sink_status("secure").value("message", "");
  std::printf("[ NOTE ] wrong credentials: %s\n", message.c_str());
  EXPECT_NE(message.find("refused the client's credentials"), std::string::npos) << message;
  EXPECT_NE(message.find("sasl.password"), std::string::npos) << "says where to look: " << message;
  EXPECT_EQ(wrong.wait_exit(30s), 1) << "no sink can make progress\n" << wrong.log();
  EXPECT_EQ(wrong.log().find(kWrongPassword), std::string::npos) << "the password is never logged\n" << wrong.log();
}

}  // namespace
}  // namespace picomq::test
