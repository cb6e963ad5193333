// main() of a conformance executable, in this tree (tests/conformance/CMakeLists.txt) and out of
// it (installed beside PicomqAddConformanceTest.cmake, compiled by picomq_add_conformance_test()):
// where the build found the runtime, the plugins and the Kafka launcher come as compile
// definitions; the environment overrides each (picomq/kit/testing/harness.hpp, Locations).
#include "picomq/kit/testing/conformance.hpp"

int main(int argc, char** argv) {
  return picomq::conformance::run(argc, argv, {PICOMQ_CONNECT_BIN, {PICOMQ_PLUGIN_DIR}, PICOMQ_KAFKA_SH});
}
