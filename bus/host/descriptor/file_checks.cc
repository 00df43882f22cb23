#include "bus/host/descriptor/file_checks.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <system_error>

namespace cepbus::descriptor {
namespace fs = std::filesystem;

namespace {

std::string failure(const char* what, const fs::path& path, const std::string& why) {
  return std::string("cannot ") + what + " " + path.string() + ": " + why;
}

}  // namespace

std::optional<std::string> unreadableFile(const fs::path& path) {
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  if (ec) return failure("read", path, ec.message());
  if (fs::is_directory(status)) return failure("read", path, "it is a folder");
  if (::access(path.c_str(), R_OK) != 0) return failure("read", path, std::strerror(errno));
  return std::nullopt;
}

std::optional<std::string> unwritableFile(const fs::path& path) {
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  if (fs::exists(status)) {
    if (fs::is_directory(status)) return failure("write", path, "it is a folder");
    if (::access(path.c_str(), R_OK | W_OK) != 0) {
      return failure("write", path, std::strerror(errno));
    }
    return std::nullopt;
  }
  const fs::path folder = path.has_parent_path() ? path.parent_path() : fs::path(".");
  const fs::file_status folder_status = fs::status(folder, ec);
  if (ec) return failure("write", path, "its folder " + folder.string() + ": " + ec.message());
  if (!fs::is_directory(folder_status)) {
    return failure("write", path, folder.string() + " is not a folder");
  }
  if (::access(folder.c_str(), W_OK | X_OK) != 0) {
    return failure("write", path, "its folder " + folder.string() + ": " + std::strerror(errno));
  }
  return std::nullopt;
}

}  // namespace cepbus::descriptor
