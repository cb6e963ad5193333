// libpicomq_connector_python_sink: sinks written in Python (picomq_connect.BaseSink, the custom-sink
// spec's `agora` API) running inside picomq-connect. Embeds CPython: one interpreter and one
// asyncio loop thread per process (python/picomq_connect/_host.py); the runtime's threads take the
// GIL only to hand a batch over and never wait while holding it. Writes return PMQ_WRITE_PENDING
// and complete through host->complete() when their coroutine finishes (up to max_in_flight at
// once). No Python exception and no C++ exception crosses into the runtime. docs/python-sinks.md.
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <dlfcn.h>

#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "picomq/sink_abi.h"

// python/src/_picomq_abi.c, compiled in; CPython names a module's init function PyInit_<module>.
extern "C" PyObject* PyInit__picomq_abi(void);  // NOLINT(bugprone-reserved-identifier)

namespace {

constexpr uint32_t kMaxInFlight = 64;

const pmq_option kOptions[] = {
    {"class", PMQ_OPTION_STRING, PMQ_OPTION_REQUIRED, nullptr, nullptr,
     "The sink class as \"module:Class\", a subclass of picomq_connect.BaseSink (agora.BaseSink)."},
    {"python_path", PMQ_OPTION_STRING_LIST, 0, "[]", nullptr,
     "Directories put first on sys.path before the module is imported (relative ones: to the runtime's working "
     "directory)."},
    {"virtualenv", PMQ_OPTION_STRING, 0, nullptr, nullptr,
     "A virtualenv made with Debian's python3.11 whose site-packages the sink imports from (its dependencies)."},
    {"options", PMQ_OPTION_TABLE, 0, "{}", nullptr,
     "The sink's own options: passed to the class as keyword arguments (self.options)."},
    {"max_in_flight", PMQ_OPTION_INT, 0, "4", nullptr,
     "Writes of one [[topics]] block whose coroutines run at once (1..64); offsets are still committed in order."},
    {"include_metadata", PMQ_OPTION_BOOL, 0, "true", nullptr,
     "Whether rows and Arrow batches carry the pico_* metadata (topic, partition, offset, timestamp, key, headers); "
     "false saves their cost."},
    {"close_timeout", PMQ_OPTION_DURATION, 0, "\"10s\"", nullptr,
     "How long close() may take at shutdown before it is cancelled; keep it under the runtime's shutdown_timeout."},
};

// ------------------------------------------------------------------ the interpreter

struct Interpreter {
  PyObject* host_module = nullptr;  // picomq_connect._host
  PyObject* instance_type = nullptr;
  PyObject* json_loads = nullptr;
  PyObject* complete_fn = nullptr;  // _picomq_host.complete
  // Interned keys of the rows.
  PyObject *k_topic, *k_partition, *k_offset, *k_timestamp, *k_key, *k_headers, *k_payload;
  std::string error;
};

Interpreter* g_py = nullptr;
std::once_flag g_py_once;

std::string fetch_python_error() {
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  PyErr_NormalizeException(&type, &value, &tb);
  std::string text = "unknown Python error";
  if (value) {
    if (PyObject* s = PyObject_Str(value)) {
      if (const char* c = PyUnicode_AsUTF8(s)) text = c;
      Py_DECREF(s);
    }
    // ValueError/SinkDefinitionError from the glue carry their whole message; others get their type.
    if (type && !PyErr_GivenExceptionMatches(type, PyExc_ValueError) &&
        !PyErr_GivenExceptionMatches(type, PyExc_TypeError))
      text = std::string(reinterpret_cast<PyTypeObject*>(type)->tp_name) + ": " + text;
  }
  PyErr_Clear();
  Py_XDECREF(type);
  Py_XDECREF(value);
  Py_XDECREF(tb);
  return text;
}

// One write in flight: what complete() needs to report it.
struct WriteCtx {
  const pmq_host_api* host;
  pmq_write_result* result;
  std::vector<size_t> kept_index;  // row i of what Python got is record kept_index[i] of the batch
  bool pre_rejected = false;       // records refused before Python saw the batch
};

// _picomq_host.complete(token, status, message, rejections): the end of one write, on the loop thread.
PyObject* py_complete(PyObject*, PyObject* args) {
  unsigned long long token;
  int status;
  const char* message;
  PyObject* rejections;
  if (!PyArg_ParseTuple(args, "KizO", &token, &status, &message, &rejections)) {
    // Never happens with the glue's arguments; the write would otherwise never complete.
    PyErr_Print();
    return nullptr;
  }
  // The token is the WriteCtx's address, passed through Python as an integer by submit().
  auto* ctx = reinterpret_cast<WriteCtx*>(static_cast<uintptr_t>(token));  // NOLINT(performance-no-int-to-ptr)
  std::vector<std::pair<size_t, std::string>> rejected;
  std::string error = message ? message : "";
  if (PyList_Check(rejections)) {
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(rejections); ++i) {
      long long index = -1;
      const char* reason = nullptr;
      PyObject* item = PyList_GET_ITEM(rejections, i);
      if (!PyArg_ParseTuple(item, "Ls", &index, &reason)) {
        PyErr_Clear();
        continue;
      }
      const size_t row = static_cast<size_t>(index);
      const size_t record = ctx->kept_index.empty() ? row : (row < ctx->kept_index.size() ? ctx->kept_index[row] : row);
      rejected.emplace_back(record, reason);
    }
  }
  pmq_write_status final_status = static_cast<pmq_write_status>(status);
  if (final_status == PMQ_WRITE_OK && ctx->pre_rejected) final_status = PMQ_WRITE_REJECTED;
  if (final_status == PMQ_WRITE_REJECTED && rejected.empty() && !ctx->pre_rejected) {
    final_status = PMQ_WRITE_FATAL;
    error = "the sink rejected records without naming any";
  }
  Py_BEGIN_ALLOW_THREADS  // the host's locks are never taken under the GIL
      for (const auto& [index, reason] : rejected) ctx->host->reject_record(ctx->result, index, reason.c_str());
  if (final_status != PMQ_WRITE_OK && final_status != PMQ_WRITE_REJECTED && !error.empty())
    ctx->host->set_error(ctx->result, error.c_str());
  ctx->host->complete(ctx->result, final_status);
  Py_END_ALLOW_THREADS delete ctx;
  Py_RETURN_NONE;
}

PyMethodDef g_host_methods[] = {
    {"complete", py_complete, METH_VARARGS, "Completes one pending write (token, status, message, rejections)."},
    {nullptr, nullptr, 0, nullptr}};
PyModuleDef g_host_module = {PyModuleDef_HEAD_INIT,
                             "_picomq_host",
                             "picomq-connect's Python sink host",
                             -1,
                             g_host_methods,
                             nullptr,
                             nullptr,
                             nullptr,
                             nullptr};
PyObject* init_host_module() { return PyModule_Create(&g_host_module); }

std::string package_dir() {
  if (const char* env = std::getenv("PICOMQ_PYTHON_PACKAGE_DIR"); env && *env) return env;
  return PICOMQ_PYTHON_PACKAGE_DIR;
}

void start_interpreter() {
  g_py = new Interpreter();
  // Extension modules (json's _json, pyarrow) resolve the C API from the global namespace, and
  // the interpreter's threads outlive any instance: libpython goes global and this plugin and
  // libpython are never unloaded.
  const std::string libpython =
      "libpython" + std::to_string(PY_MAJOR_VERSION) + "." + std::to_string(PY_MINOR_VERSION) + ".so.1.0";
  if (!dlopen(libpython.c_str(), RTLD_NOW | RTLD_GLOBAL | RTLD_NODELETE | RTLD_NOLOAD)) {
    g_py->error = "cannot make " + libpython + " global: " + dlerror();
    return;
  }
  Dl_info self{};
  if (dladdr(reinterpret_cast<void*>(&start_interpreter), &self) && self.dli_fname)
    dlopen(self.dli_fname, RTLD_NOW | RTLD_NODELETE | RTLD_NOLOAD);
  if (Py_IsInitialized()) {
    g_py->error = "a Python interpreter is already running in this process";
    return;
  }
  PyImport_AppendInittab("_picomq_abi", PyInit__picomq_abi);
  PyImport_AppendInittab("_picomq_host", init_host_module);
  PyConfig config;
  PyConfig_InitPythonConfig(&config);
  config.install_signal_handlers = 0;  // the runtime owns SIGTERM / SIGINT
  config.parse_argv = 0;
  PyStatus status = Py_InitializeFromConfig(&config);
  PyConfig_Clear(&config);
  if (PyStatus_Exception(status)) {
    g_py->error = std::string("cannot start Python: ") + (status.err_msg ? status.err_msg : "?");
    return;
  }
  // The picomq_connect package: installed (pip, a virtualenv) wins; else the one of this tree.
  const std::string dir = package_dir();
  PyObject* sys_path = PySys_GetObject("path");  // borrowed
  if (PyObject* d = PyUnicode_FromString(dir.c_str())) {
    PyList_Append(sys_path, d);
    Py_DECREF(d);
  }
  g_py->host_module = PyImport_ImportModule("picomq_connect._host");
  if (g_py->host_module) g_py->instance_type = PyObject_GetAttrString(g_py->host_module, "Instance");
  if (PyObject* json = PyImport_ImportModule("json")) {
    g_py->json_loads = PyObject_GetAttrString(json, "loads");
    Py_DECREF(json);
  }
  if (PyObject* host = PyImport_ImportModule("_picomq_host")) {
    g_py->complete_fn = PyObject_GetAttrString(host, "complete");
    Py_DECREF(host);
  }
  if (!g_py->host_module || !g_py->instance_type || !g_py->json_loads || !g_py->complete_fn) {
    g_py->error = "cannot import picomq_connect (looked in sys.path and " + dir + "): " + fetch_python_error();
  }
  g_py->k_topic = PyUnicode_InternFromString("pico_topic");
  g_py->k_partition = PyUnicode_InternFromString("pico_partition");
  g_py->k_offset = PyUnicode_InternFromString("pico_offset");
  g_py->k_timestamp = PyUnicode_InternFromString("pico_timestamp");
  g_py->k_key = PyUnicode_InternFromString("pico_key");
  g_py->k_headers = PyUnicode_InternFromString("pico_headers");
  g_py->k_payload = PyUnicode_InternFromString("payload");
  PyEval_SaveThread();  // from here on, every thread takes the GIL with PyGILState_Ensure
}

// Holds the GIL for a scope.
struct Gil {
  PyGILState_STATE state = PyGILState_Ensure();
  ~Gil() { PyGILState_Release(state); }
};

// ------------------------------------------------------------------ an instance

struct Instance {
  const pmq_host_api* host = nullptr;
  PyObject* py = nullptr;      // picomq_connect._host.Instance
  PyObject* submit = nullptr;  // its bound submit
  uint32_t plane = PMQ_PLANE_ROWS;
  int64_t close_timeout_ms = 10000;
  bool include_metadata = true;
  std::string class_spec;

  void log(pmq_log_level level, const std::string& message) const { host->log(host->host_ctx, level, message.c_str()); }
};

void fail(char* errbuf, size_t size, const std::string& message) { std::snprintf(errbuf, size, "%s", message.c_str()); }

// The rows of a batch: one dict per record (docs/python-sinks.md, "Rows"). Records whose payload
// fields collide with the pico_* keys are refused (as the Arrow export does) and left out.
PyObject* build_rows(const pmq_batch* batch, bool metadata, WriteCtx& ctx,
                     std::vector<std::pair<size_t, std::string>>& refused) {
  const size_t n = batch->record_count;
  PyObject* values = nullptr;  // the decoded JSON payloads, one list item per record
  if (batch->payload_format == PMQ_PAYLOAD_JSON) {
    std::string all;
    size_t total = 2;
    for (size_t i = 0; i < n; ++i) total += pmq_batch_record(batch, i)->payload.size + 5;
    all.reserve(total);
    all.push_back('[');
    for (size_t i = 0; i < n; ++i) {
      const pmq_record* r = pmq_batch_record(batch, i);
      if (i) all.push_back(',');
      if (r->payload.data) all.append(reinterpret_cast<const char*>(r->payload.data), r->payload.size);
      else all.append("null");
    }
    all.push_back(']');
    PyObject* text = PyBytes_FromStringAndSize(all.data(), Py_ssize_t(all.size()));
    if (!text) return nullptr;
    values = PyObject_CallOneArg(g_py->json_loads, text);
    Py_DECREF(text);
    if (!values) return nullptr;
  }
  PyObject* rows = PyList_New(0);
  PyObject* topic = PyUnicode_DecodeUTF8(batch->topic, Py_ssize_t(std::strlen(batch->topic)), "surrogateescape");
  PyObject* partition = PyLong_FromLong(batch->partition);
  PyObject* const meta_keys[] = {g_py->k_topic,     g_py->k_partition, g_py->k_offset,
                                 g_py->k_timestamp, g_py->k_key,       g_py->k_headers};
  bool ok = rows && topic && partition;
  for (size_t i = 0; ok && i < n; ++i) {
    const pmq_record* r = pmq_batch_record(batch, i);
    PyObject* row = nullptr;
    PyObject* value = nullptr;  // new reference: the payload value when it is not an object
    if (values) {
      PyObject* v = PyList_GET_ITEM(values, Py_ssize_t(i));
      if (r->payload.data && PyDict_CheckExact(v)) {
        row = v;
        Py_INCREF(row);
        const char* collision = nullptr;
        if (metadata)
          for (PyObject* k : meta_keys)
            if (PyDict_Contains(row, k) == 1) collision = PyUnicode_AsUTF8(k);
        if (collision) {
          refused.emplace_back(i, std::string("field '") + collision + "' collides with a metadata column");
          Py_DECREF(row);
          continue;
        }
      } else {
        value = v;
        Py_INCREF(value);
      }
    } else if (!r->payload.data) {
      value = Py_None;
      Py_INCREF(value);
    } else if (batch->payload_format == PMQ_PAYLOAD_TEXT) {
      value = PyUnicode_DecodeUTF8(reinterpret_cast<const char*>(r->payload.data), Py_ssize_t(r->payload.size),
                                   "surrogateescape");
    } else {
      value = PyBytes_FromStringAndSize(reinterpret_cast<const char*>(r->payload.data), Py_ssize_t(r->payload.size));
    }
    if (!row) {
      row = PyDict_New();
      if (!row || !value || PyDict_SetItem(row, g_py->k_payload, value) < 0) {
        Py_XDECREF(row);
        Py_XDECREF(value);
        ok = false;
        break;
      }
      Py_DECREF(value);
    }
    if (!metadata) {
      ok = PyList_Append(rows, row) == 0;
      Py_DECREF(row);
      ctx.kept_index.push_back(i);
      continue;
    }
    PyObject* offset = PyLong_FromLongLong(r->offset);
    PyObject* ts = r->timestamp_ms == -1 ? Py_NewRef(Py_None) : PyLong_FromLongLong(r->timestamp_ms);
    PyObject* key = r->key.data
                        ? PyBytes_FromStringAndSize(reinterpret_cast<const char*>(r->key.data), Py_ssize_t(r->key.size))
                        : Py_NewRef(Py_None);
    PyObject* headers = PyTuple_New(Py_ssize_t(r->header_count));
    for (size_t h = 0; headers && h < r->header_count; ++h) {
      const pmq_header& hd = r->headers[h];
      PyObject* name = PyUnicode_DecodeUTF8(
          reinterpret_cast<const char*>(hd.name.data ? hd.name.data : reinterpret_cast<const uint8_t*>("")),
          Py_ssize_t(hd.name.size), "surrogateescape");
      PyObject* hv = hd.value.data ? PyBytes_FromStringAndSize(reinterpret_cast<const char*>(hd.value.data),
                                                               Py_ssize_t(hd.value.size))
                                   : Py_NewRef(Py_None);
      PyObject* pair = (name && hv) ? PyTuple_Pack(2, name, hv) : nullptr;
      Py_XDECREF(name);
      Py_XDECREF(hv);
      if (!pair) {
        Py_CLEAR(headers);
        break;
      }
      PyTuple_SET_ITEM(headers, Py_ssize_t(h), pair);
    }
    ok = offset && ts && key && headers && PyDict_SetItem(row, g_py->k_topic, topic) == 0 &&
         PyDict_SetItem(row, g_py->k_partition, partition) == 0 && PyDict_SetItem(row, g_py->k_offset, offset) == 0 &&
         PyDict_SetItem(row, g_py->k_timestamp, ts) == 0 && PyDict_SetItem(row, g_py->k_key, key) == 0 &&
         PyDict_SetItem(row, g_py->k_headers, headers) == 0 && PyList_Append(rows, row) == 0;
    Py_XDECREF(offset);
    Py_XDECREF(ts);
    Py_XDECREF(key);
    Py_XDECREF(headers);
    Py_DECREF(row);
    ctx.kept_index.push_back(i);
  }
  if (refused.empty()) ctx.kept_index.clear();  // every record is there: indexes are the batch's
  Py_XDECREF(values);
  Py_XDECREF(topic);
  Py_XDECREF(partition);
  if (!ok) {
    Py_XDECREF(rows);
    return nullptr;
  }
  return rows;
}

// The strings of a string-list option as a Python list (nullptr with a Python error set).
PyObject* string_list(const pmq_host_api* host, const char* key) {
  PyObject* list = PyList_New(0);
  for (size_t i = 0, n = host->config_list_size(host->host_ctx, key); list && i < n; ++i) {
    PyObject* item = PyUnicode_FromString(host->config_list_item(host->host_ctx, key, i));
    if (!item || PyList_Append(list, item) != 0) Py_CLEAR(list);
    Py_XDECREF(item);
  }
  return list;
}

// validate() (ABI 2.2; `picomq-connect --check` and before each open): the class imported as
// open() would import it (python_path, virtualenv, the module, a BaseSink subclass whose planes
// the runtime takes, pyarrow for an Arrow class), without calling it (_host.check).
int python_validate(const pmq_host_api* host, const char*, char* errbuf, size_t errbuf_size) {
  std::call_once(g_py_once, start_interpreter);
  if (!g_py->error.empty()) {
    fail(errbuf, errbuf_size, "class: " + g_py->error);
    return 0;
  }
  const std::string class_spec = host->config_string(host->host_ctx, "class");
  const char* venv =
      host->config_has(host->host_ctx, "virtualenv") ? host->config_string(host->host_ctx, "virtualenv") : "";
  std::string problem;
  {
    Gil gil;
    PyObject* result = nullptr;
    if (PyObject* path = string_list(host, "python_path")) {
      result = PyObject_CallMethod(g_py->host_module, "check", "sOs", class_spec.c_str(), path, venv);
      Py_DECREF(path);
    }
    if (!result) {
      problem = "class: " + fetch_python_error();
    } else {
      if (const char* text = PyUnicode_AsUTF8(result)) problem = text;
      else problem = "class: " + fetch_python_error();
      Py_DECREF(result);
    }
  }
  if (problem.empty()) return 1;
  fail(errbuf, errbuf_size, problem);
  return 0;
}

void* python_open(const pmq_host_api* host, const char*, char* errbuf, size_t errbuf_size) {
  std::call_once(g_py_once, start_interpreter);
  if (!g_py->error.empty()) {
    fail(errbuf, errbuf_size, g_py->error);
    return nullptr;
  }
  auto* inst = new Instance();
  inst->host = host;
  inst->class_spec = host->config_string(host->host_ctx, "class");
  inst->close_timeout_ms = host->config_int(host->host_ctx, "close_timeout");
  inst->include_metadata = host->config_bool(host->host_ctx, "include_metadata") != 0;
  const int64_t window = host->config_int(host->host_ctx, "max_in_flight");
  if (window < 1 || window > int64_t(kMaxInFlight)) {
    fail(errbuf, errbuf_size,
         "max_in_flight: must be 1.." + std::to_string(kMaxInFlight) + ", not " + std::to_string(window));
    delete inst;
    return nullptr;
  }
  const char* venv =
      host->config_has(host->host_ctx, "virtualenv") ? host->config_string(host->host_ctx, "virtualenv") : nullptr;
  const char* options = host->config_json(host->host_ctx, "options");
  std::string error;
  {
    Gil gil;
    if (PyObject* path = string_list(host, "python_path")) {
      inst->py = PyObject_CallFunction(g_py->instance_type, "ssOsO", inst->class_spec.c_str(), options ? options : "{}",
                                       path, venv ? venv : "", g_py->complete_fn);
      Py_DECREF(path);
    }
    if (inst->py) {
      PyObject* bit = PyObject_GetAttrString(inst->py, "plane_bit");
      inst->plane = bit ? uint32_t(PyLong_AsUnsignedLong(bit)) : uint32_t(PMQ_PLANE_ROWS);
      Py_XDECREF(bit);
      inst->submit = PyObject_GetAttrString(inst->py, "submit");
    }
    if (!inst->py || !inst->submit) {
      error = fetch_python_error();
    } else if (PyObject* r = PyObject_CallMethod(inst->py, "open", nullptr)) {  // waits without the GIL
      Py_DECREF(r);
    } else {
      error = inst->class_spec + ": open() failed: " + fetch_python_error();
    }
    if (!error.empty()) {
      Py_CLEAR(inst->submit);
      Py_CLEAR(inst->py);
    }
  }
  if (!error.empty()) {
    fail(errbuf, errbuf_size, "python sink " + inst->class_spec + ": " + error);
    delete inst;
    return nullptr;
  }
  if (host->struct_size >= offsetof(pmq_host_api, set_max_in_flight) + sizeof(host->set_max_in_flight) &&
      host->set_max_in_flight)
    host->set_max_in_flight(host->host_ctx, uint32_t(window));
  // A host that loads this plugin speaks ABI 2.5 or later (an older one refuses a newer minor), so it has set_plane.
  host->set_plane(host->host_ctx, inst->plane == PMQ_PLANE_ARROW ? PMQ_PLANE_ARROW : PMQ_PLANE_BATCHES);
  if (!inst->include_metadata &&
      host->struct_size >= offsetof(pmq_host_api, set_unread_fields) + sizeof(host->set_unread_fields) &&
      host->set_unread_fields)
    host->set_unread_fields(host->host_ctx, PMQ_FIELD_HEADERS);
  inst->log(PMQ_LOG_INFO, "python sink " + inst->class_spec + " open; plane " + pmq_plane_name(inst->plane) +
                              ", max_in_flight " + std::to_string(window));
  return inst;
}

// A write that cannot start: the Python error, with what was being done, is the write's error.
pmq_write_status python_failure(Instance* inst, pmq_write_result* result, const std::string& doing) {
  const std::string error = doing + ": " + fetch_python_error();
  inst->host->set_error(result, error.c_str());
  return PMQ_WRITE_FATAL;
}

// Hands the data to the loop, which owns the ctx from then on; PENDING, or what went wrong.
pmq_write_status submit(Instance* inst, PyObject* data, std::unique_ptr<WriteCtx> ctx, pmq_write_result* result) {
  PyObject* token =
      PyLong_FromUnsignedLongLong(static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(ctx.get())));
  PyObject* r = token ? PyObject_CallFunctionObjArgs(inst->submit, data, token, nullptr) : nullptr;
  Py_XDECREF(token);
  Py_DECREF(data);
  if (!r) return python_failure(inst, result, "cannot start the write");
  Py_DECREF(r);
  (void)ctx.release();       // python_complete() deletes it
  return PMQ_WRITE_PENDING;  // NOLINT(clang-analyzer-cplusplus.NewDeleteLeaks): owned by the loop now
}

pmq_write_status python_write_batch(void* instance, const pmq_batch* batch, pmq_write_result* result) {
  auto* inst = static_cast<Instance*>(instance);
  try {
    auto ctx = std::make_unique<WriteCtx>(WriteCtx{inst->host, result, {}, false});
    std::vector<std::pair<size_t, std::string>> refused;
    Gil gil;
    PyObject* rows = build_rows(batch, inst->include_metadata, *ctx, refused);
    if (!rows) return python_failure(inst, result, "cannot build the rows of the batch");
    if (!refused.empty()) {
      for (const auto& [index, reason] : refused) inst->host->reject_record(result, index, reason.c_str());
      ctx->pre_rejected = true;
      if (PyList_GET_SIZE(rows) == 0) {
        Py_DECREF(rows);
        return PMQ_WRITE_REJECTED;
      }
    }
    return submit(inst, rows, std::move(ctx), result);
  } catch (const std::exception& e) {
    inst->host->set_error(result, e.what());
    return PMQ_WRITE_FATAL;
  }
}

// The Arrow plane (the host exported the batch beside decoding, on whichever of its threads had
// time; records the export refused are the host's rejections): the structs move into pyarrow.
pmq_write_status python_write_arrow(void* instance, const pmq_arrow_batch* batch, pmq_write_result* result) {
  auto* inst = static_cast<Instance*>(instance);
  try {
    auto ctx = std::make_unique<WriteCtx>(WriteCtx{inst->host, result, {}, false});
    Gil gil;
    PyObject* rb =
        PyObject_CallMethod(inst->py, "import_arrow", "KKO",
                            static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(batch->arrow_array)),
                            static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(batch->arrow_schema)),
                            inst->include_metadata ? Py_True : Py_False);
    // Whatever pyarrow did not take, the host releases after the call.
    if (!rb) return python_failure(inst, result, "cannot import the Arrow batch into pyarrow");
    return submit(inst, rb, std::move(ctx), result);
  } catch (const std::exception& e) {
    inst->host->set_error(result, e.what());
    return PMQ_WRITE_FATAL;
  }
}

void python_close(void* instance) {
  auto* inst = static_cast<Instance*>(instance);
  std::string problem;
  {
    Gil gil;
    if (PyObject* r = PyObject_CallMethod(inst->py, "close", "L", static_cast<long long>(inst->close_timeout_ms))) {
      if (const char* c = PyUnicode_AsUTF8(r)) problem = c;
      Py_DECREF(r);
    } else {
      problem = "close() failed: " + fetch_python_error();
    }
    Py_CLEAR(inst->submit);
    Py_CLEAR(inst->py);
  }
  if (!problem.empty()) inst->log(PMQ_LOG_ERROR, "python sink " + inst->class_spec + ": " + problem);
  delete inst;
}

pmq_sink_plugin make_descriptor() {
  pmq_sink_plugin d{};
  d.struct_size = sizeof d;
  d.abi_version = PMQ_SINK_ABI_VERSION;
  d.name = "python";
  d.version = "0.1.0";
  d.description = "Runs a sink written in Python (picomq_connect.BaseSink) on rows, batches or Arrow batches.";
  // The Python class's own best plane (rows, batches or Arrow) is chosen per instance with the
  // same pmq_sink_plane_spec(), and open() names the one the host delivers on (ABI 2.5
  // set_plane): Arrow batches for an Arrow class (exported by the host, beside decoding),
  // batches for the others (a rows class gets them one row at a time from the Python side).
  d.accepted_planes = PMQ_PLANES_ALL;
  d.native_planes = PMQ_PLANE_BATCHES | PMQ_PLANE_ARROW;
  d.options = kOptions;
  d.option_count = sizeof kOptions / sizeof kOptions[0];
  d.option_size = sizeof(pmq_option);
  d.open = python_open;
  d.write_batch = python_write_batch;
  d.write_arrow = python_write_arrow;
  d.close = python_close;
  d.max_in_flight = kMaxInFlight;
  d.validate = python_validate;
  return d;
}

const pmq_sink_plugin kDescriptor = make_descriptor();

}  // namespace

extern "C" PMQ_SINK_EXPORT const pmq_sink_plugin* picomq_sink_plugin_entry(uint32_t) { return &kDescriptor; }
