#pragma once
// The transform chain: runs on each decoded batch, in the order the definition lists, before
// the plugin sees it. Empty for now; the transforms issue plugs implementations in here.
#include <memory>
#include <string>
#include <vector>

#include "runtime/decoded_batch.h"

namespace picomq::runtime {

class Transform {
 public:
  virtual ~Transform() = default;
  virtual std::string_view name() const = 0;
  // Rewrites the batch in place. Returns an error message (naming the record) or empty.
  virtual std::string apply(DecodedBatch& batch) = 0;
};

class TransformChain {
 public:
  void add(std::unique_ptr<Transform> t) { transforms_.push_back(std::move(t)); }
  std::string apply(DecodedBatch& batch) {
    for (auto& t : transforms_)
      if (auto err = t->apply(batch); !err.empty()) return std::string(t->name()) + ": " + err;
    return {};
  }
  bool empty() const { return transforms_.empty(); }

 private:
  std::vector<std::unique_ptr<Transform>> transforms_;
};

}  // namespace picomq::runtime
