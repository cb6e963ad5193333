// The entry of libpicomq_ops.so (ops_module.h); the only symbol it exports (src/modules/module.map).
#include "runtime/ops/ops_module.h"

#include "runtime/ops/ctl.h"
#include "runtime/ops/health_probe.h"

namespace picomq::runtime {
namespace {

const OpsModule kModule{{sizeof(OpsModule), PICOMQ_MODULE_VERSION}, start_api_server, probe_health, run_ctl};

}  // namespace
}  // namespace picomq::runtime

extern "C" const picomq::modules::TableHeader* picomq_ops_module() { return &picomq::runtime::kModule.header; }
