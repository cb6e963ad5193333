#pragma once
// One batch's write carried by several requests (a request per chunk of the splitter, the halves
// of a bisected request, resends of some items): what they came to, and the write completed
// exactly once, when the last of them is done. What an asynchronous HTTP sink keeps per batch.
//
//   auto done = std::make_shared<kit::BatchCompletion>(pending(), chunks.size() + 1);  // +1: this call
//   for (auto& chunk : chunks) client.send_async(request(chunk), [done](kit::HttpResponse r) {
//     ... done->written(); / done->reject(index, why); / done->fail(classification);
//     done->finish_one();
//   });
//   done->finish_one();   // every request is on its way
//
// The outcome when the last request finished:
//   a Fatal failure (any one)         fatal(reason): the sink stops
//   another failure                   partial(reason) when some request wrote (or may have
//                                     written), else retry(reason): the runtime retries the batch
//   no failure                        the refused records (reject), then done()
// Thread-safe: callbacks may run on any I/O thread.
#include <cstddef>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "picomq/kit/outcome.hpp"
#include "picomq/sdk.hpp"

namespace picomq::kit {

class BatchCompletion {
 public:
  // `requests`: how many finish_one() calls complete the write.
  BatchCompletion(sdk::Pending pending, size_t requests) : pending_(std::move(pending)), outstanding_(requests) {}

  // Called with the number of refused records just before a write completes without failure
  // (a sink's counters); set it before sending.
  void on_success(std::function<void(size_t rejected)> f) { on_success_ = std::move(f); }

  // More requests to wait for (a request split in two: add(1) before sending the halves).
  void add(size_t requests);
  // A record the destination refused: reported (through the bad-record policy) if the write
  // otherwise succeeds.
  void reject(size_t record_index, std::string reason);
  // A request wrote records, or may have (a failure then makes the write partial, not a retry).
  void written();
  // A failure of the whole write; the first is kept, except that a Fatal one outranks the rest
  // (the sink must stop, not retry a lost cause). Written / Rejected / TooLarge are no failures
  // and are ignored here.
  void fail(const Classification& c);
  // One request is done; true when it was the last (the write is then completed).
  bool finish_one();

  size_t rejected() const;  // records refused so far

 private:
  mutable std::mutex mutex_;
  sdk::Pending pending_;
  size_t outstanding_;
  std::vector<std::pair<size_t, std::string>> rejected_;
  bool written_ = false;
  std::optional<Classification> failed_;
  std::function<void(size_t)> on_success_;
};

}  // namespace picomq::kit
