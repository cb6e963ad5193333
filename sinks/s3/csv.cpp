#include "s3/csv.h"

#include <simdjson.h>

#include "picomq/kit/encoding.hpp"
#include "picomq/kit/headers.hpp"

namespace picomq::s3 {

struct CsvEncoder::Parser {
  simdjson::dom::parser parser;
};

CsvEncoder::CsvEncoder(std::vector<std::string> columns)
    : columns_(std::move(columns)), parser_(std::make_unique<Parser>()) {}
CsvEncoder::~CsvEncoder() = default;
CsvEncoder::CsvEncoder(CsvEncoder&&) noexcept = default;
CsvEncoder& CsvEncoder::operator=(CsvEncoder&&) noexcept = default;

void append_csv_cell(std::string& out, std::string_view field) {
  if (field.find_first_of(",\"\r\n") == std::string_view::npos) {
    out.append(field);
    return;
  }
  out += '"';
  for (char c : field) {
    if (c == '"') out += '"';
    out += c;
  }
  out += '"';
}

std::string CsvEncoder::header() const {
  std::string out;
  for (size_t i = 0; i < columns_.size(); ++i) {
    if (i) out += ',';
    append_csv_cell(out, columns_[i]);
  }
  out += '\n';
  return out;
}

std::optional<std::string> CsvEncoder::append(std::string& out, const pmq_batch& batch, const pmq_record& r) {
  simdjson::dom::object object;
  bool parsed = false;
  auto payload = [&]() -> std::optional<std::string> {
    if (parsed) return std::nullopt;
    parsed = true;
    if (!r.payload.data) return "csv: a tombstone (null payload) has no fields for the columns";
    if (batch.payload_format != PMQ_PAYLOAD_JSON)
      return "csv: the payload is not JSON (the topic's schema is not json)";
    if (parser_->parser.parse(reinterpret_cast<const char*>(r.payload.data), r.payload.size).get_object().get(object))
      return "csv: the payload is not a JSON object";
    return std::nullopt;
  };
  const size_t start = out.size();
  std::string cell;
  for (size_t i = 0; i < columns_.size(); ++i) {
    if (i) out += ',';
    const std::string& c = columns_[i];
    cell.clear();
    if (c == "pico_topic") cell = batch.topic;
    else if (c == "pico_partition") cell = std::to_string(batch.partition);
    else if (c == "pico_offset") cell = std::to_string(r.offset);
    else if (c == "pico_timestamp") cell = std::to_string(r.timestamp_ms);
    else if (c == "pico_key") {
      if (r.key.data) cell = kit::base64_encode({r.key.data, r.key.size});
    } else if (c == "pico_headers") {
      if (r.header_count) kit::append_headers_json(cell, {r.headers, r.header_count});
    } else {
      if (auto problem = payload()) {
        out.resize(start);
        return problem;
      }
      simdjson::dom::element v;
      if (!object[c].get(v)) {
        switch (v.type()) {
          case simdjson::dom::element_type::STRING: cell = std::string(v.get_string().value()); break;
          case simdjson::dom::element_type::NULL_VALUE: break;
          default: cell = simdjson::minify(v); break;
        }
      }
    }
    append_csv_cell(out, cell);
  }
  out += '\n';
  return std::nullopt;
}

}  // namespace picomq::s3
