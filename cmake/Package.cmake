# `cpack -G DEB` in a build folder (Release; see docs/install.md): one
# package, cepbus, with what cmake/Install.cmake installs under /usr and the
# default descriptor as the conffile /etc/cepbus/cepbus.xml.
set(CPACK_PACKAGE_NAME cepbus)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_VENDOR cepbus)
set(CPACK_PACKAGE_CONTACT "cepbus <dev@cepbus>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "event bus with complex-event-processing plugins")
set(CPACK_PACKAGE_DESCRIPTION
    "An AMQP 1.0 event bus whose CEP service engine runs detector plugins (NFA, event algebra, Petri net, uncertain stream join). Includes the plugin SDK (headers, CMake package, pkg-config file) and a systemd unit.")
set(CPACK_GENERATOR DEB)
# Install with DESTDIR so that the prefix CPack installs to is /usr itself,
# whatever the build folder's CMAKE_INSTALL_PREFIX: the unit and the
# descriptor are placed by prefix (packaging/InstallService.cmake).
set(CPACK_SET_DESTDIR ON)
set(CPACK_INSTALL_PREFIX /usr)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)

set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)  # cepbus_0.1.0_amd64.deb
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
# Library dependencies are computed by dpkg-shlibdeps (dpkg-dev) from the
# binaries; the private libcepbus_core.so is resolved inside the package
# (dpkg-shlibdeps -l, relative to the staging root it runs in).
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS usr/${CEPBUS_INSTALL_PRIVATE_LIBDIR})
# adduser: postinst creates the system user (adduser --system).
set(CPACK_DEBIAN_PACKAGE_DEPENDS "adduser")
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
    ${PROJECT_SOURCE_DIR}/cmake/packaging/deb/postinst
    ${PROJECT_SOURCE_DIR}/cmake/packaging/deb/prerm
    ${PROJECT_SOURCE_DIR}/cmake/packaging/deb/postrm
    ${PROJECT_SOURCE_DIR}/cmake/packaging/deb/conffiles)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)

include(CPack)
