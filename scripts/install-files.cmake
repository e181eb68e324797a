# SPDX-License-Identifier: Apache-2.0
# The systemd units and the configuration file, placed by the install prefix.
#
# Included twice by the top-level CMakeLists.txt: at configure time
# (XLB_ONLY_CONFIGURE ON: writes build/xlbd.service and
# build/xlb-decap@.service for the configured prefix) and at install time
# (OFF: the prefix is the one `cmake --install --prefix` or `make install
# PREFIX=` gives, which configure time cannot know; the units are configured
# for it and installed, and the example configuration
# becomes SYSCONFDIR/xlb/xlbd.yaml unless that file exists). DESTDIR is
# honoured: paths in the units are the final ones, files land under DESTDIR.
#
# In: XLB_SOURCE_DIR, XLB_BINARY_DIR, XLB_INSTALL_PREFIX, XLB_ONLY_CONFIGURE,
# XLB_INSTALL_DIRS (BINDIR=..;SBINDIR=..;SYSCONFDIR=..;DOCDIR=..;UNITDIR=..,
# as GNUInstallDirs gives them: relative to the prefix, or absolute).

# PREFIX/DIR as GNUInstallDirs' CMAKE_INSTALL_FULL_<dir> would say it,
# including its rule that the prefixes / and /usr keep SYSCONFDIR in /etc and
# /opt/NAME puts it in /etc/opt/NAME.
function(xlb_full_dir out name dir prefix)
  string(REGEX REPLACE "/+$" "" prefix "${prefix}")
  if(IS_ABSOLUTE "${dir}")
    set(full "${dir}")
  elseif(name STREQUAL "SYSCONFDIR" AND (prefix STREQUAL "" OR prefix STREQUAL "/usr"))
    set(full "/${dir}")
  elseif(name STREQUAL "SYSCONFDIR" AND prefix MATCHES "^/opt/")
    set(full "/${dir}${prefix}")
  else()
    set(full "${prefix}/${dir}")
  endif()
  set(${out} "${full}" PARENT_SCOPE)
endfunction()

foreach(entry IN LISTS XLB_INSTALL_DIRS)
  string(REGEX MATCH "^([A-Z]+)=(.*)$" _ "${entry}")
  xlb_full_dir(FULL_${CMAKE_MATCH_1} ${CMAKE_MATCH_1} "${CMAKE_MATCH_2}" "${XLB_INSTALL_PREFIX}")
endforeach()
# The unit's own words.
set(FULL_CONFIG "${FULL_SYSCONFDIR}/xlb/xlbd.yaml")

# One template per unit, the same for every prefix (make install, the
# packages): scripts/<unit>.in.
set(units xlbd.service xlb-decap@.service)

if(XLB_ONLY_CONFIGURE)
  foreach(unit IN LISTS units)
    configure_file("${XLB_SOURCE_DIR}/scripts/${unit}.in" "${XLB_BINARY_DIR}/${unit}" @ONLY)
  endforeach()
  return()
endif()

set(staging "${XLB_BINARY_DIR}/install-staging")
foreach(unit IN LISTS units)
  configure_file("${XLB_SOURCE_DIR}/scripts/${unit}.in" "${staging}/${unit}" @ONLY)
  file(INSTALL "${staging}/${unit}" DESTINATION "${FULL_UNITDIR}")
endforeach()
if(NOT EXISTS "$ENV{DESTDIR}${FULL_CONFIG}")
  file(INSTALL "${XLB_SOURCE_DIR}/etc/xlbd.example.yaml" DESTINATION "${FULL_SYSCONFDIR}/xlb"
       RENAME xlbd.yaml PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ)
else()
  message(STATUS "Kept: $ENV{DESTDIR}${FULL_CONFIG} (exists)")
endif()
