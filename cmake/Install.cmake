# `cmake --install BUILD --prefix P`: the program, its tools and plugins, the
# plugin SDK (headers, CMake package, pkg-config file), man pages, examples
# and the systemd unit. Layout (relative to P):
#   bin/cepbus, bin/cepbus-amqp-passwd
#   lib/cepbus/libcepbus_core.so           private: found through RPATH
#   lib/cepbus/plugins/libcepbus_plugin_*  found by an installed cepbus by default
#   include/cepbus/bus/core/...            bus/core/plugin/sdk_headers.txt
#   lib/cmake/cepbus/, lib/pkgconfig/cepbus.pc
#   share/man/man1/cepbus*.1, share/doc/cepbus/{examples,plugins.md,install.md}
#   lib/systemd/system/cepbus.service, etc/cepbus/cepbus.xml (/etc for P=/usr)
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# RPATHs relative to the binaries, so that any prefix works without
# LD_LIBRARY_PATH and dpkg-shlibdeps sees the private library.
set_target_properties(cepbus cepbus-amqp-passwd PROPERTIES
  INSTALL_RPATH "$ORIGIN/../${CEPBUS_INSTALL_PRIVATE_LIBDIR}")
install(TARGETS cepbus cepbus-amqp-passwd RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS cepbus_core LIBRARY DESTINATION ${CEPBUS_INSTALL_PRIVATE_LIBDIR})
foreach(plugin nfa algebra petri join window)
  set_target_properties(cepbus_plugin_${plugin} PROPERTIES INSTALL_RPATH "$ORIGIN/..")
  install(TARGETS cepbus_plugin_${plugin} LIBRARY DESTINATION ${CEPBUS_INSTALL_PLUGINDIR})
endforeach()

# The SDK headers: one list, shared with scripts/check-layering.sh.
file(STRINGS ${PROJECT_SOURCE_DIR}/bus/core/plugin/sdk_headers.txt sdk_headers REGEX "^[^#]")
foreach(header ${sdk_headers})
  get_filename_component(dir ${header} DIRECTORY)
  if(header STREQUAL "bus/core/plugin/version.h")
    set(from ${CEPBUS_GENERATED_INCLUDE_DIR}/${header})
  else()
    set(from ${PROJECT_SOURCE_DIR}/${header})
  endif()
  install(FILES ${from} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/cepbus/${dir})
endforeach()

# find_package(cepbus): hand-written rather than install(EXPORT), because the
# build's own targets carry build-only usage requirements (-Werror, the
# source tree on the include path) that must not reach a plugin author.
set(CEPBUS_CMAKE_DIR lib/cmake/cepbus)
configure_package_config_file(cmake/packaging/cepbusConfig.cmake.in
  ${PROJECT_BINARY_DIR}/cepbusConfig.cmake INSTALL_DESTINATION ${CEPBUS_CMAKE_DIR}
  PATH_VARS CMAKE_INSTALL_INCLUDEDIR CEPBUS_INSTALL_PRIVATE_LIBDIR CEPBUS_INSTALL_PLUGINDIR)
# The build tag names the exact cepbus version, so only that version fits.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/cepbusConfigVersion.cmake
  COMPATIBILITY ExactVersion)
install(FILES ${PROJECT_BINARY_DIR}/cepbusConfig.cmake
              ${PROJECT_BINARY_DIR}/cepbusConfigVersion.cmake DESTINATION ${CEPBUS_CMAKE_DIR})

# pkg-config: the prefix is computed from the .pc file's own location
# (pcfiledir), so a relocated prefix still works.
configure_file(cmake/packaging/cepbus.pc.in ${PROJECT_BINARY_DIR}/cepbus.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/cepbus.pc DESTINATION lib/pkgconfig)

# Man pages, generated from `cepbus ... --help` (bus/app/CMakeLists.txt).
install(DIRECTORY ${PROJECT_BINARY_DIR}/man/ DESTINATION ${CMAKE_INSTALL_MANDIR}/man1
        FILES_MATCHING PATTERN "*.1.gz")

set(CEPBUS_DOC_DIR ${CMAKE_INSTALL_DATADIR}/doc/cepbus)
install(FILES docs/plugins.md docs/install.md DESTINATION ${CEPBUS_DOC_DIR})
install(DIRECTORY examples/ DESTINATION ${CEPBUS_DOC_DIR}/examples
        PATTERN "__pycache__" EXCLUDE PATTERN "build" EXCLUDE)

# The systemd unit and the default descriptor. Their places depend on the
# prefix known only at install time (--prefix, CPack's /usr): for /usr the
# descriptor is /etc/cepbus/cepbus.xml (as GNUInstallDirs would put it),
# otherwise P/etc/cepbus/cepbus.xml; the unit names the installed cepbus.
install(CODE "set(CEPBUS_SOURCE_DIR \"${PROJECT_SOURCE_DIR}\")
set(CEPBUS_BINARY_DIR \"${PROJECT_BINARY_DIR}\")
set(CEPBUS_BINDIR \"${CMAKE_INSTALL_BINDIR}\")")
install(SCRIPT cmake/packaging/InstallService.cmake)
