// Starts one fresh Apache Kafka broker (KRaft) for the whole conformance run.
#include <gtest/gtest.h>

#include "harness.h"

namespace {
class KafkaEnvironment : public ::testing::Environment {
 public:
  void SetUp() override { picomq::test::Kafka::start_shared(); }
  void TearDown() override { picomq::test::Kafka::stop_shared(); }
};
}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  ::testing::AddGlobalTestEnvironment(new KafkaEnvironment);
  return RUN_ALL_TESTS();
}
