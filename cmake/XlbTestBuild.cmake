# SPDX-License-Identifier: Apache-2.0
# How the test code (everything under tests/) is compiled. Included by the
# top-level CMakeLists.txt; tests/CMakeLists.txt calls xlb_test_code_begin()
# before its add_subdirectory() calls and xlb_test_code_end() after them, so
# no test directory's CMakeLists.txt needs to know about any of this.
#
# Only the tests' own translation units are affected: the libraries and
# programs they test (userspace/, tools/) are the very objects that are
# shipped, built with the build type's flags (RelWithDebInfo: -O2 -g), and the
# tests link those.
#
# XLB_TEST_OPTIMIZE (default OFF): the test code is compiled with -O0 (still
# -g and the build type's -DNDEBUG). Optimising gtest's macros, the JSON
# fixtures and the case tables was half of a from-scratch build's CPU time
# (871 of 1708 s) and buys nothing the tests check: what they time (publish,
# state-file writes, xlbd itself) is library or xlbd code, still -O2. The
# CPU-bound test code gets slower (the textbook Maglev of maglev_test: 0.2 s
# -> 2.5 s; the 299 packet rows: 15 s -> 19 s), far less than the build saves.
# ON compiles the test code like the rest (a bug that only -O2 shows, the
# warnings GCC only gives when optimising).
#
# XLB_TEST_PCH (default ON): every GoogleTest executable under tests/ reuses
# one precompiled header (gtest and the standard headers the tests use), built
# once by the target xlb_test_pch. The header is force-included (-include), so
# a test file that forgets one of those #includes still compiles here: build
# with -DXLB_TEST_PCH=OFF to check includes.
option(XLB_TEST_OPTIMIZE "Compile the test code (tests/) with the build type's optimisation" OFF)
option(XLB_TEST_PCH "Precompile GoogleTest and standard headers once for all test executables" ON)

set(XLB_TEST_PCH_HEADERS
    <gtest/gtest.h>
    <algorithm> <array> <atomic> <chrono> <cstdint> <cstdio> <cstring> <expected>
    <filesystem> <fstream> <functional> <map> <memory> <mutex> <optional> <set>
    <sstream> <string> <string_view> <thread> <utility> <variant> <vector>
    CACHE STRING "What xlb_test_pch precompiles for the test executables")
mark_as_advanced(XLB_TEST_PCH_HEADERS)

# Call in tests/CMakeLists.txt before adding the test directories: the
# compile options below are the directory's, inherited by its subdirectories.
function(xlb_test_code_begin)
  if(NOT XLB_TEST_OPTIMIZE)
    # After CMAKE_CXX_FLAGS_<CONFIG> on the command line, so it wins.
    add_compile_options($<$<COMPILE_LANGUAGE:CXX>:-O0>)
  endif()
  if(XLB_TEST_PCH)
    # A header that cannot be used is read as text instead (slower, not
    # wrong): CMake's -Winvalid-pch says so, without failing the build.
    add_compile_options($<$<COMPILE_LANGUAGE:CXX>:-Wno-error=invalid-pch>)
  endif()
endfunction()

# Every target defined in `dir` and below.
function(_xlb_targets_under dir out)
  get_property(targets DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
  get_property(subdirs DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
  foreach(sub IN LISTS subdirs)
    _xlb_targets_under(${sub} more)
    list(APPEND targets ${more})
  endforeach()
  set(${out} ${targets} PARENT_SCOPE)
endfunction()

# Call in tests/CMakeLists.txt after adding the test directories: gives every
# executable there that links GoogleTest the shared precompiled header. (The
# header carries gtest's configuration macros, so targets without gtest keep
# compiling without it.)
function(xlb_test_code_end)
  if(NOT XLB_TEST_PCH)
    return()
  endif()
  set(pch_source ${CMAKE_CURRENT_BINARY_DIR}/xlb_test_pch.cpp)
  if(NOT EXISTS ${pch_source})
    file(WRITE ${pch_source} "// The translation unit that builds the tests' precompiled header.\n")
  endif()
  add_library(xlb_test_pch OBJECT ${pch_source})
  target_link_libraries(xlb_test_pch PRIVATE GTest::gtest)
  target_precompile_headers(xlb_test_pch PRIVATE ${XLB_TEST_PCH_HEADERS})

  _xlb_targets_under(${CMAKE_CURRENT_SOURCE_DIR} targets)
  foreach(t IN LISTS targets)
    get_target_property(type ${t} TYPE)
    if(NOT type STREQUAL "EXECUTABLE")
      continue()
    endif()
    get_target_property(libs ${t} LINK_LIBRARIES)
    if(NOT libs MATCHES "GTest::")
      continue()
    endif()
    get_target_property(own ${t} PRECOMPILE_HEADERS)
    get_target_property(reused ${t} PRECOMPILE_HEADERS_REUSE_FROM)
    if(own OR reused)
      continue()  # a target that chose its own
    endif()
    target_precompile_headers(${t} REUSE_FROM xlb_test_pch)
  endforeach()
endfunction()
