// The spill file format: records come back in order, torn or corrupted
// records are detected, and a full disk (/dev/full) fails a commit without
// touching what was committed.

#include "plugins/join/spill_store.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace cepbus::plugins::join {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

std::vector<std::string> readBack(const SpillStore& s, Status* status = nullptr) {
  std::vector<std::string> out;
  Status st = s.readAll([&](std::string_view p) {
    out.emplace_back(p);
    return Status::ok();
  });
  if (status != nullptr)
    *status = st;
  else
    EXPECT_TRUE(st) << st.message();
  return out;
}

class SpillStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = (fs::temp_directory_path() / ("cepbus-spill-" + std::to_string(::getpid()))).string();
  }
  void TearDown() override { fs::remove(path_); }
  std::string path_;
};

TEST(Crc32, MatchesTheStandardCheckValue) {
  EXPECT_EQ(crc32("123456789"), 0xCBF43926u);
  EXPECT_EQ(crc32(""), 0u);
}

TEST_F(SpillStoreTest, CommittedRecordsComeBackInOrder) {
  auto s = SpillStore::open(path_, false);
  ASSERT_TRUE(s) << s.status().message();
  (*s)->append("one");
  (*s)->append(std::string("\0two\xff", 5));
  EXPECT_TRUE(readBack(**s).empty());  // nothing before commit
  ASSERT_TRUE((*s)->commit());
  (*s)->append("");
  (*s)->append("four");
  ASSERT_TRUE((*s)->commit());
  EXPECT_EQ((*s)->committedRecords(), 4u);
  EXPECT_EQ(readBack(**s),
            (std::vector<std::string>{"one", std::string("\0two\xff", 5), "", "four"}));
  EXPECT_EQ(fs::file_size(path_), (*s)->committedBytes());
  (*s)->clear();
  EXPECT_TRUE(readBack(**s).empty());
  (*s)->append("again");
  ASSERT_TRUE((*s)->commit());
  EXPECT_EQ(readBack(**s), std::vector<std::string>{"again"});
}

TEST_F(SpillStoreTest, DetectsTornAndCorruptedRecords) {
  auto s = SpillStore::open(path_, false);
  ASSERT_TRUE(s);
  (*s)->append("first record");
  (*s)->append("second record");
  ASSERT_TRUE((*s)->commit());
  {
    // Flip one payload byte of the second record.
    const int fd = ::open(path_.c_str(), O_WRONLY);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::pwrite(fd, "X", 1, 8 + 12 + 8 + 3), 1);
    ::close(fd);
  }
  Status st;
  auto got = readBack(**s, &st);
  EXPECT_THAT(st.message(), HasSubstr("record 2 is corrupted"));
  EXPECT_EQ(got, std::vector<std::string>{"first record"});
  fs::resize_file(path_, 8 + 12 + 8 + 5);
  got = readBack(**s, &st);
  EXPECT_EQ(st.code(), Status::Code::kIoError);
  EXPECT_THAT(st.message(), HasSubstr("ends at byte"));
}

TEST_F(SpillStoreTest, RemovesItsFileWhenAsked) {
  {
    auto s = SpillStore::open(path_, true);
    ASSERT_TRUE(s);
    EXPECT_TRUE(fs::exists(path_));
  }
  EXPECT_FALSE(fs::exists(path_));
}

TEST(SpillStore, AFullDiskFailsTheCommitAndKeepsNothingHalfWritten) {
  auto s = SpillStore::open("/dev/full", false);
  ASSERT_TRUE(s) << s.status().message();
  (*s)->append("payload");
  Status st = (*s)->commit();
  EXPECT_EQ(st.code(), Status::Code::kIoError);
  EXPECT_THAT(st.message(), HasSubstr("No space left on device"));
  EXPECT_EQ((*s)->committedRecords(), 0u);
  EXPECT_EQ((*s)->pendingRecords(), 0u);
  EXPECT_TRUE(readBack(**s).empty());
}

TEST(SpillStore, OpenNamesTheFileItCannotCreate) {
  auto s = SpillStore::open("/nonexistent-dir/x.spill", true);
  ASSERT_FALSE(s);
  EXPECT_THAT(s.status().message(), HasSubstr("/nonexistent-dir/x.spill"));
}

}  // namespace
}  // namespace cepbus::plugins::join
