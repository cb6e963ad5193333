#pragma once
// `picomq-connect ctl`: the operations API from the command line (docs/operations.md, "ctl"):
// status and lag (of one runtime or several of a fleet), stop / start / restart / pause /
// resume, offsets show / reset, validate and apply a definition, dead letters list / counts.
// Human tables by default, the API's JSON with --json; exit codes for scripts:
//   0 done; 1 the runtime refused or the operation failed (its answer printed); 2 usage;
//   3 a runtime could not be reached; 4 (status) a sink is not running (error, invalid, stopped).
#include <string>
#include <vector>

namespace picomq::runtime {

// `args`: what follows `ctl` on the command line.
int run_ctl(const std::vector<std::string>& args);

}  // namespace picomq::runtime
