// The scale-out walk-through as a user runs it: examples/cluster/demo.sh
// with this build's cepbus. The script itself compares the cluster's
// composites with `cepbus match` offline; this test checks that it says so
// and that OUTDIR holds what the docs promise.

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "tests/integration/child_process.h"

namespace cepbus::testing {
namespace {

namespace fs = std::filesystem;

TEST(ClusterDemoTest, TheWalkThroughMatchesCepbusMatchOfflineAfterKills) {
  const fs::path out = fs::temp_directory_path() / ("cepbus-demo-" + std::to_string(::getpid()));
  fs::remove_all(out);
  fs::create_directories(out);
  setenv("CEPBUS", CEPBUS_BINARY, 1);
  ChildProcess demo({"/bin/bash", std::string(CEPBUS_TEST_SOURCE_DIR) + "/examples/cluster/demo.sh",
                     (out / "result").string()},
                    out);
  const int code = demo.wait(std::chrono::minutes(10));
  ASSERT_EQ(code, 0) << demo.out() << demo.err();
  for (const char* file : {"events.jsonl", "query.txt", "composites.jsonl", "summary.json"}) {
    EXPECT_TRUE(fs::exists(out / "result" / file)) << file;
  }
  std::ifstream in(out / "result" / "summary.json");
  const nlohmann::json summary = nlohmann::json::parse(in, nullptr, false);
  ASSERT_TRUE(summary.is_object());
  EXPECT_TRUE(summary.value("equal", false));
  EXPECT_EQ(summary.value("nodes", 0), 3);
  EXPECT_EQ(summary["kills"].size(), 2u);
  EXPECT_GT(summary.value("composites_received", 0), 100);
  EXPECT_EQ(summary.value("composites_received", 0), summary.value("offline_matches", -1));
  std::cout << summary.dump() << "\n";
  fs::remove_all(out);
}

}  // namespace
}  // namespace cepbus::testing
