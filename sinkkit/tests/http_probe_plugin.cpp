// A stand-in for an HTTP sink plugin: the kit's HTTP client used from inside a shared library
// that http_client_test.cpp dlopen()s, calls and dlclose()s, as the runtime does with sinks.
#include <atomic>
#include <chrono>

#include "picomq/kit/http_client.hpp"

// One synchronous and three asynchronous POSTs to `url`, then close(): the status of the first,
// -2 if an asynchronous one did not get 200, -1 on an exception.
extern "C" __attribute__((visibility("default"))) long sinkkit_probe_round_trip(const char* url) {
  using picomq::kit::HttpClient;
  using picomq::kit::HttpResponse;
  try {
    HttpClient client({.max_in_flight = 2});
    const long status = client.send({.method = "POST", .url = url, .body = "sync"}).status;
    std::atomic<int> ok{0};
    for (int i = 0; i < 3; ++i)
      client.send_async({.method = "POST", .url = url, .body = "async"}, [&ok](HttpResponse r) {
        if (r.status == 200) ++ok;
      });
    client.close(std::chrono::seconds(60));
    return ok == 3 ? status : -2;
  } catch (...) {
    return -1;
  }
}
