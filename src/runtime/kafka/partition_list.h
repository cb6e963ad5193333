#pragma once
// An owned rd_kafka_topic_partition_list_t: destroyed with its owner, so no new/destroy pair
// can leak on an early return.
#include <librdkafka/rdkafka.h>

#include <memory>
#include <string>
#include <vector>

#include "runtime/bucketer.h"

namespace picomq::runtime::kafka {

class PartitionList {
 public:
  explicit PartitionList(int capacity = 0) : list_(rd_kafka_topic_partition_list_new(capacity)) {}
  // Takes ownership of a list librdkafka handed out (rd_kafka_assignment() and the like).
  static PartitionList adopt(rd_kafka_topic_partition_list_t* list) { return PartitionList(list); }
  static PartitionList copy_of(const rd_kafka_topic_partition_list_t* list) {
    return PartitionList(rd_kafka_topic_partition_list_copy(list));
  }

  rd_kafka_topic_partition_t* add(const std::string& topic, int32_t partition,
                                  int64_t offset = RD_KAFKA_OFFSET_INVALID) {
    auto* p = rd_kafka_topic_partition_list_add(list_.get(), topic.c_str(), partition);
    p->offset = offset;
    return p;
  }

  rd_kafka_topic_partition_list_t* get() const { return list_.get(); }
  int size() const { return list_ ? list_->cnt : 0; }
  bool empty() const { return size() == 0; }
  rd_kafka_topic_partition_t& operator[](int i) const { return list_->elems[i]; }
  rd_kafka_topic_partition_t* begin() const { return list_ ? list_->elems : nullptr; }
  rd_kafka_topic_partition_t* end() const { return list_ ? list_->elems + list_->cnt : nullptr; }

 private:
  struct Deleter {
    void operator()(rd_kafka_topic_partition_list_t* l) const { rd_kafka_topic_partition_list_destroy(l); }
  };
  explicit PartitionList(rd_kafka_topic_partition_list_t* list) : list_(list) {}
  std::unique_ptr<rd_kafka_topic_partition_list_t, Deleter> list_;
};

inline std::vector<TopicPartition> to_vector(const rd_kafka_topic_partition_list_t* list) {
  std::vector<TopicPartition> out;
  if (!list) return out;
  out.reserve(static_cast<size_t>(list->cnt));
  for (int i = 0; i < list->cnt; ++i) out.push_back({list->elems[i].topic, list->elems[i].partition});
  return out;
}

}  // namespace picomq::runtime::kafka
