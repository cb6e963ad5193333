#include "runtime/kafka/lag_reader.h"

#include <algorithm>
#include <set>

#include "runtime/kafka/client_conf.h"
#include "runtime/kafka/partition_list.h"

namespace picomq::runtime::kafka {
namespace {

constexpr int kTimeoutMs = 10000;
constexpr std::chrono::milliseconds kFetchWait{2000};

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Waits for the admin result of type `type` on `queue`; null (and `error`) when none came.
rd_kafka_event_t* admin_result(rd_kafka_queue_t* queue, rd_kafka_event_type_t type, const char* what,
                               std::string& error) {
  rd_kafka_event_t* ev = rd_kafka_queue_poll(queue, kTimeoutMs + 1000);
  if (!ev) {
    error = std::string(what) + ": no answer within " + std::to_string(kTimeoutMs / 1000) + " s";
    return nullptr;
  }
  if (rd_kafka_event_type(ev) != type || rd_kafka_event_error(ev)) {
    error =
        std::string(what) + ": " + (rd_kafka_event_error(ev) ? rd_kafka_event_error_string(ev) : "unexpected answer");
    rd_kafka_event_destroy(ev);
    return nullptr;
  }
  return ev;
}

}  // namespace

LagReader::LagReader(std::string bootstrap_servers, std::vector<std::pair<std::string, std::string>> client_properties)
    : bootstrap_servers_(std::move(bootstrap_servers)), client_properties_(std::move(client_properties)) {
  log_.log_prefix = "lag reader";
}

LagReader::~LagReader() {
  if (!rk_) return;
  rd_kafka_queue_destroy(admin_results_);
  rd_kafka_destroy_flags(rk_, RD_KAFKA_DESTROY_F_NO_CONSUMER_CLOSE);
}

std::string LagReader::open() {
  if (rk_) return {};
  ClientConf conf(client_properties_, bootstrap_servers_);
  conf.set("client.id", "picomq-connect-lag-reader");
  // A group id for assign() alone: this client never subscribes, joins or commits.
  conf.set("group.id", "picomq-connect-lag-reader");
  conf.set("enable.auto.commit", "false");
  conf.set("enable.auto.offset.store", "false");
  // It reads one record per lagging partition: no prefetching of what follows.
  conf.set("queued.min.messages", "1");
  conf.set("queued.max.messages.kbytes", "1024");
  conf.set("max.partition.fetch.bytes", "65536");
  if (!conf.error().empty()) return conf.error();
  route_client_logs(conf.get(), &log_);
  rk_ = conf.create(RD_KAFKA_CONSUMER);
  if (!rk_) return conf.error();
  rd_kafka_poll_set_consumer(rk_);
  admin_results_ = rd_kafka_queue_new(rk_);
  return {};
}

std::map<std::pair<std::string, int32_t>, int64_t> LagReader::committed_offsets(
    const GroupSpec& spec, const std::vector<std::pair<std::string, int32_t>>& tps, std::string& error) {
  std::map<std::pair<std::string, int32_t>, int64_t> out;
  PartitionList list(static_cast<int>(tps.size()));
  for (const auto& [t, p] : tps) list.add(t, p);
  rd_kafka_ListConsumerGroupOffsets_t* request =
      rd_kafka_ListConsumerGroupOffsets_new(spec.group_id.c_str(), list.get());
  rd_kafka_ListConsumerGroupOffsets(rk_, &request, 1, nullptr, admin_results_);
  rd_kafka_ListConsumerGroupOffsets_destroy(request);
  rd_kafka_event_t* ev = admin_result(admin_results_, RD_KAFKA_EVENT_LISTCONSUMERGROUPOFFSETS_RESULT,
                                      ("committed offsets of group '" + spec.group_id + "'").c_str(), error);
  if (!ev) return out;
  size_t n = 0;
  const rd_kafka_group_result_t** groups =
      rd_kafka_ListConsumerGroupOffsets_result_groups(rd_kafka_event_ListConsumerGroupOffsets_result(ev), &n);
  for (size_t g = 0; g < n; ++g) {
    if (const rd_kafka_error_t* e = rd_kafka_group_result_error(groups[g])) {
      error = "committed offsets of group '" + spec.group_id + "': " + rd_kafka_error_string(e);
      break;
    }
    const rd_kafka_topic_partition_list_t* parts = rd_kafka_group_result_partitions(groups[g]);
    for (int i = 0; parts && i < parts->cnt; ++i)
      if (!parts->elems[i].err) out[{parts->elems[i].topic, parts->elems[i].partition}] = parts->elems[i].offset;
  }
  rd_kafka_event_destroy(ev);
  return out;
}

void LagReader::fetch_timestamps(const std::vector<std::tuple<std::string, int32_t, int64_t>>& at) {
  if (at.empty()) return;
  PartitionList assign(static_cast<int>(at.size()));
  std::map<std::pair<std::string, int32_t>, int64_t> wanted;
  for (const auto& [t, p, o] : at) {
    assign.add(t, p, o);
    wanted[{t, p}] = o;
  }
  if (rd_kafka_assign(rk_, assign.get()) != RD_KAFKA_RESP_ERR_NO_ERROR) return;
  const auto deadline = std::chrono::steady_clock::now() + kFetchWait;
  while (!wanted.empty() && std::chrono::steady_clock::now() < deadline) {
    rd_kafka_message_t* m = rd_kafka_consumer_poll(rk_, 100);
    if (!m) continue;
    if (!m->err) {
      const std::pair<std::string, int32_t> tp{rd_kafka_topic_name(m->rkt), m->partition};
      // The first record at or after the offset (the one there may be a transaction marker).
      if (auto w = wanted.find(tp); w != wanted.end() && m->offset >= w->second) {
        rd_kafka_timestamp_type_t type;
        const int64_t ts = rd_kafka_message_timestamp(m, &type);
        timestamps_[{tp.first, tp.second, w->second}] = type == RD_KAFKA_TIMESTAMP_NOT_AVAILABLE ? -1 : ts;
        wanted.erase(w);
      }
    }
    rd_kafka_message_destroy(m);
  }
  rd_kafka_assign(rk_, nullptr);
}

std::vector<GroupPartitionLag> LagReader::read(const GroupSpec& spec, std::string& error) {
  std::vector<GroupPartitionLag> out;
  if (error = open(); !error.empty()) return out;
  const auto tps = group_partitions(rk_, spec, error);
  if (!error.empty() || tps.empty()) return out;
  const auto committed = committed_offsets(spec, tps, error);
  if (!error.empty()) return out;

  std::vector<std::tuple<std::string, int32_t, int64_t>> fetch;
  for (const auto& [t, p] : tps) {
    GroupPartitionLag lag;
    lag.topic = t;
    lag.partition = p;
    if (auto c = committed.find({t, p}); c != committed.end() && c->second >= 0) lag.committed = c->second;
    int64_t low = -1, high = -1;
    if (rd_kafka_query_watermark_offsets(rk_, t.c_str(), p, &low, &high, kTimeoutMs) != RD_KAFKA_RESP_ERR_NO_ERROR) {
      error = "log end of " + t + "[" + std::to_string(p) + "]: the broker did not answer";
      return {};
    }
    lag.end = high;
    const int64_t from = lag.committed >= 0 ? lag.committed : low;
    lag.records = std::max<int64_t>(0, high - from);
    if (lag.records == 0) lag.seconds = 0;
    else if (!timestamps_.count({t, p, from})) fetch.emplace_back(t, p, from);
    out.push_back(std::move(lag));
  }
  fetch_timestamps(fetch);
  const int64_t now = now_ms();
  std::set<std::tuple<std::string, int32_t, int64_t>> used;
  for (auto& lag : out) {
    if (lag.records <= 0) continue;
    const auto key =
        std::make_tuple(lag.topic, lag.partition, lag.committed >= 0 ? lag.committed : lag.end - lag.records);
    used.insert(key);
    if (auto ts = timestamps_.find(key); ts != timestamps_.end() && ts->second >= 0) {
      lag.seconds = std::max<double>(0, (now - ts->second) / 1000.0);
      lag.oldest_ms = ts->second;
    }
  }
  // Forget this group's older offsets: they were committed past.
  std::erase_if(timestamps_, [&](const auto& entry) {
    const auto& [t, p, o] = entry.first;
    return !used.count(entry.first) && std::binary_search(tps.begin(), tps.end(), std::make_pair(t, p));
  });
  return out;
}

}  // namespace picomq::runtime::kafka
