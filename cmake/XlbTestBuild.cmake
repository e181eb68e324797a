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

option(XLB_TEST_OPTIMIZE "Compile the test code (tests/) with the build type's optimisation" OFF)

# Call in tests/CMakeLists.txt before adding the test directories: the
# compile options below are the directory's, inherited by its subdirectories.
function(xlb_test_code_begin)
  if(NOT XLB_TEST_OPTIMIZE)
    # After CMAKE_CXX_FLAGS_<CONFIG> on the command line, so it wins.
    add_compile_options($<$<COMPILE_LANGUAGE:CXX>:-O0>)
  endif()
endfunction()

# Call in tests/CMakeLists.txt after adding the test directories (nothing yet).
function(xlb_test_code_end)
endfunction()
