# `cmake --install build` and the Debian package (`cpack -G DEB` in build/,
# scripts/package-deb): the binaries, the systemd unit, the docs and the
# deployment files. README "Quick start for a lab".
#
# The programs find each other beside themselves (gpuherd hands `daemon` to
# gpuherd-daemon and every other command to gpuherd-cli; the daemon starts
# gpuherd-shim, which preloads
# libgpuherd-fence.so), so all five live in <prefix>/lib/gpuherd and
# <prefix>/bin holds links to the two that people run.
set(GPUHERD_PKG_DIR lib/gpuherd)
install(TARGETS gpuherd gpuherd-cli gpuherd-daemon gpuherd-shim RUNTIME DESTINATION ${GPUHERD_PKG_DIR})
install(TARGETS gpuherd-fence LIBRARY DESTINATION ${GPUHERD_PKG_DIR})
foreach(program gpuherd gpuherd-daemon)
  install(CODE "
    set(bin \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/bin\")
    file(MAKE_DIRECTORY \"\${bin}\")
    file(REMOVE \"\${bin}/${program}\")
    file(CREATE_LINK \"../${GPUHERD_PKG_DIR}/${program}\" \"\${bin}/${program}\" SYMBOLIC)
    message(STATUS \"Installing: \${bin}/${program} -> ../${GPUHERD_PKG_DIR}/${program}\")")
endforeach()

# The unit names the installed programs: deploy/gpuherd.service is written for
# /usr/local, the default prefix; another prefix (/usr for the package) is
# put in at install time.
install(CODE "
  file(READ \"${PROJECT_SOURCE_DIR}/deploy/gpuherd.service\" unit)
  string(REPLACE \"/usr/local/\" \"\${CMAKE_INSTALL_PREFIX}/\" unit \"\${unit}\")
  set(dir \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/lib/systemd/system\")
  file(MAKE_DIRECTORY \"\${dir}\")
  file(WRITE \"\${dir}/gpuherd.service\" \"\${unit}\")
  message(STATUS \"Installing: \${dir}/gpuherd.service\")")

install(FILES README.md DESTINATION share/doc/gpuherd)
# Every topic the README maps, where its links lead (docs/NAME.md).
install(DIRECTORY docs/ DESTINATION share/doc/gpuherd/docs FILES_MATCHING PATTERN "*.md")
install(DIRECTORY examples/ DESTINATION share/doc/gpuherd/examples
        PATTERN "__pycache__" EXCLUDE PATTERN "*.pyc" EXCLUDE)
install(DIRECTORY deploy/alerts deploy/grafana deploy/prometheus DESTINATION share/gpuherd)
install(FILES helpers/python/gpuherd_job.py helpers/cpp/gpuherd_job.h DESTINATION share/gpuherd/helpers)

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME gpuherd)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "keeps every GPU of a lab healthy and busy: burn-in, telemetry, alerts, a GPU job queue")
set(CPACK_PACKAGE_CONTACT "gpuherd maintainers <gpuherd@localhost>")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION admin)
# The shared libraries the programs link (spdlog, yaml-cpp, SQLite, ...),
# found by dpkg-shlibdeps.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA "${PROJECT_SOURCE_DIR}/deploy/debian/postinst;${PROJECT_SOURCE_DIR}/deploy/debian/prerm;${PROJECT_SOURCE_DIR}/deploy/debian/postrm")
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
include(CPack)
