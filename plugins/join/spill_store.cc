#include "plugins/join/spill_store.h"

#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>

namespace cepbus::plugins::join {
namespace {

constexpr std::array<uint32_t, 256> makeCrcTable() {
  std::array<uint32_t, 256> t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
    t[i] = c;
  }
  return t;
}
constexpr std::array<uint32_t, 256> kCrcTable = makeCrcTable();

void putU32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

uint32_t getU32(const char* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i)
    v |= static_cast<uint32_t>(static_cast<unsigned char>(p[i])) << (8 * i);
  return v;
}

std::string reason() { return std::strerror(errno); }

}  // namespace

uint32_t crc32(std::string_view data) {
  uint32_t c = 0xffffffffu;
  for (char ch : data) c = kCrcTable[(c ^ static_cast<unsigned char>(ch)) & 0xff] ^ (c >> 8);
  return c ^ 0xffffffffu;
}

Result<std::unique_ptr<SpillStore>> SpillStore::open(const std::string& path,
                                                     bool remove_on_close) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return Status::ioError("spill file '" + path + "': cannot open: " + reason());
  return std::unique_ptr<SpillStore>(new SpillStore(fd, path, remove_on_close));
}

SpillStore::~SpillStore() {
  ::close(fd_);
  if (remove_on_close_) ::unlink(path_.c_str());
}

void SpillStore::append(std::string_view payload) {
  putU32(buffer_, static_cast<uint32_t>(payload.size()));
  putU32(buffer_, crc32(payload));
  buffer_.append(payload);
  ++pending_records_;
}

Status SpillStore::commit() {
  size_t done = 0;
  Status status;
  while (done < buffer_.size()) {
    const ssize_t n = ::pwrite(fd_, buffer_.data() + done, buffer_.size() - done,
                               static_cast<off_t>(committed_ + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      status = Status::ioError("spill file '" + path_ + "': write failed: " +
                               (n < 0 ? reason() : std::string("no progress")));
      break;
    }
    done += static_cast<size_t>(n);
  }
  if (status) {
    committed_ += buffer_.size();
    records_ += pending_records_;
  }
  buffer_.clear();
  pending_records_ = 0;
  return status;
}

Status SpillStore::readAll(const std::function<Status(std::string_view)>& fn) const {
  std::string data(committed_, '\0');
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n =
        ::pread(fd_, data.data() + done, data.size() - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::ioError("spill file '" + path_ + "': read failed: " + reason());
    if (n == 0) {
      return Status::ioError("spill file '" + path_ + "': ends at byte " + std::to_string(done) +
                             ", expected " + std::to_string(data.size()));
    }
    done += static_cast<size_t>(n);
  }
  size_t pos = 0;
  size_t record = 0;
  while (pos < data.size()) {
    ++record;
    if (data.size() - pos < 8) {
      return Status::ioError("spill file '" + path_ + "': record " + std::to_string(record) +
                             " is torn (truncated header)");
    }
    const uint32_t len = getU32(data.data() + pos);
    const uint32_t crc = getU32(data.data() + pos + 4);
    if (data.size() - pos - 8 < len) {
      return Status::ioError("spill file '" + path_ + "': record " + std::to_string(record) +
                             " is torn (payload of " + std::to_string(len) + " bytes cut short)");
    }
    const std::string_view payload(data.data() + pos + 8, len);
    if (crc32(payload) != crc) {
      return Status::ioError("spill file '" + path_ + "': record " + std::to_string(record) +
                             " is corrupted (CRC mismatch)");
    }
    if (Status s = fn(payload); !s) return s;
    pos += 8 + len;
  }
  return Status::ok();
}

void SpillStore::clear() {
  // A failed truncate (e.g. on a device) is harmless: readAll() stops at the
  // committed length and the next commit() overwrites from offset 0.
  if (::ftruncate(fd_, 0) != 0) errno = 0;
  committed_ = 0;
  records_ = 0;
  buffer_.clear();
  pending_records_ = 0;
}

}  // namespace cepbus::plugins::join
