#include "runtime/kafka/group_offsets.h"

#include <librdkafka/rdkafka.h>

#include <algorithm>
#include <memory>
#include <regex>

#include "config/regex.h"
#include "runtime/kafka/client_conf.h"

namespace picomq::runtime::kafka {

namespace {

constexpr int kTimeoutMs = 10000;

struct Handle {
  rd_kafka_t* rk = nullptr;
  ~Handle() {
    if (rk) rd_kafka_destroy(rk);
  }
};
struct List {
  rd_kafka_topic_partition_list_t* l;
  explicit List(int n = 0) : l(rd_kafka_topic_partition_list_new(n)) {}
  ~List() { rd_kafka_topic_partition_list_destroy(l); }
};

std::string open(const GroupSpec& spec, Handle& h) {
  ClientConf conf(spec.client_properties, spec.bootstrap_servers);
  conf.set("group.id", spec.group_id);
  conf.set("enable.auto.commit", "false");
  conf.set("enable.auto.offset.store", "false");
  conf.set("log_level", "3");
  if (!conf.error().empty()) return conf.error();
  h.rk = conf.create(RD_KAFKA_CONSUMER);
  return conf.error();
}

std::string partitions(const GroupSpec& spec, Handle& h, List& out) {
  std::string error;
  for (const auto& [t, p] : group_partitions(h.rk, spec, error)) rd_kafka_topic_partition_list_add(out.l, t.c_str(), p);
  return error;
}

}  // namespace

// Every partition of the spec's topics (explicit ones, and the pattern's matches), sorted.
std::vector<std::pair<std::string, int32_t>> group_partitions(rd_kafka_t* rk, const GroupSpec& spec,
                                                              std::string& error) {
  std::vector<std::pair<std::string, int32_t>> tps;
  const rd_kafka_metadata_t* md = nullptr;
  if (auto e = rd_kafka_metadata(rk, 1, nullptr, &md, kTimeoutMs); e != RD_KAFKA_RESP_ERR_NO_ERROR) {
    error = std::string("broker metadata: ") + rd_kafka_err2str(e);
    return tps;
  }
  std::unique_ptr<const rd_kafka_metadata_t, void (*)(const rd_kafka_metadata_t*)> guard(md, rd_kafka_metadata_destroy);
  std::optional<std::regex> re;
  if (spec.anchored_pattern) re = config::compile_regex(*spec.anchored_pattern);
  for (int i = 0; i < md->topic_cnt; ++i) {
    const auto& t = md->topics[i];
    const std::string name = t.topic;
    const bool listed = std::find(spec.topics.begin(), spec.topics.end(), name) != spec.topics.end();
    const bool matched = re && name.rfind("__", 0) != 0 && std::regex_search(name, *re);
    if (!listed && !matched) continue;
    if (t.err != RD_KAFKA_RESP_ERR_NO_ERROR) continue;
    for (int p = 0; p < t.partition_cnt; ++p) tps.emplace_back(name, t.partitions[p].id);
  }
  std::sort(tps.begin(), tps.end());
  return tps;
}

std::vector<GroupSpec> sink_groups(const config::SinkDefinition& sink, const std::string& bootstrap_servers,
                                   const std::vector<std::pair<std::string, std::string>>& client_properties) {
  std::vector<GroupSpec> out;
  for (const auto& block : sink.topics)
    out.push_back(
        {bootstrap_servers, client_properties, block.group_id(sink.key), block.topics, block.anchored_pattern});
  return out;
}

std::vector<PartitionOffsets> read_group_offsets(const GroupSpec& spec, std::string& error) {
  std::vector<PartitionOffsets> out;
  Handle h;
  if (error = open(spec, h); !error.empty()) return out;
  List list;
  if (error = partitions(spec, h, list); !error.empty()) return out;
  if (list.l->cnt == 0) return out;
  if (auto e = rd_kafka_committed(h.rk, list.l, kTimeoutMs); e != RD_KAFKA_RESP_ERR_NO_ERROR) {
    error = std::string("committed offsets of group '") + spec.group_id + "': " + rd_kafka_err2str(e);
    return out;
  }
  for (int i = 0; i < list.l->cnt; ++i) {
    const auto& p = list.l->elems[i];
    PartitionOffsets o;
    o.topic = p.topic;
    o.partition = p.partition;
    o.committed = p.offset >= 0 ? p.offset : -1;
    if (auto e = rd_kafka_query_watermark_offsets(h.rk, p.topic, p.partition, &o.low, &o.high, kTimeoutMs);
        e != RD_KAFKA_RESP_ERR_NO_ERROR) {
      error =
          std::string("end offsets of ") + p.topic + "[" + std::to_string(p.partition) + "]: " + rd_kafka_err2str(e);
      return {};
    }
    out.push_back(std::move(o));
  }
  return out;
}

std::string reset_group_offsets(const GroupSpec& spec, const OffsetTarget& target) {
  Handle h;
  if (auto e = open(spec, h); !e.empty()) return e;
  List all;
  if (auto e = partitions(spec, h, all); !e.empty()) return e;
  List commit;
  for (int i = 0; i < all.l->cnt; ++i) {
    const auto& p = all.l->elems[i];
    int64_t low = -1, high = -1;
    if (auto e = rd_kafka_query_watermark_offsets(h.rk, p.topic, p.partition, &low, &high, kTimeoutMs);
        e != RD_KAFKA_RESP_ERR_NO_ERROR)
      return std::string("end offsets of ") + p.topic + "[" + std::to_string(p.partition) + "]: " + rd_kafka_err2str(e);
    int64_t offset = -1;
    switch (target.kind) {
      case OffsetTarget::Kind::Earliest: offset = low; break;
      case OffsetTarget::Kind::Latest: offset = high; break;
      case OffsetTarget::Kind::Timestamp: {
        List q;
        rd_kafka_topic_partition_list_add(q.l, p.topic, p.partition)->offset = target.timestamp_ms;
        if (auto e = rd_kafka_offsets_for_times(h.rk, q.l, kTimeoutMs); e != RD_KAFKA_RESP_ERR_NO_ERROR)
          return std::string("offsets for timestamp: ") + rd_kafka_err2str(e);
        offset = q.l->elems[0].offset >= 0 ? q.l->elems[0].offset : high;  // none at or after it: the end
        break;
      }
      case OffsetTarget::Kind::Explicit: {
        auto it = target.offsets.find({p.topic, p.partition});
        if (it == target.offsets.end()) continue;
        offset = it->second;
        if (offset < low || offset > high)
          return std::string("offset ") + std::to_string(offset) + " of " + p.topic + "[" +
                 std::to_string(p.partition) + "] is outside the log (" + std::to_string(low) + " to " +
                 std::to_string(high) + ")";
        break;
      }
    }
    rd_kafka_topic_partition_list_add(commit.l, p.topic, p.partition)->offset = offset;
  }
  if (target.kind == OffsetTarget::Kind::Explicit)
    for (const auto& [tp, offset] : target.offsets)
      if (!rd_kafka_topic_partition_list_find(commit.l, tp.first.c_str(), tp.second))
        return "partition " + tp.first + "[" + std::to_string(tp.second) +
               "] is not one of the group's topics' partitions";
  if (commit.l->cnt == 0) return "no partition to set (the group's topics have none)";
  if (auto e = rd_kafka_commit(h.rk, commit.l, 0); e != RD_KAFKA_RESP_ERR_NO_ERROR)
    return std::string("commit for group '") + spec.group_id + "' refused: " + rd_kafka_err2str(e) +
           (e == RD_KAFKA_RESP_ERR_UNKNOWN_MEMBER_ID || e == RD_KAFKA_RESP_ERR_ILLEGAL_GENERATION
                ? " (the group has active members: stop every consumer of it first)"
                : "");
  for (int i = 0; i < commit.l->cnt; ++i)
    if (commit.l->elems[i].err != RD_KAFKA_RESP_ERR_NO_ERROR)
      return std::string("commit of ") + commit.l->elems[i].topic + "[" + std::to_string(commit.l->elems[i].partition) +
             "]: " + rd_kafka_err2str(commit.l->elems[i].err);
  return {};
}

}  // namespace picomq::runtime::kafka
