#pragma once
// One segment of the accumulator (picomq/kit/accumulator.hpp): one table's binary COPY, in one
// transaction, on a connection of its own leased from the pool.
//   direct  BEGIN; COPY t (...) FROM STDIN (FORMAT binary); <batches>; COMMIT
//   staged  BEGIN; CREATE TEMP TABLE pg_temp."pico_staging" (...) ON COMMIT DROP; COPY into it;
//           <batches>; INSERT INTO t SELECT ... (ON CONFLICT per write mode); COMMIT
// Insert mode goes direct unless a partition replays; upsert always stages; append is direct.
// Each batch appends its tuples to the COPY; the commit sends the trailer, ends the COPY, merges
// and COMMITs; an abandoned segment rolls back.
//
// A direct insert COPY that meets a row written before (SQLSTATE 23505, mid-stream or at its
// end), or that a replayed batch joins, becomes a staged one in place: its transaction is rolled
// back and its batches, still held by the runtime until their writes complete, are encoded again
// into a staging COPY in a new one. So a replay costs no failed write. A lost connection waits for
// the server (the pool's outage rule) before the failure goes to the writes.
#include <libpq-fe.h>

#include <functional>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "picomq/kit/accumulator.hpp"
#include "picomq/sink_abi.h"
#include "postgres/pool.h"
#include "postgres/replay.h"
#include "postgres/sql.h"

namespace picomq::postgres {

class CopySegment final : public kit::Segment {
 public:
  // What every segment of a sink uses; it outlives them.
  struct Shared {
    ConnectionPool& pool;
    Replays& replays;
    TableName staging;
    LogFn log;
    std::function<void(const char*, uint64_t)> count;
  };
  // The segment's table, as it was when the batches were encoded.
  struct Table {
    const TableName* name = nullptr;  // owned by the sink (stable)
    std::string display;              // schema.table, for messages
    std::shared_ptr<const TableLayout> layout;
  };

  // BEGIN, [the staging table,] COPY on `lease`. Throws the outcome (a lost connection first
  // waits for the server until `deadline`, the write attempt's).
  CopySegment(Shared& shared, ConnectionPool::Lease lease, Table table, bool staged, Clock::time_point deadline);

  // One batch: its encoded rows (RowEncoder::encode's copy_data: header, tuples, trailer), and
  // whether its partition goes through staging. `batch` must stay valid until the segment ends.
  void add(const pmq_batch& batch, std::string_view copy_data, size_t rows, bool staged, Clock::time_point deadline);

  void commit() override;
  void abandon() noexcept override;

 private:
  void begin();                           // BEGIN; [staging;] COPY
  bool send(std::string_view copy_data);  // the tuples, with the header first; false: the COPY broke
  void restage(bool conflict);            // direct -> staged in place (see above)
  bool truncates() const;                 // change events: a batch of it truncates the table
  bool redoable() const;                  // the failure was a row written before on a direct insert COPY
  std::string what() const;
  // Runs `step`; a lost connection waits for the server before the failure goes on.
  template <class Step>
  void guarded(std::optional<Clock::time_point> deadline, Step&& step);

  Shared& shared_;
  ConnectionPool::Lease lease_;
  Table table_;
  bool staged_;
  bool header_sent_ = false;
  size_t rows_ = 0;
  std::vector<const pmq_batch*> batches_;  // for a restage
  std::set<Partition> partitions_;
};

}  // namespace picomq::postgres
