// A tiny plugin built several times with different definitions, each variant
// broken in one way the loader must report (see CMakeLists.txt):
//   TEST_PLUGIN_GOOD            engines "echo" and "throwing_factory"
//   TEST_PLUGIN_OTHER_ECHO      a second, otherwise good plugin providing "echo"
//   TEST_PLUGIN_BAD_ABI         reports ABI version 999
//   TEST_PLUGIN_BAD_TAG         reports a foreign build tag
//   TEST_PLUGIN_NO_REGISTER     exports cepbus_plugin_info() only
//   TEST_PLUGIN_NO_INFO         exports nothing of the ABI
//   TEST_PLUGIN_REGISTER_FAILS  its registration function throws
//   TEST_PLUGIN_DUPLICATE       registers "echo" twice
//
// The "echo" detector reports every event as a one-event match; it throws on
// an event of type "Boom" and from flush() after an event of type "BoomFlush".

#include <stdexcept>

#include "bus/core/plugin/plugin_export.h"

namespace {

using cepbus::EventPtr;
using cepbus::Status;
using namespace cepbus::plugin;

class NoComposite final : public MatchComposer {
 public:
  EventPtr compose(const Match& match) const override { return match.event(0); }
};

class EchoDetector final : public Detector {
 public:
  explicit EchoDetector(MatchSink& sink) : sink_(sink) {}
  Status onEvent(const EventPtr& event) override {
    if (event->type().name() == "Boom")
      throw std::runtime_error("boom at ts " + std::to_string(event->ts()));
    if (event->type().name() == "BoomFlush") flush_throws_ = true;
    const EventPtr* events[] = {&event};
    const uint32_t ends[] = {1};
    sink_.onMatch(Match(events, ends, &composer_));
    return Status::ok();
  }
  Status flush() override {
    if (flush_throws_) throw 42;  // not even a std::exception
    return Status::ok();
  }

 private:
  MatchSink& sink_;
  NoComposite composer_;
  bool flush_throws_ = false;
};

class EchoFactory final : public DetectorFactory {
 public:
  std::span<const OptionInfo> options() const override {
    static constexpr OptionInfo kOptions[] = {{"mode", "accepted and ignored"}};
    return kOptions;
  }
  cepbus::Result<std::unique_ptr<Detector>> create(const cepbus::pattern::Query&,
                                                   const DetectorOptions& options,
                                                   MatchSink& sink) const override {
    static constexpr std::string_view kKnown[] = {"mode"};
    Status s = options.checkKnown(kKnown, "echo");
    if (!s) return s;
    return std::unique_ptr<Detector>(std::make_unique<EchoDetector>(sink));
  }
};

class ThrowingFactory final : public DetectorFactory {
 public:
  cepbus::Result<std::unique_ptr<Detector>> create(const cepbus::pattern::Query&,
                                                   const DetectorOptions&,
                                                   MatchSink&) const override {
    throw std::logic_error("factory exploded");
  }
};

[[maybe_unused]] void registerFactories(FactoryRegistrar& registrar) {
#if defined(TEST_PLUGIN_REGISTER_FAILS)
  throw std::runtime_error("no licence for this engine");
#endif
  registrar.add("echo", std::make_unique<EchoFactory>());
#if defined(TEST_PLUGIN_DUPLICATE)
  registrar.add("echo", std::make_unique<EchoFactory>());
#endif
#if defined(TEST_PLUGIN_GOOD)
  registrar.add("throwing_factory", std::make_unique<ThrowingFactory>());
#endif
}

}  // namespace

#if defined(TEST_PLUGIN_BAD_ABI) || defined(TEST_PLUGIN_BAD_TAG) || defined(TEST_PLUGIN_NO_REGISTER)
extern "C" const CepbusPluginInfo* cepbus_plugin_info(void) {
#if defined(TEST_PLUGIN_BAD_ABI)
  static const CepbusPluginInfo info = {999, "badabi", "1", CEPBUS_PLUGIN_BUILD_TAG};
#elif defined(TEST_PLUGIN_BAD_TAG)
  static const CepbusPluginInfo info = {CEPBUS_PLUGIN_ABI_VERSION, "badtag", "1",
                                        "msvc 19.0; msvcrt; cepbus 0.0.1"};
#else
  static const CepbusPluginInfo info = {CEPBUS_PLUGIN_ABI_VERSION, "noregister", "1",
                                        CEPBUS_PLUGIN_BUILD_TAG};
#endif
  return &info;
}
#if !defined(TEST_PLUGIN_NO_REGISTER)
extern "C" int cepbus_plugin_register(CepbusPluginRegistrar* registrar) {
  return ::cepbus::plugin::detail::runRegistration(registrar, &registerFactories);
}
#endif
#elif defined(TEST_PLUGIN_NO_INFO)
extern "C" int not_a_cepbus_plugin(void) { return 7; }
#else
CEPBUS_DEFINE_PLUGIN("testgood", "2.1.0", registerFactories)
#endif
