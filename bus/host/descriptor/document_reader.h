#pragma once

// DocumentReader: the state of one descriptor parse that every Element of it
// shares — the name of the file, the folder relative paths resolve against,
// and the errors found so far. Private to bus/host/descriptor/.
//
// Thread safety: one parse, one thread.

#include <algorithm>
#include <filesystem>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "bus/host/descriptor/descriptor.h"

namespace cepbus::descriptor {

class ElementParsers;

class DocumentReader {
 public:
  DocumentReader(std::string_view file, std::filesystem::path base_dir,
                 const ElementParsers* elements)
      : file_(file), base_dir_(std::move(base_dir)), elements_(elements) {}

  const std::string& file() const { return file_; }
  const std::filesystem::path& baseDir() const { return base_dir_; }
  // The services' element parsers; nullptr when none are registered.
  const ElementParsers* elements() const { return elements_; }

  void report(int line, std::string message) {
    errors_.push_back(DescriptorError{file_, line, std::move(message)});
  }
  size_t errorCount() const { return errors_.size(); }
  // Every error in line order (stable, so errors of one line keep the order
  // they were found in).
  std::vector<DescriptorError> takeErrors() {
    std::stable_sort(
        errors_.begin(), errors_.end(),
        [](const DescriptorError& a, const DescriptorError& b) { return a.line < b.line; });
    return std::move(errors_);
  }

  std::filesystem::path resolve(std::string_view path) const {
    std::filesystem::path p(path);
    if (p.is_absolute() || base_dir_.empty()) return p;
    return base_dir_ / p;
  }

 private:
  const std::string file_;
  const std::filesystem::path base_dir_;
  const ElementParsers* const elements_;
  std::vector<DescriptorError> errors_;
};

}  // namespace cepbus::descriptor
