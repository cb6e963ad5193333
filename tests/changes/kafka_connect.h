#pragma once
// A Kafka Connect standalone worker running one connector, for the change-event tests: the jars
// of tools/kafka-connect/fetch-kafka-connect.sh (Maven Central, once per machine, cached outside
// the clone), the worker's and the connector's properties written into a folder, the JVM a
// child of this process (killed with it).
#include <sys/types.h>

#include <filesystem>
#include <string>

namespace picomq::test {

class KafkaConnect {
 public:
  // `plugin`: a folder of the fetched plugins (e.g. "debezium-connector-postgres").
  KafkaConnect(std::filesystem::path dir, std::string bootstrap, std::string plugin);
  ~KafkaConnect();
  KafkaConnect(const KafkaConnect&) = delete;
  KafkaConnect& operator=(const KafkaConnect&) = delete;

  // Fetches the jars when missing (throws when it cannot), then starts the worker with one
  // connector: `connector` holds its properties, one `key=value` per line (name and class too);
  // `worker` adds lines to the worker's (converters).
  void start(const std::string& connector, const std::string& worker);
  void stop();  // SIGTERM, then SIGKILL after 20 s; idempotent
  std::string log() const;
  // The connector's task died for good.
  bool failed() const;

 private:
  std::filesystem::path dir_;
  std::string bootstrap_;
  std::string plugin_;
  pid_t pid_ = -1;
};

}  // namespace picomq::test
