// The stdout sink in the conformance suite: what it wrote is the runtime's own standard output
// (the harness sends it to <run dir>/stdout.log), one JSON object per record.
#include "conformance.h"

namespace picomq::conformance {
namespace {

class StdoutAdapter final : public SinkAdapter {
 public:
  std::string name() const override { return "stdout"; }
  std::string plugin() const override { return "libpicomq_connector_stdout_sink"; }
  Capabilities capabilities() const override {
    Capabilities c;
    c.deduplicates_replays = false;  // a stream cannot take a line back
    c.destinations_per_topic = false;
    c.binary_keys = false;  // JSON: base64
    c.no_failure_injection =
        "stdout writes to the runtime's own standard output, which a test cannot make fail while the runtime "
        "runs (how the runtime retries or stops on a failed write is covered for every plane by the "
        "Planes/PlaneOutcome integration tests)";
    c.no_rejection = "the stdout sink can print every decoded payload and refuses none";
    return c;
  }
  std::string prepare(const std::string&, const std::string&) override { return "include_metadata = true"; }

  std::vector<WrittenRecord> read_back(const std::vector<Runtime*>& runs) override {
    std::vector<WrittenRecord> out;
    for (const Runtime* rt : runs) {
      for (const auto& line : test::read_lines(rt->dir() / "stdout.log")) {
        out.push_back(from_envelope(nlohmann::json::parse(line), "stdout"));
      }
    }
    return out;
  }
  bool legal_destination(const std::string& name) const override { return name == "stdout"; }
};

PICOMQ_CONFORMANCE_ADAPTER(StdoutAdapter);

}  // namespace

}  // namespace picomq::conformance
