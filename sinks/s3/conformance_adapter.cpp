// The S3 sink in the conformance suite: a fresh bucket per test on the test run's SeaweedFS 4.48
// server (sinks/s3/server.sh; it verifies SigV4), read back with boto3. The suite's destination
// template is the key's folder ("<target>/{partition}-{start_offset}.{ext}"); every object's
// JSON lines are records in the envelope layout. Credentials come from the standard AWS
// environment variables (set here, inherited by the runtime), so that the permanent failure can
// be a wrong secret in the config.
#include <cstdlib>
#include <stdexcept>

#include "conformance.h"
#include "tests/seaweedfs_server.h"

namespace picomq::conformance {
namespace {

using test::SeaweedfsServer;

class S3Adapter final : public SinkAdapter {
 public:
  std::string name() const override { return "s3"; }
  std::string plugin() const override { return "libpicomq_connector_s3_sink"; }
  Capabilities capabilities() const override {
    Capabilities c;
    // Keys come from each object's first offset and a restart resumes after the object it is
    // in: a replay rewrites the same objects (or skips them), never a second copy.
    c.deduplicates_replays = true;
    c.destinations_per_topic = true;  // the key template's folder, per topic
    c.binary_keys = false;            // JSON lines: base64
    return c;
  }

  // Avro files of a schema whose "n" is a long: a record whose "n" is a string is refused.
  std::string rejecting_config() const override {
    return "format = \"avro\"\navro_schema = "
           "'{\"type\":\"record\",\"name\":\"R\",\"fields\":[{\"name\":\"n\",\"type\":\"long\"},"
           "{\"name\":\"pico_topic\",\"type\":\"string\"},{\"name\":\"pico_partition\",\"type\":\"int\"},"
           "{\"name\":\"pico_offset\",\"type\":\"long\"},{\"name\":\"pico_timestamp\",\"type\":\"long\"}]}'";
  }
  std::string rejected_payload() const override { return R"({"n":"not a number"})"; }

  std::string prepare(const std::string&, const std::string& target) override {
    auto& s3 = SeaweedfsServer::shared();
    setenv("AWS_ACCESS_KEY_ID", SeaweedfsServer::kAccessKey, 1);
    setenv("AWS_SECRET_ACCESS_KEY", SeaweedfsServer::kSecretKey, 1);
    bucket_ = s3.create_bucket("conf");
    // retry_timeout 4s: an outage fails write attempts soon enough (the suite watches the runtime
    // retry them), and the runtime's five attempts then span ~20 s, time for SeaweedFS to start
    // again on a loaded machine (with 1s they spanned ~6 s, and a slow restart ended the sink).
    return "bucket = \"" + bucket_ + "\"\nendpoint = \"" + s3.endpoint() + "\"\nkey_template = \"" + target +
           "/{partition}-{start_offset}.{ext}\"\nretry_timeout = \"4s\"";
  }

  std::vector<WrittenRecord> read_back(const std::vector<Runtime*>&) override {
    std::vector<WrittenRecord> out;
    for (const auto& o : SeaweedfsServer::shared().objects(bucket_)) {
      const std::string destination = o.key.substr(0, o.key.rfind('/'));
      if (o.key.size() > 5 && o.key.compare(o.key.size() - 5, 5, ".avro") == 0) {  // read by fastavro
        const auto file = nlohmann::json::parse(o.text);
        for (const auto& r : file["records"]) {
          nlohmann::json envelope = {{"pico_topic", r["pico_topic"]},
                                     {"pico_partition", r["pico_partition"]},
                                     {"pico_offset", r["pico_offset"]},
                                     {"pico_timestamp", r["pico_timestamp"]},
                                     {"payload", {{"n", r["n"]}}}};
          out.push_back(from_envelope(envelope, destination));
        }
        continue;
      }
      size_t start = 0;
      while (start < o.text.size()) {
        const size_t end = o.text.find('\n', start);
        const std::string line = o.text.substr(start, end == std::string::npos ? std::string::npos : end - start);
        start = end == std::string::npos ? o.text.size() : end + 1;
        if (!line.empty()) out.push_back(from_envelope(nlohmann::json::parse(line), destination));
      }
    }
    return out;
  }

  // An S3 key segment: UTF-8 without control characters, not "." or "..", within 1024 bytes.
  bool legal_destination(const std::string& name) const override {
    if (name.empty() || name.size() > 1024 || name == "." || name == ".." || name.find('/') != std::string::npos)
      return false;
    for (unsigned char c : name)
      if (c < 0x20 || c == 0x7f) return false;
    return true;
  }

  // The server crashes (SIGKILL) and comes back on the same ports with the same data.
  void inject_transient_failure(bool on) override {
    if (on) SeaweedfsServer::shared().kill();
    else SeaweedfsServer::shared().start();
  }
  std::pair<std::string, std::string> permanent_failure_config() const override {
    return {"aws_access_key_id = \"picomq-test\"\naws_secret_access_key = \"not-the-secret\"",
            "S3 refused the credentials"};
  }

 private:
  std::string bucket_;
};

PICOMQ_CONFORMANCE_ADAPTER(S3Adapter);

}  // namespace
}  // namespace picomq::conformance
