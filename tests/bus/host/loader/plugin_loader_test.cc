#include "bus/host/loader/plugin_loader.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <thread>

#include "bus/core/pattern/parser.h"
#include "bus/core/plugin/version.h"

namespace cepbus::plugin {
namespace {

DetectorOptions options(std::map<std::string, std::string, std::less<>> values) {
  return DetectorOptions(std::move(values));
}

using ::testing::HasSubstr;

class CountingSink : public MatchSink {
 public:
  void onMatch(const Match& match) override {
    ++count;
    last_ts = match.ts(0);
  }
  int count = 0;
  Timestamp last_ts = -1;
};

pattern::Query anyQuery() { return *pattern::parseQuery("PATTERN SEQ(A a, B b)"); }

EventPtr event(const char* type, Timestamp ts) { return EventBuilder(type).at(ts).build(); }

PluginLoader testLoader() { return PluginLoader({"/nonexistent/dir", TEST_PLUGIN_DIR}); }

TEST(PluginLoaderTest, LoadsFromTheFirstSearchPathThatHasTheFile) {
  PluginLoader loader = testLoader();
  auto plugin = loader.load("good");
  ASSERT_TRUE(plugin.isOk()) << plugin.status().message();
  EXPECT_EQ((*plugin)->name(), "testgood");
  EXPECT_EQ((*plugin)->version(), "2.1.0");
  EXPECT_EQ((*plugin)->buildTag(), hostBuildTag());
  EXPECT_EQ((*plugin)->path(), std::string(TEST_PLUGIN_DIR) + "/libcepbus_plugin_good.so");
  EXPECT_EQ((*plugin)->engines(), (std::vector<std::string>{"echo", "throwing_factory"}));
  // Loading again returns the same plugin, by name or by path.
  auto again = loader.load("good");
  ASSERT_TRUE(again.isOk());
  EXPECT_EQ(again->get(), plugin->get());
  auto by_path = loader.load((*plugin)->path());
  ASSERT_TRUE(by_path.isOk());
  EXPECT_EQ(by_path->get(), plugin->get());
}

TEST(PluginLoaderTest, HostBuildTagNamesCompilerLibraryAndVersion) {
  const std::string tag = hostBuildTag();
  EXPECT_THAT(tag, HasSubstr("cepbus " CEPBUS_VERSION));
  EXPECT_THAT(tag, HasSubstr("libstdc++"));
  EXPECT_THAT(tag, HasSubstr("gcc"));
}

TEST(PluginLoaderTest, MissingFileListsTheSearchPath) {
  PluginLoader loader = testLoader();
  auto plugin = loader.load("nosuchengine");
  ASSERT_FALSE(plugin.isOk());
  EXPECT_EQ(plugin.status().code(), Status::Code::kNotFound);
  EXPECT_THAT(plugin.status().message(), HasSubstr("libcepbus_plugin_nosuchengine.so"));
  EXPECT_THAT(plugin.status().message(), HasSubstr("/nonexistent/dir"));
  EXPECT_THAT(plugin.status().message(), HasSubstr(TEST_PLUGIN_DIR));
  auto by_path = loader.load("/nonexistent/dir/libx.so");
  ASSERT_FALSE(by_path.isOk());
  EXPECT_EQ(by_path.status().code(), Status::Code::kNotFound);
}

TEST(PluginLoaderTest, WrongAbiVersionIsRejectedBeforeRegistration) {
  auto plugin = testLoader().load("badabi");
  ASSERT_FALSE(plugin.isOk());
  EXPECT_THAT(plugin.status().message(), HasSubstr("ABI version 999"));
  EXPECT_THAT(plugin.status().message(), HasSubstr("libcepbus_plugin_badabi.so"));
}

TEST(PluginLoaderTest, ForeignBuildTagIsRejected) {
  auto plugin = testLoader().load("badtag");
  ASSERT_FALSE(plugin.isOk());
  EXPECT_THAT(plugin.status().message(), HasSubstr("msvc 19.0"));
  EXPECT_THAT(plugin.status().message(), HasSubstr(hostBuildTag()));
  // What a plugin author can act on: which part differs, and what to do.
  EXPECT_THAT(plugin.status().message(),
              HasSubstr("compiler differs: the plugin has 'msvc 19.0', the host"));
  EXPECT_THAT(plugin.status().message(),
              HasSubstr("rebuild it against the cepbus " CEPBUS_VERSION " SDK"));
}

TEST(PluginLoaderTest, TagMismatchNamesTheFirstPartThatDiffers) {
  const std::string host = hostBuildTag();
  const std::string other_version = host.substr(0, host.rfind("cepbus ")) + "cepbus 9.9.9";
  EXPECT_THAT(explainTagMismatch(other_version),
              HasSubstr("cepbus version differs: the plugin has 'cepbus 9.9.9', the host 'cepbus " +
                        std::string(CEPBUS_VERSION) + "'"));
  const std::string msan =
      host.substr(0, host.find("; sanitizers:")) + "; sanitizers: msan; cepbus " CEPBUS_VERSION;
  EXPECT_THAT(explainTagMismatch(msan), HasSubstr("sanitizers differs"));
}

TEST(PluginLoaderTest, EnginesDescribeTheirOptions) {
  PluginLoader loader = testLoader();
  auto plugin = loader.load("good");
  ASSERT_TRUE(plugin.isOk()) << plugin.status().toString();
  auto options = (*plugin)->engineOptions("echo");
  ASSERT_EQ(options.size(), 1u);
  EXPECT_EQ(options[0].name, "mode");
  EXPECT_TRUE((*plugin)->engineOptions("throwing_factory").empty());
  EXPECT_TRUE((*plugin)->engineOptions("nosuchengine").empty());
}

TEST(PluginLoaderTest, MissingEntryPointsAreNamed) {
  auto no_info = testLoader().load("noinfo");
  ASSERT_FALSE(no_info.isOk());
  EXPECT_THAT(no_info.status().message(), HasSubstr("cepbus_plugin_info"));
  EXPECT_THAT(no_info.status().message(), HasSubstr("not a cepbus plugin"));
  auto no_register = testLoader().load("noregister");
  ASSERT_FALSE(no_register.isOk());
  EXPECT_THAT(no_register.status().message(), HasSubstr("cepbus_plugin_register"));
}

TEST(PluginLoaderTest, FailingRegistrationReportsThePluginsReason) {
  auto plugin = testLoader().load("registerfails");
  ASSERT_FALSE(plugin.isOk());
  EXPECT_THAT(plugin.status().message(), HasSubstr("registration failed"));
  EXPECT_THAT(plugin.status().message(), HasSubstr("no licence for this engine"));
  auto duplicate = testLoader().load("duplicate");
  ASSERT_FALSE(duplicate.isOk());
  EXPECT_THAT(duplicate.status().message(), HasSubstr("'echo' twice"));
}

TEST(PluginLoaderTest, TwoPluginsCannotProvideTheSameEngine) {
  PluginLoader loader = testLoader();
  ASSERT_TRUE(loader.load("good").isOk());
  auto other = loader.load("otherecho");
  ASSERT_FALSE(other.isOk());
  EXPECT_EQ(other.status().code(), Status::Code::kAlreadyExists);
  EXPECT_THAT(other.status().message(), HasSubstr("libcepbus_plugin_good.so"));
}

TEST(PluginLoaderTest, CreatesGuardedDetectorsAndRejectsUnknownEnginesAndOptions) {
  auto plugin = testLoader().load("good");
  ASSERT_TRUE(plugin.isOk());
  CountingSink sink;
  auto unknown = (*plugin)->createDetector("nfa", anyQuery(), {}, sink);
  ASSERT_FALSE(unknown.isOk());
  EXPECT_THAT(unknown.status().message(), HasSubstr("echo, throwing_factory"));
  auto bad_option =
      (*plugin)->createDetector("echo", anyQuery(), options({{"colour", "red"}}), sink);
  ASSERT_FALSE(bad_option.isOk());
  EXPECT_THAT(bad_option.status().message(), HasSubstr("no option 'colour'"));
  // The host's own options are the detection host's to take out: the loader
  // hands every option to the engine.
  auto slack = (*plugin)->createDetector("echo", anyQuery(), options({{"slack", "3"}}), sink);
  ASSERT_FALSE(slack.isOk());
  EXPECT_THAT(slack.status().message(), HasSubstr("no option 'slack'"));
  auto detector = (*plugin)->createDetector("echo", anyQuery(), {}, sink);
  ASSERT_TRUE(detector.isOk()) << detector.status().message();
  EXPECT_TRUE((*detector)->onEvent(event("A", 5)).isOk());
  EXPECT_EQ(sink.count, 1);
}

TEST(PluginLoaderTest, ThrowingFactoryBecomesAnError) {
  auto plugin = testLoader().load("good");
  ASSERT_TRUE(plugin.isOk());
  CountingSink sink;
  auto d = (*plugin)->createDetector("throwing_factory", anyQuery(), {}, sink);
  ASSERT_FALSE(d.isOk());
  EXPECT_EQ(d.status().code(), Status::Code::kInternal);
  EXPECT_THAT(d.status().message(), HasSubstr("factory exploded"));
}

TEST(PluginLoaderTest, ThrowingDetectorLeavesTheHostRunning) {
  auto plugin = testLoader().load("good");
  ASSERT_TRUE(plugin.isOk());
  CountingSink sink;
  auto d = (*plugin)->createDetector("echo", anyQuery(), {}, sink);
  ASSERT_TRUE(d.isOk());
  GuardedDetector& detector = **d;
  Status s = detector.onEvent(event("Boom", 1));
  EXPECT_EQ(s.code(), Status::Code::kInternal);
  EXPECT_THAT(s.message(), HasSubstr("boom at ts 1"));
  EXPECT_THAT(s.message(), HasSubstr("onEvent"));
  EXPECT_EQ(detector.exceptionCount(), 1u);
  // The detector keeps working after the exception.
  EXPECT_TRUE(detector.onEvent(event("BoomFlush", 2)).isOk());
  EXPECT_EQ(sink.count, 1);
  Status f = detector.flush();
  EXPECT_EQ(f.code(), Status::Code::kInternal);
  EXPECT_THAT(f.message(), HasSubstr("unknown exception"));
  EXPECT_EQ(detector.exceptionCount(), 2u);
}

TEST(PluginLoaderTest, LibraryStaysLoadedWhileADetectorIsAlive) {
  CountingSink sink;
  std::unique_ptr<GuardedDetector> detector;
  {
    PluginLoader loader = testLoader();
    auto plugin = loader.load("good");
    ASSERT_TRUE(plugin.isOk());
    auto d = (*plugin)->createDetector("echo", anyQuery(), {}, sink);
    ASSERT_TRUE(d.isOk());
    detector = std::move(d).value();
  }
  // Loader and every Plugin reference are gone; the detector's code (in the
  // library) still runs, which would crash had the library been unloaded.
  EXPECT_TRUE(detector->onEvent(event("A", 7)).isOk());
  EXPECT_EQ(sink.last_ts, 7);
  detector.reset();
}

TEST(PluginLoaderTest, ConcurrentLoadsShareOnePlugin) {
  PluginLoader loader = testLoader();
  std::vector<PluginPtr> loaded(4);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < loaded.size(); ++i) {
    threads.emplace_back([&loader, &loaded, i] {
      auto p = loader.load(i % 2 == 0 ? "good"
                                      : std::string(TEST_PLUGIN_DIR) + "/libcepbus_plugin_good.so");
      if (p) loaded[i] = *p;
    });
  }
  for (auto& t : threads) t.join();
  for (const PluginPtr& p : loaded) {
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(p.get(), loaded[0].get());
  }
}

TEST(PluginLoaderTest, DefaultSearchPathsStartWithTheEnvironment) {
  ::setenv("CEPBUS_PLUGIN_PATH", "/opt/a::/opt/b", 1);
  const auto paths = PluginLoader::defaultSearchPaths();
  ::unsetenv("CEPBUS_PLUGIN_PATH");
  ASSERT_GE(paths.size(), 2u);
  EXPECT_EQ(paths[0], "/opt/a");
  EXPECT_EQ(paths[1], "/opt/b");
  EXPECT_EQ(PluginLoader::fileNameFor("nfa"), "libcepbus_plugin_nfa.so");
}

}  // namespace
}  // namespace cepbus::plugin
