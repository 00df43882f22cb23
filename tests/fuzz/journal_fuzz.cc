// Journal record decoding: a small journal (a row of pending records with
// its bitmap of acknowledged ones, two rows of an older cepbus's one row per
// record, acknowledged batches) is written, then one field of one
// row is overwritten with fuzzed bytes through SQLite, as a torn write or a
// bad disk would leave it; then the journal is opened and read the way
// ReliableFlow recovers (delivered(), pending(), maxSeq(), decodeEventRecord() of
// each record read as bytes) and written to again. A corrupt record must be refused or
// skipped, never crash, and the window must stay within its bound.

#include <fuzzer/FuzzedDataProvider.h>
#include <sqlite3.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "bus/core/event.h"
#include "bus/core/event_json.h"
#include "flows/journal/event_record.h"
#include "flows/journal/journal.h"
#include "tests/fuzz/fuzz_support.h"

namespace {

using namespace cepbus;
using flows::Journal;
using flows::JournalAck;
using flows::JournalRecord;

constexpr size_t kWindow = 8;

flows::JournalOptions options() {
  flows::JournalOptions o;
  o.fsync = false;  // durability is not what is fuzzed; the disk is shared
  o.delivered_window = kWindow;
  return o;
}

JournalRecord record(uint64_t seq, std::string_view target, int64_t ts) {
  JournalRecord r;
  r.seq = seq;
  r.target = Symbol::intern(target);
  r.address = Symbol::intern("orders.new");
  r.sender = Symbol::intern("client");
  r.event = EventBuilder("Order").at(ts).set("qty", Value(int64_t{3})).build();
  r.event_id = r.event->id();
  return r;
}

// The journal every input starts from, written once.
const std::filesystem::path& templateJournal() {
  static const std::filesystem::path* path = [] {
    auto* p = new std::filesystem::path(fuzz::tempDir() / "template.db");
    auto journal = Journal::open(p->string(), options());
    fuzz::check(journal.isOk(), "cannot make the template journal");
    const std::vector<JournalRecord> records = {record(1, "a", 1), record(2, "b", 2),
                                                record(3, "a", 3)};
    const std::vector<JournalAck> acks = {{1, records[0].target, records[0].event_id, true},
                                          {0, Symbol::intern("b"), 77, false}};
    fuzz::check((*journal)->commit(records, {}).isOk(), "template commit");
    fuzz::check((*journal)->commit({}, acks).isOk(), "template acks");
    journal->reset();
    // Rows of an older cepbus: a record per row, a JSON line and a binary record.
    sqlite3* db = nullptr;
    fuzz::check(sqlite3_open(p->c_str(), &db) == SQLITE_OK, "template rows");
    sqlite3_stmt* stmt = nullptr;
    sqlite3_prepare_v2(db,
                       "INSERT INTO pending(seq, target, event_id, address, sender, pattern, "
                       "correlation_id, event) VALUES(?1, 'a', ?1, 'orders.new', 'client', 0, 0, "
                       "?2)",
                       -1, &stmt, nullptr);
    for (const JournalRecord& r : {record(4, "a", 4), record(5, "b", 5)}) {
      const std::string bytes = r.seq == 4 ? encodeEvent(*r.event, EventFormat::kFull)
                                           : flows::encodeEventRecord(*r.event);
      sqlite3_bind_int64(stmt, 1, static_cast<int64_t>(r.seq));
      sqlite3_bind_blob(stmt, 2, bytes.data(), static_cast<int>(bytes.size()), SQLITE_TRANSIENT);
      fuzz::check(sqlite3_step(stmt) == SQLITE_DONE, "template row");
      sqlite3_reset(stmt);
    }
    sqlite3_finalize(stmt);
    sqlite3_close(db);
    return p;
  }();
  return *path;
}

void execRaw(sqlite3* db, const char* sql) { sqlite3_exec(db, sql, nullptr, nullptr, nullptr); }

// Overwrites what `which` names with the fuzzed bytes.
void corrupt(const std::string& path, FuzzedDataProvider& in) {
  sqlite3* db = nullptr;
  if (sqlite3_open(path.c_str(), &db) != SQLITE_OK) {
    sqlite3_close(db);
    return;
  }
  static const char* const kUpdates[] = {
      "UPDATE pending SET event = ?1 WHERE seq = 4",
      "UPDATE pending SET target = ?1 WHERE seq = 5",
      "UPDATE delivered_batches SET ids = ?1",
      "UPDATE delivered_batches SET count = ?2",
      "UPDATE pending SET seq = ?2 WHERE seq = 5",
      "UPDATE pending SET pattern = ?2, event_id = ?2, correlation_id = ?2",
      "INSERT INTO delivered_batches(count, ids) VALUES(?2, ?1)",
      "UPDATE pending_batches SET records = ?1",
      "UPDATE pending_batches SET seqs = ?1",
      "UPDATE pending_batches SET last_seq = ?2, n = ?2",
      "UPDATE pending_acked SET acked = ?1",
      "INSERT OR REPLACE INTO pending_acked(n, acked) VALUES(?2, ?1)",
  };
  const size_t which = in.ConsumeIntegralInRange<size_t>(0, std::size(kUpdates));
  const int64_t number = in.ConsumeIntegral<int64_t>();
  const std::vector<uint8_t> bytes = in.ConsumeRemainingBytes<uint8_t>();
  if (which == std::size(kUpdates)) {
    // A journal from before the batches, with a fuzzed per-id window.
    execRaw(db,
            "CREATE TABLE delivered(n INTEGER PRIMARY KEY AUTOINCREMENT, target TEXT NOT NULL, "
            "event_id INTEGER NOT NULL)");
    sqlite3_stmt* stmt = nullptr;
    sqlite3_prepare_v2(db, "INSERT INTO delivered(target, event_id) VALUES(?1, ?2)", -1, &stmt,
                       nullptr);
    sqlite3_bind_blob(stmt, 1, bytes.data(), static_cast<int>(bytes.size()), SQLITE_STATIC);
    sqlite3_bind_int64(stmt, 2, number);
    sqlite3_step(stmt);
    sqlite3_finalize(stmt);
  } else {
    sqlite3_stmt* stmt = nullptr;
    if (sqlite3_prepare_v2(db, kUpdates[which], -1, &stmt, nullptr) == SQLITE_OK) {
      // A blob where the schema says TEXT is what a bad disk can leave too.
      sqlite3_bind_blob(stmt, 1, bytes.data(), static_cast<int>(bytes.size()), SQLITE_STATIC);
      sqlite3_bind_int64(stmt, 2, number);
      sqlite3_step(stmt);
    }
    sqlite3_finalize(stmt);
  }
  sqlite3_close(db);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 4096) return -1;
  const std::string path = (fuzz::tempDir() / "journal.db").string();
  std::error_code ignored;
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path + suffix, ignored);
  std::filesystem::copy_file(templateJournal(), path);
  FuzzedDataProvider in(data, size);
  corrupt(path, in);

  auto journal = Journal::open(path, options());
  if (!journal) return 0;  // refused with a status: fine
  auto delivered = (*journal)->delivered();
  if (delivered) fuzz::check(delivered->size() <= kWindow, "window larger than its bound");
  auto pending = (*journal)->pending();
  if (pending) {
    for (const JournalRecord& r : *pending) {
      if (r.event == nullptr) (void)flows::decodeEventRecord(r.stored_event);
    }
    // Every record read may be acknowledged (its row, if it has one, found).
    std::vector<JournalAck> read;
    for (const JournalRecord& r : *pending) read.push_back({r.seq, r.target, r.event_id, true});
    (void)(*journal)->commit({}, read);
  }
  (void)(*journal)->maxSeq();
  // The journal goes on being written after a recovery.
  const std::vector<JournalRecord> more = {record(100, "a", 9)};
  std::vector<JournalAck> acks;
  for (uint64_t k = 0; k < 2 * kWindow; ++k) acks.push_back({0, Symbol::intern("a"), k, false});
  (void)(*journal)->commit(more, acks);
  delivered = (*journal)->delivered();
  if (delivered) fuzz::check(delivered->size() <= kWindow, "window larger than its bound");
  return 0;
}
