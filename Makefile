# SPDX-License-Identifier: Apache-2.0
# xlb: the entry point. CMake does the building underneath; you type `make`.
#
#   make          build everything (BPF objects, skeletons, C++)
#   make test     install missing dependencies, check the style, build, run every test
#   make check    build, then only the fast tier in parallel: unit, packet, API,
#                 announcer (no BIRD), simulator, xlbd CLI and contrib tests (no lab,
#                 no network namespaces; root for the packet tests)
#   make format-check   clang-format over every C, C++ and BPF source (no changes)
#   make format   rewrite the sources in the style
#   make bench    build and run the benchmarks (JSON in build/bench/)
#   make demo     install, build and show the balancer at work
#   make install  install binaries, unit and example config (PREFIX=/usr/local)
#   make deb      Debian packages xlb and xlb-decap in build/deb/ (docs/packaging.md)
#   make clean    remove build/
#
# V=1 shows the commands.

BUILD_DIR ?= build
BUILD_TYPE ?= RelWithDebInfo
JOBS ?= $(shell nproc)
PREFIX ?= /usr/local
CTEST_ARGS ?=
# make deb: where the packages go; DEB_REUSE_BUILD=DIR packages the binaries
# of that built tree instead of compiling them with the Debian flags.
DEB_DIR ?= $(BUILD_DIR)/deb
DEB_REUSE_BUILD ?=

ifeq ($(V),1)
  CMAKE_VERBOSE := --verbose
endif

.DELETE_ON_ERROR:
.PHONY: all build deps configure test check bench demo install deb clean help format format-check

all: build

help:
	@sed -n 's/^#   //p' $(firstword $(MAKEFILE_LIST))

deps:
	@./scripts/install-deps.sh

$(BUILD_DIR)/CMakeCache.txt:
	@cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) >/dev/null

configure: $(BUILD_DIR)/CMakeCache.txt

build: configure
	@cmake --build $(BUILD_DIR) -j $(JOBS) $(CMAKE_VERBOSE)

format-check:
	@./scripts/format.sh check

format:
	@./scripts/format.sh fix

test: deps
	@$(MAKE) --no-print-directory format-check
	@$(MAKE) --no-print-directory build
	@./scripts/ensure-bpffs.sh
	@cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS) --resource-spec-file $(CURDIR)/tests/ctest-resources.json $(CTEST_ARGS)

# The fast tier: what needs neither a lab nor BIRD, run JOBS at a time.
CHECK_LABELS := ^(unit|bpf|api|announce|sim|xlbd|contrib)$$
check: build
	@./scripts/ensure-bpffs.sh
	@cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS) --resource-spec-file $(CURDIR)/tests/ctest-resources.json -L '$(CHECK_LABELS)' -LE '^bird$$' $(CTEST_ARGS)

bench: deps
	@$(MAKE) --no-print-directory build
	@mkdir -p $(BUILD_DIR)/bench
	@$(BUILD_DIR)/tools/bench/maglev/xlb-bench-maglev \
	    --benchmark_out=$(BUILD_DIR)/bench/maglev.json --benchmark_out_format=json
	@$(BUILD_DIR)/tools/bench/xdp/xlb-bench-xdp --out $(BUILD_DIR)/bench/xdp.json
	@$(BUILD_DIR)/tools/bench/publish/xlb-bench-publish --out $(BUILD_DIR)/bench/publish.json
	@$(BUILD_DIR)/tools/bench/health/xlb-bench-health --out $(BUILD_DIR)/bench/health.json
	@$(BUILD_DIR)/tools/bench/conntrack/xlb-bench-conntrack --out $(BUILD_DIR)/bench/conntrack.json
	@$(BUILD_DIR)/tools/bench/fleet/xlb-bench-fleet --out $(BUILD_DIR)/bench/fleet.json

demo: deps
	@$(MAKE) --no-print-directory build
	@./scripts/ensure-bpffs.sh
	@./scripts/demo.sh $(BUILD_DIR)

install: build
	@cmake --install $(BUILD_DIR) --prefix $(PREFIX)

deb: deps
	@JOBS=$(JOBS) ./scripts/build-deb.sh $(DEB_DIR) $(DEB_REUSE_BUILD)

clean:
	@rm -rf $(BUILD_DIR)
