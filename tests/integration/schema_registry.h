#pragma once
// The test schema registry (tests/decoders_data/schema_registry.sh): the Confluent REST API
// subset that Karapace implements, one per test, on a free port. State survives a stop/start
// (an outage). Payloads framed by confluent-kafka's AvroSerializer, which registers their
// schemas here, come from tests/decoders_data/make_payloads.py --registry.
#include <filesystem>
#include <string>

namespace picomq::test {

class SchemaRegistry {
 public:
  SchemaRegistry();
  ~SchemaRegistry();
  void start();
  void stop();
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  // The folder of the framed payloads (order.bin, ping1.bin, ping2.bin: see make_payloads.py).
  std::filesystem::path encode();
  // The writer schema registered under `id` (its JSON text as the registry serves it).
  std::string schema(int id);
  // GET /schemas/ids/<id> requests the registry served.
  size_t id_lookups();

 private:
  std::filesystem::path dir_;
  int port_;
};

}  // namespace picomq::test
