#include "router/relays.h"

#include <gtest/gtest.h>

namespace cepbus::router {
namespace {

using Addresses = std::vector<std::string>;

TEST(RelaysTest, EntriesWithInputsAndAnOutputAreRelays) {
  Registry registry;
  auto query = *registry.add("cep/overheat:detector", ComponentKind::kService);
  query->setMetadata(std::string(kRelayInputs), "sensors.#,plant.*.temp");
  query->setMetadata(std::string(kRelayOutput), "alerts.overheat");
  auto listener = *registry.add("amqp-listener", ComponentKind::kService);
  listener->setMetadata("address", "127.0.0.1:5672");
  auto half = *registry.add("half", ComponentKind::kService);
  half->setMetadata(std::string(kRelayInputs), "a.b");  // no output: not a relay

  const std::vector<Relay> relays = relaysIn(registry);
  ASSERT_EQ(relays.size(), 1u);
  EXPECT_EQ(relays[0].inputs, (Addresses{"sensors.#", "plant.*.temp"}));
  EXPECT_EQ(relays[0].output, "alerts.overheat");
}

TEST(RelaysTest, AnAddressReachesTheOutputsOfRelaysWhoseInputsMatchIt) {
  const std::vector<Relay> relays{{{"sensors.#"}, "alerts.overheat"},
                                  {{"plant.*.temp"}, "alerts.plant"},
                                  {{"orders"}, "fills"}};
  EXPECT_EQ(derivedAddresses(relays, "sensors.line1.t"), (Addresses{"alerts.overheat"}));
  EXPECT_EQ(derivedAddresses(relays, "plant.7.temp"), (Addresses{"alerts.plant"}));
  EXPECT_EQ(derivedAddresses(relays, "plant.7.pressure"), Addresses{});
}

TEST(RelaysTest, ChainsAreFollowedAndCyclesEnd) {
  const std::vector<Relay> relays{{{"in"}, "mid"},
                                  {{"mid"}, "out"},
                                  {{"mid", "other"}, "out"},  // reached twice, listed once
                                  {{"out"}, "in"}};           // back to the start
  EXPECT_EQ(derivedAddresses(relays, "in"), (Addresses{"mid", "out", "in"}));
  EXPECT_EQ(derivedAddresses(relays, "out"), (Addresses{"in", "mid", "out"}));
}

}  // namespace
}  // namespace cepbus::router
