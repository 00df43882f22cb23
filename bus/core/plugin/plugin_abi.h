#pragma once

// The plain-C boundary between the host and a detector plugin.
//
// A plugin is a shared library exporting two C functions:
//
//   const CepbusPluginInfo* cepbus_plugin_info(void);
//   int cepbus_plugin_register(CepbusPluginRegistrar* registrar);
//
// The host calls cepbus_plugin_info() first and compares its ABI version and
// build tag EXACTLY with its own; only when both agree does it call
// cepbus_plugin_register(), the first call through which C++ objects
// (cepbus::plugin::DetectorFactory) cross the boundary. The build tag names the
// compiler, the C++ standard library (and its ABI), the sanitizers and the
// cepbus version, because C++ objects are only interchangeable between
// identically built binaries (DuckDB checks its extensions the same way).
//
// No exception may leave either function. Plugins normally do not write them
// by hand but use CEPBUS_DEFINE_PLUGIN from bus/core/plugin/plugin_export.h.

#include <stdint.h>  // NOLINT(modernize-deprecated-headers): this header is plain C

#include "bus/core/plugin/version.h"  // generated: CEPBUS_VERSION

// 2: Detector::exportModel() and DetectorFactory::createMany() added.
// 3: Detector::onEvents() added (a batch of events per call).
// 4: DetectorFactory::options() added (the engine options, for `cepbus plugins`).
// 5: DetectorFactory::notices() added (what an engine's defaults do to a query).
// 6: Detector::state() added (the partial matches a detector holds).
// 7: Detector::onWatermark() added (event time passed; absence fires on it).
// 8: Detector::snapshotVersion(), snapshot() and restore() added (snapshot.h);
//    DetectorState gained evicted and bytes (what caps on state dropped, and
//    the memory it keeps).
#define CEPBUS_PLUGIN_ABI_VERSION 8u

#define CEPBUS_PLUGIN_STR2(x) #x
#define CEPBUS_PLUGIN_STR(x) CEPBUS_PLUGIN_STR2(x)

#if defined(__clang__)
#define CEPBUS_PLUGIN_COMPILER "clang " __clang_version__
#elif defined(__GNUC__)
#define CEPBUS_PLUGIN_COMPILER "gcc " __VERSION__
#else
#define CEPBUS_PLUGIN_COMPILER "unknown-compiler"
#endif

#if defined(__GLIBCXX__)
#define CEPBUS_PLUGIN_STDLIB                                                   \
  "libstdc++ " CEPBUS_PLUGIN_STR(__GLIBCXX__) " cxx11-abi " CEPBUS_PLUGIN_STR( \
      _GLIBCXX_USE_CXX11_ABI)
#elif defined(_LIBCPP_VERSION)
#define CEPBUS_PLUGIN_STDLIB "libc++ " CEPBUS_PLUGIN_STR(_LIBCPP_VERSION)
#else
#define CEPBUS_PLUGIN_STDLIB "unknown-stdlib"
#endif

// Sanitizers change object layouts and runtime symbols, so they are part of the tag.
#if defined(__SANITIZE_ADDRESS__)
#define CEPBUS_PLUGIN_SAN_ADDRESS " asan"
#else
#define CEPBUS_PLUGIN_SAN_ADDRESS ""
#endif
#if defined(__SANITIZE_THREAD__)
#define CEPBUS_PLUGIN_SAN_THREAD " tsan"
#else
#define CEPBUS_PLUGIN_SAN_THREAD ""
#endif

// The tag this translation unit is built with, e.g.
// "gcc 12.2.0; libstdc++ 20230528 cxx11-abi 1; sanitizers: asan; cepbus 0.1.0".
#define CEPBUS_PLUGIN_BUILD_TAG                                                             \
  CEPBUS_PLUGIN_COMPILER "; " CEPBUS_PLUGIN_STDLIB                                          \
                         "; sanitizers:" CEPBUS_PLUGIN_SAN_ADDRESS CEPBUS_PLUGIN_SAN_THREAD \
                         "; cepbus " CEPBUS_VERSION

#ifdef __cplusplus
extern "C" {
#endif

// What a plugin says about itself. Every string is static and NUL-terminated.
typedef struct CepbusPluginInfo {
  uint32_t abi_version;   // CEPBUS_PLUGIN_ABI_VERSION the plugin was built with
  const char* name;       // e.g. "nfa"
  const char* version;    // the plugin's own version, e.g. "1.0.0"
  const char* build_tag;  // CEPBUS_PLUGIN_BUILD_TAG the plugin was built with
} CepbusPluginInfo;

// The host's side of registration; valid only during cepbus_plugin_register().
typedef struct CepbusPluginRegistrar {
  void* host;  // opaque to the plugin
  // Registers `factory`, a `cepbus::plugin::DetectorFactory*` allocated with
  // `new`, under `engine`. The host owns the factory from this call on, also
  // when the call fails. Returns 0 on success.
  int (*add_factory)(void* host, const char* engine, void* factory);
  // Records why registration failed; the host reports it with the library path.
  void (*set_error)(void* host, const char* message);
} CepbusPluginRegistrar;

typedef const CepbusPluginInfo* (*CepbusPluginInfoFn)(void);
// Returns 0 on success; otherwise the plugin has called set_error().
typedef int (*CepbusPluginRegisterFn)(CepbusPluginRegistrar* registrar);

#ifdef __cplusplus
}  // extern "C"
#endif

#define CEPBUS_PLUGIN_INFO_SYMBOL "cepbus_plugin_info"
#define CEPBUS_PLUGIN_REGISTER_SYMBOL "cepbus_plugin_register"
