#include "bus/core/symbol.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <thread>
#include <vector>

namespace cepbus {
namespace {

TEST(SymbolTest, InterningIsIdempotentAndDistinct) {
  Symbol a = Symbol::intern("price");
  Symbol b = Symbol::intern(std::string("pri") + "ce");
  Symbol c = Symbol::intern("symbol");
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  EXPECT_EQ(a.name(), "price");
  EXPECT_EQ(c.name(), "symbol");
}

TEST(SymbolTest, EmptySymbolIsIdZero) {
  EXPECT_TRUE(Symbol().empty());
  EXPECT_EQ(Symbol().name(), "");
  EXPECT_EQ(Symbol::intern(""), Symbol());
}

TEST(SymbolTest, FindDoesNotCreate) {
  EXPECT_TRUE(Symbol::find("never-interned-name-xyz").empty());
  Symbol s = Symbol::intern("now-interned");
  EXPECT_EQ(Symbol::find("now-interned"), s);
}

TEST(SymbolTest, ConcurrentInterningAgreesOnIds) {
  constexpr int kThreads = 4;
  constexpr int kNames = 2000;
  std::vector<std::vector<uint32_t>> ids(kThreads, std::vector<uint32_t>(kNames));
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([t, &ids] {
      for (int i = 0; i < kNames; ++i) {
        Symbol s = Symbol::intern("concurrent-" + std::to_string(i));
        ids[t][i] = s.id();
        ASSERT_EQ(s.name(), "concurrent-" + std::to_string(i));
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 1; t < kThreads; ++t) EXPECT_EQ(ids[t], ids[0]);
  EXPECT_EQ(std::set<uint32_t>(ids[0].begin(), ids[0].end()).size(), size_t{kNames});
}

}  // namespace
}  // namespace cepbus
