#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The one style check: clang-format over every C, C++ and BPF source git
# tracks (userspace, tools and tests by .clang-format; bpf/ and include/, which
# BPF programs include, by bpf/.clang-format: the kernel's style).
#
#   scripts/format.sh check   list the files that differ and exit 1 (make format-check)
#   scripts/format.sh fix     rewrite them in place (make format)
set -euo pipefail
cd "$(dirname "$0")/.."

mode="${1:-check}"
clang_format="$(command -v clang-format-14 || command -v clang-format || true)"
[ -n "${clang_format}" ] || {
  echo "format: clang-format is missing (scripts/install-deps.sh installs it)" >&2
  exit 2
}
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  mapfile -t sources < <(git ls-files '*.c' '*.h' '*.cpp' '*.hpp')
else
  mapfile -t sources < <(find bpf include userspace tools tests -name '*.c' -o -name '*.h' -o -name '*.cpp' -o -name '*.hpp')
fi

case "${mode}" in
  fix)
    "${clang_format}" -i "${sources[@]}"
    echo "format: ${#sources[@]} files formatted"
    ;;
  check)
    bad=()
    for f in "${sources[@]}"; do
      "${clang_format}" --dry-run --Werror "$f" >/dev/null 2>&1 || bad+=("$f")
    done
    if [ ${#bad[@]} -gt 0 ]; then
      echo "format: ${#bad[@]} of ${#sources[@]} files differ from the style (.clang-format):" >&2
      printf '  %s\n' "${bad[@]}" >&2
      echo "format: 'make format' rewrites them; '${clang_format} --dry-run FILE' shows where" >&2
      exit 1
    fi
    echo "format: ${#sources[@]} files follow the style"
    ;;
  *)
    echo "usage: $0 check|fix" >&2
    exit 2
    ;;
esac
