# SPDX-License-Identifier: Apache-2.0
# make install honours the prefix: `cmake --install BUILD_DIR --prefix P`
# writes under P only (no /etc/xlb, no /usr/local), the installed unit names
# P's paths, a second install keeps an edited configuration, and a packager's
# `DESTDIR=D cmake --install --prefix /usr` writes under D only with the
# unit naming /usr/sbin/xlbd and /etc/xlb/xlbd.yaml.
# Run by ctest: cmake -DBUILD_DIR=... -DWORK_DIR=... -P install_test.cmake

function(fail)
  string(JOIN "" text ${ARGN})
  message(FATAL_ERROR "install test: ${text}")
endfunction()

# Installs with `prefix` (and DESTDIR `destdir`, may be empty); sets
# `out_var` to the install's output. Every path the install reports must be
# under `root`.
function(install_into out_var prefix destdir root)
  if(destdir STREQUAL "")
    set(env --unset=DESTDIR)
  else()
    set(env DESTDIR=${destdir})
  endif()
  execute_process(
    COMMAND ${CMAKE_COMMAND} -E env ${env} ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix}
    OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    fail("cmake --install --prefix ${prefix} (DESTDIR=${destdir}) failed (${rc}):\n${out}${err}")
  endif()
  string(REGEX MATCHALL "-- (Installing|Up-to-date|Kept): [^\n]*" reported "${out}")
  list(LENGTH reported count)
  if(count LESS 8)
    fail("the install reported only ${count} files:\n${out}")
  endif()
  foreach(line IN LISTS reported)
    string(REGEX REPLACE "^-- [A-Za-z-]+: " "" path "${line}")
    string(REGEX REPLACE " \\(exists\\)$" "" path "${path}")
    string(FIND "${path}" "${root}/" at)
    if(NOT at EQUAL 0)
      fail("wrote outside ${root}: ${path}\n${out}")
    endif()
  endforeach()
  set(${out_var} "${out}" PARENT_SCOPE)
endfunction()

function(expect_contains file text)
  file(READ "${file}" content)
  string(FIND "${content}" "${text}" at)
  if(at EQUAL -1)
    fail("${file} lacks '${text}':\n${content}")
  endif()
endfunction()

function(expect_lacks file text)
  file(READ "${file}" content)
  string(FIND "${content}" "${text}" at)
  if(NOT at EQUAL -1)
    fail("${file} has '${text}':\n${content}")
  endif()
endfunction()

if(EXISTS /etc/xlb/xlbd.yaml)
  file(TIMESTAMP /etc/xlb/xlbd.yaml etc_before)
else()
  set(etc_before none)
endif()

file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")
# ctest's working directory may be a symlink away: use the real path
file(REAL_PATH "${WORK_DIR}" WORK_DIR)

# 1. A plain prefix.
set(p "${WORK_DIR}/prefix")
install_into(out "${p}" "" "${p}")
foreach(f sbin/xlbd bin/xlbctl lib/systemd/system/xlbd.service share/man/man8/xlbd.8
          share/man/man8/xlbctl.8 etc/xlb/xlbd.yaml share/doc/xlb/README.md)
  if(NOT EXISTS "${p}/${f}")
    fail("${p}/${f} was not installed:\n${out}")
  endif()
endforeach()
set(unit "${p}/lib/systemd/system/xlbd.service")
expect_contains("${unit}" "\nExecStartPre=${p}/sbin/xlbd --check-config ${p}/etc/xlb/xlbd.yaml\n")
expect_contains("${unit}" "\nExecStart=${p}/sbin/xlbd --config ${p}/etc/xlb/xlbd.yaml\n")
expect_contains("${unit}" "\nExecReload=${p}/bin/xlbctl reload --socket /run/xlb/xlbd.sock\n")
# the docs' directory, which exists whether its files are compressed or not
expect_contains("${unit}" " file://${p}/share/doc/xlb/\n")
if(NOT IS_DIRECTORY "${p}/share/doc/xlb")
  fail("the unit's Documentation= names ${p}/share/doc/xlb/, which was not installed")
endif()
expect_lacks("${unit}" "/usr/local")
expect_lacks("${unit}" "@")

# 2. Again: an operator's edited configuration stays.
file(WRITE "${p}/etc/xlb/xlbd.yaml" "# edited\n")
install_into(out "${p}" "" "${p}")
file(READ "${p}/etc/xlb/xlbd.yaml" kept)
if(NOT kept STREQUAL "# edited\n")
  fail("a second install replaced the edited ${p}/etc/xlb/xlbd.yaml")
endif()

# 3. A package build: prefix /usr under DESTDIR; /usr keeps its configuration in /etc.
set(d "${WORK_DIR}/dest")
install_into(out "/usr" "${d}" "${d}")
set(unit "${d}/usr/lib/systemd/system/xlbd.service")
expect_contains("${unit}" "\nExecStart=/usr/sbin/xlbd --config /etc/xlb/xlbd.yaml\n")
expect_contains("${unit}" "\nExecReload=/usr/bin/xlbctl reload --socket /run/xlb/xlbd.sock\n")
foreach(f usr/sbin/xlbd etc/xlb/xlbd.yaml usr/share/man/man8/xlbd.8)
  if(NOT EXISTS "${d}/${f}")
    fail("${d}/${f} was not installed:\n${out}")
  endif()
endforeach()

if(EXISTS /etc/xlb/xlbd.yaml)
  file(TIMESTAMP /etc/xlb/xlbd.yaml etc_after)
else()
  set(etc_after none)
endif()
if(NOT etc_before STREQUAL etc_after)
  fail("/etc/xlb/xlbd.yaml changed (${etc_before} -> ${etc_after})")
endif()

file(REMOVE_RECURSE "${WORK_DIR}")
message(STATUS "install test: prefix and DESTDIR honoured")
