#pragma once

// An append-only file of records for the join's spilled window (P4's
// "write to disk"): records are buffered by append() and reach the file only
// when commit() has written all of them; readAll() returns the committed
// records, in order, and detects a torn or corrupted one.
//
// On disk, each record is
//   u32 payload length (little endian) | u32 CRC-32 of the payload | payload
// and the file holds nothing else. A failed write (a full disk, an I/O error)
// leaves the committed records intact: the next commit() overwrites the torn
// tail, and readAll() never reads past the committed length.
//
// Thread safety: none; one join worker owns each store. Not copyable.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "bus/core/status.h"

namespace cepbus::plugins::join {

// CRC-32 (IEEE 802.3, the polynomial of zlib and PNG).
uint32_t crc32(std::string_view data);

class SpillStore {
 public:
  // Opens `path` for reading and writing, truncating it. With
  // `remove_on_close` the file is deleted when the store is destroyed.
  static Result<std::unique_ptr<SpillStore>> open(const std::string& path, bool remove_on_close);
  ~SpillStore();
  SpillStore(const SpillStore&) = delete;
  SpillStore& operator=(const SpillStore&) = delete;

  // Buffers one record; nothing reaches the file before commit().
  void append(std::string_view payload);
  // Writes every buffered record. On failure (IoError naming the file and the
  // system's reason) the buffered records are dropped and the committed ones
  // stay as they were.
  Status commit();
  // Calls `fn` with each committed record in order; stops at the first error
  // `fn` returns. IoError for a read failure, a torn or corrupted record.
  Status readAll(const std::function<Status(std::string_view)>& fn) const;
  // Drops the records buffered since the last commit().
  void discardPending() {
    buffer_.clear();
    pending_records_ = 0;
  }
  // Forgets every record (the file is truncated to nothing).
  void clear();

  size_t committedRecords() const { return records_; }
  uint64_t committedBytes() const { return committed_; }
  size_t pendingRecords() const { return pending_records_; }
  const std::string& path() const { return path_; }

 private:
  SpillStore(int fd, std::string path, bool remove_on_close)
      : fd_(fd), path_(std::move(path)), remove_on_close_(remove_on_close) {}

  int fd_;
  std::string path_;
  bool remove_on_close_;
  uint64_t committed_ = 0;  // bytes of whole, written records
  size_t records_ = 0;
  std::string buffer_;  // encoded records not yet written
  size_t pending_records_ = 0;
};

}  // namespace cepbus::plugins::join
