#include "runtime/delivery/preparation_stage.h"

#include <spdlog/spdlog.h>

namespace picomq::runtime {

PreparationStage::PreparationStage(Settings settings, const decoders::DecoderFactory& decoders,
                                   const decoders::DecoderFactory* key_decoders, const transform::Chain* transforms,
                                   Waiter& waiter)
    : settings_(std::move(settings)),
      waiter_(waiter),
      consumer_side_(settings_.preparer, decoders.make(), key_decoders ? key_decoders->make() : nullptr, transforms),
      delivery_side_(settings_.preparer, decoders.make(), key_decoders ? key_decoders->make() : nullptr, transforms) {}

void PreparationStage::prepare_ahead(QueuedJob& job) {
  job.prepared = consumer_side_.prepare(job.job.tp, *job.job.records, settings_.reads_headers);
}

PreparedJob PreparationStage::ready(QueuedJob queued) {
  PreparedJob job(std::move(queued.job), {});
  if (queued.prepared) job.out = std::move(*queued.prepared);
  else job.out = delivery_side_.prepare(job.tp, *job.records, settings_.reads_headers);
  if (job.out.retry_error.empty()) return job;
  run_with_retries(
      settings_.decode_retry, waiter_,
      [&](int attempt) {
        if (attempt > 1) job.out = delivery_side_.prepare(job.tp, *job.records, settings_.reads_headers);
        return job.out.retry_error.empty() ? Attempt::Done : Attempt::Retry;
      },
      [&](int attempt, std::chrono::milliseconds delay) {
        spdlog::warn("{}: {}; decoding again in {} ms (attempt {})", settings_.log_prefix, job.out.retry_error,
                     delay.count(), attempt);
      });
  return job;
}

}  // namespace picomq::runtime
