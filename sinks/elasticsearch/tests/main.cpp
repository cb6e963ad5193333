// The Elasticsearch sink's tests share one Kafka broker and one node of each flavor: the nodes
// start in the background while the broker starts.
#include "harness.h"
#include "search_server.h"

int main(int argc, char** argv) {
  using picomq::test::SearchServer;
  SearchServer::start_early({SearchServer::Flavor::OpenSearch, SearchServer::Flavor::Elasticsearch});
  return picomq::test::run_tests_with_kafka(argc, argv);
}
