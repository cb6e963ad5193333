// The example sink's unit test, on the kit's fake host: no broker, no runtime.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <picomq/kit/testing/fake_host.hpp>
#include <set>
#include <sstream>

namespace testing_kit = picomq::kit::testing;
using namespace std::chrono_literals;

namespace {
std::string read(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}
}  // namespace

TEST(FilesSink, BatchesOfAFileShareOneFsyncAndAreAcknowledgedOnlyAfterIt) {
  const auto dir = std::filesystem::temp_directory_path() / ("files-sink-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  auto host = testing_kit::FakeHost::load(FILES_SINK_PLUGIN);
  EXPECT_FALSE(host->check(R"({"file": "{topic_segment[-1]}.ndjson"})").empty()) << "directory is required";
  host->open(R"({"directory": ")" + dir.string() +
             R"(", "file": "{topic_segment[-1]}.ndjson", "commit_interval": "1m", "idle": "1m"})");
  auto a = host->start_write(testing_kit::TestBatch::json("shop.orders", 0, 0, {R"({"id":1})", R"({"id":2})"}));
  auto b = host->start_write(testing_kit::TestBatch::json("shop.orders", 0, 2, {R"({"id":3})"}));
  auto c = host->start_write(testing_kit::TestBatch::json("shop.refunds", 1, 7, {R"({"id":9})"}));
  EXPECT_FALSE(a->completed()) << "not acknowledged before its fsync";
  host->flush();
  for (auto& w : {a, b, c}) EXPECT_EQ(w->wait(5s).status, PMQ_WRITE_OK);
  EXPECT_EQ(host->counter("fsyncs"), 2u) << "one per file";
  const std::string orders = read(dir / "orders.ndjson");
  EXPECT_NE(orders.find(R"("pico_offset":2,"pico_timestamp":1700000000000,"payload":{"id":3})"), std::string::npos)
      << orders;
  EXPECT_EQ(std::count(orders.begin(), orders.end(), '\n'), 3);
  EXPECT_NE(read(dir / "refunds.ndjson").find(R"("pico_partition":1,"pico_offset":7)"), std::string::npos);
  host->close();
  std::filesystem::remove_all(dir);
}

TEST(FilesSink, TopicsTooLongForAFileNameGetDistinctShortenedFiles) {
  const auto dir = std::filesystem::temp_directory_path() / ("files-sink-long-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  auto host = testing_kit::FakeHost::load(FILES_SINK_PLUGIN);
  host->open(R"({"directory": ")" + dir.string() + R"(", "idle": "1ms"})");  // file "{topic}.ndjson"
  const std::string base(248, 'a');  // Kafka's longest topics: 249 characters, 256 with ".ndjson"
  for (const char last : {'x', 'y'})
    EXPECT_EQ(host->write(testing_kit::TestBatch::json(base + last, 0, 0, {R"({"id":1})"})).status, PMQ_WRITE_OK);
  std::set<std::string> names;
  for (const auto& file : std::filesystem::directory_iterator(dir)) {
    names.insert(file.path().filename().string());
    EXPECT_EQ(file.path().filename().string().size(), 255u);
  }
  EXPECT_EQ(names.size(), 2u) << "one file per topic";
  host->close();
  std::filesystem::remove_all(dir);
}
