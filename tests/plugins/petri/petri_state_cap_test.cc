// The petri engine's caps on its state: the tokens in the net's places, per
// partition inside the net, in total through the partitioned detector
// (tests/plugins/state_cap_scenarios.h).

#include "tests/plugins/state_cap_scenarios.h"

namespace cepbus::plugins::testing {

INSTANTIATE_TEST_SUITE_P(Petri, StateCapTest, ::testing::Values("petri"));

}  // namespace cepbus::plugins::testing
