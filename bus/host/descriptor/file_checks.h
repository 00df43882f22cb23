#pragma once

// Whether a file a descriptor names can be opened the way a run will open
// it: checked when a bus is built from the descriptor, so that `cepbus
// validate` answers "OK" only for a descriptor that will start, with the
// descriptor line of each file that will not open. Whoever opens the file
// later still reports its own failure (a file may change in between).
//
// Thread safety: pure functions over the file system.

#include <filesystem>
#include <optional>
#include <string>

namespace cepbus::descriptor {

// Why `path` cannot be read as a file ("cannot read /x/y.jsonl: No such file
// or directory", "... is a folder"), or nullopt when it can.
std::optional<std::string> unreadableFile(const std::filesystem::path& path);

// Why `path` cannot be written — created in its folder when it does not
// exist, opened for writing when it does — or nullopt when it can.
std::optional<std::string> unwritableFile(const std::filesystem::path& path);

}  // namespace cepbus::descriptor
