#pragma once

// What a descriptor parse reports, for tests of the descriptor parser and of
// the services' element parsers: the parse of `text` (named "t.xml") must
// fail, and each error comes back as "t.xml:LINE: message", in report order.

#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "bus/host/descriptor/element_parser.h"
#include "bus/host/descriptor/parser.h"

namespace cepbus::testing {

inline std::vector<std::string> descriptorErrors(
    std::string_view text, const descriptor::ElementParsers* elements = nullptr) {
  descriptor::ParseReport report;
  auto result = descriptor::parseDescriptorString(text, "t.xml", &report, {}, elements);
  EXPECT_FALSE(result.isOk());
  EXPECT_EQ(result.status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(result.status().message(), report.toString());
  std::vector<std::string> out;
  for (const descriptor::DescriptorError& e : report.errors) {
    EXPECT_EQ(e.file, "t.xml");
    out.push_back(e.toString());
  }
  return out;
}

// The elements `parser` reads, alone, for a test of one service's element.
template <typename Parser>
const descriptor::ElementParsers& onlyElement() {
  static const descriptor::ElementParsers parsers = [] {
    descriptor::ElementParsers made;
    EXPECT_TRUE(made.add(std::make_unique<Parser>()).isOk());
    return made;
  }();
  return parsers;
}

// A parse with `Parser`'s element alone, as descriptor::parseDescriptorString.
template <typename Parser>
Result<descriptor::Descriptor> parseWithElement(std::string_view text,
                                                std::string_view name = "t.xml",
                                                descriptor::ParseReport* report = nullptr,
                                                const std::filesystem::path& base_dir = {}) {
  return descriptor::parseDescriptorString(text, name, report, base_dir, &onlyElement<Parser>());
}

// descriptorErrors() with `Parser`'s element alone.
template <typename Parser>
std::vector<std::string> elementErrors(std::string_view text) {
  return descriptorErrors(text, &onlyElement<Parser>());
}

}  // namespace cepbus::testing
