/* bench_helper: the measuring half of the Kafka benchmarks (bench/stdout_vs_kcat.sh, planes.sh,
 * sink_bench.sh; compiled by the scripts against librdkafka; not part of the product build).
 *
 *   bench_helper endoffset <bootstrap> <topic> <partition>
 *       prints the partition's high watermark (end offset)
 *
 *   bench_helper run <stdout-file> -- <cmd> [args...]
 *       runs cmd with stdout redirected to <stdout-file> and waits for it to exit; prints
 *       "wall_s=.. user_s=.. sys_s=.. maxrss_kb=.. exit=.." (wall from fork to exit, rusage of
 *       the child from wait4)
 *
 *   bench_helper sink <bootstrap> <group> <topic> <partition> <N> <status-file> <stdout-file>
 *                     <timeout_s> -- <cmd> [args...]
 *       runs cmd (the runtime) with stdout redirected, polls the committed offset of <group> on
 *       <topic>/<partition> every 10 ms until it reaches N, then samples the child's CPU time
 *       (/proc/<pid>/stat utime+stime, all threads) and VmHWM, sends SIGTERM and waits for it.
 *       While waiting it also polls <status-file> for the moment the partition shows up as
 *       assigned (group join done) and the moment the first batch is committed. Prints
 *       "wall_s=.. join_s=.. first_commit_s=.. user_s=.. sys_s=.. hwm_kb=.. maxrss_kb=..
 *        exit=.. shutdown_s=.." (times from fork).
 *
 *   Both run and sink take options between their fixed arguments and "--":
 *     --server <pid>   also measure the CPU time the process tree of <pid> (a destination server:
 *                      the postmaster and its backends) spends between fork and the end of the
 *                      measurement (exit for run, last commit seen for sink); appends
 *                      "server_cpu_s=..". The tree's CPU is utime+stime+cutime+cstime of the root
 *                      and of every live descendant, so backends that start and exit in between
 *                      are counted too (in their parent's cutime once reaped).
 *
 *   bench_helper pollcost <bootstrap> <group> <topic> <seconds> <broker pid>
 *       what one of sink's polls of the committed offset costs the broker in CPU: polls every 10 ms
 *       for <seconds>, idles as long, prints "poll_cpu_s=.. polls=.. busy_cpu_s=.. idle_cpu_s=.."
 *       (sink prints its polls=.. beside server_cpu_s, so a report can take them out)
 *
 *   bench_helper treecpu <pid>
 *       prints the CPU seconds of the process tree of <pid> (as --server counts them)
 *
 *   bench_helper createtopics <bootstrap> <partitions> <topic>...
 *       creates the topics (replication factor 1) with the admin API and waits for the result;
 *       a topic that already exists is an error
 *
 *   bench_helper waitcommitted <bootstrap> <timeout_s> <group> <topic> <N> [<group> <topic> <N>]...
 *       polls the committed offset of each <group> on <topic>[0] every 10 ms until every one has
 *       reached its N; prints "wait_s=.." (exit 0) or reports the offsets at the timeout (exit 1)
 */
#define _GNU_SOURCE  // NOLINT(bugprone-reserved-identifier): glibc's feature-test macro
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <librdkafka/rdkafka.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

static double tv_s(struct timeval tv) { return tv.tv_sec + tv.tv_usec / 1e6; }

static void die(const char *what) {
  fprintf(stderr, "bench_helper: %s\n", what);
  exit(2);
}

static pid_t spawn(const char *out_path, char **argv) {
  pid_t pid = fork();
  if (pid < 0) die("fork failed");
  if (pid == 0) {
    int fd = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) _exit(126);
    dup2(fd, 1);
    close(fd);
    execvp(argv[0], argv);
    _exit(127);
  }
  return pid;
}

static rd_kafka_t *make_client(const char *bootstrap, const char *group) {
  char err[512];
  rd_kafka_conf_t *conf = rd_kafka_conf_new();
  if (rd_kafka_conf_set(conf, "bootstrap.servers", bootstrap, err, sizeof err) != RD_KAFKA_CONF_OK) die(err);
  if (rd_kafka_conf_set(conf, "group.id", group ? group : "bench-helper", err, sizeof err) != RD_KAFKA_CONF_OK)
    die(err);
  rd_kafka_conf_set(conf, "enable.auto.commit", "false", err, sizeof err);
  rd_kafka_conf_set(conf, "log_level", "3", err, sizeof err);
  rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof err);
  if (!rk) die(err);
  return rk;
}

/* rd_kafka_committed, asked again while the answer is retriable: a fresh group's coordinator on a
 * current broker (Kafka 4.4) answers "Not coordinator" or "Coordinator load in progress" at first. */
static rd_kafka_resp_err_t committed_retrying(rd_kafka_t *rk, rd_kafka_topic_partition_list_t *list, int timeout_ms) {
  double deadline = now_s() + timeout_ms / 1000.0;
  for (;;) {
    rd_kafka_resp_err_t e = rd_kafka_committed(rk, list, timeout_ms);
    int retriable = e == RD_KAFKA_RESP_ERR_NOT_COORDINATOR || e == RD_KAFKA_RESP_ERR_COORDINATOR_LOAD_IN_PROGRESS ||
                    e == RD_KAFKA_RESP_ERR_COORDINATOR_NOT_AVAILABLE || e == RD_KAFKA_RESP_ERR__TIMED_OUT ||
                    e == RD_KAFKA_RESP_ERR__TRANSPORT;
    if (!e || !retriable || now_s() > deadline) return e;
    usleep(50000);
  }
}

static int cmd_endoffset(int argc, char **argv) {
  if (argc < 5) die("usage: endoffset <bootstrap> <topic> <partition>");
  rd_kafka_t *rk = make_client(argv[2], NULL);
  int64_t lo = 0, hi = 0;
  rd_kafka_resp_err_t e = rd_kafka_query_watermark_offsets(rk, argv[3], atoi(argv[4]), &lo, &hi, 10000);
  if (e) die(rd_kafka_err2str(e));
  printf("%lld\n", (long long)hi);
  rd_kafka_destroy(rk);
  return 0;
}

static int find_cmd(int argc, char **argv, int from) {
  for (int i = from; i < argc; ++i)
    if (!strcmp(argv[i], "--")) return i + 1 < argc ? i + 1 : -1;
  return -1;
}

/* CPU seconds (utime+stime+cutime+cstime) of <root> and all its live descendants. */
static double tree_cpu_s(pid_t root) {
  enum { kMax = 65536 };
  static int pids[kMax], ppids[kMax];
  static double cpu[kMax];
  int n = 0;
  DIR *d = opendir("/proc");
  if (!d) return -1;
  struct dirent *e;
  while ((e = readdir(d)) && n < kMax) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    char path[300], buf[4096];
    snprintf(path, sizeof path, "/proc/%s/stat", e->d_name);
    FILE *f = fopen(path, "r");
    if (!f) continue;
    size_t len = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[len] = 0;
    char *p = strrchr(buf, ')');
    if (!p) continue;
    int ppid = 0;
    unsigned long ut = 0, st = 0;
    long cut = 0, cst = 0;
    if (sscanf(p + 2, "%*c %d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu %ld %ld", &ppid, &ut, &st, &cut, &cst) != 5)
      continue;
    pids[n] = atoi(e->d_name);
    ppids[n] = ppid;
    cpu[n] = (double)(ut + st + cut + cst);
    ++n;
  }
  closedir(d);
  static char in_tree[kMax];
  memset(in_tree, 0, (size_t)n);
  double total = 0;
  int found = 0;
  for (int i = 0; i < n; ++i)
    if (pids[i] == root) {
      in_tree[i] = 1;
      total += cpu[i];
      found = 1;
    }
  if (!found) return -1;
  for (int changed = 1; changed;) { /* descendants, any depth */
    changed = 0;
    for (int i = 0; i < n; ++i) {
      if (in_tree[i]) continue;
      for (int j = 0; j < n; ++j)
        if (in_tree[j] && pids[j] == ppids[i]) {
          in_tree[i] = 1;
          total += cpu[i];
          changed = 1;
          break;
        }
    }
  }
  return total / sysconf(_SC_CLK_TCK);
}

/* Options between the fixed arguments (from index <from>) and "--": --server <pid>. */
static pid_t parse_server_opt(int argc, char **argv, int from, int cmd_index) {
  pid_t server = 0;
  for (int i = from; i < cmd_index - 1 && i < argc; ++i) {
    if (!strcmp(argv[i], "--server") && i + 1 < cmd_index - 1) server = (pid_t)atoi(argv[++i]);
    else die("unknown option before --");
  }
  return server;
}

static int cmd_treecpu(int argc, char **argv) {
  if (argc < 3) die("usage: treecpu <pid>");
  double c = tree_cpu_s((pid_t)atoi(argv[2]));
  if (c < 0) die("no such process");
  printf("%.3f\n", c);
  return 0;
}

static int cmd_run(int argc, char **argv) {
  int c = find_cmd(argc, argv, 3);
  if (argc < 5 || c < 0) die("usage: run <stdout-file> [--server pid] -- cmd...");
  pid_t server = parse_server_opt(argc, argv, 3, c);
  double server0 = server ? tree_cpu_s(server) : 0;
  double t0 = now_s();
  pid_t pid = spawn(argv[2], argv + c);
  int status = 0;
  struct rusage ru;
  if (wait4(pid, &status, 0, &ru) < 0) die("wait4 failed");
  double wall = now_s() - t0;
  printf("wall_s=%.4f user_s=%.3f sys_s=%.3f maxrss_kb=%ld exit=%d", wall, tv_s(ru.ru_utime), tv_s(ru.ru_stime),
         ru.ru_maxrss, WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
  if (server) printf(" server_cpu_s=%.3f", tree_cpu_s(server) - server0);
  printf("\n");
  return 0;
}

/* utime+stime of the whole process (all threads), in seconds */
static int proc_cpu(pid_t pid, double *user, double *sys) {
  char path[64], buf[4096];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = 0;
  char *p = strrchr(buf, ')'); /* comm may contain spaces */
  if (!p) return -1;
  unsigned long ut = 0, st = 0;
  /* after ") ": state(3) ppid pgrp session tty_nr tpgid flags minflt cminflt majflt cmajflt utime(14) stime(15) */
  if (sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2) return -1;
  long hz = sysconf(_SC_CLK_TCK);
  *user = (double)ut / hz;
  *sys = (double)st / hz;
  return 0;
}

static long proc_hwm_kb(pid_t pid) {
  char path[64], line[256];
  snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  long kb = -1;
  while (fgets(line, sizeof line, f))
    if (!strncmp(line, "VmHWM:", 6)) kb = strtol(line + 6, NULL, 10);
  fclose(f);
  return kb;
}

/* does the status file list <needle> (e.g. "bench.stdout[0]") as assigned? */
static int status_has(const char *path, const char *needle) {
  int fd = open(path, O_RDONLY);
  if (fd < 0) return 0;
  static char buf[1 << 16];
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return 0;
  buf[n] = 0;
  return strstr(buf, needle) != NULL;
}

static int cmd_sink(int argc, char **argv) {
  int c = find_cmd(argc, argv, 10);
  if (argc < 12 || c < 0)
    die("usage: sink <bootstrap> <group> <topic> <partition> <N> <status-file> <stdout-file> <timeout_s> -- cmd...");
  const char *bootstrap = argv[2], *group = argv[3], *topic = argv[4];
  int partition = atoi(argv[5]);
  long long target = atoll(argv[6]);
  const char *status_path = argv[7], *out_path = argv[8];
  double timeout = atof(argv[9]);
  pid_t server = parse_server_opt(argc, argv, 10, c);
  double server0 = server ? tree_cpu_s(server) : 0, server_cpu = 0;
  char needle[512];
  snprintf(needle, sizeof needle, "\"%s[%d]\"", topic, partition);

  /* Connect and find the group coordinator before the clock starts. */
  rd_kafka_t *rk = make_client(bootstrap, group);
  rd_kafka_topic_partition_list_t *list = rd_kafka_topic_partition_list_new(1);
  rd_kafka_topic_partition_list_add(list, topic, partition);
  rd_kafka_resp_err_t e = committed_retrying(rk, list, 30000);
  if (e) die(rd_kafka_err2str(e));
  if (list->elems[0].offset >= 0) die("the group already has a committed offset: use a fresh group");

  double t0 = now_s();
  pid_t pid = spawn(out_path, argv + c);
  double join = -1, first_commit = -1, done = -1, user = 0, sys = 0;
  long polls = 0;
  long hwm = -1;
  int status = 0, exited = 0;
  struct rusage ru;
  memset(&ru, 0, sizeof ru);
  for (;;) {
    if (wait4(pid, &status, WNOHANG, &ru) == pid) {
      exited = 1;
      break;
    }
    double t = now_s() - t0;
    if (join < 0 && status_has(status_path, needle)) join = t;
    list->elems[0].offset = RD_KAFKA_OFFSET_INVALID;
    e = rd_kafka_committed(rk, list, 5000);
    ++polls;
    int64_t off = e ? -1 : list->elems[0].offset;
    if (off > 0 && first_commit < 0) first_commit = now_s() - t0;
    if (off >= target) {
      done = now_s() - t0;
      proc_cpu(pid, &user, &sys);
      hwm = proc_hwm_kb(pid);
      if (server) server_cpu = tree_cpu_s(server) - server0;
      break;
    }
    if (t > timeout) {
      fprintf(stderr, "bench_helper: timeout after %.0f s, committed offset %lld of %lld\n", timeout, (long long)off,
              target);
      break;
    }
    usleep(10000);
  }
  double term_at = now_s();
  if (!exited) {
    kill(pid, SIGTERM);
    if (wait4(pid, &status, 0, &ru) < 0) die("wait4 failed");
  }
  double shutdown = now_s() - term_at;
  if (join >= 0 && first_commit >= 0 && join > first_commit) join = first_commit; /* status file lagged */
  printf(
      "wall_s=%.4f join_s=%.4f first_commit_s=%.4f user_s=%.3f sys_s=%.3f hwm_kb=%ld maxrss_kb=%ld exit=%d "
      "shutdown_s=%.3f total_user_s=%.3f total_sys_s=%.3f",
      done, join, first_commit, user, sys, hwm, ru.ru_maxrss,
      WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), shutdown, tv_s(ru.ru_utime), tv_s(ru.ru_stime));
  if (server) printf(" server_cpu_s=%.3f polls=%ld", server_cpu, polls);
  printf("\n");
  rd_kafka_topic_partition_list_destroy(list);
  rd_kafka_destroy(rk);
  return done < 0 ? 1 : 0;
}

/* What one poll of `sink` costs the broker: polls the committed offset every 10 ms for <seconds>,
 * then idles as long, and prints the difference of the broker's CPU per poll. */
static int cmd_pollcost(int argc, char **argv) {
  if (argc < 7) die("usage: pollcost <bootstrap> <group> <topic> <seconds> <broker pid>");
  double seconds = atof(argv[5]);
  pid_t broker = (pid_t)atoi(argv[6]);
  rd_kafka_t *rk = make_client(argv[2], argv[3]);
  rd_kafka_topic_partition_list_t *list = rd_kafka_topic_partition_list_new(1);
  rd_kafka_topic_partition_list_add(list, argv[4], 0);
  committed_retrying(rk, list, 30000); /* the coordinator found, as in `sink` before its clock starts */
  long polls = 0;
  double c0 = tree_cpu_s(broker), t0 = now_s();
  while (now_s() - t0 < seconds) {
    list->elems[0].offset = RD_KAFKA_OFFSET_INVALID;
    rd_kafka_committed(rk, list, 5000);
    ++polls;
    usleep(10000);
  }
  double busy = tree_cpu_s(broker) - c0, busy_s = now_s() - t0;
  c0 = tree_cpu_s(broker);
  t0 = now_s();
  usleep((useconds_t)(busy_s * 1e6));
  double idle = (tree_cpu_s(broker) - c0) * busy_s / (now_s() - t0);
  printf("poll_cpu_s=%.6f polls=%ld busy_cpu_s=%.3f idle_cpu_s=%.3f\n", polls ? (busy - idle) / polls : 0, polls, busy,
         idle);
  rd_kafka_topic_partition_list_destroy(list);
  rd_kafka_destroy(rk);
  return 0;
}

static int cmd_createtopics(int argc, char **argv) {
  if (argc < 5) die("usage: createtopics <bootstrap> <partitions> <topic>...");
  int partitions = atoi(argv[3]), n = argc - 4;
  char err[512];
  rd_kafka_t *rk = make_client(argv[2], NULL);
  rd_kafka_NewTopic_t **topics =
      calloc((size_t)n, sizeof *topics);  // NOLINT(bugprone-sizeof-expression): an array of pointers
  for (int i = 0; i < n; ++i) {
    topics[i] = rd_kafka_NewTopic_new(argv[4 + i], partitions, 1, err, sizeof err);
    if (!topics[i]) die(err);
  }
  rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
  rd_kafka_CreateTopics(rk, topics, (size_t)n, NULL, q);
  rd_kafka_event_t *ev = rd_kafka_queue_poll(q, 30000);
  if (!ev) die("createtopics: no answer within 30 s");
  if (rd_kafka_event_error(ev)) die(rd_kafka_event_error_string(ev));
  size_t cnt = 0;
  const rd_kafka_topic_result_t **res =
      rd_kafka_CreateTopics_result_topics(rd_kafka_event_CreateTopics_result(ev), &cnt);
  int failed = 0;
  for (size_t i = 0; i < cnt; ++i)
    if (rd_kafka_topic_result_error(res[i])) {
      fprintf(stderr, "bench_helper: create %s: %s\n", rd_kafka_topic_result_name(res[i]),
              rd_kafka_topic_result_error_string(res[i]));
      failed = 1;
    }
  rd_kafka_event_destroy(ev);
  rd_kafka_NewTopic_destroy_array(topics, (size_t)n);
  free(topics);
  rd_kafka_queue_destroy(q);
  rd_kafka_destroy(rk);
  return failed;
}

static int cmd_waitcommitted(int argc, char **argv) {
  if (argc < 7 || (argc - 4) % 3) die("usage: waitcommitted <bootstrap> <timeout_s> <group> <topic> <N> [...]");
  double timeout = atof(argv[3]), t0 = now_s();
  int n = (argc - 4) / 3, done = 0, rc = 0;
  rd_kafka_t **clients =
      calloc((size_t)n, sizeof *clients);  // NOLINT(bugprone-sizeof-expression): an array of pointers
  rd_kafka_topic_partition_list_t **lists =
      calloc((size_t)n, sizeof *lists);  // NOLINT(bugprone-sizeof-expression): an array of pointers
  long long *committed = calloc((size_t)n, sizeof *committed);
  for (int i = 0; i < n; ++i) {
    clients[i] = make_client(argv[2], argv[4 + 3 * i]);
    lists[i] = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(lists[i], argv[5 + 3 * i], 0);
    committed[i] = -1;
  }
  while (!done) {
    done = 1;
    for (int i = 0; i < n; ++i) {
      if (committed[i] >= atoll(argv[6 + 3 * i])) continue;
      lists[i]->elems[0].offset = RD_KAFKA_OFFSET_INVALID;
      rd_kafka_resp_err_t e = rd_kafka_committed(clients[i], lists[i], 5000);
      committed[i] = e ? -1 : lists[i]->elems[0].offset;
      if (committed[i] < atoll(argv[6 + 3 * i])) done = 0;
    }
    if (done) break;
    if (now_s() - t0 > timeout) {
      for (int i = 0; i < n; ++i)
        fprintf(stderr, "bench_helper: timeout after %.0f s: %s committed %lld of %s on %s[0]\n", timeout,
                argv[4 + 3 * i], committed[i], argv[6 + 3 * i], argv[5 + 3 * i]);
      rc = 1;
      break;
    }
    usleep(10000);
  }
  if (!rc) printf("wait_s=%.3f\n", now_s() - t0);
  for (int i = 0; i < n; ++i) {
    rd_kafka_topic_partition_list_destroy(lists[i]);
    rd_kafka_destroy(clients[i]);
  }
  free(clients);
  free(lists);
  free(committed);
  return rc;
}

int main(int argc, char **argv) {
  if (argc < 2) die("usage: bench_helper endoffset|run|sink|treecpu|createtopics|waitcommitted|pollcost ...");
  if (!strcmp(argv[1], "endoffset")) return cmd_endoffset(argc, argv);
  if (!strcmp(argv[1], "run")) return cmd_run(argc, argv);
  if (!strcmp(argv[1], "sink")) return cmd_sink(argc, argv);
  if (!strcmp(argv[1], "treecpu")) return cmd_treecpu(argc, argv);
  if (!strcmp(argv[1], "createtopics")) return cmd_createtopics(argc, argv);
  if (!strcmp(argv[1], "waitcommitted")) return cmd_waitcommitted(argc, argv);
  if (!strcmp(argv[1], "pollcost")) return cmd_pollcost(argc, argv);
  die("unknown command");
  return 2;
}
