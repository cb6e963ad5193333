#include "picomq/kit/record_json.hpp"

#include <charconv>
#include <cstring>
#include <optional>
#include <span>

#include "picomq/kit/encoding.hpp"
#include "picomq/kit/headers.hpp"
#include "picomq/kit/metadata.hpp"

namespace picomq::kit {
namespace {

std::string_view view(const pmq_bytes& b) { return {reinterpret_cast<const char*>(b.data), b.size}; }

void append_int(std::string& out, int64_t v) {
  char buf[24];
  auto res = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, res.ptr);
}

void append_field_name(std::string& out, std::string_view name) {
  out += '"';
  out += name;  // the pico_* names and payload_field are plain ASCII: nothing to escape
  out += "\":";
}

bool is_json_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// Appends a json payload, its CR/LF (whitespace only, in valid JSON) turned into spaces.
void append_one_line(std::string& out, std::string_view json) {
  const size_t start = out.size();
  out.append(json);
  // Most payloads have no line break: memchr finds that out at memory speed.
  if (!std::memchr(json.data(), '\n', json.size()) && !std::memchr(json.data(), '\r', json.size())) return;
  for (size_t i = start; i < out.size(); ++i)
    if (out[i] == '\n' || out[i] == '\r') out[i] = ' ';
}

}  // namespace

std::optional<ObjectBody> json_object_body(std::string_view payload) {
  size_t i = 0;
  while (i < payload.size() && is_json_space(payload[i])) ++i;
  if (i == payload.size() || payload[i] != '{') return std::nullopt;
  ++i;
  while (i < payload.size() && is_json_space(payload[i])) ++i;
  if (i == payload.size()) return std::nullopt;
  return ObjectBody{payload.substr(i), payload[i] == '}'};
}

void RecordJsonWriter::append_payload(std::string& out, const pmq_batch& batch, const pmq_record& r) const {
  if (!r.payload.data) {
    out += "null";
    return;
  }
  switch (batch.payload_format) {
    case PMQ_PAYLOAD_JSON:
      if (options_.one_line) append_one_line(out, view(r.payload));
      else out.append(view(r.payload));
      return;
    case PMQ_PAYLOAD_TEXT: append_json_escaped(out, view(r.payload)); return;
    default:
      out += '"';
      append_base64(out, std::span<const uint8_t>(r.payload.data, r.payload.size));
      out += '"';
  }
}

BatchJsonWriter::BatchJsonWriter(const RecordJsonWriter& writer, const pmq_batch& batch)
    : writer_(&writer), batch_(&batch) {
  append_field_name(prefix_, kTopicField);
  append_json_escaped(prefix_, batch.topic);
  prefix_ += ',';
  append_field_name(prefix_, kPartitionField);
  append_int(prefix_, batch.partition);
  prefix_ += ',';
  append_field_name(prefix_, kOffsetField);
}

void BatchJsonWriter::append_metadata(std::string& out, const pmq_record& r) const {
  static constexpr std::string_view kTimestamp = ",\"pico_timestamp\":", kKey = ",\"pico_key\":",
                                    kHeaders = ",\"pico_headers\":";
  const RecordJsonOptions& options = writer_->options_;
  out += prefix_;
  append_int(out, r.offset);
  out += kTimestamp;
  append_int(out, r.timestamp_ms);
  if (options.include_key && r.key.data) {
    out += kKey;
    const std::span<const uint8_t> key(r.key.data, r.key.size);
    if (options.key == KeyRendering::Text && is_valid_utf8(key)) {
      append_json_escaped(out, view(r.key));
    } else {
      out += '"';
      append_base64(out, key);
      out += '"';
    }
  }
  if (options.include_headers && r.header_count) {
    out += kHeaders;
    append_headers_json(out, {r.headers, r.header_count});
  }
  // A change (ABI 2.8) carries its operation and its row's key as data.
  if (pmq_batch_has_changes(batch_)) {
    static constexpr std::string_view kOp = ",\"pico_op\":\"", kRowKey = ",\"pico_row_key\":";
    const int32_t op = pmq_record_op(batch_, &r);
    out += kOp;
    out += op == PMQ_OP_UPSERT     ? "upsert"
           : op == PMQ_OP_DELETE   ? "delete"
           : op == PMQ_OP_TRUNCATE ? "truncate"
           : op == PMQ_OP_PATCH    ? "patch"
                                   : "append";
    out += '"';
    if (const pmq_bytes key = pmq_record_key_json(batch_, &r); key.data) {
      out += kRowKey;
      out.append(view(key));
    }
  }
}

void BatchJsonWriter::append(std::string& out, const pmq_record& r) const {
  const RecordJsonOptions& options = writer_->options_;
  const pmq_batch& batch = *batch_;
  // One reservation for the whole document: metadata, base64 growth and headers fit in 4/3 + 256.
  out.reserve(out.size() + r.payload.size + r.payload.size / 3 + r.key.size * 2 + 256);
  switch (options.layout) {
    case JsonLayout::PayloadOnly: writer_->append_payload(out, batch, r); return;
    case JsonLayout::Flat:
      if (r.payload.data && batch.payload_format == PMQ_PAYLOAD_JSON) {
        if (auto body = json_object_body(view(r.payload))) {
          out += '{';
          append_metadata(out, r);
          if (!body->empty) out += ',';
          else body->members = "}";
          if (options.one_line) append_one_line(out, body->members);
          else out.append(body->members);
          return;
        }
      }
      [[fallthrough]];  // not an object: under payload_field, as in the envelope
    case JsonLayout::Envelope:
      out += '{';
      append_metadata(out, r);
      out += ',';
      append_json_escaped(out, options.payload_field);
      out += ':';
      writer_->append_payload(out, batch, r);
      out += '}';
      return;
  }
}

bool insert_first_member(std::string& out, size_t start, std::string_view member) {
  auto blank = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
  size_t open = start;
  while (open < out.size() && blank(out[open])) ++open;
  if (open >= out.size() || out[open] != '{') return false;
  size_t next = open + 1;
  while (next < out.size() && blank(out[next])) ++next;
  const bool empty = next < out.size() && out[next] == '}';
  out.insert(open + 1, member);
  if (!empty) out.insert(open + 1 + member.size(), 1, ',');
  return true;
}

}  // namespace picomq::kit
