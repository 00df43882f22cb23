# Run by `cmake --install` (see cmake/Install.cmake), when the prefix is
# known: installs the systemd unit, configured for this prefix, and the
# default descriptor. file(INSTALL) honours DESTDIR and the install manifest.
if(CMAKE_INSTALL_PREFIX STREQUAL "/usr")
  set(confdir "/etc/cepbus")
else()
  set(confdir "${CMAKE_INSTALL_PREFIX}/etc/cepbus")
endif()
set(CEPBUS_EXECUTABLE "${CMAKE_INSTALL_PREFIX}/${CEPBUS_BINDIR}/cepbus")
set(CEPBUS_DESCRIPTOR "${confdir}/cepbus.xml")
configure_file("${CEPBUS_SOURCE_DIR}/cmake/packaging/cepbus.service.in"
               "${CEPBUS_BINARY_DIR}/packaging/cepbus.service" @ONLY)
file(INSTALL "${CEPBUS_BINARY_DIR}/packaging/cepbus.service"
     DESTINATION "${CMAKE_INSTALL_PREFIX}/lib/systemd/system")
file(INSTALL "${CEPBUS_SOURCE_DIR}/examples/service/cepbus.xml" DESTINATION "${confdir}")
