/* _picomq_abi: the sink ABI's plane-spec normalisation (pmq_sink_plane_spec from
 * include/picomq/sink_abi.h) for Python. The same source is a builtin module of the Python host
 * plugin (sinks/python) and an extension module of the pip-installed package (python/setup.py),
 * so picomq_connect.sink_data_plane_spec() answers exactly what the runtime's loader decides. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "picomq/sink_abi.h"

static pmq_write_status never_called_record(void *i, const pmq_batch *b, size_t n, pmq_write_result *r) {
  (void)i, (void)b, (void)n, (void)r;
  return PMQ_WRITE_FATAL;
}
static pmq_write_status never_called_batch(void *i, const pmq_batch *b, pmq_write_result *r) {
  (void)i, (void)b, (void)r;
  return PMQ_WRITE_FATAL;
}
static pmq_write_status never_called_arrow(void *i, const pmq_arrow_batch *b, pmq_write_result *r) {
  (void)i, (void)b, (void)r;
  return PMQ_WRITE_FATAL;
}

/* plane_spec(accepted_bits, native_bits, has_write, has_write_batch, has_write_arrow)
 *   -> (accepted_bits, native_bits, best_plane_bit); ValueError with the ABI's reason. */
static PyObject *plane_spec(PyObject *self, PyObject *args) {
  unsigned int accepted, native;
  int has_write, has_batch, has_arrow;
  (void)self;
  if (!PyArg_ParseTuple(args, "IIppp", &accepted, &native, &has_write, &has_batch, &has_arrow)) return NULL;
  pmq_sink_plugin d;
  memset(&d, 0, sizeof d);
  d.struct_size = sizeof d;
  d.abi_version = PMQ_SINK_ABI_VERSION;
  d.accepted_planes = accepted;
  d.native_planes = native;
  d.write_record = has_write ? never_called_record : NULL;
  d.write_batch = has_batch ? never_called_batch : NULL;
  d.write_arrow = has_arrow ? never_called_arrow : NULL;
  pmq_plane_spec spec;
  char reason[256] = {0};
  if (!pmq_sink_plane_spec(&d, &spec, reason, sizeof reason)) {
    PyErr_SetString(PyExc_ValueError, reason);
    return NULL;
  }
  return Py_BuildValue("(III)", spec.accepted_planes, spec.native_planes, spec.best_plane);
}

static PyMethodDef methods[] = {
    {"plane_spec", plane_spec, METH_VARARGS,
     "pmq_sink_plane_spec() of the sink ABI over a descriptor with these planes and write functions."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT,
                                    "_picomq_abi",
                                    "The picomq-connect sink ABI's plane normalisation.",
                                    -1,
                                    methods,
                                    NULL,
                                    NULL,
                                    NULL,
                                    NULL};

PyMODINIT_FUNC PyInit__picomq_abi(void) {
  PyObject *m = PyModule_Create(&module);
  if (!m) return NULL;
  PyModule_AddIntConstant(m, "PLANE_ROWS", PMQ_PLANE_ROWS);
  PyModule_AddIntConstant(m, "PLANE_BATCHES", PMQ_PLANE_BATCHES);
  PyModule_AddIntConstant(m, "PLANE_ARROW", PMQ_PLANE_ARROW);
  PyModule_AddIntConstant(m, "ABI_VERSION", PMQ_SINK_ABI_VERSION);
  PyModule_AddIntConstant(m, "WRITE_OK", PMQ_WRITE_OK);
  PyModule_AddIntConstant(m, "WRITE_RETRY", PMQ_WRITE_RETRY);
  PyModule_AddIntConstant(m, "WRITE_PARTIAL", PMQ_WRITE_PARTIAL);
  PyModule_AddIntConstant(m, "WRITE_FATAL", PMQ_WRITE_FATAL);
  PyModule_AddIntConstant(m, "WRITE_REJECTED", PMQ_WRITE_REJECTED);
  return m;
}
