#include "modules/loader.h"

#include <dlfcn.h>

#include <cstdlib>
#include <map>
#include <mutex>

namespace picomq::modules {

namespace {
// The folder an operator (or a test) named, when one is named.
const char* module_dir_from_env() {
  const char* dir = std::getenv("PICOMQ_MODULE_DIR");
  return dir && *dir ? dir : nullptr;
}
}  // namespace

std::filesystem::path module_dir() {
  if (const char* dir = module_dir_from_env()) return dir;
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return (exe.parent_path() / PICOMQ_MODULE_RELATIVE_DIR).lexically_normal();
}

const TableHeader* load(const std::string& name, const char* entry, std::size_t table_size, std::string& error) {
  static std::mutex mutex;
  static std::map<std::string, const TableHeader*> loaded;
  const std::lock_guard lock(mutex);
  if (auto it = loaded.find(name); it != loaded.end()) return it->second;

  const auto file = module_dir() / ("lib" + name + ".so");
  // RTLD_LOCAL: a module's own symbols never interpose on the runtime's or another module's.
  void* handle = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    std::string why = dlerror();
    if (why.rfind(file.string() + ": ", 0) == 0) why.erase(0, file.string().size() + 2);  // dlerror repeats the path
    error = "module " + name + ": cannot load '" + file.string() + "': " + why +
            (module_dir_from_env() != nullptr
                 ? " (the folder PICOMQ_MODULE_DIR names)"
                 : " (the modules are installed with the executable: is the installation complete?)");
    return nullptr;
  }
  using Entry = const TableHeader* (*)();
  auto* get = reinterpret_cast<Entry>(dlsym(handle, entry));
  const TableHeader* table = get ? get() : nullptr;
  if (!table || table->size != table_size || std::string(table->version) != PICOMQ_MODULE_VERSION) {
    error = "module " + name + ": '" + file.string() + "' is not the one built with this picomq-connect " +
            PICOMQ_MODULE_VERSION + (table ? std::string(" (it is ") + table->version + ")" : std::string());
    dlclose(handle);
    return nullptr;
  }
  loaded.emplace(name, table);
  return table;
}

}  // namespace picomq::modules
