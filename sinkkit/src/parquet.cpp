#include "picomq/kit/parquet.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <stdexcept>
#include <vector>

#include "picomq/parquet_writer.h"

namespace picomq::kit {
namespace {

constexpr const char* library_name = "libpicomq_parquet.so";

struct Writer {
  decltype(&pmq_parquet_write_file) write_file = nullptr;
  std::string problem;  // why it is not there
};

// Where the library may be: PICOMQ_PARQUET_LIBRARY (a file), beside the plugin (or program) this
// code is linked into, then the dynamic loader's own search.
std::vector<std::string> candidates() {
  std::vector<std::string> out;
  if (const char* explicit_path = std::getenv("PICOMQ_PARQUET_LIBRARY"); explicit_path && *explicit_path)
    out.emplace_back(explicit_path);
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&parquet_available), &info) && info.dli_fname)
    out.push_back((std::filesystem::path(info.dli_fname).parent_path() / library_name).string());
  out.emplace_back(library_name);
  return out;
}

const Writer& writer() {
  static Writer w;
  static std::once_flag once;
  std::call_once(once, [] {
    std::string tried;
    for (const std::string& path : candidates()) {
      if (path.find('/') != std::string::npos && !std::filesystem::exists(path)) {
        tried += "\n  " + path + ": no such file";
        continue;
      }
      void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (!handle) {
        const char* e = dlerror();
        tried += "\n  " + path + ": " + (e ? e : "not loadable");
        continue;
      }
      auto version = reinterpret_cast<decltype(&pmq_parquet_api_version)>(dlsym(handle, "pmq_parquet_api_version"));
      auto write = reinterpret_cast<decltype(&pmq_parquet_write_file)>(dlsym(handle, "pmq_parquet_write_file"));
      if (!version || !write || version() / 100 != PMQ_PARQUET_API_VERSION / 100) {
        tried +=
            "\n  " + path + ": not the Parquet writer of API " + std::to_string(PMQ_PARQUET_API_VERSION / 100) + ".x";
        dlclose(handle);
        continue;
      }
      w.write_file = write;  // the handle stays open for the life of the process
      return;
    }
    w.problem = "the Parquet writer (" + std::string(library_name) +
                ", picomq-connect's heavy component `parquet`: cmake --install <build> --component parquet) is not "
                "installed; tried:" +
                tried;
  });
  return w;
}

struct Output {
  std::string file, error;
};
void append_file(void* ctx, const uint8_t* data, size_t len) {
  static_cast<Output*>(ctx)->file.append(reinterpret_cast<const char*>(data), len);
}
void append_error(void* ctx, const uint8_t* data, size_t len) {
  static_cast<Output*>(ctx)->error.append(reinterpret_cast<const char*>(data), len);
}

}  // namespace

std::optional<ParquetCodec> parse_parquet_codec(std::string_view name) {
  if (name == "none") return ParquetCodec::None;
  if (name == "snappy") return ParquetCodec::Snappy;
  if (name == "zstd") return ParquetCodec::Zstd;
  return std::nullopt;
}

std::optional<std::string> parquet_available() {
  const Writer& w = writer();
  if (w.write_file) return std::nullopt;
  return w.problem;
}

std::string write_parquet(const ParquetOptions& options, ArrowSchema* schema, ArrowArray* array) {
  const Writer& w = writer();
  if (!w.write_file) {
    if (schema->release) schema->release(schema);
    if (array->release) array->release(array);
    throw std::runtime_error(w.problem);
  }
  const pmq_parquet_options o{
      .struct_size = sizeof(pmq_parquet_options),
      .codec = options.codec == ParquetCodec::None     ? PMQ_PARQUET_NONE
               : options.codec == ParquetCodec::Snappy ? PMQ_PARQUET_SNAPPY
                                                       : PMQ_PARQUET_ZSTD,
      .level = options.level,
      .row_group_records = options.row_group_records,
      .dictionary = options.dictionary ? 1 : 0,
      .statistics = options.statistics ? 1 : 0,
  };
  Output out;
  if (w.write_file(&o, schema, array, append_file, append_error, &out) != 0) throw std::runtime_error(out.error);
  return std::move(out.file);
}

}  // namespace picomq::kit
