// Counting sink for bench/planes.sh: one source, three plugins, one native data plane each
// (compile definitions, see bench/plugins/CMakeLists.txt):
//
//   PICOMQ_BENCH_PLANE_ROWS     libpicomq_connector_bench_rows_sink     rows only
//   PICOMQ_BENCH_PLANE_BATCHES  libpicomq_connector_bench_batches_sink  rows + batches
//   PICOMQ_BENCH_PLANE_ARROW    libpicomq_connector_bench_arrow_sink    rows + arrow
//
// The runtime delivers on the best native plane, so each plugin sees every batch on its own
// plane. The sink writes nothing; it reads what a real sink would have to read, so the planes
// are compared on equal terms:
//   rows, batches  every payload byte (summed) and every offset;
//   arrow          every column of every row once, through sdk::ArrowBatchView (int, timestamp
//                  and double values summed, string/binary lengths summed, bools and nulls
//                  counted, map entries walked).
// With `report_path` set, close() writes one line there: "records=<n> bytes=<n> checksum=<n>"
// (bytes: payload bytes on rows/batches, string and binary bytes on arrow).
#include <bit>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <picomq/sdk.hpp>
#include <string>

namespace sdk = picomq::sdk;

#if defined(PICOMQ_BENCH_PLANE_ROWS)
#define PICOMQ_BENCH_NAME "bench_rows"
#define PICOMQ_BENCH_PLANES sdk::DataPlane::Rows
#elif defined(PICOMQ_BENCH_PLANE_BATCHES)
#define PICOMQ_BENCH_NAME "bench_batches"
#define PICOMQ_BENCH_PLANES sdk::DataPlane::Rows, sdk::DataPlane::Batches
#elif defined(PICOMQ_BENCH_PLANE_ARROW)
#define PICOMQ_BENCH_NAME "bench_arrow"
#define PICOMQ_BENCH_PLANES sdk::DataPlane::Rows, sdk::DataPlane::Arrow
#else
#error "define one of PICOMQ_BENCH_PLANE_ROWS, PICOMQ_BENCH_PLANE_BATCHES, PICOMQ_BENCH_PLANE_ARROW"
#endif

class CountingSink : public sdk::BaseSink<CountingSink> {
 public:
  static constexpr std::string_view sink_name = PICOMQ_BENCH_NAME;
  static constexpr std::string_view description =
      "Counts records and reads them like a real sink would, writes nothing (bench/planes.sh).";
  static constexpr std::array accepted_data_planes{PICOMQ_BENCH_PLANES};
  static constexpr std::array native_data_planes = accepted_data_planes;
  static constexpr std::array options{
      pmq_option{"report_path", PMQ_OPTION_STRING, 0, nullptr, nullptr,
                 "On close, write 'records=<n> bytes=<n> checksum=<n>' to this file."},
  };

  void open(const sdk::Config& config) {
    if (config.has("report_path")) report_path_ = config.string("report_path");
  }

  // Every variant declares rows native: the fallback plane, and the whole path of the rows one.
  void write(const sdk::Record& record) { count(record); }

#if defined(PICOMQ_BENCH_PLANE_BATCHES)
  void write_batch(const sdk::Batch& batch) {
    for (const sdk::Record& record : batch) count(record);
  }
#endif

#if defined(PICOMQ_BENCH_PLANE_ARROW)
  void write_arrow_batch(const sdk::ArrowBatch& batch) {
    const sdk::ArrowBatchView view = batch.view();
    const size_t rows = view.num_rows();
    if (rows != batch.size()) throw sdk::FatalError("arrow batch: num_rows differs from record_count");
    for (size_t c = 0; c < view.num_columns(); ++c) read_column(view.column(c), rows);
    records_ += rows;
  }
#endif

  void close() {
    if (report_path_.empty()) return;
    std::FILE* f = std::fopen(report_path_.c_str(), "w");
    if (!f) throw std::runtime_error("cannot write " + report_path_ + ": " + std::strerror(errno));
    std::fprintf(f, "records=%llu bytes=%llu checksum=%llu\n", static_cast<unsigned long long>(records_),
                 static_cast<unsigned long long>(bytes_), static_cast<unsigned long long>(checksum_));
    std::fclose(f);
  }

 private:
  void count(const sdk::Record& record) {
    ++records_;
    checksum_ += static_cast<uint64_t>(record.offset());
    if (record.is_tombstone()) return;
    const sdk::Bytes payload = record.payload();
    bytes_ += payload.size();
    uint64_t sum = 0;
    for (uint8_t b : payload) sum += b;
    checksum_ += sum;
  }

#if defined(PICOMQ_BENCH_PLANE_ARROW)
  // One pass over a column's rows; nested columns (maps, structs) walk their children.
  void read_column(const sdk::ColumnView& column, size_t rows) {
    using sdk::ColumnType;
    uint64_t sum = 0, nulls = 0;
    switch (column.type()) {
      case ColumnType::Null: nulls += rows; break;
      case ColumnType::Bool:
        for (size_t r = 0; r < rows; ++r) {
          if (column.is_null(r)) ++nulls;
          else sum += column.as_bool(r);
        }
        break;
      case ColumnType::Int32:
        for (size_t r = 0; r < rows; ++r) {
          if (column.is_null(r)) ++nulls;
          else sum += static_cast<uint64_t>(column.as_int32(r));
        }
        break;
      case ColumnType::Int64:
        for (size_t r = 0; r < rows; ++r) {
          if (column.is_null(r)) ++nulls;
          else sum += static_cast<uint64_t>(column.as_int64(r));
        }
        break;
      case ColumnType::TimestampMs:
        for (size_t r = 0; r < rows; ++r) {
          if (column.is_null(r)) ++nulls;
          else sum += static_cast<uint64_t>(column.as_timestamp_ms(r));
        }
        break;
      case ColumnType::Float64: {
        double total = 0;
        for (size_t r = 0; r < rows; ++r) {
          if (column.is_null(r)) ++nulls;
          else total += column.as_double(r);
        }
        sum += std::bit_cast<uint64_t>(total);
        break;
      }
      case ColumnType::Utf8:
      case ColumnType::LargeUtf8:
      case ColumnType::Binary:
      case ColumnType::LargeBinary:
        for (size_t r = 0; r < rows; ++r) {
          if (column.is_null(r)) {
            ++nulls;
            continue;
          }
          const size_t size = column.as_bytes(r).size;
          bytes_ += size;
          sum += size;
        }
        break;
      case ColumnType::Map:
        for (size_t r = 0; r < rows; ++r) {
          for (const auto& [key, value] : column.entries(r)) {
            sum += key.size();
            bytes_ += key.size();
            if (value) {
              sum += value->size;
              bytes_ += value->size;
            } else {
              ++nulls;
            }
          }
        }
        break;
      case ColumnType::Struct:
        for (size_t r = 0; r < rows; ++r) nulls += column.is_null(r);
        for (size_t c = 0; c < column.num_children(); ++c) read_column(column.child(c), rows);
        break;
      case ColumnType::Other:
        throw sdk::FatalError("column '" + std::string(column.name()) +
                              "' has a type this sink cannot read: " + std::string(column.format()));
    }
    checksum_ += sum + nulls;
  }
#endif

  std::string report_path_;
  uint64_t records_ = 0;
  uint64_t bytes_ = 0;
  uint64_t checksum_ = 0;
};

PICOMQ_SINK_PLUGIN(CountingSink)
