#pragma once
// Records as points (pure, no I/O): the mapping of docs/sinks/influxdb.md "Mapping".
//   measurement  the template resolved for the topic, or the string at measurement_field
//   tags         listed payload fields, the record key (tag_key), headers (tag_headers),
//                metadata (tag_metadata: pico_topic, pico_partition, pico_offset)
//   fields       listed payload fields, or every remaining scalar (nested objects flattened with
//                field_separator, arrays by index); integers `i` (`u` above 2^63-1, not on v1),
//                other numbers floats, booleans, strings
//   time         timestamp_field (epoch number in timestamp_unit, or an RFC 3339 string), or the
//                record timestamp; in the write's precision
// A record that cannot be a point (payload not a JSON object, no field, no or a bad time, a tag
// that is an object, a name line protocol cannot carry) is refused with the reason.
#include <simdjson.h>

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "influxdb/config.h"
#include "picomq/sink_abi.h"

namespace picomq::influxdb {

// A batch's points: one line per accepted record, in record order, in one text.
struct BatchLines {
  std::string text;
  struct Line {
    size_t record;        // index in the batch
    size_t offset, size;  // in text, with the '\n'
  };
  std::vector<Line> lines;
  std::vector<std::pair<size_t, std::string>> refused;  // record index, reason
  size_t skipped = 0;                                   // tombstones (no payload): nothing to write
  std::string_view line(size_t i) const { return std::string_view(text).substr(lines[i].offset, lines[i].size); }
};

class PointMapper {
 public:
  explicit PointMapper(const Plan& plan);

  // `measurement`: the template resolved for the batch's topic (unused with measurement_field).
  // Thread-safe (const): batches may be mapped side by side.
  BatchLines map(const pmq_batch& batch, std::string_view measurement) const;

  // What mapping reuses from record to record (a point, names, number texts), so that a record
  // costs no allocation once it is warm. One per thread.
  class Scratch {
   public:
    PointView point;
    std::string name, dotted;  // of the field being flattened
    // A string that lives until the next record (a flattened name, a number as tag text).
    std::string_view keep(std::string_view text);
    void next_record();

   private:
    std::vector<std::unique_ptr<std::string>> texts_;
    size_t used_ = 0;
  };

  // One record into `out` (a line), or the reason it cannot be a point.
  std::optional<std::string> append(std::string& out, const pmq_batch& batch, const pmq_record& r,
                                    std::string_view measurement, simdjson::dom::parser& parser,
                                    Scratch& scratch) const;

 private:
  struct Path {
    std::vector<std::string> parts;  // the dotted path split at '.'
    std::string name;                // parts joined with field_separator
    std::string dotted;
  };
  Path path(const std::string& dotted) const;
  // Adds `e` as field(s) named scratch.name (flattened below it; `stable_name` is that name when it
  // outlives the record's point already, else empty); skips the dotted paths in used_.
  void flatten(simdjson::dom::element e, Scratch& scratch, std::string_view stable_name) const;
  bool used(std::string_view dotted) const;

  Settings settings_;
  std::vector<Path> tags_, fields_;
  std::optional<Path> measurement_field_, timestamp_field_;
  std::vector<std::string> used_;  // dotted paths the tags / measurement / time took
  bool unsigned_ok_;
};

}  // namespace picomq::influxdb
