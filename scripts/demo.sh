#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Shows the balancer at work: runs xlb-demo, which loads the real XDP program
# and drives it through BPF_PROG_TEST_RUN (no interface is touched).
#
#   ./scripts/demo.sh [BUILD_DIR] [xlb-demo options...]   (BUILD_DIR defaults to build)
#
# `make demo` installs the dependencies, builds and calls this script.
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="${1:-build}"
shift || true

if [ "$(id -u)" -ne 0 ]; then
  echo "demo: must run as root: the demo loads BPF programs into the kernel." >&2
  echo "      run: sudo make demo   (or: sudo ./scripts/demo.sh ${build_dir})" >&2
  exit 1
fi

# A relative build directory is taken from the current directory, else from
# the repository root.
if [ ! -d "${build_dir}" ] && [ -d "${repo_root}/${build_dir}" ]; then
  build_dir="${repo_root}/${build_dir}"
fi
demo="${build_dir}/tools/demo/xlb-demo"
if [ ! -x "${demo}" ]; then
  echo "demo: ${demo} not found; build it first: make (or make demo)" >&2
  exit 1
fi

exec "${demo}" "$@"
