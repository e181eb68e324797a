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
  # the fleet's store: real etcd members for the fleet tests and the lab
  # (tests/support/etcd_members.h), their certificates (scripts/fleet-certs.sh);
  # libssl-dev for the etcd client's TLS error texts and the https health
  # checks (TLS on the probe engine's loop); openssl also makes the https
  # probe tests' certificates
  etcd-server etcd-client openssl libssl-dev
  # QUIC: the lab's and the tests' QUIC echo server and client (tools/quic) on
  # ngtcp2 0.12 with its GnuTLS crypto backend (no HTTP/3); ngtcp2-client is
  # the upstream example client, to cross-check our server by hand
  libngtcp2-dev libngtcp2-crypto-gnutls-dev libgnutls28-dev ngtcp2-client
)

# etcd-server enables the distribution's etcd (etcd.service, or its SysV
# script where systemd does not run) and starts it unless policy-rc.d
# forbids it. The tests and the lab run their own members, on their own ports
# and data directories; a store nobody asked for must neither keep running
# nor come back at boot. Checked on every run, silent when there is nothing
# to do.
quiet_distribution_etcd() {
  [ -e /lib/systemd/system/etcd.service ] || [ -e /etc/init.d/etcd ] || return 0
  local systemd= enabled= running=
  if command -v systemctl >/dev/null && [ -d /run/systemd/system ]; then systemd=1; fi
  if [ -n "$systemd" ]; then
    systemctl -q is-enabled etcd.service 2>/dev/null && enabled=1
    systemctl -q is-active etcd.service 2>/dev/null && running=1
  else
    # The SysV start links, and the daemon its script runs as user etcd.
    compgen -G '/etc/rc[2-5].d/S[0-9][0-9]etcd' >/dev/null && enabled=1
    pgrep -u etcd -x etcd >/dev/null 2>&1 && running=1
  fi
  [ -n "$enabled$running" ] || return 0
  if [ "$(id -u)" -ne 0 ]; then
    echo "install-deps: the distribution's etcd is enabled or running; as root: systemctl disable --now etcd" >&2
    return 0
  fi
  if [ -n "$systemd" ]; then
    systemctl disable --now etcd.service >/dev/null 2>&1 || true
  else
    if [ -n "$enabled" ]; then
      if command -v systemctl >/dev/null; then
        systemctl disable etcd.service >/dev/null 2>&1 || true  # its links and the SysV ones
      fi
      update-rc.d etcd disable >/dev/null 2>&1 || true
    fi
    if [ -n "$running" ]; then
      /etc/init.d/etcd stop >/dev/null 2>&1 ||
        kill $(pgrep -u etcd -x etcd) 2>/dev/null || true
    fi
  fi
  echo "install-deps: the distribution's etcd is now stopped and off at boot (tests run their own members)"
}

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  quiet_distribution_etcd
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
quiet_distribution_etcd
echo "install-deps: done"
