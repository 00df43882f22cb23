# Every dependency is a Debian 12 package (see scripts/install-deps.sh).
find_package(Threads REQUIRED)
find_package(nlohmann_json 3 REQUIRED)
find_package(simdjson 3 REQUIRED)
find_package(tinyxml2 REQUIRED)
find_package(SQLite3 REQUIRED)
find_package(Poco REQUIRED COMPONENTS Foundation Util)
find_package(Boost 1.74 REQUIRED)

# Debian's libqpid-proton-cpp.pc names .pc files Debian does not ship and there
# is no CMake config, so the library is found by hand behind an INTERFACE target.
find_library(PROTON_CPP_LIBRARY qpid-proton-cpp REQUIRED)
find_path(PROTON_CPP_INCLUDE_DIR proton/container.hpp REQUIRED)
add_library(cepbus_proton INTERFACE)
target_link_libraries(cepbus_proton INTERFACE ${PROTON_CPP_LIBRARY})
target_include_directories(cepbus_proton SYSTEM INTERFACE ${PROTON_CPP_INCLUDE_DIR})

if(CEPBUS_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()
if(CEPBUS_BUILD_BENCH)
  find_package(benchmark REQUIRED)
endif()
