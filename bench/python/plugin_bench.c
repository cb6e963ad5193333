/* The Python sink plugin outside the runtime: dlopen it, open a counting sink of bench/python/counting_sinks.py
 * (CLS=counting_sinks:CountingBatches|CountingArrow|CountingRows; META=0 for include_metadata = false), and write
 * one batch of 1000 flat JSON records N times, 4 in flight. Prints records/s and records per CPU-second.
 *   cc -O2 -Iinclude bench/python/plugin_bench.c -o /tmp/plugin_bench -ldl
 *   CLS=counting_sinks:CountingBatches /tmp/plugin_bench build/plugins/libpicomq_connector_python_sink.so 300
 * Paths: PICOMQ_TREE (default: the current directory) for bench/python and tools/venv. */
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "picomq/sink_abi.h"
static atomic_int done;
static const char* tree(const char* suffix) {
  static char buf[2][4096];
  static int i;
  const char* root = getenv("PICOMQ_TREE") ? getenv("PICOMQ_TREE") : ".";
  char* out = buf[i++ % 2];
  snprintf(out, sizeof buf[0], "%s%s", root, suffix);
  return out;
}
static void hlog(void* c, int32_t l, const char* m) {
  (void)c;
  fprintf(stderr, "LOG %d %s\n", l, m);
}
static void set_error(pmq_write_result* r, const char* m) {
  (void)r;
  fprintf(stderr, "ERROR %s\n", m);
}
static void reject(pmq_write_result* r, size_t i, const char* m) {
  (void)r;
  fprintf(stderr, "REJECT %zu %s\n", i, m);
}
static void complete(pmq_write_result* r, pmq_write_status s) {
  (void)r;
  if (s) fprintf(stderr, "COMPLETE %d\n", s);
  atomic_fetch_add(&done, 1);
}
static const char* cfg_string(void* c, const char* n) {
  (void)c;
  if (!strcmp(n, "class")) return getenv("CLS");
  if (!strcmp(n, "virtualenv")) return tree("/tools/venv");
  return NULL;
}
static int cfg_has(void* c, const char* n) {
  (void)c;
  return !strcmp(n, "virtualenv");
}
static int64_t cfg_int(void* c, const char* n) {
  (void)c;
  return !strcmp(n, "max_in_flight") ? 4 : 2000;
}
static size_t list_size(void* c, const char* n) {
  (void)c;
  (void)n;
  return 1;
}
static const char* list_item(void* c, const char* n, size_t i) {
  (void)c;
  (void)n;
  (void)i;
  return tree("/bench/python");
}
static const char* cfg_json(void* c, const char* n) {
  (void)c;
  (void)n;
  return "{\"report\": \"/dev/null\"}";
}
static void mif(void* c, uint32_t n) {
  (void)c;
  (void)n;
}
static int cfg_bool(void* c, const char* n) {
  (void)c;
  (void)n;
  return getenv("META") ? atoi(getenv("META")) : 1;
}
static void unread(void* c, uint32_t f) {
  (void)c;
  (void)f;
}
static double now() {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec / 1e9;
}
static double cpu() {
  struct rusage u;
  getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_utime.tv_usec / 1e6 + u.ru_stime.tv_sec + u.ru_stime.tv_usec / 1e6;
}
int main(int argc, char** argv) {
  void* h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  const pmq_sink_plugin* p = ((pmq_sink_entry_fn)dlsym(h, PMQ_SINK_ENTRY_SYMBOL))(PMQ_SINK_ABI_VERSION);
  pmq_host_api host;
  memset(&host, 0, sizeof host);
  host.struct_size = sizeof host;
  host.log = hlog;
  host.set_error = set_error;
  host.reject_record = reject;
  host.complete = complete;
  host.config_string = cfg_string;
  host.config_has = cfg_has;
  host.config_int = cfg_int;
  host.config_list_size = list_size;
  host.config_list_item = list_item;
  host.config_json = cfg_json;
  host.set_max_in_flight = mif;
  host.config_bool = cfg_bool;
  host.set_unread_fields = unread;
  char err[512] = {0};
  void* inst = p->open(&host, "{}", err, sizeof err);
  if (!inst) {
    fprintf(stderr, "OPEN FAILED: %s\n", err);
    return 2;
  }
  enum { B = 1000 };
  static pmq_record recs[B];
  static char buf[B][256];
  for (int i = 0; i < B; ++i) {
    int n = snprintf(buf[i], sizeof buf[i],
                     "{\"order_id\":%d,\"customer\":\"c-%d\",\"amount\":%d.25,\"currency\":\"EUR\",\"status\":\"paid\","
                     "\"country\":\"DE\",\"items\":%d,\"created\":\"2026-11-30T10:00:00Z\"}",
                     i, i % 97, i, i % 5);
    recs[i].offset = i;
    recs[i].timestamp_ms = 1000 + i;
    recs[i].payload.data = (const uint8_t*)buf[i];
    recs[i].payload.size = n;
  }
  pmq_batch b;
  memset(&b, 0, sizeof b);
  b.struct_size = sizeof b;
  b.topic = "t";
  b.partition = 0;
  b.payload_format = PMQ_PAYLOAD_JSON;
  b.schema = "json";
  b.records = recs;
  b.record_count = B;
  b.record_size = sizeof(pmq_record);
  int batches = atoi(argv[2]);
  double t0 = now(), c0 = cpu();
  for (int k = 0; k < batches; ++k) {
    while (k - atomic_load(&done) >= 4) usleep(50);
    p->write_batch(inst, &b, (pmq_write_result*)0);
  }
  while (atomic_load(&done) < batches) usleep(100);
  double t = now() - t0, c = cpu() - c0;
  printf("%s: %d records in %.2f s: %.0f rec/s, %.0f rec/CPU-s\n", getenv("CLS"), batches * B, t, batches * B / t,
         batches * B / c);
  p->close(inst);
  return 0;
}
