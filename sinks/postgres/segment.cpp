#include "postgres/segment.h"

#include "picomq/sdk.hpp"
#include "postgres/copy_binary.h"
#include "postgres/row_encoder.h"

namespace picomq::postgres {
namespace {

constexpr std::string_view kTrailer{"\xff\xff", 2};

}  // namespace

CopySegment::CopySegment(Shared& shared, ConnectionPool::Lease lease, Table table, bool staged,
                         Clock::time_point deadline)
    : shared_(shared), lease_(std::move(lease)), table_(std::move(table)), staged_(staged) {
  guarded(deadline, [&] { begin(); });
}

template <class Step>
void CopySegment::guarded(std::optional<Clock::time_point> deadline, Step&& step) {
  try {
    step();
  } catch (const sdk::RetryableError& e) {
    if (!lease_->ok()) shared_.pool.await_server(*lease_, e.what(), deadline);
    throw;
  }
}

std::string CopySegment::what() const {
  return (staged_ ? "COPY into the staging table for " : "COPY into ") + table_.display;
}

void CopySegment::begin() {
  Connection& c = *lease_;
  c.run("BEGIN", "BEGIN");
  try {
    if (staged_) {
      const WriteStatements st = write_statements(*table_.name, shared_.staging, *table_.layout);
      if (!st.create_staging.empty()) c.run(st.create_staging, "creating the staging table");
      c.begin_copy(st.copy, what());
    } else {
      c.begin_copy(copy_sql(*table_.name, *table_.layout), what());
    }
  } catch (...) {
    c.rollback();
    throw;
  }
  header_sent_ = false;
}

bool CopySegment::send(std::string_view data) {
  // The header goes once, at the start of the COPY; every batch adds its tuples.
  const size_t from = header_sent_ ? kCopyHeaderBytes : 0;
  header_sent_ = true;
  return lease_->put_copy_data(data.substr(from, data.size() - from - kTrailer.size()));
}

bool CopySegment::redoable() const {
  return !staged_ && table_.layout->write_mode == WriteMode::Insert && lease_->last_sqlstate() == "23505";
}

void CopySegment::add(const pmq_batch& batch, std::string_view copy_data, size_t rows, bool staged,
                      Clock::time_point deadline) {
  guarded(deadline, [&] {
    // A staged segment takes any batch; a direct one cannot take a replayed one.
    if (staged && !staged_) {
      shared_.log(sdk::LogLevel::Info, "table " + table_.display + ": a batch of " + std::string(batch.topic) + "[" +
                                           std::to_string(batch.partition) + "], which replays, joins the COPY; its " +
                                           std::to_string(batches_.size()) + " batch(es) so far go through the " +
                                           "staging table with it, in the same write");
      restage(/*conflict=*/false);
    }
    batches_.push_back(&batch);
    rows_ += rows;
    partitions_.emplace(batch.topic, batch.partition);
    if (send(copy_data)) return;
    // Broken mid-COPY: the server's error (a row written before is redone through staging) or a
    // lost connection. end_copy() throws what the server said.
    try {
      lease_->end_copy(false, what());
    } catch (const sdk::FatalError&) {
      if (!redoable()) throw;
    }
    restage(/*conflict=*/true);
  });
}

// The segment's batches again, now through staging, in a new transaction: its COPY met a row
// written before (a replay nobody announced: no assignment before it, or a probe that missed it),
// or a batch of a replaying partition joins it.
void CopySegment::restage(bool conflict) {
  if (conflict) {
    shared_.count("conflict_redos", 1);
    shared_.log(sdk::LogLevel::Info, "table " + table_.display +
                                         ": the COPY met rows written before (SQLSTATE 23505, a " + "replay); its " +
                                         std::to_string(batches_.size()) + " batch(es) are written " +
                                         "again through the staging table, which skips those, in the same write");
    shared_.replays.conflict(partitions_);
  }
  lease_->rollback();
  staged_ = true;
  begin();
  // Encoded again from the batches the runtime still holds (their rejections were reported).
  RowEncoder encoder(*table_.layout);
  for (const pmq_batch* b : batches_) {
    EncodeResult e = encoder.encode(*b);
    if (!e.ok()) throw sdk::FatalError("topic '" + std::string(b->topic) + "': " + e.error);
    if (!send(e.copy_data)) lease_->end_copy(false, what());  // throws why
    encoder.recycle(std::move(e.copy_data));
  }
}

void CopySegment::commit() {
  guarded(std::nullopt, [&] {
    Connection& c = *lease_;
    size_t inserted = rows_;
    size_t deleted = 0;
    auto finish = [&] {
      c.end_copy(c.put_copy_data(kTrailer), what());
      if (!staged_) return;
      if (!table_.layout->changes) {
        inserted =
            c.run_counting(merge_sql(*table_.name, shared_.staging, *table_.layout), "writing into " + table_.display);
        return;
      }
      // Change events: upsert mode holds one batch per transaction, so a truncate in it wipes the
      // table before its later changes (the encoder staged only those).
      const auto statements = change_statements(*table_.name, shared_.staging, *table_.layout, truncates());
      if (!statements.truncate.empty()) c.run(statements.truncate, "truncating " + table_.display);
      deleted = c.run_counting(statements.remove, "deleting from " + table_.display);
      inserted = c.run_counting(statements.upsert, "writing into " + table_.display);
      if (!statements.patch.empty()) inserted += c.run_counting(statements.patch, "patching " + table_.display);
      inserted += c.run_counting(statements.patch_missing, "writing into " + table_.display);
    };
    try {
      finish();
    } catch (const sdk::FatalError&) {
      if (!redoable()) throw;
      restage(/*conflict=*/true);
      finish();
    }
    c.commit(table_.display);
    if (deleted) shared_.count("deleted_records", deleted);
    if (!staged_ || table_.layout->write_mode != WriteMode::Insert) return;
    if (inserted < rows_) shared_.count("already_written_records", rows_ - inserted);
    for (const auto& [topic, partition] : shared_.replays.merged(partitions_, rows_, inserted))
      shared_.log(sdk::LogLevel::Info, "table " + table_.display + ": " + topic + "[" + std::to_string(partition) +
                                           "] is past the replay; straight COPY again");
  });
  lease_.release();
}

bool CopySegment::truncates() const {
  for (const pmq_batch* b : batches_) {
    if (!pmq_batch_has_changes(b)) continue;
    for (size_t i = 0; i < b->record_count; ++i)
      if (pmq_record_op(b, pmq_batch_record(b, i)) == PMQ_OP_TRUNCATE) return true;
  }
  return false;
}

void CopySegment::abandon() noexcept {
  if (lease_) lease_->rollback();
  lease_.release();
}

}  // namespace picomq::postgres
