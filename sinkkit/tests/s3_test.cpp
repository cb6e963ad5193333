// The kit's S3 client: addressing, S3's error document and XML texts (pure), and the client's
// answers through the fault-injecting receiver (http_receiver.py) standing in for S3: resends of
// what S3 allows to resend, refusals named without the secret, listing across pages, a close()
// that ends a resend wait. The real store (SeaweedFS) is the S3 and Redshift sinks' tests.
#include "picomq/kit/s3.hpp"

#include <gtest/gtest.h>

#include <thread>

#include "picomq/kit/testing/http_stub.hpp"
#include "picomq/sdk.hpp"

namespace picomq::kit::s3 {
namespace {

using namespace std::chrono_literals;

TEST(KitS3, PathStyleAndVirtualHostedUrlsWithEveryKeySegmentEncoded) {
  Bucket b{.name = "data"};
  ASSERT_FALSE(set_endpoint(b, "http://127.0.0.1:8333/"));
  EXPECT_EQ(b.object_url("t/partition=0/t+0+1.json"), "http://127.0.0.1:8333/data/t/partition%3D0/t%2B0%2B1.json");
  EXPECT_EQ(b.object_url(""), "http://127.0.0.1:8333/data");
  ASSERT_FALSE(set_endpoint(b, "https://s3.eu-west-1.amazonaws.com"));
  b.path_style = false;
  EXPECT_EQ(b.object_url("a b/%2F"), "https://data.s3.eu-west-1.amazonaws.com/a%20b/%252F");
  ASSERT_FALSE(set_endpoint(b, "https://minio.example/base/"));
  b.path_style = true;
  EXPECT_EQ(b.object_url("k"), "https://minio.example/base/data/k");
  EXPECT_EQ(b.where(), "bucket 'data' at https://minio.example/base");
}

TEST(KitS3, AnEndpointThatIsNotAnHttpUrlIsNamed) {
  Bucket b;
  EXPECT_EQ(set_endpoint(b, "ftp://h").value_or(""), "'ftp://h' must start with http:// or https://");
  EXPECT_EQ(set_endpoint(b, "s3.amazonaws.com").value_or(""), "'s3.amazonaws.com' must start with http:// or https://");
  EXPECT_EQ(set_endpoint(b, "http://user:pw@h").value_or(""),
            "must be scheme://host[:port][/path], without query or user");
  EXPECT_EQ(set_endpoint(b, "http:///path").value_or(""), "has no host");
}

TEST(KitS3, TheErrorDocumentAndXmlTexts) {
  const Error e = parse_error(
      "<?xml version=\"1.0\"?><Error><Code>SignatureDoesNotMatch</Code><Message>The request signature we calculated "
      "does not match</Message><Resource>/b/k</Resource></Error>");
  EXPECT_EQ(e.code, "SignatureDoesNotMatch");
  EXPECT_EQ(e.message, "The request signature we calculated does not match");
  EXPECT_EQ(parse_error("not xml").code, "");
  EXPECT_EQ(xml_text("a&amp;b&lt;c&gt;&quot;&apos;&#65;&#x263A;"), "a&b<c>\"'A\xE2\x98\xBA");
  EXPECT_EQ(xml_text("&#xZZ; &unknown; &"), "&#xZZ; &unknown; &");  // not references: kept as they are
  EXPECT_EQ(xml_element("<R><Key>a&amp;b</Key></R>", "Key"), "a&b");
}

class KitS3Client : public ::testing::Test {
 protected:
  ClientOptions options(std::chrono::milliseconds retry_timeout = 10s) {
    Bucket b{.name = "stage", .access_key_id = "AKIDEXAMPLE", .secret_access_key = "s3cr3t-never-shown"};
    EXPECT_FALSE(set_endpoint(b, receiver_.base_url()));
    return {.bucket = b,
            .retry_timeout = retry_timeout,
            .credentials_hint = "check the stage's keys",
            .count = [this](const char* name, uint64_t n) { counts_[name] += n; }};
  }
  kit::testing::HttpReceiver receiver_;
  std::map<std::string, uint64_t> counts_;
};

TEST_F(KitS3Client, ObjectsArePutReadListedAndDeletedSigned) {
  Client c(options());
  receiver_.script({{"path", "/stage/a/k%2B1"}, {"method", "GET"}, {"status", 200}, {"body", "bytes"}});
  c.put_object("a/k+1", "bytes", "text/plain");
  EXPECT_EQ(c.get_object("a/k+1"), "bytes");
  const auto put = receiver_.requests("/stage/a/k%2B1").at(0);
  EXPECT_EQ(put.method, "PUT");
  EXPECT_EQ(put.body, "bytes");
  EXPECT_EQ(put.headers.get("Content-Type").value_or(""), "text/plain");
  EXPECT_NE(put.headers.get("Authorization").value_or("").find("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/"),
            std::string::npos);

  // Two pages: the second asked for with the first's continuation token (XML-escaped in the answer).
  receiver_.script(nlohmann::json::array(
      {{{"path", "/stage/"},
        {"count", 1},
        {"status", 200},
        {"body",
         "<ListBucketResult><IsTruncated>true</IsTruncated><Contents><Key>a/x&amp;1</Key></Contents>"
         "<NextContinuationToken>t&amp;2</NextContinuationToken></ListBucketResult>"}},
       {{"path", "/stage/"},
        {"count", 1},
        {"status", 200},
        {"body",
         "<ListBucketResult><IsTruncated>false</IsTruncated><Contents><Key>a/y</Key></Contents></"
         "ListBucketResult>"}}}));
  EXPECT_EQ(c.list_keys("a/"), (std::vector<std::string>{"a/x&1", "a/y"}));
  const auto lists = receiver_.requests("/stage/");
  ASSERT_EQ(lists.size(), 2u);
  EXPECT_EQ(lists[0].query, "list-type=2&prefix=a%2F");
  EXPECT_EQ(lists[1].query, "continuation-token=t%262&list-type=2&prefix=a%2F");

  receiver_.script({{"path", "/stage/gone"}, {"status", 404}});
  c.delete_object("gone");  // already gone: no error
  c.delete_object("a/y");
  EXPECT_EQ(receiver_.requests("/stage/a/y").at(0).method, "DELETE");
}

TEST_F(KitS3Client, WhatS3AllowsToResendIsResentAndARefusalIsFatalWithoutTheSecret) {
  Client c(options());
  receiver_.script(nlohmann::json::array(
      {{{"path", "/stage/k"}, {"status", 503}, {"body", "<Error><Code>SlowDown</Code></Error>"}},
       {{"path", "/stage/k"}, {"status", 400}, {"body", "<Error><Code>RequestTimeout</Code></Error>"}},
       {{"path", "/stage/k"}, {"status", 409}, {"body", "<Error><Code>OperationAborted</Code></Error>"}}}));
  c.put_object("k", "v", "text/plain");
  EXPECT_EQ(receiver_.requests("/stage/k").size(), 4u);
  EXPECT_EQ(counts_["resends"], 3u);

  receiver_.script(
      {{"path", "/stage/denied"},
       {"count", 0},
       {"status", 403},
       {"body", "<Error><Code>SignatureDoesNotMatch</Code><Message>s3cr3t-never-shown</Message></Error>"}});
  try {
    c.put_object("denied", "v", "text/plain");
    FAIL() << "a 403 is fatal";
  } catch (const sdk::FatalError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("S3 refused the credentials for bucket 'stage'"), std::string::npos) << m;
    EXPECT_NE(m.find("403 SignatureDoesNotMatch"), std::string::npos) << m;
    EXPECT_NE(m.find("check the stage's keys"), std::string::npos) << m;
    EXPECT_EQ(m.find("s3cr3t-never-shown"), std::string::npos) << m;
  }
  EXPECT_EQ(receiver_.requests("/stage/denied").size(), 1u);  // never resent
}

TEST_F(KitS3Client, ResendsEndAtRetryTimeoutAndACloseEndsAWaitAtOnce) {
  receiver_.script({{"path", "/stage/busy"}, {"count", 0}, {"status", 503}});
  {
    Client c(options(600ms));
    try {
      c.put_object("busy", "v", "text/plain");
      FAIL() << "503 past retry_timeout is retryable";
    } catch (const sdk::RetryableError& e) {
      EXPECT_NE(std::string(e.what()).find("resent for up to retry_timeout"), std::string::npos) << e.what();
    }
  }
  // A 30 s Retry-After: close() from another thread ends the wait.
  receiver_.script({{"path", "/stage/later"}, {"count", 0}, {"status", 503}, {"headers", {{"Retry-After", "30"}}}});
  Client c(options(60s));
  std::thread closer([&] {
    std::this_thread::sleep_for(300ms);
    c.close();
  });
  const auto start = std::chrono::steady_clock::now();
  EXPECT_THROW(c.put_object("later", "v", "text/plain"), sdk::RetryableError);
  closer.join();
  EXPECT_LT(std::chrono::steady_clock::now() - start, kit::testing::scaled(3s));
}

}  // namespace
}  // namespace picomq::kit::s3
