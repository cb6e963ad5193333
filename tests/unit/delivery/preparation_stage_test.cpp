// The preparation stage: each job prepared once, by the consumer thread ahead of time or by the
// delivery thread as it takes it, and a record that cannot be decoded for now waited for there.
#include "runtime/delivery/preparation_stage.h"

#include <gtest/gtest.h>

#include <atomic>

#include "fakes.h"

namespace picomq::runtime::testing {
namespace {

const TopicPartition A{"orders", 0};

// Raw payloads; the record at `unready_offset` cannot be decoded for now until `unready_left`
// attempts at it have failed (a schema registry that comes back). Counts every decode.
struct Registry {
  int64_t unready_offset = -1;
  std::atomic<int> unready_left{0};
  std::atomic<int> decodes{0};
};

class FlakyDecoder final : public decoders::PayloadDecoder {
 public:
  explicit FlakyDecoder(Registry& registry) : registry_(registry) {}
  pmq_payload_format format() const override { return PMQ_PAYLOAD_RAW; }
  decoders::DecodeStatus decode_record(std::span<const uint8_t> in, pmq_bytes& out, std::deque<std::string>&,
                                       std::string& error) override {
    ++registry_.decodes;
    // The payloads are {"n":<offset>}: the offset is the number in them.
    const int64_t offset = std::stoll(std::string(reinterpret_cast<const char*>(in.data()) + 5, in.size() - 6));
    if (offset == registry_.unready_offset && registry_.unready_left > 0) {
      --registry_.unready_left;
      error = "schema registry unreachable";
      return decoders::DecodeStatus::retry;
    }
    out = {in.data(), in.size()};
    return decoders::DecodeStatus::ok;
  }

 private:
  Registry& registry_;
};

class FlakyFactory final : public decoders::DecoderFactory {
 public:
  explicit FlakyFactory(Registry& registry) : registry_(registry) {}
  std::unique_ptr<decoders::PayloadDecoder> make() const override { return std::make_unique<FlakyDecoder>(registry_); }
  const std::string& error() const override { return error_; }

 private:
  Registry& registry_;
  std::string error_;
};

PreparationStage::Settings stage_settings() {
  PreparationStage::Settings s;
  s.log_prefix = "test";
  return s;
}

struct StageRig {
  StageRig() : factory(registry), stage(stage_settings(), factory, nullptr, nullptr, waiter) {}
  QueuedJob job(int64_t first, int n) {
    QueuedJob q;
    q.job.tp = A;
    q.job.records = records(first, n);
    return q;
  }
  Registry registry;
  FlakyFactory factory;
  RecordingWaiter waiter;
  PreparationStage stage;
};

TEST(PreparationStage, TheDeliveryThreadPreparesAJobNobodyPreparedAhead) {
  StageRig rig;
  PreparedJob ready = rig.stage.ready(rig.job(0, 3));
  EXPECT_EQ(ready.out.batch.records.size(), 3u);
  EXPECT_EQ(ready.out.commit_to, 3);
  EXPECT_EQ(ready.tp, A);
  EXPECT_EQ(rig.registry.decodes, 3);
}

TEST(PreparationStage, AJobPreparedAheadIsNotPreparedAgain) {
  StageRig rig;
  QueuedJob queued = rig.job(0, 3);
  rig.stage.prepare_ahead(queued);
  ASSERT_TRUE(queued.prepared);
  EXPECT_EQ(rig.registry.decodes, 3);
  PreparedJob ready = rig.stage.ready(std::move(queued));
  EXPECT_EQ(rig.registry.decodes, 3) << "prepared exactly once";
  EXPECT_EQ(ready.out.batch.records.size(), 3u);
}

TEST(PreparationStage, ARecordThatCannotBeDecodedForNowIsWaitedForThenTheWholeBatchIsReady) {
  StageRig rig;
  rig.registry.unready_offset = 1;
  rig.registry.unready_left = 2;
  PreparedJob ready = rig.stage.ready(rig.job(0, 3));
  EXPECT_EQ(rig.waiter.delays, (std::vector<int64_t>{200, 400})) << "the decode retry's back-off";
  EXPECT_TRUE(ready.out.retry_error.empty());
  EXPECT_EQ(ready.out.batch.records.size(), 3u);
  EXPECT_EQ(ready.out.commit_to, 3);
}

TEST(PreparationStage, AStopWhileARecordCannotBeDecodedLeavesTheRecordsBeforeItAndCommitsUpToIt) {
  StageRig rig;
  rig.registry.unready_offset = 2;
  rig.registry.unready_left = 1000;
  rig.waiter.stop_at_wait = 1;
  PreparedJob ready = rig.stage.ready(rig.job(0, 3));
  EXPECT_EQ(ready.out.batch.records.size(), 2u);
  EXPECT_EQ(ready.out.commit_to, 2) << "the undecodable record is read first on restart";
  EXPECT_FALSE(ready.out.retry_error.empty());
}

TEST(PreparationStage, AJobPreparedAheadThatCannotBeDecodedForNowIsPreparedAgainByTheDeliveryThread) {
  StageRig rig;
  rig.registry.unready_offset = 0;
  rig.registry.unready_left = 1;
  QueuedJob queued = rig.job(0, 2);
  rig.stage.prepare_ahead(queued);
  ASSERT_FALSE(queued.prepared->retry_error.empty());
  PreparedJob ready = rig.stage.ready(std::move(queued));
  EXPECT_EQ(rig.waiter.delays, (std::vector<int64_t>{200}));
  EXPECT_EQ(ready.out.batch.records.size(), 2u);
}

}  // namespace
}  // namespace picomq::runtime::testing
