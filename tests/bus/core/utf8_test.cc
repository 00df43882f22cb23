#include "bus/core/utf8.h"

#include <gtest/gtest.h>

#include <string>

namespace cepbus {
namespace {

TEST(Utf8Test, AcceptsWellFormedText) {
  EXPECT_TRUE(isValidUtf8(""));
  EXPECT_TRUE(isValidUtf8("IBM"));
  EXPECT_TRUE(isValidUtf8("B\xc3\xb6rse \xe2\x82\xac \xf0\x9f\x98\x80"));
  EXPECT_TRUE(isValidUtf8(std::string("a\0b", 3)));
  EXPECT_TRUE(isValidUtf8("\xf4\x8f\xbf\xbf"));  // U+10FFFF
}

TEST(Utf8Test, RefusesMalformedText) {
  EXPECT_FALSE(isValidUtf8("\xff"));
  EXPECT_FALSE(isValidUtf8("\x80"));              // continuation without a lead
  EXPECT_FALSE(isValidUtf8("\xc3"));              // truncated
  EXPECT_FALSE(isValidUtf8("\xe2\x82"));          // truncated
  EXPECT_FALSE(isValidUtf8("\xc3("));             // bad continuation
  EXPECT_FALSE(isValidUtf8("\xc0\xaf"));          // overlong '/'
  EXPECT_FALSE(isValidUtf8("\xe0\x80\xaf"));      // overlong
  EXPECT_FALSE(isValidUtf8("\xed\xa0\x80"));      // surrogate U+D800
  EXPECT_FALSE(isValidUtf8("\xf4\x90\x80\x80"));  // above U+10FFFF
  EXPECT_FALSE(isValidUtf8("\xf8\x88\x80\x80\x80"));
}

}  // namespace
}  // namespace cepbus
