// The integration tests share one fresh Apache Kafka broker (KRaft) for the whole run.
#include "harness.h"

int main(int argc, char** argv) { return picomq::test::run_tests_with_kafka(argc, argv); }
