#pragma once
// The destination of each topic, resolved from the sink's name template, sanitised with the
// destination kind's policy and prepared (created, looked up, its schema read) once; later
// batches of the topic get the cached result. A failed preparation is not cached: the next batch
// of the topic tries again (the retry of a destination that was briefly down).
//
//   kit::DestinationCache<Index> indexes(kit::NameTemplate::parse(settings.index).value(),
//       kit::NamePolicy::IndexName, [&](const std::string& name, std::string_view topic) {
//         create_index_if_missing(name);                 // may throw an SDK outcome
//         return Index{name};
//       });
//   Index& index = indexes.get(batch.topic());
//
// Thread-safe: topics are prepared in parallel, one topic once (a second caller for the same
// topic waits for the first).
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

#include "picomq/kit/name_template.hpp"
#include "picomq/kit/sanitize.hpp"
#include "picomq/sdk.hpp"

namespace picomq::kit {

// The template's name for `topic`, sanitised; throws sdk::FatalError naming the topic and the
// option (`option`: the key of the template in [plugin_config], for the message).
std::string destination_name(const NameTemplate& tmpl, NamePolicy policy, std::string_view topic,
                             std::string_view option);

template <class Destination>
class DestinationCache {
 public:
  using Prepare = std::function<Destination(const std::string& name, std::string_view topic)>;

  DestinationCache(NameTemplate tmpl, NamePolicy policy, Prepare prepare, std::string option = "target")
      : template_(std::move(tmpl)), policy_(policy), prepare_(std::move(prepare)), option_(std::move(option)) {}

  // The prepared destination of `topic` (stable reference while the cache lives, until forget()).
  Destination& get(std::string_view topic) {
    std::shared_ptr<Slot> slot;
    {
      std::lock_guard lock(mutex_);
      auto& s = slots_[std::string(topic)];
      if (!s) s = std::make_shared<Slot>();
      slot = s;
    }
    std::lock_guard prepare_lock(slot->mutex);
    if (!slot->value) {
      const std::string name = destination_name(template_, policy_, topic, option_);
      slot->value = std::make_unique<Destination>(prepare_(name, topic));
    }
    return *slot->value;
  }

  // The next get() of `topic` prepares it again (the destination was dropped, or its schema changed).
  void forget(std::string_view topic) {
    std::lock_guard lock(mutex_);
    slots_.erase(std::string(topic));
  }
  size_t size() const {
    std::lock_guard lock(mutex_);
    return slots_.size();
  }
  const NameTemplate& name_template() const { return template_; }

 private:
  struct Slot {
    std::mutex mutex;
    std::unique_ptr<Destination> value;
  };
  NameTemplate template_;
  NamePolicy policy_;
  Prepare prepare_;
  std::string option_;
  mutable std::mutex mutex_;
  std::unordered_map<std::string, std::shared_ptr<Slot>> slots_;
};

}  // namespace picomq::kit
