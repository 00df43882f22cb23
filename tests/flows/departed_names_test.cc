#include "flows/departed_names.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>

#include "bus/core/wire_names.h"

namespace cepbus::flows {
namespace {

TEST(DepartedNamesTest, RemembersADepartureUntilTheNameAttachesAgain) {
  DepartedNames departed(4);
  const std::string a = "departed.a";
  EXPECT_FALSE(departed.contains(a));
  departed.add(a);
  EXPECT_TRUE(departed.contains(a));
  departed.remove(a);
  EXPECT_FALSE(departed.contains(a));
}

TEST(DepartedNamesTest, ForgetsTheOldestDeparturesBeyondItsCapacity) {
  DepartedNames departed(2);
  const std::string a = "departed.a", b = "departed.b", c = "departed.c";
  departed.add(a);
  departed.add(b);
  departed.add(c);
  EXPECT_FALSE(departed.contains(a));
  EXPECT_TRUE(departed.contains(b));
  EXPECT_TRUE(departed.contains(c));
  EXPECT_EQ(departed.size(), 2u);
}

// A name that came back and left again is a new departure: the old one,
// forgotten first, does not take the new one with it.
TEST(DepartedNamesTest, ANameThatLeftAgainIsRememberedFromItsNewDeparture) {
  DepartedNames departed(2);
  const std::string a = "departed.a", b = "departed.b";
  departed.add(a);
  departed.remove(a);
  departed.add(a);
  departed.add(b);  // pushes out a's first departure only
  EXPECT_TRUE(departed.contains(a));
  EXPECT_TRUE(departed.contains(b));
}

// It holds no name from a client: the name is given back with its target.
TEST(DepartedNamesTest, HoldsNoNameOfAClient) {
  DepartedNames departed(4);
  const uint32_t held_before = wireNameStats().held;
  {
    std::optional<NameHold> hold = holdWireName("departed.client-link");
    ASSERT_TRUE(hold.has_value());
    departed.add(hold->symbol().name());
  }
  EXPECT_EQ(wireNameStats().held, held_before);
  EXPECT_TRUE(departed.contains("departed.client-link"));
}

}  // namespace
}  // namespace cepbus::flows
