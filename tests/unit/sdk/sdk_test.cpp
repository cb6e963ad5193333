// The C++ SDK over the C ABI: plane declarations normalised through the runtime's own
// function, refusals for planes declared but not implemented, and every outcome a sink can
// produce crossing the boundary as the right status.
#include "picomq/sdk.hpp"

#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

namespace {

namespace sdk = picomq::sdk;
using sdk::DataPlane;

// The spec's three shapes.
struct MinimalSink : sdk::BaseSink<MinimalSink> {
  static constexpr std::string_view sink_name = "my_sink";
  void write(const sdk::Record&) {}
};

struct BatchSink : sdk::BaseSink<BatchSink> {
  static constexpr std::string_view sink_name = "my_batch_sink";
  static constexpr std::array accepted_data_planes{DataPlane::Rows, DataPlane::Batches};
  static constexpr std::array native_data_planes = accepted_data_planes;
  void write(const sdk::Record&) {}
  void write_batch(const sdk::Batch&) {}
};

struct ArrowSink : sdk::BaseSink<ArrowSink> {
  static constexpr std::string_view sink_name = "my_arrow_sink";
  static constexpr std::array accepted_data_planes{DataPlane::Rows, DataPlane::Batches, DataPlane::Arrow};
  static constexpr std::array native_data_planes = accepted_data_planes;
  void write(const sdk::Record&) {}
  void write_batch(const sdk::Batch&) {}
  void write_arrow_batch(const sdk::ArrowBatch&) {}
};

// Declares what it does not implement, or natively what it does not accept.
struct ClaimsArrowSink : sdk::BaseSink<ClaimsArrowSink> {
  static constexpr std::string_view sink_name = "claims_arrow";
  static constexpr std::array accepted_data_planes{DataPlane::Rows, DataPlane::Arrow};
  static constexpr std::array native_data_planes = accepted_data_planes;
  void write(const sdk::Record&) {}
};
struct NativeNotAcceptedSink : sdk::BaseSink<NativeNotAcceptedSink> {
  static constexpr std::string_view sink_name = "native_not_accepted";
  static constexpr std::array accepted_data_planes{DataPlane::Rows};
  static constexpr std::array native_data_planes{DataPlane::Rows, DataPlane::Batches};
  void write(const sdk::Record&) {}
  void write_batch(const sdk::Batch&) {}
};
// Only batches declared: rows are still accepted (every sink accepts rows) but not native.
struct BatchesOnlySink : sdk::BaseSink<BatchesOnlySink> {
  static constexpr std::string_view sink_name = "batches_only";
  static constexpr std::array accepted_data_planes{DataPlane::Batches};
  static constexpr std::array native_data_planes{DataPlane::Batches};
  void write_batch(const sdk::Batch&) {}
};

TEST(SdkPlanes, TheSpecsThreeShapesAdvertiseWhatTheyDeclare) {
  auto minimal = sdk::sink_data_plane_spec(MinimalSink{});
  EXPECT_EQ(minimal.accepted_planes, std::vector{DataPlane::Rows});
  EXPECT_EQ(minimal.native_planes, std::vector{DataPlane::Rows});
  EXPECT_EQ(minimal.best_plane, DataPlane::Rows);

  auto batch = sdk::sink_data_plane_spec<BatchSink>();
  EXPECT_EQ(batch.accepted_planes, (std::vector{DataPlane::Rows, DataPlane::Batches}));
  EXPECT_EQ(batch.native_planes, (std::vector{DataPlane::Rows, DataPlane::Batches}));
  EXPECT_EQ(batch.best_plane, DataPlane::Batches);

  auto arrow = sdk::sink_data_plane_spec<ArrowSink>();
  EXPECT_EQ(arrow.native_planes, (std::vector{DataPlane::Rows, DataPlane::Batches, DataPlane::Arrow}));
  EXPECT_EQ(arrow.best_plane, DataPlane::Arrow);

  auto batches_only = sdk::sink_data_plane_spec<BatchesOnlySink>();
  EXPECT_EQ(batches_only.accepted_planes, (std::vector{DataPlane::Rows, DataPlane::Batches}));
  EXPECT_EQ(batches_only.native_planes, std::vector{DataPlane::Batches});
}

TEST(SdkPlanes, OnlyImplementedHooksAreExported) {
  const auto& d = sdk::descriptor<BatchesOnlySink>();
  EXPECT_EQ(d.write_record, nullptr);
  EXPECT_NE(d.write_batch, nullptr);
  EXPECT_EQ(d.write_arrow, nullptr);
  EXPECT_STREQ(d.name, "batches_only");
  EXPECT_EQ(d.abi_version, PMQ_SINK_ABI_VERSION);
}

TEST(SdkPlanes, DeclaringWhatIsNotImplementedOrNotAcceptedIsRefusedWithTheReason) {
  try {
    sdk::sink_data_plane_spec<ClaimsArrowSink>();
    FAIL() << "expected a refusal";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "sink 'claims_arrow' declares native data plane 'arrow' but does not implement write_arrow");
  }
  try {
    sdk::sink_data_plane_spec<NativeNotAcceptedSink>();
    FAIL() << "expected a refusal";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "sink 'native_not_accepted' declares native data plane 'batches' but does not accept it");
  }
}

// ---------------------------------------------------------------- outcomes across the boundary

struct Captured {
  std::string error;
  std::vector<std::pair<size_t, std::string>> rejections;
  std::vector<std::string> logs;
  std::vector<pmq_write_status> completions;
};
Captured* g_captured = nullptr;

}  // namespace

struct pmq_write_result {
  Captured* captured;
};

namespace {

pmq_host_api fake_host() {
  pmq_host_api h{};
  h.struct_size = sizeof h;
  h.abi_version = PMQ_SINK_ABI_VERSION;
  h.log = [](void*, int32_t, const char* m) { g_captured->logs.emplace_back(m); };
  h.set_error = [](pmq_write_result* r, const char* m) { r->captured->error = m; };
  h.reject_record = [](pmq_write_result* r, size_t i, const char* m) { r->captured->rejections.emplace_back(i, m); };
  h.config_has = [](void*, const char* name) { return int(std::string(name) == "mode"); };
  h.config_string = [](void*, const char* name) -> const char* {
    return std::string(name) == "mode" ? "fail" : nullptr;
  };
  h.config_int = [](void*, const char*) -> int64_t { return 0; };
  h.config_float = [](void*, const char*) { return 0.0; };
  h.config_bool = [](void*, const char*) { return 0; };
  h.config_list_size = [](void*, const char*) -> size_t { return 0; };
  h.config_list_item = [](void*, const char*, size_t) -> const char* { return nullptr; };
  h.config_json = [](void*, const char*) -> const char* { return nullptr; };
  h.complete = [](pmq_write_result* r, pmq_write_status st) { r->captured->completions.push_back(st); };
  return h;
}

// Fails in the way its batch's topic names.
struct MoodySink : sdk::BaseSink<MoodySink> {
  static constexpr std::string_view sink_name = "moody";
  static constexpr std::array accepted_data_planes{DataPlane::Rows, DataPlane::Batches};
  static constexpr std::array native_data_planes = accepted_data_planes;
  static constexpr std::array options{pmq_option{"mode", PMQ_OPTION_STRING, 0, "\"fail\"", nullptr, "how to behave"}};
  void open(const sdk::Config& config) {
    if (config.string("mode") != "fail") throw std::runtime_error("config not seen");
  }
  void write(const sdk::Record& r) {
    if (r.offset() == 7) throw sdk::RecordRejected(r.index(), "offset 7 is cursed");
  }
  void write_batch(const sdk::Batch& batch) {
    const std::string topic(batch.topic());
    if (topic == "retry") throw sdk::RetryableError("try later");
    if (topic == "partial") throw sdk::PartialWriteError("half done");
    if (topic == "fatal") throw sdk::FatalError("no such table");
    if (topic == "std") throw std::out_of_range("oops");
    if (topic == "odd") throw 42;
    if (topic == "reject")
      for (const auto& r : batch)
        if (r.offset() % 2) reject(r.index(), "odd offset " + std::to_string(r.offset()));
    log(sdk::LogLevel::Info, "wrote " + std::to_string(batch.size()));
  }
};

struct BatchFixture {
  std::vector<pmq_record> records;
  pmq_batch batch{};
  explicit BatchFixture(const char* topic, int n = 4) {
    for (int i = 0; i < n; ++i) {
      pmq_record r{};
      r.offset = i;
      records.push_back(r);
    }
    batch.struct_size = sizeof batch;
    batch.topic = topic;
    batch.schema = "json";
    batch.records = records.data();
    batch.record_count = records.size();
    batch.record_size = sizeof(pmq_record);
  }
};

TEST(SdkOutcomes, ExceptionsBecomeStatusesWithTheirMessages) {
  Captured captured;
  g_captured = &captured;
  pmq_host_api host = fake_host();
  const auto& d = sdk::descriptor<MoodySink>();
  char err[128] = {0};
  void* instance = d.open(&host, "{}", err, sizeof err);
  ASSERT_NE(instance, nullptr) << err;

  auto run = [&](const char* topic) {
    captured = {};
    BatchFixture f(topic);
    pmq_write_result result{&captured};
    return d.write_batch(instance, &f.batch, &result);
  };
  EXPECT_EQ(run("ok"), PMQ_WRITE_OK);
  EXPECT_EQ(captured.logs.at(0), "wrote 4");
  EXPECT_EQ(run("retry"), PMQ_WRITE_RETRY);
  EXPECT_EQ(captured.error, "try later");
  EXPECT_EQ(run("partial"), PMQ_WRITE_PARTIAL);
  EXPECT_EQ(run("fatal"), PMQ_WRITE_FATAL);
  EXPECT_EQ(captured.error, "no such table");
  EXPECT_EQ(run("std"), PMQ_WRITE_PARTIAL) << "an unknown failure may have written part of the batch";
  EXPECT_EQ(captured.error, "oops");
  EXPECT_EQ(run("odd"), PMQ_WRITE_PARTIAL);
  EXPECT_EQ(run("reject"), PMQ_WRITE_REJECTED);
  EXPECT_EQ(captured.rejections,
            (std::vector<std::pair<size_t, std::string>>{{1, "odd offset 1"}, {3, "odd offset 3"}}));
  EXPECT_EQ(run("ok"), PMQ_WRITE_OK) << "rejections do not leak into the next call";

  BatchFixture eight("rows", 8);
  captured = {};
  pmq_write_result result{&captured};
  EXPECT_EQ(d.write_record(instance, &eight.batch, 3, &result), PMQ_WRITE_OK);
  EXPECT_EQ(d.write_record(instance, &eight.batch, 7, &result), PMQ_WRITE_REJECTED);
  EXPECT_EQ(captured.rejections.at(0), (std::pair<size_t, std::string>{7, "offset 7 is cursed"}));
  d.close(instance);
}

TEST(SdkOutcomes, OpenFailureCarriesTheMessage) {
  Captured captured;
  g_captured = &captured;
  pmq_host_api host = fake_host();
  host.config_string = [](void*, const char*) -> const char* { return nullptr; };
  char err[128] = {0};
  EXPECT_EQ(sdk::descriptor<MoodySink>().open(&host, "{}", err, sizeof err), nullptr);
  EXPECT_STREQ(err, "config not seen");
}

// Declares at open() that it never reads headers.
struct HeaderlessSink : sdk::BaseSink<HeaderlessSink> {
  static constexpr std::string_view sink_name = "headerless";
  void open(const sdk::Config&) { declare_unread_fields(PMQ_FIELD_HEADERS); }
  void write(const sdk::Record&) {}
};

uint32_t g_unread_fields = 0;

TEST(SdkOpen, UnreadFieldsReachAHostThatKnowsTheCallAndAreSkippedForAnOlderOne) {
  Captured captured;
  g_captured = &captured;
  pmq_host_api host = fake_host();
  host.set_unread_fields = [](void*, uint32_t fields) { g_unread_fields = fields; };
  char err[128] = {0};
  const auto& d = sdk::descriptor<HeaderlessSink>();
  void* instance = d.open(&host, "{}", err, sizeof err);
  ASSERT_NE(instance, nullptr) << err;
  EXPECT_EQ(g_unread_fields, PMQ_FIELD_HEADERS);
  d.close(instance);

  // A 2.0 host's struct ends before set_unread_fields: the SDK must not read past it.
  g_unread_fields = 0;
  host.struct_size = offsetof(pmq_host_api, set_unread_fields);
  instance = d.open(&host, "{}", err, sizeof err);
  ASSERT_NE(instance, nullptr) << err;
  EXPECT_EQ(g_unread_fields, 0u);
  d.close(instance);
}

// An asynchronous sink: write_batch returns the write's Pending handle and completes it later.
struct AsyncSink : sdk::BaseSink<AsyncSink> {
  static constexpr std::string_view sink_name = "async";
  static constexpr std::array accepted_data_planes{DataPlane::Rows, DataPlane::Batches};
  static constexpr std::array native_data_planes = accepted_data_planes;
  static constexpr uint32_t max_in_flight = 8;
  std::vector<sdk::Pending> kept;
  void write(const sdk::Record&) {}
  sdk::Pending write_batch(const sdk::Batch& batch) {
    sdk::Pending p = pending();
    const std::string topic(batch.topic());
    if (topic == "throw") throw sdk::FatalError("refused before starting");
    if (topic == "now") p.done();  // completes before the call even returns
    if (topic != "drop") kept.push_back(p);
    return p;
  }
};

TEST(SdkAsync, PendingWritesCompleteExactlyOnceFromAnyThread) {
  EXPECT_EQ(sdk::descriptor<AsyncSink>().max_in_flight, 8u);
  EXPECT_EQ(sdk::descriptor<MinimalSink>().max_in_flight, 1u);
  Captured captured;
  g_captured = &captured;
  pmq_host_api host = fake_host();
  const auto& d = sdk::descriptor<AsyncSink>();
  char err[128] = {0};
  void* instance = d.open(&host, "{}", err, sizeof err);
  ASSERT_NE(instance, nullptr) << err;
  auto* sink = static_cast<AsyncSink*>(instance);

  BatchFixture later("later"), now("now"), thrown("throw"), dropped("drop");
  pmq_write_result r_later{&captured}, r_now{&captured}, r_throw{&captured}, r_drop{&captured};
  EXPECT_EQ(d.write_batch(instance, &later.batch, &r_later), PMQ_WRITE_PENDING);
  EXPECT_TRUE(captured.completions.empty());
  std::thread([p = sink->kept.back()]() mutable {
    p.reject(2, "no room for it");
    p.done();
    p.retry("ignored: already completed");
  }).join();
  EXPECT_EQ(captured.completions, std::vector{PMQ_WRITE_REJECTED}) << "rejections make it REJECTED, once";
  EXPECT_EQ(captured.rejections.at(0), (std::pair<size_t, std::string>{2, "no room for it"}));

  captured.completions.clear();
  EXPECT_EQ(d.write_batch(instance, &now.batch, &r_now), PMQ_WRITE_PENDING);
  EXPECT_EQ(captured.completions, std::vector{PMQ_WRITE_OK}) << "a handle completed inside the call is fine";

  captured.completions.clear();
  EXPECT_EQ(d.write_batch(instance, &thrown.batch, &r_throw), PMQ_WRITE_FATAL) << "a throw is a synchronous outcome";
  EXPECT_TRUE(captured.completions.empty()) << "and the handle taken before it never completes";

  EXPECT_EQ(d.write_batch(instance, &dropped.batch, &r_drop), PMQ_WRITE_PENDING);
  EXPECT_EQ(captured.completions, std::vector{PMQ_WRITE_PARTIAL})
      << "a dropped handle reports a possible partial write";
  EXPECT_EQ(captured.error, "the sink dropped a pending write without completing it");
  d.close(instance);
}

TEST(SdkRecords, RecordAndBatchViewsReadThroughTheStride) {
  struct Wide {  // a host that knows a bigger record than this SDK
    pmq_record r;
    uint64_t extra;
  };
  const uint8_t key[] = {0, 0xff};
  const pmq_header headers[] = {
      {{reinterpret_cast<const uint8_t*>("h"), 1}, {reinterpret_cast<const uint8_t*>("v"), 1}},
      {{reinterpret_cast<const uint8_t*>("n"), 1}, {nullptr, 0}}};
  Wide wide[2]{};
  wide[0].r.offset = 10;
  wide[0].r.timestamp_ms = 1700000000000;
  wide[0].r.key = {key, 2};
  wide[0].r.headers = headers;
  wide[0].r.header_count = 2;
  wide[0].r.payload = {reinterpret_cast<const uint8_t*>("{\"a\":1}"), 7};
  wide[1].r.offset = 11;
  pmq_batch b{};
  b.topic = "t";
  b.partition = 3;
  b.payload_format = PMQ_PAYLOAD_JSON;
  b.schema = "json";
  b.records = &wide[0].r;
  b.record_count = 2;
  b.record_size = sizeof(Wide);
  sdk::Batch batch(&b);
  std::vector<int64_t> offsets;
  for (const auto& r : batch) offsets.push_back(r.offset());
  EXPECT_EQ(offsets, (std::vector<int64_t>{10, 11}));
  EXPECT_EQ(batch[0].payload_text(), "{\"a\":1}");
  EXPECT_EQ(batch[0].key()->size(), 2u);
  EXPECT_EQ(batch[0].headers().at(0).name, "h");
  EXPECT_FALSE(batch[0].headers().at(1).value.has_value());
  EXPECT_TRUE(batch[1].is_tombstone());
  EXPECT_FALSE(batch[1].key().has_value());
  EXPECT_EQ(batch[1].partition(), 3);
  EXPECT_EQ(batch[1].format(), sdk::PayloadFormat::Json);
}

}  // namespace

namespace {

// ---------------------------------------------------------------- ABI 2.2 in the SDK

constexpr std::array kTypedOptions{
    pmq_option{"mode", PMQ_OPTION_STRING, 0, "\"fail\"", nullptr, "a string"},
    pmq_option{"limit", PMQ_OPTION_INT, 0, "1", nullptr, "an int"},
};

// Reads what open_as says: a declared option, an undeclared one, or one as the wrong type.
std::string g_read;
struct StrictSink : sdk::BaseSink<StrictSink> {
  static constexpr std::string_view sink_name = "strict";
  static constexpr auto options = kTypedOptions;
  void open(const sdk::Config& config) {
    if (g_read == "mode") (void)config.string("mode");
    if (g_read == "auto_create_tabel") (void)config.boolean("auto_create_tabel");
    if (g_read == "limit as string") (void)config.string("limit");
  }
  void write(const sdk::Record&) {}
};

TEST(SdkConfig, ReadingAnUndeclaredOrMistypedOptionFailsTheOpenNamingIt) {
  Captured captured;
  g_captured = &captured;
  pmq_host_api host = fake_host();
  const auto& d = sdk::descriptor<StrictSink>();
  char err[256] = {0};
  g_read = "mode";
  void* instance = d.open(&host, "{}", err, sizeof err);
  ASSERT_NE(instance, nullptr) << err;
  d.close(instance);
  g_read = "auto_create_tabel";
  EXPECT_EQ(d.open(&host, "{}", err, sizeof err), nullptr);
  EXPECT_STREQ(err, "option 'auto_create_tabel' is not declared in the sink's option table");
  g_read = "limit as string";
  EXPECT_EQ(d.open(&host, "{}", err, sizeof err), nullptr);
  EXPECT_STREQ(err, "option 'limit' is read as another type than the sink declares it");
}

// Every 2.2 hook, shadowed.
std::vector<std::string> g_events;
struct LifecycleSink : sdk::BaseSink<LifecycleSink> {
  static constexpr std::string_view sink_name = "lifecycle";
  static constexpr std::array accepted_data_planes{DataPlane::Rows, DataPlane::Batches};
  static constexpr std::array native_data_planes{DataPlane::Batches};
  static constexpr auto options = kTypedOptions;
  static void validate(const sdk::Config& config, sdk::ConfigProblems& problems) {
    if (config.integer("limit") > 10 && config.string("mode") == "fail")
      problems.add("limit", "must be at most 10 in fail mode");
    if (config.integer("limit") < 0) problems.add("limit", "must not be negative");
  }
  void open(const sdk::Config&) { g_events.push_back("open " + std::string(sink_key())); }
  void write_batch(const sdk::Batch& batch) {
    count("batches");
    count("records", batch.size());
    g_events.push_back("write block " + std::to_string(batch.block_index()));
  }
  void flush(std::chrono::milliseconds timeout) { g_events.push_back("flush " + std::to_string(timeout.count())); }
  void partitions_assigned(uint32_t block, const std::vector<sdk::TopicPartition>& tps) {
    g_events.push_back("assigned " + std::to_string(block) + " " + std::string(tps.at(0).topic) + "[" +
                       std::to_string(tps.at(0).partition) + "]");
  }
};

std::map<std::string, uint64_t> g_counts;

TEST(SdkLifecycle, HooksAreExportedOnlyWhenShadowedAndReachTheSink) {
  EXPECT_EQ(sdk::descriptor<BatchSink>().validate, nullptr);
  EXPECT_EQ(sdk::descriptor<BatchSink>().flush, nullptr);
  EXPECT_EQ(sdk::descriptor<BatchSink>().partitions_assigned, nullptr);
  const auto& d = sdk::descriptor<LifecycleSink>();
  ASSERT_NE(d.validate, nullptr);
  ASSERT_NE(d.flush, nullptr);
  ASSERT_NE(d.partitions_assigned, nullptr);
  ASSERT_NE(d.partitions_revoked, nullptr) << "the pair is exported together";

  Captured captured;
  g_captured = &captured;
  g_events.clear();
  pmq_host_api host = fake_host();
  host.sink_key = "orders_pg";
  host.count = [](void*, const char* name, uint64_t n) { g_counts[name] += n; };
  host.config_int = [](void*, const char* name) -> int64_t { return std::string(name) == "limit" ? 11 : 0; };
  char err[256] = {0};
  EXPECT_EQ(d.validate(&host, "{}", err, sizeof err), 0);
  EXPECT_STREQ(err, "limit: must be at most 10 in fail mode\n");
  host.config_int = [](void*, const char*) -> int64_t { return 3; };
  EXPECT_EQ(d.validate(&host, "{}", err, sizeof err), 1);

  void* instance = d.open(&host, "{}", err, sizeof err);
  ASSERT_NE(instance, nullptr) << err;
  const pmq_topic_partition tp{"orders", 2};
  d.partitions_assigned(instance, 1, &tp, 1);
  BatchFixture f("orders");
  f.batch.block_index = 1;
  pmq_write_result result{&captured};
  EXPECT_EQ(d.write_batch(instance, &f.batch, &result), PMQ_WRITE_OK);
  d.flush(instance, 1500);
  d.close(instance);
  EXPECT_EQ(g_events,
            (std::vector<std::string>{"open orders_pg", "assigned 1 orders[2]", "write block 1", "flush 1500"}));
  EXPECT_EQ(g_counts["batches"], 1u);
  EXPECT_EQ(g_counts["records"], f.batch.record_count);

  // A 2.1 host has neither sink_key nor count: the SDK must not read past its struct.
  g_events.clear();
  g_counts.clear();
  host.struct_size = offsetof(pmq_host_api, sink_key);
  instance = d.open(&host, "{}", err, sizeof err);
  ASSERT_NE(instance, nullptr) << err;
  EXPECT_EQ(d.write_batch(instance, &f.batch, &result), PMQ_WRITE_OK);
  d.close(instance);
  EXPECT_EQ(g_events.front(), "open ");
  EXPECT_TRUE(g_counts.empty());
}

}  // namespace
