// The time matrix CSV: both forms, site lookup, and every malformed matrix
// refused with file:line:column.

#include "plugins/join/time_matrix.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace cepbus::plugins::join {
namespace {

using ::testing::HasSubstr;

std::string error(const std::string& csv) {
  auto m = TimeMatrix::parse(csv, "t.csv");
  EXPECT_FALSE(m) << csv;
  if (m) return "";
  EXPECT_EQ(m.status().code(), Status::Code::kInvalidArgument);
  return m.status().message();
}

TEST(TimeMatrix, ReadsTheLabelledForm) {
  auto m = TimeMatrix::parse(
      "# travel minutes\nsite, A, B, C\nA,0,30,45\nB,30,0,20.5\n\nC,45,20.5,0\n", "t.csv");
  ASSERT_TRUE(m) << m.status().message();
  EXPECT_EQ(m->size(), 3u);
  EXPECT_EQ(m->at(0, 2), 45);
  EXPECT_EQ(m->at(2, 1), 20.5);
  EXPECT_EQ(m->maxTime(), 45);
  EXPECT_EQ(m->indexOf(Value("B")), 1);
  EXPECT_EQ(m->indexOf(Value("D")), -1);
  EXPECT_EQ(m->indexOf(Value(int64_t{1})), -1);  // labels are not numbers
}

TEST(TimeMatrix, ReadsThePlainFormWithIntegerSites) {
  auto m = TimeMatrix::parse("0,7\r\n7,0\r\n", "t.csv");
  ASSERT_TRUE(m) << m.status().message();
  EXPECT_EQ(m->size(), 2u);
  EXPECT_EQ(m->indexOf(Value(int64_t{1})), 1);
  EXPECT_EQ(m->indexOf(Value("1")), 1);
  EXPECT_EQ(m->indexOf(Value(int64_t{2})), -1);
  EXPECT_EQ(m->indexOf(Value(int64_t{-1})), -1);
  EXPECT_EQ(m->indexOf(Value(1.0)), -1);
}

TEST(TimeMatrix, RefusesMalformedMatricesNamingTheCell) {
  EXPECT_THAT(error(""), HasSubstr("empty"));
  EXPECT_THAT(error("0,1\n1,0\n2,2\n"), HasSubstr("t.csv:3:1: not square: 2 columns but 3 rows"));
  EXPECT_THAT(error("0,1,2\n1,0\n2,2,0\n"),
              HasSubstr("t.csv:2:3: not square: expected 3 values, found 2"));
  EXPECT_THAT(error("0,1\n1,0,4\n"), HasSubstr("t.csv:2:5: not square"));
  EXPECT_THAT(error("0,1\n2,0\n"), HasSubstr("t.csv:2:1: not symmetric: time[1][0] = 2"));
  EXPECT_THAT(error("0,-1\n-1,0\n"), HasSubstr("t.csv:1:3: negative travel time -1"));
  EXPECT_THAT(error("0,x\nx,0\n"), HasSubstr("t.csv:1:3: 'x' is not a number"));
  EXPECT_THAT(error("0,1\n1,\n"), HasSubstr("t.csv:2:3: '' is not a number"));
  EXPECT_THAT(error("0,inf\ninf,0\n"), HasSubstr("not a number"));
  EXPECT_THAT(error("s,A,B\nB,0,1\nA,1,0\n"), HasSubstr("t.csv:2:1: row label 'B', expected 'A'"));
  EXPECT_THAT(error("s,A,A\nA,0,1\nA,1,0\n"), HasSubstr("t.csv:1:5: site 'A' labels two columns"));
  EXPECT_THAT(error("s,A,\nA,0,1\n,1,0\n"), HasSubstr("t.csv:1:5: empty site label"));
}

TEST(TimeMatrix, LoadNamesAMissingFile) {
  auto m = TimeMatrix::load("/nonexistent/t.csv");
  ASSERT_FALSE(m);
  EXPECT_THAT(m.status().message(), HasSubstr("/nonexistent/t.csv"));
}

}  // namespace
}  // namespace cepbus::plugins::join
