#pragma once
// Modules: shared libraries of the runtime itself (not sink plugins) holding parts that cost memory
// the moment they are loaded and that most runtimes never use — the schema decoders (protobuf,
// avro-c, libcurl) and the operations API (cpp-httplib with OpenSSL, prometheus-cpp). The runtime
// loads one the first time it needs it (docs/runtime.md, "Memory at start"): a runtime reading JSON with
// the API off never maps them. Found in $PICOMQ_MODULE_DIR when set, else in the folder installed
// beside the executable (lib/picomq-connect/modules; build/lib/picomq-connect/modules in a build).
#include <cstddef>
#include <filesystem>
#include <string>

namespace picomq::modules {

// What every module's entry table starts with: the table's size and the version the module was
// built at, so that a runtime never calls into a module of another build.
struct TableHeader {
  std::size_t size;
  const char* version;
};

// The folder modules are loaded from.
std::filesystem::path module_dir();

// The table lib<name>.so's `entry` function returns, the module loaded once per process (never
// unloaded). Null with `error` naming the file and why (missing, unloadable, another version).
const TableHeader* load(const std::string& name, const char* entry, std::size_t table_size, std::string& error);

template <class Table>
const Table* load(const std::string& name, const char* entry, std::string& error) {
  return reinterpret_cast<const Table*>(load(name, entry, sizeof(Table), error));
}

}  // namespace picomq::modules
