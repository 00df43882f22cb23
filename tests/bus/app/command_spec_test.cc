#include "bus/app/command_spec.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace cepbus::app {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;

CommandSpec spec() {
  CommandSpec s;
  s.name = "demo";
  s.usage = "cepbus demo [OPTIONS] FILE";
  s.summary = "do a demo";
  s.description = "Verbatim\n  text.\n";
  s.options = {{"--rate", "N", "how fast"}, {"--quiet", "", "say less"}};
  s.examples = {{"cepbus demo x", "", "demo x"}};
  s.environment = {{"DEMO_VAR", "", "what it holds"}};
  s.files = {{"FILE", "", "the file"}};
  return s;
}

TEST(CommandSpecTest, ParsesOptionsSwitchesAndPositionals) {
  const std::vector<std::string> args = {"a", "--rate", "3", "-", "--quiet", "--rate=4"};
  auto parsed = spec().parse(args);
  ASSERT_TRUE(parsed.isOk()) << parsed.status().message();
  EXPECT_THAT(parsed->positional, ElementsAre("a", "-"));  // '-' is a value, not a flag
  EXPECT_THAT(parsed->options,
              ElementsAre(Pair("--rate", "3"), Pair("--quiet", ""), Pair("--rate", "4")));
  EXPECT_TRUE(parsed->has("--quiet"));
  EXPECT_EQ(parsed->value("--rate"), "4");  // the last one given
  EXPECT_THAT(parsed->values("--rate"), ElementsAre("3", "4"));
  EXPECT_EQ(parsed->value("--absent", "fallback"), "fallback");
}

// Every command words a bad flag the same way.
TEST(CommandSpecTest, RefusesWhatItDoesNotListInOneWording) {
  auto message = [](std::vector<std::string> args) {
    return spec().parse(args).status().message();
  };
  EXPECT_EQ(message({"--bogus"}), "unknown argument '--bogus'");
  EXPECT_EQ(message({"-x"}), "unknown argument '-x'");
  EXPECT_EQ(message({"--quiet=yes"}), "unknown argument '--quiet=yes'");
  EXPECT_EQ(message({"--rate"}), "--rate needs a value");
}

// The layout cmake/HelpToMan.cmake turns into man sections.
TEST(CommandSpecTest, HelpHasOneUsageLineAndTheManSections) {
  const std::string help = spec().help();
  EXPECT_TRUE(
      help.starts_with("usage: cepbus demo [OPTIONS] FILE\n\ndo a demo\n\nVerbatim\n"
                       "  text.\n"))
      << help;
  EXPECT_THAT(help,
              HasSubstr("\nOptions:\n  --rate N\n      how fast\n  --quiet\n      say less\n"));
  EXPECT_THAT(help, HasSubstr("\nExamples:\n  demo x:\n    cepbus demo x\n"));
  EXPECT_THAT(help, HasSubstr("\nEnvironment:\n  DEMO_VAR\n      what it holds\n"));
  EXPECT_THAT(help, HasSubstr("\nFiles:\n  FILE\n      the file\n"));
  EXPECT_THAT(help, HasSubstr("\nExit status:\n  0 success, 1 failure, 2 bad command line.\n"));
  size_t usages = 0;
  for (size_t at = help.find("usage:"); at != std::string::npos; at = help.find("usage:", at + 1)) {
    ++usages;
  }
  EXPECT_EQ(usages, 1u);
}

TEST(CommandSpecTest, WrapsAtEightyColumnsAndKeepsIndentedLines) {
  const std::string words(30, 'w');
  const std::string wrapped = wrapText(words + " " + words + " " + words + "\n  keep  as is\n", 4);
  EXPECT_EQ(wrapped, "    " + words + " " + words + "\n    " + words + "\n      keep  as is\n");
  for (size_t start = 0, end; (end = wrapped.find('\n', start)) != std::string::npos;
       start = end + 1) {
    EXPECT_LE(end - start, 80u);
  }
}

}  // namespace
}  // namespace cepbus::app
