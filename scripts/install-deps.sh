#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Installs every Debian package xlb needs to build, test, benchmark and run the
# demo. Idempotent: packages already present are left alone, and apt is only
# consulted when something is missing.
set -euo pipefail

packages=(
  # toolchain
  build-essential cmake pkg-config clang llvm g++
  # style: make format-check (run by make test) and make format
  clang-format
  # BPF: libbpf, libxdp, bpftool (skeletons), kernel UAPI headers
  libbpf-dev libxdp-dev bpftool linux-libc-dev libelf-dev zlib1g-dev gcc-multilib
  # C++ libraries
  libgtest-dev libgmock-dev googletest libbenchmark-dev
  libyaml-cpp-dev nlohmann-json3-dev libcpp-httplib-dev libspdlog-dev libfmt-dev
  libasio-dev libsystemd-dev libcli11-dev
  # lab and tests
  iproute2 ethtool iputils-ping procps curl python3 util-linux
  # BGP: the BIRD 2 daemon xlbd drives to announce VIPs (and the lab's routers)
  bird2
  # packet capture: libpcap writes xlbctl capture's files; tcpdump reads them in tests
  libpcap-dev tcpdump
  # promtool: checks and unit-tests contrib/prometheus's alerting rules
  prometheus
  # make deb and its tests (label package): dpkg-buildpackage, dh and its
  # cmake build system, lintian; dpkg-deb, dpkg --root and groupadd/groupdel
  # --prefix for the throwaway root; systemd-analyze verify for the units
  dpkg-dev debhelper lintian passwd systemd
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps: missing packages: ${missing[*]}" >&2
  echo "install-deps: run as root (or: sudo $0)" >&2
  exit 1
fi

echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# Only promtool is wanted from the prometheus package: its server must not be
# started by the install (policy-rc.d 101 = "do not start services") nor
# enabled for the next boot.
policy=/usr/sbin/policy-rc.d
own_policy=
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\nexit 101\n' > "$policy"
  chmod 755 "$policy"
  own_policy=1
fi
status=0
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null || status=$?
if [ -n "$own_policy" ]; then rm -f "$policy"; fi
[ "$status" -eq 0 ] || exit "$status"
if [[ " ${missing[*]} " == *" prometheus "* ]] && command -v systemctl >/dev/null &&
   [ -d /run/systemd/system ]; then
  systemctl disable --now prometheus.service >/dev/null 2>&1 || true
fi
echo "install-deps: done"
