#pragma once
// The sink conformance kit: what every sink must show through a real Kafka broker and its real
// destination. A sink takes part by providing a SinkAdapter (how to give it a fresh
// destination, how to read back what it wrote, how to make its writes fail) and declaring its
// Capabilities; the suite (tests/conformance/conformance_test.cpp) runs every case against every
// adapter registered in the executable. Installed as picomq::conformance: an executable of a
// sink outside this tree is its adapter + picomq_add_conformance_test() (or a main() calling
// run()). See tests/conformance/README.md.
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "picomq/kit/testing/harness.hpp"

namespace picomq::conformance {

using test::Runtime;

struct Capabilities {
  // A replayed record is written once (records keyed by topic:partition:offset). Without it a
  // replay writes records again, and the suite checks at-least-once instead.
  bool deduplicates_replays = false;
  // The destination name is a template resolved per topic, and the destination is created on
  // the first batch of a new topic.
  bool destinations_per_topic = false;
  // pico_key is stored as bytes; without it as base64 text (the spec's rule for destinations
  // without a binary type).
  bool binary_keys = false;
  // Empty when inject_transient_failure / permanent_failure_config work; otherwise why the
  // sink has no failure a test can cause (the failure cases are then skipped with this reason).
  std::string no_failure_injection;
  // Empty when rejecting_config / rejected_payload make the sink refuse one record.
  std::string no_rejection;
};

// One record as the sink wrote it, read back from the destination in its own representation.
struct WrittenRecord {
  std::string destination;  // table, index, stream...
  std::string topic;
  int32_t partition = -1;
  int64_t offset = -1;
  std::optional<int64_t> timestamp_ms;
  std::optional<std::string> key;              // bytes with binary_keys, else the stored base64 text
  std::map<std::string, std::string> headers;  // as stored: the UTF-8 text, or base64 of other bytes
  std::optional<std::string> payload_json;     // the payload as JSON text (compared as JSON)
  std::vector<std::string> metadata_fields;    // the pico_* field or column names the record has
};

class SinkAdapter {
 public:
  virtual ~SinkAdapter() = default;
  virtual std::string name() const = 0;    // "postgres"
  virtual std::string plugin() const = 0;  // "libpicomq_connector_postgres_sink"
  virtual Capabilities capabilities() const = 0;

  // Gives the test a fresh destination (e.g. a new database) and returns the [plugin_config]
  // body that writes JSON payloads with metadata there; `target` is the destination template
  // for sinks with destinations_per_topic ("{topic}", "t_{topic_segment[-1]}").
  virtual std::string prepare(const std::string& test_name, const std::string& target) = 0;
  // Everything written in the current destination. `runs` are the runtimes of the test, for
  // sinks whose output lives with the process (stdout).
  virtual std::vector<WrittenRecord> read_back(const std::vector<Runtime*>& runs) = 0;
  // Whether `name` is a destination name the destination system accepts.
  virtual bool legal_destination(const std::string& name) const = 0;

  // While on, every write fails in a way the sink reports as retryable (the destination is
  // unreachable); off, writes succeed again. Called from the test thread while the runtime runs.
  virtual void inject_transient_failure(bool on) { (void)on; }
  // Extra [plugin_config] lines under which every write fails permanently, and a fragment of
  // the Error message the sink then reports.
  virtual std::pair<std::string, std::string> permanent_failure_config() const { return {}; }
  // Extra [plugin_config] lines under which the sink refuses `rejected_payload()` (and takes
  // `{"n": <int>}` payloads).
  virtual std::string rejecting_config() const { return {}; }
  virtual std::string rejected_payload() const { return {}; }
};

// Every adapter the suite runs, by name: one per sink, registered with
// PICOMQ_CONFORMANCE_ADAPTER (in this tree sinks/<name>/conformance_adapter.cpp, joined through
// picomq_add_sink(... CONFORMANCE ...); out of it, the adapter of picomq_add_conformance_test()).
std::vector<std::shared_ptr<SinkAdapter>> all_adapters();

// A record as the kit's record JSON writer renders it in the envelope layout (stdout, HTTP...),
// read back: pico_* fields, pico_key and header values as written, the payload as JSON text.
WrittenRecord from_envelope(const nlohmann::json& envelope, std::string destination);

// A row of a table with typed columns (Delta, Iceberg), read back as JSON by an independent
// reader: pico_* columns (pico_timestamp in epoch ms, pico_key bytes as base64, pico_headers an
// object of base64 values), every other column a payload field; a null column is a field the
// record did not have.
WrittenRecord from_table_row(const nlohmann::json& row, std::string destination);

// For adapters of destinations that keep bytes and show them as base64 (a JSON reader of a
// binary column, MongoDB's $binary): the bytes of RFC 4648 base64 `text` (padding optional).
std::string decode_base64(std::string_view text);
// A header value read back as the bytes the destination holds, as the suite compares it: the text
// when the bytes are valid UTF-8, else their base64 (the spec's rendering where a destination has
// no bytes of its own).
std::string header_as_rendered(const std::string& bytes);

// main() of a conformance executable: every registered adapter through every case. The broker is
// the running one at PICOMQ_CONFORMANCE_BOOTSTRAP (host:port: Apache Kafka, Redpanda, PicoMQ...;
// topics are created with the admin API) or, without it, a fresh Apache Kafka that
// `built_in.kafka_launcher` starts and stops. The environment overrides `built_in` (Locations).
int run(int argc, char** argv, const test::Locations& built_in);

using AdapterFactory = std::shared_ptr<SinkAdapter> (*)();
struct AdapterRegistration {
  explicit AdapterRegistration(AdapterFactory factory);
};

}  // namespace picomq::conformance

// In an adapter's source file, at namespace scope: PICOMQ_CONFORMANCE_ADAPTER(PostgresAdapter)
#define PICOMQ_CONFORMANCE_ADAPTER(Type)                                                          \
  static const ::picomq::conformance::AdapterRegistration picomq_conformance_registration_##Type( \
      []() -> std::shared_ptr<::picomq::conformance::SinkAdapter> { return std::make_shared<Type>(); })
