#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds the Debian packages xlb and xlb-decap (make deb; docs/packaging.md).
#
#   scripts/build-deb.sh OUT_DIR [BUILD_DIR]
#
# Copies the tree as a clean checkout has it (git's tracked files plus new
# files not ignored; without git, everything but build directories) to
# OUT_DIR/src/xlb-VERSION, runs dpkg-buildpackage there (binary packages,
# unsigned) and moves the .deb, .ddeb, .buildinfo and .changes files to
# OUT_DIR. The worktree is never written to (dpkg-buildpackage puts its
# results in the parent of the source directory, debhelper writes under
# debian/).
#
# BUILD_DIR (optional): a configured and built tree whose binaries are
# packaged (debian/rules' XLB_BUILD_DIR): nothing is compiled again. Without
# it, debian/rules configures its own tree with the Debian build flags
# (hardening) and builds the shipped programs only.
#
# JOBS (environment): parallel compile jobs (default: nproc).
set -euo pipefail

if [ $# -lt 1 ] || [ $# -gt 2 ]; then
  echo "usage: $0 OUT_DIR [BUILD_DIR]" >&2
  exit 2
fi
top=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$1"
out=$(cd "$1" && pwd)
build_dir=
if [ $# -eq 2 ]; then
  build_dir=$(cd "$2" && pwd)
  if [ ! -f "$build_dir/CMakeCache.txt" ]; then
    echo "build-deb: $build_dir is not a configured build directory (no CMakeCache.txt)" >&2
    exit 1
  fi
fi
version=$(sed -n 's/^project(xlb VERSION \([0-9.]*\).*/\1/p' "$top/CMakeLists.txt")
if [ -z "$version" ]; then
  echo "build-deb: no project(xlb VERSION ...) in $top/CMakeLists.txt" >&2
  exit 1
fi
for tool in dpkg-buildpackage dh; do
  if ! command -v "$tool" >/dev/null; then
    echo "build-deb: $tool not found (scripts/install-deps.sh installs dpkg-dev and debhelper)" >&2
    exit 1
  fi
done

# The copy is made afresh each time, except obj-deb (debian/rules' own
# build tree), kept so that a second make deb compiles only what changed
# (tar keeps the files' times).
src="$out/src/xlb-$version"
if [ -d "$src" ]; then
  find "$out/src" -mindepth 1 -maxdepth 1 ! -name "xlb-$version" -exec rm -rf {} +
  find "$src" -mindepth 1 -maxdepth 1 ! -name obj-deb -exec rm -rf {} +
fi
mkdir -p "$src"
if git -C "$top" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  # tracked files, and new ones that are not ignored; not the deleted ones
  (cd "$top" && git ls-files -z --cached --others --exclude-standard |
    while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done |
    tar --null -T - -cf -) | tar -C "$src" -xf -
else
  (cd "$top" && tar --exclude='./build*' --exclude='./obj-*' -cf - .) | tar -C "$src" -xf -
fi
rm -f "$out"/xlb*_"$version"_*.deb "$out"/xlb*_"$version"_*.ddeb \
  "$out"/xlb_"$version"_*.buildinfo "$out"/xlb_"$version"_*.changes

jobs=${JOBS:-$(nproc)}
echo "build-deb: xlb $version in $src${build_dir:+ (binaries of $build_dir)}"
(
  cd "$src"
  export XLB_BUILD_DIR="$build_dir"
  export DEB_BUILD_OPTIONS="parallel=$jobs ${DEB_BUILD_OPTIONS:-}"
  # --no-pre-clean: the copy is clean, and obj-deb is to be kept
  dpkg-buildpackage --build=binary --no-sign --no-pre-clean
) >"$out/build.log" 2>&1 || {
  status=$?
  tail -n 40 "$out/build.log" >&2
  echo "build-deb: dpkg-buildpackage failed ($status); the whole log: $out/build.log" >&2
  exit "$status"
}
mv "$out"/src/xlb*_"$version"_*.deb "$out"/src/*.buildinfo "$out"/src/*.changes "$out"/
mv "$out"/src/xlb*_"$version"_*.ddeb "$out"/ 2>/dev/null || true
ls -1 "$out"/*.deb
