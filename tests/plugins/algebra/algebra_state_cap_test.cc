// The algebra engine's caps on its state: the operand instances kept between
// ticks, per partition inside the detector, in total through the partitioned
// detector (tests/plugins/state_cap_scenarios.h).

#include "tests/plugins/state_cap_scenarios.h"

namespace cepbus::plugins::testing {

INSTANTIATE_TEST_SUITE_P(Algebra, StateCapTest, ::testing::Values("algebra"));

}  // namespace cepbus::plugins::testing
