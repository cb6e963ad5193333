// jemalloc's built-in options for picomq-connect (compiled only with PICOMQ_JEMALLOC).
//
// jemalloc keeps freed pages ("dirty") for reuse and gives them back to the kernel only as a
// thread of the arena that holds them allocates or frees again (decay is driven by allocator
// calls), after dirty_decay_ms (default 10 s). Once a load is over, most of our threads go
// quiet, so the pages stay: after 10k records per topic on 3 sinks RSS stayed at 33 MiB against
// 19 MiB idle. Instead:
//   background_thread:true  a jemalloc thread purges on its own schedule; the decay of idle
//                           arenas no longer depends on their threads waking up, and the madvise
//                           calls move off our threads (no purge on the hot path).
//   dirty_decay_ms:1000     free pages go back within about a second of not being reused. Pages
//                           recycled faster than that (a steady stream of batches) stay put, so
//                           the hot path sees neither madvise nor fresh page faults per batch.
//   narenas:1               one arena instead of 4 per CPU. librdkafka allocates each record
//                           on its broker thread and we free it on ours; with many arenas the
//                           freed pages of each wait for their own decay, and the peak RSS of a
//                           1M-record read was 52-75 MB against 37 MB with one arena, at no
//                           CPU cost measured (bench/README.md, "Peak memory of the consume
//                           path"; the threads' caches take the contention).
//   muzzy_decay_ms:0        purge with MADV_DONTNEED, not MADV_FREE: MADV_FREE'd pages still
//                           count in RSS until the kernel is short of memory (jemalloc 5.3's
//                           default, spelled out because RSS is what we promise).
//
// The MALLOC_CONF environment variable is read after this string and overrides it option by
// option, e.g. MALLOC_CONF=background_thread:false,dirty_decay_ms:10000 restores jemalloc's
// defaults (bench/memory.sh compares them this way). max_background_threads is left alone on
// purpose: jemalloc lets MALLOC_CONF lower it below a built-in value but never raise it.
// What is in effect:
//   MALLOC_CONF=stats_print:true picomq-connect --help 2>&1 | grep -E 'opt.(background|.*decay)'
#include <jemalloc/jemalloc.h>

extern "C" {
const char* malloc_conf = "background_thread:true,dirty_decay_ms:1000,muzzy_decay_ms:0,narenas:1";
}
