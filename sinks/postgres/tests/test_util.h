#pragma once
// Helpers of the postgres core tests: table layouts, hex rendering and hand-built batches.
#include <gtest/gtest.h>

#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "picomq/sink_abi.h"
#include "postgres/sql.h"

namespace picomq::postgres::test {

// A column filled from the payload field of the same name.
inline Column field(std::string name, ColumnType type) {
  Column c;
  c.field = name;
  c.name = std::move(name);
  c.type = type;
  return c;
}

// make_layout() of a layout the test expects to be valid (a failure is reported, not thrown).
inline TableLayout layout(PayloadMode p, WriteMode w, bool meta, std::vector<Column> cols = {},
                          std::vector<std::string> key = {}, bool changes = false) {
  auto l = make_layout(LayoutOptions{p, w, meta, std::move(cols), std::move(key), changes});
  EXPECT_TRUE(l.ok()) << l.error();
  return l.value();
}

// "50 47 43" for readable byte-for-byte comparisons.
inline std::string hex(std::string_view bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (const char c : bytes) {
    if (!out.empty()) out += ' ';
    out += kHex[static_cast<uint8_t>(c) >> 4];
    out += kHex[static_cast<uint8_t>(c) & 0xF];
  }
  return out;
}

// Inverse of hex(); spaces ignored.
inline std::string unhex(std::string_view text) {
  std::string out;
  int nibble = -1;
  for (const char c : text) {
    if (c == ' ') continue;
    const int v = c <= '9' ? c - '0' : c - 'a' + 10;
    if (nibble < 0) {
      nibble = v;
    } else {
      out.push_back(static_cast<char>(nibble << 4 | v));
      nibble = -1;
    }
  }
  return out;
}

inline constexpr std::string_view kHeaderHex = "50 47 43 4f 50 59 0a ff 0d 0a 00 00 00 00 00 00 00 00 00";
inline constexpr std::string_view kTrailerHex = "ff ff";

// Owns the bytes of its records; get() is valid while it lives.
class Batch {
 public:
  Batch(std::string topic, int32_t format) : topic_(std::move(topic)), format_(format) {}

  struct Rec {
    const char* payload = nullptr;  // nullptr: tombstone
    int64_t timestamp_ms = 1700000000123;
    const char* key = nullptr;
    std::vector<std::pair<std::string, const char*>> headers;  // nullptr value: null header
    std::size_t payload_size = std::string::npos;              // npos: strlen
  };

  Batch& add(const Rec& r) {
    pmq_record rec{};
    rec.offset = next_offset_++;
    rec.timestamp_ms = r.timestamp_ms;
    if (r.key) rec.key = bytes(r.key);
    if (r.payload) {
      rec.payload =
          r.payload_size == std::string::npos ? bytes(r.payload) : bytes(std::string(r.payload, r.payload_size));
    }
    auto& hs = headers_.emplace_back();
    for (auto& [name, value] : r.headers) {
      pmq_header h{};
      h.name = bytes(name);
      if (value) h.value = bytes(value);
      hs.push_back(h);
    }
    rec.headers = hs.empty() ? nullptr : hs.data();
    rec.header_count = hs.size();
    records_.push_back(rec);
    return *this;
  }
  Batch& json(const char* payload) { return add(Rec{payload, 1700000000123, nullptr, {}}); }
  Batch& tombstone() { return add(Rec{nullptr, 1700000000123, nullptr, {}}); }
  // A change event (ABI 2.8): the batch becomes one of changes.
  Batch& change(pmq_change_op op, const char* row, const char* key_json) {
    add(Rec{row, 1700000000123, nullptr, {}});
    records_.back().op = op;
    if (key_json) records_.back().key_json = bytes(key_json);
    changes_ = true;
    return *this;
  }
  Batch& offset(int64_t next) {
    next_offset_ = next;
    return *this;
  }

  pmq_batch get() const {
    pmq_batch b{};
    b.struct_size = sizeof(pmq_batch);
    b.topic = topic_.c_str();
    b.payload_format = format_;
    b.schema = "json";
    b.records = records_.data();
    b.record_count = records_.size();
    b.record_size = sizeof(pmq_record);
    b.changes = changes_ ? 1 : 0;
    return b;
  }

 private:
  pmq_bytes bytes(std::string text) {
    const std::string& s = storage_.emplace_back(std::move(text));
    return pmq_bytes{reinterpret_cast<const uint8_t*>(s.data()), s.size()};
  }

  std::string topic_;
  int32_t format_;
  int64_t next_offset_ = 0;
  bool changes_ = false;
  std::deque<std::string> storage_;
  std::deque<std::vector<pmq_header>> headers_;
  std::vector<pmq_record> records_;
};

}  // namespace picomq::postgres::test
