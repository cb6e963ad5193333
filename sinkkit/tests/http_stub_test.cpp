// The HTTP stub itself (sinkkit/testing): the receiver speaks strict HTTP/1.1 (checked on a raw
// socket), its rules match and run out as documented, and its idempotency mode answers a repeated
// key from its store. The HTTP sinks' tests stand on these.
#include "picomq/kit/testing/http_stub.hpp"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <stdexcept>
#include <string>

#include "picomq/kit/compression.hpp"
#include "picomq/kit/http_client.hpp"
#include "picomq/kit/outcome.hpp"

namespace picomq::kit {
namespace {

using testing::HttpReceiver;

// One TCP connection to the receiver, requests written by hand.
class RawConnection {
 public:
  explicit RawConnection(uint16_t port) : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    timeval timeout{static_cast<time_t>(testing::scaled(std::chrono::seconds(30)).count() / 1000), 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0)
      throw std::runtime_error("connect failed");
  }
  ~RawConnection() { ::close(fd_); }

  void write(const std::string& bytes) {
    if (::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(bytes.size()))
      throw std::runtime_error("send failed");
  }
  // One response: the head, then Content-Length bytes of body. Empty when the server closed.
  std::string read_response() {
    size_t head_end;
    while ((head_end = buffer_.find("\r\n\r\n")) == std::string::npos)
      if (!fill()) return {};
    size_t length = 0;
    const std::string head = buffer_.substr(0, head_end);
    if (const size_t at = head.find("Content-Length: "); at != std::string::npos)
      length = std::stoul(head.substr(at + 16));
    while (buffer_.size() < head_end + 4 + length)
      if (!fill()) return {};
    std::string response = buffer_.substr(0, head_end + 4 + length);
    buffer_.erase(0, response.size());
    return response;
  }
  bool closed_by_server() { return buffer_.empty() && !fill(); }

 private:
  bool fill() {
    char chunk[4096];
    const ssize_t n = ::recv(fd_, chunk, sizeof chunk, 0);
    if (n <= 0) return false;
    buffer_.append(chunk, static_cast<size_t>(n));
    return true;
  }
  int fd_;
  std::string buffer_;
};

class HttpReceiverTest : public ::testing::Test {
 protected:
  HttpReceiver receiver;
};

TEST_F(HttpReceiverTest, ChunkedBodiesAndKeepAliveOverOneConnection) {
  RawConnection c(receiver.port());
  c.write(
      "POST /chunked HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
      "5\r\nhello\r\n6;name=value\r\n world\r\n0\r\nX-Trailer: t\r\n\r\n");
  EXPECT_EQ(c.read_response().rfind("HTTP/1.1 200 OK\r\n", 0), 0u);
  c.write("PUT /second HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\n\r\nabc");
  EXPECT_EQ(c.read_response().rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << "the connection stayed open";

  const auto seen = receiver.requests();
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_TRUE(seen[0].chunked);
  EXPECT_EQ(seen[0].body, "hello world");
  EXPECT_EQ(seen[1].method, "PUT");
  EXPECT_EQ(seen[1].body, "abc");
  EXPECT_EQ(seen[0].connection, seen[1].connection);
  EXPECT_EQ(receiver.stats().connections, 1u);
}

TEST_F(HttpReceiverTest, AmbiguousFramingIsRefusedAndTheConnectionClosed) {
  RawConnection c(receiver.port());
  c.write("POST /x HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n");
  EXPECT_EQ(c.read_response().rfind("HTTP/1.1 400 ", 0), 0u);
  EXPECT_TRUE(c.closed_by_server()) << "RFC 9112 section 6.1: nothing after it can be trusted";
}

TEST_F(HttpReceiverTest, ABodyThatDoesNotDecompressIsA400) {
  HttpClient client({});
  HttpRequest r;
  r.url = receiver.url("/z");
  r.body = "not gzip at all";
  r.headers.set("Content-Encoding", "gzip");
  const HttpResponse response = client.send(std::move(r));
  EXPECT_EQ(response.status, 400);
  EXPECT_NE(response.body.find("does not decompress"), std::string::npos) << response.body;
  EXPECT_EQ(receiver.requests("/z").at(0).answer, 400);
}

TEST_F(HttpReceiverTest, RulesMatchByMethodAndPathAndRunOut) {
  receiver.script({{{"path", "/index/*"}, {"method", "PUT"}, {"status", 201}, {"count", 2}},
                   {{"path", "/always"}, {"status", 503}, {"count", 0}}});
  HttpClient client({});
  auto send = [&](std::string method, std::string path) {
    HttpRequest r;
    r.method = std::move(method);
    r.url = receiver.url(path);
    return client.send(std::move(r)).status;
  };
  EXPECT_EQ(send("POST", "/index/a"), 200) << "another method";
  EXPECT_EQ(send("PUT", "/index/a"), 201);
  EXPECT_EQ(send("PUT", "/other"), 200) << "another path";
  EXPECT_EQ(send("PUT", "/index/b/c"), 201);
  EXPECT_EQ(send("PUT", "/index/a"), 200) << "used up after two";
  for (int i = 0; i < 3; ++i) EXPECT_EQ(send("GET", "/always"), 503) << "count 0: every time";

  receiver.set_default_answer(202, {{"X-Default", "yes"}}, "queued");
  HttpRequest r;
  r.url = receiver.url("/default");
  const HttpResponse answered = client.send(std::move(r));
  EXPECT_EQ(answered.status, 202);
  EXPECT_EQ(answered.body, "queued");
  EXPECT_EQ(answered.headers.get("X-Default"), "yes");

  receiver.reset();
  EXPECT_TRUE(receiver.requests().empty());
  EXPECT_EQ(send("GET", "/always"), 200) << "rules and the default answer are gone";
}

TEST_F(HttpReceiverTest, IdempotencyModeAnswersARepeatedKeyFromItsStore) {
  receiver.idempotency("Idempotency-Key");
  receiver.script(
      {{{"path", "/pay"}, {"status", 503}},                                           // not processed: not stored
       {{"path", "/pay"}, {"status", 201}, {"body", "id=7"}, {"action", "reset"}}});  // processed, answer lost
  auto pay = [&](const std::string& key) {
    HttpClient client({});  // a fresh connection each time: curl resends nothing on its own
    HttpRequest r;
    r.url = receiver.url("/pay");
    r.body = "amount=5";
    r.headers.set("Idempotency-Key", key);
    return client.send(std::move(r));
  };
  EXPECT_EQ(pay("k1").status, 503);
  EXPECT_EQ(OutcomeRules().classify(pay("k1")).outcome, Outcome::MaybeWritten) << "written, but the answer was cut";
  const HttpResponse replay = pay("k1");
  EXPECT_EQ(replay.status, 201) << "the stored answer to the request that was processed";
  EXPECT_EQ(replay.body, "id=7");
  EXPECT_EQ(pay("k2").status, 200) << "another key: processed afresh";

  const auto seen = receiver.requests("/pay");
  ASSERT_EQ(seen.size(), 4u);
  EXPECT_FALSE(seen[1].duplicate);
  EXPECT_TRUE(seen[2].duplicate);
  EXPECT_FALSE(seen[3].duplicate);
  EXPECT_EQ(receiver.stats().duplicates, 1u);

  receiver.idempotency(std::nullopt);
  EXPECT_EQ(pay("k1").status, 200) << "off: no store";
}

TEST_F(HttpReceiverTest, BadControlRequestsAreRefusedLoudly) {
  EXPECT_THROW(receiver.script({{"path", "/x"}, {"statsu", 500}}), std::runtime_error) << "a misspelt field";
  EXPECT_THROW(receiver.script({{"action", "explode"}}), std::runtime_error);
}

}  // namespace
}  // namespace picomq::kit
