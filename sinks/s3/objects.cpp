#include "s3/objects.h"

#include "picomq/sdk.hpp"

namespace picomq::s3 {

void PartitionObjects::start(int64_t offset, int64_t timestamp_ms, std::string_view schema) {
  auto o = std::make_shared<Object>();
  o->topic = topic_;
  o->partition = partition_;
  o->first_offset = offset;
  o->first_timestamp_ms = timestamp_ms;
  o->bucket = keys_.key_template->time_bucket(timestamp_ms);
  if (rotation_.interval_ms > 0) {
    const int64_t ts = timestamp_ms < 0 ? 0 : timestamp_ms;
    o->window_end = (ts / rotation_.interval_ms + 1) * rotation_.interval_ms;
  }
  auto key = keys_.key_template->resolve({.topic = topic_,
                                          .partition = partition_,
                                          .start_offset = offset,
                                          .timestamp_ms = timestamp_ms,
                                          .sink_key = keys_.sink_key,
                                          .ext = keys_.ext});
  if (!key) throw sdk::FatalError("key_template: " + key.error());
  o->key = keys_.prefix + key.value();
  o->staging = keys_.object_header;
  o->bytes = o->staging.size();
  o->schema = schema;
  if (keys_.container_header) o->head = keys_.container_header(o->key, o->schema);
  if (keys_.sync_marker) o->sync = keys_.sync_marker(o->key);
  open_ = std::move(o);
}

void PartitionObjects::append(int64_t offset, int64_t timestamp_ms, std::string_view encoded,
                              const std::shared_ptr<Owner>& owner, std::string_view schema) {
  if (open_ && open_->records > 0) {
    const char* why = nullptr;
    if (schema != open_->schema) why = "schema";
    else if (keys_.key_template->time_bucket(timestamp_ms) != open_->bucket) why = "time_field";
    else if (rotation_.interval_ms > 0 && (timestamp_ms < 0 ? 0 : timestamp_ms) >= open_->window_end)
      why = "rotate_interval";
    else if (rotation_.max_bytes > 0 && open_->bytes + encoded.size() > rotation_.max_bytes) why = "max_bytes";
    if (why) seal(why);
  }
  if (!open_) start(offset, timestamp_ms, schema);
  Object& o = *open_;
  o.staging.append(encoded);
  o.bytes += encoded.size();
  o.last_offset = offset;
  ++o.records;
  ++o.staging_records;
  if (o.owners.empty() || o.owners.back() != owner) {
    o.owners.push_back(owner);
    owner->joined();
  }
  next_offset_ = offset + 1;
  if (rotation_.max_records > 0 && o.records >= rotation_.max_records) seal("max_records");
  else if (rotation_.max_bytes > 0 && o.bytes >= rotation_.max_bytes) seal("max_bytes");
  else if (rotation_.chunk_bytes > 0 && o.staging.size() >= rotation_.chunk_bytes) {
    cut();
    if (chunked_) chunked_();
  }
}

void PartitionObjects::cut() {
  Object& o = *open_;
  if (o.staging.empty()) return;
  o.chunk_bytes += o.staging.size();
  o.chunks.push_back({std::move(o.staging), o.staging_records});
  o.staging = {};
  o.staging_records = 0;
}

void PartitionObjects::seal(const char* why) {
  if (!open_) return;
  cut();
  open_->sealed = true;
  open_->sealed_by = why;
  sealed_(std::move(open_));
}

}  // namespace picomq::s3
