#pragma once

#include <string_view>

namespace cepbus {

// Names the calling thread as `top -H`, gdb and /proc show it, so that an
// operator can tell a bus's threads apart. Linux keeps the first 15 bytes.
void nameThisThread(std::string_view name);

}  // namespace cepbus
