# Warnings and sanitizers as INTERFACE targets: every cepbus target links
# cepbus_options, so one place decides how the whole tree is compiled.
add_library(cepbus_options INTERFACE)
target_compile_options(cepbus_options INTERFACE -Wall -Wextra -Werror
  # GCC 12 reports -Wrestrict false positives inside libstdc++'s std::string
  # at -O3 (GCC bug 105329), and -Wstringop-overread ones in its comparisons
  # (a memcmp "bound" spanning the whole size_t range: a Release build of the
  # AMQP tests stopped on them); neither says anything about cepbus code.
  $<$<CXX_COMPILER_ID:GNU>:-Wno-restrict>
  $<$<CXX_COMPILER_ID:GNU>:-Wno-stringop-overread>)
target_include_directories(cepbus_options INTERFACE ${PROJECT_SOURCE_DIR})

# Clang's thread-safety analysis over the locking annotations
# (bus/base/thread_annotations.h): every GUARDED_BY, REQUIRES and EXCLUDES is
# checked, and with -Werror a violation fails the build. CI builds the tree
# this way with clang-14.
option(CEPBUS_THREAD_SAFETY "Check the locking annotations with -Wthread-safety (clang)" OFF)
if(CEPBUS_THREAD_SAFETY)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "CEPBUS_THREAD_SAFETY=ON needs clang (CC=clang-14 CXX=clang++-14)")
  endif()
  target_compile_options(cepbus_options INTERFACE -Wthread-safety)
endif()

if(CEPBUS_SANITIZE)
  # The sanitizers' instrumentation makes GCC 12 report -Wmaybe-uninitialized
  # inside std::variant at -O1 and above (GCC's own documentation warns of
  # such false positives); the sanitizers check the real thing at run time.
  target_compile_options(cepbus_options INTERFACE -fsanitize=${CEPBUS_SANITIZE} -fno-omit-frame-pointer
                                                   -fno-sanitize-recover=all
                                                   $<$<CXX_COMPILER_ID:GNU>:-Wno-maybe-uninitialized>)
  target_link_options(cepbus_options INTERFACE -fsanitize=${CEPBUS_SANITIZE})
endif()

if(CEPBUS_FUZZ)
  # libFuzzer targets (tests/fuzz): every library is instrumented for coverage
  # and checked by ASan+UBSan, so a fuzzer sees the branches of the code under
  # test and a memory error or UB anywhere in it is a crash; only the fuzz
  # executables themselves link libFuzzer's main (-fsanitize=fuzzer there).
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "CEPBUS_FUZZ=ON needs clang (CC=clang-14 CXX=clang++-14)")
  endif()
  if(CEPBUS_SANITIZE)
    message(FATAL_ERROR "CEPBUS_FUZZ=ON chooses its own sanitizers; leave CEPBUS_SANITIZE empty")
  endif()
  target_compile_options(cepbus_options INTERFACE -fsanitize=fuzzer-no-link,address,undefined
                                                   -fno-sanitize-recover=all -fno-omit-frame-pointer)
  target_link_options(cepbus_options INTERFACE -fsanitize=address,undefined)
endif()

# A plugin is a MODULE loaded with dlopen; it must see only the plugin API
# headers of bus/core, never another folder of the tree.
function(cepbus_add_plugin name)
  add_library(cepbus_plugin_${name} MODULE ${ARGN})
  target_link_libraries(cepbus_plugin_${name} PRIVATE cepbus_options cepbus_plugin_api)
  set_target_properties(cepbus_plugin_${name} PROPERTIES
    PREFIX "lib" LIBRARY_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/plugins)
endfunction()
