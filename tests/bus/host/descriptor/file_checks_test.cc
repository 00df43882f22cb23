#include "bus/host/descriptor/file_checks.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>

namespace cepbus::descriptor {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Optional;

class FileChecksTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("file-checks-" + std::to_string(std::random_device()()));
    fs::create_directories(dir_);
    std::ofstream(dir_ / "there.jsonl") << "{}\n";
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(FileChecksTest, AFileToReadMustExistAndBeNoFolder) {
  EXPECT_EQ(unreadableFile(dir_ / "there.jsonl"), std::nullopt);
  EXPECT_THAT(unreadableFile(dir_ / "missing.jsonl"),
              Optional(HasSubstr("cannot read " + (dir_ / "missing.jsonl").string() +
                                 ": No such file or directory")));
  EXPECT_THAT(unreadableFile(dir_), Optional(HasSubstr("it is a folder")));
}

// A journal or a sink's output: made in its folder, which must be there.
TEST_F(FileChecksTest, AFileToWriteNeedsItsFolder) {
  EXPECT_EQ(unwritableFile(dir_ / "there.jsonl"), std::nullopt);
  EXPECT_EQ(unwritableFile(dir_ / "new.db"), std::nullopt);
  EXPECT_THAT(unwritableFile(dir_ / "no-such-folder" / "journal.db"),
              Optional(HasSubstr("its folder " + (dir_ / "no-such-folder").string() +
                                 ": No such file or directory")));
  EXPECT_THAT(unwritableFile(dir_ / "there.jsonl" / "journal.db"),
              Optional(HasSubstr("is not a folder")));
  EXPECT_THAT(unwritableFile(dir_), Optional(HasSubstr("it is a folder")));
}

}  // namespace
}  // namespace cepbus::descriptor
