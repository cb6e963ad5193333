// Example: Arrow at the sink boundary, the spec's third shape. The sink accepts rows, batches
// and Arrow, all native: on the Arrow plane it writes each record batch as CSV, one column per
// Arrow column (metadata columns first, then the payload's fields as docs/arrow.md infers
// them), with a header line whenever the columns change; rows and batches (what it would get
// from a runtime that cannot export Arrow) are written as id and raw payload.
#include <cstdio>
#include <picomq/sdk.hpp>
#include <string>

namespace sdk = picomq::sdk;

class ArrowCsvSink : public sdk::BaseSink<ArrowCsvSink> {
 public:
  static constexpr std::string_view sink_name = "example_arrow_csv";
  static constexpr std::string_view description = "Writes Arrow batches as CSV files (SDK example).";
  static constexpr std::array accepted_data_planes{sdk::DataPlane::Rows, sdk::DataPlane::Batches,
                                                   sdk::DataPlane::Arrow};
  static constexpr std::array native_data_planes = accepted_data_planes;
  static constexpr std::array options{
      pmq_option{"path", PMQ_OPTION_STRING, PMQ_OPTION_REQUIRED, nullptr, nullptr, "The CSV file to append to."},
  };

  void open(const sdk::Config& config) {
    file_ = std::fopen(config.string("path").c_str(), "a");
    if (!file_) throw sdk::FatalError("cannot open " + config.string("path"));
  }

  void write(const sdk::Record& record) { append(plain_line(record)); }

  void write_batch(const sdk::Batch& batch) {
    std::string out;
    for (const sdk::Record& r : batch) out += plain_line(r);
    append(out);
  }

  void write_arrow_batch(const sdk::ArrowBatch& batch) {
    const sdk::ArrowBatchView view = batch.view();
    std::string out, header;
    for (size_t c = 0; c < view.num_columns(); ++c)
      header += (c ? "," : "") + quote(std::string(view.column(c).name()));
    if (header != header_) out += (header_ = header) + "\n";
    for (size_t row = 0; row < view.num_rows(); ++row) {
      for (size_t c = 0; c < view.num_columns(); ++c) out += (c ? "," : "") + cell(view.column(c), row);
      out += "\n";
    }
    append(out);
  }

  void close() {
    if (file_) std::fclose(file_);
  }

 private:
  static std::string quote(const std::string& s) {
    std::string q = "\"";
    for (char ch : s) q += ch == '"' ? std::string("\"\"") : std::string(1, ch);
    return q + "\"";
  }
  static std::string cell(const sdk::ColumnView& col, size_t row) {
    if (col.is_null(row)) return "";
    switch (col.type()) {
      case sdk::ColumnType::Bool: return col.as_bool(row) ? "true" : "false";
      case sdk::ColumnType::Int32: return std::to_string(col.as_int32(row));
      case sdk::ColumnType::Int64: return std::to_string(col.as_int64(row));
      case sdk::ColumnType::Float64: return std::to_string(col.as_double(row));
      case sdk::ColumnType::TimestampMs: return std::to_string(col.as_timestamp_ms(row));
      case sdk::ColumnType::Utf8: return quote(std::string(col.as_string(row)));
      default: return quote("<" + std::string(col.format()) + ">");  // binary keys, header maps
    }
  }
  static std::string plain_line(const sdk::Record& r) {
    return quote(std::string(r.topic()) + ":" + std::to_string(r.partition()) + ":" + std::to_string(r.offset())) +
           "," + quote(r.is_tombstone() ? "" : std::string(r.payload_text())) + "\n";
  }
  void append(const std::string& text) {
    if (std::fputs(text.c_str(), file_) < 0 || std::fflush(file_) != 0)
      throw sdk::PartialWriteError("cannot append to the CSV file");
  }

  std::FILE* file_ = nullptr;
  std::string header_;
};

PICOMQ_SINK_PLUGIN(ArrowCsvSink)
