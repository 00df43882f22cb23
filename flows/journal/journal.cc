#include "flows/journal/journal.h"

#include <Poco/Logger.h>
#include <sqlite3.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <optional>
#include <string_view>

#include "flows/journal/batch_record.h"
#include "flows/journal/sqlite_status.h"
#include "flows/kept_name.h"

namespace cepbus::flows {

namespace {

constexpr const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS pending_batches(
  n INTEGER PRIMARY KEY,
  last_seq INTEGER NOT NULL,
  seqs BLOB NOT NULL,
  records BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS pending_acked(
  n INTEGER PRIMARY KEY,
  acked BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS pending(
  seq INTEGER PRIMARY KEY,
  target TEXT NOT NULL,
  event_id INTEGER NOT NULL,
  address TEXT NOT NULL,
  sender TEXT NOT NULL,
  pattern INTEGER NOT NULL,
  correlation_id INTEGER NOT NULL,
  event TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS delivered_batches(
  n INTEGER PRIMARY KEY AUTOINCREMENT,
  count INTEGER NOT NULL,
  ids BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS checkpoints(
  name TEXT PRIMARY KEY,
  engine TEXT NOT NULL,
  version INTEGER NOT NULL,
  fingerprint INTEGER NOT NULL,
  position INTEGER NOT NULL,
  state BLOB NOT NULL,
  published BLOB NOT NULL);
)sql";

// SQLite integers are signed 64-bit; ids and sequence numbers are stored bit for bit.
int64_t toDb(uint64_t v) { return std::bit_cast<int64_t>(v); }
uint64_t fromDb(int64_t v) { return std::bit_cast<uint64_t>(v); }

std::string_view columnText(sqlite3_stmt* stmt, int column) {
  const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(stmt, column));
  return text == nullptr ? std::string_view()
                         : std::string_view(text, sqlite3_column_bytes(stmt, column));
}

void bindText(sqlite3_stmt* stmt, int index, std::string_view text) {
  sqlite3_bind_text(stmt, index, text.data(), static_cast<int>(text.size()), SQLITE_STATIC);
}

std::string_view columnBlob(sqlite3_stmt* stmt, int column) {
  const auto* bytes = static_cast<const char*>(sqlite3_column_blob(stmt, column));
  return bytes == nullptr ? std::string_view()
                          : std::string_view(bytes, sqlite3_column_bytes(stmt, column));
}

void bindBlob(sqlite3_stmt* stmt, int index, std::string_view bytes) {
  sqlite3_bind_blob(stmt, index, bytes.data(), static_cast<int>(bytes.size()), SQLITE_STATIC);
}

// The `seqs` column of pending_batches: each a u64, host byte order.
void encodeSeqs(std::span<const uint64_t> seqs, std::string& out) {
  out.assign(reinterpret_cast<const char*>(seqs.data()), seqs.size() * sizeof(uint64_t));
}

// False when `blob` is not what encodeSeqs() writes.
bool decodeSeqs(std::string_view blob, std::vector<uint64_t>& out) {
  if (blob.size() % sizeof(uint64_t) != 0) return false;
  out.resize(blob.size() / sizeof(uint64_t));
  std::memcpy(out.data(), blob.data(), blob.size());
  return true;
}

// The ids of one batch of acknowledgements, as stored in delivered_batches:
// runs of acknowledgements to one target, each a u16 name length, the name,
// a u32 count and that many u64 event ids (host byte order).
template <typename T>
void appendRaw(std::string& out, T value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof(value));
}

// Returns how many ids it stored. A target whose name does not fit the u16
// length (a remote peer may choose a link name that long) is left out: its
// ids only lose their duplicate suppression after a restart, where a wrapped
// length would have made the batch read back as other targets' ids.
size_t encodeDelivered(std::span<const JournalAck> acks, std::string& out) {
  out.clear();
  size_t stored = 0;
  for (size_t i = 0; i < acks.size();) {
    size_t end = i;
    while (end < acks.size() && acks[end].target == acks[i].target) ++end;
    const std::string_view name = acks[i].target.name();
    if (name.size() > std::numeric_limits<uint16_t>::max()) {
      i = end;
      continue;
    }
    appendRaw(out, static_cast<uint16_t>(name.size()));
    out.append(name);
    appendRaw(out, static_cast<uint32_t>(end - i));
    stored += end - i;
    for (; i < end; ++i) appendRaw(out, acks[i].event_id);
  }
  return stored;
}

template <typename T>
bool readRaw(std::string_view& in, T& value) {
  if (in.size() < sizeof(value)) return false;
  std::memcpy(&value, in.data(), sizeof(value));
  in.remove_prefix(sizeof(value));
  return true;
}

// False when `blob` is not what encodeDelivered() writes.
bool decodeDelivered(std::string_view blob, std::vector<DeliveredId>& out) {
  while (!blob.empty()) {
    uint16_t length = 0;
    uint32_t count = 0;
    if (!readRaw(blob, length) || blob.size() < length) return false;
    const SharedName target = keepName(blob.substr(0, length));
    blob.remove_prefix(length);
    if (!readRaw(blob, count) || blob.size() / sizeof(EventId) < count) return false;
    for (uint32_t k = 0; k < count; ++k) {
      EventId id = 0;
      readRaw(blob, id);
      out.push_back(DeliveredId{target, id});
    }
  }
  return true;
}

// Resets a statement on every path out of a scope, so it never stays busy.
class StatementReset {
 public:
  explicit StatementReset(sqlite3_stmt* stmt) : stmt_(stmt) {}
  ~StatementReset() {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
  }
  StatementReset(const StatementReset&) = delete;
  StatementReset& operator=(const StatementReset&) = delete;

 private:
  sqlite3_stmt* stmt_;
};

}  // namespace

Result<std::unique_ptr<Journal>> Journal::open(const std::string& path, JournalOptions options) {
  std::unique_ptr<Journal> journal(new Journal(path, std::move(options)));
  const std::string& vfs = journal->options_.vfs;
  if (sqlite3_open_v2(path.c_str(), &journal->db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE,
                      vfs.empty() ? nullptr : vfs.c_str()) != SQLITE_OK) {
    return journal->error("open");
  }
  // The AMQP listener records durable subscriptions in this file through a
  // connection of its own (services/amqp/listener/durable_store.h): a commit that
  // meets its short transaction waits for it instead of failing.
  sqlite3_busy_timeout(journal->db_, 5000);
  // WAL: readers do not block the writer, and a commit appends to the log
  // instead of rewriting pages, which is what group commit wants.
  sqlite3_stmt* mode = nullptr;
  if (Status s = journal->prepare("PRAGMA journal_mode=WAL", &mode); !s.isOk()) return s;
  const bool wal = sqlite3_step(mode) == SQLITE_ROW && columnText(mode, 0) == "wal";
  sqlite3_finalize(mode);
  if (!wal) return Status::ioError("journal " + path + ": cannot switch to WAL mode");

  if (Status s = journal->exec("PRAGMA synchronous=NORMAL"); !s.isOk()) return s;
  if (Status s = journal->exec("PRAGMA secure_delete=FAST"); !s.isOk()) return s;
  if (Status s = journal->exec(kSchema); !s.isOk()) return s;
  if (Status s =
          journal->prepare("INSERT INTO pending_batches(last_seq, seqs, records) VALUES(?, ?, ?)",
                           &journal->insert_);
      !s.isOk()) {
    return s;
  }
  if (Status s = journal->prepare("DELETE FROM pending_batches WHERE n = ?", &journal->delete_row_);
      !s.isOk()) {
    return s;
  }
  if (Status s =
          journal->prepare("DELETE FROM pending_acked WHERE n = ?", &journal->delete_bitmap_);
      !s.isOk()) {
    return s;
  }
  if (Status s = journal->prepare("INSERT OR REPLACE INTO pending_acked(n, acked) VALUES(?, ?)",
                                  &journal->store_bitmap_);
      !s.isOk()) {
    return s;
  }
  if (Status s =
          journal->prepare("DELETE FROM pending WHERE seq BETWEEN ? AND ?", &journal->delete_);
      !s.isOk()) {
    return s;
  }
  if (Status s = journal->prepare("INSERT INTO delivered_batches(count, ids) VALUES(?, ?)",
                                  &journal->remember_);
      !s.isOk()) {
    return s;
  }
  if (Status s = journal->prepare("DELETE FROM delivered_batches WHERE n <= ?", &journal->trim_);
      !s.isOk()) {
    return s;
  }
  if (Status s = journal->prepare(
          "INSERT OR REPLACE INTO checkpoints(name, engine, version, fingerprint, position, "
          "state, published) VALUES(?, ?, ?, ?, ?, ?, ?)",
          &journal->checkpoint_);
      !s.isOk()) {
    return s;
  }
  if (Status s = journal->migrateDeliveredRows(); !s.isOk()) return s;
  if (Status s = journal->loadBatches(); !s.isOk()) return s;
  if (Status s = journal->loadPendingRows(); !s.isOk()) return s;
  return journal;
}

Status Journal::migrateDeliveredRows() {
  sqlite3_stmt* stmt = nullptr;
  if (Status s =
          prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'delivered'", &stmt);
      !s.isOk()) {
    return s;
  }
  const bool old_table = sqlite3_step(stmt) == SQLITE_ROW;
  sqlite3_finalize(stmt);
  if (!old_table) return Status::ok();
  if (Status s = exec("BEGIN IMMEDIATE"); !s.isOk()) return s;
  Status status = prepare("SELECT target, event_id FROM delivered ORDER BY n", &stmt);
  std::vector<JournalAck> acks;
  if (status.isOk()) {
    int rc;
    while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
      acks.push_back(JournalAck{0, keepName(columnText(stmt, 0)),
                                fromDb(sqlite3_column_int64(stmt, 1)), false});
    }
    sqlite3_finalize(stmt);
    if (rc != SQLITE_DONE) status = error("read delivered");
  }
  if (status.isOk() && !acks.empty()) status = rememberBatch(acks).status();
  if (status.isOk()) status = exec("DROP TABLE delivered");
  if (status.isOk()) status = exec("COMMIT");
  // The first error is the one to report; a failed ROLLBACK adds nothing
  // (SQLite rolls back by itself when the connection closes).
  if (!status.isOk()) (void)exec("ROLLBACK");
  return status;
}

Status Journal::loadBatches() {
  sqlite3_stmt* stmt = nullptr;
  if (Status s = prepare("SELECT n, count FROM delivered_batches ORDER BY n", &stmt); !s.isOk()) {
    return s;
  }
  int rc;
  while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
    const Batch batch{sqlite3_column_int64(stmt, 0),
                      static_cast<size_t>(sqlite3_column_int64(stmt, 1))};
    batches_.push_back(batch);
    remembered_ += batch.count;
  }
  sqlite3_finalize(stmt);
  if (rc != SQLITE_DONE) return error("read delivered batches");
  return Status::ok();
}

Status Journal::loadPendingRows() {
  sqlite3_stmt* stmt = nullptr;
  if (Status s = prepare("SELECT EXISTS(SELECT 1 FROM pending)", &stmt); !s.isOk()) return s;
  int rc = sqlite3_step(stmt);
  record_rows_ = rc == SQLITE_ROW && sqlite3_column_int64(stmt, 0) != 0;
  sqlite3_finalize(stmt);
  if (rc != SQLITE_ROW) return error("read pending");
  if (Status s = prepare("SELECT b.n, b.seqs, a.acked FROM pending_batches b "
                         "LEFT JOIN pending_acked a ON a.n = b.n ORDER BY b.n",
                         &stmt);
      !s.isOk()) {
    return s;
  }
  std::vector<uint64_t> seqs;
  while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
    // A row whose seqs do not decode stays out of the index: pending()
    // finds it there and deletes it as corrupt.
    if (!decodeSeqs(columnBlob(stmt, 1), seqs)) continue;
    pending_.add(sqlite3_column_int64(stmt, 0), seqs, std::string(columnBlob(stmt, 2)));
  }
  sqlite3_finalize(stmt);
  if (rc != SQLITE_DONE) return error("read pending batches");
  return Status::ok();
}

Journal::~Journal() {
  for (sqlite3_stmt* stmt : {insert_, delete_row_, delete_bitmap_, store_bitmap_, delete_,
                             remember_, trim_, checkpoint_})
    sqlite3_finalize(stmt);
  sqlite3_close(db_);
}

Status Journal::error(const std::string& what) const { return sqliteError(db_, path_, what); }

Status Journal::exec(const char* sql) { return sqliteExec(db_, path_, sql); }

Status Journal::prepare(const char* sql, sqlite3_stmt** stmt) {
  if (sqlite3_prepare_v2(db_, sql, -1, stmt, nullptr) != SQLITE_OK) {
    return error(std::string("prepare '") + sql + "'");
  }
  return Status::ok();
}

Result<std::vector<JournalRecord>> Journal::pending() {
  std::vector<JournalRecord> records;
  if (Status s = readRecordRows(records); !s.isOk()) return s;
  if (Status s = readPendingRows(records); !s.isOk()) return s;
  return records;
}

Status Journal::readRecordRows(std::vector<JournalRecord>& out) {
  sqlite3_stmt* stmt = nullptr;
  if (Status s = prepare("SELECT seq, target, event_id, address, sender, pattern, "
                         "correlation_id, event FROM pending ORDER BY seq",
                         &stmt);
      !s.isOk()) {
    return s;
  }
  int rc;
  while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
    JournalRecord r;
    r.seq = fromDb(sqlite3_column_int64(stmt, 0));
    // Names held again as before the restart: a client's are given back
    // once its records are (flows/kept_name.h).
    r.target = keepName(columnText(stmt, 1));
    r.event_id = fromDb(sqlite3_column_int64(stmt, 2));
    r.address = keepName(columnText(stmt, 3));
    r.sender = Symbol::intern(columnText(stmt, 4));
    const int64_t pattern = sqlite3_column_int64(stmt, 5);
    r.pattern = pattern == static_cast<int64_t>(Pattern::kRobustInOnly) ? Pattern::kRobustInOnly
                : pattern == static_cast<int64_t>(Pattern::kInOut)      ? Pattern::kInOut
                                                                        : Pattern::kInOnly;
    r.correlation_id = fromDb(sqlite3_column_int64(stmt, 6));
    // A BLOB (a binary record) or TEXT (a JSON line): the bytes as stored either way.
    r.stored_event = std::string(columnBlob(stmt, 7));
    out.push_back(std::move(r));
  }
  sqlite3_finalize(stmt);
  if (rc != SQLITE_DONE) return error("read pending");
  return Status::ok();
}

Status Journal::readPendingRows(std::vector<JournalRecord>& out) {
  sqlite3_stmt* stmt = nullptr;
  if (Status s = prepare("SELECT b.n, b.records, a.acked FROM pending_batches b "
                         "LEFT JOIN pending_acked a ON a.n = b.n ORDER BY b.n",
                         &stmt);
      !s.isOk()) {
    return s;
  }
  corrupt_pending_rows_ = 0;
  std::vector<int64_t> corrupt;
  int rc;
  while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
    const int64_t row = sqlite3_column_int64(stmt, 0);
    Result<std::vector<JournalRecord>> records = decodeBatchRecord(columnBlob(stmt, 1));
    const std::vector<uint64_t>* seqs = pending_.seqsOf(row);
    Status status = records.status();
    if (status.isOk() &&
        (seqs == nullptr || seqs->size() != records->size() ||
         !std::equal(seqs->begin(), seqs->end(), records->begin(),
                     [](uint64_t seq, const JournalRecord& r) { return seq == r.seq; }))) {
      status = Status::invalidArgument("its seqs column does not list its records");
    }
    if (!status.isOk()) {
      // Its records cannot be told apart from what damaged them: said once,
      // then the row goes, as a record that does not decode does.
      Poco::Logger::get("cepbus.journal")
          .error("journal " + path_ + ": pending_batches row " + std::to_string(row) +
                 " does not decode, removed: " + status.message());
      corrupt.push_back(row);
      continue;
    }
    const std::string_view acked = columnBlob(stmt, 2);
    for (size_t i = 0; i < records->size(); ++i) {
      if (!PendingBatches::isAcked(acked, i)) out.push_back(std::move((*records)[i]));
    }
  }
  sqlite3_finalize(stmt);
  if (rc != SQLITE_DONE) return error("read pending batches");
  for (int64_t row : corrupt) {
    if (Status s = deletePendingRow(row, true); !s.isOk()) return s;
    pending_.remove(row);
    ++corrupt_pending_rows_;
  }
  return Status::ok();
}

Status Journal::deletePendingRow(int64_t row, bool had_bitmap) {
  {
    StatementReset reset(delete_row_);
    sqlite3_bind_int64(delete_row_, 1, row);
    if (sqlite3_step(delete_row_) != SQLITE_DONE) return error("delete pending batch");
  }
  if (!had_bitmap) return Status::ok();
  StatementReset reset(delete_bitmap_);
  sqlite3_bind_int64(delete_bitmap_, 1, row);
  if (sqlite3_step(delete_bitmap_) != SQLITE_DONE) return error("delete pending bitmap");
  return Status::ok();
}

Result<std::vector<DeliveredId>> Journal::delivered() {
  sqlite3_stmt* stmt = nullptr;
  if (Status s = prepare("SELECT ids FROM delivered_batches ORDER BY n", &stmt); !s.isOk()) {
    return s;
  }
  std::vector<DeliveredId> ids;
  corrupt_batches_ = 0;
  int rc;
  while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
    const std::string_view blob(static_cast<const char*>(sqlite3_column_blob(stmt, 0)),
                                static_cast<size_t>(sqlite3_column_bytes(stmt, 0)));
    const size_t before = ids.size();
    if (!decodeDelivered(blob, ids)) {
      // Only duplicate suppression is lost with it: skipped and counted, not fatal.
      ids.resize(before);
      ++corrupt_batches_;
    }
  }
  sqlite3_finalize(stmt);
  if (rc != SQLITE_DONE) return error("read delivered");
  // Whole batches are kept; the window is exact here.
  if (ids.size() > options_.delivered_window) {
    ids.erase(ids.begin(), ids.end() - static_cast<ptrdiff_t>(options_.delivered_window));
  }
  return ids;
}

Result<uint64_t> Journal::maxSeq() {
  sqlite3_stmt* stmt = nullptr;
  if (Status s = prepare("SELECT MAX((SELECT COALESCE(MAX(seq), 0) FROM pending), "
                         "(SELECT COALESCE(MAX(last_seq), 0) FROM pending_batches))",
                         &stmt);
      !s.isOk()) {
    return s;
  }
  const int rc = sqlite3_step(stmt);
  const uint64_t seq = rc == SQLITE_ROW ? fromDb(sqlite3_column_int64(stmt, 0)) : 0;
  sqlite3_finalize(stmt);
  if (rc != SQLITE_ROW) return error("read max seq");
  return seq;
}

Status Journal::setSynchronous(bool full) {
  if (full == synchronous_full_) return Status::ok();
  Status s = exec(full ? "PRAGMA synchronous=FULL" : "PRAGMA synchronous=NORMAL");
  if (s.isOk()) synchronous_full_ = full;
  return s;
}

Status Journal::commit(std::span<const JournalRecord> inserts, std::span<const JournalAck> acks,
                       std::span<const CheckpointRecord> checkpoints) {
  if (inserts.empty() && acks.empty() && checkpoints.empty()) return Status::ok();
  // A checkpoint is fsynced like records: its acknowledgements delete
  // records that only its state holds from then on.
  if (Status s = setSynchronous(options_.fsync && (!inserts.empty() || !checkpoints.empty()));
      !s.isOk()) {
    return s;
  }
  if (Status s = exec("BEGIN IMMEDIATE"); !s.isOk()) return s;
  Result<Change> change = commitBody(inserts, acks, checkpoints);
  Status status = change.status();
  if (status.isOk()) status = exec("COMMIT");
  if (!status.isOk()) {
    (void)exec("ROLLBACK");  // as in migrateDeliveredRows(): report the first error
    return status;
  }
  // The window and the pending rows as the database now has them.
  const BatchChange& window = change->window;
  for (size_t i = 0; i < window.dropped; ++i) {
    remembered_ -= batches_.front().count;
    batches_.pop_front();
  }
  if (window.added.count > 0) {
    batches_.push_back(window.added);
    remembered_ += window.added.count;
  }
  pending_.apply(change->pending.acked);
  if (change->pending.added != 0) pending_.add(change->pending.added, written_);
  return status;
}

Result<Journal::BatchChange> Journal::rememberBatch(std::span<const JournalAck> acks) {
  BatchChange change;
  if (acks.empty() || options_.delivered_window == 0) return change;
  const size_t stored = encodeDelivered(acks, blob_);
  if (stored == 0) return change;
  StatementReset reset(remember_);
  sqlite3_bind_int64(remember_, 1, static_cast<int64_t>(stored));
  sqlite3_bind_blob(remember_, 2, blob_.data(), static_cast<int>(blob_.size()), SQLITE_STATIC);
  if (sqlite3_step(remember_) != SQLITE_DONE) return error("remember delivered");
  change.added = Batch{sqlite3_last_insert_rowid(db_), stored};
  // Drop the oldest batches while the newer ones still hold a whole window.
  size_t kept = remembered_ + stored;
  while (change.dropped < batches_.size() &&
         kept - batches_[change.dropped].count >= options_.delivered_window) {
    kept -= batches_[change.dropped].count;
    ++change.dropped;
  }
  if (change.dropped > 0) {
    StatementReset trim(trim_);
    sqlite3_bind_int64(trim_, 1, batches_[change.dropped - 1].n);
    if (sqlite3_step(trim_) != SQLITE_DONE) return error("trim delivered");
  }
  return change;
}

Result<int64_t> Journal::insertRecords(std::span<const JournalRecord> inserts) {
  writing_.clear();
  written_.clear();
  for (const JournalRecord& r : inserts) {
    if (std::binary_search(acked_.begin(), acked_.end(), r.seq)) continue;
    if (pending_.holds(r.seq)) {
      return Status::invalidArgument("journal " + path_ + ": insert pending: record " +
                                     std::to_string(r.seq) + " is pending already");
    }
    writing_.push_back(&r);
    written_.push_back(r.seq);
  }
  if (writing_.empty()) return int64_t{0};
  // Twice in one transaction: the index would hold it once, the row twice.
  std::span<const uint64_t> sorted = written_;
  std::vector<uint64_t> copy;
  if (!std::is_sorted(written_.begin(), written_.end())) {
    copy = written_;
    std::sort(copy.begin(), copy.end());
    sorted = copy;
  }
  if (const auto twice = std::adjacent_find(sorted.begin(), sorted.end()); twice != sorted.end()) {
    return Status::invalidArgument("journal " + path_ + ": insert pending: record " +
                                   std::to_string(*twice) + " twice in one transaction");
  }
  const std::string records = encodeBatchRecord(writing_);
  encodeSeqs(written_, blob_);
  StatementReset reset(insert_);
  sqlite3_bind_int64(insert_, 1, toDb(*std::max_element(written_.begin(), written_.end())));
  bindBlob(insert_, 2, blob_);
  bindBlob(insert_, 3, records);
  if (sqlite3_step(insert_) != SQLITE_DONE) return error("insert pending");
  const int64_t row = sqlite3_last_insert_rowid(db_);
  // A row's key may be one a deleted row had; a bitmap left of that one (a
  // damaged file can hold one) would mark the new row's records acknowledged.
  StatementReset stale(delete_bitmap_);
  sqlite3_bind_int64(delete_bitmap_, 1, row);
  if (sqlite3_step(delete_bitmap_) != SQLITE_DONE) return error("delete pending bitmap");
  return row;
}

Result<PendingBatches::Plan> Journal::acknowledgeRecords() {
  PendingBatches::Plan plan = pending_.plan(acked_);
  for (const PendingBatches::RowChange& change : plan.rows) {
    if (change.emptied) {
      if (Status s = deletePendingRow(change.row, change.had_bitmap); !s.isOk()) return s;
      continue;
    }
    StatementReset reset(store_bitmap_);
    sqlite3_bind_int64(store_bitmap_, 1, change.row);
    bindBlob(store_bitmap_, 2, change.acked);
    if (sqlite3_step(store_bitmap_) != SQLITE_DONE) return error("store pending bitmap");
  }
  // Only a journal of an older cepbus has rows of its own for records.
  if (record_rows_) {
    if (Status s = deleteRecordRows(plan.unknown); !s.isOk()) return s;
  }
  return plan;
}

Status Journal::deleteRecordRows(std::span<const uint64_t> seqs) {
  // One statement per run of consecutive sequence numbers, not per record.
  for (size_t i = 0; i < seqs.size();) {
    size_t end = i + 1;
    while (end < seqs.size() && seqs[end] == seqs[end - 1] + 1) ++end;
    StatementReset reset(delete_);
    sqlite3_bind_int64(delete_, 1, toDb(seqs[i]));
    sqlite3_bind_int64(delete_, 2, toDb(seqs[end - 1]));
    if (sqlite3_step(delete_) != SQLITE_DONE) return error("delete pending");
    i = end;
  }
  return Status::ok();
}

Result<Journal::Change> Journal::commitBody(std::span<const JournalRecord> inserts,
                                            std::span<const JournalAck> acks,
                                            std::span<const CheckpointRecord> checkpoints) {
  Change change;
  acked_.clear();
  for (const JournalAck& a : acks) {
    if (a.written) acked_.push_back(a.seq);
  }
  std::sort(acked_.begin(), acked_.end());
  acked_.erase(std::unique(acked_.begin(), acked_.end()), acked_.end());
  Result<int64_t> added = insertRecords(inserts);
  if (!added) return added.status();
  change.pending.added = *added;
  Result<PendingBatches::Plan> plan = acknowledgeRecords();
  if (!plan) return plan.status();
  change.pending.acked = std::move(*plan);
  for (const CheckpointRecord& c : checkpoints) {
    StatementReset reset(checkpoint_);
    bindText(checkpoint_, 1, c.name);
    bindText(checkpoint_, 2, c.engine);
    sqlite3_bind_int64(checkpoint_, 3, c.version);
    sqlite3_bind_int64(checkpoint_, 4, toDb(c.fingerprint));
    sqlite3_bind_int64(checkpoint_, 5, toDb(c.position));
    bindBlob(checkpoint_, 6, c.state);
    bindBlob(checkpoint_, 7, c.published);
    if (sqlite3_step(checkpoint_) != SQLITE_DONE) return error("store checkpoint " + c.name);
  }
  Result<BatchChange> window = rememberBatch(acks);
  if (!window) return window.status();
  change.window = *window;
  return change;
}

}  // namespace cepbus::flows
