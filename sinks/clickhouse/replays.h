#pragma once
// Replays without duplicates (docs/sinks/clickhouse.md, "Behaviour under replay"): the records
// of a partition that come again — after a crash between an insert and the offset commit, a
// rebalance, a rewind, a retried write — are looked up in their table by record id (pico_topic,
// pico_partition, pico_offset: its ORDER BY, so a range read), and those whose rows are there
// already are left out of the insert. A partition is checked when its first batch since its
// assignment comes, or a batch that goes back; its batches are looked up until they pass the
// highest offset the table held for it then, and go straight through after that.
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace picomq::clickhouse {

class ReplayFilter {
 public:
  using Partition = std::pair<std::string, int32_t>;  // topic, partition
  // Runs a SELECT and returns its TabSeparated answer (throws as the sink's queries do).
  using Query = std::function<std::string(const std::string& sql)>;

  // Its next batch is checked (it may replay what a run before wrote).
  void assigned(const Partition& p);
  void revoked(const Partition& p);

  struct Found {
    std::vector<uint32_t> written;  // indexes into the batch's offsets whose rows are in the table
    bool probed = false;            // the batch started a check of the partition
    int64_t replay_end = -1;        // then: the highest offset the table held from its first on
  };
  // Of a batch of `p` with `offsets` (ascending), the records written already into `table` (a
  // qualified name). `settle` runs before a partition is checked: the inserts in flight into the
  // table end first, so that none lands after the look.
  Found written(const Partition& p, const std::vector<int64_t>& offsets, const std::string& table, const Query& query,
                const std::function<void()>& settle);

  // A batch of `p` whose table does not exist: nothing of it was written.
  void passed(const Partition& p, int64_t last);

  // The SQL (exposed for the unit tests).
  static std::string probe_sql(const std::string& table, const Partition& p, int64_t first);
  static std::string window_sql(const std::string& table, const Partition& p, int64_t from, int64_t to);

 private:
  struct State {
    bool check = true;                        // the next batch starts a check
    int64_t next = 0;                         // the offset after the last batch's
    int64_t replay_end = -1;                  // the table's highest offset of the partition at the check (-1: none)
    int64_t window_from = 0, window_to = -1;  // offsets looked up, and those of them in the table:
    std::vector<int64_t> present;
  };
  std::mutex mutex_;  // states_: assignments come on the consumer's thread, batches on the delivery's
  std::map<Partition, State> states_;
  std::map<Partition, uint64_t> epochs_;  // assignments and revocations seen, for a check begun before one
};

}  // namespace picomq::clickhouse
