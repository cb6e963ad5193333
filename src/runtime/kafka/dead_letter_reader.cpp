#include "runtime/kafka/dead_letter_reader.h"

#include <librdkafka/rdkafka.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>

#include "runtime/kafka/client_conf.h"
#include "runtime/kafka/partition_list.h"
#include "runtime/record_view.h"
#include "transform/time.h"

namespace picomq::runtime::kafka {
namespace {

constexpr int kTimeoutMs = 10000;
// A page or a count reads for at most this long: the API answers, and says where it stopped.
constexpr std::chrono::seconds kScanBudget{30};

std::optional<std::string> bytes(const void* data, size_t size) {
  if (!data) return std::nullopt;
  return std::string(static_cast<const char*>(data), size);
}

int64_t number(const std::string& text, int64_t fallback) {
  try {
    size_t used = 0;
    const int64_t v = std::stoll(text, &used);
    return used == text.size() ? v : fallback;
  } catch (...) {
    return fallback;
  }
}

DeadLetterRecord record_of(const rd_kafka_message_t* m, const std::string& topic) {
  DeadLetterRecord r;
  r.dead_letter_topic = topic;
  r.dead_letter_partition = m->partition;
  r.dead_letter_offset = m->offset;
  r.dead_lettered_ms = rd_kafka_message_timestamp(m, nullptr);
  r.key = bytes(m->key, m->key_len);
  r.value = bytes(m->payload, m->len);
  rd_kafka_headers_t* hs = nullptr;
  if (rd_kafka_message_headers(m, &hs) == RD_KAFKA_RESP_ERR_NO_ERROR && hs) {
    const char* name;
    const void* value;
    size_t size;
    for (size_t i = 0; rd_kafka_header_get_all(hs, i, &name, &value, &size) == RD_KAFKA_RESP_ERR_NO_ERROR; ++i) {
      const std::string n(name);
      const std::string v = value ? std::string(static_cast<const char*>(value), size) : std::string();
      if (n == "pico_error_stage") r.stage = v;
      else if (n == "pico_error_reason") r.reason = v;
      else if (n == "pico_error_sink") r.sink = v;
      else if (n == "pico_error_topic") r.topic = v;
      else if (n == "pico_error_partition") r.partition = static_cast<int32_t>(number(v, -1));
      else if (n == "pico_error_offset") r.offset = number(v, -1);
      else if (n == "pico_error_timestamp") r.timestamp_ms = number(v, -1);
      else if (n == "pico_error_time") r.time = v;
      else if (n == kRedriveHeader) r.redrive = v;
      else if (n == kHistoryHeader) r.history = v;
      else r.headers.emplace_back(n, bytes(value, size));
    }
  }
  return r;
}

using nlohmann::ordered_json;

std::string time_text(int64_t ms) {
  if (ms < 0) return {};
  return transform::time::to_rfc3339({ms / 1000, static_cast<int32_t>((ms % 1000) * 1000000)});
}

ordered_json record_json(const DeadLetterRecord& r) {
  ordered_json headers = ordered_json::array();
  for (const auto& [n, v] : r.headers) headers.push_back(ordered_json::array({n, bytes_json(v)}));
  return {{"id", r.id()},
          {"dead_lettered_at", time_text(r.dead_lettered_ms)},
          {"stage", r.stage},
          {"reason", r.reason},
          {"source",
           {{"topic", r.topic},
            {"partition", r.partition},
            {"offset", r.offset},
            {"timestamp", time_text(r.timestamp_ms)}}},
          {"key", bytes_json(r.key)},
          {"headers", std::move(headers)},
          {"payload", bytes_json(r.value)}};
}

// A record dead-lettered again by a redrive says which, and what went wrong before.
ordered_json record_json_with_history(const DeadLetterRecord& r) {
  ordered_json out = record_json(r);
  if (!r.redrive.empty()) out["redrive"] = r.redrive;
  if (!r.history.empty()) {
    ordered_json history = ordered_json::parse(r.history, nullptr, false);
    out["history"] = history.is_discarded() ? ordered_json(r.history) : std::move(history);
  }
  return out;
}

}  // namespace

std::string page_json(const std::string& topic, const DeadLetterPage& page) {
  ordered_json records = ordered_json::array();
  for (const auto& r : page.records) records.push_back(record_json_with_history(r));
  ordered_json out{{"topic", topic},
                   {"records", std::move(records)},
                   {"next_cursor", page.next_cursor.empty() ? ordered_json(nullptr) : ordered_json(page.next_cursor)},
                   {"scanned", page.scanned}};
  return out.dump(-1, ' ', false, ordered_json::error_handler_t::replace);
}

std::string counts_json(const std::string& topic, const DeadLetterPage& page) {
  ordered_json counts = ordered_json::array();
  for (const auto& c : page.counts)
    counts.push_back({{"stage", c.stage},
                      {"reason", c.reason},
                      {"count", c.count},
                      {"first", time_text(c.first_ms)},
                      {"last", time_text(c.last_ms)}});
  ordered_json out{
      {"topic", topic}, {"matched", page.matched}, {"scanned", page.scanned}, {"counts", std::move(counts)}};
  if (!page.next_cursor.empty()) out["incomplete_from"] = page.next_cursor;
  return out.dump(-1, ' ', false, ordered_json::error_handler_t::replace);
}

bool DeadLetterFilter::matches(const DeadLetterRecord& r) const {
  if (!sink.empty() && r.sink != sink) return false;
  if (stage && r.stage != *stage) return false;
  if (reason && r.reason.find(*reason) == std::string::npos) return false;
  if (since_ms && r.dead_lettered_ms < *since_ms) return false;
  if (until_ms && r.dead_lettered_ms >= *until_ms) return false;
  if (topic && r.topic != *topic) return false;
  if (partition && r.partition != *partition) return false;
  if (from_offset && r.offset < *from_offset) return false;
  if (to_offset && r.offset > *to_offset) return false;
  if (!ids.empty() && std::find(ids.begin(), ids.end(), r.id()) == ids.end()) return false;
  return true;
}

std::map<int32_t, int64_t> parse_cursor(const std::string& cursor, std::string& error) {
  std::map<int32_t, int64_t> out;
  size_t start = 0;
  while (start < cursor.size()) {
    const size_t comma = std::min(cursor.find(',', start), cursor.size());
    const std::string part = cursor.substr(start, comma - start);
    const size_t colon = part.find(':');
    const int64_t p = colon == std::string::npos ? -1 : number(part.substr(0, colon), -1);
    const int64_t o = colon == std::string::npos ? -1 : number(part.substr(colon + 1), -1);
    if (p < 0 || p > INT32_MAX || o < 0) {
      error = "cursor '" + cursor + "': expected <partition>:<offset>[,...] as a page's next_cursor says";
      return {};
    }
    out[static_cast<int32_t>(p)] = o;
    start = comma + 1;
  }
  return out;
}

std::string format_cursor(const std::map<int32_t, int64_t>& positions) {
  std::string out;
  for (const auto& [p, o] : positions) out += (out.empty() ? "" : ",") + std::to_string(p) + ":" + std::to_string(o);
  return out;
}

struct DeadLetterReader::Client {
  rd_kafka_t* rk = nullptr;
  ~Client() {
    if (rk) rd_kafka_destroy_flags(rk, RD_KAFKA_DESTROY_F_NO_CONSUMER_CLOSE);
  }
};

DeadLetterReader::DeadLetterReader(std::string bootstrap_servers,
                                   std::vector<std::pair<std::string, std::string>> client_properties,
                                   std::string topic)
    : bootstrap_servers_(std::move(bootstrap_servers)),
      client_properties_(std::move(client_properties)),
      topic_(std::move(topic)) {}

DeadLetterReader::~DeadLetterReader() = default;

std::string DeadLetterReader::scan(const DeadLetterFilter& filter, const std::string& cursor, int64_t& scanned,
                                   const std::function<bool(DeadLetterRecord&&)>& each, std::string& error,
                                   ScanReport* report) const {
  auto positions = parse_cursor(cursor, error);
  if (!error.empty()) return {};
  std::lock_guard turn(mutex_);
  if (!client_) {
    ClientConf conf(client_properties_, bootstrap_servers_);
    conf.set("client.id", "picomq-connect-dead-letter-reader");
    conf.set("group.id", "picomq-connect-dead-letter-reader");  // for assign(): never joined, never committed
    conf.set("enable.auto.commit", "false");
    conf.set("enable.auto.offset.store", "false");
    conf.set("enable.partition.eof", "false");
    conf.set("allow.auto.create.topics", "false");
    // It reads up to the end seen at its start, never waits for more: a fetch that long-polls at
    // the end (500 ms by default) would hold up the next scan's first fetch behind it.
    conf.set("fetch.wait.max.ms", "10");
    auto made = std::make_unique<Client>();
    made->rk = conf.create(RD_KAFKA_CONSUMER);
    if (!made->rk) {
      error = conf.error();
      return {};
    }
    rd_kafka_poll_set_consumer(made->rk);
    client_ = std::move(made);
  }
  Client& h = *client_;
  // Whatever way this scan ends, the next starts from nothing assigned and nothing queued (and
  // nothing is fetched for a reader that waits). librdkafka drops what an old assignment fetched
  // by its version; emptying the queue here does not depend on it.
  struct Unassign {
    rd_kafka_t* rk;
    bool armed = false;
    ~Unassign() {
      if (!armed) return;
      rd_kafka_assign(rk, nullptr);
      while (rd_kafka_message_t* m = rd_kafka_consumer_poll(rk, 0)) rd_kafka_message_destroy(m);
    }
  } unassign{h.rk};

  // The topic's partitions; a topic that does not exist holds no dead letters (yet).
  std::vector<int32_t> partitions;
  {
    rd_kafka_topic_t* t = rd_kafka_topic_new(h.rk, topic_.c_str(), nullptr);
    const rd_kafka_metadata_t* md = nullptr;
    const rd_kafka_resp_err_t err = rd_kafka_metadata(h.rk, 0, t, &md, kTimeoutMs);
    rd_kafka_topic_destroy(t);
    if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
      error = "dead-letter topic '" + topic_ + "': " + rd_kafka_err2str(err);
      return {};
    }
    if (md->topic_cnt == 1 && md->topics[0].err == RD_KAFKA_RESP_ERR_NO_ERROR)
      for (int i = 0; i < md->topics[0].partition_cnt; ++i) partitions.push_back(md->topics[0].partitions[i].id);
    rd_kafka_metadata_destroy(md);
  }
  std::sort(partitions.begin(), partitions.end());

  // Where each partition starts and ends: the cursor, the first offset at since_ms, or the
  // beginning; the high watermark now.
  std::map<int32_t, int64_t> start, end;
  for (int32_t p : partitions) {
    int64_t low = 0, high = 0;
    if (rd_kafka_query_watermark_offsets(h.rk, topic_.c_str(), p, &low, &high, kTimeoutMs) !=
        RD_KAFKA_RESP_ERR_NO_ERROR) {
      error = "dead-letter topic '" + topic_ + "' partition " + std::to_string(p) + ": the broker did not answer";
      return {};
    }
    if (report) report->low[p] = low;
    start[p] = positions.count(p) ? std::max(positions[p], low) : low;
    if (filter.tail) start[p] = std::max(start[p], high - static_cast<int64_t>(filter.tail));
    end[p] = high;
    if (!filter.before.empty()) end[p] = filter.before.count(p) ? std::min(high, filter.before.at(p)) : start[p];
  }
  if (filter.since_ms && positions.empty()) {
    PartitionList at(static_cast<int>(partitions.size()));
    for (int32_t p : partitions) at.add(topic_, p, *filter.since_ms);
    if (rd_kafka_offsets_for_times(h.rk, at.get(), kTimeoutMs) == RD_KAFKA_RESP_ERR_NO_ERROR)
      for (int i = 0; i < at.get()->cnt; ++i) {
        const auto& e = at.get()->elems[i];
        if (!e.err) start[e.partition] = e.offset < 0 ? end[e.partition] : std::max(start[e.partition], e.offset);
      }
  }
  if (!filter.ids.empty()) {  // only the partitions and offsets the ids name
    std::map<int32_t, std::pair<int64_t, int64_t>> span;
    for (const auto& id : filter.ids) {
      std::string e;
      for (const auto& [p, o] : parse_cursor(id, e)) {
        auto [it, fresh] = span.try_emplace(p, o, o);
        it->second.first = std::min(it->second.first, o);
        it->second.second = std::max(it->second.second, o);
      }
      if (!e.empty()) {
        error = "dead letter id '" + id + "': expected <partition>:<offset>";
        return {};
      }
    }
    for (int32_t p : partitions) {
      if (!span.count(p)) start[p] = end[p];
      else {
        start[p] = std::max(start[p], span[p].first);
        end[p] = std::min(end[p], span[p].second + 1);
      }
    }
  }

  PartitionList assign(static_cast<int>(partitions.size()));
  size_t open = 0;
  for (int32_t p : partitions)
    if (start[p] < end[p]) {
      assign.add(topic_, p, start[p]);
      ++open;
    }
  std::map<int32_t, int64_t> next = start;
  // Where every partition's reading got to, for the caller (a tally goes on from there).
  struct Report {
    ScanReport* out;
    std::map<int32_t, int64_t>& next;
    ~Report() {
      if (out) out->reached = next;
    }
  } reported{report, next};
  // Every partition's position while one is unfinished: a partition left out would be read
  // from its beginning by the next page.
  const auto rest = [&] {
    const bool unfinished =
        std::any_of(next.begin(), next.end(), [&](const auto& n) { return n.second < end[n.first]; });
    return unfinished ? format_cursor(next) : std::string();
  };
  if (open == 0) return {};
  if (rd_kafka_assign(h.rk, assign.get()) != RD_KAFKA_RESP_ERR_NO_ERROR) {
    error = "dead-letter topic '" + topic_ + "': cannot read it";
    return {};
  }
  unassign.armed = true;
  const auto deadline = std::chrono::steady_clock::now() + kScanBudget;
  while (open > 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      error = "stopped after " + std::to_string(kScanBudget.count()) + " s: go on from the cursor " + rest();
      return rest();
    }
    rd_kafka_message_t* m = rd_kafka_consumer_poll(h.rk, 100);
    if (!m) continue;
    std::unique_ptr<rd_kafka_message_t, void (*)(rd_kafka_message_t*)> held(m, rd_kafka_message_destroy);
    if (m->err) {
      if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) continue;
      error = "dead-letter topic '" + topic_ + "': " + rd_kafka_message_errstr(m);
      return rest();
    }
    if (!end.count(m->partition) || m->offset >= end[m->partition] || m->offset < next[m->partition]) continue;
    next[m->partition] = m->offset + 1;
    if (next[m->partition] >= end[m->partition]) --open;
    ++scanned;
    DeadLetterRecord r = record_of(m, topic_);
    if (!filter.matches(r)) continue;
    if (!each(std::move(r))) return rest();
  }
  return {};
}

DeadLetterPage DeadLetterReader::page(const DeadLetterFilter& filter, const std::string& cursor, size_t limit,
                                      std::string& error) const {
  DeadLetterPage out;
  out.next_cursor = scan(
      filter, cursor, out.scanned,
      [&](DeadLetterRecord&& r) {
        out.records.push_back(std::move(r));
        return out.records.size() < limit;
      },
      error);
  std::sort(out.records.begin(), out.records.end(), [](const auto& a, const auto& b) {
    return std::make_pair(a.dead_letter_partition, a.dead_letter_offset) <
           std::make_pair(b.dead_letter_partition, b.dead_letter_offset);
  });
  return out;
}

DeadLetterPage DeadLetterReader::latest(const DeadLetterFilter& filter, size_t n, std::string& error) const {
  DeadLetterFilter last = filter;
  last.tail = n;
  DeadLetterPage out;
  scan(
      last, "", out.scanned,
      [&](DeadLetterRecord&& r) {
        out.records.push_back(std::move(r));
        return true;
      },
      error);
  std::sort(out.records.begin(), out.records.end(),
            [](const auto& a, const auto& b) { return a.dead_lettered_ms > b.dead_lettered_ms; });
  if (out.records.size() > n) out.records.resize(n);
  return out;
}

DeadLetterPage DeadLetterReader::count(const DeadLetterFilter& filter, std::string& error) const {
  DeadLetterTally once;
  return once.count(*this, filter, error);
}

namespace {
// What a count depends on: its topic and filter (ids and tail are not counted by).
std::string tally_key(const std::string& topic, const DeadLetterFilter& f) {
  nlohmann::json k{topic,
                   f.sink,
                   f.stage.value_or("\x01"),
                   f.reason.value_or("\x01"),
                   f.since_ms.value_or(-1),
                   f.until_ms.value_or(-1),
                   f.topic.value_or("\x01"),
                   f.partition.value_or(-1),
                   f.from_offset.value_or(-1),
                   f.to_offset.value_or(-1),
                   f.ids};
  return k.dump();
}
}  // namespace

DeadLetterPage DeadLetterTally::count(const DeadLetterReader& reader, const DeadLetterFilter& filter,
                                      std::string& error) {
  std::lock_guard lock(mutex_);
  Entry& e = entries_[tally_key(reader.topic(), filter)];
  DeadLetterPage out;
  DeadLetterReader::ScanReport report;
  std::map<int32_t, int64_t> from = e.positions;
  const auto add = [&](DeadLetterRecord&& r) {
    auto& c = e.counts[{r.stage, r.reason}];
    c.stage = r.stage;
    c.reason = r.reason;
    ++c.count;
    c.first_ms = c.first_ms < 0 ? r.dead_lettered_ms : std::min(c.first_ms, r.dead_lettered_ms);
    c.last_ms = std::max(c.last_ms, r.dead_lettered_ms);
    ++e.matched;
    return true;
  };
  out.next_cursor = reader.scan(filter, format_cursor(from), out.scanned, add, error, &report);
  // Retention removed records this tally had counted: count again from what is left.
  const bool removed = std::any_of(report.low.begin(), report.low.end(), [&](const auto& l) {
    return e.counted_from.count(l.first) && l.second > e.counted_from.at(l.first);
  });
  if (removed) {
    e = Entry{};
    error.clear();
    out = DeadLetterPage{};
    report = {};
    out.next_cursor = reader.scan(filter, "", out.scanned, add, error, &report);
  }
  for (const auto& [p, low] : report.low) e.counted_from.try_emplace(p, low);
  if (!report.reached.empty()) e.positions = report.reached;
  for (const auto& [k, c] : e.counts) out.counts.push_back(c);
  std::stable_sort(out.counts.begin(), out.counts.end(),
                   [](const auto& a, const auto& b) { return a.count > b.count; });
  out.matched = e.matched;
  return out;
}

}  // namespace picomq::runtime::kafka
