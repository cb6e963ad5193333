// Example: the spec's minimum shape. Rows only: write() appends one JSON line per record to a
// file, flushed before it returns (so OK means written). Each line carries the record id
// topic:partition:offset, so a reader can drop what a replay writes twice.
#include <cstdio>
#include <picomq/kit/metadata.hpp>  // record_id: header-only
#include <picomq/sdk.hpp>
#include <string>

namespace sdk = picomq::sdk;

class JsonlSink : public sdk::BaseSink<JsonlSink> {
 public:
  static constexpr std::string_view sink_name = "example_jsonl";
  static constexpr std::string_view description = "Appends one JSON line per record to a file (SDK example).";
  static constexpr std::array options{
      pmq_option{"path", PMQ_OPTION_STRING, PMQ_OPTION_REQUIRED, nullptr, nullptr, "The file to append to."},
  };

  void open(const sdk::Config& config) {
    file_ = std::fopen(config.string("path").c_str(), "a");
    if (!file_) throw sdk::FatalError("cannot open " + config.string("path"));
  }

  void write(const sdk::Record& record) {
    // topic:partition:offset; JSON-safe here only for topics without '"' or '\\' (a real sink
    // escapes it: picomq/kit/encoding.hpp, or the kit's record JSON writer).
    std::string line =
        "{\"id\":\"" + picomq::kit::record_id(record.topic(), record.partition(), record.offset()) + "\",\"payload\":";
    // A JSON payload is embedded as is; this example leaves other formats out.
    if (record.is_tombstone() || record.format() != sdk::PayloadFormat::Json) line += "null";
    else line += record.payload_text();
    line += "}\n";
    if (std::fputs(line.c_str(), file_) < 0 || std::fflush(file_) != 0)
      throw sdk::RetryableError("cannot append to the file");  // nothing of this line counts as written
  }

  void close() {
    if (file_) std::fclose(file_);
  }

 private:
  std::FILE* file_ = nullptr;
};

PICOMQ_SINK_PLUGIN(JsonlSink)
