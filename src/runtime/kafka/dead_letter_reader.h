#pragma once
// Reading a sink's dead-letter topic back (GET /sinks/{key}/dead-letters, `picomq-connect ctl
// dead-letters`): each dead letter with its original coordinates, key, headers and payload and
// the why / where / when of its pico_error_* headers (kafka/dead_letter.h), filtered and paged;
// and the counts per stage and reason. It reads with assign() from a position to the high
// watermark seen when it starts: no consumer group, nothing committed, the sink undisturbed.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace picomq::runtime::kafka {

// Added to a record a redrive dead-letters again (runtime/redrive.h): the redrive's id, and the
// earlier failures as a JSON array of {"stage", "reason", "time", "dead_letter"}, oldest first.
inline constexpr const char* kRedriveHeader = "pico_error_redrive";
inline constexpr const char* kHistoryHeader = "pico_error_history";

struct DeadLetterRecord {
  // Where it is in the dead-letter topic (an id: "<partition>:<offset>").
  std::string dead_letter_topic;
  int32_t dead_letter_partition = 0;
  int64_t dead_letter_offset = 0;
  int64_t dead_lettered_ms = -1;  // its timestamp in the dead-letter topic
  // Where it came from, and why it is here.
  std::string sink;
  std::string topic;
  int32_t partition = -1;
  int64_t offset = -1;
  int64_t timestamp_ms = -1;
  std::string stage;    // decode | transform | sink
  std::string reason;   // as in the log
  std::string time;     // pico_error_time
  std::string redrive;  // pico_error_redrive: the redrive that dead-lettered it again, if one did
  std::string history;  // pico_error_history: its earlier failures (a JSON array), if any
  // The record as it was: key, payload (nullopt: none) and its own headers (pico_error_* left out).
  std::optional<std::string> key;
  std::optional<std::string> value;
  std::vector<std::pair<std::string, std::optional<std::string>>> headers;

  std::string id() const { return std::to_string(dead_letter_partition) + ":" + std::to_string(dead_letter_offset); }
};

struct DeadLetterFilter {
  std::string sink;                    // only this sink's dead letters (a topic may be shared)
  std::optional<std::string> stage;    // decode | transform | sink
  std::optional<std::string> reason;   // a part of the reason
  std::optional<int64_t> since_ms;     // dead-lettered at or after (epoch ms)
  std::optional<int64_t> until_ms;     // dead-lettered before
  std::optional<std::string> topic;    // the original topic
  std::optional<int32_t> partition;    // and partition
  std::optional<int64_t> from_offset;  // original offsets, inclusive
  std::optional<int64_t> to_offset;
  std::vector<std::string> ids;  // only these dead letters ("<partition>:<offset>"); empty: all
  size_t tail = 0;               // only the last `tail` records of each partition (0: all)
  // Only below these positions of the dead-letter topic, and only its partitions named here (a
  // redrive's end, fixed when it starts); empty: up to each high watermark at the scan's start.
  std::map<int32_t, int64_t> before;

  bool matches(const DeadLetterRecord& r) const;
};

struct DeadLetterCount {
  std::string stage;
  std::string reason;
  int64_t count = 0;
  int64_t first_ms = -1, last_ms = -1;  // dead-lettered
};

struct DeadLetterPage {
  std::vector<DeadLetterRecord> records;  // in (partition, offset) order of the dead-letter topic
  // Where the next page starts ("<partition>:<offset>,..." of the dead-letter topic); empty when
  // the scan reached the end.
  std::string next_cursor;
  int64_t scanned = 0;                  // dead-letter records read for this page
  std::vector<DeadLetterCount> counts;  // count(): every matching record, by stage and reason
  int64_t matched = 0;                  // count(): how many matched in all
};

class DeadLetterReader {
 public:
  DeadLetterReader(std::string bootstrap_servers, std::vector<std::pair<std::string, std::string>> client_properties,
                   std::string topic);
  ~DeadLetterReader();
  DeadLetterReader(const DeadLetterReader&) = delete;
  DeadLetterReader& operator=(const DeadLetterReader&) = delete;

  // Up to `limit` matching dead letters from `cursor` (empty: the beginning, or since_ms).
  DeadLetterPage page(const DeadLetterFilter& filter, const std::string& cursor, size_t limit,
                      std::string& error) const;
  // The newest matching dead letters among the last `n` of each partition, newest first.
  DeadLetterPage latest(const DeadLetterFilter& filter, size_t n, std::string& error) const;
  // Every matching dead letter counted by stage and reason (most first), none kept.
  DeadLetterPage count(const DeadLetterFilter& filter, std::string& error) const;

  // Reads from `cursor` to the high watermarks seen at the start, calling `each` with every
  // matching record until it returns false. Returns the cursor after the last record read
  // (empty when every partition was read to its end).
  // `report`, when given: each partition's low watermark and the position its reading reached.
  struct ScanReport {
    std::map<int32_t, int64_t> low, reached;
  };
  std::string scan(const DeadLetterFilter& filter, const std::string& cursor, int64_t& scanned,
                   const std::function<bool(DeadLetterRecord&&)>& each, std::string& error,
                   ScanReport* report = nullptr) const;
  const std::string& topic() const { return topic_; }

 private:
  std::string bootstrap_servers_;
  std::vector<std::pair<std::string, std::string>> client_properties_;
  std::string topic_;
  // One consumer for every scan of this reader (made by the first): a redrive scans chunk after
  // chunk, and a new client each time cost its connections and a metadata round (400 chunks of
  // one record: 9.1 s with a client each, ~7 s with one). Scans of one reader take turns; between
  // them nothing is assigned, so nothing is fetched.
  struct Client;
  mutable std::mutex mutex_;
  mutable std::unique_ptr<Client> client_;
};

// Counts kept between requests of the same filter (the status page asks every 30 s): each count
// reads only what came since the last one, a scan cut by its time budget goes on at the next,
// and a partition whose older records retention removed is counted again from its start.
class DeadLetterTally {
 public:
  DeadLetterPage count(const DeadLetterReader& reader, const DeadLetterFilter& filter, std::string& error);

 private:
  struct Entry {
    std::map<std::pair<std::string, std::string>, DeadLetterCount> counts;  // by stage and reason
    std::map<int32_t, int64_t> positions;                                   // read up to
    std::map<int32_t, int64_t> counted_from;                                // each partition's log start then
    int64_t matched = 0;
  };
  std::mutex mutex_;                      // held through a count: one reader of the topic at a time
  std::map<std::string, Entry> entries_;  // by topic and filter
};

// The API's answers (docs/operations.md, "Dead letters"): a page as {"topic", "records": [...],
// "next_cursor", "scanned"}, counts as {"topic", "matched", "scanned", "counts": [...]}. Keys,
// payloads and header values are text when they are UTF-8, else {"base64": "..."}.
std::string page_json(const std::string& topic, const DeadLetterPage& page);
std::string counts_json(const std::string& topic, const DeadLetterPage& page);

// "<partition>:<offset>,..." <-> positions.
std::map<int32_t, int64_t> parse_cursor(const std::string& cursor, std::string& error);
std::string format_cursor(const std::map<int32_t, int64_t>& positions);

}  // namespace picomq::runtime::kafka
